// Privilege separation's channel, in one process: the agent's publisher (src/exporter/publish.h)
// writing a real Exporter's pages on the simulated NVML into a folder, and the front's file source
// (src/exporter/published.h) reading them back: the format, missing, stale, truncated, oversized
// and changed files, the folder's permissions.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/support/profile.h"
#include "src/exporter/exporter.h"
#include "src/exporter/page_source.h"
#include "src/exporter/publish.h"
#include "src/exporter/published.h"
#include "test/testing/sim_library.h"
#include "test/testing/status_matchers.h"

namespace gpunode::exporter {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using ::testing::HasSubstr;

class PublishTest : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = fs::temp_directory_path() / ("gpn-publish-" + std::to_string(::getpid()) + "-" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(base_);
    fs::create_directories(base_);
    dir_ = (base_ / "published").string();
  }
  void TearDown() override {
    exporter_.reset();
    nvml_.reset();
    fs::remove_all(base_);
  }
  // A file as the agent would write it (through PublishDir), or raw bytes.
  void Publish(const std::string& name, int64_t produced_ms, int64_t period_ms, int status, const std::string& body,
               const std::string& gzip = "") {
    auto d = PublishDir::Open(dir_);
    ASSERT_OK(d) << d.status();
    ASSERT_OK(d->Write(name, EncodePublished(produced_ms, period_ms, status, body, gzip)));
  }
  void WriteRaw(const std::string& name, const std::string& bytes) {
    fs::create_directories(dir_);
    std::ofstream(dir_ + "/" + name, std::ios::binary) << bytes;
  }
  void StartExporter() {
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
    o.interval = 3600s;  // one page, rendered at Start: the publisher must not rewrite it
    exporter_ = std::make_unique<Exporter>(*nvml_, std::move(o));
    exporter_->Start();
  }

  fs::path base_;
  std::string dir_;
  std::unique_ptr<gpu::NvmlLibrary> nvml_;
  std::unique_ptr<Exporter> exporter_;
};

TEST(PublishedFormatTest, RoundTripsAndRefusesTruncatedForeignAndPaddedFiles) {
  const std::string encoded = EncodePublished(1733050000123, 1000, 503, "body\n", std::string("\x1f\x8b\0z", 4));
  EXPECT_EQ(encoded.substr(0, encoded.find('\n')),
            "gpunode-published/1 produced_ms=1733050000123 period_ms=1000 status=503 length=5 gzip_length=4");
  auto f = DecodePublished(encoded, "dir/metrics");
  ASSERT_OK(f) << f.status();
  EXPECT_EQ(f->produced_ms, 1733050000123);
  EXPECT_EQ(f->period_ms, 1000);
  EXPECT_EQ(f->status, 503);
  EXPECT_EQ(*f->body, "body\n");
  ASSERT_NE(f->gzip, nullptr);
  EXPECT_EQ(*f->gzip, std::string("\x1f\x8b\0z", 4));
  EXPECT_EQ(DecodePublished(EncodePublished(1, 0, 200, "x"), "f")->gzip, nullptr);

  const std::vector<std::pair<std::string, std::string>> bad = {
      {encoded.substr(0, encoded.size() - 3), "dir/metrics: truncated: the header announces 9 bytes, the file has 6"},
      {encoded + "x", "the header announces 9 bytes, the file has 10 (trailing bytes)"},
      {"", "dir/metrics: empty file"},
      {"gpunode-published/1 produced_ms=1", "no gpunode-published header line"},
      {"HTTP/1.1 200 OK\n\nhello", "is not gpunode-published/1"},
      {"gpunode-published/1 produced_ms=1 status=200\nx", "lacks produced_ms, status or length"},
      {"gpunode-published/1 produced_ms=1 status=999 length=0\n", "status 999 is not an HTTP status"},
      {"gpunode-published/1 produced_ms=-5 status=200 length=0\n", "produced_ms=-5 is not a non-negative number"},
      {"gpunode-published/1 produced_ms=1 status=200 length=99999999999999999999\n", "is not a non-negative number"},
  };
  for (const auto& [data, want] : bad) {
    auto d = DecodePublished(data, "dir/metrics");
    ASSERT_FALSE(d.ok()) << data;
    EXPECT_TRUE(absl::IsDataLoss(d.status())) << d.status();
    EXPECT_THAT(std::string(d.status().message()), HasSubstr(want)) << data;
  }
}

TEST_F(PublishTest, AMissingFolderOrFileIs503SayingWhatIsMissing) {
  PublishedDir dir(dir_);
  FilePageSource pages(dir);
  Page p = pages.Metrics();
  EXPECT_EQ(p.status, 503);
  EXPECT_THAT(*p.body, HasSubstr("the publish folder " + dir_ + " does not exist"));
  fs::create_directories(dir_);
  p = pages.Health();
  EXPECT_EQ(p.status, 503);
  EXPECT_THAT(*p.body, HasSubstr(dir_ + "/health has not been published (yet): the agent's exporter writes it"));
  PublishedRoutes routes(dir, {}, /*health_port=*/true);
  std::optional<RouteResponse> r = routes("/readyz");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  EXPECT_THAT(r->body, HasSubstr("agent-health.json has not been published (yet): gpunode agent writes it"));
  EXPECT_FALSE(routes("/other"));
}

TEST_F(PublishTest, AFileIsReadAgainOnlyWhenItChanged) {
  const int64_t now = UnixMillis();
  Publish(kPublishedHealth, now, 1000, 200, "OK\n");
  PublishedDir dir(dir_);
  for (int i = 0; i < 100; ++i) {
    auto f = dir.Get(kPublishedHealth);
    ASSERT_OK(f);
    EXPECT_EQ(*(*f)->body, "OK\n");
  }
  EXPECT_EQ(dir.reads(), 1u);
  // The same size, another content: a rename is a new file.
  Publish(kPublishedHealth, now, 1000, 503, "NO\n");
  auto f = dir.Get(kPublishedHealth);
  ASSERT_OK(f);
  EXPECT_EQ(*(*f)->body, "NO\n");
  EXPECT_EQ((*f)->status, 503);
  EXPECT_EQ(dir.reads(), 2u);
  fs::remove(dir_ + "/" + kPublishedHealth);
  EXPECT_TRUE(absl::IsNotFound(dir.Get(kPublishedHealth).status()));
}

TEST_F(PublishTest, ATruncatedOrOversizedFileIs500NamingTheProblem) {
  Publish(kPublishedHealth, UnixMillis(), 1000, 200, "OK\n");
  const std::string page = EncodePublished(UnixMillis(), 0, 200, std::string(2000, 'x'));
  WriteRaw(kPublishedMetrics, page.substr(0, page.size() - 10));
  PublishedDir dir(dir_);
  FilePageSource pages(dir);
  Page p = pages.Metrics();
  EXPECT_EQ(p.status, 500);
  EXPECT_THAT(*p.body, HasSubstr(dir_ + "/metrics: truncated: the header announces 2000 bytes, the file has 1990"));
  // A bad file stays bad until it changes; it is not read again meanwhile.
  const uint64_t reads = dir.reads();
  EXPECT_EQ(pages.Metrics().status, 500);
  EXPECT_EQ(dir.reads(), reads);
  WriteRaw(kPublishedMetrics, page);
  EXPECT_EQ(pages.Metrics().status, 200);

  PublishedDir small(dir_, 1024);
  FilePageSource bounded(small);
  p = bounded.Metrics();
  EXPECT_EQ(p.status, 500);
  EXPECT_THAT(*p.body, HasSubstr("more than the 1024 a published file may have"));
  WriteRaw(kPublishedStatusPage, "not ours at all");
  p = bounded.StatusPage();
  EXPECT_EQ(p.status, 500);
  EXPECT_THAT(*p.body, HasSubstr("status.html: no gpunode-published header line"));
}

TEST_F(PublishTest, AStaleHeartbeatIs503AndSaysHowOld) {
  const int64_t now = UnixMillis();
  Publish(kPublishedHealth, now - 12000, 1000, 200, "OK\n");
  Publish(kPublishedMetrics, now - 12000, 0, 200, "DCGM_FI_DEV_GPU_TEMP 1\n");
  Publish(kPublishedAgentHealth, now - 12000, 1000, 200, R"({"paths": {"/readyz": {"status": 200, "contentType": "text/plain; charset=utf-8", "body": "readyz ok\n"}}})");
  PublishedDir dir(dir_);
  FilePageSource pages(dir);
  for (const Page& p : {pages.Health(), pages.Metrics(), pages.StatusPage()}) {
    EXPECT_EQ(p.status, 503);
    EXPECT_THAT(*p.body, HasSubstr("the agent's exporter heartbeat is 12 s old (rewritten every 1 s, stale after 5 s): "
                                   "is the agent running?"));
  }
  PublishedRoutes routes(dir, {}, false);
  std::optional<RouteResponse> r = routes("/readyz");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  EXPECT_THAT(r->body, HasSubstr("the agent's health is 12 s old"));
  // A longer bound given to the front: fresh again. The metrics page itself has no period: its
  // age does not matter while the heartbeat is fresh.
  PublishedRoutes patient(dir, {.stale_after = 20s}, false);
  EXPECT_EQ(patient("/readyz")->status, 200);
  EXPECT_EQ(patient("/readyz")->body, "readyz ok\n");
  FilePageSource patient_pages(dir, {.stale_after = 20s});
  EXPECT_EQ(patient_pages.Metrics().status, 200);
  EXPECT_EQ(*patient_pages.Metrics().body, "DCGM_FI_DEV_GPU_TEMP 1\n");
}

TEST_F(PublishTest, TheFolderIsMadeWritableByItsOwnerOnlyAndALinkIsNeverWrittenThrough) {
  fs::create_directories(dir_);
  ASSERT_EQ(::chmod(dir_.c_str(), 0777), 0);  // what an emptyDir is
  auto d = PublishDir::Open(dir_);
  ASSERT_OK(d) << d.status();
  struct stat st {};
  ASSERT_EQ(::stat(dir_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0755u);
  // A link where a file should be (someone else wrote the folder): refused, its target untouched.
  const std::string target = (base_ / "victim").string();
  std::ofstream(target) << "precious";
  fs::create_symlink(target, dir_ + "/metrics");
  Status s = d->Write(kPublishedMetrics, EncodePublished(1, 0, 200, "x"));
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("a symbolic link is in its place; nothing written"));
  std::ifstream in(target);
  std::string text;
  std::getline(in, text);
  EXPECT_EQ(text, "precious");
  // Files are 0644: a front with another uid reads them.
  ASSERT_OK(d->Write(kPublishedHealth, EncodePublished(1, 0, 200, "x")));
  ASSERT_EQ(::stat((dir_ + "/health").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  // Nothing else is left in the folder (no temp files, no lock files).
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir_)) names.push_back(e.path().filename().string());
  EXPECT_THAT(names, ::testing::UnorderedElementsAre("metrics", "health"));
}

TEST_F(PublishTest, ThePublisherWritesWhatTheLiveExporterServesAndAHeartbeatEvenWhenNothingChanged) {
  StartExporter();
  auto d = PublishDir::Open(dir_);
  ASSERT_OK(d) << d.status();
  ExporterPageSource live(*exporter_);
  PublishedDir dir(dir_);
  FilePageSource files(dir);
  {
    PagePublisher publisher(live, *d, {.period = 100ms});
    ASSERT_OK(publisher.Start());
    const Page want = live.Metrics();
    const Page got = files.Metrics();
    ASSERT_EQ(got.status, 200) << *got.body;
    EXPECT_EQ(*got.body, *want.body);
    ASSERT_NE(got.gzip, nullptr);
    EXPECT_EQ(*got.gzip, *want.gzip);
    EXPECT_EQ(got.content_type, want.content_type);
    EXPECT_THAT(*got.body, HasSubstr("DCGM_FI_DEV_GPU_TEMP{gpu=\"7\""));
    EXPECT_EQ(*files.Health().body, "OK\n");
    EXPECT_EQ(files.Health().status, 200);
    EXPECT_EQ(*files.StatusPage().body, *live.StatusPage().body);
    EXPECT_EQ(files.StatusPage().content_type, "text/html; charset=utf-8");

    auto first_health = dir.Get(kPublishedHealth);
    auto first_metrics = dir.Get(kPublishedMetrics);
    ASSERT_OK(first_health);
    ASSERT_OK(first_metrics);
    std::this_thread::sleep_for(450ms);
    // Nothing changed (a 1 h interval): the heartbeat was rewritten, the page was not.
    auto later_health = dir.Get(kPublishedHealth);
    auto later_metrics = dir.Get(kPublishedMetrics);
    ASSERT_OK(later_health);
    ASSERT_OK(later_metrics);
    EXPECT_GE((*later_health)->produced_ms - (*first_health)->produced_ms, 300);
    EXPECT_EQ((*later_health)->period_ms, 100);
    EXPECT_EQ(*later_metrics, *first_metrics) << "the unchanged page was written again";
  }
  // Stopped: the files are gone, and the front says so at once.
  EXPECT_FALSE(fs::exists(dir_ + "/metrics"));
  EXPECT_FALSE(fs::exists(dir_ + "/health"));
  EXPECT_FALSE(fs::exists(dir_ + "/status.html"));
  EXPECT_EQ(files.Metrics().status, 503);
}

TEST_F(PublishTest, TheAgentsHealthAnswersArePublishedPerPathAndServedBack) {
  auto d = PublishDir::Open(dir_);
  ASSERT_OK(d);
  int calls = 0;
  auto routes = [&calls](std::string_view path) -> std::optional<RouteResponse> {
    ++calls;
    if (path == "/healthz") return RouteResponse{200, "text/plain; charset=utf-8", "[+] plugin running\nhealthz ok\n"};
    if (path == "/readyz") return RouteResponse{503, "text/plain; charset=utf-8", "[-] plugin starting\nreadyz failed\n"};
    if (path == "/readyz/plugin") return RouteResponse{503, "text/plain; charset=utf-8", "plugin starting\n"};
    if (path == "/metrics") {
      return RouteResponse{200, "text/plain; version=0.0.4; charset=utf-8", "gpunode_component_up{component=\"plugin\"} 0\n"};
    }
    return std::nullopt;
  };
  RoutesPublisher publisher([] { return AgentHealthPaths({"plugin"}); }, routes, *d, {.period = 100ms});
  ASSERT_OK(publisher.Start());
  EXPECT_EQ(calls, 5);  // /healthz /readyz /metrics /healthz/plugin /readyz/plugin
  PublishedDir dir(dir_);
  PublishedRoutes health_port(dir, {}, /*health_port=*/true);
  PublishedRoutes exporter_port(dir, {}, /*health_port=*/false);
  auto r = health_port("/readyz");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(r->body, "[-] plugin starting\nreadyz failed\n");
  EXPECT_EQ(health_port("/healthz")->status, 200);
  EXPECT_EQ(health_port("/readyz/plugin")->body, "plugin starting\n");
  EXPECT_EQ(health_port("/healthz/nope")->status, 404);
  EXPECT_EQ(health_port("/healthz/nope")->body, "no component nope\n");
  EXPECT_EQ(health_port("/metrics")->content_type, "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_FALSE(exporter_port("/metrics")) << "the exporter's port keeps its own /metrics";
  EXPECT_FALSE(health_port("/"));
  publisher.Stop();
  EXPECT_EQ(health_port("/readyz")->status, 503);
  EXPECT_THAT(health_port("/readyz")->body, HasSubstr("has not been published"));
  // An answer that is not what the agent writes: 500, not a crash.
  Publish(kPublishedAgentHealth, UnixMillis(), 1000, 200,
          R"({"paths": {"/healthz": {"status": "ok"}, "/readyz": {"status": 200, "contentType": "a\r\nSet-Cookie: x", "body": ""}}})");
  EXPECT_EQ(health_port("/healthz")->status, 500);
  EXPECT_THAT(health_port("/readyz")->body, HasSubstr("the answer for /readyz is not {status, contentType, body}"));
  Publish(kPublishedAgentHealth, UnixMillis(), 1000, 200, "{not json");
  EXPECT_EQ(health_port("/healthz")->status, 500);
  EXPECT_THAT(health_port("/healthz")->body, HasSubstr("not valid JSON"));
}

}  // namespace
}  // namespace gpunode::exporter
