// gpunode's SharingApplier (cdi_preparer.h): a claim's TimeSlicing and MPS settings carried out on
// its devices, as NVIDIA's DRA driver does (cmd/gpu-kubelet-plugin/sharing.go, nvlib.go,
// device_state.go applySharingConfig / unprepareDevices), with gpunode's differences named.
//
// TimeSlicing{interval} (GpuConfig only; a MIG device has no time slice of its own): for each GPU
// of the config, the driver's nvidia-smi — as NVIDIA runs it, the driver root's usr/bin/nvidia-smi
// (or another of its PATH folders) with LD_PRELOAD = the driver root's libnvidia-ml.so.1 and our
// environment otherwise — twice:
//     nvidia-smi -i <uuid> -c DEFAULT
//     nvidia-smi compute-policy -i <uuid> --set-timeslice <0..3>      (Default, Short, Medium, Long)
// NVML has no public call for the time slice: the driver's program is the boundary. Each run is
// bounded (`command_timeout`, 64 KiB of output); a missing nvidia-smi, a run that fails or exits
// non-zero is an error naming the GPU, the command and what it printed. Revert sets the slice back
// to Default (0), as NVIDIA's driver does at unprepare (test/peers/dra_test.sh compares them). A
// GPU that is gone (nvidia-smi: no such device, exit 6, or GPU lost, 15) has nothing to revert.
// A time slice for a MIG device is refused (INVALID_ARGUMENT), as NVIDIA's API refuses it.
//
// MPS{defaultActiveThreadPercentage, defaultPinnedDeviceMemoryLimit,
// defaultPerDevicePinnedMemoryLimit}: one MPS control daemon per claim's config, a child of this
// process through src/devices' MpsManager (NVIDIA: a Deployment per claim), with NVIDIA's id and
// folders:
//     id      <claim uid>-<first 5 hex digits of sha256(the UUIDs joined by ",")>
//     folders <plugins dir>/<driver>/mps/<id>/{pipe,shm,log}       (host paths)
// the daemon started with CUDA_VISIBLE_DEVICES = the config's devices (GPU or MIG UUIDs) and told
// `set_default_active_thread_percentage <n>` (only when given, as NVIDIA) and
// `set_default_device_pinned_mem_limit <ordinal> <MiB>M` per device (NVIDIA's Normalize:
// SharingRecord::pinned_memory_limits). The container edits, NVIDIA's: env
// CUDA_MPS_PIPE_DIRECTORY=/tmp/nvidia-mps; mounts <pipe> -> /tmp/nvidia-mps and <shm> -> /dev/shm
// (rw, nosuid, nodev, bind). Revert quits the daemon and removes the id's folder.
// Compute mode: NVIDIA switches an MPS claim's full GPUs to EXCLUSIVE_PROCESS and never back (a
// later claim of the GPU finds it so). gpunode leaves the compute mode as it is, as the device
// plugin's MpsManager does: the claim holds its devices alone (the preparer refuses them to other
// claims), and its containers reach the GPU through the daemon's pipe.
//
// After a restart of the plugin, CdiPreparer asks Apply again for the checkpoint's applied
// records (cdi_preparer.h): the MPS daemons — children of the plugin, quit when it stops — start
// again; the time slices, kept by the driver, are set again to the same values.
#ifndef GPUNODE_DRA_SHARING_H_
#define GPUNODE_DRA_SHARING_H_

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "src/base/host_fs.h"
#include "src/base/status.h"
#include "src/dra/cdi_preparer.h"

namespace gpunode::devices {
class MpsManager;
}

namespace gpunode::dra {

inline constexpr char kMpsControlFilesDirName[] = "mps";     // NVIDIA's MpsControlFilesDirName
inline constexpr char kMpsContainerPipeDir[] = "/tmp/nvidia-mps";
inline constexpr char kMpsContainerShmDir[] = "/dev/shm";

// "<claim uid>-<5 hex>": NVIDIA's GetMpsControlDaemonID.
std::string MpsDaemonId(absl::string_view claim_uid, const std::vector<std::string>& uuids);

struct NodeSharingOptions {
  // The node's files: the host (the agent: --host-root) through which the driver root's
  // nvidia-smi and libnvidia-ml.so.1 are found and run, and the MPS folders made.
  HostFs node_fs = HostFs::Local();
  std::string driver_root = "/";  // host path
  // Host paths: <plugins dir>/<driver>/mps/<id>/...
  std::string plugins_dir = "/var/lib/kubelet/plugins";
  std::string driver_name = "gpu.nvidia.com";
  // nvidia-smi's host path; "": looked up in the driver root (usr/bin, bin, usr/sbin, sbin,
  // usr/local/bin, usr/local/nvidia/bin).
  std::string nvidia_smi;
  std::chrono::milliseconds command_timeout{std::chrono::seconds(30)};
  devices::MpsManager* mps = nullptr;  // required for MPS claims; outlives the applier
  std::function<void(const std::string&)> log;  // optional
};

class NodeSharingApplier final : public SharingApplier {
 public:
  explicit NodeSharingApplier(NodeSharingOptions options);

  StatusOr<cdi::ContainerEdits> Apply(absl::string_view claim_uid, const SharingRecord& record) override;
  Status Revert(absl::string_view claim_uid, const SharingRecord& record) override;

  // Host paths of a claim's MPS folders.
  std::string MpsRoot(absl::string_view id) const;

 private:
  // Runs the driver's nvidia-smi with `args` for GPU `uuid`. `gone`: set when nvidia-smi says the
  // GPU does not exist or is lost (the error is still returned).
  Status RunSmi(const std::string& uuid, const std::vector<std::string>& args, bool* gone = nullptr);
  Status SetTimeSlice(const std::vector<std::string>& uuids, unsigned slice, bool reverting);
  StatusOr<cdi::ContainerEdits> StartMps(absl::string_view claim_uid, const SharingRecord& record);
  Status StopMps(absl::string_view claim_uid, const SharingRecord& record);
  void Log(const std::string& message) const;

  NodeSharingOptions options_;
};

}  // namespace gpunode::dra

#endif  // GPUNODE_DRA_SHARING_H_
