// Checks our hand-written NVML ABI (src/gpu/nvml_abi.h) against NVIDIA's real nvml.h and the real
// libnvidia-ml.so.1. Built and run on the GPU machine only (it needs nvml.h):
//   g++ -std=c++20 -I. -I<dir of nvml.h> test/gpu/nvml_abi_check.cc -ldl -o nvml_abi_check
//   ./nvml_abi_check
// Compile-time: struct sizes, field offsets and enum values agree. Run time: every symbol of
// GPUNODE_NVML_FUNCTIONS resolves in the installed driver (or in a fallback name we accept).
#include <dlfcn.h>

#include <cstddef>
#include <cstdio>

namespace ours {
#include "src/gpu/nvml_abi.h"
}
#include <nvml.h>

#define SAME_SIZE(T) static_assert(sizeof(ours::T) == sizeof(::T), "size of " #T)
#define SAME_OFFSET(T, f) static_assert(offsetof(ours::T, f) == offsetof(::T, f), "offset of " #T "." #f)
#define SAME_VALUE(v) static_assert(static_cast<long long>(ours::v) == static_cast<long long>(::v), #v)

SAME_SIZE(nvmlPciInfo_t);
SAME_OFFSET(nvmlPciInfo_t, domain);
SAME_OFFSET(nvmlPciInfo_t, pciDeviceId);
SAME_OFFSET(nvmlPciInfo_t, pciSubSystemId);
SAME_OFFSET(nvmlPciInfo_t, busId);
SAME_SIZE(nvmlMemory_t);
SAME_SIZE(nvmlMemory_v2_t);
SAME_OFFSET(nvmlMemory_v2_t, reserved);
SAME_OFFSET(nvmlMemory_v2_t, used);
SAME_SIZE(nvmlUtilization_t);
SAME_SIZE(nvmlProcessInfo_t);
SAME_OFFSET(nvmlProcessInfo_t, usedGpuMemory);
SAME_OFFSET(nvmlProcessInfo_t, computeInstanceId);
SAME_SIZE(nvmlDeviceAttributes_t);
SAME_OFFSET(nvmlDeviceAttributes_t, gpuInstanceSliceCount);
SAME_OFFSET(nvmlDeviceAttributes_t, memorySizeMB);
SAME_SIZE(nvmlEventData_t);
SAME_OFFSET(nvmlEventData_t, eventData);
SAME_OFFSET(nvmlEventData_t, computeInstanceId);
SAME_VALUE(NVML_ERROR_LIB_RM_VERSION_MISMATCH);
SAME_VALUE(NVML_ERROR_GPU_IS_LOST);
SAME_VALUE(NVML_ERROR_DRIVER_NOT_LOADED);
SAME_VALUE(NVML_ERROR_NO_PERMISSION);
SAME_VALUE(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
SAME_VALUE(NVML_ERROR_INVALID_STATE);
SAME_VALUE(NVML_TOPOLOGY_NODE);
SAME_VALUE(NVML_TOPOLOGY_SYSTEM);
SAME_VALUE(NVML_CLOCK_SM);
SAME_VALUE(NVML_AGGREGATE_ECC);
static_assert(ours::nvmlEventTypeXidCriticalError == ::nvmlEventTypeXidCriticalError);
static_assert((sizeof(ours::nvmlMemory_v2_t) | (2u << 24)) == ::nvmlMemory_v2);

int main() {
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW);
  if (!lib) {
    std::printf("dlopen libnvidia-ml.so.1 failed: %s\n", dlerror());
    return 1;
  }
  int missing = 0, total = 0;
#define CHECK_SYMBOL(ret, name, params)                              \
  ++total;                                                           \
  if (!dlsym(lib, #name)) {                                          \
    std::printf("missing in the real NVML: %s\n", #name);          \
    ++missing;                                                       \
  }
  GPUNODE_NVML_FUNCTIONS(CHECK_SYMBOL)
#undef CHECK_SYMBOL
  std::printf("nvml ABI check: layouts and values match nvml.h; %d of %d symbols present\n", total - missing, total);
  return missing == 0 ? 0 : 1;
}
