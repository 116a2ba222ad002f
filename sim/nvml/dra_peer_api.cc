// Entry points NVIDIA's DRA driver (gpu-kubelet-plugin, test/peers/versions.env) calls that the
// rest of the simulated NVML did not implement; gpunode itself does not call them.
#include "sim/nvml/nvml_abi_more.h"

#define GPUNODE_SIM_DECLARE_DRA(ret, name, params) \
  extern "C" __attribute__((visibility("default"))) ret name params;
GPUNODE_SIM_DRA_FUNCTIONS(GPUNODE_SIM_DECLARE_DRA)
GPUNODE_NVML_FUNCTIONS(GPUNODE_SIM_DECLARE_DRA)  // nvmlInit_v2 (sim/nvml/nvml_api.cc)
#undef GPUNODE_SIM_DECLARE_DRA

// go-nvml's Init() (v0.13.1 and later) calls nvmlInitWithFlags(0). The flags change nothing the
// simulated driver does: it has no attach step, and nvmlInit_v2 already succeeds on a node without
// GPUs (NO_GPUS), so every flag value initialises as nvmlInit_v2 does, reference counted alike.
nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
  (void)flags;
  return nvmlInit_v2();
}
