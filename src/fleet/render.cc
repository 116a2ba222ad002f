#include "src/fleet/render.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/base/terminal.h"

namespace gpunode::fleet {
namespace {

using Json = nlohmann::ordered_json;

Json OrNull(const std::string& s) { return s.empty() ? Json(nullptr) : Json(s); }
template <typename T>
Json OrNull(const std::optional<T>& v) {
  return v ? Json(*v) : Json(nullptr);
}

Json ConditionJson(const Condition& c) {
  if (!c.present) return nullptr;
  return {{"status", c.status}, {"reason", OrNull(c.reason)}, {"message", OrNull(c.message)}};
}

// The node's DRA devices; null when fleet did not read ResourceSlices or the node has none and is
// not served through DRA.
Json DraJson(const FleetNode& n) {
  const NodeDra& d = n.dra;
  if (!d.listed || !n.ServedThroughDra()) return nullptr;
  Json taints = Json::array();
  for (const DraTaintSeen& t : d.taints) {
    taints.push_back({{"device", t.device}, {"key", t.key}, {"value", OrNull(t.value)}, {"effect", t.effect}});
  }
  return {{"driver", d.driver},
          {"slices", d.slices},
          {"gpus", d.gpus},
          {"migDevices", d.mig_devices},
          {"otherDevices", d.other_devices},
          {"gpusPublished", d.gpus_published},
          {"allocatableGpus", d.gpus_allocatable},
          {"taintedDevices", d.tainted_devices},
          {"taints", taints}};
}

// "gpu-3 gpu.nvidia.com/gpu-lost, ...": the tainted devices and their keys (at most 8).
std::string TaintCell(const NodeDra& d) {
  std::vector<std::string> parts;
  for (const DraTaintSeen& t : d.taints) {
    if (parts.size() == 8) break;
    parts.push_back(absl::StrCat(t.device, " ", t.key));
  }
  return absl::StrJoin(parts, ", ");
}

// "6/8": GPUs DRA can allocate / the node's GPUs; "-" when not served through DRA or not read.
std::string DraCell(const FleetNode& n) {
  if (!n.dra.listed || !n.ServedThroughDra()) return "-";
  return absl::StrCat(n.dra.gpus_allocatable, "/", n.physical_gpus ? absl::StrCat(*n.physical_gpus) : "?");
}

Json NodeJson(const FleetNode& n, const std::string& pool) {
  Json capacity = Json::object(), allocatable = Json::object();
  for (const auto& [k, v] : n.capacity) capacity[k] = v;
  for (const auto& [k, v] : n.allocatable) allocatable[k] = v;
  return {{"name", n.name},
          {"hasGpus", n.has_gpus},
          {"pool", OrNull(pool)},
          {"product", OrNull(n.product)},
          {"family", OrNull(n.family)},
          {"driver", n.driver ? Json(n.driver->ToString()) : Json(nullptr)},
          {"branch", OrNull(n.branch)},
          {"cudaMax", OrNull(n.cuda_max)},
          {"kernelModule", OrNull(n.kernel_module)},
          {"agentVersion", OrNull(n.agent_version)},
          {"gpus", OrNull(n.physical_gpus)},
          {"healthyGpus", OrNull(n.healthy_gpus)},
          {"unhealthyGpus", OrNull(n.unhealthy_gpus)},
          {"replicas", n.replicas},
          {"sharing", OrNull(n.sharing)},
          {"migStrategy", OrNull(n.mig_strategy)},
          {"capacity", capacity},
          {"allocatable", allocatable},
          {"ready", n.ready.present ? Json(n.ready.status) : Json(nullptr)},
          {"gpuStackReady", ConditionJson(n.gpu_stack)},
          {"unschedulable", n.unschedulable},
          {"doctorStatus", OrNull(n.doctor_status)},
          {"doctorFirstFinding", OrNull(n.doctor_first)},
          {"draDriver", OrNull(n.dra_driver)},
          {"dra", DraJson(n)}};
}

std::string PoolOf(const FleetReport& r, const std::string& node) {
  auto it = r.pool_of.find(node);
  return it == r.pool_of.end() ? std::string() : it->second;
}

// A plain-text table: column widths from the contents, two spaces between columns, numbers right.
class Table {
 public:
  explicit Table(std::vector<std::string> header, std::vector<bool> right = {})
      : right_(std::move(right)) {
    rows_.push_back(std::move(header));
    right_.resize(rows_[0].size(), false);
  }
  // Cells hold strings from the cluster: made terminal-safe here.
  void Add(std::vector<std::string> row) {
    for (std::string& cell : row) cell = TerminalSafe(cell);
    rows_.push_back(std::move(row));
  }
  std::string Render() const {
    std::vector<size_t> w(rows_[0].size(), 0);
    for (const auto& r : rows_) {
      for (size_t i = 0; i < r.size() && i < w.size(); ++i) w[i] = std::max(w[i], r[i].size());
    }
    std::string out;
    for (const auto& r : rows_) {
      std::string line;
      for (size_t i = 0; i < r.size() && i < w.size(); ++i) {
        const std::string pad(w[i] - r[i].size(), ' ');
        if (i > 0) line += "  ";
        line += right_[i] ? pad + r[i] : (i + 1 == r.size() ? r[i] : r[i] + pad);
      }
      out += line + "\n";
    }
    return out;
  }

 private:
  std::vector<std::vector<std::string>> rows_;
  std::vector<bool> right_;
};

std::string Dash(const std::string& s) { return s.empty() ? "-" : s; }

// Foreign text (names, labels, condition reasons and messages from the API server or a saved
// NodeList) in the text renderers: escape sequences shown, never sent to the terminal.
std::string T(const std::string& s) { return TerminalSafe(s); }
std::string TJoin(const std::vector<std::string>& items, const char* sep) { return TerminalSafe(absl::StrJoin(items, sep)); }

std::string ListSome(const std::vector<std::string>& items, size_t max) {
  std::vector<std::string> head(items.begin(), items.begin() + std::min(max, items.size()));
  std::string s = absl::StrJoin(head, ", ");
  if (items.size() > max) absl::StrAppend(&s, " (+", items.size() - max, " more)");
  return s;
}

const char* SeverityColor(Severity s) {
  return s == Severity::kError ? "\033[31m" : s == Severity::kWarning ? "\033[33m" : "\033[36m";
}

std::string SmallestFix(const compat::CompatReport& r) { return r.fixes.empty() ? "" : r.fixes.front().action; }

constexpr char kCss[] =
    "body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}"
    "h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em}"
    "table{border-collapse:collapse;font-size:.9em}"
    "th,td{border:1px solid #ccc;padding:.25em .5em;text-align:left;vertical-align:top}"
    "th{background:#f3f3f3}td.n{text-align:right}"
    ".error{color:#b00020;font-weight:600}.warning{color:#9a6700;font-weight:600}.info{color:#0b5cad}"
    ".ok{color:#1a7f37}.small{color:#555;font-size:.85em}code{background:#f6f8fa;padding:0 .2em}";

std::string Td(const std::string& text, const char* cls = nullptr) {
  return absl::StrCat("<td", cls ? absl::StrCat(" class=\"", cls, "\"") : "", ">", HtmlEscape(text), "</td>");
}
std::string TdN(int64_t v) { return absl::StrCat("<td class=\"n\">", v, "</td>"); }
std::string Th(std::initializer_list<const char*> cols) {
  std::string s = "<tr>";
  for (const char* c : cols) absl::StrAppend(&s, "<th>", c, "</th>");
  return s + "</tr>\n";
}

const char* VerdictClass(compat::Verdict v) {
  switch (v) {
    case compat::Verdict::kCompatible: return "ok";
    case compat::Verdict::kCompatibleWithCaveats: return "warning";
    case compat::Verdict::kIncompatible: return "error";
    case compat::Verdict::kUnknown: return "info";
  }
  return "info";
}

Json DriverUpgradeJson(const DriverUpgrade& u) {
  Json failed = Json::array();
  for (const FailedNode& f : u.failed_nodes) failed.push_back({{"node", f.node}, {"reason", OrNull(f.reason)}});
  Json by_state = Json::object();
  for (const auto& [state, n] : u.by_state) by_state[state] = n;
  return {{"name", u.name},
          {"listed", u.listed},
          {"targetVersion", OrNull(u.target)},
          {"previousVersion", OrNull(u.previous)},
          {"nodes",
           {{"total", u.total},
            {"upgradeDone", u.done},
            {"upgradeRequired", u.to_start},
            {"underWay", u.under_way},
            {"failed", u.failed},
            {"noState", u.no_state},
            {"rolledBack", u.rolled_back}}},
          {"byState", by_state},
          {"failedNodes", failed},
          {"unknownStates", u.unknown_states},
          {"paused", u.paused},
          {"halted", OrNull(u.halted)},
          {"state", OrNull(u.state)},
          {"message", OrNull(u.message)},
          {"conflicts", u.conflicts},
          {"ignoredFields", u.ignored_fields},
          {"note", OrNull(u.note)},
          {"nodeNames", u.nodes}};
}

// "3/8": nodes at the target / nodes of the pool.
std::string DoneCell(const DriverUpgrade& u) { return absl::StrCat(u.done, "/", u.total); }

// The table's note: about 160 bytes of it.
std::string ShortNote(const std::string& note) { return CutText(note, 157); }

}  // namespace


Json ToJson(const FleetReport& r) {
  const FleetSummary& s = r.summary;
  Json pools = Json::array();
  for (const Pool& p : r.pools) {
    pools.push_back({{"name", p.name},
                     {"product", p.product},
                     {"family", OrNull(p.family)},
                     {"driver", p.driver},
                     {"branch", OrNull(p.branch)},
                     {"cudaMax", OrNull(p.cuda_max)},
                     {"kernelModules", p.kernel_modules},
                     {"nodeCount", p.nodes.size()},
                     {"readyNodes", p.ready_nodes},
                     {"gpus", p.gpus},
                     {"allocatable", p.allocatable},
                     {"draAllocatable", p.dra_allocatable},
                     {"agentVersions", p.agent_versions},
                     {"nodes", p.nodes}});
  }
  Json findings = Json::array();
  for (const Finding& f : r.findings) {
    Json causes = Json::array();
    for (const ShortCause& c : f.causes) causes.push_back({{"id", c.id}, {"detail", c.detail}});
    Json j = {{"id", f.id},          {"severity", std::string(SeverityName(f.severity))},
              {"subject", f.subject}, {"pool", OrNull(f.pool)},
              {"message", f.message}, {"action", f.action}};
    if (!causes.empty()) j["causes"] = causes;
    j["nodes"] = f.nodes;
    findings.push_back(std::move(j));
  }
  Json nodes = Json::array();
  for (const FleetNode& n : r.nodes) nodes.push_back(NodeJson(n, PoolOf(r, n.name)));
  Json upgrades = Json::array();
  for (const DriverUpgrade& u : r.driver_upgrades) upgrades.push_back(DriverUpgradeJson(u));
  return {{"apiVersion", "gpunode/v1"},
          {"kind", "FleetReport"},
          {"source", r.source},
          {"summary",
           {{"nodes", s.nodes},
            {"gpuNodes", s.gpu_nodes},
            {"cpuNodes", s.cpu_nodes},
            {"readyGpuNodes", s.ready_gpu_nodes},
            {"cordonedGpuNodes", s.cordoned_gpu_nodes},
            {"gpus", s.gpus},
            {"allocatable", s.allocatable},
            {"draNodes", s.dra_nodes},
            {"draAllocatable", s.dra_allocatable},
            {"pools", r.pools.size()},
            {"findings", {{"error", s.errors}, {"warning", s.warnings}, {"info", s.infos}}},
            {"drivers", s.drivers},
            {"agentVersions", s.agent_versions},
            {"healthy", s.errors == 0}}},
          {"resourceSlices", OrNull(r.slices_source)},
          {"nvidiaDrivers", OrNull(r.drivers_source)},
          {"notes", r.notes},
          {"pools", pools},
          {"driverUpgrades", upgrades},
          {"findings", findings},
          {"nodes", nodes}};
}

Json ToJson(const FleetCompatReport& r) {
  Json pools = Json::array();
  Json workload = nullptr;
  for (const PoolCompat& p : r.pools) {
    Json full = compat::ToJson(p.report);
    if (workload.is_null() && full.contains("workload")) workload = full["workload"];
    Json fixes = Json::array();
    for (const compat::Fix& f : p.report.fixes) fixes.push_back({{"cost", f.cost}, {"kind", f.kind}, {"action", f.action}});
    pools.push_back({{"pool", p.pool},
                     {"nodes", p.nodes},
                     {"verdict", std::string(compat::VerdictName(p.report.verdict))},
                     {"driver", p.report.target.driver ? Json(p.report.target.driver->ToString()) : Json(nullptr)},
                     {"gpu", p.report.target.gpus.empty() ? Json(nullptr) : Json(p.report.target.gpus.front().name)},
                     {"rule", {{"id", OrNull(p.report.decision.rule)},
                               {"layer", OrNull(p.report.decision.layer)},
                               {"text", OrNull(p.report.decision.sentence)}}},
                     {"smallestFix", OrNull(SmallestFix(p.report))},
                     {"fixes", fixes},
                     {"caveats", p.report.caveats},
                     {"needed", p.report.needed}});
  }
  int runs = 0;
  for (const PoolCompat& p : r.pools) {
    runs += p.report.verdict == compat::Verdict::kCompatible ||
            p.report.verdict == compat::Verdict::kCompatibleWithCaveats;
  }
  return {{"apiVersion", "gpunode/v1"},
          {"kind", "FleetCompat"},
          {"image", r.image},
          {"workload", workload},
          {"verdict", std::string(compat::VerdictName(r.worst))},
          {"poolsThatRunIt", runs},
          {"pools", pools}};
}

Json ToJson(const DrainPlan& p) {
  Json waves = Json::array();
  for (const Wave& w : p.waves) {
    Json nodes = Json::array();
    for (const PlannedNode& n : w.nodes) {
      nodes.push_back({{"name", n.name},
                       {"pool", n.pool},
                       {"fromDriver", n.from_driver},
                       {"alreadyUnavailable", n.already_unavailable},
                       {"why", OrNull(n.why_first)}});
    }
    waves.push_back({{"wave", w.number}, {"pool", OrNull(w.pool)}, {"unavailableDuring", w.unavailable_during}, {"nodes", nodes}});
  }
  return {{"apiVersion", "gpunode/v1"},
          {"kind", "FleetDrainPlan"},
          {"toDriver", p.to_driver},
          {"maxUnavailable", p.max_unavailable},
          {"gpuNodes", p.gpu_nodes},
          {"nodesToUpgrade", p.nodes_to_upgrade},
          {"blocked", OrNull(p.blocked)},
          {"held", p.held},
          {"atTarget", p.at_target},
          {"warnings", p.warnings},
          {"steps", {"kubectl cordon NODE", "kubectl drain NODE --ignore-daemonsets --delete-emptydir-data",
                     absl::StrCat("install NVIDIA driver ", p.to_driver, " (OS image or operator; not gpunode)"),
                     "wait for Ready, GpuStackReady=True and allocatable nvidia.com/gpu back to the node's GPU count",
                     "kubectl uncordon NODE"}},
          {"waves", waves}};
}

std::string RenderText(const FleetReport& r, bool list_nodes, bool color) {
  const FleetSummary& s = r.summary;
  const char* reset = color ? "\033[0m" : "";
  const char* bold = color ? "\033[1m" : "";
  std::string out;
  absl::StrAppend(&out, bold, "fleet: ", reset, s.nodes, s.nodes == 1 ? " node (" : " nodes (", s.gpu_nodes, " with GPUs, ", s.cpu_nodes,
                  " without) from ", T(r.source), "\n");
  absl::StrAppend(&out, "GPUs: ", s.gpus, " on the nodes, ", s.allocatable, " allocatable as nvidia.com/gpu",
                  s.dra_nodes == 0 ? "" : absl::StrCat(", ", s.dra_allocatable, " through DRA (", s.dra_nodes, " node",
                                                         s.dra_nodes == 1 ? ")" : "s)"),
                  "; ", s.ready_gpu_nodes, "/", s.gpu_nodes, " GPU nodes Ready, ", s.cordoned_gpu_nodes, " cordoned\n");
  absl::StrAppend(&out, "drivers: ", s.drivers.empty() ? "-" : TJoin(s.drivers, ", "), "; agent versions: ",
                  s.agent_versions.empty() ? "-" : TJoin(s.agent_versions, ", "), "\n");
  for (const std::string& note : r.notes) absl::StrAppend(&out, "note: ", T(note), "\n");
  absl::StrAppend(&out, "findings: ", s.errors, " error", s.errors == 1 ? "" : "s", ", ", s.warnings, " warning",
                  s.warnings == 1 ? "" : "s", ", ", s.infos, " info\n\n");
  const bool dra = s.dra_nodes > 0;
  std::vector<std::string> pool_header = {"POOL", "NODES", "READY", "GPUS", "ALLOC", "DRIVER", "BRANCH", "CUDA", "MODULE", "AGENT"};
  std::vector<bool> pool_right = {false, true, true, true, true, false, false, false, false, false};
  if (dra) {
    pool_header.insert(pool_header.begin() + 5, "DRA");
    pool_right.insert(pool_right.begin() + 5, true);
  }
  Table pools(pool_header, pool_right);
  for (const Pool& p : r.pools) {
    std::vector<std::string> agents;
    for (const std::string& a : p.agent_versions) agents.push_back(a.empty() ? "none" : a);
    std::vector<std::string> row = {p.name, absl::StrCat(p.nodes.size()), absl::StrCat(p.ready_nodes), absl::StrCat(p.gpus),
                                    absl::StrCat(p.allocatable), p.driver, Dash(p.branch), Dash(p.cuda_max),
                                    Dash(absl::StrJoin(p.kernel_modules, ",")), Dash(absl::StrJoin(agents, ","))};
    if (dra) row.insert(row.begin() + 5, absl::StrCat(p.dra_allocatable));
    pools.Add(std::move(row));
  }
  out += pools.Render();
  if (!r.driver_upgrades.empty()) {
    absl::StrAppend(&out, "\n", bold, "DRIVER UPGRADES", reset, " (NVIDIADriver pools",
                    r.drivers_source.empty() ? "" : absl::StrCat(", from ", T(r.drivers_source)), ")\n");
    Table t({"NVIDIADRIVER", "TARGET", "PREVIOUS", "DONE", "UNDER WAY", "FAILED", "NOTE"},
            {false, false, false, true, true, true, false});
    for (const DriverUpgrade& u : r.driver_upgrades) {
      t.Add({u.name, Dash(u.target), Dash(u.previous), DoneCell(u), absl::StrCat(u.under_way), absl::StrCat(u.failed),
             Dash(ShortNote(u.note))});
    }
    out += t.Render();
  }
  if (list_nodes) {
    out += "\n";
    Table t({"NODE", "POOL", "READY", "CORDONED", "GPUS", "ALLOC", "DRA", "TAINTED", "UNHEALTHY", "GPUSTACK", "AGENT"},
            {false, false, false, false, true, true, true, true, true, false, false});
    for (const FleetNode& n : r.nodes) {
      if (!n.has_gpus) continue;
      t.Add({n.name, PoolOf(r, n.name), n.ready.present ? n.ready.status : "-", n.unschedulable ? "yes" : "no",
             n.physical_gpus ? absl::StrCat(*n.physical_gpus) : "-", absl::StrCat(n.Allocatable(kResourceGpu)),
             DraCell(n), n.dra.present() ? absl::StrCat(n.dra.tainted_devices) : "-",
             n.unhealthy_gpus ? absl::StrCat(*n.unhealthy_gpus) : "-",
             n.gpu_stack.present ? absl::StrCat(n.gpu_stack.status, n.gpu_stack.reason.empty() ? "" : " " + n.gpu_stack.reason) : "-",
             Dash(n.agent_version)});
    }
    out += t.Render();
  }
  if (!r.findings.empty()) {
    absl::StrAppend(&out, "\n", bold, "FINDINGS", reset, "\n");
    for (const Finding& f : r.findings) {
      absl::StrAppend(&out, color ? SeverityColor(f.severity) : "", SeverityName(f.severity), reset, " ", f.id, " ",
                      T(f.subject), ": ", T(f.message), "\n");
      if (f.nodes.size() > 1 || (f.nodes.size() == 1 && f.nodes[0] != f.subject)) {
        absl::StrAppend(&out, "    nodes: ", T(ListSome(f.nodes, 8)), "\n");
      }
      absl::StrAppend(&out, "    fix: ", T(f.action), "\n");
    }
  } else {
    absl::StrAppend(&out, "\nno findings: every GPU node is Ready, validated and advertises all its GPUs\n");
  }
  return out;
}

std::string RenderText(const FleetCompatReport& r, bool color) {
  const char* reset = color ? "\033[0m" : "";
  std::string out = absl::StrCat("image: ", T(r.image), "\n");
  if (!r.workload.derived_from.empty()) absl::StrAppend(&out, "       ", T(r.workload.derived_from), "\n");
  absl::StrAppend(&out, "\n");
  Table t({"POOL", "NODES", "VERDICT", "RULE"}, {false, true, false, false});
  int runs = 0, nodes_run = 0, nodes = 0;
  for (const PoolCompat& p : r.pools) {
    const bool ok = p.report.verdict == compat::Verdict::kCompatible ||
                    p.report.verdict == compat::Verdict::kCompatibleWithCaveats;
    runs += ok;
    nodes += p.nodes;
    nodes_run += ok ? p.nodes : 0;
    t.Add({p.pool, absl::StrCat(p.nodes), std::string(compat::VerdictName(p.report.verdict)), Dash(p.report.decision.rule)});
  }
  out += t.Render();
  for (const PoolCompat& p : r.pools) {
    if (p.report.verdict == compat::Verdict::kCompatible) continue;
    const char* c = !color ? "" : p.report.verdict == compat::Verdict::kIncompatible ? "\033[31m" : "\033[33m";
    absl::StrAppend(&out, "\n", c, T(p.pool), reset, ": ", compat::VerdictName(p.report.verdict), "\n");
    if (!p.report.decision.sentence.empty()) absl::StrAppend(&out, "  why: ", T(p.report.decision.sentence), "\n");
    for (const std::string& cv : p.report.caveats) absl::StrAppend(&out, "  caveat: ", T(cv), "\n");
    if (!p.report.fixes.empty()) absl::StrAppend(&out, "  smallest fix: ", T(p.report.fixes.front().action), "\n");
    for (const std::string& n : p.report.needed) absl::StrAppend(&out, "  needed: ", T(n), "\n");
  }
  absl::StrAppend(&out, "\n", runs, " of ", r.pools.size(), " pools (", nodes_run, " of ", nodes,
                  " GPU nodes) can run it\n");
  return out;
}

std::string RenderText(const DrainPlan& p) {
  std::string out = absl::StrCat("drain plan: ", p.nodes_to_upgrade, " node(s) to driver ", T(p.to_driver), ", at most ",
                                 p.max_unavailable, " of ", p.gpu_nodes, " GPU nodes unavailable at once\n");
  if (!p.at_target.empty()) {
    absl::StrAppend(&out, "skipped: ", p.at_target.size(), " node(s) already at ", T(p.to_driver), "\n");
  }
  if (!p.held.empty()) {
    absl::StrAppend(&out, "held: ", p.held.size(), " unavailable node(s) outside the plan count against the limit: ",
                    T(ListSome(p.held, 10)), "\n");
  }
  for (const std::string& w : p.warnings) absl::StrAppend(&out, "warning: ", T(w), "\n");
  if (!p.blocked.empty()) {
    absl::StrAppend(&out, "BLOCKED: ", T(p.blocked), "\n");
    if (p.waves.empty()) return out;
  }
  if (p.waves.empty()) {
    absl::StrAppend(&out, "nothing to do: every node in scope is at ", T(p.to_driver), "\n");
    return out;
  }
  for (const Wave& w : p.waves) {
    absl::StrAppend(&out, "\nwave ", w.number, ": ",
                    w.pool.empty() ? std::string("nodes already unavailable (any pool)") : absl::StrCat("pool ", T(w.pool)),
                    ", ", w.nodes.size(), " node(s), ", w.unavailable_during, " unavailable during the wave\n");
    Table t({"  NODE", "POOL", "FROM", "FIRST BECAUSE"});
    for (const PlannedNode& n : w.nodes) t.Add({"  " + n.name, n.pool, n.from_driver, Dash(n.why_first)});
    out += t.Render();
  }
  absl::StrAppend(&out,
                  "\nfor each node of a wave (start the next wave when every node of this one is back):\n"
                  "  1. kubectl cordon NODE\n"
                  "  2. kubectl drain NODE --ignore-daemonsets --delete-emptydir-data\n"
                  "  3. install NVIDIA driver ", T(p.to_driver),
                  " the way your nodes get drivers (OS image, or an NVIDIADriver resource that gpunode fleet controller carries out in this order: docs/driver-upgrades.md)\n"
                  "  4. wait for Ready, GpuStackReady=True and allocatable nvidia.com/gpu back to the GPU count "
                  "(gpunode fleet shows all three)\n"
                  "  5. kubectl uncordon NODE\n");
  return out;
}

std::string RenderHtml(const FleetReport& r, const FleetCompatReport* compat, const DrainPlan* plan) {
  const FleetSummary& s = r.summary;
  std::string h;
  h.reserve(64 * 1024 + r.nodes.size() * 600);
  absl::StrAppend(&h, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                      "<meta name=\"viewport\" content=\"width=device-width\"><title>gpunode fleet</title><style>",
                  kCss, "</style></head>\n<body>\n<h1>gpunode fleet</h1>\n");
  absl::StrAppend(&h, "<p class=\"small\">source: ", HtmlEscape(r.source), "</p>\n<p>", s.nodes, " nodes (", s.gpu_nodes,
                  " with GPUs, ", s.cpu_nodes, " without); ", s.gpus, " GPUs, ", s.allocatable,
                  " allocatable as <code>nvidia.com/gpu</code>; ", s.ready_gpu_nodes, "/", s.gpu_nodes,
                  " GPU nodes Ready, ", s.cordoned_gpu_nodes, " cordoned.<br>Findings: <span class=\"error\">", s.errors,
                  " errors</span>, <span class=\"warning\">", s.warnings, " warnings</span>, <span class=\"info\">",
                  s.infos, " info</span>.</p>\n");
  if (s.dra_nodes > 0) {
    absl::StrAppend(&h, "<p>", s.dra_nodes, " GPU node(s) served through DRA: ", s.dra_allocatable,
                    " GPUs allocatable in their ResourceSlices.</p>\n");
  }
  for (const std::string& note : r.notes) absl::StrAppend(&h, "<p class=\"warning\">", HtmlEscape(note), "</p>\n");

  if (compat != nullptr) {
    absl::StrAppend(&h, "<h2>Can the pools run <code>", HtmlEscape(compat->image), "</code>?</h2>\n");
    if (!compat->workload.derived_from.empty()) {
      absl::StrAppend(&h, "<p class=\"small\">", HtmlEscape(compat->workload.derived_from), "</p>\n");
    }
    absl::StrAppend(&h, "<table>\n", Th({"pool", "nodes", "verdict", "rule", "why", "smallest fix"}));
    for (const PoolCompat& p : compat->pools) {
      absl::StrAppend(&h, "<tr>", Td(p.pool), TdN(p.nodes),
                      Td(std::string(compat::VerdictName(p.report.verdict)), VerdictClass(p.report.verdict)),
                      Td(p.report.decision.rule), Td(p.report.decision.sentence), Td(SmallestFix(p.report)), "</tr>\n");
    }
    absl::StrAppend(&h, "</table>\n");
  }
  if (plan != nullptr) {
    absl::StrAppend(&h, "<h2>Drain plan to driver ", HtmlEscape(plan->to_driver), ", at most ", plan->max_unavailable,
                    " unavailable</h2>\n<p>", plan->nodes_to_upgrade, " node(s) to upgrade, ", plan->at_target.size(),
                    " already at the target. gpunode prints the plan; installing the driver stays with the OS image or "
                    "the operator.</p>\n");
    if (!plan->blocked.empty()) absl::StrAppend(&h, "<p class=\"error\">Blocked: ", HtmlEscape(plan->blocked), "</p>\n");
    for (const std::string& w : plan->warnings) absl::StrAppend(&h, "<p class=\"warning\">", HtmlEscape(w), "</p>\n");
    absl::StrAppend(&h, "<table>\n", Th({"wave", "pool", "unavailable during", "nodes"}));
    for (const Wave& w : plan->waves) {
      std::vector<std::string> names;
      for (const PlannedNode& n : w.nodes) {
        names.push_back(HtmlEscape(n.why_first.empty() ? n.name : absl::StrCat(n.name, " (", n.why_first, ")")));
      }
      absl::StrAppend(&h, "<tr>", TdN(w.number), Td(w.pool.empty() ? "already unavailable" : w.pool),
                      TdN(w.unavailable_during), "<td>", absl::StrJoin(names, "<br>"), "</td></tr>\n");
    }
    absl::StrAppend(&h, "</table>\n");
  }

  absl::StrAppend(&h, "<h2>Findings</h2>\n");
  if (r.findings.empty()) {
    absl::StrAppend(&h, "<p class=\"ok\">None: every GPU node is Ready, validated and advertises all its GPUs.</p>\n");
  } else {
    absl::StrAppend(&h, "<table>\n", Th({"severity", "finding", "subject", "what", "fix"}));
    for (const Finding& f : r.findings) {
      std::string what = HtmlEscape(f.message);
      if (f.nodes.size() > 1) absl::StrAppend(&what, "<br><span class=\"small\">nodes: ", HtmlEscape(ListSome(f.nodes, 20)), "</span>");
      const std::string sev(SeverityName(f.severity));
      absl::StrAppend(&h, "<tr>", Td(sev, sev.c_str()), Td(f.id), Td(f.subject), "<td>", what, "</td>", Td(f.action), "</tr>\n");
    }
    absl::StrAppend(&h, "</table>\n");
  }

  absl::StrAppend(&h, "<h2>Pools</h2>\n<table>\n",
                  Th({"pool", "product", "driver", "branch", "CUDA", "module", "nodes", "ready", "GPUs", "allocatable", "agent"}));
  for (const Pool& p : r.pools) {
    std::vector<std::string> agents;
    for (const std::string& a : p.agent_versions) agents.push_back(a.empty() ? "none" : a);
    absl::StrAppend(&h, "<tr>", Td(p.name), Td(p.product), Td(p.driver), Td(p.branch), Td(p.cuda_max),
                    Td(absl::StrJoin(p.kernel_modules, ", ")), TdN(static_cast<int64_t>(p.nodes.size())), TdN(p.ready_nodes),
                    TdN(p.gpus), TdN(p.allocatable), Td(absl::StrJoin(agents, ", ")), "</tr>\n");
  }
  absl::StrAppend(&h, "</table>\n");
  if (!r.driver_upgrades.empty()) {
    absl::StrAppend(&h, "<h2>Driver upgrades</h2>\n<table>\n",
                    Th({"NVIDIADriver", "target", "previous", "done", "under way", "to start", "failed", "failed nodes",
                        "note"}));
    for (const DriverUpgrade& u : r.driver_upgrades) {
      std::vector<std::string> failed;
      for (const FailedNode& f : u.failed_nodes) {
        if (failed.size() == 20) {
          failed.push_back(absl::StrCat("(+", u.failed_nodes.size() - 20, " more)"));
          break;
        }
        failed.push_back(HtmlEscape(f.reason.empty() ? f.node : absl::StrCat(f.node, ": ", f.reason)));
      }
      absl::StrAppend(&h, "<tr>", Td(u.name), Td(u.target), Td(u.previous), Td(DoneCell(u)), TdN(u.under_way),
                      TdN(u.to_start), absl::StrCat("<td class=\"n", u.failed > 0 ? " error" : "", "\">", u.failed, "</td>"),
                      "<td>", absl::StrJoin(failed, "<br>"), "</td>", Td(u.note), "</tr>\n");
    }
    absl::StrAppend(&h, "</table>\n");
  }
  absl::StrAppend(&h, "<h2>GPU nodes</h2>\n<table>\n",
                  Th({"node", "pool", "Ready", "cordoned", "GPUs", "allocatable", "DRA", "DRA tainted", "unhealthy",
                      "GpuStackReady", "agent"}));
  for (const FleetNode& n : r.nodes) {
    if (!n.has_gpus) continue;
    const std::string stack = n.gpu_stack.present ? absl::StrCat(n.gpu_stack.status, n.gpu_stack.reason.empty() ? "" : " " + n.gpu_stack.reason) : "";
    absl::StrAppend(&h, "<tr>", Td(n.name), Td(PoolOf(r, n.name)), Td(n.ready.present ? n.ready.status : "", n.Ready() ? nullptr : "error"),
                    Td(n.unschedulable ? "yes" : ""), TdN(n.physical_gpus.value_or(0)), TdN(n.Allocatable(kResourceGpu)),
                    Td(DraCell(n)), Td(n.dra.present() ? TaintCell(n.dra) : ""), TdN(n.unhealthy_gpus.value_or(0)), Td(stack, n.gpu_stack.status == "False" ? "error" : nullptr),
                    Td(n.agent_version), "</tr>\n");
  }
  absl::StrAppend(&h, "</table>\n<p class=\"small\">gpunode ", HtmlEscape(GPUNODE_VERSION),
                  " &middot; docs/fleet.md explains each finding.</p>\n</body></html>\n");
  return h;
}

}  // namespace gpunode::fleet
