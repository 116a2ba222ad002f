#include "src/container/cdi_spec.h"

#include <algorithm>
#include <set>

#include "src/base/json.h"
#include "src/base/yaml.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/base/version.h"
#include "yaml-cpp/yaml.h"

namespace gpunode::cdi {
namespace {

using ojson = nlohmann::ordered_json;

bool IsAlpha(char c) { return absl::ascii_isalpha(static_cast<unsigned char>(c)); }
bool IsAlnum(char c) { return absl::ascii_isalnum(static_cast<unsigned char>(c)); }

// Vendor and class: start with a letter, end with a letter or digit, inner [A-Za-z0-9_.-].
std::string CheckVendorOrClass(absl::string_view what, absl::string_view s) {
  if (s.empty()) return absl::StrCat("empty ", what);
  if (!IsAlpha(s.front())) return absl::StrCat(what, " \"", s, "\" must start with a letter");
  if (!IsAlnum(s.back())) return absl::StrCat(what, " \"", s, "\" must end with a letter or digit");
  for (char c : s) {
    if (!IsAlnum(c) && c != '_' && c != '.' && c != '-') {
      return absl::StrCat(what, " \"", s, "\" has an invalid character '", std::string(1, c),
                          "' (allowed: letters, digits, _ . -)");
    }
  }
  return "";
}

ojson EditsToJson(const ContainerEdits& e) {
  ojson j = ojson::object();
  if (!e.env.empty()) j["env"] = e.env;
  if (!e.device_nodes.empty()) {
    ojson nodes = ojson::array();
    for (const DeviceNode& n : e.device_nodes) {
      ojson d;
      d["path"] = n.path;
      if (!n.host_path.empty()) d["hostPath"] = n.host_path;
      if (!n.type.empty()) d["type"] = n.type;
      if (n.major) d["major"] = *n.major;
      if (n.minor) d["minor"] = *n.minor;
      if (n.file_mode) d["fileMode"] = *n.file_mode;
      if (!n.permissions.empty()) d["permissions"] = n.permissions;
      if (n.uid) d["uid"] = *n.uid;
      if (n.gid) d["gid"] = *n.gid;
      nodes.push_back(std::move(d));
    }
    j["deviceNodes"] = std::move(nodes);
  }
  if (!e.net_devices.empty()) {
    ojson devs = ojson::array();
    for (const NetDevice& n : e.net_devices) {
      devs.push_back(ojson{{"hostInterfaceName", n.host_interface_name}, {"name", n.name}});
    }
    j["netDevices"] = std::move(devs);
  }
  if (!e.hooks.empty()) {
    ojson hooks = ojson::array();
    for (const Hook& h : e.hooks) {
      ojson d;
      d["hookName"] = h.hook_name;
      d["path"] = h.path;
      if (!h.args.empty()) d["args"] = h.args;
      if (!h.env.empty()) d["env"] = h.env;
      if (h.timeout) d["timeout"] = *h.timeout;
      hooks.push_back(std::move(d));
    }
    j["hooks"] = std::move(hooks);
  }
  if (!e.mounts.empty()) {
    ojson mounts = ojson::array();
    for (const Mount& m : e.mounts) {
      ojson d;
      d["hostPath"] = m.host_path;
      d["containerPath"] = m.container_path;
      if (!m.options.empty()) d["options"] = m.options;
      if (!m.type.empty()) d["type"] = m.type;
      mounts.push_back(std::move(d));
    }
    j["mounts"] = std::move(mounts);
  }
  if (e.intel_rdt) {
    ojson d = ojson::object();
    if (!e.intel_rdt->clos_id.empty()) d["closID"] = e.intel_rdt->clos_id;
    if (!e.intel_rdt->l3_cache_schema.empty()) d["l3CacheSchema"] = e.intel_rdt->l3_cache_schema;
    if (!e.intel_rdt->mem_bw_schema.empty()) d["memBwSchema"] = e.intel_rdt->mem_bw_schema;
    if (!e.intel_rdt->schemata.empty()) d["schemata"] = e.intel_rdt->schemata;
    if (e.intel_rdt->enable_monitoring) d["enableMonitoring"] = *e.intel_rdt->enable_monitoring;
    j["intelRdt"] = std::move(d);
  }
  if (!e.additional_gids.empty()) j["additionalGids"] = e.additional_gids;
  return j;
}

void EmitYaml(YAML::Emitter& out, const ojson& j) {
  switch (j.type()) {
    case ojson::value_t::object:
      out << YAML::BeginMap;
      for (auto it = j.begin(); it != j.end(); ++it) {
        out << YAML::Key << it.key() << YAML::Value;
        EmitYaml(out, it.value());
      }
      out << YAML::EndMap;
      break;
    case ojson::value_t::array:
      out << YAML::BeginSeq;
      for (const auto& e : j) EmitYaml(out, e);
      out << YAML::EndSeq;
      break;
    case ojson::value_t::string:
      out << YAML::DoubleQuoted << j.get<std::string>();
      break;
    case ojson::value_t::boolean:
      out << (j.get<bool>() ? "true" : "false");
      break;
    default:
      out << DumpJson(j);
  }
}

// ---- strict parsing ----

class Walker {
 public:
  explicit Walker(absl::string_view origin) : origin_(origin) {}

  Status Error(const std::string& path, absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat(origin_, ": ", path.empty() ? "" : path + ": ", what));
  }

  static const char* KindOf(const YAML::Node& n) {
    switch (n.Type()) {
      case YAML::NodeType::Map:
        return "a mapping";
      case YAML::NodeType::Sequence:
        return "a list";
      case YAML::NodeType::Null:
        return "null";
      default:
        return "a scalar";
    }
  }

  // Keys of a mapping, each checked against `known`.
  Status Fields(const YAML::Node& n, const std::string& path, std::initializer_list<const char*> known) const {
    if (!n.IsMap()) return Error(path, absl::StrCat("expected a mapping, got ", KindOf(n)));
    for (const auto& kv : n) {
      if (!kv.first.IsScalar()) return Error(path, "a key is not a string");
      std::string key = kv.first.Scalar();
      if (!IsValidUtf8(key)) return Error(path, "a key is not valid UTF-8");
      bool ok = std::any_of(known.begin(), known.end(), [&](const char* k) { return key == k; });
      if (!ok) {
        return Error(Join(path, key), absl::StrCat("unknown field (known: ", absl::StrJoin(known, ", "), ")"));
      }
    }
    return absl::OkStatus();
  }

  static std::string Join(const std::string& path, absl::string_view key) {
    return path.empty() ? std::string(key) : absl::StrCat(path, ".", key);
  }

  // A plain (unquoted) YAML scalar that a YAML->JSON conversion turns into a number, bool or null.
  static bool PlainNonString(const YAML::Node& n) {
    if (n.Tag() != "?") return false;
    const std::string& s = n.Scalar();
    if (s == "true" || s == "false" || s == "null" || s == "~" || s == "True" || s == "False") return true;
    double d;
    return absl::SimpleAtod(s, &d) && !s.empty() && (absl::ascii_isdigit(s[0]) || s[0] == '-' || s[0] == '.');
  }

  Status String(const YAML::Node& n, const std::string& path, std::string* out) const {
    if (!n.IsScalar()) return Error(path, absl::StrCat("expected a string, got ", KindOf(n)));
    if (PlainNonString(n)) {
      return Error(path, absl::StrCat("expected a string, got the unquoted value ", n.Scalar(),
                                      " (quote it: \"", n.Scalar(), "\")"));
    }
    if (!IsValidUtf8(n.Scalar())) return Error(path, "not valid UTF-8 (CDI strings are UTF-8)");
    *out = n.Scalar();
    return absl::OkStatus();
  }

  Status Strings(const YAML::Node& n, const std::string& path, std::vector<std::string>* out) const {
    if (n.IsNull()) return absl::OkStatus();
    if (!n.IsSequence()) return Error(path, absl::StrCat("expected a list of strings, got ", KindOf(n)));
    for (size_t i = 0; i < n.size(); ++i) {
      std::string s;
      GPUNODE_RETURN_IF_ERROR(String(n[i], absl::StrCat(path, "[", i, "]"), &s));
      out->push_back(std::move(s));
    }
    return absl::OkStatus();
  }

  Status Int(const YAML::Node& n, const std::string& path, int64_t lo, int64_t hi, int64_t* out) const {
    int64_t v = 0;
    if (!n.IsScalar() || n.Tag() != "?" || !absl::SimpleAtoi(n.Scalar(), &v)) {
      return Error(path, absl::StrCat("expected an integer, got ", n.IsScalar() ? "\"" + n.Scalar() + "\"" : KindOf(n)));
    }
    if (v < lo || v > hi) return Error(path, absl::StrCat(v, " is out of range [", lo, ", ", hi, "]"));
    *out = v;
    return absl::OkStatus();
  }

  Status U32(const YAML::Node& n, const std::string& path, std::optional<uint32_t>* out) const {
    int64_t v;
    GPUNODE_RETURN_IF_ERROR(Int(n, path, 0, 4294967295LL, &v));
    *out = static_cast<uint32_t>(v);
    return absl::OkStatus();
  }

  Status StringMap(const YAML::Node& n, const std::string& path, std::map<std::string, std::string>* out) const {
    if (n.IsNull()) return absl::OkStatus();
    if (!n.IsMap()) return Error(path, absl::StrCat("expected a mapping of strings, got ", KindOf(n)));
    for (const auto& kv : n) {
      if (!kv.first.IsScalar()) return Error(path, "a key is not a string");
      if (!IsValidUtf8(kv.first.Scalar())) return Error(path, "a key is not valid UTF-8");
      std::string v;
      GPUNODE_RETURN_IF_ERROR(String(kv.second, Join(path, kv.first.Scalar()), &v));
      (*out)[kv.first.Scalar()] = v;
    }
    return absl::OkStatus();
  }

  Status List(const YAML::Node& n, const std::string& path) const {
    if (!n.IsSequence()) return Error(path, absl::StrCat("expected a list, got ", KindOf(n)));
    return absl::OkStatus();
  }

  Status Edits(const YAML::Node& n, const std::string& path, ContainerEdits* e) const {
    if (n.IsNull()) return absl::OkStatus();
    GPUNODE_RETURN_IF_ERROR(Fields(n, path, {"env", "deviceNodes", "netDevices", "hooks", "mounts", "intelRdt",
                                             "additionalGids"}));
    if (auto env = n["env"]) GPUNODE_RETURN_IF_ERROR(Strings(env, Join(path, "env"), &e->env));
    if (auto nodes = n["deviceNodes"]; nodes && !nodes.IsNull()) {
      const std::string base = Join(path, "deviceNodes");
      GPUNODE_RETURN_IF_ERROR(List(nodes, base));
      for (size_t i = 0; i < nodes.size(); ++i) {
        const std::string p = absl::StrCat(base, "[", i, "]");
        const YAML::Node& d = nodes[i];
        GPUNODE_RETURN_IF_ERROR(Fields(d, p, {"path", "hostPath", "type", "major", "minor", "fileMode",
                                              "permissions", "uid", "gid"}));
        DeviceNode node;
        if (d["path"]) GPUNODE_RETURN_IF_ERROR(String(d["path"], Join(p, "path"), &node.path));
        if (d["hostPath"]) GPUNODE_RETURN_IF_ERROR(String(d["hostPath"], Join(p, "hostPath"), &node.host_path));
        if (d["type"]) GPUNODE_RETURN_IF_ERROR(String(d["type"], Join(p, "type"), &node.type));
        int64_t v;
        if (d["major"]) {
          GPUNODE_RETURN_IF_ERROR(Int(d["major"], Join(p, "major"), INT64_MIN, INT64_MAX, &v));
          node.major = v;
        }
        if (d["minor"]) {
          GPUNODE_RETURN_IF_ERROR(Int(d["minor"], Join(p, "minor"), INT64_MIN, INT64_MAX, &v));
          node.minor = v;
        }
        if (d["fileMode"]) GPUNODE_RETURN_IF_ERROR(U32(d["fileMode"], Join(p, "fileMode"), &node.file_mode));
        if (d["permissions"]) {
          GPUNODE_RETURN_IF_ERROR(String(d["permissions"], Join(p, "permissions"), &node.permissions));
        }
        if (d["uid"]) GPUNODE_RETURN_IF_ERROR(U32(d["uid"], Join(p, "uid"), &node.uid));
        if (d["gid"]) GPUNODE_RETURN_IF_ERROR(U32(d["gid"], Join(p, "gid"), &node.gid));
        e->device_nodes.push_back(std::move(node));
      }
    }
    if (auto nets = n["netDevices"]; nets && !nets.IsNull()) {
      const std::string base = Join(path, "netDevices");
      GPUNODE_RETURN_IF_ERROR(List(nets, base));
      for (size_t i = 0; i < nets.size(); ++i) {
        const std::string p = absl::StrCat(base, "[", i, "]");
        GPUNODE_RETURN_IF_ERROR(Fields(nets[i], p, {"hostInterfaceName", "name"}));
        NetDevice d;
        if (nets[i]["hostInterfaceName"]) {
          GPUNODE_RETURN_IF_ERROR(
              String(nets[i]["hostInterfaceName"], Join(p, "hostInterfaceName"), &d.host_interface_name));
        }
        if (nets[i]["name"]) GPUNODE_RETURN_IF_ERROR(String(nets[i]["name"], Join(p, "name"), &d.name));
        e->net_devices.push_back(std::move(d));
      }
    }
    if (auto hooks = n["hooks"]; hooks && !hooks.IsNull()) {
      const std::string base = Join(path, "hooks");
      GPUNODE_RETURN_IF_ERROR(List(hooks, base));
      for (size_t i = 0; i < hooks.size(); ++i) {
        const std::string p = absl::StrCat(base, "[", i, "]");
        const YAML::Node& h = hooks[i];
        GPUNODE_RETURN_IF_ERROR(Fields(h, p, {"hookName", "path", "args", "env", "timeout"}));
        Hook hook;
        if (h["hookName"]) GPUNODE_RETURN_IF_ERROR(String(h["hookName"], Join(p, "hookName"), &hook.hook_name));
        if (h["path"]) GPUNODE_RETURN_IF_ERROR(String(h["path"], Join(p, "path"), &hook.path));
        if (h["args"]) GPUNODE_RETURN_IF_ERROR(Strings(h["args"], Join(p, "args"), &hook.args));
        if (h["env"]) GPUNODE_RETURN_IF_ERROR(Strings(h["env"], Join(p, "env"), &hook.env));
        if (h["timeout"] && !h["timeout"].IsNull()) {
          int64_t v;
          GPUNODE_RETURN_IF_ERROR(Int(h["timeout"], Join(p, "timeout"), INT32_MIN, INT32_MAX, &v));
          hook.timeout = v;
        }
        e->hooks.push_back(std::move(hook));
      }
    }
    if (auto mounts = n["mounts"]; mounts && !mounts.IsNull()) {
      const std::string base = Join(path, "mounts");
      GPUNODE_RETURN_IF_ERROR(List(mounts, base));
      for (size_t i = 0; i < mounts.size(); ++i) {
        const std::string p = absl::StrCat(base, "[", i, "]");
        const YAML::Node& m = mounts[i];
        GPUNODE_RETURN_IF_ERROR(Fields(m, p, {"hostPath", "containerPath", "options", "type"}));
        Mount mount;
        if (m["hostPath"]) GPUNODE_RETURN_IF_ERROR(String(m["hostPath"], Join(p, "hostPath"), &mount.host_path));
        if (m["containerPath"]) {
          GPUNODE_RETURN_IF_ERROR(String(m["containerPath"], Join(p, "containerPath"), &mount.container_path));
        }
        if (m["options"]) GPUNODE_RETURN_IF_ERROR(Strings(m["options"], Join(p, "options"), &mount.options));
        if (m["type"]) GPUNODE_RETURN_IF_ERROR(String(m["type"], Join(p, "type"), &mount.type));
        e->mounts.push_back(std::move(mount));
      }
    }
    if (auto rdt = n["intelRdt"]; rdt && !rdt.IsNull()) {
      const std::string p = Join(path, "intelRdt");
      GPUNODE_RETURN_IF_ERROR(
          Fields(rdt, p, {"closID", "l3CacheSchema", "memBwSchema", "schemata", "enableMonitoring"}));
      IntelRdt r;
      if (rdt["closID"]) GPUNODE_RETURN_IF_ERROR(String(rdt["closID"], Join(p, "closID"), &r.clos_id));
      if (rdt["l3CacheSchema"]) {
        GPUNODE_RETURN_IF_ERROR(String(rdt["l3CacheSchema"], Join(p, "l3CacheSchema"), &r.l3_cache_schema));
      }
      if (rdt["memBwSchema"]) {
        GPUNODE_RETURN_IF_ERROR(String(rdt["memBwSchema"], Join(p, "memBwSchema"), &r.mem_bw_schema));
      }
      if (rdt["schemata"]) GPUNODE_RETURN_IF_ERROR(Strings(rdt["schemata"], Join(p, "schemata"), &r.schemata));
      if (auto mon = rdt["enableMonitoring"]) {
        if (!mon.IsScalar() || (mon.Scalar() != "true" && mon.Scalar() != "false")) {
          return Error(Join(p, "enableMonitoring"), "expected true or false");
        }
        r.enable_monitoring = mon.Scalar() == "true";
      }
      e->intel_rdt = std::move(r);
    }
    if (auto gids = n["additionalGids"]; gids && !gids.IsNull()) {
      const std::string p = Join(path, "additionalGids");
      GPUNODE_RETURN_IF_ERROR(List(gids, p));
      for (size_t i = 0; i < gids.size(); ++i) {
        std::optional<uint32_t> g;
        GPUNODE_RETURN_IF_ERROR(U32(gids[i], absl::StrCat(p, "[", i, "]"), &g));
        e->additional_gids.push_back(*g);
      }
    }
    return absl::OkStatus();
  }

  StatusOr<Spec> Parse(const YAML::Node& root) const {
    if (!root || root.IsNull()) return Error("", "empty document");
    GPUNODE_RETURN_IF_ERROR(Fields(root, "", {"cdiVersion", "kind", "annotations", "devices", "containerEdits"}));
    Spec spec;
    if (root["cdiVersion"]) GPUNODE_RETURN_IF_ERROR(String(root["cdiVersion"], "cdiVersion", &spec.cdi_version));
    if (root["kind"]) GPUNODE_RETURN_IF_ERROR(String(root["kind"], "kind", &spec.kind));
    if (root["annotations"]) GPUNODE_RETURN_IF_ERROR(StringMap(root["annotations"], "annotations", &spec.annotations));
    if (auto devices = root["devices"]; devices && !devices.IsNull()) {
      GPUNODE_RETURN_IF_ERROR(List(devices, "devices"));
      for (size_t i = 0; i < devices.size(); ++i) {
        const std::string p = absl::StrCat("devices[", i, "]");
        GPUNODE_RETURN_IF_ERROR(Fields(devices[i], p, {"name", "annotations", "containerEdits"}));
        Device d;
        if (devices[i]["name"]) GPUNODE_RETURN_IF_ERROR(String(devices[i]["name"], Join(p, "name"), &d.name));
        if (devices[i]["annotations"]) {
          GPUNODE_RETURN_IF_ERROR(StringMap(devices[i]["annotations"], Join(p, "annotations"), &d.annotations));
        }
        if (devices[i]["containerEdits"]) {
          GPUNODE_RETURN_IF_ERROR(Edits(devices[i]["containerEdits"], Join(p, "containerEdits"), &d.edits));
        }
        spec.devices.push_back(std::move(d));
      }
    }
    if (root["containerEdits"]) GPUNODE_RETURN_IF_ERROR(Edits(root["containerEdits"], "containerEdits", &spec.edits));
    return spec;
  }

 private:
  std::string origin_;
};

void EnvProblems(const std::vector<std::string>& env, const std::string& path, std::vector<std::string>* out) {
  for (size_t i = 0; i < env.size(); ++i) {
    size_t eq = env[i].find('=');
    if (eq == std::string::npos || eq == 0) {
      out->push_back(absl::StrCat(path, "[", i, "]: \"", env[i], "\" is not NAME=VALUE"));
    }
  }
}

void EditsProblems(const ContainerEdits& e, const std::string& path, std::vector<std::string>* out) {
  EnvProblems(e.env, path + ".env", out);
  for (size_t i = 0; i < e.device_nodes.size(); ++i) {
    const DeviceNode& n = e.device_nodes[i];
    const std::string p = absl::StrCat(path, ".deviceNodes[", i, "]");
    if (n.path.empty()) out->push_back(p + ".path: required");
    if (!n.type.empty() && n.type != "b" && n.type != "c" && n.type != "u" && n.type != "p") {
      out->push_back(absl::StrCat(p, ".type: \"", n.type, "\" is not one of b, c, u, p"));
    }
    if (n.permissions != "none" &&
        n.permissions.find_first_not_of("rwm") != std::string::npos) {
      out->push_back(absl::StrCat(p, ".permissions: \"", n.permissions, "\" is not a subset of rwm (or none)"));
    }
  }
  for (size_t i = 0; i < e.net_devices.size(); ++i) {
    const std::string p = absl::StrCat(path, ".netDevices[", i, "]");
    if (e.net_devices[i].host_interface_name.empty()) out->push_back(p + ".hostInterfaceName: required");
    if (e.net_devices[i].name.empty()) out->push_back(p + ".name: required");
  }
  static const std::set<std::string> kHookNames = {"prestart",       "createRuntime", "createContainer",
                                                   "startContainer", "poststart",     "poststop"};
  for (size_t i = 0; i < e.hooks.size(); ++i) {
    const Hook& h = e.hooks[i];
    const std::string p = absl::StrCat(path, ".hooks[", i, "]");
    if (!kHookNames.count(h.hook_name)) {
      out->push_back(absl::StrCat(p, ".hookName: \"", h.hook_name,
                                  "\" is not one of prestart, createRuntime, createContainer, startContainer, "
                                  "poststart, poststop"));
    }
    if (h.path.empty()) {
      out->push_back(p + ".path: required");
    } else if (h.path.front() != '/') {
      out->push_back(absl::StrCat(p, ".path: \"", h.path, "\" is not absolute"));
    }
    EnvProblems(h.env, p + ".env", out);
    if (h.timeout && *h.timeout <= 0) out->push_back(absl::StrCat(p, ".timeout: ", *h.timeout, " is not > 0"));
  }
  for (size_t i = 0; i < e.mounts.size(); ++i) {
    const std::string p = absl::StrCat(path, ".mounts[", i, "]");
    if (e.mounts[i].host_path.empty()) out->push_back(p + ".hostPath: required");
    if (e.mounts[i].container_path.empty()) out->push_back(p + ".containerPath: required");
  }
}

}  // namespace

const std::vector<std::string>& KnownVersions() {
  static const auto* kVersions = new std::vector<std::string>{
      "0.1.0", "0.2.0", "0.3.0", "0.4.0", "0.5.0", "0.6.0", "0.7.0", "0.8.0", "1.0.0", "1.1.0"};
  return *kVersions;
}

RequiredVersion MinimumVersion(const Spec& spec) {
  std::vector<const ContainerEdits*> edits = {&spec.edits};
  for (const Device& d : spec.devices) edits.push_back(&d.edits);
  for (const ContainerEdits* e : edits) {
    if (!e->net_devices.empty()) return {"1.1.0", "netDevices are used"};
    if (e->intel_rdt && (!e->intel_rdt->schemata.empty() || e->intel_rdt->enable_monitoring)) {
      return {"1.1.0", "intelRdt.schemata or enableMonitoring is used"};
    }
  }
  for (const ContainerEdits* e : edits) {
    if (e->intel_rdt) return {"0.7.0", "intelRdt is used"};
    if (!e->additional_gids.empty()) return {"0.7.0", "additionalGids are used"};
  }
  if (!spec.annotations.empty()) return {"0.6.0", "the spec has annotations"};
  for (const Device& d : spec.devices) {
    if (!d.annotations.empty()) return {"0.6.0", absl::StrCat("device \"", d.name, "\" has annotations")};
  }
  if (size_t slash = spec.kind.find('/'); slash != std::string::npos &&
                                          spec.kind.find('.', slash) != std::string::npos) {
    return {"0.6.0", absl::StrCat("the class of kind \"", spec.kind, "\" contains a dot")};
  }
  for (const Device& d : spec.devices) {
    if (!d.name.empty() && absl::ascii_isdigit(static_cast<unsigned char>(d.name[0]))) {
      return {"0.5.0", absl::StrCat("device name \"", d.name, "\" starts with a digit")};
    }
  }
  for (const ContainerEdits* e : edits) {
    for (const DeviceNode& n : e->device_nodes) {
      if (!n.host_path.empty()) return {"0.5.0", absl::StrCat("deviceNode ", n.path, " has a hostPath")};
    }
  }
  for (const ContainerEdits* e : edits) {
    for (const Mount& m : e->mounts) {
      if (!m.type.empty()) return {"0.4.0", absl::StrCat("mount ", m.container_path, " has a type")};
    }
  }
  return {"0.3.0", ""};
}

std::vector<std::string> QualifiedNames(const Spec& spec) {
  std::vector<std::string> out;
  for (const Device& d : spec.devices) out.push_back(absl::StrCat(spec.kind, "=", d.name));
  return out;
}

std::string CheckKind(absl::string_view kind) {
  size_t slash = kind.find('/');
  if (slash == absl::string_view::npos || kind.find('/', slash + 1) != absl::string_view::npos) {
    return absl::StrCat("kind \"", kind, "\" is not vendor/class (exactly one '/')");
  }
  if (std::string p = CheckVendorOrClass("vendor", kind.substr(0, slash)); !p.empty()) return p;
  absl::string_view cls = kind.substr(slash + 1);
  if (cls.size() > 63) return absl::StrCat("class \"", cls, "\" is longer than 63 characters");
  return CheckVendorOrClass("class", cls);
}

std::string CheckDeviceName(absl::string_view name) {
  if (name.empty()) return "empty device name";
  if (!IsAlnum(name.front())) return absl::StrCat("device name \"", name, "\" must start with a letter or digit");
  if (!IsAlnum(name.back())) return absl::StrCat("device name \"", name, "\" must end with a letter or digit");
  for (char c : name) {
    if (!IsAlnum(c) && c != '_' && c != '.' && c != '-' && c != ':') {
      return absl::StrCat("device name \"", name, "\" has an invalid character '", std::string(1, c),
                          "' (allowed: letters, digits, _ . - :)");
    }
  }
  return "";
}

namespace {
// Every key and string of the spec must be UTF-8 (CDI specs are JSON documents; a runtime or our
// own JSON writer cannot carry anything else). The problem names the place, not the bytes.
void Utf8Problems(const ojson& doc, std::vector<std::string>* out) {
  std::vector<std::pair<const ojson*, std::string>> stack{{&doc, ""}};
  while (!stack.empty()) {
    auto [j, path] = stack.back();
    stack.pop_back();
    if (j->is_string()) {
      if (!IsValidUtf8(j->get_ref<const std::string&>())) out->push_back(absl::StrCat(path, ": not valid UTF-8"));
    } else if (j->is_object()) {
      for (auto it = j->begin(); it != j->end(); ++it) {
        const bool key_ok = IsValidUtf8(it.key());
        if (!key_ok) out->push_back(absl::StrCat(path.empty() ? "(top)" : path, ": a key is not valid UTF-8"));
        stack.emplace_back(&it.value(), path.empty() ? (key_ok ? it.key() : "?") : absl::StrCat(path, ".", key_ok ? it.key() : "?"));
      }
    } else if (j->is_array()) {
      for (size_t i = 0; i < j->size(); ++i) stack.emplace_back(&(*j)[i], absl::StrCat(path, "[", i, "]"));
    }
  }
}
}  // namespace

std::vector<std::string> SpecProblems(const Spec& spec) {
  std::vector<std::string> out;
  std::string version = spec.cdi_version;
  if (absl::StartsWith(version, "v")) version = version.substr(1);
  const auto& known = KnownVersions();
  if (spec.cdi_version.empty()) {
    out.push_back("cdiVersion: required");
  } else if (std::find(known.begin(), known.end(), version) == known.end()) {
    out.push_back(absl::StrCat("cdiVersion: \"", spec.cdi_version, "\" is not a known CDI version (",
                               absl::StrJoin(known, ", "), ")"));
  } else {
    RequiredVersion need = MinimumVersion(spec);
    auto have = Version::Parse(version);
    auto want = Version::Parse(need.version);
    if (have.ok() && want.ok() && *have < *want) {
      out.push_back(absl::StrCat("cdiVersion: ", spec.cdi_version, " is too low: ", need.reason, ", which needs ",
                                 need.version, " or later"));
    }
  }
  if (spec.kind.empty()) {
    out.push_back("kind: required");
  } else if (std::string p = CheckKind(spec.kind); !p.empty()) {
    out.push_back("kind: " + p);
  }
  if (spec.devices.empty()) out.push_back("devices: a spec needs at least one device");
  std::set<std::string> seen;
  for (size_t i = 0; i < spec.devices.size(); ++i) {
    const Device& d = spec.devices[i];
    const std::string p = absl::StrCat("devices[", i, "]");
    if (std::string problem = CheckDeviceName(d.name); !problem.empty()) {
      out.push_back(absl::StrCat(p, ".name: ", problem));
    } else if (!seen.insert(d.name).second) {
      out.push_back(absl::StrCat(p, ".name: device \"", d.name, "\" is defined more than once"));
    }
    if (d.edits.Empty()) out.push_back(p + ".containerEdits: a device needs at least one edit");
    EditsProblems(d.edits, p + ".containerEdits", &out);
  }
  EditsProblems(spec.edits, "containerEdits", &out);
  Utf8Problems(SpecToJson(spec), &out);
  return out;
}

Status ValidateSpec(const Spec& spec, absl::string_view origin) {
  std::vector<std::string> problems = SpecProblems(spec);
  if (problems.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(origin, ": ", absl::StrJoin(problems, "; ")));
}

nlohmann::ordered_json SpecToJson(const Spec& spec) {
  ojson j;
  j["cdiVersion"] = spec.cdi_version;
  j["kind"] = spec.kind;
  if (!spec.annotations.empty()) j["annotations"] = spec.annotations;
  ojson devices = ojson::array();
  for (const Device& d : spec.devices) {
    ojson dj;
    dj["name"] = d.name;
    if (!d.annotations.empty()) dj["annotations"] = d.annotations;
    dj["containerEdits"] = EditsToJson(d.edits);
    devices.push_back(std::move(dj));
  }
  j["devices"] = std::move(devices);
  if (!spec.edits.Empty()) j["containerEdits"] = EditsToJson(spec.edits);
  return j;
}

std::string RenderSpecYaml(const Spec& spec) {
  YAML::Emitter out;
  EmitYaml(out, SpecToJson(spec));
  return absl::StrCat("---\n", out.c_str(), "\n");
}

std::string RenderSpecJson(const Spec& spec) { return DumpJson(SpecToJson(spec), 2) + "\n"; }

StatusOr<Spec> ParseSpec(absl::string_view text, absl::string_view origin) {
  Walker walker(origin);
  auto root = LoadYaml(text, origin);
  if (!root.ok()) return root.status();
  try {
    return walker.Parse(*root);
  } catch (const YAML::Exception& e) {
    return walker.Error("", absl::StrCat("not YAML or JSON: ", e.what()));
  } catch (const std::exception& e) {
    return walker.Error("", e.what());
  }
}

}  // namespace gpunode::cdi
