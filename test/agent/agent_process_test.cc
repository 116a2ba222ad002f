// The real `gpunode agent` on a simulated node, with the kubelet's device manager stood in for by
// the kubelet emulator over real gRPC: the validation gate, reload without dropping the plugin's
// registration, one failing component not taking the others down.
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "sim/support/profile.h"
#include "test/testing/kubelet_emulator.h"
#include "test/testing/run_gpunode.h"
#include "test/testing/sim_library.h"
#include "test/testing/status_matchers.h"
#include "test/testing/free_port.h"

namespace gpunode {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using std::chrono::milliseconds;
using std::chrono::seconds;

using ::gpunode::testing::FreePort;

using ::gpunode::testing::SimLibrary;

class AgentProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("gpunode-agent-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "dp");
    health_port_ = FreePort();
    exporter_port_ = FreePort();
  }
  void TearDown() override {
    Stop();
    if (kubelet_) kubelet_->Stop();
    fs::remove_all(dir_);
  }

  std::string Path(const std::string& name) const { return (dir_ / name).string(); }
  std::string Log() const {
    std::ifstream in(Path("agent.log"));
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  // The dgx-h200 profile as a file (the simulated NVML reloads it when it changes), with extra
  // lines under `driver:`.
  void WriteProfile(const std::string& driver_extra = "") {
    auto source = sim::ResolveProfile("dgx-h200");
    ASSERT_OK(source) << source.status();
    std::string text = source->text;
    if (!driver_extra.empty()) {
      const size_t at = text.find("\ndriver:\n");
      ASSERT_NE(at, std::string::npos);
      text.insert(at + 9, driver_extra);
    }
    const std::string tmp = Path("profile.yaml.tmp");
    std::ofstream(tmp) << text;
    fs::rename(tmp, Path("profile.yaml"));
  }

  void WriteConfig(const std::string& extra) {
    std::ofstream(Path("agent.yaml")) << "kubernetes: {enabled: false}\n"
                                      << "healthListen: 127.0.0.1:" << health_port_ << "\n"
                                      << "watchConfig: 200ms\n"
                                      << "plugin: {kubeletDir: " << Path("dp") << "}\n"
                                      << "labels: {nodeLabels: false, featuresFile: " << Path("features") << "}\n"
                                      << extra;
  }

  void StartKubelet() {
    kubelet_ = std::make_unique<testing::KubeletEmulator>(Path("dp"));
    ASSERT_TRUE(kubelet_->Start());
  }

  void Start() {
    pid_ = ::fork();
    if (pid_ == 0) {
      int fd = ::open(Path("agent.log").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(fd, 2);
      ::dup2(fd, 1);
      ::setenv("GPUNODE_SIM_LIBRARY", SimLibrary().c_str(), 1);
      const std::string bin = std::string(GPUNODE_BIN_DIR) + "/gpunode";
      const std::string profile = Path("profile.yaml");
      const std::string config = Path("agent.yaml");
      ::execl(bin.c_str(), bin.c_str(), "--simulate", profile.c_str(), "agent", "--config", config.c_str(), nullptr);
      ::_exit(127);
    }
  }
  int Stop() {
    if (pid_ <= 0) return -1;
    ::kill(pid_, SIGTERM);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = 0;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  // GET on the agent's health port: {status, body}; status 0 when it does not answer.
  std::pair<int, std::string> Get(const std::string& path, int port = 0) {
    httplib::Client c("127.0.0.1", port ? port : health_port_);
    c.set_connection_timeout(1);
    c.set_read_timeout(2);
    auto r = c.Get(path.c_str());
    if (!r) return {0, ""};
    return {r->status, r->body};
  }

  static bool AllHealth(const v1beta1::ListAndWatchResponse& r, const char* health, int n) {
    if (r.devices_size() != n) return false;
    for (const auto& d : r.devices()) {
      if (d.health() != health) return false;
    }
    return true;
  }

  template <typename P>
  bool Eventually(P pred, milliseconds limit) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < end) {
      if (pred()) return true;
      std::this_thread::sleep_for(milliseconds(20));
    }
    return pred();
  }

  fs::path dir_;
  int health_port_ = 0, exporter_port_ = 0;
  pid_t pid_ = 0;
  std::unique_ptr<testing::KubeletEmulator> kubelet_;
};

TEST_F(AgentProcessTest, HealthyNodeIsAdvertisedAfterValidationAndEveryComponentIsUp) {
  WriteProfile();
  WriteConfig("exporter: {listen: \"127.0.0.1:" + std::to_string(exporter_port_) + "\", collectInterval: 1000}\n");
  StartKubelet();
  Start();
  ASSERT_TRUE(kubelet_->WaitForRegistrations(1, seconds(20))) << Log();
  ASSERT_TRUE(kubelet_->WaitFor("nvidia.com/gpu", [](const auto& r) { return AllHealth(r, "Healthy", 8); }, seconds(20)))
      << Log();
  // The plugin registered after the first check passed: the kubelet never saw a GPU Unhealthy.
  const auto lists = kubelet_->Lists("nvidia.com/gpu");
  ASSERT_FALSE(lists.empty());
  for (const auto& list : lists) EXPECT_TRUE(AllHealth(list, "Healthy", 8)) << Log();
  ASSERT_TRUE(Eventually([&] { return Get("/readyz").first == 200; }, seconds(20))) << Get("/readyz").second << Log();
  EXPECT_THAT(Get("/readyz").second, HasSubstr("[+] plugin running"));
  EXPECT_THAT(Get("/metrics").second, HasSubstr("gpunode_component_up{component=\"exporter\"} 1"));
  EXPECT_EQ(Get("/healthz/plugin").first, 200);
  EXPECT_EQ(Get("/healthz/nope").first, 404);
  // The exporter's port: its page (with the component metrics) and the health paths.
  ASSERT_TRUE(Eventually([&] { return Get("/metrics", exporter_port_).second.find("gpunode_component_up") != std::string::npos; },
                         seconds(10)));
  EXPECT_THAT(Get("/metrics", exporter_port_).second, HasSubstr("DCGM_FI_DEV_GPU_TEMP"));
  EXPECT_EQ(Get("/readyz", exporter_port_).first, 200);
  EXPECT_TRUE(fs::exists(Path("features")));
  // The start-timing lines come from the agent's timing thread (it looks every 10 ms), so they may
  // trail /readyz by a few milliseconds.
  EXPECT_TRUE(Eventually([&] { return Log().find("allocatable advertised (plugin registered, validation passed)") !=
                                      std::string::npos; },
                         seconds(5)))
      << Log();
  EXPECT_THAT(Log(), HasSubstr("[validator] passed in"));
  EXPECT_EQ(Stop(), 0);
  EXPECT_THAT(Log(), HasSubstr("[agent] stopped"));
  EXPECT_FALSE(fs::exists(Path("dp/nvidia-gpu.sock")));
}

TEST_F(AgentProcessTest, FailingCudaKeepsEveryGpuUnhealthyUntilACheckPasses) {
  WriteProfile("  cuda_init_error: NO_DEVICE\n");
  WriteConfig("exporter: {enabled: false}\nvalidator: {retry: 1s}\n");
  StartKubelet();
  Start();
  ASSERT_TRUE(kubelet_->WaitForRegistrations(1, seconds(20))) << Log();
  ASSERT_TRUE(Eventually([&] { return Log().find("FAILED") != std::string::npos; }, seconds(20))) << Log();
  EXPECT_THAT(Log(), HasSubstr("CudaNoDevice"));
  std::this_thread::sleep_for(milliseconds(1500));  // more checks fail meanwhile
  for (const auto& list : kubelet_->Lists("nvidia.com/gpu")) {
    EXPECT_TRUE(AllHealth(list, "Unhealthy", 8)) << "a GPU was advertised healthy while CUDA failed\n" << Log();
  }
  // Mended: the next check (retry 1 s) opens the gate; the plugin never re-registered.
  WriteProfile();
  ASSERT_TRUE(kubelet_->WaitFor("nvidia.com/gpu", [](const auto& r) { return AllHealth(r, "Healthy", 8); }, seconds(20)))
      << Log();
  EXPECT_EQ(kubelet_->registrations(), 1);
  EXPECT_THAT(Log(), HasSubstr("validation passed: advertising the GPUs as healthy"));
}

TEST_F(AgentProcessTest, ConfigChangeRestartsOnlyTheChangedComponent) {
  WriteProfile();
  WriteConfig("exporter: {listen: \"127.0.0.1:" + std::to_string(exporter_port_) + "\", collectInterval: 1000}\n");
  StartKubelet();
  Start();
  ASSERT_TRUE(kubelet_->WaitForRegistrations(1, seconds(20))) << Log();
  ASSERT_TRUE(Eventually([&] { return Get("/readyz").first == 200; }, seconds(20))) << Log();
  // A new exporter interval, and a key that is wrong: the bad file is refused, the agent keeps going.
  WriteConfig("exporter: {listen: \"127.0.0.1:" + std::to_string(exporter_port_) + "\", collectInterval: 1000}\nbogus: 1\n");
  ::kill(pid_, SIGHUP);
  ASSERT_TRUE(Eventually([&] { return Log().find("keeping the running configuration") != std::string::npos; }, seconds(10)))
      << Log();
  EXPECT_THAT(Log(), HasSubstr("unknown key \"bogus\""));
  WriteConfig("exporter: {listen: \"127.0.0.1:" + std::to_string(exporter_port_) + "\", collectInterval: 2000}\n");
  ::kill(pid_, SIGHUP);
  ASSERT_TRUE(Eventually([&] { return Log().find("1 component(s) with new settings") != std::string::npos; }, seconds(10)))
      << Log();
  ASSERT_TRUE(Eventually([&] { return Log().find("collect interval 2000 ms") != std::string::npos; }, seconds(10)))
      << Log();
  std::this_thread::sleep_for(milliseconds(500));
  EXPECT_EQ(kubelet_->registrations(), 1) << "the plugin registered again for an exporter change\n" << Log();
  EXPECT_EQ(Stop(), 0);
}

TEST_F(AgentProcessTest, AComponentThatCannotStartDoesNotTakeTheOthersDown) {
  // The exporter's port is taken: it fails and is run again with backoff; the plugin serves.
  int blocker = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);  // not inherited by the agent
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(exporter_port_));
  ASSERT_EQ(::bind(blocker, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(blocker, 1), 0);
  WriteProfile();
  WriteConfig("exporter: {listen: \"127.0.0.1:" + std::to_string(exporter_port_) + "\"}\n");
  StartKubelet();
  Start();
  ASSERT_TRUE(kubelet_->WaitFor("nvidia.com/gpu", [](const auto& r) { return AllHealth(r, "Healthy", 8); }, seconds(20)))
      << Log();
  ASSERT_TRUE(Eventually([&] { return Get("/healthz/exporter").first == 503; }, seconds(10))) << Log();
  EXPECT_THAT(Get("/healthz/exporter").second, HasSubstr("address already in use"));
  EXPECT_EQ(Get("/healthz").first, 200);  // liveness: the agent itself is fine
  EXPECT_EQ(Get("/readyz").first, 503);
  EXPECT_TRUE(Eventually([&] { return Get("/readyz/plugin").first == 200; }, seconds(5)));
  EXPECT_THAT(Log(), HasSubstr("[exporter] error: cannot listen on"));
  ::close(blocker);
  // Freed: the next run (backoff 1 s, 2 s) serves.
  ASSERT_TRUE(Eventually([&] { return Get("/readyz").first == 200; }, seconds(15))) << Log();
  EXPECT_THAT(Get("/metrics").second, HasSubstr("gpunode_component_restarts_total{component=\"exporter\"} "));
}

TEST_F(AgentProcessTest, BadConfigIsRefusedBeforeAnythingStarts) {
  std::ofstream(Path("agent.yaml")) << "plugin:\n  kubeletdir: /x\n";
  auto r = testing::RunGpunode("--simulate dgx-h200 agent --config " + Path("agent.yaml"));
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_THAT(r.out, HasSubstr("agent.yaml:2: plugin: unknown key \"kubeletdir\""));
  auto missing = testing::RunGpunode("--simulate dgx-h200 agent --config " + Path("nope.yaml"));
  EXPECT_EQ(missing.exit_code, 3);
  EXPECT_THAT(missing.out, HasSubstr("nope.yaml"));
  auto printed = testing::RunGpunode("agent --print-config -o json");
  EXPECT_EQ(printed.exit_code, 0);
  EXPECT_THAT(printed.out, HasSubstr("\"kind\": \"AgentConfig\""));
}

}  // namespace
}  // namespace gpunode
