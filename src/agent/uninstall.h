// The uninstall: when the agent's DaemonSet (kubernetes.daemonset) is being deleted, gpunode takes
// off the node what it put there: the Node labels it set (listed in gpunode.io/managed-labels) and
// the files of kubernetes.removeOnUninstall (the CDI spec). A plain stop (a pod restart, an
// upgrade) keeps them, so nvidia.com/gpu.present never flaps.
//
// That must not depend on winning a race with the kubelet's SIGKILL: the chart's pre-delete hook
// deletes the DaemonSet in the foreground, so the DaemonSet has its deletionTimestamp before any
// pod gets SIGTERM. The `uninstall` component watches the DaemonSet and cleans up as soon as it
// sees that; at SIGTERM the agent asks once more (with a short deadline) before it stops the
// components. The cleanup first switches off what would write those things again (cdi, labels:
// OffReason::kUninstall), then removes them; it runs once, whoever asks first.
#ifndef GPUNODE_AGENT_UNINSTALL_H_
#define GPUNODE_AGENT_UNINSTALL_H_

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "src/base/clock.h"
#include "src/agent/config.h"
#include "src/base/status.h"
#include "src/kube/client.h"
#include "src/lifecycle/harness.h"

namespace gpunode::agent {

// The harness and its log (src/lifecycle), as the agent's components use them.
using lifecycle::Component;
using lifecycle::Harness;
using lifecycle::Log;
using lifecycle::OffReason;

// The components switched off before the cleanup: they write what it removes.
inline constexpr const char* kOffForUninstall[] = {"cdi", "labels", "dra"};

struct UninstallOptions {
  std::string daemonset;                     // NAMESPACE/NAME
  std::vector<std::string> remove_files;     // kubernetes.removeOnUninstall
  std::string node_name;
  std::string dra_driver;  // the DRA driver's name when dra is on: its ResourceSlices of the node go too
  std::chrono::milliseconds api_timeout{3000};   // each API request of the cleanup and the check
  std::chrono::milliseconds switch_off_wait{1000};  // for cdi and labels to stop before removing
  Clock* clock = &SystemClock();  // the DaemonSet watch's reconnect backoff (0.5 s doubling to 8 s)
};

class Uninstaller {
 public:
  // `conn`: the API server; every request here uses a client of its own (never one a stuck
  // component holds).
  Uninstaller(kube::Connection conn, UninstallOptions options, Harness& harness, Log& log);

  const std::string& daemonset() const { return options_.daemonset; }
  // Whether the DaemonSet is being deleted (a deletionTimestamp, or gone), asked now, each request
  // bounded by api_timeout.
  StatusOr<bool> DaemonSetDeleting();
  // Once: switches off kOffForUninstall and waits up to switch_off_wait for them, removes the
  // files and the Node labels gpunode set. Errors are logged. A second call (from another thread
  // too) returns when the first is done.
  void CleanUp(const std::string& why);
  bool done() const;

  // The `uninstall` component: watches the DaemonSet (a GET, then a watch by
  // fieldSelector=metadata.name, which RBAC grants by resourceNames) and calls CleanUp when it is
  // being deleted. Without permission to read it, it says so once and waits for the stop (the
  // check at SIGTERM then fails too, and the labels are kept).
  std::unique_ptr<Component> MakeWatcher();

 private:
  kube::Connection conn_;
  UninstallOptions options_;
  std::string ns_, name_;
  Harness& harness_;
  Log& log_;
  mutable absl::Mutex mu_;  // held during the cleanup
  bool done_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace gpunode::agent

#endif  // GPUNODE_AGENT_UNINSTALL_H_
