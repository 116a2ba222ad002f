// Component and end-to-end tests of `gpunode fleet` against an API server stand-in: a real
// cpp-httplib server on 127.0.0.1 answering GET /api/v1/nodes from the recorded 200-node fleet
// (test/fixtures/fleet/nodes-200.json, written by scripts/gen-fleet-fixture.py), paginated as the
// API server does (limit, metadata.continue, remainingItemCount), behind a bearer token. The client
// is the real one (kubeconfig file -> kube::ResolveConnection -> kube::Client -> fleet::ListNodes),
// in-process and through the real binary (GPUNODE_BIN_DIR).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "src/fleet/fleet.h"
#include "src/fleet/render.h"
#include "src/kube/client.h"
#include "test/testing/fake_api_server.h"
#include "test/testing/run_gpunode.h"
#include "test/testing/temp_dir_test.h"
#include "test/testing/status_matchers.h"

namespace gpunode::fleet {
namespace {

using ::testing::HasSubstr;

std::string Fixture(const std::string& name) { return std::string(GPUNODE_SOURCE_DIR) + "/test/fixtures/fleet/" + name; }

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The Node list endpoint of an API server over a fixed NodeList, a route of the shared stand-in
// (test/testing/fake_api_server.h). Pages hold at most `page_cap` items whatever the limit (the
// API server may return fewer than asked), so the 200 nodes come in two.
class NodeListApi {
 public:
  explicit NodeListApi(const std::string& nodelist_path, size_t page_cap = 100) : page_cap_(page_cap) {
    list_ = nlohmann::json::parse(ReadAll(nodelist_path));
    api_.On("GET", "/api/v1/nodes", {[this](const httplib::Request& req, httplib::Response& res, const std::atomic<bool>&) {
              Serve(req, res);
            }});
  }
  int port() const { return api_.port(); }
  std::vector<std::string> requests() {
    std::vector<std::string> out;
    for (const std::string& r : api_.Requests()) out.push_back(r.substr(r.find(' ') + 1));
    return out;
  }
  ::gpunode::testing::FakeApiServer& api() { return api_; }
  std::atomic<bool> repeat_token{false};
  std::atomic<bool> forbid{false};

 private:
  void Serve(const httplib::Request& req, httplib::Response& res) {
    if (req.get_header_value("Authorization") != "Bearer fleet-test-token") {
      res.status = 401;
      res.set_content(R"({"kind":"Status","apiVersion":"v1","status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401})",
                      "application/json");
      return;
    }
    if (forbid) {
      res.status = 403;
      res.set_content(
          R"({"kind":"Status","apiVersion":"v1","status":"Failure","message":"nodes is forbidden: User \"system:serviceaccount:gpunode:fleet\" cannot list resource \"nodes\" in API group \"\" at the cluster scope","reason":"Forbidden","code":403})",
          "application/json");
      return;
    }
    size_t limit = req.has_param("limit") ? std::stoul(req.get_param_value("limit")) : 0;
    size_t start = 0;
    if (req.has_param("continue")) {
      if (req.has_param("resourceVersion")) {
        res.status = 400;
        res.set_content(R"({"kind":"Status","message":"specifying resource version is not allowed when using continue","code":400})", "application/json");
        return;
      }
      const std::string token = req.get_param_value("continue");
      if (token.rfind("page-from-", 0) != 0) {
        res.status = 400;
        res.set_content(R"({"kind":"Status","message":"invalid continue token"})", "application/json");
        return;
      }
      start = std::stoul(token.substr(10));
    }
    const auto& items = list_["items"];
    size_t n = limit == 0 ? items.size() : std::min(limit, page_cap_);
    const size_t end = std::min(items.size(), start + n);
    // In the API server's order: metadata before items.
    nlohmann::ordered_json page = {{"kind", "NodeList"}, {"apiVersion", "v1"},
                                   {"metadata", {{"resourceVersion", "4999999"}}}, {"items", nlohmann::ordered_json::array()}};
    for (size_t i = start; i < end; ++i) page["items"].push_back(nlohmann::ordered_json(items[i]));
    if (end < items.size()) {
      page["metadata"]["continue"] = repeat_token ? "page-from-0" : "page-from-" + std::to_string(end);
      page["metadata"]["remainingItemCount"] = items.size() - end;
    }
    res.set_content(page.dump(), "application/json");
  }

  nlohmann::json list_;
  size_t page_cap_;
  ::gpunode::testing::FakeApiServer api_;
};

class FleetApiTest : public ::gpunode::testing::TempDirTest {
 protected:
  std::string Kubeconfig(int port, const std::string& token = "fleet-test-token") {
    const std::string path = Path("kubeconfig");
    std::ofstream(path) << "apiVersion: v1\nkind: Config\ncurrent-context: fleet\nclusters:\n- name: c\n"
                        << "  cluster: {server: \"http://127.0.0.1:" << port << "\"}\ncontexts:\n- name: fleet\n"
                        << "  context: {cluster: c, user: u}\nusers:\n- name: u\n  user: {token: " << token << "}\n";
    return path;
  }
};

TEST_F(FleetApiTest, ListsTwoHundredNodesInTwoPagesThroughTheRealClient) {
  NodeListApi api(Fixture("nodes-200.json"));
  auto conn = kube::ResolveConnection(Kubeconfig(api.port()));
  ASSERT_OK(conn) << conn.status();
  kube::Client client(*conn);
  auto nodes = ListNodes(client);
  ASSERT_OK(nodes) << nodes.status();
  EXPECT_EQ(nodes->size(), 200u);
  const std::vector<std::string> reqs = api.requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[0], "/api/v1/nodes?limit=500&resourceVersion=0") << "the first page from the watch cache";
  EXPECT_EQ(reqs[1], "/api/v1/nodes?limit=500&continue=page-from-100");

  FleetReport r = Analyze(std::move(*nodes), "api");
  // The same answer as the file read in one piece.
  auto from_file = ParseNodeListText(ReadAll(Fixture("nodes-200.json")), "file");
  ASSERT_OK(from_file);
  FleetReport f = Analyze(std::move(*from_file), "api");
  EXPECT_EQ(ToJson(r).dump(), ToJson(f).dump());
  EXPECT_EQ(r.summary.nodes, 200);
  EXPECT_EQ(r.summary.gpu_nodes, 192);
  EXPECT_EQ(r.summary.cpu_nodes, 8);
  EXPECT_EQ(r.pools.size(), 8u);
  EXPECT_GE(r.summary.errors, 10);
}

TEST_F(FleetApiTest, SmallPagesAndAServerThatRepeatsItsToken) {
  NodeListApi api(Fixture("nodes-200.json"), 30);
  auto conn = kube::ResolveConnection(Kubeconfig(api.port()));
  ASSERT_OK(conn);
  kube::Client client(*conn);
  ListNodesOptions o;
  o.limit = 30;
  auto list = ListNodes(client, o);
  ASSERT_OK(list) << list.status();
  EXPECT_EQ(list->size(), 200u);
  EXPECT_EQ(api.requests().size(), 7u);

  api.repeat_token = true;
  auto looping = ListNodes(client, o);
  ASSERT_FALSE(looping.ok());
  EXPECT_EQ(looping.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(looping.status().message(), HasSubstr("repeated continue token"));
}

TEST_F(FleetApiTest, RefusalsNameTheRequestAndTheReason) {
  NodeListApi api(Fixture("nodes-200.json"));
  {
    auto conn = kube::ResolveConnection(Kubeconfig(api.port(), "wrong"));
    ASSERT_OK(conn);
    kube::Client client(*conn);
    auto list = ListNodes(client);
    ASSERT_FALSE(list.ok());
    EXPECT_EQ(list.status().code(), absl::StatusCode::kUnauthenticated);
    EXPECT_THAT(list.status().message(), HasSubstr("GET /api/v1/nodes?limit=500&resourceVersion=0: HTTP 401"));
  }
  api.forbid = true;
  auto conn = kube::ResolveConnection(Kubeconfig(api.port()));
  ASSERT_OK(conn);
  kube::Client client(*conn);
  auto list = ListNodes(client);
  ASSERT_FALSE(list.ok());
  EXPECT_EQ(list.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(list.status().message(), HasSubstr("cannot list resource"));
}

// ---- the real binary ----

using ::gpunode::testing::Result;
using ::gpunode::testing::RunGpunode;
using ::gpunode::testing::RunShell;

std::string Bin() { return std::string(GPUNODE_BIN_DIR) + "/gpunode"; }

TEST_F(FleetApiTest, CliAgainstTheLiveEndpointPrintsTheFleet) {
  NodeListApi api(Fixture("nodes-200.json"));
  Result r = RunShell(Bin() + " fleet --kubeconfig " + Kubeconfig(api.port()) + " -o json > " + Path("out.json"));
  EXPECT_EQ(r.exit_code, 1) << r.out;  // the fixture has nodes below capacity
  auto doc = nlohmann::json::parse(Read("out.json"), nullptr, false);
  ASSERT_FALSE(doc.is_discarded()) << Read("out.json");
  EXPECT_EQ(doc["kind"], "FleetReport");
  EXPECT_EQ(doc["summary"]["nodes"], 200);
  EXPECT_THAT(doc["source"].get<std::string>(), HasSubstr("http://127.0.0.1:"));
  const std::vector<std::string> reqs = api.requests();
  EXPECT_EQ(std::count_if(reqs.begin(), reqs.end(), [](const std::string& q) { return q.rfind("/api/v1/nodes", 0) == 0; }), 2);
  // This server has no resource.k8s.io: v1, v1beta2 and v1beta1 are asked, then a note.
  EXPECT_THAT(reqs, ::testing::Contains("/apis/resource.k8s.io/v1beta1/resourceslices?limit=500&resourceVersion=0"));
  ASSERT_EQ(doc["notes"].size(), 1u) << doc["notes"];
  EXPECT_THAT(doc["notes"][0].get<std::string>(), HasSubstr("serves no ResourceSlices"));
  EXPECT_TRUE(doc["resourceSlices"].is_null());

  api.forbid = true;
  Result denied = RunGpunode("fleet --kubeconfig " + Kubeconfig(api.port()));
  EXPECT_EQ(denied.exit_code, 2) << denied.out;
  EXPECT_THAT(denied.out, HasSubstr("list nodes: GET /api/v1/nodes?limit=500&resourceVersion=0: HTTP 403"));
}

TEST_F(FleetApiTest, CliFromFileTableJsonAndHtml) {
  const std::string small = Fixture("nodes-small.json");
  Result table = RunGpunode("fleet --from " + small + " --nodes --color never");
  EXPECT_EQ(table.exit_code, 1) << table.out;
  EXPECT_THAT(table.out, HasSubstr("fleet: 8 nodes (7 with GPUs, 1 without)"));
  EXPECT_THAT(table.out, HasSubstr("h100-80gb-hbm3-580.95.05"));
  EXPECT_THAT(table.out, HasSubstr("error below-capacity h100-c: allocatable nvidia.com/gpu 0 of 8 GPUs: validation-failing"));

  Result json = RunShell(Bin() + " fleet --from - -o json < " + small + " > " + Path("small.json"));
  EXPECT_EQ(json.exit_code, 1) << json.out;
  auto doc = nlohmann::json::parse(Read("small.json"), nullptr, false);
  ASSERT_FALSE(doc.is_discarded());
  EXPECT_EQ(doc["apiVersion"], "gpunode/v1");
  EXPECT_EQ(doc["summary"]["findings"]["error"], 6);

  Result yaml = RunGpunode("fleet --from " + small + " -o yaml");
  EXPECT_THAT(yaml.out, HasSubstr("kind: \"FleetReport\""));

  Result html = RunGpunode("fleet --from " + Fixture("nodes-200.json") + " --html " + Path("fleet.html") + " -o json > /dev/null");
  EXPECT_EQ(html.exit_code, 1) << html.out;
  const std::string page = Read("fleet.html");
  EXPECT_THAT(page, HasSubstr("<!DOCTYPE html>"));
  EXPECT_THAT(page, HasSubstr("gpu-h100-048"));
  EXPECT_THAT(page, ::testing::Not(HasSubstr("src=")));
  EXPECT_THAT(page, ::testing::Not(HasSubstr("<link")));
}

TEST_F(FleetApiTest, CliCompatAndDrainPlan) {
  const std::string small = Fixture("nodes-small.json");
  Result c = RunGpunode("fleet compat --image-source data --image nvidia/cuda:13.0.2-base-ubuntu24.04 --from " + small);
  EXPECT_EQ(c.exit_code, 1) << c.out;
  EXPECT_THAT(c.out, HasSubstr("tesla-v100-sxm2-16gb-535.261.03: incompatible"));
  EXPECT_THAT(c.out, HasSubstr("3 of 4 pools (6 of 7 GPU nodes) can run it"));

  Result ok = RunGpunode("fleet compat --image-source data --image pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime --from " + small + " -o json");
  EXPECT_EQ(ok.exit_code, 0) << ok.out;
  EXPECT_THAT(ok.out, HasSubstr("\"kind\": \"FleetCompat\""));

  Result bad_image = RunGpunode("fleet compat --image 'Not An Image' --from " + small);
  EXPECT_EQ(bad_image.exit_code, 3) << bad_image.out;
  EXPECT_THAT(bad_image.out, HasSubstr("error: --image"));

  Result plan = RunGpunode("fleet drain-plan --to-driver 580.95.05 --max-unavailable 2 --from " + small);
  EXPECT_EQ(plan.exit_code, 0) << plan.out;
  EXPECT_THAT(plan.out, HasSubstr("wave 1: nodes already unavailable"));
  EXPECT_THAT(plan.out, HasSubstr("gpunode fleet controller carries out in this order"));

  Result plan_json = RunGpunode("fleet drain-plan --to-driver 580.95.05 --max-unavailable 10% --from " +
                                Fixture("nodes-200.json") + " -o json");
  EXPECT_EQ(plan_json.exit_code, 0) << plan_json.out.substr(0, 2000);
  EXPECT_THAT(plan_json.out, HasSubstr("\"kind\": \"FleetDrainPlan\""));

  Result bad_driver = RunGpunode("fleet drain-plan --to-driver latest --max-unavailable 2 --from " + small);
  EXPECT_EQ(bad_driver.exit_code, 3);
  EXPECT_THAT(bad_driver.out, HasSubstr("--to-driver"));
  Result bad_n = RunGpunode("fleet drain-plan --to-driver 580.95.05 --max-unavailable 0 --from " + small);
  EXPECT_EQ(bad_n.exit_code, 3);
  EXPECT_THAT(bad_n.out, HasSubstr("--max-unavailable \"0\""));
}

TEST_F(FleetApiTest, CliBadInputIsAClearUsageError) {
  std::ofstream(Path("broken.json")) << "{\"kind\":\"NodeList\",\"items\":[{";
  Result broken = RunGpunode("fleet --from " + Path("broken.json"));
  EXPECT_EQ(broken.exit_code, 3) << broken.out;
  EXPECT_THAT(broken.out, HasSubstr("broken.json: line 1, column 30: not valid JSON"));
  Result missing = RunGpunode("fleet --from " + Path("nope.json"));
  EXPECT_EQ(missing.exit_code, 3) << missing.out;
  EXPECT_THAT(missing.out, HasSubstr("nope.json"));
  Result both = RunGpunode("fleet --from x --kubeconfig y");
  EXPECT_EQ(both.exit_code, 3);
  EXPECT_THAT(both.out, HasSubstr("exclude each other"));
  Result format = RunGpunode("fleet --from " + Fixture("nodes-small.json") + " -o xml");
  EXPECT_EQ(format.exit_code, 3);
}

}  // namespace
}  // namespace gpunode::fleet
