// `gpunode fleet controller` (the driver-upgrade controller, src/upgrade) and `gpunode fleet upgrade
// status|pause|resume|retry|rollback` (what an operator does to it). User doc docs/driver-upgrades.md.
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "src/base/well_known.h"
#include "src/cli/common.h"
#include "src/cli/fleet_cluster_policy.h"
#include "src/compat/dataset.h"
#include "src/kube/client.h"
#include "src/lifecycle/log.h"
#include "src/upgrade/controller.h"

namespace gpunode::cli {
namespace {

struct ControllerFlags {
  std::string kubeconfig;
  std::string ns;
  std::string lease_name = "gpunode-driver-manager";
  std::string identity;
  bool no_leader_election = false;
  std::string on_failure = "halt";
  bool rollback_on_failure = false;
  std::string resync = "30s";
  std::string busy_resync = "2s";
  std::vector<std::string> timeouts;
  std::string log_format = "text";
  double qps = 20;
  std::string agent_policy_configmap;
  std::string operator_namespace;
};

struct UpgradeFlags {
  std::string kubeconfig;
  std::vector<std::string> resources;
  std::string node;
};

StatusOr<std::chrono::milliseconds> Duration(const std::string& text, const std::string& flag) {
  absl::Duration d;
  if (!absl::ParseDuration(text, &d) || d < absl::ZeroDuration() || d > absl::Hours(24 * 7)) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " \"", text, "\": expected a duration between 0s and 168h, like 30s, 10m or 1h30m"));
  }
  return std::chrono::milliseconds(absl::ToInt64Milliseconds(d));
}

Status ApplyTimeout(const std::string& text, upgrade::Deadlines* d) {
  std::vector<std::string> kv = absl::StrSplit(text, absl::MaxSplits('=', 1));
  if (kv.size() != 2) {
    return absl::InvalidArgumentError(absl::StrCat("--timeout \"", text, "\": expected STATE=DURATION, e.g. validation=10m"));
  }
  GPUNODE_ASSIGN_OR_RETURN(auto ms, Duration(kv[1], "--timeout " + kv[0]));
  const auto s = std::chrono::duration_cast<std::chrono::seconds>(ms);
  if (kv[0] == "cordon") {
    d->cordon = s;
  } else if (kv[0] == "wait-for-jobs") {
    d->wait_for_jobs = s;
  } else if (kv[0] == "pod-restart") {
    d->pod_restart = s;
  } else if (kv[0] == "validation") {
    d->validation = s;
  } else if (kv[0] == "uncordon") {
    d->uncordon = s;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "--timeout \"", text, "\": no such state (cordon, wait-for-jobs, pod-restart, validation, uncordon; pod "
                              "deletion and drain take the resource's upgradePolicy timeoutSeconds)"));
  }
  return absl::OkStatus();
}

StatusOr<std::unique_ptr<kube::Client>> Connect(const std::string& kubeconfig, double qps, std::string* ns) {
  GPUNODE_ASSIGN_OR_RETURN(kube::Connection conn, kube::ResolveConnection(kubeconfig));
  if (ns != nullptr && ns->empty()) *ns = conn.ns.empty() ? "gpunode" : conn.ns;
  kube::ClientOptions options;
  options.qps = qps;
  options.burst = static_cast<int>(qps * 2);
  options.timeout = std::chrono::seconds(30);
  return std::make_unique<kube::Client>(conn, options);
}

int RunController(const GlobalOptions& global, const ControllerFlags& f) {
  (void)global;
  upgrade::ControllerOptions o;
  if (f.on_failure != "halt" && f.on_failure != "continue") {
    PrintError(absl::InvalidArgumentError(absl::StrCat("--on-failure \"", f.on_failure, "\": expected halt or continue")));
    return kExitUsage;
  }
  o.policy.halt_on_failure = f.on_failure == "halt";
  o.policy.rollback_on_failure = f.rollback_on_failure;
  for (const std::string& t : f.timeouts) {
    if (Status st = ApplyTimeout(t, &o.policy.deadlines); !st.ok()) {
      PrintError(st);
      return kExitUsage;
    }
  }
  auto resync = Duration(f.resync, "--resync");
  auto busy = Duration(f.busy_resync, "--busy-resync");
  if (!resync.ok() || !busy.ok()) {
    PrintError(!resync.ok() ? resync.status() : busy.status());
    return kExitUsage;
  }
  o.resync = std::max(*resync, std::chrono::milliseconds(1000));
  o.busy_resync = std::max(*busy, std::chrono::milliseconds(200));
  if (f.log_format != "text" && f.log_format != "json") {
    PrintError(absl::InvalidArgumentError(absl::StrCat("--log-format \"", f.log_format, "\": expected text or json")));
    return kExitUsage;
  }
  auto data = compat::LoadBuiltin();
  if (!data.ok()) {
    PrintError(data.status());
    return kExitFailed;
  }
  o.data = &*data;
  o.ns = f.ns;
  auto client = Connect(f.kubeconfig, f.qps, &o.ns);
  if (!client.ok()) {
    PrintError(client.status());
    return kExitUsage;
  }
  o.lease_name = f.lease_name;
  o.agent_policy_configmap = f.agent_policy_configmap;
  o.operator_namespace = f.operator_namespace;
  o.identity = f.identity.empty() && std::getenv("POD_NAME") != nullptr ? std::getenv("POD_NAME") : f.identity;
  o.leader_election = !f.no_leader_election;
  lifecycle::Log log(f.log_format == "json" ? lifecycle::Log::Format::kJson : lifecycle::Log::Format::kText);
  log.set_program("gpunode fleet controller");
  o.log = [&log](const std::string& m) { log.Info("controller", m); };

  sigset_t signals;
  sigemptyset(&signals);
  for (int s : {SIGTERM, SIGINT}) sigaddset(&signals, s);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  // One malloc arena per thread (informers, queue, Lease, connections) holds freed list pages:
  // two arenas keep the controller's RSS near its live data (measured on 1000 KWOK nodes).
  mallopt(M_ARENA_MAX, 2);
  upgrade::Controller controller(**client, o);
  log.Info("controller", absl::StrCat("starting: namespace ", o.ns, ", lease ", o.lease_name,
                                      o.leader_election ? "" : " (leader election off)", ", on failure ", f.on_failure,
                                      o.policy.rollback_on_failure ? ", rollback on failure" : ""));
  Status result;
  std::jthread runner([&](std::stop_token stop) {
    result = controller.Run(stop);
    if (!result.ok()) ::kill(::getpid(), SIGTERM);
  });
  const int sig = sigwaitinfo(&signals, nullptr);
  log.Info("controller", absl::StrCat("received ", strsignal(sig), ": stopping"));
  runner.request_stop();
  runner.join();
  if (!result.ok()) {
    PrintError(result);
    return kExitFailed;
  }
  const upgrade::ControllerStats s = controller.stats();
  log.Info("controller", absl::StrCat("stopped after ", s.syncs, " syncs: ", s.Requests(), " requests (",
                                      s.node_patches, " node patches, ", s.workload_lists, " pod lists, ", s.evictions,
                                      " evictions, ", s.pod_deletions, " driver pods replaced, ", s.daemonset_writes,
                                      " DaemonSet writes, ", s.status_writes, " status writes, ", s.condition_writes,
                                      " conditions, ", s.events, " events; ", s.sync_errors, " passes with errors)"));
  return kExitOk;
}

// The NVIDIADrivers named (all when none) and every Node's upgrade labels.
struct ClusterView {
  std::vector<nlohmann::json> drivers;
  std::vector<nlohmann::json> nodes;
};

StatusOr<ClusterView> ReadView(kube::Client& client, const std::vector<std::string>& only) {
  ClusterView v;
  auto r = client.List(upgrade::kCollection, {}, [&](nlohmann::json& item) -> Status {
    const std::string name = item["metadata"].value("name", "");
    if (only.empty() || std::find(only.begin(), only.end(), name) != only.end()) v.drivers.push_back(std::move(item));
    return absl::OkStatus();
  });
  if (!r.ok()) {
    if (absl::IsNotFound(r.status())) {
      return absl::NotFoundError("the NVIDIADriver resource type is not installed (helm install ... --set driverManager.enabled=true)");
    }
    return r.status();
  }
  for (const std::string& want : only) {
    if (std::none_of(v.drivers.begin(), v.drivers.end(),
                     [&](const nlohmann::json& d) { return d["metadata"].value("name", "") == want; })) {
      return absl::NotFoundError(absl::StrCat("NVIDIADriver ", want, ": not found"));
    }
  }
  auto n = client.List(absl::StrCat("/api/v1/nodes?labelSelector=", wellknown::kLabelDriverOwner), {},
                       [&](nlohmann::json& item) -> Status {
                         v.nodes.push_back(std::move(item));
                         return absl::OkStatus();
                       });
  if (!n.ok()) return n.status();
  return v;
}

std::string Label(const nlohmann::json& obj, const std::string& key, const char* where = "labels") {
  const nlohmann::json& m = obj["metadata"];
  if (!m.contains(where) || !m[where].is_object() || !m[where].contains(key) || !m[where][key].is_string()) return "";
  return m[where][key].get<std::string>();
}

// The client and what `fleet upgrade` reads; on failure the exit code (the error printed).
struct Opened {
  std::unique_ptr<kube::Client> client;
  std::optional<ClusterView> view;
  int rc = -1;
};
Opened Open(const UpgradeFlags& f) {
  Opened o;
  auto client = Connect(f.kubeconfig, 50, nullptr);
  if (!client.ok()) {
    PrintError(client.status());
    o.rc = kExitUsage;
    return o;
  }
  o.client = std::move(*client);
  auto view = ReadView(*o.client, f.resources);
  if (!view.ok()) {
    PrintError(view.status());
    o.rc = absl::IsNotFound(view.status()) ? kExitUsage : kExitFailed;
    return o;
  }
  o.view = std::move(*view);
  return o;
}

int RunStatus(const GlobalOptions& global, const UpgradeFlags& f) {
  auto format = ParseOutputFormat(global.output);
  if (!format.ok()) {
    PrintError(format.status());
    return kExitUsage;
  }
  Opened opened = Open(f);
  if (opened.rc != -1) return opened.rc;
  std::unique_ptr<kube::Client>& client = opened.client;
  std::optional<ClusterView>& view = opened.view;
  // The ClusterPolicy's default pool beside the NVIDIADrivers', and what it does not apply.
  const ClusterPolicyStatus cp = f.resources.empty() ? ReadClusterPolicyStatus(*client, view->drivers) : ClusterPolicyStatus{};
  if (cp.pool) view->drivers.push_back(*cp.pool);
  nlohmann::ordered_json doc = {{"apiVersion", "gpunode.io/v1"}, {"kind", "DriverUpgradeStatus"}};
  nlohmann::ordered_json pools = nlohmann::ordered_json::array();
  bool any_failed = false;
  for (const nlohmann::json& d : view->drivers) {
    const std::string name = d["metadata"].value("name", "");
    nlohmann::ordered_json p;
    p["name"] = name;
    p["targetVersion"] = d.contains("spec") && d["spec"].is_object() ? d["spec"].value("version", "") : "";
    const nlohmann::json st = d.contains("status") && d["status"].is_object() ? d["status"] : nlohmann::json::object();
    p["previousVersion"] = st.value("previousVersion", "");
    p["paused"] = Label(d, upgrade::kAnnoPaused, "annotations") == "true";
    std::map<std::string, int> by_state;
    nlohmann::ordered_json nodes = nlohmann::ordered_json::array();
    for (const nlohmann::json& n : view->nodes) {
      if (Label(n, wellknown::kLabelDriverOwner) != name) continue;
      const std::string state = Label(n, wellknown::kLabelUpgradeState);
      by_state[state.empty() ? "none" : state]++;
      nlohmann::ordered_json e = {{"node", n["metadata"].value("name", "")},
                                  {"state", state},
                                  {"driver", Label(n, wellknown::kLabelDriverVersion)}};
      if (std::string reason = Label(n, upgrade::kAnnoReason, "annotations"); !reason.empty()) e["reason"] = reason;
      if (Label(n, upgrade::kLabelRollback) == "true") e["rolledBack"] = true;
      if (state == "upgrade-failed") any_failed = true;
      nodes.push_back(e);
    }
    p["nodes"] = static_cast<int>(nodes.size());
    p["byState"] = by_state;
    p["halted"] = st.value("halted", "");
    p["conflicts"] = st.contains("conflicts") ? st["conflicts"] : nlohmann::json::array();
    p["ignoredFields"] = st.contains("ignoredFields") ? st["ignoredFields"] : nlohmann::json::array();
    p["nodeStates"] = nodes;
    pools.push_back(p);
  }
  doc["pools"] = pools;
  if (!cp.doc.is_null()) doc["clusterPolicy"] = cp.doc;
  if (*format != OutputFormat::kTable) {
    PrintDocument(doc, *format);
    return any_failed ? 1 : kExitOk;
  }
  if (pools.empty()) {
    std::cout << "No NVIDIADriver resources.\n" << cp.text;
    return kExitOk;
  }
  std::cout << absl::StrFormat("%-20s %-12s %-12s %5s %5s %8s %8s %6s  %s\n", "POOL", "TARGET", "PREVIOUS", "NODES",
                               "DONE", "UNDERWAY", "REQUIRED", "FAILED", "NOTE");
  for (const auto& p : pools) {
    auto count = [&](const char* s) { return p["byState"].contains(s) ? p["byState"][s].get<int>() : 0; };
    int underway = 0;
    for (const auto& [state, c] : p["byState"].items()) {
      auto parsed = upgrade::ParseState(state);
      if (parsed && upgrade::InProgress(*parsed)) underway += c.get<int>();
    }
    std::string note = p["paused"].get<bool>() ? "paused" : p["halted"].get<std::string>();
    if (!p["conflicts"].empty()) note = p["conflicts"][0].get<std::string>();
    std::cout << absl::StrFormat("%-20s %-12s %-12s %5d %5d %8d %8d %6d  %s\n", p["name"].get<std::string>(),
                                 p["targetVersion"].get<std::string>(), p["previousVersion"].get<std::string>(),
                                 p["nodes"].get<int>(), count("upgrade-done"), underway, count("upgrade-required"),
                                 count("upgrade-failed"), note.substr(0, 120));
  }
  bool header = false;
  for (const auto& p : pools) {
    for (const auto& n : p["nodeStates"]) {
      const std::string state = n["state"];
      if (state == "upgrade-done" || state.empty()) continue;
      if (!header) {
        std::cout << "\nNODES NOT DONE\n";
        header = true;
      }
      std::cout << absl::StrFormat("  %-28s %-24s %s\n", n["node"].get<std::string>(), state,
                                   n.contains("reason") ? n["reason"].get<std::string>().substr(0, 160) : "");
    }
  }
  std::cout << cp.text;
  return any_failed ? 1 : kExitOk;
}

int RunPause(const UpgradeFlags& f, bool pause) {
  Opened opened = Open(f);
  if (opened.rc != -1) return opened.rc;
  std::unique_ptr<kube::Client>& client = opened.client;
  std::optional<ClusterView>& view = opened.view;
  for (const nlohmann::json& d : view->drivers) {
    const std::string name = d["metadata"].value("name", "");
    nlohmann::json patch = {{"metadata", {{"annotations", {{upgrade::kAnnoPaused, pause ? nlohmann::json("true") : nlohmann::json(nullptr)}}}}}};
    auto r = client->MergePatch(absl::StrCat(upgrade::kCollection, "/", name, "?fieldManager=gpunode-fleet-upgrade"), patch);
    if (!r.ok()) {
      PrintError(r.status());
      return kExitFailed;
    }
    std::cout << "NVIDIADriver " << name << (pause ? ": paused (nodes under way finish; no node starts)\n" : ": resumed\n");
  }
  if (view->drivers.empty()) std::cout << "No NVIDIADriver resources.\n";
  return kExitOk;
}

// retry: upgrade-failed (or a rolled-back node) -> upgrade-required toward the target.
// rollback: upgrade-done or upgrade-failed -> upgrade-required toward the previous version.
int RunNodeAction(const UpgradeFlags& f, bool rollback) {
  auto client = Connect(f.kubeconfig, 50, nullptr);
  if (!client.ok()) {
    PrintError(client.status());
    return kExitUsage;
  }
  auto node = (*client)->Get(absl::StrCat("/api/v1/nodes/", f.node));
  if (!node.ok()) {
    PrintError(node.status());
    return absl::IsNotFound(node.status()) ? kExitUsage : kExitFailed;
  }
  const std::string owner = Label(*node, wellknown::kLabelDriverOwner);
  const std::string state = Label(*node, wellknown::kLabelUpgradeState);
  const bool rolled_back = Label(*node, upgrade::kLabelRollback) == "true";
  if (owner.empty()) {
    PrintError(absl::FailedPreconditionError(absl::StrCat("node ", f.node, ": no NVIDIADriver manages it (no ",
                                                          wellknown::kLabelDriverOwner, " label)")));
    return kExitUsage;
  }
  nlohmann::json annotations = {{upgrade::kAnnoReason, nullptr},
                                {upgrade::kAnnoSince, absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::Now(), absl::UTCTimeZone())}};
  if (rollback) {
    if (state != "upgrade-done" && state != "upgrade-failed") {
      PrintError(absl::FailedPreconditionError(absl::StrCat("node ", f.node, " is ", state.empty() ? "in no state" : state,
                                                            ": rollback applies to upgrade-done or upgrade-failed")));
      return kExitUsage;
    }
    auto d = (*client)->Get(absl::StrCat(upgrade::kCollection, "/", owner));
    std::string previous;
    if (d.ok() && d->contains("status") && (*d)["status"].is_object()) previous = (*d)["status"].value("previousVersion", "");
    if (previous.empty()) {
      PrintError(absl::FailedPreconditionError(
          absl::StrCat("NVIDIADriver ", owner, " has no previous version to roll back to (status.previousVersion)")));
      return kExitUsage;
    }
    annotations[upgrade::kAnnoRollbackRequested] = "true";
    annotations[upgrade::kAnnoTarget] = previous;
  } else {
    if (state != "upgrade-failed" && !rolled_back) {
      PrintError(absl::FailedPreconditionError(absl::StrCat("node ", f.node, " is ", state.empty() ? "in no state" : state,
                                                            ": retry applies to upgrade-failed or rolled-back nodes")));
      return kExitUsage;
    }
    annotations[upgrade::kAnnoRollbackRequested] = nullptr;
    annotations[upgrade::kAnnoTarget] = nullptr;  // the pool's target again (not the previous version)
  }
  nlohmann::json patch = {{"metadata", {{"labels", {{wellknown::kLabelUpgradeState, "upgrade-required"}}}, {"annotations", annotations}}}};
  auto r = (*client)->MergePatch(absl::StrCat("/api/v1/nodes/", f.node, "?fieldManager=gpunode-fleet-upgrade"), patch);
  if (!r.ok()) {
    PrintError(r.status());
    return kExitFailed;
  }
  std::cout << "node " << f.node << ": upgrade-required (" << (rollback ? "roll back to the previous driver" : "retry")
            << "); the controller takes it in its turn\n";
  return kExitOk;
}

}  // namespace

void AddFleetUpgradeCommands(CLI::App* fleet, GlobalOptions& global, int* exit_code) {
  auto cf = std::make_shared<ControllerFlags>();
  CLI::App* c = fleet->add_subcommand(
      "controller",
      "Run the driver-upgrade controller: reconciles NVIDIA's NVIDIADriver resources (nvidia.com/v1alpha1) into\n"
      "driver DaemonSets and upgrades each pool's nodes one by one (cordon, wait for jobs, evict GPU pods, drain,\n"
      "replace the driver pod, wait for the node's own validation, uncordon) within maxParallelUpgrades and\n"
      "maxUnavailable, with NVIDIA's per-node state label nvidia.com/gpu-driver-upgrade-state\n"
      "(docs/driver-upgrades.md). One replica acts, chosen by a coordination.k8s.io Lease. A GPU Operator\n"
      "ClusterPolicy (nvidia.com/v1) is applied too: its driver as the default pool, its node settings as the\n"
      "agents' policy file (docs/driver-upgrades.md, \"From a ClusterPolicy\").");
  AddKubeconfigOption(c, &cf->kubeconfig);
  c->add_option("--namespace", cf->ns, "Namespace of the driver DaemonSets and the Lease (default: the pod's own, else gpunode)");
  c->add_option("--lease-name", cf->lease_name, "The Lease that elects the acting replica")->capture_default_str();
  c->add_option("--identity", cf->identity, "This replica's name in the Lease (default: $POD_NAME, else host-pid)");
  c->add_flag("--no-leader-election", cf->no_leader_election, "Act without a Lease (one replica only)");
  c->add_option("--on-failure", cf->on_failure,
                "halt: a failed node stops new starts in its pool until retried; continue: the others go on")
      ->capture_default_str();
  c->add_flag("--rollback-on-failure", cf->rollback_on_failure,
              "A node whose new driver fails its start or validation goes back to the previous version");
  c->add_option("--timeout", cf->timeouts,
                "A state's deadline, STATE=DURATION (repeatable): cordon (2m), wait-for-jobs (1h, when the resource "
                "gives none), pod-restart (15m), validation (10m), uncordon (2m)");
  c->add_option("--resync", cf->resync, "Pass over every pool this often when nothing changes")->capture_default_str();
  c->add_option("--busy-resync", cf->busy_resync, "... and this often while a node is under way")->capture_default_str();
  c->add_option("--qps", cf->qps, "Requests per second to the API server (burst twice that)")->capture_default_str();
  c->add_option("--log-format", cf->log_format, "text or json")->capture_default_str();
  c->add_option("--agent-policy-configmap", cf->agent_policy_configmap,
                "From a GPU Operator ClusterPolicy: write the agents' policy file into this ConfigMap of --namespace, "
                "and the ConfigMaps it names as NAME-device-plugin, NAME-mig, NAME-exporter (default: none written)");
  c->add_option("--operator-namespace", cf->operator_namespace,
                "Where the ConfigMaps a ClusterPolicy names are read (default: its status.namespace, else gpu-operator)");
  c->footer(
      "Per pool, annotations on its NVIDIADriver override the flags: gpunode.io/driver-upgrade.on-failure\n"
      "(halt|continue), gpunode.io/driver-upgrade.rollback-on-failure (true|false); gpunode.io/driver-upgrade.paused=true\n"
      "pauses it (gpunode fleet upgrade pause).\n"
      "Exit codes: 0 stopped by SIGTERM/SIGINT, 2 the API server refused the Lease or the lists, 3 bad flags.\n"
      "Examples:\n"
      "  gpunode fleet controller --namespace gpunode\n"
      "  gpunode fleet controller --no-leader-election --timeout validation=5m --on-failure continue");
  c->callback([&global, cf, exit_code] { *exit_code = RunController(global, *cf); });

  auto uf = std::make_shared<UpgradeFlags>();
  CLI::App* u = fleet->add_subcommand(
      "upgrade", "What the driver-upgrade controller is doing, and what an operator tells it: status, pause, resume,\n"
                 "retry NODE, rollback NODE (docs/driver-upgrades.md)");
  AddKubeconfigOption(u, &uf->kubeconfig);
  u->require_subcommand(1);
  u->footer(
      "Exit codes: 0 done, 1 (status) a node is upgrade-failed, 2 the API failed, 3 bad input or a refused action.\n"
      "Examples:\n"
      "  gpunode fleet upgrade status\n"
      "  gpunode fleet upgrade pause h100-pool\n"
      "  gpunode fleet upgrade retry gpu-node-17");
  CLI::App* s = u->add_subcommand("status", "Each NVIDIADriver pool (and a ClusterPolicy's): target, previous version, "
                                            "nodes by state, failures; what the ClusterPolicy does not apply");
  s->add_option("resource", uf->resources, "Only these NVIDIADriver resources");
  s->footer("Exit codes: 0 no node failed, 1 a node is upgrade-failed, 2 the API failed, 3 bad input.\n"
            "Example:\n  gpunode fleet upgrade status -o json");
  s->callback([&global, uf, exit_code] { *exit_code = RunStatus(global, *uf); });
  CLI::App* p = u->add_subcommand("pause", "No node starts an upgrade (nodes under way finish); all resources when none named");
  p->add_option("resource", uf->resources, "NVIDIADriver resources");
  p->footer("Sets the annotation gpunode.io/driver-upgrade.paused=true on each.\nExample:\n  gpunode fleet upgrade pause");
  p->callback([uf, exit_code] { *exit_code = RunPause(*uf, true); });
  CLI::App* r = u->add_subcommand("resume", "Undo pause");
  r->add_option("resource", uf->resources, "NVIDIADriver resources");
  r->footer("Removes the annotation gpunode.io/driver-upgrade.paused.\nExample:\n  gpunode fleet upgrade resume");
  r->callback([uf, exit_code] { *exit_code = RunPause(*uf, false); });
  CLI::App* t = u->add_subcommand("retry", "Start a failed (or rolled-back) node's upgrade again");
  t->add_option("node", uf->node, "The Node")->required();
  t->footer("The node goes back to upgrade-required toward its pool's target (a rolled-back node too).\n"
            "Exit codes: 0 done, 2 the API failed, 3 the node is not failed or rolled back, or no NVIDIADriver owns it.\n"
            "Example:\n  gpunode fleet upgrade retry gpu-node-17");
  t->callback([uf, exit_code] { *exit_code = RunNodeAction(*uf, false); });
  CLI::App* b = u->add_subcommand("rollback", "Take a node back to its pool's previous driver version, through the same steps");
  b->add_option("node", uf->node, "The Node")->required();
  b->footer("From upgrade-done or upgrade-failed; the pool must have a previous version (status.previousVersion).\n"
            "Exit codes: 0 done, 2 the API failed, 3 nothing to roll back to, or the node is under way.\n"
            "Example:\n  gpunode fleet upgrade rollback gpu-node-17");
  b->callback([uf, exit_code] { *exit_code = RunNodeAction(*uf, true); });
}

}  // namespace gpunode::cli
