// NVIDIA's `NVIDIADriver` resource (nvidia.com/v1alpha1, the GPU Operator's per-pool driver) as
// gpunode's driver-upgrade controller reads it: NVIDIA's field names, NVIDIA's defaults, read
// strictly and bounded (the resource comes from the API server: a wrong type is an error naming
// the object and the field; fields gpunode does not act on are listed, not refused, so an
// Operator user's resources load as they are). The pools: which Nodes each resource owns
// (nodeSelector, `default: true` for GPU nodes no other resource matches), overlaps refused.
#ifndef GPUNODE_UPGRADE_NVIDIA_DRIVER_H_
#define GPUNODE_UPGRADE_NVIDIA_DRIVER_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "src/base/status.h"

namespace gpunode::upgrade {

inline constexpr char kGroup[] = "nvidia.com";
inline constexpr char kVersion[] = "v1alpha1";
inline constexpr char kKind[] = "NVIDIADriver";
inline constexpr char kCollection[] = "/apis/nvidia.com/v1alpha1/nvidiadrivers";

// An int or a percentage ("25%"), as Kubernetes' IntOrString.
struct IntOrPercent {
  int value = 0;
  bool percent = false;
  // Of `total` nodes; percentages round up, as NVIDIA's upgrade library does
  // (intstr.GetScaledValueFromIntOrPercent(..., true)); never below 0.
  int Of(int total) const;
  std::string ToString() const;
};
StatusOr<IntOrPercent> ParseIntOrPercent(const nlohmann::json& v, const std::string& where);

// upgradePolicy (NVIDIA k8s-operator-libs DriverUpgradePolicySpec), NVIDIA's defaults.
struct UpgradePolicy {
  bool auto_upgrade = true;          // autoUpgrade: false = nothing moves by itself
  int max_parallel_upgrades = 1;     // maxParallelUpgrades: 0 = no limit
  IntOrPercent max_unavailable{25, true};  // maxUnavailable
  struct WaitForCompletion {
    int timeout_seconds = 0;         // 0: NVIDIA waits forever; gpunode: the controller's deadline
    std::string pod_selector;        // label selector of the pods to wait for
  } wait_for_completion;
  struct PodDeletion {               // podDeletion (ClusterPolicy: gpuPodDeletion)
    bool force = false;
    int timeout_seconds = 300;
    bool delete_empty_dir = false;
  } pod_deletion;
  struct Drain {
    bool enable = false;
    bool force = false;
    std::string pod_selector;
    int timeout_seconds = 300;
    bool delete_empty_dir = false;
  } drain;
};

// The fields of an NVIDIADriver the controller uses; everything else is in `ignored` (the field
// paths, for the resource's status and `gpunode fleet`).
struct DriverSpec {
  std::string name;                 // metadata.name
  std::string uid;
  int64_t generation = 0;
  std::string driver_type = "gpu";  // spec.driverType: gpu (vgpu, vgpu-host-manager: refused)
  bool is_default = false;          // spec.default
  std::string repository;           // spec.repository, e.g. nvcr.io/nvidia
  std::string image;                // spec.image, e.g. driver (or a full reference with tag/digest)
  std::string version;              // spec.version, e.g. 580.95.05
  std::string image_pull_policy;    // spec.imagePullPolicy
  std::vector<std::string> image_pull_secrets;
  bool use_precompiled = false;     // spec.usePrecompiled
  std::string kernel_module_type = "auto";
  std::map<std::string, std::string> node_selector;  // spec.nodeSelector
  nlohmann::json tolerations = nlohmann::json::array();  // spec.tolerations, passed on as given
  nlohmann::json env = nlohmann::json::array();          // spec.env
  nlohmann::json args = nlohmann::json::array();         // spec.args
  std::map<std::string, std::string> labels, annotations;  // spec.labels / spec.annotations (pods)
  std::string priority_class_name;
  std::optional<UpgradePolicy> upgrade_policy;  // absent: NVIDIA's defaults, autoUpgrade as given
  std::vector<std::string> ignored;  // "spec.rdma", "spec.licensingConfig", ...

  // The driver container's image: `image` as given when it carries a tag or digest, else
  // `<repository>/<image>:<version>` plus `-<os tag>` when `os_tag` is known (ubuntu22.04), as
  // NVIDIA's GetImagePath.
  std::string ImageFor(const std::string& os_tag) const;
  UpgradePolicy Policy() const { return upgrade_policy.value_or(UpgradePolicy{}); }
};

// One NVIDIADriver object (its JSON from the API server) -> DriverSpec; errors name the object and
// the field ("NVIDIADriver a100-pool: spec.upgradePolicy.maxUnavailable: expected ...").
StatusOr<DriverSpec> ParseNvidiaDriver(const nlohmann::json& object);

// The node's labels -> true when `selector` (matchLabels semantics) selects them.
bool Selects(const std::map<std::string, std::string>& selector, const std::map<std::string, std::string>& labels);

// A resource with no nodeSelector selects the GPU nodes (nvidia.com/gpu.present=true), as NVIDIA's.
std::map<std::string, std::string> EffectiveSelector(const DriverSpec& d);

// Which resource owns each node. A node two non-default resources select is owned by neither and
// both are reported (overlap); a node only the default resource (and no other) selects is the
// default's. Input: every resource and every node's labels; output per resource: its nodes, and
// per resource the conflicts (a sentence naming the other resource and the nodes).
struct PoolAssignment {
  std::map<std::string, std::vector<std::string>> nodes;      // resource -> node names (sorted)
  std::map<std::string, std::vector<std::string>> conflicts;  // resource -> sentences
};
PoolAssignment AssignPools(const std::vector<DriverSpec>& drivers,
                           const std::vector<std::pair<std::string, std::map<std::string, std::string>>>& nodes);

}  // namespace gpunode::upgrade

#endif  // GPUNODE_UPGRADE_NVIDIA_DRIVER_H_
