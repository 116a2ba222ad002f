// One pass over one NVIDIADriver's pool: owner labels, DaemonSets, the plan, its actions, status.
#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/base/json.h"
#include "src/base/version.h"
#include "src/base/well_known.h"
#include "src/kube/node.h"
#include "src/upgrade/cluster_policy_sync.h"
#include "src/upgrade/controller_internal.h"

namespace gpunode::upgrade {
namespace {

constexpr char kFieldManager[] = "gpunode-driver-manager";
constexpr size_t kMaxListed = 20;  // nodes named per list in a status


// Node writes under the controller's own field manager: the agent's server-side apply of its
// labels (manager gpunode) would otherwise take the state label for its own and remove it.
std::string NodePath(const std::string& node) {
  return absl::StrCat("/api/v1/nodes/", node, "?fieldManager=", kFieldManager);
}

nlohmann::json Opt(const std::optional<std::string>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); }

}  // namespace

Controller::Impl::Impl(kube::Client& c, ControllerOptions options) : client(c), o(std::move(options)) {
  auto log = [this](const std::string& m) { Log(m); };
  {
    kube::Store<internal::DriverFacts>::Options so;
    so.project = internal::ReadDriver;
    so.handlers.on_add = [this](const std::string& k, const internal::DriverFacts&) { Enqueue(k); };
    so.handlers.on_update = [this](const std::string& k, const internal::DriverFacts&, const internal::DriverFacts&) {
      EnqueueAll();  // a selector change moves nodes between pools
      (void)k;
    };
    so.handlers.on_delete = [this](const std::string& k, const internal::DriverFacts&) {
      Enqueue(k);    // its nodes lose the owner label
      EnqueueAll();  // the others may take its nodes
    };
    so.log = log;
    kube::ReflectorOptions ro;
    ro.path = kCollection;
    ro.log = log;
    drivers = std::make_unique<kube::Informer<internal::DriverFacts>>(client, ro, std::move(so));
  }
  {
    kube::Store<NodeFacts>::Options so;
    so.project = ReadNodeFacts;
    auto owner = [](const NodeFacts& n) {
      auto it = n.labels.find(wellknown::kLabelDriverOwner);
      return it == n.labels.end() ? std::string() : it->second;
    };
    so.handlers.on_add = [this](const std::string&, const NodeFacts&) { EnqueueAll(); };
    so.handlers.on_update = [this, owner](const std::string&, const NodeFacts& before, const NodeFacts& now) {
      const std::string a = owner(before), b = owner(now);
      if (before.labels != now.labels && (a.empty() || b.empty() || a != b)) {
        EnqueueAll();
        return;
      }
      if (!b.empty()) Enqueue(b);
    };
    so.handlers.on_delete = [this, owner](const std::string&, const NodeFacts& last) {
      const std::string a = owner(last);
      a.empty() ? EnqueueAll() : Enqueue(a);
    };
    so.log = log;
    kube::ReflectorOptions ro;
    ro.path = "/api/v1/nodes";
    ro.log = log;
    nodes = std::make_unique<kube::Informer<NodeFacts>>(client, ro, std::move(so));
  }
  {
    kube::Store<DriverPod>::Options so;
    so.project = ReadDriverPod;
    so.handlers.on_add = [this](const std::string&, const DriverPod& p) { Enqueue(p.resource); };
    so.handlers.on_update = [this](const std::string&, const DriverPod&, const DriverPod& p) { Enqueue(p.resource); };
    so.handlers.on_delete = [this](const std::string&, const DriverPod& p) { Enqueue(p.resource); };
    so.log = log;
    kube::ReflectorOptions ro;
    ro.path = absl::StrCat("/api/v1/pods?labelSelector=", kLabelPodDriver);
    ro.log = log;
    pods = std::make_unique<kube::Informer<DriverPod>>(client, ro, std::move(so));
  }
  {
    kube::Store<internal::DaemonSetFacts>::Options so;
    so.project = internal::ReadDaemonSet;
    so.handlers.on_delete = [this](const std::string&, const internal::DaemonSetFacts& d) { Enqueue(d.resource); };
    so.log = log;
    kube::ReflectorOptions ro;
    ro.path = absl::StrCat("/apis/apps/v1/namespaces/", o.ns, "/daemonsets?labelSelector=",
                           kube::UrlEscape("app.kubernetes.io/component=nvidia-driver"));
    ro.log = log;
    daemonsets = std::make_unique<kube::Informer<internal::DaemonSetFacts>>(client, ro, std::move(so));
  }
  cluster_policy = std::make_unique<ClusterPolicySync>(client, o, drivers->store(),
                                                       [this](const std::string& k) { Enqueue(k); });
}

void Controller::Impl::Start() {
  if (started) return;
  started = true;
  drivers->Start();
  nodes->Start();
  pods->Start();
  daemonsets->Start();
}

bool Controller::Impl::WaitSynced(std::chrono::milliseconds timeout, std::stop_token stop) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  auto left = [&] {
    return std::max(std::chrono::milliseconds(0), std::chrono::duration_cast<std::chrono::milliseconds>(
                                                      until - std::chrono::steady_clock::now()));
  };
  return drivers->store().WaitForSync(left(), stop) && nodes->store().WaitForSync(left(), stop) &&
         pods->store().WaitForSync(left(), stop) && daemonsets->store().WaitForSync(left(), stop);
}

void Controller::Impl::Enqueue(const std::string& key) {
  if (key.empty()) return;
  std::lock_guard<std::mutex> l(queue_mu);
  if (kube::WorkQueue* q = queue.load()) q->Add(key);
}

void Controller::Impl::EnqueueAll() {
  std::lock_guard<std::mutex> l(queue_mu);
  kube::WorkQueue* q = queue.load();
  if (q == nullptr) return;
  for (const std::string& k : drivers->store().Keys()) q->Add(k);
  if (cluster_policy->HasPool()) q->Add(kClusterPolicyDriverName);
}

StatusOr<std::chrono::milliseconds> Controller::Impl::SyncPool(const std::string& resource) {
  Count(&ControllerStats::syncs);
  const auto now = Now();
  std::vector<std::pair<std::string, NodeFacts>> all_nodes = nodes->store().List();
  std::map<std::string, std::map<std::string, std::optional<std::string>>> owner_changes;  // node -> labels
  std::vector<std::string> errors;

  std::optional<internal::DriverFacts> me = drivers->store().Get(resource);
  if (!me) me = cluster_policy->Driver(resource);
  if (!me) {
    // Deleted: its DaemonSets go with it (owner reference); its nodes lose the owner label
    // unless an upgrade is under way there (then they keep it, and the node says why).
    for (const auto& [name, n] : all_nodes) {
      auto it = n.labels.find(wellknown::kLabelDriverOwner);
      if (it != n.labels.end() && it->second == resource && !InProgress(n.state)) {
        owner_changes[name][wellknown::kLabelDriverOwner] = std::nullopt;
      }
    }
    for (const auto& [name, labels] : owner_changes) {
      auto st = client.MergePatch(NodePath(name), {{"metadata", {{"labels", {{wellknown::kLabelDriverOwner, nullptr}}}}}});
      if (!st.ok()) return st.status();
      Count(&ControllerStats::node_patches);
    }
    std::lock_guard<std::mutex> l(mu);
    last_status.erase(resource);
    return std::chrono::milliseconds(0);
  }

  nlohmann::json status = {{"observedGeneration", me->spec.generation}};
  auto write_status = [&](nlohmann::json st) -> Status {
    const std::string text = st.dump();
    {
      std::lock_guard<std::mutex> l(mu);
      if (last_status[resource] == text) return absl::OkStatus();
    }
    if (me->write_status) {
      GPUNODE_RETURN_IF_ERROR(me->write_status(st));
    } else {
      auto r = client.MergePatch(absl::StrCat(kCollection, "/", resource, "/status"), {{"status", st}});
      if (!r.ok()) return r.status();
    }
    Count(&ControllerStats::status_writes);
    std::lock_guard<std::mutex> l(mu);
    last_status[resource] = text;
    return absl::OkStatus();
  };
  if (!me->error.empty()) {
    status["state"] = "notReady";
    status["message"] = me->error;
    GPUNODE_RETURN_IF_ERROR(write_status(status));
    return o.resync;
  }
  const DriverSpec& spec = me->spec;

  // Pools: every readable resource against every node.
  std::vector<DriverSpec> specs;
  for (const auto& [k, d] : drivers->store().List()) {
    if (d.error.empty()) specs.push_back(d.spec);
  }
  if (auto cp = cluster_policy->Spec()) specs.push_back(*cp);
  std::vector<std::pair<std::string, std::map<std::string, std::string>>> labels;
  labels.reserve(all_nodes.size());
  for (const auto& [name, n] : all_nodes) labels.push_back({name, n.labels});
  PoolAssignment pools = AssignPools(specs, labels);
  const std::vector<std::string>& mine = pools.nodes[resource];
  std::set<std::string> mine_set(mine.begin(), mine.end());
  std::map<std::string, const NodeFacts*> by_name;
  for (const auto& [name, n] : all_nodes) by_name[name] = &n;
  std::vector<std::string> kept_in_progress;
  for (const auto& [name, n] : all_nodes) {
    auto it = n.labels.find(wellknown::kLabelDriverOwner);
    const bool labelled = it != n.labels.end() && it->second == resource;
    if (mine_set.count(name) && !labelled) owner_changes[name][wellknown::kLabelDriverOwner] = resource;
    if (!mine_set.count(name) && labelled) {
      if (InProgress(n.state)) {
        kept_in_progress.push_back(name);  // finishes under this resource first
      } else {
        owner_changes[name][wellknown::kLabelDriverOwner] = std::nullopt;
      }
    }
  }

  // The DaemonSets: the main one with this template; the rollback one with the template before.
  std::map<std::string, int> os_count;
  for (const std::string& name : mine) os_count[by_name[name]->os_tag]++;
  std::string os_tag;
  int best = -1;
  for (const auto& [tag, count] : os_count) {
    if (count > best) os_tag = tag, best = count;
  }
  if (os_count.size() > 1) status["warnings"].push_back("nodes of the pool run different OS releases; the image is for " + (os_tag.empty() ? std::string("no OS tag") : os_tag));
  const nlohmann::json tmpl = PodTemplate(spec, os_tag);
  const std::string hash = TemplateHash(tmpl);
  auto main_ds = daemonsets->store().Get(absl::StrCat(o.ns, "/", DaemonSetName(resource, false)));
  auto prev_ds = daemonsets->store().Get(absl::StrCat(o.ns, "/", DaemonSetName(resource, true)));
  std::string previous_version = prev_ds ? prev_ds->version : "", previous_hash = prev_ds ? prev_ds->hash : "";
  const nlohmann::json owner_ref = nlohmann::json::array(
      {me->owner.is_object() ? me->owner
                             : nlohmann::json{{"apiVersion", absl::StrCat(kGroup, "/", kVersion)}, {"kind", kKind},
                                              {"name", resource}, {"uid", spec.uid}, {"controller", true},
                                              {"blockOwnerDeletion", false}}});
  auto apply_ds = [&](nlohmann::json ds) -> Status {
    ds["metadata"]["ownerReferences"] = owner_ref;
    const std::string path = absl::StrCat("/apis/apps/v1/namespaces/", o.ns, "/daemonsets/", ds["metadata"]["name"].get<std::string>());
    auto r = client.Apply(path, ds, kFieldManager, /*force=*/true);
    if (!r.ok()) return r.status();
    Count(&ControllerStats::daemonset_writes);
    return absl::OkStatus();
  };
  if (main_ds && main_ds->hash != hash && !main_ds->pod_template.empty() && main_ds->hash != previous_hash) {
    auto old = ParseJson(main_ds->pod_template, "DaemonSet annotation " + std::string(kAnnoPodTemplate));
    if (old.ok()) {
      GPUNODE_RETURN_IF_ERROR(apply_ds(RenderDaemonSet(resource, o.ns, *old, /*previous=*/true)));
      previous_version = main_ds->version;
      previous_hash = main_ds->hash;
    }
  }
  if (!main_ds || main_ds->hash != hash) GPUNODE_RETURN_IF_ERROR(apply_ds(RenderDaemonSet(resource, o.ns, tmpl, false)));

  // The plan.
  PoolInput in;
  in.driver = &spec;
  in.target_hash = hash;
  in.previous_version = previous_version;
  in.previous_hash = previous_hash;
  in.paused = me->paused;
  in.now = now;
  for (const std::string& name : mine) in.nodes.push_back(by_name[name]);
  for (const std::string& name : kept_in_progress) in.nodes.push_back(by_name[name]);
  for (const auto& [key, p] : pods->store().List()) {
    if (p.resource != resource || p.node.empty()) continue;
    auto it = in.pods.find(p.node);
    if (it == in.pods.end() || (it->second.deleting && !p.deleting)) in.pods[p.node] = p;
  }
  if (o.data != nullptr && !mine.empty()) {
    auto v = Version::Parse(spec.version, "spec.version");
    if (v.ok()) in.refusal = fleet::DriverRefusal(*o.data, *v, by_name[mine.front()]->WithLabels());
  }
  ControllerPolicy policy = o.policy;
  if (me->halt_on_failure) policy.halt_on_failure = *me->halt_on_failure;
  if (me->rollback_on_failure) policy.rollback_on_failure = *me->rollback_on_failure;
  PoolPlan plan = PlanPool(in, policy);
  for (int pass = 0; pass < 2; ++pass) {
    bool listed = false;
    for (const NodeAction& a : plan.actions) {
      if (!a.list_workloads || in.workloads.count(a.node)) continue;
      std::vector<WorkloadPod>& list = in.workloads[a.node];
      auto r = client.List(absl::StrCat("/api/v1/pods?fieldSelector=", kube::UrlEscape("spec.nodeName=" + a.node)), {},
                           [&list](nlohmann::json& item) -> Status {
                             if (list.size() >= 10000) return absl::ResourceExhaustedError("more than 10000 pods on a node");
                             GPUNODE_ASSIGN_OR_RETURN(WorkloadPod p, ReadWorkloadPod(item));
                             list.push_back(std::move(p));
                             return absl::OkStatus();
                           });
      Count(&ControllerStats::workload_lists);
      if (!r.ok()) return r.status();
      listed = true;
    }
    if (!listed) break;
    plan = PlanPool(in, policy);
  }

  // The actions.
  for (const NodeAction& a : plan.actions) {
    nlohmann::json labels_patch = nlohmann::json::object(), annotations_patch = nlohmann::json::object();
    for (const auto& [k, v] : owner_changes[a.node]) labels_patch[k] = Opt(v);
    owner_changes.erase(a.node);
    for (const auto& [k, v] : a.labels) labels_patch[k] = Opt(v);
    if (a.new_state) labels_patch[wellknown::kLabelUpgradeState] = StateName(*a.new_state);
    for (const auto& [k, v] : a.annotations) annotations_patch[k] = Opt(v);
    nlohmann::json patch = nlohmann::json::object();
    if (!labels_patch.empty()) patch["metadata"]["labels"] = labels_patch;
    if (!annotations_patch.empty()) patch["metadata"]["annotations"] = annotations_patch;
    if (a.unschedulable) patch["spec"]["unschedulable"] = *a.unschedulable;
    if (!patch.empty()) {
      auto r = client.MergePatch(NodePath(a.node), patch);
      Count(&ControllerStats::node_patches);
      if (!r.ok()) {
        errors.push_back(std::string(r.status().message()));
        continue;
      }
      if (a.new_state) {
        Log(absl::StrCat(resource, ": node ", a.node, " -> ", StateName(*a.new_state),
                         a.annotations.count(kAnnoReason) && a.annotations.at(kAnnoReason)
                             ? absl::StrCat(" (", *a.annotations.at(kAnnoReason), ")")
                             : ""));
      }
    }
    std::string refused;
    for (const auto& [ns, name] : a.evict) {
      nlohmann::json eviction = {{"apiVersion", "policy/v1"}, {"kind", "Eviction"},
                                 {"metadata", {{"name", name}, {"namespace", ns}}}};
      auto r = client.Post(absl::StrCat("/api/v1/namespaces/", ns, "/pods/", name, "/eviction"), eviction,
                           {.timeout = std::chrono::milliseconds(5000)});
      Count(&ControllerStats::evictions);
      if (!r.ok() && !absl::IsNotFound(r.status()) && refused.empty()) {
        refused = absl::StrCat("eviction of ", ns, "/", name, " refused: ", r.status().message());
      }
    }
    if (!refused.empty()) {
      auto by = by_name.find(a.node);
      const NodeFacts* nf = by == by_name.end() ? nullptr : by->second;
      auto old = nf ? nf->annotations.find(kAnnoReason) : std::map<std::string, std::string>::const_iterator();
      if (nf && (old == nf->annotations.end() || old->second != refused.substr(0, 1000))) {
        (void)client.MergePatch(NodePath(a.node),
                                {{"metadata", {{"annotations", {{kAnnoReason, refused.substr(0, 1000)}}}}}});
        Count(&ControllerStats::node_patches);
      }
      plan.progress.waiting.push_back({a.node, refused});
    }
    if (a.delete_pod) {
      auto r = client.Delete(absl::StrCat("/api/v1/namespaces/", a.delete_pod->first, "/pods/", a.delete_pod->second));
      Count(&ControllerStats::pod_deletions);
      if (!r.ok() && !absl::IsNotFound(r.status())) errors.push_back(std::string(r.status().message()));
    }
    // The Node as far as the condition and the Event need it: no GET for either.
    nlohmann::json known = {{"metadata", {{"name", a.node}, {"uid", by_name.count(a.node) ? by_name[a.node]->uid : ""}}},
                            {"status", {{"conditions", nlohmann::json::array()}}}};
    if (a.condition) {
      kube::NodeCondition c{wellknown::kConditionGpuDriverUpgrade, a.condition->status, a.condition->reason,
                            a.condition->message.substr(0, 1000)};
      auto r = kube::SetNodeCondition(client, a.node, c, &known, std::chrono::minutes(30), kFieldManager);
      Count(&ControllerStats::condition_writes);
      if (!r.ok()) errors.push_back(std::string(r.status().message()));
    }
    if (a.event) {
      Status st = kube::CreateNodeEvent(client, a.node, a.event->type, a.event->reason, a.event->message.substr(0, 1000), &known);
      Count(&ControllerStats::events);
      if (!st.ok()) Log(absl::StrCat("event on ", a.node, ": ", st.message()));
    }
  }
  for (const auto& [node, changes] : owner_changes) {
    nlohmann::json l = nlohmann::json::object();
    for (const auto& [k, v] : changes) l[k] = Opt(v);
    auto r = client.MergePatch(NodePath(node), {{"metadata", {{"labels", l}}}});
    Count(&ControllerStats::node_patches);
    if (!r.ok()) errors.push_back(std::string(r.status().message()));
  }

  // The status.
  const PoolProgress& pr = plan.progress;
  status["state"] = pr.done && pools.conflicts[resource].empty() ? "ready" : "notReady";
  status["targetVersion"] = spec.version;
  status["image"] = spec.ImageFor(os_tag);
  if (!previous_version.empty()) status["previousVersion"] = previous_version;
  status["nodes"] = {{"total", pr.nodes},         {"upgradeDone", pr.by_state.count("upgrade-done") ? pr.by_state.at("upgrade-done") : 0},
                     {"inProgress", pr.in_progress}, {"failed", static_cast<int>(pr.failed.size())},
                     {"unavailable", pr.unavailable}, {"maxUnavailable", pr.max_unavailable}};
  status["byState"] = nlohmann::json::object();
  for (const auto& [state, count] : pr.by_state) status["byState"][state.empty() ? "none" : state] = count;
  auto listed = [](const std::vector<std::pair<std::string, std::string>>& v) {
    nlohmann::json out = nlohmann::json::array();
    for (size_t i = 0; i < v.size() && i < kMaxListed; ++i) out.push_back({{"node", v[i].first}, {"reason", v[i].second}});
    return out;
  };
  status["failedNodes"] = listed(pr.failed);
  status["waiting"] = listed(pr.waiting);
  nlohmann::json skipped = nlohmann::json::array();
  for (size_t i = 0; i < pr.skipped.size() && i < kMaxListed; ++i) skipped.push_back(pr.skipped[i]);
  status["skipped"] = skipped;
  status["halted"] = pr.halted;
  status["conflicts"] = pools.conflicts[resource];
  status["ignoredFields"] = spec.ignored;
  if (!kept_in_progress.empty()) {
    status["warnings"].push_back(absl::StrCat("nodes no longer selected finish their upgrade first: ",
                                              absl::StrJoin(kept_in_progress, ", ")));
  }
  Status st = write_status(status);
  if (!st.ok()) errors.push_back(std::string(st.message()));
  if (!errors.empty()) {
    Count(&ControllerStats::sync_errors);
    return absl::UnavailableError(absl::StrCat(errors.size(), " request(s) failed, first: ", errors.front()));
  }
  const bool busy = pr.in_progress > 0 || (pr.by_state.count("upgrade-required") && pr.halted.empty());
  return busy ? o.busy_resync : o.resync;
}

}  // namespace gpunode::upgrade
