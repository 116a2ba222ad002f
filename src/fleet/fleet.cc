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

std::string Lower(absl::string_view s) { return absl::AsciiStrToLower(s); }

// "NVIDIA-H100-80GB-HBM3" -> "h100-80gb-hbm3".
std::string ProductSlug(const std::string& product) {
  if (product.empty() || product == "unknown") return "unknown-gpu";
  std::string s = Lower(product);
  if (absl::StartsWith(s, "nvidia-")) s = s.substr(7);
  std::string out;
  for (char c : s) out.push_back(absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' ? c : '-');
  return out;
}

// Versions sort numerically when they parse, else as text.
bool VersionLess(const std::string& a, const std::string& b) {
  auto va = Version::Parse(a);
  auto vb = Version::Parse(b);
  if (va.ok() && vb.ok()) return *va < *vb;
  if (va.ok() != vb.ok()) return va.ok();
  return a < b;
}

// "580.95.05 (40), 570.172.08 (15)": values by count, most common first.
std::string Counted(const std::map<std::string, std::vector<std::string>>& by_value,
                    const std::string& empty_name) {
  std::vector<std::pair<std::string, size_t>> v;
  for (const auto& [value, nodes] : by_value) v.emplace_back(value, nodes.size());
  std::stable_sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::vector<std::string> parts;
  for (const auto& [value, n] : v) {
    parts.push_back(absl::StrCat(value.empty() ? empty_name : value, " (", n, ")"));
  }
  return absl::StrJoin(parts, ", ");
}

std::string ConditionText(const Condition& c, const char* type) {
  if (!c.present) return absl::StrCat("no ", type, " condition");
  std::string s = absl::StrCat(type, "=", c.status);
  if (!c.reason.empty() || !c.message.empty()) {
    absl::StrAppend(&s, " (", c.reason, c.reason.empty() || c.message.empty() ? "" : ": ", c.message, ")");
  }
  return s;
}

std::vector<std::string> OtherGpuResources(const FleetNode& n) {
  std::vector<std::string> out;
  for (const auto& [key, value] : n.allocatable) {
    if (key == kResourceGpu || value <= 0) continue;
    out.push_back(absl::StrCat(key, " (", value, ")"));
  }
  return out;
}

bool ValidationFailing(const FleetNode& n) {
  if (n.gpu_stack.present) return n.gpu_stack.status == "False";
  return n.doctor_status == "fail";
}

// Why allocatable nvidia.com/gpu is below physical x replicas, every cause that applies.
std::vector<ShortCause> ShortCauses(const FleetNode& n, int64_t expected) {
  std::vector<ShortCause> causes;
  const int64_t alloc = n.Allocatable(kResourceGpu);
  const int64_t cap = n.Capacity(kResourceGpu);
  if (!n.Ready()) causes.push_back({"node-not-ready", ConditionText(n.ready, "Ready")});
  if (n.gpu_stack.present && n.gpu_stack.status == "False") {
    causes.push_back({"validation-failing", absl::StrCat("GpuStackReady=False", n.gpu_stack.reason.empty() ? "" : ", reason ",
                                                        n.gpu_stack.reason)});
  } else if (!n.gpu_stack.present && n.doctor_status == "fail") {
    causes.push_back({"validation-failing",
                      absl::StrCat(kLabelDoctorStatus, "=fail", n.doctor_first.empty() ? "" : " (first finding ",
                                   n.doctor_first, n.doctor_first.empty() ? "" : ")")});
  }
  bool any_capacity = false;
  for (const auto& [key, value] : n.capacity) any_capacity = any_capacity || value > 0;
  if (!any_capacity) {
    causes.push_back({"device-plugin-not-registered",
                      "the Node has GPUs but no nvidia.com/* capacity: no device plugin registered "
                      "with the kubelet"});
  }
  if (n.unhealthy_gpus.value_or(0) > 0) {
    causes.push_back({"gpus-unhealthy", absl::StrCat(kLabelUnhealthy, "=", *n.unhealthy_gpus)});
  }
  const std::vector<std::string> other = OtherGpuResources(n);
  if (!other.empty()) {
    causes.push_back({"resource-renamed",
                      absl::StrCat("GPUs advertised as ", absl::StrJoin(other, ", "),
                                   n.mig_strategy == "mixed" ? " (MIG strategy mixed)" : "",
                                   !n.sharing.empty() ? absl::StrCat(" (sharing ", n.sharing, ")") : "")});
  }
  if (causes.empty() && any_capacity) {
    if (cap >= expected && alloc < cap) {
      causes.push_back({"plugin-marked-unhealthy",
                        absl::StrCat("capacity ", cap, ", allocatable ", alloc, ": the device plugin reports ",
                                     cap - alloc, " device(s) Unhealthy")});
    } else {
      causes.push_back({"plugin-advertises-fewer",
                        absl::StrCat("capacity ", cap, " < ", expected,
                                     " expected: the device plugin advertises fewer devices than the node has")});
    }
  }
  return causes;
}

std::string ActionFor(const std::string& cause, const FleetNode& n) {
  if (cause == "node-not-ready") return "check the kubelet on the node (journalctl -u kubelet); nothing is scheduled on a NotReady node";
  if (cause == "validation-failing") {
    if (n.gpu_stack.present && !n.gpu_stack.message.empty()) return n.gpu_stack.message;
    return "run `gpunode doctor` on the node and fix its first finding; the agent advertises the GPUs again once it passes";
  }
  if (cause == "device-plugin-not-registered") return "check the gpunode pod on the node (or whichever device plugin you run): it is not running or cannot reach /var/lib/kubelet/device-plugins/kubelet.sock";
  if (cause == "gpus-unhealthy") return "run `gpunode doctor` on the node; a lost or failed GPU usually needs a reset or a reboot, a failed row remap a replacement";
  if (cause == "resource-renamed") return "none needed if intended: request the renamed resource in pods (MIG mixed strategy or sharing with renameByDefault)";
  if (cause == "plugin-marked-unhealthy") return "the device plugin saw health events (XIDs) on those GPUs: check `gpunode doctor` and the plugin's log on the node";
  return "compare `gpunode doctor` on the node with the device plugin's log; the plugin may be configured to skip GPUs";
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

// A List's item that is not a Node (kubectl's `List` may hold other kinds).
Status CheckItemKind(const nlohmann::json& item, const std::string& where) {
  if (!item.is_object()) return absl::OkStatus();  // ParseNode says what it is
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields f, kube::Fields::Root(item, where));
  GPUNODE_ASSIGN_OR_RETURN(const std::string kind, f.String("kind"));
  if (!kind.empty() && kind != "Node") return absl::InvalidArgumentError(absl::StrCat(where, " is a ", kind, ", not a Node"));
  return absl::OkStatus();
}

}  // namespace

StatusOr<std::vector<FleetNode>> ParseNodeList(const nlohmann::json& list, const std::string& source) {
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
  std::vector<FleetNode> nodes;
  if (items->is_null()) return nodes;  // the API server writes null for an empty list
  nodes.reserve(items->size());
  std::set<std::string> names;
  size_t i = 0;
  for (const nlohmann::json& item : *items) {
    const std::string where = absl::StrCat(source, ": items[", i, "]");
    GPUNODE_RETURN_IF_ERROR(CheckItemKind(item, where));
    GPUNODE_ASSIGN_OR_RETURN(FleetNode n, ParseNode(item, where));
    if (!names.insert(n.name).second) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": Node \"", TerminalSafe(n.name), "\" appears twice"));
    }
    nodes.push_back(std::move(n));
    ++i;
  }
  return nodes;
}

StatusOr<std::vector<FleetNode>> ParseNodeListText(absl::string_view text, const std::string& source) {
  GPUNODE_ASSIGN_OR_RETURN(nlohmann::json doc, ParseJson(text, source));
  return ParseNodeList(doc, source);
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
      GPUNODE_RETURN_IF_ERROR(CheckItemKind(item, where));
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

FleetReport Analyze(std::vector<FleetNode> nodes, const std::string& source) {
  FleetReport r;
  r.source = source;
  std::sort(nodes.begin(), nodes.end(), [](const FleetNode& a, const FleetNode& b) { return a.name < b.name; });
  FleetSummary& s = r.summary;
  s.nodes = static_cast<int>(nodes.size());

  // Pools by (product, driver).
  std::map<std::pair<std::string, std::string>, Pool> pools;
  std::map<std::string, std::map<std::string, std::vector<std::string>>> drivers_by_product;
  std::map<std::string, std::vector<std::string>> nodes_by_branch;
  std::map<std::string, std::vector<std::string>> nodes_by_agent;
  std::set<std::string> agents, drivers;
  std::vector<Finding>& f = r.findings;

  for (const FleetNode& n : nodes) {
    if (!n.has_gpus) {
      ++s.cpu_nodes;
      continue;
    }
    ++s.gpu_nodes;
    if (n.Ready()) ++s.ready_gpu_nodes;
    if (n.unschedulable) ++s.cordoned_gpu_nodes;
    const int64_t physical = n.physical_gpus.value_or(0);
    s.gpus += physical;
    s.allocatable += n.Allocatable(kResourceGpu);
    const std::string product = n.model.empty() ? "unknown" : n.model;
    const std::string driver = n.driver ? n.driver->ToString() : "unknown";
    Pool& p = pools[{product, driver}];
    if (p.nodes.empty()) {
      p.product = product;
      p.driver = driver;
      p.branch = n.branch;
      p.cuda_max = n.cuda_max;
      p.family = n.family;
    }
    if (p.compute_major == 0) {
      auto it = n.labels.find(kLabelComputeMajor);
      int major = 0, minor = 0;
      if (it != n.labels.end() && absl::SimpleAtoi(it->second, &major)) {
        auto mi = n.labels.find(kLabelComputeMinor);
        if (mi != n.labels.end()) (void)absl::SimpleAtoi(mi->second, &minor);
        p.compute_major = major;
        p.compute_minor = minor;
      }
    }
    if (p.family.empty()) p.family = n.family;
    if (p.cuda_max.empty()) p.cuda_max = n.cuda_max;
    p.nodes.push_back(n.name);
    if (!n.kernel_module.empty() &&
        std::find(p.kernel_modules.begin(), p.kernel_modules.end(), n.kernel_module) == p.kernel_modules.end()) {
      p.kernel_modules.push_back(n.kernel_module);
    }
    if (std::find(p.agent_versions.begin(), p.agent_versions.end(), n.agent_version) == p.agent_versions.end()) {
      p.agent_versions.push_back(n.agent_version);
    }
    p.ready_nodes += n.Ready() ? 1 : 0;
    p.gpus += physical;
    p.allocatable += n.Allocatable(kResourceGpu);
    drivers_by_product[product][driver].push_back(n.name);
    if (!n.branch.empty()) nodes_by_branch[n.branch].push_back(n.name);
    if (n.driver) drivers.insert(driver);
    if (n.has_agent_labels) {
      const std::string v = n.agent_version.empty() ? "unversioned" : n.agent_version;
      nodes_by_agent[v].push_back(n.name);
      if (!n.agent_version.empty()) agents.insert(n.agent_version);
    }
  }

  // Readable, unique pool names.
  std::set<std::string> used;
  for (auto& [key, p] : pools) {
    std::string base = absl::StrCat(ProductSlug(p.product), "-", p.driver == "unknown" ? "unknown-driver" : p.driver);
    std::string name = base;
    for (int i = 2; !used.insert(name).second; ++i) name = absl::StrCat(base, "-", i);
    p.name = name;
    std::sort(p.kernel_modules.begin(), p.kernel_modules.end());
    std::sort(p.agent_versions.begin(), p.agent_versions.end());
    for (const std::string& node : p.nodes) r.pool_of[node] = p.name;
    r.pools.push_back(p);
  }

  // Per node.
  for (const FleetNode& n : nodes) {
    if (!n.has_gpus) continue;
    const std::string pool = r.pool_of[n.name];
    for (const std::string& w : n.warnings) {
      f.push_back({"label-malformed", Severity::kWarning, n.name, pool, w,
                   "fix or remove the value; fleet ignores it", {}, {n.name}});
    }
    if (!n.Ready()) {
      f.push_back({"node-not-ready", Severity::kError, n.name, pool, ConditionText(n.ready, "Ready"),
                   ActionFor("node-not-ready", n), {}, {n.name}});
    }
    if (n.unschedulable) {
      f.push_back({"cordoned", Severity::kInfo, n.name, pool,
                   "cordoned (spec.unschedulable): no new pods are scheduled on its GPUs",
                   "kubectl uncordon the node when its maintenance is over", {}, {n.name}});
    }
    if (ValidationFailing(n)) {
      const bool by_condition = n.gpu_stack.present;
      std::string msg = by_condition ? ConditionText(n.gpu_stack, kConditionGpuStackReady)
                                     : absl::StrCat(kLabelDoctorStatus, "=fail",
                                                    n.doctor_first.empty() ? "" : absl::StrCat(", first finding ", n.doctor_first),
                                                    " (no GpuStackReady condition)");
      f.push_back({"validation-failing", Severity::kError, n.name, pool, msg, ActionFor("validation-failing", n), {}, {n.name}});
    } else if (n.gpu_stack.present && n.gpu_stack.status != "True") {
      f.push_back({"validation-failing", Severity::kWarning, n.name, pool,
                   ConditionText(n.gpu_stack, kConditionGpuStackReady),
                   "the agent has not finished validating the node, or lost contact: check its pod", {}, {n.name}});
    }
    if (n.unhealthy_gpus.value_or(0) > 0) {
      f.push_back({"gpus-unhealthy", Severity::kError, n.name, pool,
                   absl::StrCat(*n.unhealthy_gpus, " of ", n.physical_gpus.value_or(0), " GPUs unhealthy (",
                                kLabelUnhealthy, "=", *n.unhealthy_gpus, ")",
                                n.doctor_first.empty() ? "" : absl::StrCat("; doctor's first finding: ", n.doctor_first)),
                   ActionFor("gpus-unhealthy", n), {}, {n.name}});
    }
    if (n.physical_gpus) {
      const int64_t expected = *n.physical_gpus * n.replicas;
      const int64_t alloc = n.Allocatable(kResourceGpu);
      if (alloc < expected) {
        std::vector<ShortCause> causes = ShortCauses(n, expected);
        const bool only_renamed = causes.size() == 1 && causes[0].id == "resource-renamed";
        std::string msg = absl::StrCat("allocatable ", kResourceGpu, " ", alloc, " of ", expected,
                                       n.replicas > 1 ? absl::StrCat(" (", *n.physical_gpus, " GPUs x ", n.replicas, " replicas)")
                                                      : absl::StrCat(" GPUs"),
                                       ": ");
        std::vector<std::string> parts;
        for (const ShortCause& c : causes) parts.push_back(absl::StrCat(c.id, " (", c.detail, ")"));
        absl::StrAppend(&msg, absl::StrJoin(parts, "; "));
        f.push_back({"below-capacity", only_renamed ? Severity::kInfo : Severity::kError, n.name, pool, msg,
                     ActionFor(causes.front().id, n), causes, {n.name}});
      }
    }
    if (!n.has_agent_labels) {
      f.push_back({"no-agent", Severity::kWarning, n.name, pool,
                   "a GPU node without gpunode.io/ labels: gpunode's agent does not run there (or cannot label its Node)",
                   absl::StrCat("check the DaemonSet's nodeSelector and tolerations, and its pod on the node: kubectl get pods -A "
                                "-o wide --field-selector spec.nodeName=", n.name),
                   {}, {n.name}});
    }
  }

  // Driver skew per product.
  for (const auto& [product, by_driver] : drivers_by_product) {
    if (by_driver.size() < 2) continue;
    std::string newest;
    size_t most = 0;
    std::string common;
    std::set<std::string> branches;
    int total = 0;
    for (const auto& [driver, names] : by_driver) {
      total += static_cast<int>(names.size());
      if (driver != "unknown" && (newest.empty() || VersionLess(newest, driver))) newest = driver;
      if (names.size() > most) most = names.size(), common = driver;
      if (auto v = Version::Parse(driver); v.ok()) branches.insert(absl::StrCat(v->major()));
    }
    Finding d{"driver-skew", Severity::kWarning, product, "", "", "", {}, {}};
    d.message = absl::StrCat(by_driver.size(), " driver versions on ", total, " nodes: ",
                             Counted(by_driver, "unknown"));
    if (branches.size() > 1) absl::StrAppend(&d.message, "; branches ", absl::StrJoin(branches, ", "));
    d.action = absl::StrCat("converge on one driver per GPU product (pods land on any node of the product): ",
                            "gpunode fleet drain-plan --to-driver ", newest.empty() ? "VERSION" : newest,
                            " --max-unavailable N");
    for (const auto& [driver, names] : by_driver) {
      if (driver != common) d.nodes.insert(d.nodes.end(), names.begin(), names.end());
    }
    std::sort(d.nodes.begin(), d.nodes.end());
    f.push_back(std::move(d));
  }
  if (nodes_by_branch.size() > 1) {
    std::vector<std::string> b;
    for (const auto& [branch, names] : nodes_by_branch) b.push_back(branch);
    std::sort(b.begin(), b.end(), VersionLess);
    f.push_back({"branch-skew", Severity::kInfo, "fleet", "",
                 absl::StrCat(nodes_by_branch.size(), " driver branches in the fleet: ", Counted(nodes_by_branch, "")),
                 absl::StrCat("images built for a CUDA newer than branch R", b.front(),
                              " supports need minor-version or forward compatibility there: check them with gpunode "
                              "fleet compat --image REF"),
                 {}, {}});
  }
  if (nodes_by_agent.size() > 1) {
    std::string newest;
    for (const std::string& v : agents) {
      if (newest.empty() || VersionLess(newest, v)) newest = v;
    }
    Finding a{"agent-skew", Severity::kWarning, "fleet", "", "", "", {}, {}};
    a.message = absl::StrCat(nodes_by_agent.size(), " gpunode agent versions: ", Counted(nodes_by_agent, ""));
    a.action = absl::StrCat("roll the DaemonSet out to one version (", newest.empty() ? "the newest" : newest,
                            "): kubectl -n gpunode rollout status ds/gpunode; an OnDelete update strategy needs the "
                            "old pods deleted");
    for (const auto& [v, names] : nodes_by_agent) {
      if (v != newest) a.nodes.insert(a.nodes.end(), names.begin(), names.end());
    }
    std::sort(a.nodes.begin(), a.nodes.end());
    f.push_back(std::move(a));
  }

  auto rank = [](Severity sv) { return sv == Severity::kError ? 0 : sv == Severity::kWarning ? 1 : 2; };
  std::stable_sort(f.begin(), f.end(), [&](const Finding& a, const Finding& b) {
    if (rank(a.severity) != rank(b.severity)) return rank(a.severity) < rank(b.severity);
    if (a.id != b.id) return a.id < b.id;
    return a.subject < b.subject;
  });
  for (const Finding& x : f) {
    (x.severity == Severity::kError ? s.errors : x.severity == Severity::kWarning ? s.warnings : s.infos)++;
  }
  s.agent_versions.assign(agents.begin(), agents.end());
  std::sort(s.agent_versions.begin(), s.agent_versions.end(), VersionLess);
  s.drivers.assign(drivers.begin(), drivers.end());
  std::sort(s.drivers.begin(), s.drivers.end(), VersionLess);
  r.nodes = std::move(nodes);
  return r;
}

int ExitCodeOf(const FleetReport& report) { return report.summary.errors > 0 ? 1 : 0; }

}  // namespace gpunode::fleet
