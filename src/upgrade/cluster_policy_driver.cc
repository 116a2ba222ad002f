// spec.driver and spec.daemonsets of a ClusterPolicy as the default pool's driver (DriverSpec).
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "src/upgrade/cluster_policy_internal.h"

namespace gpunode::upgrade::cluster_policy_internal {
namespace {

constexpr int kMaxSeconds = 7 * 24 * 3600;  // a week, as NVIDIADriver's reader: any timeout above is a typo

StatusOr<int> Seconds(const kube::Fields& f, const std::string& key, int fallback) {
  GPUNODE_ASSIGN_OR_RETURN(std::optional<int64_t> v, f.Int(key));
  if (!v) return fallback;
  if (*v < 0 || *v > kMaxSeconds) return f.Error(absl::StrCat(key, ": ", *v, " is outside 0..", kMaxSeconds, " seconds"));
  return static_cast<int>(*v);
}

// Kubernetes' IntOrString as NVIDIA's upgrade library reads maxUnavailable: a whole number, or a
// string "N%" (a string without % is refused there too).
StatusOr<IntOrPercent> MaxUnavailable(const kube::Fields& p) {
  const nlohmann::json& v = p.json().contains("maxUnavailable") ? p.json()["maxUnavailable"] : nlohmann::json();
  IntOrPercent out{25, true};
  if (v.is_null()) return out;
  if (v.is_number_integer() || v.is_number_unsigned()) {
    GPUNODE_ASSIGN_OR_RETURN(std::optional<int64_t> n, p.Int("maxUnavailable"));
    if (*n < 0 || *n > 1000000) return p.Error(absl::StrCat("maxUnavailable: ", *n, " is outside 0..1000000"));
    return IntOrPercent{static_cast<int>(*n), false};
  }
  if (!v.is_string()) {
    return p.Error(absl::StrCat("maxUnavailable: expected a whole number or a percentage such as \"25%\", got ",
                                kube::JsonTypeName(v)));
  }
  const std::string& s = v.get_ref<const std::string&>();
  int n = 0;
  if (absl::EndsWith(s, "%") && s.size() <= 4 && absl::SimpleAtoi(s.substr(0, s.size() - 1), &n) && n >= 0 &&
      n <= 100) {
    return IntOrPercent{n, true};
  }
  return p.Error(absl::StrCat("maxUnavailable: \"", Summary(v), "\" is neither a whole number nor a percentage 0%..100%"));
}

// driver.upgradePolicy (k8s-operator-libs' DriverUpgradePolicySpec) with the CRD's defaults:
// autoUpgrade false, maxParallelUpgrades 1, maxUnavailable 25%, timeouts 0 / 300 / 300.
StatusOr<UpgradePolicy> ParseUpgradePolicy(const kube::Fields& p, Output& out) {
  UpgradePolicy u;
  GPUNODE_ASSIGN_OR_RETURN(u.auto_upgrade, p.Bool("autoUpgrade"));
  GPUNODE_ASSIGN_OR_RETURN(std::optional<int64_t> par, p.Int("maxParallelUpgrades"));
  if (par && (*par < 0 || *par > 100000)) {
    return p.Error(absl::StrCat("maxParallelUpgrades: ", *par, " is outside 0..100000"));
  }
  u.max_parallel_upgrades = par ? static_cast<int>(*par) : 1;
  GPUNODE_ASSIGN_OR_RETURN(u.max_unavailable, MaxUnavailable(p));
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields wait, p.Object("waitForCompletion"));
  GPUNODE_ASSIGN_OR_RETURN(u.wait_for_completion.timeout_seconds, Seconds(wait, "timeoutSeconds", 0));
  GPUNODE_ASSIGN_OR_RETURN(u.wait_for_completion.pod_selector, Name(wait, "podSelector"));
  out.Unknown(wait, {"timeoutSeconds", "podSelector"});
  // The CRD says podDeletion; the Helm chart's values say gpuPodDeletion (its template writes podDeletion).
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields del, p.Object("podDeletion"));
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields gpu_del, p.Object("gpuPodDeletion"));
  if (del.present() && gpu_del.present()) {
    return p.Error("podDeletion and gpuPodDeletion: give one (gpuPodDeletion is the Helm values' name of podDeletion)");
  }
  if (gpu_del.present()) del = gpu_del;
  GPUNODE_ASSIGN_OR_RETURN(u.pod_deletion.force, del.Bool("force"));
  GPUNODE_ASSIGN_OR_RETURN(u.pod_deletion.timeout_seconds, Seconds(del, "timeoutSeconds", 300));
  GPUNODE_ASSIGN_OR_RETURN(u.pod_deletion.delete_empty_dir, del.Bool("deleteEmptyDir"));
  out.Unknown(del, {"force", "timeoutSeconds", "deleteEmptyDir"});
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields drain, p.Object("drain"));
  GPUNODE_ASSIGN_OR_RETURN(u.drain.enable, drain.Bool("enable"));
  GPUNODE_ASSIGN_OR_RETURN(u.drain.force, drain.Bool("force"));
  GPUNODE_ASSIGN_OR_RETURN(u.drain.pod_selector, Name(drain, "podSelector"));
  GPUNODE_ASSIGN_OR_RETURN(u.drain.timeout_seconds, Seconds(drain, "timeoutSeconds", 300));
  GPUNODE_ASSIGN_OR_RETURN(u.drain.delete_empty_dir, drain.Bool("deleteEmptyDir"));
  out.Unknown(drain, {"enable", "force", "podSelector", "timeoutSeconds", "deleteEmptyDir"});
  out.Unknown(p, {"autoUpgrade", "maxParallelUpgrades", "maxUnavailable", "waitForCompletion", "podDeletion",
                  "gpuPodDeletion", "drain"});
  return u;
}

constexpr const char* kDaemonsetsKeys[] = {"tolerations", "priorityClassName", "labels", "annotations",
                                          "updateStrategy", "rollingUpdate", "podSecurityContext"};

bool ReservedPodLabel(const std::string& key) {
  return key == "app.kubernetes.io/managed-by" || key == "app.kubernetes.io/component" ||
         absl::StartsWith(key, "gpunode.io/");
}

// spec.daemonsets: the driver pods' tolerations, priority class, labels and annotations (the
// Operator puts them on every operand pod; gpunode's agent pod is the chart's).
Status DaemonsetsOntoDriver(const kube::Fields& ds, DriverSpec* d, Output& out) {
  const std::string to = absl::StrCat("driver ", kClusterPolicyDriverName, ": ");
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields tol, ds.Array("tolerations"));
  if (tol.json().size() > kMaxList) return tol.Error(absl::StrCat("more than ", kMaxList, " entries"));
  for (const kube::Fields& e : tol.Elements()) GPUNODE_RETURN_IF_ERROR(e.AsObject().status());
  if (tol.present()) {
    d->tolerations = tol.json();
    out.Applied(tol.path(), Summary(tol.json()), to + "tolerations (the agent's are the chart's)");
  }
  GPUNODE_ASSIGN_OR_RETURN(d->priority_class_name, Name(ds, "priorityClassName"));
  if (!d->priority_class_name.empty()) {
    out.Applied("spec.daemonsets.priorityClassName", d->priority_class_name, to + "priorityClassName");
  }
  for (const char* key : {"labels", "annotations"}) {
    GPUNODE_ASSIGN_OR_RETURN(auto m, ds.StringMap(key));
    auto& target = std::string(key) == "labels" ? d->labels : d->annotations;
    for (const auto& [k, v] : m) {
      const std::string path = absl::StrCat("spec.daemonsets.", key, "[\"", k, "\"]");
      if (ReservedPodLabel(k)) {
        out.Unapplied(path, v, "gpunode's own key on the driver pods");
        continue;
      }
      target[k] = v;
      out.Applied(path, Summary(v), absl::StrCat(to, "pod ", key));
    }
  }
  const char* kStrategy = "the agent DaemonSet's update strategy is the chart's; the driver DaemonSet's is OnDelete "
                          "(the controller replaces driver pods node by node, under the upgrade policy)";
  out.UnappliedMember(ds, "updateStrategy", kStrategy);
  out.UnappliedMember(ds, "rollingUpdate", kStrategy);
  out.UnappliedMember(ds, "podSecurityContext", "the pods' security contexts are gpunode's (privileged driver, the chart's agent)");
  out.Unknown(ds, {std::begin(kDaemonsetsKeys), std::end(kDaemonsetsKeys)});
  return absl::OkStatus();
}

// No driver DaemonSet: spec.daemonsets would reach only the agent, whose DaemonSet is the chart's.
void DaemonsetsToAgentOnly(const kube::Fields& ds, Output& out) {
  for (const char* key : kDaemonsetsKeys) {
    out.UnappliedMember(ds, key, "no driver DaemonSet: the agent DaemonSet's scheduling and metadata are the chart's");
  }
  out.Unknown(ds, {std::begin(kDaemonsetsKeys), std::end(kDaemonsetsKeys)});
}

// A driver image is known: `image` with its own tag or digest, or a version to make the tag of.
bool HasImage(const DriverSpec& d) {
  if (d.image.empty()) return false;
  const size_t slash = d.image.rfind('/');
  const std::string last = d.image.substr(slash == std::string::npos ? 0 : slash + 1);
  return !d.version.empty() || absl::StrContains(d.image, "@") || absl::StrContains(last, ":");
}

}  // namespace

Status TranslateDriver(const kube::Fields& spec, Output& out) {
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields drv, spec.Object("driver"));
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields ds, spec.Object("daemonsets"));
  GPUNODE_ASSIGN_OR_RETURN(std::optional<bool> enabled, OptionalBool(drv, "enabled"));
  GPUNODE_ASSIGN_OR_RETURN(bool crd, drv.Bool("useNvidiaDriverCRD"));
  out.t().use_nvidia_driver_crd = crd;
  if (enabled.has_value() && !*enabled) {
    out.Applied("spec.driver.enabled", "false", "no driver DaemonSet: the nodes' own driver is used");
  } else if (crd) {
    out.Applied("spec.driver.useNvidiaDriverCRD", "true",
                "no default driver from the ClusterPolicy: the NVIDIADriver resources define the pools");
  }
  if ((enabled.has_value() && !*enabled) || crd) {
    DaemonsetsToAgentOnly(ds, out);  // the driver fields are off, as in the Operator
    return absl::OkStatus();
  }
  DriverSpec d;
  d.name = kClusterPolicyDriverName;
  d.uid = out.t().uid;
  d.generation = out.t().generation;
  d.is_default = true;
  const std::string to = absl::StrCat("driver ", kClusterPolicyDriverName, ": ");
  GPUNODE_ASSIGN_OR_RETURN(d.repository, Name(drv, "repository"));
  GPUNODE_ASSIGN_OR_RETURN(d.image, Name(drv, "image"));
  GPUNODE_ASSIGN_OR_RETURN(d.version, Name(drv, "version"));
  GPUNODE_ASSIGN_OR_RETURN(d.image_pull_policy, Name(drv, "imagePullPolicy"));
  static const std::set<std::string> kPullPolicies = {"", "Always", "IfNotPresent", "Never"};
  if (!kPullPolicies.count(d.image_pull_policy)) {
    return drv.Error(absl::StrCat("imagePullPolicy: \"", Summary(d.image_pull_policy),
                                  "\" is not Always, IfNotPresent or Never"));
  }
  GPUNODE_ASSIGN_OR_RETURN(d.image_pull_secrets, StringList(drv, "imagePullSecrets"));
  GPUNODE_ASSIGN_OR_RETURN(d.use_precompiled, drv.Bool("usePrecompiled"));
  GPUNODE_ASSIGN_OR_RETURN(std::string kmt, Name(drv, "kernelModuleType"));
  if (!kmt.empty() && kmt != "auto" && kmt != "open" && kmt != "proprietary") {
    return drv.Error(absl::StrCat("kernelModuleType: \"", Summary(kmt), "\" is not auto, open or proprietary"));
  }
  if (!kmt.empty()) d.kernel_module_type = kmt;
  GPUNODE_ASSIGN_OR_RETURN(d.env, EnvList(drv, "env"));
  GPUNODE_ASSIGN_OR_RETURN(std::vector<std::string> args, StringList(drv, "args"));
  d.args = args;
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields policy, drv.Object("upgradePolicy"));
  if (policy.present()) {
    GPUNODE_ASSIGN_OR_RETURN(d.upgrade_policy, ParseUpgradePolicy(policy, out));
  } else {
    d.upgrade_policy = UpgradePolicy{};
    d.upgrade_policy->auto_upgrade = false;  // no upgradePolicy: the Operator upgrades nothing by itself
  }
  if (!HasImage(d)) {
    if (drv.present()) {
      out.t().unapplied.push_back({"spec.driver", Summary(drv.json()),
                                 "enabled, but no image to run: repository, image and version are needed (the "
                                   "Operator's DRIVER_IMAGE environment is not read); no driver DaemonSet"});
    }
    DaemonsetsToAgentOnly(ds, out);
    return absl::OkStatus();
  }
  for (const char* key : {"repository", "image", "version", "imagePullPolicy", "imagePullSecrets", "usePrecompiled",
                          "kernelModuleType", "env", "args", "upgradePolicy"}) {
    const nlohmann::json& v = drv.json().contains(key) ? drv.json()[key] : nlohmann::json();
    if (AsksForSomething(v)) out.Applied(absl::StrCat("spec.driver.", key), Summary(v), to + key);
  }
  GPUNODE_RETURN_IF_ERROR(DaemonsetsOntoDriver(ds, &d, out));

  out.UnappliedMember(drv, "useOpenKernelModules", "deprecated and ignored by the Operator too: kernelModuleType says it");
  for (const char* probe : {"startupProbe", "livenessProbe", "readinessProbe"}) {
    out.UnappliedMember(drv, probe, "the driver DaemonSet's probes are gpunode's (ready: the driver container's "
                                    "/run/nvidia/validations/.driver-ctr-ready)");
  }
  out.UnappliedMember(drv, "rdma", "GPUDirect RDMA: gpunode's driver DaemonSet runs no nvidia-peermem container");
  out.UnappliedMember(drv, "manager", "the k8s-driver-manager init container: gpunode's controller evicts and drains "
                                      "under the upgrade policy itself");
  out.UnappliedMember(drv, "resources", "the driver container's resources are not set by gpunode (as NVIDIADriver's)");
  out.UnappliedMember(drv, "repoConfig", "a package mirror for the driver container: not mounted by gpunode's driver "
                                         "DaemonSet (use a driver image that needs no packages: precompiled)");
  out.UnappliedMember(drv, "certConfig", "certificates for the driver container's package downloads: not mounted");
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields lic, drv.Object("licensingConfig"));
  GPUNODE_ASSIGN_OR_RETURN(std::string lic_cm, Name(lic, "configMapName"));
  GPUNODE_ASSIGN_OR_RETURN(std::string lic_secret, Name(lic, "secretName"));
  if (!lic_cm.empty() || !lic_secret.empty()) {  // NVIDIA's IsVGPULicensingEnabled
    out.Unapplied(lic.path(), lic.json(), "vGPU licensing: gpunode runs the data-center driver only");
  }
  out.UnappliedMember(drv, "virtualTopology", "vGPU topology: gpunode runs the data-center driver only");
  out.UnappliedMember(drv, "kernelModuleConfig", "module parameters from a ConfigMap: not mounted into gpunode's "
                                                 "driver container (the image's defaults apply)");
  out.UnappliedMember(drv, "secretEnv", "environment from a Secret: not passed to gpunode's driver container");
  out.UnappliedMember(drv, "hostNetwork", "the driver pod's network is gpunode's");
  out.Unknown(drv, {"enabled", "useNvidiaDriverCRD", "repository", "image", "version", "imagePullPolicy",
                    "imagePullSecrets", "usePrecompiled", "kernelModuleType", "env", "args", "upgradePolicy",
                    "useOpenKernelModules", "startupProbe", "livenessProbe", "readinessProbe", "rdma", "manager",
                    "resources", "repoConfig", "certConfig", "licensingConfig", "virtualTopology",
                    "kernelModuleConfig", "secretEnv", "hostNetwork"});
  for (const UnappliedField& u : out.t().unapplied) {
    if (absl::StartsWith(u.path, "spec.driver.")) d.ignored.push_back(u.path);
  }
  out.t().default_driver = std::move(d);
  return absl::OkStatus();
}

}  // namespace gpunode::upgrade::cluster_policy_internal
