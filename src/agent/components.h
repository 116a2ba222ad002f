// The agent's components (src/agent/harness.h): each wraps the library that its stand-alone command
// uses, reading the shared NodeContext instead of opening the node itself.
//   cdi, runtime  one-shot child steps (`gpunode cdi generate ...`, `gpunode runtime configure ...`),
//                 run again when the driver changes
//   validator     doctor's checks (in a child process, so libcuda never enters the agent), the
//                 validation gate, the Node condition GpuStackReady and its Events
//   plugin        the device plugin (src/plugin), health from the shared event pump, every device
//                 Unhealthy while the gate is closed
//   labels        GFD's and gpunode's labels onto the Node (and NFD's features file)
//   exporter      the Prometheus exporter (src/exporter), XIDs from the shared event pump
//   node          (internal) watches the Node: nvidia.com/gpu.deploy.* switch components,
//                 nvidia.com/device-plugin.config picks the plugin's config
#ifndef GPUNODE_AGENT_COMPONENTS_H_
#define GPUNODE_AGENT_COMPONENTS_H_

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "src/agent/config.h"
#include "src/agent/harness.h"
#include "src/agent/node_context.h"
#include "src/exporter/http_server.h"
#include "src/plugin/config.h"

namespace gpunode::agent {

std::unique_ptr<Component> MakeOneShot(const std::string& name, NodeContext& ctx, const OneShotSection& s, Log& log);
// `on_driver_change` runs when the running driver's version changed (the cdi step runs again).
std::unique_ptr<Component> MakeValidator(NodeContext& ctx, const AgentConfig& c, Log& log,
                                         std::function<void()> on_driver_change);
std::unique_ptr<Component> MakePlugin(NodeContext& ctx, const AgentConfig& c, Log& log);
std::unique_ptr<Component> MakeLabels(NodeContext& ctx, const AgentConfig& c, Log& log);
std::unique_ptr<Component> MakeExporter(NodeContext& ctx, const AgentConfig& c, Log& log,
                                        std::function<std::string()> extra_metrics,
                                        std::function<std::optional<exporter::RouteResponse>(std::string_view)> routes);
// Switches components by the Node's labels; `enabled_by_config` is each component's `enabled`.
std::unique_ptr<Component> MakeNodeWatcher(NodeContext& ctx, const AgentConfig& c, Log& log, Harness& harness);

// The device-plugin configuration the plugin and labels components use: NVIDIA's file (configFile,
// or configDir/<name> for the node's nvidia.com/device-plugin.config=<name>, else defaultConfig),
// then the environment, then the plugin section's settings.
StatusOr<plugin::PluginConfig> ResolvePluginConfig(const PluginSection& s, const std::string& config_name,
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
