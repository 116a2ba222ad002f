// The DRA driver's view of this node's devices: what a ResourceSlice announces and what a claim's
// allocation names, with NVIDIA's device names (gpu-<minor>, gpu-<minor>-mig-<profile>-<profile
// id>-<placement start>) so DeviceClasses and claims written for NVIDIA's DRA driver match. Built
// from one node::NodeInventory (DraDevicesOf); the ResourceSlice publisher and the claim preparer
// both read it.
#ifndef GPUNODE_DRA_DEVICE_MODEL_H_
#define GPUNODE_DRA_DEVICE_MODEL_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "src/dra/driver_name.h"
#include "src/node/inventory.h"

namespace gpunode::dra {

struct DraDevice {
  std::string name;         // "gpu-0", "gpu-0-mig-1g10gb-19-0" (a DNS label)
  std::string type;         // "gpu" or "mig" (the `type` attribute DeviceClasses select on)
  std::string uuid;         // "GPU-..." or "MIG-..."
  std::string parent_uuid;  // MIG: the GPU's UUID; "" for a GPU
  unsigned minor = 0;       // the /dev/nvidiaN minor (a MIG device: its parent's)
  unsigned index = 0;       // the NVML index of the GPU (a MIG device: its parent's)
  std::string pci_bus_id;   // "0000:18:00.0" (a MIG device: its parent's)
  // ResourceSlice attributes as the API writes them: name -> {"string": v} | {"int": n} |
  // {"bool": b} | {"version": "1.2.3"}; at most 32 attributes and capacities together.
  std::map<std::string, nlohmann::json> attributes;
  // name -> quantity ("143771Mi", "132").
  std::map<std::string, std::string> capacity;
  bool healthy = true;
};

}  // namespace gpunode::dra

#endif  // GPUNODE_DRA_DEVICE_MODEL_H_
