#include "src/agent/node_context.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "src/base/held_mutex.h"
#include "src/base/subprocess.h"


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

std::shared_ptr<const nlohmann::json> NodeContext::node() const {
  absl::MutexLock lock(&mu_);
  return node_;
}

void NodeContext::SetNode(std::shared_ptr<const nlohmann::json> node) {
  absl::MutexLock lock(&mu_);
  node_ = std::move(node);
}

StatusOr<ChildResult> RunChild(const std::vector<std::string>& args, std::chrono::milliseconds timeout,
                               std::stop_token stop) {
  if (args.empty()) return absl::InvalidArgumentError("run: no program");
  // src/base/subprocess.h: signals reset, a process group of its own (a timeout or a stop kills
  // what it started too), what it left holding the pipes read for kChildOutputGrace at most.
  SubprocessOptions o;
  o.argv = args;
  o.timeout = timeout;
  o.stop = std::move(stop);
  o.output_grace = kChildOutputGrace;
  GPUNODE_ASSIGN_OR_RETURN(SubprocessResult r, RunSubprocess(o));
  if (r.stopped) return absl::CancelledError(absl::StrCat(args[0], ": stopped"));
  if (r.timed_out) {
    return absl::DeadlineExceededError(absl::StrCat(args[0], ": still running after ",
                                                    std::chrono::duration<double>(timeout).count(), " s, killed"));
  }
  return ChildResult{r.exit_code, std::move(r.out), std::move(r.err)};
}

}  // namespace gpunode::agent
