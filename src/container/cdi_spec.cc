#include "src/container/cdi_spec.h"

#include <algorithm>
#include <set>

#include "src/base/json.h"
#include "src/base/yaml.h"
#include "src/base/yaml_emitter.h"
#include "src/base/yaml_reader.h"
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

// ---- strict parsing ----

class Walker {
 public:
  // A key that is present, even with a null value (which the typed readers then refuse).
  static bool Present(const YamlValue& v) { return v.node().IsDefined(); }

  // Keys of a mapping, each checked against `known` (and valid UTF-8: CDI is JSON).
  static Status Fields(const YamlValue& v, std::initializer_list<absl::string_view> known) {
    GPUNODE_RETURN_IF_ERROR(v.ExpectMap(known));
    for (const auto& kv : v.node()) {
      if (!IsValidUtf8(kv.first.Scalar())) return v.Error("a key is not valid UTF-8");
    }
    return absl::OkStatus();
  }

  // A plain (unquoted) YAML scalar that a YAML->JSON conversion turns into a number, bool or null.
  static bool PlainNonString(const YAML::Node& n) {
    if (n.Tag() != "?") return false;
    const std::string& s = n.Scalar();
    if (s == "true" || s == "false" || s == "null" || s == "~" || s == "True" || s == "False") return true;
    double d;
    return absl::SimpleAtod(s, &d) && !s.empty() && (absl::ascii_isdigit(s[0]) || s[0] == '-' || s[0] == '.');
  }

  static Status String(const YamlValue& v, std::string* out) {
    if (!v.IsScalar()) return v.Expected("a string");
    const std::string& s = v.node().Scalar();
    if (PlainNonString(v.node())) {
      return v.Error(absl::StrCat("expected a string, got the unquoted value ", s, " (quote it: \"", s, "\")"));
    }
    if (!IsValidUtf8(s)) return v.Error("expected a string in UTF-8 (CDI strings are UTF-8)");
    *out = s;
    return absl::OkStatus();
  }

  static Status Strings(const YamlValue& v, std::vector<std::string>* out) {
    if (v.node().IsNull()) return absl::OkStatus();
    if (!v.IsList()) return v.Expected("a list of strings");
    for (size_t i = 0; i < v.size(); ++i) {
      std::string s;
      GPUNODE_RETURN_IF_ERROR(String(v.Item(i), &s));
      out->push_back(std::move(s));
    }
    return absl::OkStatus();
  }

  // An integer as JSON has it: a plain decimal scalar (a quoted "5" is a string).
  static Status Int(const YamlValue& v, int64_t lo, int64_t hi, int64_t* out) {
    int64_t i = 0;
    if (!v.IsScalar() || v.node().Tag() != "?" || !absl::SimpleAtoi(v.node().Scalar(), &i)) {
      return v.Expected("an integer");
    }
    if (i < lo || i > hi) return v.Expected(absl::StrCat("an integer ", lo, "-", hi));
    *out = i;
    return absl::OkStatus();
  }

  static Status U32(const YamlValue& v, std::optional<uint32_t>* out) {
    int64_t i;
    GPUNODE_RETURN_IF_ERROR(Int(v, 0, 4294967295LL, &i));
    *out = static_cast<uint32_t>(i);
    return absl::OkStatus();
  }

  static Status StringMap(const YamlValue& v, std::map<std::string, std::string>* out) {
    if (v.node().IsNull()) return absl::OkStatus();
    if (!v.IsMap()) return v.Expected("a map of strings");
    return v.ForEachEntry([&](const std::string& key, const YamlValue& value) -> Status {
      if (!IsValidUtf8(key)) return v.Error("a key is not valid UTF-8");
      std::string s;
      GPUNODE_RETURN_IF_ERROR(String(value, &s));
      (*out)[key] = s;
      return absl::OkStatus();
    });
  }

  // Each optional field: present (even null) means it must have the type.
  static Status Str(const YamlValue& map, absl::string_view key, std::string* out) {
    const YamlValue v = map.Child(key);
    return Present(v) ? String(v, out) : absl::OkStatus();
  }
  static Status Strs(const YamlValue& map, absl::string_view key, std::vector<std::string>* out) {
    const YamlValue v = map.Child(key);
    return Present(v) ? Strings(v, out) : absl::OkStatus();
  }
  static Status U32(const YamlValue& map, absl::string_view key, std::optional<uint32_t>* out) {
    const YamlValue v = map.Child(key);
    return Present(v) ? U32(v, out) : absl::OkStatus();
  }
  // A list at `key` (absent or null: nothing), fn(item) for each.
  template <typename Fn>
  static Status Items(const YamlValue& map, absl::string_view key, Fn fn) {
    const YamlValue v = map.Child(key);
    if (!v.IsSet()) return absl::OkStatus();
    return v.ForEachItem(fn);
  }

  static Status DeviceNodeOf(const YamlValue& d, DeviceNode* node) {
    GPUNODE_RETURN_IF_ERROR(
        Fields(d, {"path", "hostPath", "type", "major", "minor", "fileMode", "permissions", "uid", "gid"}));
    GPUNODE_RETURN_IF_ERROR(Str(d, "path", &node->path));
    GPUNODE_RETURN_IF_ERROR(Str(d, "hostPath", &node->host_path));
    GPUNODE_RETURN_IF_ERROR(Str(d, "type", &node->type));
    int64_t v;
    if (Present(d.Child("major"))) {
      GPUNODE_RETURN_IF_ERROR(Int(d.Child("major"), INT64_MIN, INT64_MAX, &v));
      node->major = v;
    }
    if (Present(d.Child("minor"))) {
      GPUNODE_RETURN_IF_ERROR(Int(d.Child("minor"), INT64_MIN, INT64_MAX, &v));
      node->minor = v;
    }
    GPUNODE_RETURN_IF_ERROR(U32(d, "fileMode", &node->file_mode));
    GPUNODE_RETURN_IF_ERROR(Str(d, "permissions", &node->permissions));
    GPUNODE_RETURN_IF_ERROR(U32(d, "uid", &node->uid));
    return U32(d, "gid", &node->gid);
  }

  static Status HookOf(const YamlValue& h, Hook* hook) {
    GPUNODE_RETURN_IF_ERROR(Fields(h, {"hookName", "path", "args", "env", "timeout"}));
    GPUNODE_RETURN_IF_ERROR(Str(h, "hookName", &hook->hook_name));
    GPUNODE_RETURN_IF_ERROR(Str(h, "path", &hook->path));
    GPUNODE_RETURN_IF_ERROR(Strs(h, "args", &hook->args));
    GPUNODE_RETURN_IF_ERROR(Strs(h, "env", &hook->env));
    if (h.Has("timeout")) {
      int64_t v;
      GPUNODE_RETURN_IF_ERROR(Int(h.Child("timeout"), INT32_MIN, INT32_MAX, &v));
      hook->timeout = v;
    }
    return absl::OkStatus();
  }

  static Status IntelRdtOf(const YamlValue& rdt, IntelRdt* r) {
    GPUNODE_RETURN_IF_ERROR(Fields(rdt, {"closID", "l3CacheSchema", "memBwSchema", "schemata", "enableMonitoring"}));
    GPUNODE_RETURN_IF_ERROR(Str(rdt, "closID", &r->clos_id));
    GPUNODE_RETURN_IF_ERROR(Str(rdt, "l3CacheSchema", &r->l3_cache_schema));
    GPUNODE_RETURN_IF_ERROR(Str(rdt, "memBwSchema", &r->mem_bw_schema));
    GPUNODE_RETURN_IF_ERROR(Strs(rdt, "schemata", &r->schemata));
    if (const YamlValue mon = rdt.Child("enableMonitoring"); Present(mon)) {
      GPUNODE_ASSIGN_OR_RETURN(r->enable_monitoring, mon.Bool(YamlBool::kStrict));
    }
    return absl::OkStatus();
  }

  static Status Edits(const YamlValue& n, ContainerEdits* e) {
    if (n.node().IsNull()) return absl::OkStatus();
    GPUNODE_RETURN_IF_ERROR(
        Fields(n, {"env", "deviceNodes", "netDevices", "hooks", "mounts", "intelRdt", "additionalGids"}));
    GPUNODE_RETURN_IF_ERROR(Strs(n, "env", &e->env));
    if (Status st = Items(n, "deviceNodes", [&](const YamlValue& d) -> Status {
      DeviceNode node;
      GPUNODE_RETURN_IF_ERROR(DeviceNodeOf(d, &node));
      e->device_nodes.push_back(std::move(node));
      return absl::OkStatus();
    }); !st.ok()) {
      return st;
    }
    if (Status st = Items(n, "netDevices", [&](const YamlValue& d) -> Status {
      GPUNODE_RETURN_IF_ERROR(Fields(d, {"hostInterfaceName", "name"}));
      NetDevice net;
      GPUNODE_RETURN_IF_ERROR(Str(d, "hostInterfaceName", &net.host_interface_name));
      GPUNODE_RETURN_IF_ERROR(Str(d, "name", &net.name));
      e->net_devices.push_back(std::move(net));
      return absl::OkStatus();
    }); !st.ok()) {
      return st;
    }
    if (Status st = Items(n, "hooks", [&](const YamlValue& h) -> Status {
      Hook hook;
      GPUNODE_RETURN_IF_ERROR(HookOf(h, &hook));
      e->hooks.push_back(std::move(hook));
      return absl::OkStatus();
    }); !st.ok()) {
      return st;
    }
    if (Status st = Items(n, "mounts", [&](const YamlValue& m) -> Status {
      GPUNODE_RETURN_IF_ERROR(Fields(m, {"hostPath", "containerPath", "options", "type"}));
      Mount mount;
      GPUNODE_RETURN_IF_ERROR(Str(m, "hostPath", &mount.host_path));
      GPUNODE_RETURN_IF_ERROR(Str(m, "containerPath", &mount.container_path));
      GPUNODE_RETURN_IF_ERROR(Strs(m, "options", &mount.options));
      GPUNODE_RETURN_IF_ERROR(Str(m, "type", &mount.type));
      e->mounts.push_back(std::move(mount));
      return absl::OkStatus();
    }); !st.ok()) {
      return st;
    }
    if (const YamlValue rdt = n.Child("intelRdt"); rdt.IsSet()) {
      IntelRdt r;
      GPUNODE_RETURN_IF_ERROR(IntelRdtOf(rdt, &r));
      e->intel_rdt = std::move(r);
    }
    return Items(n, "additionalGids", [&](const YamlValue& g) -> Status {
      std::optional<uint32_t> gid;
      GPUNODE_RETURN_IF_ERROR(U32(g, &gid));
      e->additional_gids.push_back(*gid);
      return absl::OkStatus();
    });
  }

  static StatusOr<Spec> Parse(const YamlValue& root) {
    if (!root.IsSet()) return root.Error("empty document");
    GPUNODE_RETURN_IF_ERROR(Fields(root, {"cdiVersion", "kind", "annotations", "devices", "containerEdits"}));
    Spec spec;
    GPUNODE_RETURN_IF_ERROR(Str(root, "cdiVersion", &spec.cdi_version));
    GPUNODE_RETURN_IF_ERROR(Str(root, "kind", &spec.kind));
    if (Present(root.Child("annotations"))) {
      GPUNODE_RETURN_IF_ERROR(StringMap(root.Child("annotations"), &spec.annotations));
    }
    if (Status st = Items(root, "devices", [&](const YamlValue& dev) -> Status {
      GPUNODE_RETURN_IF_ERROR(Fields(dev, {"name", "annotations", "containerEdits"}));
      Device d;
      GPUNODE_RETURN_IF_ERROR(Str(dev, "name", &d.name));
      if (Present(dev.Child("annotations"))) {
        GPUNODE_RETURN_IF_ERROR(StringMap(dev.Child("annotations"), &d.annotations));
      }
      if (Present(dev.Child("containerEdits"))) GPUNODE_RETURN_IF_ERROR(Edits(dev.Child("containerEdits"), &d.edits));
      spec.devices.push_back(std::move(d));
      return absl::OkStatus();
    }); !st.ok()) {
      return st;
    }
    if (Present(root.Child("containerEdits"))) {
      GPUNODE_RETURN_IF_ERROR(Edits(root.Child("containerEdits"), &spec.edits));
    }
    return spec;
  }
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
  return absl::StrCat("---\n", JsonToYaml(SpecToJson(spec)), "\n");
}

std::string RenderSpecJson(const Spec& spec) { return DumpJson(SpecToJson(spec), 2) + "\n"; }

StatusOr<Spec> ParseSpec(absl::string_view text, absl::string_view origin) {
  auto root = LoadYaml(text, origin);
  if (!root.ok()) return root.status();
  const YamlValue doc(*root, std::string(origin));
  try {
    return Walker::Parse(doc);
  } catch (const YAML::Exception& e) {
    return doc.Error(absl::StrCat("not YAML or JSON: ", e.what()));
  } catch (const std::exception& e) {
    return doc.Error(e.what());
  }
}

}  // namespace gpunode::cdi
