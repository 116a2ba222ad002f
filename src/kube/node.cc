#include "src/kube/node.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace gpunode::kube {
namespace {

std::string NodePath(const std::string& node) { return absl::StrCat("/api/v1/nodes/", UrlEscape(node)); }

std::map<std::string, std::string> StringMap(const nlohmann::json& obj) {
  std::map<std::string, std::string> out;
  if (!obj.is_object()) return out;
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    if (it.value().is_string()) out[it.key()] = it.value().get<std::string>();
  }
  return out;
}

std::set<std::string> Managed(const nlohmann::json& node) {
  std::set<std::string> out;
  const auto annotations = StringMap(node["metadata"].value("annotations", nlohmann::json::object()));
  auto it = annotations.find(kManagedLabelsAnnotation);
  if (it == annotations.end()) return out;
  for (absl::string_view k : absl::StrSplit(it->second, ',', absl::SkipWhitespace())) out.insert(std::string(k));
  return out;
}

}  // namespace

Status SplitNamespaced(const std::string& text, const char* what, std::string* ns, std::string* name) {
  std::vector<std::string> parts = absl::StrSplit(text, '/');
  if (parts.size() != 2 || parts[0].empty() || parts[1].empty()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " \"", text, "\": not NAMESPACE/NAME"));
  }
  *ns = parts[0];
  *name = parts[1];
  return absl::OkStatus();
}

StatusOr<NodeLabelChange> ApplyNodeLabels(Client& client, const std::string& node,
                                          const std::map<std::string, std::string>& labels) {
  GPUNODE_ASSIGN_OR_RETURN(nlohmann::json current, client.Get(NodePath(node)));
  if (!current.is_object() || !current.contains("metadata")) {
    return absl::InternalError(absl::StrCat("GET node ", node, ": not a Node object"));
  }
  const auto have = StringMap(current["metadata"].value("labels", nlohmann::json::object()));
  const std::set<std::string> managed_before = Managed(current);
  std::set<std::string> managed;
  NodeLabelChange change;
  nlohmann::json patch_labels = nlohmann::json::object();
  for (const auto& [k, v] : labels) {
    auto it = have.find(k);
    if (it == have.end() || it->second != v) {
      patch_labels[k] = v;
      change.set.push_back(k);
      managed.insert(k);
    } else if (managed_before.count(k)) {
      managed.insert(k);
    }
  }
  for (const std::string& k : managed_before) {
    if (!labels.count(k) && have.count(k)) {
      patch_labels[k] = nullptr;
      change.removed.push_back(k);
    }
  }
  const std::string annotation = absl::StrJoin(managed, ",");
  const bool annotation_changed = managed != managed_before;
  if (change.set.empty() && change.removed.empty() && !annotation_changed) return change;
  nlohmann::json patch = {{"metadata", {{"labels", patch_labels}}}};
  patch["metadata"]["annotations"][kManagedLabelsAnnotation] =
      managed.empty() ? nlohmann::json(nullptr) : nlohmann::json(annotation);
  GPUNODE_RETURN_IF_ERROR(client.MergePatch(NodePath(node), patch).status());
  change.patched = true;
  return change;
}

StatusOr<NodeLabelChange> RemoveNodeLabels(Client& client, const std::string& node) {
  GPUNODE_ASSIGN_OR_RETURN(nlohmann::json current, client.Get(NodePath(node)));
  NodeLabelChange change;
  const std::set<std::string> managed = Managed(current);
  const auto have = StringMap(current["metadata"].value("labels", nlohmann::json::object()));
  const auto annotations = StringMap(current["metadata"].value("annotations", nlohmann::json::object()));
  if (managed.empty() && !annotations.count(kManagedLabelsAnnotation)) return change;
  nlohmann::json patch_labels = nlohmann::json::object();
  for (const std::string& k : managed) {
    if (have.count(k)) {
      patch_labels[k] = nullptr;
      change.removed.push_back(k);
    }
  }
  nlohmann::json patch = {{"metadata", {{"labels", patch_labels}}}};
  patch["metadata"]["annotations"][kManagedLabelsAnnotation] = nullptr;
  GPUNODE_RETURN_IF_ERROR(client.MergePatch(NodePath(node), patch).status());
  change.patched = true;
  return change;
}

StatusOr<bool> DaemonSetDeleting(Client& client, const std::string& ns, const std::string& name) {
  auto ds = client.Get(absl::StrCat("/apis/apps/v1/namespaces/", UrlEscape(ns), "/daemonsets/", UrlEscape(name)));
  if (!ds.ok()) {
    if (absl::IsNotFound(ds.status())) return true;
    return ds.status();
  }
  return (*ds)["metadata"].contains("deletionTimestamp") && !(*ds)["metadata"]["deletionTimestamp"].is_null();
}

}  // namespace gpunode::kube
