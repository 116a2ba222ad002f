// The controller's state, shared by controller.cc (informers, queue, leader election) and
// sync.cc (one pool's pass). Not part of the library's interface.
#ifndef GPUNODE_UPGRADE_CONTROLLER_INTERNAL_H_
#define GPUNODE_UPGRADE_CONTROLLER_INTERNAL_H_

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "absl/strings/str_cat.h"
#include "src/kube/store.h"
#include "src/kube/work_queue.h"
#include "src/upgrade/controller.h"
#include "src/upgrade/daemonset.h"

namespace gpunode::upgrade {

class ClusterPolicySync;  // cluster_policy_sync.h

namespace internal {

struct DaemonSetFacts {
  std::string name, resource, hash, version, pod_template;
  bool previous = false;
};
StatusOr<DaemonSetFacts> ReadDaemonSet(const nlohmann::json& ds);

struct DriverFacts {
  DriverSpec spec;
  std::string error;  // the resource could not be read: its status says why
  // A pool that is not an NVIDIADriver's (a ClusterPolicy's, cluster_policy_sync.h): its DaemonSets'
  // owner reference, and what writes its status (the NVIDIADriver's status subresource when null).
  nlohmann::json owner;
  std::function<Status(const nlohmann::json& status)> write_status;
  bool paused = false;
  std::optional<bool> halt_on_failure;      // its on-failure annotation
  std::optional<bool> rollback_on_failure;  // its rollback-on-failure annotation
};
StatusOr<DriverFacts> ReadDriver(const nlohmann::json& object);

}  // namespace internal

struct Controller::Impl {
  Impl(kube::Client& c, ControllerOptions options);

  void Start();
  bool WaitSynced(std::chrono::milliseconds timeout, std::stop_token stop = {});
  StatusOr<std::chrono::milliseconds> SyncPool(const std::string& resource);
  void Enqueue(const std::string& key);
  void EnqueueAll();
  void Log(const std::string& m) const {
    if (o.log) o.log(m);
  }
  std::chrono::system_clock::time_point Now() const { return o.now ? o.now() : std::chrono::system_clock::now(); }
  void Count(int ControllerStats::*field, int n = 1) {
    std::lock_guard<std::mutex> l(mu);
    stats.*field += n;
  }

  kube::Client& client;
  ControllerOptions o;
  std::unique_ptr<kube::Informer<internal::DriverFacts>> drivers;
  std::unique_ptr<kube::Informer<NodeFacts>> nodes;
  std::unique_ptr<kube::Informer<DriverPod>> pods;
  std::unique_ptr<kube::Informer<internal::DaemonSetFacts>> daemonsets;
  std::unique_ptr<ClusterPolicySync> cluster_policy;  // the ClusterPolicy's default pool and agent policy
  std::mutex queue_mu;
  std::atomic<kube::WorkQueue*> queue{nullptr};
  bool started = false;
  mutable std::mutex mu;
  ControllerStats stats;
  std::map<std::string, std::string> last_status;  // resource -> the status last written (JSON)
};

}  // namespace gpunode::upgrade

#endif  // GPUNODE_UPGRADE_CONTROLLER_INTERNAL_H_
