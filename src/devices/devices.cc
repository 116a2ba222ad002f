#include "src/devices/devices.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"

namespace gpunode::devices {
namespace {

std::optional<int> NumaOf(const node::NodeInventory& inv, const gpu::GpuInfo& g) {
  for (const node::PciDevice& p : inv.hardware.gpus) {
    if (p.bus_id == g.pci_bus_id) return p.numa_node;
  }
  return std::nullopt;
}

// "nvidia.com/mig-2g.20gb" -> "nvidia-mig-2g.20gb.sock"
std::string SocketName(const std::string& resource) {
  std::string s = resource;
  absl::StrReplaceAll({{"nvidia.com/", "nvidia-"}, {"/", "-"}}, &s);
  return s + ".sock";
}

PluginDevice FullGpu(const node::NodeInventory& inv, const gpu::GpuInfo& g, DeviceIdStrategy ids) {
  PluginDevice d;
  d.uuid = g.uuid;
  d.gpu_uuid = g.uuid;
  d.index = absl::StrCat(g.index);
  d.gpu = g.index;
  d.minor = g.minor_number;
  d.numa_node = NumaOf(inv, g);
  d.memory_total_bytes = g.memory_total_bytes;
  d.cc_major = g.cc_major;
  d.cc_minor = g.cc_minor;
  d.base = d.id = d.uuid;
  d.visible = ids == DeviceIdStrategy::kUuid ? d.uuid : d.index;
  return d;
}

PluginDevice MigOf(const node::NodeInventory& inv, const gpu::GpuInfo& g, const gpu::MigDevice& m, DeviceIdStrategy ids) {
  PluginDevice d = FullGpu(inv, g, ids);
  d.mig = true;
  d.uuid = m.uuid;
  d.index = absl::StrCat(g.index, ":", m.index);
  d.base = d.id = d.uuid;
  d.visible = ids == DeviceIdStrategy::kUuid ? d.uuid : d.index;
  return d;
}

// Replicates every device of `r` when the config shares it; renames when asked.
void ApplySharing(const Sharing& sharing, Resource* r) {
  const int replicas = sharing.ReplicasOf(r->name);
  if (replicas <= 1) return;
  std::vector<PluginDevice> out;
  for (const PluginDevice& d : r->devices) {
    for (int i = 0; i < replicas; ++i) {
      PluginDevice copy = d;
      copy.replica = i;
      copy.id = absl::StrCat(d.base, "::", i);
      out.push_back(std::move(copy));
    }
  }
  r->devices = std::move(out);
  r->replicas = replicas;
  r->shared = true;
  if (sharing.rename_by_default) r->name += ".shared";
  r->socket_name = SocketName(r->name);
}

}  // namespace

std::string MigProfileName(const gpu::MigDevice& mig, std::optional<uint64_t> parent_memory_bytes) {
  const uint64_t bytes = mig.memory_total_bytes.value_or(0);
  constexpr uint64_t kGiB = 1024ull * 1024 * 1024;
  uint64_t gb = (bytes + kGiB - 1) / kGiB;
  if (parent_memory_bytes && *parent_memory_bytes > 0 && bytes > 0) {
    double fraction = static_cast<double>(bytes) / static_cast<double>(*parent_memory_bytes);
    fraction = std::ceil(fraction * 8) / 8;
    const double total_gb = static_cast<double>((*parent_memory_bytes + kGiB - 1) / kGiB);
    gb = static_cast<uint64_t>(std::llround(fraction * total_gb));
  }
  return absl::StrCat(mig.slices.value_or(0), "g.", gb, "gb");
}

StatusOr<std::vector<Resource>> BuildResources(const node::NodeInventory& inv, const PluginConfig& config) {
  std::map<std::string, Resource> by_name;
  auto add = [&](const std::string& name, PluginDevice d, const std::string& product) {
    Resource& r = by_name[name];
    r.name = name;
    r.socket_name = SocketName(name);
    if (r.product.empty()) r.product = product;
    r.devices.push_back(std::move(d));
  };
  const auto& gpus = inv.driver.gpus;
  const bool any_mig = std::any_of(gpus.begin(), gpus.end(), [](const gpu::GpuInfo& g) { return g.mig_enabled.value_or(false); });
  const bool all_mig = !gpus.empty() &&
                       std::all_of(gpus.begin(), gpus.end(), [](const gpu::GpuInfo& g) { return g.mig_enabled.value_or(false); });
  if (config.mig_strategy == MigStrategy::kSingle && any_mig && !all_mig) {
    return absl::FailedPreconditionError(
        "MIG strategy single: all devices on the node must be configured with the same migEnabled value "
        "(some GPUs are in MIG mode, some not); use --mig-strategy mixed");
  }
  std::set<std::string> single_profiles;
  for (const gpu::GpuInfo& g : gpus) {
    const bool mig = g.mig_enabled.value_or(false);
    if (!mig || config.mig_strategy == MigStrategy::kNone) {
      add(kGpuResource, FullGpu(inv, g, config.device_id), g.name);
      continue;
    }
    if (g.mig_devices.empty()) {
      if (config.mig_strategy == MigStrategy::kSingle) {
        return absl::FailedPreconditionError(absl::StrCat(
            "MIG strategy single: GPU ", g.index, " is in MIG mode but has no MIG devices; create them "
            "(nvidia-smi mig -cgi ... -C) or disable MIG on it"));
      }
      continue;  // mixed: nothing to offer from it
    }
    for (const gpu::MigDevice& m : g.mig_devices) {
      const std::string profile = MigProfileName(m, g.memory_total_bytes);
      if (config.mig_strategy == MigStrategy::kSingle) {
        single_profiles.insert(profile);
        add(kGpuResource, MigOf(inv, g, m, config.device_id), absl::StrCat(g.name, "-MIG-", profile));
      } else {
        add(absl::StrCat("nvidia.com/mig-", profile), MigOf(inv, g, m, config.device_id),
            absl::StrCat(g.name, "-MIG-", profile));
      }
    }
  }
  if (single_profiles.size() > 1) {
    return absl::FailedPreconditionError(absl::StrCat(
        "MIG strategy single: more than one MIG device type present on node (",
        absl::StrJoin(single_profiles, ", "), "); use --mig-strategy mixed"));
  }
  std::vector<Resource> out;
  for (auto& [name, r] : by_name) {
    ApplySharing(config.sharing, &r);
    for (const PluginDevice& d : r.devices) {
      if (d.id.size() > 63) {
        return absl::FailedPreconditionError(
            absl::StrCat("device ID \"", d.id, "\" is longer than the kubelet's 63 characters"));
      }
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<std::string> DevicePaths(const PluginDevice& d) {
  if (!d.minor) return {};
  return {absl::StrCat("/dev/nvidia", *d.minor)};
}

}  // namespace gpunode::devices
