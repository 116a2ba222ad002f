#include "src/upgrade/nvidia_driver.h"

#include <algorithm>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/base/well_known.h"
#include "src/kube/json_fields.h"

namespace gpunode::upgrade {
namespace {

constexpr int kMaxSeconds = 7 * 24 * 3600;  // a week: any timeout above is a typo
constexpr size_t kMaxString = 1024;
constexpr size_t kMaxList = 256;

Status Bounded(const kube::Fields& f, const std::string& key, const std::string& s) {
  if (s.size() > kMaxString) return f.Error(absl::StrCat(key, ": longer than ", kMaxString, " bytes"));
  return absl::OkStatus();
}

StatusOr<int> Seconds(const kube::Fields& f, const std::string& key, int fallback) {
  GPUNODE_ASSIGN_OR_RETURN(std::optional<int64_t> v, f.Int(key));
  if (!v) return fallback;
  if (*v < 0 || *v > kMaxSeconds) {
    return f.Error(absl::StrCat(key, ": ", *v, " is outside 0..", kMaxSeconds, " seconds"));
  }
  return static_cast<int>(*v);
}

StatusOr<std::string> Str(const kube::Fields& f, const std::string& key) {
  GPUNODE_ASSIGN_OR_RETURN(std::string s, f.String(key));
  GPUNODE_RETURN_IF_ERROR(Bounded(f, key, s));
  return s;
}

// A JSON array passed on to the pod as given (tolerations, env, args), bounded in size.
StatusOr<nlohmann::json> PassThroughList(const kube::Fields& spec, const std::string& key) {
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields a, spec.Array(key));
  if (!a.present()) return nlohmann::json::array();
  if (a.json().size() > kMaxList) return spec.Error(absl::StrCat(key, ": more than ", kMaxList, " entries"));
  for (const kube::Fields& e : a.Elements()) {
    if (key == "args") {
      if (!e.json().is_string()) return e.Error("expected a string");
    } else {
      GPUNODE_RETURN_IF_ERROR(e.AsObject().status());
    }
  }
  return a.json();
}

StatusOr<UpgradePolicy> ParsePolicy(const kube::Fields& p) {
  UpgradePolicy out;
  if (p.json().contains("autoUpgrade")) {
    GPUNODE_ASSIGN_OR_RETURN(out.auto_upgrade, p.Bool("autoUpgrade"));
  }
  GPUNODE_ASSIGN_OR_RETURN(std::optional<int64_t> par, p.Int("maxParallelUpgrades"));
  if (par) {
    if (*par < 0 || *par > 100000) return p.Error(absl::StrCat("maxParallelUpgrades: ", *par, " is outside 0..100000"));
    out.max_parallel_upgrades = static_cast<int>(*par);
  }
  if (p.json().contains("maxUnavailable") && !p.json()["maxUnavailable"].is_null()) {
    GPUNODE_ASSIGN_OR_RETURN(out.max_unavailable,
                             ParseIntOrPercent(p.json()["maxUnavailable"], std::string(p.Error("maxUnavailable").message())));
  }
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields wait, p.Object("waitForCompletion"));
  if (wait.present()) {
    GPUNODE_ASSIGN_OR_RETURN(out.wait_for_completion.timeout_seconds, Seconds(wait, "timeoutSeconds", 0));
    GPUNODE_ASSIGN_OR_RETURN(out.wait_for_completion.pod_selector, Str(wait, "podSelector"));
  }
  // NVIDIADriver says podDeletion; ClusterPolicy's driver.upgradePolicy says gpuPodDeletion.
  for (const char* key : {"podDeletion", "gpuPodDeletion"}) {
    GPUNODE_ASSIGN_OR_RETURN(kube::Fields del, p.Object(key));
    if (!del.present()) continue;
    GPUNODE_ASSIGN_OR_RETURN(out.pod_deletion.force, del.Bool("force"));
    GPUNODE_ASSIGN_OR_RETURN(out.pod_deletion.timeout_seconds, Seconds(del, "timeoutSeconds", 300));
    GPUNODE_ASSIGN_OR_RETURN(out.pod_deletion.delete_empty_dir, del.Bool("deleteEmptyDir"));
  }
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields drain, p.Object("drain"));
  if (drain.present()) {
    GPUNODE_ASSIGN_OR_RETURN(out.drain.enable, drain.Bool("enable"));
    GPUNODE_ASSIGN_OR_RETURN(out.drain.force, drain.Bool("force"));
    GPUNODE_ASSIGN_OR_RETURN(out.drain.pod_selector, Str(drain, "podSelector"));
    GPUNODE_ASSIGN_OR_RETURN(out.drain.timeout_seconds, Seconds(drain, "timeoutSeconds", 300));
    GPUNODE_ASSIGN_OR_RETURN(out.drain.delete_empty_dir, drain.Bool("deleteEmptyDir"));
  }
  return out;
}

}  // namespace

int IntOrPercent::Of(int total) const {
  if (!percent) return std::max(0, value);
  const long long scaled = (static_cast<long long>(value) * total + 99) / 100;  // rounded up
  return static_cast<int>(std::max<long long>(0, scaled));
}

std::string IntOrPercent::ToString() const { return percent ? absl::StrCat(value, "%") : absl::StrCat(value); }

StatusOr<IntOrPercent> ParseIntOrPercent(const nlohmann::json& v, const std::string& where) {
  IntOrPercent out;
  if (v.is_number_integer()) {
    const int64_t n = v.get<int64_t>();
    if (n < 0 || n > 1000000) return absl::InvalidArgumentError(absl::StrCat(where, ": ", n, " is outside 0..1000000"));
    out.value = static_cast<int>(n);
    return out;
  }
  if (v.is_string()) {
    std::string s = v.get<std::string>();
    out.percent = absl::EndsWith(s, "%");
    std::string digits = out.percent ? s.substr(0, s.size() - 1) : s;
    int n = 0;
    if (digits.size() <= 7 && absl::SimpleAtoi(digits, &n) && n >= 0 && (!out.percent || n <= 100)) {
      out.value = n;
      return out;
    }
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": \"", s.substr(0, 64), "\" is neither a whole number nor a percentage 0%..100%"));
  }
  return absl::InvalidArgumentError(
      absl::StrCat(where, ": expected a number or a percentage string, got ", kube::JsonTypeName(v)));
}

std::string DriverSpec::ImageFor(const std::string& os_tag) const {
  // A reference with its own tag or digest is used as it is ("registry:5000/driver" has a port,
  // not a tag: the tag is after the last slash).
  const std::string last = image.substr(image.rfind('/') == std::string::npos ? 0 : image.rfind('/') + 1);
  if (absl::StrContains(image, "@") || absl::StrContains(last, ":")) return image;
  std::string ref = repository.empty() ? image : absl::StrCat(repository, "/", image);
  if (version.empty()) return ref;
  return absl::StrCat(ref, ":", version, os_tag.empty() ? "" : absl::StrCat("-", os_tag));
}

StatusOr<DriverSpec> ParseNvidiaDriver(const nlohmann::json& object) {
  std::string name = "?";
  if (object.is_object() && object.contains("metadata") && object["metadata"].is_object() &&
      object["metadata"].contains("name") && object["metadata"]["name"].is_string()) {
    name = object["metadata"]["name"].get<std::string>().substr(0, 253);
  }
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields root, kube::Fields::Root(object, absl::StrCat("NVIDIADriver ", name)));
  DriverSpec d;
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields meta, root.Object("metadata"));
  GPUNODE_ASSIGN_OR_RETURN(d.name, Str(meta, "name"));
  if (d.name.empty()) return root.Error("metadata.name: missing");
  GPUNODE_ASSIGN_OR_RETURN(d.uid, Str(meta, "uid"));
  GPUNODE_ASSIGN_OR_RETURN(std::optional<int64_t> gen, meta.Int("generation"));
  d.generation = gen.value_or(0);
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields spec, root.Object("spec"));
  if (!spec.present()) return root.Error("spec: missing");
  GPUNODE_ASSIGN_OR_RETURN(std::string type, Str(spec, "driverType"));
  if (!type.empty()) d.driver_type = type;
  if (d.driver_type != "gpu") {
    return spec.Error(absl::StrCat("driverType: \"", d.driver_type,
                                   "\": gpunode manages the data-center driver (gpu) only, not vGPU drivers"));
  }
  GPUNODE_ASSIGN_OR_RETURN(d.is_default, spec.Bool("default"));
  GPUNODE_ASSIGN_OR_RETURN(d.repository, Str(spec, "repository"));
  GPUNODE_ASSIGN_OR_RETURN(d.image, Str(spec, "image"));
  GPUNODE_ASSIGN_OR_RETURN(d.version, Str(spec, "version"));
  if (d.image.empty()) return spec.Error("image: missing (NVIDIA's default is \"driver\" with repository nvcr.io/nvidia)");
  GPUNODE_ASSIGN_OR_RETURN(d.image_pull_policy, Str(spec, "imagePullPolicy"));
  static const std::set<std::string> kPolicies = {"", "Always", "IfNotPresent", "Never"};
  if (!kPolicies.count(d.image_pull_policy)) {
    return spec.Error(absl::StrCat("imagePullPolicy: \"", d.image_pull_policy, "\" is not Always, IfNotPresent or Never"));
  }
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields secrets, spec.Array("imagePullSecrets"));
  for (const kube::Fields& s : secrets.Elements()) {
    if (!s.json().is_string()) return s.Error("expected a secret name (string)");
    d.image_pull_secrets.push_back(s.json().get<std::string>().substr(0, 253));
  }
  GPUNODE_ASSIGN_OR_RETURN(d.use_precompiled, spec.Bool("usePrecompiled"));
  GPUNODE_ASSIGN_OR_RETURN(std::string kmt, Str(spec, "kernelModuleType"));
  if (!kmt.empty()) d.kernel_module_type = kmt;
  GPUNODE_ASSIGN_OR_RETURN(d.node_selector, spec.StringMap("nodeSelector"));
  if (d.is_default && !d.node_selector.empty()) {
    return spec.Error("nodeSelector: a default NVIDIADriver must not have one (it takes the GPU nodes no other selects)");
  }
  if (d.node_selector.count(wellknown::kLabelDriverOwner)) {
    return spec.Error(absl::StrCat("nodeSelector: ", wellknown::kLabelDriverOwner, " is reserved (the controller writes it)"));
  }
  GPUNODE_ASSIGN_OR_RETURN(d.tolerations, PassThroughList(spec, "tolerations"));
  GPUNODE_ASSIGN_OR_RETURN(d.env, PassThroughList(spec, "env"));
  GPUNODE_ASSIGN_OR_RETURN(d.args, PassThroughList(spec, "args"));
  GPUNODE_ASSIGN_OR_RETURN(d.labels, spec.StringMap("labels"));
  GPUNODE_ASSIGN_OR_RETURN(d.annotations, spec.StringMap("annotations"));
  GPUNODE_ASSIGN_OR_RETURN(d.priority_class_name, Str(spec, "priorityClassName"));
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields policy, spec.Object("upgradePolicy"));
  if (policy.present()) {
    GPUNODE_ASSIGN_OR_RETURN(UpgradePolicy p, ParsePolicy(policy));
    d.upgrade_policy = p;
  }
  static const std::set<std::string> kUsed = {
      "driverType", "default", "repository", "image", "version", "imagePullPolicy", "imagePullSecrets",
      "usePrecompiled", "kernelModuleType", "nodeSelector", "tolerations", "env", "args", "labels",
      "annotations", "priorityClassName", "upgradePolicy"};
  for (const auto& [key, value] : spec.json().items()) {
    if (!kUsed.count(key) && !value.is_null()) d.ignored.push_back(absl::StrCat("spec.", key));
  }
  if (d.use_precompiled) d.ignored.push_back("spec.usePrecompiled (the image decides; gpunode does not build)");
  return d;
}

bool Selects(const std::map<std::string, std::string>& selector, const std::map<std::string, std::string>& labels) {
  for (const auto& [k, v] : selector) {
    auto it = labels.find(k);
    if (it == labels.end() || it->second != v) return false;
  }
  return true;
}

std::map<std::string, std::string> EffectiveSelector(const DriverSpec& d) {
  if (!d.node_selector.empty()) return d.node_selector;
  return {{wellknown::kLabelGpuPresent, "true"}};
}

PoolAssignment AssignPools(const std::vector<DriverSpec>& drivers,
                           const std::vector<std::pair<std::string, std::map<std::string, std::string>>>& nodes) {
  PoolAssignment out;
  // Overlaps between resources: the nodes each pair both selects.
  std::map<std::pair<std::string, std::string>, std::vector<std::string>> overlaps;
  for (const auto& [node, labels] : nodes) {
    std::vector<const DriverSpec*> selecting;
    const DriverSpec* fallback = nullptr;
    for (const DriverSpec& d : drivers) {
      if (d.is_default) {
        if (Selects(EffectiveSelector(d), labels) && fallback == nullptr) fallback = &d;
        continue;
      }
      if (Selects(EffectiveSelector(d), labels)) selecting.push_back(&d);
    }
    if (selecting.size() == 1) {
      out.nodes[selecting[0]->name].push_back(node);
    } else if (selecting.size() > 1) {
      for (size_t i = 0; i < selecting.size(); ++i) {
        for (size_t j = i + 1; j < selecting.size(); ++j) {
          overlaps[{selecting[i]->name, selecting[j]->name}].push_back(node);
        }
      }
    } else if (fallback != nullptr) {
      out.nodes[fallback->name].push_back(node);
    }
  }
  for (const auto& [pair, names] : overlaps) {
    std::vector<std::string> shown(names.begin(), names.begin() + std::min<size_t>(names.size(), 5));
    std::string list = absl::StrCat(absl::StrJoin(shown, ", "), names.size() > 5 ? absl::StrCat(" and ", names.size() - 5, " more") : "");
    out.conflicts[pair.first].push_back(absl::StrCat("nodeSelector overlaps NVIDIADriver ", pair.second, " on ",
                                                     names.size(), " node(s): ", list, "; neither manages them"));
    out.conflicts[pair.second].push_back(absl::StrCat("nodeSelector overlaps NVIDIADriver ", pair.first, " on ",
                                                      names.size(), " node(s): ", list, "; neither manages them"));
  }
  for (auto& [name, list] : out.nodes) std::sort(list.begin(), list.end());
  return out;
}

}  // namespace gpunode::upgrade
