// What gpunode keeps on its Node object: labels put straight onto the Node (NFD optional), with
// the keys gpunode owns listed in one annotation so that stale ones, and all of them at uninstall,
// are removed without touching labels someone else set.
#ifndef GPUNODE_KUBE_NODE_H_
#define GPUNODE_KUBE_NODE_H_

#include <map>
#include <string>
#include <vector>

#include "src/base/status.h"
#include "src/kube/client.h"

namespace gpunode::kube {

// Comma-separated label keys gpunode set on this Node.
inline constexpr char kManagedLabelsAnnotation[] = "gpunode.io/managed-labels";

struct NodeLabelChange {
  std::vector<std::string> set;      // added or changed
  std::vector<std::string> removed;  // stale ones of ours
  bool patched = false;              // false: the Node already matched
};

// Makes the Node carry `labels`: sets what differs, removes keys gpunode set before and no longer
// wants. A label that was already there with the same value is not claimed (it stays at uninstall).
// One GET and at most one merge patch.
StatusOr<NodeLabelChange> ApplyNodeLabels(Client& client, const std::string& node,
                                          const std::map<std::string, std::string>& labels);

// Removes every label gpunode set on the Node, and the annotation. NotFound when there is no Node.
StatusOr<NodeLabelChange> RemoveNodeLabels(Client& client, const std::string& node);

// Whether the DaemonSet is going away (deleted, or has a deletionTimestamp): the pod's stop is an
// uninstall, not a restart or an upgrade.
StatusOr<bool> DaemonSetDeleting(Client& client, const std::string& ns, const std::string& name);

// "ns/name" -> {ns, name}.
Status SplitNamespaced(const std::string& text, const char* what, std::string* ns, std::string* name);

}  // namespace gpunode::kube

#endif  // GPUNODE_KUBE_NODE_H_
