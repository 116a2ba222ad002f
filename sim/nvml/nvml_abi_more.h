// More of NVML's C ABI for the simulated library: types, constants and entry points that NVIDIA's
// own components (gpu-feature-discovery, the device plugin, the container toolkit) call and that
// src/gpu/nvml_abi.h (what gpunode itself calls) does not carry. Our own definitions, written from
// NVML's documented ABI; the numeric values are the ABI's. Append-only: each block is guarded so
// blocks added by different parts of the simulator do not collide.
#ifndef GPUNODE_SIM_NVML_NVML_ABI_MORE_H_
#define GPUNODE_SIM_NVML_NVML_ABI_MORE_H_

#include "src/gpu/nvml_abi.h"

// ---- What gpu-feature-discovery reads (sim/nvml/nvml_api.cc, "Entry points NVIDIA's
// gpu-feature-discovery reads").
#ifndef GPUNODE_SIM_ABI_MORE_GFD
#define GPUNODE_SIM_ABI_MORE_GFD

// nvmlDeviceGetArchitecture's values (the type and nvmlDeviceGetBrand's enum are in
// src/gpu/nvml_abi.h: gpunode reads both).
#define NVML_DEVICE_ARCH_KEPLER 2
#define NVML_DEVICE_ARCH_MAXWELL 3
#define NVML_DEVICE_ARCH_PASCAL 4
#define NVML_DEVICE_ARCH_VOLTA 5
#define NVML_DEVICE_ARCH_TURING 6
#define NVML_DEVICE_ARCH_AMPERE 7
#define NVML_DEVICE_ARCH_ADA 8
#define NVML_DEVICE_ARCH_HOPPER 9
#define NVML_DEVICE_ARCH_BLACKWELL 10
#define NVML_DEVICE_ARCH_UNKNOWN 0xffffffffu

// nvmlDeviceGetGpuFabricInfo (the IMEX clique label)
#define NVML_GPU_FABRIC_UUID_LEN 16
typedef unsigned char nvmlGpuFabricState_t;
#define NVML_GPU_FABRIC_STATE_NOT_SUPPORTED 0
#define NVML_GPU_FABRIC_STATE_NOT_STARTED 1
#define NVML_GPU_FABRIC_STATE_IN_PROGRESS 2
#define NVML_GPU_FABRIC_STATE_COMPLETED 3
typedef struct {
  unsigned char clusterUuid[NVML_GPU_FABRIC_UUID_LEN];
  nvmlReturn_t status;
  unsigned int cliqueId;
  nvmlGpuFabricState_t state;
} nvmlGpuFabricInfo_t;

#define GPUNODE_SIM_GFD_FUNCTIONS(X)                                                              \
  X(nvmlReturn_t, nvmlSystemGetCudaDriverVersion, (int* cudaDriverVersion))                       \
  X(nvmlReturn_t, nvmlGpuInstanceGetComputeInstanceById,                                          \
    (nvmlGpuInstance_t gpuInstance, unsigned int id, nvmlComputeInstance_t* computeInstance))     \
  X(nvmlReturn_t, nvmlDeviceGetGpuFabricInfo,                                                     \
    (nvmlDevice_t device, nvmlGpuFabricInfo_t * gpuFabricInfo))

#endif  // GPUNODE_SIM_ABI_MORE_GFD

// ---- What NVIDIA's DRA driver (gpu-kubelet-plugin) calls beyond the above (sim/nvml/dra_peer_api.cc).
#ifndef GPUNODE_SIM_ABI_MORE_DRA
#define GPUNODE_SIM_ABI_MORE_DRA

// nvmlInitWithFlags
#define NVML_INIT_FLAG_NO_GPUS 1u    // do not fail when no GPU is found
#define NVML_INIT_FLAG_NO_ATTACH 2u  // do not attach the GPUs

#define GPUNODE_SIM_DRA_FUNCTIONS(X) X(nvmlReturn_t, nvmlInitWithFlags, (unsigned int flags))

#endif  // GPUNODE_SIM_ABI_MORE_DRA

// ---- Compute mode and time slice (sim/nvml/compute.cc): what nvidia-smi -c and nvidia-smi
// compute-policy --set-timeslice change, which NVIDIA's DRA driver runs for a claim's sharing.
#ifndef GPUNODE_SIM_ABI_MORE_COMPUTE
#define GPUNODE_SIM_ABI_MORE_COMPUTE

typedef enum nvmlComputeMode_enum {
  NVML_COMPUTEMODE_DEFAULT = 0,
  NVML_COMPUTEMODE_EXCLUSIVE_THREAD = 1,  // support removed (CUDA 8 on)
  NVML_COMPUTEMODE_PROHIBITED = 2,
  NVML_COMPUTEMODE_EXCLUSIVE_PROCESS = 3,
  NVML_COMPUTEMODE_COUNT
} nvmlComputeMode_t;

#define GPUNODE_SIM_COMPUTE_FUNCTIONS(X)                                              \
  X(nvmlReturn_t, nvmlDeviceGetComputeMode, (nvmlDevice_t device, nvmlComputeMode_t * mode)) \
  X(nvmlReturn_t, nvmlDeviceSetComputeMode, (nvmlDevice_t device, nvmlComputeMode_t mode))

// The simulator's own exports (not NVML's: NVML 13.0 has no public time-slice call; the real
// nvidia-smi sets it through the driver). The GPU's compute time slice as nvidia-smi
// compute-policy names it: 0 DEFAULT, 1 SHORT, 2 MEDIUM, 3 LONG. NVML's error codes: UNINITIALIZED,
// INVALID_ARGUMENT (bad handle, null pointer, a value above 3), NOT_SUPPORTED (a MIG device handle,
// a GPU in MIG mode), GPU_IS_LOST.
#define GPUNODE_SIM_PRIVATE_FUNCTIONS(X)                                                          \
  X(nvmlReturn_t, gpunodeSimDeviceGetTimeslice, (nvmlDevice_t device, unsigned int* timeslice)) \
  X(nvmlReturn_t, gpunodeSimDeviceSetTimeslice, (nvmlDevice_t device, unsigned int timeslice))

#endif  // GPUNODE_SIM_ABI_MORE_COMPUTE

#endif  // GPUNODE_SIM_NVML_NVML_ABI_MORE_H_
