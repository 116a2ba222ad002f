// The agent's components (src/lifecycle/harness.h): each wraps the library that its stand-alone command
// uses, reading the shared NodeContext instead of opening the node itself.
//   cdi, runtime  one-shot child steps (`gpunode cdi generate ...`, `gpunode runtime configure ...`),
//                 run again when the driver changes
//   validator     doctor's checks (in a child process, so libcuda never enters the agent), the
//                 validation gate, the Node condition GpuStackReady and its Events
//   plugin        the device plugin (src/deviceplugin, src/devices), health from the shared event pump, every device
//                 Unhealthy while the gate is closed
//   dra           the DRA driver (src/dra): ResourceSlices of the node's GPUs, claims prepared as a
//                 CDI spec each, health as device taints (off by default)
//   labels        GFD's and gpunode's labels onto the Node (and NFD's features file)
//   exporter      the Prometheus exporter (src/exporter), XIDs from the shared event pump
//   node          (internal) watches the Node: nvidia.com/gpu.deploy.* switch components,
//                 nvidia.com/device-plugin.config picks the plugin's config, nvidia.com/mig.config
//   uninstall     (internal, src/agent/uninstall.h) watches the DaemonSet for its deletion
#ifndef GPUNODE_AGENT_COMPONENTS_H_
#define GPUNODE_AGENT_COMPONENTS_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "nlohmann/json.hpp"
#include "src/agent/config.h"
#include "src/agent/node_context.h"
#include "src/compat/dataset.h"
#include "src/devices/config.h"
#include "src/dra/device_model.h"
#include "src/exporter/http_server.h"
#include "src/lifecycle/harness.h"

namespace gpunode::agent {

// The harness and its log (src/lifecycle), as the agent's components use them.
using lifecycle::Component;
using lifecycle::Harness;
using lifecycle::Log;
using lifecycle::OffReason;

std::unique_ptr<Component> MakeOneShot(const std::string& name, NodeContext& ctx, const OneShotSection& s, Log& log);
// `on_driver_change` runs when the running driver's version changed (the cdi step runs again).
std::unique_ptr<Component> MakeValidator(NodeContext& ctx, const AgentConfig& c, Log& log,
                                         std::function<void()> on_driver_change);
std::unique_ptr<Component> MakePlugin(NodeContext& ctx, const AgentConfig& c, Log& log);
std::unique_ptr<Component> MakeLabels(NodeContext& ctx, const AgentConfig& c, Log& log);
// The DRA driver (src/dra): ResourceSlices, claims prepared through CDI, health as device taints.
std::unique_ptr<Component> MakeDra(NodeContext& ctx, const AgentConfig& c, Log& log);
// The node's DRA devices as the dra component publishes them: dra::DraDevicesOf, with the CUDA
// version of the driver's branch (from `compat`) when NVML could not say (libcuda kept out).
std::vector<dra::DraDevice> DraDevicesOfNode(const node::NodeInventory& inv, const compat::CompatData* compat,
                                             std::vector<std::string>* problems = nullptr);
std::unique_ptr<Component> MakeExporter(NodeContext& ctx, const AgentConfig& c, Log& log,
                                        std::function<std::string()> extra_metrics,
                                        std::function<std::optional<exporter::RouteResponse>(std::string_view)> routes);
// The components that wait for the first read of the Node (their per-node settings: the
// device-plugin config, the MIG layout, the deploy labels), as client-go's WaitForCacheSync.
inline constexpr const char* kHeldUntilNodeRead[] = {"plugin", "labels"};

// The `node` component: follows the agent's own Node (a watch) and applies the GPU Operator's
// per-node labels:
//   nvidia.com/gpu.deploy.operands=false        every component off   } the OffReason::kNodeLabel
//   nvidia.com/gpu.deploy.<operand>=false       that component off    } of each component
//   nvidia.com/device-plugin.config=<name>      plugin and labels restart with configDir/<name>
//   nvidia.com/mig.config=<name>                that MIG layout (mig.configFile) through NVML, the
//                                               plugin off meanwhile (OffReason::kMigChange); a
//                                               layout already in place restarts nothing; the
//                                               result in nvidia.com/mig.config.state
// The start barrier: HoldUntilFirstRead() (before Harness::Start) holds kHeldUntilNodeRead back
// (OffReason::kStartBarrier) until the first read of the Node has been applied, MIG included, so
// the plugin registers once, with its final settings. A Node that cannot be read within
// `barrier_timeout`, or that the API refuses (404, 403), releases them with a warning.
class NodeWatcher final : public Component {
 public:
  NodeWatcher(NodeContext& ctx, const AgentConfig& c, Log& log, Harness& harness,
              std::chrono::milliseconds barrier_timeout = std::chrono::seconds(30));
  std::string name() const override { return "node"; }
  bool Ready() const override { return seen_.load(); }
  Status Run(std::stop_token stop) override;

  void HoldUntilFirstRead();
  // New settings after a reload (mig, plugin.configDir): used from the next read of the Node on
  // (the agent restarts the watch, which reads the Node again). A MIG layout is applied again
  // only when the label's value changes.
  void Reconfigure(const AgentConfig& c);

 private:
  void Apply(const nlohmann::json& node);
  void ApplyMig(const std::string& config, const std::string& state_now);
  // Sets nvidia.com/mig.config.state unless it is `now` already.
  void SetMigState(const std::string& state, const std::string& now);
  void ReleaseBarrier(const std::string& why);
  bool BarrierReleased() const;

  NodeContext& ctx_;
  Log& log_;
  Harness& harness_;
  const std::chrono::steady_clock::time_point barrier_deadline_;
  const std::chrono::milliseconds barrier_timeout_;
  mutable absl::Mutex mu_;
  bool has_config_dir_ ABSL_GUARDED_BY(mu_) = false;
  MigSection mig_ ABSL_GUARDED_BY(mu_);
  bool barrier_set_ ABSL_GUARDED_BY(mu_) = false;
  bool barrier_released_ ABSL_GUARDED_BY(mu_) = false;
  std::condition_variable_any barrier_changed_;
  // The watch's own thread only:
  std::string mig_applied_;
  bool warned_no_dir_ = false;
  std::atomic<bool> seen_{false};
};
std::unique_ptr<NodeWatcher> MakeNodeWatcher(NodeContext& ctx, const AgentConfig& c, Log& log, Harness& harness);

// The device-plugin configuration the plugin and labels components use: NVIDIA's file (configFile,
// or configDir/<name> for the node's nvidia.com/device-plugin.config=<name>, else defaultConfig),
// then the environment, then the plugin section's settings.
StatusOr<devices::PluginConfig> ResolvePluginConfig(const PluginSection& s, const std::string& config_name,
                                                   const std::map<std::string, std::string>& env);
std::map<std::string, std::string> ProcessEnvironment();

// The component a node label nvidia.com/gpu.deploy.<key> switches: NVIDIA's operand names
// (device-plugin, gpu-feature-discovery, dcgm-exporter, operator-validator, container-toolkit)
// and ours. Empty when `key` names none of them.
std::vector<std::string> ComponentsOfDeployLabel(const std::string& key);

// "driver.version-mismatch" -> "DriverVersionMismatch" (a Node condition's reason).
std::string CamelCaseReason(const std::string& finding_id);

}  // namespace gpunode::agent

#endif  // GPUNODE_AGENT_COMPONENTS_H_
