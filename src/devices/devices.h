// The node's device set, protocol-neutral (no kubelet or gRPC type): BuildResources():
// node::NodeInventory + PluginConfig -> one resource per name ("nvidia.com/gpu",
// "nvidia.com/mig-2g.20gb", "nvidia.com/gpu.shared") with its devices: IDs by the ID strategy (UUID
// or index), MIG devices by the MIG strategy, time-slicing/MPS replicas "<id>::<n>", NUMA node.
// The kubelet's device plugin (src/deviceplugin) serves them; a DRA driver would publish them.
// Facts: shared/reference/device-plugin.md §1.3-§1.5, §1.8.
#ifndef GPUNODE_DEVICES_DEVICES_H_
#define GPUNODE_DEVICES_DEVICES_H_

#include <optional>
#include <string>
#include <vector>

#include "src/base/status.h"
#include "src/base/well_known.h"
#include "src/devices/config.h"
#include "src/gpu/gpu.h"
#include "src/node/inventory.h"

namespace gpunode::devices {

inline constexpr const auto& kGpuResource = wellknown::kResourceGpu;

struct PluginDevice {
  std::string id;     // the kubelet's ID: "GPU-...", "MIG-...", "GPU-...::3"
  std::string base;   // the ID without the replica suffix: the GPU or MIG UUID
  std::string visible;  // what NVIDIA_VISIBLE_DEVICES and volume mounts get: UUID or index, by
                        // the device ID strategy (as NVIDIA's plugin, the kubelet's IDs stay UUIDs)
  std::string uuid;   // GPU or MIG UUID
  std::string index;  // "0", or "0:1" for MIG device 1 of GPU 0
  unsigned gpu = 0;   // index of the (parent) GPU in inventory.driver.gpus
  std::string gpu_uuid;
  std::optional<unsigned> minor;  // the parent GPU's /dev/nvidia<minor>
  std::optional<int> numa_node;
  bool mig = false;
  int replica = -1;  // -1: not replicated; else 0..replicas-1
  // The (parent) GPU's memory and compute capability: MPS's pinned-memory limit per replica and
  // its client limit (src/devices/mps.h).
  std::optional<uint64_t> memory_total_bytes;
  std::optional<int> cc_major;
  std::optional<int> cc_minor;
};

struct Resource {
  std::string name;         // "nvidia.com/gpu"
  std::string socket_name;  // "nvidia-gpu.sock" (in the kubelet's device-plugin directory)
  int replicas = 1;
  bool shared = false;      // replicated: time-sliced or MPS (config.sharing.strategy says which)
  std::string product;      // model of its devices, for logs and labels
  std::vector<PluginDevice> devices;
};

// "2g.20gb": slices and memory in GB as NVIDIA names MIG profiles (go-nvlib's rule: the device's
// share of the parent's memory, rounded up to eighths, times the parent's memory in whole GiB,
// rounded), so an H200's 1g.18gb is not called 1g.17gb. Without the parent's memory: GiB rounded up.
std::string MigProfileName(const gpu::MigDevice& mig, std::optional<uint64_t> parent_memory_bytes = std::nullopt);

// Fails (FailedPrecondition) on configurations NVIDIA's plugin refuses: MIG `single` with mixed
// MIG profiles or with some GPUs in MIG mode and some not; IDs over 63 characters.
StatusOr<std::vector<Resource>> BuildResources(const node::NodeInventory& inv, const PluginConfig& config);

// The device files of a device on the host: /dev/nvidia<minor> (MIG capability nodes are not
// listed: CDI strategies carry them).
std::vector<std::string> DevicePaths(const PluginDevice& d);

}  // namespace gpunode::devices

#endif  // GPUNODE_DEVICES_DEVICES_H_
