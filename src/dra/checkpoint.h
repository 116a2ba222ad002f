// The DRA driver's checkpoint: the claims this node has prepared, so that a prepare repeated by the
// kubelet (after an error or a restart of either side) gets the same answer without reading the
// claim again, and an unprepare after a restart knows what to undo.
//
// One JSON file, replaced atomically (HostFs::WriteFileAtomically, mode 0600):
//
//   {"kind": "GpunodeDraCheckpoint", "version": 1, "checksum": "fnv1a64:<16 hex digits>",
//    "data": {"bootId": "...", "claims": {"<claim uid>": {"namespace": "...", "name": "...",
//      "cdiSpec": "/var/run/cdi/k8s.gpu.nvidia.com-claim_<uid>.yaml",
//      "devices": [{"requests": [...], "pool": "...", "device": "gpu-0", "cdiDeviceIds": [...],
//                   "shareId": "..."}],
//      "sharing": [{"devices": ["gpu-0"], "uuids": ["GPU-..."], "config": {<NVIDIA's GpuConfig>},
//                   "pinnedMemoryLimits": {"GPU-...": "1024M"}, "applied": false}],
//      "exclusiveDevices": ["gpu-0"]}}}}
//
// The checksum is over `data` as written (compact, keys sorted): a file whose data does not match it,
// that is not JSON, or whose fields have the wrong types is reported (DATA_LOSS / INVALID_ARGUMENT,
// naming the file and the field), never trusted. A version this gpunode does not know is
// FAILED_PRECONDITION. The checkpoint of NVIDIA's driver (checkpoint.json beside it) is a different
// file in a different format; neither reads the other's.
#ifndef GPUNODE_DRA_CHECKPOINT_H_
#define GPUNODE_DRA_CHECKPOINT_H_

#include <map>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "src/base/host_fs.h"
#include "src/base/status.h"
#include "src/dra/claim_config.h"
#include "src/dra/claim_preparer.h"

namespace gpunode::dra {

inline constexpr int kCheckpointVersion = 1;
inline constexpr char kCheckpointKind[] = "GpunodeDraCheckpoint";
// Where the kubelet plugin keeps it by default: its own folder of the kubelet's plugins dir.
inline constexpr char kDefaultCheckpointPath[] = "/var/lib/kubelet/plugins/gpu.nvidia.com/gpunode-checkpoint.json";
inline constexpr size_t kMaxCheckpointBytes = size_t{64} << 20;

// A sharing config of a claim and the devices it covers.
struct SharingRecord {
  std::vector<std::string> devices;  // DRA device names
  std::vector<std::string> uuids;    // their UUIDs, in the same order
  DeviceConfig config;               // normalized (defaults filled in); has sharing
  std::map<std::string, std::string> pinned_memory_limits;  // MPS: UUID -> "<MiB>M"
  // A SharingApplier set it up (and unprepare must undo it); false: validated and recorded only.
  bool applied = false;
  bool operator==(const SharingRecord&) const = default;
};

struct PreparedClaim {
  std::string ns;
  std::string name;
  std::vector<PreparedDevice> devices;
  std::string cdi_spec;  // host path of the claim's CDI spec file ("" when it has no device of ours)
  std::vector<SharingRecord> sharing;
  // Devices the claim holds alone (not for admin access, not a share): no other claim may get them.
  std::vector<std::string> exclusive_devices;
};

struct Checkpoint {
  std::string boot_id;  // the node's boot when written ("" when unknown)
  std::map<std::string, PreparedClaim> claims;  // by claim UID
};

bool SameDevices(const std::vector<PreparedDevice>& a, const std::vector<PreparedDevice>& b);

// The file's text (see the header comment).
std::string RenderCheckpoint(const Checkpoint& checkpoint);
// Parses and verifies a checkpoint; `origin` (the path) prefixes every error.
StatusOr<Checkpoint> ParseCheckpoint(absl::string_view text, absl::string_view origin);

// Reads the checkpoint at `host_path`; a missing file is an empty checkpoint.
StatusOr<Checkpoint> LoadCheckpoint(const HostFs& fs, absl::string_view host_path);
// Writes it atomically (mode 0600), creating its folder.
Status SaveCheckpoint(const HostFs& fs, absl::string_view host_path, const Checkpoint& checkpoint);

}  // namespace gpunode::dra

#endif  // GPUNODE_DRA_CHECKPOINT_H_
