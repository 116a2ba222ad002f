// Step 1 of the OCI runtime shim (oci_inject.h has steps 2 and 3): which GPUs a container asks
// for, through which channel, and whether that channel is believed.
//
// A container can ask three ways; the first that asks wins, as in NVIDIA's container toolkit
// (internal/config/image/cuda_image.go, VisibleDevices):
//  1. CDI annotations: keys with the prefix "cdi.k8s.io/", values comma-separated fully-qualified
//     CDI names of any kind. Written by the kubelet from the device plugin's allocation (a pod's own
//     annotations do not reach the OCI spec), so always believed.
//  2. Volume mounts (when RequestPolicy::accept_volume_mounts): mounts whose source is /dev/null and
//     whose destination lies below /var/run/nvidia-container-devices/; the rest of the destination
//     is the device: "0", "GPU-<uuid>", "0:1", "all", or "cdi/<vendor>/<class>/<name>" /
//     "cdi/<vendor>/<class>=<name>"; "imex/..." is not a GPU and is skipped. A pod cannot make such
//     a mount without a hostPath volume, which already means root on the node.
//  3. NVIDIA_VISIBLE_DEVICES in process.env (its last entry): `all`, indices, UUIDs, MIG "0:1",
//     nvidia.com/gpu=NAME, `none` (the driver, no GPU); `void`, empty or unset ask for nothing.
//     An image or a pod can set it, so it is believed only when the container is privileged
//     (CAP_SYS_ADMIN in process.capabilities.bounding), when Docker's `--gpus` hook is in the spec
//     (HasDockerGpusHook: only the engine, for its user, adds hooks), or when
//     RequestPolicy::accept_envvar_when_unprivileged is set.
//     The value /var/run/nvidia-container-devices is the volume-mount marker (what a device plugin
//     with the volume-mounts strategy puts there): no request of its own, never an error.
// A request that is not believed, or that loses to a channel before it, is reported in
// DeviceRequest::ignored (the shim logs it), never silently dropped and never an error.
// The variable and the volume mounts name only nvidia.com/gpu devices (the default kind): another
// kind there is refused, so an image cannot pull another vendor's CDI device (and its host mounts)
// into a container. The variable is checked whenever it is set, even when it is not believed.
#ifndef GPUNODE_CONTAINER_OCI_REQUEST_H_
#define GPUNODE_CONTAINER_OCI_REQUEST_H_

#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "src/base/status.h"

namespace gpunode::container {

inline constexpr char kCdiAnnotationPrefix[] = "cdi.k8s.io/";
inline constexpr char kVisibleDevicesEnv[] = "NVIDIA_VISIBLE_DEVICES";
inline constexpr char kVolumeMountsRoot[] = "/var/run/nvidia-container-devices";
inline constexpr char kDockerGpusHookName[] = "nvidia-container-runtime-hook";

// NVIDIA's names of the two settings (top-level keys of its config.toml).
inline constexpr char kAcceptEnvvarUnprivilegedKey[] = "accept-nvidia-visible-devices-envvar-when-unprivileged";
inline constexpr char kAcceptVolumeMountsKey[] = "accept-nvidia-visible-devices-as-volume-mounts";

// Which channels are believed. gpunode's defaults differ from NVIDIA's on the variable: NVIDIA
// believes it in unprivileged containers (true), so any image with ENV NVIDIA_VISIBLE_DEVICES=all
// gets every GPU; gpunode does not (false). Volume mounts: NVIDIA false, gpunode true.
struct RequestPolicy {
  bool accept_envvar_when_unprivileged = false;
  bool accept_volume_mounts = true;
  // Where each value came from, for the log: "gpunode's default", a config file, a variable, a flag.
  std::string envvar_source = "gpunode's default";
  std::string volume_mounts_source = "gpunode's default";
};

// "vendor/class=name" -> (kind, name); InvalidArgument when either part breaks the CDI rules.
StatusOr<std::pair<std::string, std::string>> SplitQualifiedName(absl::string_view qualified);

// NVIDIA's config file: $NVIDIA_CTK_CONFIG_FILE_PATH when set, else
// ${XDG_CONFIG_HOME:-/etc}/nvidia-container-runtime/config.toml. Arguments: those variables' values
// ("" = unset).
std::string NvidiaToolkitConfigPath(const std::string& ctk_config_file_path, const std::string& xdg_config_home);

// Sets the fields of `policy` that the TOML text sets (kAcceptEnvvarUnprivilegedKey and
// kAcceptVolumeMountsKey at the top level; every other key and table is NVIDIA's and ignored).
// Malformed TOML, or one of the two keys not a boolean: InvalidArgument naming `path`, the line
// and the key.
Status ApplyNvidiaToolkitConfig(absl::string_view text, const std::string& path, RequestPolicy& policy);
// The same for a file; a missing file changes nothing (returns false), one that cannot be read is
// an error naming it.
StatusOr<bool> LoadNvidiaToolkitConfig(const std::string& path, RequestPolicy& policy);

// NVIDIA's test of a privileged container: CAP_SYS_ADMIN in process.capabilities.bounding (or in
// process.capabilities itself when that is a list, as in OCI specs before 1.0.0-rc5).
bool IsPrivilegedContainer(const nlohmann::ordered_json& config);
// A prestart or createRuntime hook whose path's last component is nvidia-container-runtime-hook:
// what Docker adds for `docker run --gpus` (moby daemon/nvidia_linux.go: args
// [nvidia-container-runtime-hook, prestart], env = dockerd's environment). Caveat: the hooks.d file
// of `nvidia-ctk runtime configure --config-mode oci-hook` (CRI-O, podman) adds the same hook to
// every container; on such a node every container's variable would be believed, so that file and
// this shim must not be combined (gpunode's runtime configure writes no such file).
bool HasDockerGpusHook(const nlohmann::ordered_json& config);

enum class RequestChannel { kNone, kAnnotation, kVolumeMounts, kEnvironment };

// A request that was not used, and why.
struct IgnoredRequest {
  std::string what;     // "NVIDIA_VISIBLE_DEVICES=all", "volume mounts 0, 1"
  std::string why;      // "the container is unprivileged (no CAP_SYS_ADMIN in its bounding set)"
  std::string setting;  // the key that would change it, or "" when no setting would
};

struct DeviceRequest {
  std::vector<std::string> devices;  // fully-qualified CDI names, in request order, no duplicates
  bool driver_only = false;          // NVIDIA_VISIBLE_DEVICES=none: spec-level edits, no GPU
  RequestChannel channel = RequestChannel::kNone;
  std::string source;                // "NVIDIA_VISIBLE_DEVICES=1 (privileged container)", "annotation cdi.k8s.io/x", ...
  // Set for NVIDIA_VISIBLE_DEVICES and volume-mount requests: NVIDIA_DRIVER_CAPABILITIES (default
  // utility,compute); the spec-level mounts are limited to those groups (capabilities.h). CDI
  // annotation requests get the spec whole.
  std::optional<std::set<std::string>> capabilities;
  std::vector<IgnoredRequest> ignored;
  bool Empty() const { return devices.empty() && !driver_only; }
};

// Step 1. `default_kind` qualifies bare names ("0" -> "nvidia.com/gpu=0") and is the one kind the
// variable and the volume mounts may name. Fails on a malformed config (process.env not an array),
// a malformed name in any channel that is read, a kind other than `default_kind` in the variable or
// a believed volume mount, and an unknown NVIDIA_DRIVER_CAPABILITIES when that is used.
StatusOr<DeviceRequest> RequestedDevices(const nlohmann::ordered_json& config, absl::string_view default_kind,
                                         const RequestPolicy& policy);

}  // namespace gpunode::container

#endif  // GPUNODE_CONTAINER_OCI_REQUEST_H_
