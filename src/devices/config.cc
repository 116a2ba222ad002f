#include "src/devices/config.h"

#include "src/base/yaml.h"
#include "src/base/yaml_reader.h"
#include <yaml-cpp/yaml.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "src/devices/sleep_interval.h"

namespace gpunode::devices {
namespace {

// This reader has always been lenient about types: a value that is not a scalar reads as "" (so
// a list as migStrategy is refused by its parser, a list as a boolean reads as false). The
// wrappers below keep exactly that, with src/base/yaml_reader.h's error wording.
std::string Scalar(const YamlValue& v) { return v.IsScalar() ? v.node().Scalar() : std::string(); }

// A key that is present, even with a null value.
bool Present(const YamlValue& v) { return v.node().IsDefined(); }

// true/1/yes, false/0/no/"" in any case, as NVIDIA's plugin (config file and environment).
StatusOr<bool> ParseBool(absl::string_view text) {
  std::string t = absl::AsciiStrToLower(absl::StripAsciiWhitespace(text));
  if (t == "true" || t == "1" || t == "yes") return true;
  if (t == "false" || t == "0" || t == "no" || t.empty()) return false;
  return absl::InvalidArgumentError(absl::StrCat("\"", text, "\": not true or false"));
}

Status Bool(const YamlValue& v, bool* out) {
  if (!Present(v)) return absl::OkStatus();
  auto b = ParseBool(Scalar(v));
  if (!b.ok()) return v.Expected("true or false");
  *out = *b;
  return absl::OkStatus();
}

// `parsed` is the value's own parser (MIG strategy, sleep interval...): its message is the "what".
template <typename T>
Status Value(const YamlValue& v, const StatusOr<T>& parsed, T* out) {
  if (!parsed.ok()) return v.Error(parsed.status().message());
  *out = *parsed;
  return absl::OkStatus();
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

Status ParseReplicatedResource(const YamlValue& r, ReplicatedResource* res) {
  GPUNODE_RETURN_IF_ERROR(r.ExpectMap({"name", "replicas", "rename", "devices"}));
  const YamlValue name = r.Child("name");
  res->name = Scalar(name);
  if (!absl::StartsWith(res->name, "nvidia.com/")) return name.Expected("an nvidia.com/ resource name");
  const YamlValue replicas = r.Child("replicas");
  if (!Present(replicas) || !absl::SimpleAtoi(Scalar(replicas), &res->replicas)) {
    return replicas.Expected("an integer");
  }
  if (res->replicas < 2) return replicas.Expected("2 or more replicas (1 means not shared)");
  return absl::OkStatus();
}

Status ParseSharing(const YamlValue& node, SharingStrategy strategy, Sharing* out) {
  GPUNODE_RETURN_IF_ERROR(node.ExpectMap({"renameByDefault", "failRequestsGreaterThanOne", "resources"}));
  GPUNODE_RETURN_IF_ERROR(Bool(node.Child("renameByDefault"), &out->rename_by_default));
  const bool fail_set = Present(node.Child("failRequestsGreaterThanOne"));
  GPUNODE_RETURN_IF_ERROR(Bool(node.Child("failRequestsGreaterThanOne"), &out->fail_requests_greater_than_one));
  // NVIDIA keeps the historical MPS behaviour: requests of more than one replica fail unless said.
  if (strategy == SharingStrategy::kMps && !fail_set) out->fail_requests_greater_than_one = true;
  if (const YamlValue resources = node.Child("resources"); Present(resources)) {
    if (Status st = resources.ForEachItem([&](const YamlValue& r) -> Status {
      ReplicatedResource res;
      GPUNODE_RETURN_IF_ERROR(ParseReplicatedResource(r, &res));
      out->resources.push_back(res);
      return absl::OkStatus();
    }); !st.ok()) {
      return st;
    }
  }
  if (!out->resources.empty()) out->strategy = strategy;
  return absl::OkStatus();
}

Status ParsePluginFlags(const YamlValue& p, PluginConfig* c) {
  GPUNODE_RETURN_IF_ERROR(p.ExpectMap(kPluginFlags));
  GPUNODE_RETURN_IF_ERROR(Bool(p.Child("passDeviceSpecs"), &c->pass_device_specs));
  if (const YamlValue list = p.Child("deviceListStrategy"); Present(list)) {
    std::string joined;
    if (list.IsList()) {
      for (size_t i = 0; i < list.size(); ++i) {
        absl::StrAppend(&joined, joined.empty() ? "" : ",", Scalar(list.Item(i)));
      }
    } else {
      joined = Scalar(list);
    }
    GPUNODE_RETURN_IF_ERROR(Value(list, ParseDeviceListStrategy(joined), &c->device_list));
  }
  if (const YamlValue id = p.Child("deviceIDStrategy"); Present(id)) {
    GPUNODE_RETURN_IF_ERROR(Value(id, ParseDeviceIdStrategy(Scalar(id)), &c->device_id));
  }
  if (Present(p.Child("cdiAnnotationPrefix"))) c->cdi_annotation_prefix = Scalar(p.Child("cdiAnnotationPrefix"));
  for (const char* ignored : {"nvidiaCTKPath", "containerDriverRoot", "sharedDevicesAllocationPolicy"}) {
    if (Present(p.Child(ignored))) {
      c->warnings.push_back(absl::StrCat("flags.plugin.", ignored, " is not used by gpunode; ignored"));
    }
  }
  return absl::OkStatus();
}

Status ParseGfdFlags(const YamlValue& g, PluginConfig* c) {
  GPUNODE_RETURN_IF_ERROR(g.ExpectMap(kGfdFlags));
  GPUNODE_RETURN_IF_ERROR(Bool(g.Child("oneshot"), &c->gfd_oneshot));
  GPUNODE_RETURN_IF_ERROR(Bool(g.Child("noTimestamp"), &c->gfd_no_timestamp));
  if (const YamlValue s = g.Child("sleepInterval"); Present(s)) {
    GPUNODE_RETURN_IF_ERROR(Value(s, ParseSleepInterval(Scalar(s)), &c->gfd_sleep_interval_s));
  }
  if (Present(g.Child("outputFile"))) c->gfd_output_file = Scalar(g.Child("outputFile"));
  if (Present(g.Child("machineTypeFile"))) c->machine_type_file = Scalar(g.Child("machineTypeFile"));
  return absl::OkStatus();
}

Status ParseFlags(const YamlValue& f, PluginConfig* c) {
  GPUNODE_RETURN_IF_ERROR(f.ExpectMap(kFlags));
  if (const YamlValue m = f.Child("migStrategy"); Present(m)) {
    GPUNODE_RETURN_IF_ERROR(Value(m, ParseMigStrategy(Scalar(m)), &c->mig_strategy));
  }
  GPUNODE_RETURN_IF_ERROR(Bool(f.Child("failOnInitError"), &c->fail_on_init_error));
  if (Present(f.Child("mpsRoot"))) c->mps_root = Scalar(f.Child("mpsRoot"));
  if (Present(f.Child("nvidiaDriverRoot"))) c->driver_root = Scalar(f.Child("nvidiaDriverRoot"));
  if (Present(f.Child("nvidiaDevRoot"))) c->dev_root = Scalar(f.Child("nvidiaDevRoot"));
  for (const char* ignored : {"gdrcopyEnabled", "gdsEnabled", "mofedEnabled", "useNodeFeatureAPI",
                              "deviceDiscoveryStrategy"}) {
    if (Present(f.Child(ignored))) {
      c->warnings.push_back(absl::StrCat("flags.", ignored, " is not supported by gpunode; ignored"));
    }
  }
  if (const YamlValue p = f.Child("plugin"); Present(p)) GPUNODE_RETURN_IF_ERROR(ParsePluginFlags(p, c));
  if (const YamlValue g = f.Child("gfd"); Present(g)) GPUNODE_RETURN_IF_ERROR(ParseGfdFlags(g, c));
  return absl::OkStatus();
}

Status ParseSharingSection(const YamlValue& s, PluginConfig* c) {
  GPUNODE_RETURN_IF_ERROR(s.ExpectMap({"timeSlicing", "mps"}));
  const YamlValue ts = s.Child("timeSlicing"), mps = s.Child("mps");
  if (Present(ts) && Present(mps)) return s.Error("timeSlicing and mps are mutually exclusive");
  if (Present(ts)) GPUNODE_RETURN_IF_ERROR(ParseSharing(ts, SharingStrategy::kTimeSlicing, &c->sharing));
  if (Present(mps)) GPUNODE_RETURN_IF_ERROR(ParseSharing(mps, SharingStrategy::kMps, &c->sharing));
  for (const char* key : {"timeSlicing", "mps"}) {
    const YamlValue resources = s.Child(key).Child("resources");
    for (size_t i = 0; i < resources.size(); ++i) {
      const YamlValue r = resources.Item(i);
      if (Present(r.Child("rename"))) {
        c->warnings.push_back(absl::StrCat("sharing.", key, ".resources[].rename is not supported; ignored"));
      }
      if (Present(r.Child("devices")) && Scalar(r.Child("devices")) != "all") {
        c->warnings.push_back(
            absl::StrCat("sharing.", key, ".resources[].devices: only \"all\" is supported; ignored"));
      }
    }
  }
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
  auto loaded = LoadYaml(text, origin);  // nesting limit; never throws
  if (!loaded.ok()) return loaded.status();
  const YamlValue doc(*loaded, std::string(origin));
  if (doc.node().IsNull()) return c;
  try {
    GPUNODE_RETURN_IF_ERROR(doc.ExpectMap(kTopLevel));
    if (const YamlValue v = doc.Child("version"); Present(v) && Scalar(v) != "v1" && !Scalar(v).empty()) {
      return v.Expected("v1");
    }
    if (const YamlValue f = doc.Child("flags"); Present(f)) GPUNODE_RETURN_IF_ERROR(ParseFlags(f, &c));
    if (Present(doc.Child("resources"))) {
      c.warnings.push_back(
          "resources: customizing resource names is not supported (as in NVIDIA's plugin); ignored");
    }
    if (Present(doc.Child("imex"))) c.warnings.push_back("imex: IMEX channels are not supported by gpunode; ignored");
    if (const YamlValue s = doc.Child("sharing"); Present(s)) GPUNODE_RETURN_IF_ERROR(ParseSharingSection(s, &c));
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

}  // namespace gpunode::devices
