// Node labels by server-side apply (node.h), and the migration from the merge-patch +
// gpunode.io/managed-labels bookkeeping of earlier agents.
#include <algorithm>
#include <ctime>
#include <map>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "src/base/terminal.h"
#include "src/base/well_known.h"
#include "src/kube/json_fields.h"
#include "src/kube/managed_fields.h"
#include "src/kube/node.h"

namespace gpunode::kube {
namespace {

constexpr int kMaxAttempts = 5;

std::string NodePath(const std::string& node) { return absl::StrCat("/api/v1/nodes/", UrlEscape(node)); }

std::string NowRfc3339() {
  char buf[32];
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// A JSON pointer segment (RFC 6901): "~" -> "~0", "/" -> "~1".
std::string Pointer(const std::string& key) { return absl::StrReplaceAll(key, {{"~", "~0"}, {"/", "~1"}}); }

bool IsOurs(const ManagedFieldsEntry& e) { return e.manager == kFieldManager; }
bool IsOurApply(const ManagedFieldsEntry& e) {
  return IsOurs(e) && e.operation == "Apply" && e.subresource.empty();
}
// An earlier agent's merge patches (the API server names an Update's manager after the
// User-Agent, "gpunode/VERSION" -> "gpunode").
bool IsOurLegacy(const ManagedFieldsEntry& e) {
  return IsOurs(e) && e.operation == "Update" && e.subresource.empty();
}

// The Node as far as its labels go.
struct LabelState {
  std::string rv;
  std::map<std::string, std::string> labels;
  bool annotated = false;                // has gpunode.io/managed-labels
  std::set<std::string> legacy;          // listed there (or, with it, owned by a legacy entry), under our prefixes
  std::vector<std::string> ignored;      // listed there, outside our prefixes
  std::set<std::string> applied;         // owned by gpunode's Apply
  std::map<std::string, std::set<std::string>> others;  // label -> managers other than gpunode
  nlohmann::json managed_fields;         // as read
  std::vector<ManagedFieldsEntry> entries;
};

StatusOr<LabelState> ReadLabelState(const nlohmann::json& node, const std::string& what) {
  GPUNODE_ASSIGN_OR_RETURN(Fields root, Fields::Root(node, what));
  GPUNODE_ASSIGN_OR_RETURN(Fields meta, root.Object("metadata"));
  LabelState s;
  GPUNODE_ASSIGN_OR_RETURN(s.rv, meta.String("resourceVersion"));
  GPUNODE_ASSIGN_OR_RETURN(s.labels, meta.StringMap("labels"));
  GPUNODE_ASSIGN_OR_RETURN(auto annotations, meta.StringMap("annotations"));
  if (auto it = annotations.find(kManagedLabelsAnnotation); it != annotations.end()) {
    s.annotated = true;
    for (absl::string_view k : absl::StrSplit(it->second, ',', absl::SkipWhitespace())) {
      std::string key(absl::StripAsciiWhitespace(k));
      if (IsGpunodeLabelKey(key)) {
        s.legacy.insert(std::move(key));
      } else {
        s.ignored.push_back(TerminalSafe(key));
      }
    }
  }
  GPUNODE_ASSIGN_OR_RETURN(s.entries, ReadManagedLabels(meta));
  GPUNODE_ASSIGN_OR_RETURN(Fields mf, meta.Array("managedFields"));
  s.managed_fields = mf.present() ? mf.json() : nlohmann::json::array();
  for (const ManagedFieldsEntry& e : s.entries) {
    for (const std::string& k : e.labels) {
      if (IsOurApply(e)) {
        s.applied.insert(k);
      } else if (IsOurLegacy(e) && s.annotated) {
        if (IsGpunodeLabelKey(k)) s.legacy.insert(k);
      } else if (!IsOurs(e) || !s.annotated) {
        // Without the annotation a merge patch by "gpunode" is not an earlier agent's label
        // bookkeeping (that always came with the annotation) but another writer of ours, e.g. an
        // earlier controller's nvidia.com/gpu-driver-upgrade-state: it is theirs, never removed.
        s.others[k].insert(e.manager.empty() ? "(unnamed)" : TerminalSafe(e.manager));
      }
    }
  }
  return s;
}

// The migration's JSON patch, in one step conditional on the resourceVersion (a write in between
// is 409 Conflict): an earlier agent's keys (listed in the annotation, or owned by gpunode's
// merge patches) that are no longer wanted are removed; those still wanted move from the merge
// patches' managedFields entry to gpunode's Apply entry (as kubectl's client-side to server-side
// apply upgrade does), so they are gpunode's alone at once — an uninstall before the next apply
// still removes them, and dropping one later removes it; the annotation goes. Empty when there is
// nothing to migrate.
nlohmann::json MigrationPatch(const LabelState& s, const std::map<std::string, std::string>& wanted,
                              std::vector<std::string>* removed) {
  nlohmann::json ops = nlohmann::json::array();
  std::set<std::string> keep;
  for (const std::string& k : s.legacy) {
    if (!s.labels.count(k)) continue;
    if (wanted.count(k)) {
      keep.insert(k);
      continue;
    }
    ops.push_back({{"op", "remove"}, {"path", absl::StrCat("/metadata/labels/", Pointer(k))}});
    removed->push_back(k);
  }
  if (s.annotated) {
    ops.push_back({{"op", "remove"}, {"path", absl::StrCat("/metadata/annotations/", Pointer(kManagedLabelsAnnotation))}});
  }
  nlohmann::json fields = s.managed_fields;
  bool changed = false;
  nlohmann::json* apply_entry = nullptr;
  for (const ManagedFieldsEntry& e : s.entries) {
    if (e.index >= fields.size()) continue;
    if (IsOurApply(e)) apply_entry = &fields[e.index];
    if (!s.annotated || !IsOurLegacy(e)) continue;
    nlohmann::json& labels = fields[e.index]["fieldsV1"]["f:metadata"]["f:labels"];
    for (const std::string& k : e.labels) {
      if (IsGpunodeLabelKey(k)) changed = labels.erase(FieldsV1Key(k)) > 0 || changed;
    }
  }
  std::set<std::string> moved;
  for (const std::string& k : keep) {
    if (!s.applied.count(k)) moved.insert(k);
  }
  if (!moved.empty()) {
    if (apply_entry == nullptr) {
      fields.push_back({{"manager", kFieldManager}, {"operation", "Apply"}, {"apiVersion", "v1"},
                        {"time", NowRfc3339()}, {"fieldsType", "FieldsV1"}, {"fieldsV1", nlohmann::json::object()}});
      apply_entry = &fields.back();
    }
    for (const std::string& k : moved) (*apply_entry)["fieldsV1"]["f:metadata"]["f:labels"][FieldsV1Key(k)] = nlohmann::json::object();
    changed = true;
  }
  if (changed) ops.push_back({{"op", "replace"}, {"path", "/metadata/managedFields"}, {"value", fields}});
  if (ops.empty()) return ops;
  ops.push_back({{"op", "replace"}, {"path", "/metadata/resourceVersion"}, {"value", s.rv}});
  return ops;
}

bool IsConflict(const Status& st) {
  const std::string reason = ReasonOf(st);
  return absl::IsAborted(st) && (reason == "Conflict" || reason.empty());
}

// Applies `wanted` (our keys only) after migrating; the report of both.
StatusOr<NodeLabelChange> ApplyLabels(Client& client, const std::string& node,
                                      const std::map<std::string, std::string>& wanted, NodeLabelChange change,
                                      const nlohmann::json* known = nullptr) {
  const std::string what = absl::StrCat("Node ", node);
  Status last;
  bool migrated = false;
  for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
    // The first round reads what the caller knows (no request); a conflict reads the Node again.
    nlohmann::json read;
    if (attempt > 0 || migrated || known == nullptr) {
      GPUNODE_ASSIGN_OR_RETURN(read, client.Get(NodePath(node)));
    }
    GPUNODE_ASSIGN_OR_RETURN(LabelState s, ReadLabelState(read.is_null() ? *known : read, what));
    if (attempt == 0) change.ignored.insert(change.ignored.begin(), s.ignored.begin(), s.ignored.end());
    std::vector<std::string> dropped;
    nlohmann::json migration = MigrationPatch(s, wanted, &dropped);
    if (!migration.empty() && !migrated) {
      auto patched = client.JsonPatch(NodePath(node), migration);
      if (!patched.ok()) {
        if (!IsConflict(patched.status())) return patched.status();
        last = patched.status();
        continue;
      }
      change.removed.insert(change.removed.end(), dropped.begin(), dropped.end());
      change.patched = migrated = true;
      --attempt;  // read the migrated Node; not a conflict
      continue;
    }
    // Yield a key another manager owns with another value; keep the rest.
    std::map<std::string, std::string> keep;
    std::vector<std::string> conflicts, set, removed;
    for (const auto& [k, v] : wanted) {
      auto have = s.labels.find(k);
      auto other = s.others.find(k);
      if (have != s.labels.end() && have->second != v && other != s.others.end()) {
        conflicts.push_back(absl::StrCat(k, " (owned by ", absl::StrJoin(other->second, ", "), ")"));
        continue;
      }
      keep[k] = v;
      if (have == s.labels.end() || have->second != v) set.push_back(k);
    }
    std::set<std::string> keys;
    for (const auto& [k, v] : keep) keys.insert(k);
    for (const std::string& k : s.applied) {
      if (!keep.count(k) && s.labels.count(k) && !s.others.count(k)) removed.push_back(k);
    }
    change.conflicts = conflicts;
    if (set.empty() && keys == s.applied) return change;  // the Node matches and the keys are ours
    nlohmann::json config = {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", node}}}};
    if (!keep.empty()) config["metadata"]["labels"] = keep;
    auto applied = client.Apply(NodePath(node), config, kFieldManager, /*force=*/false);
    if (!applied.ok()) {
      if (!IsConflict(applied.status())) return applied.status();
      last = applied.status();  // someone wrote a key in between: read again, yield it
      continue;
    }
    change.set = set;
    change.removed.insert(change.removed.end(), removed.begin(), removed.end());
    change.patched = true;
    return change;
  }
  return absl::AbortedError(absl::StrCat(last.message(), " (still conflicting after ", kMaxAttempts, " attempts)"));
}

}  // namespace

bool IsGpunodeLabelKey(const std::string& key) {
  return absl::StartsWith(key, wellknown::kNvidiaPrefix) || absl::StartsWith(key, wellknown::kGpunodePrefix);
}

StatusOr<NodeLabelChange> ApplyNodeLabels(Client& client, const std::string& node,
                                          const std::map<std::string, std::string>& labels,
                                          const nlohmann::json* known) {
  NodeLabelChange change;
  std::map<std::string, std::string> wanted;
  for (const auto& [k, v] : labels) {
    if (IsGpunodeLabelKey(k)) {
      wanted[k] = v;
    } else {
      change.ignored.push_back(TerminalSafe(k));
    }
  }
  return ApplyLabels(client, node, wanted, std::move(change), known);
}

StatusOr<NodeLabelChange> RemoveNodeLabels(Client& client, const std::string& node) {
  return ApplyLabels(client, node, {}, NodeLabelChange{});
}

StatusOr<bool> CarriesGpunodeLabels(const nlohmann::json& node, const std::string& what) {
  GPUNODE_ASSIGN_OR_RETURN(LabelState s, ReadLabelState(node, what));
  return s.annotated || !s.applied.empty() || !s.legacy.empty();
}

}  // namespace gpunode::kube
