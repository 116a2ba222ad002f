// GPUs NVML counts but cannot open (lost, no permission, ...): what the PCI bus and the kernel
// driver still tell of them. NVML answers nothing for such a GPU, not even its bus id or UUID,
// but sysfs keeps its PCI function and /proc/driver/nvidia/gpus/<bus>/information its model and
// UUID; nvidia-smi prints the same facts ("GPU 00000000:3A:00.0: GPU is lost").
// Pure functions over what the probes read: the doctor uses them on a NodeInventory, the exporter
// on the bus GPUs read once at start and the identities its samples carry.
#ifndef GPUNODE_NODE_UNREADABLE_GPUS_H_
#define GPUNODE_NODE_UNREADABLE_GPUS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "src/base/status.h"
#include "src/node/inventory.h"

namespace gpunode::node {

// A GPU as the PCI bus and the kernel driver describe it, without NVML.
struct BusGpu {
  std::string pci_bus_id;      // "0000:3a:00.0" (sysfs form: 4-digit domain, lower case)
  std::string model;           // "NVIDIA H100 80GB HBM3" from /proc; "" when unknown
  std::string uuid;            // "GPU-..." from /proc; "" when unknown
  uint16_t pci_device_id = 0;  // from sysfs; 0 when unknown
  std::optional<int> numa_node;
  std::optional<PcieLink> link_current;
  std::optional<PcieLink> link_max;
};

// The GPUs the nvidia kernel driver manages, in PCI bus order (the order NVML numbers them in):
// NVIDIA display/3D functions in sysfs bound to `nvidia` (or whose driver is not known), joined
// with /proc/driver/nvidia/gpus/<bus>/information; when sysfs lists none, the GPUs of
// /proc/driver/nvidia/gpus. GPUs the driver excludes are left out (NVML does not count them).
std::vector<BusGpu> NvidiaGpusOnBus(const HardwareLayer& hardware, const KernelDriverLayer& kernel);

// Which of `bus` the NVML indices in `unreadable` are. NVML numbers the driver's GPUs in PCI bus
// order, so the bus GPUs that no readable GPU claims (`readable_bus_ids`: NVML's or sysfs's form,
// any case) go to the unreadable indices in index order, but only when there are exactly as many
// of them: a GPU gone from sysfs, or one on the bus that NVML does not count, would make the match
// a guess, and then no index is told (the map is empty).
std::map<unsigned, BusGpu> MatchUnreadableGpus(const std::vector<BusGpu>& bus,
                                               const std::vector<std::string>& readable_bus_ids,
                                               const std::vector<unsigned>& unreadable);

// MatchUnreadableGpus over an inventory: its gpu_failures by index.
std::map<unsigned, BusGpu> UnreadableGpusOnBus(const NodeInventory& inv);

// "0000:3a:00.0" from "00000000:3A:00.0" or "0000:3a:00.0" (sysfs form).
std::string SysfsBusId(std::string_view bus_id);

// "lost" when NVML said NVML_ERROR_GPU_IS_LOST, "unreadable" for any other failure.
const char* UnreadableState(const Status& status);
// NVML's words for the failure, without the call that got them: "GPU is lost
// (NVML_ERROR_GPU_IS_LOST)" from "nvmlDeviceGetHandleByIndex_v2(2): GPU is lost
// (NVML_ERROR_GPU_IS_LOST)".
std::string UnreadableReason(const Status& status);

}  // namespace gpunode::node

#endif  // GPUNODE_NODE_UNREADABLE_GPUS_H_
