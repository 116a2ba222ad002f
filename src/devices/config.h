// The device plugin's and the labeller's configuration: NVIDIA k8s-device-plugin's config file
// format, version v1 (flags, sharing.timeSlicing / sharing.mps, resources), its flags and
// environment variables, with the same precedence: flag, then environment, then file, then
// default (shared/reference/device-plugin.md §1.2, §1.3).
#ifndef GPUNODE_DEVICES_CONFIG_H_
#define GPUNODE_DEVICES_CONFIG_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "src/base/status.h"

namespace gpunode::devices {

enum class MigStrategy { kNone, kSingle, kMixed };
enum class DeviceIdStrategy { kUuid, kIndex };
enum class SharingStrategy { kNone, kTimeSlicing, kMps };

// deviceListStrategy: any subset, in this order of precedence when building a response.
struct DeviceListStrategy {
  bool envvar = true;
  bool volume_mounts = false;
  bool cdi_annotations = false;
  bool cdi_cri = false;
};

struct ReplicatedResource {
  std::string name = "nvidia.com/gpu";  // the resource it applies to
  int replicas = 1;                     // >= 2 when configured
};

struct Sharing {
  SharingStrategy strategy = SharingStrategy::kNone;  // kNone when no resource has replicas > 1
  bool rename_by_default = false;                     // advertise "<name>.shared"
  bool fail_requests_greater_than_one = false;        // MPS: true unless set
  std::vector<ReplicatedResource> resources;
  // Replicas of `resource` (1 when not shared).
  int ReplicasOf(absl::string_view resource) const;
};

struct PluginConfig {
  MigStrategy mig_strategy = MigStrategy::kNone;
  bool fail_on_init_error = true;
  std::string driver_root = "/";
  std::string dev_root;  // empty: the driver root
  bool pass_device_specs = false;
  DeviceListStrategy device_list;
  DeviceIdStrategy device_id = DeviceIdStrategy::kUuid;
  std::string cdi_annotation_prefix = "cdi.k8s.io/";
  std::string cdi_kind = "nvidia.com/gpu";  // the CDI kind `gpunode cdi generate` writes
  std::string mps_root;  // host path; empty: kDefaultMpsRoot (see MpsRootOf)
  Sharing sharing;
  // gpu-feature-discovery settings (flags.gfd)
  bool gfd_oneshot = false;
  bool gfd_no_timestamp = false;
  int gfd_sleep_interval_s = 60;
  std::string gfd_output_file = "/etc/kubernetes/node-feature-discovery/features.d/gpunode";
  std::string machine_type_file = "/sys/class/dmi/id/product_name";
  std::vector<std::string> warnings;  // fields parsed and ignored, as NVIDIA's plugin does
};

// Parses a v1 config file (YAML or JSON). Unknown top-level versions, unknown enum values,
// replicas < 2, and sharing with both timeSlicing and mps are InvalidArgument naming the field.
// `origin` prefixes errors ("config.yaml: sharing.timeSlicing.resources[0].replicas: ...").
StatusOr<PluginConfig> ParseConfig(absl::string_view text, absl::string_view origin);

// Applies environment variables (MIG_STRATEGY, DEVICE_LIST_STRATEGY, DEVICE_ID_STRATEGY,
// PASS_DEVICE_SPECS, FAIL_ON_INIT_ERROR, NVIDIA_DRIVER_ROOT, NVIDIA_DEV_ROOT,
// CDI_ANNOTATION_PREFIX, MPS_ROOT) over `config`; `env` maps names to values (the process
// environment in production). Bad values are InvalidArgument naming the variable.
Status ApplyEnvironment(const std::map<std::string, std::string>& env, PluginConfig* config);

StatusOr<MigStrategy> ParseMigStrategy(absl::string_view text);
StatusOr<DeviceIdStrategy> ParseDeviceIdStrategy(absl::string_view text);
StatusOr<DeviceListStrategy> ParseDeviceListStrategy(absl::string_view text);  // "envvar,cdi-cri"
std::string MigStrategyName(MigStrategy s);          // "none", "single", "mixed"
std::string SharingStrategyName(SharingStrategy s);  // "none", "time-slicing", "mps"

// Checks across fields: MPS with mixed MIG (refused, as NVIDIA does), a relative mpsRoot, a CDI
// annotation prefix without '/'. What needs the devices (MPS on MIG devices, more replicas than
// MPS clients) is checked by PlanMpsDaemons (src/devices/mps.h).
Status ValidateConfig(const PluginConfig& config);

// The MPS root on the host: flags.mpsRoot / MPS_ROOT, else /run/nvidia/mps (the value NVIDIA's
// Helm chart gives; its plugin has no default and requires the flag).
inline constexpr char kDefaultMpsRoot[] = "/run/nvidia/mps";
std::string MpsRootOf(const PluginConfig& config);

}  // namespace gpunode::devices

#endif  // GPUNODE_DEVICES_CONFIG_H_
