// Privilege separation with the real binary: `gpunode --simulate dgx-h200 agent` publishing into a
// folder (publishDir) and `gpunode exporter --from-dir` as a second process serving it. The front
// serves the page the agent's exporter renders, byte for byte; the agent with no listen address
// opens no TCP port; a killed agent makes the front's /readyz 503 within the staleness bound.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/support/profile.h"
#include "test/exporter/raw_http.h"
#include "test/testing/free_port.h"
#include "test/testing/run_gpunode.h"
#include "test/testing/sim_library.h"
#include "test/testing/status_matchers.h"

namespace gpunode {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using std::chrono::milliseconds;
using std::chrono::seconds;

class PublishProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("gpunode-publish-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    auto source = sim::ResolveProfile("dgx-h200");
    ASSERT_OK(source) << source.status();
    std::ofstream(Path("profile.yaml")) << source->text;
  }
  void TearDown() override {
    Kill(agent_, SIGKILL);
    Kill(front_, SIGKILL);
    fs::remove_all(dir_);
  }

  std::string Path(const std::string& name) const { return (dir_ / name).string(); }
  std::string Read(const std::string& name) const {
    std::ifstream in(Path(name));
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  std::string Logs() const { return "--- agent:\n" + Read("agent.log") + "--- front:\n" + Read("front.log"); }

  // Runs gpunode with `args`, stdout and stderr into `log`.
  pid_t Spawn(const std::vector<std::string>& args, const std::string& log) {
    return testing::SpawnGpunode(args, Path(log), {{"GPUNODE_SIM_LIBRARY", testing::SimLibrary()}});
  }
  // Sends `sig` and waits; the exit code (-1 when killed by a signal or not running).
  static int Kill(pid_t& pid, int sig) {
    if (pid <= 0) return -1;
    ::kill(pid, sig);
    int status = 0;
    ::waitpid(pid, &status, 0);
    pid = 0;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  // Only the exporter: what the front serves depends on nothing else (no kubelet needed).
  void StartAgent(const std::string& health_listen, const std::string& exporter_listen) {
    std::ofstream(Path("agent.yaml")) << "kubernetes: {enabled: false}\n"
                                      << "healthListen: \"" << health_listen << "\"\n"
                                      << "publishDir: " << Path("published") << "\n"
                                      << "plugin: {enabled: false}\nlabels: {enabled: false}\n"
                                      << "validator: {enabled: false}\n"
                                      << "exporter: {listen: \"" << exporter_listen
                                      << "\", collectInterval: 3600000}\n";
    agent_ = Spawn({"--simulate", Path("profile.yaml"), "agent", "--config", Path("agent.yaml")}, "agent.log");
  }
  void StartFront() {
    front_port_ = testing::FreePort();
    front_health_port_ = testing::FreePort();
    front_ = Spawn({"exporter", "--from-dir", Path("published"), "--listen", "127.0.0.1:" + std::to_string(front_port_),
                    "--health-listen", "127.0.0.1:" + std::to_string(front_health_port_), "--stale-after", "3s"},
                   "front.log");
  }
  testing::RawResponse Get(int port, const std::string& path, const std::string& headers = "") {
    return testing::RawRequest(port, "GET " + path + " HTTP/1.1\r\nHost: x\r\n" + headers + "\r\n", milliseconds(3000));
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

  // The inodes of the TCP sockets (any state) `pid` holds.
  static std::vector<std::string> TcpSocketsOf(pid_t pid) {
    std::set<std::string> inodes;
    const std::string fd_dir = "/proc/" + std::to_string(pid) + "/fd";
    for (const auto& e : fs::directory_iterator(fd_dir)) {
      std::error_code ec;
      const std::string target = fs::read_symlink(e.path(), ec).string();
      if (!ec && target.rfind("socket:[", 0) == 0) inodes.insert(target.substr(8, target.size() - 9));
    }
    std::vector<std::string> tcp;
    for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
      std::ifstream in("/proc/" + std::to_string(pid) + std::string(table).substr(5));
      std::string line;
      std::getline(in, line);  // header
      while (std::getline(in, line)) {
        std::istringstream fields(line);
        std::vector<std::string> f;
        for (std::string x; fields >> x;) f.push_back(x);
        if (f.size() > 9 && inodes.count(f[9]) > 0) tcp.push_back(line);
      }
    }
    return tcp;
  }

  fs::path dir_;
  pid_t agent_ = 0, front_ = 0;
  int front_port_ = 0, front_health_port_ = 0;
};

TEST_F(PublishProcessTest, TheFrontServesThePageTheAgentRendersAndGoesUnreadyWhenTheAgentIsKilled) {
  const int health_port = testing::FreePort(), exporter_port = testing::FreePort();
  StartAgent("127.0.0.1:" + std::to_string(health_port), "127.0.0.1:" + std::to_string(exporter_port));
  StartFront();
  ASSERT_TRUE(Eventually([&] { return Get(front_health_port_, "/readyz").status == 200; }, seconds(30)))
      << Get(front_health_port_, "/readyz").body << Logs();
  EXPECT_THAT(Get(front_health_port_, "/readyz").body, HasSubstr("[+] exporter running"));
  EXPECT_EQ(Get(front_health_port_, "/healthz/exporter").status, 200);
  EXPECT_EQ(Get(front_health_port_, "/healthz/nope").status, 404);
  EXPECT_THAT(Get(front_health_port_, "/metrics").body, HasSubstr("gpunode_component_up{component=\"exporter\"} 1"));
  // The front's /metrics is the agent's exporter's page, byte for byte, plain and gzip.
  ASSERT_TRUE(Eventually([&] { return Get(exporter_port, "/metrics").status == 200; }, seconds(10))) << Logs();
  for (const std::string encoding : {"", "Accept-Encoding: gzip\r\n"}) {
    // The page changes while the agent starts (the first pod-resources List, the first samples):
    // compare two reads that came from one published version (the front lags by up to a write
    // period, more on a loaded machine).
    testing::RawResponse live, front;
    Eventually(
        [&] {
          live = Get(exporter_port, "/metrics", encoding);
          front = Get(front_port_, "/metrics", encoding);
          return front.body == live.body;
        },
        seconds(15));
    EXPECT_EQ(front.status, 200) << front.body << Logs();
    EXPECT_EQ(front.body, live.body) << encoding;
    EXPECT_EQ(front.header("content-type"), live.header("content-type"));
    EXPECT_EQ(front.header("content-encoding"), live.header("content-encoding"));
  }
  EXPECT_THAT(Get(front_port_, "/metrics").body, HasSubstr("DCGM_FI_DEV_GPU_TEMP{gpu=\"7\""));
  EXPECT_EQ(Get(front_port_, "/health").body, Get(exporter_port, "/health").body);
  EXPECT_EQ(Get(front_port_, "/readyz").status, 200);  // the exporter's port answers /readyz too
  EXPECT_EQ(Get(front_port_, "/").status, 200);

  // Killed (no chance to clean up): the heartbeat goes stale; the bound is 3 s (--stale-after).
  const auto killed = std::chrono::steady_clock::now();
  Kill(agent_, SIGKILL);
  ASSERT_TRUE(Eventually([&] { return Get(front_health_port_, "/readyz").status == 503; }, seconds(10))) << Logs();
  const auto took = std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - killed);
  // Bound 3 s after the last write (at most 1 s before the kill); the rest is slack for a loaded
  // 2-core CI machine (ctest -j2 beside the cluster test), where the front's answers come late.
  EXPECT_LE(took.count(), 3000 + 1000 + 4000) << "bound 3 s after the last write (at most 1 s before the kill)";
  EXPECT_GE(took.count(), 2000) << "503 before the bound: the heartbeat was not fresh";
  const testing::RawResponse stale = Get(front_health_port_, "/readyz");
  EXPECT_THAT(stale.body, HasSubstr("the agent's health is "));
  EXPECT_THAT(stale.body, HasSubstr(" s old (rewritten every 1 s, stale after 3 s): is the agent running?"));
  EXPECT_EQ(Get(front_port_, "/metrics").status, 503);
  EXPECT_THAT(Get(front_port_, "/metrics").body, HasSubstr("the agent's exporter heartbeat is"));
  EXPECT_EQ(Kill(front_, SIGTERM), 0) << Logs();
}

TEST_F(PublishProcessTest, WithoutListenAddressesTheAgentOpensNoTcpPortAndAStopIsSeenAtOnce) {
  StartAgent("", "");
  StartFront();
  ASSERT_TRUE(Eventually([&] { return Get(front_health_port_, "/readyz").status == 200; }, seconds(30)))
      << Get(front_health_port_, "/readyz").body << Logs();
  EXPECT_THAT(Get(front_port_, "/metrics").body, HasSubstr("DCGM_FI_DEV_GPU_TEMP{gpu=\"0\""));
  EXPECT_THAT(Read("agent.log"), HasSubstr("health on no port, published into " + Path("published")));
  EXPECT_THAT(Read("agent.log"), HasSubstr("[exporter] no port (exporter.listen \"\")"));
  EXPECT_THAT(TcpSocketsOf(agent_), ::testing::IsEmpty()) << "the agent holds TCP sockets\n" << Logs();
  EXPECT_THAT(TcpSocketsOf(front_), ::testing::SizeIs(2)) << "the front listens on two ports";
  // What the front container needs: read access only (files 0644 in a 0755 folder).
  struct stat st {};
  ASSERT_EQ(::stat(Path("published").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0755u);
  ASSERT_EQ(::stat(Path("published/metrics").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  // A clean stop removes the files: the front says so at once, not after the bound.
  EXPECT_EQ(Kill(agent_, SIGTERM), 0) << Logs();
  const testing::RawResponse r = Get(front_health_port_, "/readyz");
  EXPECT_EQ(r.status, 503);
  EXPECT_THAT(r.body, HasSubstr("agent-health.json has not been published (yet)"));
  EXPECT_EQ(Get(front_port_, "/metrics").status, 503);
  EXPECT_EQ(Kill(front_, SIGTERM), 0) << Logs();
  EXPECT_THAT(Read("front.log"), HasSubstr("stopped"));
}

TEST_F(PublishProcessTest, TheFrontRefusesSamplingFlagsAndStartsWithoutTheFolder) {
  auto r = testing::RunGpunode("exporter --from-dir " + Path("nope") + " -c 1000");
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_THAT(r.out, HasSubstr("--collect-interval does not apply with --from-dir"));
  r = testing::RunGpunode("exporter --health-listen :0");
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_THAT(r.out, HasSubstr("--health-listen needs --from-dir"));
  r = testing::RunGpunode("exporter --from-dir " + Path("nope") + " --stale-after soon");
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_THAT(r.out, HasSubstr("--stale-after \"soon\""));
  std::ofstream(Path("agent.yaml")) << "publishDir: " << Path("agent.yaml") << "/x\n";
  r = testing::RunGpunode("--simulate dgx-h200 agent --config " + Path("agent.yaml"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.out, HasSubstr("publishDir: "));
  // A folder that does not exist yet: the front starts and answers 503 until it does.
  StartFront();
  ASSERT_TRUE(Eventually([&] { return Get(front_health_port_, "/readyz").status != 0; }, seconds(10))) << Logs();
  EXPECT_EQ(Get(front_health_port_, "/readyz").status, 503);
  EXPECT_THAT(Get(front_port_, "/metrics").body, HasSubstr("does not exist"));
  EXPECT_THAT(Read("front.log"), HasSubstr("does not exist (yet)"));
}

}  // namespace
}  // namespace gpunode
