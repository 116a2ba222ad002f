// The exporter's server against hostile clients, on real loopback sockets: regression tests named
// after the bugs they reproduce (each failed on the cpp-httplib server: 8 workers with per-read
// timeouts, bcrypt on the workers, a C-string password compare, HEAD and POST on /metrics).
// Only the server API that existed before these fixes is used, so the file also builds there.
#include <crypt.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
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
#include "test/exporter/raw_http.h"
#include "test/testing/sim_library.h"
#include "test/testing/status_matchers.h"

namespace gpunode::exporter {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using ::testing::HasSubstr;
using testing::RawRequest;
using Clock = std::chrono::steady_clock;

using ::gpunode::testing::SimLibrary;

// A bcrypt hash of `password` made now ($2b$, `cost`), as htpasswd -B would.
std::string Bcrypt(const std::string& password, int cost) {
  char salt[CRYPT_GENSALT_OUTPUT_SIZE];
  if (crypt_gensalt_rn("$2b$", static_cast<unsigned long>(cost), nullptr, 0, salt, sizeof salt) == nullptr) return "";
  auto data = std::make_unique<crypt_data>();
  const char* out = crypt_r(password.c_str(), salt, data.get());
  return out ? out : "";
}

std::string BasicHeader(const std::string& user, const std::string& password) {
  return "Basic " + absl::Base64Escape(user + ":" + password);
}

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

class ExporterHostileClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("gpn-hostile-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    auto source = sim::ResolveProfile("dgx-h200");
    ASSERT_OK(source) << source.status();
    std::ofstream(dir_ / "profile.yaml") << source->text;
    ::setenv("GPUNODE_SIM_PROFILE", (dir_ / "profile.yaml").c_str(), 1);
    ::setenv("GPUNODE_SIM_RELOAD_MS", "0", 1);
  }
  void TearDown() override {
    if (server_) server_->Stop();
    if (serve_.joinable()) serve_.join();
    server_.reset();
    if (exporter_) exporter_->Stop();
    exporter_.reset();
    nvml_.reset();
    fs::remove_all(dir_);
  }
  // The exporter on the simulated dgx-h200 (1 h interval: the page does not change during a
  // test) and the server on a loopback port, with basic auth when `users` is not empty.
  void Start(std::map<std::string, std::string> users = {}) {
    auto nvml = gpu::NvmlLibrary::Open(SimLibrary());
    ASSERT_OK(nvml) << nvml.status();
    nvml_ = *std::move(nvml);
    ExporterOptions o;
    o.hostname = "dgx-h200-01";
    o.interval = std::chrono::milliseconds(3600 * 1000);
    o.log = [](const std::string&) {};
    exporter_ = std::make_unique<Exporter>(*nvml_, std::move(o));
    exporter_->Start();
    ServerOptions so;
    so.listen = "127.0.0.1:0";
    if (!users.empty()) {
      WebConfig web;
      web.basic_auth_users = std::move(users);
      so.web = web;
    }
    auto server = MetricsServer::Create(*exporter_, so);
    ASSERT_OK(server) << server.status();
    server_ = *std::move(server);
    port_ = server_->port();
    serve_ = std::thread([this] { server_->Serve(); });
    const auto end = Clock::now() + 10s;
    while (Clock::now() < end && exporter_->Health().reason == "no collection has finished yet") {
      std::this_thread::sleep_for(20ms);
    }
  }
  // One GET with credentials; the status (0: no answer within 3 s) and how long it took.
  std::pair<int, double> Scrape(const std::string& user, const std::string& password,
                                const std::string& path = "/metrics") {
    httplib::Client c("127.0.0.1", port_);
    c.set_connection_timeout(3, 0);
    c.set_read_timeout(3, 0);
    if (!user.empty()) c.set_basic_auth(user.c_str(), password.c_str());
    const auto t0 = Clock::now();
    auto res = c.Get(path.c_str());
    return {res ? res->status : 0, Ms(Clock::now() - t0)};
  }

  fs::path dir_;
  std::unique_ptr<gpu::NvmlLibrary> nvml_;
  std::unique_ptr<Exporter> exporter_;
  std::unique_ptr<MetricsServer> server_;
  std::thread serve_;
  int port_ = 0;
};

// Slowloris: each connection sends one more byte of a request that never ends every `period`,
// reconnecting when the server cuts it.
class SlowClients {
 public:
  SlowClients(int port, int count, std::chrono::milliseconds period) : port_(port) {
    for (int i = 0; i < count; ++i) fds_.push_back(testing::ConnectLoopback(port_));
    thread_ = std::thread([this, period] {
      const std::string request = "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: " + std::string(100000, 'a');
      std::vector<size_t> sent(fds_.size(), 0);
      while (!stop_) {
        for (size_t i = 0; i < fds_.size(); ++i) {
          if (fds_[i] < 0 || !testing::SendAll(fds_[i], std::string_view(&request[sent[i] % request.size()], 1))) {
            if (fds_[i] >= 0) ::close(fds_[i]);
            fds_[i] = testing::ConnectLoopback(port_);
            sent[i] = 0;
            ++reconnects_;
            continue;
          }
          ++sent[i];
        }
        for (auto t = Clock::now() + period; !stop_ && Clock::now() < t;) std::this_thread::sleep_for(10ms);
      }
    });
  }
  ~SlowClients() {
    stop_ = true;
    thread_.join();
    for (int fd : fds_) {
      if (fd >= 0) ::close(fd);
    }
  }
  int reconnects() const { return reconnects_; }

 private:
  int port_;
  std::vector<int> fds_;
  std::atomic<bool> stop_{false};
  std::atomic<int> reconnects_{0};
  std::thread thread_;
};

TEST_F(ExporterHostileClientTest, Bug8_SlowHeaderConnectionsDoNotDelayAnAuthorisedScrape) {
  Start({{"prom", Bcrypt("s3cret", 4)}});
  ASSERT_EQ(Scrape("prom", "s3cret").first, 200);
  for (int count : {8, 64}) {
    SlowClients slow(port_, count, 200ms);
    std::this_thread::sleep_for(300ms);  // every slow connection has been accepted and sent bytes
    double worst = 0;
    for (int i = 0; i < 15; ++i) {
      const auto [status, ms] = Scrape("prom", "s3cret");
      EXPECT_EQ(status, 200) << count << " slow connections, scrape " << i;
      worst = std::max(worst, ms);
      std::this_thread::sleep_for(100ms);
    }
    EXPECT_LT(worst, 1000) << "with " << count << " slow-header connections";
  }
}

TEST_F(ExporterHostileClientTest, Bug8_ATrickledRequestIsCutAtTheWholeRequestDeadlineAndAnIdleOneToo) {
  Start();
  // One byte every 500 ms keeps a per-read timeout from ever firing; the whole-request deadline
  // (5 s) cuts it all the same. An idle connection goes at the same deadline.
  const int trickle = testing::ConnectLoopback(port_);
  const int idle = testing::ConnectLoopback(port_);
  ASSERT_GE(trickle, 0);
  ASSERT_GE(idle, 0);
  const auto start = Clock::now();
  std::atomic<bool> trickle_cut{false};
  std::atomic<double> trickle_cut_ms{0};
  std::thread t([&] {
    const std::string req = "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: " + std::string(1000, 'a');
    for (size_t i = 0; Clock::now() - start < 9s; ++i) {
      if (!testing::SendAll(trickle, std::string_view(&req[i % req.size()], 1))) break;
      pollfd p{trickle, POLLIN, 0};
      if (::poll(&p, 1, 500) > 0) {
        char c;
        if (::recv(trickle, &c, 1, 0) <= 0) break;
      }
    }
    trickle_cut = Clock::now() - start < 9s;
    trickle_cut_ms = Ms(Clock::now() - start);
  });
  const testing::ReadResult r = testing::ReadUntilClosed(idle, 8000ms);
  t.join();
  EXPECT_TRUE(r.closed) << "an idle connection must be closed";
  EXPECT_GE(r.took.count(), 4500);
  EXPECT_LT(r.took.count(), 7000);
  EXPECT_TRUE(trickle_cut) << "a request trickled a byte every 500 ms must be cut at the deadline";
  EXPECT_LT(trickle_cut_ms.load(), 7000);
  ::close(trickle);
  ::close(idle);
}

TEST_F(ExporterHostileClientTest, Bug11_HeadIsAnsweredWhereverGetIsWithTheSameHeadersAndNoBody) {
  Start();
  for (const std::string path : {"/metrics", "/health", "/"}) {
    for (const std::string gzip : {"", "Accept-Encoding: gzip\r\n"}) {
      const std::string rest = " " + path + " HTTP/1.1\r\nHost: x\r\n" + gzip + "Connection: close\r\n\r\n";
      const testing::RawResponse get = RawRequest(port_, "GET" + rest);
      const testing::RawResponse head = RawRequest(port_, "HEAD" + rest);
      ASSERT_EQ(get.status, 200) << path;
      EXPECT_EQ(head.status, 200) << path << " " << gzip;
      EXPECT_EQ(head.body, "") << path;
      EXPECT_TRUE(head.closed) << path;
      for (const char* h : {"content-type", "content-length", "content-encoding", "vary", "x-content-type-options"}) {
        if (path == "/" && std::string(h) == "content-length") continue;  // the page shows the time
        EXPECT_EQ(head.header(h), get.header(h)) << path << " " << h << " " << gzip;
      }
      EXPECT_EQ(get.header("content-length"), std::to_string(get.body.size())) << path;
    }
  }
  const testing::RawResponse head = RawRequest(port_, "HEAD /metrics HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n");
  EXPECT_EQ(head.header("content-encoding"), "gzip");
  EXPECT_EQ(head.header("content-type"), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(RawRequest(port_, "HEAD /nope HTTP/1.1\r\nHost: x\r\n\r\n").status, 404);
}

TEST_F(ExporterHostileClientTest, Bug11_OtherMethodsGet405AtOnceWithOrWithoutABody) {
  Start();
  const std::vector<std::string> requests = {
      "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
      "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello",
      // A body announced and never sent: the answer must not wait for it.
      "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\nonly the start",
      "POST /metrics HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n",
      "PUT /health HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc",
      "DELETE / HTTP/1.1\r\nHost: x\r\n\r\n",
      "OPTIONS /metrics HTTP/1.1\r\nHost: x\r\n\r\n",
  };
  for (const std::string& req : requests) {
    const auto start = Clock::now();
    const int fd = testing::ConnectLoopback(port_);
    ASSERT_GE(fd, 0);
    testing::SendAll(fd, req);
    // Read only up to the end of the answer's header: the server may keep the connection a
    // moment for the rest of a body it will not read.
    testing::RawResponse r;
    std::string data;
    char buf[4096];
    while (data.find("\r\n\r\n") == std::string::npos && Clock::now() - start < 3s) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      data.append(buf, static_cast<size_t>(n));
    }
    const double took = Ms(Clock::now() - start);
    testing::ReadResult rr;
    rr.data = data;
    r = testing::ParseResponse(rr);
    ::close(fd);
    const std::string first_line = req.substr(0, req.find('\r'));
    EXPECT_EQ(r.status, 405) << first_line;
    EXPECT_EQ(r.header("allow"), "GET, HEAD") << first_line;
    EXPECT_LT(took, 1000) << first_line;
  }
}

TEST_F(ExporterHostileClientTest, Bug9_APasswordWithNulIsNotThePasswordBeforeTheNul) {
  const std::string hash = Bcrypt("s3cret", 4);
  const std::string nul("s3cret\0garbage", 14);
  EXPECT_TRUE(CheckPassword("s3cret", hash));
  EXPECT_FALSE(CheckPassword(nul, hash));
  // bcrypt reads 72 bytes: a longer password that starts with the right 72 is not the password.
  const std::string long72(72, 'x');
  const std::string hash72 = Bcrypt(long72, 4);
  EXPECT_TRUE(CheckPassword(long72, hash72));
  EXPECT_FALSE(CheckPassword(long72 + "y", hash72));

  BasicAuthenticator auth({{"prom", hash}});
  EXPECT_FALSE(auth.Allow(BasicHeader("prom", nul)));
  EXPECT_TRUE(auth.Allow(BasicHeader("prom", "s3cret")));
  EXPECT_FALSE(auth.Allow(BasicHeader("prom", nul)));  // also once the right one is remembered

  Start({{"prom", hash}});
  const std::string req = "GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: " + BasicHeader("prom", nul) + "\r\n\r\n";
  EXPECT_EQ(RawRequest(port_, req).status, 401);
  EXPECT_EQ(Scrape("prom", "s3cret").first, 200);
  EXPECT_EQ(RawRequest(port_, req).status, 401);
}

TEST_F(ExporterHostileClientTest, Bug9_ManyWrongPasswordsDoNotStarveARightOne) {
  // Production cost (10): ~50-100 ms of CPU per check. 48 clients each send distinct wrong
  // passwords in a closed loop, as fast as the server answers.
  Start({{"prom", Bcrypt("s3cret", 10)}, {"grafana", Bcrypt("hunter2", 10)}});
  ASSERT_EQ(Scrape("prom", "s3cret").first, 200);  // Prometheus' first scrape, before the flood
  std::atomic<bool> stop{false};
  std::atomic<int> attempts{0};
  std::vector<std::thread> flood;
  for (int i = 0; i < 48; ++i) {
    flood.emplace_back([&, i] {
      for (int n = 0; !stop; ++n) {
        const std::string req = "GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: " +
                                BasicHeader("prom", "wrong-" + std::to_string(i) + "-" + std::to_string(n)) + "\r\n\r\n";
        const testing::RawResponse r = RawRequest(port_, req, 3000ms);
        if (r.status != 0) ++attempts;
      }
    });
  }
  std::this_thread::sleep_for(500ms);
  double worst = 0;
  for (int i = 0; i < 20; ++i) {
    const auto [status, ms] = Scrape("prom", "s3cret");
    EXPECT_EQ(status, 200) << "scrape " << i;
    worst = std::max(worst, ms);
    std::this_thread::sleep_for(50ms);
  }
  // A right password never seen before, from another client address: it needs bcrypt, and gets
  // a turn although the flood keeps asking for one.
  const std::string grafana = "GET /health HTTP/1.1\r\nHost: x\r\nAuthorization: " + BasicHeader("grafana", "hunter2") + "\r\n\r\n";
  const testing::RawResponse first = RawRequest(port_, grafana, 5000ms, "127.0.0.2");
  stop = true;
  for (std::thread& t : flood) t.join();
  EXPECT_LT(worst, 1000) << "a remembered right password waits behind wrong ones";
  EXPECT_EQ(first.status, 200);
  EXPECT_LT(first.took.count(), 1500) << "a new right password from another address waits behind the flood";
  EXPECT_GT(attempts.load(), 48);
}

}  // namespace
}  // namespace gpunode::exporter
