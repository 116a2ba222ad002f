// The driver upgrade of one pool (one NVIDIADriver), node by node, as a pure function: what the
// cluster looks like now (the pool's Nodes with their state label and annotations, each node's
// driver pod, the workload pods of the nodes that are being emptied, the time) -> what to do next
// (label and annotate, cordon, evict, delete a driver pod, uncordon, a Node condition, an Event)
// and why each waiting node waits. No I/O: the controller (controller.h) reads the cluster,
// calls PlanPool and carries the actions out; a restarted controller plans from the same labels
// and continues where the last one stopped.
//
// The states are NVIDIA's (nvidia.com/gpu-driver-upgrade-state), in this order:
//   upgrade-required -> cordon-required -> wait-for-jobs-required -> pod-deletion-required
//   -> [drain-required] -> pod-restart-required -> validation-required -> uncordon-required
//   -> upgrade-done; any step past its deadline -> upgrade-failed (or, by policy, a rollback).
// Every state has a deadline (since = the annotation written with the state).
#ifndef GPUNODE_UPGRADE_PLANNER_H_
#define GPUNODE_UPGRADE_PLANNER_H_

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "src/base/status.h"
#include "src/base/well_known.h"
#include "src/fleet/fleet.h"
#include "src/upgrade/nvidia_driver.h"

namespace gpunode::upgrade {

enum class State {
  kNone,  // no label
  kRequired,
  kCordon,
  kWaitForJobs,
  kPodDeletion,
  kDrain,
  kPodRestart,
  kValidation,
  kUncordon,
  kDone,
  kFailed,
};
const char* StateName(State s);  // the label value ("" for kNone)
std::optional<State> ParseState(const std::string& label);
// cordon-required .. uncordon-required: the node is (being) taken out of service.
bool InProgress(State s);

// Annotations and labels the controller writes on Nodes (besides NVIDIA's in well_known.h).
inline constexpr char kAnnoSince[] = "gpunode.io/driver-upgrade.since";
inline constexpr char kAnnoCordoned[] = "gpunode.io/driver-upgrade.cordoned";
inline constexpr const auto& kAnnoReason = wellknown::kAnnoUpgradeReason;  // read by gpunode fleet too
inline constexpr char kAnnoTarget[] = "gpunode.io/driver-upgrade.target";
inline constexpr char kAnnoRollbackRequested[] = "gpunode.io/driver-upgrade.rollback-requested";
inline constexpr const auto& kLabelRollback = wellknown::kLabelUpgradeRollback;  // moves the node to the previous DaemonSet
// On the NVIDIADriver: no node starts an upgrade while "true" (nodes under way finish).
inline constexpr const auto& kAnnoPaused = wellknown::kAnnoUpgradePaused;
// On the NVIDIADriver, over the controller's flags for its pool: "halt" or "continue"; "true"/"false".
inline constexpr char kAnnoOnFailure[] = "gpunode.io/driver-upgrade.on-failure";
inline constexpr char kAnnoRollbackOnFailure[] = "gpunode.io/driver-upgrade.rollback-on-failure";
// Driver pods: which resource, which template, which version.
inline constexpr char kLabelPodDriver[] = "gpunode.io/nvidia-driver";
inline constexpr char kLabelPodHash[] = "gpunode.io/driver-template-hash";
inline constexpr char kAnnoPodVersion[] = "gpunode.io/driver-version";

// A Node as the controller keeps it.
struct NodeFacts {
  fleet::FleetNode node;                            // GPU labels, Ready, GpuStackReady, unschedulable
  std::map<std::string, std::string> labels;        // every label (nodeSelectors may use any)
  std::map<std::string, std::string> annotations;   // gpunode.io/driver-upgrade.* only
  State state = State::kNone;
  std::string state_label;                          // as found (an unknown value is reported)
  std::string os_tag;                               // NFD's os_release: "ubuntu22.04"; "" unknown
  std::string uid;                                  // metadata.uid (Events name it)
  // `node` with its labels (ReadNodeFacts keeps them only in `labels`), for fleet's functions.
  fleet::FleetNode WithLabels() const {
    fleet::FleetNode n = node;
    n.labels = labels;
    return n;
  }
};
StatusOr<NodeFacts> ReadNodeFacts(const nlohmann::json& node);

// A driver pod (of our DaemonSets).
struct DriverPod {
  std::string ns, name, node, resource, hash, version;
  bool ready = false;
  bool deleting = false;
  bool previous = false;  // of the rollback DaemonSet
  int restarts = 0;
  std::string waiting_reason;  // a container's: CrashLoopBackOff, ErrImagePull, ...
  std::string waiting_message;
};
StatusOr<DriverPod> ReadDriverPod(const nlohmann::json& pod);

// A pod on a node being emptied.
struct WorkloadPod {
  std::string ns, name;
  std::map<std::string, std::string> labels;
  bool terminal = false;       // Succeeded or Failed
  bool deleting = false;
  bool daemonset = false;      // owned by a DaemonSet
  bool mirror = false;         // a static pod's mirror
  bool has_controller = false;
  bool uses_gpu = false;       // requests nvidia.com/* resources or has resource claims
  bool empty_dir = false;
  bool driver = false;         // one of our driver pods
};
StatusOr<WorkloadPod> ReadWorkloadPod(const nlohmann::json& pod);

// Equality-based label selectors as kubectl takes them: "a=b,c!=d,e,!f" (sets: not supported,
// InvalidArgument naming `where`).
struct Selector {
  struct Term {
    std::string key, value;
    enum Op { kEq, kNe, kExists, kNotExists } op = kEq;
  };
  std::vector<Term> terms;
  bool Matches(const std::map<std::string, std::string>& labels) const;
  bool empty() const { return terms.empty(); }
};
StatusOr<Selector> ParseSelector(const std::string& text, const std::string& where);

struct Deadlines {
  std::chrono::seconds cordon{120};
  std::chrono::seconds wait_for_jobs{3600};  // when waitForCompletion.timeoutSeconds is 0
  std::chrono::seconds pod_restart{900};     // the driver pod's start (NVIDIA's startup probe allows ~21 min)
  std::chrono::seconds validation{600};      // NVIDIA's validationTimeoutSeconds
  std::chrono::seconds uncordon{120};
  // Pod deletion and drain: the resource's podDeletion/drain.timeoutSeconds.
};

struct ControllerPolicy {
  bool halt_on_failure = true;        // a failed node stops new starts in its pool
  bool rollback_on_failure = false;   // a failed validation rolls the node back to the previous version
  Deadlines deadlines;
};

struct PoolInput {
  const DriverSpec* driver = nullptr;
  std::string target_hash;       // the main DaemonSet's template
  std::string previous_version;  // the rollback DaemonSet's ("" when none)
  std::string previous_hash;
  bool paused = false;
  std::optional<std::string> refusal;  // the target does not drive this pool's GPUs: nothing starts
  std::vector<const NodeFacts*> nodes;                    // the pool's
  std::map<std::string, DriverPod> pods;                  // by node: its driver pod (live one preferred)
  std::map<std::string, std::vector<WorkloadPod>> workloads;  // by node, for the nodes asked for
  std::chrono::system_clock::time_point now;
};

struct Condition {
  std::string status, reason, message;  // of GpuDriverUpgrade
};
struct Event {
  std::string type, reason, message;  // Normal|Warning
};

// What to do on one node. The controller writes labels/annotations/unschedulable in one patch.
struct NodeAction {
  std::string node;
  std::optional<State> new_state;
  std::optional<bool> unschedulable;
  std::map<std::string, std::optional<std::string>> annotations;  // nullopt: remove
  std::map<std::string, std::optional<std::string>> labels;
  std::vector<std::pair<std::string, std::string>> evict;         // namespace, name
  std::optional<std::pair<std::string, std::string>> delete_pod;  // the driver pod to replace
  bool list_workloads = false;  // plan again once the node's pods are listed
  std::optional<Condition> condition;
  std::optional<Event> event;
  bool Empty() const {
    return !new_state && !unschedulable && annotations.empty() && labels.empty() && evict.empty() && !delete_pod &&
           !list_workloads && !condition && !event;
  }
};

struct PoolProgress {
  int nodes = 0;
  std::map<std::string, int> by_state;  // label value ("" none) -> nodes
  int unavailable = 0;                  // after the actions
  int max_unavailable = 0;              // the resolved limit
  int in_progress = 0;
  std::vector<std::pair<std::string, std::string>> failed;   // node, reason
  std::vector<std::pair<std::string, std::string>> waiting;  // node, why it waits
  std::vector<std::string> skipped;                          // skip label, or cordoned by someone else
  std::string halted;                                        // why no node starts ("" running)
  bool done = false;                                         // every node at the target and validated
};

struct PoolPlan {
  std::vector<NodeAction> actions;
  PoolProgress progress;
};

PoolPlan PlanPool(const PoolInput& in, const ControllerPolicy& policy);

}  // namespace gpunode::upgrade

#endif  // GPUNODE_UPGRADE_PLANNER_H_
