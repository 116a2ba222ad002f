#include "src/agent/config.h"

#include <cerrno>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/base/yaml.h"

namespace gpunode::agent {
namespace {

// A strict walk over one mapping: every key read is remembered, the rest are "unknown key".
// Errors read "FILE:LINE: KEY.PATH: what was expected, what was found".
class Reader {
 public:
  Reader(const YAML::Node& node, std::string source, std::string path)
      : node_(node), source_(std::move(source)), path_(std::move(path)) {}

  Status Error(const YAML::Node& at, absl::string_view key, absl::string_view problem) const {
    const int line = at.IsDefined() ? at.Mark().line + 1 : node_.Mark().line + 1;
    return absl::InvalidArgumentError(absl::StrCat(source_, ":", line, ": ", Path(key), ": ", problem));
  }
  std::string Path(absl::string_view key) const {
    if (key.empty()) return path_.empty() ? "(document)" : path_;
    return path_.empty() ? std::string(key) : absl::StrCat(path_, ".", key);
  }

  Status Check() const {
    if (!node_.IsDefined() || node_.IsNull()) return absl::OkStatus();
    if (!node_.IsMap()) return Error(node_, "", "want a mapping");
    for (const auto& kv : node_) {
      const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "?";
      if (!seen_.count(key)) {
        std::vector<std::string> known(seen_.begin(), seen_.end());
        return Error(kv.first, key, absl::StrCat("unknown key (known here: ", absl::StrJoin(known, ", "), ")"));
      }
    }
    return absl::OkStatus();
  }

  YAML::Node Get(const std::string& key) {
    seen_.insert(key);
    if (!node_.IsDefined() || !node_.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
    return node_[key];
  }

  Status String(const std::string& key, std::string* out) {
    YAML::Node n = Get(key);
    if (!n.IsDefined() || n.IsNull()) return absl::OkStatus();
    if (!n.IsScalar()) return Error(n, key, "want a string");
    *out = n.Scalar();
    return absl::OkStatus();
  }
  Status Bool(const std::string& key, bool* out) {
    YAML::Node n = Get(key);
    if (!n.IsDefined() || n.IsNull()) return absl::OkStatus();
    const std::string v = n.IsScalar() ? absl::AsciiStrToLower(n.Scalar()) : "";
    if (v == "true") {
      *out = true;
    } else if (v == "false") {
      *out = false;
    } else {
      return Error(n, key, absl::StrCat("want true or false, found \"", n.IsScalar() ? n.Scalar() : "a collection", "\""));
    }
    return absl::OkStatus();
  }
  // A duration ("30s", "5m"); a bare number is in `bare_unit_ms` milliseconds.
  Status Duration(const std::string& key, std::chrono::milliseconds* out, int64_t bare_unit_ms = 1000) {
    YAML::Node n = Get(key);
    if (!n.IsDefined() || n.IsNull()) return absl::OkStatus();
    if (!n.IsScalar()) return Error(n, key, "want a duration such as 30s or 5m");
    int64_t bare = 0;
    if (absl::SimpleAtoi(n.Scalar(), &bare) && bare >= 0) {
      *out = std::chrono::milliseconds(bare * bare_unit_ms);
      return absl::OkStatus();
    }
    auto d = ParseDuration(n.Scalar());
    if (!d.ok()) return Error(n, key, d.status().message());
    *out = *d;
    return absl::OkStatus();
  }
  Status Strings(const std::string& key, std::vector<std::string>* out) {
    YAML::Node n = Get(key);
    if (!n.IsDefined() || n.IsNull()) return absl::OkStatus();
    if (!n.IsSequence()) return Error(n, key, "want a list of strings");
    out->clear();
    for (const auto& item : n) {
      if (!item.IsScalar()) return Error(item, key, "want a list of strings");
      out->push_back(item.Scalar());
    }
    return absl::OkStatus();
  }
  Reader Section(const std::string& key) {
    YAML::Node n = Get(key);
    return Reader(n, source_, Path(key));
  }
  Status CheckSectionType() const {
    if (node_.IsDefined() && !node_.IsNull() && !node_.IsMap()) return Error(node_, "", "want a mapping");
    return absl::OkStatus();
  }

 private:
  YAML::Node node_;
  std::string source_;
  std::string path_;
  std::set<std::string> seen_;
};

Status OneOf(Reader& r, const std::string& key, const std::string& value, std::initializer_list<const char*> allowed) {
  if (value.empty()) return absl::OkStatus();
  for (const char* a : allowed) {
    if (value == a) return absl::OkStatus();
  }
  std::vector<std::string> names(allowed.begin(), allowed.end());
  return r.Error(YAML::Node(YAML::NodeType::Undefined), key,
                 absl::StrCat("\"", value, "\" is not one of ", absl::StrJoin(names, ", ")));
}

Status ParseOneShot(Reader r, OneShotSection* s) {
  GPUNODE_RETURN_IF_ERROR(r.CheckSectionType());
  GPUNODE_RETURN_IF_ERROR(r.Bool("enabled", &s->enabled));
  GPUNODE_RETURN_IF_ERROR(r.Strings("args", &s->args));
  GPUNODE_RETURN_IF_ERROR(r.Strings("globalArgs", &s->global_args));
  return r.Check();
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
      new std::vector<std::string>{"cdi", "runtime", "validator", "plugin", "labels", "exporter"};
  return *kNames;
}

StatusOr<AgentConfig> ParseAgentConfig(absl::string_view text, absl::string_view source) {
  AgentConfig c;
  c.source = std::string(source);
  GPUNODE_ASSIGN_OR_RETURN(YAML::Node root, LoadYaml(text, source));
  Reader r(root, std::string(source), "");
  GPUNODE_RETURN_IF_ERROR(r.CheckSectionType());
  std::string api_version, kind;
  GPUNODE_RETURN_IF_ERROR(r.String("apiVersion", &api_version));
  GPUNODE_RETURN_IF_ERROR(r.String("kind", &kind));
  if (!api_version.empty() && api_version != "gpunode/v1") {
    return r.Error(root["apiVersion"], "apiVersion", absl::StrCat("\"", api_version, "\": want gpunode/v1"));
  }
  if (!kind.empty() && kind != "AgentConfig") {
    return r.Error(root["kind"], "kind", absl::StrCat("\"", kind, "\": want AgentConfig"));
  }
  GPUNODE_RETURN_IF_ERROR(r.String("nodeName", &c.node_name));
  GPUNODE_RETURN_IF_ERROR(r.String("logFormat", &c.log_format));
  GPUNODE_RETURN_IF_ERROR(OneOf(r, "logFormat", c.log_format, {"text", "json"}));
  GPUNODE_RETURN_IF_ERROR(r.String("healthListen", &c.health_listen));
  GPUNODE_RETURN_IF_ERROR(r.Duration("watchConfig", &c.watch_config));

  {
    Reader k = r.Section("kubernetes");
    GPUNODE_RETURN_IF_ERROR(k.CheckSectionType());
    GPUNODE_RETURN_IF_ERROR(k.Bool("enabled", &c.kubernetes.enabled));
    GPUNODE_RETURN_IF_ERROR(k.String("kubeconfig", &c.kubernetes.kubeconfig));
    GPUNODE_RETURN_IF_ERROR(k.String("daemonset", &c.kubernetes.daemonset));
    GPUNODE_RETURN_IF_ERROR(k.Strings("removeOnUninstall", &c.kubernetes.remove_on_uninstall));
    if (!c.kubernetes.daemonset.empty() && c.kubernetes.daemonset.find('/') == std::string::npos) {
      return k.Error(root["kubernetes"]["daemonset"], "daemonset",
                     absl::StrCat("\"", c.kubernetes.daemonset, "\": want NAMESPACE/NAME"));
    }
    GPUNODE_RETURN_IF_ERROR(k.Check());
  }
  GPUNODE_RETURN_IF_ERROR(ParseOneShot(r.Section("cdi"), &c.cdi));
  GPUNODE_RETURN_IF_ERROR(ParseOneShot(r.Section("runtime"), &c.runtime));
  {
    Reader p = r.Section("plugin");
    PluginSection& s = c.plugin;
    GPUNODE_RETURN_IF_ERROR(p.CheckSectionType());
    GPUNODE_RETURN_IF_ERROR(p.Bool("enabled", &s.enabled));
    GPUNODE_RETURN_IF_ERROR(p.String("kubeletDir", &s.kubelet_dir));
    GPUNODE_RETURN_IF_ERROR(p.String("kubeletSocket", &s.kubelet_socket));
    GPUNODE_RETURN_IF_ERROR(p.String("configFile", &s.config_file));
    GPUNODE_RETURN_IF_ERROR(p.String("configDir", &s.config_dir));
    GPUNODE_RETURN_IF_ERROR(p.String("defaultConfig", &s.default_config));
    GPUNODE_RETURN_IF_ERROR(p.Duration("healthRecovery", &s.health_recovery));
    GPUNODE_RETURN_IF_ERROR(p.String("migStrategy", &s.mig_strategy));
    GPUNODE_RETURN_IF_ERROR(OneOf(p, "migStrategy", s.mig_strategy, {"none", "single", "mixed"}));
    GPUNODE_RETURN_IF_ERROR(p.String("deviceListStrategy", &s.device_list_strategy));
    GPUNODE_RETURN_IF_ERROR(p.String("deviceIdStrategy", &s.device_id_strategy));
    GPUNODE_RETURN_IF_ERROR(OneOf(p, "deviceIdStrategy", s.device_id_strategy, {"uuid", "index"}));
    GPUNODE_RETURN_IF_ERROR(p.String("passDeviceSpecs", &s.pass_device_specs));
    GPUNODE_RETURN_IF_ERROR(p.String("failOnInitError", &s.fail_on_init_error));
    if (!s.config_file.empty() && !s.config_dir.empty()) {
      return p.Error(root["plugin"]["configDir"], "configDir",
                     "configFile and configDir are exclusive (configDir + defaultConfig pick a named config per node)");
    }
    GPUNODE_RETURN_IF_ERROR(p.Check());
  }
  {
    Reader l = r.Section("labels");
    GPUNODE_RETURN_IF_ERROR(l.CheckSectionType());
    GPUNODE_RETURN_IF_ERROR(l.Bool("enabled", &c.labels.enabled));
    GPUNODE_RETURN_IF_ERROR(l.Bool("nodeLabels", &c.labels.node_labels));
    GPUNODE_RETURN_IF_ERROR(l.String("featuresFile", &c.labels.features_file));
    GPUNODE_RETURN_IF_ERROR(l.Duration("interval", &c.labels.interval));
    GPUNODE_RETURN_IF_ERROR(l.Check());
  }
  {
    Reader e = r.Section("exporter");
    ExporterSection& s = c.exporter;
    GPUNODE_RETURN_IF_ERROR(e.CheckSectionType());
    GPUNODE_RETURN_IF_ERROR(e.Bool("enabled", &s.enabled));
    GPUNODE_RETURN_IF_ERROR(e.String("listen", &s.listen));
    GPUNODE_RETURN_IF_ERROR(e.Duration("collectInterval", &s.collect_interval, /*bare_unit_ms=*/1));
    if (s.collect_interval < std::chrono::milliseconds(100) || s.collect_interval > std::chrono::hours(1)) {
      return e.Error(root["exporter"]["collectInterval"], "collectInterval", "want 100ms to 1h (a bare number is milliseconds, as dcgm-exporter's -c)");
    }
    GPUNODE_RETURN_IF_ERROR(e.Bool("kubernetes", &s.kubernetes));
    GPUNODE_RETURN_IF_ERROR(e.String("podResourcesSocket", &s.pod_resources_socket));
    GPUNODE_RETURN_IF_ERROR(e.String("collectors", &s.collectors));
    GPUNODE_RETURN_IF_ERROR(e.String("webConfigFile", &s.web_config_file));
    GPUNODE_RETURN_IF_ERROR(e.String("hostnameLabel", &s.hostname_label));
    GPUNODE_RETURN_IF_ERROR(OneOf(e, "hostnameLabel", s.hostname_label, {"", "Hostname", "hostname"}));
    GPUNODE_RETURN_IF_ERROR(e.Strings("resourceNames", &s.resource_names));
    GPUNODE_RETURN_IF_ERROR(e.Check());
  }
  {
    Reader v = r.Section("validator");
    ValidatorSection& s = c.validator;
    GPUNODE_RETURN_IF_ERROR(v.CheckSectionType());
    GPUNODE_RETURN_IF_ERROR(v.Bool("enabled", &s.enabled));
    GPUNODE_RETURN_IF_ERROR(v.Bool("cuda", &s.cuda));
    GPUNODE_RETURN_IF_ERROR(v.Duration("interval", &s.interval));
    GPUNODE_RETURN_IF_ERROR(v.Duration("retry", &s.retry));
    GPUNODE_RETURN_IF_ERROR(v.Bool("gate", &s.gate));
    if (s.retry < std::chrono::seconds(1) || s.interval < std::chrono::seconds(1)) {
      return v.Error(root["validator"], "retry", "interval and retry must be at least 1s");
    }
    GPUNODE_RETURN_IF_ERROR(v.Check());
  }
  {
    Reader m = r.Section("mig");
    GPUNODE_RETURN_IF_ERROR(m.CheckSectionType());
    GPUNODE_RETURN_IF_ERROR(m.String("configFile", &c.mig.config_file));
    GPUNODE_RETURN_IF_ERROR(m.Bool("allowReal", &c.mig.allow_real));
    GPUNODE_RETURN_IF_ERROR(m.Check());
  }
  GPUNODE_RETURN_IF_ERROR(r.Check());
  return c;
}

StatusOr<AgentConfig> LoadAgentConfig(const std::string& path) {
  if (path.empty()) return AgentConfig{};
  std::ifstream in(path, std::ios::binary);
  if (!in) return ErrnoToStatus(errno, "read agent config", path);
  std::ostringstream text;
  text << in.rdbuf();
  return ParseAgentConfig(text.str(), path);
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
           {"watchConfig", Ms(c.watch_config)},
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
                          {"resourceNames", c.exporter.resource_names}}},
           {"mig", J{{"configFile", c.mig.config_file}, {"allowReal", c.mig.allow_real}}}};
}

}  // namespace gpunode::agent
