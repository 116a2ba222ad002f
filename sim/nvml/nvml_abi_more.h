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

#endif  // GPUNODE_SIM_NVML_NVML_ABI_MORE_H_
