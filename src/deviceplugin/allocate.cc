#include "src/deviceplugin/allocate.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "src/devices/mps.h"

namespace gpunode::deviceplugin {
namespace {

using devices::DeviceListStrategy;
using devices::DevicePaths;
using devices::MpsActiveThreadPercentage;
using devices::MpsContainerPipeDir;
using devices::MpsPinnedMemLimit;
using devices::MpsPipeDir;
using devices::MpsRootOf;
using devices::MpsShmDir;
using devices::PluginConfig;
using devices::PluginDevice;
using devices::Resource;
using devices::SharingStrategy;

constexpr char kVolumeMountRoot[] = "/var/run/nvidia-container-devices";
constexpr char kAnnotationPlugin[] = "gpunode-device-plugin";

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

}  // namespace gpunode::deviceplugin
