#include "src/agent/node_context.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "src/base/held_mutex.h"

extern char** environ;

namespace gpunode::agent {

NodeContext::NodeContext(NodeContextOptions options) : options_(std::move(options)) {
  if (options_.gate_pending) gate_ = {false, "ValidationPending", "the GPU stack has not been checked yet"};
}

NodeContext::~NodeContext() {
  if (pump_) pump_->Stop();
}

const gpu::NvmlLibrary* NodeContext::Nvml(Status* why) {
  absl::MutexLock lock(&mu_);
  if (!nvml_) {
    auto lib = gpu::NvmlLibrary::Open(options_.probe.nvml_library);
    if (lib.ok()) {
      nvml_ = *std::move(lib);
      nvml_status_ = absl::OkStatus();
    } else {
      nvml_status_ = lib.status();
    }
  }
  if (why != nullptr) *why = nvml_status_;
  return nvml_.get();
}

gpu::NvmlEventPump* NodeContext::Pump() {
  const gpu::NvmlLibrary* nvml = Nvml();
  if (nvml == nullptr) return nullptr;
  auto inv = Inventory();
  absl::MutexLock lock(&mu_);
  if (!pump_) {
    pump_ = std::make_unique<gpu::NvmlEventPump>(*nvml, clock());
    std::vector<std::pair<unsigned, std::string>> gpus;
    if (inv.ok()) {
      for (const gpu::GpuInfo& g : (*inv)->driver.gpus) gpus.emplace_back(g.index, g.uuid);
    }
    pump_->Start(gpus);
  }
  return pump_.get();
}

namespace {
// What makes two inventories "the same node" for the components: driver, GPUs, MIG devices.
std::string InventoryKey(const node::NodeInventory& inv) {
  std::string key = absl::StrCat(inv.driver.driver_version ? inv.driver.driver_version->ToString() : "", "|",
                                 inv.kernel.version_line, "|",
                                 inv.driver.status.ok() ? "ok" : inv.driver.status.message(), "|");
  for (const gpu::GpuInfo& g : inv.driver.gpus) {
    absl::StrAppend(&key, g.uuid, ",");
    for (const gpu::MigDevice& m : g.mig_devices) absl::StrAppend(&key, m.uuid, ";");
  }
  for (const gpu::GpuFailure& f : inv.driver.gpu_failures) absl::StrAppend(&key, "!", f.index);
  return key;
}
}  // namespace

StatusOr<std::shared_ptr<const node::NodeInventory>> NodeContext::Inventory(bool refresh) {
  absl::MutexLock probe_lock(&probe_mu_);
  {
    absl::MutexLock lock(&mu_);
    if (inventory_ && !refresh) return inventory_;
  }
  Nvml();  // keeps NVML initialised between probes: each probe's own init is a reference count
  GPUNODE_ASSIGN_OR_RETURN(node::NodeInventory inv, node::ProbeNode(options_.fs, options_.probe));
  auto shared = std::make_shared<const node::NodeInventory>(std::move(inv));
  const std::string key = InventoryKey(*shared);
  absl::MutexLock lock(&mu_);
  if (key != inventory_key_) {
    inventory_key_ = key;
    ++generation_;
  }
  inventory_ = shared;
  return shared;
}

uint64_t NodeContext::generation() const {
  absl::MutexLock lock(&mu_);
  return generation_;
}

Gate NodeContext::gate() const {
  absl::MutexLock lock(&mu_);
  return gate_;
}

void NodeContext::SetGate(const Gate& g) {
  absl::MutexLock calls(&gate_call_mu_);  // a removed subscriber is never called after
  std::vector<std::function<void(const Gate&)>> call;
  {
    absl::MutexLock lock(&mu_);
    const bool changed = g.open != gate_.open;
    gate_ = g;
    gate_changed_.notify_all();
    if (changed) {
      for (auto& [id, f] : gate_subscribers_) call.push_back(f);
    }
  }
  for (auto& f : call) f(g);
}

bool NodeContext::WaitGateDecided(std::chrono::steady_clock::time_point deadline, std::stop_token stop) {
  absl::MutexLock lock(&mu_);
  HeldMutex held(mu_);
  return gate_changed_.wait_until(held, stop, deadline,
                                  [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return gate_.reason != "ValidationPending"; });
}

int NodeContext::OnGateChange(std::function<void(const Gate&)> f) {
  absl::MutexLock lock(&mu_);
  const int id = next_id_++;
  gate_subscribers_[id] = std::move(f);
  return id;
}

void NodeContext::RemoveGateSubscriber(int id) {
  absl::MutexLock calls(&gate_call_mu_);
  absl::MutexLock lock(&mu_);
  gate_subscribers_.erase(id);
}

std::string NodeContext::plugin_config_name() const {
  absl::MutexLock lock(&mu_);
  return plugin_config_name_;
}

void NodeContext::set_plugin_config_name(const std::string& name) {
  absl::MutexLock lock(&mu_);
  plugin_config_name_ = name;
}

StatusOr<ChildResult> RunChild(const std::vector<std::string>& args, std::chrono::milliseconds timeout,
                               std::stop_token stop) {
  if (args.empty()) return absl::InvalidArgumentError("run: no program");
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return ErrnoToStatus(errno, "pipe for", args[0]);
  if (::pipe2(err, O_CLOEXEC) != 0) {
    const int e = errno;
    ::close(out[0]);
    ::close(out[1]);
    return ErrnoToStatus(e, "pipe for", args[0]);
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err[1], 2);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  // The child starts with the default signal dispositions and an empty mask (the agent blocks
  // SIGTERM/SIGHUP to take them with sigwait), in a process group of its own, so that a timeout
  // or a stop kills what it started too.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, args[0].c_str(), &fa, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  ::close(out[1]);
  ::close(err[1]);
  if (rc != 0) {
    ::close(out[0]);
    ::close(err[0]);
    return ErrnoToStatus(rc, "start", args[0]);
  }
  using Clock = std::chrono::steady_clock;
  ChildResult result;
  const auto deadline = Clock::now() + timeout;
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  int open_fds = 2;
  bool killed = false, reaped = false;
  int status = 0;
  // Once the child is gone, what it left running (a daemon it started, a grandchild that escaped
  // its process group) may hold the pipes open for ever: read what is there for a short while,
  // then stop.
  std::optional<Clock::time_point> stop_reading;
  while (open_fds > 0) {
    if (!killed && !reaped && (Clock::now() >= deadline || stop.stop_requested())) {
      ::kill(-pid, SIGKILL);
      ::kill(pid, SIGKILL);
      killed = true;
    }
    if (!reaped) {
      pid_t w;
      while ((w = ::waitpid(pid, &status, WNOHANG)) < 0 && errno == EINTR) {
      }
      if (w == pid) {
        reaped = true;
        stop_reading = Clock::now() + kChildOutputGrace;
      }
    }
    if (stop_reading && Clock::now() >= *stop_reading) break;
    const int n = ::poll(fds, 2, reaped ? 10 : 50);
    if (n < 0 && errno != EINTR) break;
    for (int i = 0; i < 2 && n > 0; ++i) {
      if (fds[i].fd < 0 || (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      char buf[4096];
      const ssize_t got = ::read(fds[i].fd, buf, sizeof buf);
      if (got > 0) {
        std::string& sink = i == 0 ? result.out : result.err;
        if (sink.size() < (16u << 20)) sink.append(buf, static_cast<size_t>(got));
      } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (pollfd& p : fds) {
    if (p.fd >= 0) ::close(p.fd);
  }
  if (!reaped) {
    // The pipes closed before the child was seen to exit: it exits now (or is being killed).
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  result.exit_code = !killed && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (killed && stop.stop_requested()) return absl::CancelledError(absl::StrCat(args[0], ": stopped"));
  if (killed) {
    return absl::DeadlineExceededError(absl::StrCat(args[0], ": still running after ",
                                                    std::chrono::duration<double>(timeout).count(), " s, killed"));
  }
  return result;
}

}  // namespace gpunode::agent
