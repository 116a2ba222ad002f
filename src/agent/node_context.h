// What the agent's components share: the host (HostFs), one NVML session and one NVML event pump
// for the whole process, the latest node::NodeInventory (probed again when something changed: a driver
// change, a GPU lost, a MIG layout), the validation gate, the node's per-node settings from its
// labels, and the Kubernetes client. Thread-safe.
#ifndef GPUNODE_AGENT_NODE_CONTEXT_H_
#define GPUNODE_AGENT_NODE_CONTEXT_H_

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "nlohmann/json.hpp"
#include "src/base/clock.h"
#include "src/base/host_fs.h"
#include "src/base/status.h"
#include "src/gpu/event_pump.h"
#include "src/gpu/nvml.h"
#include "src/kube/client.h"
#include "src/node/inventory.h"
#include "src/node/probe.h"

namespace gpunode::agent {

// The validation gate: closed while the node's GPU stack fails (or has not been checked yet).
struct Gate {
  bool open = true;
  std::string reason;   // CamelCase finding id, "ValidationPending", "AllChecksPassed"
  std::string message;  // the first action, or what passed
};

struct NodeContextOptions {
  HostFs fs = HostFs::Local();
  node::ProbeOptions probe;
  std::string node_name;
  // `gpunode` and the global options that reach the same node (--host-root, --simulate's
  // library...): child steps (doctor, cdi generate) run as `self_args + their args`.
  std::vector<std::string> self_args;
  std::unique_ptr<kube::Client> kube;  // nullptr: no Kubernetes API
  bool gate_pending = true;            // start closed until the first validation (validator on)
  // The components' waits between rounds (validator re-checks, labels refreshes) and the event
  // pump's pauses run on it (tests: a FakeClock).
  Clock* clock = &SystemClock();
};

class NodeContext {
 public:
  explicit NodeContext(NodeContextOptions options);
  ~NodeContext();
  NodeContext(const NodeContext&) = delete;
  NodeContext& operator=(const NodeContext&) = delete;

  const HostFs& fs() const { return options_.fs; }
  const node::ProbeOptions& probe_options() const { return options_.probe; }
  const std::string& node_name() const { return options_.node_name; }
  const std::vector<std::string>& self_args() const { return options_.self_args; }
  // Milliseconds since the context was made (the agent's start), for the timing log lines.
  int64_t MsSinceStart() const {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started_).count();
  }
  kube::Client* kube() const { return options_.kube.get(); }
  Clock& clock() const { return *options_.clock; }

  // The one NVML session (opened on first use, again after it failed); nullptr with the reason.
  const gpu::NvmlLibrary* Nvml(Status* why = nullptr);
  // The one event pump, started over the inventory's GPUs on first use; nullptr without NVML.
  gpu::NvmlEventPump* Pump();

  // The latest inventory; `refresh` probes again. Probing is serialised.
  StatusOr<std::shared_ptr<const node::NodeInventory>> Inventory(bool refresh = false);
  // Incremented each time a probe found a different set of GPUs or driver.
  uint64_t generation() const;

  Gate gate() const;
  void SetGate(const Gate& g);  // calls the gate subscribers when it opens or closes
  // Waits until the first validation has decided (the gate's reason is no longer
  // "ValidationPending"), `deadline` (steady clock) passes or `stop` is requested; no polling.
  // Returns whether it has decided.
  bool WaitGateDecided(std::chrono::steady_clock::time_point deadline, std::stop_token stop);
  int OnGateChange(std::function<void(const Gate&)> f);
  void RemoveGateSubscriber(int id);

  // Per-node settings from the Node's labels (NodeWatcher): the device-plugin config name,
  // "" = the default. Read by the plugin and labels components when they (re)start.
  std::string plugin_config_name() const;
  void set_plugin_config_name(const std::string& name);

  // The agent's own Node as the node watcher last read it: the one watch of the agent, read by
  // labels, validator and events instead of a GET each, so a round that changes nothing sends no
  // request. nullptr before the first read (or without the API): they GET, as before.
  std::shared_ptr<const nlohmann::json> node() const;
  void SetNode(std::shared_ptr<const nlohmann::json> node);

 private:
  NodeContextOptions options_;
  const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  absl::Mutex probe_mu_ ABSL_ACQUIRED_BEFORE(mu_);  // one probe at a time
  absl::Mutex gate_call_mu_ ABSL_ACQUIRED_BEFORE(mu_);  // held while gate subscribers run
  mutable absl::Mutex mu_;
  std::unique_ptr<gpu::NvmlLibrary> nvml_ ABSL_GUARDED_BY(mu_);
  Status nvml_status_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<gpu::NvmlEventPump> pump_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const node::NodeInventory> inventory_ ABSL_GUARDED_BY(mu_);
  std::string inventory_key_ ABSL_GUARDED_BY(mu_);
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  Gate gate_ ABSL_GUARDED_BY(mu_);
  std::condition_variable_any gate_changed_;  // notified with mu_ held when gate_ is set
  std::map<int, std::function<void(const Gate&)>> gate_subscribers_ ABSL_GUARDED_BY(mu_);
  int next_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::string plugin_config_name_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const nlohmann::json> node_ ABSL_GUARDED_BY(mu_);
};

// Runs `args[0]` with `args[1..]` (no shell), waits at most `timeout`, and returns its exit
// status with what it wrote (stdout; stderr separately). Used for the agent's child steps: the
// doctor's CUDA check (libcuda and cuInit stay out of the agent's own memory), cdi generate,
// runtime configure. The child runs in a process group of its own with signals unblocked and at
// their defaults; at the timeout or a stop the group is killed. Once the child has exited (or was
// killed), output is read for kChildOutputGrace more at most: a process it left behind that holds
// the pipes open does not hold the caller.
inline constexpr std::chrono::milliseconds kChildOutputGrace{200};
struct ChildResult {
  int exit_code = -1;  // -1: killed by a signal or timed out
  std::string out, err;
};
StatusOr<ChildResult> RunChild(const std::vector<std::string>& args, std::chrono::milliseconds timeout,
                               std::stop_token stop = {});

}  // namespace gpunode::agent

#endif  // GPUNODE_AGENT_NODE_CONTEXT_H_
