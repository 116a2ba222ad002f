// Regressions of the security review of the Kubernetes client (issue: the client survives a
// hostile or broken API server), each against the in-process stand-in
// (test/testing/fake_api_server.h) over a real loopback socket, with the real client. Every
// test here uses only the client's API as it was before the fix, and failed (or crashed) on that
// code: typed reads, bounds (body, watch line, deadline), backoff of a watch that ends at once, the
// cluster's CA alone, Retry-After, concurrent calls, the managed-labels annotation.
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/kube/client.h"
#include "src/kube/node.h"
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

// ---- 1. typed reads: a wrong type is an error naming the field, never an abort ----

TEST(HostileServer, NodeWhoseMetadataIsAStringIsAnErrorNotAnAbort) {
  FakeApiServer api;
  api.On("GET", "/api/v1/nodes/n1", {FakeApiServer::Json(200, {{"kind", "Node"}, {"metadata", "n1"}})});
  Client client(To(api));
  auto applied = ApplyNodeLabels(client, "n1", {{"nvidia.com/gpu.present", "true"}});
  ASSERT_FALSE(applied.ok());
  EXPECT_EQ(applied.status().code(), absl::StatusCode::kInvalidArgument) << applied.status();
  EXPECT_THAT(applied.status().message(), HasSubstr("Node n1: metadata: expected an object, got string"));
  auto removed = RemoveNodeLabels(client, "n1");
  ASSERT_FALSE(removed.ok());
  EXPECT_THAT(removed.status().message(), HasSubstr("Node n1: metadata: expected an object, got string"));
  EXPECT_EQ(api.Count("PATCH"), 0) << "nothing is written from a Node that could not be read";
}

TEST(HostileServer, NodeWhoseLabelsAreAStringNamesThePath) {
  FakeApiServer api;
  api.On("GET", "/api/v1/nodes/n1",
         {FakeApiServer::Json(200, {{"metadata", {{"name", "n1"}, {"labels", "nvidia.com/gpu.present=true"}}}})});
  Client client(To(api));
  auto applied = ApplyNodeLabels(client, "n1", {{"nvidia.com/gpu.present", "true"}});
  ASSERT_FALSE(applied.ok());
  EXPECT_THAT(applied.status().message(), HasSubstr("Node n1: metadata.labels: expected an object, got string"));
  api.On("GET", "/api/v1/nodes/n1",
         {FakeApiServer::Json(200, {{"metadata", {{"name", "n1"}, {"annotations", {{kManagedLabelsAnnotation, 7}}}}}})});
  auto number = ApplyNodeLabels(client, "n1", {});
  ASSERT_FALSE(number.ok());
  EXPECT_THAT(number.status().message(),
              HasSubstr("Node n1: metadata.annotations[\"gpunode.io/managed-labels\"]: expected a string, got number"));
}

TEST(HostileServer, NodeWithoutStatusOrWithBadConditionsIsReadSafely) {
  FakeApiServer api;
  api.PutObject("/api/v1/nodes/n1", {{"metadata", {{"name", "n1"}}}});  // no status at all
  Client client(To(api));
  auto set = SetNodeCondition(client, "n1", {"GpuStackReady", "True", "Validated", "ok"});
  ASSERT_OK(set) << set.status();
  EXPECT_TRUE(*set);
  EXPECT_EQ(api.Object("/api/v1/nodes/n1")["status"]["conditions"][0]["type"], "GpuStackReady");

  api.On("GET", "/api/v1/nodes/n2",
         {FakeApiServer::Json(200, {{"metadata", {{"name", "n2"}}}, {"status", {{"conditions", {{{"type", 5}}}}}}})});
  auto bad = SetNodeCondition(client, "n2", {"GpuStackReady", "True", "Validated", "ok"});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("Node n2: status.conditions[0].type: expected a string, got number"));
}

TEST(HostileServer, WatchEventWithANumericTypeIsAnErrorNotAnAbort) {
  FakeApiServer api;
  api.On("GET", "/api/v1/nodes", {FakeApiServer::WatchEvents({R"({"type":1,"object":{"metadata":{}}})"})});
  Client client(To(api));
  int events = 0;
  Status st = client.Watch("/api/v1/nodes", "", 10, [&](const std::string&, const nlohmann::json&) {
    ++events;
    return true;
  });
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(absl::IsUnavailable(st)) << st;
  EXPECT_THAT(st.message(), HasSubstr("event 1: type: expected a string, got number"));
  EXPECT_EQ(events, 0);

  api.On("GET", "/api/v1/nodes", {FakeApiServer::WatchEvents({R"({"type":"ERROR","object":{"code":"410"}})"})});
  Status code = client.Watch("/api/v1/nodes", "", 10, [](const std::string&, const nlohmann::json&) { return true; });
  EXPECT_THAT(code.message(), HasSubstr("event 1: object.code: expected a whole number, got string")) << code;
}

// ---- 2. bounds: body, watch line, deadline, backoff ----

TEST(HostileServer, AnAnswerOverTheBodyCapIsRefusedNamingTheRequestAndTheCap) {
  FakeApiServer api;
  api.On("GET", "/api/v1/nodes", {FakeApiServer::HugeBody((size_t{64} << 20) + (1 << 20))});
  api.On("GET", "/api/v1/nodes/announced", {FakeApiServer::HugeBody(size_t{600} << 20, /*content_length=*/true)});
  Client client(To(api));
  client.set_timeout(std::chrono::seconds(20));
  auto chunked = client.Get("/api/v1/nodes");
  ASSERT_FALSE(chunked.ok());
  EXPECT_EQ(chunked.status().code(), absl::StatusCode::kResourceExhausted) << chunked.status();
  EXPECT_THAT(chunked.status().message(), HasSubstr("GET /api/v1/nodes: the answer is larger than 64 MiB"));
  // Announced by Content-Length: refused before a byte of the body is read.
  const auto start = Clock::now();
  auto announced = client.Get("/api/v1/nodes/announced");
  ASSERT_FALSE(announced.ok());
  EXPECT_THAT(announced.status().message(), HasSubstr("larger than 64 MiB"));
  EXPECT_LT(Seconds(Clock::now() - start), 2.0);
}

TEST(HostileServer, AWatchLineWithoutANewlineEndsAtTheLineCap) {
  FakeApiServer api;
  api.On("GET", "/api/v1/nodes", {FakeApiServer::EndlessLine((size_t{16} << 20) + (1 << 20))});
  Client client(To(api));
  const auto start = Clock::now();
  Status st = client.Watch("/api/v1/nodes", "", 30, [](const std::string&, const nlohmann::json&) { return true; });
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted) << st;
  EXPECT_THAT(st.message(), HasSubstr("an event line longer than 16 MiB"));
  EXPECT_LT(Seconds(Clock::now() - start), 5.0);
}

// The newline search resumed where it stopped: a 15 MiB line (under the cap) arriving in 1 KiB
// pieces is searched once, in linear time. The old code searched the whole buffer again for every
// piece: quadratic, about 120 GB of memchr here, seconds of CPU at 80 %.
TEST(HostileServer, ALongLineInSmallPiecesIsSearchedOnce) {
  FakeApiServer api;
  api.On("GET", "/api/v1/nodes", {FakeApiServer::EndlessLine(size_t{15} << 20, 1024)});
  Client client(To(api));
  const auto start = Clock::now();
  Status st = client.Watch("/api/v1/nodes", "", 30, [](const std::string&, const nlohmann::json&) { return true; });
  const double took = Seconds(Clock::now() - start);
  EXPECT_OK(st) << "under the cap, and the server ended the watch";
  EXPECT_LT(took, 2.5);
}

TEST(HostileServer, ALongEventInSmallPiecesIsDeliveredWhole) {
  FakeApiServer api;
  const std::string big(1 << 20, 'a');
  const std::string event = nlohmann::json({{"type", "MODIFIED"}, {"object", {{"metadata", {{"name", "n1"}}}, {"data", big}}}}).dump();
  api.On("GET", "/api/v1/nodes", {FakeApiServer::WatchEvents({event, event}, false, 4096)});
  Client client(To(api));
  std::vector<size_t> got;
  Status st = client.Watch("/api/v1/nodes", "", 30, [&](const std::string& type, const nlohmann::json& obj) {
    EXPECT_EQ(type, "MODIFIED");
    got.push_back(obj["data"].get_ref<const std::string&>().size());
    return true;
  });
  EXPECT_OK(st);
  EXPECT_EQ(got, (std::vector<size_t>{big.size(), big.size()}));
}

TEST(HostileServer, AServerTricklingItsAnswerIsCutOffAtTheCallsDeadline) {
  FakeApiServer api;
  api.On("GET", "/api/v1/nodes/n1",
         {FakeApiServer::Trickle(R"({"metadata":{}})", std::chrono::milliseconds(50), std::chrono::seconds(4))});
  Client client(To(api));
  client.set_timeout(std::chrono::milliseconds(500));
  const auto start = Clock::now();
  auto r = client.Get("/api/v1/nodes/n1");
  const double took = Seconds(Clock::now() - start);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr("GET /api/v1/nodes/n1: no complete answer within 500 ms"));
  EXPECT_LT(took, 1.0);
  EXPECT_GE(took, 0.45);
}

// A watch that the server ends at once was opened again at once: 212 requests in 10 s.
TEST(HostileServer, AWatchThatEndsAtOnceIsOpenedAgainWithBackoff) {
  FakeApiServer api;
  api.PutObject("/api/v1/nodes/n1", {{"metadata", {{"name", "n1"}}}});
  api.On("GET", "/api/v1/nodes", {FakeApiServer::WatchEndsAtOnce()});
  Client client(To(api));
  std::stop_source stop;
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    stop.request_stop();
  });
  WatchNodeOptions o;
  o.backoff = std::chrono::milliseconds(100);
  o.max_backoff = std::chrono::seconds(2);
  const auto start = Clock::now();
  Status st = WatchNode(client, "n1", [](const nlohmann::json&) { return true; }, stop.get_token(), o);
  const double took = Seconds(Clock::now() - start);
  stopper.join();
  EXPECT_OK(st);
  EXPECT_LT(took, 1.7) << "the stop is prompt";
  const int watches = api.Count("GET /api/v1/nodes?");
  EXPECT_GE(watches, 2);
  EXPECT_LE(watches, 5) << "pauses of [100, 200), [200, 400), [400, 800) ms ... between watches";
}

// ---- 3. TLS: the cluster's CA alone ----

class HostileTls : public ::gpunode::testing::TempDirTest {
 protected:
  void TearDown() override {
    unsetenv("SSL_CERT_FILE");
    unsetenv("SSL_CERT_DIR");
    TempDirTest::TearDown();
  }
};

TEST_F(HostileTls, ACertificateFromAnotherCaIsRefusedEvenWhenTheSystemTrustsIt) {
  using ::gpunode::testing::MakeServerCert;
  using ::gpunode::testing::MakeTestCa;
  auto ca1 = MakeTestCa(dir_.string(), "cluster-ca");
  auto ca2 = MakeTestCa(dir_.string(), "public-ca");
  ASSERT_EQ(ca1.error + ca2.error, "");
  auto server = MakeServerCert(ca2, dir_.string(), "impostor");
  ASSERT_EQ(server.error, "");
  // CA-2 is what the system trusts: the default file and a hashed directory holding only it.
  std::filesystem::create_directories(dir_ / "certs");
  std::filesystem::copy_file(ca2.cert, dir_ / "certs" / "public-ca.pem");
  ASSERT_EQ(::gpunode::testing::RunShell("openssl rehash " + (dir_ / "certs").string()).exit_code, 0);
  setenv("SSL_CERT_FILE", ca2.cert.c_str(), 1);
  setenv("SSL_CERT_DIR", (dir_ / "certs").string().c_str(), 1);

  FakeApiServer api(FakeApiServer::Tls{server.cert, server.key});
  ASSERT_TRUE(api.valid());
  api.On("GET", "/api", {FakeApiServer::Json(200, {{"kind", "APIVersions"}})});
  Connection c = To(api);
  c.token = "secret-token";
  c.ca_pem = ca1.pem;  // the kubeconfig's certificate-authority-data: the cluster's CA
  {
    Client client(c);
    auto r = client.Get("/api");
    ASSERT_FALSE(r.ok()) << "a server with a certificate from another CA got the bearer token";
    EXPECT_TRUE(absl::IsUnavailable(r.status())) << r.status();
    EXPECT_THAT(r.status().message(), HasSubstr("the server's certificate was not accepted"));
  }
  for (const auto& headers : api.RequestHeaders()) EXPECT_EQ(headers.count("Authorization"), 0u);
  c.ca_pem = ca2.pem;
  Client trusting(c);
  auto ok = trusting.Get("/api");
  EXPECT_OK(ok) << "the same server is accepted when its CA is the one configured";
}

// ---- 4. the managed-labels annotation is not trusted ----

TEST(HostileServer, LabelsOutsideGpunodesPrefixesAreNeverRemovedWhateverTheAnnotationSays) {
  FakeApiServer api;
  const nlohmann::json node = {
      {"metadata",
       {{"name", "n1"},
        {"labels", {{"node-restriction.kubernetes.io/isolated", "true"}, {"kubernetes.io/hostname", "n1"},
                    {"nvidia.com/gpu.present", "true"}}},
        {"annotations",
         {{kManagedLabelsAnnotation, "node-restriction.kubernetes.io/isolated,kubernetes.io/hostname,nvidia.com/gpu.present"}}}}}};
  api.PutObject("/api/v1/nodes/n1", node);
  Client client(To(api));
  auto applied = ApplyNodeLabels(client, "n1", {{"gpunode.io/agent.version", "1"}});
  ASSERT_OK(applied) << applied.status();
  nlohmann::json labels = api.Object("/api/v1/nodes/n1")["metadata"]["labels"];
  EXPECT_EQ(labels.value("node-restriction.kubernetes.io/isolated", ""), "true");
  EXPECT_EQ(labels.value("kubernetes.io/hostname", ""), "n1");
  EXPECT_FALSE(labels.contains("nvidia.com/gpu.present")) << "ours, and no longer wanted";
  EXPECT_FALSE(api.Object("/api/v1/nodes/n1")["metadata"]["annotations"].contains(kManagedLabelsAnnotation))
      << "migrated to server-side apply: the annotation goes";

  api.PutObject("/api/v1/nodes/n1", node);
  auto removed = RemoveNodeLabels(client, "n1");
  ASSERT_OK(removed) << removed.status();
  labels = api.Object("/api/v1/nodes/n1")["metadata"]["labels"];
  EXPECT_EQ(labels.value("node-restriction.kubernetes.io/isolated", ""), "true");
  EXPECT_EQ(labels.value("kubernetes.io/hostname", ""), "n1");
  EXPECT_FALSE(labels.contains("nvidia.com/gpu.present"));
}

// ---- Retry-After, concurrency ----

TEST(HostileServer, TooManyRequestsIsSentAgainAfterRetryAfter) {
  FakeApiServer api;
  api.On("GET", "/api/v1/nodes/n1",
         {FakeApiServer::ApiStatus(429, "TooManyRequests", "the server is busy", 1),
          FakeApiServer::Json(200, {{"metadata", {{"name", "n1"}}}})});
  Client client(To(api));
  const auto start = Clock::now();
  auto r = client.Get("/api/v1/nodes/n1");
  ASSERT_OK(r) << r.status();
  EXPECT_GE(Seconds(Clock::now() - start), 0.95);
  EXPECT_EQ(api.Count("GET /api/v1/nodes/n1"), 2);
}

TEST(HostileServer, ARetryAfterPastTheDeadlineIsNotWaitedFor) {
  FakeApiServer api;
  api.On("GET", "/api/v1/nodes/n1", {FakeApiServer::ApiStatus(503, "ServiceUnavailable", "come back later", 3600)});
  Client client(To(api));
  client.set_timeout(std::chrono::milliseconds(800));
  const auto start = Clock::now();
  auto r = client.Get("/api/v1/nodes/n1");
  ASSERT_FALSE(r.ok());
  EXPECT_LT(Seconds(Clock::now() - start), 0.5);
  EXPECT_THAT(r.status().message(), HasSubstr("Retry-After 3600 s: past the call's deadline"));
  EXPECT_EQ(api.Count("GET /api/v1/nodes/n1"), 1);
}

TEST(HostileServer, ASlowCallDoesNotHoldUpTheOthers) {
  FakeApiServer api;
  api.On("GET", "/slow", {FakeApiServer::Slow(std::chrono::milliseconds(1500), FakeApiServer::Json(200, {}))});
  api.On("GET", "/fast", {FakeApiServer::Json(200, {{"fast", true}})});
  Client client(To(api));
  std::thread slow([&] { EXPECT_OK(client.Get("/slow")); });
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  const auto start = Clock::now();
  auto fast = client.Get("/fast");
  const double took = Seconds(Clock::now() - start);
  slow.join();
  ASSERT_OK(fast) << fast.status();
  EXPECT_LT(took, 0.5) << "the fast call waited for the slow one";
}

}  // namespace
}  // namespace gpunode::kube
