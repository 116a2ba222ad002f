// The OCI shim's requirement check: a container that gets GPUs is refused when its process
// environment's NVIDIA_REQUIRE_* (and the legacy CUDA_VERSION rule) fail on this node, as
// NVIDIA's hook does through `nvidia-container-cli configure --require` (libnvidia-container
// src/cli/configure.c), unless NVIDIA_DISABLE_REQUIRE is true (strconv.ParseBool). The language
// and its evaluation are compat's (src/compat/requirement.h), so `compat check` agrees.
#ifndef GPUNODE_CONTAINER_OCI_REQUIRE_H_
#define GPUNODE_CONTAINER_OCI_REQUIRE_H_

#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "src/base/status.h"
#include "src/compat/requirement.h"
#include "src/node/inventory.h"

namespace gpunode::container {

// The container's requirements from config.json's process.env. InvalidArgument for a term that
// does not parse (the container is refused, as NVIDIA's hook refuses an "invalid expression").
StatusOr<compat::ImageRequirements> ContainerRequirements(const nlohmann::ordered_json& config);

// The node facts of the GPUs a container gets: the driver and CUDA versions NVML reports, and the
// brand and compute capability of each GPU named by the injected devices ("nvidia.com/gpu=0",
// "=GPU-<uuid>", "=all", MIG "=0:1" or "=MIG-<uuid>": its parent GPU). Names it cannot place are
// left out (evaluated without device, as libnvidia-container with none visible).
compat::ReqFacts FactsForDevices(const node::NodeInventory& inv, const std::vector<std::string>& injected);

// FailedPrecondition with every failed term in words when `reqs` fail on `facts`, else OK.
Status CheckRequirements(const compat::ImageRequirements& reqs, const compat::ReqFacts& facts);

}  // namespace gpunode::container

#endif  // GPUNODE_CONTAINER_OCI_REQUIRE_H_
