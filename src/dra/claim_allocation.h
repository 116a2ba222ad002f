// What a ResourceClaim's allocation asks of this driver, read from the API server's JSON
// (resource.k8s.io/v1): the devices allocated through our driver and the opaque configs for it,
// each device with the config that applies to it, chosen as NVIDIA's DRA driver chooses
// (cmd/gpu-kubelet-plugin/device_state.go, GetOpaqueDeviceConfigs and prepareDevices):
//
//   - configs from the DeviceClass (source FromClass) come before the claim's own (FromClaim), each
//     source in its order; a later config wins over an earlier one, so the claim's override the
//     class's;
//   - a config that names requests applies to the devices allocated for those requests (a request
//     "gpu" also covers its subrequests "gpu/<sub>", as the API documents); a GpuConfig named for a
//     MIG device, or a MigDeviceConfig for a full GPU, is an error;
//   - a config without requests applies to every device of its type (GpuConfig: "gpu",
//     MigDeviceConfig: "mig") and is skipped for the others;
//   - configs of other drivers are skipped; a config that is not opaque is an error.
//
// The claim is untrusted: every field is type-checked, lists are bounded as the API server bounds
// them, and errors name the claim and the field ("ResourceClaim ns/name:
// status.allocation.devices.results[1].device: ...").
#ifndef GPUNODE_DRA_CLAIM_ALLOCATION_H_
#define GPUNODE_DRA_CLAIM_ALLOCATION_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "src/base/status.h"
#include "src/dra/claim_config.h"

namespace gpunode::dra {

// The API server's caps (resource.k8s.io/v1 AllocationResultsMaxSize, the config list's 64 and
// each config's 32 requests).
inline constexpr size_t kMaxAllocationResults = 32;
inline constexpr size_t kMaxAllocationConfigs = 64;
inline constexpr size_t kMaxConfigRequests = 32;

struct AllocationConfig {
  bool from_class = false;            // source FromClass (else FromClaim)
  std::vector<std::string> requests;  // empty: every request
  DeviceConfig config;
  std::string path;                   // "status.allocation.devices.config[2]", for messages
};

// One device allocated through our driver.
struct AllocatedDevice {
  std::string request;  // "gpu" or "gpu/<subrequest>"
  std::string pool;
  std::string device;
  bool admin_access = false;
  std::optional<std::string> share_id;
  std::string path;  // "status.allocation.devices.results[0]"
  int config = -1;   // index into ClaimAllocation::configs (AssignConfigs); -1: none applies
};

struct ClaimAllocation {
  std::string what;  // "ResourceClaim ns/name"
  std::string uid;   // metadata.uid
  bool allocated = false;  // status.allocation present
  std::vector<AllocatedDevice> devices;   // ours, in the claim's order
  std::vector<AllocationConfig> configs;  // ours, lowest precedence first (class's, then claim's)
};

// Reads `claim` (a ResourceClaim object). `what` prefixes every error.
StatusOr<ClaimAllocation> ReadClaimAllocation(const nlohmann::json& claim, std::string what,
                                              absl::string_view driver);

// Chooses each device's config (see the header comment). `type_of` gives a device's type ("gpu",
// "mig", or "" for none known).
Status AssignConfigs(ClaimAllocation& allocation, const std::function<std::string(const std::string&)>& type_of);

}  // namespace gpunode::dra

#endif  // GPUNODE_DRA_CLAIM_ALLOCATION_H_
