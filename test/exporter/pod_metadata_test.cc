// Pod labels and UID from the API server (src/exporter/pod_metadata.h): the extraction and its
// bounds on hostile pods, the allowlist, and the reader against test/testing/fake_api_server.h with
// the real kube::Client.
#include "src/exporter/pod_metadata.h"

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "podresources/v1/api.pb.h"
#include "src/kube/client.h"
#include "test/testing/fake_api_server.h"
#include "test/testing/podresources_emulator.h"
#include "test/testing/status_matchers.h"

namespace gpunode::exporter {
namespace {

using ::gpunode::testing::FakeApiServer;
using ::gpunode::testing::PodResourcesEmulator;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;
using json = nlohmann::json;

json Pod(const std::string& uid, json labels) {
  return {{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", {{"uid", uid}, {"labels", std::move(labels)}}}};
}

std::shared_ptr<const PodLabelFilter> Filter(const std::vector<std::string>& patterns) {
  auto f = PodLabelFilter::Create(patterns);
  EXPECT_OK(f) << f.status();
  return f.ok() ? *f : nullptr;
}

TEST(PodLabelsTest, KeysAreSanitizedAsDcgmExporterDoes) {
  // dcgm-exporter's utils_test.go TestSanitizeLabelName.
  EXPECT_EQ(SanitizePodLabelName("label.with.dots/and-slashes"), "label_with_dots_and_slashes");
  EXPECT_EQ(SanitizePodLabelName("label@with#special!chars"), "label_with_special_chars");
  EXPECT_EQ(SanitizePodLabelName("valid_label_name"), "valid_label_name");
  EXPECT_EQ(SanitizePodLabelName("app.kubernetes.io/name"), "app_kubernetes_io_name");
}

TEST(PodLabelsTest, TheAllowlistMatchesAnywhereInTheKeyAsGosMatchString) {
  auto f = Filter({"^app$", "team"});
  EXPECT_TRUE(f->Allowed("app"));
  EXPECT_FALSE(f->Allowed("app.kubernetes.io/name"));
  EXPECT_TRUE(f->Allowed("example.com/team-name"));  // "team" anywhere
  EXPECT_FALSE(f->Allowed("tier"));
  EXPECT_TRUE(Filter({})->Allowed("anything"));
  auto bad = PodLabelFilter::Create({"ok", "a(b"});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("pod label allowlist pattern \"a(b\" does not compile: "));
}

TEST(PodLabelsTest, ExtractsTheUidAndTheAllowedLabelsInNameOrder) {
  auto f = Filter({"^app", "^team$"});
  auto m = ExtractPodMetadata(Pod("3f1c8e2a-0b6d-4c1e-9a57-2d4f6b8c0e13", {{"team", "vision"},
                                                                          {"app.kubernetes.io/name", "trainer"},
                                                                          {"pod-template-hash", "7d9c"}}),
                              f.get(), "pod ml/train-0");
  ASSERT_OK(m) << m.status();
  EXPECT_TRUE(m->read);
  EXPECT_EQ(m->uid, "3f1c8e2a-0b6d-4c1e-9a57-2d4f6b8c0e13");
  EXPECT_THAT(m->labels, ElementsAre(Pair("app_kubernetes_io_name", "trainer"), Pair("team", "vision")));
  EXPECT_EQ(m->dropped, 0u);  // pod-template-hash is not wanted, not dropped

  auto wrong = ExtractPodMetadata(json{{"metadata", {{"labels", {{"a", 1}}}}}}, nullptr, "pod ml/x");
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(wrong.status().message(), HasSubstr("pod ml/x: metadata.labels"));
  EXPECT_FALSE(ExtractPodMetadata(json{{"metadata", "x"}}, nullptr, "pod ml/y").ok());
  EXPECT_FALSE(ExtractPodMetadata(json::array(), nullptr, "pod ml/z").ok());
}

TEST(PodLabelsTest, AHostilePodCannotBlowUpTheSeries) {
  json labels = json::object();
  for (int i = 0; i < 1000; ++i) labels["k" + std::to_string(1000 + i)] = "v";
  labels["huge"] = std::string(1 << 20, 'x');            // over 63 bytes
  labels["quote"] = "a\"b";                               // not a Kubernetes label value
  labels["9lives"] = "v";                                 // not a Prometheus name
  labels["__reserved"] = "v";                             // Prometheus' reserved prefix
  labels["a.b"] = "first";                                // both sanitize to a_b: the first key wins
  labels["a_b"] = "second";
  labels[std::string(400, 'k')] = "v";                    // a key longer than Kubernetes allows
  auto m = ExtractPodMetadata(Pod(std::string(5000, 'u'), labels), nullptr, "pod evil/x");
  ASSERT_OK(m) << m.status();
  EXPECT_EQ(m->uid, "");  // not a UID
  ASSERT_EQ(m->labels.size(), kMaxLabelsPerPod);
  EXPECT_EQ(m->labels.front(), std::make_pair(std::string("a_b"), std::string("first")));
  // 1000 k* + a.b kept before the cut; dropped: huge, quote, 9lives, __reserved, a_b, the long key,
  // and the k* past the 32nd label.
  EXPECT_EQ(m->dropped, 6u + (1001 - kMaxLabelsPerPod));
  for (const auto& [name, value] : m->labels) EXPECT_LE(value.size(), kMaxPodLabelValueBytes);
}

class PodMetadataCacheTest : public ::testing::Test {
 protected:
  PodMetadataCacheTest() {
    kube::Connection c;
    EXPECT_OK(kube::ParseServer(api_.url(), &c));
    kube::ClientOptions o;
    o.qps = 0;  // back to back
    client_ = std::make_unique<kube::Client>(c, o);
  }

  void SetPods(const std::vector<std::pair<std::string, std::string>>& pods) {
    v1::ListPodResourcesResponse r;
    int i = 0;
    for (const auto& [ns, name] : pods) {
      PodResourcesEmulator::AddContainer(&r, ns, name, "main", "nvidia.com/gpu",
                                         {"GPU-00000000-0000-0000-0000-" + std::to_string(100000000000 + i++)});
    }
    mapping_ = std::make_shared<const PodMapping>(BuildPodMapping(r, {}));
  }

  std::unique_ptr<PodMetadataCache> Cache(PodMetadataOptions o = {}) {
    o.labels = true;
    o.uid = true;
    o.log = [this](const std::string& line) { log_.push_back(line); };
    return std::make_unique<PodMetadataCache>(*client_, std::move(o), [this] { return mapping_; });
  }

  FakeApiServer api_;
  std::unique_ptr<kube::Client> client_;
  std::shared_ptr<const PodMapping> mapping_ = std::make_shared<PodMapping>();
  std::vector<std::string> log_;
};

TEST_F(PodMetadataCacheTest, ReadsEachGpuPodOnceAndAgainOnlyAfterTheRefresh) {
  api_.PutObject("/api/v1/namespaces/ml/pods/train-0", Pod("uid-train-0", {{"team", "vision"}}));
  api_.PutObject("/api/v1/namespaces/ml/pods/train-1", Pod("uid-train-1", {{"team", "speech"}}));
  SetPods({{"ml", "train-0"}, {"ml", "train-1"}});
  PodMetadataOptions o;
  o.refresh = std::chrono::milliseconds(300);
  auto cache = Cache(o);
  EXPECT_EQ(cache->generation(), 0u);
  cache->RunOnce();
  EXPECT_EQ(cache->generation(), 1u);
  auto snap = cache->Latest();
  ASSERT_NE(snap->Find("ml", "train-0"), nullptr);
  EXPECT_EQ(snap->Find("ml", "train-0")->uid, "uid-train-0");
  EXPECT_THAT(snap->Find("ml", "train-1")->labels, ElementsAre(Pair("team", "speech")));
  EXPECT_EQ(api_.Count("GET /api/v1/namespaces/ml/pods/"), 2);
  cache->RunOnce();  // nothing due: no request, same generation
  EXPECT_EQ(api_.Count("GET /api/v1/namespaces/ml/pods/"), 2);
  EXPECT_EQ(cache->generation(), 1u);

  // A label changes: seen at the next refresh.
  api_.PutObject("/api/v1/namespaces/ml/pods/train-0", Pod("uid-train-0", {{"team", "robotics"}}));
  std::this_thread::sleep_for(std::chrono::milliseconds(350));
  cache->RunOnce();
  EXPECT_EQ(api_.Count("GET /api/v1/namespaces/ml/pods/"), 4);
  EXPECT_THAT(cache->Latest()->Find("ml", "train-0")->labels, ElementsAre(Pair("team", "robotics")));
  EXPECT_EQ(cache->generation(), 2u);

  // A pod that no longer holds a GPU is forgotten.
  SetPods({{"ml", "train-1"}});
  cache->RunOnce();
  EXPECT_EQ(cache->Latest()->Find("ml", "train-0"), nullptr);
  EXPECT_NE(cache->Latest()->Find("ml", "train-1"), nullptr);
  EXPECT_TRUE(log_.empty());
}

TEST_F(PodMetadataCacheTest, AForbiddenReadIsLoggedOnceWithTheRbacHintAndRetried) {
  api_.On("GET", "/api/v1/namespaces/ml/pods/train-0",
          {FakeApiServer::ApiStatus(403, "Forbidden",
                                    "pods \"train-0\" is forbidden: User \"system:serviceaccount:gpu:gpunode\" cannot "
                                    "get resource \"pods\" in API group \"\" in the namespace \"ml\"")});
  SetPods({{"ml", "train-0"}});
  PodMetadataOptions o;
  o.retry = std::chrono::milliseconds(100);
  auto cache = Cache(o);
  cache->RunOnce();
  const PodMetadata* m = cache->Latest()->Find("ml", "train-0");
  ASSERT_NE(m, nullptr);
  EXPECT_FALSE(m->read);
  EXPECT_EQ(m->uid, "");
  EXPECT_EQ(cache->Latest()->errors_total, 1u);
  ASSERT_EQ(log_.size(), 1u);
  EXPECT_THAT(log_[0], HasSubstr("cannot get resource"));
  EXPECT_THAT(log_[0], HasSubstr("need `get` on pods: the chart grants it with exporter.podLabels"));
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  cache->RunOnce();
  EXPECT_EQ(cache->Latest()->errors_total, 2u);
  EXPECT_EQ(log_.size(), 1u);  // once until a read works
  // Granted: the next retry reads it, and the recovery is logged.
  api_.On("GET", "/api/v1/namespaces/ml/pods/train-0", {nullptr});
  api_.PutObject("/api/v1/namespaces/ml/pods/train-0", Pod("uid-train-0", {{"team", "vision"}}));
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  cache->RunOnce();
  EXPECT_TRUE(cache->Latest()->Find("ml", "train-0")->read);
  EXPECT_EQ(cache->Latest()->Find("ml", "train-0")->uid, "uid-train-0");
  ASSERT_EQ(log_.size(), 2u);
  EXPECT_THAT(log_[1], HasSubstr("answers pod reads again"));
}

TEST_F(PodMetadataCacheTest, AFailedReadKeepsTheLastLabelsAndAPodNotFoundHasNone) {
  api_.PutObject("/api/v1/namespaces/ml/pods/train-0", Pod("uid-train-0", {{"team", "vision"}}));
  SetPods({{"ml", "train-0"}});
  PodMetadataOptions o;
  o.refresh = std::chrono::milliseconds(1);
  auto cache = Cache(o);
  cache->RunOnce();
  api_.On("GET", "/api/v1/namespaces/ml/pods/train-0", {FakeApiServer::ApiStatus(500, "InternalError", "etcd")});
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  cache->RunOnce();
  EXPECT_THAT(cache->Latest()->Find("ml", "train-0")->labels, ElementsAre(Pair("team", "vision")));
  EXPECT_EQ(cache->Latest()->errors_total, 1u);
  // Deleted (the kubelet still lists it for a moment): no labels, no UID, as dcgm-exporter.
  api_.On("GET", "/api/v1/namespaces/ml/pods/train-0", {FakeApiServer::ApiStatus(404, "NotFound", "not found")});
  PodMetadataOptions quick;
  quick.retry = std::chrono::milliseconds(1);
  quick.refresh = std::chrono::milliseconds(1);
  auto fresh = Cache(quick);
  fresh->RunOnce();
  EXPECT_FALSE(fresh->Latest()->Find("ml", "train-0")->read);
  EXPECT_TRUE(fresh->Latest()->Find("ml", "train-0")->labels.empty());
}

TEST_F(PodMetadataCacheTest, AnOversizedPodIsRefusedAndMorePodsThanTheBoundAreNotRead) {
  api_.On("GET", "/api/v1/namespaces/ml/pods/fat", {FakeApiServer::HugeBody(kMaxPodBytes + 1024)});
  SetPods({{"ml", "fat"}});
  auto cache = Cache();
  cache->RunOnce();
  EXPECT_EQ(cache->Latest()->errors_total, 1u);
  ASSERT_FALSE(log_.empty());
  EXPECT_THAT(log_[0], HasSubstr("larger than 2 MiB"));

  std::vector<std::pair<std::string, std::string>> many;
  for (size_t i = 0; i < kMaxPods + 3; ++i) many.emplace_back("ns", "p" + std::to_string(10000 + i));
  SetPods(many);
  auto bounded = Cache();
  bounded->RunOnce();
  EXPECT_EQ(bounded->Latest()->pods.size(), kMaxPods);
  EXPECT_EQ(bounded->Latest()->pods_over_limit, 3u);
  EXPECT_EQ(api_.Count("GET /api/v1/namespaces/ns/pods/"), static_cast<int>(kMaxPods));
}

TEST_F(PodMetadataCacheTest, StopEndsAReadInFlightAtOnce) {
  api_.On("GET", "/api/v1/namespaces/ml/pods/slow",
          {FakeApiServer::Slow(std::chrono::seconds(20), FakeApiServer::Json(200, Pod("u", {})))});
  SetPods({{"ml", "slow"}});
  PodMetadataOptions o;
  o.timeout = std::chrono::seconds(30);
  auto cache = Cache(o);
  cache->Start();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto start = std::chrono::steady_clock::now();
  cache->Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
  EXPECT_EQ(cache->Latest()->errors_total, 0u);  // a stop is not a failure of the API server
}

}  // namespace
}  // namespace gpunode::exporter
