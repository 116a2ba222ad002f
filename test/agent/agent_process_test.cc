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
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "gmock/gmock.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "sim/support/profile.h"
#include "test/testing/kubelet_emulator.h"
#include "test/testing/run_gpunode.h"
#include "test/testing/sim_library.h"
#include "test/testing/status_matchers.h"
#include "test/testing/free_port.h"
#include "test/testing/fake_api_server.h"

namespace gpunode {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;
using std::chrono::milliseconds;
using std::chrono::seconds;

using ::gpunode::testing::FreePort;

using ::gpunode::testing::SimLibrary;

class AgentProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Short: the kubelet's and the plugin's socket paths below it must fit in 107 characters.
    static int counter = 0;
    dir_ = fs::temp_directory_path() / ("gpunode-agent-" + std::to_string(::getpid()) + "-" + std::to_string(++counter));
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

  // The agent with the Kubernetes API (the stand-in `api`) as node n1, labels onto the Node.
  // `kube_extra` and `plugin_extra` go into those sections (", key: value").
  void WriteKubeConfig(testing::FakeApiServer& api, const std::string& extra, const std::string& kube_extra = "",
                       const std::string& plugin_extra = "") {
    api.WriteKubeconfig(Path("kubeconfig"));
    std::ofstream(Path("agent.yaml")) << "nodeName: n1\n"
                                      << "kubernetes: {enabled: true, kubeconfig: " << Path("kubeconfig") << kube_extra
                                      << "}\n"
                                      << "healthListen: 127.0.0.1:" << health_port_ << "\n"
                                      << "watchConfig: 200ms\n"
                                      << "plugin: {kubeletDir: " << Path("dp") << plugin_extra << "}\n"
                                      << "exporter: {enabled: false}\n"
                                      << extra;
  }

  // Milliseconds until `pred` holds (polled every 5 ms), -1 when it did not within `limit`.
  template <typename P>
  int64_t MsUntil(P pred, milliseconds limit) {
    const auto start = std::chrono::steady_clock::now();
    const auto end = start + limit;
    while (std::chrono::steady_clock::now() < end) {
      if (pred()) return std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - start).count();
      std::this_thread::sleep_for(milliseconds(5));
    }
    return -1;
  }

  // The agent has exited (reaped); its exit code in `*code`.
  bool Exited(int* code) {
    int status = 0;
    if (pid_ <= 0 || ::waitpid(pid_, &status, WNOHANG) != pid_) return false;
    pid_ = 0;
    *code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return true;
  }

  void StartKubelet() {
    kubelet_ = std::make_unique<testing::KubeletEmulator>(Path("dp"));
    ASSERT_TRUE(kubelet_->Start());
  }

  void Start() {
    pid_ = testing::SpawnGpunode({"--simulate", Path("profile.yaml"), "agent", "--config", Path("agent.yaml")},
                                 Path("agent.log"), {{"GPUNODE_SIM_LIBRARY", SimLibrary()}});
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
  // A step that is not `cdi generate` with the chart's flags: refused at start too.
  // (Harmless if a regression ran it: a folder of the test, and no plugin on the host's kubelet.)
  std::ofstream(Path("agent.yaml")) << "plugin: {kubeletDir: " << Path("dp") << "}\nexporter: {enabled: false}\n"
                                    << "cdi:\n  enabled: true\n  args: [sim, hostroot, --output, " << Path("evil") << "]\n";
  auto step = testing::RunGpunode("--simulate dgx-h200 agent --config " + Path("agent.yaml"));
  EXPECT_EQ(step.exit_code, 3);
  EXPECT_THAT(step.out, HasSubstr("agent.yaml:5: cdi.args[0]: \"sim\": the cdi step runs only `gpunode cdi generate ...`"));
  auto printed = testing::RunGpunode("agent --print-config -o json");
  EXPECT_EQ(printed.exit_code, 0);
  EXPECT_THAT(printed.out, HasSubstr("\"kind\": \"AgentConfig\""));
}

// --- With the Kubernetes API (the stand-in in test/testing/fake_api_server.h) ------------------

// The API server stand-in holding Node n1 and the DaemonSet gpunode/gpunode.
struct AgentApi : testing::FakeApiServer {
  AgentApi() {
    AddNode("n1");
    AddDaemonSet("gpunode", "gpunode");
  }
};

// One watch of the Node serves labels, validator and events (issue 28): once the first round has
// put the labels and the condition on the Node, rounds that change nothing send no request at all
// (before: a GET per labels round, a GET and an apply per validation).
TEST_F(AgentProcessTest, RoundsThatChangeNothingSendNoRequest) {
  AgentApi api;
  WriteProfile();
  WriteKubeConfig(api, "validator: {interval: 1s, retry: 1s, cuda: false}\nlabels: {nodeLabels: true, interval: 1s}\n");
  StartKubelet();
  Start();
  auto condition = [&] {
    const nlohmann::json n = api.Object(testing::FakeApiServer::NodePath("n1"));
    for (const auto& c : n.value("status", nlohmann::json::object()).value("conditions", nlohmann::json::array())) {
      if (c.value("type", "") == "GpuStackReady") return c.value("status", "");
    }
    return std::string();
  };
  ASSERT_TRUE(Eventually([&] { return condition() == "True" && api.Labels("n1").count("nvidia.com/gpu.count") > 0; },
                         seconds(60)))
      << Log();
  ASSERT_TRUE(Eventually([&] { return Log().find("passed") != std::string::npos; }, seconds(10))) << Log();
  std::this_thread::sleep_for(milliseconds(1500));  // the watch has delivered the agent's own writes
  auto node_requests = [&] {
    return api.Count("GET /api/v1/nodes/n1") + api.Count("PATCH /api/v1/nodes/n1") + api.Count("PUT /api/v1/nodes/n1");
  };
  const int before = node_requests();
  const int events = static_cast<int>(api.Items(testing::FakeApiServer::kEvents).size());
  std::this_thread::sleep_for(seconds(5));  // four or more rounds of labels and of validation
  EXPECT_EQ(node_requests(), before) << "rounds that change nothing wrote or read the Node\n"
                                     << absl::StrJoin(api.Requests(), "\n") << "\n" << Log();
  EXPECT_EQ(static_cast<int>(api.Items(testing::FakeApiServer::kEvents).size()), events);
  // A change is still written at once: someone removes one of gpunode's labels.
  api.Change(testing::FakeApiServer::NodePath("n1"), [](nlohmann::json& n) { n["metadata"]["labels"].erase("nvidia.com/gpu.count"); });
  EXPECT_TRUE(Eventually([&] { return api.Labels("n1").count("nvidia.com/gpu.count") > 0; }, seconds(10))) << Log();
  EXPECT_EQ(Stop(), 0);
}

// The uninstall does not race the kubelet's SIGKILL: a component stuck in a request (the API server
// does not answer its label write) neither delays the removal of the CDI spec and the labels nor
// keeps the process past stopTimeout: the client's Stop ends the request in flight.
TEST_F(AgentProcessTest, UninstallAtSigtermRemovesTheSpecAndLabelsFirstAndAStuckComponentDoesNotHoldTheExit) {
  AgentApi api;
  // RBAC without `watch` on DaemonSets: only the check at SIGTERM sees the uninstall.
  api.On("GET", "/apis/apps/v1/namespaces/gpunode/daemonsets",
         {testing::FakeApiServer::ApiStatus(403, "Forbidden", "daemonsets.apps is forbidden: cannot watch")});
  api.SetLabel("n1", "gpunode.io/agent.version", "old", "gpunode");  // an earlier agent's merge patch
  api.SetAnnotation("n1", "gpunode.io/managed-labels", "gpunode.io/agent.version", "gpunode");
  api.SetLabel("n1", "nvidia.com/gpu.present", "true");   // not ours
  api.hang_label_writes = true;
  std::ofstream(Path("nvidia.yaml")) << "cdiVersion: 0.6.0\n";
  WriteProfile();
  WriteKubeConfig(api, "stopTimeout: 1s\nvalidator: {enabled: false}\n",
                  ", daemonset: gpunode/gpunode, removeOnUninstall: [" + Path("nvidia.yaml") + "]");
  StartKubelet();
  Start();
  ASSERT_TRUE(kubelet_->WaitForRegistrations(1, seconds(30))) << Log();
  ASSERT_TRUE(Eventually([&] { return api.hung() > 0; }, seconds(20))) << "the labels component never wrote\n" << Log();
  ASSERT_TRUE(Eventually([&] { return Log().find("the uninstall is not watched") != std::string::npos; }, seconds(10)))
      << Log();
  api.MarkDeleting(testing::FakeApiServer::DaemonSetPath("gpunode", "gpunode"));
  const auto sigterm = std::chrono::steady_clock::now();
  ::kill(pid_, SIGTERM);
  auto since_sigterm = [&] {
    return std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - sigterm).count();
  };
  int64_t removed_ms = MsUntil([&] { return !fs::exists(Path("nvidia.yaml")); }, seconds(15));
  if (removed_ms >= 0) removed_ms = since_sigterm();
  int code = -2;
  int64_t exited_ms = MsUntil([&] { return Exited(&code); }, seconds(20));
  if (exited_ms >= 0) exited_ms = since_sigterm();
  // Before: the spec went only after the stuck component's request timed out (10 s), and then only
  // if the kubelet's SIGKILL had not come first.
  EXPECT_GE(removed_ms, 0) << Log();
  EXPECT_LT(removed_ms, 5000) << "the CDI spec was removed " << removed_ms << " ms after SIGTERM\n" << Log();
  EXPECT_GE(exited_ms, 0) << Log();
  EXPECT_LT(exited_ms, 8000) << "the agent exited " << exited_ms << " ms after SIGTERM\n" << Log();
  EXPECT_EQ(code, 0);
  const auto labels = api.Labels("n1");
  EXPECT_FALSE(labels.count("gpunode.io/agent.version")) << Log();
  EXPECT_EQ(labels.count("nvidia.com/gpu.present"), 1u);
  EXPECT_THAT(Log(), HasSubstr("is being deleted (seen at Terminated): removing what gpunode put on the node"));
  // The label write stuck in the API server is ended by kube::Client::Stop after the cleanup, so
  // the component stops within stopTimeout instead of being left behind (harness_test covers a
  // component that ignores its stop token).
  EXPECT_THAT(Log(), HasSubstr("[labels] warning: still stopping after 1000 ms; removing what it wrote anyway"));
  EXPECT_THAT(Log(), Not(HasSubstr("did not stop within")));
  std::cerr << "SIGTERM -> CDI spec removed: " << removed_ms << " ms; -> exit: " << exited_ms << " ms\n";
  if (std::getenv("GPUNODE_TEST_SHOW_LOG")) std::cerr << Log();
  api.hang_label_writes = false;
}

// Better still: the uninstall is seen when the DaemonSet gets its deletionTimestamp, before any
// SIGTERM; cdi and labels are switched off first, so nothing writes the spec or the labels again.
TEST_F(AgentProcessTest, TheDaemonSetsDeletionIsSeenAtOnceAndCleanedUpBeforeSigterm) {
  AgentApi api;
  std::ofstream(Path("nvidia.yaml")) << "cdiVersion: 0.6.0\n";
  WriteProfile();
  WriteKubeConfig(api, "validator: {enabled: false}\n",
                  ", daemonset: gpunode/gpunode, removeOnUninstall: [" + Path("nvidia.yaml") + "]");
  StartKubelet();
  Start();
  ASSERT_TRUE(kubelet_->WaitForRegistrations(1, seconds(30))) << Log();
  ASSERT_TRUE(Eventually([&] { return api.Labels("n1").count("gpunode.io/agent.version") > 0; }, seconds(20))) << Log();
  std::this_thread::sleep_for(milliseconds(300));  // the DaemonSet watch is in place
  api.MarkDeleting(testing::FakeApiServer::DaemonSetPath("gpunode", "gpunode"));
  const int64_t removed_ms = MsUntil([&] { return !fs::exists(Path("nvidia.yaml")); }, seconds(10));
  EXPECT_GE(removed_ms, 0) << "no cleanup before SIGTERM\n" << Log();
  ASSERT_TRUE(Eventually([&] { return api.Labels("n1").count("gpunode.io/agent.version") == 0; }, seconds(5))) << Log();
  EXPECT_THAT(Log(), HasSubstr("DaemonSet gpunode/gpunode is being deleted: removing what gpunode put on the node"));
  // Off, and staying off: the labels do not come back.
  ASSERT_TRUE(Eventually([&] { return Get("/healthz/labels").second.find("disabled") != std::string::npos; }, seconds(5)))
      << Get("/healthz/labels").second;
  std::this_thread::sleep_for(milliseconds(500));
  EXPECT_EQ(api.Labels("n1").count("gpunode.io/agent.version"), 0u);
  EXPECT_EQ(Stop(), 0);
  EXPECT_EQ(Log().find("seen at Terminated"), std::string::npos) << "cleaned up twice\n" << Log();
  std::cerr << "deletionTimestamp -> CDI spec removed: " << removed_ms << " ms (no SIGTERM)\n";
}

// A Node label's veto and the config's switch are two reasons; a reload of the config never undoes
// the label's (before, the plugin briefly registered).
TEST_F(AgentProcessTest, AReloadDoesNotUndoANodeLabelsVeto) {
  AgentApi api;
  api.SetLabel("n1", "nvidia.com/gpu.deploy.device-plugin", "false");
  WriteProfile();
  WriteKubeConfig(api, "validator: {enabled: false}\n");
  StartKubelet();
  Start();
  ASSERT_TRUE(Eventually([&] { return Get("/readyz").first == 200; }, seconds(30))) << Get("/readyz").second << Log();
  EXPECT_THAT(Get("/readyz/plugin").second, HasSubstr("plugin disabled"));
  WriteKubeConfig(api, "validator: {enabled: false}\n", "", ", healthRecovery: 1m");
  ::kill(pid_, SIGHUP);
  ASSERT_TRUE(Eventually([&] { return Log().find("1 component(s) with new settings") != std::string::npos; },
                         seconds(10)))
      << Log();
  std::this_thread::sleep_for(milliseconds(1500));
  EXPECT_EQ(kubelet_->registrations(), 0) << "the reload switched on a plugin a Node label switched off\n" << Log();
  EXPECT_THAT(Get("/readyz/plugin").second, HasSubstr("plugin disabled"));
  // The label goes: the plugin starts.
  api.SetLabel("n1", "nvidia.com/gpu.deploy.device-plugin", "true");
  EXPECT_TRUE(kubelet_->WaitForRegistrations(1, seconds(20))) << Log();
  // Each reload left an Event on the Node.
  bool reloaded = false;
  for (const auto& e : api.Items(testing::FakeApiServer::kEvents)) {
    reloaded = reloaded || e.value("reason", "") == "AgentConfigReloaded";
  }
  EXPECT_TRUE(reloaded);
  EXPECT_EQ(Stop(), 0);
}

// The policy file gpunode's controller writes from a ClusterPolicy (an optional ConfigMap volume):
// its appearing, changing and going reload the agent, with no signal, as the config file's changes.
TEST_F(AgentProcessTest, APolicyFileIsReadWhenItAppearsChangesAndGoes) {
  auto write_policy = [&](const std::string& text) {  // atomically, as the kubelet updates a volume
    std::ofstream(Path("policy.yaml.tmp")) << text;
    fs::rename(Path("policy.yaml.tmp"), Path("policy.yaml"));
  };
  auto count = [&](const std::string& what) {
    const std::string log = Log();
    size_t n = 0;
    for (size_t at = log.find(what); at != std::string::npos; at = log.find(what, at + 1)) ++n;
    return n;
  };
  const std::string labels_changed = "policy file changed: 1 component(s) with new settings (labels)";
  WriteProfile();
  WriteConfig("exporter: {enabled: false}\npolicyFile: " + Path("policy.yaml") + "\n");
  StartKubelet();
  Start();
  ASSERT_TRUE(kubelet_->WaitForRegistrations(1, seconds(20))) << Log();
  ASSERT_TRUE(Eventually([&] { return Get("/readyz").first == 200; }, seconds(20))) << Log();
  EXPECT_THAT(Log(), HasSubstr("policy file " + Path("policy.yaml") + ": none yet"));
  write_policy("origin: ClusterPolicy p generation 1\nlabels: {enabled: false}\n");
  ASSERT_TRUE(Eventually([&] { return count(labels_changed) == 1; }, seconds(10))) << Log();
  EXPECT_THAT(Log(), HasSubstr("(ClusterPolicy p generation 1)"));
  ASSERT_TRUE(Eventually([&] { return Get("/metrics").second.find("gpunode_component_enabled{component=\"labels\"} 0") !=
                                      std::string::npos; }, seconds(10)))
      << Get("/metrics").second;
  // A policy that sets what it may not: refused, the running configuration stays.
  write_policy("labels: {enabled: true}\nplugin: {kubeletDir: /tmp}\n");
  ASSERT_TRUE(Eventually([&] { return count("plugin.kubeletDir: not settable by a policy file") > 0; }, seconds(10)))
      << Log();
  EXPECT_THAT(Log(), HasSubstr("keeping the running configuration"));
  // The ConfigMap goes: the config's own settings again.
  fs::remove(Path("policy.yaml"));
  ASSERT_TRUE(Eventually([&] { return count(labels_changed) == 2; }, seconds(10))) << Log();
  EXPECT_EQ(kubelet_->registrations(), 1) << "the plugin registered again for a labels change\n" << Log();
  EXPECT_EQ(Stop(), 0);
}

// Reload safety: a reloaded config cannot load a library into the privileged steps, nor run another
// command; the running configuration stays, and the Node gets a Warning Event saying why.
TEST_F(AgentProcessTest, AReloadThatWouldLoadCodeOrRunAnotherCommandIsRefusedWithAnEvent) {
  AgentApi api;
  WriteProfile();
  const std::string sim_cdi = "cdi: {enabled: false, globalArgs: [--nvml-library, " + SimLibrary() + "]}\n";
  WriteKubeConfig(api, "validator: {enabled: false}\nlabels: {enabled: false}\n" + sim_cdi, "", ", enabled: false");
  Start();
  ASSERT_TRUE(Eventually([&] { return Get("/readyz").first == 200; }, seconds(30))) << Log();
  auto warnings = [&] {
    std::vector<std::string> out;
    for (const auto& e : api.Items(testing::FakeApiServer::kEvents)) {
      if (e.value("reason", "") == "AgentConfigRefused") out.push_back(e.value("message", ""));
    }
    return out;
  };
  WriteKubeConfig(api, "validator: {enabled: false}\nlabels: {enabled: false}\n"
                       "cdi: {enabled: true, globalArgs: [--nvml-library, " + Path("evil.so") + "]}\n", "", ", enabled: false");
  ::kill(pid_, SIGHUP);
  ASSERT_TRUE(Eventually([&] { return warnings().size() == 1; }, seconds(10))) << Log();
  EXPECT_THAT(warnings()[0], HasSubstr("cdi.globalArgs: --nvml-library changed from \"" + SimLibrary() +
                                       "\" to \"" + Path("evil.so") + "\""));
  EXPECT_THAT(Log(), HasSubstr("reload (SIGHUP) refused: cdi.globalArgs: --nvml-library changed"));
  WriteKubeConfig(api, "validator: {enabled: false}\nlabels: {enabled: false}\n"
                       "cdi: {enabled: true, args: [sim, hostroot, --output, " + Path("evil") + "]}\n", "",
                 ", enabled: false");
  ::kill(pid_, SIGHUP);
  ASSERT_TRUE(Eventually([&] { return warnings().size() == 2; }, seconds(10))) << Log();
  EXPECT_THAT(warnings()[1], HasSubstr("cdi.args[0]: \"sim\": the cdi step runs only `gpunode cdi generate ...`"));
  EXPECT_THAT(Get("/healthz/cdi").second, HasSubstr("cdi disabled")) << "the refused config was applied";
  EXPECT_EQ(Stop(), 0);
}

// The start barrier: with nvidia.com/device-plugin.config and nvidia.com/mig.config on the Node, the
// plugin starts once, after the first read of the Node and after the MIG layout is in place, and
// registers with the kubelet exactly once (before: with the default config first, then again for
// the label's config, then again for the MIG layout). A second start over the same layout changes
// nothing and restarts nothing.
TEST_F(AgentProcessTest, ANodeWithPluginConfigAndMigLabelsRegistersOnceAtStart) {
  AgentApi api;
  api.SetLabel("n1", "nvidia.com/device-plugin.config", "shared");
  api.SetLabel("n1", "nvidia.com/mig.config", "all-1g.18gb");
  fs::create_directories(Path("configs"));
  std::ofstream(Path("configs/shared")) << "version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
                                        << "    - name: nvidia.com/gpu\n      replicas: 2\n";
  std::ofstream(Path("mig.yaml")) << "version: v1\nmig-configs:\n  all-1g.18gb:\n    - devices: all\n"
                                  << "      mig-enabled: true\n      mig-devices:\n        \"1g.18gb\": 7\n";
  WriteProfile();
  // No validator: the plugin does not wait for a first check, so only the barrier holds it.
  WriteKubeConfig(api, "validator: {enabled: false}\nmig: {configFile: " + Path("mig.yaml") + "}\n", "",
                  ", configDir: " + Path("configs") + ", migStrategy: single");
  StartKubelet();
  Start();
  ASSERT_TRUE(kubelet_->WaitForRegistrations(1, seconds(40))) << Log();
  // 8 GPUs x 7 MIG devices x 2 replicas, from the first registration on.
  ASSERT_TRUE(kubelet_->WaitFor("nvidia.com/gpu", [](const auto& r) { return r.devices_size() > 0; }, seconds(20)))
      << Log();
  const auto lists = kubelet_->Lists("nvidia.com/gpu");
  ASSERT_FALSE(lists.empty());
  EXPECT_EQ(lists.front().devices_size(), 112) << Log();
  ASSERT_TRUE(Eventually([&] { return api.Labels("n1")["nvidia.com/mig.config.state"] == "success"; }, seconds(20))) << Log();
  ASSERT_TRUE(Eventually([&] { return Get("/readyz").first == 200; }, seconds(30))) << Get("/readyz").second << Log();
  std::this_thread::sleep_for(milliseconds(1500));
  EXPECT_EQ(kubelet_->registrations(), 1) << "the plugin registered more than once at start\n" << Log();
  EXPECT_THAT(Log(), HasSubstr("steps applied"));
  EXPECT_EQ(Log().find("restarting"), std::string::npos) << Log();
  EXPECT_EQ(Stop(), 0);
  std::cerr << "registrations at start: " << kubelet_->registrations() << "\n";

  // Again, over the layout now in place (the simulated driver kept it in the profile).
  const int before = kubelet_->registrations();
  Start();
  ASSERT_TRUE(kubelet_->WaitForRegistrations(before + 1, seconds(40))) << Log();
  ASSERT_TRUE(Eventually([&] { return Get("/readyz").first == 200; }, seconds(30))) << Log();
  std::this_thread::sleep_for(milliseconds(1000));
  EXPECT_EQ(kubelet_->registrations(), before + 1) << Log();
  EXPECT_THAT(Log(), HasSubstr("nvidia.com/mig.config=all-1g.18gb: already in place; nothing restarts"));
  EXPECT_EQ(Log().find("restarting"), std::string::npos) << Log();
  EXPECT_EQ(Stop(), 0);
}

}  // namespace
}  // namespace gpunode
