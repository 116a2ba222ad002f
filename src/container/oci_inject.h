// GPU injection into an OCI runtime spec (a bundle's config.json), for `gpunode oci-runtime`.
//
// Three steps, each testable on its own:
//  1. RequestedDevices() (oci_request.h): what the container asks for, through which channel (CDI
//     annotations, /dev/null volume mounts, NVIDIA_VISIBLE_DEVICES), and whether it is believed.
//  2. SpecRegistry: the CDI specs of a list of directories (default /etc/cdi then /var/run/cdi; a
//     later directory wins a name conflict), resolving "vendor/class=name".
//  3. ApplyContainerEdits(): the edits applied exactly as the CDI library does (§1.5): env
//     appended; device nodes stat'ed on the host to fill type/major/minor/fileMode, replacing a
//     device of the same path, plus a cgroup allow rule; mounts replacing one at the same
//     destination, re-sorted (stably) by destination depth; hooks appended by hook name; gids.
//     Spec-level edits of every spec that contributed a device first, then each device's; for a
//     NVIDIA_VISIBLE_DEVICES or volume-mount request the spec-level mounts only of
//     NVIDIA_DRIVER_CAPABILITIES.
// All JSON work keeps the config's key order (ordered_json), so the file stays recognisable.
#ifndef GPUNODE_CONTAINER_OCI_INJECT_H_
#define GPUNODE_CONTAINER_OCI_INJECT_H_

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "src/base/status.h"
#include "src/container/cdi_spec.h"
#include "src/container/oci_request.h"

namespace gpunode::container {

inline constexpr char kInjectedAnnotation[] = "gpunode.io/injected-devices";

// Step 2.
class SpecRegistry {
 public:
  // Reads every *.yaml, *.yml and *.json file of each directory (a missing directory is fine).
  // A file that does not parse is not fatal: it is remembered and named when a device cannot be
  // resolved (the runtimes do the same).
  static SpecRegistry Load(const std::vector<std::string>& dirs);
  // From specs already in memory (tests, and the shim's generated-on-the-fly spec).
  void Add(cdi::Spec spec, std::string origin);

  struct Resolved {
    const cdi::Spec* spec;
    const cdi::Device* device;
    const std::string* origin;
  };
  // "vendor/class=name". NotFound names what the specs of that kind do offer.
  StatusOr<Resolved> Resolve(absl::string_view qualified) const;
  // The spec of a kind, if any (the last loaded wins).
  std::optional<Resolved> SpecOfKind(absl::string_view kind) const;
  bool HasKind(absl::string_view kind) const { return SpecOfKind(kind).has_value(); }

  const std::vector<std::string>& errors() const { return errors_; }  // "<file>: <problem>"
  size_t size() const { return specs_.size(); }

 private:
  std::vector<cdi::Spec> specs_;
  std::vector<std::string> origins_;
  std::vector<std::string> errors_;
};

// What the host says about a device node path (lstat).
struct HostNodeInfo {
  std::string type;  // "c", "b", "p", "u"... empty when not a device
  int64_t major = 0;
  int64_t minor = 0;
  uint32_t file_mode = 0;  // permission bits
};
using StatHostNode = std::function<StatusOr<HostNodeInfo>(const std::string& host_path)>;
StatusOr<HostNodeInfo> LstatHostNode(const std::string& host_path);

// Step 3, one set of edits.
Status ApplyContainerEdits(nlohmann::ordered_json& config, const cdi::ContainerEdits& edits,
                           const StatHostNode& stat_node = LstatHostNode);

struct InjectResult {
  std::vector<std::string> devices;  // the qualified names injected
  std::vector<std::string> specs;    // origins of the specs used
  bool changed = false;              // false: every edit (and the annotation) was already there
};

// Docker's `--gpus` adds a prestart hook running `nvidia-container-runtime-hook prestart`; when
// the shim is the runtime the injection is done here and that hook is removed (it would fail: see
// `gpunode` as that hook). Returns how many hooks were removed. Call it after RequestedDevices(),
// which reads the hook's presence as Docker's word that the variable is the engine user's request.
int RemoveLegacyNvidiaHooks(nlohmann::ordered_json& config);

// Steps 2+3 for a request: resolves every name (NotFound/FailedPrecondition with the fix when one
// cannot be resolved), applies spec-level then device edits, and records the names in the
// annotation kInjectedAnnotation. That annotation is a record, never trusted: every edit is
// applied idempotently (env entries, cgroup rules and hooks are not repeated; device nodes and
// mounts replace the entry at the same path), so a second pass changes nothing and a config that
// merely carries the annotation still gets its devices.
StatusOr<InjectResult> InjectDevices(nlohmann::ordered_json& config, const SpecRegistry& registry,
                                     const DeviceRequest& request, absl::string_view default_kind,
                                     const StatHostNode& stat_node = LstatHostNode);

}  // namespace gpunode::container

#endif  // GPUNODE_CONTAINER_OCI_INJECT_H_
