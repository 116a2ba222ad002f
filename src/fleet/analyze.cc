// gpunode fleet's analysis: pools of (product, driver), the findings per node, and the skews
// across the fleet, as named steps over the parsed Nodes (fleet.h).
#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/fleet/fleet.h"

namespace gpunode::fleet {
namespace {

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
  if (cause == "no-resource-slices") return "check the agent's dra component on the node (or NVIDIA's kubelet plugin): it is not running, cannot register with the kubelet or cannot write ResourceSlices (RBAC: resourceslices of its own node)";
  if (cause == "devices-tainted") return "the driver tainted those devices (a lost GPU, a critical XID): run `gpunode doctor` on the node; gpunode's driver removes its taints when the GPU recovers, NVIDIA's only when it restarts";
  if (cause == "devices-missing") return "compare `gpunode doctor` on the node with the DRA driver's log: a GPU it cannot name (no minor number) or cannot read is left out of its slices";
  if (cause == "plugin-marked-unhealthy") return "the device plugin saw health events (XIDs) on those GPUs: check `gpunode doctor` and the plugin's log on the node";
  return "compare `gpunode doctor` on the node with the device plugin's log; the plugin may be configured to skip GPUs";
}

// What Analyze gathers over the GPU nodes before it judges the fleet.
struct Tally {
  std::map<std::pair<std::string, std::string>, Pool> pools;  // by (product, driver)
  std::map<std::string, std::map<std::string, std::vector<std::string>>> drivers_by_product;
  std::map<std::string, std::vector<std::string>> nodes_by_branch;
  std::map<std::string, std::vector<std::string>> nodes_by_agent;
  std::set<std::string> agents, drivers;
};

// Adds one GPU node to the summary, its pool and the tallies.
void CountGpuNode(const FleetNode& n, FleetSummary& s, Tally& t) {
  ++s.gpu_nodes;
  if (n.Ready()) ++s.ready_gpu_nodes;
  if (n.unschedulable) ++s.cordoned_gpu_nodes;
  const int64_t physical = n.physical_gpus.value_or(0);
  s.gpus += physical;
  s.allocatable += n.Allocatable(kResourceGpu);
  if (n.ServedThroughDra()) ++s.dra_nodes;
  s.dra_allocatable += n.dra.gpus_allocatable;
  const std::string product = n.model.empty() ? "unknown" : n.model;
  const std::string driver = n.driver ? n.driver->ToString() : "unknown";
  Pool& p = t.pools[{product, driver}];
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
  p.dra_allocatable += n.dra.gpus_allocatable;
  t.drivers_by_product[product][driver].push_back(n.name);
  if (!n.branch.empty()) t.nodes_by_branch[n.branch].push_back(n.name);
  if (n.driver) t.drivers.insert(driver);
  if (n.has_agent_labels) {
    const std::string v = n.agent_version.empty() ? "unversioned" : n.agent_version;
    t.nodes_by_agent[v].push_back(n.name);
    if (!n.agent_version.empty()) t.agents.insert(n.agent_version);
  }
}

// Readable, unique pool names; the pools into the report.
void NamePools(Tally& t, FleetReport& r) {
  std::set<std::string> used;
  for (auto& [key, p] : t.pools) {
    std::string base = absl::StrCat(ProductSlug(p.product), "-", p.driver == "unknown" ? "unknown-driver" : p.driver);
    std::string name = base;
    for (int i = 2; !used.insert(name).second; ++i) name = absl::StrCat(base, "-", i);
    p.name = name;
    std::sort(p.kernel_modules.begin(), p.kernel_modules.end());
    std::sort(p.agent_versions.begin(), p.agent_versions.end());
    for (const std::string& node : p.nodes) r.pool_of[node] = p.name;
    r.pools.push_back(p);
  }
}

// A node's state: malformed labels, not Ready, cordoned, validation.
void StateFindings(const FleetNode& n, const std::string& pool, std::vector<Finding>& f) {
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
}

// A node's GPUs: unhealthy ones, allocatable below capacity (with every cause), no agent.
void GpuFindings(const FleetNode& n, const std::string& pool, std::vector<Finding>& f) {
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
    // A node serving its GPUs through DRA has them in ResourceSlices, not in allocatable: without
    // a device plugin beside (allocatable 0) it is not below capacity (DraFindings counts them).
    const bool dra_only = n.ServedThroughDra() && alloc == 0;
    if (alloc < expected && !dra_only) {
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

// "gpu-3: gpu.nvidia.com/xid=79 (NoSchedule), gpu-5: gpu.nvidia.com/gpu-lost (NoSchedule)".
std::string TaintList(const NodeDra& d) {
  std::vector<std::string> parts;
  for (const DraTaintSeen& t : d.taints) {
    if (parts.size() == 8) {
      parts.push_back(absl::StrCat("(", d.taints.size() - 8, " more)"));
      break;
    }
    parts.push_back(absl::StrCat(t.device, ": ", t.key, t.value.empty() ? "" : "=", t.value, " (", t.effect, ")"));
  }
  return absl::StrJoin(parts, ", ");
}

// A node served through DRA whose ResourceSlices offer fewer GPUs than it has (the analogue of
// below-capacity), and slices past the API's bounds.
void DraFindings(const FleetNode& n, const std::string& pool, std::vector<Finding>& f) {
  const NodeDra& d = n.dra;
  for (const std::string& w : d.warnings) {
    f.push_back({"resource-slice-malformed", Severity::kWarning, n.name, pool, w,
                 "the driver that wrote it does not keep the API's limits: check its version and log", {}, {n.name}});
  }
  if (!d.listed || !n.ServedThroughDra() || !n.physical_gpus) return;
  const int64_t expected = *n.physical_gpus;
  std::vector<ShortCause> causes;
  if (!d.present()) {
    causes.push_back({"no-resource-slices", absl::StrCat("no ResourceSlice of ", d.driver, " has spec.nodeName ", n.name,
                                                         " (", kLabelDraDriver, "=", n.dra_driver, ")")});
  } else {
    if (d.gpus_allocatable >= expected) return;
    if (d.tainted_devices > 0) {
      causes.push_back({"devices-tainted", absl::StrCat(d.tainted_devices, " device(s) tainted: ", TaintList(d))});
    }
    if (d.gpus_published < expected) {
      causes.push_back({"devices-missing", absl::StrCat(d.gpus_published, " of ", expected, " GPUs in the slices (",
                                                        d.gpus, " GPU and ", d.mig_devices, " MIG devices)")});
    }
  }
  if (causes.empty()) return;
  std::vector<std::string> parts;
  for (const ShortCause& c : causes) parts.push_back(absl::StrCat(c.id, " (", c.detail, ")"));
  f.push_back({"dra-below-capacity", Severity::kError, n.name, pool,
               absl::StrCat("DRA (", d.driver, ") can allocate ", d.gpus_allocatable, " of ", expected,
                            " GPUs: ", absl::StrJoin(parts, "; ")),
               ActionFor(causes.front().id, n), causes, {n.name}});
}

// Driver skew per product.
void DriverSkew(const Tally& t, std::vector<Finding>& f) {
  for (const auto& [product, by_driver] : t.drivers_by_product) {
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
}

// Driver branches across the fleet (informational: what CUDA images may need).
void BranchSkew(const Tally& t, std::vector<Finding>& f) {
  if (t.nodes_by_branch.size() > 1) {
    std::vector<std::string> b;
    for (const auto& [branch, names] : t.nodes_by_branch) b.push_back(branch);
    std::sort(b.begin(), b.end(), VersionLess);
    f.push_back({"branch-skew", Severity::kInfo, "fleet", "",
                 absl::StrCat(t.nodes_by_branch.size(), " driver branches in the fleet: ", Counted(t.nodes_by_branch, "")),
                 absl::StrCat("images built for a CUDA newer than branch R", b.front(),
                              " supports need minor-version or forward compatibility there: check them with gpunode "
                              "fleet compat --image REF"),
                 {}, {}});
  }
}

// gpunode agent versions across the fleet (a rollout not finished).
void AgentSkew(const Tally& t, std::vector<Finding>& f) {
  if (t.nodes_by_agent.size() > 1) {
    std::string newest;
    for (const std::string& v : t.agents) {
      if (newest.empty() || VersionLess(newest, v)) newest = v;
    }
    Finding a{"agent-skew", Severity::kWarning, "fleet", "", "", "", {}, {}};
    a.message = absl::StrCat(t.nodes_by_agent.size(), " gpunode agent versions: ", Counted(t.nodes_by_agent, ""));
    a.action = absl::StrCat("roll the DaemonSet out to one version (", newest.empty() ? "the newest" : newest,
                            "): kubectl -n gpunode rollout status ds/gpunode; an OnDelete update strategy needs the "
                            "old pods deleted");
    for (const auto& [v, names] : t.nodes_by_agent) {
      if (v != newest) a.nodes.insert(a.nodes.end(), names.begin(), names.end());
    }
    std::sort(a.nodes.begin(), a.nodes.end());
    f.push_back(std::move(a));
  }
}

// Errors first, then warnings, then infos; counted into the summary with the versions seen.
void SortAndCount(const Tally& t, FleetReport& r) {
  std::vector<Finding>& f = r.findings;
  FleetSummary& s = r.summary;
  auto rank = [](Severity sv) { return sv == Severity::kError ? 0 : sv == Severity::kWarning ? 1 : 2; };
  std::stable_sort(f.begin(), f.end(), [&](const Finding& a, const Finding& b) {
    if (rank(a.severity) != rank(b.severity)) return rank(a.severity) < rank(b.severity);
    if (a.id != b.id) return a.id < b.id;
    return a.subject < b.subject;
  });
  for (const Finding& x : f) {
    (x.severity == Severity::kError ? s.errors : x.severity == Severity::kWarning ? s.warnings : s.infos)++;
  }
  s.agent_versions.assign(t.agents.begin(), t.agents.end());
  std::sort(s.agent_versions.begin(), s.agent_versions.end(), VersionLess);
  s.drivers.assign(t.drivers.begin(), t.drivers.end());
  std::sort(s.drivers.begin(), s.drivers.end(), VersionLess);
}

}  // namespace

FleetReport Analyze(std::vector<FleetNode> nodes, const std::string& source, const DriverListing& drivers) {
  FleetReport r;
  r.source = source;
  std::sort(nodes.begin(), nodes.end(), [](const FleetNode& a, const FleetNode& b) { return a.name < b.name; });
  r.summary.nodes = static_cast<int>(nodes.size());
  Tally t;
  for (const FleetNode& n : nodes) {
    if (n.has_gpus) {
      CountGpuNode(n, r.summary, t);
    } else {
      ++r.summary.cpu_nodes;
    }
  }
  NamePools(t, r);
  for (const FleetNode& n : nodes) {
    if (!n.has_gpus) continue;
    const std::string pool = r.pool_of[n.name];
    StateFindings(n, pool, r.findings);
    GpuFindings(n, pool, r.findings);
    DraFindings(n, pool, r.findings);
  }
  DriverSkew(t, r.findings);
  BranchSkew(t, r.findings);
  AgentSkew(t, r.findings);
  r.driver_upgrades = SummarizeDriverUpgrades(nodes, drivers);
  DriverUpgradeFindings(r.driver_upgrades, r.findings);
  r.drivers_source = drivers.source;
  r.notes = drivers.notes;
  SortAndCount(t, r);
  r.nodes = std::move(nodes);
  return r;
}

}  // namespace gpunode::fleet
