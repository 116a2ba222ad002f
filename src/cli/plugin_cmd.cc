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
#include "src/cli/common.h"
#include "src/gpu/nvml.h"
#include "src/plugin/config.h"
#include "src/plugin/devices.h"
#include "src/plugin/health.h"
#include "src/plugin/mps.h"
#include "src/plugin/server.h"
#include "src/plugin/topology.h"

extern char** environ;

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

std::atomic<bool> g_stop{false};
std::atomic<bool> g_reload{false};
void OnSignal(int sig) {
  if (sig == SIGHUP) g_reload = true;
  g_stop = true;
}

std::mutex g_log_mu;
void Log(const std::string& msg) {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  std::lock_guard<std::mutex> lock(g_log_mu);
  std::cerr << buf << " gpunode plugin: " << msg << std::endl;
}

std::map<std::string, std::string> Environment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string kv = *e;
    const size_t eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

StatusOr<std::chrono::milliseconds> ParseDuration(const std::string& text) {
  std::string t = text;
  int64_t mult = 1000;
  if (absl::EndsWith(t, "ms")) {
    t.resize(t.size() - 2);
    mult = 1;
  } else if (absl::EndsWith(t, "s")) {
    t.pop_back();
  } else if (absl::EndsWith(t, "m")) {
    t.pop_back();
    mult = 60000;
  } else if (absl::EndsWith(t, "h")) {
    t.pop_back();
    mult = 3600000;
  }
  int64_t v = 0;
  if (!absl::SimpleAtoi(t, &v) || v < 0) {
    return absl::InvalidArgumentError(absl::StrCat("\"", text, "\": not a duration such as 300s, 5m or 500ms"));
  }
  return std::chrono::milliseconds(v * mult);
}

// Flag, then environment, then file, then default (NVIDIA's precedence).
StatusOr<plugin::PluginConfig> LoadConfig(const PluginFlags& f, const std::map<std::string, std::string>& env) {
  plugin::PluginConfig config;
  std::string file = f.config_file;
  if (file.empty() && env.count("CONFIG_FILE")) file = env.at("CONFIG_FILE");
  if (!file.empty()) {
    std::ifstream in(file);
    if (!in) return ErrnoToStatus(errno, "read config file", file);
    std::stringstream text;
    text << in.rdbuf();
    GPUNODE_ASSIGN_OR_RETURN(config, plugin::ParseConfig(text.str(), file));
  }
  GPUNODE_RETURN_IF_ERROR(plugin::ApplyEnvironment(env, &config));
  if (!f.mig_strategy.empty()) {
    GPUNODE_ASSIGN_OR_RETURN(config.mig_strategy, plugin::ParseMigStrategy(f.mig_strategy));
  }
  if (!f.device_list_strategy.empty()) {
    GPUNODE_ASSIGN_OR_RETURN(config.device_list, plugin::ParseDeviceListStrategy(f.device_list_strategy));
  }
  if (!f.device_id_strategy.empty()) {
    GPUNODE_ASSIGN_OR_RETURN(config.device_id, plugin::ParseDeviceIdStrategy(f.device_id_strategy));
  }
  if (!f.pass_device_specs.empty()) {
    GPUNODE_ASSIGN_OR_RETURN(config.pass_device_specs, ParseGoBool("--pass-device-specs", f.pass_device_specs));
  }
  if (!f.fail_on_init_error.empty()) {
    GPUNODE_ASSIGN_OR_RETURN(config.fail_on_init_error, ParseGoBool("--fail-on-init-error", f.fail_on_init_error));
  }
  GPUNODE_RETURN_IF_ERROR(plugin::ValidateConfig(config));
  return config;
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
  const auto env = Environment();
  auto config = LoadConfig(flags, env);
  if (!config.ok()) {
    PrintError(config.status());
    return config.status().code() == absl::StatusCode::kUnimplemented ? kExitFailed : kExitUsage;
  }
  for (const std::string& w : config->warnings) Log("config: " + w);
  auto recovery = ParseDuration(flags.health_recovery);
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

  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGHUP, OnSignal);
  for (;;) {
    auto session = NodeSession::Open(global);
    if (!session.ok()) {
      PrintError(session.status());
      return kExitUsage;
    }
    (*session)->probe_options().load_cuda = false;  // NVML gives the CUDA version; no libcuda in the plugin
    (*session)->probe_options().query_topology = true;
    auto inv = (*session)->Inventory();
    if (!inv.ok()) {
      PrintError(inv.status());
      return kExitFailed;
    }
    if (!inv->driver.status.ok()) {
      const std::string msg = absl::StrCat("NVML: ", inv->driver.status.message(), " (run `gpunode doctor`)");
      if (config->fail_on_init_error || flags.print) {
        PrintError(msg);
        return kExitFailed;
      }
      Log(msg + "; failOnInitError is false: waiting without devices");
    }
    auto resources = plugin::BuildResources(*inv, *config);
    if (!resources.ok()) {
      PrintError(resources.status());
      return kExitFailed;
    }
    if (flags.print) {
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
    std::vector<std::string> control;
    for (const DeviceNode& n : inv->kernel.device_nodes) {
      const bool per_gpu = n.path.size() > 11 && std::isdigit(static_cast<unsigned char>(n.path[11]));
      if (n.present && !per_gpu) control.push_back(n.path);
    }
    auto links = std::make_shared<plugin::LinkMatrix>(plugin::BuildLinkMatrix(*inv));
    std::vector<std::pair<unsigned, std::string>> watched;
    for (const GpuInfo& g : inv->driver.gpus) watched.emplace_back(g.index, g.uuid);
    size_t count = 0;
    for (const plugin::Resource& r : *resources) count += r.devices.size();
    if (count == 0) Log("no devices found; serving nothing until a signal (the node has no usable GPU)");

    // MPS sharing: one control daemon per shared resource, started before the resource is served
    // (stopped at the end of this round: a reload starts the daemons its config asks for).
    plugin::MpsManager mps((*session)->fs(), {}, Log);
    mps.Start();
    if (Status mst = mps.Apply(*config, *resources); !mst.ok()) {
      PrintError(mst);
      return absl::IsNotFound(mst) || absl::IsFailedPrecondition(mst) ? kExitUsage : kExitFailed;
    }

    plugin::ManagerOptions mo;
    mo.plugin_dir = flags.kubelet_dir;
    mo.kubelet_socket = flags.kubelet_socket;
    plugin::PluginManager manager(*std::move(resources), *config, control, links, mo, Log);
    std::unique_ptr<NvmlLibrary> nvml;
    std::unique_ptr<plugin::HealthMonitor> monitor;
    if (!watched.empty()) {
      auto lib = NvmlLibrary::Open((*session)->probe_options().nvml_library);
      if (lib.ok()) {
        nvml = *std::move(lib);
        monitor = std::make_unique<plugin::HealthMonitor>(
            *nvml, watched, *health,
            [&manager](const plugin::HealthEvent& e) { manager.SetHealth(e.uuid, e.healthy, e.reason); });
        monitor->Start();
      } else {
        Log(absl::StrCat("health checks disabled: ", lib.status().message()));
      }
    }
    Log(absl::StrCat("starting: ", count, " devices, MIG strategy ", plugin::MigStrategyName(config->mig_strategy),
                     ", sharing ", plugin::SharingStrategyName(config->sharing.strategy), ", kubelet dir ",
                     flags.kubelet_dir));
    Status st = manager.Run(g_stop);
    if (monitor) monitor->Stop();
    mps.Stop();
    if (!st.ok()) {
      PrintError(st);
      return kExitFailed;
    }
    if (!g_reload) break;
    g_reload = false;
    g_stop = false;
    Log("SIGHUP: reloading the configuration and the devices");
    auto again = LoadConfig(flags, Environment());
    if (!again.ok()) {
      Log(absl::StrCat("reload: ", again.status().message(), "; keeping the previous configuration"));
    } else {
      config = *std::move(again);
    }
  }
  Log("stopped");
  return kExitOk;
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
