// The front of privilege separation over real sockets: the exporter's server (the same Beast server,
// the same web config) serving what a PagePublisher wrote from a real Exporter on the simulated
// NVML, read by real clients (cpp-httplib, raw loopback HTTP) beside the live server: the same
// bytes, the same headers, basic auth, TLS with client certificates, and the front's own answers
// (missing folder, stale heartbeat, truncated file).
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "sim/support/profile.h"
#include "src/exporter/exporter.h"
#include "src/exporter/http_server.h"
#include "src/exporter/publish.h"
#include "src/exporter/published.h"
#include "src/exporter/web_config.h"
#include "test/exporter/certificates.h"
#include "test/exporter/raw_http.h"
#include "test/testing/sim_library.h"
#include "test/testing/status_matchers.h"

namespace gpunode::exporter {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using ::testing::HasSubstr;

// "s3cret" with bcrypt cost 4.
constexpr char kHash[] = "$2b$04$poPUGKew3QHMXlGSzwquB.NCuec6TvozQB.DfHFqU5dbzKw/Gah8u";

template <typename F>
bool Eventually(F cond, std::chrono::milliseconds limit = 5000ms) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (cond()) return true;
    std::this_thread::sleep_for(20ms);
  }
  return cond();
}

// A running server and its thread.
struct Running {
  std::unique_ptr<MetricsServer> server;
  std::thread thread;
  ~Running() {
    if (server) server->Stop();
    if (thread.joinable()) thread.join();
  }
  int port() const { return server->port(); }
};

class FrontServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = fs::temp_directory_path() / ("gpn-front-" + std::to_string(::getpid()) + "-" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(base_);
    fs::create_directories(base_);
    dir_ = (base_ / "published").string();
    files_ = std::make_unique<PublishedDir>(dir_);
    pages_ = std::make_unique<FilePageSource>(*files_, FreshnessOptions{});
    routes_ = std::make_unique<PublishedRoutes>(*files_, FreshnessOptions{}, /*health_port=*/false);
  }
  void TearDown() override {
    front_.reset();
    live_.reset();
    publisher_.reset();
    live_pages_.reset();
    exporter_.reset();
    nvml_.reset();
    fs::remove_all(base_);
  }

  // The agent's side: a real exporter publishing into dir_.
  void StartAgentSide() {
    auto source = sim::ResolveProfile("dgx-h200");
    ASSERT_OK(source) << source.status();
    const std::string profile = (base_ / "profile.yaml").string();
    std::ofstream(profile) << source->text;
    ::setenv("GPUNODE_SIM_PROFILE", profile.c_str(), 1);
    auto nvml = gpu::NvmlLibrary::Open(testing::SimLibrary());
    ASSERT_OK(nvml) << nvml.status();
    nvml_ = *std::move(nvml);
    ExporterOptions o;
    o.hostname = "dgx-h200-01";
    o.interval = 3600s;  // one page: the live and the published one can be compared byte for byte
    exporter_ = std::make_unique<Exporter>(*nvml_, std::move(o));
    exporter_->Start();
    live_pages_ = std::make_unique<ExporterPageSource>(*exporter_);
    auto d = PublishDir::Open(dir_);
    ASSERT_OK(d) << d.status();
    publisher_ = std::make_unique<PagePublisher>(*live_pages_, *std::move(d), PublisherOptions{.period = 200ms});
    ASSERT_OK(publisher_->Start());
  }
  std::unique_ptr<Running> Serve(PageSource* source, ServerOptions so) {
    so.listen = "127.0.0.1:0";
    auto r = std::make_unique<Running>();
    auto server = source != nullptr ? MetricsServer::Create(*source, so) : MetricsServer::Create(*exporter_, so);
    EXPECT_OK(server) << server.status();
    if (!server.ok()) return nullptr;
    r->server = *std::move(server);
    r->thread = std::thread([s = r->server.get()] { s->Serve(); });
    return r;
  }
  // The front as `gpunode exporter --from-dir` runs it: the file source and the agent's routes.
  void StartFront(ServerOptions so = {}) {
    so.routes = [this](std::string_view path) { return (*routes_)(path); };
    front_ = Serve(pages_.get(), std::move(so));
    ASSERT_NE(front_, nullptr);
  }
  void StartLive(ServerOptions so = {}) {
    live_ = Serve(nullptr, std::move(so));
    ASSERT_NE(live_, nullptr);
  }

  fs::path base_;
  std::string dir_;
  std::unique_ptr<PublishedDir> files_;
  std::unique_ptr<FilePageSource> pages_;
  std::unique_ptr<PublishedRoutes> routes_;
  std::unique_ptr<gpu::NvmlLibrary> nvml_;
  std::unique_ptr<Exporter> exporter_;
  std::unique_ptr<ExporterPageSource> live_pages_;
  std::unique_ptr<PagePublisher> publisher_;
  std::unique_ptr<Running> live_;
  std::unique_ptr<Running> front_;
};

TEST_F(FrontServerTest, ServesThePublishedPagesByteForByteAsTheLiveServerDoes) {
  StartAgentSide();
  StartLive();
  StartFront();
  for (const std::string encoding : {"", "Accept-Encoding: gzip\r\n"}) {
    const std::string req = "GET /metrics HTTP/1.1\r\nHost: x\r\n" + encoding + "\r\n";
    const testing::RawResponse live = testing::RawRequest(live_->port(), req);
    const testing::RawResponse front = testing::RawRequest(front_->port(), req);
    ASSERT_EQ(live.status, 200);
    EXPECT_EQ(front.status, 200) << front.body;
    EXPECT_EQ(front.body, live.body) << encoding;
    EXPECT_EQ(front.headers, live.headers) << encoding;
  }
  const testing::RawResponse gz = testing::RawRequest(front_->port(), "GET /metrics HTTP/1.1\r\nAccept-Encoding: gzip\r\n\r\n");
  EXPECT_EQ(gz.header("content-encoding"), "gzip");
  EXPECT_EQ(gz.header("vary"), "Accept-Encoding");
  EXPECT_EQ(gz.body.substr(0, 2), "\x1f\x8b");
  for (const char* path : {"/health", "/"}) {
    const std::string req = std::string("GET ") + path + " HTTP/1.1\r\nHost: x\r\n\r\n";
    const testing::RawResponse live = testing::RawRequest(live_->port(), req);
    const testing::RawResponse front = testing::RawRequest(front_->port(), req);
    EXPECT_EQ(front.status, 200) << path << front.body;
    EXPECT_EQ(front.body, live.body) << path;
    EXPECT_EQ(front.header("content-type"), live.header("content-type")) << path;
  }
  httplib::Client c("127.0.0.1", front_->port());
  auto page = c.Get("/");
  ASSERT_TRUE(page != nullptr);
  std::regex row("<tr class=\"gpu\">");
  EXPECT_EQ(std::distance(std::sregex_iterator(page->body.begin(), page->body.end(), row), std::sregex_iterator()), 8);
  EXPECT_EQ(c.Get("/nope")->status, 404);
  // HEAD, 405 and the request limits are the server's: the same on the front.
  const testing::RawResponse head = testing::RawRequest(front_->port(), "HEAD /metrics HTTP/1.1\r\n\r\n");
  EXPECT_EQ(head.status, 200);
  EXPECT_EQ(head.body, "");
  EXPECT_EQ(testing::RawRequest(front_->port(), "POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n").status, 405);
}

TEST_F(FrontServerTest, AnswersWhyNotWhileNothingIsPublishedTheHeartbeatIsStaleOrAFileIsTruncated) {
  StartFront();
  httplib::Client c("127.0.0.1", front_->port());
  // No folder yet: every path answers 503 with the reason; the front does not fail.
  for (const char* path : {"/metrics", "/health", "/", "/healthz", "/readyz"}) {
    auto r = c.Get(path);
    ASSERT_TRUE(r != nullptr) << path;
    EXPECT_EQ(r->status, 503) << path;
    EXPECT_THAT(r->body, HasSubstr("the publish folder " + dir_ + " does not exist")) << path;
  }
  // Published 12 s ago, a heartbeat of 1 s: stale.
  fs::create_directories(dir_);
  const int64_t old = UnixMillis() - 12000;
  auto d = PublishDir::Open(dir_);
  ASSERT_OK(d);
  ASSERT_OK(d->Write(kPublishedHealth, EncodePublished(old, 1000, 200, "OK\n")));
  ASSERT_OK(d->Write(kPublishedMetrics, EncodePublished(old, 0, 200, "up 1\n")));
  ASSERT_OK(d->Write(kPublishedAgentHealth, EncodePublished(old, 1000, 200, R"({"paths": {}})")));
  auto stale = c.Get("/metrics");
  EXPECT_EQ(stale->status, 503);
  EXPECT_THAT(stale->body, HasSubstr("the agent's exporter heartbeat is 12 s old"));
  EXPECT_EQ(c.Get("/readyz")->status, 503);
  EXPECT_THAT(c.Get("/readyz")->body, HasSubstr("the agent's health is 12 s old"));
  // Fresh again; then a truncated page: 500 with the numbers, and the server keeps serving.
  ASSERT_OK(d->Write(kPublishedHealth, EncodePublished(UnixMillis(), 1000, 200, "OK\n")));
  EXPECT_EQ(c.Get("/metrics")->status, 200);
  EXPECT_EQ(c.Get("/metrics")->body, "up 1\n");
  const std::string whole = EncodePublished(UnixMillis(), 0, 200, "up 1\nmore 2\n");
  std::ofstream(dir_ + "/metrics.new") << whole.substr(0, whole.size() - 5);
  fs::rename(dir_ + "/metrics.new", dir_ + "/metrics");
  auto truncated = c.Get("/metrics");
  EXPECT_EQ(truncated->status, 500);
  EXPECT_THAT(truncated->body, HasSubstr("/metrics: truncated: the header announces 12 bytes, the file has 7"));
  EXPECT_EQ(c.Get("/health")->status, 200);
}

TEST_F(FrontServerTest, BasicAuthFromTheWebConfigGuardsEveryPathOfTheFront) {
  StartAgentSide();
  auto web = ParseWebConfig(std::string("basic_auth_users:\n  prom: ") + kHash +
                                "\nhttp_server_config:\n  headers:\n    X-Frame-Options: deny\n",
                            "web.yml");
  ASSERT_OK(web) << web.status();
  ServerOptions so;
  so.web = *web;
  StartFront(so);
  httplib::Client c("127.0.0.1", front_->port());
  for (const char* path : {"/metrics", "/health", "/", "/healthz", "/readyz"}) {
    auto anon = c.Get(path);
    ASSERT_TRUE(anon != nullptr);
    EXPECT_EQ(anon->status, 401) << path;
    EXPECT_EQ(anon->get_header_value("WWW-Authenticate"), "Basic realm=\"gpunode\"");
  }
  c.set_basic_auth("prom", "wrong");
  EXPECT_EQ(c.Get("/metrics")->status, 401);
  c.set_basic_auth("prom", "s3cret");
  auto ok = c.Get("/metrics");
  ASSERT_TRUE(ok != nullptr);
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(ok->get_header_value("X-Frame-Options"), "deny");
  EXPECT_THAT(ok->body, HasSubstr("DCGM_FI_DEV_SM_CLOCK"));
  ASSERT_NE(front_->server->authenticator(), nullptr);
  EXPECT_EQ(front_->server->authenticator()->stats().bcrypt_runs, 2u);
}

TEST_F(FrontServerTest, ServesHttpsToClientsWithACertificateOnlyFromFiles) {
  testing::MakeCertificates(base_);
  std::ofstream(base_ / "web.yml") << "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
                                      "  client_ca_file: ca.crt\n  client_auth_type: RequireAndVerifyClientCert\n";
  auto web = LoadWebConfig((base_ / "web.yml").string());
  ASSERT_OK(web) << web.status();
  StartAgentSide();
  ServerOptions so;
  so.web = *web;
  StartFront(so);
  EXPECT_TRUE(front_->server->tls());
  const std::string ca = (base_ / "ca.crt").string();
  httplib::SSLClient with_cert("127.0.0.1", front_->port(), (base_ / "client.crt").string(),
                               (base_ / "client.key").string());
  with_cert.set_ca_cert_path(ca.c_str());
  with_cert.enable_server_certificate_verification(true);
  std::shared_ptr<httplib::Response> res;
  ASSERT_TRUE(Eventually([&] {
    auto r = with_cert.Get("/metrics");
    if (r) res = std::make_shared<httplib::Response>(r.value());
    return r != nullptr;
  })) << "no TLS answer";
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->body, *exporter_->Metrics());
  httplib::SSLClient no_cert("127.0.0.1", front_->port());
  no_cert.set_ca_cert_path(ca.c_str());
  no_cert.enable_server_certificate_verification(true);
  EXPECT_TRUE(no_cert.Get("/metrics") == nullptr) << "the handshake must fail without a client certificate";
  httplib::Client plain("127.0.0.1", front_->port());
  auto p = plain.Get("/metrics");
  EXPECT_TRUE(p == nullptr || p->status != 200);
}

}  // namespace
}  // namespace gpunode::exporter
