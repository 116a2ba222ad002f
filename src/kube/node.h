// What gpunode keeps on its Node object: labels put straight onto the Node (NFD optional) and the
// GpuStackReady condition, both by server-side apply with field manager "gpunode": the API server
// records which labels are gpunode's, so a key gpunode stops applying is removed, keys someone
// else also set stay, and two writers never lose each other's keys (no read-modify-write).
// Earlier agents listed their keys in the gpunode.io/managed-labels annotation and wrote them by
// merge patch; the first write of this version migrates such a Node (below).
#ifndef GPUNODE_KUBE_NODE_H_
#define GPUNODE_KUBE_NODE_H_

#include <chrono>
#include <functional>
#include <map>
#include <stop_token>
#include <string>
#include <vector>

#include "src/base/clock.h"
#include "src/base/status.h"
#include "src/kube/client.h"

namespace gpunode::kube {

// gpunode's field manager for server-side apply.
inline constexpr char kFieldManager[] = "gpunode";

// Comma-separated label keys earlier agents set on this Node by merge patch (read for the
// migration, then removed; no longer written).
inline constexpr char kManagedLabelsAnnotation[] = "gpunode.io/managed-labels";

// Whether gpunode may ever set or remove the label `key`: only under its own prefixes, nvidia.com/
// and gpunode.io/. The annotation above is on the Node, which others can write, so a key it lists
// is not proof that gpunode set it: trusting it would let anyone who can annotate the Node make
// the agent (whose kubelet-like rights may exceed theirs) or `gpunode k8s uninstall` remove a
// label such as node-restriction.kubernetes.io/* (a confused deputy).
bool IsGpunodeLabelKey(const std::string& key);

struct NodeLabelChange {
  std::vector<std::string> set;      // added or changed
  std::vector<std::string> removed;  // stale ones of ours
  // Keys outside gpunode's prefixes, listed in the annotation or asked for: left alone (and
  // dropped from the annotation). Callers log them.
  std::vector<std::string> ignored;
  // Keys another field manager owns with a different value (NVIDIA's gpu-feature-discovery through
  // NFD, an admin's kubectl label): gpunode yields and does not apply them ("key (owned by m)").
  std::vector<std::string> conflicts;
  bool patched = false;              // false: the Node already matched
};

// Makes the Node carry `labels` by server-side apply (field manager "gpunode", not forced):
// `set` lists what differed, `removed` the keys gpunode applied before, no longer wants and nobody
// else owns (the API server removes them). A label that was already there with the same value is
// shared with its other owner, so it stays at uninstall. Only keys IsGpunodeLabelKey accepts are
// applied. A key another manager owns with another value is left to it (`conflicts`): gpunode
// does not fight NVIDIA's gpu-feature-discovery or an admin for a label (docs/kubernetes.md).
// Migration (only while the Node carries gpunode.io/managed-labels: a merge patch by "gpunode"
// without it is another writer's, never removed): keys listed there or owned by the earlier
// agent's merge patches that are no longer wanted are removed, gpunode's old merge-patch
// ownership of its labels is dropped from managedFields and the annotation is removed, in one
// JSON patch conditional on the resourceVersion; the apply that follows then owns the wanted
// ones alone.
// One GET and no write when the Node already matches; a conflicting write in between is read
// again (at most 5 times). A Node with a field of the wrong type is InvalidArgument naming it
// ("Node n1: metadata.labels: expected an object, got string").
// `known`: the Node as the caller last saw it (the agent's watch of its own Node): used instead of
// the first GET, so a Node that already matches costs no request at all; a conflicting write reads
// the Node again.
StatusOr<NodeLabelChange> ApplyNodeLabels(Client& client, const std::string& node,
                                          const std::map<std::string, std::string>& labels,
                                          const nlohmann::json* known = nullptr);

// Removes every label gpunode applied on the Node that nobody else owns (an apply without labels),
// and an earlier agent's annotated ones and the annotation. NotFound when there is no Node.
StatusOr<NodeLabelChange> RemoveNodeLabels(Client& client, const std::string& node);

// Whether a Node (as listed) carries labels gpunode applied or an earlier agent's annotation:
// the Nodes `gpunode k8s uninstall` cleans. `what` names it in errors.
StatusOr<bool> CarriesGpunodeLabels(const nlohmann::json& node, const std::string& what);

// Whether the DaemonSet is going away (deleted, or has a deletionTimestamp): the pod's stop is an
// uninstall, not a restart or an upgrade.
StatusOr<bool> DaemonSetDeleting(Client& client, const std::string& ns, const std::string& name);

// A Node condition gpunode owns (e.g. GpuStackReady).
struct NodeCondition {
  std::string type;     // "GpuStackReady"
  std::string status;   // "True", "False", "Unknown"
  std::string reason;   // CamelCase, e.g. the doctor finding id made CamelCase
  std::string message;
};

// Sets the condition on the Node's status (server-side apply of that one entry of
// status.conditions, keyed by type, forced: the type is gpunode's own):
// lastHeartbeatTime now, lastTransitionTime only when the status changes. Returns whether the
// status changed (a transition).
// With `known` (the Node as the caller last saw it) there is no GET, and no write either when the
// condition there already has this status, reason and message and its lastHeartbeatTime is less
// than `heartbeat` old: a node whose verdict does not change writes once per `heartbeat`, not once
// per check.
// `field_manager`: each writer of its own condition types applies under its own manager — an apply
// owns every list entry it applied, so a second condition applied under the same manager would
// remove the first (the driver-upgrade controller's GpuDriverUpgrade took the agent's
// GpuStackReady away on the test cluster).
StatusOr<bool> SetNodeCondition(Client& client, const std::string& node, const NodeCondition& c,
                                const nlohmann::json* known = nullptr,
                                std::chrono::seconds heartbeat = std::chrono::minutes(30),
                                const std::string& field_manager = kFieldManager);

// An Event on the Node (namespace "default", as the kubelet's own Node events), source gpunode.
// type: "Normal" or "Warning". The Node's uid comes from `known` when given, else from a GET.
Status CreateNodeEvent(Client& client, const std::string& node, const std::string& type, const std::string& reason,
                       const std::string& message, const nlohmann::json* known = nullptr);

// Read-modify-write of an object with optimistic concurrency: GET, `mutate` (false: nothing to
// change, done), PUT with the read resourceVersion; a 409 Conflict reads and mutates again, at most
// `max_attempts` times (another 409, such as AlreadyExists, is returned as it is). Returns the
// attempts made.
StatusOr<int> UpdateWithRetry(Client& client, const std::string& path,
                              const std::function<bool(nlohmann::json& object, int attempt)>& mutate,
                              int max_attempts = 5);

struct WatchNodeOptions {
  // The shortest watch request: each asks for timeoutSeconds drawn uniformly from [t, 2t) (as
  // client-go's reflector does), so the agents of a cluster started together do not all reconnect
  // at the same moment.
  int timeout_seconds = 300;
  // After a broken connection, a failed read, or a watch the server ended within a second: a
  // pause drawn uniformly from [b, 2b), b doubling up to max_backoff, back to `backoff` once events
  // flow. (A server that ends every watch at once is not asked again hundreds of times a second.)
  std::chrono::milliseconds backoff{500};
  std::chrono::milliseconds max_backoff{8000};
  std::function<void(const std::string&)> log;  // reconnects and re-lists
  Clock* clock = &SystemClock();                // the pauses wait on it (tests: a FakeClock)
};

// Follows one Node: `on_change(node)` with the Node as read first, then after every change, until it
// returns false or `stop` is requested. Survives broken connections and API server restarts
// (reconnects with backoff from the last resourceVersion) and 410 Gone (reads the Node again).
// Returns OK when stopped (at once, in a pause or in the middle of a watch), or the error that
// cannot be retried (401, 403, 404).
Status WatchNode(Client& client, const std::string& node, const std::function<bool(const nlohmann::json&)>& on_change,
                 std::stop_token stop, const WatchNodeOptions& options = {});

// "ns/name" -> {ns, name}.
Status SplitNamespaced(const std::string& text, const char* what, std::string* ns, std::string* name);

}  // namespace gpunode::kube

#endif  // GPUNODE_KUBE_NODE_H_
