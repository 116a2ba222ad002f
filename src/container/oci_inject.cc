#include "src/container/oci_inject.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/container/capabilities.h"

namespace gpunode::container {
namespace {

using Json = nlohmann::ordered_json;

void AddUnique(std::vector<std::string>& list, std::string value) {
  if (std::find(list.begin(), list.end(), value) == list.end()) list.push_back(std::move(value));
}

Json& ObjectAt(Json& parent, const char* key) {
  if (!parent.contains(key) || !parent[key].is_object()) parent[key] = Json::object();
  return parent[key];
}

Json& ArrayAt(Json& parent, const char* key) {
  if (!parent.contains(key) || !parent[key].is_array()) parent[key] = Json::array();
  return parent[key];
}

std::string CleanPath(const std::string& path) {
  std::string clean = std::filesystem::path(path).lexically_normal().string();
  while (clean.size() > 1 && clean.back() == '/') clean.pop_back();
  return clean;
}

size_t Depth(const std::string& destination) {
  const std::string clean = CleanPath(destination);
  if (clean == "/") return 0;
  return static_cast<size_t>(std::count(clean.begin(), clean.end(), '/'));
}

Status ApplyDeviceNode(Json& config, const cdi::DeviceNode& node, const StatHostNode& stat_node) {
  const std::string host = node.host_path.empty() ? node.path : node.host_path;
  std::string type = node.type;
  std::optional<int64_t> major = node.major, minor = node.minor;
  std::optional<uint32_t> mode = node.file_mode;
  if (type.empty() || !major || !mode) {
    auto info = stat_node(host);
    if (!info.ok()) {
      if (type.empty() || !major) {
        return absl::FailedPreconditionError(absl::StrCat(
            "failed to stat CDI host device ", host, ": ", info.status().message()));
      }
    } else {
      if (!type.empty() && !info->type.empty() && type != info->type &&
          !(type == "u" && info->type == "c")) {
        return absl::FailedPreconditionError(absl::StrCat(
            "CDI device node ", host, ": the spec says type \"", type, "\" but the host has \"",
            info->type, "\""));
      }
      if (type.empty()) type = info->type;
      if (type.empty()) {
        return absl::FailedPreconditionError(
            absl::StrCat("CDI device node ", host, ": not a device on the host"));
      }
      if (!major && (type == "c" || type == "b" || type == "u")) {
        major = info->major;
        minor = info->minor;
      }
      if (!mode) mode = info->file_mode;
    }
  }
  Json dev = Json::object();
  dev["path"] = node.path;
  dev["type"] = type;
  if (major) dev["major"] = *major;
  if (minor) dev["minor"] = *minor;
  if (mode) dev["fileMode"] = *mode;
  // uid/gid: the spec's, else the container process's when it is not root (as the CDI library).
  std::optional<uint32_t> uid = node.uid, gid = node.gid;
  if (config.contains("process") && config["process"].contains("user")) {
    const Json& user = config["process"]["user"];
    auto positive = [&](const char* key) -> std::optional<uint32_t> {
      if (!user.contains(key) || !user[key].is_number_integer()) return std::nullopt;
      const int64_t v = user[key].get<int64_t>();
      if (v <= 0 || v > UINT32_MAX) return std::nullopt;
      return static_cast<uint32_t>(v);
    };
    if (!uid) uid = positive("uid");
    if (!gid) gid = positive("gid");
  }
  if (uid) dev["uid"] = *uid;
  if (gid) dev["gid"] = *gid;

  Json& linux_ = ObjectAt(config, "linux");
  Json& devices = ArrayAt(linux_, "devices");
  Json kept = Json::array();
  for (Json& d : devices) {
    if (!(d.is_object() && d.contains("path") && d["path"] == node.path)) kept.push_back(std::move(d));
  }
  kept.push_back(std::move(dev));
  devices = std::move(kept);

  if (type == "c" || type == "b") {
    Json rule = Json::object();
    rule["allow"] = true;
    rule["type"] = type;
    if (major) rule["major"] = *major;
    if (minor) rule["minor"] = *minor;
    rule["access"] = node.permissions.empty() ? "rwm" : node.permissions;
    Json& rules = ArrayAt(ObjectAt(linux_, "resources"), "devices");
    if (std::find(rules.begin(), rules.end(), rule) == rules.end()) rules.push_back(std::move(rule));
  }
  return absl::OkStatus();
}

void ApplyMount(Json& config, const cdi::Mount& mount) {
  Json& mounts = ArrayAt(config, "mounts");
  const std::string dest = CleanPath(mount.container_path);
  Json kept = Json::array();
  for (Json& m : mounts) {
    const bool same = m.is_object() && m.contains("destination") && m["destination"].is_string() &&
                      CleanPath(m["destination"].get<std::string>()) == dest;
    if (!same) kept.push_back(std::move(m));
  }
  Json m = Json::object();
  m["destination"] = mount.container_path;
  if (!mount.type.empty()) m["type"] = mount.type;
  m["source"] = mount.host_path;
  if (!mount.options.empty()) m["options"] = mount.options;
  kept.push_back(std::move(m));
  mounts = std::move(kept);
}

void SortMounts(Json& config) {
  if (!config.contains("mounts") || !config["mounts"].is_array()) return;
  std::vector<Json> mounts(config["mounts"].begin(), config["mounts"].end());
  std::stable_sort(mounts.begin(), mounts.end(), [](const Json& a, const Json& b) {
    auto depth = [](const Json& m) -> size_t {
      if (!m.is_object() || !m.contains("destination") || !m["destination"].is_string()) return 0;
      return Depth(m["destination"].get<std::string>());
    };
    return depth(a) < depth(b);
  });
  config["mounts"] = Json(mounts);
}

void ApplyHook(Json& config, const cdi::Hook& hook) {
  Json h = Json::object();
  h["path"] = hook.path;
  if (!hook.args.empty()) h["args"] = hook.args;
  if (!hook.env.empty()) h["env"] = hook.env;
  if (hook.timeout) h["timeout"] = *hook.timeout;
  Json& hooks = ArrayAt(ObjectAt(config, "hooks"), hook.hook_name.c_str());
  if (std::find(hooks.begin(), hooks.end(), h) == hooks.end()) hooks.push_back(std::move(h));
}

}  // namespace

SpecRegistry SpecRegistry::Load(const std::vector<std::string>& dirs) {
  namespace fs = std::filesystem;
  SpecRegistry registry;
  for (const std::string& dir : dirs) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) continue;
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      const std::string ext = entry.path().extension().string();
      if ((ext == ".yaml" || ext == ".yml" || ext == ".json") && entry.is_regular_file(ec)) {
        files.push_back(entry.path());
      }
    }
    std::sort(files.begin(), files.end());
    for (const fs::path& file : files) {
      std::ifstream in(file, std::ios::binary);
      std::stringstream text;
      text << in.rdbuf();
      if (!in.good() && !in.eof()) {
        registry.errors_.push_back(absl::StrCat(file.string(), ": cannot read"));
        continue;
      }
      auto spec = cdi::ParseSpec(text.str(), file.string());
      if (!spec.ok()) {
        registry.errors_.push_back(std::string(spec.status().message()));
        continue;
      }
      if (Status st = cdi::ValidateSpec(*spec, file.string()); !st.ok()) {
        registry.errors_.push_back(std::string(st.message()));
        continue;
      }
      registry.Add(*std::move(spec), file.string());
    }
  }
  return registry;
}

void SpecRegistry::Add(cdi::Spec spec, std::string origin) {
  specs_.push_back(std::move(spec));
  origins_.push_back(std::move(origin));
}

std::optional<SpecRegistry::Resolved> SpecRegistry::SpecOfKind(absl::string_view kind) const {
  for (size_t i = specs_.size(); i-- > 0;) {
    if (specs_[i].kind == kind) return Resolved{&specs_[i], nullptr, &origins_[i]};
  }
  return std::nullopt;
}

StatusOr<SpecRegistry::Resolved> SpecRegistry::Resolve(absl::string_view qualified) const {
  GPUNODE_ASSIGN_OR_RETURN(auto parts, SplitQualifiedName(qualified));
  const auto& [kind, name] = parts;
  std::vector<std::string> offered;
  for (size_t i = specs_.size(); i-- > 0;) {  // later directories win
    if (specs_[i].kind != kind) continue;
    for (const cdi::Device& d : specs_[i].devices) {
      if (d.name == name) return Resolved{&specs_[i], &d, &origins_[i]};
      AddUnique(offered, d.name);
    }
  }
  std::string msg = absl::StrCat("unresolvable CDI device ", qualified, ": ");
  if (offered.empty()) {
    absl::StrAppend(&msg, "no CDI spec offers kind ", kind);
  } else {
    std::sort(offered.begin(), offered.end());
    absl::StrAppend(&msg, "the ", kind, " specs offer ", absl::StrJoin(offered, ", "));
  }
  if (!errors_.empty()) absl::StrAppend(&msg, " (specs that did not load: ", absl::StrJoin(errors_, "; "), ")");
  return absl::NotFoundError(msg);
}

StatusOr<HostNodeInfo> LstatHostNode(const std::string& host_path) {
  struct stat st;
  if (::lstat(host_path.c_str(), &st) != 0) return ErrnoToStatus(errno, "stat", host_path);
  HostNodeInfo info;
  if (S_ISCHR(st.st_mode)) info.type = "c";
  else if (S_ISBLK(st.st_mode)) info.type = "b";
  else if (S_ISFIFO(st.st_mode)) info.type = "p";
  if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) {
    info.major = static_cast<int64_t>(major(st.st_rdev));
    info.minor = static_cast<int64_t>(minor(st.st_rdev));
  }
  info.file_mode = static_cast<uint32_t>(st.st_mode & 07777);
  return info;
}

Status ApplyContainerEdits(Json& config, const cdi::ContainerEdits& edits, const StatHostNode& stat_node) {
  if (!config.is_object()) return absl::InvalidArgumentError("config.json: not a JSON object");
  if (!edits.env.empty()) {
    Json& process = ObjectAt(config, "process");
    Json& env = ArrayAt(process, "env");
    for (const std::string& e : edits.env) {
      if (std::find(env.begin(), env.end(), Json(e)) == env.end()) env.push_back(e);
    }
  }
  for (const cdi::DeviceNode& node : edits.device_nodes) {
    GPUNODE_RETURN_IF_ERROR(ApplyDeviceNode(config, node, stat_node));
  }
  if (!edits.mounts.empty()) {
    for (const cdi::Mount& m : edits.mounts) ApplyMount(config, m);
    SortMounts(config);
  }
  for (const cdi::Hook& h : edits.hooks) ApplyHook(config, h);
  if (!edits.additional_gids.empty()) {
    Json& user = ObjectAt(ObjectAt(config, "process"), "user");
    Json& gids = ArrayAt(user, "additionalGids");
    for (uint32_t g : edits.additional_gids) {
      if (std::find(gids.begin(), gids.end(), Json(g)) == gids.end()) gids.push_back(g);
    }
  }
  if (edits.intel_rdt) {
    Json rdt = Json::object();
    if (!edits.intel_rdt->clos_id.empty()) rdt["closID"] = edits.intel_rdt->clos_id;
    if (!edits.intel_rdt->l3_cache_schema.empty()) rdt["l3CacheSchema"] = edits.intel_rdt->l3_cache_schema;
    if (!edits.intel_rdt->mem_bw_schema.empty()) rdt["memBwSchema"] = edits.intel_rdt->mem_bw_schema;
    if (!edits.intel_rdt->schemata.empty()) rdt["schemata"] = edits.intel_rdt->schemata;
    if (edits.intel_rdt->enable_monitoring) rdt["enableMonitoring"] = *edits.intel_rdt->enable_monitoring;
    ObjectAt(config, "linux")["intelRdt"] = std::move(rdt);
  }
  for (const cdi::NetDevice& n : edits.net_devices) {
    Json& net = ObjectAt(ObjectAt(config, "linux"), "netDevices");
    net[n.host_interface_name] = Json{{"name", n.name}};
  }
  return absl::OkStatus();
}

StatusOr<InjectResult> InjectDevices(Json& config, const SpecRegistry& registry,
                                     const DeviceRequest& request, absl::string_view default_kind,
                                     const StatHostNode& stat_node) {
  InjectResult result;
  if (request.Empty()) return result;
  // The annotation of an earlier pass is only a hint (an image can carry it): every edit is
  // applied again, idempotently, so what is already there stays once and what is missing is added.
  const Json before = config;
  std::vector<SpecRegistry::Resolved> resolved;
  for (const std::string& name : request.devices) {
    auto r = registry.Resolve(name);
    if (!r.ok()) {
      return Status(r.status().code(),
                    absl::StrCat(r.status().message(), " (requested by ", request.source, ")"));
    }
    resolved.push_back(*r);
  }
  // Spec-level edits, once per contributing spec, in order of first use.
  std::vector<const cdi::Spec*> specs;
  for (const auto& r : resolved) {
    if (std::find(specs.begin(), specs.end(), r.spec) == specs.end()) {
      specs.push_back(r.spec);
      AddUnique(result.specs, *r.origin);
    }
  }
  if (request.driver_only && specs.empty()) {
    auto of_kind = registry.SpecOfKind(default_kind);
    if (!of_kind) {
      return absl::NotFoundError(absl::StrCat("no CDI spec offers kind ", default_kind, " (requested by ",
                                              request.source, ")"));
    }
    specs.push_back(of_kind->spec);
    AddUnique(result.specs, *of_kind->origin);
  }
  for (const cdi::Spec* spec : specs) {
    if (request.capabilities) {
      GPUNODE_RETURN_IF_ERROR(ApplyContainerEdits(config, FilterByCapabilities(spec->edits, *request.capabilities), stat_node));
    } else {
      GPUNODE_RETURN_IF_ERROR(ApplyContainerEdits(config, spec->edits, stat_node));
    }
  }
  for (const auto& r : resolved) {
    Status st = ApplyContainerEdits(config, r.device->edits, stat_node);
    if (!st.ok()) {
      return Status(st.code(), absl::StrCat(r.spec->kind, "=", r.device->name, ": ", st.message()));
    }
    result.devices.push_back(absl::StrCat(r.spec->kind, "=", r.device->name));
  }
  ObjectAt(config, "annotations")[kInjectedAnnotation] =
      result.devices.empty() ? std::string("none") : absl::StrJoin(result.devices, ",");
  result.changed = config != before;
  return result;
}

int RemoveLegacyNvidiaHooks(Json& config) {
  if (!config.is_object() || !config.contains("hooks") || !config["hooks"].is_object()) return 0;
  int removed = 0;
  for (auto& [phase, list] : config["hooks"].items()) {
    if (!list.is_array()) continue;
    Json kept = Json::array();
    for (const Json& h : list) {
      const std::string path = h.is_object() && h.contains("path") && h["path"].is_string() ? h["path"].get<std::string>() : "";
      const size_t slash = path.rfind('/');
      if ((slash == std::string::npos ? path : path.substr(slash + 1)) == kDockerGpusHookName) {
        ++removed;
        continue;
      }
      kept.push_back(h);
    }
    list = std::move(kept);
  }
  return removed;
}

}  // namespace gpunode::container
