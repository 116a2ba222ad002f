#include "src/upgrade/planner.h"

#include <algorithm>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "src/base/well_known.h"

namespace gpunode::upgrade {
namespace {

using Clock = std::chrono::system_clock;

constexpr std::pair<State, const char*> kNames[] = {
    {State::kNone, ""},
    {State::kRequired, "upgrade-required"},
    {State::kCordon, "cordon-required"},
    {State::kWaitForJobs, "wait-for-jobs-required"},
    {State::kPodDeletion, "pod-deletion-required"},
    {State::kDrain, "drain-required"},
    {State::kPodRestart, "pod-restart-required"},
    {State::kValidation, "validation-required"},
    {State::kUncordon, "uncordon-required"},
    {State::kDone, "upgrade-done"},
    {State::kFailed, "upgrade-failed"},
};

std::string Rfc3339(Clock::time_point t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::FromChrono(t), absl::UTCTimeZone());
}

std::optional<Clock::time_point> ParseTime(const std::string& s) {
  absl::Time t;
  std::string err;
  if (!absl::ParseTime(absl::RFC3339_full, s, &t, &err)) return std::nullopt;
  return absl::ToChronoTime(t);
}

std::string Ago(std::chrono::seconds d) {
  if (d.count() < 120) return absl::StrCat(d.count(), " s");
  return absl::StrCat(d.count() / 60, " min");
}

// One node's planning: reads the node, writes its action.
class NodePlanner {
 public:
  NodePlanner(const PoolInput& in, const ControllerPolicy& policy, const NodeFacts& n, NodeAction& a,
              PoolProgress& progress)
      : in_(in), policy_(policy), n_(n), a_(a), progress_(progress) {
    a_.node = n.node.name;
  }

  // Going to (or staying on) the previous version: a rollback asked for, or done and still the
  // pool's previous version (a new target for the pool takes a rolled-back node there too).
  bool RollingBack() const {
    if (n_.annotations.count(kAnnoRollbackRequested)) return true;
    if (!n_.labels.count(kLabelRollback)) return false;
    auto t = n_.annotations.find(kAnnoTarget);
    return t != n_.annotations.end() && !in_.previous_version.empty() && t->second == in_.previous_version;
  }
  const std::string& DesiredHash() const { return RollingBack() ? in_.previous_hash : in_.target_hash; }
  const std::string& DesiredVersion() const { return RollingBack() ? in_.previous_version : in_.driver->version; }
  const DriverPod* Pod() const {
    auto it = in_.pods.find(n_.node.name);
    return it == in_.pods.end() ? nullptr : &it->second;
  }
  bool NeedsUpgrade() const {
    const DriverPod* p = Pod();
    return p != nullptr && !p->deleting && !DesiredHash().empty() && p->hash != DesiredHash();
  }
  bool CordonedByUs() const {
    auto it = n_.annotations.find(kAnnoCordoned);
    return it != n_.annotations.end() && it->second == "true";
  }
  std::chrono::seconds InState() const {
    auto it = n_.annotations.find(kAnnoSince);
    if (it == n_.annotations.end()) return std::chrono::seconds(0);
    auto t = ParseTime(it->second);
    if (!t) return std::chrono::seconds(0);
    return std::chrono::duration_cast<std::chrono::seconds>(in_.now - *t);
  }
  bool SinceMissing() const { return !n_.annotations.count(kAnnoSince) || !ParseTime(n_.annotations.at(kAnnoSince)); }

  void Go(State s, const std::string& reason = "") {
    a_.new_state = s;
    a_.annotations[kAnnoSince] = Rfc3339(in_.now);
    if (reason.empty()) {
      if (n_.annotations.count(kAnnoReason)) a_.annotations[kAnnoReason] = std::nullopt;
    } else {
      a_.annotations[kAnnoReason] = reason;
    }
  }
  void Wait(const std::string& why) { progress_.waiting.push_back({n_.node.name, why}); }

  void Fail(const std::string& condition_reason, const std::string& why) {
    if (policy_.rollback_on_failure && !RollingBack() && !in_.previous_hash.empty() &&
        n_.state >= State::kPodRestart && n_.state <= State::kValidation) {
      Go(State::kPodRestart, absl::StrCat("rolling back to ", in_.previous_version, ": ", why));
      a_.annotations[kAnnoRollbackRequested] = "true";
      a_.annotations[kAnnoTarget] = in_.previous_version;
      a_.event = Event{"Warning", "DriverUpgradeRollingBack",
                       absl::StrCat("driver ", in_.driver->version, " failed (", why, "); rolling back to ",
                                    in_.previous_version)};
      return;
    }
    Go(State::kFailed, why);
    a_.condition = Condition{"False", condition_reason, why};
    a_.event = Event{"Warning", "DriverUpgradeFailed", why};
    progress_.failed.push_back({n_.node.name, why});
  }

  // Past the state's deadline? Then fails with the reason built by `why`.
  bool Expired(std::chrono::seconds limit) const { return InState() >= limit; }

  // The node's pods to evict under the given rules; `blocked` gets why some cannot be.
  std::vector<const WorkloadPod*> ToEvict(bool gpu_only, bool force, bool empty_dir, const Selector* selector,
                                          std::vector<std::string>* blocked) const {
    std::vector<const WorkloadPod*> out;
    auto it = in_.workloads.find(n_.node.name);
    if (it == in_.workloads.end()) return out;
    for (const WorkloadPod& p : it->second) {
      if (p.terminal || p.driver || p.mirror || p.daemonset) continue;
      if (gpu_only && !p.uses_gpu) continue;
      if (!gpu_only) {
        auto skip = p.labels.find(wellknown::kLabelDrainSkip);
        if (skip != p.labels.end() && skip->second == "true") continue;
        if (selector != nullptr && !selector->empty() && !selector->Matches(p.labels)) continue;
      }
      if (!p.has_controller && !force) {
        blocked->push_back(absl::StrCat(p.ns, "/", p.name, " has no controller (", gpu_only ? "podDeletion" : "drain",
                                        ".force is false)"));
        continue;
      }
      if (p.empty_dir && !empty_dir) {
        blocked->push_back(absl::StrCat(p.ns, "/", p.name, " uses emptyDir (", gpu_only ? "podDeletion" : "drain",
                                        ".deleteEmptyDir is false)"));
        continue;
      }
      out.push_back(&p);
    }
    return out;
  }

  void Plan(int* starts_left_parallel, int* starts_left_unavailable, const std::string& halted) {
    const UpgradePolicy policy = in_.driver->Policy();
    const std::string name = n_.node.name;
    if (InProgress(n_.state) && SinceMissing()) {
      // A state without its time (set by hand or by the GPU Operator): its clock starts now.
      a_.annotations[kAnnoSince] = Rfc3339(in_.now);
    }
    switch (n_.state) {
      case State::kNone:
      case State::kDone: {
        auto skip = n_.labels.find(wellknown::kLabelUpgradeSkip);
        if (skip != n_.labels.end() && skip->second == "true") {
          if (NeedsUpgrade()) progress_.skipped.push_back(absl::StrCat(name, ": ", wellknown::kLabelUpgradeSkip, "=true"));
          return;
        }
        if (NeedsUpgrade()) {
          Go(State::kRequired);
          a_.annotations[kAnnoTarget] = DesiredVersion();
          return;
        }
        const DriverPod* p = Pod();
        if (CordonedByUs()) {
          // A cordon of ours with no upgrade under way (its state label was lost): undo it.
          a_.unschedulable = false;
          a_.annotations[kAnnoCordoned] = std::nullopt;
        }
        if (n_.state == State::kNone && p != nullptr && p->ready && p->hash == DesiredHash()) Go(State::kDone);
        return;
      }
      case State::kRequired: {
        if (!NeedsUpgrade() && Pod() != nullptr && Pod()->hash == DesiredHash()) {
          Go(State::kDone);  // the target moved back to what runs
          return;
        }
        if (n_.node.unschedulable && !CordonedByUs()) {
          progress_.skipped.push_back(absl::StrCat(name, ": cordoned by someone else (never uncordoned by gpunode)"));
          Wait("cordoned by someone else: skipped until it is uncordoned");
          return;
        }
        if (!halted.empty()) {
          Wait(halted);
          return;
        }
        const bool already_unavailable = n_.node.Unavailable();
        if (*starts_left_parallel <= 0) {
          Wait(absl::StrCat("maxParallelUpgrades ", policy.max_parallel_upgrades, " reached"));
          return;
        }
        if (!already_unavailable && *starts_left_unavailable <= 0) {
          Wait(absl::StrCat("maxUnavailable ", policy.max_unavailable.ToString(), " reached"));
          return;
        }
        --*starts_left_parallel;
        if (!already_unavailable) --*starts_left_unavailable;
        Go(State::kCordon);
        a_.annotations[kAnnoTarget] = DesiredVersion();
        return;
      }
      case State::kCordon: {
        if (n_.node.unschedulable && CordonedByUs()) {
          Go(State::kWaitForJobs);
          return;
        }
        if (n_.node.unschedulable && !CordonedByUs()) {
          // Cordoned by someone else after the start: go on, and never uncordon it.
          Go(State::kWaitForJobs);
          return;
        }
        if (Expired(policy_.deadlines.cordon)) {
          Fail("CordonTimeout", absl::StrCat("not cordoned after ", Ago(InState())));
          return;
        }
        a_.unschedulable = true;
        a_.annotations[kAnnoCordoned] = "true";
        Go(State::kWaitForJobs);
        return;
      }
      case State::kWaitForJobs: {
        if (policy.wait_for_completion.pod_selector.empty()) {
          Go(State::kPodDeletion);
          return;
        }
        if (!in_.workloads.count(name)) {
          a_.list_workloads = true;
          return;
        }
        auto sel = ParseSelector(policy.wait_for_completion.pod_selector, "upgradePolicy.waitForCompletion.podSelector");
        std::vector<std::string> running;
        if (sel.ok()) {
          for (const WorkloadPod& p : in_.workloads.at(name)) {
            if (!p.terminal && !p.driver && sel->Matches(p.labels)) running.push_back(absl::StrCat(p.ns, "/", p.name));
          }
        }
        const auto limit = policy.wait_for_completion.timeout_seconds > 0
                               ? std::chrono::seconds(policy.wait_for_completion.timeout_seconds)
                               : policy_.deadlines.wait_for_jobs;
        if (running.empty() || !sel.ok() || Expired(limit)) {
          if (!running.empty()) {
            a_.event = Event{"Warning", "DriverUpgradeWaitTimeout",
                             absl::StrCat("jobs still running after ", Ago(InState()), ": ", absl::StrJoin(running, ", "),
                                          "; going on with pod deletion")};
          }
          Go(State::kPodDeletion);
          return;
        }
        Wait(absl::StrCat("waiting for ", running.size(), " job pod(s) to complete: ", running.front()));
        return;
      }
      case State::kPodDeletion:
      case State::kDrain: {
        if (!in_.workloads.count(name)) {
          a_.list_workloads = true;
          return;
        }
        const bool drain = n_.state == State::kDrain;
        std::optional<Selector> sel;
        if (drain && !policy.drain.pod_selector.empty()) {
          auto s = ParseSelector(policy.drain.pod_selector, "upgradePolicy.drain.podSelector");
          if (!s.ok()) {
            Fail("DrainFailed", std::string(s.status().message()));
            return;
          }
          sel = *s;
        }
        std::vector<std::string> blocked;
        auto pods = drain ? ToEvict(false, policy.drain.force, policy.drain.delete_empty_dir, sel ? &*sel : nullptr, &blocked)
                          : ToEvict(true, policy.pod_deletion.force, policy.pod_deletion.delete_empty_dir, nullptr, &blocked);
        if (pods.empty() && blocked.empty()) {
          Go(!drain && policy.drain.enable ? State::kDrain : State::kPodRestart);
          return;
        }
        // 0 would mean "forever" to NVIDIA's library; here every state has a deadline: 300 s then.
        int timeout = drain ? policy.drain.timeout_seconds : policy.pod_deletion.timeout_seconds;
        if (timeout == 0) timeout = 300;
        if (Expired(std::chrono::seconds(timeout))) {
          std::vector<std::string> left = blocked;
          for (const WorkloadPod* p : pods) left.push_back(absl::StrCat(p->ns, "/", p->name));
          const std::string why = absl::StrCat(drain ? "drain" : "GPU pod deletion", " not finished after ",
                                               Ago(InState()), ": ", left.size(), " pod(s) left: ",
                                               absl::StrJoin(left.begin(), left.begin() + std::min<size_t>(left.size(), 5), "; "));
          if (!drain && policy.drain.enable) {
            Go(State::kDrain, why);
            return;
          }
          Fail(drain ? "DrainTimeout" : "PodDeletionTimeout", why);
          return;
        }
        for (const WorkloadPod* p : pods) {
          if (!p->deleting) a_.evict.push_back({p->ns, p->name});
        }
        a_.list_workloads = true;  // read them again on the next pass
        Wait(absl::StrCat(drain ? "draining: " : "evicting GPU pods: ", pods.size(), " pod(s) left",
                          blocked.empty() ? "" : absl::StrCat("; not evicted: ", blocked.front())));
        return;
      }
      case State::kPodRestart: {
        const bool want_previous = RollingBack();
        if (want_previous && !n_.labels.count(kLabelRollback)) {
          a_.labels[kLabelRollback] = "true";  // the previous DaemonSet takes the node
          return;
        }
        if (!want_previous && n_.labels.count(kLabelRollback)) {
          a_.labels[kLabelRollback] = std::nullopt;
          return;
        }
        const DriverPod* p = Pod();
        if (p != nullptr && !p->deleting && p->hash != DesiredHash()) {
          a_.delete_pod = std::make_pair(p->ns, p->name);
          Wait(absl::StrCat("replacing driver pod ", p->name));
          return;
        }
        if (p != nullptr && !p->deleting && p->hash == DesiredHash()) {
          if (p->ready) {
            Go(State::kValidation);
            return;
          }
          if ((p->waiting_reason == "CrashLoopBackOff" && p->restarts >= 3) || p->waiting_reason == "InvalidImageName" ||
              p->waiting_reason == "CreateContainerConfigError") {
            Fail("DriverPodFailing", absl::StrCat("driver pod ", p->name, " ", p->waiting_reason, " (", p->restarts,
                                                  " restarts)", p->waiting_message.empty() ? "" : ": ",
                                                  p->waiting_message));
            return;
          }
        }
        if (Expired(policy_.deadlines.pod_restart)) {
          std::string what = p == nullptr ? "no driver pod on the node"
                                          : absl::StrCat("driver pod ", p->name, p->ready ? " ready" : " not ready",
                                                         p->waiting_reason.empty() ? "" : absl::StrCat(" (", p->waiting_reason, ")"));
          Fail("DriverPodTimeout", absl::StrCat("driver ", DesiredVersion(), " not running after ", Ago(InState()),
                                                ": ", what));
          return;
        }
        Wait(p == nullptr ? "waiting for the DaemonSet to start the new driver pod"
                          : absl::StrCat("waiting for driver pod ", p->name, " to be ready",
                                         p->waiting_reason.empty() ? "" : absl::StrCat(" (", p->waiting_reason, ")")));
        return;
      }
      case State::kValidation: {
        const std::string& version = DesiredVersion();
        auto label = n_.labels.find(wellknown::kLabelDriverVersion);
        const fleet::Condition& gate = n_.node.gpu_stack;
        const bool label_ok = label != n_.labels.end() && label->second == version;
        const bool gate_ok = gate.present && gate.status == "True" &&
                             absl::StrContains(gate.message, absl::StrCat(wellknown::kValidatedOnDriver, version));
        const DriverPod* p = Pod();
        if (label_ok && gate_ok && p != nullptr && p->ready && p->hash == DesiredHash()) {
          Go(State::kUncordon);
          return;
        }
        std::string why;
        if (!gate.present) {
          why = "no GpuStackReady condition (is gpunode's agent running on the node?)";
        } else if (gate.status != "True") {
          why = absl::StrCat("GpuStackReady=", gate.status, " (", gate.reason, "): ", gate.message.substr(0, 300));
        } else if (!gate_ok) {
          why = absl::StrCat("GpuStackReady=True not yet for driver ", version);
        } else if (!label_ok) {
          why = absl::StrCat(wellknown::kLabelDriverVersion, "=", label == n_.labels.end() ? "(none)" : label->second,
                             ", not ", version);
        } else {
          why = "the driver pod is not ready";
        }
        if (Expired(policy_.deadlines.validation)) {
          Fail("ValidationFailed", absl::StrCat("driver ", version, " not validated after ", Ago(InState()), ": ", why));
          return;
        }
        Wait(absl::StrCat("validating: ", why));
        return;
      }
      case State::kUncordon: {
        if (CordonedByUs()) {
          a_.unschedulable = false;
          a_.annotations[kAnnoCordoned] = std::nullopt;
        }
        const bool rolled_back = RollingBack();
        Go(State::kDone);
        a_.condition = Condition{rolled_back ? "False" : "True", rolled_back ? "RolledBack" : "UpgradeDone",
                                 rolled_back ? absl::StrCat("rolled back to driver ", in_.previous_version)
                                             : absl::StrCat("driver ", DesiredVersion(), " validated")};
        a_.event = Event{rolled_back ? "Warning" : "Normal", rolled_back ? "DriverRolledBack" : "DriverUpgradeDone",
                         a_.condition->message};
        a_.annotations[kAnnoRollbackRequested] = std::nullopt;
        return;
      }
      case State::kFailed: {
        auto it = n_.annotations.find(kAnnoReason);
        progress_.failed.push_back({name, it == n_.annotations.end() ? "upgrade-failed" : it->second});
        return;
      }
    }
  }

 private:
  const PoolInput& in_;
  const ControllerPolicy& policy_;
  const NodeFacts& n_;
  NodeAction& a_;
  PoolProgress& progress_;
};

}  // namespace

const char* StateName(State s) {
  for (const auto& [state, name] : kNames) {
    if (state == s) return name;
  }
  return "";
}

std::optional<State> ParseState(const std::string& label) {
  for (const auto& [state, name] : kNames) {
    if (label == name) return state;
  }
  return std::nullopt;
}

bool InProgress(State s) { return s >= State::kCordon && s <= State::kUncordon; }

PoolPlan PlanPool(const PoolInput& in, const ControllerPolicy& policy) {
  PoolPlan plan;
  PoolProgress& pr = plan.progress;
  const UpgradePolicy up = in.driver->Policy();
  pr.nodes = static_cast<int>(in.nodes.size());
  pr.max_unavailable = up.max_unavailable.Of(pr.nodes);

  // Counted before any start: nodes under way and nodes unavailable.
  int in_progress = 0, unavailable = 0;
  std::vector<std::string> failed_names;
  for (const NodeFacts* n : in.nodes) {
    if (InProgress(n->state)) ++in_progress;
    if (InProgress(n->state) || n->node.Unavailable()) ++unavailable;
    if (n->state == State::kFailed) failed_names.push_back(n->node.name);
  }
  std::string halted;
  if (in.refusal) {
    halted = absl::StrCat("not started: ", *in.refusal);
  } else if (in.paused) {
    halted = absl::StrCat("paused (", kAnnoPaused, "=true on the NVIDIADriver; gpunode fleet upgrade resume)");
  } else if (!up.auto_upgrade) {
    halted = "upgradePolicy.autoUpgrade is false";
  } else if (policy.halt_on_failure && !failed_names.empty()) {
    halted = absl::StrCat("halted: ", failed_names.size(), " node(s) failed (", failed_names.front(),
                          "); gpunode fleet upgrade retry NODE, or run the controller with --on-failure continue");
  }
  pr.halted = halted;
  int parallel_left = up.max_parallel_upgrades > 0 ? up.max_parallel_upgrades - in_progress : 1 << 30;
  int unavailable_left = pr.max_unavailable - unavailable;

  // The order of starts: fleet's (already unavailable, failing validation, unhealthy, short, rest).
  std::vector<const NodeFacts*> order = in.nodes;
  std::stable_sort(order.begin(), order.end(), [](const NodeFacts* a, const NodeFacts* b) {
    const int pa = fleet::UpgradePriority(a->node).first, pb = fleet::UpgradePriority(b->node).first;
    return std::tie(pa, a->node.name) < std::tie(pb, b->node.name);
  });
  for (const NodeFacts* n : order) {
    NodeAction a;
    NodePlanner(in, policy, *n, a, pr).Plan(&parallel_left, &unavailable_left, halted);
    const State after = a.new_state.value_or(n->state);
    pr.by_state[StateName(after)]++;
    if (InProgress(after)) ++pr.in_progress;
    if (InProgress(after) || n->node.Unavailable() || (a.unschedulable && *a.unschedulable)) ++pr.unavailable;
    if (!a.Empty()) plan.actions.push_back(std::move(a));
  }
  pr.done = pr.nodes > 0 && pr.by_state["upgrade-done"] == pr.nodes;
  return plan;
}

}  // namespace gpunode::upgrade
