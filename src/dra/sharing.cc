#include "src/dra/sharing.h"

#include <openssl/evp.h>
#include <unistd.h>

#include <cerrno>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "src/base/subprocess.h"
#include "src/base/terminal.h"
#include "src/devices/mps.h"

namespace gpunode::dra {
namespace {

constexpr size_t kMaxSmiOutput = 64 * 1024;

std::string JoinPath(absl::string_view a, absl::string_view b) {
  if (a == "/" || a.empty()) return absl::StrCat("/", absl::StripPrefix(b, "/"));
  return absl::StrCat(absl::StripSuffix(a, "/"), "/", absl::StripPrefix(b, "/"));
}

bool IsMig(absl::string_view uuid) { return absl::StartsWith(uuid, "MIG-"); }

// What a program printed, for a message: one line per line, cut to the end that says why.
std::string Printed(const std::string& out) {
  std::string t(absl::StripAsciiWhitespace(out));
  if (t.size() > 600) t = "..." + t.substr(t.size() - 600);
  return TerminalSafe(t);
}

}  // namespace

std::string MpsDaemonId(absl::string_view claim_uid, const std::vector<std::string>& uuids) {
  const std::string joined = absl::StrJoin(uuids, ",");
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(joined.data(), joined.size(), digest, &len, EVP_sha256(), nullptr) != 1 || len < 3) {
    return absl::StrCat(claim_uid, "-00000");  // not reached with a working libcrypto
  }
  static const char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned i = 0; i < 3; ++i) {
    hex.push_back(kHex[digest[i] >> 4]);
    hex.push_back(kHex[digest[i] & 0xf]);
  }
  return absl::StrCat(claim_uid, "-", hex.substr(0, 5));
}

NodeSharingApplier::NodeSharingApplier(NodeSharingOptions options) : options_(std::move(options)) {
  if (options_.driver_root.empty()) options_.driver_root = "/";
}

void NodeSharingApplier::Log(const std::string& message) const {
  if (options_.log) options_.log(message);
}

std::string NodeSharingApplier::MpsRoot(absl::string_view id) const {
  return JoinPath(JoinPath(JoinPath(options_.plugins_dir, options_.driver_name), kMpsControlFilesDirName), id);
}

Status NodeSharingApplier::RunSmi(const std::string& uuid, const std::vector<std::string>& args, bool* gone) {
  if (gone != nullptr) *gone = false;
  const std::string shown = absl::StrCat("nvidia-smi ", absl::StrJoin(args, " "));
  auto fail = [&](absl::StatusCode code, absl::string_view why) {
    return absl::Status(code, absl::StrCat("GPU ", uuid, ": ", shown, ": ", why));
  };
  // The driver root's program and NVML library, as this process reaches them.
  StatusOr<HostFs> driver = options_.node_fs.Sub(options_.driver_root);
  if (!driver.ok()) return fail(absl::StatusCode::kFailedPrecondition, driver.status().message());
  std::string smi = options_.nvidia_smi;
  if (smi.empty()) {
    for (const char* dir : {"/usr/bin", "/bin", "/usr/sbin", "/sbin", "/usr/local/bin", "/usr/local/nvidia/bin"}) {
      const std::string p = absl::StrCat(dir, "/nvidia-smi");
      if (driver->Stat(p).ok()) {
        smi = JoinPath(options_.driver_root, p);
        break;
      }
    }
    if (smi.empty()) {
      return fail(absl::StatusCode::kFailedPrecondition,
                  absl::StrCat("the driver root ", options_.driver_root, " (host root ", options_.node_fs.root(),
                               ") has no nvidia-smi (looked in /usr/bin, /bin, /usr/sbin, /sbin, /usr/local/bin, "
                               "/usr/local/nvidia/bin): the driver's utilities are needed for time-slicing"));
    }
  }
  StatusOr<std::string> local = options_.node_fs.LocalPath(smi);
  if (!local.ok() || ::access(local->c_str(), X_OK) != 0) {
    return fail(absl::StatusCode::kFailedPrecondition,
                absl::StrCat(smi, " (host root ", options_.node_fs.root(), "): not an executable file"));
  }
  std::string nvml;
  for (const char* dir : {"/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib/aarch64-linux-gnu", "/usr/lib",
                          "/lib/x86_64-linux-gnu", "/lib64", "/lib"}) {
    const std::string p = absl::StrCat(dir, "/libnvidia-ml.so.1");
    if (driver->Stat(p).ok()) {
      if (auto l = options_.node_fs.LocalPath(JoinPath(options_.driver_root, p)); l.ok()) nvml = *l;
      break;
    }
  }
  SubprocessOptions o;
  o.argv = {*local};
  o.argv.insert(o.argv.end(), args.begin(), args.end());
  // Our environment with LD_PRELOAD = the driver's libnvidia-ml.so.1 before any given (NVIDIA's).
  std::vector<std::string> env;
  std::string preload = nvml;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    absl::string_view v(*e);
    if (absl::ConsumePrefix(&v, "LD_PRELOAD=")) {
      if (!v.empty()) preload = preload.empty() ? std::string(v) : absl::StrCat(preload, ":", v);
      continue;
    }
    env.emplace_back(*e);
  }
  if (!preload.empty()) env.push_back(absl::StrCat("LD_PRELOAD=", preload));
  o.env = std::move(env);
  o.merge_output = true;
  o.timeout = options_.command_timeout;
  o.max_output = kMaxSmiOutput;
  StatusOr<SubprocessResult> r = RunSubprocess(o);
  if (!r.ok()) return fail(absl::StatusCode::kUnavailable, r.status().message());
  if (r->timed_out) {
    return fail(absl::StatusCode::kDeadlineExceeded,
                absl::StrCat("no answer within ", options_.command_timeout.count(), " ms (killed)"));
  }
  if (r->exit_code != 0) {
    if (gone != nullptr) *gone = r->exit_code == 6 || r->exit_code == 15;
    const std::string out = Printed(r->out);
    return fail(absl::StatusCode::kFailedPrecondition,
                absl::StrCat(r->exit_code < 0 ? absl::StrCat("killed by signal ", r->term_signal)
                                              : absl::StrCat("exit ", r->exit_code),
                             out.empty() ? "" : ": ", out));
  }
  return absl::OkStatus();
}

Status NodeSharingApplier::SetTimeSlice(const std::vector<std::string>& uuids, unsigned slice, bool reverting) {
  Status first;
  for (const std::string& uuid : uuids) {
    bool gone = false;
    Status s = RunSmi(uuid, {"-i", uuid, "-c", "DEFAULT"}, &gone);
    if (s.ok()) s = RunSmi(uuid, {"compute-policy", "-i", uuid, "--set-timeslice", std::to_string(slice)}, &gone);
    if (s.ok()) continue;
    if (reverting && gone) {
      Log(absl::StrCat("time slice of GPU ", uuid, " not reset: the GPU is gone (", s.message(), ")"));
      continue;
    }
    if (!reverting) return s;
    if (first.ok()) first = s;  // reverting: the other GPUs still
  }
  return first;
}

StatusOr<cdi::ContainerEdits> NodeSharingApplier::Apply(absl::string_view claim_uid, const SharingRecord& record) {
  if (!record.config.sharing) return cdi::ContainerEdits{};
  const Sharing& sharing = *record.config.sharing;
  if (sharing.strategy == SharingStrategy::kTimeSlicing) {
    if (!sharing.interval) return cdi::ContainerEdits{};  // a MigDeviceConfig's: nothing to set (NVIDIA's)
    for (size_t i = 0; i < record.uuids.size(); ++i) {
      if (IsMig(record.uuids[i])) {
        return absl::InvalidArgumentError(absl::StrCat(
            "time-slicing settings cannot be applied to MIG device ", i < record.devices.size() ? record.devices[i] : "",
            " (", record.uuids[i], "): a MIG device has no time slice of its own"));
      }
    }
    const unsigned slice = static_cast<unsigned>(*sharing.interval);
    if (Status s = SetTimeSlice(record.uuids, slice, false); !s.ok()) {
      (void)SetTimeSlice(record.uuids, 0, true);  // what was set goes back
      return s;
    }
    Log(absl::StrCat("claim ", claim_uid, ": time slice ", TimeSliceIntervalName(*sharing.interval), " (", slice,
                     ") on ", absl::StrJoin(record.uuids, ",")));
    return cdi::ContainerEdits{};
  }
  return StartMps(claim_uid, record);
}

Status NodeSharingApplier::Revert(absl::string_view claim_uid, const SharingRecord& record) {
  if (!record.config.sharing) return absl::OkStatus();
  const Sharing& sharing = *record.config.sharing;
  if (sharing.strategy == SharingStrategy::kTimeSlicing) {
    if (!sharing.interval) return absl::OkStatus();
    std::vector<std::string> gpus;
    for (const std::string& u : record.uuids) {
      if (!IsMig(u)) gpus.push_back(u);
    }
    GPUNODE_RETURN_IF_ERROR(SetTimeSlice(gpus, 0, true));
    Log(absl::StrCat("claim ", claim_uid, ": time slice Default (0) again on ", absl::StrJoin(gpus, ",")));
    return absl::OkStatus();
  }
  return StopMps(claim_uid, record);
}

StatusOr<cdi::ContainerEdits> NodeSharingApplier::StartMps(absl::string_view claim_uid, const SharingRecord& record) {
  if (options_.mps == nullptr) {
    return absl::FailedPreconditionError("MPS sharing: this gpunode runs no MPS manager for DRA claims");
  }
  if (record.uuids.empty()) return absl::InvalidArgumentError("MPS sharing: no devices");
  const std::string id = MpsDaemonId(claim_uid, record.uuids);
  const std::string root = MpsRoot(id);
  devices::MpsDaemonSpec spec;
  spec.id = id;
  spec.resource = absl::StrCat("claim ", claim_uid);
  spec.gpu_uuids = record.uuids;
  spec.replicas = 1;
  spec.active_thread_percentage.reset();
  const MpsConfig& mps = record.config.sharing->mps ? *record.config.sharing->mps : MpsConfig{};
  if (mps.default_active_thread_percentage) {
    spec.active_thread_percentage = static_cast<int>(*mps.default_active_thread_percentage);
  }
  for (const std::string& u : record.uuids) {
    auto it = record.pinned_memory_limits.find(u);
    spec.pinned_mem_limits.push_back(it == record.pinned_memory_limits.end() ? "" : it->second);
  }
  spec.pipe_dir = JoinPath(root, "pipe");
  spec.shm_dir = JoinPath(root, "shm");
  spec.log_dir = JoinPath(root, "log");
  for (const std::string& dir : {spec.pipe_dir, spec.shm_dir, spec.log_dir}) {
    GPUNODE_RETURN_IF_ERROR(Annotate(options_.node_fs.MakeDirs(dir), "MPS sharing"));
  }
  if (Status s = options_.mps->Ensure(spec, options_.driver_root); !s.ok()) {
    (void)StopMps(claim_uid, record);
    return s;
  }
  cdi::ContainerEdits edits;
  edits.env.push_back(absl::StrCat("CUDA_MPS_PIPE_DIRECTORY=", kMpsContainerPipeDir));
  edits.mounts.push_back({spec.shm_dir, kMpsContainerShmDir, {"rw", "nosuid", "nodev", "bind"}, ""});
  edits.mounts.push_back({spec.pipe_dir, kMpsContainerPipeDir, {"rw", "nosuid", "nodev", "bind"}, ""});
  return edits;
}

Status NodeSharingApplier::StopMps(absl::string_view claim_uid, const SharingRecord& record) {
  if (record.uuids.empty()) return absl::OkStatus();
  const std::string id = MpsDaemonId(claim_uid, record.uuids);
  if (options_.mps != nullptr) GPUNODE_RETURN_IF_ERROR(options_.mps->Remove(id));
  // The id's folder, as NVIDIA removes it: <id>/{pipe,shm,log} and what is in them (files only,
  // never through a symlink: HostFs resolves inside the host root).
  const std::string root = MpsRoot(id);
  if (!options_.node_fs.Exists(root)) return absl::OkStatus();
  for (const char* sub : {"pipe", "shm", "log"}) {
    const std::string dir = JoinPath(root, sub);
    if (auto entries = options_.node_fs.ListDir(dir); entries.ok()) {
      for (const std::string& e : *entries) {
        const std::string p = JoinPath(dir, e);
        auto info = options_.node_fs.Stat(p);
        if (info.ok() && info->type != FileType::kDirectory) GPUNODE_RETURN_IF_ERROR(options_.node_fs.RemoveFile(p));
      }
    }
    if (auto local = options_.node_fs.LocalPath(dir, false); local.ok() && ::rmdir(local->c_str()) != 0 &&
                                                             errno != ENOENT) {
      return ErrnoToStatus(errno, "rmdir", dir);
    }
  }
  if (auto local = options_.node_fs.LocalPath(root, false); local.ok() && ::rmdir(local->c_str()) != 0 &&
                                                            errno != ENOENT) {
    return ErrnoToStatus(errno, "rmdir", root);
  }
  return absl::OkStatus();
}

}  // namespace gpunode::dra
