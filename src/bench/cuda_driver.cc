#include "src/bench/cuda_driver.h"

#include <dlfcn.h>

#include "absl/strings/str_cat.h"

namespace gpunode::bench {

StatusOr<std::unique_ptr<CudaDriver>> CudaDriver::Open(const std::string& path) {
  dlerror();
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = dlerror();
    return absl::NotFoundError(absl::StrCat("load ", path, ": ", err ? err : "dlopen failed",
                                            " (bench needs the NVIDIA driver's libcuda.so.1)"));
  }
  std::unique_ptr<CudaDriver> drv(new CudaDriver());
  drv->path_ = path;
  std::string missing;
#define GPUNODE_BENCH_CUDA_RESOLVE(ret, name, params)                         \
  drv->fn_.name = reinterpret_cast<decltype(drv->fn_.name)>(dlsym(handle, #name)); \
  if (drv->fn_.name == nullptr && missing.empty()) missing = #name;
  GPUNODE_BENCH_CUDA_FUNCTIONS(GPUNODE_BENCH_CUDA_RESOLVE)
#undef GPUNODE_BENCH_CUDA_RESOLVE
#define GPUNODE_BENCH_CUDA_RESOLVE_OPTIONAL(ret, name, params) \
  drv->fn_.name = reinterpret_cast<decltype(drv->fn_.name)>(dlsym(handle, #name));
  GPUNODE_BENCH_CUDA_OPTIONAL_FUNCTIONS(GPUNODE_BENCH_CUDA_RESOLVE_OPTIONAL)
#undef GPUNODE_BENCH_CUDA_RESOLVE_OPTIONAL
  // CUDA 12.8+ exports cuEventElapsedTime_v2 (same signature); prefer it.
  if (void* v2 = dlsym(handle, "cuEventElapsedTime_v2")) {
    drv->fn_.cuEventElapsedTime = reinterpret_cast<decltype(drv->fn_.cuEventElapsedTime)>(v2);
    if (missing == "cuEventElapsedTime") missing.clear();
  }
  if (!missing.empty()) {
    return absl::UnimplementedError(absl::StrCat(
        "load ", path, ": symbol ", missing,
        " is missing; this is not a full CUDA driver library (a simulated node cannot run bench)"));
  }
  GPUNODE_RETURN_IF_ERROR(drv->Check(drv->fn_.cuInit(0), "cuInit"));
  GPUNODE_RETURN_IF_ERROR(drv->Check(drv->fn_.cuDriverGetVersion(&drv->version_), "cuDriverGetVersion"));
  return drv;
}

Status CudaDriver::Check(CUresult r, absl::string_view op) const {
  if (r == GPUNODE_CUDA_SUCCESS) return absl::OkStatus();
  const char* name = nullptr;
  const char* text = nullptr;
  if (fn_.cuGetErrorName) fn_.cuGetErrorName(r, &name);
  if (fn_.cuGetErrorString) fn_.cuGetErrorString(r, &text);
  std::string msg = absl::StrCat(op, ": ", name ? name : "CUDA_ERROR", " (", r, ")");
  if (text) absl::StrAppend(&msg, ": ", text);
  switch (r) {
    case GPUNODE_CUDA_ERROR_NO_DEVICE:
      return absl::NotFoundError(msg);
    case 2:  // CUDA_ERROR_OUT_OF_MEMORY
      return absl::ResourceExhaustedError(msg);
    case GPUNODE_CUDA_ERROR_INSUFFICIENT_DRIVER:
    case GPUNODE_CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
    case GPUNODE_CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE:
    case GPUNODE_CUDA_ERROR_NOT_INITIALIZED:
    case 218:  // CUDA_ERROR_INVALID_PTX
    case 222:  // CUDA_ERROR_UNSUPPORTED_PTX_VERSION
      return absl::FailedPreconditionError(msg);
    case 214:  // CUDA_ERROR_ECC_UNCORRECTABLE
    case 700:  // CUDA_ERROR_ILLEGAL_ADDRESS
    case 999:
      return absl::DataLossError(msg);
    default:
      return absl::UnknownError(msg);
  }
}

}  // namespace gpunode::bench
