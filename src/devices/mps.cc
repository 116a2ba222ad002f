#include "src/devices/mps.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <set>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "src/devices/mps_exec.h"
#include "src/base/backoff.h"
#include "src/node/probe.h"

namespace gpunode::devices {
namespace {

using Steady = std::chrono::steady_clock;  // waits for the real process (start, quit)
using std::chrono::milliseconds;
using mps_exec::ExecResult;
using mps_exec::RunProgram;
using mps_exec::SpawnProgram;
using ExecSpec = MpsExecSpec;

std::string Trimmed(absl::string_view s) { return std::string(absl::StripAsciiWhitespace(s)); }

std::string JoinPath(absl::string_view a, absl::string_view b) {
  if (a == "/" || a.empty()) return absl::StrCat("/", absl::StripPrefix(b, "/"));
  return absl::StrCat(absl::StripSuffix(a, "/"), "/", absl::StripPrefix(b, "/"));
}

}  // namespace

std::string MpsPipeDir(absl::string_view mps_root, absl::string_view resource) {
  return JoinPath(JoinPath(mps_root, resource), "pipe");
}
std::string MpsLogDir(absl::string_view mps_root, absl::string_view resource) {
  return JoinPath(JoinPath(mps_root, resource), "log");
}
std::string MpsShmDir(absl::string_view mps_root) { return JoinPath(mps_root, "shm"); }
std::string MpsContainerPipeDir(absl::string_view resource) {
  return JoinPath(JoinPath(kMpsContainerRoot, resource), "pipe");
}

int MpsActiveThreadPercentage(int replicas) { return 100 / std::max(1, replicas); }

std::optional<std::string> MpsPinnedMemLimit(const PluginDevice& device, int replicas) {
  if (!device.memory_total_bytes || *device.memory_total_bytes == 0) return std::nullopt;
  const uint64_t per = *device.memory_total_bytes / static_cast<uint64_t>(std::max(1, replicas)) / 1024 / 1024;
  return absl::StrCat(per, "M");
}

int MpsMaxClients(const PluginDevice& device) {
  if (device.cc_major && *device.cc_major < 7) return 16;
  return 48;
}

StatusOr<std::vector<MpsDaemonSpec>> PlanMpsDaemons(const PluginConfig& config,
                                                    const std::vector<Resource>& resources) {
  std::vector<MpsDaemonSpec> out;
  if (config.sharing.strategy != SharingStrategy::kMps) return out;
  const std::string root = MpsRootOf(config);
  for (const Resource& r : resources) {
    if (!r.shared) continue;
    MpsDaemonSpec spec;
    spec.id = r.name;
    spec.resource = r.name;
    spec.replicas = r.replicas;
    spec.active_thread_percentage = MpsActiveThreadPercentage(r.replicas);
    spec.pipe_dir = MpsPipeDir(root, r.name);
    spec.log_dir = MpsLogDir(root, r.name);
    spec.shm_dir = MpsShmDir(root);
    for (const PluginDevice& d : r.devices) {
      if (d.mig) {
        return absl::FailedPreconditionError(absl::StrCat(
            "sharing.mps: sharing using MPS is not supported for MIG devices (", r.name, " offers MIG device ",
            d.uuid, "); use sharing.timeSlicing, or disable MIG"));
      }
      if (r.replicas > MpsMaxClients(d)) {
        return absl::FailedPreconditionError(absl::StrCat(
            "sharing.mps: ", r.name, ": ", r.replicas, " replicas exceed the ", MpsMaxClients(d),
            " MPS clients GPU ", d.gpu_uuid, " supports (maximum allowed replicas exceeded)"));
      }
      if (std::find(spec.gpu_uuids.begin(), spec.gpu_uuids.end(), d.gpu_uuid) != spec.gpu_uuids.end()) continue;
      spec.gpu_uuids.push_back(d.gpu_uuid);
      spec.pinned_mem_limits.push_back(MpsPinnedMemLimit(d, r.replicas).value_or(""));
    }
    if (!spec.gpu_uuids.empty()) out.push_back(std::move(spec));
  }
  return out;
}

// ---------------------------------------------------------------------------------------------

MpsManager::MpsManager(HostFs host, MpsOptions options, Logger log)
    : host_(std::move(host)),
      options_(std::move(options)),
      log_(std::move(log)),
      clock_(options_.clock != nullptr ? *options_.clock : SystemClock()) {
  if (!log_) log_ = [](const std::string&) {};
}

MpsManager::~MpsManager() { Stop(); }

void MpsManager::Start() {
  std::lock_guard<std::mutex> l(monitor_mu_);
  if (monitor_.joinable()) return;
  monitor_ = std::jthread([this](std::stop_token stop) { Monitor(stop); });
}

void MpsManager::Stop() {
  std::jthread monitor;
  {
    std::lock_guard<std::mutex> l(monitor_mu_);
    monitor = std::move(monitor_);
  }
  if (monitor.joinable()) {
    monitor.request_stop();  // ends its wait on the clock at once
    monitor.join();
  }
  absl::MutexLock l(&mu_);
  for (auto& [name, d] : daemons_) StopDaemon(&d, "shutdown");
  daemons_.clear();
}

void MpsManager::Monitor(std::stop_token stop) {
  while (clock_.WaitFor(options_.health_interval, stop)) {
    Status ignored = CheckNow();  // logs what it finds
    (void)ignored;
  }
}

StatusOr<std::string> MpsManager::FindControlProgram(const std::string& root) const {
  if (!options_.control_program.empty()) {
    if (!host_.Exists(options_.control_program)) {
      return absl::NotFoundError(absl::StrCat("MPS control daemon ", options_.control_program,
                                              ": no such file below the host root ", host_.root()));
    }
    return options_.control_program;
  }
  const std::string driver_root = root.empty() ? "/" : root;
  auto driver = host_.Sub(driver_root);
  if (driver.ok()) {
    std::string found = node::FindHostProgram(*driver, kMpsControlProgram);
    const std::string nvidia_bin = absl::StrCat("/usr/local/nvidia/bin/", kMpsControlProgram);
    if (found.empty() && driver->Exists(nvidia_bin)) found = nvidia_bin;
    if (!found.empty()) return JoinPath(driver_root, found);
  }
  return absl::NotFoundError(absl::StrCat(
      "MPS sharing needs the driver's ", kMpsControlProgram, ", which is not in the driver root ", driver_root,
      " (host root ", host_.root(), "; looked in /usr/local/sbin, /usr/local/bin, /usr/sbin, /usr/bin, /sbin, /bin, "
      "/usr/local/nvidia/bin): install the driver's compute utilities (e.g. nvidia-compute-utils) or "
      "use sharing.timeSlicing"));
}

void MpsManager::PrepareShm(const std::string& shm_dir) {
  if (Status st = host_.MakeDirs(shm_dir); !st.ok()) {
    log_(absl::StrCat("MPS: ", st.message()));
    return;
  }
  if (!options_.mount_shm_tmpfs) return;
  auto local = host_.LocalPath(shm_dir, true, true);
  if (!local.ok()) return;
  struct stat self{}, parent{};
  const std::string parent_dir = local->substr(0, local->rfind('/'));
  if (::stat(local->c_str(), &self) != 0 || ::stat(parent_dir.empty() ? "/" : parent_dir.c_str(), &parent) != 0) {
    return;
  }
  if (self.st_dev != parent.st_dev) return;  // already a mount point
  std::string size = "65536k";
  if (auto meminfo = HostFs::Local().ReadFile("/proc/meminfo"); meminfo.ok()) {
    for (absl::string_view line : absl::StrSplit(*meminfo, '\n')) {
      if (!absl::ConsumePrefix(&line, "MemTotal:")) continue;
      uint64_t kb = 0;
      std::vector<absl::string_view> parts = absl::StrSplit(absl::StripAsciiWhitespace(line), ' ');
      if (!parts.empty() && absl::SimpleAtoi(parts[0], &kb)) size = absl::StrCat(kb / 2, "k");
    }
  }
  const std::string data = absl::StrCat("size=", size, ",mode=1777");
  if (::mount("shm", local->c_str(), "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RELATIME, data.c_str()) != 0) {
    log_(absl::StrCat("MPS: cannot mount a tmpfs on ", shm_dir, " (", std::strerror(errno),
                      "); the MPS daemon and its clients share that folder as it is"));
    return;
  }
  log_(absl::StrCat("MPS: mounted a tmpfs (", size, ") on ", shm_dir));
}

void MpsManager::CleanPipeDir(const std::string& pipe_dir) {
  auto entries = host_.ListDir(pipe_dir);
  if (!entries.ok()) return;
  for (const std::string& e : *entries) {
    const std::string p = JoinPath(pipe_dir, e);
    auto info = host_.Stat(p);
    if (info.ok() && info->type != FileType::kDirectory) {
      if (Status st = host_.RemoveFile(p); !st.ok()) log_(absl::StrCat("MPS: ", st.message()));
    }
  }
}

ExecSpec MpsManager::SpecFor(const Daemon& d, std::vector<std::string> args, Status* why) {
  const bool chroot = options_.chroot == MpsOptions::Chroot::kAlways ||
                      (options_.chroot == MpsOptions::Chroot::kAuto && !host_.is_system_root());
  // Paths as the program sees them: host paths inside the host root, ours otherwise.
  auto seen = [&](const std::string& host_path) { return chroot ? host_path : host_.Resolve(host_path); };
  ExecSpec spec;
  spec.program = seen(d.program);
  spec.argv = {spec.program};
  spec.argv.insert(spec.argv.end(), args.begin(), args.end());
  const std::string program_dir = d.program.substr(0, d.program.rfind('/'));
  spec.env = {
      absl::StrCat("PATH=", seen(program_dir.empty() ? "/" : program_dir),
                   ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"),
      absl::StrCat("CUDA_VISIBLE_DEVICES=", absl::StrJoin(d.status.spec.gpu_uuids, ",")),
      absl::StrCat("CUDA_MPS_PIPE_DIRECTORY=", seen(d.status.spec.pipe_dir)),
      absl::StrCat("CUDA_MPS_LOG_DIRECTORY=", seen(d.status.spec.log_dir)),
  };
  if (d.driver_root != "/") {
    spec.env.push_back(absl::StrCat("LD_LIBRARY_PATH=", seen(JoinPath(d.driver_root, "/usr/lib/x86_64-linux-gnu")), ":",
                                    seen(JoinPath(d.driver_root, "/usr/lib64")), ":",
                                    seen(JoinPath(d.driver_root, "/usr/lib"))));
  }
  if (chroot) spec.chroot_dir = host_.root();
  if (options_.isolate_shm) {
    auto from = host_.LocalPath(d.status.spec.shm_dir, true, true);
    auto to = host_.LocalPath("/dev/shm", true, true);
    if (!from.ok() || !to.ok()) {
      *why = !from.ok() ? from.status() : to.status();
      return spec;
    }
    spec.bind_shm_from = *from;
    spec.bind_shm_to = *to;
  }
  return spec;
}

StatusOr<std::string> MpsManager::RunControl(const Daemon& d, const std::string& command, milliseconds timeout) {
  Status why;
  ExecSpec spec = SpecFor(d, {}, &why);
  GPUNODE_RETURN_IF_ERROR(why);
  auto r = RunProgram(spec, command + "\n", timeout.count() > 0 ? timeout : options_.command_timeout);
  if (!r.ok()) return r.status();
  if (r->exit_code != 0) {
    const std::string out = Trimmed(r->output);
    return absl::UnavailableError(absl::StrCat(d.program, " (command \"", command, "\"): exit ", r->exit_code,
                                               out.empty() ? "" : ": ", out));
  }
  return r->output;
}

StatusOr<std::string> MpsManager::Command(const std::string& id, const std::string& command) {
  absl::MutexLock l(&mu_);
  auto it = daemons_.find(id);
  if (it == daemons_.end()) {
    return absl::NotFoundError(absl::StrCat("MPS: no control daemon for ", id));
  }
  return RunControl(it->second, command);
}

bool MpsManager::Reap(Daemon* d, bool block) {
  if (d->status.pid == 0 || d->reaped) return true;
  int status = 0;
  pid_t w;
  while ((w = ::waitpid(d->status.pid, &status, block ? 0 : WNOHANG)) < 0 && errno == EINTR) {
  }
  if (w == 0) return false;  // still running
  // Reaped now (w == pid), or not our child any more (ECHILD): gone either way.
  d->reaped = true;
  if (w == d->status.pid) {
    d->exit_text = WIFEXITED(status)    ? absl::StrCat("exited ", WEXITSTATUS(status))
                   : WIFSIGNALED(status) ? absl::StrCat("killed by signal ", WTERMSIG(status))
                                         : "ended";
  }
  return true;
}

bool MpsManager::Alive(Daemon* d) {
  if (d->status.pid == 0) return false;
  return !Reap(d, /*block=*/false);
}

std::string MpsManager::OutputTail(const Daemon& d) const {
  auto text = host_.ReadFile(JoinPath(d.status.spec.log_dir, kMpsDaemonOutput), 1 << 20);
  if (!text.ok()) return "";
  std::string t = Trimmed(*text);
  if (t.size() > 500) t = "..." + t.substr(t.size() - 500);
  return t;
}

Status MpsManager::StartDaemon(Daemon* d) {
  const MpsDaemonSpec& s = d->status.spec;
  // The driver's daemon serves the Unix socket <pipe dir>/control: with a longer path than a
  // socket address holds it exits 1 at once, saying nothing (seen on the H200).
  constexpr size_t kSocketPathMax = sizeof(sockaddr_un::sun_path) - 1;
  if (s.pipe_dir.size() + std::strlen("/control") > kSocketPathMax) {
    return absl::FailedPreconditionError(
        absl::StrCat("MPS pipe folder ", s.pipe_dir, " is too long: its control socket's path would have ",
                     s.pipe_dir.size() + std::strlen("/control"), " bytes, a Unix socket's at most ", kSocketPathMax,
                     " (shorten the MPS root / the kubelet plugins folder)"));
  }
  d->running = false;
  d->reaped = false;
  d->exit_text.clear();
  d->status.pid = 0;
  GPUNODE_RETURN_IF_ERROR(host_.MakeDirs(s.pipe_dir));
  GPUNODE_RETURN_IF_ERROR(host_.MakeDirs(s.log_dir));
  if (options_.isolate_shm) {
    PrepareShm(s.shm_dir);
    GPUNODE_RETURN_IF_ERROR(host_.MakeDirs("/dev/shm"));
  }
  CleanPipeDir(s.pipe_dir);  // a pipe left by a daemon that died
  // The daemon in the foreground (-f), as our own child: its pid comes from the fork, and its end
  // is seen by waitpid. (With -d it would fork again and only tell its pid through a file in the
  // pipe folder, which every client pod can write.) Its output goes to <log>/daemon.out.
  const std::string output = JoinPath(s.log_dir, kMpsDaemonOutput);
  GPUNODE_ASSIGN_OR_RETURN(std::string output_local, host_.LocalPath(output, true, true));
  const int out_fd = ::open(output_local.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (out_fd < 0) return ErrnoToStatus(errno, "open", output);
  Status why;
  ExecSpec spec = SpecFor(*d, {"-f"}, &why);
  StatusOr<pid_t> pid = why.ok() ? SpawnProgram(spec, out_fd) : StatusOr<pid_t>(why);
  ::close(out_fd);
  if (!pid.ok()) return pid.status();
  d->status.pid = *pid;
  d->running = true;
  auto fail = [&](const Status& st) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    StopDaemon(d, "its start failed");
    return st;
  };
  // Ready when its control pipe answers; gone when it exits first (it says why in its output).
  const auto deadline = Steady::now() + options_.start_timeout;
  Status answer = absl::UnavailableError("no answer yet");
  while (true) {
    if (!Alive(d)) {
      const std::string tail = OutputTail(*d);
      d->running = false;
      return absl::UnavailableError(absl::StrCat("start ", d->program, " -f: ", d->exit_text, " before it served ",
                                                 JoinPath(s.pipe_dir, "control"), tail.empty() ? "" : ": ", tail));
    }
    if (host_.Exists(JoinPath(s.pipe_dir, "control"))) {
      answer = RunControl(*d, "get_default_active_thread_percentage").status();
      if (answer.ok()) break;
    }
    if (Steady::now() >= deadline) {
      return fail(absl::DeadlineExceededError(absl::StrCat(
          "start ", d->program, " -f: its control pipe did not answer within ",
          std::chrono::duration_cast<milliseconds>(options_.start_timeout).count(), " ms (", answer.message(), ")")));
    }
    std::this_thread::sleep_for(milliseconds(20));
  }
  for (size_t i = 0; i < s.gpu_uuids.size(); ++i) {
    if (s.pinned_mem_limits[i].empty()) continue;
    // The ordinal in the daemon's CUDA_VISIBLE_DEVICES (what NVIDIA's daemon sends: the index).
    auto r = RunControl(*d, absl::StrCat("set_default_device_pinned_mem_limit ", i, " ", s.pinned_mem_limits[i]));
    if (!r.ok()) {
      return fail(absl::Status(r.status().code(), absl::StrCat("MPS: set the pinned memory limit of GPU ",
                                                                s.gpu_uuids[i], " for ", s.resource, ": ",
                                                                r.status().message())));
    }
  }
  if (s.active_thread_percentage) {
    if (auto r = RunControl(*d, absl::StrCat("set_default_active_thread_percentage ", *s.active_thread_percentage));
        !r.ok()) {
      return fail(absl::Status(r.status().code(), absl::StrCat("MPS: set the active thread percentage for ",
                                                                s.resource, ": ", r.status().message())));
    }
  }
  d->status.starts++;
  d->status.healthy = true;
  d->status.last_error.clear();
  std::vector<std::string> limits;
  for (size_t i = 0; i < s.pinned_mem_limits.size(); ++i) {
    if (!s.pinned_mem_limits[i].empty()) limits.push_back(absl::StrCat(i, ":", s.pinned_mem_limits[i]));
  }
  log_(absl::StrCat("MPS: started the control daemon for ", s.resource, " (pid ", d->status.pid, ", GPUs ",
                    absl::StrJoin(s.gpu_uuids, ","), ", ", s.replicas, " replicas: active threads ",
                    s.active_thread_percentage ? absl::StrCat(*s.active_thread_percentage, "%") : "default",
                    ", pinned memory per client ", limits.empty() ? "default" : absl::StrJoin(limits, ","),
                    "; pipe ", s.pipe_dir, ", log ", s.log_dir, ")"));
  return absl::OkStatus();
}

void MpsManager::StopDaemon(Daemon* d, absl::string_view why, bool try_quit) {
  const MpsDaemonSpec& s = d->status.spec;
  const pid_t pid = d->status.pid;
  if (pid == 0) {
    CleanPipeDir(s.pipe_dir);
    d->running = false;
    return;
  }
  const bool alive = Alive(d);
  Status quit = try_quit ? absl::OkStatus() : absl::UnavailableError("its pipe does not answer");
  if (alive && try_quit) quit = RunControl(*d, "quit").status();
  // Signals go to our own child only: it is not reaped until it ended, so its pid is still its own.
  auto wait_gone = [&](milliseconds limit) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const auto deadline = Steady::now() + limit;
    while (!Reap(d, false) && Steady::now() < deadline) std::this_thread::sleep_for(milliseconds(20));
    return Reap(d, false);
  };
  std::string how = quit.ok() ? "quit" : absl::StrCat("quit failed: ", quit.message());
  if (alive && !wait_gone(quit.ok() ? options_.quit_timeout : milliseconds(0))) {
    ::kill(pid, SIGTERM);
    how += "; SIGTERM";
    if (!wait_gone(milliseconds(1000))) {
      ::kill(-pid, SIGKILL);  // its session: the MPS servers it started too
      ::kill(pid, SIGKILL);
      how += "; SIGKILL";
      if (!wait_gone(milliseconds(2000))) how += " (not reaped yet)";
    }
  }
  CleanPipeDir(s.pipe_dir);
  d->running = false;
  d->status.healthy = false;
  log_(absl::StrCat("MPS: stopped the control daemon for ", s.resource, " (pid ", pid, ", ", why, "; ",
                    alive ? how : absl::StrCat("it was not running", d->exit_text.empty() ? "" : ": ", d->exit_text),
                    ")"));
  if (d->reaped) d->status.pid = 0;  // else kept: a later Reap finds it
}

Status MpsManager::CheckDaemon(Daemon* d, bool* answers) {
  *answers = false;
  if (!d->running) return absl::UnavailableError("not running");
  if (!Alive(d)) {
    return absl::UnavailableError(absl::StrCat("process ", d->status.pid, " is gone",
                                               d->exit_text.empty() ? "" : absl::StrCat(" (", d->exit_text, ")")));
  }
  auto r = RunControl(*d, "get_default_active_thread_percentage");
  if (!r.ok()) return absl::UnavailableError(absl::StrCat("its control pipe does not answer: ", r.status().message()));
  *answers = true;
  return absl::OkStatus();
}

Status MpsManager::CheckNow() {
  absl::MutexLock l(&mu_);
  std::vector<std::string> bad;
  const auto now = clock_.Now();
  for (auto& [name, d] : daemons_) {
    bool answers = false;
    Status st = CheckDaemon(&d, &answers);
    if (st.ok()) {
      d.status.healthy = true;
      d.backoff.Reset();  // a start that stayed healthy resets the backoff
      continue;
    }
    if (d.status.healthy || d.running) {
      log_(absl::StrCat("MPS: the control daemon for ", name, " is not healthy: ", st.message()));
      if (d.running) StopDaemon(&d, "unhealthy", answers);
      d.status.healthy = false;
      d.status.last_error = std::string(st.message());
      const milliseconds pause = d.backoff.Next();
      d.next_attempt = now + pause;
      log_(absl::StrCat("MPS: restarting the control daemon for ", name, " in ", pause.count(), " ms"));
    }
    if (clock_.Now() >= d.next_attempt) {
      Status started = StartDaemon(&d);
      if (started.ok()) {
        log_(absl::StrCat("MPS: restarted the control daemon for ", name, " (start #", d.status.starts, ")"));
        continue;
      }
      d.status.last_error = std::string(started.message());
      const milliseconds pause = d.backoff.Next();
      d.next_attempt = clock_.Now() + pause;
      log_(absl::StrCat("MPS: restart of the control daemon for ", name, " failed: ", started.message(),
                        "; next attempt in ", pause.count(), " ms"));
    }
    bad.push_back(absl::StrCat(name, ": ", d.status.last_error));
  }
  if (bad.empty()) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat("MPS control daemon(s) not healthy: ", absl::StrJoin(bad, "; ")));
}

Status MpsManager::Apply(const PluginConfig& config, const std::vector<Resource>& resources) {
  GPUNODE_ASSIGN_OR_RETURN(std::vector<MpsDaemonSpec> plan, PlanMpsDaemons(config, resources));
  const std::string driver_root = config.driver_root.empty() ? "/" : config.driver_root;
  std::string program;
  if (!plan.empty()) {
    GPUNODE_ASSIGN_OR_RETURN(program, FindControlProgram(driver_root));
  }
  absl::MutexLock l(&mu_);
  // Quit what is no longer needed or changed (Apply's own daemons only).
  for (auto it = daemons_.begin(); it != daemons_.end();) {
    if (!it->second.from_config) {
      ++it;
      continue;
    }
    auto p = std::find_if(plan.begin(), plan.end(), [&](const MpsDaemonSpec& s) { return s.id == it->first; });
    if (p != plan.end() && *p == it->second.status.spec && it->second.program == program &&
        it->second.driver_root == driver_root) {
      ++it;
      continue;
    }
    StopDaemon(&it->second, p == plan.end() ? "no longer shared with MPS" : "configuration changed");
    it = daemons_.erase(it);
  }
  std::vector<std::string> errors;
  for (const MpsDaemonSpec& s : plan) {
    if (daemons_.count(s.id)) {
      if (daemons_[s.id].from_config) continue;
      errors.push_back(absl::StrCat(s.resource, ": a daemon of id ", s.id, " exists already"));
      continue;
    }
    Daemon& d = daemons_[s.id];
    d.backoff = Backoff({.initial = options_.min_backoff, .max = options_.max_backoff});
    d.status.spec = s;
    d.program = program;
    d.driver_root = driver_root;
    d.from_config = true;
    if (Status st = StartDaemon(&d); !st.ok()) {
      d.status.last_error = std::string(st.message());
      d.next_attempt = clock_.Now() + d.backoff.Next();
      errors.push_back(absl::StrCat(s.resource, ": ", st.message()));
      log_(absl::StrCat("MPS: cannot start the control daemon for ", s.resource, ": ", st.message()));
    }
  }
  if (!errors.empty()) {
    return absl::UnavailableError(absl::StrCat("MPS: start the control daemon(s): ", absl::StrJoin(errors, "; ")));
  }
  return absl::OkStatus();
}

Status MpsManager::Ensure(const MpsDaemonSpec& spec, const std::string& driver_root) {
  if (spec.id.empty() || spec.gpu_uuids.empty() || spec.pinned_mem_limits.size() != spec.gpu_uuids.size()) {
    return absl::InvalidArgumentError(absl::StrCat("MPS: the daemon for ", spec.resource,
                                                   " needs an id, devices and a pinned limit (or \"\") per device"));
  }
  const std::string root = driver_root.empty() ? "/" : driver_root;
  GPUNODE_ASSIGN_OR_RETURN(std::string program, FindControlProgram(root));
  absl::MutexLock l(&mu_);
  if (auto it = daemons_.find(spec.id); it != daemons_.end()) {
    Daemon& d = it->second;
    if (d.from_config) {
      return absl::AlreadyExistsError(absl::StrCat("MPS: ", spec.id, " is the device plugin's daemon"));
    }
    if (d.status.spec == spec && d.program == program && d.driver_root == root && d.running && Alive(&d)) {
      return absl::OkStatus();
    }
    StopDaemon(&d, "its settings changed");
    daemons_.erase(it);
  }
  Daemon& d = daemons_[spec.id];
  d.backoff = Backoff({.initial = options_.min_backoff, .max = options_.max_backoff});
  d.status.spec = spec;
  d.program = program;
  d.driver_root = root;
  if (Status st = StartDaemon(&d); !st.ok()) {
    StopDaemon(&d, "its start failed");
    daemons_.erase(spec.id);
    return absl::Status(st.code(), absl::StrCat("MPS: start the control daemon for ", spec.resource, ": ", st.message()));
  }
  return absl::OkStatus();
}

Status MpsManager::Remove(const std::string& id) {
  absl::MutexLock l(&mu_);
  auto it = daemons_.find(id);
  if (it == daemons_.end()) return absl::OkStatus();
  StopDaemon(&it->second, "no longer needed");
  if (!it->second.reaped && it->second.status.pid != 0) {
    return absl::UnavailableError(absl::StrCat("MPS: the control daemon for ", it->second.status.spec.resource,
                                               " (pid ", it->second.status.pid, ") did not end"));
  }
  daemons_.erase(it);
  return absl::OkStatus();
}

Status MpsManager::Healthy() const {
  absl::MutexLock l(&mu_);
  std::vector<std::string> bad;
  for (const auto& [name, d] : daemons_) {
    if (!d.status.healthy) bad.push_back(absl::StrCat(name, ": ", d.status.last_error));
  }
  if (bad.empty()) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat("MPS control daemon(s) not healthy: ", absl::StrJoin(bad, "; ")));
}

std::vector<MpsDaemonStatus> MpsManager::Daemons() const {
  absl::MutexLock l(&mu_);
  std::vector<MpsDaemonStatus> out;
  for (const auto& [name, d] : daemons_) out.push_back(d.status);
  return out;
}

}  // namespace gpunode::devices
