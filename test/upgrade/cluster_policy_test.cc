// TranslateClusterPolicy on NVIDIA's own ClusterPolicy samples (test/upgrade/data/README.md names
// their source) and on broken ones.
#include "src/upgrade/cluster_policy.h"

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/status_matchers.h"
#include "test/upgrade/samples.h"

namespace gpunode::upgrade {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAreArray;

using samples::ReadData;
using samples::Sample;

StatusOr<PolicyTranslation> Translate(const std::string& name) { return TranslateClusterPolicy(Sample(name)); }

std::vector<std::string> UnappliedPaths(const PolicyTranslation& t) {
  std::vector<std::string> out;
  for (const UnappliedField& u : t.unapplied) out.push_back(u.path);
  return out;
}

const UnappliedField* FindUnapplied(const PolicyTranslation& t, const std::string& path) {
  for (const UnappliedField& u : t.unapplied) {
    if (u.path == path) return &u;
  }
  return nullptr;
}

// The image fields of an operand the agent replaces.
void AddImage(std::vector<std::string>* v, const std::string& operand, bool pull_policy = true) {
  for (const char* k : {"repository", "image", "version"}) v->push_back("spec." + operand + "." + k);
  if (pull_policy) v->push_back("spec." + operand + ".imagePullPolicy");
}

TEST(ClusterPolicyTest, EveryNvidiaSampleTranslates) {
  for (const char* name : {"v1_clusterpolicy.yaml", "v1_clusterpolicy-v24.9.2.yaml", "csv-alm-example.json",
                           "chart-default.yaml", "chart-nvidiadriver-crd.yaml", "chart-upgrade-policy.yaml"}) {
    auto t = Translate(name);
    ASSERT_OK(t) << name;
    EXPECT_FALSE(t->name.empty()) << name;
    EXPECT_EQ(t->agent_policy["kind"], "AgentPolicy") << name;
    for (const UnappliedField& u : t->unapplied) {
      EXPECT_FALSE(u.why.empty()) << name << " " << u.path;
      EXPECT_LE(u.value.size(), 80u) << name << " " << u.path;
    }
    EXPECT_FALSE(UnappliedSummary(*t).empty()) << name;
  }
}

TEST(ClusterPolicyTest, ChartDefaultDriverIsTheDefaultPool) {
  auto t = Translate("chart-default.yaml");
  ASSERT_OK(t);
  EXPECT_EQ(t->name, "cluster-policy");
  ASSERT_TRUE(t->default_driver.has_value());
  const DriverSpec& d = *t->default_driver;
  EXPECT_EQ(d.name, kClusterPolicyDriverName);
  EXPECT_TRUE(d.is_default);
  EXPECT_EQ(d.driver_type, "gpu");
  EXPECT_EQ(d.repository, "nvcr.io/nvidia");
  EXPECT_EQ(d.image, "driver");
  EXPECT_EQ(d.version, "595.91.07");
  EXPECT_EQ(d.image_pull_policy, "IfNotPresent");
  EXPECT_EQ(d.kernel_module_type, "auto");
  EXPECT_FALSE(d.use_precompiled);
  EXPECT_TRUE(d.node_selector.empty());  // the GPU nodes no NVIDIADriver selects
  // spec.daemonsets: the driver pods' tolerations, priority class and labels, not the Operator's own label.
  ASSERT_EQ(d.tolerations.size(), 1u);
  EXPECT_EQ(d.tolerations[0]["key"], "nvidia.com/gpu");
  EXPECT_EQ(d.priority_class_name, "system-node-critical");
  EXPECT_EQ(d.labels.count("helm.sh/chart"), 1u);
  EXPECT_EQ(d.labels.count("app.kubernetes.io/managed-by"), 0u);
  ASSERT_TRUE(d.upgrade_policy.has_value());
  const UpgradePolicy& p = *d.upgrade_policy;
  EXPECT_TRUE(p.auto_upgrade);
  EXPECT_EQ(p.max_parallel_upgrades, 1);
  EXPECT_EQ(p.max_unavailable.value, 25);
  EXPECT_TRUE(p.max_unavailable.percent);
  EXPECT_EQ(p.wait_for_completion.timeout_seconds, 0);
  EXPECT_FALSE(p.pod_deletion.force);
  EXPECT_EQ(p.pod_deletion.timeout_seconds, 300);
  EXPECT_FALSE(p.drain.enable);
  EXPECT_EQ(p.drain.timeout_seconds, 300);
  EXPECT_THAT(d.ignored, ElementsAre("spec.driver.startupProbe", "spec.driver.manager"));
}

TEST(ClusterPolicyTest, ChartDefaultAgentPolicy) {
  auto t = Translate("chart-default.yaml");
  ASSERT_OK(t);
  // No defaultRuntime in the chart any more: the runtime step keeps the agent config's command line.
  EXPECT_EQ(t->agent_policy, nlohmann::ordered_json::parse(R"({
    "apiVersion": "gpunode/v1", "kind": "AgentPolicy", "origin": "ClusterPolicy cluster-policy generation 0",
    "cdi": {"enabled": true},
    "runtime": {"enabled": true},
    "plugin": {"enabled": true, "migStrategy": "single"},
    "labels": {"enabled": true},
    "exporter": {"enabled": true},
    "validator": {"enabled": true}
  })"));
  EXPECT_TRUE(t->config_maps.empty());
}

TEST(ClusterPolicyTest, ChartDefaultUnappliedIsExactlyWhatGpunodeDoesNotDo) {
  auto t = Translate("chart-default.yaml");
  ASSERT_OK(t);
  std::vector<std::string> want = {
      "spec.driver.startupProbe", "spec.driver.manager",
      "spec.daemonsets.labels[\"app.kubernetes.io/managed-by\"]", "spec.daemonsets.updateStrategy",
      "spec.daemonsets.rollingUpdate", "spec.operator.runtimeClass"};
  AddImage(&want, "toolkit");
  want.push_back("spec.toolkit.installDir");
  AddImage(&want, "devicePlugin");
  AddImage(&want, "dcgmExporter");
  want.push_back("spec.dcgmExporter.serviceMonitor");
  want.push_back("spec.dcgmExporter.service");
  AddImage(&want, "gfd");
  AddImage(&want, "migManager");
  want.push_back("spec.migManager.config.default");  // all-disabled on unlabelled nodes
  AddImage(&want, "validator");
  // hostPaths; dcgm, nodeStatusExporter, gds, gdrcopy are off; the sandbox operands (vfioManager,
  // vgpuDeviceManager, ccManager, ...) are on but act only with sandboxWorkloads, which is off.
  want.push_back("spec.hostPaths.rootFS");
  want.push_back("spec.hostPaths.driverInstallDir");
  EXPECT_THAT(UnappliedPaths(*t), UnorderedElementsAreArray(want));
  const UnappliedField* dcgm_image = FindUnapplied(*t, "spec.dcgmExporter.image");
  ASSERT_NE(dcgm_image, nullptr);
  EXPECT_EQ(dcgm_image->value, "dcgm-exporter");
  EXPECT_THAT(dcgm_image->why, HasSubstr("gpunode's own binary serves it"));
}

TEST(ClusterPolicyTest, UpgradePolicyAndConfigMapsMapAsNvidiaMeansThem) {
  auto t = Translate("chart-upgrade-policy.yaml");
  ASSERT_OK(t);
  ASSERT_TRUE(t->default_driver.has_value());
  EXPECT_EQ(t->default_driver->version, "580.95.05");
  const UpgradePolicy& p = *t->default_driver->upgrade_policy;
  EXPECT_TRUE(p.auto_upgrade);
  EXPECT_EQ(p.max_parallel_upgrades, 3);
  EXPECT_EQ(p.max_unavailable.value, 2);
  EXPECT_FALSE(p.max_unavailable.percent);
  EXPECT_EQ(p.wait_for_completion.timeout_seconds, 1800);
  EXPECT_EQ(p.wait_for_completion.pod_selector, "nvidia.com/gpu-driver-upgrade-wait=true");
  EXPECT_TRUE(p.pod_deletion.force);  // the chart's gpuPodDeletion, rendered as podDeletion
  EXPECT_EQ(p.pod_deletion.timeout_seconds, 600);
  EXPECT_TRUE(p.drain.enable);
  EXPECT_EQ(p.drain.pod_selector, "app=training");
  EXPECT_EQ(t->agent_policy["plugin"], nlohmann::ordered_json::parse(R"({"enabled": true, "migStrategy": "mixed",
      "configDir": "/etc/gpunode/policy-device-plugin", "defaultConfig": "any"})"));
  EXPECT_EQ(t->agent_policy["mig"]["configFile"], kPolicyMigConfigFile);
  EXPECT_EQ(t->agent_policy["exporter"]["collectors"], kPolicyExporterCountersFile);
  ASSERT_EQ(t->config_maps.size(), 3u);
  EXPECT_EQ(t->config_maps[0].name, "time-slicing-config");
  EXPECT_EQ(t->config_maps[0].key, "");  // every named config
  EXPECT_EQ(t->config_maps[1].name, "custom-dcgm-metrics");
  EXPECT_EQ(t->config_maps[1].key, "dcgm-metrics.csv");
  EXPECT_EQ(t->config_maps[2].name, "custom-mig-parted-config");
  EXPECT_EQ(t->config_maps[2].key, "config.yaml");
  // The file the controller writes: compared with the copy the agent's tests apply.
  EXPECT_EQ(AgentPolicyText(*t), ReadData("chart-upgrade-policy.agent-policy.yaml"));
}

TEST(ClusterPolicyTest, UseNvidiaDriverCrdLeavesTheDriverToNvidiaDriverResources) {
  auto t = Translate("chart-nvidiadriver-crd.yaml");
  ASSERT_OK(t);
  EXPECT_FALSE(t->default_driver.has_value());
  EXPECT_TRUE(t->use_nvidia_driver_crd);
  for (const UnappliedField& u : t->unapplied) {
    EXPECT_FALSE(absl::StartsWith(u.path, "spec.driver")) << u.path;  // off, as in the Operator
  }
  // spec.daemonsets now reaches only the agent DaemonSet, which is the chart's.
  const UnappliedField* tol = FindUnapplied(*t, "spec.daemonsets.tolerations");
  ASSERT_NE(tol, nullptr);
  EXPECT_THAT(tol->why, HasSubstr("no driver DaemonSet"));
}

TEST(ClusterPolicyTest, OldSampleDefaultRuntimeAndNoDriverImage) {
  auto t = Translate("v1_clusterpolicy-v24.9.2.yaml");
  ASSERT_OK(t);
  EXPECT_EQ(t->agent_policy["runtime"], nlohmann::ordered_json::parse(
                                            R"({"enabled": true, "args": ["runtime", "configure", "--runtime", "crio", "--cdi"]})"));
  EXPECT_FALSE(t->default_driver.has_value());  // enabled, but no repository/image/version
  const UnappliedField* drv = FindUnapplied(*t, "spec.driver");
  ASSERT_NE(drv, nullptr);
  EXPECT_THAT(drv->why, HasSubstr("no image to run"));
  std::vector<std::string> want = {
      "spec.driver",
      "spec.operator.runtimeClass", "spec.operator.use_ocp_driver_toolkit",
      "spec.validator.env[0]",  // WITH_WORKLOAD=false on the validator's main container
      "spec.dcgm"};             // enabled: true
  // migManager.config.name "" and devicePlugin.config {name: "", default: ""} ask for nothing; the
  // vGPU and VFIO managers are on, but act only with sandboxWorkloads, which is off.
  EXPECT_THAT(UnappliedPaths(*t), UnorderedElementsAreArray(want));
}

TEST(ClusterPolicyTest, CurrentSampleAndOpenShiftExample) {
  auto t = Translate("v1_clusterpolicy.yaml");
  ASSERT_OK(t);
  EXPECT_EQ(t->name, "gpu-cluster-policy");
  EXPECT_FALSE(t->agent_policy.contains("runtime") && t->agent_policy["runtime"].contains("args"));
  EXPECT_THAT(UnappliedPaths(*t), UnorderedElementsAreArray(std::vector<std::string>{
                                      "spec.driver", "spec.operator.runtimeClass", "spec.operator.use_ocp_driver_toolkit",
                                      "spec.validator.env[0]", "spec.dcgm"}));
  auto csv = Translate("csv-alm-example.json");
  ASSERT_OK(csv);
  EXPECT_THAT(UnappliedPaths(*csv), UnorderedElementsAreArray(std::vector<std::string>{
                                        "spec.driver", "spec.operator.use_ocp_driver_toolkit",
                                        "spec.dcgmExporter.serviceMonitor", "spec.daemonsets.updateStrategy",
                                        "spec.daemonsets.rollingUpdate", "spec.devicePlugin.mps.root", "spec.dcgm",
                                        "spec.nodeStatusExporter"}));
  EXPECT_THAT(FindUnapplied(*csv, "spec.nodeStatusExporter")->why, HasSubstr("readiness"));
}

TEST(ClusterPolicyTest, SwitchesAndEnvironmentMapToAgentKeys) {
  auto t = TranslateClusterPolicy(nlohmann::json::parse(R"({
    "apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy",
    "metadata": {"name": "p", "generation": 7},
    "spec": {
      "operator": {"defaultRuntime": "containerd"},
      "driver": {"enabled": false, "version": "580.95.05"},
      "toolkit": {"enabled": false},
      "devicePlugin": {"enabled": true, "env": [
        {"name": "DEVICE_ID_STRATEGY", "value": "index"}, {"name": "PASS_DEVICE_SPECS", "value": "true"},
        {"name": "DEVICE_LIST_STRATEGY", "value": "bogus"}, {"name": "NVIDIA_MIG_MONITOR_DEVICES", "value": "all"},
        {"name": "MIG_STRATEGY", "value": "mixed"}, {"name": "FAIL_ON_INIT_ERROR", "value": null}]},
      "mig": {"strategy": "single"},
      "dcgmExporter": {"enabled": false, "image": "ignored-while-off"},
      "gfd": {"enabled": false},
      "migManager": {"enabled": false},
      "validator": {"cuda": {"env": [{"name": "WITH_WORKLOAD", "value": "false"}]}},
      "sandboxWorkloads": {"enabled": true},
      "vgpuManager": {"enabled": true},
      "vfioManager": {"enabled": false},
      "cdi": {"enabled": false, "nriPluginEnabled": true},
      "futureThing": {"enabled": true}
    }})"));
  ASSERT_OK(t);
  EXPECT_FALSE(t->default_driver.has_value());
  EXPECT_EQ(t->generation, 7);
  EXPECT_EQ(t->agent_policy, nlohmann::ordered_json::parse(R"({
    "apiVersion": "gpunode/v1", "kind": "AgentPolicy", "origin": "ClusterPolicy p generation 7",
    "cdi": {"enabled": false},
    "runtime": {"enabled": false},
    "plugin": {"enabled": true, "migStrategy": "mixed", "deviceIdStrategy": "index", "passDeviceSpecs": "true"},
    "labels": {"enabled": false},
    "exporter": {"enabled": false},
    "validator": {"enabled": true, "cuda": false},
    "mig": {"configFile": ""}
  })"));
  EXPECT_THAT(UnappliedPaths(*t), UnorderedElementsAreArray(std::vector<std::string>{
                                      "spec.operator.defaultRuntime", "spec.cdi.enabled", "spec.cdi.nriPluginEnabled",
                                      "spec.devicePlugin.env[2]", "spec.devicePlugin.env[3]", "spec.devicePlugin.env[5]",
                                      "spec.sandboxWorkloads", "spec.vgpuManager", "spec.futureThing"}));
  EXPECT_THAT(FindUnapplied(*t, "spec.devicePlugin.env[2]")->why, HasSubstr("not a value gpunode's plugin takes"));
  EXPECT_THAT(FindUnapplied(*t, "spec.futureThing")->why, HasSubstr("not a field gpunode knows"));
  EXPECT_THAT(UnappliedSummary(*t, 120), HasSubstr("more fields)"));
}

TEST(ClusterPolicyTest, AbsentUpgradePolicyMeansNoAutomaticUpgrade) {
  auto t = TranslateClusterPolicy(nlohmann::json::parse(R"({"metadata": {"name": "p"},
    "spec": {"driver": {"repository": "r", "image": "driver", "version": "1"}}})"));
  ASSERT_OK(t);
  ASSERT_TRUE(t->default_driver.has_value());
  EXPECT_FALSE(t->default_driver->upgrade_policy->auto_upgrade);  // as the Operator: nil policy, no upgrades
  auto given = TranslateClusterPolicy(nlohmann::json::parse(R"({"metadata": {"name": "p"},
    "spec": {"driver": {"image": "registry:5000/driver@sha256:00", "upgradePolicy": {"maxParallelUpgrades": 0}}}})"));
  ASSERT_OK(given);
  ASSERT_TRUE(given->default_driver.has_value());  // a digest is an image to run
  EXPECT_FALSE(given->default_driver->upgrade_policy->auto_upgrade);  // the CRD's default
  EXPECT_EQ(given->default_driver->upgrade_policy->max_parallel_upgrades, 0);
}

TEST(ClusterPolicyTest, MalformedInputIsAClearErrorNamingTheField) {
  struct Case {
    const char* json;
    const char* error;
  } cases[] = {
      {R"([1])", "ClusterPolicy ?: expected an object, got array"},
      {R"({"metadata": {"name": "p"}, "spec": "all of it"})", "ClusterPolicy p: spec: expected an object, got string"},
      {R"({"metadata": {"name": "p"}, "spec": {"driver": "yes"}})", "ClusterPolicy p: spec.driver: expected an object"},
      {R"({"metadata": {"name": "p"}, "spec": {"driver": {"enabled": "true"}}})",
       "ClusterPolicy p: spec.driver.enabled: expected true or false, got string"},
      {R"({"metadata": {"name": "p"}, "spec": {"driver": {"image": "d", "version": "1",
          "upgradePolicy": {"maxUnavailable": {"x": 1}}}}})",
       "ClusterPolicy p: spec.driver.upgradePolicy: maxUnavailable: expected a whole number or a percentage"},
      {R"({"metadata": {"name": "p"}, "spec": {"driver": {"image": "d", "version": "1",
          "upgradePolicy": {"maxUnavailable": "150%"}}}})", "neither a whole number nor a percentage 0%..100%"},
      {R"({"metadata": {"name": "p"}, "spec": {"driver": {"image": "d", "upgradePolicy": {"drain": {"timeoutSeconds": -1}}}}})",
       "spec.driver.upgradePolicy.drain: timeoutSeconds: -1 is outside 0..604800 seconds"},
      {R"({"metadata": {"name": "p"}, "spec": {"driver": {"env": [{"value": "x"}]}}})",
       "ClusterPolicy p: spec.driver.env[0]: name: missing"},
      {R"({"metadata": {"name": "p"}, "spec": {"driver": {"kernelModuleType": "closed"}}})",
       "kernelModuleType: \"closed\" is not auto, open or proprietary"},
      {R"({"metadata": {"name": "p"}, "spec": {"mig": {"strategy": "all"}}})", "spec.mig: strategy: \"all\" is not"},
      {R"({"metadata": {"name": "p"}, "spec": {"operator": {"defaultRuntime": "podman"}}})",
       "defaultRuntime: \"podman\" is not containerd, docker or crio"},
      {R"({"metadata": {"name": "p"}, "spec": {"daemonsets": {"tolerations": ["NoSchedule"]}, "driver": {"image": "d:1"}}})",
       "spec.daemonsets.tolerations[0]: expected an object, got string"},
      {R"({"apiVersion": "nvidia.com/v1alpha1", "metadata": {"name": "p"}})", "apiVersion: \"nvidia.com/v1alpha1\" is not"},
      {R"({"metadata": {}})", "metadata.name: missing"},
      {R"({"metadata": {"name": "p"}, "spec": {"devicePlugin": {"config": {"name": "Time_Slicing"}}}})",
       "spec.devicePlugin.config: name: \"Time_Slicing\" is not a ConfigMap name"},
      {R"({"metadata": {"name": "p"}, "spec": {"devicePlugin": {"config": {"name": "ts", "default": "../x"}}}})",
       "spec.devicePlugin.config: default: \"../x\" is not a ConfigMap key"},
  };
  for (const Case& c : cases) {
    auto t = TranslateClusterPolicy(nlohmann::json::parse(c.json));
    ASSERT_FALSE(t.ok()) << c.json;
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << c.json;
    EXPECT_THAT(std::string(t.status().message()), HasSubstr(c.error)) << c.json;
  }
}

TEST(ClusterPolicyTest, OversizedAndDeepValuesAreRefusedNotWalked) {
  nlohmann::json big = Sample("chart-default.yaml");
  big["spec"]["driver"]["version"] = std::string(10 << 20, '5');  // 10 MiB
  auto t = TranslateClusterPolicy(big);
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(std::string(t.status().message()),
              HasSubstr("ClusterPolicy cluster-policy: spec.driver.version: a string of 10485760 bytes"));
  EXPECT_LT(t.status().message().size(), 300u);

  big = Sample("chart-default.yaml");
  big["spec"]["sandboxWorkloads"]["mode"] = std::string(10 << 20, 'k');  // in a section gpunode does not read
  EXPECT_FALSE(TranslateClusterPolicy(big).ok());

  std::string deep;
  for (int i = 0; i < 1000; ++i) deep += R"({"a":)";
  deep += "1";
  for (int i = 0; i < 1000; ++i) deep += "}";
  nlohmann::json nested = Sample("chart-default.yaml");
  nested["spec"]["futureThing"] = nlohmann::json::parse(deep);
  t = TranslateClusterPolicy(nested);
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("spec.futureThing.a.a"));
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("nested deeper than 32 levels"));
  EXPECT_LT(t.status().message().size(), 300u);

  nlohmann::json wide = Sample("chart-default.yaml");
  wide["spec"]["driver"]["env"] = nlohmann::json::array();
  for (int i = 0; i < 2000; ++i) wide["spec"]["driver"]["env"].push_back({{"name", "X"}});
  EXPECT_THAT(std::string(TranslateClusterPolicy(wide).status().message()), HasSubstr("2000 items (at most 1024)"));
}

TEST(ClusterPolicyTest, SummariesAreShortAndTerminalSafe) {
  auto t = TranslateClusterPolicy(nlohmann::json::parse(R"({"metadata": {"name": "p"},
    "spec": {"operator": {"runtimeClass": "nvidia\u001b]0;owned\u0007 and a long tail that goes on and on and on and on and on and on and on and on"}}})"));
  ASSERT_OK(t);
  const UnappliedField* rc = FindUnapplied(*t, "spec.operator.runtimeClass");
  ASSERT_NE(rc, nullptr);
  EXPECT_EQ(rc->value.find('\x1b'), std::string::npos);
  EXPECT_LE(rc->value.size(), 80u);
  EXPECT_TRUE(absl::EndsWith(rc->value, "..."));
}

}  // namespace
}  // namespace gpunode::upgrade
