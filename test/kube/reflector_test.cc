// The reflector and its store against the API server stand-in: list then watch, a projection kept
// instead of the JSON, handlers, 410 answered by a new list, bookmarks, pages, a malformed object
// skipped, stop.
#include "src/kube/reflector.h"

#include <atomic>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "src/kube/json_fields.h"
#include "src/kube/store.h"
#include "test/testing/fake_api_server.h"
#include "test/testing/status_matchers.h"

namespace gpunode::kube {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::FakeApiServer;

struct NodeInfo {
  std::string gpu;
  bool operator==(const NodeInfo&) const = default;
};

StatusOr<NodeInfo> Project(const nlohmann::json& node) {
  GPUNODE_ASSIGN_OR_RETURN(Fields root, Fields::Root(node, "Node"));
  GPUNODE_ASSIGN_OR_RETURN(Fields meta, root.Object("metadata"));
  GPUNODE_ASSIGN_OR_RETURN(auto labels, meta.StringMap("labels"));
  return NodeInfo{labels.count("gpu") ? labels["gpu"] : ""};
}

template <typename F>
bool Eventually(F f, milliseconds within = milliseconds(5000)) {
  const auto end = std::chrono::steady_clock::now() + within;
  while (std::chrono::steady_clock::now() < end) {
    if (f()) return true;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return f();
}

class ReflectorTest : public ::testing::Test {
 protected:
  ReflectorTest() {
    EXPECT_OK(ParseServer(api_.url(), &conn_));
    ClientOptions o;
    o.qps = 0;
    client_ = std::make_unique<Client>(conn_, o);
  }
  void AddNode(const std::string& name, const std::string& gpu) {
    api_.PutObject(FakeApiServer::NodePath(name),
                   {{"kind", "Node"}, {"metadata", {{"name", name}, {"labels", {{"gpu", gpu}}}}}});
  }
  Store<NodeInfo>::Options StoreOptions() {
    Store<NodeInfo>::Options so;
    so.project = Project;
    so.handlers.on_add = [this](const std::string& k, const NodeInfo&) { Note("add " + k); };
    so.handlers.on_update = [this](const std::string& k, const NodeInfo& a, const NodeInfo& b) {
      Note("update " + k + " " + a.gpu + "->" + b.gpu);
    };
    so.handlers.on_delete = [this](const std::string& k, const NodeInfo&) { Note("delete " + k); };
    so.size_of = [](const NodeInfo& n) { return n.gpu.capacity(); };
    return so;
  }
  ReflectorOptions Options() {
    ReflectorOptions ro;
    ro.path = "/api/v1/nodes";
    ro.backoff = milliseconds(20);
    ro.max_backoff = milliseconds(100);
    return ro;
  }
  void Note(const std::string& s) {
    std::lock_guard<std::mutex> l(mu_);
    notes_.push_back(s);
  }
  bool Noted(const std::string& s) {
    std::lock_guard<std::mutex> l(mu_);
    return std::find(notes_.begin(), notes_.end(), s) != notes_.end();
  }

  FakeApiServer api_;
  Connection conn_;
  std::unique_ptr<Client> client_;
  std::mutex mu_;
  std::vector<std::string> notes_;
};

TEST_F(ReflectorTest, ListsThenWatchesAndKeepsOnlyTheProjection) {
  AddNode("a", "h100");
  AddNode("b", "a100");
  Informer<NodeInfo> nodes(*client_, Options(), StoreOptions());
  EXPECT_FALSE(nodes.store().HasSynced());
  nodes.Start();
  ASSERT_TRUE(nodes.store().WaitForSync(seconds(5)));
  EXPECT_EQ(nodes.store().size(), 2u);
  EXPECT_EQ(nodes.store().Get("a")->gpu, "h100");
  EXPECT_TRUE(Eventually([&] { return Noted("add a"); })) << "handlers run after the store changed";
  EXPECT_EQ(api_.Count("GET /api/v1/nodes?limit=500&resourceVersion=0"), 1)
      << "the first list from the watch cache; asked: " << ::testing::PrintToString(api_.Requests());

  api_.SetLabel("a", "gpu", "h200");
  ASSERT_TRUE(Eventually([&] { return nodes.store().Get("a")->gpu == "h200"; }));
  EXPECT_TRUE(Noted("update a h100->h200"));
  AddNode("c", "l4");
  ASSERT_TRUE(Eventually([&] { return nodes.store().size() == 3; }));
  api_.DeleteObject(FakeApiServer::NodePath("b"));
  ASSERT_TRUE(Eventually([&] { return !nodes.store().Get("b"); }));
  EXPECT_TRUE(Noted("delete b"));
  EXPECT_GT(nodes.store().bytes(), 0u);
  const auto st = nodes.reflector().stats();
  EXPECT_EQ(st.lists, 1);
  EXPECT_GE(st.events, 3);
  EXPECT_EQ(st.expired, 0);
  nodes.Stop();
}

TEST_F(ReflectorTest, A410ExpiredWatchIsFollowedByANewListThatSeesWhatChangedMeanwhile) {
  AddNode("a", "h100");
  AddNode("b", "a100");
  Informer<NodeInfo> nodes(*client_, Options(), StoreOptions());
  nodes.Start();
  ASSERT_TRUE(nodes.store().WaitForSync(seconds(5)));
  // The watches end and the server refuses new ones while it changes and forgets its history;
  // the next watch, from the old version, is answered with an ERROR event of code 410.
  api_.On("GET", "/api/v1/nodes", {FakeApiServer::ApiStatus(503, "ServiceUnavailable", "restarting")});
  api_.EndWatches();
  // 20 s: three refused watches, each after the reflector's backoff, on a loaded 2-core ASan run
  // took over 5 s once; a pass takes ~0.2 s.
  ASSERT_TRUE(Eventually([&] { return api_.Count("GET /api/v1/nodes?watch=1") >= 3; }, seconds(20)));
  api_.DeleteObject(FakeApiServer::NodePath("b"));
  AddNode("c", "l4");
  api_.Compact();
  api_.On("GET", "/api/v1/nodes", {nullptr});
  ASSERT_TRUE(Eventually([&] { return nodes.reflector().stats().expired >= 1; })) << api_.Requests().size();
  ASSERT_TRUE(Eventually([&] { return nodes.store().size() == 2 && nodes.store().Get("c").has_value(); }));
  EXPECT_FALSE(nodes.store().Get("b").has_value());
  EXPECT_TRUE(Eventually([&] { return Noted("delete b") && Noted("add c"); }));
  EXPECT_GE(nodes.reflector().stats().lists, 2);
}

TEST_F(ReflectorTest, BookmarksAdvanceTheResourceVersionWithoutAnEvent) {
  AddNode("a", "h100");
  Informer<NodeInfo> nodes(*client_, Options(), StoreOptions());
  nodes.Start();
  ASSERT_TRUE(nodes.store().WaitForSync(seconds(5)));
  ASSERT_TRUE(Eventually([&] { return api_.Count("GET /api/v1/nodes?watch=1&allowWatchBookmarks=true") >= 1; }));
  api_.PutObject("/api/v1/other/x", {{"metadata", {{"name", "x"}}}});  // moves the server's version
  api_.Bookmark("/api/v1/nodes");
  const std::string want = std::to_string(api_.resource_version());
  ASSERT_TRUE(Eventually([&] { return nodes.reflector().resource_version() == want; }));
  EXPECT_EQ(nodes.reflector().stats().bookmarks, 1);
  EXPECT_EQ(nodes.reflector().stats().events, 0);
}

TEST_F(ReflectorTest, PagesAreReadOneByOneAndAMalformedObjectIsSkipped) {
  for (int i = 0; i < 25; ++i) AddNode("n" + std::to_string(i), "g");
  api_.PutObject(FakeApiServer::NodePath("bad"), {{"metadata", {{"name", "bad"}, {"labels", "not-an-object"}}}});
  ReflectorOptions ro = Options();
  ro.page_size = 10;
  Informer<NodeInfo> nodes(*client_, ro, StoreOptions());
  nodes.Start();
  ASSERT_TRUE(nodes.store().WaitForSync(seconds(5)));
  EXPECT_EQ(nodes.store().size(), 25u);
  EXPECT_EQ(nodes.store().skipped(), 1u);
  EXPECT_EQ(api_.Count("GET /api/v1/nodes?limit=10"), 3);
}

TEST_F(ReflectorTest, AFailedListIsRetriedWithBackoffAndWaitForSyncHasADeadline) {
  AddNode("a", "h100");
  api_.On("GET", "/api/v1/nodes", {FakeApiServer::ApiStatus(429, "TooManyRequests", "slow down"),
                                   FakeApiServer::ApiStatus(500, "InternalError", "etcd is away"), nullptr});
  Informer<NodeInfo> nodes(*client_, Options(), StoreOptions());
  EXPECT_FALSE(nodes.store().WaitForSync(milliseconds(50))) << "not started: not synced, and the wait ends";
  nodes.Start();
  ASSERT_TRUE(nodes.store().WaitForSync(seconds(5)));
  EXPECT_EQ(nodes.reflector().stats().list_failures, 2);
}

TEST_F(ReflectorTest, StopEndsAQuietWatchAtOnce) {
  AddNode("a", "h100");
  Informer<NodeInfo> nodes(*client_, Options(), StoreOptions());
  nodes.Start();
  ASSERT_TRUE(nodes.store().WaitForSync(seconds(5)));
  ASSERT_TRUE(Eventually([&] { return api_.Count("GET /api/v1/nodes?watch=1") >= 1; }));
  const auto t0 = std::chrono::steady_clock::now();
  nodes.Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, seconds(2));
}

TEST(ObjectKey, NamespacedAndClusterScoped) {
  EXPECT_EQ(*ObjectKey({{"metadata", {{"name", "n1"}}}}), "n1");
  EXPECT_EQ(*ObjectKey({{"metadata", {{"name", "p"}, {"namespace", "ns"}}}}), "ns/p");
  auto bad = ObjectKey({{"metadata", {{"name", 3}}}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("metadata.name: expected a string"), std::string::npos) << bad.status();
  EXPECT_FALSE(ObjectKey({{"metadata", nlohmann::json::object()}}).ok());
}

}  // namespace
}  // namespace gpunode::kube
