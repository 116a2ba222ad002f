// NVIDIA's GPU Operator `ClusterPolicy` (nvidia.com/v1, cluster-scoped, one per cluster) as input to
// gpunode: an Operator user keeps the policy they have, and the controller applies what gpunode
// does with it —
//
//   - spec.driver.* becomes the default pool's driver (a DriverSpec named "cluster-policy",
//     is_default), unless driver.enabled is false (a host driver) or driver.useNvidiaDriverCRD is
//     true (then the NVIDIADriver resources rule, as in the Operator);
//   - the node operands' switches and settings become an agent policy file (docs/agent.md, "Policy
//     file"): devicePlugin → plugin, gfd → labels, dcgmExporter → exporter, toolkit and
//     operator.defaultRuntime → the cdi and runtime steps, mig.strategy, migManager.config,
//     validator;
//   - every present field gpunode does not act on is listed with why (the resource's status and
//     `gpunode fleet` show the list), so nothing is dropped without a word.
//
// The object comes from the API server: it is read strictly and bounded (a wrong type, an
// oversized value or nesting too deep is an error naming the ClusterPolicy and the field path);
// a field gpunode does not know is listed, never refused, so a newer Operator's policy still loads.
// Fields that ask for nothing (false, "", [], {}, a switched-off section, a sandbox operand while
// sandboxWorkloads is off) are neither applied nor listed: the Operator would do nothing with them
// either. docs/driver-upgrades.md ("From a ClusterPolicy") has the field-by-field table;
// cluster_policy_sync.h is what the controller does with a translation.
#ifndef GPUNODE_UPGRADE_CLUSTER_POLICY_H_
#define GPUNODE_UPGRADE_CLUSTER_POLICY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "src/base/status.h"
#include "src/upgrade/nvidia_driver.h"

namespace gpunode::upgrade {

inline constexpr char kClusterPolicyVersion[] = "v1";
inline constexpr char kClusterPolicyKind[] = "ClusterPolicy";
inline constexpr char kClusterPolicyCollection[] = "/apis/nvidia.com/v1/clusterpolicies";
// The default pool's driver when it comes from a ClusterPolicy (the DaemonSet nvidia-driver-cluster-policy,
// the node label nvidia.com/gpu-operator.driver.owner=cluster-policy).
inline constexpr char kClusterPolicyDriverName[] = "cluster-policy";

// Where the chart mounts what the controller writes from a ClusterPolicy (each an optional
// ConfigMap volume): the agent's policy file, and copies of the ConfigMaps the policy names.
inline constexpr char kPolicyFilePath[] = "/etc/gpunode/policy/policy.yaml";
inline constexpr char kPolicyDevicePluginDir[] = "/etc/gpunode/policy-device-plugin";  // one file per config name
inline constexpr char kPolicyMigConfigFile[] = "/etc/gpunode/policy-mig/config.yaml";
inline constexpr char kPolicyExporterCountersFile[] = "/etc/gpunode/policy-exporter/dcgm-metrics.csv";

// A ConfigMap the policy names by name, which the node must see as files: the controller copies
// its data (the keys below) into a ConfigMap of its own that the chart mounts at `mount`.
struct ConfigMapCopy {
  std::string field;    // "spec.devicePlugin.config.name"
  std::string name;     // the user's ConfigMap (in the namespace the Operator ran in)
  std::string key;      // the key to copy, "" = every key (one file per named config)
  std::string mount;    // kPolicyDevicePluginDir, kPolicyMigConfigFile, ...
};

// A field gpunode acts on: what it became.
struct AppliedField {
  std::string path;   // "spec.devicePlugin.enabled"
  std::string value;  // a short summary of the value ("true", "595.91.07")
  std::string to;     // "agent plugin.enabled", "driver cluster-policy: version"
};

// A present field gpunode does not act on, and why.
struct UnappliedField {
  std::string path;   // "spec.dcgm", "spec.daemonsets.labels[\"app.kubernetes.io/managed-by\"]"
  std::string value;  // a short, terminal-safe summary (80 bytes at most)
  std::string why;
};

struct PolicyTranslation {
  std::string name;  // metadata.name of the ClusterPolicy
  std::string uid;
  int64_t generation = 0;
  // The default pool's driver; nullopt: driver.enabled false, driver.useNvidiaDriverCRD true, or
  // no image to run (listed in `unapplied`).
  std::optional<DriverSpec> default_driver;
  bool use_nvidia_driver_crd = false;
  // The agent's policy file's document: apiVersion gpunode/v1, kind AgentPolicy, origin, and only
  // the sections and keys the ClusterPolicy sets.
  nlohmann::ordered_json agent_policy;
  std::vector<ConfigMapCopy> config_maps;
  std::vector<AppliedField> applied;
  std::vector<UnappliedField> unapplied;
};

// One ClusterPolicy object (its JSON from the API server) -> what gpunode does with it. Errors are
// INVALID_ARGUMENT: "ClusterPolicy <name>: spec.driver.upgradePolicy.maxUnavailable: ...".
StatusOr<PolicyTranslation> TranslateClusterPolicy(const nlohmann::json& object);

// The policy file's text as the controller writes it (YAML): a comment naming the ClusterPolicy
// and its generation, then the document.
std::string AgentPolicyText(const PolicyTranslation& t);

// One line per unapplied field grouped by why, for a status condition's message and `gpunode fleet`:
// "spec.dcgm, spec.nodeStatusExporter: <why>; ...", cut at `max_bytes` with "... (N more fields)".
std::string UnappliedSummary(const PolicyTranslation& t, size_t max_bytes = 4096);

}  // namespace gpunode::upgrade

#endif  // GPUNODE_UPGRADE_CLUSTER_POLICY_H_
