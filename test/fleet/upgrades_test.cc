// gpunode fleet and driver upgrades: NVIDIA's NVIDIADrivers (the status gpunode's controller writes)
// and the nodes each owns, counted by nvidia.com/gpu-driver-upgrade-state; the
// driver-upgrade-failed finding; the table, JSON and HTML. From the fixtures
// test/fixtures/fleet/upgrade-nodes.json (a NodeList) and nvidiadrivers.json (an NVIDIADriverList)
// as a saved List, through the API server stand-in (test/testing/fake_api_server.h; paged, 404 =
// no CRD, 403 a note) and through the real binary.
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "src/base/json.h"
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
using ::testing::ContainsRegex;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

json Fixture(const std::string& name) {
  std::ifstream in(std::string(GPUNODE_SOURCE_DIR) + "/test/fixtures/fleet/" + name);
  std::stringstream s;
  s << in.rdbuf();
  return json::parse(s.str());
}

// kubectl get nodes,nvidiadrivers -o json: one List of both fixtures' items.
json Cluster() {
  json list = {{"apiVersion", "v1"}, {"kind", "List"}, {"items", json::array()}};
  for (const char* f : {"upgrade-nodes.json", "nvidiadrivers.json"}) {
    const json fixture = Fixture(f);
    for (const json& item : fixture["items"]) list["items"].push_back(item);
  }
  return list;
}

const DriverUpgrade& UpgradeOf(const FleetReport& r, const std::string& name) {
  for (const DriverUpgrade& u : r.driver_upgrades) {
    if (u.name == name) return u;
  }
  static const DriverUpgrade none;
  ADD_FAILURE() << "no driver upgrade " << name;
  return none;
}

std::vector<const Finding*> Find(const FleetReport& r, const std::string& id, const std::string& subject) {
  std::vector<const Finding*> out;
  for (const Finding& f : r.findings) {
    if (f.id == id && f.subject == subject) out.push_back(&f);
  }
  return out;
}

FleetReport FromList(const json& list, const std::string& source = "cluster.json") {
  auto in = ParseFleetListText(list.dump(), source);
  EXPECT_OK(in) << in.status();
  if (!in.ok()) return {};
  return Analyze(std::move(in->nodes), source, in->drivers);
}

// What every reading of the fixtures must give (the file, the API server, the binary's JSON).
void ExpectClusterUpgrades(const FleetReport& r) {
  ASSERT_EQ(r.driver_upgrades.size(), 5u);
  std::vector<std::string> names;
  for (const DriverUpgrade& u : r.driver_upgrades) names.push_back(u.name);
  EXPECT_THAT(names, ElementsAre("a100", "empty", "gone", "h100", "l40s"));

  const DriverUpgrade& h = UpgradeOf(r, "h100");
  EXPECT_TRUE(h.listed);
  EXPECT_EQ(h.target, "580.95.05");
  EXPECT_EQ(h.previous, "570.172.08");
  EXPECT_EQ(h.total, 5);
  EXPECT_EQ(h.done, 1);
  EXPECT_EQ(h.under_way, 1);  // drain-required
  EXPECT_EQ(h.to_start, 1);
  EXPECT_EQ(h.failed, 2);
  EXPECT_EQ(h.rolled_back, 1);
  EXPECT_EQ(h.by_state.at("upgrade-failed"), 2);
  EXPECT_THAT(h.nodes, ElementsAre("h100-1", "h100-2", "h100-3", "h100-4", "h100-5"));
  ASSERT_EQ(h.failed_nodes.size(), 2u);
  // The status's reason first; a node the status does not list: the node's own annotation.
  EXPECT_EQ(h.failed_nodes[0].node, "h100-3");
  EXPECT_THAT(h.failed_nodes[0].reason, HasSubstr("validation-required past its deadline (10m0s)"));
  EXPECT_EQ(h.failed_nodes[1].node, "h100-4");
  EXPECT_THAT(h.failed_nodes[1].reason, HasSubstr("pod-restart-required past its deadline (15m0s)"));
  EXPECT_THAT(h.ignored_fields, ElementsAre("spec.manager", "spec.gds"));
  EXPECT_THAT(h.note, HasSubstr("halted: a node failed (h100-3, h100-4)"));
  EXPECT_THAT(h.note, HasSubstr("1 rolled back"));
  EXPECT_THAT(h.note, HasSubstr("1 to start"));

  const DriverUpgrade& a = UpgradeOf(r, "a100");
  EXPECT_TRUE(a.paused);
  EXPECT_EQ(a.done, 1);
  EXPECT_EQ(a.to_start, 1);
  EXPECT_EQ(a.failed, 0);
  EXPECT_THAT(a.note, ::testing::StartsWith("paused"));
  EXPECT_THAT(a.note, Not(HasSubstr("halted")));  // paused says it

  const DriverUpgrade& l = UpgradeOf(r, "l40s");
  EXPECT_EQ(l.total, 1);
  EXPECT_EQ(l.no_state, 1);
  EXPECT_THAT(l.note, HasSubstr("no status yet (is gpunode fleet controller running?)"));

  const DriverUpgrade& e = UpgradeOf(r, "empty");
  EXPECT_EQ(e.total, 0);
  EXPECT_THAT(e.note, HasSubstr("conflict: nodeSelector selects nodes NVIDIADriver h100 owns"));

  const DriverUpgrade& g = UpgradeOf(r, "gone");
  EXPECT_FALSE(g.listed);
  EXPECT_EQ(g.total, 1);
  EXPECT_EQ(g.done, 1);
  EXPECT_THAT(g.note, HasSubstr("no NVIDIADriver of this name"));

  // One finding per pool with failed nodes, an error, naming them and their reasons.
  auto failed = Find(r, "driver-upgrade-failed", "h100");
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0]->severity, Severity::kError);
  EXPECT_THAT(failed[0]->nodes, ElementsAre("h100-3", "h100-4"));
  EXPECT_THAT(failed[0]->message, HasSubstr("2 of 5 node(s) of NVIDIADriver h100 failed the upgrade to driver 580.95.05: "
                                            "h100-3 (validation-required past its deadline"));
  EXPECT_THAT(failed[0]->message, HasSubstr("h100-4 (pod-restart-required"));
  EXPECT_THAT(failed[0]->message, HasSubstr("no node starts while it is halted"));
  EXPECT_THAT(failed[0]->action, HasSubstr("gpunode fleet upgrade retry NODE"));
  EXPECT_THAT(failed[0]->action, HasSubstr("to driver 570.172.08"));
  int upgrade_findings = 0;
  for (const Finding& f : r.findings) upgrade_findings += f.id == "driver-upgrade-failed";
  EXPECT_EQ(upgrade_findings, 1);
  EXPECT_EQ(ExitCodeOf(r), 1);
}

TEST(FleetUpgrades, ASavedListWithNodesAndNvidiaDrivers) {
  FleetReport r = FromList(Cluster());
  ExpectClusterUpgrades(r);
  EXPECT_EQ(r.drivers_source, "cluster.json");

  const nlohmann::ordered_json j = ToJson(r);
  EXPECT_EQ(j["nvidiaDrivers"], "cluster.json");
  ASSERT_EQ(j["driverUpgrades"].size(), 5u);
  const auto& h = j["driverUpgrades"][3];
  EXPECT_EQ(h["name"], "h100");
  EXPECT_EQ(h["targetVersion"], "580.95.05");
  EXPECT_EQ(h["previousVersion"], "570.172.08");
  EXPECT_EQ(h["nodes"]["total"], 5);
  EXPECT_EQ(h["nodes"]["upgradeDone"], 1);
  EXPECT_EQ(h["nodes"]["underWay"], 1);
  EXPECT_EQ(h["nodes"]["failed"], 2);
  EXPECT_EQ(h["byState"]["drain-required"], 1);
  EXPECT_EQ(h["failedNodes"][1]["node"], "h100-4");
  EXPECT_EQ(j["driverUpgrades"][2]["listed"], false);
  EXPECT_TRUE(j["driverUpgrades"][2]["targetVersion"].is_null());

  const std::string text = RenderText(r, /*list_nodes=*/false, /*color=*/false);
  EXPECT_THAT(text, HasSubstr("DRIVER UPGRADES (NVIDIADriver pools, from cluster.json)"));
  EXPECT_THAT(text, ContainsRegex("NVIDIADRIVER +TARGET +PREVIOUS +DONE +UNDER WAY +FAILED +NOTE"));
  EXPECT_THAT(text, ContainsRegex("\nh100 +580.95.05 +570.172.08 +1/5 +1 +2 +halted: a node failed"));
  EXPECT_THAT(text, ContainsRegex("\na100 +580.95.05 +535.261.03 +1/2 +0 +0 +paused; 1 to start"));
  EXPECT_THAT(text, ContainsRegex("\nl40s +570.195.03 +- +0/1 +0 +0 +no status yet"));
  EXPECT_THAT(text, HasSubstr("error driver-upgrade-failed h100: 2 of 5 node(s)"));
  EXPECT_THAT(text, HasSubstr("    nodes: h100-3, h100-4\n"));

  const std::string page = RenderHtml(r);
  EXPECT_THAT(page, HasSubstr("<h2>Driver upgrades</h2>"));
  EXPECT_THAT(page, HasSubstr("h100-4: pod-restart-required past its deadline (15m0s)"));
  EXPECT_THAT(page, HasSubstr("<td class=\"n error\">2</td>"));
}

TEST(FleetUpgrades, NodesAloneShowThePoolsTheirLabelsName) {
  // kubectl get nodes -o json: no NVIDIADriver read, the pools from the owner labels.
  FleetReport r = FromList(Fixture("upgrade-nodes.json"), "nodes.json");
  EXPECT_EQ(r.drivers_source, "");
  ASSERT_EQ(r.driver_upgrades.size(), 4u);  // a100, gone, h100, l40s: no node names `empty`
  const DriverUpgrade& h = UpgradeOf(r, "h100");
  EXPECT_FALSE(h.listed);
  EXPECT_EQ(h.target, "");
  EXPECT_EQ(h.failed, 2);
  EXPECT_THAT(h.note, HasSubstr("NVIDIADriver not read: from the nodes' labels only"));
  ASSERT_EQ(h.failed_nodes.size(), 2u);
  EXPECT_EQ(h.failed_nodes[0].reason, "validation failed");  // the node's annotation
  auto failed = Find(r, "driver-upgrade-failed", "h100");
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_THAT(failed[0]->message, HasSubstr("failed the upgrade: h100-3 (validation failed), h100-4"));
  EXPECT_THAT(RenderText(r, false, false), ContainsRegex("\nh100 +- +- +1/5 +1 +2 +NVIDIADriver not read"));

  // Without owner labels there is no section at all.
  FleetReport plain = FromList(Fixture("nodes-small.json"), "small.json");
  EXPECT_TRUE(plain.driver_upgrades.empty());
  EXPECT_TRUE(ToJson(plain)["driverUpgrades"].empty());
  EXPECT_TRUE(ToJson(plain)["nvidiaDrivers"].is_null());
  EXPECT_THAT(RenderText(plain, false, false), Not(HasSubstr("DRIVER UPGRADES")));
  EXPECT_THAT(RenderHtml(plain), Not(HasSubstr("Driver upgrades")));
}

// The NVIDIADriver `name` of the fixture, changed by `edit`, in a List with the nodes.
StatusOr<FleetInput> WithDriver(const std::string& name, const std::function<void(json&)>& edit) {
  json list = Cluster();
  for (json& item : list["items"]) {
    if (item["kind"] == "NVIDIADriver" && item["metadata"]["name"] == name) edit(item);
  }
  return ParseFleetListText(list.dump(), "c.json");
}

TEST(FleetUpgrades, MalformedNvidiaDriversAreErrorsNamingTheItemAndField) {
  struct Case {
    const char* what;
    std::function<void(json&)> edit;
    const char* error;
  };
  const std::vector<Case> cases = {
      {"no name", [](json& d) { d["metadata"].erase("name"); }, "c.json: items[10]: an NVIDIADriver without metadata.name"},
      {"not an object", [](json& d) { d["spec"] = "580"; }, "items[12] (NVIDIADriver \"h100\"): spec: expected an object, got string"},
      {"version a number", [](json& d) { d["spec"]["version"] = 580; },
       "items[12] (NVIDIADriver \"h100\"): spec.version: expected a string, got number"},
      {"annotations", [](json& d) { d["metadata"]["annotations"] = {{"gpunode.io/driver-upgrade.paused", true}}; },
       "metadata.annotations[\"gpunode.io/driver-upgrade.paused\"]"},
      {"failedNodes a string", [](json& d) { d["status"]["failedNodes"] = "h100-3"; },
       "(NVIDIADriver \"h100\"): status.failedNodes: expected an array, got string"},
      {"failed reason a number", [](json& d) { d["status"]["failedNodes"][0]["reason"] = 7; },
       "status.failedNodes[0].reason: expected a string, got number"},
      {"failed node unnamed", [](json& d) { d["status"]["failedNodes"][0].erase("node"); },
       "status.failedNodes[0]: a failed node without a name"},
      {"conflicts of numbers", [](json& d) { d["status"]["conflicts"] = json::array({1}); },
       "status.conflicts[0]: expected a string, got number"},
      {"halted an object", [](json& d) { d["status"]["halted"] = json::object(); },
       "status.halted: expected a string, got object"},
      {"a name too long", [](json& d) { d["metadata"]["name"] = std::string(300, 'x'); },
       "items[12]: NVIDIADriver metadata.name is 300 bytes, a name has at most 253"},
      {"the same name twice", [](json& d) { d["metadata"]["name"] = "a100"; },
       "items[12]: NVIDIADriver \"a100\" appears twice"},
  };
  for (const Case& c : cases) {
    auto in = WithDriver(c.what == std::string("no name") ? "a100" : "h100", c.edit);
    ASSERT_FALSE(in.ok()) << c.what;
    EXPECT_EQ(in.status().code(), absl::StatusCode::kInvalidArgument) << c.what;
    EXPECT_THAT(in.status().message(), HasSubstr(c.error)) << c.what;
  }

  // Another kind in the List is refused, naming the kinds a List may hold.
  json list = Cluster();
  list["items"].push_back({{"kind", "ClusterPolicy"}, {"metadata", {{"name", "cluster-policy"}}}});
  auto other = ParseFleetListText(list.dump(), "c.json");
  ASSERT_FALSE(other.ok());
  EXPECT_THAT(other.status().message(), HasSubstr("items[14] is a ClusterPolicy, not a Node, a ResourceSlice or an NVIDIADriver"));
  // ParseNodeList takes such a List too (the NVIDIADrivers checked, left out).
  auto nodes = ParseNodeListText(Cluster().dump(), "c.json");
  ASSERT_OK(nodes) << nodes.status();
  EXPECT_EQ(nodes->size(), 10u);
}

TEST(FleetUpgrades, LongStatusesAreCutNotRefused) {
  // 1000 conflicts of 5000 bytes each, a message cut inside a multi-byte character: kept in part,
  // valid UTF-8 throughout, and the JSON still writes.
  auto in = WithDriver("h100", [](json& d) {
    d["status"]["conflicts"] = json::array();
    for (int i = 0; i < 1000; ++i) d["status"]["conflicts"].push_back(std::string(5000, 'c'));
    d["status"]["state"] = "notReady";
    d["status"]["message"] = std::string(1023, 'm') + "\xc3\xa9\xc3\xa9";  // é straddles the cut
    d["status"]["failedNodes"][0]["reason"] = std::string(2000, 'r');
  });
  ASSERT_OK(in) << in.status();
  FleetReport r = Analyze(std::move(in->nodes), "c.json", in->drivers);
  const DriverUpgrade& h = UpgradeOf(r, "h100");
  EXPECT_EQ(h.conflicts.size(), kMaxUpgradeListEntries);
  EXPECT_LE(h.conflicts[0].size(), kMaxUpgradeTextBytes + 3);
  EXPECT_THAT(h.note, HasSubstr("(+255 more)"));
  EXPECT_TRUE(IsValidUtf8(h.message)) << h.message.substr(1015);
  EXPECT_LE(h.failed_nodes[0].reason.size(), kMaxUpgradeTextBytes + 3);
  auto failed = Find(r, "driver-upgrade-failed", "h100");
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_LT(failed[0]->message.size(), 1000u);  // a reason is cut shorter in the finding
  EXPECT_NO_THROW(ToJson(r).dump());
  const std::string text = RenderText(r, false, false);
  EXPECT_THAT(text, ContainsRegex("\nh100 .*halted: .*; conflict: c+\\.\\.\\.\n"));  // the table's note is cut
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::StartsWith(line, "h100 ")) {
      EXPECT_LT(line.size(), 260u) << line;
    }
  }

  // A node's reason annotation of 1200 bytes of two-byte characters: cut to the bound, whole characters.
  json list = Cluster();
  std::string long_reason;
  for (int i = 0; i < 600; ++i) long_reason += "\xc3\xa9";
  for (json& item : list["items"]) {
    if (item["metadata"]["name"] == "h100-4") item["metadata"]["annotations"]["gpunode.io/driver-upgrade.reason"] = long_reason;
  }
  auto nodes = ParseNodeListText(list.dump(), "c.json");
  ASSERT_OK(nodes) << nodes.status();
  for (const FleetNode& n : *nodes) {
    if (n.name != "h100-4") continue;
    EXPECT_EQ(n.upgrade_reason.size(), kMaxUpgradeTextBytes + 3);  // 512 characters and "..."
    EXPECT_TRUE(IsValidUtf8(n.upgrade_reason));
  }
}

// ---- the API server stand-in ----

constexpr char kCollection[] = "/apis/nvidia.com/v1alpha1/nvidiadrivers";

class FleetUpgradesApiTest : public ::gpunode::testing::TempDirTest {
 protected:
  // The fixtures' Nodes and NVIDIADrivers as the API server holds them.
  static void Store(FakeApiServer& api, bool drivers = true) {
    const json nodes = Fixture("upgrade-nodes.json"), nvidia_drivers = Fixture("nvidiadrivers.json");
    for (const json& n : nodes["items"]) api.PutObject(FakeApiServer::NodePath(n["metadata"]["name"]), n);
    if (!drivers) return;
    for (const json& d : nvidia_drivers["items"]) {
      api.PutObject(std::string(kCollection) + "/" + d["metadata"]["name"].get<std::string>(), d);
    }
  }
  static std::unique_ptr<kube::Client> ClientOf(const FakeApiServer& api) {
    kube::Connection c;
    EXPECT_OK(kube::ParseServer(api.url(), &c));
    return std::make_unique<kube::Client>(c);
  }
};

TEST_F(FleetUpgradesApiTest, ListsNvidiaDriversPageByPage) {
  FakeApiServer api;
  Store(api);
  auto client = ClientOf(api);
  auto nodes = ListNodes(*client);
  ASSERT_OK(nodes) << nodes.status();
  ListNodesOptions o;
  o.limit = 3;  // 4 NVIDIADrivers: 2 pages
  auto drivers = ListNvidiaDrivers(*client, o);
  ASSERT_OK(drivers) << drivers.status();
  EXPECT_TRUE(drivers->listed);
  EXPECT_EQ(drivers->source, "nvidia.com/v1alpha1");
  EXPECT_TRUE(drivers->notes.empty());
  EXPECT_EQ(drivers->drivers.size(), 4u);
  EXPECT_EQ(api.Count(std::string("GET ") + kCollection + "?"), 2);
  EXPECT_EQ(api.Count(std::string("GET ") + kCollection + "?limit=3&resourceVersion=0"), 1);
  FleetReport r = Analyze(std::move(*nodes), "api", *drivers);
  ExpectClusterUpgrades(r);
  EXPECT_EQ(ToJson(r)["nvidiaDrivers"], "nvidia.com/v1alpha1");
}

TEST_F(FleetUpgradesApiTest, NoCrdIsNoSectionAndForbiddenIsANote) {
  // 404: the API server does not know the resource (the CRD is not installed): nothing, no note.
  FakeApiServer bare;
  bare.PutObject(FakeApiServer::NodePath("n1"), {{"kind", "Node"}, {"metadata", {{"name", "n1"}}}});
  auto c1 = ClientOf(bare);
  auto none = ListNvidiaDrivers(*c1);
  ASSERT_OK(none) << none.status();
  EXPECT_FALSE(none->listed);
  EXPECT_TRUE(none->notes.empty());
  // Installed, no resource: listed, empty.
  bare.ServeCollection(kCollection);
  auto empty = ListNvidiaDrivers(*c1);
  ASSERT_OK(empty) << empty.status();
  EXPECT_TRUE(empty->listed);
  EXPECT_TRUE(empty->drivers.empty());

  // 403: a note; the pools from the nodes' labels.
  FakeApiServer api;
  Store(api);
  api.On("GET", kCollection,
         {FakeApiServer::ApiStatus(403, "Forbidden",
                                   "nvidiadrivers.nvidia.com is forbidden: User \"fleet\" cannot list resource \"nvidiadrivers\"")});
  auto client = ClientOf(api);
  auto nodes = ListNodes(*client);
  ASSERT_OK(nodes);
  auto denied = ListNvidiaDrivers(*client);
  ASSERT_OK(denied) << denied.status();
  EXPECT_FALSE(denied->listed);
  ASSERT_EQ(denied->notes.size(), 1u);
  EXPECT_THAT(denied->notes[0], HasSubstr("NVIDIADrivers not read ("));
  EXPECT_THAT(denied->notes[0], HasSubstr("cannot list resource"));
  EXPECT_THAT(denied->notes[0], HasSubstr("fleet needs list on nvidiadrivers.nvidia.com"));
  FleetReport r = Analyze(std::move(*nodes), "api", *denied);
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_FALSE(UpgradeOf(r, "h100").listed);
  EXPECT_EQ(Find(r, "driver-upgrade-failed", "h100").size(), 1u);

  // Any other answer fails, naming the request; a malformed item names the item and its field.
  api.On("GET", kCollection, {FakeApiServer::ApiStatus(500, "InternalError", "etcd is down")});
  auto failed = ListNvidiaDrivers(*client);
  ASSERT_FALSE(failed.ok());
  EXPECT_THAT(failed.status().message(), HasSubstr(kCollection));
  api.On("GET", kCollection, {nullptr});  // the store answers again
  json bad = Fixture("nvidiadrivers.json")["items"][2];
  bad["spec"]["version"] = json::array({"580.95.05"});
  api.PutObject(std::string(kCollection) + "/h100", bad);
  auto malformed = ListNvidiaDrivers(*client);
  ASSERT_FALSE(malformed.ok());
  EXPECT_THAT(malformed.status().message(),
              HasSubstr("GET /apis/nvidia.com/v1alpha1/nvidiadrivers: items[2] (NVIDIADriver \"h100\"): spec.version: "
                        "expected a string, got array"));
}

TEST_F(FleetUpgradesApiTest, TheBinaryShowsDriverUpgrades) {
  FakeApiServer api;
  Store(api);
  const std::string kubeconfig = Path("kubeconfig");
  api.WriteKubeconfig(kubeconfig);
  auto table = ::gpunode::testing::RunGpunode("fleet --kubeconfig " + kubeconfig + " --color never --html " + Path("f.html"));
  EXPECT_EQ(table.exit_code, 1) << table.out;
  EXPECT_THAT(table.out, HasSubstr("DRIVER UPGRADES (NVIDIADriver pools, from nvidia.com/v1alpha1)"));
  EXPECT_THAT(table.out, ContainsRegex("\nh100 +580.95.05 +570.172.08 +1/5 +1 +2 +halted"));
  EXPECT_THAT(table.out, HasSubstr("error driver-upgrade-failed h100: 2 of 5 node(s)"));
  EXPECT_THAT(Read("f.html"), HasSubstr("<h2>Driver upgrades</h2>"));
  auto yaml = ::gpunode::testing::RunGpunode("fleet --kubeconfig " + kubeconfig + " -o yaml");
  EXPECT_THAT(yaml.out, HasSubstr("nvidiaDrivers: \"nvidia.com/v1alpha1\""));
  EXPECT_THAT(yaml.out, HasSubstr("driverUpgrades:"));

  // The same from a saved List (kubectl get nodes,nvidiadrivers -o json).
  std::ofstream(Path("cluster.json")) << Cluster().dump();
  auto file = ::gpunode::testing::RunGpunode("fleet --from " + Path("cluster.json") + " -o json");
  EXPECT_EQ(file.exit_code, 1) << file.out;
  EXPECT_THAT(file.out, HasSubstr("\"id\": \"driver-upgrade-failed\""));

  // A cluster without the CRD: no section, no note, no error.
  FakeApiServer bare;
  Store(bare, /*drivers=*/false);
  bare.WriteKubeconfig(Path("bare"));
  auto plain = ::gpunode::testing::RunGpunode("fleet --kubeconfig " + Path("bare") + " -o json");
  auto doc = json::parse(plain.out, nullptr, false);
  ASSERT_FALSE(doc.is_discarded()) << plain.out;
  EXPECT_TRUE(doc["nvidiaDrivers"].is_null());
  // Its nodes still carry owner labels: the pools from them, and no note about NVIDIADrivers.
  EXPECT_EQ(doc["driverUpgrades"].size(), 4u);
  for (const auto& note : doc["notes"]) EXPECT_THAT(note.get<std::string>(), Not(HasSubstr("NVIDIADriver")));
}

}  // namespace
}  // namespace gpunode::fleet
