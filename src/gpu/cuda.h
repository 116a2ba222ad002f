// The libcuda loader: dlopen("libcuda.so.1") at run time for cuDriverGetVersion, cuInit and
// cuDeviceGetCount — the view of the GPU stack a CUDA application gets.
#ifndef GPUNODE_GPU_CUDA_H_
#define GPUNODE_GPU_CUDA_H_

#include <string>

#include <optional>

#include "src/base/status.h"
#include "src/base/version.h"

namespace gpunode {

struct CudaDriverInfo {
  bool probed = true;               // false: the command did not load libcuda (ProbeOptions.load_cuda)
  Status status;                    // load, cuInit or cuDeviceGetCount failure
  std::string library;              // what was dlopen'ed
  std::optional<Version> version;   // cuDriverGetVersion
  std::optional<int> device_count;  // cuDeviceGetCount after cuInit
  int init_result = 0;              // raw CUresult of cuInit
};

// Loads `path`, reads the driver's CUDA version and, when `init` is set, runs cuInit(0) and
// counts devices. Never fails as a whole: problems land in the result's `status`, with the
// CUresult name ("cuInit: CUDA_ERROR_NO_DEVICE (100): no CUDA-capable device is detected").
CudaDriverInfo ProbeCuda(const std::string& path, bool init, double* init_ms);

}  // namespace gpunode

#endif  // GPUNODE_GPU_CUDA_H_
