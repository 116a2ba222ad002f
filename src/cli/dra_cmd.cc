// gpunode dra-plugin: gpunode as a DRA driver (src/dra, docs/dra.md) outside the agent, with the
// flags and environment of NVIDIA's gpu-kubelet-plugin (sigs.k8s.io/dra-driver-nvidia-gpu,
// cmd/gpu-kubelet-plugin/main.go), so a manifest written for NVIDIA's driver runs it unchanged.
// Installed as `gpu-kubelet-plugin` (a link), gpunode is this command.
#include <malloc.h>

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "src/agent/components.h"
#include "src/cli/common.h"
#include "src/dra/device_model.h"
#include "src/dra/resource_slices.h"

namespace gpunode::cli {
namespace {

struct DraFlags {
  std::string node_name;
  std::string kubeconfig;
  std::string driver_name = dra::kDefaultDriverName;
  std::string cdi_root = "/etc/cdi";  // NVIDIA's default
  std::string driver_root = "/";
  std::string dev_root;
  std::string registrar_dir = "/var/lib/kubelet/plugins_registry";
  std::string plugins_dir = "/var/lib/kubelet/plugins";
  std::string hook_path = "/usr/bin/gpunode";
  std::vector<std::string> disable_hooks;
  std::string xids;  // comma list
  int healthcheck_port = -1;
  std::string health_recovery = "5m";
  bool print = false;
  // NVIDIA's flags that gpunode accepts and has nothing to do with (logged once).
  std::string image_name, container_driver_root, feature_gates, http_endpoint, metrics_path;
};

int RunDraPlugin(const GlobalOptions& global, const DraFlags& f) {
  ::mallopt(M_ARENA_MAX, 2);
  agent::AgentConfig c;
  c.validator.enabled = false;
  c.dra.enabled = true;
  c.dra.driver_name = f.driver_name;
  c.dra.cdi_root = f.cdi_root;
  c.dra.registrar_dir = f.registrar_dir;
  c.dra.plugins_dir = f.plugins_dir;
  c.dra.driver_root = f.driver_root;
  c.dra.dev_root = f.dev_root;
  c.dra.hook_path = f.hook_path;
  c.dra.disable_hooks = f.disable_hooks;
  for (absl::string_view x : absl::StrSplit(f.xids, ',', absl::SkipWhitespace())) {
    unsigned v = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(x), &v) || v == 0) {
      PrintError(absl::StrCat("--additional-xids-to-ignore: \"", x, "\" is not an XID number"));
      return kExitUsage;
    }
    c.dra.additional_xids_to_ignore.push_back(v);
  }
  auto recovery = agent::ParseDuration(f.health_recovery);
  if (!recovery.ok()) {
    PrintError(absl::StrCat("--health-recovery: ", recovery.status().message()));
    return kExitUsage;
  }
  c.dra.health_recovery = *recovery;
  auto session = NodeSession::Open(global);
  if (!session.ok()) {
    PrintError(session.status());
    return kExitUsage;
  }
  (*session)->probe_options().load_cuda = false;
  (*session)->probe_options().live_metrics = false;
  if (f.print) {
    // What the node's ResourceSlices would say (no API server needed).
    auto inv = (*session)->InventoryWithNvml();
    if (!inv.ok()) {
      PrintError(inv.status());
      return kExitFailed;
    }
    auto format = ParseOutputFormat(global.output);
    if (!format.ok()) {
      PrintError(format.status());
      return kExitUsage;
    }
    std::vector<std::string> problems;
    auto compat = compat::LoadBuiltin(compat::Sections::kCudaTables);  // MaxCudaOfDriver only
    const std::vector<dra::DraDevice> devices =
        agent::DraDevicesOfNode(*inv, compat.ok() ? &*compat : nullptr, &problems);
    for (const std::string& p : problems) std::cerr << "warning: " << p << "\n";
    const std::string node = f.node_name.empty() ? "NODE" : f.node_name;
    if (*format != OutputFormat::kTable) {
      nlohmann::ordered_json list = {{"apiVersion", "v1"}, {"kind", "List"}, {"items", nlohmann::ordered_json::array()}};
      dra::SliceSpec spec;
      spec.driver = f.driver_name;
      spec.node = node;
      for (const nlohmann::json& s : dra::BuildResourceSlices(devices, spec)) list["items"].push_back(nlohmann::ordered_json::parse(s.dump()));
      PrintDocument(list, *format);
    } else {
      std::cout << "driver " << f.driver_name << ", pool " << node << ": " << devices.size() << " devices\n";
      for (const dra::DraDevice& d : devices) {
        auto mem = d.capacity.find("memory");
        std::cout << "  " << d.name << "  " << d.type << "  " << d.uuid
                  << (mem == d.capacity.end() ? "" : "  memory " + mem->second)
                  << (d.profile.empty() ? "" : "  profile " + d.profile) << "\n";
      }
    }
    return kExitOk;
  }
  if (f.node_name.empty()) {
    PrintError("--node-name (or $NODE_NAME) is required: the pool of ResourceSlices is named after the node");
    return kExitUsage;
  }
  auto conn = kube::ResolveConnection(f.kubeconfig);
  if (!conn.ok()) {
    PrintError(absl::StrCat("the Kubernetes API: ", conn.status().message()));
    return kExitUsage;
  }
  {
    lifecycle::Log log;
    log.set_program("gpunode dra-plugin");
    for (const auto& [flag, value] : std::vector<std::pair<const char*, std::string>>{
             {"--image-name", f.image_name}, {"--container-driver-root", f.container_driver_root},
             {"--feature-gates", f.feature_gates}, {"--http-endpoint", f.http_endpoint},
             {"--metrics-path", f.metrics_path}}) {
      if (!value.empty()) log.Warn("dra", absl::StrCat(flag, " does not apply to gpunode; ignored"));
    }
    if (f.healthcheck_port >= 0) {
      log.Warn("dra", absl::StrCat("--healthcheck-port ", f.healthcheck_port,
                                   ": gpunode serves no gRPC health service yet; ignored (the agent's /healthz covers dra)"));
    }
  }
  return RunComponentCommand(global, **session, c, "dra", f.node_name, std::make_unique<kube::Client>(*conn));
}

}  // namespace

void AddDraPluginCommand(CLI::App& app, GlobalOptions& global, int* exit_code) {
  auto f = std::make_shared<DraFlags>();
  CLI::App* cmd = app.add_subcommand(
      "dra-plugin",
      "Kubernetes DRA driver for gpu.nvidia.com: ResourceSlices of this node's GPUs, claims prepared through CDI (docs/dra.md)");
  cmd->add_option("--node-name", f->node_name, "This node's name: the pool of its ResourceSlices")->envname("NODE_NAME");
  cmd->add_option("--kubeconfig", f->kubeconfig, "Kubeconfig (default: in-cluster service account)")->envname("KUBECONFIG");
  cmd->add_option("--driver-name", f->driver_name, "The DRA driver name DeviceClasses select")->capture_default_str();
  cmd->add_option("--cdi-root", f->cdi_root, "Where the per-claim CDI specs are written")
      ->envname("CDI_ROOT")
      ->capture_default_str();
  cmd->add_option("--nvidia-driver-root", f->driver_root, "The driver's root on the host (/ or /run/nvidia/driver)")
      ->envname("NVIDIA_DRIVER_ROOT")
      ->capture_default_str();
  cmd->add_option("--dev-root", f->dev_root, "The root of the device nodes on the host (default: the driver root)")
      ->envname("NVIDIA_DEV_ROOT");
  cmd->add_option("--kubelet-registrar-directory-path", f->registrar_dir, "The kubelet's plugin registry folder")
      ->envname("KUBELET_REGISTRAR_DIRECTORY_PATH")
      ->capture_default_str();
  cmd->add_option("--kubelet-plugins-directory-path", f->plugins_dir,
                  "The kubelet's plugins folder (the node service socket and the checkpoint go below it)")
      ->envname("KUBELET_PLUGINS_DIRECTORY_PATH")
      ->capture_default_str();
  cmd->add_option("--hook-path", f->hook_path, "gpunode's path on the host, for the CDI specs' hooks")->capture_default_str();
  cmd->add_option("--disable-hook", f->disable_hooks, "Leave a CDI hook out: create-symlinks, update-ldcache or all")
      ->check(CLI::IsMember({"create-symlinks", "update-ldcache", "all"}));
  cmd->add_option("--additional-xids-to-ignore", f->xids, "Comma list of XIDs that do not taint a GPU")
      ->envname("ADDITIONAL_XIDS_TO_IGNORE");
  cmd->add_option("--healthcheck-port", f->healthcheck_port, "NVIDIA's gRPC health port (accepted; not served yet)")
      ->envname("HEALTHCHECK_PORT");
  cmd->add_option("--health-recovery", f->health_recovery,
                  "Quiet period after which a tainted GPU that answers normally loses its taint")
      ->capture_default_str();
  cmd->add_option("--image-name", f->image_name, "NVIDIA's (not used by gpunode)")->envname("IMAGE_NAME");
  cmd->add_option("--container-driver-root", f->container_driver_root, "NVIDIA's (not used by gpunode)")
      ->envname("CONTAINER_DRIVER_ROOT");
  cmd->add_option("--feature-gates", f->feature_gates, "NVIDIA's (not used by gpunode)")->envname("FEATURE_GATES");
  cmd->add_option("--http-endpoint", f->http_endpoint, "NVIDIA's (not used by gpunode)")->envname("HTTP_ENDPOINT");
  cmd->add_option("--metrics-path", f->metrics_path, "NVIDIA's (not used by gpunode)")->envname("METRICS_PATH");
  cmd->add_flag("--print", f->print, "Print the ResourceSlices this node would publish, then exit (-o json|yaml)");
  cmd->footer(
      "The driver's devices carry NVIDIA's names (gpu-<minor>, gpu-<minor>-mig-<profile>-<id>-<start>),\n"
      "attributes and opaque config (resource.nvidia.com/v1beta1 GpuConfig, MigDeviceConfig), so DeviceClasses\n"
      "and claims written for NVIDIA's gpu-kubelet-plugin work unchanged. SIGTERM stops.\n"
      "Examples:\n"
      "  gpunode --simulate dgx-h200 dra-plugin --print            the devices of a simulated 8x H200 node\n"
      "  gpunode dra-plugin --print -o yaml --node-name n1          the ResourceSlices it would publish\n"
      "  gpunode dra-plugin --node-name $NODE_NAME --cdi-root /var/run/cdi");
  cmd->callback([&global, f, exit_code] { *exit_code = RunDraPlugin(global, *f); });
}

}  // namespace gpunode::cli
