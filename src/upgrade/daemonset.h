// The driver DaemonSet of one NVIDIADriver, as the controller writes it (server-side apply, field
// manager gpunode-driver-manager): NVIDIA's driver container as given by the resource (image,
// env, args, tolerations, pull secrets, labels, annotations, priority class), privileged with the
// host's root at /host and /run/nvidia shared both ways, updateStrategy OnDelete (the controller
// replaces each node's pod when the node's turn comes), on the nodes labelled with the resource's
// name (nvidia.com/gpu-operator.driver.owner). The rollback DaemonSet (`-previous`) runs the
// previous template on the nodes the controller moved back (gpunode.io/driver-upgrade.rollback);
// the main one stays off them.
#ifndef GPUNODE_UPGRADE_DAEMONSET_H_
#define GPUNODE_UPGRADE_DAEMONSET_H_

#include <string>

#include "nlohmann/json.hpp"
#include "src/upgrade/nvidia_driver.h"

namespace gpunode::upgrade {

// On the DaemonSet: the pod template it was made from (JSON), so the next version's rollback
// DaemonSet can run it again.
inline constexpr char kAnnoPodTemplate[] = "gpunode.io/pod-template";

std::string DaemonSetName(const std::string& resource, bool previous);

// The pod template (without the hash label) and its hash: FNV-1a 64 of its JSON, 10 hex digits.
nlohmann::json PodTemplate(const DriverSpec& d, const std::string& os_tag);
std::string TemplateHash(const nlohmann::json& pod_template);

// The DaemonSet for `d` in `ns`. previous: the rollback one. `pod_template` from PodTemplate (for
// the rollback DaemonSet, the template that ran before).
nlohmann::json RenderDaemonSet(const std::string& resource, const std::string& ns, const nlohmann::json& pod_template,
                               bool previous);

}  // namespace gpunode::upgrade

#endif  // GPUNODE_UPGRADE_DAEMONSET_H_
