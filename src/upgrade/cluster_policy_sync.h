// The driver-upgrade controller and NVIDIA's ClusterPolicy (nvidia.com/v1; cluster_policy.h reads
// one). While leading, the controller reads the ClusterPolicies when it starts and every resync (a
// GET of the collection; 404: the Operator's CRD is absent and there is nothing to do; 403: said
// once in the log). The oldest one (creationTimestamp, then name) is applied, as the Operator
// does; the others get status.state "ignored" and a condition saying which one is applied.
//
// From the ClusterPolicy applied:
//   - its driver is the default pool "cluster-policy" (the DaemonSet nvidia-driver-cluster-policy,
//     owned by the ClusterPolicy; the node label nvidia.com/gpu-operator.driver.owner=cluster-policy),
//     upgraded by SyncPool like an NVIDIADriver's pool — unless driver.enabled is false,
//     driver.useNvidiaDriverCRD is true, an NVIDIADriver is the default pool, or one is named
//     cluster-policy (then the NVIDIADrivers rule, and the pool's DaemonSets are deleted);
//   - the agents' policy file: the ConfigMap `--agent-policy-configmap` (key policy.yaml) in the
//     controller's namespace, and a copy of each ConfigMap the policy names (read in the Operator's
//     namespace) as `<that name>-device-plugin`, `-mig`, `-exporter`, where the chart mounts them;
//     server-side applied (field manager gpunode-driver-manager) when they change, owned by the
//     ClusterPolicy, deleted when it goes or stops naming them;
//   - its status: the condition GpunodeApplied (True Applied; True PartiallyApplied, the message
//     listing every field not applied and why; False Invalid, the error), the condition
//     GpunodeDriverPool (the default pool's progress; absent without a pool), status.state (ready
//     when the pool is ready, else notReady). Written only when they change; the Operator's own
//     conditions are kept.
//
// An invalid edit changes nothing: the last valid reading of that ClusterPolicy stays in force
// until it is fixed (after a restart, with none read yet, the pool is left as it is). Until the
// first list, and while the API server refuses it, the pool is left as it is too.
#ifndef GPUNODE_UPGRADE_CLUSTER_POLICY_SYNC_H_
#define GPUNODE_UPGRADE_CLUSTER_POLICY_SYNC_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "src/base/status.h"
#include "src/upgrade/cluster_policy.h"
#include "src/upgrade/controller.h"

namespace gpunode::kube {
class Client;
template <typename T>
class Store;
}  // namespace gpunode::kube

namespace gpunode::upgrade {

namespace internal {
struct DriverFacts;
}  // namespace internal

inline constexpr char kConditionApplied[] = "GpunodeApplied";
inline constexpr char kConditionDriverPool[] = "GpunodeDriverPool";
inline constexpr char kAgentPolicyKey[] = "policy.yaml";  // the policy ConfigMap's key (kPolicyFilePath's file)
inline constexpr char kDefaultOperatorNamespace[] = "gpu-operator";

// The ConfigMap the chart mounts at a ConfigMapCopy's `mount`: `<base>-device-plugin`, `<base>-mig`,
// `<base>-exporter` ("" for a mount it does not know).
std::string PolicyConfigMapName(const std::string& base, const std::string& mount);

// The index of the ClusterPolicy in force among `items` (the oldest by creationTimestamp, then by
// name, as the Operator picks); items.size() when empty.
size_t OldestClusterPolicy(const std::vector<nlohmann::json>& items);

// What `gpunode fleet upgrade status` shows of the ClusterPolicies.
struct ClusterPolicyView {
  std::string name;                              // the one in force
  std::optional<PolicyTranslation> translation;  // nullopt: invalid (error says why)
  std::string error;
  nlohmann::json applied;                        // its GpunodeApplied condition (null: not written yet)
  nlohmann::json pool;                           // its GpunodeDriverPool condition (null: none)
  std::vector<std::string> ignored;              // the other ClusterPolicies
  bool paused = false;                           // annotated gpunode.io/driver-upgrade.paused=true
};
// nullopt: no ClusterPolicy, or the Operator's CRD is absent.
StatusOr<std::optional<ClusterPolicyView>> ReadClusterPolicyView(kube::Client& client);

// The controller's part (Controller::Impl holds one; the queue key kClusterPolicyCollection runs Sync).
class ClusterPolicySync {
 public:
  ClusterPolicySync(kube::Client& client, const ControllerOptions& options,
                    const kube::Store<internal::DriverFacts>& drivers,
                    std::function<void(const std::string& key)> enqueue);
  ~ClusterPolicySync();
  ClusterPolicySync(const ClusterPolicySync&) = delete;
  ClusterPolicySync& operator=(const ClusterPolicySync&) = delete;

  // One pass: list, translate, the ConfigMaps, the DaemonSets of a pool no longer in force, the
  // conditions; enqueues the pool. Never an error (it logs and says when to try again).
  StatusOr<std::chrono::milliseconds> Sync();

  // For SyncPool. `resource` is the ClusterPolicy's pool ("cluster-policy"): its facts (the
  // ClusterPolicy as owner, a status writer onto it); facts with an error while the pool is to be
  // left as it is (nothing read yet, or invalid with nothing valid before); nullopt when no
  // ClusterPolicy gives that pool (any more). Any other resource: nullopt.
  std::optional<internal::DriverFacts> Driver(const std::string& resource);
  // The pool's driver while it is in force, for the pool assignment.
  std::optional<DriverSpec> Spec();
  // A ClusterPolicy is known: its pool is synced on every change of the nodes. Takes no lock.
  bool HasPool() const;

 private:
  struct Copy {
    std::string name;                         // the ConfigMap written
    std::map<std::string, std::string> data;
  };
  // mu_ held.
  std::chrono::milliseconds SyncLocked(bool* enqueue);
  bool InForce() const;
  const PolicyTranslation* Current() const;
  std::optional<internal::DriverFacts> DriverLocked(const std::string& resource);
  std::string ReadCopies(const PolicyTranslation& t, const nlohmann::json& object, std::vector<Copy>* out);
  Status WriteConfigMaps(const PolicyTranslation& t, const std::vector<Copy>& copies);
  void DeleteConfigMaps(const std::set<std::string>& keep);
  void DeletePoolDaemonSets();
  Status WritePoolStatus(const nlohmann::json& status);
  // Sets gpunode's conditions (`ours`: type -> condition without its time; null removes) and state
  // on `object` (a ClusterPolicy as read) when they differ; the object as written back.
  Status Publish(nlohmann::json* object, const std::map<std::string, nlohmann::json>& ours, const std::string& state);
  Status PublishCurrent();
  void Log(const std::string& m) const;
  void LogOnce(const std::string& m);  // a failing write is said once, not every resync

  kube::Client& client_;
  const ControllerOptions& o_;
  const kube::Store<internal::DriverFacts>& drivers_;
  std::function<void(const std::string&)> enqueue_;

  std::atomic<bool> has_pool_{false};
  std::mutex mu_;
  bool listed_ = false;          // a list succeeded once
  bool said_forbidden_ = false;
  bool swept_ = false;           // ConfigMaps no longer wanted were deleted once since the start
  int failures_ = 0;             // lists failed in a row
  nlohmann::json object_;        // the ClusterPolicy in force as last read or written (null: none)
  std::optional<PolicyTranslation> valid_;  // its last valid reading
  std::string invalid_;          // why its current spec cannot be read ("" = it can)
  std::string copy_problems_;    // ConfigMaps the policy names that could not be copied
  nlohmann::json pool_condition_;  // GpunodeDriverPool as SyncPool last reported it (null: none)
  bool pool_ready_ = false;
  bool pool_daemonsets_ = true;  // the pool's DaemonSets may exist (deleted once out of force)
  std::map<std::string, std::string> written_;  // ConfigMap name -> the data last applied (JSON)
  std::set<std::string> said_;                   // LogOnce's
};

}  // namespace gpunode::upgrade

#endif  // GPUNODE_UPGRADE_CLUSTER_POLICY_SYNC_H_
