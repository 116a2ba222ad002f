#include "src/upgrade/daemonset.h"

#include <cstdint>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "src/base/well_known.h"
#include "src/upgrade/planner.h"

namespace gpunode::upgrade {

std::string DaemonSetName(const std::string& resource, bool previous) {
  return absl::StrCat("nvidia-driver-", resource, previous ? "-previous" : "");
}

nlohmann::json PodTemplate(const DriverSpec& d, const std::string& os_tag) {
  nlohmann::json labels = nlohmann::json::object(), annotations = nlohmann::json::object();
  for (const auto& [k, v] : d.labels) labels[k] = v;
  for (const auto& [k, v] : d.annotations) annotations[k] = v;
  labels["app.kubernetes.io/managed-by"] = "gpunode";
  labels["app.kubernetes.io/component"] = "nvidia-driver";
  labels[kLabelPodDriver] = d.name;
  annotations[kAnnoPodVersion] = d.version;
  nlohmann::json tolerations = d.tolerations;
  tolerations.push_back({{"key", "nvidia.com/gpu"}, {"operator", "Exists"}, {"effect", "NoSchedule"}});
  nlohmann::json container = {
      {"name", "nvidia-driver"},
      {"image", d.ImageFor(os_tag)},
      {"securityContext", {{"privileged", true}}},
      {"volumeMounts",
       nlohmann::json::array({{{"name", "run-nvidia"}, {"mountPath", "/run/nvidia"}, {"mountPropagation", "Bidirectional"}},
                              {{"name", "host-root"}, {"mountPath", "/host"}, {"mountPropagation", "HostToContainer"}}})},
      // NVIDIA's driver container creates this file once the driver is loaded and nvidia-smi works.
      {"readinessProbe",
       {{"exec", {{"command", {"sh", "-c", "test -e /run/nvidia/validations/.driver-ctr-ready"}}}},
        {"periodSeconds", 2},
        {"failureThreshold", 1}}},
  };
  if (!d.image_pull_policy.empty()) container["imagePullPolicy"] = d.image_pull_policy;
  if (!d.env.empty()) container["env"] = d.env;
  if (!d.args.empty()) container["args"] = d.args;
  nlohmann::json spec = {
      {"hostPID", true},
      {"automountServiceAccountToken", false},
      {"priorityClassName", d.priority_class_name.empty() ? "system-node-critical" : d.priority_class_name},
      {"terminationGracePeriodSeconds", 120},
      {"tolerations", tolerations},
      {"containers", nlohmann::json::array({container})},
      {"volumes",
       nlohmann::json::array({{{"name", "run-nvidia"}, {"hostPath", {{"path", "/run/nvidia"}, {"type", "DirectoryOrCreate"}}}},
                              {{"name", "host-root"}, {"hostPath", {{"path", "/"}}}}})},
  };
  if (!d.image_pull_secrets.empty()) {
    nlohmann::json secrets = nlohmann::json::array();
    for (const std::string& s : d.image_pull_secrets) secrets.push_back({{"name", s}});
    spec["imagePullSecrets"] = secrets;
  }
  return {{"metadata", {{"labels", labels}, {"annotations", annotations}}}, {"spec", spec}};
}

std::string TemplateHash(const nlohmann::json& pod_template) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : pod_template.dump()) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return std::string(buf, 10);
}

nlohmann::json RenderDaemonSet(const std::string& resource, const std::string& ns, const nlohmann::json& pod_template,
                               bool previous) {
  const std::string name = DaemonSetName(resource, previous);
  nlohmann::json tmpl = pod_template;
  tmpl["metadata"]["labels"][kLabelPodHash] = TemplateHash(pod_template);
  tmpl["metadata"]["labels"]["gpunode.io/driver-daemonset"] = name;
  nlohmann::json selector = {{wellknown::kLabelDriverOwner, resource}};
  if (previous) {
    selector[kLabelRollback] = "true";
  } else {
    tmpl["spec"]["affinity"] = {
        {"nodeAffinity",
         {{"requiredDuringSchedulingIgnoredDuringExecution",
           {{"nodeSelectorTerms",
             nlohmann::json::array({{{"matchExpressions",
                                      nlohmann::json::array({{{"key", kLabelRollback}, {"operator", "DoesNotExist"}}})}}})}}}}}};
  }
  tmpl["spec"]["nodeSelector"] = selector;
  nlohmann::json labels = {{"app.kubernetes.io/managed-by", "gpunode"},
                           {"app.kubernetes.io/component", "nvidia-driver"},
                           {kLabelPodDriver, resource}};
  return {{"apiVersion", "apps/v1"},
          {"kind", "DaemonSet"},
          {"metadata",
           {{"name", name},
            {"namespace", ns},
            {"labels", labels},
            {"annotations", {{kAnnoPodVersion, pod_template["metadata"]["annotations"].value(kAnnoPodVersion, "")},
                             {kLabelPodHash, TemplateHash(pod_template)},
                             {kAnnoPodTemplate, pod_template.dump()}}}}},
          {"spec",
           {{"selector", {{"matchLabels", {{"gpunode.io/driver-daemonset", name}}}}},
            {"updateStrategy", {{"type", "OnDelete"}}},
            {"template", tmpl}}}};
}

}  // namespace gpunode::upgrade
