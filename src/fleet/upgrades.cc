// gpunode fleet's view of driver upgrades: NVIDIA's NVIDIADriver resources (nvidia.com/v1alpha1,
// one per pool; gpunode's driver-upgrade controller in src/upgrade reconciles them and writes
// their status), and the nodes each one owns counted by NVIDIA's upgrade-state label (fleet.h:
// DriverUpgrade). The keys are src/base/well_known.h's. Everything read is untrusted: types are
// checked by kube::Fields, strings and lists are bounded.
#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/base/terminal.h"
#include "src/fleet/fleet.h"
#include "src/kube/json_fields.h"

namespace gpunode::fleet {
namespace {

using kube::Fields;

constexpr char kCollection[] = "/apis/nvidia.com/v1alpha1/nvidiadrivers";
constexpr char kApiVersion[] = "nvidia.com/v1alpha1";
constexpr size_t kMaxNameBytes = 253;  // a Kubernetes object name

// NVIDIA's states (k8s-operator-libs) that take a node out of service: the upgrade is under way.
// node-maintenance-required and post-maintenance-required are its requestor mode's.
constexpr const char* kUnderWay[] = {"cordon-required",      "wait-for-jobs-required", "pod-deletion-required",
                                     "drain-required",       "pod-restart-required",   "validation-required",
                                     "uncordon-required",    "node-maintenance-required",
                                     "post-maintenance-required"};
constexpr char kRequired[] = "upgrade-required";
constexpr char kDone[] = "upgrade-done";
constexpr char kFailed[] = "upgrade-failed";

bool UnderWay(const std::string& state) {
  return std::any_of(std::begin(kUnderWay), std::end(kUnderWay), [&](const char* s) { return state == s; });
}

// A status list of strings, at most kMaxUpgradeListEntries kept.
StatusOr<std::vector<std::string>> StringList(const Fields& parent, const char* key) {
  GPUNODE_ASSIGN_OR_RETURN(Fields list, parent.Array(key));
  std::vector<std::string> out;
  for (const Fields& e : list.Elements()) {
    if (!e.present()) continue;
    if (!e.json().is_string()) {
      return e.Error(absl::StrCat("expected a string, got ", kube::JsonTypeName(e.json())));
    }
    if (out.size() == kMaxUpgradeListEntries) break;
    out.push_back(CutText(e.json().get<std::string>(), kMaxUpgradeTextBytes));
  }
  return out;
}

StatusOr<std::string> Text(const Fields& parent, const char* key) {
  GPUNODE_ASSIGN_OR_RETURN(std::string s, parent.String(key));
  return CutText(std::move(s), kMaxUpgradeTextBytes);
}

std::string Label(const FleetNode& n, const char* key) {
  auto it = n.labels.find(key);
  return it == n.labels.end() ? std::string() : it->second;
}

// The table's one line about a pool: what holds it up or what is left, most important first.
std::string NoteOf(const DriverUpgrade& u, const NvidiaDriverInfo* d, bool listed) {
  std::vector<std::string> parts;
  if (d == nullptr) {
    parts.push_back(listed ? "no NVIDIADriver of this name (nodes' owner label left behind)"
                           : "NVIDIADriver not read: from the nodes' labels only");
  }
  if (u.paused) {
    parts.push_back("paused");
  } else if (!u.halted.empty()) {
    parts.push_back(absl::StrCat("halted: ", u.halted));
  }
  if (!u.conflicts.empty()) {
    parts.push_back(absl::StrCat("conflict: ", u.conflicts.front(),
                                 u.conflicts.size() > 1 ? absl::StrCat(" (+", u.conflicts.size() - 1, " more)") : ""));
  }
  if (d != nullptr && !d->has_status) parts.push_back("no status yet (is gpunode fleet controller running?)");
  if (d != nullptr && d->state == "notReady" && !d->message.empty()) parts.push_back(d->message);
  if (d != nullptr && d->has_status && !d->status_target.empty() && d->status_target != d->version) {
    parts.push_back(absl::StrCat("status is for ", d->status_target, " (not caught up with spec.version)"));
  }
  if (!u.unknown_states.empty()) {
    parts.push_back(absl::StrCat("unknown ", kLabelUpgradeState, " value(s): ", absl::StrJoin(u.unknown_states, ", ")));
  }
  if (u.rolled_back > 0) parts.push_back(absl::StrCat(u.rolled_back, " rolled back"));
  if (u.to_start > 0) parts.push_back(absl::StrCat(u.to_start, " to start"));
  if (u.no_state > 0) parts.push_back(absl::StrCat(u.no_state, " without a state yet"));
  if (parts.empty() && u.total > 0 && u.done == u.total) parts.push_back("done");
  if (parts.empty() && u.total == 0) parts.push_back("no node selected");
  return absl::StrJoin(parts, "; ");
}

}  // namespace

std::string CutText(std::string text, size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  size_t end = max_bytes;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  text.resize(end);
  return text + "...";
}

StatusOr<NvidiaDriverInfo> ParseNvidiaDriver(const nlohmann::json& obj, const std::string& where_in) {
  if (!obj.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(where_in, ": an NVIDIADriver that is not an object (",
                                                   kube::JsonTypeName(obj), ")"));
  }
  GPUNODE_ASSIGN_OR_RETURN(Fields root, Fields::Root(obj, where_in));
  GPUNODE_ASSIGN_OR_RETURN(Fields meta, root.Object("metadata"));
  NvidiaDriverInfo d;
  GPUNODE_ASSIGN_OR_RETURN(d.name, meta.String("name"));
  if (d.name.empty()) return absl::InvalidArgumentError(absl::StrCat(where_in, ": an NVIDIADriver without metadata.name"));
  if (d.name.size() > kMaxNameBytes) {
    return absl::InvalidArgumentError(absl::StrCat(where_in, ": NVIDIADriver metadata.name is ", d.name.size(),
                                                   " bytes, a name has at most ", kMaxNameBytes));
  }
  const std::string where = absl::StrCat(where_in, " (NVIDIADriver \"", TerminalSafe(d.name), "\")");
  GPUNODE_ASSIGN_OR_RETURN(root, Fields::Root(obj, where));
  GPUNODE_ASSIGN_OR_RETURN(meta, root.Object("metadata"));
  GPUNODE_ASSIGN_OR_RETURN(auto annotations, meta.StringMap("annotations"));
  auto paused = annotations.find(kAnnoUpgradePaused);
  d.paused = paused != annotations.end() && paused->second == "true";

  GPUNODE_ASSIGN_OR_RETURN(Fields spec, root.Object("spec"));
  GPUNODE_ASSIGN_OR_RETURN(d.version, Text(spec, "version"));

  GPUNODE_ASSIGN_OR_RETURN(Fields status, root.Object("status"));
  d.has_status = status.present() && !status.json().empty();
  GPUNODE_ASSIGN_OR_RETURN(d.status_target, Text(status, "targetVersion"));
  GPUNODE_ASSIGN_OR_RETURN(d.previous_version, Text(status, "previousVersion"));
  GPUNODE_ASSIGN_OR_RETURN(d.state, Text(status, "state"));
  GPUNODE_ASSIGN_OR_RETURN(d.message, Text(status, "message"));
  GPUNODE_ASSIGN_OR_RETURN(d.halted, Text(status, "halted"));
  GPUNODE_ASSIGN_OR_RETURN(d.conflicts, StringList(status, "conflicts"));
  GPUNODE_ASSIGN_OR_RETURN(d.ignored_fields, StringList(status, "ignoredFields"));
  GPUNODE_ASSIGN_OR_RETURN(Fields failed, status.Array("failedNodes"));
  for (const Fields& e : failed.Elements()) {
    if (!e.present()) continue;
    GPUNODE_ASSIGN_OR_RETURN(Fields f, e.AsObject());
    GPUNODE_ASSIGN_OR_RETURN(std::string node, f.String("node"));
    GPUNODE_ASSIGN_OR_RETURN(std::string reason, Text(f, "reason"));
    if (node.empty()) return f.Error("a failed node without a name (node)");
    if (d.failed_reasons.size() == kMaxUpgradeListEntries) break;
    d.failed_reasons.emplace(std::move(node), std::move(reason));
  }
  return d;
}

StatusOr<DriverListing> ListNvidiaDrivers(kube::Client& client, const ListNodesOptions& options) {
  auto read = [&](const std::string& resource_version) -> StatusOr<std::vector<NvidiaDriverInfo>> {
    std::vector<NvidiaDriverInfo> drivers;
    std::set<std::string> names;
    kube::ListOptions lo;
    lo.limit = options.limit;
    lo.resource_version = resource_version;
    lo.max_pages = options.max_pages;
    size_t i = 0;
    auto listed = client.List(kCollection, lo, [&](nlohmann::json& item) -> Status {
      const std::string where = absl::StrCat("GET ", kCollection, ": items[", i++, "]");
      GPUNODE_ASSIGN_OR_RETURN(NvidiaDriverInfo d, ParseNvidiaDriver(item, where));
      if (!names.insert(d.name).second) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": NVIDIADriver \"", TerminalSafe(d.name), "\" appears twice"));
      }
      if (names.size() > kMaxNvidiaDrivers) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": more than ", kMaxNvidiaDrivers, " NVIDIADrivers"));
      }
      drivers.push_back(std::move(d));
      return absl::OkStatus();
    });
    if (!listed.ok()) return listed.status();
    return drivers;
  };
  StatusOr<std::vector<NvidiaDriverInfo>> drivers = absl::UnknownError("not read");
  if (options.from_cache) drivers = read("0");
  if (!options.from_cache || absl::IsResourceExhausted(drivers.status())) drivers = read("");
  DriverListing out;
  if (absl::IsNotFound(drivers.status())) return out;  // the CRD is not installed: nothing to show
  if (absl::IsPermissionDenied(drivers.status())) {
    out.notes.push_back(absl::StrCat("NVIDIADrivers not read (", drivers.status().message(),
                                     "): driver upgrades are shown from the nodes' labels only; fleet needs list on "
                                     "nvidiadrivers.nvidia.com"));
    return out;
  }
  if (!drivers.ok()) return drivers.status();
  out.listed = true;
  out.source = kApiVersion;
  out.drivers = std::move(*drivers);
  std::sort(out.drivers.begin(), out.drivers.end(),
            [](const NvidiaDriverInfo& a, const NvidiaDriverInfo& b) { return a.name < b.name; });
  return out;
}

std::vector<DriverUpgrade> SummarizeDriverUpgrades(const std::vector<FleetNode>& nodes, const DriverListing& drivers) {
  std::map<std::string, DriverUpgrade> by_name;
  std::map<std::string, const NvidiaDriverInfo*> info;
  for (const NvidiaDriverInfo& d : drivers.drivers) {
    DriverUpgrade& u = by_name[d.name];
    u.name = d.name;
    u.listed = true;
    u.target = d.version;
    u.previous = d.previous_version;
    u.paused = d.paused;
    u.halted = d.halted;
    u.state = d.state;
    u.message = d.message;
    u.conflicts = d.conflicts;
    u.ignored_fields = d.ignored_fields;
    info[d.name] = &d;
  }
  for (const FleetNode& n : nodes) {
    const std::string owner = Label(n, kLabelDriverOwner);
    if (owner.empty()) continue;
    DriverUpgrade& u = by_name[owner];
    u.name = owner;
    ++u.total;
    u.nodes.push_back(n.name);
    const std::string state = Label(n, kLabelUpgradeState);
    ++u.by_state[state.empty() ? "none" : state];
    if (Label(n, kLabelUpgradeRollback) == "true") ++u.rolled_back;
    if (state.empty()) {
      ++u.no_state;
    } else if (state == kDone) {
      ++u.done;
    } else if (state == kRequired) {
      ++u.to_start;
    } else if (UnderWay(state)) {
      ++u.under_way;
    } else if (state == kFailed) {
      ++u.failed;
      FailedNode f{n.name, n.upgrade_reason};
      if (auto d = info.find(owner); d != info.end()) {
        if (auto r = d->second->failed_reasons.find(n.name); r != d->second->failed_reasons.end() && !r->second.empty()) {
          f.reason = r->second;
        }
      }
      u.failed_nodes.push_back(std::move(f));
    } else if (std::find(u.unknown_states.begin(), u.unknown_states.end(), state) == u.unknown_states.end() &&
               u.unknown_states.size() < 8) {
      u.unknown_states.push_back(state);
    }
  }
  std::vector<DriverUpgrade> out;
  out.reserve(by_name.size());
  for (auto& [name, u] : by_name) {
    std::sort(u.nodes.begin(), u.nodes.end());
    std::sort(u.failed_nodes.begin(), u.failed_nodes.end(),
              [](const FailedNode& a, const FailedNode& b) { return a.node < b.node; });
    auto d = info.find(name);
    u.note = NoteOf(u, d == info.end() ? nullptr : d->second, drivers.listed);
    out.push_back(std::move(u));
  }
  return out;
}

void DriverUpgradeFindings(const std::vector<DriverUpgrade>& upgrades, std::vector<Finding>& findings) {
  constexpr size_t kNamed = 8;
  for (const DriverUpgrade& u : upgrades) {
    if (u.failed_nodes.empty()) continue;
    std::vector<std::string> named;
    for (const FailedNode& f : u.failed_nodes) {
      if (named.size() == kNamed) {
        named.push_back(absl::StrCat("(+", u.failed_nodes.size() - kNamed, " more)"));
        break;
      }
      named.push_back(f.reason.empty() ? f.node : absl::StrCat(f.node, " (", CutText(f.reason, 240), ")"));
    }
    Finding x{"driver-upgrade-failed", Severity::kError, u.name, "", "", "", {}, {}};
    x.message = absl::StrCat(u.failed, " of ", u.total, " node(s) of NVIDIADriver ", u.name, " failed the upgrade",
                             u.target.empty() ? "" : absl::StrCat(" to driver ", u.target), ": ",
                             absl::StrJoin(named, ", "));
    if (u.paused) {
      absl::StrAppend(&x.message, "; the pool is paused");
    } else if (!u.halted.empty()) {
      absl::StrAppend(&x.message, "; no node starts while it is halted");
    }
    x.action = absl::StrCat(
        "read each node's reason (kubectl describe node NODE: its ", kConditionGpuDriverUpgrade,
        " condition and Events), fix the cause, then gpunode fleet upgrade retry NODE; or gpunode fleet upgrade "
        "rollback NODE to return it to ",
        u.previous.empty() ? "the previous driver" : absl::StrCat("driver ", u.previous));
    for (const FailedNode& f : u.failed_nodes) x.nodes.push_back(f.node);
    findings.push_back(std::move(x));
  }
}

}  // namespace gpunode::fleet
