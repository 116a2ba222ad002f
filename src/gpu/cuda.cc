#include "src/gpu/cuda.h"

#include <dlfcn.h>

#include <chrono>

#include "absl/strings/str_cat.h"
#include "src/gpu/nvml_abi.h"

namespace gpunode {
namespace {

struct CudaFunctions {
#define GPUNODE_CUDA_FN_PTR(ret, name, params) ret(*name) params = nullptr;
  GPUNODE_CUDA_FUNCTIONS(GPUNODE_CUDA_FN_PTR)
#undef GPUNODE_CUDA_FN_PTR
};

Status CudaError(const CudaFunctions& f, CUresult r, absl::string_view op) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (f.cuGetErrorName) f.cuGetErrorName(r, &name);
  if (f.cuGetErrorString) f.cuGetErrorString(r, &text);
  std::string msg = absl::StrCat(op, ": ", name ? name : "CUDA_ERROR", " (", r, ")");
  if (text) absl::StrAppend(&msg, ": ", text);
  switch (r) {
    case GPUNODE_CUDA_ERROR_NO_DEVICE:
      return absl::NotFoundError(msg);
    case GPUNODE_CUDA_ERROR_INSUFFICIENT_DRIVER:
    case GPUNODE_CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
    case GPUNODE_CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE:
    case GPUNODE_CUDA_ERROR_NOT_INITIALIZED:
      return absl::FailedPreconditionError(msg);
    default:
      return absl::UnknownError(msg);
  }
}

}  // namespace

CudaDriverInfo ProbeCuda(const std::string& path, bool init, double* init_ms) {
  CudaDriverInfo info;
  info.library = path;
  dlerror();
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = dlerror();
    info.status = absl::NotFoundError(absl::StrCat("load ", path, ": ", err ? err : "dlopen failed"));
    return info;
  }
  CudaFunctions f;
#define GPUNODE_CUDA_RESOLVE(ret, name, params) \
  f.name = reinterpret_cast<decltype(f.name)>(dlsym(handle, #name));
  GPUNODE_CUDA_FUNCTIONS(GPUNODE_CUDA_RESOLVE)
#undef GPUNODE_CUDA_RESOLVE
  if (f.cuDriverGetVersion == nullptr || f.cuInit == nullptr || f.cuDeviceGetCount == nullptr) {
    info.status = absl::UnimplementedError(absl::StrCat("load ", path, ": not a CUDA driver library"));
    return info;
  }
  int v = 0;
  CUresult r = f.cuDriverGetVersion(&v);
  if (r != GPUNODE_CUDA_SUCCESS) {
    info.status = CudaError(f, r, "cuDriverGetVersion");
    return info;
  }
  info.version = Version::FromCudaInt(v);
  if (!init) return info;
  auto start = std::chrono::steady_clock::now();
  r = f.cuInit(0);
  if (init_ms) *init_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  info.init_result = r;
  if (r != GPUNODE_CUDA_SUCCESS) {
    info.status = CudaError(f, r, "cuInit");
    return info;
  }
  int count = 0;
  r = f.cuDeviceGetCount(&count);
  if (r != GPUNODE_CUDA_SUCCESS) {
    info.status = CudaError(f, r, "cuDeviceGetCount");
    return info;
  }
  info.device_count = count;
  // The library stays loaded: unloading libcuda after cuInit is unsafe.
  return info;
}

}  // namespace gpunode
