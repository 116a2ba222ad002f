// The driver-upgrade controller with NVIDIA's ClusterPolicy (src/upgrade/cluster_policy_sync.h),
// against the API server stand-in: NVIDIA's Helm chart's ClusterPolicy in, the agents' policy
// ConfigMaps, the default pool's driver DaemonSet and the conditions out; gone when it goes.
#include "src/upgrade/cluster_policy_sync.h"

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/base/well_known.h"
#include "src/kube/client.h"
#include "src/upgrade/controller.h"
#include "src/upgrade/daemonset.h"
#include "test/testing/fake_api_server.h"
#include "test/testing/status_matchers.h"
#include "test/upgrade/samples.h"

namespace gpunode::upgrade {
namespace {

using ::gpunode::testing::FakeApiServer;
using ::testing::HasSubstr;
using json = nlohmann::json;

constexpr char kNs[] = "gpunode";
constexpr char kBase[] = "gpunode-agent-policy";
const std::string kPolicyPath = std::string(kClusterPolicyCollection) + "/cluster-policy";

std::string ConfigMapPath(const std::string& ns, const std::string& name) {
  return "/api/v1/namespaces/" + ns + "/configmaps/" + name;
}

json ConditionOf(const json& object, const std::string& type) {
  for (const json& c : object["status"].value("conditions", json::array())) {
    if (c.value("type", "") == type) return c;
  }
  return nullptr;
}

class ClusterPolicySyncTest : public ::testing::Test {
 protected:
  ClusterPolicySyncTest() {
    api_.ServeCollection(kCollection);
    api_.ServeCollection(std::string("/apis/apps/v1/namespaces/") + kNs + "/daemonsets");
    api_.ServeCollection("/api/v1/pods");
    api_.AddNode("gpu-1");
    api_.SetLabel("gpu-1", "nvidia.com/gpu.present", "true");
    // The ConfigMaps NVIDIA's chart-upgrade-policy sample names, where the Operator ran.
    api_.PutObject(ConfigMapPath("gpu-operator", "time-slicing-config"),
                   {{"metadata", {{"name", "time-slicing-config"}, {"namespace", "gpu-operator"}}},
                    {"data", {{"any", "version: v1\n"}, {"a100-40gb", "version: v1\nsharing: {}\n"}}}});
    api_.PutObject(ConfigMapPath("gpu-operator", "custom-mig-parted-config"),
                   {{"metadata", {{"name", "custom-mig-parted-config"}}},
                    {"data", {{"config.yaml", "version: v1\nmig-configs: {}\n"}, {"other", "x"}}}});
    api_.PutObject(ConfigMapPath("gpu-operator", "custom-dcgm-metrics"),
                   {{"metadata", {{"name", "custom-dcgm-metrics"}}}, {"data", {{"dcgm-metrics.csv", "DCGM_FI_DEV_GPU_UTIL, gauge, util\n"}}}});
    EXPECT_OK(kube::ParseServer(api_.url(), &conn_));
    kube::ClientOptions co;
    co.qps = 0;
    client_ = std::make_unique<kube::Client>(conn_, co);
  }

  void StartController(const std::string& agent_policy_configmap = kBase,
                       std::chrono::milliseconds resync = std::chrono::seconds(30)) {
    ControllerOptions o;
    o.resync = resync;
    o.busy_resync = resync;
    o.ns = kNs;
    o.leader_election = false;
    o.agent_policy_configmap = agent_policy_configmap;
    o.now = [] { return std::chrono::system_clock::time_point(std::chrono::hours(24 * 365 * 56)); };
    o.log = [this](const std::string& m) {
      std::lock_guard<std::mutex> l(log_mu_);
      log_.push_back(m);
    };
    controller_ = std::make_unique<Controller>(*client_, o);
    controller_->Start();
    ASSERT_TRUE(controller_->WaitSynced(std::chrono::seconds(10)));
  }

  // NVIDIA's Helm chart's ClusterPolicy with a driver version, an upgrade policy and three
  // ConfigMaps named (test/upgrade/data/README.md), as the API server holds it.
  json ChartPolicy(const std::string& name = "cluster-policy", const std::string& created = "2026-11-01T10:00:00Z") {
    json cp = samples::Sample("chart-upgrade-policy.yaml");
    cp["metadata"]["name"] = name;
    cp["metadata"]["uid"] = "uid-" + name;
    cp["metadata"]["creationTimestamp"] = created;
    cp["status"] = {{"state", "ready"}, {"namespace", "gpu-operator"},
                    {"conditions", json::array({{{"type", "Ready"}, {"status", "True"}, {"reason", "Reconciled"},
                                                 {"message", "by the Operator"},
                                                 {"lastTransitionTime", "2026-11-01T10:00:00Z"}}})}};
    return cp;
  }

  StatusOr<std::chrono::milliseconds> SyncPolicy() { return controller_->SyncPool(kClusterPolicyCollection); }

  std::vector<std::string> Log() {
    std::lock_guard<std::mutex> l(log_mu_);
    return log_;
  }

  FakeApiServer api_;
  kube::Connection conn_;
  std::unique_ptr<kube::Client> client_;
  std::unique_ptr<Controller> controller_;
  std::mutex log_mu_;
  std::vector<std::string> log_;
};

TEST_F(ClusterPolicySyncTest, TheChartsClusterPolicyBecomesTheAgentsPolicyTheDefaultPoolAndItsConditions) {
  api_.PutObject(kPolicyPath, ChartPolicy());
  StartController();
  ASSERT_OK(SyncPolicy());

  // The agents' policy file: exactly what the agent's tests apply (test/upgrade/data).
  const json policy = api_.Object(ConfigMapPath(kNs, kBase));
  ASSERT_TRUE(policy.is_object()) << "no policy ConfigMap";
  EXPECT_EQ(policy["data"][kAgentPolicyKey], samples::ReadData("chart-upgrade-policy.agent-policy.yaml"));
  EXPECT_EQ(policy["metadata"]["ownerReferences"][0]["kind"], "ClusterPolicy");
  EXPECT_EQ(policy["metadata"]["ownerReferences"][0]["uid"], "uid-cluster-policy");
  // The ConfigMaps it names, copied from the Operator's namespace (status.namespace) where the
  // chart mounts them: every config of the device plugin, the one key of the others.
  const json plugin = api_.Object(ConfigMapPath(kNs, std::string(kBase) + "-device-plugin"));
  EXPECT_EQ(plugin["data"], json({{"any", "version: v1\n"}, {"a100-40gb", "version: v1\nsharing: {}\n"}}));
  EXPECT_EQ(api_.Object(ConfigMapPath(kNs, std::string(kBase) + "-mig"))["data"],
            json({{"config.yaml", "version: v1\nmig-configs: {}\n"}}));
  EXPECT_EQ(api_.Object(ConfigMapPath(kNs, std::string(kBase) + "-exporter"))["data"],
            json({{"dcgm-metrics.csv", "DCGM_FI_DEV_GPU_UTIL, gauge, util\n"}}));
  EXPECT_EQ(api_.Count("PATCH " + ConfigMapPath(kNs, kBase) + "?fieldManager=gpunode-driver-manager&force=true"), 1);

  // The condition lists every field not applied, grouped by why; the Operator's stays.
  json cp = api_.Object(kPolicyPath);
  auto t = TranslateClusterPolicy(ChartPolicy());
  ASSERT_OK(t);
  const json applied = ConditionOf(cp, kConditionApplied);
  EXPECT_EQ(applied["status"], "True");
  EXPECT_EQ(applied["reason"], "PartiallyApplied");
  EXPECT_EQ(applied["message"], "not applied: " + UnappliedSummary(*t));
  EXPECT_THAT(applied["message"].get<std::string>(), HasSubstr("spec.driver.startupProbe"));
  EXPECT_EQ(applied["lastTransitionTime"], "2025-12-18T00:00:00Z");
  EXPECT_EQ(ConditionOf(cp, "Ready")["message"], "by the Operator");
  EXPECT_EQ(cp["status"]["state"], "notReady") << "the pool has not been synced yet";

  // The default pool: its driver DaemonSet, owned by the ClusterPolicy; the GPU node its own.
  ASSERT_OK(controller_->SyncPool(kClusterPolicyDriverName));
  const json ds = api_.Object(FakeApiServer::DaemonSetPath(kNs, DaemonSetName(kClusterPolicyDriverName, false)));
  ASSERT_TRUE(ds.is_object()) << "no driver DaemonSet";
  EXPECT_EQ(ds["metadata"]["ownerReferences"][0]["apiVersion"], "nvidia.com/v1");
  EXPECT_EQ(ds["metadata"]["ownerReferences"][0]["kind"], "ClusterPolicy");
  EXPECT_EQ(ds["metadata"]["ownerReferences"][0]["name"], "cluster-policy");
  EXPECT_EQ(ds["metadata"]["ownerReferences"][0]["uid"], "uid-cluster-policy");
  const json& container = ds["spec"]["template"]["spec"]["containers"][0];
  EXPECT_EQ(container["image"], "nvcr.io/nvidia/driver:580.95.05");
  EXPECT_EQ(api_.Labels("gpu-1")[wellknown::kLabelDriverOwner], kClusterPolicyDriverName);
  cp = api_.Object(kPolicyPath);
  const json pool = ConditionOf(cp, kConditionDriverPool);
  ASSERT_TRUE(pool.is_object()) << cp["status"].dump();
  EXPECT_THAT(pool["message"].get<std::string>(), HasSubstr("driver 580.95.05 (nvcr.io/nvidia/driver:580.95.05)"));
  EXPECT_EQ(api_.Count("PATCH " + std::string(kCollection)), 0) << "no NVIDIADriver status written";

  // Nothing changed: nothing written again.
  const int status_writes = api_.Count("PATCH " + kPolicyPath + "/status");
  const int configmap_writes = api_.Count("PATCH /api/v1/namespaces/gpunode/configmaps/");
  ASSERT_OK(SyncPolicy());
  ASSERT_OK(SyncPolicy());
  EXPECT_EQ(api_.Count("PATCH " + kPolicyPath + "/status"), status_writes);
  EXPECT_EQ(api_.Count("PATCH /api/v1/namespaces/gpunode/configmaps/"), configmap_writes);

  // The ClusterPolicy goes: so do the ConfigMaps and the DaemonSet, and the node's owner label.
  api_.DeleteObject(kPolicyPath);
  ASSERT_OK(SyncPolicy());
  for (const char* suffix : {"", "-device-plugin", "-mig", "-exporter"}) {
    EXPECT_TRUE(api_.Object(ConfigMapPath(kNs, kBase + std::string(suffix))).is_null()) << suffix;
  }
  EXPECT_TRUE(api_.Object(FakeApiServer::DaemonSetPath(kNs, DaemonSetName(kClusterPolicyDriverName, false))).is_null());
  ASSERT_OK(controller_->SyncPool(kClusterPolicyDriverName));
  EXPECT_EQ(api_.Labels("gpu-1").count(wellknown::kLabelDriverOwner), 0u) << "the node left the pool";
}

// No Operator CRD (404): nothing logged, nothing written; once after the start, what an earlier run
// wrote for a ClusterPolicy deleted since is deleted (404s here), then each pass is one GET.
TEST_F(ClusterPolicySyncTest, WithoutTheOperatorsResourceEachPassIsOneGetAndNothingIsLogged) {
  StartController();
  ASSERT_OK(SyncPolicy());
  EXPECT_EQ(api_.Count("DELETE /api/v1/namespaces/gpunode/configmaps/"), 4);
  EXPECT_EQ(api_.Count("DELETE /apis/apps/v1/namespaces/gpunode/daemonsets/nvidia-driver-cluster-policy"), 2);
  auto calls = [this] {  // not the informers' watches
    int n = 0;
    for (const std::string& r : api_.Requests()) n += !absl::StrContains(r, "watch=");
    return n;
  };
  const int before = calls();
  ASSERT_OK(SyncPolicy());
  ASSERT_OK(controller_->SyncPool(kClusterPolicyDriverName));
  EXPECT_EQ(calls(), before + 1);
  EXPECT_EQ(api_.Count("GET " + std::string(kClusterPolicyCollection)), 2);
  EXPECT_EQ(api_.Count("PATCH"), 0);
  for (const std::string& m : Log()) EXPECT_THAT(m, ::testing::Not(HasSubstr("ClusterPolic"))) << m;
  EXPECT_EQ(api_.Labels("gpu-1").count(wellknown::kLabelDriverOwner), 0u);
}

TEST_F(ClusterPolicySyncTest, AForbiddenListIsLoggedOnceAndLeavesThePoolAsItIs) {
  api_.SetLabel("gpu-1", wellknown::kLabelDriverOwner, kClusterPolicyDriverName);
  api_.On("GET", kClusterPolicyCollection, {FakeApiServer::ApiStatus(403, "Forbidden", "clusterpolicies is forbidden")});
  StartController();
  ASSERT_OK(controller_->SyncPool(kClusterPolicyDriverName));  // before any list: left as it is
  ASSERT_OK(SyncPolicy());
  ASSERT_OK(SyncPolicy());
  ASSERT_OK(controller_->SyncPool(kClusterPolicyDriverName));
  int said = 0;
  for (const std::string& m : Log()) said += absl::StrContains(m, "ClusterPolicies cannot be read");
  EXPECT_EQ(said, 1);
  EXPECT_EQ(api_.Labels("gpu-1")[wellknown::kLabelDriverOwner], kClusterPolicyDriverName);
  EXPECT_EQ(api_.Count("PATCH"), 0);
  EXPECT_EQ(api_.Count("DELETE"), 0);
}

TEST_F(ClusterPolicySyncTest, AnInvalidEditKeepsTheLastValidReading) {
  api_.PutObject(kPolicyPath, ChartPolicy());
  StartController();
  ASSERT_OK(SyncPolicy());
  ASSERT_OK(controller_->SyncPool(kClusterPolicyDriverName));
  const json before = api_.Object(ConfigMapPath(kNs, kBase))["data"];
  api_.Change(kPolicyPath, [](json& cp) {
    cp["spec"]["driver"]["kernelModuleType"] = "closed";
    cp["spec"]["devicePlugin"]["enabled"] = false;
    cp["metadata"]["generation"] = 2;
  });
  ASSERT_OK(SyncPolicy());
  const json applied = ConditionOf(api_.Object(kPolicyPath), kConditionApplied);
  EXPECT_EQ(applied["status"], "False");
  EXPECT_EQ(applied["reason"], "Invalid");
  EXPECT_THAT(applied["message"].get<std::string>(), HasSubstr("kernelModuleType: \"closed\""));
  EXPECT_THAT(applied["message"].get<std::string>(), HasSubstr("the last valid one, stays in force"));
  EXPECT_EQ(applied["observedGeneration"], 2);
  EXPECT_EQ(api_.Object(ConfigMapPath(kNs, kBase))["data"], before);
  ASSERT_OK(controller_->SyncPool(kClusterPolicyDriverName));
  EXPECT_EQ(api_.Labels("gpu-1")[wellknown::kLabelDriverOwner], kClusterPolicyDriverName);
  EXPECT_FALSE(api_.Object(FakeApiServer::DaemonSetPath(kNs, "nvidia-driver-cluster-policy")).is_null());
}

TEST_F(ClusterPolicySyncTest, TheOldestIsAppliedTheOthersAreIgnored) {
  api_.PutObject(kPolicyPath, ChartPolicy());
  json newer = ChartPolicy("second", "2026-11-02T10:00:00Z");
  newer["spec"]["driver"]["version"] = "590.1.2";
  api_.PutObject(std::string(kClusterPolicyCollection) + "/second", newer);
  StartController();
  ASSERT_OK(SyncPolicy());
  const json second = api_.Object(std::string(kClusterPolicyCollection) + "/second");
  EXPECT_EQ(second["status"]["state"], "ignored");
  const json ignored = ConditionOf(second, kConditionApplied);
  EXPECT_EQ(ignored["reason"], "Ignored");
  EXPECT_THAT(ignored["message"].get<std::string>(), HasSubstr("ClusterPolicy cluster-policy is older"));
  EXPECT_EQ(ConditionOf(api_.Object(kPolicyPath), kConditionApplied)["reason"], "PartiallyApplied");
  EXPECT_THAT(api_.Object(ConfigMapPath(kNs, kBase))["data"][kAgentPolicyKey].get<std::string>(),
              HasSubstr("ClusterPolicy cluster-policy generation"));
}

TEST_F(ClusterPolicySyncTest, AnNvidiaDriverThatIsTheDefaultPoolWinsOverTheClusterPolicysDriver) {
  api_.PutObject(kPolicyPath, ChartPolicy());
  api_.PutObject(std::string(kCollection) + "/main",
                 {{"apiVersion", "nvidia.com/v1alpha1"}, {"kind", "NVIDIADriver"},
                  {"metadata", {{"name", "main"}, {"uid", "uid-main"}, {"generation", 1}}},
                  {"spec", {{"default", true}, {"repository", "nvcr.io/nvidia"}, {"image", "driver"},
                            {"version", "580.95.05"}}}});
  StartController();
  ASSERT_OK(SyncPolicy());
  ASSERT_OK(controller_->SyncPool(kClusterPolicyDriverName));
  EXPECT_TRUE(api_.Object(FakeApiServer::DaemonSetPath(kNs, "nvidia-driver-cluster-policy")).is_null());
  const json cp = api_.Object(kPolicyPath);
  EXPECT_THAT(ConditionOf(cp, kConditionApplied)["message"].get<std::string>(),
              HasSubstr("spec.driver: not applied: NVIDIADriver main is the default pool"));
  EXPECT_TRUE(ConditionOf(cp, kConditionDriverPool).is_null());
  EXPECT_FALSE(api_.Object(ConfigMapPath(kNs, kBase)).is_null()) << "the agents' policy still applies";
}

TEST_F(ClusterPolicySyncTest, AMissingConfigMapIsSaidAndTheOthersAreCopied) {
  api_.DeleteObject(ConfigMapPath("gpu-operator", "custom-mig-parted-config"));
  api_.PutObject(kPolicyPath, ChartPolicy());
  StartController();
  ASSERT_OK(SyncPolicy());
  EXPECT_TRUE(api_.Object(ConfigMapPath(kNs, std::string(kBase) + "-mig")).is_null());
  EXPECT_FALSE(api_.Object(ConfigMapPath(kNs, std::string(kBase) + "-device-plugin")).is_null());
  EXPECT_THAT(ConditionOf(api_.Object(kPolicyPath), kConditionApplied)["message"].get<std::string>(),
              HasSubstr("spec.migManager.config.name: ConfigMap gpu-operator/custom-mig-parted-config not found"));
}

TEST_F(ClusterPolicySyncTest, AConfigMapNoLongerNamedIsDeletedAndThePolicyFileSaysSo) {
  api_.PutObject(kPolicyPath, ChartPolicy());
  StartController();
  ASSERT_OK(SyncPolicy());
  ASSERT_FALSE(api_.Object(ConfigMapPath(kNs, std::string(kBase) + "-device-plugin")).is_null());
  api_.Change(kPolicyPath, [](json& cp) {
    cp["spec"]["devicePlugin"].erase("config");
    cp["metadata"]["generation"] = 5;
  });
  ASSERT_OK(SyncPolicy());
  EXPECT_TRUE(api_.Object(ConfigMapPath(kNs, std::string(kBase) + "-device-plugin")).is_null());
  EXPECT_FALSE(api_.Object(ConfigMapPath(kNs, std::string(kBase) + "-mig")).is_null());
  const std::string text = api_.Object(ConfigMapPath(kNs, kBase))["data"][kAgentPolicyKey];
  EXPECT_THAT(text, HasSubstr("generation 5"));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("configDir")));
}

// The work queue runs the ClusterPolicy pass first and every resync, and its pool like any other.
TEST_F(ClusterPolicySyncTest, TheRunningControllerAppliesItAndUndoesIt) {
  api_.PutObject(kPolicyPath, ChartPolicy());
  StartController(kBase, std::chrono::milliseconds(200));
  std::jthread run([this](std::stop_token stop) { EXPECT_OK(controller_->Run(stop)); });
  const std::string ds = FakeApiServer::DaemonSetPath(kNs, "nvidia-driver-cluster-policy");
  auto wait = [](const std::function<bool()>& done) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!done() && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return done();
  };
  EXPECT_TRUE(wait([&] {
    return !api_.Object(ConfigMapPath(kNs, kBase)).is_null() && !api_.Object(ds).is_null() &&
           api_.Labels("gpu-1")[wellknown::kLabelDriverOwner] == kClusterPolicyDriverName &&
           ConditionOf(api_.Object(kPolicyPath), kConditionDriverPool).is_object();
  }));
  api_.DeleteObject(kPolicyPath);
  EXPECT_TRUE(wait([&] {
    return api_.Object(ConfigMapPath(kNs, kBase)).is_null() && api_.Object(ds).is_null() &&
           !api_.Labels("gpu-1").count(wellknown::kLabelDriverOwner);
  }));
  run.request_stop();
}

TEST_F(ClusterPolicySyncTest, TheStatusViewForTheCli) {
  api_.PutObject(kPolicyPath, ChartPolicy());
  api_.PutObject(std::string(kClusterPolicyCollection) + "/second", ChartPolicy("second", "2026-11-02T10:00:00Z"));
  StartController();
  ASSERT_OK(SyncPolicy());
  auto view = ReadClusterPolicyView(*client_);
  ASSERT_OK(view);
  ASSERT_TRUE(view->has_value());
  EXPECT_EQ((*view)->name, "cluster-policy");
  ASSERT_TRUE((*view)->translation.has_value());
  EXPECT_EQ((*view)->translation->default_driver->version, "580.95.05");
  EXPECT_EQ((*view)->applied["reason"], "PartiallyApplied");
  EXPECT_EQ((*view)->ignored, std::vector<std::string>{"second"});
}

}  // namespace
}  // namespace gpunode::upgrade
