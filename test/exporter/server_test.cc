// The exporter end to end inside one process: the real Exporter on the simulated NVML (a profile
// file the test edits while it runs), served by the real HTTP server on a loopback port, read by
// a real HTTP client (cpp-httplib). The web config file and the listen address parser alone:
// server_config_test.cc.
#include <crypt.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>
#include <vector>

#include "absl/strings/escaping.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "sim/support/profile.h"
#include "src/exporter/exporter.h"
#include "src/exporter/http_server.h"
#include "src/exporter/web_config.h"
#include "src/node/probe.h"
#include "src/node/unreadable_gpus.h"
#include "test/exporter/certificates.h"
#include "test/exporter/raw_http.h"
#include "test/testing/podresources_emulator.h"
#include "test/testing/run_gpunode.h"
#include "test/testing/sim_library.h"
#include "test/testing/status_matchers.h"

namespace gpunode::exporter {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using ::testing::HasSubstr;
using ::testing::Not;

// "s3cret" with bcrypt cost 4 (cheap for tests; production hashes use 10-12).
constexpr char kHash[] = "$2b$04$poPUGKew3QHMXlGSzwquB.NCuec6TvozQB.DfHFqU5dbzKw/Gah8u";

using ::gpunode::testing::SimLibrary;

// Polls `cond` for up to `limit`.
template <typename F>
bool Eventually(F cond, std::chrono::milliseconds limit = 5000ms) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (cond()) return true;
    std::this_thread::sleep_for(20ms);
  }
  return cond();
}

class ExporterServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("gpn-exp-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    UseProfile("dgx-h200");
  }
  void TearDown() override {
    server_thread_stop();
    exporter_.reset();
    nvml_.reset();
    fs::remove_all(dir_);
  }

  void UseProfile(const std::string& name) {
    auto source = sim::ResolveProfile(name);
    ASSERT_OK(source) << source.status();
    profile_text_ = source->text;
    profile_path_ = (dir_ / "profile.yaml").string();
    WriteProfile(profile_text_);
    ::setenv("GPUNODE_SIM_PROFILE", profile_path_.c_str(), 1);
    ::setenv("GPUNODE_SIM_RELOAD_MS", "0", 1);
  }
  void WriteProfile(const std::string& text) {
    const std::string tmp = profile_path_ + ".tmp";
    std::ofstream(tmp) << text;
    fs::rename(tmp, profile_path_);
  }
  // Adds `extra` (e.g. "lost: true") to the entry of the GPU with `minor`.
  void EditGpu(unsigned minor, const std::string& extra) {
    const std::string key = "minor: " + std::to_string(minor) + ",";
    const size_t at = profile_text_.find(key);
    ASSERT_NE(at, std::string::npos);
    profile_text_.insert(at + key.size(), " " + extra + ",");
    WriteProfile(profile_text_);
  }

  void StartExporter(ExporterOptions options = {}) {
    auto nvml = gpu::NvmlLibrary::Open(SimLibrary());
    ASSERT_OK(nvml) << nvml.status();
    nvml_ = *std::move(nvml);
    options.hostname = "dgx-h200-01";
    if (options.interval == 30000ms) options.interval = 100ms;
    options.log = [this](const std::string& line) {
      std::lock_guard<std::mutex> lock(log_mu_);
      log_ += line + "\n";
    };
    exporter_ = std::make_unique<Exporter>(*nvml_, std::move(options));
    exporter_->Start();
  }
  void StartServer(ServerOptions options = {}) {
    options.listen = "127.0.0.1:0";
    auto server = MetricsServer::Create(*exporter_, std::move(options));
    ASSERT_OK(server) << server.status();
    server_ = *std::move(server);
    serve_ = std::thread([this] { server_->Serve(); });
    ASSERT_TRUE(Eventually([this] {
      httplib::Client c("127.0.0.1", server_->port());
      return c.Get("/health") != nullptr;
    })) << "server did not come up";
  }
  void server_thread_stop() {
    if (server_) server_->Stop();
    if (serve_.joinable()) serve_.join();
    server_.reset();
  }
  std::string Scrape() {
    httplib::Client c("127.0.0.1", server_->port());
    auto res = c.Get("/metrics");
    EXPECT_TRUE(res != nullptr);
    return res ? res->body : "";
  }
  std::string Log() {
    std::lock_guard<std::mutex> lock(log_mu_);
    return log_;
  }

  fs::path dir_;
  std::string profile_text_, profile_path_;
  std::unique_ptr<gpu::NvmlLibrary> nvml_;
  std::unique_ptr<Exporter> exporter_;
  std::unique_ptr<MetricsServer> server_;
  std::thread serve_;
  std::mutex log_mu_;
  std::string log_;
};

TEST_F(ExporterServerTest, ServesMetricsHealthAndTheStatusPageOverHttp) {
  StartExporter();
  StartServer();
  httplib::Client c("127.0.0.1", server_->port());
  auto metrics = c.Get("/metrics");
  ASSERT_TRUE(metrics != nullptr);
  EXPECT_EQ(metrics->status, 200);
  EXPECT_EQ(metrics->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(metrics->get_header_value("X-Content-Type-Options"), "nosniff");
  EXPECT_THAT(metrics->body, HasSubstr("# TYPE DCGM_FI_DEV_GPU_TEMP gauge\n"));
  EXPECT_THAT(metrics->body,
              HasSubstr("DCGM_FI_DEV_FB_RESERVED{gpu=\"7\",UUID=\"GPU-8366d65c-2081-45e2-8c26-af0486894848\","
                        "pci_bus_id=\"00000000:DB:00.0\",device=\"nvidia7\",modelName=\"NVIDIA H200\","
                        "Hostname=\"dgx-h200-01\",DCGM_FI_DRIVER_VERSION=\"580.95.05\"} 568\n"));
  // The energy counter comes from the slow sampler and is merged into the same page.
  EXPECT_THAT(metrics->body, HasSubstr("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu=\"0\""));
  EXPECT_THAT(metrics->body, HasSubstr("gpunode_gpu_health{gpu=\"3\""));

  auto health = c.Get("/health");
  ASSERT_TRUE(health != nullptr);
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(health->body, "OK\n");

  auto page = c.Get("/");
  ASSERT_TRUE(page != nullptr);
  EXPECT_EQ(page->status, 200);
  EXPECT_THAT(page->get_header_value("Content-Type"), HasSubstr("text/html"));
  std::regex row("<tr class=\"gpu\">");
  const auto rows = std::distance(std::sregex_iterator(page->body.begin(), page->body.end(), row),
                                  std::sregex_iterator());
  EXPECT_EQ(rows, 8);
  EXPECT_THAT(page->body, HasSubstr("580.95.05"));
  EXPECT_THAT(page->body, HasSubstr("http-equiv=\"refresh\""));
  EXPECT_THAT(page->body, Not(HasSubstr("src=\"http")));

  auto missing = c.Get("/nope");
  ASSERT_TRUE(missing != nullptr);
  EXPECT_EQ(missing->status, 404);
}

TEST_F(ExporterServerTest, AScrapeServesTheLastSnapshotAndNeverWaitsForNvml) {
  // A 1 h interval: whatever the scrapes see was collected at Start.
  ExporterOptions o;
  o.interval = std::chrono::milliseconds(3600 * 1000);
  StartExporter(std::move(o));
  StartServer();
  const std::string first = Scrape();
  EditGpu(2, "temperature_c: 77");
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(Scrape(), first);
  EXPECT_THAT(first, Not(HasSubstr("} 77\n")));
}

TEST_F(ExporterServerTest, ALostGpuGoesToHealthZeroWhileTheOthersKeepReporting) {
  StartExporter();
  StartServer();
  EXPECT_THAT(Scrape(), HasSubstr("DCGM_FI_DEV_GPU_TEMP{gpu=\"3\""));
  EditGpu(3, "lost: true");
  ASSERT_TRUE(Eventually([this] { return Scrape().find("gpunode_gpu_health{gpu=\"3\"") != std::string::npos &&
                                          Scrape().find("DCGM_FI_DEV_GPU_TEMP{gpu=\"3\"") == std::string::npos; }));
  const std::string text = Scrape();
  EXPECT_THAT(text, HasSubstr("gpunode_gpu_health{gpu=\"3\",UUID=\"GPU-ba8397f6-35c6-4721-9454-6cc61818e68c\""));
  EXPECT_THAT(text, ::testing::ContainsRegex("gpunode_gpu_health\\{gpu=\"3\"[^}]*\\} 0\n"));
  for (int g : {0, 1, 2, 4, 5, 6, 7}) {
    EXPECT_THAT(text, HasSubstr("DCGM_FI_DEV_GPU_TEMP{gpu=\"" + std::to_string(g) + "\"")) << g;
  }
  EXPECT_THAT(text, ::testing::ContainsRegex("gpunode_collection_errors_total\\{field=\"gpu\"\\} [1-9]"));
  // The exporter itself is fine: /health stays 200.
  EXPECT_TRUE(exporter_->Health().ok);
  EXPECT_THAT(Log(), HasSubstr("GPU 3 (GPU-ba8397f6-35c6-4721-9454-6cc61818e68c) cannot be read at PCI 00000000:"));
}

// Issue #14: a GPU lost before the exporter started had an empty status-page row with NVML's raw
// error and `UUID="",pci_bus_id=""` in /metrics; sysfs and /proc of the host still know it.
TEST_F(ExporterServerTest, AGpuLostFromTheStartShowsItsBusIdAsALostRowAndInItsHealthSeries) {
  UseProfile("broken-fallen-gpu");
  auto profile = sim::ParseProfile(profile_text_, "broken-fallen-gpu");
  ASSERT_OK(profile) << profile.status();
  const std::string root = (dir_ / "root").string();
  ASSERT_OK(sim::WriteHostRoot(*profile, root));
  auto host = HostFs::Open(root);
  ASSERT_OK(host) << host.status();
  ExporterOptions options;
  options.bus_gpus = node::NvidiaGpusOnBus(node::ProbeHardware(*host), node::ProbeKernelDriver(*host));
  StartExporter(std::move(options));
  StartServer();
  httplib::Client c("127.0.0.1", server_->port());

  auto page = c.Get("/");
  ASSERT_TRUE(page != nullptr);
  std::regex row_re("<tr class=\"gpu\">.*?</tr>");
  std::vector<std::string> rows;
  for (auto it = std::sregex_iterator(page->body.begin(), page->body.end(), row_re); it != std::sregex_iterator(); ++it)
    rows.push_back(it->str());
  ASSERT_EQ(rows.size(), 4u) << page->body;
  EXPECT_THAT(rows[2], HasSubstr("<td>2</td><td class=\"l\">NVIDIA H100 80GB HBM3</td>"
                                 "<td class=\"l\">00000000:3A:00.0</td>"
                                 "<td class=\"l\">GPU-f48edef6-247e-4153-9d4f-19d7905b346f</td>"));
  EXPECT_THAT(rows[2], HasSubstr(">lost</span><span class=\"why\">GPU is lost (NVML_ERROR_GPU_IS_LOST)</span>"));
  const std::regex td("<td");
  auto cells = [&td](const std::string& r) {
    return std::distance(std::sregex_iterator(r.begin(), r.end(), td), std::sregex_iterator());
  };
  for (const std::string& r : rows) EXPECT_EQ(cells(r), cells(rows[0])) << r;

  EXPECT_THAT(Scrape(),
              HasSubstr("gpunode_gpu_health{gpu=\"2\",UUID=\"GPU-f48edef6-247e-4153-9d4f-19d7905b346f\","
                        "pci_bus_id=\"00000000:3A:00.0\",device=\"nvidia2\",Hostname=\"dgx-h200-01\"} 0\n"));
  EXPECT_THAT(Log(), HasSubstr("GPU 2 (GPU-f48edef6-247e-4153-9d4f-19d7905b346f) cannot be read at PCI "
                               "00000000:3A:00.0: nvmlDeviceGetHandleByIndex_v2(2): GPU is lost"));
}

TEST_F(ExporterServerTest, XidEventsAreCountedByCodeAndTheLastOneIsTheDcgmGauge) {
  StartExporter();
  StartServer();
  EXPECT_THAT(Scrape(), ::testing::ContainsRegex(
                            "DCGM_FI_DEV_XID_ERRORS\\{gpu=\"1\"[^}]*,err_code=\"0\",err_msg=\"No Error\"\\} 0\n"));
  EXPECT_THAT(Scrape(), Not(HasSubstr("gpunode_xid_errors_total")));
  EditGpu(1, "events: [{type: xid, xid: 79}, {type: xid, xid: 13}, {type: xid, xid: 13}]");
  ASSERT_TRUE(Eventually([this] {
    return Scrape().find("xid=\"13\"} 2") != std::string::npos;
  })) << Scrape();
  const std::string text = Scrape();
  EXPECT_THAT(text, ::testing::ContainsRegex("gpunode_xid_errors_total\\{gpu=\"1\"[^}]*,xid=\"79\"\\} 1\n"));
  EXPECT_THAT(text, ::testing::ContainsRegex("gpunode_xid_errors_total\\{gpu=\"1\"[^}]*,xid=\"13\"\\} 2\n"));
  EXPECT_THAT(text, ::testing::ContainsRegex(
                        "DCGM_FI_DEV_XID_ERRORS\\{gpu=\"1\"[^}]*,err_code=\"13\",err_msg=\"Graphics Engine "
                        "Exception\"\\} 13\n"));
  EXPECT_THAT(text, Not(HasSubstr("xid_errors_total{gpu=\"0\"")));
}

// A GPU falling off the bus reports XID 79 as it becomes unreadable: the XID must be on the page
// while the GPU is lost (the alert on fatal XIDs is for exactly that GPU), not only once it answers.
TEST_F(ExporterServerTest, TheXid79OfAGpuThatFellOffTheBusIsCountedWhileItIsLost) {
  StartExporter();
  StartServer();
  EXPECT_THAT(Scrape(), Not(HasSubstr("gpunode_xid_errors_total")));
  EditGpu(1, "lost: true, events: [{type: xid, xid: 79}]");
  ASSERT_TRUE(Eventually([this] {
    return Scrape().find("xid=\"79\"} 1") != std::string::npos;
  })) << Scrape();
  const std::string text = Scrape();
  EXPECT_THAT(text, ::testing::ContainsRegex("gpunode_gpu_health\\{gpu=\"1\"[^}]*\\} 0\n"));
  EXPECT_THAT(text, ::testing::ContainsRegex("gpunode_xid_errors_total\\{gpu=\"1\",UUID=\"GPU-[^}]*,xid=\"79\"\\} 1\n"));
}

TEST_F(ExporterServerTest, PodLabelsComeFromTheKubeletPodResourcesApiOverGrpc) {
  const std::string sock_dir = "/tmp/gpn-pr-" + std::to_string(::getpid());
  fs::create_directories(sock_dir);
  testing::PodResourcesEmulator kubelet(sock_dir + "/kubelet.sock");
  ASSERT_TRUE(kubelet.Start());
  v1::ListPodResourcesResponse resp;
  using E = testing::PodResourcesEmulator;
  E::AddContainer(&resp, "ml", "train-0", "main", "nvidia.com/gpu", {"GPU-0b566429-adc1-458a-9244-af5a49e0505e"});
  // Time-sliced replicas (NVIDIA's plugin: <uuid>::<n>) and a renamed resource.
  E::AddContainer(&resp, "ml", "notebook", "jupyter", "nvidia.com/gpu",
                  {"GPU-7f553f48-e049-4eda-97cf-c73c16550250::3"});
  E::AddContainer(&resp, "infer", "llm-0", "server", "example.com/h200", {"GPU-31c2c315-5e4a-4ea9-9589-dbd68102602d"});
  E::AddContainer(&resp, "infer", "cpu-only", "app", "cpu", {"0"});
  kubelet.SetResponse(resp);

  ExporterOptions o;
  PodMapperOptions pods;
  pods.socket_path = sock_dir + "/kubelet.sock";
  pods.resource_names = {"example.com/h200"};
  pods.refresh_interval = std::chrono::milliseconds(100);
  o.pods = pods;
  StartExporter(std::move(o));
  StartServer();
  ASSERT_TRUE(Eventually([this] { return Scrape().find("gpunode_pod_mapping_up 1\n") != std::string::npos; }))
      << Scrape();
  const std::string text = Scrape();
  EXPECT_THAT(text, HasSubstr("DCGM_FI_DEV_GPU_TEMP{gpu=\"0\",UUID=\"GPU-0b566429-adc1-458a-9244-af5a49e0505e\","
                              "pci_bus_id=\"00000000:18:00.0\",device=\"nvidia0\",modelName=\"NVIDIA H200\","
                              "Hostname=\"dgx-h200-01\",DCGM_FI_DRIVER_VERSION=\"580.95.05\",container=\"main\","
                              "namespace=\"ml\",pod=\"train-0\"} 31\n"));
  EXPECT_THAT(text, ::testing::ContainsRegex("DCGM_FI_DEV_GPU_TEMP\\{gpu=\"1\"[^}]*,container=\"jupyter\","
                                             "namespace=\"ml\",pod=\"notebook\"\\} 32\n"));
  EXPECT_THAT(text, ::testing::ContainsRegex("DCGM_FI_DEV_GPU_TEMP\\{gpu=\"2\"[^}]*,pod=\"llm-0\"\\} 33\n"));
  EXPECT_THAT(text, ::testing::ContainsRegex("DCGM_FI_DEV_GPU_TEMP\\{gpu=\"3\"[^}]*DCGM_FI_DRIVER_VERSION=\"580.95.05\"\\} 31\n"));
  EXPECT_THAT(text, HasSubstr("gpunode_pod_mapping_errors_total 0\n"));
  // The status page shows the pod too.
  httplib::Client c("127.0.0.1", server_->port());
  EXPECT_THAT(c.Get("/")->body, HasSubstr("ml/train-0"));

  // The kubelet fails: metrics are still served, without pod labels, and the self-metric says so.
  kubelet.SetUnavailable(true);
  ASSERT_TRUE(Eventually([this] { return Scrape().find("gpunode_pod_mapping_up 0\n") != std::string::npos; }));
  const std::string failed = Scrape();
  EXPECT_THAT(failed, Not(HasSubstr("pod=\"")));
  EXPECT_THAT(failed, HasSubstr("DCGM_FI_DEV_GPU_TEMP{gpu=\"0\""));
  EXPECT_THAT(failed, ::testing::ContainsRegex("gpunode_pod_mapping_errors_total [1-9]"));
  // And recovers.
  kubelet.SetUnavailable(false);
  ASSERT_TRUE(Eventually([this] { return Scrape().find("pod=\"train-0\"") != std::string::npos; }));
  kubelet.Stop();
  fs::remove_all(sock_dir);
}

TEST_F(ExporterServerTest, WithoutTheKubeletSocketMetricsAreServedAndPodMappingIsDown) {
  ExporterOptions o;
  PodMapperOptions pods;
  pods.socket_path = "/tmp/gpn-nonexistent-" + std::to_string(::getpid()) + "/kubelet.sock";
  pods.refresh_interval = std::chrono::milliseconds(100);
  o.pods = pods;
  StartExporter(std::move(o));
  StartServer();
  const std::string text = Scrape();
  EXPECT_THAT(text, HasSubstr("gpunode_pod_mapping_up 0\n"));
  EXPECT_THAT(text, HasSubstr("DCGM_FI_DEV_GPU_TEMP{gpu=\"0\""));
  EXPECT_THAT(text, Not(HasSubstr("pod=\"")));
  httplib::Client c("127.0.0.1", server_->port());
  EXPECT_EQ(c.Get("/health")->status, 200);  // the exporter works; the pod mapping metric tells
}

TEST_F(ExporterServerTest, HealthIs503UntilTheFirstCollection) {
  auto nvml = gpu::NvmlLibrary::Open(SimLibrary());
  ASSERT_OK(nvml);
  Exporter e(**nvml, ExporterOptions{});
  EXPECT_FALSE(e.Health().ok);
  EXPECT_EQ(e.Health().reason, "no collection has finished yet");
}

TEST_F(ExporterServerTest, BasicAuthFromTheWebConfigGuardsEveryPath) {
  StartExporter();
  auto web = ParseWebConfig(std::string("basic_auth_users:\n  prom: ") + kHash +
                                "\nhttp_server_config:\n  headers:\n    X-Frame-Options: deny\n",
                            "web.yml");
  ASSERT_OK(web) << web.status();
  ServerOptions so;
  so.web = *web;
  StartServer(so);
  httplib::Client c("127.0.0.1", server_->port());
  for (const char* path : {"/metrics", "/health", "/"}) {
    auto anon = c.Get(path);
    ASSERT_TRUE(anon != nullptr);
    EXPECT_EQ(anon->status, 401) << path;
    EXPECT_EQ(anon->get_header_value("WWW-Authenticate"), "Basic realm=\"gpunode\"");
  }
  c.set_basic_auth("prom", "wrong");
  EXPECT_EQ(c.Get("/metrics")->status, 401);
  c.set_basic_auth("nobody", "s3cret");
  EXPECT_EQ(c.Get("/metrics")->status, 401);
  c.set_basic_auth("prom", "s3cret");
  auto ok = c.Get("/metrics");
  ASSERT_TRUE(ok != nullptr);
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(ok->get_header_value("X-Frame-Options"), "deny");
  EXPECT_THAT(ok->body, HasSubstr("DCGM_FI_DEV_SM_CLOCK"));
}

using ::gpunode::testing::MakeCertificates;

TEST_F(ExporterServerTest, ServesHttpsAndRequiresAClientCertificateWhenConfigured) {
  MakeCertificates(dir_);
  std::ofstream(dir_ / "web.yml") << "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
                                     "  client_ca_file: ca.crt\n  client_auth_type: RequireAndVerifyClientCert\n";
  auto web = LoadWebConfig((dir_ / "web.yml").string());
  ASSERT_OK(web) << web.status();
  StartExporter();
  ServerOptions so;
  so.web = *web;
  so.listen = "127.0.0.1:0";
  auto server = MetricsServer::Create(*exporter_, so);
  ASSERT_OK(server) << server.status();
  server_ = *std::move(server);
  EXPECT_TRUE(server_->tls());
  serve_ = std::thread([this] { server_->Serve(); });

  // Connections that never start the handshake hold nothing: the handshake is inside the
  // request deadline, and the loop serves the others meanwhile.
  std::vector<int> idle;
  for (int i = 0; i < 16; ++i) idle.push_back(testing::ConnectLoopback(server_->port()));
  const std::string ca = (dir_ / "ca.crt").string();
  httplib::SSLClient with_cert("127.0.0.1", server_->port(), (dir_ / "client.crt").string(),
                               (dir_ / "client.key").string());
  with_cert.set_ca_cert_path(ca.c_str());
  with_cert.enable_server_certificate_verification(true);
  std::shared_ptr<httplib::Response> res;
  ASSERT_TRUE(Eventually([&] {
    auto r = with_cert.Get("/metrics");
    if (r) res = std::make_shared<httplib::Response>(r.value());
    return r != nullptr;
  })) << "no TLS answer";
  EXPECT_EQ(res->status, 200);
  EXPECT_THAT(res->body, HasSubstr("DCGM_FI_DEV_GPU_TEMP"));

  httplib::SSLClient no_cert("127.0.0.1", server_->port());
  no_cert.set_ca_cert_path(ca.c_str());
  no_cert.enable_server_certificate_verification(true);
  EXPECT_TRUE(no_cert.Get("/metrics") == nullptr) << "the handshake must fail without a client certificate";

  httplib::Client plain("127.0.0.1", server_->port());
  auto p = plain.Get("/metrics");
  EXPECT_TRUE(p == nullptr || p->status != 200);
  for (int fd : idle) ::close(fd);
}

TEST_F(ExporterServerTest, APortInUseIsAClearError) {
  StartExporter();
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const int port = ntohs(addr.sin_port);
  ServerOptions so;
  so.listen = "127.0.0.1:" + std::to_string(port);
  auto server = MetricsServer::Create(*exporter_, so);
  ASSERT_FALSE(server.ok());
  EXPECT_THAT(std::string(server.status().message()), HasSubstr("address already in use"));
  EXPECT_THAT(std::string(server.status().message()), HasSubstr(so.listen));
  ::close(fd);
}

TEST_F(ExporterServerTest, ListensOnIpv4AndIpv6WithOneSocketForAnEmptyHost) {
  if (::access("/proc/net/if_inet6", R_OK) != 0) GTEST_SKIP() << "no IPv6 here";
  StartExporter();
  ServerOptions so;
  so.listen = ":0";
  auto server = MetricsServer::Create(*exporter_, so);
  ASSERT_OK(server) << server.status();
  server_ = *std::move(server);
  serve_ = std::thread([this] { server_->Serve(); });
  httplib::Client v4("127.0.0.1", server_->port());
  httplib::Client v6("::1", server_->port());
  ASSERT_TRUE(Eventually([&] { return v4.Get("/health") != nullptr; }));
  auto r6 = v6.Get("/health");
  ASSERT_TRUE(r6 != nullptr);
  EXPECT_EQ(r6->status, 200);
}

TEST_F(ExporterServerTest, ConnectionsBeyondTheLimitAreClosedAtOnceAndTheLimitFreesUp) {
  StartExporter();
  ServerOptions so;
  so.max_connections = 4;
  StartServer(so);
  ASSERT_TRUE(Eventually([this] { return server_->connections() == 0; }));
  std::vector<int> idle;
  for (int i = 0; i < 4; ++i) idle.push_back(testing::ConnectLoopback(server_->port()));
  ASSERT_TRUE(Eventually([this] { return server_->connections() == 4; }));
  const int extra = testing::ConnectLoopback(server_->port());
  ASSERT_GE(extra, 0);
  const testing::ReadResult r = testing::ReadUntilClosed(extra, 2000ms);
  EXPECT_TRUE(r.closed);
  EXPECT_EQ(r.data, "");
  EXPECT_LT(r.took.count(), 1000);
  ::close(extra);
  for (int fd : idle) ::close(fd);
  ASSERT_TRUE(Eventually([this] { return server_->connections() == 0; }));
  EXPECT_THAT(Scrape(), HasSubstr("DCGM_FI_DEV_GPU_TEMP"));
}

TEST_F(ExporterServerTest, TheRequestDeadlineLimitsAndOversizedRequestsAreAnsweredAndClosed) {
  StartExporter();
  ServerOptions so;
  so.request_timeout = 400ms;
  StartServer(so);
  const int port = server_->port();
  // Idle: closed at the (configured) deadline, with nothing sent.
  const int fd = testing::ConnectLoopback(port);
  const testing::ReadResult idle = testing::ReadUntilClosed(fd, 3000ms);
  ::close(fd);
  EXPECT_TRUE(idle.closed);
  EXPECT_EQ(idle.data, "");
  EXPECT_GE(idle.took.count(), 300);
  EXPECT_LT(idle.took.count(), 1500);
  // Headers over 8 KiB: 431. A GET with a body: 413. Garbage: 400.
  const std::string big = "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(9000, 'a') + "\r\n\r\n";
  EXPECT_EQ(testing::RawRequest(port, big).status, 431);
  EXPECT_EQ(testing::RawRequest(port, "GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nbody").status, 413);
  EXPECT_EQ(testing::RawRequest(port, "HEAD / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n").status, 413);
  EXPECT_EQ(testing::RawRequest(port, "NOT HTTP AT ALL\r\n\r\n").status, 400);
  // A query string does not change the path.
  const testing::RawResponse q = testing::RawRequest(port, "GET /health?x=1 HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(q.status, 200);
  EXPECT_EQ(q.body, "OK\n");
  EXPECT_EQ(q.header("connection"), "close");
  // The server still serves.
  EXPECT_THAT(Scrape(), HasSubstr("DCGM_FI_DEV_GPU_TEMP"));
}

TEST_F(ExporterServerTest, WrongCredentialsAreAnsweredLateMissingOnesAtOnce) {
  StartExporter();
  auto web = ParseWebConfig(std::string("basic_auth_users:\n  prom: ") + kHash + "\n", "web.yml");
  ASSERT_OK(web);
  ServerOptions so;
  so.web = *web;
  so.auth_failure_delay = 600ms;  // 300-900 ms
  StartServer(so);
  const int port = server_->port();
  const testing::RawResponse none = testing::RawRequest(port, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(none.status, 401);
  EXPECT_LT(none.took.count(), 250);
  const std::string wrong = "GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Basic cHJvbTp3cm9uZw==\r\n\r\n";
  const testing::RawResponse w1 = testing::RawRequest(port, wrong);
  EXPECT_EQ(w1.status, 401);
  EXPECT_GE(w1.took.count(), 290);
  EXPECT_EQ(w1.header("www-authenticate"), "Basic realm=\"gpunode\"");
  const testing::RawResponse w2 = testing::RawRequest(port, wrong);  // remembered: no bcrypt, same delay
  EXPECT_EQ(w2.status, 401);
  EXPECT_GE(w2.took.count(), 290);
  const testing::RawResponse right =
      testing::RawRequest(port, "GET /health HTTP/1.1\r\nHost: x\r\nAuthorization: Basic cHJvbTpzM2NyZXQ=\r\n\r\n");
  EXPECT_EQ(right.status, 200);
  EXPECT_LT(right.took.count(), 250);
  ASSERT_NE(server_->authenticator(), nullptr);
  const BasicAuthenticator::Stats st = server_->authenticator()->stats();
  EXPECT_EQ(st.bcrypt_runs, 2u);  // the wrong pair once, the right one once
  EXPECT_EQ(st.cached_denied, 1u);
}

}  // namespace
}  // namespace gpunode::exporter
