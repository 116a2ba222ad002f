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
#include "src/base/version.h"
#include "src/dra/driver_name.h"
#include "src/node/inventory.h"

namespace gpunode::dra {

// Device taint keys NVIDIA's driver uses (guides/gpu-health-checking.md): a GPU that fell off the
// bus, a critical XID (value: the XID). Effects: NoSchedule for both, never NoExecute.
inline constexpr char kTaintGpuLost[] = "gpu.nvidia.com/gpu-lost";
inline constexpr char kTaintXid[] = "gpu.nvidia.com/xid";
inline constexpr char kTaintEffectNoSchedule[] = "NoSchedule";
inline constexpr char kTaintEffectNone[] = "None";

// One taint of a device in its ResourceSlice (resource.k8s.io DeviceTaint; the API allows 16 per
// device and, when any device of a slice has one, 64 devices in that slice).
struct DraTaint {
  std::string key;     // a label name: kTaintGpuLost, kTaintXid
  std::string value;   // a label value, may be empty ("79" for XID 79)
  std::string effect;  // "NoSchedule", "None" (or "NoExecute")
  // RFC 3339. Empty: the publisher keeps the time the API server stored for the same taint, or
  // the API server sets it when the taint is new.
  std::string time_added;
  friend bool operator==(const DraTaint&, const DraTaint&) = default;
};

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
  // name -> quantity ("143771Mi", "132"), canonical as the API server writes them back
  // (CanonicalBinaryQuantity), so an unchanged device compares equal to what is stored.
  std::map<std::string, std::string> capacity;
  std::string profile;  // MIG: "1g.18gb" (the `profile` attribute); "" for a GPU
  bool healthy = true;
  std::vector<DraTaint> taints;  // published as the device's taints (none: healthy)
};

// The node's devices as NVIDIA's DRA driver v0.4.1 (gpu-kubelet-plugin, without its DynamicMIG
// gate) announces them: a GPU not in MIG mode as `gpu-<minor>`; a GPU in MIG mode only as its MIG
// devices `gpu-<parent minor>-mig-<profile without dots>-<GI profile id>-<placement start>`; GPUs
// by minor, MIG devices by placement. Attributes (as NVIDIA's, none more): type, uuid,
// productName, brand, architecture (go-nvlib's names), cudaComputeCapability, driverVersion,
// cudaDriverVersion (semantic versions), addressingMode where NVML reports one,
// resource.kubernetes.io/pciBusID and /pcieRoot where known; MIG devices add parentUUID and
// profile and carry their parent's. Capacity: memory; MIG devices add multiprocessors,
// copyEngines, decoders, encoders, jpegEngines, ofaEngines and memorySlice<N> (1 each) for the
// memory slices they occupy. A device that cannot be named (no minor number, a MIG device without
// its GPU instance's profile and placement) is left out and `problems` (when given) says why;
// an attribute NVML did not report is left out.
std::vector<DraDevice> DraDevicesOf(const node::NodeInventory& inv, std::vector<std::string>* problems = nullptr);

// A byte or item count as Kubernetes writes a BinarySI quantity: below 1024 in decimal ("132"),
// else divided by 1024 while it divides evenly, with the suffix of the power ("143771Mi",
// "1536", "2Ki").
std::string CanonicalBinaryQuantity(uint64_t value);

// "580.95.05" -> "580.95.5", "9.0" -> "9.0.0": a semantic version as NVIDIA's driver announces
// versions (Masterminds/semver, leading zeros dropped); "" when `v` has no component.
std::string SemanticVersion(const Version& v);

}  // namespace gpunode::dra

#endif  // GPUNODE_DRA_DEVICE_MODEL_H_
