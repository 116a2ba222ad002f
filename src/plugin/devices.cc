#include "src/plugin/devices.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "src/plugin/mps.h"

namespace gpunode::plugin {
namespace {

constexpr char kVolumeMountRoot[] = "/var/run/nvidia-container-devices";
constexpr char kAnnotationPlugin[] = "gpunode-device-plugin";

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

// What a container needs to be an MPS client of the resource's daemon (see the header).
void AddMpsToResponse(const Resource& resource, const PluginConfig& config,
                      const std::vector<const PluginDevice*>& physical, v1beta1::ContainerAllocateResponse* r) {
  const std::string root = MpsRootOf(config);
  const std::string pipe = MpsContainerPipeDir(resource.name);
  auto& envs = *r->mutable_envs();
  envs["CUDA_MPS_PIPE_DIRECTORY"] = pipe;
  envs["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = absl::StrCat(MpsActiveThreadPercentage(resource.replicas));
  std::vector<std::string> limits;
  for (size_t i = 0; i < physical.size(); ++i) {
    if (auto limit = MpsPinnedMemLimit(*physical[i], resource.replicas)) limits.push_back(absl::StrCat(i, "=", *limit));
  }
  if (!limits.empty()) envs["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] = absl::StrJoin(limits, ",");
  v1beta1::Mount* m = r->add_mounts();
  m->set_container_path(pipe);
  m->set_host_path(MpsPipeDir(root, resource.name));
  m = r->add_mounts();
  m->set_container_path("/dev/shm");
  m->set_host_path(MpsShmDir(root));
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

StatusOr<v1beta1::ContainerAllocateResponse> BuildAllocateResponse(const Resource& resource,
                                                                    const PluginConfig& config,
                                                                    const std::vector<std::string>& ids,
                                                                    const std::vector<std::string>& control_nodes) {
  std::vector<const PluginDevice*> devices;
  std::vector<std::string> unknown;
  for (const std::string& id : ids) {
    auto it = std::find_if(resource.devices.begin(), resource.devices.end(),
                           [&](const PluginDevice& d) { return d.id == id; });
    if (it == resource.devices.end()) {
      unknown.push_back(id);
    } else {
      devices.push_back(&*it);
    }
  }
  if (!unknown.empty()) {
    std::vector<std::string> offered;
    for (const PluginDevice& d : resource.devices) {
      if (offered.size() == 8) {
        offered.push_back("...");
        break;
      }
      offered.push_back(d.id);
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown device ID(s) for ", resource.name, ": ", absl::StrJoin(unknown, ", "), " (this plugin offers ",
        absl::StrJoin(offered, ", "), "); the kubelet's view is stale: restart the kubelet or the plugin"));
  }
  if (resource.shared && config.sharing.fail_requests_greater_than_one && ids.size() > 1) {
    return absl::InvalidArgumentError(absl::StrCat("request for '", resource.name, ": ", ids.size(),
                                                   "' too large: maximum request size for shared resources is 1"));
  }
  // The physical devices, once each (replicas of one GPU collapse), in request order.
  std::vector<const PluginDevice*> physical;
  for (const PluginDevice* d : devices) {
    if (std::none_of(physical.begin(), physical.end(), [&](const PluginDevice* p) { return p->base == d->base; })) {
      physical.push_back(d);
    }
  }
  std::vector<std::string> bases;
  for (const PluginDevice* d : physical) bases.push_back(d->visible);

  v1beta1::ContainerAllocateResponse r;
  if (resource.shared && config.sharing.strategy == SharingStrategy::kMps) {
    AddMpsToResponse(resource, config, physical, &r);
  }
  const DeviceListStrategy& s = config.device_list;
  if (s.cdi_annotations || s.cdi_cri) {
    std::vector<std::string> names;
    for (const PluginDevice* d : physical) {
      // `gpunode cdi generate` names every device by index ("0", "0:1") and by UUID.
      names.push_back(absl::StrCat(config.cdi_kind, "=", d->uuid));
    }
    if (s.cdi_annotations) {
      (*r.mutable_annotations())[absl::StrCat(config.cdi_annotation_prefix, kAnnotationPlugin, "_",
                                              physical.empty() ? "none" : physical.front()->uuid)] =
          absl::StrJoin(names, ",");
    }
    if (s.cdi_cri) {
      for (const std::string& n : names) r.add_cdi_devices()->set_name(n);
    }
  }
  if (s.envvar) {
    (*r.mutable_envs())["NVIDIA_VISIBLE_DEVICES"] = absl::StrJoin(bases, ",");
  } else if (s.volume_mounts) {
    (*r.mutable_envs())["NVIDIA_VISIBLE_DEVICES"] = kVolumeMountRoot;
  }
  if (s.volume_mounts) {
    for (const std::string& b : bases) {
      v1beta1::Mount* m = r.add_mounts();
      m->set_host_path("/dev/null");
      m->set_container_path(absl::StrCat(kVolumeMountRoot, "/", b));
    }
  }
  if (config.pass_device_specs) {
    const std::string dev_root = config.dev_root.empty() ? config.driver_root : config.dev_root;
    auto host = [&](const std::string& p) {
      return dev_root == "/" || dev_root.empty() ? p : absl::StrCat(absl::StripSuffix(dev_root, "/"), p);
    };
    std::set<std::string> seen;
    auto spec = [&](const std::string& p) {
      if (!seen.insert(p).second) return;
      v1beta1::DeviceSpec* d = r.add_devices();
      d->set_container_path(p);
      d->set_host_path(host(p));
      d->set_permissions("rw");
    };
    for (const PluginDevice* d : physical) {
      for (const std::string& p : DevicePaths(*d)) spec(p);
    }
    for (const std::string& p : control_nodes) spec(p);
  }
  return r;
}

}  // namespace gpunode::plugin
