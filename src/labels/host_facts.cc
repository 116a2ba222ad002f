#include "src/labels/host_facts.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace gpunode::labels {

// The DMI product name (GFD's nvidia.com/gpu.machine), through the host root.
std::string MachineType(const HostFs& fs, const std::string& path, std::string* warning) {
  if (path.empty()) return "unknown";
  auto text = fs.ReadFile(path, 4096);
  if (!text.ok()) {
    *warning = absl::StrCat("machine type: ", text.status().message(),
                            " (nvidia.com/gpu.machine=unknown)");
    return "unknown";
  }
  std::string t(absl::StripAsciiWhitespace(*text));
  return t.empty() ? "unknown" : t;
}

// GFD's vGPU detection: the configuration space of every NVIDIA PCI function, through the host
// root. nullopt (no vgpu labels, a warning) when one cannot be read whole, as GFD.
std::optional<VgpuInfo> ReadVgpu(const HostFs& fs, std::string* warning) {
  constexpr char kDevices[] = "/sys/bus/pci/devices";
  auto names = fs.ListDir(kDevices);
  if (!names.ok()) {
    *warning = absl::StrCat("vGPU: ", names.status().message(), " (no nvidia.com/vgpu labels)");
    return std::nullopt;
  }
  std::sort(names->begin(), names->end());
  VgpuInfo info;
  for (const std::string& name : *names) {
    const std::string dir = absl::StrCat(kDevices, "/", name);
    auto vendor = fs.ReadLine(dir + "/vendor");
    if (!vendor.ok() || absl::StripAsciiWhitespace(*vendor) != "0x10de") continue;
    auto config = fs.ReadFile(dir + "/config", 4096);
    if (!config.ok()) {  // unreadable (or absent): no answer, not "a vGPU"
      *warning = absl::StrCat("vGPU: ", name, ": ", config.status().message(), " (no nvidia.com/vgpu labels)");
      return std::nullopt;
    }
    StatusOr<std::optional<VgpuHost>> host = ParseVgpuConfigSpace(*config);
    if (!host.ok() && host.status().code() != absl::StatusCode::kNotFound) {
      *warning = absl::StrCat("vGPU: ", name, ": ", host.status().message(),
                              " (no nvidia.com/vgpu labels)");
      return std::nullopt;
    }
    if (!host.ok()) {  // a vGPU whose host driver record is missing
      info.present = true;
      *warning = absl::StrCat("vGPU: ", name, ": ", host.status().message());
      continue;
    }
    if (!host->has_value()) continue;
    info.present = true;
    info.host = **host;
  }
  return info;
}

}  // namespace gpunode::labels
