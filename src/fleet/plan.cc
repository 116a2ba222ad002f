// `gpunode fleet compat` (the compat engine per pool) and `gpunode fleet drain-plan` (waves).
#include <algorithm>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "src/compat/gpu_catalog.h"
#include "src/compat/image_ref.h"
#include "src/fleet/fleet.h"

namespace gpunode::fleet {
namespace {

// GFD's product label -> the name NVML reported: "NVIDIA-H100-80GB-HBM3" -> "NVIDIA H100 80GB HBM3";
// MIG profiles ("-MIG-1g.10gb") and the "-SHARED" suffix are not part of the GPU's name.
std::string GpuNameOf(const std::string& product) {
  std::string p = product;
  if (size_t mig = p.find("-MIG-"); mig != std::string::npos) p.resize(mig);
  if (absl::EndsWith(p, "-SHARED")) p.resize(p.size() - 7);
  return absl::StrReplaceAll(p, {{"-", " "}});
}

const FleetNode* NodeNamed(const FleetReport& fleet, const std::string& name) {
  auto it = std::lower_bound(fleet.nodes.begin(), fleet.nodes.end(), name,
                             [](const FleetNode& n, const std::string& v) { return n.name < v; });
  return it != fleet.nodes.end() && it->name == name ? &*it : nullptr;
}

}  // namespace

std::pair<int, std::string> UpgradePriority(const FleetNode& n) {
  if (n.Unavailable()) {
    std::vector<std::string> why;
    if (!n.Ready()) why.push_back(n.ready.present ? absl::StrCat("Ready=", n.ready.status) : "no Ready condition");
    if (n.unschedulable) why.push_back("cordoned");
    return {0, absl::StrCat("already unavailable: ", absl::StrJoin(why, ", "))};
  }
  if (n.gpu_stack.present && n.gpu_stack.status == "False") {
    return {1, absl::StrCat("validation failing (", n.gpu_stack.reason.empty() ? "GpuStackReady=False" : n.gpu_stack.reason, ")")};
  }
  if (!n.gpu_stack.present && n.doctor_status == "fail") {
    return {1, absl::StrCat("validation failing (doctor: ", n.doctor_first.empty() ? "fail" : n.doctor_first, ")")};
  }
  if (n.unhealthy_gpus.value_or(0) > 0) return {2, absl::StrCat(*n.unhealthy_gpus, " GPU(s) unhealthy")};
  bool renamed = false;
  for (const auto& [key, value] : n.allocatable) renamed = renamed || (key != kResourceGpu && value > 0);
  if (!renamed && n.physical_gpus && n.Allocatable(kResourceGpu) < *n.physical_gpus * n.replicas) {
    return {3, absl::StrCat("allocatable ", n.Allocatable(kResourceGpu), " below its ", *n.physical_gpus, " GPUs")};
  }
  return {4, ""};
}

std::optional<std::string> DriverRefusal(const compat::CompatData& data, const Version& driver, const FleetNode& n) {
  std::optional<Version> cc;
  if (auto major = n.labels.find(kLabelComputeMajor), minor = n.labels.find(kLabelComputeMinor);
      major != n.labels.end() && minor != n.labels.end()) {
    auto v = Version::Parse(absl::StrCat(major->second, ".", minor->second), "compute capability");
    if (v.ok()) cc = *v;
  }
  if (!cc && !n.product.empty()) {
    compat::GpuCatalog catalog(data);
    compat::GpuRef g = catalog.FromNode(GpuNameOf(n.product), 0, std::nullopt, std::nullopt);
    if (g.cc) cc = *g.cc;
  }
  if (!cc) return std::nullopt;
  const compat::Architecture* arch = data.FindArchitecture(*cc);
  if (arch == nullptr) return std::nullopt;
  const int branch = driver.major();
  const std::string what = absl::StrCat(n.product.empty() ? "its GPUs" : n.product, " (", arch->name, ", compute ",
                                        cc->ToString(), ")");
  if (arch->last_branch && branch > *arch->last_branch) {
    return absl::StrCat("driver ", driver.ToString(), " does not drive ", what, ": its last driver branch is ",
                        *arch->last_branch);
  }
  if (arch->first_branch && branch < *arch->first_branch) {
    return absl::StrCat("driver ", driver.ToString(), " does not drive ", what, ": it needs driver branch ",
                        *arch->first_branch, " or later");
  }
  return std::nullopt;
}

StatusOr<FleetCompatReport> CheckPools(const compat::CompatData& data, const FleetReport& fleet,
                                       const std::string& image) {
  GPUNODE_ASSIGN_OR_RETURN(compat::WorkloadSpec workload, compat::WorkloadFromImage(data, image));
  return CheckPools(data, fleet, image, std::move(workload));
}

FleetCompatReport CheckPools(const compat::CompatData& data, const FleetReport& fleet, const std::string& image,
                             compat::WorkloadSpec workload) {
  FleetCompatReport out;
  out.image = image;
  out.workload = std::move(workload);
  compat::GpuCatalog catalog(data);
  bool any_incompatible = false, any_unknown = false, any_caveats = false;
  for (const Pool& p : fleet.pools) {
    compat::NodeTarget target;
    target.origin = absl::StrCat("pool ", p.name, " (", p.nodes.size(), " node", p.nodes.size() == 1 ? "" : "s", ")");
    if (p.driver != "unknown") {
      auto v = Version::Parse(p.driver, kLabelDriverVersion);
      if (v.ok()) target.driver = *v;
    }
    if (p.product != "unknown") {
      std::optional<int> major, minor;
      if (p.compute_major > 0) major = p.compute_major, minor = p.compute_minor;
      target.gpus.push_back(catalog.FromNode(GpuNameOf(p.product), 0, major, minor));
    }
    PoolCompat pc;
    pc.pool = p.name;
    pc.nodes = static_cast<int>(p.nodes.size());
    pc.report = compat::Check(data, out.workload, target);
    if (!target.driver) {
      pc.report.needed.push_back(absl::StrCat("the pool's nodes carry no ", kLabelDriverVersion,
                                              " label: run gpunode's agent (or GFD) on them"));
    }
    any_incompatible |= pc.report.verdict == compat::Verdict::kIncompatible;
    any_unknown |= pc.report.verdict == compat::Verdict::kUnknown;
    any_caveats |= pc.report.verdict == compat::Verdict::kCompatibleWithCaveats;
    out.pools.push_back(std::move(pc));
  }
  out.worst = any_incompatible ? compat::Verdict::kIncompatible
              : any_unknown    ? compat::Verdict::kUnknown
              : any_caveats    ? compat::Verdict::kCompatibleWithCaveats
                               : compat::Verdict::kCompatible;
  return out;
}

int ExitCodeOf(const FleetCompatReport& report) { return compat::VerdictExitCode(report.worst); }

StatusOr<Version> ParseDriverTarget(const std::string& text) {
  auto v = Version::Parse(text, "--to-driver");
  if (!v.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(v.status().message(), " (expected a driver version such as 580.95.05)"));
  }
  if (v->parts().size() < 2 || v->parts().size() > 3 || v->major() < 100) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--to-driver \"", text, "\" is not an NVIDIA driver version: expected X.Y or X.Y.Z such as 580.95.05"));
  }
  return *v;
}

StatusOr<int> ParseMaxUnavailable(const std::string& text, int gpu_nodes) {
  auto bad = [&] {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max-unavailable \"", text, "\": expected a number of nodes >= 1 or a percentage such as 10%"));
  };
  absl::string_view t = text;
  const bool percent = absl::ConsumeSuffix(&t, "%");
  int n = 0;
  if (t.empty() || !std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
      t.size() > 9 || !absl::SimpleAtoi(t, &n)) {
    return bad();
  }
  if (percent) {
    if (n < 1 || n > 100) return bad();
    return std::max(1, gpu_nodes * n / 100);
  }
  if (n < 1) return bad();
  return n;
}

StatusOr<DrainPlan> PlanDrain(const FleetReport& fleet, const DrainOptions& options) {
  DrainPlan plan;
  plan.to_driver = options.to_driver.ToString();
  plan.max_unavailable = options.max_unavailable;
  plan.gpu_nodes = fleet.summary.gpu_nodes;
  if (options.max_unavailable < 1) {
    return absl::InvalidArgumentError("--max-unavailable must be at least 1");
  }
  std::set<std::string> selected(options.pools.begin(), options.pools.end());
  for (const std::string& want : selected) {
    bool found = std::any_of(fleet.pools.begin(), fleet.pools.end(), [&](const Pool& p) { return p.name == want; });
    if (!found) {
      std::vector<std::string> names;
      for (const Pool& p : fleet.pools) names.push_back(p.name);
      return absl::InvalidArgumentError(
          absl::StrCat("--pool \"", want, "\": no such pool (pools: ", absl::StrJoin(names, ", "), ")"));
    }
  }

  struct Candidate {
    const FleetNode* node;
    int priority;
    PlannedNode planned;
  };
  std::map<std::string, std::vector<Candidate>> by_pool;
  std::vector<Candidate> down;
  std::vector<std::string> downgrade, unknown;
  int refused_pools = 0, pools_in_scope = 0;
  for (const Pool& p : fleet.pools) {
    const bool in_scope = selected.empty() || selected.count(p.name) > 0;
    if (in_scope) ++pools_in_scope;
    if (in_scope && options.data != nullptr && !p.nodes.empty()) {
      const FleetNode* first = NodeNamed(fleet, p.nodes.front());
      if (first != nullptr) {
        if (auto no = DriverRefusal(*options.data, options.to_driver, *first)) {
          plan.warnings.push_back(absl::StrCat("pool ", p.name, " not planned: ", *no));
          ++refused_pools;
          continue;
        }
      }
    }
    for (const std::string& name : p.nodes) {
      const FleetNode* n = NodeNamed(fleet, name);
      if (n == nullptr) continue;
      const bool at_target = n->driver && *n->driver == options.to_driver;
      if (at_target) plan.at_target.push_back(name);
      if (!in_scope || at_target) {
        if (n->Unavailable()) plan.held.push_back(name);
        continue;
      }
      if (!n->driver) unknown.push_back(name);
      if (n->driver && *n->driver > options.to_driver) downgrade.push_back(name);
      auto [prio, why] = UpgradePriority(*n);
      Candidate c{n, prio, {name, p.name, n->driver ? n->driver->ToString() : "unknown", why, n->Unavailable()}};
      (n->Unavailable() ? down : by_pool[p.name]).push_back(std::move(c));
      ++plan.nodes_to_upgrade;
    }
  }
  std::sort(plan.at_target.begin(), plan.at_target.end());
  std::sort(plan.held.begin(), plan.held.end());
  if (refused_pools > 0 && refused_pools == pools_in_scope) {
    plan.blocked = absl::StrCat("driver ", plan.to_driver, " does not drive the GPUs of any pool in the plan (",
                                plan.warnings.empty() ? "" : plan.warnings.front(), ")");
    return plan;
  }
  if (!downgrade.empty()) {
    plan.warnings.push_back(absl::StrCat(downgrade.size(), " node(s) run a newer driver than ", plan.to_driver,
                                         ": this plan downgrades them (", absl::StrJoin(downgrade, ", "), ")"));
  }
  if (!unknown.empty()) {
    plan.warnings.push_back(absl::StrCat(unknown.size(), " node(s) carry no driver version label; they are planned as "
                                         "if they needed the upgrade (", absl::StrJoin(unknown, ", "), ")"));
  }

  const int held = static_cast<int>(plan.held.size());
  const int already = held + static_cast<int>(down.size());
  if (already > options.max_unavailable) {
    std::vector<std::string> names = plan.held;
    for (const Candidate& c : down) names.push_back(c.planned.name);
    std::sort(names.begin(), names.end());
    plan.blocked = absl::StrCat(already, " GPU node(s) are already unavailable (NotReady or cordoned: ",
                                absl::StrJoin(names, ", "), "), more than --max-unavailable ", options.max_unavailable,
                                ": bring nodes back or raise --max-unavailable");
    return plan;
  }
  const int slots = options.max_unavailable - held;
  int number = 0;
  if (!down.empty()) {
    // Already out of service: upgrading them first costs no capacity.
    Wave w;
    w.number = ++number;
    std::sort(down.begin(), down.end(), [](const Candidate& a, const Candidate& b) {
      return std::tie(a.planned.pool, a.planned.name) < std::tie(b.planned.pool, b.planned.name);
    });
    for (Candidate& c : down) w.nodes.push_back(std::move(c.planned));
    w.unavailable_during = already;
    plan.waves.push_back(std::move(w));
  }
  bool any_left = false;
  for (const auto& [pool, cands] : by_pool) any_left = any_left || !cands.empty();
  if (any_left && slots < 1) {
    plan.blocked = absl::StrCat(held, " GPU node(s) outside the plan are unavailable (", absl::StrJoin(plan.held, ", "),
                                "), which uses every slot of --max-unavailable ", options.max_unavailable,
                                ": no node can be drained");
    return plan;
  }
  // Pool order: pools with failing or unhealthy nodes first, then the smaller ones (a canary), then by name.
  std::vector<std::string> order;
  for (const auto& [pool, cands] : by_pool) order.push_back(pool);
  auto best = [&](const std::string& pool) {
    int b = 9;
    for (const Candidate& c : by_pool[pool]) b = std::min(b, c.priority);
    return b;
  };
  std::stable_sort(order.begin(), order.end(), [&](const std::string& a, const std::string& b) {
    const int pa = best(a) < 4 ? 0 : 1, pb = best(b) < 4 ? 0 : 1;
    if (pa != pb) return pa < pb;
    if (by_pool[a].size() != by_pool[b].size()) return by_pool[a].size() < by_pool[b].size();
    return a < b;
  });
  for (const std::string& pool : order) {
    std::vector<Candidate>& cands = by_pool[pool];
    std::sort(cands.begin(), cands.end(), [](const Candidate& a, const Candidate& b) {
      return std::tie(a.priority, a.planned.name) < std::tie(b.priority, b.planned.name);
    });
    for (size_t i = 0; i < cands.size(); i += static_cast<size_t>(slots)) {
      Wave w;
      w.number = ++number;
      w.pool = pool;
      for (size_t j = i; j < cands.size() && j < i + static_cast<size_t>(slots); ++j) {
        w.nodes.push_back(std::move(cands[j].planned));
      }
      w.unavailable_during = held + static_cast<int>(w.nodes.size());
      plan.waves.push_back(std::move(w));
    }
  }
  return plan;
}

int ExitCodeOf(const DrainPlan& plan) { return plan.blocked.empty() ? 0 : 1; }

}  // namespace gpunode::fleet
