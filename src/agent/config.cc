#include "src/agent/config.h"

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "src/agent/step_args.h"
#include "src/base/host_fs.h"
#include "src/base/yaml.h"
#include "src/base/yaml_reader.h"
#include "src/exporter/pod_metadata.h"

namespace gpunode::agent {
namespace {

// A strict walk over one mapping: every key read is remembered, the rest are "unknown key".
// Errors are src/base/yaml_reader.h's: "FILE:LINE: KEY.PATH: expected ..., got ...".
class Reader {
 public:
  explicit Reader(YamlValue v) : v_(std::move(v)) {}

  // An absent or null section reads as empty; anything else must be a map of known keys.
  Status Check() const {
    if (!v_.IsSet()) return absl::OkStatus();
    return v_.ExpectMap(seen_);
  }

  YamlValue Get(const std::string& key) {
    if (std::find(seen_.begin(), seen_.end(), key) == seen_.end()) seen_.push_back(key);
    return v_.Child(key);
  }

  Status String(const std::string& key, std::string* out) {
    const YamlValue n = Get(key);
    if (!n.IsSet()) return absl::OkStatus();
    GPUNODE_ASSIGN_OR_RETURN(*out, n.String());
    return absl::OkStatus();
  }
  // true or false in any case.
  Status Bool(const std::string& key, bool* out) {
    const YamlValue n = Get(key);
    if (!n.IsSet()) return absl::OkStatus();
    const std::string v = n.IsScalar() ? absl::AsciiStrToLower(n.node().Scalar()) : "";
    if (v == "true") {
      *out = true;
    } else if (v == "false") {
      *out = false;
    } else {
      return n.Expected("true or false");
    }
    return absl::OkStatus();
  }
  // A duration ("30s", "5m"); a bare number is in `bare_unit_ms` milliseconds.
  Status Duration(const std::string& key, std::chrono::milliseconds* out, int64_t bare_unit_ms = 1000) {
    const YamlValue n = Get(key);
    if (!n.IsSet()) return absl::OkStatus();
    if (!n.IsScalar()) return n.Expected("a duration such as 30s or 5m");
    int64_t bare = 0;
    if (absl::SimpleAtoi(n.node().Scalar(), &bare) && bare >= 0) {
      *out = std::chrono::milliseconds(bare * bare_unit_ms);
      return absl::OkStatus();
    }
    auto d = ParseDuration(n.node().Scalar());
    if (!d.ok()) return n.Expected("a duration such as 30s, 5m or 500ms");
    *out = *d;
    return absl::OkStatus();
  }
  Status Strings(const std::string& key, std::vector<std::string>* out) {
    const YamlValue n = Get(key);
    if (!n.IsSet()) return absl::OkStatus();
    if (!n.IsList()) return n.Expected("a list of strings");
    GPUNODE_ASSIGN_OR_RETURN(*out, n.Strings());
    return absl::OkStatus();
  }
  // `value` (read from `key`) must be empty or one of `allowed`.
  Status OneOf(const std::string& key, const std::string& value, std::initializer_list<const char*> allowed) {
    if (value.empty()) return absl::OkStatus();
    for (const char* a : allowed) {
      if (value == a) return absl::OkStatus();
    }
    std::vector<std::string> names(allowed.begin(), allowed.end());
    return Get(key).Expected(absl::StrCat("one of ", absl::StrJoin(names, ", ")));
  }
  Reader Section(const std::string& key) { return Reader(Get(key)); }
  Status CheckSectionType() const {
    if (v_.IsSet() && !v_.IsMap()) return v_.Expected("a map");
    return absl::OkStatus();
  }
  const YamlValue& value() const { return v_; }

 private:
  YamlValue v_;
  std::vector<std::string> seen_;
};

// `step` ("cdi", "runtime") names the section; its command line must be one the agent accepts
// (src/agent/step_args.h), or the error names the item.
Status ParseOneShot(const std::string& step, Reader r, OneShotSection* s) {
  GPUNODE_RETURN_IF_ERROR(r.CheckSectionType());
  GPUNODE_RETURN_IF_ERROR(r.Bool("enabled", &s->enabled));
  GPUNODE_RETURN_IF_ERROR(r.Strings("args", &s->args));
  GPUNODE_RETURN_IF_ERROR(r.Strings("globalArgs", &s->global_args));
  GPUNODE_RETURN_IF_ERROR(r.Check());
  if (auto p = CheckStepArgs(step, s->args, s->global_args)) {
    const YamlValue list = r.Get(p->list);
    if (!list.IsSet()) return r.value().Error(absl::StrCat(p->list, ": ", p->message));
    const YamlValue item = p->index < list.size() ? list.Item(p->index) : list;
    return item.Error(p->message);
  }
  return absl::OkStatus();
}

Status ParseKubernetes(Reader k, KubernetesSection* s) {
  GPUNODE_RETURN_IF_ERROR(k.CheckSectionType());
  GPUNODE_RETURN_IF_ERROR(k.Bool("enabled", &s->enabled));
  GPUNODE_RETURN_IF_ERROR(k.String("kubeconfig", &s->kubeconfig));
  GPUNODE_RETURN_IF_ERROR(k.String("daemonset", &s->daemonset));
  GPUNODE_RETURN_IF_ERROR(k.Strings("removeOnUninstall", &s->remove_on_uninstall));
  if (!s->daemonset.empty() && s->daemonset.find('/') == std::string::npos) {
    return k.Get("daemonset").Expected("NAMESPACE/NAME");
  }
  return k.Check();
}

Status ParsePlugin(Reader p, PluginSection* s) {
  GPUNODE_RETURN_IF_ERROR(p.CheckSectionType());
  GPUNODE_RETURN_IF_ERROR(p.Bool("enabled", &s->enabled));
  GPUNODE_RETURN_IF_ERROR(p.String("kubeletDir", &s->kubelet_dir));
  GPUNODE_RETURN_IF_ERROR(p.String("kubeletSocket", &s->kubelet_socket));
  GPUNODE_RETURN_IF_ERROR(p.String("configFile", &s->config_file));
  GPUNODE_RETURN_IF_ERROR(p.String("configDir", &s->config_dir));
  GPUNODE_RETURN_IF_ERROR(p.String("defaultConfig", &s->default_config));
  GPUNODE_RETURN_IF_ERROR(p.Duration("healthRecovery", &s->health_recovery));
  GPUNODE_RETURN_IF_ERROR(p.String("migStrategy", &s->mig_strategy));
  GPUNODE_RETURN_IF_ERROR(p.OneOf("migStrategy", s->mig_strategy, {"none", "single", "mixed"}));
  GPUNODE_RETURN_IF_ERROR(p.String("deviceListStrategy", &s->device_list_strategy));
  GPUNODE_RETURN_IF_ERROR(p.String("deviceIdStrategy", &s->device_id_strategy));
  GPUNODE_RETURN_IF_ERROR(p.OneOf("deviceIdStrategy", s->device_id_strategy, {"uuid", "index"}));
  GPUNODE_RETURN_IF_ERROR(p.String("passDeviceSpecs", &s->pass_device_specs));
  GPUNODE_RETURN_IF_ERROR(p.String("failOnInitError", &s->fail_on_init_error));
  if (!s->config_file.empty() && !s->config_dir.empty()) {
    return p.Get("configDir").Error(
        "configFile and configDir are exclusive (configDir + defaultConfig pick a named config per node)");
  }
  return p.Check();
}

Status ParseLabels(Reader l, LabelsSection* s) {
  GPUNODE_RETURN_IF_ERROR(l.CheckSectionType());
  GPUNODE_RETURN_IF_ERROR(l.Bool("enabled", &s->enabled));
  GPUNODE_RETURN_IF_ERROR(l.Bool("nodeLabels", &s->node_labels));
  GPUNODE_RETURN_IF_ERROR(l.String("featuresFile", &s->features_file));
  GPUNODE_RETURN_IF_ERROR(l.Duration("interval", &s->interval));
  return l.Check();
}

Status ParseExporter(Reader e, ExporterSection* s) {
  GPUNODE_RETURN_IF_ERROR(e.CheckSectionType());
  GPUNODE_RETURN_IF_ERROR(e.Bool("enabled", &s->enabled));
  GPUNODE_RETURN_IF_ERROR(e.String("listen", &s->listen));
  GPUNODE_RETURN_IF_ERROR(e.Duration("collectInterval", &s->collect_interval, /*bare_unit_ms=*/1));
  if (s->collect_interval < std::chrono::milliseconds(100) || s->collect_interval > std::chrono::hours(1)) {
    return e.Get("collectInterval")
        .Expected("100ms to 1h (a bare number is milliseconds, as dcgm-exporter's -c)");
  }
  GPUNODE_RETURN_IF_ERROR(e.Bool("kubernetes", &s->kubernetes));
  GPUNODE_RETURN_IF_ERROR(e.String("podResourcesSocket", &s->pod_resources_socket));
  GPUNODE_RETURN_IF_ERROR(e.String("collectors", &s->collectors));
  GPUNODE_RETURN_IF_ERROR(e.String("webConfigFile", &s->web_config_file));
  GPUNODE_RETURN_IF_ERROR(e.String("hostnameLabel", &s->hostname_label));
  GPUNODE_RETURN_IF_ERROR(e.OneOf("hostnameLabel", s->hostname_label, {"", "Hostname", "hostname"}));
  GPUNODE_RETURN_IF_ERROR(e.Strings("resourceNames", &s->resource_names));
  GPUNODE_RETURN_IF_ERROR(e.Bool("podLabels", &s->pod_labels));
  GPUNODE_RETURN_IF_ERROR(e.Strings("podLabelAllowlist", &s->pod_label_allowlist));
  if (auto filter = exporter::PodLabelFilter::Create(s->pod_label_allowlist); !filter.ok()) {
    return e.Get("podLabelAllowlist").Error(filter.status().message());
  }
  GPUNODE_RETURN_IF_ERROR(e.Bool("podUid", &s->pod_uid));
  return e.Check();
}

Status ParseValidator(Reader v, ValidatorSection* s) {
  GPUNODE_RETURN_IF_ERROR(v.CheckSectionType());
  GPUNODE_RETURN_IF_ERROR(v.Bool("enabled", &s->enabled));
  GPUNODE_RETURN_IF_ERROR(v.Bool("cuda", &s->cuda));
  GPUNODE_RETURN_IF_ERROR(v.Duration("interval", &s->interval));
  GPUNODE_RETURN_IF_ERROR(v.Duration("retry", &s->retry));
  GPUNODE_RETURN_IF_ERROR(v.Bool("gate", &s->gate));
  if (s->retry < std::chrono::seconds(1) || s->interval < std::chrono::seconds(1)) {
    return v.value().Error("interval and retry must be at least 1s");
  }
  return v.Check();
}

Status ParseDra(Reader d, DraSection* s) {
  GPUNODE_RETURN_IF_ERROR(d.CheckSectionType());
  GPUNODE_RETURN_IF_ERROR(d.Bool("enabled", &s->enabled));
  GPUNODE_RETURN_IF_ERROR(d.String("driverName", &s->driver_name));
  GPUNODE_RETURN_IF_ERROR(d.String("cdiRoot", &s->cdi_root));
  GPUNODE_RETURN_IF_ERROR(d.String("registrarDir", &s->registrar_dir));
  GPUNODE_RETURN_IF_ERROR(d.String("pluginsDir", &s->plugins_dir));
  GPUNODE_RETURN_IF_ERROR(d.String("driverRoot", &s->driver_root));
  GPUNODE_RETURN_IF_ERROR(d.String("hostRoot", &s->host_root));
  GPUNODE_RETURN_IF_ERROR(d.String("devRoot", &s->dev_root));
  GPUNODE_RETURN_IF_ERROR(d.String("hookPath", &s->hook_path));
  GPUNODE_RETURN_IF_ERROR(d.Strings("disableHooks", &s->disable_hooks));
  for (size_t i = 0; i < s->disable_hooks.size(); ++i) {
    const std::string& h = s->disable_hooks[i];
    if (h != "create-symlinks" && h != "update-ldcache" && h != "all") {
      return d.Get("disableHooks").Item(i).Expected("create-symlinks, update-ldcache or all");
    }
  }
  std::vector<std::string> xids;
  GPUNODE_RETURN_IF_ERROR(d.Strings("additionalXidsToIgnore", &xids));
  s->additional_xids_to_ignore.clear();
  for (size_t i = 0; i < xids.size(); ++i) {
    unsigned v = 0;
    if (!absl::SimpleAtoi(xids[i], &v) || v == 0) {
      return d.Get("additionalXidsToIgnore").Item(i).Expected("an XID number (e.g. 48)");
    }
    s->additional_xids_to_ignore.push_back(v);
  }
  GPUNODE_RETURN_IF_ERROR(d.Duration("healthRecovery", &s->health_recovery));
  GPUNODE_RETURN_IF_ERROR(d.Bool("mpsPrivateShm", &s->mps_private_shm));
  for (const auto* p : {&s->cdi_root, &s->registrar_dir, &s->plugins_dir, &s->driver_root}) {
    if (p->empty() || (*p)[0] != '/') {
      const char* key = p == &s->cdi_root ? "cdiRoot" : p == &s->registrar_dir ? "registrarDir"
                        : p == &s->plugins_dir ? "pluginsDir" : "driverRoot";
      return d.value().Error(absl::StrCat(key, ": an absolute path is needed"));
    }
  }
  return d.Check();
}

Status ParseMig(Reader m, MigSection* s) {
  GPUNODE_RETURN_IF_ERROR(m.CheckSectionType());
  GPUNODE_RETURN_IF_ERROR(m.String("configFile", &s->config_file));
  GPUNODE_RETURN_IF_ERROR(m.Bool("allowReal", &s->allow_real));
  return m.Check();
}

// An absolute path with no ".." component: what a policy file (or the key naming it) may give.
bool AbsolutePath(const std::string& p) {
  if (p.empty() || p[0] != '/') return false;
  for (absl::string_view part : absl::StrSplit(p, '/')) {
    if (part == "..") return false;
  }
  return true;
}

// What a policy file may set: the keys a ClusterPolicy maps to (src/upgrade/cluster_policy.h).
const std::map<std::string, std::vector<std::string>>& PolicySettable() {
  static const auto* const kSettable = new std::map<std::string, std::vector<std::string>>{
      {"cdi", {"enabled"}},
      {"runtime", {"enabled", "args"}},
      {"plugin", {"enabled", "configDir", "defaultConfig", "migStrategy", "deviceListStrategy", "deviceIdStrategy",
                  "passDeviceSpecs", "failOnInitError"}},
      {"labels", {"enabled"}},
      {"exporter", {"enabled", "collectors"}},
      {"validator", {"enabled", "cuda"}},
      {"mig", {"configFile"}},
  };
  return *kSettable;
}

// Every key of the policy file is one it may set, else the error names it, at its line, and what may be set.
Status CheckPolicyKeys(const YamlValue& top) {
  return top.ForEachEntry([](const std::string& key, const YamlValue& v) -> Status {
    if (key == "apiVersion" || key == "kind" || key == "origin") return absl::OkStatus();
    const auto it = PolicySettable().find(key);
    if (it == PolicySettable().end()) {
      std::vector<std::string> sections;
      for (const auto& [name, keys] : PolicySettable()) sections.push_back(name);
      return v.Error(absl::StrCat("not settable by a policy file (it sets only ", absl::StrJoin(sections, ", "),
                                  "; the rest is the agent config's)"));
    }
    if (!v.IsSet()) return absl::OkStatus();
    if (!v.IsMap()) return v.Expected("a map");
    return v.ForEachEntry([&](const std::string& sub, const YamlValue& sv) -> Status {
      if (std::find(it->second.begin(), it->second.end(), sub) != it->second.end()) return absl::OkStatus();
      return sv.Error(absl::StrCat("not settable by a policy file (", key, ": only ", absl::StrJoin(it->second, ", "),
                                   "; the rest is the agent config's)"));
    });
  });
}

}  // namespace

StatusOr<std::chrono::milliseconds> ParseDuration(absl::string_view text) {
  std::string t(absl::StripAsciiWhitespace(text));
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
  if (t.empty() || !absl::SimpleAtoi(t, &v) || v < 0 || v > 366LL * 24 * 3600 * 1000 / mult) {
    return absl::InvalidArgumentError(absl::StrCat("\"", text, "\": not a duration such as 30s, 5m or 500ms"));
  }
  return std::chrono::milliseconds(v * mult);
}

const std::vector<std::string>& ComponentNames() {
  static const auto* const kNames =
      new std::vector<std::string>{"cdi", "runtime", "validator", "plugin", "dra", "labels", "exporter"};
  return *kNames;
}

StatusOr<AgentConfig> ParseAgentConfig(absl::string_view text, absl::string_view source) {
  AgentConfig c;
  c.source = std::string(source);
  GPUNODE_ASSIGN_OR_RETURN(YAML::Node root, LoadYaml(text, source));
  Reader r(YamlValue(root, std::string(source)));
  GPUNODE_RETURN_IF_ERROR(r.CheckSectionType());
  std::string api_version, kind;
  GPUNODE_RETURN_IF_ERROR(r.String("apiVersion", &api_version));
  GPUNODE_RETURN_IF_ERROR(r.String("kind", &kind));
  if (!api_version.empty() && api_version != "gpunode/v1") return r.Get("apiVersion").Expected("gpunode/v1");
  if (!kind.empty() && kind != "AgentConfig") return r.Get("kind").Expected("AgentConfig");
  GPUNODE_RETURN_IF_ERROR(r.String("nodeName", &c.node_name));
  GPUNODE_RETURN_IF_ERROR(r.String("logFormat", &c.log_format));
  GPUNODE_RETURN_IF_ERROR(r.OneOf("logFormat", c.log_format, {"text", "json"}));
  GPUNODE_RETURN_IF_ERROR(r.String("healthListen", &c.health_listen));
  GPUNODE_RETURN_IF_ERROR(r.String("publishDir", &c.publish_dir));
  GPUNODE_RETURN_IF_ERROR(r.Duration("watchConfig", &c.watch_config));
  GPUNODE_RETURN_IF_ERROR(r.Duration("stopTimeout", &c.stop_timeout));
  if (c.stop_timeout < std::chrono::milliseconds(100) || c.stop_timeout > std::chrono::minutes(5)) {
    return r.Get("stopTimeout").Expected("100ms to 5m (below the pod's terminationGracePeriodSeconds)");
  }
  GPUNODE_RETURN_IF_ERROR(ParseKubernetes(r.Section("kubernetes"), &c.kubernetes));
  GPUNODE_RETURN_IF_ERROR(ParseOneShot("cdi", r.Section("cdi"), &c.cdi));
  GPUNODE_RETURN_IF_ERROR(ParseOneShot("runtime", r.Section("runtime"), &c.runtime));
  GPUNODE_RETURN_IF_ERROR(ParsePlugin(r.Section("plugin"), &c.plugin));
  GPUNODE_RETURN_IF_ERROR(ParseLabels(r.Section("labels"), &c.labels));
  GPUNODE_RETURN_IF_ERROR(ParseExporter(r.Section("exporter"), &c.exporter));
  GPUNODE_RETURN_IF_ERROR(ParseValidator(r.Section("validator"), &c.validator));
  GPUNODE_RETURN_IF_ERROR(ParseMig(r.Section("mig"), &c.mig));
  GPUNODE_RETURN_IF_ERROR(ParseDra(r.Section("dra"), &c.dra));
  GPUNODE_RETURN_IF_ERROR(r.String("policyFile", &c.policy_file));
  if (!c.policy_file.empty() && !AbsolutePath(c.policy_file)) {
    return r.Get("policyFile").Expected("an absolute path without \"..\"");
  }
  if ((c.exporter.pod_labels || c.exporter.pod_uid) && !c.kubernetes.enabled) {
    return r.Section("exporter").Get(c.exporter.pod_labels ? "podLabels" : "podUid")
        .Expected("false while kubernetes.enabled is false (pod labels and UID are read from the API server)");
  }
  GPUNODE_RETURN_IF_ERROR(r.Check());
  return c;
}

Status CheckReloadable(const AgentConfig& running, const AgentConfig& next) {
  struct Step {
    const char* name;
    const OneShotSection& before;
    const OneShotSection& after;
  } steps[] = {{"cdi", running.cdi, next.cdi}, {"runtime", running.runtime, next.runtime}};
  for (const Step& s : steps) {
    const auto before = FixedStepValues(s.name, s.before.args, s.before.global_args);
    const auto after = FixedStepValues(s.name, s.after.args, s.after.global_args);
    for (size_t i = 0; i < before.size() && i < after.size(); ++i) {
      if (before[i] == after[i]) continue;
      return absl::FailedPreconditionError(absl::StrCat(
          s.name, ".", before[i].list, ": ", before[i].flag, " changed from \"", before[i].value, "\" to \"",
          after[i].value, "\": it chooses code that runs as root, or where root writes, so it is fixed while the "
          "agent runs; the change takes effect when the agent's pod restarts"));
    }
  }
  return absl::OkStatus();
}

bool ComponentEnabled(const AgentConfig& c, const std::string& name) {
  if (name == "cdi") return c.cdi.enabled;
  if (name == "runtime") return c.runtime.enabled;
  if (name == "validator") return c.validator.enabled;
  if (name == "plugin") return c.plugin.enabled;
  if (name == "dra") return c.dra.enabled;
  if (name == "labels") return c.labels.enabled;
  if (name == "exporter") return c.exporter.enabled;
  return false;
}

Status ApplyAgentPolicy(absl::string_view text, absl::string_view source, AgentConfig* c) {
  GPUNODE_ASSIGN_OR_RETURN(YAML::Node root, LoadYaml(text, source));
  const YamlValue top(root, std::string(source));
  AgentConfig next = *c;
  next.policy_source = std::string(source);
  next.policy_origin.clear();
  if (top.IsSet()) {
    if (!top.IsMap()) return top.Expected("a map");
    GPUNODE_RETURN_IF_ERROR(CheckPolicyKeys(top));
    Reader r(top);
    std::string api_version, kind;
    GPUNODE_RETURN_IF_ERROR(r.String("apiVersion", &api_version));
    GPUNODE_RETURN_IF_ERROR(r.String("kind", &kind));
    if (!api_version.empty() && api_version != "gpunode/v1") return r.Get("apiVersion").Expected("gpunode/v1");
    if (!kind.empty() && kind != "AgentPolicy") return r.Get("kind").Expected("AgentPolicy (a policy file)");
    GPUNODE_RETURN_IF_ERROR(r.String("origin", &next.policy_origin));
    // configFile and configDir are exclusive: a policy's named configs replace the config's one file.
    const YamlValue dir = top.Child("plugin").Child("configDir");
    if (dir.IsScalar() && !dir.node().Scalar().empty()) next.plugin.config_file.clear();
    GPUNODE_RETURN_IF_ERROR(ParseOneShot("cdi", r.Section("cdi"), &next.cdi));
    GPUNODE_RETURN_IF_ERROR(ParseOneShot("runtime", r.Section("runtime"), &next.runtime));
    GPUNODE_RETURN_IF_ERROR(ParsePlugin(r.Section("plugin"), &next.plugin));
    GPUNODE_RETURN_IF_ERROR(ParseLabels(r.Section("labels"), &next.labels));
    GPUNODE_RETURN_IF_ERROR(ParseExporter(r.Section("exporter"), &next.exporter));
    GPUNODE_RETURN_IF_ERROR(ParseValidator(r.Section("validator"), &next.validator));
    GPUNODE_RETURN_IF_ERROR(ParseMig(r.Section("mig"), &next.mig));
    GPUNODE_RETURN_IF_ERROR(r.Check());
    const std::pair<const char*, const char*> kPaths[] = {
        {"plugin", "configDir"}, {"exporter", "collectors"}, {"mig", "configFile"}};
    for (const auto& [section, key] : kPaths) {
      const YamlValue v = top.Child(section).Child(key);
      if (v.IsScalar() && !v.node().Scalar().empty() && !AbsolutePath(v.node().Scalar())) {
        return v.Expected("an absolute path without \"..\"");
      }
    }
    // What runs as root, and where root writes, stays the agent config's (src/agent/step_args.h).
    struct Step {
      const char* name;
      const OneShotSection& before;
      const OneShotSection& after;
    } steps[] = {{"cdi", c->cdi, next.cdi}, {"runtime", c->runtime, next.runtime}};
    for (const Step& step : steps) {
      const auto was = FixedStepValues(step.name, step.before.args, step.before.global_args);
      const auto now = FixedStepValues(step.name, step.after.args, step.after.global_args);
      for (size_t i = 0; i < was.size() && i < now.size(); ++i) {
        if (was[i] == now[i]) continue;
        const YamlValue at = top.Child(step.name).Child(was[i].list);
        return (at.IsSet() ? at : top.Child(step.name)).Error(absl::StrCat(
            was[i].flag, " would be \"", now[i].value, "\" where the agent config ", c->source, " has \"",
            was[i].value, "\": a policy file never changes what runs as root or where root writes"));
      }
    }
  }
  *c = std::move(next);
  return absl::OkStatus();
}

StatusOr<AgentConfig> LoadAgentConfig(const std::string& path) {
  if (path.empty()) return AgentConfig{};
  std::ifstream in(path, std::ios::binary);
  if (!in) return ErrnoToStatus(errno, "read agent config", path);
  std::ostringstream text;
  text << in.rdbuf();
  GPUNODE_ASSIGN_OR_RETURN(AgentConfig c, ParseAgentConfig(text.str(), path));
  if (c.policy_file.empty()) return c;
  // An optional ConfigMap volume: no file (nothing written yet) is no overlay.
  auto policy = HostFs::Local().ReadFile(c.policy_file, 1 << 20);
  if (absl::IsNotFound(policy.status())) return c;
  if (!policy.ok()) return policy.status();
  GPUNODE_RETURN_IF_ERROR(ApplyAgentPolicy(*policy, c.policy_file, &c));
  return c;
}

}  // namespace gpunode::agent

namespace gpunode::agent {
namespace {
std::string Ms(std::chrono::milliseconds d) {
  if (d.count() % 60000 == 0 && d.count() > 0) return absl::StrCat(d.count() / 60000, "m");
  if (d.count() % 1000 == 0) return absl::StrCat(d.count() / 1000, "s");
  return absl::StrCat(d.count(), "ms");
}
}  // namespace

nlohmann::ordered_json ConfigToJson(const AgentConfig& c) {
  using J = nlohmann::ordered_json;
  auto oneshot = [](const OneShotSection& s) {
    return J{{"enabled", s.enabled}, {"args", s.args}, {"globalArgs", s.global_args}};
  };
  const PluginSection& p = c.plugin;
  return J{{"apiVersion", "gpunode/v1"},
           {"kind", "AgentConfig"},
           {"nodeName", c.node_name},
           {"logFormat", c.log_format},
           {"healthListen", c.health_listen},
           {"publishDir", c.publish_dir},
           {"watchConfig", Ms(c.watch_config)},
           {"stopTimeout", Ms(c.stop_timeout)},
           {"policyFile", c.policy_file},
           {"kubernetes", J{{"enabled", c.kubernetes.enabled},
                            {"kubeconfig", c.kubernetes.kubeconfig},
                            {"daemonset", c.kubernetes.daemonset},
                            {"removeOnUninstall", c.kubernetes.remove_on_uninstall}}},
           {"cdi", oneshot(c.cdi)},
           {"runtime", oneshot(c.runtime)},
           {"validator", J{{"enabled", c.validator.enabled},
                           {"cuda", c.validator.cuda},
                           {"gate", c.validator.gate},
                           {"interval", Ms(c.validator.interval)},
                           {"retry", Ms(c.validator.retry)}}},
           {"plugin", J{{"enabled", p.enabled},
                        {"kubeletDir", p.kubelet_dir},
                        {"kubeletSocket", p.kubelet_socket},
                        {"configFile", p.config_file},
                        {"configDir", p.config_dir},
                        {"defaultConfig", p.default_config},
                        {"healthRecovery", Ms(p.health_recovery)},
                        {"migStrategy", p.mig_strategy},
                        {"deviceListStrategy", p.device_list_strategy},
                        {"deviceIdStrategy", p.device_id_strategy},
                        {"passDeviceSpecs", p.pass_device_specs},
                        {"failOnInitError", p.fail_on_init_error}}},
           {"labels", J{{"enabled", c.labels.enabled},
                        {"nodeLabels", c.labels.node_labels},
                        {"featuresFile", c.labels.features_file},
                        {"interval", Ms(c.labels.interval)}}},
           {"exporter", J{{"enabled", c.exporter.enabled},
                          {"listen", c.exporter.listen},
                          {"collectInterval", Ms(c.exporter.collect_interval)},
                          {"kubernetes", c.exporter.kubernetes},
                          {"podResourcesSocket", c.exporter.pod_resources_socket},
                          {"collectors", c.exporter.collectors},
                          {"webConfigFile", c.exporter.web_config_file},
                          {"hostnameLabel", c.exporter.hostname_label},
                          {"resourceNames", c.exporter.resource_names},
                          {"podLabels", c.exporter.pod_labels},
                          {"podLabelAllowlist", c.exporter.pod_label_allowlist},
                          {"podUid", c.exporter.pod_uid}}},
           {"mig", J{{"configFile", c.mig.config_file}, {"allowReal", c.mig.allow_real}}},
           {"dra", J{{"enabled", c.dra.enabled},
                     {"driverName", c.dra.driver_name},
                     {"cdiRoot", c.dra.cdi_root},
                     {"registrarDir", c.dra.registrar_dir},
                     {"pluginsDir", c.dra.plugins_dir},
                     {"driverRoot", c.dra.driver_root},
                     {"hostRoot", c.dra.host_root},
                     {"devRoot", c.dra.dev_root},
                     {"hookPath", c.dra.hook_path},
                     {"disableHooks", c.dra.disable_hooks},
                     {"additionalXidsToIgnore", c.dra.additional_xids_to_ignore},
                     {"healthRecovery", Ms(c.dra.health_recovery)},
                     {"mpsPrivateShm", c.dra.mps_private_shm}}}};
}

}  // namespace gpunode::agent
