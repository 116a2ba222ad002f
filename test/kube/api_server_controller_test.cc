// The controller machinery against the real API server (ctest kube_api_k8s): two writers that
// never lose each other's labels (server-side apply), leader election between two candidates on a
// real Lease, and 1 000 Nodes made by the test: a reflector + store that stays small and a work
// queue fed by their events that never runs two workers on one key. Numbers go to stderr.
// Skipped unless GPUNODE_TEST_KUBECONFIG names the test cluster's admin kubeconfig.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "src/kube/json_fields.h"
#include "src/kube/leader_election.h"
#include "src/kube/store.h"
#include "src/kube/work_queue.h"
#include "test/kube/api_server_fixture.h"
#include "test/testing/status_matchers.h"

namespace gpunode::kube {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Steady = std::chrono::steady_clock;

class ApiServerController : public ApiServer {
 protected:
  std::unique_ptr<Client> NewClient(int connections = 4) {
    ClientOptions o;
    o.qps = 0;  // as fast as the API server takes it
    o.max_connections = connections;
    o.timeout = milliseconds(30000);
    return std::make_unique<Client>(admin_conn_, o);
  }
};

// Runs f(i) for i in [0, n) on `threads` threads.
void Parallel(int n, int threads, const std::function<void(int)>& f) {
  std::atomic<int> next{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&] {
      for (int i = next++; i < n; i = next++) f(i);
    });
  }
  for (auto& t : ts) t.join();
}

int64_t RssKiB() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) {
      int64_t kib = 0;
      std::vector<std::string> parts = absl::StrSplit(line, ' ', absl::SkipEmpty());
      if (parts.size() >= 2 && absl::SimpleAtoi(parts[1], &kib)) return kib;
    }
  }
  return -1;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * (v.size() - 1) + 0.5))];
}

// (b) Two independent writers change labels of one Node many times at once: gpunode's apply
// (field manager gpunode) and another manager's merge patch and apply. No label of either is
// ever lost: each writes only its own keys, and the API server merges them.
TEST_F(ApiServerController, TwoWritersRacingOnOneNodeLoseNoLabel) {
  const std::string path = "/api/v1/nodes/" + node_;
  auto gpunode_client = NewClient();
  auto other_client = NewClient();
  constexpr int kRounds = 40;
  std::atomic<int> lost{0}, errors{0};
  std::thread ours([&] {
    for (int i = 0; i < kRounds; ++i) {
      auto r = ApplyNodeLabels(*gpunode_client, node_,
                               {{"gpunode.io/race-fixed", "1"}, {"gpunode.io/race-n", std::to_string(i)}});
      if (!r.ok()) {
        ++errors;
        ADD_FAILURE() << r.status();
      }
    }
  });
  std::thread theirs([&] {
    for (int i = 0; i < kRounds; ++i) {
      // Another manager's apply, and a merge patch (an Update, as kubectl label or NFD writes).
      auto a = other_client->Apply(path, {{"apiVersion", "v1"}, {"kind", "Node"},
                                          {"metadata", {{"name", node_}, {"labels", {{"example.com/race-fixed", "1"},
                                                                                      {"example.com/race-n", std::to_string(i)}}}}}},
                                   "race-other", false);
      auto m = other_client->MergePatch(path, {{"metadata", {{"labels", {{"example.com/race-patch", std::to_string(i)}}}}}});
      if (!a.ok() || !m.ok()) {
        ++errors;
        ADD_FAILURE() << (a.ok() ? m.status() : a.status());
      }
    }
  });
  std::thread watcher([&] {  // the keys that every writer keeps are never missing from the Node
    for (int i = 0; i < 3 * kRounds; ++i) {
      auto n = admin_->Get(path);
      if (!n.ok()) continue;
      const auto labels = (*n)["metadata"].value("labels", nlohmann::json::object());
      if (labels.contains("gpunode.io/race-n") && !labels.contains("gpunode.io/race-fixed")) ++lost;
      if (labels.contains("example.com/race-n") && !labels.contains("example.com/race-fixed")) ++lost;
    }
  });
  ours.join();
  theirs.join();
  watcher.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(lost.load(), 0);
  auto l = Labels();
  EXPECT_EQ(l["gpunode.io/race-fixed"], "1");
  EXPECT_EQ(l["gpunode.io/race-n"], std::to_string(kRounds - 1));
  EXPECT_EQ(l["example.com/race-fixed"], "1");
  EXPECT_EQ(l["example.com/race-n"], std::to_string(kRounds - 1));
  EXPECT_EQ(l["example.com/race-patch"], std::to_string(kRounds - 1));
  // Clean up: gpunode's keys by dropping them, the other manager's likewise, the patched one by patch.
  ASSERT_OK(RemoveNodeLabels(*admin_, node_));
  ASSERT_OK(other_client->Apply(path, {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", node_}}}},
                                "race-other", false));
  ASSERT_OK(admin_->MergePatch(path, {{"metadata", {{"labels", {{"example.com/race-patch", nullptr}}}}}}));
  l = Labels();
  for (const char* k : {"gpunode.io/race-fixed", "gpunode.io/race-n", "example.com/race-fixed", "example.com/race-n",
                        "example.com/race-patch"}) {
    EXPECT_FALSE(l.contains(k)) << k;
  }
}

// (c) Two candidates for one Lease: exactly one leads; the other takes over when the first stops
// (released: at once) and when the leader stops renewing (its client cut off: after the lease
// duration as observed by the other).
TEST_F(ApiServerController, LeaderElectionBetweenTwoCandidates) {
  const std::string lease = "/apis/coordination.k8s.io/v1/namespaces/default/leases/gpunode-test-election";
  (void)admin_->Delete(lease);
  struct Candidate {
    std::unique_ptr<Client> client;
    std::unique_ptr<LeaderElector> elector;
    std::atomic<int> leading{0};
    std::jthread thread;
  };
  std::atomic<int> leaders{0}, max_leaders{0};
  auto make = [&](Candidate& c, const std::string& id) {
    c.client = NewClient();
    LeaderElectionConfig cfg;
    cfg.ns = "default";
    cfg.name = "gpunode-test-election";
    cfg.identity = id;
    cfg.lease_duration = seconds(3);
    cfg.renew_deadline = seconds(2);
    cfg.retry_period = milliseconds(300);
    cfg.on_started_leading = [&, p = &c](std::stop_token stop) {
      ++p->leading;
      const int now = ++leaders;
      int m = max_leaders.load();
      while (now > m && !max_leaders.compare_exchange_weak(m, now)) {
      }
      while (!stop.stop_requested()) std::this_thread::sleep_for(milliseconds(5));
      --leaders;
    };
    auto e = LeaderElector::Create(*c.client, cfg);
    ASSERT_OK(e);
    c.elector = *std::move(e);
    c.thread = std::jthread([p = &c](std::stop_token s) { p->elector->Run(s); });
  };
  Candidate a, b;
  make(a, "candidate-a");
  const auto t0 = Steady::now();
  while (!a.elector->IsLeader() && Steady::now() - t0 < seconds(10)) std::this_thread::sleep_for(milliseconds(10));
  ASSERT_TRUE(a.elector->IsLeader());
  make(b, "candidate-b");
  std::this_thread::sleep_for(seconds(4));  // longer than the lease: a renews, b must not take it
  EXPECT_TRUE(a.elector->IsLeader());
  EXPECT_FALSE(b.elector->IsLeader());
  EXPECT_EQ(b.leading.load(), 0);

  // a stops: it releases the Lease and b takes it within a retry period or two.
  auto t1 = Steady::now();
  a.thread.request_stop();
  a.thread.join();
  while (!b.elector->IsLeader() && Steady::now() - t1 < seconds(10)) std::this_thread::sleep_for(milliseconds(10));
  ASSERT_TRUE(b.elector->IsLeader());
  const double release_ms = std::chrono::duration<double, std::milli>(Steady::now() - t1).count();
  EXPECT_LT(release_ms, 3000) << "released: no need to wait out the lease";

  // a stands again; b stops renewing (its API calls cut off): a takes over after the lease expires.
  Candidate a2;
  make(a2, "candidate-a");
  std::this_thread::sleep_for(milliseconds(800));
  EXPECT_FALSE(a2.elector->IsLeader());
  auto t2 = Steady::now();
  b.client->Stop();
  while (!a2.elector->IsLeader() && Steady::now() - t2 < seconds(15)) std::this_thread::sleep_for(milliseconds(10));
  ASSERT_TRUE(a2.elector->IsLeader());
  const double takeover_ms = std::chrono::duration<double, std::milli>(Steady::now() - t2).count();
  EXPECT_GE(takeover_ms, 2000) << "not before b's lease (3 s, as seen by a) ran out";
  b.thread.join();  // b gave up leading at its renew deadline
  EXPECT_FALSE(b.elector->IsLeader());
  EXPECT_EQ(max_leaders.load(), 1) << "never two leaders at once in this process";
  auto l = admin_->Get(lease);
  ASSERT_OK(l);
  EXPECT_EQ((*l)["spec"]["holderIdentity"], "candidate-a");
  EXPECT_EQ((*l)["spec"]["leaseTransitions"], 2);
  std::cerr << "leader election: takeover after release " << release_ms << " ms, after the leader stopped renewing "
            << takeover_ms << " ms (lease 3 s, renew deadline 2 s, retry 0.3 s)\n";
  a2.thread.request_stop();
  a2.thread.join();
  ASSERT_OK(admin_->Delete(lease));
}

// (a) 1 000 Nodes made by the test: a reflector + store syncs them holding a small projection
// (memory measured), and a work queue fed by their events never has two workers on one key.
// (d) `gpunode fleet` against them: requests and memory.
TEST_F(ApiServerController, AThousandNodesSyncIntoABoundedStoreAndOneKeyIsNeverWorkedTwiceAtOnce) {
  constexpr int kNodes = 1000;
  auto writer = NewClient(16);
  auto name = [](int i) { return absl::StrCat("gpunode-scale-", 1000 + i); };
  auto cleanup = [&] {
    Parallel(kNodes, 16, [&](int i) { (void)writer->Delete("/api/v1/nodes/" + name(i)); });
  };
  cleanup();
  std::vector<double> create_ms(kNodes);
  const auto c0 = Steady::now();
  std::atomic<int> create_errors{0};
  Parallel(kNodes, 16, [&](int i) {
    const auto t = Steady::now();
    nlohmann::json node = {{"apiVersion", "v1"}, {"kind", "Node"},
                           {"metadata", {{"name", name(i)}, {"labels", {{"gpunode.io/scale", "1"},
                                                                         {"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"},
                                                                         {"nvidia.com/gpu.count", "8"}}}}},
                           {"status", {{"capacity", {{"nvidia.com/gpu", "8"}, {"cpu", "96"}, {"memory", "2Ti"}}}}}};
    auto made = writer->Post("/api/v1/nodes", node);
    if (!made.ok()) ++create_errors;
    create_ms[i] = std::chrono::duration<double, std::milli>(Steady::now() - t).count();
  });
  const double create_s = std::chrono::duration<double>(Steady::now() - c0).count();
  ASSERT_EQ(create_errors.load(), 0);

  // The store keeps what a controller needs of each Node: its GPU count and product.
  struct NodeGpus {
    std::string product;
    std::string count;
  };
  std::atomic<size_t> json_bytes{0};
  Store<NodeGpus>::Options so;
  so.project = [&](const nlohmann::json& n) -> StatusOr<NodeGpus> {
    json_bytes += n.dump().size();
    GPUNODE_ASSIGN_OR_RETURN(Fields root, Fields::Root(n, "Node"));
    GPUNODE_ASSIGN_OR_RETURN(Fields meta, root.Object("metadata"));
    GPUNODE_ASSIGN_OR_RETURN(auto labels, meta.StringMap("labels"));
    return NodeGpus{labels["nvidia.com/gpu.product"], labels["nvidia.com/gpu.count"]};
  };
  so.size_of = [](const NodeGpus& g) { return g.product.capacity() + g.count.capacity(); };
  WorkQueue queue;
  std::atomic<int> events{0};
  so.handlers.on_add = [&](const std::string& k, const NodeGpus&) { ++events, queue.Add(k); };
  so.handlers.on_update = [&](const std::string& k, const NodeGpus&, const NodeGpus&) { ++events, queue.Add(k); };
  so.handlers.on_delete = [&](const std::string& k, const NodeGpus&) { ++events, queue.Add(k); };
  std::mutex busy_mu;
  std::map<std::string, std::unique_ptr<std::atomic<int>>> busy;
  for (int i = 0; i < kNodes; ++i) busy[name(i)] = std::make_unique<std::atomic<int>>(0);
  std::atomic<int> overlaps{0}, processed{0};
  std::vector<std::thread> workers;
  for (int w = 0; w < 8; ++w) {
    workers.emplace_back([&] {
      while (auto key = queue.Get()) {
        std::atomic<int>* b = busy.at(*key).get();
        if (b->fetch_add(1) != 0) ++overlaps;
        std::this_thread::sleep_for(std::chrono::microseconds(300));  // a sync's work
        b->fetch_sub(1);
        ++processed;
        queue.Done(*key);
      }
    });
  }
  ReflectorOptions ro;
  ro.path = "/api/v1/nodes?labelSelector=gpunode.io%2Fscale%3D1";
  auto reader = NewClient();
  const int64_t rss_before = RssKiB();
  Informer<NodeGpus> informer(*reader, ro, so);
  const auto s0 = Steady::now();
  informer.Start();
  ASSERT_TRUE(informer.store().WaitForSync(seconds(60)));
  const double sync_ms = std::chrono::duration<double, std::milli>(Steady::now() - s0).count();
  const int64_t rss_synced = RssKiB();
  EXPECT_EQ(informer.store().size(), static_cast<size_t>(kNodes));
  const size_t listed_json = json_bytes.load();

  // Events for every Node, three rounds, 16 writes in flight.
  const auto p0 = Steady::now();
  for (int round = 0; round < 3; ++round) {
    Parallel(kNodes, 16, [&](int i) {
      (void)writer->MergePatch("/api/v1/nodes/" + name(i),
                               {{"metadata", {{"labels", {{"nvidia.com/gpu.count", std::to_string(round)}}}}}});
    });
  }
  const double patch_s = std::chrono::duration<double>(Steady::now() - p0).count();
  const auto all_seen = [&] {
    for (int i = 0; i < kNodes; i += 97) {
      auto g = informer.store().Get(name(i));
      if (!g || g->count != "2") return false;
    }
    return true;
  };
  const auto w0 = Steady::now();
  while (!all_seen() && Steady::now() - w0 < seconds(60)) std::this_thread::sleep_for(milliseconds(20));
  EXPECT_TRUE(all_seen());
  const int64_t rss_after_events = RssKiB();
  const size_t store_bytes = informer.store().bytes();

  // (d) gpunode fleet against the same API server: its requests (the API server's own count) and memory.
  std::string fleet_report;
  const std::string bin = std::string(GPUNODE_BIN_DIR) + "/gpunode";
  if (access(bin.c_str(), X_OK) == 0 && access("/usr/bin/time", X_OK) == 0) {
    // fleet's requests: the pages of the list it makes (limit=500, resourceVersion=0), counted here.
    ListOptions lo;
    lo.resource_version = "0";
    auto pages = reader->List("/api/v1/nodes", lo, [](nlohmann::json&) { return absl::OkStatus(); });
    const std::string out = "/tmp/gpunode-fleet-scale.txt";
    const std::string cmd = absl::StrCat("/usr/bin/time -v ", bin, " fleet --kubeconfig ", std::getenv("GPUNODE_TEST_KUBECONFIG"),
                                         " -o json > /dev/null 2> ", out);
    const auto f0 = Steady::now();
    const int rc = std::system(cmd.c_str());
    const double fleet_ms = std::chrono::duration<double, std::milli>(Steady::now() - f0).count();
    std::ifstream in(out);
    std::string line;
    while (std::getline(in, line)) {
      if (line.find("Maximum resident set size") != std::string::npos || line.find("Elapsed (wall") != std::string::npos) {
        fleet_report += "  " + line + "\n";
      }
    }
    fleet_report = absl::StrCat("gpunode fleet (", pages.ok() ? pages->items : 0, " Nodes): exit ", WEXITSTATUS(rc), ", ",
                                fleet_ms, " ms, ", pages.ok() ? pages->pages : -1, " list requests (pages of 500)\n",
                                fleet_report);
  }

  informer.Stop();
  queue.ShutDown();
  for (auto& t : workers) t.join();
  EXPECT_EQ(overlaps.load(), 0) << "two workers had one key at once";
  EXPECT_GE(processed.load(), kNodes);
  const auto st = informer.reflector().stats();
  std::cerr << "1000 Nodes: created in " << create_s << " s (16 in flight; per request median "
            << Percentile(create_ms, 0.5) << " ms, p99 " << Percentile(create_ms, 0.99) << " ms); 3000 label patches in "
            << patch_s << " s\n"
            << "reflector: synced in " << sync_ms << " ms (" << st.lists << " list, " << st.watches << " watch requests, "
            << st.events << " events); store " << store_bytes << " bytes for " << informer.store().size()
            << " Nodes (" << store_bytes / kNodes << " per Node) vs " << listed_json << " bytes of their JSON as listed ("
            << listed_json / kNodes << " per Node)\n"
            << "RSS of the test process: " << rss_before << " KiB before the list, " << rss_synced << " KiB synced, "
            << rss_after_events << " KiB after 3000 events\n"
            << "work queue: " << events.load() << " events, " << processed.load() << " syncs by 8 workers, overlaps "
            << overlaps.load() << "\n"
            << fleet_report;
  EXPECT_LT(store_bytes, listed_json / 4) << "the store keeps the projection, not the JSON";
  EXPECT_LT(rss_synced - rss_before, 64 * 1024) << "KiB";
  cleanup();
}

}  // namespace
}  // namespace gpunode::kube
