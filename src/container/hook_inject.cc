// The hook's plan (hook_inject.h, step 1): the OCI state, and what the shim's injection would add.
#include "src/container/hook_inject.h"

#include <algorithm>
#include <limits>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "src/base/json.h"
#include "src/container/oci_request.h"

namespace gpunode::container {
namespace {

using Json = nlohmann::ordered_json;

bool HasDotDot(absl::string_view path) {
  for (absl::string_view p : absl::StrSplit(path, '/')) {
    if (p == "..") return true;
  }
  return false;
}

bool AbsoluteClean(absl::string_view path) {
  return !path.empty() && path[0] == '/' && !HasDotDot(path) && path.find('\0') == absl::string_view::npos;
}

const Json& ArrayOr(const Json& parent, std::initializer_list<const char*> keys) {
  static const Json kEmpty = Json::array();
  const Json* cur = &parent;
  for (const char* k : keys) {
    if (!cur->is_object() || !cur->contains(k)) return kEmpty;
    cur = &(*cur)[k];
  }
  return cur->is_array() ? *cur : kEmpty;
}

StatusOr<int64_t> Number(const Json& j, const char* key, const std::string& where, int64_t min, int64_t max) {
  if (!j.contains(key) || !j[key].is_number_integer()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": no integer \"", key, "\""));
  }
  const int64_t v = j[key].get<int64_t>();
  if (v < min || v > max) return absl::InvalidArgumentError(absl::StrCat(where, ": \"", key, "\" ", v, " out of range"));
  return v;
}

std::string StringOr(const Json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
}

std::vector<std::string> Strings(const Json& j, const char* key) {
  std::vector<std::string> out;
  if (!j.is_object() || !j.contains(key) || !j[key].is_array()) return out;
  for (const Json& v : j[key]) {
    if (v.is_string()) out.push_back(v.get<std::string>());
  }
  return out;
}

}  // namespace

StatusOr<HookState> ParseHookState(absl::string_view json) {
  if (json.size() > kMaxHookStateBytes) {
    return absl::InvalidArgumentError(absl::StrCat("OCI state on stdin: over ", kMaxHookStateBytes, " bytes"));
  }
  GPUNODE_ASSIGN_OR_RETURN(nlohmann::json doc, ParseJson(json, "OCI state on stdin", 16));
  if (!doc.is_object()) return absl::InvalidArgumentError("OCI state on stdin: not a JSON object");
  HookState s;
  if (doc.contains("id") && doc["id"].is_string()) s.id = doc["id"].get<std::string>();
  if (!doc.contains("pid") || !doc["pid"].is_number_integer()) {
    return absl::InvalidArgumentError("OCI state on stdin: no integer \"pid\" (the container's process)");
  }
  const int64_t pid = doc["pid"].get<int64_t>();
  if (pid <= 1 || pid > std::numeric_limits<int>::max()) {
    return absl::InvalidArgumentError(absl::StrCat("OCI state on stdin: pid ", pid, " is not a container's process"));
  }
  s.pid = static_cast<int>(pid);
  if (!doc.contains("bundle") || !doc["bundle"].is_string()) {
    return absl::InvalidArgumentError("OCI state on stdin: no \"bundle\" string");
  }
  s.bundle = doc["bundle"].get<std::string>();
  if (!AbsoluteClean(s.bundle)) {
    return absl::InvalidArgumentError(absl::StrCat("OCI state on stdin: bundle \"", s.bundle, "\" is not an absolute path without .."));
  }
  return s;
}

StatusOr<std::string> BundleRootPath(const Json& config, const std::string& bundle) {
  const std::string where = bundle + "/config.json";
  if (!config.is_object() || !config.contains("root") || !config["root"].is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": no root"));
  }
  const std::string root = StringOr(config["root"], "path");
  if (root.empty() || HasDotDot(root) || root.find('\0') != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": root.path \"", root, "\" is empty or has .."));
  }
  return root[0] == '/' ? root : bundle + "/" + root;
}

StatusOr<InjectionPlan> PlanFromConfigs(const Json& before, const Json& after) {
  InjectionPlan plan;
  // Device nodes: new paths, or a path whose entry changed.
  const Json& old_devices = ArrayOr(before, {"linux", "devices"});
  for (const Json& d : ArrayOr(after, {"linux", "devices"})) {
    if (std::find(old_devices.begin(), old_devices.end(), d) != old_devices.end()) continue;
    const std::string path = StringOr(d, "path");
    const std::string where = absl::StrCat("linux.devices ", path);
    if (!AbsoluteClean(path)) return absl::InvalidArgumentError(absl::StrCat("device path \"", path, "\": not absolute without .."));
    const std::string type = StringOr(d, "type");
    if (type != "c" && type != "b" && type != "u") {
      return absl::InvalidArgumentError(absl::StrCat(where, ": type \"", type, "\" is not c, b or u"));
    }
    PlannedDeviceNode n;
    n.path = path;
    n.type = type == "b" ? 'b' : 'c';
    GPUNODE_ASSIGN_OR_RETURN(n.major, Number(d, "major", where, 0, std::numeric_limits<uint32_t>::max()));
    GPUNODE_ASSIGN_OR_RETURN(n.minor, Number(d, "minor", where, 0, std::numeric_limits<uint32_t>::max()));
    if (d.contains("fileMode")) {
      GPUNODE_ASSIGN_OR_RETURN(int64_t mode, Number(d, "fileMode", where, 0, 07777));
      n.mode = static_cast<uint32_t>(mode);
    }
    if (d.contains("uid")) {
      GPUNODE_ASSIGN_OR_RETURN(int64_t v, Number(d, "uid", where, 0, std::numeric_limits<uint32_t>::max()));
      n.uid = static_cast<uint32_t>(v);
    }
    if (d.contains("gid")) {
      GPUNODE_ASSIGN_OR_RETURN(int64_t v, Number(d, "gid", where, 0, std::numeric_limits<uint32_t>::max()));
      n.gid = static_cast<uint32_t>(v);
    }
    plan.devices.push_back(std::move(n));
  }
  // Mounts: new or changed entries (the shim replaces an entry at the same destination).
  const Json& old_mounts = ArrayOr(before, {"mounts"});
  for (const Json& m : ArrayOr(after, {"mounts"})) {
    if (std::find(old_mounts.begin(), old_mounts.end(), m) != old_mounts.end()) continue;
    PlannedMount p;
    p.source = StringOr(m, "source");
    p.destination = StringOr(m, "destination");
    if (!AbsoluteClean(p.source) || !AbsoluteClean(p.destination)) {
      return absl::InvalidArgumentError(absl::StrCat("mount \"", p.source, "\" -> \"", p.destination,
                                                     "\": source and destination must be absolute, without .."));
    }
    bool bind = false;
    for (const std::string& o : Strings(m, "options")) {
      if (o == "bind") bind = true;
      if (o == "rbind") bind = p.recursive = true;
      if (o == "ro") p.read_only = true;
      if (o == "rw") p.read_only = false;
      if (o == "noexec") p.noexec = true;
    }
    const std::string type = StringOr(m, "type");
    if (!bind && type != "bind") {
      return absl::InvalidArgumentError(absl::StrCat("mount ", p.destination, ": type \"", type,
                                                     "\" is not a bind mount; the hook makes bind mounts only"));
    }
    plan.mounts.push_back(std::move(p));
  }
  // Hooks the spec adds (never Docker's own nvidia-container-runtime-hook: that is us).
  for (const char* stage : {"prestart", "createRuntime", "createContainer", "startContainer"}) {
    const Json& old_hooks = ArrayOr(before, {"hooks", stage});
    for (const Json& h : ArrayOr(after, {"hooks", stage})) {
      if (std::find(old_hooks.begin(), old_hooks.end(), h) != old_hooks.end()) continue;
      PlannedHook p;
      p.stage = stage;
      p.path = StringOr(h, "path");
      if (p.path.empty() || p.path[0] != '/') {
        return absl::InvalidArgumentError(absl::StrCat("hooks.", stage, ": path \"", p.path, "\" is not absolute"));
      }
      p.args = Strings(h, "args");
      p.env = Strings(h, "env");
      plan.hooks.push_back(std::move(p));
    }
  }
  // The device cgroup's allow rules.
  const Json& old_rules = ArrayOr(before, {"linux", "resources", "devices"});
  for (const Json& r : ArrayOr(after, {"linux", "resources", "devices"})) {
    if (std::find(old_rules.begin(), old_rules.end(), r) != old_rules.end()) continue;
    if (!r.is_object() || !r.contains("allow") || r["allow"] != true) continue;
    const std::string where = "linux.resources.devices";
    DeviceRule rule;
    const std::string type = StringOr(r, "type");
    if (type != "c" && type != "b") return absl::InvalidArgumentError(absl::StrCat(where, ": type \"", type, "\" is not c or b"));
    rule.type = type[0];
    GPUNODE_ASSIGN_OR_RETURN(rule.major, Number(r, "major", where, 0, std::numeric_limits<uint32_t>::max()));
    rule.minor = -1;
    if (r.contains("minor")) {
      GPUNODE_ASSIGN_OR_RETURN(rule.minor, Number(r, "minor", where, 0, std::numeric_limits<uint32_t>::max()));
    }
    rule.access = StringOr(r, "access");
    if (rule.access.empty()) rule.access = "rwm";
    if (rule.access.find_first_not_of("rwm") != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": access \"", rule.access, "\" is not of r, w, m"));
    }
    plan.rules.push_back(std::move(rule));
  }
  // Env: reported, not applied (the container's process was created with its env).
  const std::vector<std::string> old_env = before.contains("process") ? Strings(before["process"], "env") : std::vector<std::string>{};
  if (after.contains("process")) {
    for (const std::string& e : Strings(after["process"], "env")) {
      if (std::find(old_env.begin(), old_env.end(), e) == old_env.end()) plan.env.push_back(e);
    }
  }
  return plan;
}

}  // namespace gpunode::container
