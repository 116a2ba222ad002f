// The plugin component: the device plugin of `gpunode plugin`, inside the agent.
#include <cctype>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "src/agent/components.h"
#include "src/base/go_bool.h"
#include "src/deviceplugin/server.h"
#include "src/devices/devices.h"
#include "src/devices/health.h"
#include "src/devices/mps.h"
#include "src/devices/topology.h"

extern char** environ;

namespace gpunode::agent {

std::map<std::string, std::string> ProcessEnvironment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string kv = *e;
    const size_t eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}


StatusOr<devices::PluginConfig> ResolvePluginConfig(const PluginSection& s, const std::string& config_name,
                                                   const std::map<std::string, std::string>& env) {
  devices::PluginConfig config;
  std::string file = s.config_file;
  if (file.empty() && !s.config_dir.empty()) {
    const std::string name = config_name.empty() ? s.default_config : config_name;
    if (!name.empty()) {
      if (name.find('/') != std::string::npos || name == "." || name == "..") {
        return absl::InvalidArgumentError(
            absl::StrCat("device-plugin config name \"", name, "\": not a name (a key of the config map)"));
      }
      file = absl::StrCat(s.config_dir, "/", name);
    }
  }
  if (!file.empty()) {
    std::ifstream in(file);
    if (!in) {
      return ErrnoToStatus(errno, config_name.empty() ? "read device-plugin config"
                                                      : "read the device-plugin config named by the node label",
                           file);
    }
    std::stringstream text;
    text << in.rdbuf();
    GPUNODE_ASSIGN_OR_RETURN(config, devices::ParseConfig(text.str(), file));
  }
  GPUNODE_RETURN_IF_ERROR(devices::ApplyEnvironment(env, &config));
  if (!s.mig_strategy.empty()) {
    GPUNODE_ASSIGN_OR_RETURN(config.mig_strategy, devices::ParseMigStrategy(s.mig_strategy));
  }
  if (!s.device_list_strategy.empty()) {
    GPUNODE_ASSIGN_OR_RETURN(config.device_list, devices::ParseDeviceListStrategy(s.device_list_strategy));
  }
  if (!s.device_id_strategy.empty()) {
    GPUNODE_ASSIGN_OR_RETURN(config.device_id, devices::ParseDeviceIdStrategy(s.device_id_strategy));
  }
  if (!s.pass_device_specs.empty()) {
    GPUNODE_ASSIGN_OR_RETURN(config.pass_device_specs, ParseGoBool("plugin.passDeviceSpecs", s.pass_device_specs));
  }
  if (!s.fail_on_init_error.empty()) {
    GPUNODE_ASSIGN_OR_RETURN(config.fail_on_init_error, ParseGoBool("plugin.failOnInitError", s.fail_on_init_error));
  }
  GPUNODE_RETURN_IF_ERROR(devices::ValidateConfig(config));
  return config;
}

namespace {

class PluginComponent final : public Component {
 public:
  PluginComponent(NodeContext& ctx, PluginSection s, bool gate, Log& log)
      : ctx_(ctx), s_(std::move(s)), gate_(gate), log_(log) {}
  std::string name() const override { return "plugin"; }
  bool Ready() const override { return registered_.load(); }

  Status Run(std::stop_token stop) override {
    registered_ = false;
    const std::map<std::string, std::string> env = ProcessEnvironment();
    const std::string config_name = ctx_.plugin_config_name();
    GPUNODE_ASSIGN_OR_RETURN(devices::PluginConfig config, ResolvePluginConfig(s_, config_name, env));
    for (const std::string& w : config.warnings) log_.Warn(name(), absl::StrCat("config: ", w));
    GPUNODE_ASSIGN_OR_RETURN(devices::HealthOptions health, devices::HealthOptionsFromEnvironment(env));
    health.recovery_quiet = s_.health_recovery;

    // Register once the first check has decided (as the Operator starts its plugin after the
    // validator): the kubelet then never sees the GPUs flash Unhealthy at start. A check that
    // takes longer than 20 s does not hold the registration back (the GPUs are Unhealthy until it
    // passes).
    if (gate_) {
      ctx_.WaitGateDecided(std::chrono::steady_clock::now() + std::chrono::seconds(20), stop);
      if (stop.stop_requested()) return absl::OkStatus();
    }
    // Probed again at every (re)start: a restart for new settings or SIGHUP sees the devices as
    // they are now.
    GPUNODE_ASSIGN_OR_RETURN(std::shared_ptr<const node::NodeInventory> inv, ctx_.Inventory(/*refresh=*/true));
    if (!inv->driver.status.ok()) {
      const std::string msg = absl::StrCat("NVML: ", inv->driver.status.message());
      if (config.fail_on_init_error) return absl::FailedPreconditionError(msg);
      log_.Warn(name(), msg + "; failOnInitError is false: serving without devices");
    }
    GPUNODE_ASSIGN_OR_RETURN(std::vector<devices::Resource> resources, devices::BuildResources(*inv, config));
    std::vector<std::string> control;
    for (const node::DeviceNode& n : inv->kernel.device_nodes) {
      const bool per_gpu = n.path.size() > 11 && std::isdigit(static_cast<unsigned char>(n.path[11]));
      if (n.present && !per_gpu) control.push_back(n.path);
    }
    auto links = std::make_shared<devices::LinkMatrix>(devices::BuildLinkMatrix(*inv));
    std::vector<std::pair<unsigned, std::string>> watched;
    for (const gpu::GpuInfo& g : inv->driver.gpus) watched.emplace_back(g.index, g.uuid);
    size_t count = 0;
    for (const devices::Resource& r : resources) count += r.devices.size();

    // MPS sharing: one control daemon per shared resource, started before the resource is served.
    devices::MpsManager mps(ctx_.fs(), {}, log_.For(name()));
    mps.Start();
    GPUNODE_RETURN_IF_ERROR(mps.Apply(config, resources));

    deviceplugin::ManagerOptions mo;
    mo.plugin_dir = s_.kubelet_dir;
    mo.kubelet_socket = s_.kubelet_socket;
    mo.on_registered = [this] { registered_ = true; };
    deviceplugin::PluginManager manager(std::move(resources), config, control, links, mo, log_.For(name()));

    // A device is advertised Healthy when its GPU is healthy (monitor) and the gate is open.
    // (A local std::mutex: locals cannot carry ABSL_GUARDED_BY, so absl::Mutex would add nothing.)
    std::mutex mu;
    std::map<std::string, std::pair<bool, std::string>> monitor;  // uuid -> (healthy, reason)
    for (const auto& [index, uuid] : watched) monitor[uuid] = {true, ""};
    auto apply = [&](const Gate& g) {
      std::lock_guard<std::mutex> lock(mu);
      for (const auto& [uuid, h] : monitor) {
        const bool healthy = h.first && (!gate_ || g.open);
        manager.SetHealth(uuid, healthy,
                          !h.first ? h.second : (healthy ? "validation passed" : "validation: " + g.reason));
      }
    };
    apply(ctx_.gate());
    const int gate_sub = ctx_.OnGateChange([&](const Gate& g) {
      log_.Info(name(), g.open ? "validation passed: advertising the GPUs as healthy"
                               : absl::StrCat("validation failed (", g.reason, "): every GPU Unhealthy"));
      apply(g);
    });

    std::unique_ptr<devices::HealthMonitor> health_monitor;
    if (const gpu::NvmlLibrary* nvml = ctx_.Nvml(); nvml != nullptr && !watched.empty()) {
      health_monitor = std::make_unique<devices::HealthMonitor>(
          *nvml, watched, health,
          [&](const devices::HealthEvent& e) {
            {
              std::lock_guard<std::mutex> lock(mu);
              monitor[e.uuid] = {e.healthy, e.reason};
            }
            apply(ctx_.gate());
          },
          ctx_.Pump());
      health_monitor->Start();
    }
    log_.Info(name(), absl::StrCat("starting: ", count, " devices, MIG strategy ",
                                   devices::MigStrategyName(config.mig_strategy), ", sharing ",
                                   devices::SharingStrategyName(config.sharing.strategy),
                                   config_name.empty() ? "" : absl::StrCat(", config \"", config_name, "\""),
                                   ", kubelet dir ", s_.kubelet_dir));
    std::atomic<bool> stop_flag{false};
    std::stop_callback on_stop(stop, [&] {
      stop_flag = true;
      manager.Interrupt();
    });
    Status st = manager.Run(stop_flag);
    stop_flag = true;
    registered_ = false;
    ctx_.RemoveGateSubscriber(gate_sub);
    if (health_monitor) health_monitor->Stop();
    mps.Stop();
    return st;
  }

 private:
  NodeContext& ctx_;
  PluginSection s_;
  bool gate_;
  Log& log_;
  std::atomic<bool> registered_{false};
};

}  // namespace

std::unique_ptr<Component> MakePlugin(NodeContext& ctx, const AgentConfig& c, Log& log) {
  return std::make_unique<PluginComponent>(ctx, c.plugin, c.validator.enabled && c.validator.gate, log);
}

}  // namespace gpunode::agent
