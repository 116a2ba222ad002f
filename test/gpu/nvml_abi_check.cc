// Checks our hand-written NVML ABI (src/gpu/nvml_abi.h) against NVIDIA's real nvml.h and the real
// libnvidia-ml.so.1 (or the library named as its argument). Built where nvml.h is found:
//   - in the build, target `nvml_abi_check` and ctest `nvml_abi_check` (against the simulated NVML),
//     when CMake finds nvml.h (a CUDA toolkit, or GPUNODE_NVML_INCLUDE_DIR: scripts/test.sh fetches
//     NVIDIA's header from PyPI with scripts/fetch-nvml-header.sh);
//   - on the GPU machine, by scripts/nvml-abi-check.sh, against the real driver.
// Compile-time: struct sizes, field offsets and enum values agree. Run time: every symbol of
// GPUNODE_NVML_API resolves in the installed driver (or in a fallback name we accept).
#include <dlfcn.h>

#include <cstddef>
#include <cstdio>

namespace ours {
#include "src/gpu/nvml_abi.h"
}
// Our values of macros that nvml.h also defines, captured before they are #undef'd below.
constexpr long long kOurFiMemoryTemp = NVML_FI_DEV_MEMORY_TEMP;
constexpr long long kOurFiTotalEnergy = NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION;
constexpr long long kOurFiNvlinkTx = NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX;
constexpr long long kOurFiNvlinkRx = NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX;
constexpr long long kOurGpmMetricsGetVersion = NVML_GPM_METRICS_GET_VERSION;
constexpr long long kOurGpmSupportVersion = NVML_GPM_SUPPORT_VERSION;
// MIG constants (our values, compared with nvml.h's below).
constexpr long long kOurMig_NVML_GPU_INSTANCE_PROFILE_1_SLICE = NVML_GPU_INSTANCE_PROFILE_1_SLICE;
constexpr long long kOurMig_NVML_GPU_INSTANCE_PROFILE_2_SLICE = NVML_GPU_INSTANCE_PROFILE_2_SLICE;
constexpr long long kOurMig_NVML_GPU_INSTANCE_PROFILE_3_SLICE = NVML_GPU_INSTANCE_PROFILE_3_SLICE;
constexpr long long kOurMig_NVML_GPU_INSTANCE_PROFILE_4_SLICE = NVML_GPU_INSTANCE_PROFILE_4_SLICE;
constexpr long long kOurMig_NVML_GPU_INSTANCE_PROFILE_7_SLICE = NVML_GPU_INSTANCE_PROFILE_7_SLICE;
constexpr long long kOurMig_NVML_GPU_INSTANCE_PROFILE_8_SLICE = NVML_GPU_INSTANCE_PROFILE_8_SLICE;
constexpr long long kOurMig_NVML_GPU_INSTANCE_PROFILE_6_SLICE = NVML_GPU_INSTANCE_PROFILE_6_SLICE;
constexpr long long kOurMig_NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1 = NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1;
constexpr long long kOurMig_NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1 = NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1;
constexpr long long kOurMig_NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2 = NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2;
constexpr long long kOurMig_NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE = NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE;
constexpr long long kOurMig_NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE = NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE;
constexpr long long kOurMig_NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE = NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE;
constexpr long long kOurMig_NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE = NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE;
constexpr long long kOurMig_NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE = NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE;
constexpr long long kOurMig_NVML_COMPUTE_INSTANCE_PROFILE_8_SLICE = NVML_COMPUTE_INSTANCE_PROFILE_8_SLICE;
constexpr long long kOurMig_NVML_COMPUTE_INSTANCE_PROFILE_6_SLICE = NVML_COMPUTE_INSTANCE_PROFILE_6_SLICE;
constexpr long long kOurMig_NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE_REV1 = NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE_REV1;
constexpr long long kOurMig_NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED = NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED;
constexpr long long kOurMig_nvmlGpuInstanceProfileInfo_v2 =  // our macro names the type outside ours::
    static_cast<unsigned>(sizeof(ours::nvmlGpuInstanceProfileInfo_v2_t)) | (2u << 24);
constexpr long long kOurMig_nvmlComputeInstanceProfileInfo_v2 =  // our macro names the type outside ours::
    static_cast<unsigned>(sizeof(ours::nvmlComputeInstanceProfileInfo_v2_t)) | (2u << 24);
constexpr long long kOurAddressingModeV1 =  // our macro names the type outside ours::
    static_cast<unsigned>(sizeof(ours::nvmlDeviceAddressingMode_v1_t)) | (1u << 24);
// Our macros of the same names as nvml.h's: let the real ones stand.
#undef NVML_GPU_INSTANCE_PROFILE_1_SLICE
#undef NVML_GPU_INSTANCE_PROFILE_2_SLICE
#undef NVML_GPU_INSTANCE_PROFILE_3_SLICE
#undef NVML_GPU_INSTANCE_PROFILE_4_SLICE
#undef NVML_GPU_INSTANCE_PROFILE_7_SLICE
#undef NVML_GPU_INSTANCE_PROFILE_8_SLICE
#undef NVML_GPU_INSTANCE_PROFILE_6_SLICE
#undef NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1
#undef NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1
#undef NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2
#undef NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE
#undef NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE
#undef NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE
#undef NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE
#undef NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE
#undef NVML_COMPUTE_INSTANCE_PROFILE_8_SLICE
#undef NVML_COMPUTE_INSTANCE_PROFILE_6_SLICE
#undef NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE_REV1
#undef NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED
#undef nvmlGpuInstanceProfileInfo_v2
#undef nvmlComputeInstanceProfileInfo_v2
#undef NVML_FI_DEV_MEMORY_TEMP
#undef NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION
#undef NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX
#undef NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX
#undef NVML_GPM_METRICS_GET_VERSION
#undef NVML_GPM_SUPPORT_VERSION
#undef NVML_STRUCT_VERSION
#undef nvmlMemory_v2
#undef nvmlDeviceAddressingMode_v1
#undef NVML_DEVICE_MIG_DISABLE
#undef NVML_DEVICE_MIG_ENABLE
#undef nvmlEventTypeSingleBitEccError
#undef nvmlEventTypeDoubleBitEccError
#undef nvmlEventTypePState
#undef nvmlEventTypeXidCriticalError
#undef nvmlEventTypeClock
#undef NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE
#undef NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE
#undef NVML_DEVICE_NAME_V2_BUFFER_SIZE
#undef NVML_DEVICE_UUID_V2_BUFFER_SIZE
#undef NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE
#undef NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE
#undef NVML_DEVICE_VBIOS_VERSION_BUFFER_SIZE
#undef NVML_NVLINK_MAX_LINKS
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
SAME_SIZE(nvmlDeviceArchitecture_t);
SAME_SIZE(nvmlBrandType_t);
SAME_VALUE(NVML_BRAND_TESLA);
SAME_VALUE(NVML_BRAND_NVIDIA);
SAME_VALUE(NVML_BRAND_TITAN_RTX);
SAME_SIZE(nvmlDeviceAddressingMode_t);
SAME_OFFSET(nvmlDeviceAddressingMode_t, value);
SAME_VALUE(NVML_DEVICE_ADDRESSING_MODE_HMM);
SAME_VALUE(NVML_DEVICE_ADDRESSING_MODE_ATS);
static_assert(kOurAddressingModeV1 == nvmlDeviceAddressingMode_v1);
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
// Field values and GPM (nvml_extras, the simulator).
SAME_SIZE(nvmlValue_t);
SAME_SIZE(nvmlFieldValue_t);
SAME_OFFSET(nvmlFieldValue_t, scopeId);
SAME_OFFSET(nvmlFieldValue_t, timestamp);
SAME_OFFSET(nvmlFieldValue_t, latencyUsec);
SAME_OFFSET(nvmlFieldValue_t, valueType);
SAME_OFFSET(nvmlFieldValue_t, nvmlReturn);
SAME_OFFSET(nvmlFieldValue_t, value);
SAME_VALUE(NVML_VALUE_TYPE_DOUBLE);
SAME_VALUE(NVML_VALUE_TYPE_UNSIGNED_INT);
SAME_VALUE(NVML_VALUE_TYPE_UNSIGNED_LONG);
SAME_VALUE(NVML_VALUE_TYPE_UNSIGNED_LONG_LONG);
SAME_VALUE(NVML_VALUE_TYPE_SIGNED_LONG_LONG);
SAME_VALUE(NVML_VALUE_TYPE_SIGNED_INT);
SAME_VALUE(NVML_VALUE_TYPE_UNSIGNED_SHORT);
SAME_VALUE(NVML_VALUE_TYPE_COUNT);
static_assert(kOurFiMemoryTemp == NVML_FI_DEV_MEMORY_TEMP);
static_assert(kOurFiTotalEnergy == NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION);
static_assert(kOurFiNvlinkTx == NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX);
static_assert(kOurFiNvlinkRx == NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX);
static_assert(kOurGpmMetricsGetVersion == NVML_GPM_METRICS_GET_VERSION);
static_assert(kOurGpmSupportVersion == NVML_GPM_SUPPORT_VERSION);
SAME_SIZE(nvmlGpmSample_t);
SAME_SIZE(nvmlGpmSupport_t);
SAME_OFFSET(nvmlGpmSupport_t, isSupportedDevice);
SAME_SIZE(nvmlGpmMetric_t);
SAME_OFFSET(nvmlGpmMetric_t, nvmlReturn);
SAME_OFFSET(nvmlGpmMetric_t, value);
SAME_OFFSET(nvmlGpmMetric_t, metricInfo);
static_assert(sizeof(ours::nvmlGpmMetric_t::metricInfo) == sizeof(::nvmlGpmMetric_t::metricInfo));
SAME_SIZE(nvmlGpmMetricsGet_t);
SAME_OFFSET(nvmlGpmMetricsGet_t, numMetrics);
SAME_OFFSET(nvmlGpmMetricsGet_t, sample1);
SAME_OFFSET(nvmlGpmMetricsGet_t, sample2);
SAME_OFFSET(nvmlGpmMetricsGet_t, metrics);
SAME_VALUE(NVML_GPM_METRIC_MAX);
SAME_VALUE(NVML_GPM_METRIC_GRAPHICS_UTIL);
SAME_VALUE(NVML_GPM_METRIC_SM_UTIL);
SAME_VALUE(NVML_GPM_METRIC_SM_OCCUPANCY);
SAME_VALUE(NVML_GPM_METRIC_INTEGER_UTIL);
SAME_VALUE(NVML_GPM_METRIC_ANY_TENSOR_UTIL);
SAME_VALUE(NVML_GPM_METRIC_DFMA_TENSOR_UTIL);
SAME_VALUE(NVML_GPM_METRIC_HMMA_TENSOR_UTIL);
SAME_VALUE(NVML_GPM_METRIC_IMMA_TENSOR_UTIL);
SAME_VALUE(NVML_GPM_METRIC_DRAM_BW_UTIL);
SAME_VALUE(NVML_GPM_METRIC_FP64_UTIL);
SAME_VALUE(NVML_GPM_METRIC_FP32_UTIL);
SAME_VALUE(NVML_GPM_METRIC_FP16_UTIL);
SAME_VALUE(NVML_GPM_METRIC_PCIE_TX_PER_SEC);
SAME_VALUE(NVML_GPM_METRIC_PCIE_RX_PER_SEC);
// MIG (src/mig, sim/nvml/mig.cc).
SAME_SIZE(nvmlGpuInstancePlacement_t);
SAME_OFFSET(nvmlGpuInstancePlacement_t, size);
SAME_SIZE(nvmlGpuInstanceProfileInfo_t);
SAME_OFFSET(nvmlGpuInstanceProfileInfo_t, sliceCount);
SAME_OFFSET(nvmlGpuInstanceProfileInfo_t, instanceCount);
SAME_OFFSET(nvmlGpuInstanceProfileInfo_t, ofaCount);
SAME_OFFSET(nvmlGpuInstanceProfileInfo_t, memorySizeMB);
SAME_SIZE(nvmlGpuInstanceProfileInfo_v2_t);
SAME_OFFSET(nvmlGpuInstanceProfileInfo_v2_t, id);
SAME_OFFSET(nvmlGpuInstanceProfileInfo_v2_t, memorySizeMB);
SAME_OFFSET(nvmlGpuInstanceProfileInfo_v2_t, name);
SAME_SIZE(nvmlGpuInstanceInfo_t);
SAME_OFFSET(nvmlGpuInstanceInfo_t, id);
SAME_OFFSET(nvmlGpuInstanceInfo_t, profileId);
SAME_OFFSET(nvmlGpuInstanceInfo_t, placement);
SAME_SIZE(nvmlComputeInstancePlacement_t);
SAME_SIZE(nvmlComputeInstanceProfileInfo_t);
SAME_OFFSET(nvmlComputeInstanceProfileInfo_t, sharedOfaCount);
SAME_SIZE(nvmlComputeInstanceProfileInfo_v2_t);
SAME_OFFSET(nvmlComputeInstanceProfileInfo_v2_t, sharedOfaCount);
SAME_OFFSET(nvmlComputeInstanceProfileInfo_v2_t, name);
SAME_SIZE(nvmlComputeInstanceInfo_t);
SAME_OFFSET(nvmlComputeInstanceInfo_t, gpuInstance);
SAME_OFFSET(nvmlComputeInstanceInfo_t, id);
SAME_OFFSET(nvmlComputeInstanceInfo_t, placement);
SAME_SIZE(nvmlGpuInstance_t);
SAME_SIZE(nvmlComputeInstance_t);
static_assert(kOurMig_NVML_GPU_INSTANCE_PROFILE_1_SLICE == NVML_GPU_INSTANCE_PROFILE_1_SLICE, "NVML_GPU_INSTANCE_PROFILE_1_SLICE");
static_assert(kOurMig_NVML_GPU_INSTANCE_PROFILE_2_SLICE == NVML_GPU_INSTANCE_PROFILE_2_SLICE, "NVML_GPU_INSTANCE_PROFILE_2_SLICE");
static_assert(kOurMig_NVML_GPU_INSTANCE_PROFILE_3_SLICE == NVML_GPU_INSTANCE_PROFILE_3_SLICE, "NVML_GPU_INSTANCE_PROFILE_3_SLICE");
static_assert(kOurMig_NVML_GPU_INSTANCE_PROFILE_4_SLICE == NVML_GPU_INSTANCE_PROFILE_4_SLICE, "NVML_GPU_INSTANCE_PROFILE_4_SLICE");
static_assert(kOurMig_NVML_GPU_INSTANCE_PROFILE_7_SLICE == NVML_GPU_INSTANCE_PROFILE_7_SLICE, "NVML_GPU_INSTANCE_PROFILE_7_SLICE");
static_assert(kOurMig_NVML_GPU_INSTANCE_PROFILE_8_SLICE == NVML_GPU_INSTANCE_PROFILE_8_SLICE, "NVML_GPU_INSTANCE_PROFILE_8_SLICE");
static_assert(kOurMig_NVML_GPU_INSTANCE_PROFILE_6_SLICE == NVML_GPU_INSTANCE_PROFILE_6_SLICE, "NVML_GPU_INSTANCE_PROFILE_6_SLICE");
static_assert(kOurMig_NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1 == NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1, "NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1");
static_assert(kOurMig_NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1 == NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1, "NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1");
static_assert(kOurMig_NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2 == NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2, "NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2");
static_assert(kOurMig_NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE == NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE, "NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE");
static_assert(kOurMig_NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE == NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE, "NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE");
static_assert(kOurMig_NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE == NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE, "NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE");
static_assert(kOurMig_NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE == NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE, "NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE");
static_assert(kOurMig_NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE == NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE, "NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE");
static_assert(kOurMig_NVML_COMPUTE_INSTANCE_PROFILE_8_SLICE == NVML_COMPUTE_INSTANCE_PROFILE_8_SLICE, "NVML_COMPUTE_INSTANCE_PROFILE_8_SLICE");
static_assert(kOurMig_NVML_COMPUTE_INSTANCE_PROFILE_6_SLICE == NVML_COMPUTE_INSTANCE_PROFILE_6_SLICE, "NVML_COMPUTE_INSTANCE_PROFILE_6_SLICE");
static_assert(kOurMig_NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE_REV1 == NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE_REV1, "NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE_REV1");
static_assert(kOurMig_NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED == NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, "NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED");
static_assert(kOurMig_nvmlGpuInstanceProfileInfo_v2 == nvmlGpuInstanceProfileInfo_v2, "nvmlGpuInstanceProfileInfo_v2");
static_assert(kOurMig_nvmlComputeInstanceProfileInfo_v2 == nvmlComputeInstanceProfileInfo_v2, "nvmlComputeInstanceProfileInfo_v2");
// The values our header gives these macros (it is included above, inside namespace ours).
static_assert(nvmlEventTypeXidCriticalError == 0x0000000000000008LL);
static_assert(nvmlEventTypeSingleBitEccError == 0x0000000000000001LL);
static_assert(nvmlEventTypeDoubleBitEccError == 0x0000000000000002LL);
static_assert(nvmlMemory_v2 == (static_cast<unsigned>(sizeof(ours::nvmlMemory_v2_t)) | (2u << 24)));
static_assert(NVML_DEVICE_MIG_ENABLE == 1 && NVML_DEVICE_MIG_DISABLE == 0);
static_assert(NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE == 32 && NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE == 16);
static_assert(NVML_DEVICE_UUID_V2_BUFFER_SIZE == 96 && NVML_DEVICE_NAME_V2_BUFFER_SIZE == 96);
static_assert(NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE == 80 && NVML_DEVICE_VBIOS_VERSION_BUFFER_SIZE == 32);
static_assert(NVML_NVLINK_MAX_LINKS == 18);

int main(int argc, char** argv) {
  const char* path = argc > 1 ? argv[1] : "libnvidia-ml.so.1";
  void* lib = dlopen(path, RTLD_NOW);
  if (!lib) {
    std::printf("dlopen %s failed: %s\n", path, dlerror());
    return 1;
  }
  int missing = 0, total = 0;
#define CHECK_SYMBOL(need, ret, name, params, fallbacks)                          \
  {                                                                                \
    ++total;                                                                       \
    const char* names[] = {#name, GPUNODE_ABI_NAMES(fallbacks)};                   \
    bool found = false;                                                            \
    for (const char* n : names) found = found || dlsym(lib, n) != nullptr;         \
    if (!found) {                                                                  \
      std::printf("missing in %s (%s): %s\n", path, #need, #name);           \
      ++missing;                                                                   \
    }                                                                              \
  }
  GPUNODE_NVML_API(CHECK_SYMBOL)
#undef CHECK_SYMBOL
  std::printf("nvml ABI check: layouts and values match nvml.h; %d of %d symbols present\n", total - missing, total);
  return missing == 0 ? 0 : 1;
}
