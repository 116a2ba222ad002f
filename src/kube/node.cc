#include "src/kube/node.h"

#include <algorithm>
#include <ctime>
#include <random>
#include <set>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "src/base/backoff.h"
#include "src/base/terminal.h"
#include "src/kube/json_fields.h"

namespace gpunode::kube {
namespace {

std::string NodePath(const std::string& node) { return absl::StrCat("/api/v1/nodes/", UrlEscape(node)); }

// The watch's timeout drawn from [t, 2t), so a thousand agents do not reconnect in lockstep.
int JitteredTimeout(int t, std::mt19937_64& rng) {
  if (t <= 1) return std::max(t, 1);
  return std::uniform_int_distribution<int>(t, 2 * t - 1)(rng);
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

StatusOr<bool> DaemonSetDeleting(Client& client, const std::string& ns, const std::string& name) {
  auto ds = client.Get(absl::StrCat("/apis/apps/v1/namespaces/", UrlEscape(ns), "/daemonsets/", UrlEscape(name)));
  if (!ds.ok()) {
    if (absl::IsNotFound(ds.status())) return true;
    return ds.status();
  }
  GPUNODE_ASSIGN_OR_RETURN(Fields root, Fields::Root(*ds, absl::StrCat("DaemonSet ", ns, "/", name)));
  GPUNODE_ASSIGN_OR_RETURN(Fields meta, root.Object("metadata"));
  GPUNODE_ASSIGN_OR_RETURN(std::string deletion, meta.String("deletionTimestamp"));
  return !deletion.empty();
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

StatusOr<bool> SetNodeCondition(Client& client, const std::string& node, const NodeCondition& c,
                                const nlohmann::json* known, std::chrono::seconds heartbeat,
                                const std::string& field_manager) {
  nlohmann::json read;
  if (known == nullptr) {
    GPUNODE_ASSIGN_OR_RETURN(read, client.Get(NodePath(node)));
    known = &read;
  }
  GPUNODE_ASSIGN_OR_RETURN(Fields root, Fields::Root(*known, absl::StrCat("Node ", node)));
  GPUNODE_ASSIGN_OR_RETURN(Fields status, root.Object("status"));
  GPUNODE_ASSIGN_OR_RETURN(Fields conditions, status.Array("conditions"));
  std::string before, transition, reason, message, beat;
  bool found = false;
  for (const Fields& element : conditions.Elements()) {
    if (!element.present()) continue;  // a null entry: nothing
    GPUNODE_ASSIGN_OR_RETURN(Fields cond, element.AsObject());
    GPUNODE_ASSIGN_OR_RETURN(std::string type, cond.String("type"));
    if (type != c.type) continue;
    found = true;
    GPUNODE_ASSIGN_OR_RETURN(before, cond.String("status"));
    GPUNODE_ASSIGN_OR_RETURN(transition, cond.String("lastTransitionTime"));
    GPUNODE_ASSIGN_OR_RETURN(reason, cond.String("reason"));
    GPUNODE_ASSIGN_OR_RETURN(message, cond.String("message"));
    GPUNODE_ASSIGN_OR_RETURN(beat, cond.String("lastHeartbeatTime"));
  }
  if (read.is_null() && found && before == c.status && reason == c.reason && message == c.message) {
    absl::Time last;
    std::string err;
    if (absl::ParseTime(absl::RFC3339_full, beat, &last, &err) && absl::Now() - last < absl::FromChrono(heartbeat) &&
        last <= absl::Now() + absl::Seconds(60)) {
      return false;  // as it is, and fresh: nothing to write
    }
  }
  const std::string now = NowRfc3339();
  const bool changed = before != c.status;
  nlohmann::json cond = {{"type", c.type},           {"status", c.status},           {"reason", c.reason},
                         {"message", c.message},     {"lastHeartbeatTime", now},
                         {"lastTransitionTime", changed || transition.empty() ? now : transition}};
  // Server-side apply on the status subresource: conditions are a list keyed by type, so only
  // this entry is gpunode's; forced, because the condition type is gpunode's own and earlier
  // agents wrote it by strategic merge (field manager "gpunode", operation Update).
  nlohmann::json config = {{"apiVersion", "v1"},
                           {"kind", "Node"},
                           {"metadata", {{"name", node}}},
                           {"status", {{"conditions", {cond}}}}};
  GPUNODE_RETURN_IF_ERROR(client.Apply(NodePath(node) + "/status", config, field_manager, /*force=*/true).status());
  return changed;
}

Status CreateNodeEvent(Client& client, const std::string& node, const std::string& type, const std::string& reason,
                       const std::string& message, const nlohmann::json* known) {
  std::string uid;  // best effort: an Event without the Node's uid still shows on `kubectl describe node`
  StatusOr<nlohmann::json> n = known != nullptr ? StatusOr<nlohmann::json>(absl::UnknownError("")) : client.Get(NodePath(node));
  if (known == nullptr && n.ok()) known = &*n;
  if (known != nullptr) {
    if (auto root = Fields::Root(*known, absl::StrCat("Node ", node)); root.ok()) {
      if (auto meta = root->Object("metadata"); meta.ok()) uid = meta->String("uid").value_or("");
    }
  }
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
    const std::string reason = ReasonOf(put.status());
    // 409 Conflict: someone wrote in between; read again. (A 409 without a Status is taken as one.)
    if (!absl::IsAborted(put.status()) || !(reason == "Conflict" || reason.empty())) return put.status();
    last = put.status();
  }
  return absl::AbortedError(absl::StrCat(last.message(), " (still conflicting after ", max_attempts, " attempts)"));
}

Status WatchNode(Client& client, const std::string& node, const std::function<bool(const nlohmann::json&)>& on_change,
                 std::stop_token stop, const WatchNodeOptions& options) {
  auto log = [&](const std::string& m) {
    if (options.log) options.log(m);
  };
  // Pauses uniformly in [b, 2b), b doubling up to the maximum (the project's one Backoff), on the
  // options' clock; a stop ends a pause at once.
  const auto initial = std::max(options.backoff, std::chrono::milliseconds(1));
  Backoff backoff({.initial = initial, .max = std::max(options.max_backoff, initial), .jitter = 1.0});
  std::mt19937_64 rng(std::random_device{}());
  Clock& clock = *options.clock;
  auto pause = [&](std::chrono::milliseconds wait) { clock.WaitFor(wait, stop); };
  const std::string what = absl::StrCat("Node ", node);
  std::string rv;
  bool need_list = true;
  while (!stop.stop_requested()) {
    if (need_list) {
      auto n = client.Get(NodePath(node));
      StatusOr<std::string> version = absl::UnknownError("");
      if (n.ok()) {
        auto root = Fields::Root(*n, what);
        auto meta = root.ok() ? root->Object("metadata") : StatusOr<Fields>(root.status());
        version = meta.ok() ? meta->String("resourceVersion") : StatusOr<std::string>(meta.status());
      }
      if (!n.ok() || !version.ok()) {
        const Status st = n.ok() ? version.status() : n.status();
        if (absl::IsNotFound(st) || absl::IsPermissionDenied(st) || absl::IsUnauthenticated(st)) return st;
        const auto wait = backoff.Next();
        log(absl::StrCat("read Node ", node, ": ", st.message(), "; retrying in ", wait.count(), " ms"));
        pause(wait);
        continue;
      }
      rv = *version;
      need_list = false;
      if (!on_change(*n)) return absl::OkStatus();
    }
    bool keep = true;
    Status event_error;
    const auto started = clock.Now();
    Client::WatchOptions wo;
    wo.resource_version = rv;
    wo.timeout_seconds = JitteredTimeout(options.timeout_seconds, rng);
    wo.stop = stop;
    Status st = client.Watch(
        absl::StrCat("/api/v1/nodes?fieldSelector=metadata.name%3D", UrlEscape(node)), wo,
        [&](const std::string& type, const nlohmann::json& obj) {
          auto root = Fields::Root(obj, absl::StrCat(what, " (watch event ", type, ")"));
          auto meta = root.ok() ? root->Object("metadata") : StatusOr<Fields>(root.status());
          auto v = meta.ok() ? meta->String("resourceVersion") : StatusOr<std::string>(meta.status());
          if (!v.ok()) {
            event_error = absl::UnavailableError(v.status().message());
            return false;
          }
          if (!v->empty()) rv = *v;
          if (type == "BOOKMARK") return true;
          if (type == "DELETED") return true;  // a deleted Node: the next read says NotFound
          backoff.Reset();                     // events flow: the connection is good
          keep = on_change(obj);
          return keep;
        });
    if (!keep || stop.stop_requested()) return absl::OkStatus();
    if (!event_error.ok()) st = event_error;
    const bool short_lived = clock.Now() - started < std::chrono::seconds(1);
    if (st.ok() && !short_lived) continue;  // the server's timeout: watch again from rv
    if (absl::IsAborted(st)) {
      log(absl::StrCat(st.message(), ": reading the Node again"));
      need_list = true;
      if (!short_lived) continue;
    }
    if (absl::IsPermissionDenied(st) || absl::IsUnauthenticated(st)) return st;
    const auto wait = backoff.Next();
    log(absl::StrCat(st.ok() ? absl::StrCat("WATCH Node ", node, ": the server ended the watch within a second")
                             : std::string(st.message()),
                     "; watching again in ", wait.count(), " ms"));
    pause(wait);
  }
  return absl::OkStatus();
}

}  // namespace gpunode::kube
