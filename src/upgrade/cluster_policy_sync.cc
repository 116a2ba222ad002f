// The controller's part of a ClusterPolicy: its pool's facts, the agents' policy ConfigMaps, its
// conditions (cluster_policy_sync.h).
#include "src/upgrade/cluster_policy_sync.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "src/kube/client.h"
#include "src/kube/json_fields.h"
#include "src/upgrade/controller_internal.h"
#include "src/upgrade/planner.h"

namespace gpunode::upgrade {
namespace {

using json = nlohmann::json;

constexpr char kFieldManager[] = "gpunode-driver-manager";
constexpr size_t kMaxPolicies = 100;             // ClusterPolicies read (the Operator applies one)
constexpr size_t kMaxCopyBytes = 1 << 20;        // a ConfigMap copied (the API server's limit too)
constexpr size_t kMaxCopyKeys = 1024;
constexpr size_t kMaxMessage = 8192;             // a condition's message (the API allows 32 KiB)
constexpr size_t kMaxConditions = 64;            // conditions kept on a ClusterPolicy

struct Mount {
  const char* path;
  const char* suffix;
};
constexpr Mount kMounts[] = {{kPolicyDevicePluginDir, "-device-plugin"},
                             {kPolicyMigConfigFile, "-mig"},
                             {kPolicyExporterCountersFile, "-exporter"}};

std::string Cut(std::string s, size_t max) {
  if (s.size() <= max) return s;
  size_t cut = max - 3;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;  // a UTF-8 boundary
  s.resize(cut);
  return s + "...";
}

// A string member of an object, "" when absent or not a string.
std::string Text(const json& o, const char* a, const char* b = nullptr) {
  const json* v = &o;
  for (const char* k : {a, b}) {
    if (k == nullptr) break;
    if (!v->is_object() || !v->contains(k)) return "";
    v = &(*v)[k];
  }
  return v->is_string() ? v->get<std::string>() : "";
}

// A namespace name as the API server allows it (a DNS label).
bool NamespaceName(const std::string& s) {
  if (s.empty() || s.size() > 63) return false;
  for (char c : s) {
    if (!absl::ascii_islower(c) && !absl::ascii_isdigit(c) && c != '-') return false;
  }
  return absl::ascii_isalnum(s.front()) && absl::ascii_isalnum(s.back());
}

// A ConfigMap key (a file name on the node).
bool ConfigMapKey(const std::string& s) {
  if (s.empty() || s.size() > 253 || s == "." || s == "..") return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return absl::ascii_isalnum(c) || c == '-' || c == '_' || c == '.'; });
}

std::string Now(const ControllerOptions& o) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::FromChrono(o.now ? o.now() : std::chrono::system_clock::now()),
                          absl::UTCTimeZone());
}

json MakeCondition(const std::string& status, const std::string& reason, const std::string& message, int64_t generation) {
  return {{"status", status}, {"reason", reason}, {"message", Cut(message, kMaxMessage)},
          {"observedGeneration", generation}};
}

int64_t Generation(const json& object) {
  if (!object.is_object() || !object.contains("metadata") || !object["metadata"].is_object()) return 0;
  const json& g = object["metadata"].value("generation", json());
  return g.is_number_integer() ? g.get<int64_t>() : 0;
}

// The pool's progress, from the status SyncPool writes for an NVIDIADriver.
json PoolCondition(const json& st, int64_t generation) {
  if (!st.is_object()) return MakeCondition("Unknown", "NotReported", "", generation);
  const bool ready = st.value("state", "") == "ready";
  if (!st.contains("targetVersion")) {  // the pool is left as it is: the message says why
    return MakeCondition("Unknown", "NotApplied", Text(st, "message"), generation);
  }
  const json nodes = st.value("nodes", json::object());
  auto count = [&nodes](const char* k) {
    return nodes.is_object() && nodes.contains(k) && nodes[k].is_number_integer() ? nodes[k].get<int64_t>() : 0;
  };
  std::string message = absl::StrCat("driver ", Text(st, "targetVersion"), " (", Text(st, "image"), "): ",
                                     count("upgradeDone"), "/", count("total"), " nodes upgrade-done, ",
                                     count("inProgress"), " in progress, ", count("failed"), " failed");
  if (!Text(st, "previousVersion").empty()) absl::StrAppend(&message, "; previous ", Text(st, "previousVersion"));
  auto listed = [&](const char* key, const char* what) {
    if (!st.contains(key) || !st[key].is_array() || st[key].empty()) return;
    std::vector<std::string> items;
    for (const json& e : st[key]) {
      items.push_back(e.is_string() ? e.get<std::string>() : absl::StrCat(Text(e, "node"), " (", Text(e, "reason"), ")"));
    }
    absl::StrAppend(&message, "; ", what, ": ", absl::StrJoin(items, ", "));
  };
  listed("failedNodes", "failed");
  listed("waiting", "waiting");
  listed("conflicts", "conflicts");
  listed("warnings", "warnings");
  if (!Text(st, "halted").empty()) absl::StrAppend(&message, "; halted: ", Text(st, "halted"));
  std::string reason = "Ready";
  if (!ready) {
    reason = count("failed") > 0 ? "UpgradeFailed" : count("inProgress") > 0 ? "Upgrading" : "NotReady";
  }
  return MakeCondition(ready ? "True" : "False", reason, message, generation);
}

}  // namespace

std::string PolicyConfigMapName(const std::string& base, const std::string& mount) {
  for (const Mount& m : kMounts) {
    if (mount == m.path) return base + m.suffix;
  }
  return "";
}

size_t OldestClusterPolicy(const std::vector<json>& items) {
  auto key = [](const json& o) {
    std::string created = Text(o, "metadata", "creationTimestamp");
    return std::make_pair(created.empty() ? std::string("~") : created, Text(o, "metadata", "name"));
  };
  size_t best = items.size();
  for (size_t i = 0; i < items.size(); ++i) {
    if (best == items.size() || key(items[i]) < key(items[best])) best = i;
  }
  return best;
}

namespace {
StatusOr<std::vector<json>> ListPolicies(kube::Client& client) {
  std::vector<json> items;
  auto r = client.List(kClusterPolicyCollection, {.limit = 100}, [&items](json& item) -> Status {
    if (items.size() >= kMaxPolicies) {
      return absl::ResourceExhaustedError(absl::StrCat("more than ", kMaxPolicies, " ClusterPolicies"));
    }
    if (!item.is_object()) return absl::InvalidArgumentError("a ClusterPolicy that is not an object");
    items.push_back(std::move(item));
    return absl::OkStatus();
  });
  if (!r.ok()) return r.status();
  return items;
}

json ConditionOf(const json& object, const std::string& type) {
  if (!object.is_object() || !object.contains("status") || !object["status"].is_object()) return nullptr;
  const json& c = object["status"].value("conditions", json());
  if (!c.is_array()) return nullptr;
  for (const json& e : c) {
    if (e.is_object() && Text(e, "type") == type) return e;
  }
  return nullptr;
}
}  // namespace

StatusOr<std::optional<ClusterPolicyView>> ReadClusterPolicyView(kube::Client& client) {
  auto items = ListPolicies(client);
  if (!items.ok()) {
    if (absl::IsNotFound(items.status())) return std::optional<ClusterPolicyView>();
    return items.status();
  }
  const size_t oldest = OldestClusterPolicy(*items);
  if (oldest == items->size()) return std::optional<ClusterPolicyView>();
  ClusterPolicyView v;
  const json& cp = (*items)[oldest];
  v.name = Text(cp, "metadata", "name");
  auto t = TranslateClusterPolicy(cp);
  if (t.ok()) {
    v.translation = *std::move(t);
  } else {
    v.error = std::string(t.status().message());
  }
  v.paused = Text(cp["metadata"], "annotations", kAnnoPaused) == "true";
  v.applied = ConditionOf(cp, kConditionApplied);
  v.pool = ConditionOf(cp, kConditionDriverPool);
  for (size_t i = 0; i < items->size(); ++i) {
    if (i != oldest) v.ignored.push_back(Text((*items)[i], "metadata", "name"));
  }
  return std::optional<ClusterPolicyView>(std::move(v));
}

ClusterPolicySync::ClusterPolicySync(kube::Client& client, const ControllerOptions& options,
                                     const kube::Store<internal::DriverFacts>& drivers,
                                     std::function<void(const std::string& key)> enqueue)
    : client_(client), o_(options), drivers_(drivers), enqueue_(std::move(enqueue)) {}
ClusterPolicySync::~ClusterPolicySync() = default;

void ClusterPolicySync::Log(const std::string& m) const {
  if (o_.log) o_.log(m);
}

void ClusterPolicySync::LogOnce(const std::string& m) {
  if (said_.count(m)) return;
  if (said_.size() >= 64) said_.clear();
  said_.insert(m);
  Log(m);
}

const PolicyTranslation* ClusterPolicySync::Current() const { return valid_ ? &*valid_ : nullptr; }

bool ClusterPolicySync::InForce() const {
  const PolicyTranslation* t = Current();
  if (object_.is_null() || t == nullptr || !t->default_driver || t->use_nvidia_driver_crd) return false;
  for (const auto& [name, d] : drivers_.List()) {
    if (d.spec.is_default || name == kClusterPolicyDriverName) return false;
  }
  return true;
}

bool ClusterPolicySync::HasPool() const { return has_pool_; }

std::optional<DriverSpec> ClusterPolicySync::Spec() {
  std::lock_guard<std::mutex> l(mu_);
  if (!InForce()) return std::nullopt;
  return valid_->default_driver;
}

std::optional<internal::DriverFacts> ClusterPolicySync::Driver(const std::string& resource) {
  std::lock_guard<std::mutex> l(mu_);
  return DriverLocked(resource);
}

std::optional<internal::DriverFacts> ClusterPolicySync::DriverLocked(const std::string& resource) {
  if (resource != kClusterPolicyDriverName) return std::nullopt;
  internal::DriverFacts f;
  f.spec.name = kClusterPolicyDriverName;
  f.write_status = [this](const json& st) { return WritePoolStatus(st); };
  if (!listed_) {
    f.error = "the ClusterPolicies are not read yet: the pool is left as it is";
    return f;
  }
  if (object_.is_null()) return std::nullopt;
  if (!valid_) {
    f.error = absl::StrCat(invalid_, " (nothing valid read before: the pool is left as it is)");
    return f;
  }
  if (!InForce()) return std::nullopt;
  f.spec = *valid_->default_driver;
  f.owner = {{"apiVersion", absl::StrCat(kGroup, "/", kClusterPolicyVersion)}, {"kind", kClusterPolicyKind},
             {"name", valid_->name}, {"uid", valid_->uid}, {"controller", true}, {"blockOwnerDeletion", false}};
  // The per-pool annotations, as on an NVIDIADriver.
  const json& meta = object_["metadata"];
  const json a = meta.is_object() && meta.contains("annotations") && meta["annotations"].is_object() ? meta["annotations"]
                                                                                                     : json::object();
  const std::string paused = Text(a, kAnnoPaused), on_failure = Text(a, kAnnoOnFailure),
                    rollback = Text(a, kAnnoRollbackOnFailure);
  f.paused = paused == "true";
  if (on_failure == "halt" || on_failure == "continue") {
    f.halt_on_failure = on_failure == "halt";
  } else if (!on_failure.empty()) {
    f.error = absl::StrCat("ClusterPolicy ", valid_->name, ": annotation ", kAnnoOnFailure, ": \"",
                           Cut(on_failure, 64), "\" is not halt or continue");
  }
  if (rollback == "true" || rollback == "false") {
    f.rollback_on_failure = rollback == "true";
  } else if (!rollback.empty()) {
    f.error = absl::StrCat("ClusterPolicy ", valid_->name, ": annotation ", kAnnoRollbackOnFailure, ": \"",
                           Cut(rollback, 64), "\" is not true or false");
  }
  return f;
}

StatusOr<std::chrono::milliseconds> ClusterPolicySync::Sync() {
  bool enqueue = false;
  std::chrono::milliseconds next;
  {
    std::lock_guard<std::mutex> l(mu_);
    next = SyncLocked(&enqueue);
    has_pool_ = !object_.is_null();
  }
  // Outside mu_: the queue's lock is taken before mu_ elsewhere (EnqueueAll -> HasPool).
  if (enqueue) enqueue_(kClusterPolicyDriverName);
  return next;
}

std::chrono::milliseconds ClusterPolicySync::SyncLocked(bool* enqueue) {
  auto items = ListPolicies(client_);
  if (!items.ok() && absl::IsNotFound(items.status())) items = std::vector<json>();  // no Operator CRD: none
  if (!items.ok()) {
    if (absl::IsPermissionDenied(items.status())) {
      if (!said_forbidden_) Log(absl::StrCat("ClusterPolicies cannot be read (left as they are): ", items.status().message()));
      said_forbidden_ = true;
      return o_.resync;
    }
    Log(absl::StrCat("ClusterPolicies: ", items.status().message()));
    ++failures_;
    return std::min(o_.resync, std::chrono::milliseconds(1000) * (1 << std::min(failures_, 5)));
  }
  failures_ = 0;
  listed_ = true;
  const size_t oldest = OldestClusterPolicy(*items);
  for (size_t i = 0; i < items->size(); ++i) {
    if (i == oldest) continue;
    const std::string why = absl::StrCat("ClusterPolicy ", Text((*items)[oldest], "metadata", "name"),
                                         " is older and the one applied (as the Operator, gpunode applies one)");
    Status st = Publish(&(*items)[i], {{kConditionApplied, MakeCondition("False", "Ignored", why, Generation((*items)[i]))},
                                       {kConditionDriverPool, nullptr}},
                        "ignored");
    if (!st.ok()) LogOnce(absl::StrCat("ClusterPolicy ", Text((*items)[i], "metadata", "name"), ": ", st.message()));
  }
  if (oldest == items->size()) {
    if (!object_.is_null()) Log(absl::StrCat("ClusterPolicy ", Text(object_, "metadata", "name"), " is gone"));
    const bool had = !object_.is_null();
    object_ = nullptr;
    valid_.reset();
    invalid_.clear();
    copy_problems_.clear();
    pool_condition_ = nullptr;
    DeleteConfigMaps({});
    DeletePoolDaemonSets();
    *enqueue = had;
    return o_.resync;
  }
  json& cp = (*items)[oldest];
  if (!object_.is_null() && Text(object_, "metadata", "uid") != Text(cp, "metadata", "uid")) {
    valid_.reset();  // another ClusterPolicy (or the same name made again): nothing of the last one stays
  }
  object_ = cp;
  auto t = TranslateClusterPolicy(cp);
  if (t.ok()) {
    if (!valid_ || valid_->generation != t->generation || !invalid_.empty()) {
      Log(absl::StrCat("ClusterPolicy ", t->name, " generation ", t->generation, ": ",
                       t->default_driver ? absl::StrCat("driver ", t->default_driver->ImageFor(""))
                                         : std::string("no driver from it"),
                       ", ", t->unapplied.size(), " fields not applied"));
    }
    valid_ = *std::move(t);
    invalid_.clear();
  } else {
    if (invalid_ != t.status().message()) Log(std::string(t.status().message()));
    invalid_ = std::string(t.status().message());
  }
  if (valid_) {
    std::vector<Copy> copies;
    copy_problems_ = ReadCopies(*valid_, cp, &copies);
    Status st = WriteConfigMaps(*valid_, copies);
    if (!st.ok()) {
      LogOnce(absl::StrCat("the agents' policy ConfigMaps: ", st.message()));
      copy_problems_ = absl::StrCat(copy_problems_, copy_problems_.empty() ? "" : "; ",
                                    "the agents' policy ConfigMaps: ", st.message());
    }
  }
  if (InForce()) {
    pool_daemonsets_ = true;
  } else {
    if (valid_) DeletePoolDaemonSets();
    pool_condition_ = nullptr;
  }
  Status st = PublishCurrent();
  if (!st.ok()) LogOnce(absl::StrCat("ClusterPolicy ", Text(object_, "metadata", "name"), ": status: ", st.message()));
  *enqueue = true;
  return o_.resync;
}

std::string ClusterPolicySync::ReadCopies(const PolicyTranslation& t, const json& object, std::vector<Copy>* out) {
  if (o_.agent_policy_configmap.empty()) return "";
  std::string ns = o_.operator_namespace;
  if (ns.empty()) ns = Text(object, "status", "namespace");
  if (!NamespaceName(ns)) ns = kDefaultOperatorNamespace;
  std::vector<std::string> problems;
  for (const ConfigMapCopy& c : t.config_maps) {
    const std::string what = absl::StrCat(c.field, ": ConfigMap ", ns, "/", c.name);
    auto cm = client_.Get(absl::StrCat("/api/v1/namespaces/", ns, "/configmaps/", c.name));
    if (!cm.ok()) {
      problems.push_back(absl::IsNotFound(cm.status()) ? absl::StrCat(what, " not found")
                                                       : absl::StrCat(what, ": ", cm.status().message()));
      continue;
    }
    auto fields = kube::Fields::Root(*cm, "ConfigMap " + ns + "/" + c.name);
    StatusOr<std::map<std::string, std::string>> data =
        fields.ok() ? fields->StringMap("data") : StatusOr<std::map<std::string, std::string>>(fields.status());
    if (!data.ok()) {
      problems.push_back(std::string(data.status().message()));
      continue;
    }
    size_t bytes = 0;
    std::string bad;
    for (const auto& [k, v] : *data) {
      bytes += k.size() + v.size();
      if (!ConfigMapKey(k)) bad = Cut(k, 64);
    }
    if (bytes > kMaxCopyBytes || data->size() > kMaxCopyKeys || !bad.empty()) {
      problems.push_back(absl::StrCat(what, !bad.empty() ? absl::StrCat(": the key \"", bad, "\" is not a file name")
                                                         : absl::StrCat(": over ", kMaxCopyKeys, " keys or 1 MiB")));
      continue;
    }
    Copy copy{PolicyConfigMapName(o_.agent_policy_configmap, c.mount), {}};
    if (c.key.empty()) {
      copy.data = *data;
    } else if (data->count(c.key)) {
      copy.data[c.key] = data->at(c.key);
    }
    if (copy.data.empty()) {
      problems.push_back(absl::StrCat(what, c.key.empty() ? " has no data" : absl::StrCat(" has no key ", c.key)));
      continue;
    }
    out->push_back(std::move(copy));
  }
  return absl::StrJoin(problems, "; ");
}

Status ClusterPolicySync::WriteConfigMaps(const PolicyTranslation& t, const std::vector<Copy>& copies) {
  if (o_.agent_policy_configmap.empty()) return absl::OkStatus();
  std::vector<Copy> wanted = {{o_.agent_policy_configmap, {{kAgentPolicyKey, AgentPolicyText(t)}}}};
  wanted.insert(wanted.end(), copies.begin(), copies.end());
  std::set<std::string> keep = {o_.agent_policy_configmap};
  for (const ConfigMapCopy& c : t.config_maps) keep.insert(PolicyConfigMapName(o_.agent_policy_configmap, c.mount));
  std::vector<std::string> errors;
  for (const Copy& c : wanted) {
    json cm = {{"apiVersion", "v1"},
               {"kind", "ConfigMap"},
               {"metadata",
                {{"name", c.name},
                 {"namespace", o_.ns},
                 {"labels", {{"app.kubernetes.io/managed-by", "gpunode"}, {"app.kubernetes.io/component", "agent-policy"}}},
                 {"annotations", {{"gpunode.io/cluster-policy", absl::StrCat(t.name, " generation ", t.generation)}}},
                 {"ownerReferences", json::array({{{"apiVersion", absl::StrCat(kGroup, "/", kClusterPolicyVersion)},
                                                   {"kind", kClusterPolicyKind}, {"name", t.name}, {"uid", t.uid},
                                                   {"blockOwnerDeletion", false}}})}}},
               {"data", c.data}};
    const std::string text = cm.dump();
    if (written_.count(c.name) && written_[c.name] == text) continue;
    auto r = client_.Apply(absl::StrCat("/api/v1/namespaces/", o_.ns, "/configmaps/", c.name), cm, kFieldManager,
                           /*force=*/true);
    if (!r.ok()) {
      errors.push_back(std::string(r.status().message()));
      continue;
    }
    written_[c.name] = text;
  }
  DeleteConfigMaps(keep);
  if (!errors.empty()) return absl::UnavailableError(Cut(absl::StrJoin(errors, "; "), 2048));
  return absl::OkStatus();
}

void ClusterPolicySync::DeleteConfigMaps(const std::set<std::string>& keep) {
  const std::string& base = o_.agent_policy_configmap;
  if (base.empty()) return;
  bool all = true;
  std::vector<std::string> names = {base};
  for (const Mount& m : kMounts) names.push_back(base + m.suffix);
  for (const std::string& name : names) {
    if (keep.count(name) || (swept_ && !written_.count(name))) continue;
    auto r = client_.Delete(absl::StrCat("/api/v1/namespaces/", o_.ns, "/configmaps/", name));
    if (!r.ok() && !absl::IsNotFound(r.status())) {
      Log(absl::StrCat("ConfigMap ", o_.ns, "/", name, ": ", r.status().message()));
      all = false;
      continue;
    }
    if (r.ok()) Log(absl::StrCat("deleted ConfigMap ", o_.ns, "/", name, " (no ClusterPolicy names it)"));
    written_.erase(name);
  }
  if (all) swept_ = true;
}

void ClusterPolicySync::DeletePoolDaemonSets() {
  if (!pool_daemonsets_ || drivers_.Get(kClusterPolicyDriverName)) return;  // an NVIDIADriver's of that name
  bool all = true;
  for (bool previous : {false, true}) {
    const std::string name = DaemonSetName(kClusterPolicyDriverName, previous);
    auto r = client_.Delete(absl::StrCat("/apis/apps/v1/namespaces/", o_.ns, "/daemonsets/", name));
    if (r.ok()) {
      Log(absl::StrCat("deleted DaemonSet ", o_.ns, "/", name, " (no ClusterPolicy driver in force)"));
    } else if (!absl::IsNotFound(r.status())) {
      Log(absl::StrCat("DaemonSet ", o_.ns, "/", name, ": ", r.status().message()));
      all = false;
    }
  }
  if (all) pool_daemonsets_ = false;
}

Status ClusterPolicySync::WritePoolStatus(const json& status) {
  std::lock_guard<std::mutex> l(mu_);
  if (object_.is_null()) return absl::OkStatus();
  pool_condition_ = PoolCondition(status, Generation(object_));
  pool_ready_ = pool_condition_.value("status", "") == "True";
  return PublishCurrent();
}

Status ClusterPolicySync::PublishCurrent() {
  if (object_.is_null()) return absl::OkStatus();
  const int64_t generation = Generation(object_);
  json applied;
  if (!invalid_.empty()) {
    applied = MakeCondition("False", "Invalid",
                        absl::StrCat(invalid_, valid_ ? absl::StrCat(" (generation ", valid_->generation,
                                                                     ", the last valid one, stays in force)")
                                                      : std::string(" (nothing of it is applied)")),
                        generation);
  } else if (valid_) {
    const PolicyTranslation& t = *valid_;
    std::vector<std::string> parts;
    if (t.default_driver && !t.use_nvidia_driver_crd && !InForce()) {
      std::string by = "an NVIDIADriver";
      for (const auto& [name, d] : drivers_.List()) {
        if (d.spec.is_default || name == kClusterPolicyDriverName) by = absl::StrCat("NVIDIADriver ", name);
      }
      parts.push_back(absl::StrCat("spec.driver: not applied: ", by, " is the default pool"));
    }
    if (o_.agent_policy_configmap.empty()) {
      parts.push_back("the agents' policy file is not written (the controller runs without --agent-policy-configmap)");
    }
    if (!copy_problems_.empty()) parts.push_back(copy_problems_);
    if (!t.unapplied.empty()) parts.push_back(absl::StrCat("not applied: ", UnappliedSummary(t)));
    applied = parts.empty() ? MakeCondition("True", "Applied", absl::StrCat("every field set is applied (", t.applied.size(),
                                                                        " fields)"), generation)
                            : MakeCondition("True", "PartiallyApplied", absl::StrJoin(parts, "; "), generation);
  }
  const bool pool = InForce() && !pool_condition_.is_null();
  std::string state = "ready";
  if (!invalid_.empty() || (InForce() && !pool_ready_)) state = "notReady";
  return Publish(&object_, {{kConditionApplied, applied}, {kConditionDriverPool, pool ? pool_condition_ : json(nullptr)}},
                 state);
}

Status ClusterPolicySync::Publish(json* object, const std::map<std::string, json>& ours, const std::string& state) {
  const std::string name = Text(*object, "metadata", "name");
  if (name.empty()) return absl::InvalidArgumentError("a ClusterPolicy without metadata.name");
  for (int attempt = 0;; ++attempt) {
    const json empty = json::array();
    const json& have = object->contains("status") && (*object)["status"].is_object() &&
                               (*object)["status"].contains("conditions") && (*object)["status"]["conditions"].is_array()
                           ? (*object)["status"]["conditions"]
                           : empty;
    json next = json::array();
    bool changed = Text(*object, "status", "state") != state;
    std::set<std::string> placed;
    auto want = [&](const std::string& type, const json& old) -> json {
      json c = ours.at(type);
      c["type"] = type;
      const std::string since = Text(old, "lastTransitionTime");
      c["lastTransitionTime"] = !since.empty() && Text(old, "status") == Text(c, "status") ? since : Now(o_);
      return c;
    };
    for (const json& c : have) {
      if (!c.is_object() || next.size() >= kMaxConditions) continue;
      const std::string type = Text(c, "type");
      auto it = ours.find(type);
      if (it == ours.end()) {
        next.push_back(c);
        continue;
      }
      if (it->second.is_null() || placed.count(type)) {
        changed = true;  // ours no longer wanted, or twice
        continue;
      }
      json w = want(type, c);
      changed = changed || w != c;
      next.push_back(std::move(w));
      placed.insert(type);
    }
    for (const auto& [type, c] : ours) {
      if (c.is_null() || placed.count(type)) continue;
      next.push_back(want(type, json::object()));
      changed = true;
    }
    if (!changed) return absl::OkStatus();
    const std::string path = absl::StrCat(kClusterPolicyCollection, "/", name, "/status");
    json patch = {{"status", {{"state", state}, {"conditions", next}}}};
    const std::string rv = Text(*object, "metadata", "resourceVersion");
    if (!rv.empty()) patch["metadata"]["resourceVersion"] = rv;
    auto r = client_.MergePatch(path, patch);
    if (r.ok()) {
      if (r->is_object()) *object = *std::move(r);
      return absl::OkStatus();
    }
    if (!absl::IsAborted(r.status()) || attempt > 0) return r.status();
    auto fresh = client_.Get(absl::StrCat(kClusterPolicyCollection, "/", name));  // 409: another writer came first
    if (!fresh.ok()) return fresh.status();
    if (!fresh->is_object() || Text(*fresh, "metadata", "uid") != Text(*object, "metadata", "uid")) {
      return absl::AbortedError(absl::StrCat("ClusterPolicy ", name, " changed while its status was written"));
    }
    *object = *std::move(fresh);
  }
}

}  // namespace gpunode::upgrade
