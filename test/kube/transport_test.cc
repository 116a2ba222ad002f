// The client as a transport a controller can use: limits set per client and per call, a stop that
// ends any call at once (even one stuck in a TLS handshake), the API server's reason kept,
// Retry-After, the rate limit, many calls at once, lists page by page, randomised watch timeouts,
// the private CA file. Against the in-process stand-in (test/testing/fake_api_server.h).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <set>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/base/clock.h"
#include "src/kube/client.h"
#include "src/kube/node.h"
#include "src/kube/transport.h"
#include "test/testing/fake_api_server.h"
#include "test/testing/status_matchers.h"
#include "test/testing/temp_dir_test.h"
#include "test/testing/test_certs.h"

namespace gpunode::kube {
namespace {

using ::gpunode::testing::FakeApiServer;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

Connection To(const FakeApiServer& api) {
  Connection c;
  EXPECT_TRUE(ParseServer(api.url(), &c).ok());
  c.source = "test";
  return c;
}

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

TEST(Transport, BodyAndLineCapsAreSettable) {
  FakeApiServer api;
  api.On("GET", "/big", {FakeApiServer::HugeBody(2 << 20)});
  api.On("GET", "/api/v1/nodes", {FakeApiServer::EndlessLine(3 << 20)});
  ClientOptions o;
  o.max_body_bytes = 1 << 20;
  o.max_watch_line_bytes = 256 << 10;
  Client client(To(api), o);
  auto big = client.Get("/big");
  EXPECT_EQ(big.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(big.status().message(), HasSubstr("GET /big: the answer is larger than 1 MiB"));
  Status line = client.Watch("/api/v1/nodes", "", 10, [](const std::string&, const nlohmann::json&) { return true; });
  EXPECT_EQ(line.code(), absl::StatusCode::kResourceExhausted) << line;
  EXPECT_THAT(line.message(), HasSubstr("longer than 256 KiB"));
  // The connection pool recovers: the next call works.
  api.On("GET", "/big", {FakeApiServer::Json(200, {{"ok", true}})});
  EXPECT_OK(client.Get("/big"));
}

TEST(Transport, ACallCanCapItsAnswerBelowTheClientsCap) {
  FakeApiServer api;
  api.On("GET", "/pod", {FakeApiServer::HugeBody(3 << 20), FakeApiServer::HugeBody(3 << 20),
                         FakeApiServer::Json(200, {{"ok", true}})});
  Client client(To(api));  // 64 MiB by default
  CallOptions call;
  call.max_body_bytes = 2 << 20;
  auto big = client.Get("/pod", call);
  EXPECT_EQ(big.status().code(), absl::StatusCode::kResourceExhausted) << big.status();
  EXPECT_THAT(big.status().message(), HasSubstr("GET /pod: the answer is larger than 2 MiB (this call's body cap"));
  // Without the call's cap, the client's 64 MiB: the 3 MiB are read (and are not JSON).
  auto read = client.Get("/pod");
  EXPECT_EQ(read.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(read.status().message().find("not valid JSON"), std::string::npos);  // (not printed: 3 MiB)
  EXPECT_OK(client.Get("/pod", call));  // a small answer passes and the pool recovered
}

TEST(Transport, ADeadlineOfItsOwnPerCall) {
  FakeApiServer api;
  api.On("GET", "/slow", {FakeApiServer::Slow(std::chrono::seconds(3), FakeApiServer::Json(200, {}))});
  Client client(To(api));  // 10 s by default
  CallOptions call;
  call.timeout = std::chrono::milliseconds(300);
  const auto start = Clock::now();
  auto r = client.Get("/slow", call);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
  EXPECT_LT(Seconds(Clock::now() - start), 0.8);
}

TEST(Transport, AStopTokenEndsAnInFlightCallAtOnce) {
  FakeApiServer api;
  api.On("GET", "/trickle", {FakeApiServer::Trickle("x", std::chrono::milliseconds(20), std::chrono::seconds(5))});
  Client client(To(api));
  std::stop_source stop;
  CallOptions call;
  call.stop = stop.get_token();
  Clock::time_point stopped_at;
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    stopped_at = Clock::now();
    stop.request_stop();
  });
  auto r = client.Get("/trickle", call);
  const auto ended = Clock::now();
  stopper.join();
  EXPECT_EQ(r.status().code(), absl::StatusCode::kCancelled) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr("GET /trickle: stopped"));
  EXPECT_LT(Seconds(ended - stopped_at), 0.25);  // ~ms; a loaded 2-core CI runner needs slack
  // A stop requested before the call: nothing is sent.
  auto before = client.Get("/trickle", call);
  EXPECT_EQ(before.status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(api.Count("GET /trickle"), 1);
}

// A "server" that accepts TCP connections and never says a word: a TLS handshake waits on it. The
// stop must not wait for the handshake (cpp-httplib's own stop() does: it holds a mutex then).
TEST(Transport, AStopEndsACallStuckInTheTlsHandshake) {
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(listener, 16), 0);  // the kernel completes the connect; nobody accepts
  socklen_t len = sizeof addr;
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
  Connection c;
  ASSERT_OK(ParseServer("https://127.0.0.1:" + std::to_string(ntohs(addr.sin_port)), &c));
  ClientOptions o;
  o.connect_timeout = std::chrono::seconds(30);
  o.timeout = std::chrono::seconds(30);
  Client client(c, o);
  Clock::time_point stopped_at;
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    stopped_at = Clock::now();
    client.Stop();
  });
  auto r = client.Get("/api");
  const auto ended = Clock::now();
  stopper.join();
  EXPECT_EQ(r.status().code(), absl::StatusCode::kCancelled) << r.status();
  EXPECT_LT(Seconds(ended - stopped_at), 0.25);  // ~ms; a loaded 2-core CI runner needs slack
  EXPECT_EQ(client.Get("/api").status().code(), absl::StatusCode::kCancelled) << "a stopped client sends nothing";

  // The call's deadline ends the handshake too.
  o.timeout = std::chrono::milliseconds(400);
  Client deadline(c, o);
  const auto start = Clock::now();
  auto d = deadline.Get("/api");
  EXPECT_EQ(d.status().code(), absl::StatusCode::kDeadlineExceeded) << d.status();
  EXPECT_LT(Seconds(Clock::now() - start), 0.6);
  ::close(listener);
}

TEST(Transport, StopEndsAQuietWatchAtOnce) {
  FakeApiServer api;
  api.On("GET", "/api/v1/nodes", {FakeApiServer::WatchEvents({}, /*hold_open=*/true)});
  Client client(To(api));
  std::stop_source stop;
  Client::WatchOptions w;
  w.timeout_seconds = 300;
  w.stop = stop.get_token();
  Clock::time_point stopped_at;
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    stopped_at = Clock::now();
    stop.request_stop();
  });
  Status st = client.Watch("/api/v1/nodes", w, [](const std::string&, const nlohmann::json&) { return true; });
  const auto ended = Clock::now();
  stopper.join();
  EXPECT_OK(st);
  EXPECT_LT(Seconds(ended - stopped_at), 0.25);  // ~ms; a loaded 2-core CI runner needs slack
}

TEST(Transport, TheServersReasonIsKept) {
  FakeApiServer api;
  api.On("POST", "/api/v1/namespaces/default/events", {FakeApiServer::ApiStatus(409, "AlreadyExists", "exists")});
  api.On("PUT", "/api/v1/nodes/n1", {FakeApiServer::ApiStatus(409, "Conflict", "modified")});
  api.On("GET", "/api/v1/nodes", {FakeApiServer::ApiStatus(410, "Expired", "too old resource version")});
  api.On("GET", "/api/v1/pods", {FakeApiServer::WatchEvents(
                                    {R"({"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Gone","message":"too old"}})"})});
  Client client(To(api));
  auto exists = client.Post("/api/v1/namespaces/default/events", {{"kind", "Event"}});
  auto conflict = client.Put("/api/v1/nodes/n1", {{"kind", "Node"}});
  EXPECT_TRUE(absl::IsAborted(exists.status()) && absl::IsAborted(conflict.status())) << "the code mapping is kept";
  EXPECT_EQ(ReasonOf(exists.status()), "AlreadyExists");
  EXPECT_EQ(ReasonOf(conflict.status()), "Conflict");
  auto e = ApiErrorOf(conflict.status());
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->http_code, 409);
  EXPECT_EQ(e->retry_after_seconds, -1);
  auto expired = client.Get("/api/v1/nodes?continue=abc");
  EXPECT_EQ(ReasonOf(expired.status()), "Expired");
  Status gone = client.Watch("/api/v1/pods", "5", 10, [](const std::string&, const nlohmann::json&) { return true; });
  EXPECT_TRUE(absl::IsAborted(gone)) << gone;
  EXPECT_EQ(ReasonOf(gone), "Gone");
  EXPECT_EQ(ReasonOf(absl::NotFoundError("not from the API server")), "");
}

TEST(Transport, UpdateWithRetryRetriesAConflictButNotAlreadyExists) {
  FakeApiServer api;
  api.PutObject("/api/v1/nodes/n1", {{"metadata", {{"name", "n1"}}}});
  api.On("PUT", "/api/v1/nodes/n1", {FakeApiServer::ApiStatus(409, "Conflict", "modified"),
                                     FakeApiServer::Json(200, {{"metadata", {{"name", "n1"}}}})});
  Client client(To(api));
  auto attempts = UpdateWithRetry(client, "/api/v1/nodes/n1", [](nlohmann::json& o, int) {
    o["metadata"]["labels"]["gpunode.io/x"] = "1";
    return true;
  });
  ASSERT_OK(attempts) << attempts.status();
  EXPECT_EQ(*attempts, 2);
  api.On("PUT", "/api/v1/nodes/n1", {FakeApiServer::ApiStatus(409, "AlreadyExists", "exists")});
  auto other = UpdateWithRetry(client, "/api/v1/nodes/n1", [](nlohmann::json&, int) { return true; });
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(ReasonOf(other.status()), "AlreadyExists");
  EXPECT_EQ(api.Count("PUT"), 3) << "two for the conflict, one for AlreadyExists";
}

TEST(Transport, RetryAfterIsBoundedAndPostIsRetriedOnlyOn429) {
  FakeApiServer api;
  api.On("POST", "/busy", {FakeApiServer::ApiStatus(503, "ServiceUnavailable", "later", 0),
                           FakeApiServer::Json(201, {})});
  api.On("POST", "/throttled", {FakeApiServer::ApiStatus(429, "TooManyRequests", "later", 0),
                                FakeApiServer::Json(201, {})});
  api.On("GET", "/always", {FakeApiServer::ApiStatus(429, "TooManyRequests", "later", 0)});
  api.On("GET", "/long", {FakeApiServer::ApiStatus(429, "TooManyRequests", "later", 100), FakeApiServer::Json(200, {})});
  ClientOptions o;
  o.max_retries = 2;
  o.max_retry_after = std::chrono::milliseconds(200);
  Client client(To(api), o);
  auto busy = client.Post("/busy", {});
  EXPECT_TRUE(absl::IsUnavailable(busy.status())) << "a POST that may have run is not sent twice";
  EXPECT_EQ(api.Count("POST /busy"), 1);
  EXPECT_OK(client.Post("/throttled", {}));
  EXPECT_EQ(api.Count("POST /throttled"), 2);
  auto always = client.Get("/always");
  EXPECT_TRUE(absl::IsUnavailable(always.status()));
  EXPECT_EQ(ReasonOf(always.status()), "TooManyRequests");
  EXPECT_EQ(api.Count("GET /always"), 3) << "1 + max_retries";
  const auto start = Clock::now();
  EXPECT_OK(client.Get("/long"));
  const double took = Seconds(Clock::now() - start);
  EXPECT_GE(took, 0.19);
  EXPECT_LT(took, 1.0) << "Retry-After 100 s waited max_retry_after (200 ms)";
}

TEST(Transport, TheRateLimitSpacesCallsAndNeverWaitsPastTheDeadline) {
  FakeApiServer api;
  api.On("GET", "/x", {FakeApiServer::Json(200, {})});
  ClientOptions o;
  o.qps = 10;
  o.burst = 2;
  Client client(To(api), o);
  const auto start = Clock::now();
  for (int i = 0; i < 6; ++i) ASSERT_OK(client.Get("/x"));
  const double took = Seconds(Clock::now() - start);
  EXPECT_GE(took, 0.35) << "2 at once, then one every 100 ms";
  EXPECT_LT(took, 1.0);
  ClientOptions slow;
  slow.qps = 0.1;
  slow.burst = 1;
  Client limited(To(api), slow);
  ASSERT_OK(limited.Get("/x"));
  CallOptions call;
  call.timeout = std::chrono::milliseconds(200);
  const auto t0 = Clock::now();
  auto r = limited.Get("/x", call);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(r.status().message(), HasSubstr("the client's rate limit"));
  EXPECT_LT(Seconds(Clock::now() - t0), 0.1) << "refused at once, not after waiting";
}

TEST(Transport, ManyCallsAtOnceEachGetTheirAnswer) {
  FakeApiServer api;
  for (int i = 0; i < 8; ++i) {
    api.On("GET", "/n/" + std::to_string(i),
           {FakeApiServer::Slow(std::chrono::milliseconds(100), FakeApiServer::Json(200, {{"i", i}}))});
  }
  ClientOptions o;
  o.qps = 0;
  o.max_connections = 4;
  Client client(To(api), o);
  std::vector<std::thread> threads;
  std::atomic<int> right{0};
  const auto start = Clock::now();
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int k = 0; k < 2; ++k) {
        auto r = client.Get("/n/" + std::to_string(t));
        if (r.ok() && (*r)["i"] == t) ++right;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(right.load(), 16);
  // 16 calls of 100 ms over 4 connections: about 0.4 s, not 1.6 s.
  EXPECT_LT(Seconds(Clock::now() - start), 1.2);
}

nlohmann::json Page(const std::vector<std::string>& names, const std::string& next) {
  nlohmann::json items = nlohmann::json::array();
  for (const std::string& n : names) items.push_back({{"metadata", {{"name", n}}}});
  nlohmann::json page = {{"kind", "NodeList"}, {"metadata", {{"resourceVersion", "77"}}}, {"items", items}};
  if (!next.empty()) page["metadata"]["continue"] = next;
  return page;
}

TEST(Transport, ListsPageByPageFromTheWatchCache) {
  FakeApiServer api;
  api.On("GET", "/api/v1/nodes", {FakeApiServer::Json(200, Page({"a", "b"}, "t1")),
                                  FakeApiServer::Json(200, Page({"c"}, ""))});
  Client client(To(api));
  std::vector<std::string> names;
  ListOptions lo;
  lo.limit = 2;
  lo.resource_version = "0";
  auto r = client.List("/api/v1/nodes", lo, [&](nlohmann::json& item) {
    names.push_back(item["metadata"]["name"]);
    return absl::OkStatus();
  });
  ASSERT_OK(r) << r.status();
  EXPECT_EQ(names, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(r->pages, 2);
  EXPECT_EQ(r->items, 3u);
  EXPECT_EQ(r->resource_version, "77");
  EXPECT_EQ(api.Requests(), (std::vector<std::string>{"GET /api/v1/nodes?limit=2&resourceVersion=0",
                                                      "GET /api/v1/nodes?limit=2&continue=t1"}));
}

TEST(Transport, ListRefusesLoopsAndWrongTypes) {
  FakeApiServer api;
  api.On("GET", "/loop", {FakeApiServer::Json(200, Page({"a"}, "same"))});
  api.On("GET", "/typed", {FakeApiServer::Json(200, {{"metadata", {{"continue", 5}}}, {"items", nlohmann::json::array()}})});
  api.On("GET", "/items", {FakeApiServer::Json(200, {{"items", "none"}})});
  api.On("GET", "/array", {FakeApiServer::Json(200, nlohmann::json::array())});
  Client client(To(api));
  auto count = [](nlohmann::json&) { return absl::OkStatus(); };
  auto loop = client.List("/loop", {}, count);
  EXPECT_EQ(loop.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(loop.status().message(), HasSubstr("repeated continue token \"same\""));
  EXPECT_THAT(client.List("/typed", {}, count).status().message(), HasSubstr("metadata.continue: expected a string, got number"));
  EXPECT_THAT(client.List("/items", {}, count).status().message(), HasSubstr("items: expected an array, got string"));
  EXPECT_THAT(client.List("/array", {}, count).status().message(), HasSubstr("not a List object"));
  // An error from the caller ends the list.
  auto stop = client.List("/loop", {}, [](nlohmann::json&) { return absl::CancelledError("enough"); });
  EXPECT_EQ(stop.status().code(), absl::StatusCode::kCancelled);
}

TEST(Transport, WatchTimeoutsAreSpreadOverMinToTwiceMin) {
  FakeApiServer api;
  api.PutObject("/api/v1/nodes/n1", {{"metadata", {{"name", "n1"}}}});
  api.On("GET", "/api/v1/nodes", {FakeApiServer::WatchEndsAtOnce()});
  Client client(To(api));
  std::stop_source stop;
  WatchNodeOptions o;
  o.timeout_seconds = 100;
  o.backoff = std::chrono::milliseconds(5);
  o.max_backoff = std::chrono::milliseconds(10);
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    stop.request_stop();
  });
  EXPECT_OK(WatchNode(client, "n1", [](const nlohmann::json&) { return true; }, stop.get_token(), o));
  stopper.join();
  std::set<int> seen;
  for (const std::string& r : api.Requests()) {
    const size_t at = r.find("timeoutSeconds=");
    if (at == std::string::npos) continue;
    int t = 0;
    ASSERT_TRUE(absl::SimpleAtoi(r.substr(at + 15, r.find('&', at) - at - 15), &t)) << r;
    EXPECT_GE(t, 100);
    EXPECT_LT(t, 200);
    seen.insert(t);
  }
  EXPECT_GE(seen.size(), 3u) << "randomised: agents do not reconnect in lockstep";
}

// The watch's pauses run on its clock: with a FakeClock, a server that ends every watch at once
// is asked again only when time moves past the backoff, and a stop ends a pause at once.
TEST(Transport, WatchNodePausesOnItsClockAndAStopEndsAPause) {
  FakeApiServer api;
  api.PutObject("/api/v1/nodes/n1", {{"metadata", {{"name", "n1"}}}});
  api.On("GET", "/api/v1/nodes", {FakeApiServer::WatchEndsAtOnce()});
  Client client(To(api));
  FakeClock clock;
  WatchNodeOptions o;
  o.backoff = std::chrono::milliseconds(1000);
  o.max_backoff = std::chrono::milliseconds(1000);
  o.clock = &clock;
  std::stop_source stop;
  Status result = absl::UnknownError("not ended");
  std::thread t([&] { result = WatchNode(client, "n1", [](const nlohmann::json&) { return true; }, stop.get_token(), o); });
  ASSERT_TRUE(clock.AwaitWaiters(1, std::chrono::seconds(10))) << "the loop never paused";
  const int watches = api.Count("GET /api/v1/nodes?");
  EXPECT_EQ(watches, 1);
  clock.Advance(std::chrono::milliseconds(999));  // [b, 2b): not yet
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(api.Count("GET /api/v1/nodes?"), 1) << "watched again before the backoff passed";
  clock.Advance(std::chrono::milliseconds(1001));  // 2 s: past any draw from [1 s, 2 s)
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (api.Count("GET /api/v1/nodes?") < 2 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(api.Count("GET /api/v1/nodes?"), 2);
  ASSERT_TRUE(clock.AwaitWaiters(1, std::chrono::seconds(10))) << "no second pause";
  const auto stopped = std::chrono::steady_clock::now();
  stop.request_stop();
  t.join();
  EXPECT_OK(result);
  EXPECT_LT(std::chrono::steady_clock::now() - stopped, std::chrono::milliseconds(500)) << "a stop ends the pause";
}

TEST(Transport, TheAnnotationsForeignKeysAreReported) {
  FakeApiServer api;
  api.PutObject("/api/v1/nodes/n1",
                {{"metadata",
                  {{"name", "n1"},
                   {"labels", {{"node-restriction.kubernetes.io/isolated", "true"}}},
                   {"annotations", {{kManagedLabelsAnnotation, "node-restriction.kubernetes.io/isolated"}}}}}});
  Client client(To(api));
  auto change = ApplyNodeLabels(client, "n1", {{"example.com/not-ours", "1"}, {"nvidia.com/gpu.present", "true"}});
  ASSERT_OK(change) << change.status();
  EXPECT_EQ(change->ignored,
            (std::vector<std::string>{"node-restriction.kubernetes.io/isolated", "example.com/not-ours"}));
  EXPECT_EQ(change->set, (std::vector<std::string>{"nvidia.com/gpu.present"}));
  const nlohmann::json labels = api.Object("/api/v1/nodes/n1")["metadata"]["labels"];
  EXPECT_FALSE(labels.contains("example.com/not-ours"));
  EXPECT_TRUE(IsGpunodeLabelKey("nvidia.com/gpu.product"));
  EXPECT_TRUE(IsGpunodeLabelKey("gpunode.io/agent.version"));
  EXPECT_FALSE(IsGpunodeLabelKey("evil.nvidia.com/x"));
  EXPECT_FALSE(IsGpunodeLabelKey("node-restriction.kubernetes.io/isolated"));
}

class PrivateCa : public ::gpunode::testing::TempDirTest {};

TEST_F(PrivateCa, KeptInAMemfdOrAPrivateTempFileGoneWithTheClient) {
  auto ca = ::gpunode::testing::MakeTestCa(dir_.string(), "ca");
  ASSERT_EQ(ca.error, "");
  using internal::PrivateCaFile;
  std::string path;
  {
    auto memfd = PrivateCaFile::Create(ca.pem, "test", PrivateCaFile::Kind::kMemfd);
    ASSERT_OK(memfd) << memfd.status();
    EXPECT_TRUE((*memfd)->memfd());
    EXPECT_EQ(::gpunode::testing::ReadTextFile((*memfd)->path()), ca.pem);
    path = (*memfd)->path();
  }
  setenv("TMPDIR", dir_.c_str(), 1);
  {
    auto file = PrivateCaFile::Create(ca.pem, "test", PrivateCaFile::Kind::kTempFile);
    unsetenv("TMPDIR");
    ASSERT_OK(file) << file.status();
    path = (*file)->path();
    EXPECT_EQ(path.rfind(dir_.string(), 0), 0u) << path;
    struct stat st;
    ASSERT_EQ(::stat(path.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    EXPECT_EQ(::gpunode::testing::ReadTextFile(path), ca.pem);
  }
  EXPECT_FALSE(std::filesystem::exists(path)) << "removed with the client";
  auto garbage = PrivateCaFile::Create("not a certificate", "kubeconfig x");
  ASSERT_FALSE(garbage.ok());
  EXPECT_THAT(garbage.status().message(), HasSubstr("kubeconfig x: the CA data holds no PEM certificate"));
}

}  // namespace
}  // namespace gpunode::kube
