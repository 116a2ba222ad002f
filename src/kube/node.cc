#include "src/kube/node.h"

#include <algorithm>
#include <ctime>
#include <thread>
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

namespace {

std::string NowRfc3339() {
  char buf[32];
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

StatusOr<bool> SetNodeCondition(Client& client, const std::string& node, const NodeCondition& c) {
  GPUNODE_ASSIGN_OR_RETURN(nlohmann::json current, client.Get(NodePath(node)));
  std::string before;
  std::string transition;
  for (const auto& cond : current["status"].value("conditions", nlohmann::json::array())) {
    if (cond.value("type", "") == c.type) {
      before = cond.value("status", "");
      transition = cond.value("lastTransitionTime", "");
    }
  }
  const std::string now = NowRfc3339();
  const bool changed = before != c.status;
  nlohmann::json cond = {{"type", c.type},           {"status", c.status},           {"reason", c.reason},
                         {"message", c.message},     {"lastHeartbeatTime", now},
                         {"lastTransitionTime", changed || transition.empty() ? now : transition}};
  GPUNODE_RETURN_IF_ERROR(
      client.StrategicPatch(NodePath(node) + "/status", {{"status", {{"conditions", {cond}}}}}).status());
  return changed;
}

Status CreateNodeEvent(Client& client, const std::string& node, const std::string& type, const std::string& reason,
                       const std::string& message) {
  auto n = client.Get(NodePath(node));
  const std::string uid = n.ok() ? (*n)["metadata"].value("uid", "") : "";
  const std::string now = NowRfc3339();
  nlohmann::json ev = {
      {"apiVersion", "v1"},
      {"kind", "Event"},
      {"metadata", {{"generateName", node + ".gpunode."}, {"namespace", "default"}}},
      {"involvedObject", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", node}, {"uid", uid}}},
      {"type", type},
      {"reason", reason},
      {"message", message},
      {"source", {{"component", "gpunode"}, {"host", node}}},
      {"reportingComponent", "gpunode"},
      {"reportingInstance", node},
      {"firstTimestamp", now},
      {"lastTimestamp", now},
      {"count", 1}};
  return client.Post("/api/v1/namespaces/default/events", ev).status();
}

StatusOr<int> UpdateWithRetry(Client& client, const std::string& path,
                              const std::function<bool(nlohmann::json&, int)>& mutate, int max_attempts) {
  Status last;
  for (int attempt = 1; attempt <= max_attempts; ++attempt) {
    GPUNODE_ASSIGN_OR_RETURN(nlohmann::json object, client.Get(path));
    if (!mutate(object, attempt)) return attempt;
    auto put = client.Put(path, object);  // carries the resourceVersion that was read
    if (put.ok()) return attempt;
    if (!absl::IsAborted(put.status())) return put.status();
    last = put.status();  // 409: someone wrote in between; read again
  }
  return absl::AbortedError(absl::StrCat(last.message(), " (still conflicting after ", max_attempts, " attempts)"));
}

Status WatchNode(Client& client, const std::string& node, const std::function<bool(const nlohmann::json&)>& on_change,
                 const std::atomic<bool>& stop, const WatchNodeOptions& options) {
  auto log = [&](const std::string& m) {
    if (options.log) options.log(m);
  };
  auto backoff = options.backoff;
  auto pause = [&]() {
    for (auto waited = std::chrono::milliseconds(0); waited < backoff && !stop; waited += std::chrono::milliseconds(50)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    backoff = std::min(backoff * 2, options.max_backoff);
  };
  std::string rv;
  bool need_list = true;
  while (!stop) {
    if (need_list) {
      auto n = client.Get(NodePath(node));
      if (!n.ok()) {
        if (absl::IsNotFound(n.status()) || absl::IsPermissionDenied(n.status()) ||
            absl::IsUnauthenticated(n.status())) {
          return n.status();
        }
        log(absl::StrCat("read Node ", node, ": ", n.status().message(), "; retrying"));
        pause();
        continue;
      }
      rv = (*n)["metadata"].value("resourceVersion", "");
      need_list = false;
      if (!on_change(*n)) return absl::OkStatus();
    }
    bool keep = true;
    Status st = client.Watch(
        absl::StrCat("/api/v1/nodes?fieldSelector=metadata.name%3D", UrlEscape(node)), rv, options.timeout_seconds,
        [&](const std::string& type, const nlohmann::json& obj) {
          if (obj.is_object() && obj.contains("metadata")) {
            const std::string v = obj["metadata"].value("resourceVersion", "");
            if (!v.empty()) rv = v;
          }
          if (type == "BOOKMARK") return true;
          if (type == "DELETED") return true;  // a deleted Node: the next read says NotFound
          backoff = options.backoff;           // events flow: the connection is good
          keep = on_change(obj);
          return keep;
        },
        &stop);
    if (!keep || stop) return absl::OkStatus();
    if (st.ok()) continue;  // the server's timeout: watch again from rv
    if (absl::IsAborted(st)) {
      log(absl::StrCat(st.message(), ": reading the Node again"));
      need_list = true;
      continue;
    }
    if (absl::IsPermissionDenied(st) || absl::IsUnauthenticated(st)) return st;
    log(absl::StrCat(st.message(), "; watching again in ", backoff.count(), " ms"));
    pause();
  }
  return absl::OkStatus();
}

}  // namespace gpunode::kube
