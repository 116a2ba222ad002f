// `gpunode fleet` and `gpunode k8s uninstall` (the cluster-wide commands) against a hostile or
// broken API server (test/testing/fake_api_server.h) and hostile Node contents: terminal escape
// sequences in condition messages and labels, wrong-typed fields, an answer over the body cap, a
// managed-labels annotation that lists labels gpunode must not touch. In-process and through the
// real binary.
#include <atomic>
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "src/fleet/fleet.h"
#include "src/fleet/render.h"
#include "src/kube/client.h"
#include "src/kube/node.h"
#include "test/testing/fake_api_server.h"
#include "test/testing/run_gpunode.h"
#include "test/testing/status_matchers.h"
#include "test/testing/temp_dir_test.h"

namespace gpunode::fleet {
namespace {

using ::gpunode::testing::FakeApiServer;
using ::gpunode::testing::Result;
using ::gpunode::testing::RunGpunode;
using ::testing::HasSubstr;
using ::testing::Not;

// A GPU node whose condition and labels carry escape sequences: clear screen, set the title,
// write the clipboard (OSC 52), an 8-bit CSI.
const char kHostileNodes[] = R"({"kind":"NodeList","items":[{
  "metadata":{"name":"gpu-1\u001b[2J","labels":{
    "nvidia.com/gpu.product":"NVIDIA-H100\u001b]0;pwned\u0007","nvidia.com/gpu.count":"8",
    "nvidia.com/gpu.present":"true","gpunode.io/agent.version":"0.9\u001b]52;c;ZWNobyBvd25lZA==\u0007"}},
  "status":{"capacity":{"nvidia.com/gpu":"8"},"allocatable":{"nvidia.com/gpu":"0"},
    "conditions":[{"type":"Ready","status":"True"},
      {"type":"GpuStackReady","status":"False","reason":"Bad\u009b2J","message":"reboot\u001b[1;1H\u001b[2Kall is fine"}]}}]})";

TEST(FleetHostile, TerminalEscapesFromTheClusterAreShownNotSent) {
  auto nodes = ParseNodeListText(kHostileNodes, "hostile.json");
  ASSERT_OK(nodes) << nodes.status();
  const FleetReport r = Analyze(std::move(*nodes), "hostile.json");
  for (bool color : {false, true}) {
    const std::string text = RenderText(r, /*list_nodes=*/true, color);
    EXPECT_THAT(text, Not(HasSubstr("\x1b[2J")));
    EXPECT_THAT(text, Not(HasSubstr("\x1b]")));
    EXPECT_THAT(text, Not(HasSubstr("\x07")));
    EXPECT_THAT(text, Not(HasSubstr("\xc2\x9b")));
    EXPECT_THAT(text, Not(HasSubstr("\x1b[1;1H")));
    EXPECT_THAT(text, HasSubstr("gpu-1\\x1b[2J"));
    EXPECT_THAT(text, HasSubstr("reboot\\x1b[1;1H\\x1b[2Kall is fine"));
    if (!color) {
      EXPECT_EQ(text.find('\x1b'), std::string::npos) << text;
    }
  }
  // JSON keeps the data as it is (its encoder escapes control characters).
  EXPECT_EQ(ToJson(r)["nodes"][0]["name"], "gpu-1\x1b[2J");
}

TEST(FleetHostile, WrongTypedNodesAreErrorsNamingTheField) {
  auto bad_labels = ParseNodeListText(R"({"items":[{"metadata":{"name":"a","labels":"x=y"}}]})", "f.json");
  ASSERT_FALSE(bad_labels.ok());
  EXPECT_THAT(bad_labels.status().message(), HasSubstr("f.json: items[0]: metadata.labels: expected an object, got string"));
  auto bad_metadata = ParseNodeListText(R"({"items":[{"metadata":"a"}]})", "f.json");
  EXPECT_THAT(bad_metadata.status().message(), HasSubstr("items[0]: metadata: expected an object, got string"));
  auto bad_condition = ParseNodeListText(R"({"items":[{"metadata":{"name":"a"},"status":{"conditions":[{"type":"Ready","status":true}]}}]})", "f.json");
  EXPECT_THAT(bad_condition.status().message(), HasSubstr("items[0]: status.conditions[0].status: expected a string, got boolean"));
  auto bad_spec = ParseNodeListText(R"({"items":[{"metadata":{"name":"a"},"spec":{"unschedulable":"yes"}}]})", "f.json");
  EXPECT_THAT(bad_spec.status().message(), HasSubstr("items[0]: spec.unschedulable: expected true or false, got string"));
  auto bad_kind = ParseNodeListText(R"({"kind":7,"items":[]})", "f.json");
  EXPECT_THAT(bad_kind.status().message(), HasSubstr("f.json: kind: expected a string, got number"));
}

kube::Connection To(const FakeApiServer& api) {
  kube::Connection c;
  EXPECT_TRUE(kube::ParseServer(api.url(), &c).ok());
  return c;
}

TEST(FleetHostile, ListNodesNamesAWrongTypedItem) {
  FakeApiServer api;
  api.On("GET", "/api/v1/nodes",
         {FakeApiServer::Json(200, {{"items", {{{"metadata", {{"name", "a"}}}}, {{"metadata", "b"}}}}})});
  kube::Client client(To(api));
  auto nodes = ListNodes(client);
  ASSERT_FALSE(nodes.ok());
  EXPECT_THAT(nodes.status().message(), HasSubstr("GET /api/v1/nodes: items[1]: metadata: expected an object, got string"));
}

TEST(FleetHostile, AnAnswerFromTheCacheOverTheCapIsPagedThroughInstead) {
  FakeApiServer api;
  nlohmann::json page = {{"kind", "NodeList"}, {"metadata", {{"resourceVersion", "9"}}},
                         {"items", {{{"metadata", {{"name", "a"}}}}, {{"metadata", {{"name", "b"}}}}}}};
  // An API server before 1.33 ignores limit with resourceVersion=0: everything at once.
  api.On("GET", "/api/v1/nodes", {FakeApiServer::HugeBody(2 << 20), FakeApiServer::Json(200, page)});
  kube::ClientOptions o;
  o.max_body_bytes = 1 << 20;
  kube::Client client(To(api), o);
  auto nodes = ListNodes(client);
  ASSERT_OK(nodes) << nodes.status();
  EXPECT_EQ(nodes->size(), 2u);
  EXPECT_EQ(api.Requests(), (std::vector<std::string>{"GET /api/v1/nodes?limit=500&resourceVersion=0",
                                                      "GET /api/v1/nodes?limit=500"}));
}

class FleetHostileCli : public ::gpunode::testing::TempDirTest {
 protected:
  std::string Kubeconfig(const FakeApiServer& api) {
    const std::string path = Path("kubeconfig");
    std::ofstream(path) << "apiVersion: v1\nkind: Config\ncurrent-context: x\nclusters:\n- name: c\n"
                        << "  cluster: {server: \"" << api.url() << "\"}\ncontexts:\n- name: x\n"
                        << "  context: {cluster: c, user: u}\nusers:\n- name: u\n  user: {token: t}\n";
    return path;
  }
};

TEST_F(FleetHostileCli, FleetRefusesAnAnswerOverTheBodyCap) {
  FakeApiServer api;
  api.On("GET", "/api/v1/nodes", {FakeApiServer::HugeBody(size_t{70} << 20)});
  Result r = RunGpunode("fleet --kubeconfig " + Kubeconfig(api));
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("list nodes: GET /api/v1/nodes?limit=500: the answer is larger than 64 MiB"));
}

TEST_F(FleetHostileCli, AnErrorMessageFromTheServerIsPrintedSafely) {
  FakeApiServer api;
  api.On("GET", "/api/v1/nodes", {FakeApiServer::ApiStatus(403, "Forbidden\x1b[2J", "nodes is forbidden\x1b]0;pwned\x07")});
  Result r = RunGpunode("fleet --kubeconfig " + Kubeconfig(api));
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos) << r.out;
  EXPECT_THAT(r.out, HasSubstr("HTTP 403: nodes is forbidden\\x1b]0;pwned\\x07"));
}

TEST_F(FleetHostileCli, FleetPrintsEscapesOfASavedNodeListSafely) {
  std::ofstream(Path("nodes.json")) << kHostileNodes;
  Result r = RunGpunode("fleet --nodes --color never --from " + Path("nodes.json"));
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos) << r.out;
  EXPECT_THAT(r.out, HasSubstr("gpu-1\\x1b[2J"));
}

TEST_F(FleetHostileCli, UninstallSurvivesMalformedNodesAndRemovesOnlyGpunodesLabels) {
  FakeApiServer api;
  const nlohmann::json n1 = {
      {"metadata",
       {{"name", "n1"},
        {"labels", {{"node-restriction.kubernetes.io/isolated", "true"}, {"nvidia.com/gpu.present", "true"}}},
        {"annotations", {{kube::kManagedLabelsAnnotation, "node-restriction.kubernetes.io/isolated,nvidia.com/gpu.present"}}}}}};
  api.PutObject("/api/v1/nodes/n1", n1);
  api.On("GET", "/api/v1/nodes",
         {FakeApiServer::Json(200, {{"kind", "NodeList"},
                                       {"items", {{{"kind", "Node"}}, {{"metadata", "broken"}}, n1}}})});
  Result r = RunGpunode("k8s uninstall --daemonset gpunode/gpunode --kubeconfig " + Kubeconfig(api));
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("DaemonSet gpunode/gpunode: not there"));
  EXPECT_THAT(r.out, HasSubstr("GET /api/v1/nodes: items[1]: metadata: expected an object, got string"));
  EXPECT_THAT(r.out, HasSubstr("Node n1: removed 1 gpunode labels"));
  EXPECT_THAT(r.out, HasSubstr("not gpunode's to remove"));
  EXPECT_THAT(r.out, HasSubstr("node-restriction.kubernetes.io/isolated"));
  const nlohmann::json labels = api.Object("/api/v1/nodes/n1")["metadata"]["labels"];
  EXPECT_EQ(labels.value("node-restriction.kubernetes.io/isolated", ""), "true");
  EXPECT_FALSE(labels.contains("nvidia.com/gpu.present"));
}

}  // namespace
}  // namespace gpunode::fleet
