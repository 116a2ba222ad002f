#include "src/bench/cuda_driver.h"

#include "absl/strings/str_cat.h"

namespace gpunode::bench {

StatusOr<std::unique_ptr<CudaDriver>> CudaDriver::Open(const std::string& path) {
  std::unique_ptr<CudaDriver> drv(new CudaDriver());
  if (Status s = drv->Load(path, gpu::CudaApi::kFull); !s.ok()) {
    if (absl::IsNotFound(s)) {
      return Status(s.code(), absl::StrCat(s.message(), " (bench needs the NVIDIA driver's libcuda.so.1)"));
    }
    return Status(s.code(), absl::StrCat(s.message(), "; this is not a full CUDA driver library (a "
                                                      "simulated node cannot run bench)"));
  }
  GPUNODE_RETURN_IF_ERROR(drv->Check(drv->cuInit(0), "cuInit"));
  GPUNODE_RETURN_IF_ERROR(drv->Check(drv->cuDriverGetVersion(&drv->version_), "cuDriverGetVersion"));
  return drv;
}

}  // namespace gpunode::bench
