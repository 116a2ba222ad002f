// `gpunode agent --config FILE`: one YAML document with a section per component. Every key has
// NVIDIA's default (the ClusterPolicy's, the device plugin's, dcgm-exporter's, GFD's), so an empty
// file (or none) runs plugin, labels, exporter and validator; cdi and runtime are opt-in.
// docs/agent.md documents every key. Parsing is strict: an unknown key, a wrong type or a bad
// duration is an error naming the file, the line and the key path.
#ifndef GPUNODE_AGENT_CONFIG_H_
#define GPUNODE_AGENT_CONFIG_H_

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "src/base/status.h"

namespace gpunode::agent {

struct KubernetesSection {
  bool enabled = true;     // Node labels, the GpuStackReady condition, Events, the Node watch
  std::string kubeconfig;  // "": in-cluster service account (or $KUBECONFIG)
  std::string daemonset;   // NAMESPACE/NAME: its deletion makes a stop an uninstall
  std::vector<std::string> remove_on_uninstall;  // files removed then (the CDI spec)
};

// A step that runs once at start (and again when the driver changes): `gpunode <args>`.
struct OneShotSection {
  bool enabled = false;
  // After the global options, e.g. [cdi, generate, --driver-root, /]: only `cdi generate` and
  // `runtime configure` with the flags the chart renders (src/agent/step_args.h).
  std::vector<std::string> args;
  // Global options for this step instead of the agent's own (--host-root, --nvml-library,
  // --cuda-library only): e.g. a simulated node's CDI spec is generated with --host-root / so that
  // it names host paths. Fixed while the agent runs (a reload that changes them is refused).
  std::vector<std::string> global_args;
};

struct PluginSection {
  bool enabled = true;
  std::string kubelet_dir = "/var/lib/kubelet/device-plugins";
  std::string kubelet_socket;  // "": <kubeletDir>/kubelet.sock
  std::string config_file;     // NVIDIA's device-plugin config (v1); "" = none
  // Named configs for the node label nvidia.com/device-plugin.config=<name>: the files of a
  // folder (a ConfigMap mounted as a volume, one key per config), as NVIDIA's config-manager.
  std::string config_dir;
  std::string default_config;  // the name used when the node has no such label
  std::chrono::milliseconds health_recovery{std::chrono::minutes(5)};
  // Settings as NVIDIA's flags ("" = not set: environment, then config file, then default).
  std::string mig_strategy, device_list_strategy, device_id_strategy, pass_device_specs, fail_on_init_error;
};

struct LabelsSection {
  bool enabled = true;
  bool node_labels = true;     // straight onto the Node (needs kubernetes.enabled)
  std::string features_file;   // also write NFD's features file there ("" = no)
  std::chrono::milliseconds interval{std::chrono::seconds(60)};
};

struct ExporterSection {
  bool enabled = true;
  std::string listen = ":9400";
  std::chrono::milliseconds collect_interval{30000};
  bool kubernetes = false;  // pod attribution (pod-resources socket)
  std::string pod_resources_socket = "/var/lib/kubelet/pod-resources/kubelet.sock";
  std::string collectors;       // counters CSV ("" = dcgm-exporter's defaults)
  std::string web_config_file;  // TLS / basic auth
  std::string hostname_label = "Hostname";  // "" leaves it out (dcgm-exporter -n)
  std::vector<std::string> resource_names;  // extra resources attributed to pods
  // The GPU pods' own labels and UID from the API server (dcgm-exporter's
  // --kubernetes-enable-pod-labels, --kubernetes-pod-label-allowlist-regex,
  // --kubernetes-enable-pod-uid; src/exporter/pod_metadata.h). Need kubernetes.enabled.
  bool pod_labels = false;
  std::vector<std::string> pod_label_allowlist;  // RE2 patterns; none: every label
  bool pod_uid = false;
};

struct ValidatorSection {
  bool enabled = true;
  bool cuda = true;  // check the CUDA layer too (cuInit, in a child process: libcuda stays out of the agent)
  std::chrono::milliseconds interval{std::chrono::minutes(5)};  // re-check while passing
  std::chrono::milliseconds retry{std::chrono::seconds(15)};    // re-check while failing
  // Whether a failure also makes the plugin advertise every GPU Unhealthy (allocatable 0).
  bool gate = true;
};

// nvidia.com/mig.config=<name> on the Node applies that layout of a mig-parted config file
// (docs/mig.md) through NVML, then the plugin and labels start again over the new devices.
struct MigSection {
  std::string config_file;  // "" = the label is ignored (logged once)
  bool allow_real = false;  // change MIG on real GPUs (never on this project's GPU machine)
};

// The DRA kubelet plugin (src/dra, docs/dra.md): this node's GPUs as ResourceSlices of the driver,
// claims prepared as one CDI spec each. Off by default (the device plugin serves nvidia.com/gpu);
// the names of NVIDIA's gpu-kubelet-plugin flags in the comments.
struct DraSection {
  bool enabled = false;
  std::string driver_name = "gpu.nvidia.com";
  std::string cdi_root = "/var/run/cdi";                        // --cdi-root (transient specs)
  std::string registrar_dir = "/var/lib/kubelet/plugins_registry";  // --kubelet-registrar-directory-path
  std::string plugins_dir = "/var/lib/kubelet/plugins";         // --kubelet-plugins-directory-path
  std::string driver_root = "/";                                // --nvidia-driver-root (host path)
  // The root the driver files are found under, as mounted here: "" = the agent's --host-root; "/"
  // when the driver root is mounted at its host path (the chart's simulated nodes).
  std::string host_root;
  std::string dev_root;                                         // "": the driver root
  std::string hook_path = "/usr/bin/gpunode";  // the CDI hooks' program on the host
  std::vector<std::string> disable_hooks;      // create-symlinks, update-ldcache, all
  std::vector<unsigned> additional_xids_to_ignore;  // --additional-xids-to-ignore
  std::chrono::milliseconds health_recovery{std::chrono::minutes(5)};  // a taint goes after this quiet
  // An MPS claim's daemon gets its claim's shm folder as /dev/shm in a private mount namespace
  // (needs CAP_SYS_ADMIN, as NVIDIA's daemon pod has). Off only where the agent holds no
  // capability (the chart's simulated nodes): the daemon then shares the agent's /dev/shm.
  bool mps_private_shm = true;
};

struct AgentConfig {
  std::string node_name;  // "": $NODE_NAME
  std::string log_format = "text";  // text | json
  std::string health_listen = ":9401";  // /healthz, /readyz, /metrics when the exporter is off; "": no port
  // Privilege separation: what healthListen and exporter.listen serve is also written into this
  // folder for `gpunode exporter --from-dir` in an unprivileged container (src/exporter/publish.h);
  // "" = off. With both listen addresses "" the agent opens no TCP port.
  std::string publish_dir;
  std::chrono::milliseconds watch_config{std::chrono::seconds(2)};  // the config file's mtime
  // How long a stop waits for the components (then the stuck ones are named and left behind, so
  // cleanup and exit come before the kubelet's SIGKILL; the chart's grace period is 30 s).
  std::chrono::milliseconds stop_timeout{std::chrono::seconds(10)};
  KubernetesSection kubernetes;
  OneShotSection cdi{false, {"cdi", "generate", "--output", "/var/run/cdi/nvidia.yaml"}, {}};
  OneShotSection runtime{false, {"runtime", "configure", "--runtime", "containerd", "--cdi"}, {}};
  PluginSection plugin;
  LabelsSection labels;
  ExporterSection exporter;
  ValidatorSection validator;
  MigSection mig;
  DraSection dra;
  // policyFile: a second file whose sections apply over this one for the keys it sets (an absolute
  // path; "" = none). The chart mounts there, as an optional ConfigMap, what gpunode's controller
  // writes from NVIDIA's ClusterPolicy (src/upgrade/cluster_policy.h). A missing file is no overlay.
  std::string policy_file;
  std::string source;         // the file it came from ("" = defaults)
  std::string policy_source;  // the policy file applied ("" = none: not set, or not there)
  std::string policy_origin;  // its `origin:` (what wrote it)
};

// Parses the YAML text. `source` names the file in errors. The policy file is not read here.
StatusOr<AgentConfig> ParseAgentConfig(absl::string_view text, absl::string_view source);

// The policy file's text (kind AgentPolicy) applied over `c`: each key it sets replaces the
// config's; the rest stays. It may set only what a ClusterPolicy says — cdi.enabled,
// runtime.enabled/args, plugin.enabled/configDir/defaultConfig/migStrategy/deviceListStrategy/
// deviceIdStrategy/passDeviceSpecs/failOnInitError, labels.enabled, exporter.enabled/collectors,
// validator.enabled/cuda, mig.configFile — with the same checks as the config (runtime.args
// through src/agent/step_args.h), and it must leave every value fixed while the agent runs as the
// config has it (--config, globalArgs, ...): a policy file never chooses what runs as root or
// where root writes. Errors name `source`, the line and the key; `c` is left unchanged then.
Status ApplyAgentPolicy(absl::string_view text, absl::string_view source, AgentConfig* c);

// Reads and parses a file, then its policyFile when that exists; "" gives the defaults.
StatusOr<AgentConfig> LoadAgentConfig(const std::string& path);

// "300s", "5m", "1h", "500ms" (Go's time.ParseDuration units we need; "0" and plain seconds too).
StatusOr<std::chrono::milliseconds> ParseDuration(absl::string_view text);

// The effective configuration, every key (`gpunode agent --print-config`; reloads compare sections).
nlohmann::ordered_json ConfigToJson(const AgentConfig& c);

// Whether `next` may replace the running config on a reload: the one-shot steps' values that
// choose code or where root writes (src/agent/step_args.h) must not change. FailedPrecondition
// naming the key, the flag and both values otherwise.
Status CheckReloadable(const AgentConfig& running, const AgentConfig& next);

// Whether the config switches component `name` on (its section's `enabled`).
bool ComponentEnabled(const AgentConfig& c, const std::string& name);

// The agent's component names, in start order.
const std::vector<std::string>& ComponentNames();

}  // namespace gpunode::agent

#endif  // GPUNODE_AGENT_CONFIG_H_
