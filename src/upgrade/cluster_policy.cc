#include "src/upgrade/cluster_policy.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "src/base/terminal.h"
#include "src/base/yaml_emitter.h"
#include "src/upgrade/cluster_policy_internal.h"

namespace gpunode::upgrade {
namespace cluster_policy_internal {

namespace {
constexpr int kMaxDepth = 32;                    // Kubernetes objects here are about 8 deep
constexpr size_t kMaxStringBytes = 64 * 1024;    // any one string (an env value, an annotation)
constexpr size_t kMaxMembers = 1024;             // members of one object, items of one array
constexpr size_t kMaxNodes = 100000;             // values in the whole object
constexpr size_t kMaxSummary = 80;

std::string ShortPath(const std::string& path) {
  return path.size() <= 160 ? path : absl::StrCat(path.substr(0, 157), "...");
}

// Every value of the object, before any of it is read: depth, sizes and count bounded, so no walk
// below recurses deeper than kMaxDepth or copies a 10 MiB string into a message.
Status CheckBounds(const nlohmann::json& v, const std::string& what, const std::string& path, int depth,
                   size_t* nodes) {
  auto error = [&](const std::string& message) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", path.empty() ? "" : absl::StrCat(ShortPath(path), ": "), message));
  };
  if (++*nodes > kMaxNodes) return error(absl::StrCat("more than ", kMaxNodes, " values in the object"));
  if (depth > kMaxDepth) return error(absl::StrCat("nested deeper than ", kMaxDepth, " levels"));
  if (v.is_string() && v.get_ref<const std::string&>().size() > kMaxStringBytes) {
    return error(absl::StrCat("a string of ", v.get_ref<const std::string&>().size(), " bytes (at most ",
                              kMaxStringBytes, ")"));
  }
  if (v.is_object()) {
    if (v.size() > kMaxMembers) return error(absl::StrCat(v.size(), " members (at most ", kMaxMembers, ")"));
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (it.key().size() > kMaxName) return error(absl::StrCat("a key of ", it.key().size(), " bytes"));
      GPUNODE_RETURN_IF_ERROR(CheckBounds(it.value(), what, path.empty() ? it.key() : absl::StrCat(path, ".", it.key()),
                                          depth + 1, nodes));
    }
  } else if (v.is_array()) {
    if (v.size() > kMaxMembers) return error(absl::StrCat(v.size(), " items (at most ", kMaxMembers, ")"));
    for (size_t i = 0; i < v.size(); ++i) {
      GPUNODE_RETURN_IF_ERROR(CheckBounds(v[i], what, absl::StrCat(path, "[", i, "]"), depth + 1, nodes));
    }
  }
  return absl::OkStatus();
}
}  // namespace

bool AsksForSomething(const nlohmann::json& v) {
  switch (v.type()) {
    case nlohmann::json::value_t::boolean: return v.get<bool>();
    case nlohmann::json::value_t::string: return !v.get_ref<const std::string&>().empty();
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned:
    case nlohmann::json::value_t::number_float: return v != 0;
    case nlohmann::json::value_t::array: return !v.empty();
    case nlohmann::json::value_t::object:
      for (const auto& [k, m] : v.items()) {
        if (AsksForSomething(m)) return true;
      }
      return false;
    default: return false;
  }
}

std::string Summary(const nlohmann::json& v) {
  std::string raw = v.is_string() ? v.get<std::string>() : v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (raw.size() > 4 * kMaxSummary) raw.resize(4 * kMaxSummary);
  std::string s = TerminalSafe(raw);
  if (s.size() <= kMaxSummary) return s;
  size_t cut = kMaxSummary - 3;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;  // a UTF-8 boundary
  return absl::StrCat(s.substr(0, cut), "...");
}

void Output::UnappliedMember(const kube::Fields& section, const std::string& key, const std::string& why) {
  if (!section.json().is_object() || !section.json().contains(key)) return;
  Unapplied(section.path().empty() ? key : absl::StrCat(section.path(), ".", key), section.json()[key], why);
}

void Output::Unknown(const kube::Fields& section, const std::set<std::string>& handled) {
  if (!section.json().is_object()) return;
  for (const auto& [key, value] : section.json().items()) {
    if (handled.count(key)) continue;
    Unapplied(section.path().empty() ? key : absl::StrCat(section.path(), ".", key), value,
              "not a field gpunode knows (a newer Operator's?)");
  }
}

std::string EnvString(const nlohmann::json& entry, const char* key) {
  if (!entry.is_object() || !entry.contains(key) || !entry[key].is_string()) return "";
  return entry[key].get<std::string>();
}

StatusOr<std::string> Name(const kube::Fields& f, const std::string& key) {
  GPUNODE_ASSIGN_OR_RETURN(std::string s, f.String(key));
  if (s.size() > kMaxName) return f.Error(absl::StrCat(key, ": ", s.size(), " bytes (at most ", kMaxName, ")"));
  return s;
}

StatusOr<std::optional<bool>> OptionalBool(const kube::Fields& f, const std::string& key) {
  if (!f.json().is_object() || !f.json().contains(key) || f.json()[key].is_null()) return std::optional<bool>();
  GPUNODE_ASSIGN_OR_RETURN(bool b, f.Bool(key));
  return std::optional<bool>(b);
}

StatusOr<nlohmann::json> EnvList(const kube::Fields& f, const std::string& key) {
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields list, f.Array(key));
  if (list.json().size() > kMaxList) return list.Error(absl::StrCat("more than ", kMaxList, " entries"));
  for (const kube::Fields& e : list.Elements()) {
    GPUNODE_ASSIGN_OR_RETURN(kube::Fields obj, e.AsObject());
    GPUNODE_ASSIGN_OR_RETURN(std::string name, Name(obj, "name"));
    if (name.empty()) return obj.Error("name: missing");
    GPUNODE_RETURN_IF_ERROR(obj.String("value").status());
  }
  return list.present() ? list.json() : nlohmann::json::array();
}

StatusOr<std::vector<std::string>> StringList(const kube::Fields& f, const std::string& key) {
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields list, f.Array(key));
  if (list.json().size() > kMaxList) return list.Error(absl::StrCat("more than ", kMaxList, " entries"));
  std::vector<std::string> out;
  for (const kube::Fields& e : list.Elements()) {
    if (!e.json().is_string()) return e.Error(absl::StrCat("expected a string, got ", kube::JsonTypeName(e.json())));
    out.push_back(e.json().get<std::string>());
  }
  return out;
}

}  // namespace cluster_policy_internal

namespace {
using namespace cluster_policy_internal;  // NOLINT: this file's own helpers
using J = nlohmann::ordered_json;

// A ConfigMap's name (a DNS subdomain) and one of its keys, as the API server allows them: what
// the controller reads and copies, and what the agent gets as a file name.
bool ConfigMapName(const std::string& s) {
  if (s.empty() || s.size() > 253) return false;
  for (char ch : s) {
    if (!absl::ascii_islower(ch) && !absl::ascii_isdigit(ch) && ch != '-' && ch != '.') return false;
  }
  return absl::ascii_isalnum(s.front()) && absl::ascii_isalnum(s.back());
}
bool ConfigMapKey(const std::string& s) {
  if (s.empty() || s.size() > 253 || s == "." || s == "..") return false;
  for (char ch : s) {
    if (!absl::ascii_isalnum(ch) && ch != '-' && ch != '_' && ch != '.') return false;
  }
  return true;
}

// `key` of `config` when it is a ConfigMap name (is_key false) or key (true); else the error.
StatusOr<std::string> ConfigMapField(const kube::Fields& config, const std::string& key, bool is_key) {
  GPUNODE_ASSIGN_OR_RETURN(std::string v, Name(config, key));
  if (!v.empty() && !(is_key ? ConfigMapKey(v) : ConfigMapName(v))) {
    return config.Error(absl::StrCat(key, ": \"", Summary(v), "\" is not a ConfigMap ", is_key ? "key" : "name"));
  }
  return v;
}

const char kOwnBinary[] = "gpunode's own binary serves it (a component of the agent): there is no image to pull";

// The node operands and what they become in the agent's policy file.
class Operands {
 public:
  Operands(const kube::Fields& spec, Output& out) : spec_(spec), out_(out) {}

  Status Run() {
    GPUNODE_RETURN_IF_ERROR(Operator());
    GPUNODE_RETURN_IF_ERROR(Toolkit());
    GPUNODE_RETURN_IF_ERROR(DevicePlugin());
    GPUNODE_RETURN_IF_ERROR(Exporter());
    GPUNODE_RETURN_IF_ERROR(Gfd());
    GPUNODE_RETURN_IF_ERROR(MigManager());
    GPUNODE_RETURN_IF_ERROR(Validator());
    GPUNODE_RETURN_IF_ERROR(NotRun());
    J policy{{"apiVersion", "gpunode/v1"}, {"kind", "AgentPolicy"},
             {"origin", absl::StrCat("ClusterPolicy ", out_.t().name, " generation ", out_.t().generation)}};
    for (const char* section : {"cdi", "runtime", "plugin", "labels", "exporter", "validator", "mig"}) {
      if (sections_.count(section)) policy[section] = sections_[section];
    }
    out_.t().agent_policy = std::move(policy);
    return absl::OkStatus();
  }

 private:
  // A section's `enabled` with NVIDIA's default when absent; the agent's key it becomes.
  StatusOr<bool> Switch(const kube::Fields& s, const std::string& name, bool fallback, const std::string& section,
                        const std::string& key = "enabled") {
    GPUNODE_ASSIGN_OR_RETURN(std::optional<bool> on, OptionalBool(s, "enabled"));
    const bool v = on.value_or(fallback);
    sections_[section][key] = v;
    out_.Applied(absl::StrCat("spec.", name, ".enabled"), on ? (v ? "true" : "false")
                 : absl::StrCat(v ? "true" : "false", " (absent: NVIDIA's default)"),
                 absl::StrCat("agent ", section, ".", key));
    return v;
  }

  // The image and pod fields of an operand gpunode replaces with a component of the agent.
  void Replaced(const kube::Fields& s, const std::string& component, std::set<std::string> handled) {
    for (const char* key : {"repository", "image", "version", "imagePullPolicy", "imagePullSecrets"}) {
      out_.UnappliedMember(s, key, kOwnBinary);
      handled.insert(key);
    }
    out_.UnappliedMember(s, "resources", "the agent container's resources are the chart's (one container for every component)");
    out_.UnappliedMember(s, "hostNetwork", "the agent pod's network is the chart's");
    out_.UnappliedMember(s, "args", absl::StrCat("NVIDIA's command line: the agent's ", component,
                                                 " takes its settings from the agent config"));
    if (!handled.count("env")) {
      out_.UnappliedMember(s, "env", absl::StrCat("NVIDIA's environment: the agent's ", component,
                                                  " takes its settings from the agent config"));
    }
    handled.insert({"enabled", "resources", "hostNetwork", "args", "env"});
    out_.Unknown(s, handled);
  }

  Status Operator() {
    GPUNODE_ASSIGN_OR_RETURN(kube::Fields op, spec_.Object("operator"));
    GPUNODE_ASSIGN_OR_RETURN(default_runtime_, Name(op, "defaultRuntime"));
    if (!default_runtime_.empty() && default_runtime_ != "containerd" && default_runtime_ != "docker" &&
        default_runtime_ != "crio") {
      return op.Error(absl::StrCat("defaultRuntime: \"", Summary(default_runtime_), "\" is not containerd, docker or crio"));
    }
    out_.UnappliedMember(op, "runtimeClass", "gpunode creates no RuntimeClass: GPUs reach containers through CDI "
                                             "under the default runtime (pods naming runtimeClassName need it kept)");
    out_.UnappliedMember(op, "initContainer", "the Operator's own init image: gpunode runs none");
    out_.UnappliedMember(op, "labels", "the Operator's own pods: gpunode's pods are the chart's");
    out_.UnappliedMember(op, "annotations", "the Operator's own pods: gpunode's pods are the chart's");
    out_.UnappliedMember(op, "metrics", "the Operator's own metrics: gpunode's controller and agent have their own");
    out_.UnappliedMember(op, "use_ocp_driver_toolkit", "OpenShift's Driver Toolkit builds: gpunode's driver DaemonSet "
                                                       "runs the driver image as given");
    out_.Unknown(op, {"defaultRuntime", "runtimeClass", "initContainer", "labels", "annotations", "metrics",
                      "use_ocp_driver_toolkit"});
    return absl::OkStatus();
  }

  // toolkit.enabled: the cdi step (the CDI spec) and the runtime step (the engine's config);
  // operator.defaultRuntime: the runtime step's --runtime; cdi.enabled: its --cdi.
  Status Toolkit() {
    GPUNODE_ASSIGN_OR_RETURN(kube::Fields tk, spec_.Object("toolkit"));
    GPUNODE_ASSIGN_OR_RETURN(kube::Fields cdi, spec_.Object("cdi"));
    GPUNODE_ASSIGN_OR_RETURN(bool on, Switch(tk, "toolkit", true, "runtime"));
    sections_["cdi"]["enabled"] = on;
    out_.t().applied.back().to = "agent cdi.enabled (the CDI spec) and runtime.enabled (the engine's config)";
    GPUNODE_ASSIGN_OR_RETURN(std::optional<bool> cdi_on, OptionalBool(cdi, "enabled"));
    if (!on) {
      if (!default_runtime_.empty()) {
        out_.Unapplied("spec.operator.defaultRuntime", default_runtime_, "toolkit.enabled is false: no runtime step");
      }
    } else {
      if (!default_runtime_.empty()) {
        sections_["runtime"]["args"] = J::array({"runtime", "configure", "--runtime", default_runtime_, "--cdi"});
        out_.Applied("spec.operator.defaultRuntime", default_runtime_, "agent runtime.args: --runtime (with --cdi)");
      }
      Replaced(tk, "cdi and runtime steps", {"installDir"});
      out_.UnappliedMember(tk, "installDir", "gpunode installs no runtime binaries on the host: the CDI spec's hooks "
                                             "call gpunode (the chart's cdi.hookPath)");
      if (cdi_on.value_or(true)) {
        out_.Applied("spec.cdi.enabled", cdi_on ? "true" : "true (absent: NVIDIA's default)",
                     "the runtime step enables CDI in the engine (--cdi)");
      }
    }
    if (cdi_on.has_value() && !*cdi_on) {
      out_.t().unapplied.push_back(
          {"spec.cdi.enabled", "false", "gpunode always uses CDI: its device plugin hands GPUs over as CDI devices"});
    }
    out_.UnappliedMember(cdi, "default", "deprecated and ignored by the Operator too");
    out_.UnappliedMember(cdi, "nriPluginEnabled", "no NRI plugin: gpunode's own containers get GPUs through the agent");
    out_.Unknown(cdi, {"enabled", "default", "nriPluginEnabled"});
    return absl::OkStatus();
  }

  // NVIDIA's device-plugin environment variables the agent has keys for.
  void PluginEnv(const kube::Fields& dp) {
    static const std::map<std::string, std::string> kKeys = {
        {"MIG_STRATEGY", "migStrategy"}, {"DEVICE_LIST_STRATEGY", "deviceListStrategy"},
        {"DEVICE_ID_STRATEGY", "deviceIdStrategy"}, {"PASS_DEVICE_SPECS", "passDeviceSpecs"},
        {"FAIL_ON_INIT_ERROR", "failOnInitError"}};
    static const std::set<std::string> kBools = {"1", "t", "T", "TRUE", "true", "True",
                                                 "0", "f", "F", "FALSE", "false", "False"};
    const nlohmann::json& env = dp.json().contains("env") ? dp.json()["env"] : nlohmann::json();
    if (!env.is_array()) return;
    for (size_t i = 0; i < env.size(); ++i) {
      const std::string name = EnvString(env[i], "name");
      const std::string value = EnvString(env[i], "value");
      const std::string path = absl::StrCat("spec.devicePlugin.env[", i, "]");
      auto key = kKeys.find(name);
      if (key == kKeys.end()) {
        out_.Unapplied(path, absl::StrCat(name, "=", value),
                       "NVIDIA's device-plugin environment: the agent's plugin takes its settings from the agent config");
        continue;
      }
      bool ok = true;
      if (key->second == "migStrategy") ok = value == "none" || value == "single" || value == "mixed";
      if (key->second == "deviceIdStrategy") ok = value == "uuid" || value == "index";
      if (key->second == "passDeviceSpecs" || key->second == "failOnInitError") ok = kBools.count(value) > 0;
      if (key->second == "deviceListStrategy") {
        ok = !value.empty();
        for (absl::string_view t : absl::StrSplit(value, ',')) {
          t = absl::StripAsciiWhitespace(t);
          ok = ok && (t == "envvar" || t == "volume-mounts" || t == "cdi-annotations" || t == "cdi-cri");
        }
      }
      if (!ok) {
        out_.Unapplied(path, absl::StrCat(name, "=", value), "not a value gpunode's plugin takes");
        continue;
      }
      sections_["plugin"][key->second] = value;  // after mig.strategy: the container's env wins, as in the Operator
      out_.Applied(path, absl::StrCat(name, "=", Summary(value)), absl::StrCat("agent plugin.", key->second));
    }
  }

  Status DevicePlugin() {
    GPUNODE_ASSIGN_OR_RETURN(kube::Fields mig, spec_.Object("mig"));
    GPUNODE_ASSIGN_OR_RETURN(std::string strategy, Name(mig, "strategy"));
    if (!strategy.empty() && strategy != "none" && strategy != "single" && strategy != "mixed") {
      return mig.Error(absl::StrCat("strategy: \"", Summary(strategy), "\" is not none, single or mixed"));
    }
    out_.Unknown(mig, {"strategy"});
    GPUNODE_ASSIGN_OR_RETURN(kube::Fields dp, spec_.Object("devicePlugin"));
    GPUNODE_ASSIGN_OR_RETURN(bool on, Switch(dp, "devicePlugin", true, "plugin"));
    if (!strategy.empty()) {  // GFD's labels follow it too: the agent's labels use the plugin's setting
      sections_["plugin"]["migStrategy"] = strategy;
      out_.Applied("spec.mig.strategy", strategy, "agent plugin.migStrategy (the plugin and the labels)");
    }
    if (!on) return absl::OkStatus();
    GPUNODE_ASSIGN_OR_RETURN(kube::Fields config, dp.Object("config"));
    GPUNODE_ASSIGN_OR_RETURN(std::string name, ConfigMapField(config, "name", false));
    GPUNODE_ASSIGN_OR_RETURN(std::string def, ConfigMapField(config, "default", true));
    if (!name.empty()) {
      sections_["plugin"]["configDir"] = kPolicyDevicePluginDir;
      out_.t().config_maps.push_back({"spec.devicePlugin.config.name", name, "", kPolicyDevicePluginDir});
      out_.Applied("spec.devicePlugin.config.name", name,
                   absl::StrCat("agent plugin.configDir ", kPolicyDevicePluginDir, " (a copy of the ConfigMap)"));
      if (!def.empty()) {
        sections_["plugin"]["defaultConfig"] = def;
        out_.Applied("spec.devicePlugin.config.default", def, "agent plugin.defaultConfig");
      }
    } else if (!def.empty()) {
      out_.Unapplied("spec.devicePlugin.config.default", def, "without config.name there are no named configs");
    }
    out_.Unknown(config, {"name", "default"});
    GPUNODE_ASSIGN_OR_RETURN(kube::Fields mps, dp.Object("mps"));
    out_.UnappliedMember(mps, "root", "gpunode's MPS daemons keep their pipes in their own folder (docs/plugin.md)");
    out_.Unknown(mps, {"root"});
    GPUNODE_RETURN_IF_ERROR(EnvList(dp, "env").status());
    PluginEnv(dp);
    Replaced(dp, "plugin", {"config", "mps", "env"});
    return absl::OkStatus();
  }

  Status Exporter() {
    GPUNODE_ASSIGN_OR_RETURN(kube::Fields ex, spec_.Object("dcgmExporter"));
    GPUNODE_ASSIGN_OR_RETURN(bool on, Switch(ex, "dcgmExporter", true, "exporter"));
    if (!on) return absl::OkStatus();
    GPUNODE_ASSIGN_OR_RETURN(kube::Fields config, ex.Object("config"));
    GPUNODE_ASSIGN_OR_RETURN(std::string name, ConfigMapField(config, "name", false));
    if (!name.empty()) {
      sections_["exporter"]["collectors"] = kPolicyExporterCountersFile;
      out_.t().config_maps.push_back({"spec.dcgmExporter.config.name", name, "dcgm-metrics.csv",
                                      kPolicyExporterCountersFile});
      out_.Applied("spec.dcgmExporter.config.name", name,
                   absl::StrCat("agent exporter.collectors ", kPolicyExporterCountersFile, " (its dcgm-metrics.csv)"));
    }
    out_.Unknown(config, {"name"});
    out_.UnappliedMember(ex, "serviceMonitor", "the chart's ServiceMonitor (its exporter values) scrapes the agent");
    out_.UnappliedMember(ex, "service", "the chart's Service serves the metrics");
    out_.UnappliedMember(ex, "hostPID", "the agent pod's settings are the chart's");
    out_.UnappliedMember(ex, "annotations", "the agent pod's annotations are the chart's");
    out_.UnappliedMember(ex, "hpcJobMapping", "HPC job files are not read by gpunode's exporter");
    for (const char* key : {"enablePodLabels", "enablePodUID", "podLabelAllowlistRegex"}) {
      out_.UnappliedMember(ex, key, "gpunode's exporter attributes GPUs to namespace, pod and container only");
    }
    Replaced(ex, "exporter", {"config", "serviceMonitor", "service", "hostPID", "annotations", "hpcJobMapping",
                              "enablePodLabels", "enablePodUID", "podLabelAllowlistRegex"});
    return absl::OkStatus();
  }

  Status Gfd() {
    GPUNODE_ASSIGN_OR_RETURN(kube::Fields gfd, spec_.Object("gfd"));
    GPUNODE_ASSIGN_OR_RETURN(bool on, Switch(gfd, "gfd", true, "labels"));
    if (on) Replaced(gfd, "labels", {});
    return absl::OkStatus();
  }

  Status MigManager() {
    GPUNODE_ASSIGN_OR_RETURN(kube::Fields mm, spec_.Object("migManager"));
    GPUNODE_ASSIGN_OR_RETURN(std::optional<bool> on, OptionalBool(mm, "enabled"));
    if (on.has_value() && !*on) {
      sections_["mig"]["configFile"] = "";
      out_.Applied("spec.migManager.enabled", "false", "agent mig.configFile \"\" (the nvidia.com/mig.config label is ignored)");
      return absl::OkStatus();
    }
    GPUNODE_ASSIGN_OR_RETURN(kube::Fields config, mm.Object("config"));
    GPUNODE_ASSIGN_OR_RETURN(std::string name, ConfigMapField(config, "name", false));
    if (!name.empty()) {
      sections_["mig"]["configFile"] = kPolicyMigConfigFile;
      out_.t().config_maps.push_back({"spec.migManager.config.name", name, "config.yaml", kPolicyMigConfigFile});
      out_.Applied("spec.migManager.config.name", name,
                   absl::StrCat("agent mig.configFile ", kPolicyMigConfigFile, " (its config.yaml)"));
    }
    out_.UnappliedMember(config, "default", "gpunode applies a MIG layout only where the node label "
                                            "nvidia.com/mig.config names one; a node without it keeps its MIG mode");
    out_.Unknown(config, {"name", "default"});
    GPUNODE_ASSIGN_OR_RETURN(kube::Fields clients, mm.Object("gpuClientsConfig"));
    out_.UnappliedMember(clients, "name", "gpunode stops its own plugin and labels around a MIG change; other GPU "
                                          "clients of the node are not stopped");
    out_.Unknown(clients, {"name"});
    Replaced(mm, "MIG manager", {"config", "gpuClientsConfig"});
    return absl::OkStatus();
  }

  // NVIDIA's validator has no switch: it always runs. cuda's WITH_WORKLOAD=false (no vectorAdd pod)
  // becomes validator.cuda false; every other variable is NVIDIA's validator's own.
  Status Validator() {
    GPUNODE_ASSIGN_OR_RETURN(kube::Fields v, spec_.Object("validator"));
    sections_["validator"]["enabled"] = true;
    out_.Applied("spec.validator", "(always on in the Operator)", "agent validator.enabled: true");
    const char* why = "NVIDIA's validator environment: gpunode's validator (doctor's checks in the agent) takes none "
                      "and runs no workload pod";
    for (const char* component : {"plugin", "toolkit", "driver", "cuda", "vfioPCI", "vgpuManager", "vgpuDevices"}) {
      GPUNODE_ASSIGN_OR_RETURN(kube::Fields c, v.Object(component));
      GPUNODE_ASSIGN_OR_RETURN(nlohmann::json env, EnvList(c, "env"));
      for (size_t i = 0; i < env.size(); ++i) {
        const std::string name = EnvString(env[i], "name"), value = EnvString(env[i], "value");
        const std::string path = absl::StrCat(c.path(), ".env[", i, "]");
        if (std::string(component) == "cuda" && name == "WITH_WORKLOAD" && (value == "false" || value == "true")) {
          sections_["validator"]["cuda"] = value == "true";
          out_.Applied(path, absl::StrCat(name, "=", value), "agent validator.cuda (a CUDA check, in a child process)");
        } else {
          out_.Unapplied(path, absl::StrCat(name, "=", value), why);
        }
      }
      out_.Unknown(c, {"env"});
    }
    GPUNODE_ASSIGN_OR_RETURN(nlohmann::json env, EnvList(v, "env"));
    for (size_t i = 0; i < env.size(); ++i) {
      out_.Unapplied(absl::StrCat("spec.validator.env[", i, "]"),
                     absl::StrCat(EnvString(env[i], "name"), "=", EnvString(env[i], "value")), why);
    }
    Replaced(v, "validator", {"plugin", "toolkit", "driver", "cuda", "vfioPCI", "vgpuManager", "vgpuDevices", "env"});
    return absl::OkStatus();
  }

  // Sections of operands gpunode does not run, listed when they are switched on.
  Status NotRun() {
    struct Section {
      const char* key;
      bool on_by_default;
      const char* why;
    };
    static const Section kSections[] = {
        {"dcgm", true, "gpunode needs no DCGM host engine: its exporter reads NVML in the agent"},
        {"nodeStatusExporter", false, "the agent reports the node's readiness itself (/readyz, "
                                      "gpunode_component_up, the GpuStackReady condition)"},
        {"psp", false, "PodSecurityPolicy is gone from Kubernetes (1.25)"},
        {"psa", false, "Pod Security Admission labels on the namespace are the chart's and yours"},
        {"gds", false, "GPUDirect Storage (nvidia-fs): gpunode's driver DaemonSet runs no such container"},
        {"gdrcopy", false, "GDRCopy: gpunode's driver DaemonSet runs no such container"},
        {"sandboxWorkloads", false, "VM workloads (KubeVirt, Kata: vfio-pci, vGPU) are not supported by gpunode"},
    };
    // Their operands act only on VM nodes: listed only when sandbox workloads are on.
    static const char* const kSandbox[] = {"vfioManager", "sandboxDevicePlugin", "kataSandboxDevicePlugin",
                                           "vgpuManager", "vgpuDeviceManager", "kataManager", "ccManager"};
    bool sandbox = false;
    for (const Section& s : kSections) {
      GPUNODE_ASSIGN_OR_RETURN(kube::Fields f, spec_.Object(s.key));
      if (!f.present()) continue;
      GPUNODE_ASSIGN_OR_RETURN(std::optional<bool> on, OptionalBool(f, "enabled"));
      if (!on.value_or(s.on_by_default)) continue;
      if (std::string(s.key) == "sandboxWorkloads") sandbox = true;
      out_.t().unapplied.push_back({absl::StrCat("spec.", s.key), Summary(f.json()), s.why});
    }
    for (const char* key : kSandbox) {
      GPUNODE_ASSIGN_OR_RETURN(kube::Fields f, spec_.Object(key));
      GPUNODE_ASSIGN_OR_RETURN(std::optional<bool> on, OptionalBool(f, "enabled"));
      if (!sandbox || !f.present() || !on.value_or(false)) continue;
      out_.t().unapplied.push_back({absl::StrCat("spec.", key), Summary(f.json()),
                                    "a VM-node operand: sandbox workloads are not supported by gpunode"});
    }
    GPUNODE_ASSIGN_OR_RETURN(kube::Fields paths, spec_.Object("hostPaths"));
    for (const char* key : {"rootFS", "driverInstallDir", "kubeletRootDir"}) {
      out_.UnappliedMember(paths, key, "the agent's host root, driver root and kubelet folder are the chart's "
                                       "(fixed while the agent runs)");
    }
    out_.Unknown(paths, {"rootFS", "driverInstallDir", "kubeletRootDir"});
    std::set<std::string> known = {"operator", "daemonsets", "driver", "toolkit", "devicePlugin", "dcgmExporter",
                                   "gfd", "mig", "migManager", "validator", "cdi", "hostPaths"};
    for (const Section& s : kSections) known.insert(s.key);
    for (const char* key : kSandbox) known.insert(key);
    out_.Unknown(spec_, known);
    return absl::OkStatus();
  }

  const kube::Fields& spec_;
  Output& out_;
  std::string default_runtime_;
  std::map<std::string, J> sections_;
};

}  // namespace

StatusOr<PolicyTranslation> TranslateClusterPolicy(const nlohmann::json& object) {
  std::string name = "?";
  if (object.is_object() && object.contains("metadata") && object["metadata"].is_object() &&
      object["metadata"].contains("name") && object["metadata"]["name"].is_string()) {
    name = Summary(object["metadata"]["name"]);
  }
  const std::string what = absl::StrCat("ClusterPolicy ", name);
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields root, kube::Fields::Root(object, what));
  size_t nodes = 0;
  GPUNODE_RETURN_IF_ERROR(CheckBounds(object, what, "", 0, &nodes));
  GPUNODE_ASSIGN_OR_RETURN(std::string api_version, Name(root, "apiVersion"));
  GPUNODE_ASSIGN_OR_RETURN(std::string kind, Name(root, "kind"));
  if (!api_version.empty() && api_version != absl::StrCat(kGroup, "/", kClusterPolicyVersion)) {
    return root.Error(absl::StrCat("apiVersion: \"", Summary(api_version), "\" is not nvidia.com/v1"));
  }
  if (!kind.empty() && kind != kClusterPolicyKind) {
    return root.Error(absl::StrCat("kind: \"", Summary(kind), "\" is not ClusterPolicy"));
  }
  PolicyTranslation t;
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields meta, root.Object("metadata"));
  GPUNODE_ASSIGN_OR_RETURN(t.name, Name(meta, "name"));
  if (t.name.empty()) return root.Error("metadata.name: missing");
  GPUNODE_ASSIGN_OR_RETURN(t.uid, Name(meta, "uid"));
  GPUNODE_ASSIGN_OR_RETURN(std::optional<int64_t> generation, meta.Int("generation"));
  t.generation = generation.value_or(0);
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields spec, root.Object("spec"));
  Output out(&t);
  GPUNODE_RETURN_IF_ERROR(TranslateDriver(spec, out));
  Operands operands(spec, out);
  GPUNODE_RETURN_IF_ERROR(operands.Run());
  return t;
}

std::string AgentPolicyText(const PolicyTranslation& t) {
  return absl::StrCat("# gpunode agent policy file (docs/agent.md, \"Policy file\"), written by gpunode's controller\n",
                      "# from ClusterPolicy ", TerminalSafe(t.name), " generation ", t.generation,
                      ": only the keys the ClusterPolicy sets.\n", JsonToYaml(t.agent_policy), "\n");
}

std::string UnappliedSummary(const PolicyTranslation& t, size_t max_bytes) {
  std::vector<std::pair<std::string, std::vector<std::string>>> by_why;  // in first-seen order
  for (const UnappliedField& u : t.unapplied) {
    auto it = std::find_if(by_why.begin(), by_why.end(), [&](const auto& g) { return g.first == u.why; });
    if (it == by_why.end()) it = by_why.insert(by_why.end(), {u.why, {}});
    it->second.push_back(u.path);
  }
  std::string out;
  for (size_t i = 0; i < by_why.size(); ++i) {
    std::string part = absl::StrCat(absl::StrJoin(by_why[i].second, ", "), ": ", by_why[i].first);
    if (out.size() + part.size() + 2 > max_bytes) {
      size_t rest = 0;
      for (size_t j = i; j < by_why.size(); ++j) rest += by_why[j].second.size();
      absl::StrAppend(&out, out.empty() ? "" : "; ", "... (", rest, " more fields)");
      break;
    }
    absl::StrAppend(&out, out.empty() ? "" : "; ", part);
  }
  return out;
}

}  // namespace gpunode::upgrade
