// gpunode plugin: the kubelet device plugin for nvidia.com/gpu (src/deviceplugin, src/devices, docs/plugin.md).
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

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/agent/components.h"
#include "src/cli/common.h"
#include "src/cli/nvidia_flags.h"
#include "src/deviceplugin/server.h"
#include "src/devices/config.h"
#include "src/devices/devices.h"
#include "src/devices/health.h"
#include "src/devices/mps.h"
#include "src/devices/topology.h"
#include "src/gpu/nvml.h"
#include "src/lifecycle/harness.h"


namespace gpunode::cli {
namespace {


struct PluginFlags {
  std::string kubelet_dir = deviceplugin::kDefaultPluginDir;
  std::string kubelet_socket;
  std::string config_file;
  std::string mig_strategy, device_list_strategy, device_id_strategy;
  std::vector<std::string> device_list;  // --device-list-strategy, repeatable and comma-separated
  // "" = not given; a bare flag is "true"; --flag=VALUE as Go's strconv.ParseBool reads it
  std::string pass_device_specs, fail_on_init_error;
  std::string health_recovery = "5m";
  bool print = false;
};


// NVIDIA's plugin flags beyond gpunode's own options (NVIDIA/k8s-device-plugin v0.19.0,
// cmd/nvidia-device-plugin/main.go; docs/nvidia-flags.md). The settings NVIDIA's plugin also
// reads from the environment are wired by exporting that variable when the flag is given: the
// component resolves flag/environment, then config file, at every (re)start.
void AddNvidiaPluginFlags(CLI::App* cmd, NvidiaFlags& nv) {
  using K = NvidiaKind;
  nv.Add(cmd, {"--driver-root,--nvidia-driver-root", {"NVIDIA_DRIVER_ROOT"}, K::kString,
               "the driver's root on the host: / or /run/nvidia/driver (device paths, the MPS control program)"});
  nv.Add(cmd, {"--dev-root,--nvidia-dev-root", {"NVIDIA_DEV_ROOT"}, K::kString,
               "the root of the device nodes on the host (default: the driver root)"});
  nv.Add(cmd, {"--cdi-annotation-prefix", {"CDI_ANNOTATION_PREFIX"}, K::kString,
               "prefix of the CDI annotations of --device-list-strategy cdi-annotations (default cdi.k8s.io/)"});
  nv.Add(cmd, {"--mps-root", {"MPS_ROOT"}, K::kString,
               "host folder of the MPS daemons' pipes, logs and shm (default /run/nvidia/mps)"});
  nv.Add(cmd, {"--device-discovery-strategy", {"DEVICE_DISCOVERY_STRATEGY"}, K::kString,
               "auto, nvml or tegra; gpunode discovers GPUs through NVML"});
  const std::string toolkit_env =
      "gpunode's Allocate does not ask the container toolkit for it (NVIDIA_GDRCOPY / NVIDIA_GDS / NVIDIA_MOFED)";
  nv.Add(cmd, {"--gdrcopy-enabled", {"GDRCOPY_ENABLED"}, K::kBool,
               "GDRCopy in GPU containers (NVIDIA's default: true since v0.19.0)", toolkit_env});
  nv.Add(cmd, {"--gds-enabled", {"GDS_ENABLED"}, K::kBool,
               "GPUDirect Storage in GPU containers (NVIDIA's default: true since v0.19.0)", toolkit_env});
  nv.Add(cmd, {"--mofed-enabled", {"MOFED_ENABLED"}, K::kBool,
               "MOFED in GPU containers (NVIDIA's default: true since v0.19.0)", toolkit_env});
  nv.Add(cmd, {"--nvidia-cdi-hook-path,--nvidia-ctk-path", {"NVIDIA_CDI_HOOK_PATH", "NVIDIA_CTK_PATH"}, K::kString,
               "nvidia-cdi-hook in generated CDI specs",
               "the plugin generates no CDI spec; `gpunode cdi generate` writes specs that call gpunode's own hooks"});
  nv.Add(cmd, {"--driver-root-ctr-path,--container-driver-root", {"DRIVER_ROOT_CTR_PATH", "CONTAINER_DRIVER_ROOT"},
               K::kString, "where the driver root is mounted in this container",
               "gpunode reads the host's files through --host-root (GPUNODE_HOST_ROOT)"});
  nv.Add(cmd, {"--imex-channel-ids", {"IMEX_CHANNEL_IDS"}, K::kStringList, "IMEX channels to inject",
               "gpunode does not inject IMEX channels"});
  nv.Add(cmd, {"--imex-required", {"IMEX_REQUIRED"}, K::kBool, "IMEX channels are required",
               "gpunode does not inject IMEX channels"});
  nv.Add(cmd, {"--cdi-feature-flags", {"CDI_FEATURE_FLAGS"}, K::kStringList, "CDI spec generation features",
               "the plugin generates no CDI spec (`gpunode cdi generate` does, with its own options)"});
}

// Checks NVIDIA's flags, exports the wired ones given on the command line as the variables the
// component reads, and returns the notes of those that do not apply.
StatusOr<std::vector<std::string>> ResolveNvidiaPluginFlags(const NvidiaFlags& nv) {
  GPUNODE_ASSIGN_OR_RETURN(std::vector<std::string> notes, nv.Check());
  for (const auto& [key, env] : std::vector<std::pair<std::string, std::string>>{
           {"driver-root", "NVIDIA_DRIVER_ROOT"},
           {"dev-root", "NVIDIA_DEV_ROOT"},
           {"cdi-annotation-prefix", "CDI_ANNOTATION_PREFIX"},
           {"mps-root", "MPS_ROOT"}}) {
    std::string source;
    std::optional<std::string> v = nv.Value(key, &source);
    if (v && source == "--" + key) ::setenv(env.c_str(), v->c_str(), 1);  // before any thread starts
  }
  std::string source;
  if (auto d = nv.Value("device-discovery-strategy", &source)) {
    if (*d != "auto" && *d != "nvml" && *d != "tegra") {
      return absl::InvalidArgumentError(
          absl::StrCat("invalid ", source, " \"", *d, "\": want auto, nvml or tegra"));
    }
    if (*d == "tegra") {
      notes.push_back(nv.Note("device-discovery-strategy",
                              "gpunode discovers GPUs through NVML only (Tegra's integrated GPUs are not supported)"));
    }
  }
  return notes;
}

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
StatusOr<devices::PluginConfig> LoadConfig(const PluginFlags& f, const std::map<std::string, std::string>& env) {
  if (!f.pass_device_specs.empty()) {
    GPUNODE_RETURN_IF_ERROR(ParseGoBool("--pass-device-specs", f.pass_device_specs).status());
  }
  if (!f.fail_on_init_error.empty()) {
    GPUNODE_RETURN_IF_ERROR(ParseGoBool("--fail-on-init-error", f.fail_on_init_error).status());
  }
  return agent::ResolvePluginConfig(SectionOf(f, env), "", env);
}

std::string ListStrategyText(const devices::PluginConfig& c) {
  std::vector<std::string> s;
  if (c.device_list.envvar) s.push_back("envvar");
  if (c.device_list.volume_mounts) s.push_back("volume-mounts");
  if (c.device_list.cdi_annotations) s.push_back("cdi-annotations");
  if (c.device_list.cdi_cri) s.push_back("cdi-cri");
  return absl::StrJoin(s, ",");
}

nlohmann::ordered_json ResourcesJson(const std::vector<devices::Resource>& resources, const devices::PluginConfig& c) {
  nlohmann::ordered_json rs = nlohmann::ordered_json::array();
  for (const devices::Resource& r : resources) {
    nlohmann::ordered_json devs = nlohmann::ordered_json::array();
    for (const devices::PluginDevice& d : r.devices) {
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
          {"migStrategy", devices::MigStrategyName(c.mig_strategy)},
          {"deviceIdStrategy", c.device_id == devices::DeviceIdStrategy::kUuid ? "uuid" : "index"},
          {"deviceListStrategy", ListStrategyText(c)},
          {"passDeviceSpecs", c.pass_device_specs},
          {"failOnInitError", c.fail_on_init_error},
          {"sharing", devices::SharingStrategyName(c.sharing.strategy)},
          {"resources", rs}};
}

int RunPlugin(const GlobalOptions& global, PluginFlags flags, const NvidiaFlags& nv) {
  // A long-running daemon with a handful of threads: two malloc arenas, not one per thread.
  ::mallopt(M_ARENA_MAX, 2);
  if (!flags.device_list.empty()) flags.device_list_strategy = absl::StrJoin(flags.device_list, ",");
  auto notes = ResolveNvidiaPluginFlags(nv);
  if (!notes.ok()) {
    PrintError(notes.status());
    return kExitUsage;
  }
  {
    // Each setting that does not apply: one line at start (a SIGHUP restart does not repeat it).
    lifecycle::Log log;
    log.set_program("gpunode plugin");
    for (const std::string& note : *notes) log.Warn("plugin", note);
  }
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
  auto health = devices::HealthOptionsFromEnvironment(env);
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
    auto inv = (*session)->InventoryWithNvml();
    if (!inv.ok()) {
      PrintError(inv.status());
      return kExitFailed;
    }
    auto resources = devices::BuildResources(*inv, *config);
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
      for (const devices::Resource& r : *resources) {
        std::cout << r.name << " (" << r.devices.size() << " devices, socket " << r.socket_name << ")\n";
        for (const devices::PluginDevice& d : r.devices) {
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
  auto nv = std::make_shared<NvidiaFlags>("NVIDIA's device plugin");
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
  cmd->add_option("--device-list-strategy", f->device_list,
                  "envvar, volume-mounts, cdi-annotations, cdi-cri (repeatable or comma list; env DEVICE_LIST_STRATEGY)");
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
  AddNvidiaPluginFlags(cmd, *nv);
  cmd->footer(
      "Environment as NVIDIA's plugin: MIG_STRATEGY, DEVICE_LIST_STRATEGY, DEVICE_ID_STRATEGY, PASS_DEVICE_SPECS,\n"
      "FAIL_ON_INIT_ERROR, NVIDIA_DRIVER_ROOT, NVIDIA_DEV_ROOT, CDI_ANNOTATION_PREFIX, CONFIG_FILE,\n"
      "DP_DISABLE_HEALTHCHECKS (all | XIDs to ignore), DP_ENABLE_HEALTHCHECKS (all | XIDs always fatal).\n"
      "Precedence: flag, environment, config file, default. SIGHUP reloads the config; SIGTERM stops.\n"
      "Every flag and variable of NVIDIA's plugin v0.17/v0.18 is accepted; one gpunode has nothing to do\n"
      "with is logged once as \"does not apply\" and ignored (docs/nvidia-flags.md).\n"
      "Examples:\n"
      "  gpunode plugin                                   serve and register at the kubelet\n"
      "  gpunode --simulate dgx-h200 plugin --print       what a simulated 8x H200 node advertises\n"
      "  gpunode plugin --config-file time-slicing.yaml   share each GPU (sharing.timeSlicing.replicas)");
  cmd->callback([&global, f, nv, exit_code] { *exit_code = RunPlugin(global, *f, *nv); });
}

}  // namespace gpunode::cli
