// gpunode fleet's view of DRA: the ResourceSlices (resource.k8s.io) of each node's GPU driver,
// counted per node — full GPUs, MIG devices, devices tainted NoSchedule/NoExecute — so a node
// served through DRA has an "allocatable" to compare with its GPU count (fleet.h: NodeDra).
//
// A pool is what a driver publishes for a node (gpunode and NVIDIA: one pool per node, named after
// it), possibly over several slices; while it is rewritten, slices of two generations coexist, and
// only the newest generation counts (the scheduler does the same). Everything here is untrusted
// input: types are checked by kube::Fields, counts are bounded by the API's own limits.
#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/base/terminal.h"
#include "src/fleet/fleet.h"
#include "src/kube/json_fields.h"

namespace gpunode::fleet {
namespace {

using kube::Fields;

// resource.k8s.io/v1's limits (ResourceSliceMaxDevices, DeviceTaintsMaxLength), and ours per node.
constexpr size_t kMaxSliceDevices = 128;
constexpr size_t kMaxDeviceTaints = 16;
constexpr size_t kMaxNodeDevices = 4096;

// The versions fleet reads, newest first.
constexpr const char* kSliceVersions[] = {"v1", "v1beta2", "v1beta1"};

// A string attribute ({"string": "gpu"}) named `name`, or `<driver>/<name>`; "" when absent or of
// another type.
StatusOr<std::string> StringAttribute(const Fields& attributes, const std::string& driver, const std::string& name) {
  for (const std::string& key : {name, absl::StrCat(driver, "/", name)}) {
    GPUNODE_ASSIGN_OR_RETURN(Fields a, attributes.Object(key));
    if (!a.present()) continue;
    GPUNODE_ASSIGN_OR_RETURN(std::string v, a.String("string"));
    if (!v.empty()) return v;
  }
  return std::string();
}

}  // namespace

std::string DraDriverOf(const FleetNode& n) { return n.dra_driver.empty() ? kDraGpuDriver : n.dra_driver; }

SliceTally::SliceTally(const std::vector<FleetNode>& nodes) {
  for (const FleetNode& n : nodes) nodes_[n.name].driver = DraDriverOf(n);
}

StatusOr<SliceTally::Device> SliceTally::ReadDevice(const Fields& body, const std::string& name,
                                                    const std::string& driver, const std::string& where,
                                                    std::vector<std::string>* warnings) {
  Device dev;
  GPUNODE_ASSIGN_OR_RETURN(Fields attributes, body.Object("attributes"));
  GPUNODE_ASSIGN_OR_RETURN(const std::string type, StringAttribute(attributes, driver, "type"));
  const size_t mig = name.find("-mig-");
  if (type == "gpu" || (type.empty() && absl::StartsWith(name, "gpu-") && mig == std::string::npos)) {
    dev.kind = 'g';
    dev.gpu = name;
  } else if (type == "mig" || (type.empty() && mig != std::string::npos)) {
    dev.kind = 'm';
    // NVIDIA's names: gpu-<minor>-mig-...; else the parent's UUID.
    if (mig != std::string::npos) {
      dev.gpu = name.substr(0, mig);
    } else {
      GPUNODE_ASSIGN_OR_RETURN(dev.gpu, StringAttribute(attributes, driver, "parentUUID"));
      if (dev.gpu.empty()) dev.gpu = name;
    }
  }
  GPUNODE_ASSIGN_OR_RETURN(Fields taints, body.Array("taints"));
  size_t seen = 0;
  for (const Fields& t : taints.Elements()) {
    if (++seen > kMaxDeviceTaints) {
      warnings->push_back(absl::StrCat(where, ": device ", TerminalSafe(name), " has more than ", kMaxDeviceTaints,
                                       " taints, the API allows ", kMaxDeviceTaints));
      break;
    }
    GPUNODE_ASSIGN_OR_RETURN(Fields taint, t.AsObject());
    DraTaintSeen s;
    s.device = name;
    GPUNODE_ASSIGN_OR_RETURN(s.key, taint.String("key"));
    GPUNODE_ASSIGN_OR_RETURN(s.value, taint.String("value"));
    GPUNODE_ASSIGN_OR_RETURN(s.effect, taint.String("effect"));
    if (s.effect == "NoSchedule" || s.effect == "NoExecute") dev.taints.push_back(std::move(s));
  }
  return dev;
}

Status SliceTally::Add(const nlohmann::json& slice, const std::string& where_in) {
  GPUNODE_ASSIGN_OR_RETURN(Fields root, Fields::Root(slice, where_in));
  GPUNODE_ASSIGN_OR_RETURN(Fields meta, root.Object("metadata"));
  GPUNODE_ASSIGN_OR_RETURN(const std::string name, meta.String("name"));
  const std::string where = absl::StrCat(where_in, " (ResourceSlice \"", TerminalSafe(name), "\")");
  GPUNODE_ASSIGN_OR_RETURN(root, Fields::Root(slice, where));
  GPUNODE_ASSIGN_OR_RETURN(Fields spec, root.Object("spec"));
  GPUNODE_ASSIGN_OR_RETURN(const std::string node_name, spec.String("nodeName"));
  GPUNODE_ASSIGN_OR_RETURN(const std::string driver, spec.String("driver"));
  auto node = nodes_.find(node_name);
  if (node_name.empty() || node == nodes_.end() || driver != node->second.driver) return absl::OkStatus();
  PerNode& per = node->second;

  GPUNODE_ASSIGN_OR_RETURN(Fields pool, spec.Object("pool"));
  GPUNODE_ASSIGN_OR_RETURN(const std::string pool_name, pool.String("name"));
  GPUNODE_ASSIGN_OR_RETURN(const std::optional<int64_t> generation, pool.Int("generation"));
  Pool& p = per.pools[pool_name];
  const int64_t gen = generation.value_or(0);
  if (gen < p.generation) return absl::OkStatus();  // an older generation, being replaced
  if (gen > p.generation) {
    per.devices -= p.devices.size();
    p = Pool{};
    p.generation = gen;
  }
  ++p.slices;

  GPUNODE_ASSIGN_OR_RETURN(Fields devices, spec.Array("devices"));
  std::vector<Fields> elements;
  if (devices.present()) {
    const size_t n = devices.json().size();
    if (n > kMaxSliceDevices) {
      per.warnings.push_back(absl::StrCat(where, ": spec.devices has ", n, " devices, the API allows ",
                                          kMaxSliceDevices, ": the first ", kMaxSliceDevices, " counted"));
    }
    elements = devices.Elements();
    if (elements.size() > kMaxSliceDevices) elements.erase(elements.begin() + kMaxSliceDevices, elements.end());
  }
  for (const Fields& element : elements) {
    GPUNODE_ASSIGN_OR_RETURN(Fields d, element.AsObject());
    GPUNODE_ASSIGN_OR_RETURN(std::string device_name, d.String("name"));
    if (device_name.empty()) return d.Error("a device without a name");
    // v1beta1 keeps attributes and taints under `basic`.
    GPUNODE_ASSIGN_OR_RETURN(Fields basic, d.Object("basic"));
    const Fields& body = basic.present() ? basic : d;
    if (p.devices.count(device_name) > 0) continue;  // a name twice in a pool: the first counts
    if (per.devices >= kMaxNodeDevices) {
      per.warnings.push_back(absl::StrCat(where, ": node ", TerminalSafe(node_name), " has more than ",
                                          kMaxNodeDevices, " devices of ", driver, ": the rest not counted"));
      break;
    }
    GPUNODE_ASSIGN_OR_RETURN(Device dev, ReadDevice(body, device_name, driver, where, &per.warnings));
    p.devices.emplace(std::move(device_name), std::move(dev));
    ++per.devices;
  }
  return absl::OkStatus();
}

void SliceTally::Apply(std::vector<FleetNode>& nodes) const {
  for (FleetNode& n : nodes) {
    NodeDra d;
    d.listed = true;
    auto it = nodes_.find(n.name);
    if (it == nodes_.end()) {
      d.driver = DraDriverOf(n);
      n.dra = std::move(d);
      continue;
    }
    const PerNode& per = it->second;
    d.driver = per.driver;
    d.warnings = per.warnings;
    std::set<std::string> published, allocatable;
    for (const auto& [pool_name, pool] : per.pools) {
      d.slices += pool.slices;
      for (const auto& [name, dev] : pool.devices) {
        (dev.kind == 'g' ? d.gpus : dev.kind == 'm' ? d.mig_devices : d.other_devices)++;
        if (!dev.taints.empty()) {
          ++d.tainted_devices;
          for (const DraTaintSeen& t : dev.taints) {
            if (d.taints.size() < kMaxDraTaintsKept) d.taints.push_back(t);
          }
        }
        if (dev.kind == 'o') continue;
        const std::string gpu = absl::StrCat(pool_name, "/", dev.gpu);
        published.insert(gpu);
        if (dev.taints.empty()) allocatable.insert(gpu);
      }
    }
    d.gpus_published = static_cast<int64_t>(published.size());
    d.gpus_allocatable = static_cast<int64_t>(allocatable.size());
    // Slices of the GPU driver are a sign of GPUs where no label says so.
    if (d.present()) n.has_gpus = true;
    n.dra = std::move(d);
  }
}

StatusOr<SliceListing> ListResourceSlices(kube::Client& client, std::vector<FleetNode>& nodes,
                                          const ListNodesOptions& options) {
  SliceListing out;
  Status last;
  for (const char* version : kSliceVersions) {
    const std::string path = absl::StrCat("/apis/resource.k8s.io/", version, "/resourceslices");
    auto read = [&](const std::string& resource_version) -> StatusOr<SliceTally> {
      SliceTally t(nodes);
      kube::ListOptions lo;
      lo.limit = options.limit;
      lo.resource_version = resource_version;
      lo.max_pages = options.max_pages;
      size_t i = 0;
      auto listed = client.List(path, lo, [&](nlohmann::json& item) -> Status {
        return t.Add(item, absl::StrCat("GET ", path, ": items[", i++, "]"));
      });
      if (!listed.ok()) return listed.status();
      return t;
    };
    StatusOr<SliceTally> tally = absl::UnknownError("not read");
    if (options.from_cache) tally = read("0");
    if (!options.from_cache || absl::IsResourceExhausted(tally.status())) tally = read("");
    if (tally.ok()) {
      tally->Apply(nodes);
      out.api_version = absl::StrCat("resource.k8s.io/", version);
      return out;
    }
    if (absl::IsPermissionDenied(tally.status())) {
      out.notes.push_back(absl::StrCat("ResourceSlices not read (", tally.status().message(),
                                       "): DRA devices are not counted; fleet needs list on "
                                       "resourceslices.resource.k8s.io"));
      return out;
    }
    if (!absl::IsNotFound(tally.status())) return tally.status();
    last = tally.status();
  }
  out.notes.push_back(absl::StrCat("the API server serves no ResourceSlices (resource.k8s.io v1, v1beta2, v1beta1: ",
                                   last.message(), "): DRA devices are not counted"));
  return out;
}

}  // namespace gpunode::fleet
