// The ClaimPreparer of gpunode's DRA driver: each claim becomes one transient CDI spec file with
// exactly its devices, named as NVIDIA's DRA driver names them (cmd/gpu-kubelet-plugin/cdi.go), so
// the container runtime sees the same thing from either driver:
//
//   file    <cdi root>/k8s.gpu.nvidia.com-claim_<claim uid>.yaml   (CDI's transient spec name)
//   kind    k8s.gpu.nvidia.com/claim                                ("k8s." + the driver name)
//   device  <claim uid>-<device>, e.g. k8s.gpu.nvidia.com/claim=6f1c...-gpu-0
//
// Prepare, per claim: GET the ResourceClaim (resource.k8s.io/v1) through the kube client; check
// its metadata.uid is the one the kubelet named; take the allocation's devices of our driver (all
// in this node's pool, each a device of this node), the opaque configs for them
// (claim_allocation.h, claim_config.h); write the spec — each device's own edits (its
// /dev/nvidiaN, a MIG device's capability nodes) and, at spec level, the node's common edits
// (control nodes, driver libraries, hooks), both from src/container's generator — and record the
// claim in the checkpoint (checkpoint.h). The answer per device: the request, the pool, the device
// and its CDI name.
//
// Idempotent both ways: a claim in the checkpoint whose spec file exists is answered from the
// checkpoint without asking the API server; unprepare removes the spec file and the entry, and a
// claim it does not know is fine (its spec file name is removed anyway, in case a prepare died
// between writing it and the checkpoint). A device held by another prepared claim (not for admin
// access, not a share) is refused, as NVIDIA does. After a reboot (another boot id) the checkpoint's
// claims are forgotten and their spec files removed: the kubelet prepares them again.
//
// Sharing (TimeSlicing, MPS) is validated and recorded in the checkpoint, and carried out by an
// injected SharingApplier (gpunode's: NodeSharingApplier, sharing.h — the driver's nvidia-smi for
// time slices, an MPS control daemon per claim); undone at unprepare and when the prepare fails
// after it. At Create, the checkpoint's applied records are applied again (an MPS daemon, a child
// of the plugin, is gone after a restart); one that fails is a start note, and its claim's
// containers find what is left. Without an applier, a claim with sharing settings gets its
// devices without them (the GPU's current time slice, no MPS daemon) and the checkpoint says
// `applied: false`.
#ifndef GPUNODE_DRA_CDI_PREPARER_H_
#define GPUNODE_DRA_CDI_PREPARER_H_

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "src/base/host_fs.h"
#include "src/base/status.h"
#include "src/container/cdi.h"
#include "src/container/cdi_spec.h"
#include "src/dra/checkpoint.h"
#include "src/dra/claim_allocation.h"
#include "src/dra/claim_preparer.h"
#include "src/dra/device_model.h"
#include "src/kube/client.h"
#include "src/node/inventory.h"

namespace gpunode::dra {

inline constexpr char kDefaultCdiRoot[] = "/var/run/cdi";
inline constexpr char kCdiClaimClass[] = "claim";
inline constexpr char kDefaultBootIdPath[] = "/proc/sys/kernel/random/boot_id";

// "k8s.gpu.nvidia.com" for the driver gpu.nvidia.com.
std::string CdiVendor(absl::string_view driver);
// "k8s.gpu.nvidia.com-claim_<uid>.yaml".
std::string ClaimSpecFileName(absl::string_view driver, absl::string_view claim_uid);
// "k8s.gpu.nvidia.com/claim=<uid>-gpu-0".
std::string ClaimCdiDeviceId(absl::string_view driver, absl::string_view claim_uid, absl::string_view device);

// Carries out a claim's sharing settings on its devices (gpunode's: sharing.h).
class SharingApplier {
 public:
  virtual ~SharingApplier() = default;
  // Sets up `record` for claim `claim_uid`; returns the container edits each of its devices gets
  // (an MPS daemon's pipe folder and environment), empty when none.
  virtual StatusOr<cdi::ContainerEdits> Apply(absl::string_view claim_uid, const SharingRecord& record) = 0;
  // Undoes Apply (at unprepare, or when the prepare fails later). Must be idempotent.
  virtual Status Revert(absl::string_view claim_uid, const SharingRecord& record) = 0;
};

struct CdiPreparerOptions {
  std::string driver_name = kDefaultDriverName;
  std::string node_name;  // required: this node's pool (the pool NVIDIA and gpunode publish)
  // Host paths, read and written through the HostFs given to Create.
  std::string cdi_root = kDefaultCdiRoot;
  std::string checkpoint_path = kDefaultCheckpointPath;
  std::string boot_id_path = kDefaultBootIdPath;  // unreadable: reboots are not noticed
  container::DiscoverOptions discover;            // the driver root and the dev root
  // The node's files for the driver discovery (device nodes, libraries), when they are read
  // through another root than the spec files and the checkpoint are written (the agent reads the
  // host under --host-root and writes to its mounts). Unset: the HostFs given to Create.
  std::optional<HostFs> node_fs;
  // The CDI spec's hooks: the gpunode binary's absolute path (required unless both are disabled)
  // and the hooks left out ("create-symlinks", "update-ldcache").
  std::string hook_path;
  std::set<std::string> disabled_hooks;
  // This node's devices as the ResourceSlices announce them (DraDevicesOf), asked at each call.
  std::function<std::vector<DraDevice>()> devices;
  // The node's inventory, for the CDI edits; asked at each call, the spec reused while it is the
  // same object.
  std::function<StatusOr<std::shared_ptr<const node::NodeInventory>>()> inventory;
  kube::Client* client = nullptr;     // required; outlives the preparer
  SharingApplier* sharing = nullptr;  // optional (see the header comment); outlives the preparer
  std::chrono::milliseconds get_timeout{10000};  // each GET of a claim
};

class CdiPreparer final : public ClaimPreparer {
 public:
  // Loads the checkpoint (a corrupted one is an error: nothing is guessed) and checks the options.
  static StatusOr<std::unique_ptr<CdiPreparer>> Create(HostFs fs, CdiPreparerOptions options);

  StatusOr<PrepareResults> Prepare(const std::vector<ClaimRef>& claims) override;
  StatusOr<UnprepareResults> Unprepare(const std::vector<ClaimRef>& claims) override;

  // The prepared claims, as checkpointed.
  Checkpoint checkpoint() const;
  // What Create noticed (a reboot, spec files that could not be removed, sharing that could not be
  // applied again).
  const std::vector<std::string>& start_notes() const { return start_notes_; }

 private:
  struct Call;  // what one Prepare call reads once: the devices, the node's CDI spec
  CdiPreparer(HostFs fs, CdiPreparerOptions options) : fs_(std::move(fs)), options_(std::move(options)) {}

  StatusOr<std::vector<PreparedDevice>> PrepareOne(const ClaimRef& claim, Call& call, Checkpoint& next,
                                                   std::vector<std::pair<std::string, PreparedClaim>>& made);
  // The claim's devices, its sharing (applied when there is an applier) and its spec file written.
  StatusOr<PreparedClaim> Build(const ClaimRef& claim, ClaimAllocation& allocation, Call& call,
                                const Checkpoint& next);
  // The node's CDI spec (every device by UUID, the common edits at spec level).
  StatusOr<const container::BuildResult*> NodeSpec(Call& call);
  Status RevertSharing(const std::string& uid, const PreparedClaim& claim);
  Status RemoveSpecFiles(const std::string& uid, const PreparedClaim& claim);
  std::string SpecPath(absl::string_view uid) const;

  HostFs fs_;
  CdiPreparerOptions options_;
  mutable std::mutex mu_;
  Checkpoint checkpoint_;
  std::vector<std::string> start_notes_;
  // The node's CDI spec, built from `spec_inventory_` (kept while the inventory getter returns it).
  std::shared_ptr<const node::NodeInventory> spec_inventory_;
  std::optional<container::BuildResult> spec_;
};

}  // namespace gpunode::dra

#endif  // GPUNODE_DRA_CDI_PREPARER_H_
