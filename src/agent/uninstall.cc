#include "src/agent/uninstall.h"

#include <atomic>

#include "absl/strings/str_cat.h"
#include "src/base/backoff.h"
#include "src/base/host_fs.h"
#include "src/dra/resource_slices.h"
#include "src/kube/node.h"

namespace gpunode::agent {
namespace {

bool Deleting(const nlohmann::json& ds) {
  return ds.is_object() && ds.contains("metadata") && ds["metadata"].is_object() &&
         ds["metadata"].contains("deletionTimestamp") && !ds["metadata"]["deletionTimestamp"].is_null();
}

class UninstallWatcher final : public Component {
 public:
  UninstallWatcher(Uninstaller& u, kube::Connection conn, std::string ns, std::string name, Log& log, Clock& clock)
      : u_(u), conn_(std::move(conn)), ns_(std::move(ns)), name_(std::move(name)), log_(log), clock_(clock) {}
  std::string name() const override { return "uninstall"; }

  Status Run(std::stop_token stop) override {
    kube::Client client(conn_);
    const std::string path = absl::StrCat("/apis/apps/v1/namespaces/", kube::UrlEscape(ns_), "/daemonsets/",
                                          kube::UrlEscape(name_));
    const std::string watch = absl::StrCat("/apis/apps/v1/namespaces/", kube::UrlEscape(ns_),
                                           "/daemonsets?fieldSelector=metadata.name%3D", kube::UrlEscape(name_));
    const std::string ds = absl::StrCat("DaemonSet ", ns_, "/", name_);
    std::atomic<bool> stop_flag{false};
    std::stop_callback on_stop(stop, [&] { stop_flag = true; });
    Backoff backoff({.initial = std::chrono::milliseconds(500), .max = std::chrono::milliseconds(8000)});
    auto idle = [&](const std::string& why) {
      if (!why.empty()) log_.Warn(name(), why);
      clock_.WaitFor(std::chrono::hours(24 * 365), stop);
      return absl::OkStatus();
    };
    auto pause = [&](const std::string& why, const char* then) {
      const std::chrono::milliseconds d = backoff.Next();
      log_.Warn(name(), absl::StrCat(why, "; ", then, " in ", d.count(), " ms"));
      clock_.WaitFor(d, stop);
    };
    while (!stop.stop_requested()) {
      bool deleting = false;
      auto got = client.Get(path);
      if (!got.ok()) {
        if (absl::IsNotFound(got.status())) {
          deleting = true;
        } else if (absl::IsPermissionDenied(got.status()) || absl::IsUnauthenticated(got.status())) {
          return idle(absl::StrCat(got.status().message(), ": the uninstall is not watched (noticed at SIGTERM only)"));
        } else {
          pause(std::string(got.status().message()), "again");
          continue;
        }
      }
      if (!deleting && Deleting(*got)) deleting = true;
      if (!deleting) {
        const std::string rv = (*got)["metadata"].value("resourceVersion", "");
        Status st = client.Watch(
            watch, rv, 300,
            [&](const std::string& type, const nlohmann::json& object) {
              if (type == "DELETED" || (type != "BOOKMARK" && Deleting(object))) {
                deleting = true;
                return false;
              }
              return true;
            },
            &stop_flag);
        if (stop.stop_requested()) break;
        if (!deleting && (absl::IsPermissionDenied(st) || absl::IsUnauthenticated(st))) {
          return idle(absl::StrCat(st.message(), ": the uninstall is not watched (noticed at SIGTERM only)"));
        }
        if (!deleting && !st.ok() && !absl::IsAborted(st)) {
          pause(std::string(st.message()), "watching again");
          continue;
        }
        if (st.ok()) backoff.Reset();
      }
      if (deleting) {
        u_.CleanUp(absl::StrCat(ds, " is being deleted"));
        return idle("");
      }
    }
    return absl::OkStatus();
  }

 private:
  Uninstaller& u_;
  kube::Connection conn_;
  std::string ns_, name_;
  Log& log_;
  Clock& clock_;
};

}  // namespace

Uninstaller::Uninstaller(kube::Connection conn, UninstallOptions options, Harness& harness, Log& log)
    : conn_(std::move(conn)), options_(std::move(options)), harness_(harness), log_(log) {
  Status st = kube::SplitNamespaced(options_.daemonset, "kubernetes.daemonset", &ns_, &name_);
  (void)st;  // the config reader checked NAMESPACE/NAME
}

StatusOr<bool> Uninstaller::DaemonSetDeleting() {
  kube::Client client(conn_);
  client.set_timeout(options_.api_timeout);
  return kube::DaemonSetDeleting(client, ns_, name_);
}

bool Uninstaller::done() const {
  absl::MutexLock lock(&mu_);
  return done_;
}

void Uninstaller::CleanUp(const std::string& why) {
  absl::MutexLock lock(&mu_);
  if (done_) return;
  done_ = true;
  log_.Info("agent", absl::StrCat(why, ": removing what gpunode put on the node"));
  for (const char* c : kOffForUninstall) harness_.SetOff(c, OffReason::kUninstall, true, why);
  for (const char* c : kOffForUninstall) {
    if (!harness_.WaitStopped(c, options_.switch_off_wait)) {
      log_.Warn(c, absl::StrCat("still stopping after ", options_.switch_off_wait.count(),
                                " ms; removing what it wrote anyway"));
    }
  }
  for (const std::string& path : options_.remove_files) {
    Status st = HostFs::Local().RemoveFile(path);
    if (st.ok()) {
      log_.Info("agent", absl::StrCat("removed ", path));
    } else if (!absl::IsNotFound(st)) {
      log_.Error("agent", std::string(st.message()));
    }
  }
  if (!options_.node_name.empty()) {
    kube::Client client(conn_);
    client.set_timeout(options_.api_timeout);
    auto r = kube::RemoveNodeLabels(client, options_.node_name);
    if (!r.ok()) {
      log_.Error("agent", absl::StrCat("Node labels not removed: ", r.status().message()));
    } else {
      log_.Info("agent", absl::StrCat("Node ", options_.node_name, ": ", r->removed.size(), " labels of gpunode removed"));
    }
    if (!options_.dra_driver.empty()) {
      dra::SlicePublisher slices(client, {.driver = options_.dra_driver, .node = options_.node_name});
      if (Status st = slices.RemoveAll(); !st.ok()) {
        log_.Error("agent", absl::StrCat("ResourceSlices not removed: ", st.message()));
      } else {
        log_.Info("agent", absl::StrCat("Node ", options_.node_name, ": ", slices.last_writes().deleted,
                                        " ResourceSlices of ", options_.dra_driver, " removed"));
      }
    }
  }
}

std::unique_ptr<Component> Uninstaller::MakeWatcher() {
  return std::make_unique<UninstallWatcher>(*this, conn_, ns_, name_, log_, *options_.clock);
}

}  // namespace gpunode::agent
