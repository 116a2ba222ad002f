#include "src/container/oci_request.h"

#include <algorithm>
#include <filesystem>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "src/base/host_fs.h"
#include "src/container/capabilities.h"
#include "src/container/cdi_spec.h"
#include "src/container/toml_edit.h"

namespace gpunode::container {
namespace {

using Json = nlohmann::ordered_json;

void AddUnique(std::vector<std::string>& list, std::string value) {
  if (std::find(list.begin(), list.end(), value) == list.end()) list.push_back(std::move(value));
}

std::string CleanPath(absl::string_view path) {
  std::string clean = std::filesystem::path(std::string(path)).lexically_normal().string();
  while (clean.size() > 1 && clean.back() == '/') clean.pop_back();
  return clean;
}

bool IsQualified(absl::string_view token) {
  const size_t eq = token.find('=');
  return eq != absl::string_view::npos && token.substr(0, eq).find('/') != absl::string_view::npos;
}

std::vector<std::string> Tokens(absl::string_view list) {
  std::vector<std::string> tokens;
  for (absl::string_view t : absl::StrSplit(list, ',')) {
    t = absl::StripAsciiWhitespace(t);
    if (!t.empty()) tokens.emplace_back(t);
  }
  return tokens;
}

// One GPU named by the variable or a volume mount: `all`, `none`, an index, UUID or MIG name, or a
// fully-qualified name of `default_kind`. `origin` names where it came from, for errors.
Status AddGpuToken(absl::string_view token, absl::string_view default_kind, absl::string_view origin,
                   std::vector<std::string>& devices, bool& driver_only) {
  if (token == "none") {
    driver_only = true;
    return absl::OkStatus();
  }
  if (token == "all") {
    AddUnique(devices, absl::StrCat(default_kind, "=all"));
    return absl::OkStatus();
  }
  if (IsQualified(token)) {
    auto split = SplitQualifiedName(token);
    if (!split.ok()) return absl::InvalidArgumentError(absl::StrCat(origin, ": ", split.status().message()));
    if (split->first != default_kind) {
      return absl::InvalidArgumentError(absl::StrCat(
          origin, ": \"", token, "\" is a device of kind ", split->first, "; this channel names only ", default_kind,
          " devices (all, none, void, GPU indices, UUIDs, MIG \"0:1\", ", default_kind,
          "=NAME); devices of other kinds are asked for through CDI annotations (cdi.k8s.io/*: the device plugin, "
          "podman --device)"));
    }
    AddUnique(devices, std::string(token));
    return absl::OkStatus();
  }
  const std::string q = absl::StrCat(default_kind, "=", token);
  if (!SplitQualifiedName(q).ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(origin, ": \"", token, "\" is not a GPU index, UUID or CDI name"));
  }
  AddUnique(devices, q);
  return absl::OkStatus();
}

std::optional<std::string> LastEnv(const Json& env, absl::string_view name) {
  std::optional<std::string> value;
  const std::string prefix = absl::StrCat(name, "=");
  for (const Json& e : env) {
    if (!e.is_string()) continue;
    const std::string& entry = e.get_ref<const std::string&>();
    if (absl::StartsWith(entry, prefix)) value = entry.substr(prefix.size());  // the last wins
  }
  return value;
}

// NVIDIA_VISIBLE_DEVICES, parsed.
struct EnvRequest {
  std::string value;     // as written (for messages)
  std::vector<std::string> devices;
  bool driver_only = false;
  bool marker = false;   // named /var/run/nvidia-container-devices
  bool Asks() const { return !devices.empty() || driver_only; }
};

StatusOr<EnvRequest> ParseVisibleDevices(const std::string& value, absl::string_view default_kind) {
  EnvRequest r;
  r.value = value;
  std::vector<std::string> tokens;
  for (std::string& t : Tokens(value)) {
    if (t[0] == '/' && CleanPath(t) == kVolumeMountsRoot) {
      r.marker = true;
    } else {
      tokens.push_back(std::move(t));
    }
  }
  if (std::find(tokens.begin(), tokens.end(), "void") != tokens.end()) return r;
  const std::string origin = absl::StrCat(kVisibleDevicesEnv, "=", value);
  for (const std::string& t : tokens) {
    GPUNODE_RETURN_IF_ERROR(AddGpuToken(t, default_kind, origin, r.devices, r.driver_only));
  }
  if (!r.devices.empty()) r.driver_only = false;
  return r;
}

// The device ids of /dev/null mounts below kVolumeMountsRoot, in order, once per destination
// (IMEX channel requests skipped).
std::vector<std::string> VolumeMountIds(const Json& config) {
  std::vector<std::string> ids;
  if (!config.contains("mounts") || !config["mounts"].is_array()) return ids;
  const std::string root = absl::StrCat(kVolumeMountsRoot, "/");
  std::vector<std::string> seen;
  for (const Json& m : config["mounts"]) {
    if (!m.is_object() || !m.contains("source") || !m.contains("destination") || !m["source"].is_string() ||
        !m["destination"].is_string()) {
      continue;
    }
    if (CleanPath(m["source"].get_ref<const std::string&>()) != "/dev/null") continue;
    const std::string dest = CleanPath(m["destination"].get_ref<const std::string&>());
    if (!absl::StartsWith(dest, root)) continue;
    if (std::find(seen.begin(), seen.end(), dest) != seen.end()) continue;
    seen.push_back(dest);
    std::string id = dest.substr(root.size());
    if (id.empty() || absl::StartsWith(id, "imex/")) continue;
    ids.push_back(std::move(id));
  }
  return ids;
}

// "cdi/vendor/class=name" or "cdi/vendor/class/name" -> "vendor/class=name".
StatusOr<std::string> CdiMountName(const std::string& id) {
  const std::string rest = id.substr(4);
  if (IsQualified(rest)) return rest;
  std::vector<std::string> parts = absl::StrSplit(rest, absl::MaxSplits('/', 2));
  if (parts.size() != 3 || parts[0].empty() || parts[1].empty() || parts[2].empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "volume mount ", kVolumeMountsRoot, "/", id,
        ": not a CDI device (cdi/<vendor>/<class>/<name> or cdi/<vendor>/<class>=<name>)"));
  }
  return absl::StrCat(parts[0], "/", parts[1], "=", parts[2]);
}

StatusOr<std::set<std::string>> DriverCapabilities(const Json& env) {
  return ParseDriverCapabilities(LastEnv(env, "NVIDIA_DRIVER_CAPABILITIES").value_or(""));
}

std::string MountsWhat(const std::vector<std::string>& ids) {
  return absl::StrCat("volume mounts ", kVolumeMountsRoot, "/{", absl::StrJoin(ids, ","), "}");
}

}  // namespace

StatusOr<std::pair<std::string, std::string>> SplitQualifiedName(absl::string_view qualified) {
  const size_t eq = qualified.find('=');
  if (eq == absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", qualified, "\": not a fully-qualified CDI device name (vendor/class=name)"));
  }
  std::string kind(qualified.substr(0, eq));
  std::string name(qualified.substr(eq + 1));
  if (std::string p = cdi::CheckKind(kind); !p.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("\"", qualified, "\": ", p));
  }
  if (std::string p = cdi::CheckDeviceName(name); !p.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("\"", qualified, "\": ", p));
  }
  return std::make_pair(kind, name);
}

std::string NvidiaToolkitConfigPath(const std::string& ctk_config_file_path, const std::string& xdg_config_home) {
  if (!ctk_config_file_path.empty()) return ctk_config_file_path;
  return absl::StrCat(xdg_config_home.empty() ? "/etc" : xdg_config_home, "/nvidia-container-runtime/config.toml");
}

Status ApplyNvidiaToolkitConfig(absl::string_view text, const std::string& path, RequestPolicy& policy) {
  GPUNODE_ASSIGN_OR_RETURN(toml::table root, toml_edit::ParseToml(text, path));
  struct Key {
    const char* name;
    bool* value;
    std::string* source;
  };
  for (const Key& k : {Key{kAcceptEnvvarUnprivilegedKey, &policy.accept_envvar_when_unprivileged, &policy.envvar_source},
                       Key{kAcceptVolumeMountsKey, &policy.accept_volume_mounts, &policy.volume_mounts_source}}) {
    const toml::node* n = root.get(k.name);
    if (n == nullptr) continue;
    if (!n->is_boolean()) {
      const char* type = n->is_string() ? "a string" : n->is_table() ? "a table" : n->is_array() ? "an array"
                         : n->is_number() ? "a number" : "not a boolean";
      return absl::InvalidArgumentError(absl::StrCat(path, ":", n->source().begin.line, ": ", k.name,
                                                     ": expected a boolean (true or false), got ", type));
    }
    *k.value = n->as_boolean()->get();
    *k.source = path;
  }
  return absl::OkStatus();
}

StatusOr<bool> LoadNvidiaToolkitConfig(const std::string& path, RequestPolicy& policy) {
  auto text = HostFs::Local().ReadFile(path, 1 << 20);
  if (!text.ok()) {
    if (absl::IsNotFound(text.status())) return false;
    return Annotate(text.status(), "read NVIDIA's container toolkit config");
  }
  GPUNODE_RETURN_IF_ERROR(ApplyNvidiaToolkitConfig(*text, path, policy));
  return true;
}

bool IsPrivilegedContainer(const Json& config) {
  if (!config.is_object() || !config.contains("process") || !config["process"].is_object()) return false;
  const Json& process = config["process"];
  if (!process.contains("capabilities")) return false;
  const Json& caps = process["capabilities"];
  const Json* list = nullptr;
  if (caps.is_array()) {
    list = &caps;
  } else if (caps.is_object() && caps.contains("bounding") && caps["bounding"].is_array()) {
    list = &caps["bounding"];
  }
  return list != nullptr && std::find(list->begin(), list->end(), Json("CAP_SYS_ADMIN")) != list->end();
}

bool HasDockerGpusHook(const Json& config) {
  if (!config.is_object() || !config.contains("hooks") || !config["hooks"].is_object()) return false;
  for (const char* phase : {"prestart", "createRuntime"}) {
    if (!config["hooks"].contains(phase) || !config["hooks"][phase].is_array()) continue;
    for (const Json& h : config["hooks"][phase]) {
      if (!h.is_object() || !h.contains("path") || !h["path"].is_string()) continue;
      const std::string& path = h["path"].get_ref<const std::string&>();
      const size_t slash = path.rfind('/');
      if ((slash == std::string::npos ? path : path.substr(slash + 1)) == kDockerGpusHookName) return true;
    }
  }
  return false;
}

StatusOr<DeviceRequest> RequestedDevices(const Json& config, absl::string_view default_kind,
                                         const RequestPolicy& policy) {
  DeviceRequest request;
  if (!config.is_object()) return absl::InvalidArgumentError("config.json: not a JSON object");
  Json env = Json::array();
  if (config.contains("process")) {
    const Json& process = config["process"];
    if (!process.is_object()) return absl::InvalidArgumentError("config.json: process is not an object");
    if (process.contains("env")) {
      if (!process["env"].is_array()) return absl::InvalidArgumentError("config.json: process.env is not an array");
      env = process["env"];
    }
  }
  // The variable is checked whenever it is set, so a wrong value is an error and never a surprise.
  EnvRequest env_request;
  if (auto visible = LastEnv(env, kVisibleDevicesEnv)) {
    GPUNODE_ASSIGN_OR_RETURN(env_request, ParseVisibleDevices(*visible, default_kind));
  }
  const std::string env_what = absl::StrCat(kVisibleDevicesEnv, "=", env_request.value);

  // 1. CDI annotations (sorted by key, as NVIDIA's toolkit).
  std::vector<std::string> keys;
  if (config.contains("annotations") && config["annotations"].is_object()) {
    for (const auto& [key, value] : config["annotations"].items()) {
      if (absl::StartsWith(key, kCdiAnnotationPrefix) && value.is_string()) keys.push_back(key);
    }
  }
  std::sort(keys.begin(), keys.end());
  for (const std::string& key : keys) {
    for (const std::string& t : Tokens(config["annotations"][key].get_ref<const std::string&>())) {
      if (auto split = SplitQualifiedName(t); !split.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("annotation ", key, ": ", split.status().message()));
      }
      AddUnique(request.devices, t);
    }
  }
  const std::vector<std::string> mount_ids = VolumeMountIds(config);
  if (!request.devices.empty()) {
    request.channel = RequestChannel::kAnnotation;
    request.source = absl::StrCat("annotation ", absl::StrJoin(keys, ", "));
    const std::string why = absl::StrCat("the CDI annotation ", absl::StrJoin(keys, ", "),
                                         " asks for the devices, and annotations win");
    if (!mount_ids.empty()) request.ignored.push_back({MountsWhat(mount_ids), why, ""});
    if (env_request.Asks()) request.ignored.push_back({env_what, why, ""});
    return request;
  }

  // 2. Volume mounts.
  if (!mount_ids.empty() && policy.accept_volume_mounts) {
    for (const std::string& id : mount_ids) {
      const std::string origin = absl::StrCat("volume mount ", kVolumeMountsRoot, "/", id);
      if (absl::StartsWith(id, "cdi/")) {
        GPUNODE_ASSIGN_OR_RETURN(std::string name, CdiMountName(id));
        GPUNODE_RETURN_IF_ERROR(AddGpuToken(name, default_kind, origin, request.devices, request.driver_only));
      } else {
        GPUNODE_RETURN_IF_ERROR(AddGpuToken(id, default_kind, origin, request.devices, request.driver_only));
      }
    }
    if (!request.devices.empty()) request.driver_only = false;
    request.channel = RequestChannel::kVolumeMounts;
    request.source = MountsWhat(mount_ids);
    GPUNODE_ASSIGN_OR_RETURN(std::set<std::string> caps, DriverCapabilities(env));
    request.capabilities = std::move(caps);
    if (env_request.Asks()) {
      request.ignored.push_back(
          {env_what, "volume mounts below " + std::string(kVolumeMountsRoot) + " ask for the devices, and they win", ""});
    }
    return request;
  }
  if (!mount_ids.empty()) {
    request.ignored.push_back({MountsWhat(mount_ids),
                               absl::StrCat(kAcceptVolumeMountsKey, " is false (", policy.volume_mounts_source, ")"),
                               kAcceptVolumeMountsKey});
  } else if (env_request.marker && !env_request.Asks()) {
    request.ignored.push_back(
        {env_what,
         absl::StrCat("the volume-mount marker, but no /dev/null mount below ", kVolumeMountsRoot, "/ names a device",
                      policy.accept_volume_mounts ? "" : absl::StrCat(" (and ", kAcceptVolumeMountsKey, " is false, ",
                                                                      policy.volume_mounts_source, ")")),
         policy.accept_volume_mounts ? "" : kAcceptVolumeMountsKey});
  }

  // 3. The variable, when it is believed.
  if (!env_request.Asks()) return request;
  std::string because;
  if (IsPrivilegedContainer(config)) {
    because = "privileged container";
  } else if (HasDockerGpusHook(config)) {
    because = "docker run --gpus";
  } else if (policy.accept_envvar_when_unprivileged) {
    because = absl::StrCat(kAcceptEnvvarUnprivilegedKey, " = true, ", policy.envvar_source);
  } else {
    request.ignored.push_back(
        {env_what,
         absl::StrCat("the container is unprivileged (no CAP_SYS_ADMIN in its bounding set), no docker --gpus hook "
                      "asked for it, and ", kAcceptEnvvarUnprivilegedKey, " is false (", policy.envvar_source, ")"),
         kAcceptEnvvarUnprivilegedKey});
    return request;
  }
  request.devices = env_request.devices;
  request.driver_only = env_request.driver_only;
  request.channel = RequestChannel::kEnvironment;
  request.source = absl::StrCat(env_what, " (", because, ")");
  // NVIDIA's legacy (environment) mode mounts the driver files of the capabilities asked for.
  GPUNODE_ASSIGN_OR_RETURN(std::set<std::string> caps, DriverCapabilities(env));
  request.capabilities = std::move(caps);
  return request;
}

}  // namespace gpunode::container
