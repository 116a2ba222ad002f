// The part of NVML's C ABI that gpunode uses, declared by us so that building needs no CUDA
// toolkit and no NVIDIA header. Values and layouts follow NVIDIA's nvml.h (CUDA 12/13 era);
// test/gpu/nvml_abi_check.cc static_asserts them against a real nvml.h where one is present
// (run on the GPU machine). Both the loader (src/gpu/nvml.cc) and the simulated library
// (sim/) include this file, so the simulator speaks exactly the ABI the loader expects.
#ifndef GPUNODE_GPU_NVML_ABI_H_
#define GPUNODE_GPU_NVML_ABI_H_

#include "src/gpu/abi_list.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  NVML_SUCCESS = 0,
  NVML_ERROR_UNINITIALIZED = 1,
  NVML_ERROR_INVALID_ARGUMENT = 2,
  NVML_ERROR_NOT_SUPPORTED = 3,
  NVML_ERROR_NO_PERMISSION = 4,
  NVML_ERROR_ALREADY_INITIALIZED = 5,
  NVML_ERROR_NOT_FOUND = 6,
  NVML_ERROR_INSUFFICIENT_SIZE = 7,
  NVML_ERROR_INSUFFICIENT_POWER = 8,
  NVML_ERROR_DRIVER_NOT_LOADED = 9,
  NVML_ERROR_TIMEOUT = 10,
  NVML_ERROR_IRQ_ISSUE = 11,
  NVML_ERROR_LIBRARY_NOT_FOUND = 12,
  NVML_ERROR_FUNCTION_NOT_FOUND = 13,
  NVML_ERROR_CORRUPTED_INFOROM = 14,
  NVML_ERROR_GPU_IS_LOST = 15,
  NVML_ERROR_RESET_REQUIRED = 16,
  NVML_ERROR_OPERATING_SYSTEM = 17,
  NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18,
  NVML_ERROR_IN_USE = 19,
  NVML_ERROR_MEMORY = 20,
  NVML_ERROR_NO_DATA = 21,
  NVML_ERROR_VGPU_ECC_NOT_SUPPORTED = 22,
  NVML_ERROR_INSUFFICIENT_RESOURCES = 23,
  NVML_ERROR_FREQ_NOT_SUPPORTED = 24,
  NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
  NVML_ERROR_DEPRECATED = 26,
  NVML_ERROR_NOT_READY = 27,
  NVML_ERROR_GPU_NOT_FOUND = 28,
  NVML_ERROR_INVALID_STATE = 29,
  NVML_ERROR_UNKNOWN = 999
} nvmlReturn_t;

typedef struct nvmlDevice_st* nvmlDevice_t;
typedef struct nvmlEventSet_st* nvmlEventSet_t;

typedef enum { NVML_FEATURE_DISABLED = 0, NVML_FEATURE_ENABLED = 1 } nvmlEnableState_t;

#define NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE 32
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE 16
#define NVML_DEVICE_NAME_V2_BUFFER_SIZE 96
#define NVML_DEVICE_UUID_V2_BUFFER_SIZE 96
#define NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE 80
#define NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE 80
#define NVML_DEVICE_VBIOS_VERSION_BUFFER_SIZE 32
#define NVML_NVLINK_MAX_LINKS 18

// nvmlDeviceGetPciInfo_v3 fills this layout.
typedef struct nvmlPciInfo_st {
  char busIdLegacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;     // (device id << 16) | vendor id, e.g. 0x233510DE
  unsigned int pciSubSystemId;  // (subsystem device << 16) | subsystem vendor
  char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];  // "00000000:18:00.0"
} nvmlPciInfo_t;

typedef struct nvmlMemory_st {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_t;

typedef struct nvmlMemory_v2_st {
  unsigned int version;  // nvmlMemory_v2
  unsigned long long total;
  unsigned long long reserved;
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_v2_t;
#define NVML_STRUCT_VERSION(size, ver) ((unsigned int)(size) | ((unsigned int)(ver) << 24U))
#define nvmlMemory_v2 NVML_STRUCT_VERSION(sizeof(nvmlMemory_v2_t), 2)

typedef struct nvmlUtilization_st {
  unsigned int gpu;
  unsigned int memory;
} nvmlUtilization_t;

// nvmlDeviceGetArchitecture: NVML_DEVICE_ARCH_* (2 Kepler ... 9 Hopper, 10 Blackwell; 0xffffffff
// unknown). The DRA driver names them as go-nvlib does (src/dra/device_model.cc).
typedef unsigned int nvmlDeviceArchitecture_t;

// nvmlDeviceGetBrand.
typedef enum nvmlBrandType_enum {
  NVML_BRAND_UNKNOWN = 0,
  NVML_BRAND_QUADRO = 1,
  NVML_BRAND_TESLA = 2,
  NVML_BRAND_NVS = 3,
  NVML_BRAND_GRID = 4,
  NVML_BRAND_GEFORCE = 5,
  NVML_BRAND_TITAN = 6,
  NVML_BRAND_NVIDIA_VAPPS = 7,
  NVML_BRAND_NVIDIA_VPC = 8,
  NVML_BRAND_NVIDIA_VCS = 9,
  NVML_BRAND_NVIDIA_VWS = 10,
  NVML_BRAND_NVIDIA_CLOUD_GAMING = 11,
  NVML_BRAND_QUADRO_RTX = 12,
  NVML_BRAND_NVIDIA_RTX = 13,
  NVML_BRAND_NVIDIA = 14,
  NVML_BRAND_GEFORCE_RTX = 15,
  NVML_BRAND_TITAN_RTX = 16,
  NVML_BRAND_COUNT = 18,
} nvmlBrandType_t;

// nvmlDeviceGetAddressingMode (drivers from 575 on; coherent-memory systems): `value` is
// NVML_DEVICE_ADDRESSING_MODE_NONE (0), _HMM (1) or _ATS (2); NOT_SUPPORTED elsewhere.
typedef enum nvmlDeviceAddressingModeType_enum {
  NVML_DEVICE_ADDRESSING_MODE_NONE = 0,
  NVML_DEVICE_ADDRESSING_MODE_HMM = 1,
  NVML_DEVICE_ADDRESSING_MODE_ATS = 2,
} nvmlDeviceAddressingModeType_t;
typedef struct {
  unsigned int version;  // IN: nvmlDeviceAddressingMode_v1
  unsigned int value;    // OUT: nvmlDeviceAddressingModeType_t
} nvmlDeviceAddressingMode_v1_t;
typedef nvmlDeviceAddressingMode_v1_t nvmlDeviceAddressingMode_t;
#define nvmlDeviceAddressingMode_v1 NVML_STRUCT_VERSION(sizeof(nvmlDeviceAddressingMode_v1_t), 1)

// nvmlDeviceGetComputeRunningProcesses_v3 / _v2 element.
typedef struct nvmlProcessInfo_st {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
} nvmlProcessInfo_t;

typedef struct nvmlDeviceAttributes_st {
  unsigned int multiprocessorCount;
  unsigned int sharedCopyEngineCount;
  unsigned int sharedDecoderCount;
  unsigned int sharedEncoderCount;
  unsigned int sharedJpegCount;
  unsigned int sharedOfaCount;
  unsigned int gpuInstanceSliceCount;
  unsigned int computeInstanceSliceCount;
  unsigned long long memorySizeMB;
} nvmlDeviceAttributes_t;

typedef struct nvmlEventData_st {
  nvmlDevice_t device;
  unsigned long long eventType;
  unsigned long long eventData;  // the XID for NVML_EVENT_TYPE_XID_CRITICAL_ERROR
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
} nvmlEventData_t;

#define nvmlEventTypeSingleBitEccError 0x0000000000000001LL
#define nvmlEventTypeDoubleBitEccError 0x0000000000000002LL
#define nvmlEventTypePState 0x0000000000000004LL
#define nvmlEventTypeXidCriticalError 0x0000000000000008LL
#define nvmlEventTypeClock 0x0000000000000010LL

typedef enum {
  NVML_TOPOLOGY_INTERNAL = 0,
  NVML_TOPOLOGY_SINGLE = 10,
  NVML_TOPOLOGY_MULTIPLE = 20,
  NVML_TOPOLOGY_HOSTBRIDGE = 30,
  NVML_TOPOLOGY_NODE = 40,
  NVML_TOPOLOGY_SYSTEM = 50
} nvmlGpuTopologyLevel_t;

typedef enum { NVML_MEMORY_ERROR_TYPE_CORRECTED = 0, NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1 } nvmlMemoryErrorType_t;
typedef enum { NVML_VOLATILE_ECC = 0, NVML_AGGREGATE_ECC = 1 } nvmlEccCounterType_t;
typedef enum { NVML_TEMPERATURE_GPU = 0 } nvmlTemperatureSensors_t;
typedef enum { NVML_CLOCK_GRAPHICS = 0, NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2, NVML_CLOCK_VIDEO = 3 } nvmlClockType_t;

#define NVML_DEVICE_MIG_DISABLE 0
#define NVML_DEVICE_MIG_ENABLE 1

// nvmlDeviceGetFieldValues: one entry per field asked for; NVML fills timestamp, latencyUsec,
// valueType, nvmlReturn (per entry) and value.
typedef enum {
  NVML_VALUE_TYPE_DOUBLE = 0,
  NVML_VALUE_TYPE_UNSIGNED_INT = 1,
  NVML_VALUE_TYPE_UNSIGNED_LONG = 2,
  NVML_VALUE_TYPE_UNSIGNED_LONG_LONG = 3,
  NVML_VALUE_TYPE_SIGNED_LONG_LONG = 4,
  NVML_VALUE_TYPE_SIGNED_INT = 5,
  NVML_VALUE_TYPE_UNSIGNED_SHORT = 6,
  NVML_VALUE_TYPE_COUNT
} nvmlValueType_t;

typedef union nvmlValue_st {
  double dVal;
  int siVal;
  unsigned int uiVal;
  unsigned long ulVal;
  unsigned long long ullVal;
  signed long long sllVal;
  unsigned short usVal;
} nvmlValue_t;

typedef struct nvmlFieldValue_st {
  unsigned int fieldId;   // IN: NVML_FI_*
  unsigned int scopeId;   // IN: e.g. the NVLink link id; UINT_MAX = all links
  long long timestamp;    // OUT: CPU time of the value, microseconds since 1970
  long long latencyUsec;  // OUT
  nvmlValueType_t valueType;
  nvmlReturn_t nvmlReturn;  // OUT: per entry; `value` is valid only when NVML_SUCCESS
  nvmlValue_t value;
} nvmlFieldValue_t;

#define NVML_FI_DEV_MEMORY_TEMP 82                    // memory (HBM) temperature, C
#define NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION 83       // mJ since the driver was loaded
#define NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX 138     // cumulative KiB
#define NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX 139     // cumulative KiB

// GPU Performance Monitoring (Hopper and newer).
typedef struct nvmlGpmSample_st* nvmlGpmSample_t;

typedef enum {
  NVML_GPM_METRIC_GRAPHICS_UTIL = 1,     // % of time any compute/graphics app was active
  NVML_GPM_METRIC_SM_UTIL = 2,           // % of SMs busy
  NVML_GPM_METRIC_SM_OCCUPANCY = 3,      // % of warps active vs theoretical maximum
  NVML_GPM_METRIC_INTEGER_UTIL = 4,
  NVML_GPM_METRIC_ANY_TENSOR_UTIL = 5,   // % of time the SMs did any tensor operation
  NVML_GPM_METRIC_DFMA_TENSOR_UTIL = 6,
  NVML_GPM_METRIC_HMMA_TENSOR_UTIL = 7,
  NVML_GPM_METRIC_IMMA_TENSOR_UTIL = 9,
  NVML_GPM_METRIC_DRAM_BW_UTIL = 10,     // % of DRAM bandwidth used vs theoretical maximum
  NVML_GPM_METRIC_FP64_UTIL = 11,        // % of time doing non-tensor FP64 math
  NVML_GPM_METRIC_FP32_UTIL = 12,
  NVML_GPM_METRIC_FP16_UTIL = 13,
  NVML_GPM_METRIC_PCIE_TX_PER_SEC = 20,  // MiB/s from this GPU
  NVML_GPM_METRIC_PCIE_RX_PER_SEC = 21,  // MiB/s to this GPU
  // One above the largest id in CUDA 13.0's nvml.h; sizes nvmlGpmMetricsGet_t.metrics.
  NVML_GPM_METRIC_MAX = 210
} nvmlGpmMetricId_t;

typedef struct {
  unsigned int metricId;    // IN: NVML_GPM_METRIC_*
  nvmlReturn_t nvmlReturn;  // OUT: per metric; `value` is valid only when NVML_SUCCESS
  double value;             // OUT
  struct {
    char* shortName;
    char* longName;
    char* unit;
  } metricInfo;  // OUT: may be NULL
} nvmlGpmMetric_t;

typedef struct {
  unsigned int version;     // IN: NVML_GPM_METRICS_GET_VERSION
  unsigned int numMetrics;  // IN: entries of metrics[] to fill
  nvmlGpmSample_t sample1;  // IN: the older sample
  nvmlGpmSample_t sample2;  // IN: the newer sample (>= 100 ms later)
  nvmlGpmMetric_t metrics[NVML_GPM_METRIC_MAX];
} nvmlGpmMetricsGet_t;
#define NVML_GPM_METRICS_GET_VERSION 1

typedef struct {
  unsigned int version;            // IN: NVML_GPM_SUPPORT_VERSION
  unsigned int isSupportedDevice;  // OUT
} nvmlGpmSupport_t;
#define NVML_GPM_SUPPORT_VERSION 1

// ---- MIG: GPU instances (GI) and compute instances (CI) ------------------------------------------
// nvmlDeviceGetGpuInstanceProfileInfo*(device, NVML_GPU_INSTANCE_PROFILE_*) describes a GI profile;
// its `id` (e.g. 19 for 1g.18gb, what nvidia-smi shows) is the profileId the other GI calls take.
// The same holds for CI profiles (NVML_COMPUTE_INSTANCE_PROFILE_* -> info.id).
typedef struct nvmlGpuInstance_st* nvmlGpuInstance_t;
typedef struct nvmlComputeInstance_st* nvmlComputeInstance_t;

#define NVML_GPU_INSTANCE_PROFILE_1_SLICE 0x0
#define NVML_GPU_INSTANCE_PROFILE_2_SLICE 0x1
#define NVML_GPU_INSTANCE_PROFILE_3_SLICE 0x2
#define NVML_GPU_INSTANCE_PROFILE_4_SLICE 0x3
#define NVML_GPU_INSTANCE_PROFILE_7_SLICE 0x4
#define NVML_GPU_INSTANCE_PROFILE_8_SLICE 0x5
#define NVML_GPU_INSTANCE_PROFILE_6_SLICE 0x6
#define NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1 0x7  // 1 slice + all media engines ("+me")
#define NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1 0x8  // 2 slices + media engines ("+me")
#define NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2 0x9  // 1 compute slice, 2 memory slices (1g.35gb)
// The profiles this header knows; CUDA 12.8+ nvml.h adds GFX/NO_ME/ALL_ME variants (0xA-0x10,
// RTX PRO and Blackwell) and a larger NVML_GPU_INSTANCE_PROFILE_COUNT, which gpunode does not use.
#define GPUNODE_NVML_GPU_INSTANCE_PROFILES_KNOWN 0xA

#define NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE 0x0
#define NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE 0x1
#define NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE 0x2
#define NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE 0x3
#define NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE 0x4
#define NVML_COMPUTE_INSTANCE_PROFILE_8_SLICE 0x5
#define NVML_COMPUTE_INSTANCE_PROFILE_6_SLICE 0x6
#define NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE_REV1 0x7
#define GPUNODE_NVML_COMPUTE_INSTANCE_PROFILES_KNOWN 0x8
#define NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED 0x0

typedef struct nvmlGpuInstancePlacement_st {
  unsigned int start;  // first memory slice
  unsigned int size;   // memory slices
} nvmlGpuInstancePlacement_t;

typedef struct nvmlGpuInstanceProfileInfo_st {
  unsigned int id;  // the profileId of the create/list calls
  unsigned int isP2pSupported;
  unsigned int sliceCount;     // compute slices
  unsigned int instanceCount;  // how many fit on an empty GPU
  unsigned int multiprocessorCount;
  unsigned int copyEngineCount;
  unsigned int decoderCount;
  unsigned int encoderCount;
  unsigned int jpegCount;
  unsigned int ofaCount;
  unsigned long long memorySizeMB;
} nvmlGpuInstanceProfileInfo_t;

typedef struct nvmlGpuInstanceProfileInfo_v2_st {
  unsigned int version;  // IN: nvmlGpuInstanceProfileInfo_v2
  unsigned int id;
  unsigned int isP2pSupported;
  unsigned int sliceCount;
  unsigned int instanceCount;
  unsigned int multiprocessorCount;
  unsigned int copyEngineCount;
  unsigned int decoderCount;
  unsigned int encoderCount;
  unsigned int jpegCount;
  unsigned int ofaCount;
  unsigned long long memorySizeMB;
  char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];  // "MIG 1g.18gb"
} nvmlGpuInstanceProfileInfo_v2_t;
#define nvmlGpuInstanceProfileInfo_v2 NVML_STRUCT_VERSION(sizeof(nvmlGpuInstanceProfileInfo_v2_t), 2)

typedef struct nvmlGpuInstanceInfo_st {
  nvmlDevice_t device;  // the parent GPU
  unsigned int id;      // the GI id (nvmlDeviceGetGpuInstanceId of its MIG devices)
  unsigned int profileId;
  nvmlGpuInstancePlacement_t placement;
} nvmlGpuInstanceInfo_t;

typedef struct nvmlComputeInstancePlacement_st {
  unsigned int start;
  unsigned int size;
} nvmlComputeInstancePlacement_t;

typedef struct nvmlComputeInstanceProfileInfo_st {
  unsigned int id;
  unsigned int sliceCount;
  unsigned int instanceCount;
  unsigned int multiprocessorCount;
  unsigned int sharedCopyEngineCount;
  unsigned int sharedDecoderCount;
  unsigned int sharedEncoderCount;
  unsigned int sharedJpegCount;
  unsigned int sharedOfaCount;
} nvmlComputeInstanceProfileInfo_t;

typedef struct nvmlComputeInstanceProfileInfo_v2_st {
  unsigned int version;  // IN: nvmlComputeInstanceProfileInfo_v2
  unsigned int id;
  unsigned int sliceCount;
  unsigned int instanceCount;
  unsigned int multiprocessorCount;
  unsigned int sharedCopyEngineCount;
  unsigned int sharedDecoderCount;
  unsigned int sharedEncoderCount;
  unsigned int sharedJpegCount;
  unsigned int sharedOfaCount;
  char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];  // "MIG 1c.3g.71gb"
} nvmlComputeInstanceProfileInfo_v2_t;
#define nvmlComputeInstanceProfileInfo_v2 \
  NVML_STRUCT_VERSION(sizeof(nvmlComputeInstanceProfileInfo_v2_t), 2)

typedef struct nvmlComputeInstanceInfo_st {
  nvmlDevice_t device;
  nvmlGpuInstance_t gpuInstance;
  unsigned int id;
  unsigned int profileId;
  nvmlComputeInstancePlacement_t placement;
} nvmlComputeInstanceInfo_t;

// Every NVML entry point gpunode resolves: E(X, need, return, name, params, fallbacks), columns as
// in abi_list.h. need: `required` entries must resolve (else NvmlLibrary::Open fails: this NVML is
// too old); an `optional` one missing from an older driver makes its NvmlLibrary wrapper answer
// NVML_ERROR_FUNCTION_NOT_FOUND ("not supported"). fallbacks: same-ABI older names (the _v1 forms
// of the process and PCI queries have other struct layouts and are deliberately not listed).
#define GPUNODE_NVML_API_(E, X)                                                                    \
  E(X, required, nvmlReturn_t, nvmlInit_v2, (void), (nvmlInit))                                    \
  E(X, required, nvmlReturn_t, nvmlShutdown, (void), ())                                           \
  E(X, required, const char*, nvmlErrorString, (nvmlReturn_t result), ())                          \
  E(X, required, nvmlReturn_t, nvmlSystemGetDriverVersion,                                         \
    (char* version, unsigned int length), ())                                                      \
  E(X, optional, nvmlReturn_t, nvmlSystemGetNVMLVersion, (char* version, unsigned int length), ()) \
  E(X, optional, nvmlReturn_t, nvmlSystemGetCudaDriverVersion_v2,                                  \
    (int* cudaDriverVersion), (nvmlSystemGetCudaDriverVersion))                                    \
  E(X, required, nvmlReturn_t, nvmlDeviceGetCount_v2,                                              \
    (unsigned int* deviceCount), (nvmlDeviceGetCount))                                             \
  E(X, required, nvmlReturn_t, nvmlDeviceGetHandleByIndex_v2,                                      \
    (unsigned int index, nvmlDevice_t* device), (nvmlDeviceGetHandleByIndex))                      \
  E(X, optional, nvmlReturn_t, nvmlDeviceGetName,                                                  \
    (nvmlDevice_t device, char* name, unsigned int length), ())                                    \
  E(X, optional, nvmlReturn_t, nvmlDeviceGetUUID,                                                  \
    (nvmlDevice_t device, char* uuid, unsigned int length), ())                                    \
  E(X, optional, nvmlReturn_t, nvmlDeviceGetPciInfo_v3,                                            \
    (nvmlDevice_t device, nvmlPciInfo_t* pci), (nvmlDeviceGetPciInfo_v2))                          \
  E(X, optional, nvmlReturn_t, nvmlDeviceGetMinorNumber,                                           \
    (nvmlDevice_t device, unsigned int* minorNumber), ())                                          \
  E(X, optional, nvmlReturn_t, nvmlDeviceGetIndex, (nvmlDevice_t device, unsigned int* index), ()) \
  E(X, optional, nvmlReturn_t, nvmlDeviceGetVbiosVersion,                                          \
    (nvmlDevice_t device, char* version, unsigned int length), ())                                 \
  E(X, optional, nvmlReturn_t, nvmlDeviceGetMemoryInfo,                                            \
    (nvmlDevice_t device, nvmlMemory_t* memory), ())                                               \
  E(X, optional, nvmlReturn_t, nvmlDeviceGetMemoryInfo_v2,                                         \
    (nvmlDevice_t device, nvmlMemory_v2_t* memory), ())                                            \
  E(X, optional, nvmlReturn_t, nvmlDeviceGetPersistenceMode,                                       \
    (nvmlDevice_t device, nvmlEnableState_t* mode), ())                                            \
  E(X, optional, nvmlReturn_t, nvmlDeviceGetEccMode,                                               \
    (nvmlDevice_t device, nvmlEnableState_t* current, nvmlEnableState_t* pending), ())             \
  E(X, optional, nvmlReturn_t, nvmlDeviceGetTotalEccErrors,                                        \
    (nvmlDevice_t device, nvmlMemoryErrorType_t errorType, nvmlEccCounterType_t counterType,       \
     unsigned long long* eccCounts), ())                                                           \
  E(X, optional, nvmlReturn_t, nvmlDeviceGetRetiredPagesPendingStatus,                             \
    (nvmlDevice_t device, nvmlEnableState_t* isPending), ())                                       \
  E(X, optional, nvmlReturn_t, nvmlDeviceGetRemappedRows,                                          \
    (nvmlDevice_t device, unsigned int* corrRows, unsigned int* uncRows, unsigned int* isPending,  \
     unsigned int* failureOccurred), ())                                                           \
  E(X, optional, nvmlReturn_t, nvmlDeviceGetCurrPcieLinkGeneration,                                \
    (nvmlDevice_t device, unsigned int* gen), ())                                                  \
  E(X, optional, nvmlReturn_t, nvmlDeviceGetMaxPcieLinkGeneration,                                 \
    (nvmlDevice_t device, unsigned int* gen), ())                                                  \
  E(X, optional, nvmlReturn_t, nvmlDeviceGetGpuMaxPcieLinkGeneration,                              \
    (nvmlDevice_t device, unsigned int* gen), ())                                                  \
  E(X, optional, nvmlReturn_t, nvmlDeviceGetCurrPcieLinkWidth,                                     \
    (nvmlDevice_t device, unsigned int* width), ())                                                \
  E(X, optional, nvmlReturn_t, nvmlDeviceGetMaxPcieLinkWidth,                                      \
    (nvmlDevice_t device, unsigned int* width), ())                                                \
  E(X, optional, nvmlReturn_t, nvmlDeviceGetTemperature,                                           \
    (nvmlDevice_t device, nvmlTemperatureSensors_t sensor, unsigned int* temp), ())                \
  E(X, optional, nvmlReturn_t, nvmlDeviceGetPowerUsage,                                            \
    (nvmlDevice_t device, unsigned int* milliwatts), ())                                           \
  E(X, optional, nvmlReturn_t, nvmlDeviceGetPowerManagementLimit,                                  \
    (nvmlDevice_t device, unsigned int* milliwatts), ())                                           \
  E(X, optional, nvmlReturn_t, nvmlDeviceGetEnforcedPowerLimit,                                    \
    (nvmlDevice_t device, unsigned int* milliwatts), ())                                           \
  E(X, optional, nvmlReturn_t, nvmlDeviceGetTotalEnergyConsumption,                                \
    (nvmlDevice_t device, unsigned long long* millijoules), ())                                    \
  E(X, optional, nvmlReturn_t, nvmlDeviceGetUtilizationRates,                                      \
    (nvmlDevice_t device, nvmlUtilization_t* utilization), ())                                     \
  E(X, optional, nvmlReturn_t, nvmlDeviceGetClockInfo,                                             \
    (nvmlDevice_t device, nvmlClockType_t type, unsigned int* clockMHz), ())                       \
  E(X, optional, nvmlReturn_t, nvmlDeviceGetCudaComputeCapability,                                 \
    (nvmlDevice_t device, int* major, int* minor), ())                                             \
  E(X, optional, nvmlReturn_t, nvmlDeviceGetArchitecture,                                          \
    (nvmlDevice_t device, nvmlDeviceArchitecture_t* arch), ())                                     \
  E(X, optional, nvmlReturn_t, nvmlDeviceGetBrand,                                                 \
    (nvmlDevice_t device, nvmlBrandType_t* type), ())                                              \
  E(X, optional, nvmlReturn_t, nvmlDeviceGetAddressingMode,                                        \
    (nvmlDevice_t device, nvmlDeviceAddressingMode_t* mode), ())                                   \
  E(X, optional, nvmlReturn_t, nvmlDeviceGetComputeRunningProcesses_v3,                            \
    (nvmlDevice_t device, unsigned int* infoCount, nvmlProcessInfo_t* infos),                      \
    (nvmlDeviceGetComputeRunningProcesses_v2))                                                     \
  E(X, optional, nvmlReturn_t, nvmlDeviceGetMigMode,                                               \
    (nvmlDevice_t device, unsigned int* currentMode, unsigned int* pendingMode), ())               \
  E(X, optional, nvmlReturn_t, nvmlDeviceGetMaxMigDeviceCount,                                     \
    (nvmlDevice_t device, unsigned int* count), ())                                                \
  E(X, optional, nvmlReturn_t, nvmlDeviceGetMigDeviceHandleByIndex,                                \
    (nvmlDevice_t device, unsigned int index, nvmlDevice_t* migDevice), ())                        \
  E(X, optional, nvmlReturn_t, nvmlDeviceGetGpuInstanceId,                                         \
    (nvmlDevice_t device, unsigned int* id), ())                                                   \
  E(X, optional, nvmlReturn_t, nvmlDeviceGetComputeInstanceId,                                     \
    (nvmlDevice_t device, unsigned int* id), ())                                                   \
  E(X, optional, nvmlReturn_t, nvmlDeviceGetGpuInstanceById,                                       \
    (nvmlDevice_t device, unsigned int id, nvmlGpuInstance_t* gpuInstance), ())                    \
  E(X, optional, nvmlReturn_t, nvmlDeviceGetAttributes_v2,                                         \
    (nvmlDevice_t device, nvmlDeviceAttributes_t* attributes), (nvmlDeviceGetAttributes))          \
  E(X, optional, nvmlReturn_t, nvmlDeviceGetTopologyCommonAncestor,                                \
    (nvmlDevice_t device1, nvmlDevice_t device2, nvmlGpuTopologyLevel_t* pathInfo), ())            \
  E(X, optional, nvmlReturn_t, nvmlDeviceGetNvLinkState,                                           \
    (nvmlDevice_t device, unsigned int link, nvmlEnableState_t* isActive), ())                     \
  E(X, optional, nvmlReturn_t, nvmlDeviceGetNvLinkRemotePciInfo_v2,                                \
    (nvmlDevice_t device, unsigned int link, nvmlPciInfo_t* pci),                                  \
    (nvmlDeviceGetNvLinkRemotePciInfo))                                                            \
  E(X, optional, nvmlReturn_t, nvmlEventSetCreate, (nvmlEventSet_t * set), ())                     \
  E(X, optional, nvmlReturn_t, nvmlDeviceRegisterEvents,                                           \
    (nvmlDevice_t device, unsigned long long eventTypes, nvmlEventSet_t set), ())                  \
  E(X, optional, nvmlReturn_t, nvmlDeviceGetSupportedEventTypes,                                   \
    (nvmlDevice_t device, unsigned long long* eventTypes), ())                                     \
  E(X, optional, nvmlReturn_t, nvmlEventSetWait_v2,                                                \
    (nvmlEventSet_t set, nvmlEventData_t * data, unsigned int timeoutms), (nvmlEventSetWait))      \
  E(X, optional, nvmlReturn_t, nvmlEventSetFree, (nvmlEventSet_t set), ())                         \
  E(X, optional, nvmlReturn_t, nvmlDeviceGetCurrentClocksEventReasons,                             \
    (nvmlDevice_t device, unsigned long long* clocksEventReasons),                                 \
    (nvmlDeviceGetCurrentClocksThrottleReasons))                                                   \
  E(X, optional, nvmlReturn_t, nvmlDeviceGetFieldValues,                                           \
    (nvmlDevice_t device, int valuesCount, nvmlFieldValue_t* values), ())                          \
  E(X, optional, nvmlReturn_t, nvmlDeviceGetPcieReplayCounter,                                     \
    (nvmlDevice_t device, unsigned int* value), ())                                                \
  E(X, optional, nvmlReturn_t, nvmlDeviceGetEncoderUtilization,                                    \
    (nvmlDevice_t device, unsigned int* utilization, unsigned int* samplingPeriodUs), ())          \
  E(X, optional, nvmlReturn_t, nvmlDeviceGetDecoderUtilization,                                    \
    (nvmlDevice_t device, unsigned int* utilization, unsigned int* samplingPeriodUs), ())          \
  E(X, optional, nvmlReturn_t, nvmlGpmQueryDeviceSupport,                                          \
    (nvmlDevice_t device, nvmlGpmSupport_t* gpmSupport), ())                                       \
  E(X, optional, nvmlReturn_t, nvmlGpmSampleAlloc, (nvmlGpmSample_t * gpmSample), ())              \
  E(X, optional, nvmlReturn_t, nvmlGpmSampleFree, (nvmlGpmSample_t gpmSample), ())                 \
  E(X, optional, nvmlReturn_t, nvmlGpmSampleGet,                                                   \
    (nvmlDevice_t device, nvmlGpmSample_t gpmSample), ())                                          \
  E(X, optional, nvmlReturn_t, nvmlGpmMetricsGet, (nvmlGpmMetricsGet_t * metricsGet), ())          \
  E(X, optional, nvmlReturn_t, nvmlDeviceSetMigMode,                                               \
    (nvmlDevice_t device, unsigned int mode, nvmlReturn_t * activationStatus), ())                 \
  E(X, optional, nvmlReturn_t, nvmlDeviceGetGpuInstanceProfileInfo,                                \
    (nvmlDevice_t device, unsigned int profile, nvmlGpuInstanceProfileInfo_t* info), ())           \
  E(X, optional, nvmlReturn_t, nvmlDeviceGetGpuInstanceProfileInfoV,                               \
    (nvmlDevice_t device, unsigned int profile, nvmlGpuInstanceProfileInfo_v2_t* info), ())        \
  E(X, optional, nvmlReturn_t, nvmlDeviceGetGpuInstancePossiblePlacements_v2,                      \
    (nvmlDevice_t device, unsigned int profileId, nvmlGpuInstancePlacement_t* placements,          \
     unsigned int* count), ())                                                                     \
  E(X, optional, nvmlReturn_t, nvmlDeviceGetGpuInstanceRemainingCapacity,                          \
    (nvmlDevice_t device, unsigned int profileId, unsigned int* count), ())                        \
  E(X, optional, nvmlReturn_t, nvmlDeviceCreateGpuInstance,                                        \
    (nvmlDevice_t device, unsigned int profileId, nvmlGpuInstance_t * gpuInstance), ())            \
  E(X, optional, nvmlReturn_t, nvmlDeviceCreateGpuInstanceWithPlacement,                           \
    (nvmlDevice_t device, unsigned int profileId, const nvmlGpuInstancePlacement_t* placement,     \
     nvmlGpuInstance_t* gpuInstance), ())                                                          \
  E(X, optional, nvmlReturn_t, nvmlGpuInstanceDestroy, (nvmlGpuInstance_t gpuInstance), ())        \
  E(X, optional, nvmlReturn_t, nvmlDeviceGetGpuInstances,                                          \
    (nvmlDevice_t device, unsigned int profileId, nvmlGpuInstance_t* gpuInstances,                 \
     unsigned int* count), ())                                                                     \
  E(X, optional, nvmlReturn_t, nvmlGpuInstanceGetInfo,                                             \
    (nvmlGpuInstance_t gpuInstance, nvmlGpuInstanceInfo_t * info), ())                             \
  E(X, optional, nvmlReturn_t, nvmlGpuInstanceGetComputeInstanceProfileInfo,                       \
    (nvmlGpuInstance_t gpuInstance, unsigned int profile, unsigned int engProfile,                 \
     nvmlComputeInstanceProfileInfo_t* info), ())                                                  \
  E(X, optional, nvmlReturn_t, nvmlGpuInstanceGetComputeInstanceProfileInfoV,                      \
    (nvmlGpuInstance_t gpuInstance, unsigned int profile, unsigned int engProfile,                 \
     nvmlComputeInstanceProfileInfo_v2_t* info), ())                                               \
  E(X, optional, nvmlReturn_t, nvmlGpuInstanceGetComputeInstanceRemainingCapacity,                 \
    (nvmlGpuInstance_t gpuInstance, unsigned int profileId, unsigned int* count), ())              \
  E(X, optional, nvmlReturn_t, nvmlGpuInstanceCreateComputeInstance,                               \
    (nvmlGpuInstance_t gpuInstance, unsigned int profileId,                                        \
     nvmlComputeInstance_t* computeInstance), ())                                                  \
  E(X, optional, nvmlReturn_t, nvmlComputeInstanceDestroy,                                         \
    (nvmlComputeInstance_t computeInstance), ())                                                   \
  E(X, optional, nvmlReturn_t, nvmlGpuInstanceGetComputeInstances,                                 \
    (nvmlGpuInstance_t gpuInstance, unsigned int profileId,                                        \
     nvmlComputeInstance_t* computeInstances, unsigned int* count), ())                            \
  E(X, optional, nvmlReturn_t, nvmlComputeInstanceGetInfo_v2,                                      \
    (nvmlComputeInstance_t computeInstance, nvmlComputeInstanceInfo_t * info), ())

// The views of the list. X(need, return, name, params, fallbacks): the loader (src/gpu/nvml.h).
#define GPUNODE_NVML_API(X) GPUNODE_NVML_API_(GPUNODE_ABI_ALL, X)
// X(return, name, params) for each entry: what the simulator implements and the tests resolve.
#define GPUNODE_NVML_FUNCTIONS(X) GPUNODE_NVML_API_(GPUNODE_ABI_DECL, X)
// X(return, fallback name, params) for each fallback name (older drivers export these instead).
#define GPUNODE_NVML_FALLBACK_FUNCTIONS(X) GPUNODE_NVML_API_(GPUNODE_ABI_FALLBACK_DECLS, X)

#ifdef __cplusplus
}  // extern "C"
#endif

// The libcuda part of the ABI (CUresult, GPUNODE_CUDA_FUNCTIONS), which the simulator implements too.
#include "src/gpu/cuda_abi.h"

#endif  // GPUNODE_GPU_NVML_ABI_H_
