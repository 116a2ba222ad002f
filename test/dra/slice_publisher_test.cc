// SlicePublisher against the API server stand-in (test/testing/fake_api_server.h) over a real
// kube::Client: the first publish creates, the same devices again write nothing (requests
// counted), a change (a taint, a device gone, a split pool shrinking) writes the pool at the next
// generation and deletes what is stale, v1 missing falls back to v1beta2/v1beta1 and stays there,
// RemoveAll removes only this node's and driver's slices, and hostile answers are clear errors.
#include "src/dra/resource_slices.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/fake_api_server.h"
#include "test/testing/sim_inventory.h"
#include "test/testing/status_matchers.h"

namespace gpunode::dra {
namespace {

using ::gpunode::testing::FakeApiServer;
using ::testing::HasSubstr;
using ::testing::SizeIs;
using nlohmann::json;

constexpr char kV1[] = "/apis/resource.k8s.io/v1/resourceslices";
constexpr char kV1beta2[] = "/apis/resource.k8s.io/v1beta2/resourceslices";
constexpr char kV1beta1[] = "/apis/resource.k8s.io/v1beta1/resourceslices";
constexpr char kNode[] = "node-1";

DraDevice Gpu(int minor) {
  DraDevice d;
  d.name = "gpu-" + std::to_string(minor);
  d.type = "gpu";
  d.uuid = "GPU-" + std::to_string(minor);
  d.attributes = {{"type", {{"string", "gpu"}}}, {"uuid", {{"string", d.uuid}}}};
  d.capacity = {{"memory", "143771Mi"}};
  return d;
}

std::vector<DraDevice> Gpus(int n) {
  std::vector<DraDevice> out;
  for (int i = 0; i < n; ++i) out.push_back(Gpu(i));
  return out;
}

std::string SlicePath(const char* collection, int index) {
  return std::string(collection) + "/" + SliceName(kNode, kDefaultDriverName, index);
}

class SlicePublisherTest : public ::testing::Test {
 protected:
  SlicePublisherTest() {
    api_.AddNode(kNode, "node-uid-7");
    api_.ServeCollection(kV1);
    kube::Connection c;
    EXPECT_OK(kube::ParseServer(api_.url(), &c));
    kube::ClientOptions options;
    options.qps = 0;  // no client-side rate limit in tests
    client_ = std::make_unique<kube::Client>(c, options);
  }

  SlicePublisher Publisher() {
    SlicePublisher::Options o;
    o.node = kNode;
    return SlicePublisher(*client_, o);
  }

  // Writes the server saw (creates, updates, deletes, patches).
  int Writes() { return api_.Count("POST ") + api_.Count("PUT ") + api_.Count("DELETE ") + api_.Count("PATCH "); }

  FakeApiServer api_;
  std::unique_ptr<kube::Client> client_;
};

TEST_F(SlicePublisherTest, TheFirstPublishCreatesThePoolOwnedByTheNode) {
  SlicePublisher p = Publisher();
  ASSERT_OK(p.Publish(Gpus(8)));
  EXPECT_EQ(api_.Count(std::string("POST ") + kV1), 1);
  EXPECT_EQ(Writes(), 1);
  EXPECT_EQ(p.api(), SliceApi::kV1);
  EXPECT_EQ(p.generation(), 1);
  const json slice = api_.Object(SlicePath(kV1, 0));
  ASSERT_TRUE(slice.is_object());
  EXPECT_EQ(slice["apiVersion"], "resource.k8s.io/v1");
  EXPECT_EQ(slice["spec"]["driver"], "gpu.nvidia.com");
  EXPECT_EQ(slice["spec"]["nodeName"], kNode);
  EXPECT_EQ(slice["spec"]["pool"], json::parse(R"({"name": "node-1", "generation": 1, "resourceSliceCount": 1})"));
  EXPECT_THAT(slice["spec"]["devices"], SizeIs(8));
  EXPECT_EQ(slice["metadata"]["ownerReferences"][0]["uid"], "node-uid-7");
  EXPECT_EQ(slice["metadata"]["ownerReferences"][0]["kind"], "Node");
  // The list asked the API server for this node's and driver's slices only.
  EXPECT_EQ(api_.Count(std::string("GET ") + kV1 + "?fieldSelector=spec.nodeName%3Dnode-1%2Cspec.driver%3Dgpu.nvidia.com"), 1)
      << ::testing::PrintToString(api_.Requests());
}

TEST_F(SlicePublisherTest, TheSameDevicesAgainWriteNothingEvenAfterARestart) {
  {
    SlicePublisher p = Publisher();
    ASSERT_OK(p.Publish(Gpus(8)));
    ASSERT_EQ(Writes(), 1);
    ASSERT_OK(p.Publish(Gpus(8)));
    EXPECT_EQ(Writes(), 1);
    EXPECT_EQ(p.last_writes().total(), 0);
    EXPECT_EQ(p.generation(), 1);
  }
  SlicePublisher restarted = Publisher();  // a new process reads what the last one wrote
  ASSERT_OK(restarted.Publish(Gpus(8)));
  EXPECT_EQ(Writes(), 1);
  EXPECT_EQ(restarted.generation(), 1);
}

TEST_F(SlicePublisherTest, ASliceOwnedByAnEarlierNodeOfTheSameNameIsTakenOver) {
  SlicePublisher p = Publisher();
  ASSERT_OK(p.Publish(Gpus(2)));
  // The Node was deleted and created again: a new UID; a new publisher reads it.
  api_.AddNode(kNode, "node-uid-8");
  SlicePublisher q = Publisher();
  ASSERT_OK(q.Publish(Gpus(2)));
  EXPECT_EQ(q.last_writes().updated, 1);
  EXPECT_EQ(api_.Object(SlicePath(kV1, 0))["metadata"]["ownerReferences"][0]["uid"], "node-uid-8");
}

TEST_F(SlicePublisherTest, TheDgxH200SimulatedNodePublishesItsEightGpusOnce) {
  const std::vector<DraDevice> devices = DraDevicesOf(gpunode::testing::ProbeSimulated("dgx-h200"));
  ASSERT_THAT(devices, SizeIs(8));
  SlicePublisher p = Publisher();
  ASSERT_OK(p.Publish(devices));
  ASSERT_OK(p.Publish(DraDevicesOf(gpunode::testing::ProbeSimulated("dgx-h200"))));
  EXPECT_EQ(Writes(), 1);
  const json slice = api_.Object(SlicePath(kV1, 0));
  EXPECT_EQ(slice["spec"]["devices"][7]["name"], "gpu-7");
  EXPECT_EQ(slice["spec"]["devices"][0]["capacity"]["memory"]["value"], "143771Mi");
  EXPECT_EQ(slice["spec"]["devices"][0]["attributes"]["productName"]["string"], "NVIDIA H200");
}

TEST_F(SlicePublisherTest, AnUnhealthyDeviceIsAnUpdateAtTheNextGeneration) {
  SlicePublisher p = Publisher();
  ASSERT_OK(p.Publish(Gpus(8)));
  std::vector<DraDevice> devices = Gpus(8);
  devices[3].healthy = false;
  devices[3].taints = {{kTaintGpuLost, "", kTaintEffectNoSchedule, ""}};
  ASSERT_OK(p.Publish(devices));
  EXPECT_EQ(api_.Count(std::string("PUT ") + SlicePath(kV1, 0)), 1);
  EXPECT_EQ(Writes(), 2);
  EXPECT_EQ(p.generation(), 2);
  json slice = api_.Object(SlicePath(kV1, 0));
  EXPECT_EQ(slice["spec"]["pool"]["generation"], 2);
  EXPECT_EQ(slice["spec"]["devices"][3]["taints"][0]["key"], "gpu.nvidia.com/gpu-lost");
  EXPECT_EQ(slice["metadata"]["ownerReferences"][0]["uid"], "node-uid-7");

  // The API server stamps the taint's time; the same devices again are no change, and a later
  // update keeps the stamped time.
  api_.Change(SlicePath(kV1, 0), [](json& o) { o["spec"]["devices"][3]["taints"][0]["timeAdded"] = "2026-12-01T13:00:00Z"; });
  ASSERT_OK(p.Publish(devices));
  EXPECT_EQ(Writes(), 2);
  devices[5].capacity["memory"] = "143770Mi";
  ASSERT_OK(p.Publish(devices));
  // Two PUTs: the first, from the slice as last written, is refused (the stamp changed it: 409);
  // the second after a list.
  EXPECT_EQ(Writes(), 4);
  slice = api_.Object(SlicePath(kV1, 0));
  EXPECT_EQ(slice["spec"]["pool"]["generation"], 3);
  EXPECT_EQ(slice["spec"]["devices"][3]["taints"][0]["timeAdded"], "2026-12-01T13:00:00Z");

  // Recovered: the taint goes, generation 4.
  ASSERT_OK(p.Publish(Gpus(8)));
  slice = api_.Object(SlicePath(kV1, 0));
  EXPECT_FALSE(slice["spec"]["devices"][3].contains("taints"));
  EXPECT_EQ(slice["spec"]["pool"]["generation"], 4);
}

TEST_F(SlicePublisherTest, AChangeRightAfterAWriteIsOneRequestWithoutAList) {
  SlicePublisher p = Publisher();
  ASSERT_OK(p.Publish(Gpus(8)));
  const int lists = api_.Count(std::string("GET ") + kV1);
  std::vector<DraDevice> devices = Gpus(8);
  devices[3].taints = {{kTaintGpuLost, "", kTaintEffectNoSchedule, ""}};
  const size_t before = api_.Requests().size();
  ASSERT_OK(p.Publish(devices));
  EXPECT_EQ(api_.Requests().size(), before + 1);  // the PUT only
  EXPECT_EQ(api_.Count(std::string("GET ") + kV1), lists);
  EXPECT_EQ(api_.Object(SlicePath(kV1, 0))["spec"]["devices"][3]["taints"][0]["key"], "gpu.nvidia.com/gpu-lost");

  // Someone else changed the slice meanwhile: the write is refused (409), the publisher lists and
  // writes again over what is there.
  api_.Change(SlicePath(kV1, 0), [](json& o) { o["metadata"]["labels"]["someone"] = "else"; });
  ASSERT_OK(p.Publish(Gpus(8)));
  EXPECT_EQ(api_.Count(std::string("GET ") + kV1), lists + 1);
  EXPECT_FALSE(api_.Object(SlicePath(kV1, 0))["spec"]["devices"][3].contains("taints"));
  EXPECT_EQ(api_.Object(SlicePath(kV1, 0))["metadata"]["labels"]["someone"], "else");

  // With reuse_written 0 every publish lists first.
  SlicePublisher::Options o;
  o.node = kNode;
  o.reuse_written = std::chrono::milliseconds(0);
  SlicePublisher listing(*client_, o);
  const int lists_now = api_.Count(std::string("GET ") + kV1);
  ASSERT_OK(listing.Publish(Gpus(8)));
  ASSERT_OK(listing.Publish(devices));
  EXPECT_EQ(api_.Count(std::string("GET ") + kV1), lists_now + 2);
}

TEST_F(SlicePublisherTest, FewerDevicesDeleteTheStaleSliceAndRewriteThePool) {
  SlicePublisher p = Publisher();
  ASSERT_OK(p.Publish(Gpus(200)));  // two slices
  ASSERT_EQ(api_.Count("POST "), 2);
  EXPECT_EQ(api_.Object(SlicePath(kV1, 1))["spec"]["pool"]["resourceSliceCount"], 2);
  ASSERT_OK(p.Publish(Gpus(100)));
  EXPECT_EQ(api_.Count(std::string("DELETE ") + SlicePath(kV1, 1)), 1);
  EXPECT_EQ(api_.Count(std::string("PUT ") + SlicePath(kV1, 0)), 1);
  EXPECT_TRUE(api_.Object(SlicePath(kV1, 1)).is_null());
  const json slice = api_.Object(SlicePath(kV1, 0));
  EXPECT_EQ(slice["spec"]["pool"], json::parse(R"({"name": "node-1", "generation": 2, "resourceSliceCount": 1})"));
  EXPECT_THAT(slice["spec"]["devices"], SizeIs(100));
  EXPECT_EQ(p.last_writes().deleted, 1);
  EXPECT_EQ(p.last_writes().updated, 1);
}

TEST_F(SlicePublisherTest, SlicesOfOtherNodesAndDriversAreLeftAloneAndAForeignStaleOneOfOursGoes) {
  // The API server is not trusted to filter: it sends every slice (the stand-in ignores the
  // selector); another node's, another driver's, and one NVIDIA's driver left for this node.
  api_.PutObject(std::string(kV1) + "/node-2-gpu-nvidia-com-0",
                 {{"metadata", {{"name", "node-2-gpu-nvidia-com-0"}}},
                  {"spec", {{"driver", "gpu.nvidia.com"}, {"nodeName", "node-2"},
                            {"pool", {{"name", "node-2"}, {"generation", 9}, {"resourceSliceCount", 1}}}}}});
  api_.PutObject(std::string(kV1) + "/node-1-other-0",
                 {{"metadata", {{"name", "node-1-other-0"}}},
                  {"spec", {{"driver", "other.example.com"}, {"nodeName", kNode},
                            {"pool", {{"name", kNode}, {"generation", 9}, {"resourceSliceCount", 1}}}}}});
  api_.PutObject(std::string(kV1) + "/0-gpu.nvidia.com-node-1-x7k2p",
                 {{"metadata", {{"name", "0-gpu.nvidia.com-node-1-x7k2p"}}},
                  {"spec", {{"driver", "gpu.nvidia.com"}, {"nodeName", kNode},
                            {"pool", {{"name", kNode}, {"generation", 3}, {"resourceSliceCount", 1}}},
                            {"devices", {{{"name", "gpu-0"}}}}}}});
  SlicePublisher p = Publisher();
  ASSERT_OK(p.Publish(Gpus(2)));
  EXPECT_TRUE(api_.Object(std::string(kV1) + "/0-gpu.nvidia.com-node-1-x7k2p").is_null());
  EXPECT_FALSE(api_.Object(std::string(kV1) + "/node-2-gpu-nvidia-com-0").is_null());
  EXPECT_FALSE(api_.Object(std::string(kV1) + "/node-1-other-0").is_null());
  EXPECT_EQ(api_.Object(SlicePath(kV1, 0))["spec"]["pool"]["generation"], 4);  // above the stale 3
  EXPECT_EQ(Writes(), 2);  // the stale one deleted, ours created (PutObject is not a request)
}

TEST_F(SlicePublisherTest, WithoutV1ItFallsBackToV1beta1AndRemembersIt) {
  FakeApiServer old;  // an API server of Kubernetes 1.32: resource.k8s.io/v1beta1 only
  old.AddNode(kNode, "node-uid-7");
  old.ServeCollection(kV1beta1);
  kube::Connection c;
  ASSERT_OK(kube::ParseServer(old.url(), &c));
  kube::ClientOptions options;
  options.qps = 0;
  kube::Client client(c, options);
  SlicePublisher::Options o;
  o.node = kNode;
  SlicePublisher p(client, o);
  std::vector<DraDevice> devices = Gpus(2);
  devices[1].taints = {{kTaintXid, "79", kTaintEffectNoSchedule, ""}};
  ASSERT_OK(p.Publish(devices));
  EXPECT_EQ(p.api(), SliceApi::kV1beta1);
  const json slice = old.Object(SlicePath(kV1beta1, 0));
  EXPECT_EQ(slice["apiVersion"], "resource.k8s.io/v1beta1");
  EXPECT_EQ(slice["spec"]["devices"][0]["basic"]["capacity"]["memory"]["value"], "143771Mi");
  EXPECT_EQ(slice["spec"]["devices"][1]["basic"]["taints"][0]["value"], "79");
  ASSERT_OK(p.Publish(devices));
  EXPECT_EQ(old.Count("POST ") + old.Count("PUT ") + old.Count("DELETE "), 1);
  // v1 and v1beta2 were asked once, at the first publish; the second compared with the slices as
  // written (no list).
  EXPECT_EQ(old.Count(std::string("GET ") + kV1 + "?"), 1);
  EXPECT_EQ(old.Count(std::string("GET ") + kV1beta2 + "?"), 1);
  EXPECT_EQ(old.Count(std::string("GET ") + kV1beta1 + "?"), 1);
}

TEST_F(SlicePublisherTest, V1beta2IsTheFirstFallback) {
  FakeApiServer beta2;
  beta2.AddNode(kNode);
  beta2.ServeCollection(kV1beta2);
  beta2.ServeCollection(kV1beta1);
  kube::Connection c;
  ASSERT_OK(kube::ParseServer(beta2.url(), &c));
  kube::Client client(c);
  SlicePublisher::Options o;
  o.node = kNode;
  SlicePublisher p(client, o);
  ASSERT_OK(p.Publish(Gpus(1)));
  EXPECT_EQ(p.api(), SliceApi::kV1beta2);
  EXPECT_EQ(beta2.Object(SlicePath(kV1beta2, 0))["spec"]["devices"][0]["name"], "gpu-0");
}

TEST_F(SlicePublisherTest, AnApiServerWithoutDraIsAClearErrorAndNothingToRemove) {
  FakeApiServer none;
  none.AddNode(kNode);
  kube::Connection c;
  ASSERT_OK(kube::ParseServer(none.url(), &c));
  kube::Client client(c);
  SlicePublisher::Options o;
  o.node = kNode;
  SlicePublisher p(client, o);
  Status s = p.Publish(Gpus(1));
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_THAT(s.message(), HasSubstr("serves no ResourceSlices"));
  EXPECT_OK(p.RemoveAll());
}

TEST_F(SlicePublisherTest, RemoveAllDeletesOnlyThisNodesSlicesOfThisDriver) {
  api_.PutObject(std::string(kV1) + "/node-2-gpu-nvidia-com-0",
                 {{"metadata", {{"name", "node-2-gpu-nvidia-com-0"}}},
                  {"spec", {{"driver", "gpu.nvidia.com"}, {"nodeName", "node-2"},
                            {"pool", {{"name", "node-2"}, {"generation", 1}, {"resourceSliceCount", 1}}}}}});
  SlicePublisher p = Publisher();
  ASSERT_OK(p.Publish(Gpus(200)));
  ASSERT_OK(p.RemoveAll());
  EXPECT_EQ(p.last_writes().deleted, 2);
  EXPECT_TRUE(api_.Object(SlicePath(kV1, 0)).is_null());
  EXPECT_TRUE(api_.Object(SlicePath(kV1, 1)).is_null());
  EXPECT_FALSE(api_.Object(std::string(kV1) + "/node-2-gpu-nvidia-com-0").is_null());
  ASSERT_OK(p.RemoveAll());  // nothing left: no more deletes
  EXPECT_EQ(p.last_writes().deleted, 0);
}

TEST_F(SlicePublisherTest, AConflictStartsOverFromTheList) {
  SlicePublisher p = Publisher();
  ASSERT_OK(p.Publish(Gpus(2)));
  api_.On("PUT", SlicePath(kV1, 0), {FakeApiServer::ApiStatus(409, "Conflict", "the object has been modified"), nullptr});
  ASSERT_OK(p.Publish(Gpus(3)));
  EXPECT_EQ(api_.Count(std::string("PUT ") + SlicePath(kV1, 0)), 2);
  EXPECT_THAT(api_.Object(SlicePath(kV1, 0))["spec"]["devices"], SizeIs(3));
}

TEST_F(SlicePublisherTest, TaintsTheApiServerDropsAreNotWrittenAgainAndAgain) {
  // An API server whose DRADeviceTaints feature is off stores devices without their taints.
  api_.FilterWrites([](const std::string&, json& o) {
    if (!o.contains("spec") || !o["spec"].contains("devices")) return;
    for (json& d : o["spec"]["devices"]) d.erase("taints");
  });
  SlicePublisher p = Publisher();
  std::vector<DraDevice> devices = Gpus(2);
  devices[0].taints = {{kTaintGpuLost, "", kTaintEffectNoSchedule, ""}};
  ASSERT_OK(p.Publish(devices));
  EXPECT_TRUE(p.taints_dropped());
  ASSERT_OK(p.Publish(devices));
  ASSERT_OK(p.Publish(devices));
  EXPECT_EQ(Writes(), 1);
}

// ---- hostile answers ----

json ListOf(json item) {
  return {{"kind", "ResourceSliceList"}, {"apiVersion", "resource.k8s.io/v1"}, {"metadata", {{"resourceVersion", "5"}}},
          {"items", json::array({std::move(item)})}};
}

json OurSlice() {
  return {{"metadata", {{"name", "node-1-gpu-nvidia-com-0"}, {"resourceVersion", "4"}}},
          {"spec", {{"driver", "gpu.nvidia.com"}, {"nodeName", kNode},
                    {"pool", {{"name", kNode}, {"generation", 1}, {"resourceSliceCount", 1}}},
                    {"devices", {{{"name", "gpu-0"}}}}}}};
}

TEST_F(SlicePublisherTest, WrongTypesInTheListAreErrorsThatNameTheSliceAndField) {
  struct Case {
    std::function<void(json&)> spoil;
    std::string error;
  };
  const std::vector<Case> cases = {
      {[](json& s) { s["spec"]["pool"]["generation"] = "one"; },
       "ResourceSlice node-1-gpu-nvidia-com-0: spec.pool.generation: expected"},
      {[](json& s) { s["spec"]["devices"] = {{"name", "gpu-0"}}; },
       "ResourceSlice node-1-gpu-nvidia-com-0: spec.devices: expected an array, got object"},
      {[](json& s) { s["spec"]["devices"][0]["capacity"] = {{"memory", "80Gi"}}; },
       "ResourceSlice node-1-gpu-nvidia-com-0: spec.devices[0].capacity.memory: expected an object, got string"},
      {[](json& s) { s["spec"]["devices"][0]["taints"] = {{{"key", 5}}}; },
       "ResourceSlice node-1-gpu-nvidia-com-0: spec.devices[0].taints[0].key: expected a string, got number"},
      {[](json& s) { s["metadata"]["name"] = json::array(); }, "metadata.name: expected a string, got array"},
      {[](json& s) { s["spec"]["devices"] = json::array({json::object()}); }, "a device without a name"},
  };
  for (const Case& c : cases) {
    json slice = OurSlice();
    c.spoil(slice);
    api_.On("GET", kV1, {FakeApiServer::Json(200, ListOf(slice))});
    SlicePublisher p = Publisher();
    Status s = p.Publish(Gpus(1));
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(s.message(), HasSubstr(c.error));
    EXPECT_EQ(Writes(), 0) << "nothing is written from a list that could not be read";
  }
}

TEST_F(SlicePublisherTest, AListOfTooManySlicesIsRefused) {
  json list = ListOf(OurSlice());
  for (int i = 1; i < 300; ++i) list["items"].push_back(OurSlice());
  api_.On("GET", kV1, {FakeApiServer::Json(200, list)});
  SlicePublisher p = Publisher();
  Status s = p.Publish(Gpus(1));
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_THAT(s.message(), HasSubstr("more than 256 ResourceSlices"));
  EXPECT_EQ(Writes(), 0);
}

TEST_F(SlicePublisherTest, ANodeThatCannotBeReadIsAnErrorNamingIt) {
  FakeApiServer api;
  api.ServeCollection(kV1);
  kube::Connection c;
  ASSERT_OK(kube::ParseServer(api.url(), &c));
  kube::Client client(c);
  SlicePublisher::Options o;
  o.node = "node-9";
  SlicePublisher p(client, o);
  Status s = p.Publish(Gpus(1));
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_THAT(s.message(), HasSubstr("reading Node node-9"));
  api.On("GET", "/api/v1/nodes/node-9", {FakeApiServer::ApiStatus(403, "Forbidden", "nodes \"node-9\" is forbidden")});
  s = p.Publish(Gpus(1));
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
  EXPECT_EQ(api.Count("POST "), 0);
}

TEST_F(SlicePublisherTest, InvalidDevicesAreRefusedBeforeAnythingIsSent) {
  SlicePublisher p = Publisher();
  std::vector<DraDevice> devices = Gpus(2);
  devices[1].name = "gpu-0";
  Status s = p.Publish(devices);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_TRUE(api_.Requests().empty());
}

}  // namespace
}  // namespace gpunode::dra
