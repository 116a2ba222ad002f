// The opaque device configuration of a ResourceClaim, in NVIDIA's DRA driver's format, so claims
// and DeviceClasses written for NVIDIA's driver work unchanged:
//
//   opaque:
//     driver: gpu.nvidia.com
//     parameters:
//       apiVersion: resource.nvidia.com/v1beta1
//       kind: GpuConfig                      # or MigDeviceConfig
//       sharing:
//         strategy: TimeSlicing              # or MPS
//         timeSlicingConfig: {interval: Long}  # Default|Short|Medium|Long (GpuConfig only)
//         mpsConfig:
//           defaultActiveThreadPercentage: 50
//           defaultPinnedDeviceMemoryLimit: 10Gi
//           defaultPerDevicePinnedMemoryLimit: {"0": 5Gi, "GPU-...": 2Gi}
//
// Field names, defaults and checks are those of NVIDIA's Go types (sigs.k8s.io/dra-driver-nvidia-gpu,
// api/nvidia.com/resource/v1beta1: gpuconfig.go, migconfig.go, sharing.go, validate.go), decoded
// as its StrictDecoder does: field names are case-sensitive and an unknown field is an error.
// Differences, each on the safe side: NVIDIA's TimeSlicingSettings and MPSSupport feature gates
// (off by default there) are taken as on; a `timeSlicingConfig` without `interval` (NVIDIA's
// driver dereferences the missing pointer) means Default here; the MPS/TimeSlicing mix-ups NVIDIA
// finds only when it applies the config are errors here at once. `VfioDeviceConfig` (GPU
// passthrough with vfio-pci) is refused: gpunode does not pass GPUs through. The
// compute-domain kinds belong to NVIDIA's other kubelet plugin and are refused too.
//
// Errors are INVALID_ARGUMENT and name the field: "<what>: <path>.sharing.mpsConfig.foo: unknown
// field", "<what>: <path>.sharing.strategy: expected a string, got number".
#ifndef GPUNODE_DRA_CLAIM_CONFIG_H_
#define GPUNODE_DRA_CLAIM_CONFIG_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "src/base/status.h"

namespace gpunode::dra {

inline constexpr char kConfigApiVersion[] = "resource.nvidia.com/v1beta1";
inline constexpr char kGpuConfigKind[] = "GpuConfig";
inline constexpr char kMigDeviceConfigKind[] = "MigDeviceConfig";
// The API server's cap on opaque parameters (resource.k8s.io OpaqueParametersMaxLength).
inline constexpr size_t kMaxConfigBytes = 10 * 1024;

enum class ConfigKind { kGpu, kMigDevice };
enum class SharingStrategy { kTimeSlicing, kMps };
// NVML's time-slice values, in this order (0..3).
enum class TimeSliceInterval { kDefault, kShort, kMedium, kLong };

const char* ConfigKindName(ConfigKind k);            // "GpuConfig", "MigDeviceConfig"
const char* SharingStrategyName(SharingStrategy s);  // "TimeSlicing", "MPS"
const char* TimeSliceIntervalName(TimeSliceInterval t);  // "Default", ...

// A Kubernetes quantity ("10Gi", "512M", "1.5G", "2e9"), as written and as its value rounded up
// to a whole number (resource.Quantity.Value()).
struct Quantity {
  std::string text;
  int64_t value = 0;
  bool operator==(const Quantity&) const = default;
};
// Kubernetes' quantity syntax: [+-]digits[.digits] then Ki|Mi|Gi|Ti|Pi|Ei, n|u|m|k|M|G|T|P|E or an
// exponent e<n>/E<n>. A value outside int64 is an error (never a crash or a wrap).
StatusOr<Quantity> ParseQuantity(absl::string_view text);

struct MpsConfig {
  std::optional<int64_t> default_active_thread_percentage;  // 0..100
  std::optional<Quantity> default_pinned_device_memory_limit;
  // Key: a device index within the devices the config applies to ("0"), or a UUID among them.
  std::map<std::string, Quantity> default_per_device_pinned_memory_limit;
  bool operator==(const MpsConfig&) const = default;
};

struct Sharing {
  SharingStrategy strategy = SharingStrategy::kTimeSlicing;
  // TimeSlicing of a GPU: the interval (Default when not given). A MIG device has none.
  std::optional<TimeSliceInterval> interval;
  // MPS: its settings ({} when not given).
  std::optional<MpsConfig> mps;
  bool operator==(const Sharing&) const = default;
};

struct DeviceConfig {
  ConfigKind kind = ConfigKind::kGpu;
  std::optional<Sharing> sharing;  // absent: the device as it is (no sharing settings)
  bool operator==(const DeviceConfig&) const = default;
};

// Parses and validates `parameters` (the `opaque.parameters` object). `what` names the object
// ("ResourceClaim ns/name") and `path` the place of `parameters` in it
// ("status.allocation.devices.config[0].opaque.parameters"); errors name both.
StatusOr<DeviceConfig> ParseDeviceConfig(const nlohmann::json& parameters, absl::string_view what,
                                         absl::string_view path);

// The config in NVIDIA's format again (apiVersion, kind, sharing with the defaults filled in);
// ParseDeviceConfig reads it back to the same value.
nlohmann::json DeviceConfigToJson(const DeviceConfig& config);

// MPS's pinned memory limits per device, as NVIDIA's MpsPerDevicePinnedMemoryLimit.Normalize
// computes them for the devices a config applies to (their UUIDs, in allocation order): the
// default for every device, then each per-device entry (by UUID or index) over it; values in
// whole MiB as "<n>M" (what CUDA_MPS_PINNED_DEVICE_MEM_LIMIT takes). A key that is no device of
// the list, or a limit under 1 MiB, is an error.
StatusOr<std::map<std::string, std::string>> PinnedMemoryLimits(const MpsConfig& mps,
                                                                const std::vector<std::string>& uuids);

}  // namespace gpunode::dra

#endif  // GPUNODE_DRA_CLAIM_CONFIG_H_
