// The facts GFD's labels take from host files rather than NVML, read through the host root: the
// machine type (DMI product name) and vGPU (each NVIDIA function's PCI configuration space).
#ifndef GPUNODE_LABELS_HOST_FACTS_H_
#define GPUNODE_LABELS_HOST_FACTS_H_

#include <optional>
#include <string>

#include "src/base/host_fs.h"
#include "src/labels/labels.h"

namespace gpunode::labels {

// The DMI product name (GFD's nvidia.com/gpu.machine) from `path` below the host root; "unknown"
// (and a warning) when it cannot be read, "unknown" without one when `path` is empty.
std::string MachineType(const HostFs& fs, const std::string& path, std::string* warning);

// GFD's vGPU detection over /sys/bus/pci/devices; nullopt (no vgpu labels) and a warning when a
// configuration space cannot be read whole, as GFD.
std::optional<VgpuInfo> ReadVgpu(const HostFs& fs, std::string* warning);

}  // namespace gpunode::labels

#endif  // GPUNODE_LABELS_HOST_FACTS_H_
