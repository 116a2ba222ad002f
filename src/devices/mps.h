// CUDA MPS sharing (sharing.mps): the per-resource MPS control daemons and the facts Allocate
// needs about them.
//
// Layout below the MPS root on the host (NVIDIA's, cmd/mps-control-daemon/mps/root.go):
//   <mpsRoot>/<resource>/pipe   CUDA_MPS_PIPE_DIRECTORY of the daemon (its `control` pipe and
//                               nvidia-cuda-mps-control.pid); mounted into containers at
//                               /mps/<resource>/pipe
//   <mpsRoot>/<resource>/log    CUDA_MPS_LOG_DIRECTORY (control.log, server.log)
//   <mpsRoot>/shm               the daemon's /dev/shm, mounted into containers at /dev/shm
//
// MpsManager runs one `nvidia-cuda-mps-control -d` of the driver per MPS-shared resource (only
// nvidia.com/gpu or nvidia.com/gpu.shared can be: MPS does not share MIG devices), with
// CUDA_VISIBLE_DEVICES = the UUIDs of its GPUs, then sets through the control pipe what NVIDIA's
// mps-control-daemon sets: `set_default_device_pinned_mem_limit <ordinal> <memory/replicas>M` per
// GPU and `set_default_active_thread_percentage <100/replicas>`. It never changes a GPU's compute
// mode or any other GPU setting (NVIDIA's daemon switches the GPUs to EXCLUSIVE_PROCESS and back
// to DEFAULT on stop, losing what the admin had set).
//
// How the daemon is started: `nvidia-cuda-mps-control -f` (the daemon in the foreground) as our own
// child, so its pid is the one fork returned and its end is seen by waitpid: never the pid file in
// the pipe folder, which is mounted read-write into every client pod (a pid written there would
// be signalled). Then in the child (before exec, async-signal-safe calls only)
//  - every signal at its default disposition and none blocked (the agent blocks SIGTERM, SIGINT
//    and SIGHUP for its sigwait; a blocked or ignored signal survives exec), a session of its own;
//  - when `isolate_shm`: a private mount namespace (unshare CLONE_NEWNS, mounts made private)
//    with <mpsRoot>/shm bind-mounted over /dev/shm, so the MPS server and its clients share that
//    folder and not the host's /dev/shm (what NVIDIA does with its daemon pod's /dev/shm mount);
//  - when the host root is not "/" (gpunode in a container, the host at --host-root): chroot into
//    the host root, so the driver's program runs with the host's loader, libc and driver
//    libraries, sees the host's /dev/nvidia* and the host paths of its pipe and log directories;
//    the MPS server it spawns stays in that root too. A driver root other than "/" (a driver
//    container's /run/nvidia/driver) is reached inside it: the program at <driver root>/usr/bin
//    with LD_LIBRARY_PATH at the driver root's library folders;
//  - stdin from /dev/null, stdout and stderr to <log>/daemon.out (or captured, for a client
//    command), every other descriptor closed; execve with a clean environment (PATH,
//    CUDA_VISIBLE_DEVICES, CUDA_MPS_PIPE_DIRECTORY, CUDA_MPS_LOG_DIRECTORY). A step that fails
//    comes back as an error naming it.
// The daemon is ready when its control pipe answers; one that exits first is an error with the
// end of its output. The client commands (`echo CMD | nvidia-cuda-mps-control`) are started the
// same way, each bounded by `command_timeout` (a daemon that hangs cannot hang us: the client is
// killed).
//
// Health: the daemon has not exited (waitpid) and answers `get_default_active_thread_percentage`
// (NVIDIA's AssertHealthy). An unhealthy daemon is killed if it still runs, its pipe files are
// removed and it is started again, after a backoff that doubles from `min_backoff` to
// `max_backoff` and resets once a start stays healthy. Stop sends `quit`, waits for the process to
// end (SIGTERM, then SIGKILL to its session, when it does not), and removes the pipe directory's
// files; the log directory is kept.
#ifndef GPUNODE_DEVICES_MPS_H_
#define GPUNODE_DEVICES_MPS_H_

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "src/base/backoff.h"
#include "src/base/clock.h"
#include "src/base/host_fs.h"
#include "src/base/status.h"
#include "src/devices/config.h"
#include "src/devices/devices.h"

namespace gpunode::devices {

inline constexpr char kMpsControlProgram[] = "nvidia-cuda-mps-control";
inline constexpr char kMpsContainerRoot[] = "/mps";
inline constexpr char kMpsPidFile[] = "nvidia-cuda-mps-control.pid";  // the daemon's; never read
inline constexpr char kMpsDaemonOutput[] = "daemon.out";  // in the log folder: the daemon's stdout and stderr

// Host paths of the layout above (root without a trailing '/').
std::string MpsPipeDir(absl::string_view mps_root, absl::string_view resource);
std::string MpsLogDir(absl::string_view mps_root, absl::string_view resource);
std::string MpsShmDir(absl::string_view mps_root);
// "/mps/<resource>/pipe": where a container finds the pipe directory.
std::string MpsContainerPipeDir(absl::string_view resource);

// 100 / replicas, as NVIDIA computes it (integer division).
int MpsActiveThreadPercentage(int replicas);
// "71680M": the GPU's memory / replicas in MiB (NVIDIA's rounding down); nullopt when the memory
// is unknown.
std::optional<std::string> MpsPinnedMemLimit(const PluginDevice& device, int replicas);
// MPS clients per GPU: 48 from Volta (compute capability 7.0) on, 16 before; unknown: 48.
int MpsMaxClients(const PluginDevice& device);

struct MpsExecSpec;  // how a program of the driver is started (mps_exec.h)

// One control daemon: what it runs for and what it is told.
struct MpsDaemonSpec {
  // The daemon's key in MpsManager: the resource for the device plugin's daemons
  // ("nvidia.com/gpu"), "<claim uid>-<hash>" for a DRA claim's (src/dra/sharing.h).
  std::string id;
  std::string resource;                        // what it serves, for messages: "nvidia.com/gpu", "claim <uid>"
  std::vector<std::string> gpu_uuids;          // CUDA_VISIBLE_DEVICES, in this order (MIG UUIDs too)
  int replicas = 0;
  std::optional<int> active_thread_percentage = 100;  // nullopt: not set (MPS's default, 100)
  std::vector<std::string> pinned_mem_limits;  // per ordinal of gpu_uuids; "" when unknown or not set
  std::string pipe_dir;                        // host paths
  std::string log_dir;
  std::string shm_dir;
  bool operator==(const MpsDaemonSpec&) const = default;
};

// The daemons a configuration needs (none unless sharing.mps applies to a resource): one per
// MPS-shared resource of `resources` (from BuildResources). FailedPrecondition, naming the device,
// for MIG devices ("sharing using MPS is not supported for MIG devices", NVIDIA's words) and for
// more replicas than MPS has clients on a GPU.
StatusOr<std::vector<MpsDaemonSpec>> PlanMpsDaemons(const PluginConfig& config,
                                                    const std::vector<Resource>& resources);

struct MpsOptions {
  // Host path of nvidia-cuda-mps-control; empty: looked up in the driver root's PATH folders and
  // /usr/local/nvidia/bin (the GPU Operator's and GPU clouds' layout).
  std::string control_program;
  // Chroot into the host root before exec: kAuto does when the host root is not "/". kNever is for
  // a host root that is a fixture tree whose program runs as is (tests as non-root).
  enum class Chroot { kAuto, kAlways, kNever };
  Chroot chroot = Chroot::kAuto;
  // Give the daemon <mpsRoot>/shm as its /dev/shm (needs CAP_SYS_ADMIN, as the plugin has).
  bool isolate_shm = true;
  // Mount a tmpfs (half of MemTotal, as NVIDIA's mount-shm) on <mpsRoot>/shm when it is not a
  // mount point yet; when that is not permitted the folder is used as it is (logged). Off by
  // default: the mount is made in gpunode's mount namespace, and containers (whose kubelet mounts
  // the host's <mpsRoot>/shm) see it only when gpunode runs on the host or its host mount has
  // Bidirectional propagation; the plain folder (on /run, a tmpfs on systemd hosts) works anywhere.
  bool mount_shm_tmpfs = false;
  std::chrono::milliseconds command_timeout{std::chrono::seconds(10)};
  std::chrono::milliseconds start_timeout{std::chrono::seconds(20)};   // `-d` until it returns
  std::chrono::milliseconds quit_timeout{std::chrono::seconds(10)};    // `quit` until the process ends
  std::chrono::milliseconds health_interval{std::chrono::seconds(5)};
  std::chrono::milliseconds min_backoff{std::chrono::seconds(1)};
  std::chrono::milliseconds max_backoff{std::chrono::minutes(2)};
  // The health checks' interval and the restart backoff run on it (tests: a FakeClock); the
  // waits for the daemon's own process (start_timeout, quit_timeout) stay on the steady clock.
  Clock* clock = &SystemClock();
};

struct MpsDaemonStatus {
  MpsDaemonSpec spec;
  pid_t pid = 0;        // our child's, from the fork; 0 when not started
  bool healthy = false;
  int starts = 0;       // successful starts, restarts included
  std::string last_error;
};

// Owns the MPS control daemons of one node. Thread-safe; operations take turns (one mutex), so
// Daemons() may wait for a start in progress.
class MpsManager {
 public:
  using Logger = std::function<void(const std::string&)>;

  // `host`: the host root (--host-root). Every file it touches is a host path through `host`.
  MpsManager(HostFs host, MpsOptions options, Logger log);
  ~MpsManager();  // Stop()
  MpsManager(const MpsManager&) = delete;
  MpsManager& operator=(const MpsManager&) = delete;

  // Starts the health monitor (restarts with backoff). Daemons start with Apply.
  void Start();
  // Makes the running daemons those `config` and `resources` need: unchanged daemons are kept,
  // changed or no longer needed ones quit, new ones started and configured. A daemon that fails
  // to start is an error naming it; it is retried by the monitor with backoff (the others stay).
  // A config that cannot be planned (PlanMpsDaemons) changes nothing. Only the daemons Apply
  // started are its to quit: those of Ensure stay.
  Status Apply(const PluginConfig& config, const std::vector<Resource>& resources);
  // The spec-level entry (a DRA claim's daemon): starts and configures the daemon `spec`, keyed by
  // spec.id, with the driver's nvidia-cuda-mps-control of `driver_root` (a host path); a daemon
  // of that id that runs with the same spec is kept, one with another spec is replaced. A start
  // that fails is an error naming the daemon, and nothing of it stays (no retry: the caller
  // asks again). Once started it is watched and restarted as Apply's daemons are.
  Status Ensure(const MpsDaemonSpec& spec, const std::string& driver_root);
  // Quits the daemon `id` and removes its pipe files; none of that id: OK.
  Status Remove(const std::string& id);
  // Quits every daemon and stops the monitor. Idempotent.
  void Stop();

  // One health pass now (what the monitor runs every health_interval): restarts the unhealthy
  // daemons whose backoff has passed. OK when every daemon is healthy afterwards.
  Status CheckNow();
  // OK when every daemon was healthy at its last check; else Unavailable naming them.
  Status Healthy() const;
  std::vector<MpsDaemonStatus> Daemons() const;

  // Sends one command through the daemon's control pipe (as `echo CMD | nvidia-cuda-mps-control`)
  // and returns what it printed. `id`: the daemon's (the resource, for Apply's). For tests and
  // diagnostics.
  StatusOr<std::string> Command(const std::string& id, const std::string& command);

 private:
  struct Daemon {
    MpsDaemonStatus status;
    std::string program;  // host path
    std::string driver_root = "/";  // host path
    bool from_config = false;  // started by Apply (and quit by it)
    Clock::TimePoint next_attempt{};
    Backoff backoff;  // min_backoff doubling to max_backoff (set by Apply)
    bool running = false;
    bool reaped = false;     // status.pid has been waited for (it is no longer ours to signal)
    std::string exit_text;   // how it ended ("exited 1", "killed by signal 9")
  };

  Status StartDaemon(Daemon* d) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `try_quit`: send `quit` first (not to a daemon whose pipe does not answer).
  void StopDaemon(Daemon* d, absl::string_view why, bool try_quit = true) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Status CheckDaemon(Daemon* d, bool* answers) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool Alive(Daemon* d) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Waits for the daemon's process (blocking or not); true when it has ended (reaped now or before).
  bool Reap(Daemon* d, bool block) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string OutputTail(const Daemon& d) const;
  // How to run the program for `d` with `args` (chroot, private /dev/shm, environment).
  MpsExecSpec SpecFor(const Daemon& d, std::vector<std::string> args, Status* why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `timeout` 0: options.command_timeout.
  StatusOr<std::string> RunControl(const Daemon& d, const std::string& command,
                                   std::chrono::milliseconds timeout = std::chrono::milliseconds(0))
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  StatusOr<std::string> FindControlProgram(const std::string& driver_root) const;
  void PrepareShm(const std::string& shm_dir);
  void CleanPipeDir(const std::string& pipe_dir);
  void Monitor(std::stop_token stop);

  HostFs host_;
  MpsOptions options_;
  Logger log_;

  mutable absl::Mutex mu_;
  std::map<std::string, Daemon> daemons_ ABSL_GUARDED_BY(mu_);  // by spec id

  Clock& clock_;
  // Guards monitor_ (its start and its stop). The monitor waits on clock_ with the thread's
  // stop_token, so Stop ends its wait at once.
  std::mutex monitor_mu_;
  std::jthread monitor_;
};

}  // namespace gpunode::devices

#endif  // GPUNODE_DEVICES_MPS_H_
