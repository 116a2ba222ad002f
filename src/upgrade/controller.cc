#include "src/upgrade/controller.h"

#include <unistd.h>

#include <algorithm>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/base/well_known.h"
#include "src/kube/leader_election.h"
#include "src/kube/node.h"
#include "src/kube/store.h"
#include "src/kube/work_queue.h"
#include "src/upgrade/cluster_policy_sync.h"
#include "src/upgrade/controller_internal.h"
#include "src/upgrade/daemonset.h"

namespace gpunode::upgrade {

using internal::DaemonSetFacts;
using internal::DriverFacts;

namespace internal {

StatusOr<DaemonSetFacts> ReadDaemonSet(const nlohmann::json& ds) {
  DaemonSetFacts f;
  if (!ds.is_object() || !ds.contains("metadata") || !ds["metadata"].is_object()) {
    return absl::InvalidArgumentError("DaemonSet: no metadata");
  }
  const nlohmann::json& m = ds["metadata"];
  f.name = m.value("name", "");
  if (m.contains("labels") && m["labels"].is_object()) {
    const nlohmann::json& l = m["labels"];
    if (l.contains(kLabelPodDriver) && l[kLabelPodDriver].is_string()) f.resource = l[kLabelPodDriver];
  }
  if (m.contains("annotations") && m["annotations"].is_object()) {
    const nlohmann::json& a = m["annotations"];
    if (a.contains(kLabelPodHash) && a[kLabelPodHash].is_string()) f.hash = a[kLabelPodHash];
    if (a.contains(kAnnoPodVersion) && a[kAnnoPodVersion].is_string()) f.version = a[kAnnoPodVersion];
    if (a.contains(kAnnoPodTemplate) && a[kAnnoPodTemplate].is_string()) f.pod_template = a[kAnnoPodTemplate];
  }
  f.previous = f.name == DaemonSetName(f.resource, true);
  if (f.pod_template.size() > (size_t{256} << 10)) return absl::InvalidArgumentError(absl::StrCat("DaemonSet ", f.name, ": template over 256 KiB"));
  return f;
}

StatusOr<DriverFacts> ReadDriver(const nlohmann::json& object) {
  DriverFacts f;
  auto spec = ParseNvidiaDriver(object);
  if (spec.ok()) {
    f.spec = *spec;
  } else {
    f.error = std::string(spec.status().message());
    if (object.is_object() && object.contains("metadata") && object["metadata"].is_object()) {
      f.spec.name = object["metadata"].value("name", "");
      f.spec.uid = object["metadata"].value("uid", "");
    }
  }
  if (object.is_object() && object.contains("metadata") && object["metadata"].is_object() &&
      object["metadata"].contains("annotations") && object["metadata"]["annotations"].is_object()) {
    const nlohmann::json& a = object["metadata"]["annotations"];
    auto text = [&a](const char* key) {
      return a.contains(key) && a[key].is_string() ? a[key].get<std::string>() : std::string();
    };
    f.paused = text(kAnnoPaused) == "true";
    const std::string on_failure = text(kAnnoOnFailure), rollback = text(kAnnoRollbackOnFailure);
    if (on_failure == "halt" || on_failure == "continue") {
      f.halt_on_failure = on_failure == "halt";
    } else if (!on_failure.empty()) {
      f.error = absl::StrCat("annotation ", kAnnoOnFailure, ": \"", on_failure.substr(0, 64), "\" is not halt or continue");
    }
    if (rollback == "true" || rollback == "false") {
      f.rollback_on_failure = rollback == "true";
    } else if (!rollback.empty()) {
      f.error = absl::StrCat("annotation ", kAnnoRollbackOnFailure, ": \"", rollback.substr(0, 64), "\" is not true or false");
    }
  }
  return f;
}

}  // namespace internal

Controller::Controller(kube::Client& client, ControllerOptions options)
    : impl_(std::make_unique<Impl>(client, std::move(options))) {}
Controller::~Controller() = default;

void Controller::Start() { impl_->Start(); }
bool Controller::WaitSynced(std::chrono::milliseconds timeout) { return impl_->WaitSynced(timeout); }
StatusOr<std::chrono::milliseconds> Controller::SyncPool(const std::string& resource) {
  return resource == kClusterPolicyCollection ? impl_->cluster_policy->Sync() : impl_->SyncPool(resource);
}
std::vector<std::string> Controller::Resources() const { return impl_->drivers->store().Keys(); }
ControllerStats Controller::stats() const {
  std::lock_guard<std::mutex> l(impl_->mu);
  return impl_->stats;
}

Status Controller::Run(std::stop_token stop) {
  Impl& im = *impl_;
  im.Start();
  auto work = [&im](std::stop_token leading) {
    im.Log("leading: reconciling NVIDIADriver resources");
    kube::WorkQueue queue;
    {
      std::lock_guard<std::mutex> l(im.queue_mu);
      im.queue.store(&queue);
    }
    if (!im.WaitSynced(std::chrono::seconds(60), leading)) {
      im.Log("informers not synced after 60 s; going on with what they have");
    }
    queue.Add(kClusterPolicyCollection);  // first: the ClusterPolicy's pool is known before it is synced
    for (const std::string& key : im.drivers->store().Keys()) queue.Add(key);
    std::jthread stopper([&queue](std::stop_token s) {
      std::mutex m;
      std::condition_variable_any cv;
      std::unique_lock<std::mutex> l(m);
      cv.wait(l, s, [] { return false; });
      queue.ShutDown();
    });
    std::stop_callback on_stop(leading, [&stopper] { stopper.request_stop(); });
    while (auto key = queue.Get()) {
      if (leading.stop_requested()) {
        queue.Done(*key);
        break;
      }
      auto next = *key == kClusterPolicyCollection ? im.cluster_policy->Sync() : im.SyncPool(*key);
      if (next.ok()) {
        queue.Forget(*key);
        if (*next > std::chrono::milliseconds(0)) queue.AddAfter(*key, *next);
      } else {
        im.Log(absl::StrCat("NVIDIADriver ", *key, ": ", next.status().message()));
        queue.AddRateLimited(*key);
      }
      queue.Done(*key);
    }
    {
      std::lock_guard<std::mutex> l(im.queue_mu);
      im.queue.store(nullptr);
    }
    im.Log("stopped leading");
  };
  if (!im.o.leader_election) {
    work(stop);
    return absl::OkStatus();
  }
  kube::LeaderElectionConfig le;
  le.ns = im.o.ns;
  le.name = im.o.lease_name;
  le.identity = im.o.identity;
  if (le.identity.empty()) {
    char host[256] = {0};
    gethostname(host, sizeof host - 1);
    le.identity = absl::StrCat(host, "-", getpid());
  }
  le.on_started_leading = work;
  le.on_new_leader = [&im](const std::string& id) { im.Log(absl::StrCat("leader: ", id.empty() ? "(none)" : id)); };
  le.log = [&im](const std::string& m) { im.Log(m); };
  GPUNODE_ASSIGN_OR_RETURN(auto elector, kube::LeaderElector::Create(im.client, le));
  while (!stop.stop_requested()) elector->Run(stop);
  return absl::OkStatus();
}

}  // namespace gpunode::upgrade
