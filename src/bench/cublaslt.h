// cuBLASLt, dlopen'ed at run time when a libcublasLt.so can be found (images usually carry it;
// the driver alone does not). Used for the GEMM test; our own WMMA kernel is the fallback.
#ifndef GPUNODE_BENCH_CUBLASLT_H_
#define GPUNODE_BENCH_CUBLASLT_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "src/base/status.h"
#include "src/bench/bench.h"
#include "src/bench/cuda_driver.h"

namespace gpunode::bench {

// The candidates tried in order: $GPUNODE_CUBLASLT_LIBRARY when set, then libcublasLt.so.13,
// .12, .11, libcublasLt.so through the loader's search path, then the same names under
// /usr/local/cuda/lib64 and /usr/local/cuda/targets/x86_64-linux/lib.
std::vector<std::string> CublasLtCandidates();

class CublasLt {
 public:
  // Loads the first candidate that resolves every entry point we call. kNotFound lists what was
  // tried when none loads.
  static StatusOr<std::unique_ptr<CublasLt>> Open();
  ~CublasLt();
  CublasLt(const CublasLt&) = delete;
  CublasLt& operator=(const CublasLt&) = delete;

  const std::string& path() const { return path_; }
  std::string version() const;  // "13.0.2" from cublasLtGetVersion

  // D (m x n, column-major, type `out`) = A^T * B where A is stored k x m and B k x n column-major
  // ("TN": both operands k-contiguous), fp32 accumulation, on `stream` in the current context.
  // Asks the heuristic once per shape and uses its first algorithm until Choose() picks another. `workspace` of
  // `workspace_bytes` is device memory owned by the caller.
  // The algorithms the heuristic offered for the last shape (up to 8, best-ranked first) and the
  // one Matmul uses; the caller may time each and Choose the fastest (autotuning).
  int candidates() const;
  void Choose(int i);

  Status Matmul(GemmDtype in, GemmDtype out, int m, int n, int k, CUdeviceptr a, CUdeviceptr b,
                CUdeviceptr d, CUdeviceptr workspace, size_t workspace_bytes, CUstream stream);

 private:
  struct Impl;
  CublasLt() = default;
  std::unique_ptr<Impl> impl_;
  std::string path_;
};

}  // namespace gpunode::bench

#endif  // GPUNODE_BENCH_CUBLASLT_H_
