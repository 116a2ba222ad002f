// Node labels and the GpuStackReady condition by server-side apply, against the API server
// stand-in's field managers: keys gpunode stops applying disappear, other writers' keys stay, a
// key another manager owns with another value is left to it, and the migration from the
// managed-labels annotation of earlier agents.
#include <map>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/kube/client.h"
#include "src/kube/node.h"
#include "test/testing/fake_api_server.h"
#include "test/testing/status_matchers.h"

namespace gpunode::kube {
namespace {

using testing::FakeApiServer;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class NodeApplyTest : public ::testing::Test {
 protected:
  NodeApplyTest() {
    api_.AddNode("n1");
    EXPECT_OK(ParseServer(api_.url(), &conn_));
    ClientOptions o;
    o.qps = 0;
    client_ = std::make_unique<Client>(conn_, o);
  }
  std::map<std::string, std::string> Labels() { return api_.Labels("n1"); }
  nlohmann::json Meta() { return api_.Object(FakeApiServer::NodePath("n1"))["metadata"]; }

  FakeApiServer api_;
  Connection conn_;
  std::unique_ptr<Client> client_;
};

TEST_F(NodeApplyTest, LabelsAreAppliedAsFieldManagerGpunodeAndKeysNoLongerAppliedDisappear) {
  auto first = ApplyNodeLabels(*client_, "n1", {{"nvidia.com/gpu.present", "true"}, {"gpunode.io/a", "1"}, {"x.io/no", "1"}});
  ASSERT_OK(first) << first.status();
  EXPECT_TRUE(first->patched);
  EXPECT_THAT(first->set, ElementsAre("gpunode.io/a", "nvidia.com/gpu.present"));
  EXPECT_THAT(first->ignored, ElementsAre("x.io/no"));
  EXPECT_EQ(api_.Count("PATCH /api/v1/nodes/n1?fieldManager=gpunode"), 1);
  EXPECT_FALSE(Labels().count("x.io/no"));
  EXPECT_FALSE(Meta()["annotations"].contains(kManagedLabelsAnnotation)) << "no bookkeeping of our own any more";

  auto again = ApplyNodeLabels(*client_, "n1", {{"nvidia.com/gpu.present", "true"}, {"gpunode.io/a", "1"}});
  ASSERT_OK(again);
  EXPECT_FALSE(again->patched) << "an unchanged label set is not written";

  auto fewer = ApplyNodeLabels(*client_, "n1", {{"gpunode.io/a", "2"}});
  ASSERT_OK(fewer);
  EXPECT_THAT(fewer->set, ElementsAre("gpunode.io/a"));
  EXPECT_THAT(fewer->removed, ElementsAre("nvidia.com/gpu.present"));
  EXPECT_EQ(Labels(), (std::map<std::string, std::string>{{"gpunode.io/a", "2"}}));

  auto gone = RemoveNodeLabels(*client_, "n1");
  ASSERT_OK(gone);
  EXPECT_THAT(gone->removed, ElementsAre("gpunode.io/a"));
  EXPECT_TRUE(Labels().empty());
  auto nothing = RemoveNodeLabels(*client_, "n1");
  ASSERT_OK(nothing);
  EXPECT_FALSE(nothing->patched);
}

TEST_F(NodeApplyTest, AnotherWritersLabelsSurviveAndASharedOneStaysAtUninstall) {
  api_.SetLabel("n1", "nvidia.com/gpu.product", "H100", "nfd-master");  // same value as ours: shared
  ASSERT_OK(ApplyNodeLabels(*client_, "n1", {{"nvidia.com/gpu.product", "H100"}, {"gpunode.io/a", "1"}}));
  api_.SetLabel("n1", "gpunode.io/theirs", "x", "kubectl-label");  // another writer, in between
  ASSERT_OK(ApplyNodeLabels(*client_, "n1", {{"nvidia.com/gpu.product", "H100"}, {"gpunode.io/a", "2"}}));
  EXPECT_EQ(Labels()["gpunode.io/theirs"], "x") << "a read-modify-write would have had to re-read; apply never drops it";
  auto gone = RemoveNodeLabels(*client_, "n1");
  ASSERT_OK(gone);
  EXPECT_THAT(gone->removed, ElementsAre("gpunode.io/a"));
  EXPECT_EQ(Labels(), (std::map<std::string, std::string>{{"gpunode.io/theirs", "x"}, {"nvidia.com/gpu.product", "H100"}}))
      << "what another manager also owns stays";
}

TEST_F(NodeApplyTest, AKeyAnotherManagerOwnsWithAnotherValueIsLeftToIt) {
  api_.SetLabel("n1", "nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3", "nfd-master");  // gpu-feature-discovery
  auto r = ApplyNodeLabels(*client_, "n1", {{"nvidia.com/gpu.product", "H100"}, {"nvidia.com/gpu.count", "8"}});
  ASSERT_OK(r) << r.status();
  EXPECT_THAT(r->conflicts, ElementsAre("nvidia.com/gpu.product (owned by nfd-master)"));
  EXPECT_THAT(r->set, ElementsAre("nvidia.com/gpu.count"));
  EXPECT_EQ(Labels()["nvidia.com/gpu.product"], "NVIDIA-H100-80GB-HBM3");
  EXPECT_EQ(Labels()["nvidia.com/gpu.count"], "8");
  // The other manager writing in between (409 from the API server) is read again and yielded.
  api_.On("PATCH", FakeApiServer::NodePath("n1"),
          {FakeApiServer::ApiStatus(409, "Conflict", "Apply failed with 1 conflict: conflict with \"nfd-master\""), nullptr});
  auto again = ApplyNodeLabels(*client_, "n1", {{"nvidia.com/gpu.count", "4"}});
  ASSERT_OK(again) << again.status();
  EXPECT_EQ(Labels()["nvidia.com/gpu.count"], "4");
}

TEST_F(NodeApplyTest, AnEarlierAgentsAnnotatedMergePatchLabelsAreMigrated) {
  // An earlier agent: labels by merge patch (field manager "gpunode", Update) and the annotation.
  api_.SetLabel("n1", "gpunode.io/keep", "1", "gpunode");
  api_.SetLabel("n1", "gpunode.io/stale", "1", "gpunode");
  api_.SetLabel("n1", "example.com/theirs", "1", "someone");
  api_.SetAnnotation("n1", kManagedLabelsAnnotation, "gpunode.io/keep,gpunode.io/stale,example.com/theirs", "gpunode");
  auto r = ApplyNodeLabels(*client_, "n1", {{"gpunode.io/keep", "2"}});
  ASSERT_OK(r) << r.status();
  EXPECT_THAT(r->removed, ElementsAre("gpunode.io/stale"));
  EXPECT_THAT(r->set, ElementsAre("gpunode.io/keep"));
  EXPECT_THAT(r->ignored, ElementsAre("example.com/theirs"));
  EXPECT_TRUE(r->conflicts.empty()) << "the old merge patches' ownership moved to the apply: no conflict with ourselves";
  EXPECT_EQ(Labels(), (std::map<std::string, std::string>{{"example.com/theirs", "1"}, {"gpunode.io/keep", "2"}}));
  EXPECT_FALSE(Meta()["annotations"].contains(kManagedLabelsAnnotation));
  EXPECT_EQ(api_.Count("PATCH /api/v1/nodes/n1 "), 0);
  EXPECT_EQ(api_.Count("PATCH /api/v1/nodes/n1"), 2) << "one JSON patch (migration), one apply";
  // The kept key is gpunode's alone now: dropping it removes it.
  auto gone = RemoveNodeLabels(*client_, "n1");
  ASSERT_OK(gone);
  EXPECT_THAT(gone->removed, ElementsAre("gpunode.io/keep"));
  EXPECT_EQ(Labels(), (std::map<std::string, std::string>{{"example.com/theirs", "1"}}));
}

// A merge patch by "gpunode" on a Node without the annotation is not an earlier agent's label
// bookkeeping: an earlier agent's nvidia.com/mig.config.state, written that way, was removed by the
// next apply (CI saw the MIG state vanish). Such a key is another writer's and stays.
TEST_F(NodeApplyTest, AnUnannotatedMergePatchByGpunodeIsAnotherWritersAndStays) {
  api_.SetLabel("n1", "nvidia.com/mig.config.state", "success", "gpunode");
  auto r = ApplyNodeLabels(*client_, "n1", {{"nvidia.com/gpu.count", "8"}});
  ASSERT_OK(r) << r.status();
  EXPECT_TRUE(r->removed.empty());
  EXPECT_EQ(Labels()["nvidia.com/mig.config.state"], "success");
  auto gone = RemoveNodeLabels(*client_, "n1");
  ASSERT_OK(gone);
  EXPECT_THAT(gone->removed, ElementsAre("nvidia.com/gpu.count"));
  EXPECT_EQ(Labels(), (std::map<std::string, std::string>{{"nvidia.com/mig.config.state", "success"}}));
}

TEST_F(NodeApplyTest, AnUninstallRightAfterTheMigrationStillRemovesTheMigratedKeys) {
  api_.SetLabel("n1", "gpunode.io/agent.version", "old", "gpunode");
  api_.SetAnnotation("n1", kManagedLabelsAnnotation, "gpunode.io/agent.version", "gpunode");
  // The migration lands, the apply does not (refused): the key is already in gpunode's Apply entry.
  api_.On("PATCH", FakeApiServer::NodePath("n1"), {nullptr, FakeApiServer::ApiStatus(500, "InternalError", "etcd")});
  EXPECT_FALSE(ApplyNodeLabels(*client_, "n1", {{"gpunode.io/agent.version", "new"}}).ok());
  api_.On("PATCH", FakeApiServer::NodePath("n1"), {nullptr});
  EXPECT_TRUE(*CarriesGpunodeLabels(api_.Object(FakeApiServer::NodePath("n1")), "Node n1"));
  auto gone = RemoveNodeLabels(*client_, "n1");
  ASSERT_OK(gone);
  EXPECT_TRUE(Labels().empty());
  EXPECT_FALSE(*CarriesGpunodeLabels(api_.Object(FakeApiServer::NodePath("n1")), "Node n1"));
}

TEST_F(NodeApplyTest, TheConditionIsAppliedOnTheStatusSubresourceAndKeepsOthers) {
  api_.Change(FakeApiServer::NodePath("n1"), [](nlohmann::json& n) {
    n["status"]["conditions"] = {{{"type", "Ready"}, {"status", "True"}}};
  }, "kubelet");
  auto first = SetNodeCondition(*client_, "n1", {"GpuStackReady", "False", "DriverMismatch", "fix it"});
  ASSERT_OK(first);
  EXPECT_TRUE(*first);
  EXPECT_EQ(api_.Count("PATCH /api/v1/nodes/n1/status?fieldManager=gpunode&force=true"), 1);
  auto same = SetNodeCondition(*client_, "n1", {"GpuStackReady", "False", "DriverMismatch", "still"});
  ASSERT_OK(same);
  EXPECT_FALSE(*same);
  const nlohmann::json conds = api_.Object(FakeApiServer::NodePath("n1"))["status"]["conditions"];
  ASSERT_EQ(conds.size(), 2u);
  EXPECT_EQ(conds[0]["type"], "Ready");
  EXPECT_EQ(conds[1]["message"], "still");
}

// With the Node the caller already holds (the agent's watch): no GET; a Node that matches costs no
// request; a stale copy still ends right (the conflict reads the Node again).
TEST_F(NodeApplyTest, AKnownNodeSavesTheReadsAndAMatchingOneEveryRequest) {
  ASSERT_OK(ApplyNodeLabels(*client_, "n1", {{"gpunode.io/a", "1"}}));
  const int gets = api_.Count("GET /api/v1/nodes/n1"), patches = api_.Count("PATCH /api/v1/nodes/n1");
  nlohmann::json known = api_.Object(FakeApiServer::NodePath("n1"));
  auto same = ApplyNodeLabels(*client_, "n1", {{"gpunode.io/a", "1"}}, &known);
  ASSERT_OK(same);
  EXPECT_FALSE(same->patched);
  EXPECT_EQ(api_.Count("GET /api/v1/nodes/n1"), gets);
  EXPECT_EQ(api_.Count("PATCH /api/v1/nodes/n1"), patches);
  auto changed = ApplyNodeLabels(*client_, "n1", {{"gpunode.io/a", "2"}}, &known);
  ASSERT_OK(changed);
  EXPECT_THAT(changed->set, ElementsAre("gpunode.io/a"));
  EXPECT_EQ(api_.Count("GET /api/v1/nodes/n1"), gets) << "the known Node was read, not the server";
  EXPECT_EQ(Labels().at("gpunode.io/a"), "2");
  // A stale copy: an admin took the key meanwhile with another value; the apply conflicts, the
  // Node is read again and gpunode yields.
  api_.SetLabel("n1", "gpunode.io/b", "admin");
  auto stale = ApplyNodeLabels(*client_, "n1", {{"gpunode.io/a", "2"}, {"gpunode.io/b", "mine"}}, &known);
  ASSERT_OK(stale) << stale.status();
  EXPECT_THAT(stale->conflicts, ElementsAre(HasSubstr("gpunode.io/b")));
  EXPECT_EQ(Labels().at("gpunode.io/b"), "admin");

  // The condition: written when it differs, not while it is the same and its heartbeat fresh.
  ASSERT_OK(SetNodeCondition(*client_, "n1", {"GpuStackReady", "True", "AllChecksPassed", "ok"}));
  known = api_.Object(FakeApiServer::NodePath("n1"));
  const int status_writes = api_.Count("PATCH /api/v1/nodes/n1/status");
  auto unchanged = SetNodeCondition(*client_, "n1", {"GpuStackReady", "True", "AllChecksPassed", "ok"}, &known);
  ASSERT_OK(unchanged);
  EXPECT_FALSE(*unchanged);
  EXPECT_EQ(api_.Count("PATCH /api/v1/nodes/n1/status"), status_writes) << "the same verdict is not written again";
  auto beat = SetNodeCondition(*client_, "n1", {"GpuStackReady", "True", "AllChecksPassed", "ok"}, &known,
                               std::chrono::seconds(0));
  ASSERT_OK(beat);
  EXPECT_EQ(api_.Count("PATCH /api/v1/nodes/n1/status"), status_writes + 1) << "a stale heartbeat is refreshed";
  auto failed = SetNodeCondition(*client_, "n1", {"GpuStackReady", "False", "DriverMismatch", "fix"}, &known);
  ASSERT_OK(failed);
  EXPECT_TRUE(*failed) << "a transition";
  EXPECT_EQ(api_.Count("PATCH /api/v1/nodes/n1/status"), status_writes + 2);
  EXPECT_EQ(api_.Count("GET /api/v1/nodes/n1"), gets + 2) << "only the stale label apply read the Node (and its retry)";
}

TEST_F(NodeApplyTest, AMissingNodeIsNotFoundBeforeAnyWrite) {
  auto r = ApplyNodeLabels(*client_, "nope", {{"gpunode.io/a", "1"}});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::IsNotFound(r.status())) << r.status();
  EXPECT_EQ(api_.Count("PATCH"), 0);
}

}  // namespace
}  // namespace gpunode::kube
