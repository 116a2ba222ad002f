// gpunode fleet and DRA: the ResourceSlices of each node's GPU driver counted per node (GPUs, MIG
// devices, taints), the dra-below-capacity finding, the table and JSON, from a saved List and from
// the API server stand-in (test/testing/fake_api_server.h) through the real client: paged,
// resource.k8s.io v1 -> v1beta2 -> v1beta1 on 404, 403 a note; and the real binary once.
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "src/fleet/fleet.h"
#include "src/fleet/render.h"
#include "src/kube/client.h"
#include "test/testing/fake_api_server.h"
#include "test/testing/run_gpunode.h"
#include "test/testing/status_matchers.h"
#include "test/testing/temp_dir_test.h"

namespace gpunode::fleet {
namespace {

using json = nlohmann::json;
using ::gpunode::testing::FakeApiServer;
using ::testing::HasSubstr;
using ::testing::Not;

json Node(const std::string& name, json labels, json allocatable = json::object()) {
  return {{"kind", "Node"},
          {"metadata", {{"name", name}, {"labels", std::move(labels)}}},
          {"status",
           {{"capacity", allocatable},
            {"allocatable", allocatable},
            {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
}

json DraNodeLabels(int gpus) {
  return {{"nvidia.com/gpu.count", std::to_string(gpus)},
          {"nvidia.com/gpu.product", "NVIDIA-H200"},
          {"gpunode.io/agent.version", "0.9.0"},
          {"gpunode.io/dra.driver", "gpu.nvidia.com"}};
}

// A device as resource.k8s.io v1 writes it; `basic` wraps it as v1beta1 does.
json Device(const std::string& name, const std::string& type, json taints = json(), bool basic = false) {
  json body = {{"attributes", {{"type", {{"string", type}}}, {"uuid", {{"string", "GPU-" + name}}}}},
               {"capacity", {{"memory", {{"value", "143771Mi"}}}}}};
  if (!taints.is_null()) body["taints"] = std::move(taints);
  if (basic) return {{"name", name}, {"basic", std::move(body)}};
  body["name"] = name;
  return body;
}

json Taint(const std::string& key, const std::string& value, const std::string& effect = "NoSchedule") {
  json t = {{"key", key}, {"effect", effect}, {"timeAdded", "2026-12-01T10:00:00Z"}};
  if (!value.empty()) t["value"] = value;
  return json::array({t});
}

json Slice(const std::string& name, const std::string& node, int64_t generation, json devices,
           const std::string& driver = "gpu.nvidia.com") {
  return {{"kind", "ResourceSlice"},
          {"apiVersion", "resource.k8s.io/v1"},
          {"metadata", {{"name", name}}},
          {"spec",
           {{"driver", driver},
            {"nodeName", node},
            {"pool", {{"name", node}, {"generation", generation}, {"resourceSliceCount", 2}}},
            {"devices", std::move(devices)}}}};
}

// Eight GPUs of node `node`, in two slices of generation `generation`; `taint(i)` taints gpu-i.
std::vector<json> EightGpus(const std::string& node, int64_t generation,
                            const std::function<json(int)>& taint = [](int) { return json(); }) {
  json a = json::array(), b = json::array();
  for (int i = 0; i < 8; ++i) (i < 4 ? a : b).push_back(Device("gpu-" + std::to_string(i), "gpu", taint(i)));
  return {Slice(node + "-gpu.nvidia.com-" + std::to_string(generation) + "-0", node, generation, a),
          Slice(node + "-gpu.nvidia.com-" + std::to_string(generation) + "-1", node, generation, b)};
}

// The cluster of these tests: a DRA node with a lost GPU and an XID (and the stale slices of the
// pool's previous generation, untainted), a healthy DRA node (plus another driver's slice), an
// A100 node in MIG mode published as MIG devices through v1beta1's `basic`, a DRA node without
// slices, a device-plugin node.
json Cluster() {
  json items = json::array();
  items.push_back(Node("dra-a", DraNodeLabels(8)));
  items.push_back(Node("dra-ok", DraNodeLabels(8)));
  json mig = DraNodeLabels(2);
  mig["nvidia.com/gpu.product"] = "NVIDIA-A100-SXM4-40GB";
  items.push_back(Node("dra-mig", mig));
  items.push_back(Node("dra-none", DraNodeLabels(4)));
  json plugin = DraNodeLabels(8);
  plugin.erase("gpunode.io/dra.driver");
  items.push_back(Node("plugin", plugin, {{"nvidia.com/gpu", "8"}}));
  for (json& s : EightGpus("dra-a", 1)) items.push_back(s);
  for (json& s : EightGpus("dra-a", 2, [](int i) {
         if (i == 3) return Taint("gpu.nvidia.com/gpu-lost", "");
         if (i == 5) return Taint("gpu.nvidia.com/xid", "79");
         if (i == 6) return Taint("example.com/info", "", "None");  // informational: not counted
         return json();
       })) {
    items.push_back(s);
  }
  for (json& s : EightGpus("dra-ok", 4)) items.push_back(s);
  items.push_back(Slice("dra-ok-nic", "dra-ok", 1, json::array({Device("gpu-0", "gpu", Taint("x", "y"))}),
                        "nic.example.com"));
  items.push_back(Slice("dra-mig-gpu.nvidia.com-0", "dra-mig", 1,
                        json::array({Device("gpu-0-mig-1g5gb-19-0", "mig", json(), true),
                                     Device("gpu-0-mig-3g20gb-9-4", "mig", json(), true),
                                     Device("gpu-1-mig-7g40gb-0-0", "mig", json(), true)})));
  return {{"kind", "List"}, {"apiVersion", "v1"}, {"items", items}};
}

std::vector<const Finding*> Find(const FleetReport& r, const std::string& id, const std::string& subject) {
  std::vector<const Finding*> out;
  for (const Finding& f : r.findings) {
    if (f.id == id && f.subject == subject) out.push_back(&f);
  }
  return out;
}

const FleetNode& NodeOf(const FleetReport& r, const std::string& name) {
  for (const FleetNode& n : r.nodes) {
    if (n.name == name) return n;
  }
  ADD_FAILURE() << "no node " << name;
  return r.nodes.front();
}

// Checks the report of Cluster(), whichever way it was read.
void ExpectClusterReport(const FleetReport& r) {
  const NodeDra& a = NodeOf(r, "dra-a").dra;
  EXPECT_TRUE(a.listed);
  EXPECT_EQ(a.driver, "gpu.nvidia.com");
  EXPECT_EQ(a.slices, 2);  // generation 2 only
  EXPECT_EQ(a.gpus, 8);
  EXPECT_EQ(a.gpus_published, 8);
  EXPECT_EQ(a.gpus_allocatable, 6);
  EXPECT_EQ(a.tainted_devices, 2);
  auto below = Find(r, "dra-below-capacity", "dra-a");
  ASSERT_EQ(below.size(), 1u);
  EXPECT_EQ(below[0]->severity, Severity::kError);
  EXPECT_EQ(below[0]->message,
            "DRA (gpu.nvidia.com) can allocate 6 of 8 GPUs: devices-tainted (2 device(s) tainted: gpu-3: "
            "gpu.nvidia.com/gpu-lost (NoSchedule), gpu-5: gpu.nvidia.com/xid=79 (NoSchedule))");
  ASSERT_EQ(below[0]->causes.size(), 1u);
  EXPECT_EQ(below[0]->causes[0].id, "devices-tainted");
  EXPECT_TRUE(Find(r, "below-capacity", "dra-a").empty());  // DRA alone: not the device plugin's finding

  const NodeDra& ok = NodeOf(r, "dra-ok").dra;
  EXPECT_EQ(ok.gpus_allocatable, 8);
  EXPECT_EQ(ok.tainted_devices, 0);  // the NIC driver's tainted device is not ours
  EXPECT_TRUE(Find(r, "dra-below-capacity", "dra-ok").empty());

  const NodeDra& mig = NodeOf(r, "dra-mig").dra;
  EXPECT_EQ(mig.gpus, 0);
  EXPECT_EQ(mig.mig_devices, 3);
  EXPECT_EQ(mig.gpus_published, 2);  // gpu-0 and gpu-1 behind their MIG devices
  EXPECT_EQ(mig.gpus_allocatable, 2);
  EXPECT_TRUE(Find(r, "dra-below-capacity", "dra-mig").empty());

  auto none = Find(r, "dra-below-capacity", "dra-none");
  ASSERT_EQ(none.size(), 1u);
  EXPECT_EQ(none[0]->causes[0].id, "no-resource-slices");
  EXPECT_THAT(none[0]->message, HasSubstr("can allocate 0 of 4 GPUs"));
  EXPECT_THAT(none[0]->action, HasSubstr("dra component"));

  EXPECT_FALSE(NodeOf(r, "plugin").ServedThroughDra());
  EXPECT_TRUE(Find(r, "dra-below-capacity", "plugin").empty());
  EXPECT_EQ(r.summary.dra_nodes, 4);
  EXPECT_EQ(r.summary.dra_allocatable, 16);
}

TEST(FleetDra, CountsTheGpuDriversSlicesPerNodeFromASavedList) {
  auto nodes = ParseNodeListText(Cluster().dump(), "cluster.json");
  ASSERT_OK(nodes) << nodes.status();
  FleetReport r = Analyze(std::move(*nodes), "cluster.json");
  ExpectClusterReport(r);

  // JSON: the node's counts and taints, the summary and pools.
  const nlohmann::ordered_json j = ToJson(r);
  EXPECT_EQ(j["summary"]["draNodes"], 4);
  EXPECT_EQ(j["summary"]["draAllocatable"], 16);
  for (const auto& n : j["nodes"]) {
    if (n["name"] == "dra-a") {
      EXPECT_EQ(n["dra"]["allocatableGpus"], 6);
      EXPECT_EQ(n["dra"]["gpusPublished"], 8);
      EXPECT_EQ(n["dra"]["taintedDevices"], 2);
      ASSERT_EQ(n["dra"]["taints"].size(), 2u);
      EXPECT_EQ(n["dra"]["taints"][1]["device"], "gpu-5");
      EXPECT_EQ(n["dra"]["taints"][1]["key"], "gpu.nvidia.com/xid");
      EXPECT_EQ(n["dra"]["taints"][1]["value"], "79");
    }
    if (n["name"] == "plugin") {
      EXPECT_TRUE(n["dra"].is_null());
    }
  }
  // The table: DRA allocatable / GPUs and the tainted devices per node.
  const std::string text = RenderText(r, /*list_nodes=*/true, /*color=*/false);
  EXPECT_THAT(text, HasSubstr(", 16 through DRA (4 nodes)"));
  EXPECT_THAT(text, ::testing::ContainsRegex("dra-a +h200-unknown-driver +True +no +8 +0 +6/8 +2 "));
  EXPECT_THAT(text, HasSubstr("error dra-below-capacity dra-a: DRA (gpu.nvidia.com) can allocate 6 of 8 GPUs"));
  EXPECT_THAT(RenderHtml(r), HasSubstr("gpu-3 gpu.nvidia.com/gpu-lost, gpu-5 gpu.nvidia.com/xid"));
}

TEST(FleetDra, WithoutSlicesInTheFileNothingIsCounted) {
  json list = Cluster();
  json only_nodes = json::array();
  for (const json& item : list["items"]) {
    if (item["kind"] == "Node") only_nodes.push_back(item);
  }
  list["items"] = only_nodes;
  auto nodes = ParseNodeListText(list.dump(), "nodes.json");
  ASSERT_OK(nodes);
  FleetReport r = Analyze(std::move(*nodes), "nodes.json");
  EXPECT_FALSE(NodeOf(r, "dra-a").dra.listed);
  EXPECT_TRUE(Find(r, "dra-below-capacity", "dra-none").empty());  // not read: no verdict
  EXPECT_TRUE(Find(r, "below-capacity", "dra-none").empty());
}

TEST(FleetDra, HostileSlicesAreNamedOrBounded) {
  // Another kind in the List is refused, naming the item.
  json list = Cluster();
  list["items"].push_back({{"kind", "Pod"}, {"metadata", {{"name", "p"}}}});
  auto pod = ParseNodeListText(list.dump(), "c.json");
  ASSERT_FALSE(pod.ok());
  EXPECT_THAT(pod.status().message(), HasSubstr("is a Pod, not a Node, a ResourceSlice or an NVIDIADriver"));

  // A field of the wrong type: the object and the field are named.
  list = Cluster();
  json bad = Slice("broken", "dra-ok", 9, json::array());
  bad["spec"]["devices"] = "all of them";
  list["items"].push_back(bad);
  auto typed = ParseNodeListText(list.dump(), "c.json");
  ASSERT_FALSE(typed.ok());
  EXPECT_THAT(typed.status().message(), HasSubstr("(ResourceSlice \"broken\"): spec.devices: expected an array, got string"));
  bad["spec"]["devices"] = json::array({Device("gpu-0", "gpu")});
  bad["spec"]["devices"][0]["taints"] = json::array({{{"key", 7}}});
  list["items"].back() = bad;
  typed = ParseNodeListText(list.dump(), "c.json");
  ASSERT_FALSE(typed.ok());
  EXPECT_THAT(typed.status().message(), HasSubstr("taints[0].key: expected a string"));

  // Past the API's limits: counted up to them, and a warning finding.
  list = Cluster();
  json many = json::array();
  for (int i = 0; i < 130; ++i) many.push_back(Device("gpu-" + std::to_string(i), "gpu"));
  many[0]["taints"] = json::array();
  for (int i = 0; i < 20; ++i) many[0]["taints"].push_back({{"key", "k" + std::to_string(i)}, {"effect", "NoSchedule"}});
  list["items"].push_back(Slice("huge", "dra-none", 1, many));
  auto bounded = ParseNodeListText(list.dump(), "c.json");
  ASSERT_OK(bounded) << bounded.status();
  FleetReport r = Analyze(std::move(*bounded), "c.json");
  const NodeDra& d = NodeOf(r, "dra-none").dra;
  EXPECT_EQ(d.gpus, 128);
  EXPECT_EQ(d.taints.size(), 16u);
  auto warned = Find(r, "resource-slice-malformed", "dra-none");
  ASSERT_EQ(warned.size(), 2u);
  EXPECT_THAT(warned[0]->message, HasSubstr("spec.devices has 130 devices, the API allows 128"));
  EXPECT_THAT(warned[1]->message, HasSubstr("device gpu-0 has more than 16 taints"));
}

// ---- the API server stand-in ----

class FleetDraApiTest : public ::gpunode::testing::TempDirTest {
 protected:
  // Cluster()'s objects stored under resource.k8s.io/<version>.
  void Store(FakeApiServer& api, const std::string& version) {
    const json cluster = Cluster();
    for (const json& item : cluster["items"]) {
      const std::string name = item["metadata"]["name"];
      if (item["kind"] == "Node") {
        api.PutObject(FakeApiServer::NodePath(name), item);
      } else {
        json slice = item;
        if (version == "v1beta1") {  // devices under `basic`
          for (json& d : slice["spec"]["devices"]) {
            if (d.contains("basic")) continue;
            const std::string device = d["name"];
            d.erase("name");
            d = {{"name", device}, {"basic", d}};
          }
        }
        api.PutObject("/apis/resource.k8s.io/" + version + "/resourceslices/" + name, slice);
      }
    }
  }
  std::unique_ptr<kube::Client> ClientOf(const FakeApiServer& api) {
    kube::Connection c;
    EXPECT_OK(kube::ParseServer(api.url(), &c));
    return std::make_unique<kube::Client>(c);
  }
  static int Count(FakeApiServer& api, const std::string& prefix) { return api.Count(prefix); }
};

TEST_F(FleetDraApiTest, ListsSlicesPageByPageFromV1) {
  FakeApiServer api;
  Store(api, "v1");
  auto client = ClientOf(api);
  ListNodesOptions o;
  o.limit = 3;  // 8 slices: 3 pages
  auto nodes = ListNodes(*client, o);
  ASSERT_OK(nodes) << nodes.status();
  auto listing = ListResourceSlices(*client, *nodes, o);
  ASSERT_OK(listing) << listing.status();
  EXPECT_EQ(listing->api_version, "resource.k8s.io/v1");
  EXPECT_TRUE(listing->notes.empty());
  EXPECT_EQ(Count(api, "GET /apis/resource.k8s.io/v1/resourceslices?"), 3);
  EXPECT_EQ(Count(api, "GET /apis/resource.k8s.io/v1beta"), 0);
  ExpectClusterReport(Analyze(std::move(*nodes), "api"));
}

TEST_F(FleetDraApiTest, FallsBackToV1beta1On404) {
  FakeApiServer api;
  Store(api, "v1beta1");
  auto client = ClientOf(api);
  auto nodes = ListNodes(*client);
  ASSERT_OK(nodes);
  auto listing = ListResourceSlices(*client, *nodes);
  ASSERT_OK(listing) << listing.status();
  EXPECT_EQ(listing->api_version, "resource.k8s.io/v1beta1");
  EXPECT_EQ(Count(api, "GET /apis/resource.k8s.io/v1/resourceslices"), 1);
  EXPECT_EQ(Count(api, "GET /apis/resource.k8s.io/v1beta2/resourceslices"), 1);
  ExpectClusterReport(Analyze(std::move(*nodes), "api"));
}

TEST_F(FleetDraApiTest, ForbiddenOrNotServedIsANoteNotAFailure) {
  FakeApiServer api;
  Store(api, "v1");
  api.On("GET", "/apis/resource.k8s.io/v1/resourceslices",
         {FakeApiServer::ApiStatus(403, "Forbidden",
                                   "resourceslices.resource.k8s.io is forbidden: User \"fleet\" cannot list resource "
                                   "\"resourceslices\"")});
  auto client = ClientOf(api);
  auto nodes = ListNodes(*client);
  ASSERT_OK(nodes);
  auto listing = ListResourceSlices(*client, *nodes);
  ASSERT_OK(listing) << listing.status();
  EXPECT_EQ(listing->api_version, "");
  ASSERT_EQ(listing->notes.size(), 1u);
  EXPECT_THAT(listing->notes[0], HasSubstr("ResourceSlices not read"));
  EXPECT_THAT(listing->notes[0], HasSubstr("cannot list resource"));
  EXPECT_FALSE((*nodes)[0].dra.listed);
  FleetReport r = Analyze(std::move(*nodes), "api");
  EXPECT_TRUE(Find(r, "dra-below-capacity", "dra-none").empty());

  FakeApiServer bare;  // Nodes only: no resource.k8s.io at all
  bare.PutObject(FakeApiServer::NodePath("dra-a"), Node("dra-a", DraNodeLabels(8)));
  auto c2 = ClientOf(bare);
  auto n2 = ListNodes(*c2);
  ASSERT_OK(n2);
  auto none = ListResourceSlices(*c2, *n2);
  ASSERT_OK(none) << none.status();
  ASSERT_EQ(none->notes.size(), 1u);
  EXPECT_THAT(none->notes[0], HasSubstr("serves no ResourceSlices (resource.k8s.io v1, v1beta2, v1beta1"));

  // Any other error fails, naming the request.
  api.On("GET", "/apis/resource.k8s.io/v1/resourceslices", {FakeApiServer::ApiStatus(400, "BadRequest", "no such field selector")});
  auto n3 = ListNodes(*client);
  ASSERT_OK(n3);
  auto failed = ListResourceSlices(*client, *n3);
  ASSERT_FALSE(failed.ok());
  EXPECT_THAT(failed.status().message(), HasSubstr("/apis/resource.k8s.io/v1/resourceslices"));
}

TEST_F(FleetDraApiTest, TheBinaryShowsDraInTheTableAndJson) {
  FakeApiServer api;
  Store(api, "v1");
  const std::string kubeconfig = Path("kubeconfig");
  api.WriteKubeconfig(kubeconfig);
  auto table = ::gpunode::testing::RunGpunode("fleet --kubeconfig " + kubeconfig + " --nodes --color never");
  EXPECT_EQ(table.exit_code, 1) << table.out;
  EXPECT_THAT(table.out, HasSubstr("16 through DRA (4 nodes)"));
  EXPECT_THAT(table.out, HasSubstr("error dra-below-capacity dra-a"));
  EXPECT_THAT(table.out, Not(HasSubstr("note:")));
  auto yaml = ::gpunode::testing::RunGpunode("fleet --kubeconfig " + kubeconfig + " -o yaml");
  EXPECT_THAT(yaml.out, HasSubstr("resourceSlices: \"resource.k8s.io/v1\""));
  EXPECT_THAT(yaml.out, HasSubstr("allocatableGpus: 6"));

  // The same from a saved List.
  std::ofstream(Path("cluster.json")) << Cluster().dump();
  auto file = ::gpunode::testing::RunGpunode("fleet --from " + Path("cluster.json") + " -o json");
  EXPECT_EQ(file.exit_code, 1) << file.out;
  EXPECT_THAT(file.out, HasSubstr("\"draAllocatable\": 16"));
}

}  // namespace
}  // namespace gpunode::fleet
