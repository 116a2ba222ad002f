#include "src/gpu/cuda.h"

#include <dlfcn.h>

#include <chrono>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace gpunode::gpu {
namespace {

// The need column of GPUNODE_CUDA_API: must the entry resolve when Open is asked for `api`?
#define GPUNODE_CUDA_NEED_required(api) true
#define GPUNODE_CUDA_NEED_optional(api) false
#define GPUNODE_CUDA_NEED_full(api) ((api) == CudaApi::kFull)
#define GPUNODE_CUDA_NEED_full_optional(api) false

// `status` with `suffix` appended to its message (same code).
Status WithSuffix(const Status& status, absl::string_view suffix) {
  return Status(status.code(), absl::StrCat(status.message(), suffix));
}

}  // namespace

Status CudaResultToStatus(CUresult r, absl::string_view op, const char* name, const char* text) {
  if (r == GPUNODE_CUDA_SUCCESS) return absl::OkStatus();
  std::string msg = absl::StrCat(op, ": ", name ? name : "CUDA_ERROR", " (", r, ")");
  if (text) absl::StrAppend(&msg, ": ", text);
  switch (r) {
    case GPUNODE_CUDA_ERROR_NO_DEVICE:
      return absl::NotFoundError(msg);
    case GPUNODE_CUDA_ERROR_OUT_OF_MEMORY:
      return absl::ResourceExhaustedError(msg);
    case GPUNODE_CUDA_ERROR_NOT_INITIALIZED:
    case GPUNODE_CUDA_ERROR_INSUFFICIENT_DRIVER:
    case GPUNODE_CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
    case GPUNODE_CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE:
    case GPUNODE_CUDA_ERROR_INVALID_PTX:
    case GPUNODE_CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
      return absl::FailedPreconditionError(msg);
    case GPUNODE_CUDA_ERROR_ECC_UNCORRECTABLE:
    case GPUNODE_CUDA_ERROR_ILLEGAL_ADDRESS:
    case GPUNODE_CUDA_ERROR_UNKNOWN:
      return absl::DataLossError(msg);
    default:
      return absl::UnknownError(msg);
  }
}

StatusOr<std::unique_ptr<CudaLibrary>> CudaLibrary::Open(const std::string& path, CudaApi api) {
  std::unique_ptr<CudaLibrary> lib(new CudaLibrary());
  GPUNODE_RETURN_IF_ERROR(lib->Load(path, api));
  return lib;
}

Status CudaLibrary::Load(const std::string& path, CudaApi api) {
  path_ = path;
  dlerror();
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = dlerror();
    return absl::NotFoundError(absl::StrCat("load ", path, ": ", err ? err : "dlopen failed"));
  }
  // Bind every entry of the list, newest name first, then its fallbacks. The handle is never
  // closed.
#define GPUNODE_CUDA_RESOLVE(need, ret, name, params, fallbacks)                                    \
  {                                                                                                 \
    const char* bound = nullptr;                                                                    \
    void* sym = DlSymbol(handle, #name, {GPUNODE_ABI_NAMES(fallbacks)}, &bound);                    \
    if (sym == nullptr && GPUNODE_CUDA_NEED_##need(api)) {                                          \
      return absl::UnimplementedError(absl::StrCat("load ", path, ": symbol " #name " is missing")); \
    }                                                                                               \
    if (sym != nullptr && std::strcmp(bound, #name) != 0) fallbacks_.emplace_back(#name, bound);    \
    name.Bind(sym);                                                                                 \
  }
  GPUNODE_CUDA_API(GPUNODE_CUDA_RESOLVE)
#undef GPUNODE_CUDA_RESOLVE
  return absl::OkStatus();
}

Status CudaLibrary::Check(CUresult r, absl::string_view op) const {
  if (r == GPUNODE_CUDA_SUCCESS) return absl::OkStatus();
  const char* name = nullptr;
  const char* text = nullptr;
  cuGetErrorName(r, &name);  // both leave nullptr where the driver has no text (or no entry)
  cuGetErrorString(r, &text);
  return CudaResultToStatus(r, op, name, text);
}

CudaDriverInfo ProbeCuda(const std::string& path, bool init, double* init_ms) {
  CudaDriverInfo info;
  info.library = path;
  auto lib = CudaLibrary::Open(path, CudaApi::kCore);
  if (!lib.ok()) {
    info.status = absl::IsUnimplemented(lib.status())
                      ? WithSuffix(lib.status(), "; not a CUDA driver library")
                      : lib.status();
    return info;
  }
  const CudaLibrary& cu = **lib;
  int v = 0;
  CUresult r = cu.cuDriverGetVersion(&v);
  if (r != GPUNODE_CUDA_SUCCESS) {
    info.status = cu.Check(r, "cuDriverGetVersion");
    return info;
  }
  info.version = Version::FromCudaInt(v);
  if (!init) return info;
  auto start = std::chrono::steady_clock::now();
  r = cu.cuInit(0);
  if (init_ms) *init_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  info.init_result = r;
  if (r != GPUNODE_CUDA_SUCCESS) {
    info.status = cu.Check(r, "cuInit");
    return info;
  }
  int count = 0;
  r = cu.cuDeviceGetCount(&count);
  if (r != GPUNODE_CUDA_SUCCESS) {
    info.status = cu.Check(r, "cuDeviceGetCount");
    return info;
  }
  info.device_count = count;
  // The library stays loaded (CudaLibrary never dlclose()s): unloading libcuda after cuInit is unsafe.
  return info;
}

}  // namespace gpunode::gpu
