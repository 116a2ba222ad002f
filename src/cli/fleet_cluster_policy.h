// NVIDIA's ClusterPolicy in `gpunode fleet upgrade status` (fleet_upgrade_cmd.cc): its default pool
// beside the NVIDIADriver pools, and what the controller applies of it and what not
// (src/upgrade/cluster_policy_sync.h).
#ifndef GPUNODE_CLI_FLEET_CLUSTER_POLICY_H_
#define GPUNODE_CLI_FLEET_CLUSTER_POLICY_H_

#include <optional>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "src/kube/client.h"

namespace gpunode::cli {

struct ClusterPolicyStatus {
  // The pool "cluster-policy" as an NVIDIADriver-like object (metadata.name, spec.version,
  // status.ignoredFields), when the ClusterPolicy's driver is the default pool.
  std::optional<nlohmann::json> pool;
  nlohmann::ordered_json doc;  // the document's clusterPolicy (null: no ClusterPolicy)
  std::string text;            // what the table view prints after the pools ("" : nothing)
};

// `drivers`: the NVIDIADrivers read (an NVIDIADriver that is the default pool wins over the
// ClusterPolicy's driver, as in the controller). A server error is said in `text`, not returned:
// the NVIDIADriver pools are shown all the same.
ClusterPolicyStatus ReadClusterPolicyStatus(kube::Client& client, const std::vector<nlohmann::json>& drivers);

}  // namespace gpunode::cli

#endif  // GPUNODE_CLI_FLEET_CLUSTER_POLICY_H_
