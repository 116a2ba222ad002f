#include "src/plugin/config.h"

#include "src/base/yaml.h"
#include <yaml-cpp/yaml.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "src/plugin/labels.h"

namespace gpunode::plugin {
namespace {

Status Bad(absl::string_view origin, absl::string_view path, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat(origin, ": ", path, ": ", problem));
}

StatusOr<bool> ParseBool(absl::string_view text) {
  std::string t = absl::AsciiStrToLower(absl::StripAsciiWhitespace(text));
  if (t == "true" || t == "1" || t == "yes") return true;
  if (t == "false" || t == "0" || t == "no" || t.empty()) return false;
  return absl::InvalidArgumentError(absl::StrCat("\"", text, "\": not true or false"));
}

const std::vector<std::string> kTopLevel = {"version", "flags", "resources", "sharing", "imex"};
const std::vector<std::string> kFlags = {"migStrategy", "failOnInitError", "mpsRoot", "nvidiaDriverRoot",
                                         "nvidiaDevRoot", "gdrcopyEnabled", "gdsEnabled", "mofedEnabled",
                                         "useNodeFeatureAPI", "deviceDiscoveryStrategy", "plugin", "gfd"};
const std::vector<std::string> kPluginFlags = {"passDeviceSpecs",     "deviceListStrategy",
                                               "deviceIDStrategy",    "cdiAnnotationPrefix",
                                               "nvidiaCTKPath",       "containerDriverRoot",
                                               "sharedDevicesAllocationPolicy"};
const std::vector<std::string> kGfdFlags = {"oneshot", "noTimestamp", "sleepInterval", "outputFile",
                                            "machineTypeFile"};

Status CheckKeys(const YAML::Node& node, const std::vector<std::string>& allowed, absl::string_view origin,
                 absl::string_view path) {
  if (!node.IsMap()) return Bad(origin, path, "not a mapping");
  for (const auto& kv : node) {
    const std::string key = kv.first.as<std::string>();
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      return Bad(origin, absl::StrCat(path, path.empty() ? "" : ".", key), "unknown field");
    }
  }
  return absl::OkStatus();
}

std::string Scalar(const YAML::Node& n) { return n.IsScalar() ? n.as<std::string>() : std::string(); }

Status ParseSharing(const YAML::Node& node, absl::string_view origin, SharingStrategy strategy, Sharing* out) {
  const std::string path = strategy == SharingStrategy::kMps ? "sharing.mps" : "sharing.timeSlicing";
  GPUNODE_RETURN_IF_ERROR(
      CheckKeys(node, {"renameByDefault", "failRequestsGreaterThanOne", "resources"}, origin, path));
  bool fail_set = false;
  if (node["renameByDefault"]) {
    auto b = ParseBool(Scalar(node["renameByDefault"]));
    if (!b.ok()) return Bad(origin, path + ".renameByDefault", b.status().message());
    out->rename_by_default = *b;
  }
  if (node["failRequestsGreaterThanOne"]) {
    auto b = ParseBool(Scalar(node["failRequestsGreaterThanOne"]));
    if (!b.ok()) return Bad(origin, path + ".failRequestsGreaterThanOne", b.status().message());
    out->fail_requests_greater_than_one = *b;
    fail_set = true;
  }
  // NVIDIA keeps the historical MPS behaviour: requests of more than one replica fail unless said.
  if (strategy == SharingStrategy::kMps && !fail_set) out->fail_requests_greater_than_one = true;
  if (node["resources"]) {
    if (!node["resources"].IsSequence()) return Bad(origin, path + ".resources", "not a list");
    for (size_t i = 0; i < node["resources"].size(); ++i) {
      const YAML::Node r = node["resources"][i];
      const std::string rp = absl::StrCat(path, ".resources[", i, "]");
      GPUNODE_RETURN_IF_ERROR(CheckKeys(r, {"name", "replicas", "rename", "devices"}, origin, rp));
      ReplicatedResource res;
      if (!r["name"] || Scalar(r["name"]).empty()) return Bad(origin, rp + ".name", "missing");
      res.name = Scalar(r["name"]);
      if (!absl::StartsWith(res.name, "nvidia.com/")) {
        return Bad(origin, rp + ".name", absl::StrCat("\"", res.name, "\": not an nvidia.com/ resource"));
      }
      if (!r["replicas"] || !absl::SimpleAtoi(Scalar(r["replicas"]), &res.replicas)) {
        return Bad(origin, rp + ".replicas", "missing or not an integer");
      }
      if (res.replicas < 2) {
        return Bad(origin, rp + ".replicas", absl::StrCat(res.replicas, ": must be 2 or more (1 means not shared)"));
      }
      out->resources.push_back(res);
    }
  }
  if (!out->resources.empty()) out->strategy = strategy;
  return absl::OkStatus();
}

}  // namespace

int Sharing::ReplicasOf(absl::string_view resource) const {
  if (strategy == SharingStrategy::kNone) return 1;
  for (const ReplicatedResource& r : resources) {
    if (r.name == resource) return r.replicas;
  }
  return 1;
}

StatusOr<MigStrategy> ParseMigStrategy(absl::string_view text) {
  if (text == "none") return MigStrategy::kNone;
  if (text == "single") return MigStrategy::kSingle;
  if (text == "mixed") return MigStrategy::kMixed;
  return absl::InvalidArgumentError(absl::StrCat("MIG strategy \"", text, "\": not one of none, single, mixed"));
}

StatusOr<DeviceIdStrategy> ParseDeviceIdStrategy(absl::string_view text) {
  if (text == "uuid") return DeviceIdStrategy::kUuid;
  if (text == "index") return DeviceIdStrategy::kIndex;
  return absl::InvalidArgumentError(absl::StrCat("device ID strategy \"", text, "\": not one of uuid, index"));
}

StatusOr<DeviceListStrategy> ParseDeviceListStrategy(absl::string_view text) {
  DeviceListStrategy s{false, false, false, false};
  bool any = false;
  for (absl::string_view t : absl::StrSplit(text, ',')) {
    t = absl::StripAsciiWhitespace(t);
    if (t.empty()) continue;
    any = true;
    if (t == "envvar") s.envvar = true;
    else if (t == "volume-mounts") s.volume_mounts = true;
    else if (t == "cdi-annotations") s.cdi_annotations = true;
    else if (t == "cdi-cri") s.cdi_cri = true;
    else {
      return absl::InvalidArgumentError(absl::StrCat(
          "device list strategy \"", t, "\": not one of envvar, volume-mounts, cdi-annotations, cdi-cri"));
    }
  }
  if (!any) return absl::InvalidArgumentError("device list strategy: empty");
  return s;
}

std::string MigStrategyName(MigStrategy s) {
  switch (s) {
    case MigStrategy::kNone: return "none";
    case MigStrategy::kSingle: return "single";
    case MigStrategy::kMixed: return "mixed";
  }
  return "none";
}

std::string SharingStrategyName(SharingStrategy s) {
  switch (s) {
    case SharingStrategy::kNone: return "none";
    case SharingStrategy::kTimeSlicing: return "time-slicing";
    case SharingStrategy::kMps: return "mps";
  }
  return "none";
}

StatusOr<PluginConfig> ParseConfig(absl::string_view text, absl::string_view origin) {
  PluginConfig c;
  YAML::Node doc;
  {
    auto loaded = LoadYaml(text, origin);  // nesting limit; never throws
    if (!loaded.ok()) return loaded.status();
    doc = *std::move(loaded);
  }
  if (doc.IsNull()) return c;
  try {
    GPUNODE_RETURN_IF_ERROR(CheckKeys(doc, kTopLevel, origin, ""));
    if (doc["version"] && Scalar(doc["version"]) != "v1" && !Scalar(doc["version"]).empty()) {
      return Bad(origin, "version", absl::StrCat("\"", Scalar(doc["version"]), "\": unknown version (want v1)"));
    }
    if (const YAML::Node f = doc["flags"]; f) {
      GPUNODE_RETURN_IF_ERROR(CheckKeys(f, kFlags, origin, "flags"));
      if (f["migStrategy"]) {
        auto m = ParseMigStrategy(Scalar(f["migStrategy"]));
        if (!m.ok()) return Bad(origin, "flags.migStrategy", m.status().message());
        c.mig_strategy = *m;
      }
      auto boolean = [&](const char* key, bool* out) -> Status {
        if (!f[key]) return absl::OkStatus();
        auto b = ParseBool(Scalar(f[key]));
        if (!b.ok()) return Bad(origin, absl::StrCat("flags.", key), b.status().message());
        *out = *b;
        return absl::OkStatus();
      };
      GPUNODE_RETURN_IF_ERROR(boolean("failOnInitError", &c.fail_on_init_error));
      if (f["mpsRoot"]) c.mps_root = Scalar(f["mpsRoot"]);
      if (f["nvidiaDriverRoot"]) c.driver_root = Scalar(f["nvidiaDriverRoot"]);
      if (f["nvidiaDevRoot"]) c.dev_root = Scalar(f["nvidiaDevRoot"]);
      for (const char* ignored : {"gdrcopyEnabled", "gdsEnabled", "mofedEnabled", "useNodeFeatureAPI",
                                  "deviceDiscoveryStrategy"}) {
        if (f[ignored]) c.warnings.push_back(absl::StrCat("flags.", ignored, " is not supported by gpunode; ignored"));
      }
      if (const YAML::Node p = f["plugin"]; p) {
        GPUNODE_RETURN_IF_ERROR(CheckKeys(p, kPluginFlags, origin, "flags.plugin"));
        if (p["passDeviceSpecs"]) {
          auto b = ParseBool(Scalar(p["passDeviceSpecs"]));
          if (!b.ok()) return Bad(origin, "flags.plugin.passDeviceSpecs", b.status().message());
          c.pass_device_specs = *b;
        }
        if (p["deviceListStrategy"]) {
          std::string joined;
          if (p["deviceListStrategy"].IsSequence()) {
            for (const auto& e : p["deviceListStrategy"]) absl::StrAppend(&joined, joined.empty() ? "" : ",", Scalar(e));
          } else {
            joined = Scalar(p["deviceListStrategy"]);
          }
          auto s = ParseDeviceListStrategy(joined);
          if (!s.ok()) return Bad(origin, "flags.plugin.deviceListStrategy", s.status().message());
          c.device_list = *s;
        }
        if (p["deviceIDStrategy"]) {
          auto s = ParseDeviceIdStrategy(Scalar(p["deviceIDStrategy"]));
          if (!s.ok()) return Bad(origin, "flags.plugin.deviceIDStrategy", s.status().message());
          c.device_id = *s;
        }
        if (p["cdiAnnotationPrefix"]) c.cdi_annotation_prefix = Scalar(p["cdiAnnotationPrefix"]);
        for (const char* ignored : {"nvidiaCTKPath", "containerDriverRoot", "sharedDevicesAllocationPolicy"}) {
          if (p[ignored]) {
            c.warnings.push_back(absl::StrCat("flags.plugin.", ignored, " is not used by gpunode; ignored"));
          }
        }
      }
      if (const YAML::Node g = f["gfd"]; g) {
        GPUNODE_RETURN_IF_ERROR(CheckKeys(g, kGfdFlags, origin, "flags.gfd"));
        if (g["oneshot"]) {
          auto b = ParseBool(Scalar(g["oneshot"]));
          if (!b.ok()) return Bad(origin, "flags.gfd.oneshot", b.status().message());
          c.gfd_oneshot = *b;
        }
        if (g["noTimestamp"]) {
          auto b = ParseBool(Scalar(g["noTimestamp"]));
          if (!b.ok()) return Bad(origin, "flags.gfd.noTimestamp", b.status().message());
          c.gfd_no_timestamp = *b;
        }
        if (g["sleepInterval"]) {
          auto s = ParseSleepInterval(Scalar(g["sleepInterval"]));
          if (!s.ok()) return Bad(origin, "flags.gfd.sleepInterval", s.status().message());
          c.gfd_sleep_interval_s = *s;
        }
        if (g["outputFile"]) c.gfd_output_file = Scalar(g["outputFile"]);
        if (g["machineTypeFile"]) c.machine_type_file = Scalar(g["machineTypeFile"]);
      }
    }
    if (doc["resources"]) {
      c.warnings.push_back(
          "resources: customizing resource names is not supported (as in NVIDIA's plugin); ignored");
    }
    if (doc["imex"]) c.warnings.push_back("imex: IMEX channels are not supported by gpunode; ignored");
    if (const YAML::Node s = doc["sharing"]; s) {
      GPUNODE_RETURN_IF_ERROR(CheckKeys(s, {"timeSlicing", "mps"}, origin, "sharing"));
      if (s["timeSlicing"] && s["mps"]) {
        return Bad(origin, "sharing", "timeSlicing and mps are mutually exclusive");
      }
      if (s["timeSlicing"]) {
        GPUNODE_RETURN_IF_ERROR(ParseSharing(s["timeSlicing"], origin, SharingStrategy::kTimeSlicing, &c.sharing));
      }
      if (s["mps"]) GPUNODE_RETURN_IF_ERROR(ParseSharing(s["mps"], origin, SharingStrategy::kMps, &c.sharing));
      for (const char* key : {"timeSlicing", "mps"}) {
        if (!s[key] || !s[key]["resources"]) continue;
        for (const auto& r : s[key]["resources"]) {
          if (r["rename"]) c.warnings.push_back(absl::StrCat("sharing.", key, ".resources[].rename is not supported; ignored"));
          if (r["devices"] && Scalar(r["devices"]) != "all") {
            c.warnings.push_back(absl::StrCat("sharing.", key, ".resources[].devices: only \"all\" is supported; ignored"));
          }
        }
      }
    }
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": ", e.what()));
  }
  return c;
}

Status ApplyEnvironment(const std::map<std::string, std::string>& env, PluginConfig* c) {
  auto get = [&](const char* name) -> const std::string* {
    auto it = env.find(name);
    return it == env.end() || it->second.empty() ? nullptr : &it->second;
  };
  auto wrap = [](const char* name, const Status& st) {
    return absl::InvalidArgumentError(absl::StrCat("environment variable ", name, ": ", st.message()));
  };
  if (auto* v = get("MIG_STRATEGY")) {
    auto m = ParseMigStrategy(*v);
    if (!m.ok()) return wrap("MIG_STRATEGY", m.status());
    c->mig_strategy = *m;
  }
  if (auto* v = get("DEVICE_LIST_STRATEGY")) {
    auto s = ParseDeviceListStrategy(*v);
    if (!s.ok()) return wrap("DEVICE_LIST_STRATEGY", s.status());
    c->device_list = *s;
  }
  if (auto* v = get("DEVICE_ID_STRATEGY")) {
    auto s = ParseDeviceIdStrategy(*v);
    if (!s.ok()) return wrap("DEVICE_ID_STRATEGY", s.status());
    c->device_id = *s;
  }
  for (auto [name, field] : {std::pair<const char*, bool*>{"PASS_DEVICE_SPECS", &c->pass_device_specs},
                             std::pair<const char*, bool*>{"FAIL_ON_INIT_ERROR", &c->fail_on_init_error}}) {
    if (auto* v = get(name)) {
      auto b = ParseBool(*v);
      if (!b.ok()) return wrap(name, b.status());
      *field = *b;
    }
  }
  if (auto* v = get("NVIDIA_DRIVER_ROOT")) c->driver_root = *v;
  if (auto* v = get("NVIDIA_DEV_ROOT")) c->dev_root = *v;
  if (auto* v = get("CDI_ANNOTATION_PREFIX")) c->cdi_annotation_prefix = *v;
  if (auto* v = get("MPS_ROOT")) c->mps_root = *v;
  return absl::OkStatus();
}

std::string MpsRootOf(const PluginConfig& c) {
  if (c.mps_root.empty()) return kDefaultMpsRoot;
  std::string root = c.mps_root;
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  return root;
}

Status ValidateConfig(const PluginConfig& c) {
  if (c.sharing.strategy == SharingStrategy::kMps) {
    if (c.mig_strategy == MigStrategy::kMixed) {
      return absl::InvalidArgumentError("sharing.mps: using --mig-strategy=mixed is not supported with MPS");
    }
    if (!c.mps_root.empty() && c.mps_root.front() != '/') {
      return absl::InvalidArgumentError(
          absl::StrCat("mpsRoot \"", c.mps_root, "\": must be an absolute path on the host (e.g. ", kDefaultMpsRoot, ")"));
    }
  }
  if (!c.cdi_annotation_prefix.empty() && c.cdi_annotation_prefix.back() != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("cdiAnnotationPrefix \"", c.cdi_annotation_prefix, "\": must end with '/'"));
  }
  return absl::OkStatus();
}

}  // namespace gpunode::plugin
