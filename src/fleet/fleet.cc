#include "src/fleet/fleet.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "src/base/json.h"
#include "src/base/terminal.h"
#include "src/kube/json_fields.h"

namespace gpunode::fleet {
namespace {

bool Keep(const std::string& key) {
  return absl::StartsWith(key, kNvidiaPrefix) || absl::StartsWith(key, kGpunodePrefix) ||
         key == kLabelNfdNvidiaPci;
}

// A label's integer value; a malformed one is recorded as a warning on the node.
std::optional<int64_t> IntLabel(FleetNode& n, const char* key) {
  auto it = n.labels.find(key);
  if (it == n.labels.end()) return std::nullopt;
  int64_t v = 0;
  if (!absl::SimpleAtoi(it->second, &v) || v < 0) {
    n.warnings.push_back(absl::StrCat(key, "=\"", it->second, "\" is not a count"));
    return std::nullopt;
  }
  return v;
}

std::string Label(const FleetNode& n, const char* key) {
  auto it = n.labels.find(key);
  return it == n.labels.end() ? std::string() : it->second;
}

// A quantity of an extended resource: a whole number ("8"); the API server also accepts "8k" etc.,
// which no device plugin advertises for GPUs.
std::optional<int64_t> Quantity(const nlohmann::json& v) {
  if (v.is_number_integer()) return v.get<int64_t>();
  if (!v.is_string()) return std::nullopt;
  const std::string& s = v.get_ref<const std::string&>();
  int64_t n = 0;
  if (absl::SimpleAtoi(s, &n) && n >= 0) return n;
  return std::nullopt;
}

// status.capacity or status.allocatable (an object, or null when absent).
void ReadResources(const nlohmann::json& resources, const char* field, FleetNode& n,
                   std::map<std::string, int64_t>* out) {
  if (!resources.is_object()) return;
  for (const auto& [key, value] : resources.items()) {
    if (!absl::StartsWith(key, "nvidia.com/")) continue;
    std::optional<int64_t> q = Quantity(value);
    if (!q) {
      n.warnings.push_back(absl::StrCat("status.", field, "[", key, "] is not a whole number: ",
                                        DumpJson(value)));
      continue;
    }
    (*out)[key] = *q;
  }
}


// The GPUs the node has, whatever it advertises: gpunode's healthy + unhealthy counts (which
// include GPUs NVML lost), GFD's nvidia.com/gpu.count (not when the product is a MIG profile under
// the `single` strategy: that count is of MIG devices), else the advertised capacity.
void DerivePhysical(FleetNode& n) {
  std::optional<int64_t> best;
  if (n.healthy_gpus && n.unhealthy_gpus) best = *n.healthy_gpus + *n.unhealthy_gpus;
  const bool mig_product = absl::StrContains(n.product, "-MIG-");
  if (std::optional<int64_t> count = IntLabel(n, kLabelGpuCount); count && !mig_product) {
    best = std::max(best.value_or(0), *count);
  }
  if (!best) {
    const int64_t cap = n.Capacity(kResourceGpu);
    if (cap > 0) best = cap / std::max<int64_t>(1, n.replicas);
  }
  n.physical_gpus = best;
}

void Derive(FleetNode& n) {
  for (const auto& [key, value] : n.labels) {
    if (absl::StartsWith(key, kGpunodePrefix)) n.has_agent_labels = true;
  }
  n.product = Label(n, kLabelGpuProduct);
  n.model = n.product;
  if (size_t mig = n.model.find("-MIG-"); mig != std::string::npos) n.model.resize(mig);
  if (absl::EndsWith(n.model, "-SHARED")) n.model.resize(n.model.size() - 7);
  n.family = Label(n, kLabelGpuFamily);
  n.cuda_max = Label(n, kLabelCudaMax);
  n.kernel_module = Label(n, kLabelKernelModule);
  n.agent_version = Label(n, kLabelAgentVersion);
  n.doctor_status = Label(n, kLabelDoctorStatus);
  n.doctor_first = Label(n, kLabelDoctorFirst);
  n.dra_driver = Label(n, kLabelDraDriver);
  if (std::string d = Label(n, kLabelDriverVersion); !d.empty()) {
    auto v = Version::Parse(d, kLabelDriverVersion);
    if (v.ok()) {
      n.driver = *v;
    } else {
      n.warnings.push_back(std::string(v.status().message()));
    }
  }
  n.branch = Label(n, kLabelBranch);
  if (n.branch.empty() && n.driver) n.branch = absl::StrCat(n.driver->major());
  n.healthy_gpus = IntLabel(n, kLabelHealthy);
  n.unhealthy_gpus = IntLabel(n, kLabelUnhealthy);
  n.mig_strategy = Label(n, kLabelMigStrategy);
  const std::string sharing = Label(n, kLabelSharingStrategy);
  if (!sharing.empty() && sharing != "none") {
    n.sharing = sharing;
    if (std::optional<int64_t> r = IntLabel(n, kLabelGpuReplicas); r && *r > 1) n.replicas = *r;
  }
  DerivePhysical(n);
  bool advertised = false;
  for (const auto& [key, value] : n.capacity) advertised = advertised || value > 0;
  n.has_gpus = Label(n, kLabelGpuPresent) == "true" || Label(n, kLabelNfdNvidiaPci) == "true" ||
               !n.product.empty() || advertised || n.physical_gpus.value_or(0) > 0;
}

}  // namespace

int64_t FleetNode::Allocatable(const std::string& resource) const {
  auto it = allocatable.find(resource);
  return it == allocatable.end() ? 0 : it->second;
}

int64_t FleetNode::Capacity(const std::string& resource) const {
  auto it = capacity.find(resource);
  return it == capacity.end() ? 0 : it->second;
}

absl::string_view SeverityName(Severity s) {
  switch (s) {
    case Severity::kInfo: return "info";
    case Severity::kWarning: return "warning";
    case Severity::kError: return "error";
  }
  return "?";
}

StatusOr<FleetNode> ParseNode(const nlohmann::json& node, const std::string& where) {
  using kube::Fields;
  if (!node.is_object()) return absl::InvalidArgumentError(absl::StrCat(where, ": not an object"));
  GPUNODE_ASSIGN_OR_RETURN(Fields root, Fields::Root(node, where));
  FleetNode n;
  GPUNODE_ASSIGN_OR_RETURN(Fields meta, root.Object("metadata"));
  if (!meta.present()) return absl::InvalidArgumentError(absl::StrCat(where, ": a Node without metadata"));
  GPUNODE_ASSIGN_OR_RETURN(n.name, meta.String("name"));
  if (n.name.empty()) return absl::InvalidArgumentError(absl::StrCat(where, ": a Node without metadata.name"));
  GPUNODE_ASSIGN_OR_RETURN(auto labels, meta.StringMap("labels"));
  for (auto& [key, value] : labels) {
    if (Keep(key)) n.labels[key] = std::move(value);
  }
  // One annotation, read leniently: fleet reads no other, and a Node's annotations do not decide
  // whether it loads.
  if (auto ann = meta.json().find("annotations"); ann != meta.json().end() && ann->is_object()) {
    auto it = ann->find(kAnnoUpgradeReason);
    if (it != ann->end() && it->is_string()) n.upgrade_reason = CutText(it->get<std::string>(), kMaxUpgradeTextBytes);
  }
  GPUNODE_ASSIGN_OR_RETURN(Fields spec, root.Object("spec"));
  GPUNODE_ASSIGN_OR_RETURN(n.unschedulable, spec.Bool("unschedulable"));
  GPUNODE_ASSIGN_OR_RETURN(Fields status, root.Object("status"));
  for (const char* field : {"capacity", "allocatable"}) {
    GPUNODE_ASSIGN_OR_RETURN(Fields resources, status.Object(field));
    ReadResources(resources.json(), field, n, field[0] == 'c' ? &n.capacity : &n.allocatable);
  }
  GPUNODE_ASSIGN_OR_RETURN(Fields conds, status.Array("conditions"));
  for (const Fields& element : conds.Elements()) {
    if (!element.present()) continue;  // a null entry: nothing
    GPUNODE_ASSIGN_OR_RETURN(Fields c, element.AsObject());
    GPUNODE_ASSIGN_OR_RETURN(const std::string type, c.String("type"));
    Condition* target = type == "Ready" ? &n.ready : type == kConditionGpuStackReady ? &n.gpu_stack : nullptr;
    if (target == nullptr) continue;
    target->present = true;
    GPUNODE_ASSIGN_OR_RETURN(target->status, c.String("status"));
    GPUNODE_ASSIGN_OR_RETURN(target->reason, c.String("reason"));
    GPUNODE_ASSIGN_OR_RETURN(target->message, c.String("message"));
  }
  Derive(n);
  return n;
}

namespace {

constexpr char kResourceSlice[] = "ResourceSlice";
constexpr char kNvidiaDriver[] = "NVIDIADriver";

// A List's item that is not a Node (kubectl's `List` may hold other kinds); `also` says whether
// the other kinds a saved List may hold (ResourceSlice, NVIDIADriver) are accepted. The item's kind
// ("" when it has none: a Node of a NodeList).
StatusOr<std::string> CheckItemKind(const nlohmann::json& item, const std::string& where, bool also = false) {
  if (!item.is_object()) return std::string();  // ParseNode says what it is
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields f, kube::Fields::Root(item, where));
  GPUNODE_ASSIGN_OR_RETURN(std::string kind, f.String("kind"));
  if (kind.empty() || kind == "Node" || (also && (kind == kResourceSlice || kind == kNvidiaDriver))) return kind;
  return absl::InvalidArgumentError(absl::StrCat(where, " is a ", TerminalSafe(kind.substr(0, 64)), ", not a Node",
                                                 also ? ", a ResourceSlice or an NVIDIADriver" : ""));
}

}  // namespace

StatusOr<std::vector<FleetNode>> ParseNodeList(const nlohmann::json& list, const std::string& source) {
  GPUNODE_ASSIGN_OR_RETURN(FleetInput in, ParseFleetList(list, source));
  return std::move(in.nodes);
}

StatusOr<FleetInput> ParseFleetList(const nlohmann::json& list, const std::string& source) {
  if (!list.is_object()) return absl::InvalidArgumentError(absl::StrCat(source, ": not a NodeList (not a JSON object)"));
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields root, kube::Fields::Root(list, source));
  GPUNODE_ASSIGN_OR_RETURN(const std::string kind, root.String("kind"));
  if (!kind.empty() && kind != "NodeList" && kind != "List") {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": kind \"", kind, "\", expected a NodeList (GET /api/v1/nodes, kubectl get nodes -o json)"));
  }
  auto items = list.find("items");
  if (items == list.end() || !(items->is_array() || items->is_null())) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": not a NodeList: no \"items\" array"));
  }
  FleetInput in;
  std::vector<FleetNode>& nodes = in.nodes;
  if (items->is_null()) return in;  // the API server writes null for an empty list
  nodes.reserve(items->size());
  std::set<std::string> names, drivers;
  std::vector<size_t> slices;  // the items that are ResourceSlices
  size_t i = 0;
  for (const nlohmann::json& item : *items) {
    const std::string where = absl::StrCat(source, ": items[", i, "]");
    GPUNODE_ASSIGN_OR_RETURN(const std::string item_kind, CheckItemKind(item, where, /*also=*/true));
    if (item_kind == kResourceSlice) {
      slices.push_back(i++);
      continue;
    }
    if (item_kind == kNvidiaDriver) {
      GPUNODE_ASSIGN_OR_RETURN(NvidiaDriverInfo d, ParseNvidiaDriver(item, where));
      if (!drivers.insert(d.name).second) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": NVIDIADriver \"", TerminalSafe(d.name), "\" appears twice"));
      }
      if (drivers.size() > kMaxNvidiaDrivers) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": more than ", kMaxNvidiaDrivers, " NVIDIADrivers"));
      }
      in.drivers.drivers.push_back(std::move(d));
      ++i;
      continue;
    }
    GPUNODE_ASSIGN_OR_RETURN(FleetNode n, ParseNode(item, where));
    if (!names.insert(n.name).second) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": Node \"", TerminalSafe(n.name), "\" appears twice"));
    }
    nodes.push_back(std::move(n));
    ++i;
  }
  if (!slices.empty()) {
    SliceTally tally(nodes);
    for (size_t at : slices) GPUNODE_RETURN_IF_ERROR(tally.Add((*items)[at], absl::StrCat(source, ": items[", at, "]")));
    tally.Apply(nodes);
  }
  if (!drivers.empty()) {
    in.drivers.listed = true;
    in.drivers.source = source;
    std::sort(in.drivers.drivers.begin(), in.drivers.drivers.end(),
              [](const NvidiaDriverInfo& a, const NvidiaDriverInfo& b) { return a.name < b.name; });
  }
  return in;
}

StatusOr<std::vector<FleetNode>> ParseNodeListText(absl::string_view text, const std::string& source) {
  GPUNODE_ASSIGN_OR_RETURN(nlohmann::json doc, ParseJson(text, source));
  return ParseNodeList(doc, source);
}

StatusOr<FleetInput> ParseFleetListText(absl::string_view text, const std::string& source) {
  GPUNODE_ASSIGN_OR_RETURN(nlohmann::json doc, ParseJson(text, source));
  return ParseFleetList(doc, source);
}

StatusOr<std::vector<FleetNode>> ListNodes(kube::Client& client, const ListNodesOptions& options) {
  auto read = [&](const std::string& resource_version) -> StatusOr<std::vector<FleetNode>> {
    std::vector<FleetNode> nodes;
    std::set<std::string> names;
    kube::ListOptions lo;
    lo.limit = options.limit;
    lo.resource_version = resource_version;
    lo.max_pages = options.max_pages;
    size_t i = 0;
    auto listed = client.List("/api/v1/nodes", lo, [&](nlohmann::json& item) -> Status {
      const std::string where = absl::StrCat("GET /api/v1/nodes: items[", i++, "]");
      GPUNODE_RETURN_IF_ERROR(CheckItemKind(item, where).status());
      GPUNODE_ASSIGN_OR_RETURN(FleetNode n, ParseNode(item, where));
      if (!names.insert(n.name).second) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": Node \"", TerminalSafe(n.name), "\" appears twice"));
      }
      nodes.push_back(std::move(n));
      return absl::OkStatus();
    });
    if (!listed.ok()) return listed.status();
    return nodes;
  };
  if (options.from_cache) {
    auto cached = read("0");
    // An API server that ignores `limit` when it answers from its cache (before 1.33) sends every
    // Node at once; past the client's body cap, page through a consistent list instead.
    if (cached.ok() || !absl::IsResourceExhausted(cached.status())) return cached;
  }
  return read("");
}

int ExitCodeOf(const FleetReport& report) { return report.summary.errors > 0 ? 1 : 0; }

}  // namespace gpunode::fleet
