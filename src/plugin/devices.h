// What the device plugin advertises and how it answers Allocate, as pure functions:
//  - BuildResources(): node::NodeInventory + PluginConfig -> one resource per name ("nvidia.com/gpu",
//    "nvidia.com/mig-2g.20gb", "nvidia.com/gpu.shared") with its devices: IDs by the ID strategy
//    (UUID or index), MIG devices by the MIG strategy, time-slicing replicas "<id>::<n>", NUMA node.
//  - BuildAllocateResponse(): one container's device IDs -> the kubelet's response for the
//    configured device-list strategies (env var, volume mounts, CDI annotations, CDI devices,
//    device specs). Facts: shared/reference/device-plugin.md §1.3-§1.5, §1.8.
#ifndef GPUNODE_PLUGIN_DEVICES_H_
#define GPUNODE_PLUGIN_DEVICES_H_

#include <optional>
#include <string>
#include <vector>

#include "deviceplugin/v1beta1/api.pb.h"
#include "src/base/status.h"
#include "src/gpu/gpu.h"
#include "src/node/inventory.h"
#include "src/plugin/config.h"

namespace gpunode::plugin {

inline constexpr char kGpuResource[] = "nvidia.com/gpu";
inline constexpr char kHealthy[] = "Healthy";
inline constexpr char kUnhealthy[] = "Unhealthy";

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
  // its client limit (src/plugin/mps.h).
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

// One container's response. Unknown IDs are InvalidArgument naming them and what this resource
// offers; more than one replica with failRequestsGreaterThanOne is InvalidArgument with NVIDIA's
// wording. `control_nodes` are the host's /dev/nvidiactl, /dev/nvidia-uvm... that exist (for
// passDeviceSpecs). An MPS-shared resource adds, whatever the device-list strategy (as NVIDIA's
// plugin does): env CUDA_MPS_PIPE_DIRECTORY=/mps/<resource>/pipe, mounts of the host's
// <mpsRoot>/<resource>/pipe there and of <mpsRoot>/shm at /dev/shm; and, beyond NVIDIA, the
// per-replica limits the daemon also has as defaults: CUDA_MPS_ACTIVE_THREAD_PERCENTAGE (100 /
// replicas) and CUDA_MPS_PINNED_DEVICE_MEM_LIMIT ("0=71680M,1=...": memory / replicas in MiB,
// per device in the order of the response, GPUs of unknown memory left out).
StatusOr<v1beta1::ContainerAllocateResponse> BuildAllocateResponse(
    const Resource& resource, const PluginConfig& config, const std::vector<std::string>& ids,
    const std::vector<std::string>& control_nodes);

}  // namespace gpunode::plugin

#endif  // GPUNODE_PLUGIN_DEVICES_H_
