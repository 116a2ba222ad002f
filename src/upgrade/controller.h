// `gpunode fleet controller`: reconciles NVIDIA's NVIDIADriver resources. For each resource (one
// pool of nodes): the owner label on its nodes, its driver DaemonSet (and the rollback one), the
// upgrade of its nodes one by one through PlanPool (planner.h), and its status. One replica acts,
// chosen by a coordination.k8s.io Lease; the others wait. Everything it knows lives on the Nodes
// and the resources' status, so a controller started again continues where the last one stopped.
//
// Reads through informers (a Reflector and a Store each, src/kube): NVIDIADrivers, Nodes, the
// driver pods (by label), the driver DaemonSets (by label, in its namespace). A pool is synced
// from a work queue keyed by the resource's name: on any change of its objects, and again every
// `busy_resync` while a node of it is under way (deadlines), every `resync` otherwise. The pods
// of a node being emptied are listed on demand (field selector spec.nodeName), never watched.
#ifndef GPUNODE_UPGRADE_CONTROLLER_H_
#define GPUNODE_UPGRADE_CONTROLLER_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>

#include "src/base/status.h"
#include "src/compat/dataset.h"
#include "src/kube/client.h"
#include "src/upgrade/planner.h"

namespace gpunode::upgrade {

struct ControllerOptions {
  std::string ns = "gpunode";                        // where the driver DaemonSets and the Lease live
  std::string lease_name = "gpunode-driver-manager";
  std::string identity;                              // this replica (pod name); "" = hostname + pid
  bool leader_election = true;
  ControllerPolicy policy;
  std::chrono::milliseconds busy_resync{2000};
  std::chrono::milliseconds resync{30000};
  const compat::CompatData* data = nullptr;          // refuses drivers a pool's GPUs cannot run
  // NVIDIA's ClusterPolicy (cluster_policy_sync.h): the ConfigMap in `ns` that holds the agents'
  // policy file ("" = none written), and where the ConfigMaps a ClusterPolicy names are read
  // ("" = its status.namespace, else gpu-operator).
  std::string agent_policy_configmap;
  std::string operator_namespace;
  std::function<std::chrono::system_clock::time_point()> now;  // nullptr: the system clock
  std::function<void(const std::string&)> log;
};

struct ControllerStats {
  int syncs = 0;
  int sync_errors = 0;
  int node_patches = 0;
  int evictions = 0;
  int pod_deletions = 0;
  int daemonset_writes = 0;
  int status_writes = 0;
  int workload_lists = 0;
  int condition_writes = 0;  // each one apply
  int events = 0;            // each one POST
  // Requests to the API server of all of the above (not the informers' lists and watches).
  int Requests() const {
    return node_patches + evictions + pod_deletions + daemonset_writes + status_writes + workload_lists +
           condition_writes + events;
  }
};

class Controller {
 public:
  Controller(kube::Client& client, ControllerOptions options);
  ~Controller();
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  // Stands for the Lease (unless leader_election is off) and reconciles while leading, until
  // `stop`. Returns OK when stopped, an error when the Lease cannot be used at all.
  Status Run(std::stop_token stop);

  // The informers' first lists (also done by Run). For tests: Start, WaitSynced, SyncPool.
  void Start();
  bool WaitSynced(std::chrono::milliseconds timeout);
  // One pass over one resource's pool; the time the next pass is due. The key
  // kClusterPolicyCollection: the ClusterPolicy pass (cluster_policy_sync.h).
  StatusOr<std::chrono::milliseconds> SyncPool(const std::string& resource);
  // The names of the resources known.
  std::vector<std::string> Resources() const;

  ControllerStats stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpunode::upgrade

#endif  // GPUNODE_UPGRADE_CONTROLLER_H_
