// The CUDA driver API as `gpunode bench` uses it: the one libcuda loader (src/gpu/cuda.h,
// gpu::CudaLibrary) opened for the full set of GPUNODE_CUDA_API (src/gpu/cuda_abi.h), plus cuInit and
// the driver version. The entry points are gpu::CudaLibrary's generated wrappers (drv.cuMemAlloc_v2(...));
// CUresult -> Status is gpu::CudaResultToStatus. Types (CUdevice, CUstream, CUtensorMap...) come from
// cuda_abi.h; the constants below are the attribute and option values bench passes.
#ifndef GPUNODE_BENCH_CUDA_DRIVER_H_
#define GPUNODE_BENCH_CUDA_DRIVER_H_

#include <memory>
#include <string>

#include "src/base/status.h"
#include "src/gpu/cuda.h"

namespace gpunode::bench {

inline constexpr int kCuDevAttrMultiprocessorCount = 16;
inline constexpr int kCuDevAttrComputeCapabilityMajor = 75;
inline constexpr int kCuDevAttrComputeCapabilityMinor = 76;
inline constexpr int kCuJitErrorLogBuffer = 5;
inline constexpr int kCuJitErrorLogBufferSizeBytes = 6;
inline constexpr unsigned kCuStreamNonBlocking = 1;
inline constexpr unsigned kCuMemHostAllocPortable = 1;
inline constexpr CUresult kCuErrorPeerAccessAlreadyEnabled = 704;
inline constexpr int kCuFuncAttributeMaxDynamicSharedSizeBytes = 8;

// cuTensorMapEncodeTiled arguments (cuda.h enums).
inline constexpr int kCuTensorMapDataTypeFloat16 = 6;
inline constexpr int kCuTensorMapDataTypeBfloat16 = 9;
inline constexpr int kCuTensorMapInterleaveNone = 0;
inline constexpr int kCuTensorMapSwizzle128B = 3;
inline constexpr int kCuTensorMapL2Promotion256B = 3;
inline constexpr int kCuTensorMapOobFillNone = 0;

// A loaded CUDA driver (gpu::CudaLibrary with the full API) on which cuInit(0) succeeded.
// Thread-compatible; the process keeps the library mapped (unloading libcuda after cuInit is unsafe).
class CudaDriver : public gpu::CudaLibrary {
 public:
  // dlopen()s `path`, binds every entry (cuEventElapsedTime_v2 falls back to cuEventElapsedTime;
  // the optional ones, e.g. cuTensorMapEncodeTiled, may be absent: check .bound()) and runs cuInit(0).
  // Errors: library missing -> kNotFound "load <path>: <dlerror>"; an entry missing -> kUnimplemented
  // naming it (e.g. the simulated library, which has only the calls doctor makes); cuInit failing
  // -> its mapped code.
  static StatusOr<std::unique_ptr<CudaDriver>> Open(const std::string& path);

  int version() const { return version_; }  // cuDriverGetVersion, e.g. 13000

 private:
  CudaDriver() = default;
  int version_ = 0;
};

}  // namespace gpunode::bench

// `GPUNODE_CU(driver, name, args...)` -> returns the mapped Status from the enclosing function when
// the call fails; the entry point's name names the operation.
#define GPUNODE_CU(drv, name, ...) \
  GPUNODE_RETURN_IF_ERROR((drv).Check((drv).name(__VA_ARGS__), #name))

#endif  // GPUNODE_BENCH_CUDA_DRIVER_H_
