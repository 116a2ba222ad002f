// The libcuda driver-API calls gpunode makes (GPUNODE_CUDA_FUNCTIONS of src/gpu/nvml_abi.h),
// answered from the same node profile as the simulated NVML:
//   cuInit(0)          driver.cuda_init_error, else derived: no kernel module or no usable GPU ->
//                      CUDA_ERROR_NO_DEVICE (100), module/library mismatch -> 803, else 0;
//                      flags != 0 -> CUDA_ERROR_INVALID_VALUE (1);
//   cuDriverGetVersion driver.cuda_version as 1000*major + 10*minor ("13.0" -> 13000); needs no
//   cuInit; cuDeviceGetCount   GPUs not lost; CUDA_ERROR_NOT_INITIALIZED (3) before a successful
//   cuInit; cuGetErrorName / cuGetErrorString: CUDA's texts; unknown codes -> 1 and *pStr = NULL.
#include <mutex>

#include "sim/nvml/sim_state.h"
#include "src/base/version.h"
#include "src/gpu/nvml_abi.h"

#define GPUNODE_SIM_DECLARE(ret, name, params) \
  extern "C" __attribute__((visibility("default"))) ret name params;
GPUNODE_CUDA_FUNCTIONS(GPUNODE_SIM_DECLARE)
#undef GPUNODE_SIM_DECLARE

namespace {

constexpr CUresult kInvalidValue = 1;
constexpr CUresult kUnknown = 999;

struct CudaError {
  CUresult code;
  const char* name;
  const char* text;
};
constexpr CudaError kCudaErrors[] = {
    {0, "CUDA_SUCCESS", "no error"},
    {1, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {3, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {4, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
    {34, "CUDA_ERROR_STUB_LIBRARY", "CUDA driver is a stub library"},
    {35, "CUDA_ERROR_INSUFFICIENT_DRIVER",
     "CUDA driver version is insufficient for CUDA runtime version"},
    {46, "CUDA_ERROR_DEVICE_UNAVAILABLE", "CUDA-capable device(s) is/are busy or unavailable"},
    {100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {101, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {803, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
     "system has unsupported display driver / cuda driver combination"},
    {804, "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
     "forward compatibility was attempted on non supported HW"},
    {999, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

const CudaError* FindError(CUresult code) {
  for (const CudaError& e : kCudaErrors) {
    if (e.code == code) return &e;
  }
  return nullptr;
}

// Makes sure a profile is loaded (NVML may not be initialised). Requires the lock.
bool EnsureProfile(gpunode::sim::SimState& s) {
  if (s.nvml_refcount > 0 && s.loaded()) {
    s.MaybeReload();
    return true;
  }
  return s.Load() == NVML_SUCCESS;
}

}  // namespace

CUresult cuInit(unsigned int flags) {
  auto& s = gpunode::sim::SimState::Get();
  std::lock_guard<std::mutex> lock(s.mu);
  if (flags != 0) return kInvalidValue;
  if (!EnsureProfile(s)) return kUnknown;
  CUresult rc = s.profile().EffectiveCudaInitError();
  s.cuda_initialized = rc == GPUNODE_CUDA_SUCCESS;
  return rc;
}

CUresult cuDriverGetVersion(int* driverVersion) {
  auto& s = gpunode::sim::SimState::Get();
  std::lock_guard<std::mutex> lock(s.mu);
  if (driverVersion == nullptr) return kInvalidValue;
  // The profile of now (GPUNODE_SIM_PROFILE may name another file than when NVML last loaded it).
  if (!EnsureProfile(s)) return kUnknown;
  auto v = gpunode::Version::Parse(s.profile().driver.cuda_version);
  if (!v.ok()) return kUnknown;
  *driverVersion = static_cast<int>(v->major() * 1000 + v->minor() * 10);
  return GPUNODE_CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int* count) {
  auto& s = gpunode::sim::SimState::Get();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.cuda_initialized || !s.loaded()) return GPUNODE_CUDA_ERROR_NOT_INITIALIZED;
  if (count == nullptr) return kInvalidValue;
  s.MaybeReload();
  int n = 0;
  for (const auto& g : s.profile().gpus) n += g.lost ? 0 : 1;
  *count = n;
  return GPUNODE_CUDA_SUCCESS;
}

CUresult cuGetErrorName(CUresult error, const char** pStr) {
  if (pStr == nullptr) return kInvalidValue;
  const CudaError* e = FindError(error);
  *pStr = e ? e->name : nullptr;
  return e ? GPUNODE_CUDA_SUCCESS : kInvalidValue;
}

CUresult cuGetErrorString(CUresult error, const char** pStr) {
  if (pStr == nullptr) return kInvalidValue;
  const CudaError* e = FindError(error);
  *pStr = e ? e->text : nullptr;
  return e ? GPUNODE_CUDA_SUCCESS : kInvalidValue;
}
