// A minimal NVML for test/gpu/nvml_wrappers_test.cc: the required entry points only, some under
// their older fallback names (nvmlInit, nvmlDeviceGetCount), plus one optional entry under its
// fallback name (nvmlDeviceGetCurrentClocksThrottleReasons). Every other entry of GPUNODE_NVML_API
// is absent, as on an old driver. One GPU. Built twice: with GPUNODE_TEST_NVML_TOO_OLD, the
// required nvmlSystemGetDriverVersion is missing too.
#include <cstring>

#include "src/gpu/nvml_abi.h"

namespace {
int the_gpu = 0;
nvmlDevice_t Gpu() { return reinterpret_cast<nvmlDevice_t>(&the_gpu); }
}  // namespace

#define GPUNODE_TEST_EXPORT extern "C" __attribute__((visibility("default")))

GPUNODE_TEST_EXPORT nvmlReturn_t nvmlInit(void) { return NVML_SUCCESS; }
GPUNODE_TEST_EXPORT nvmlReturn_t nvmlShutdown(void) { return NVML_SUCCESS; }
GPUNODE_TEST_EXPORT const char* nvmlErrorString(nvmlReturn_t) { return "minimal NVML error"; }
#ifndef GPUNODE_TEST_NVML_TOO_OLD
GPUNODE_TEST_EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  if (version == nullptr || length < 10) return NVML_ERROR_INSUFFICIENT_SIZE;
  std::strcpy(version, "450.80.02");
  return NVML_SUCCESS;
}
#endif
GPUNODE_TEST_EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int* count) {
  *count = 1;
  return NVML_SUCCESS;
}
GPUNODE_TEST_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  if (index != 0 || device == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *device = Gpu();
  return NVML_SUCCESS;
}
GPUNODE_TEST_EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device,
                                                                           unsigned long long* reasons) {
  if (device != Gpu() || reasons == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *reasons = 0x4;  // SwPowerCap
  return NVML_SUCCESS;
}
