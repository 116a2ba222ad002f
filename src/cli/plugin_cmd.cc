// gpunode plugin: the kubelet device plugin for nvidia.com/gpu (src/plugin, docs/plugin.md).
#include <malloc.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <ctime>
#include <fstream>
#include <iostream>
#include <mutex>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "src/agent/components.h"
#include "src/cli/common.h"
#include "src/gpu/nvml.h"
#include "src/plugin/config.h"
#include "src/plugin/devices.h"
#include "src/plugin/health.h"
#include "src/plugin/mps.h"
#include "src/plugin/server.h"
#include "src/plugin/topology.h"


namespace gpunode::cli {
namespace {


struct PluginFlags {
  std::string kubelet_dir = plugin::kDefaultPluginDir;
  std::string kubelet_socket;
  std::string config_file;
  std::string mig_strategy, device_list_strategy, device_id_strategy;
  // "" = not given; a bare flag is "true"; --flag=VALUE as Go's strconv.ParseBool reads it
  std::string pass_device_specs, fail_on_init_error;
  std::string health_recovery = "5m";
  bool print = false;
};


// The plugin section of the agent's configuration that these flags describe.
agent::PluginSection SectionOf(const PluginFlags& f, const std::map<std::string, std::string>& env) {
  agent::PluginSection s;
  s.kubelet_dir = f.kubelet_dir;
  s.kubelet_socket = f.kubelet_socket;
  s.config_file = f.config_file.empty() && env.count("CONFIG_FILE") ? env.at("CONFIG_FILE") : f.config_file;
  s.mig_strategy = f.mig_strategy;
  s.device_list_strategy = f.device_list_strategy;
  s.device_id_strategy = f.device_id_strategy;
  s.pass_device_specs = f.pass_device_specs;
  s.fail_on_init_error = f.fail_on_init_error;
  return s;
}

// Flag, then environment, then file, then default (NVIDIA's precedence): the agent's resolution,
// with the boolean flags checked first so that errors name them as typed.
StatusOr<plugin::PluginConfig> LoadConfig(const PluginFlags& f, const std::map<std::string, std::string>& env) {
  if (!f.pass_device_specs.empty()) {
    GPUNODE_RETURN_IF_ERROR(ParseGoBool("--pass-device-specs", f.pass_device_specs).status());
  }
  if (!f.fail_on_init_error.empty()) {
    GPUNODE_RETURN_IF_ERROR(ParseGoBool("--fail-on-init-error", f.fail_on_init_error).status());
  }
  return agent::ResolvePluginConfig(SectionOf(f, env), "", env);
}

std::string ListStrategyText(const plugin::PluginConfig& c) {
  std::vector<std::string> s;
  if (c.device_list.envvar) s.push_back("envvar");
  if (c.device_list.volume_mounts) s.push_back("volume-mounts");
  if (c.device_list.cdi_annotations) s.push_back("cdi-annotations");
  if (c.device_list.cdi_cri) s.push_back("cdi-cri");
  return absl::StrJoin(s, ",");
}

nlohmann::ordered_json ResourcesJson(const std::vector<plugin::Resource>& resources, const plugin::PluginConfig& c) {
  nlohmann::ordered_json rs = nlohmann::ordered_json::array();
  for (const plugin::Resource& r : resources) {
    nlohmann::ordered_json devs = nlohmann::ordered_json::array();
    for (const plugin::PluginDevice& d : r.devices) {
      nlohmann::ordered_json j = {{"id", d.id}, {"uuid", d.uuid}, {"index", d.index}};
      if (d.numa_node) j["numaNode"] = *d.numa_node;
      if (d.replica >= 0) j["replica"] = d.replica;
      devs.push_back(j);
    }
    rs.push_back({{"name", r.name},
                  {"socket", r.socket_name},
                  {"product", r.product},
                  {"replicas", r.replicas},
                  {"devices", devs}});
  }
  return {{"apiVersion", "gpunode/v1"},
          {"kind", "DevicePluginResources"},
          {"migStrategy", plugin::MigStrategyName(c.mig_strategy)},
          {"deviceIdStrategy", c.device_id == plugin::DeviceIdStrategy::kUuid ? "uuid" : "index"},
          {"deviceListStrategy", ListStrategyText(c)},
          {"passDeviceSpecs", c.pass_device_specs},
          {"failOnInitError", c.fail_on_init_error},
          {"sharing", plugin::SharingStrategyName(c.sharing.strategy)},
          {"resources", rs}};
}

int RunPlugin(const GlobalOptions& global, const PluginFlags& flags) {
  // A long-running daemon with a handful of threads: two malloc arenas, not one per thread.
  ::mallopt(M_ARENA_MAX, 2);
  const auto env = agent::ProcessEnvironment();
  auto config = LoadConfig(flags, env);
  if (!config.ok()) {
    PrintError(config.status());
    return config.status().code() == absl::StatusCode::kUnimplemented ? kExitFailed : kExitUsage;
  }
  // (the component logs config->warnings when it starts)
  auto recovery = agent::ParseDuration(flags.health_recovery);
  if (!recovery.ok()) {
    PrintError(absl::StrCat("--health-recovery: ", recovery.status().message()));
    return kExitUsage;
  }
  auto health = plugin::HealthOptionsFromEnvironment(env);
  if (!health.ok()) {
    PrintError(health.status());
    return kExitUsage;
  }
  health->recovery_quiet = *recovery;

  auto session = NodeSession::Open(global);
  if (!session.ok()) {
    PrintError(session.status());
    return kExitUsage;
  }
  (*session)->probe_options().load_cuda = false;  // NVML gives the CUDA version; no libcuda in the plugin
  (*session)->probe_options().query_topology = true;
  (*session)->probe_options().live_metrics = false;
  if (flags.print) {
    auto inv = (*session)->Inventory();
    if (!inv.ok()) {
      PrintError(inv.status());
      return kExitFailed;
    }
    if (!inv->driver.status.ok()) {
      PrintError(absl::StrCat("NVML: ", inv->driver.status.message(), " (run `gpunode doctor`)"));
      return kExitFailed;
    }
    auto resources = plugin::BuildResources(*inv, *config);
    if (!resources.ok()) {
      PrintError(resources.status());
      return kExitFailed;
    }
    auto format = ParseOutputFormat(global.output);
    if (!format.ok()) {
      PrintError(format.status());
      return kExitUsage;
    }
    const auto doc = ResourcesJson(*resources, *config);
    if (*format != OutputFormat::kTable) {
      PrintDocument(doc, *format);
    } else {
      for (const plugin::Resource& r : *resources) {
        std::cout << r.name << " (" << r.devices.size() << " devices, socket " << r.socket_name << ")\n";
        for (const plugin::PluginDevice& d : r.devices) {
          std::cout << "  " << d.id << "  index " << d.index
                    << (d.numa_node ? absl::StrCat("  numa ", *d.numa_node) : std::string()) << "\n";
        }
      }
    }
    return kExitOk;
  }
  // Serving: the agent's plugin component (src/agent) in its harness. The component resolves the
  // configuration the same way (flag, environment, config file, default) at every (re)start, so
  // SIGHUP reads the file, the environment and the devices again.
  agent::AgentConfig c;
  c.kubernetes.enabled = false;
  c.validator.enabled = false;
  c.plugin = SectionOf(flags, env);
  c.plugin.health_recovery = *recovery;
  return RunComponentCommand(global, **session, c, "plugin", "");
}

}  // namespace

void AddPluginCommand(CLI::App& app, GlobalOptions& global, int* exit_code) {
  auto f = std::make_shared<PluginFlags>();
  CLI::App* cmd = app.add_subcommand(
      "plugin", "Kubernetes device plugin for nvidia.com/gpu: advertise, health-check and allocate GPUs (docs/plugin.md)");
  cmd->add_option("--kubelet-dir", f->kubelet_dir,
                  "The kubelet's device-plugin directory, as mounted in gpunode's filesystem")
      ->capture_default_str();
  cmd->add_option("--kubelet-socket", f->kubelet_socket, "Registration socket (default <kubelet-dir>/kubelet.sock)")
      ->envname("KUBELET_SOCKET");
  cmd->add_option("--config-file", f->config_file, "NVIDIA device plugin config file, version v1 (YAML or JSON)")
      ->envname("CONFIG_FILE");
  cmd->add_option("--mig-strategy", f->mig_strategy, "none, single or mixed (env MIG_STRATEGY)");
  cmd->add_option("--device-list-strategy", f->device_list_strategy,
                  "envvar, volume-mounts, cdi-annotations, cdi-cri (comma list; env DEVICE_LIST_STRATEGY)");
  cmd->add_option("--device-id-strategy", f->device_id_strategy, "uuid or index (env DEVICE_ID_STRATEGY)");
  // NVIDIA's plugin takes these as bare boolean flags (`--pass-device-specs`) or `--flag=true|false`.
  cmd->add_flag("--pass-device-specs{true}", f->pass_device_specs,
                "Also return device specs; --pass-device-specs=false to turn off (env PASS_DEVICE_SPECS)");
  cmd->add_flag("--fail-on-init-error{true}", f->fail_on_init_error,
                "Exit when NVML cannot start (default true; --fail-on-init-error=false; env FAIL_ON_INIT_ERROR)");
  cmd->add_option("--health-recovery", f->health_recovery,
                  "Quiet period after which an unhealthy GPU that answers normally is Healthy again")
      ->capture_default_str();
  cmd->add_flag("--print", f->print, "Print the resources and devices it would advertise, then exit (-o json|yaml)");
  cmd->footer(
      "Environment as NVIDIA's plugin: MIG_STRATEGY, DEVICE_LIST_STRATEGY, DEVICE_ID_STRATEGY, PASS_DEVICE_SPECS,\n"
      "FAIL_ON_INIT_ERROR, NVIDIA_DRIVER_ROOT, NVIDIA_DEV_ROOT, CDI_ANNOTATION_PREFIX, CONFIG_FILE,\n"
      "DP_DISABLE_HEALTHCHECKS (all | XIDs to ignore), DP_ENABLE_HEALTHCHECKS (all | XIDs always fatal).\n"
      "Precedence: flag, environment, config file, default. SIGHUP reloads the config; SIGTERM stops.\n"
      "Examples:\n"
      "  gpunode plugin                                   serve and register at the kubelet\n"
      "  gpunode --simulate dgx-h200 plugin --print       what a simulated 8x H200 node advertises\n"
      "  gpunode plugin --config-file time-slicing.yaml   share each GPU (sharing.timeSlicing.replicas)");
  cmd->callback([&global, f, exit_code] { *exit_code = RunPlugin(global, *f); });
}

}  // namespace gpunode::cli
