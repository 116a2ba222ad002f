// Turns a NodeInventory into a node profile (the schema of docs/profiles.md), so that what a
// real node reported can be replayed by the simulator: `gpunode sim capture > node.yaml`.
#ifndef GPUNODE_NODE_CAPTURE_H_
#define GPUNODE_NODE_CAPTURE_H_

#include <string>

#include "nlohmann/json.hpp"
#include "src/node/inventory.h"

namespace gpunode::node {

// The profile as an ordered document (apiVersion, kind, name, description, host, driver, gpus).
// Fields NVML did not report become `unsupported` entries. GPUs NVML cannot open are left out.
nlohmann::ordered_json CaptureProfile(const NodeInventory& inv, const std::string& name,
                                      const std::string& description);

}  // namespace gpunode::node

#endif  // GPUNODE_NODE_CAPTURE_H_
