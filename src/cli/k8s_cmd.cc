// gpunode k8s: cluster-side chores of the Helm chart. `uninstall` is its pre-delete hook: the
// DaemonSet is deleted first (foreground, so each pod sees its DaemonSet going and cleans its own
// node while its service account still works), then the labels gpunode set are removed from every
// Node still carrying them (nodes whose pod could not, e.g. NotReady ones).
#include <chrono>
#include <iostream>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/base/terminal.h"
#include "src/cli/common.h"
#include "src/devices/sleep_interval.h"
#include "src/kube/client.h"
#include "src/kube/json_fields.h"
#include "src/kube/node.h"

namespace gpunode::cli {
namespace {

struct UninstallFlags {
  std::string daemonset;
  std::string kubeconfig;
  std::string dra_driver;  // "": the chart's DRA driver was off
  std::string timeout = "120s";
};

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count() /
         1000.0;
}

// "" when the DaemonSet's rollout is done (as `kubectl rollout status`: the controller saw the
// current generation, every scheduled pod is of the current template and available), else what
// it still waits for.
StatusOr<std::string> RolloutPending(const nlohmann::json& ds, const std::string& what) {
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields d, kube::Fields::Root(ds, what));
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields meta, d.Object("metadata"));
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields status, d.Object("status"));
  GPUNODE_ASSIGN_OR_RETURN(std::optional<int64_t> generation, meta.Int("generation"));
  GPUNODE_ASSIGN_OR_RETURN(std::optional<int64_t> observed, status.Int("observedGeneration"));
  GPUNODE_ASSIGN_OR_RETURN(std::optional<int64_t> desired, status.Int("desiredNumberScheduled"));
  GPUNODE_ASSIGN_OR_RETURN(std::optional<int64_t> updated, status.Int("updatedNumberScheduled"));
  GPUNODE_ASSIGN_OR_RETURN(std::optional<int64_t> available, status.Int("numberAvailable"));
  if (observed.value_or(0) < generation.value_or(0)) return std::string("the controller to see the new template");
  if (updated.value_or(0) < desired.value_or(0)) {
    return absl::StrCat(updated.value_or(0), " of ", desired.value_or(0), " pods on the current template");
  }
  if (available.value_or(0) < desired.value_or(0)) {
    return absl::StrCat(available.value_or(0), " of ", desired.value_or(0), " pods available");
  }
  return std::string();
}

// The DRA driver's ResourceSlices left in the cluster (nodes whose pod could not remove its own;
// the kubelet also removes a driver's slices some 30 s after its plugin went). An API server
// without resource.k8s.io/v1 has none. Returns false when one could not be listed or deleted.
bool RemoveDriverSlices(kube::Client& client, const std::string& driver) {
  const std::string base = "/apis/resource.k8s.io/v1/resourceslices";
  std::vector<std::string> names;
  size_t index = 0;
  auto listed = client.List(absl::StrCat(base, "?fieldSelector=spec.driver%3D", kube::UrlEscape(driver)),
                            kube::ListOptions{}, [&](nlohmann::json& item) -> Status {
                              const std::string where = absl::StrCat("GET ", base, ": items[", index++, "]");
                              GPUNODE_ASSIGN_OR_RETURN(kube::Fields s, kube::Fields::Root(item, where));
                              GPUNODE_ASSIGN_OR_RETURN(kube::Fields meta, s.Object("metadata"));
                              GPUNODE_ASSIGN_OR_RETURN(kube::Fields spec, s.Object("spec"));
                              GPUNODE_ASSIGN_OR_RETURN(std::string d, spec.String("driver"));
                              GPUNODE_ASSIGN_OR_RETURN(std::string name, meta.String("name"));
                              if (d == driver && !name.empty()) names.push_back(name);
                              return absl::OkStatus();
                            });
  if (!listed.ok()) {
    if (absl::IsNotFound(listed.status())) return true;  // no DRA API: nothing to remove
    PrintError(listed.status());
    return false;
  }
  bool ok = true;
  for (const std::string& n : names) {
    auto r = client.Delete(absl::StrCat(base, "/", kube::UrlEscape(n)));
    if (!r.ok() && !absl::IsNotFound(r.status())) {
      PrintError(r.status());
      ok = false;
    }
  }
  std::cout << "ResourceSlices of " << TerminalSafe(driver) << ": " << names.size() << " removed" << std::endl;
  return ok;
}

// Before the DaemonSet goes, its rollout settles (bounded): a pod replaced by a rolling update
// stops as an upgrade and leaves its node's files, and its successor may not run yet when the
// deletion comes; with the rollout done, every node has a running agent of the current template,
// and each removes its CDI spec and labels as soon as it sees the deletion.
void WaitForRollout(kube::Client& client, const std::string& path, const std::string& name,
                    std::chrono::steady_clock::time_point deadline) {
  const auto t0 = std::chrono::steady_clock::now();
  std::string last;
  while (true) {
    auto ds = client.Get(path);
    if (!ds.ok()) return;  // gone, or not readable: the deletion below says what
    auto pending = RolloutPending(*ds, absl::StrCat("DaemonSet ", name));
    if (!pending.ok()) {
      PrintError(pending.status());
      return;
    }
    if (pending->empty()) {
      if (!last.empty()) std::cout << "DaemonSet " << name << ": rollout done after " << SecondsSince(t0) << " s" << std::endl;
      return;
    }
    if (*pending != last) {
      std::cout << "DaemonSet " << name << ": waiting for its rollout (" << *pending
                << ") so every node has a current agent to clean it" << std::endl;
      last = *pending;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      std::cout << "DaemonSet " << name << ": rollout not done (" << *pending
                << "); deleting anyway: a node whose agent is not running keeps its CDI spec" << std::endl;
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

int RunUninstall(const UninstallFlags& flags) {
  std::string ns, name;
  if (Status st = kube::SplitNamespaced(flags.daemonset, "--daemonset", &ns, &name); !st.ok()) {
    PrintError(st);
    return kExitUsage;
  }
  auto timeout_s = devices::ParseSleepInterval(flags.timeout);
  if (!timeout_s.ok() || *timeout_s <= 0) {
    PrintError(absl::StrCat("--timeout \"", flags.timeout, "\": not a duration such as 90s or 2m"));
    return kExitUsage;
  }
  auto conn = kube::ResolveConnection(flags.kubeconfig);
  if (!conn.ok()) {
    PrintError(conn.status());
    return kExitUsage;
  }
  // Cluster-wide: kubectl's rate (50 requests/s, burst 100) rather than the agent's; every Node
  // may need a GET and a PATCH within --timeout.
  kube::ClientOptions options;
  options.qps = 50;
  options.burst = 100;
  kube::Client client(*conn, options);
  int rc = kExitOk;
  const std::string path = absl::StrCat("/apis/apps/v1/namespaces/", kube::UrlEscape(ns), "/daemonsets/",
                                        kube::UrlEscape(name));
  const auto t0 = std::chrono::steady_clock::now();
  WaitForRollout(client, path, flags.daemonset, t0 + std::chrono::seconds(*timeout_s) / 2);
  auto deleted = client.Delete(path, {{"propagationPolicy", "Foreground"}});
  if (!deleted.ok() && !absl::IsNotFound(deleted.status())) {
    PrintError(deleted.status());
    rc = kExitFailed;
  } else if (deleted.ok()) {
    std::cout << "DaemonSet " << flags.daemonset
              << ": deleting (foreground); each pod removes its node's labels and files" << std::endl;
    const auto deadline = t0 + std::chrono::seconds(*timeout_s);
    while (true) {
      auto ds = client.Get(path);
      if (!ds.ok() && absl::IsNotFound(ds.status())) {
        std::cout << "DaemonSet " << flags.daemonset << ": gone after " << SecondsSince(t0) << " s" << std::endl;
        break;
      }
      if (std::chrono::steady_clock::now() > deadline) {
        PrintError(absl::StrCat("DaemonSet ", flags.daemonset, " still there after ", flags.timeout,
                                ": its pods may not have cleaned their nodes (labels are removed below; "
                                "CDI specs on those nodes may stay)"));
        rc = kExitFailed;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
  } else {
    std::cout << "DaemonSet " << flags.daemonset << ": not there" << std::endl;
  }
  // Labels left on any node: those gpunode applied (managedFields) or an earlier agent listed in
  // its annotation. The Nodes are read page by page and every field is checked for its type (an
  // answer is not trusted to be well-formed).
  std::vector<std::string> carrying;
  size_t index = 0;
  auto carries = [&](const nlohmann::json& node, const std::string& where) -> StatusOr<std::string> {
    GPUNODE_ASSIGN_OR_RETURN(kube::Fields item, kube::Fields::Root(node, where));
    GPUNODE_ASSIGN_OR_RETURN(kube::Fields meta, item.Object("metadata"));
    GPUNODE_ASSIGN_OR_RETURN(bool ours, kube::CarriesGpunodeLabels(node, where));
    if (!ours) return std::string();
    GPUNODE_ASSIGN_OR_RETURN(std::string node_name, meta.String("name"));
    if (node_name.empty()) return meta.Error("a Node without a name");
    return node_name;
  };
  auto listed = client.List("/api/v1/nodes", kube::ListOptions{}, [&](nlohmann::json& node) -> Status {
    auto carrier = carries(node, absl::StrCat("GET /api/v1/nodes: items[", index++, "]"));
    if (!carrier.ok()) {  // a malformed Node is reported; the others are still cleaned
      PrintError(carrier.status());
      rc = kExitFailed;
    } else if (!carrier->empty()) {
      carrying.push_back(*std::move(carrier));
    }
    return absl::OkStatus();
  });
  if (!listed.ok()) {
    PrintError(listed.status());
    return kExitFailed;
  }
  int cleaned = 0;
  for (const std::string& n : carrying) {
    auto change = kube::RemoveNodeLabels(client, n);
    if (!change.ok()) {
      PrintError(change.status());
      rc = kExitFailed;
      continue;
    }
    ++cleaned;
    std::cout << "Node " << TerminalSafe(n) << ": removed " << change->removed.size() << " gpunode labels" << std::endl;
    if (!change->ignored.empty()) {
      std::cout << "Node " << TerminalSafe(n) << ": left alone, not gpunode's to remove (listed in "
                << kube::kManagedLabelsAnnotation << " but outside nvidia.com/ and gpunode.io/): "
                << absl::StrJoin(change->ignored, ", ") << std::endl;
    }
  }
  if (cleaned == 0) std::cout << "no Node carries gpunode labels" << std::endl;
  if (!flags.dra_driver.empty() && !RemoveDriverSlices(client, flags.dra_driver)) rc = kExitFailed;
  return rc;
}

}  // namespace

void AddK8sCommand(CLI::App& app, GlobalOptions& /*global*/, int* exit_code) {
  CLI::App* cmd = app.add_subcommand("k8s", "Cluster-side chores of the gpunode Helm chart (docs/kubernetes.md)");
  cmd->require_subcommand(1);
  auto flags = std::make_shared<UninstallFlags>();
  CLI::App* u = cmd->add_subcommand(
      "uninstall",
      "Wait (up to half of --timeout) for gpunode's DaemonSet to finish a rollout, delete it so that every "
      "pod cleans its node (Node labels, CDI spec), then remove gpunode's labels from any Node still carrying "
      "them (the chart's pre-delete hook)");
  u->add_option("--daemonset", flags->daemonset, "NAMESPACE/NAME of gpunode's DaemonSet")->required();
  AddKubeconfigOption(u, &flags->kubeconfig);
  u->add_option("--dra-driver", flags->dra_driver,
                 "The chart's DRA driver (dra.driverName): its ResourceSlices left in the cluster are deleted too");
  u->add_option("--timeout", flags->timeout, "How long to wait for the rollout and the DaemonSet's pods to finish (default 120s)");
  u->footer(
      "Exit codes: 0 done, 2 an API call failed or the pods did not finish in time, 3 usage.\n"
      "Example:\n"
      "  gpunode k8s uninstall --daemonset gpunode/gpunode --kubeconfig ~/.kube/config");
  u->callback([flags, exit_code] { *exit_code = RunUninstall(*flags); });
}

}  // namespace gpunode::cli
