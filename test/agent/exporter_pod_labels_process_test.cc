// The real `gpunode exporter` with dcgm-exporter's pod-label flags, end to end: the kubelet's
// pod-resources API (test/testing/podresources_emulator.h, real gRPC) names the pods of the GPUs,
// the API server stand-in (test/testing/fake_api_server.h, reached through $KUBECONFIG) has the
// pods, and a scrape of /metrics carries their labels and UIDs; bad flags exit 3 naming them.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "podresources/v1/api.pb.h"
#include "test/testing/fake_api_server.h"
#include "test/testing/free_port.h"
#include "test/testing/podresources_emulator.h"
#include "test/testing/run_gpunode.h"
#include "test/testing/sim_library.h"

namespace gpunode {
namespace {

namespace fs = std::filesystem;
using ::gpunode::testing::FakeApiServer;
using ::gpunode::testing::FreePort;
using ::gpunode::testing::PodResourcesEmulator;
using ::gpunode::testing::RunGpunode;
using ::testing::HasSubstr;
using ::testing::Not;

nlohmann::json Pod(const std::string& uid, nlohmann::json labels) {
  return {{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", {{"uid", uid}, {"labels", std::move(labels)}}}};
}

class ExporterPodLabelsProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("gpunode-podlabels-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    fs::remove_all(dir_);
  }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }
  std::string Log() const {
    std::ifstream in(Path("exporter.log"));
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  fs::path dir_;
  pid_t pid_ = 0;
};

TEST_F(ExporterPodLabelsProcessTest, AScrapeCarriesTheGpuPodsLabelsAndUidFromTheApiServer) {
  PodResourcesEmulator kubelet(Path("kubelet.sock"));
  ASSERT_TRUE(kubelet.Start());
  v1::ListPodResourcesResponse resp;
  PodResourcesEmulator::AddContainer(&resp, "ml", "train-0", "main", "nvidia.com/gpu",
                                     {"GPU-0b566429-adc1-458a-9244-af5a49e0505e"});
  kubelet.SetResponse(resp);
  FakeApiServer api;
  api.PutObject("/api/v1/namespaces/ml/pods/train-0",
                Pod("3f1c8e2a-0b6d-4c1e-9a57-2d4f6b8c0e13",
                    {{"team", "vision"}, {"app.kubernetes.io/name", "trainer"}, {"gpu", "spoof"}}));
  api.WriteKubeconfig(Path("kubeconfig"));
  const int port = FreePort();

  pid_ = gpunode::testing::SpawnGpunode(
      {"--simulate", "dgx-h200", "exporter", "--listen", "127.0.0.1:" + std::to_string(port), "-c", "200",
       "--pod-resources-socket", Path("kubelet.sock"), "--kubernetes-enable-pod-labels", "--kubernetes-enable-pod-uid"},
      Path("exporter.log"),
      {{"GPUNODE_SIM_LIBRARY", gpunode::testing::SimLibrary()},
       {"KUBECONFIG", Path("kubeconfig")},
       {"DCGM_EXPORTER_KUBERNETES_POD_LABEL_ALLOWLIST_REGEX", "^team$,kubernetes\\.io/name"}});
  std::string page;
  for (int i = 0; i < 300 && page.find("team=\"vision\"") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    httplib::Client c("127.0.0.1", port);
    c.set_connection_timeout(1);
    if (auto r = c.Get("/metrics"); r && r->status == 200) page = r->body;
  }
  EXPECT_THAT(page, HasSubstr("DCGM_FI_DEV_GPU_TEMP{gpu=\"0\",UUID=\"GPU-0b566429-adc1-458a-9244-af5a49e0505e\","
                              "pci_bus_id=\"00000000:18:00.0\",device=\"nvidia0\",modelName=\"NVIDIA H200\","
                              "Hostname=\"dgx-h200-01\",DCGM_FI_DRIVER_VERSION=\"580.95.05\","
                              "app_kubernetes_io_name=\"trainer\",team=\"vision\",container=\"main\",namespace=\"ml\","
                              "pod=\"train-0\",pod_uid=\"3f1c8e2a-0b6d-4c1e-9a57-2d4f6b8c0e13\"} 31\n"))
      << Log();
  EXPECT_THAT(page, Not(HasSubstr("spoof")));
  EXPECT_THAT(page, HasSubstr("gpunode_pod_metadata_errors_total 0\n"));
  EXPECT_GE(api.Count("GET /api/v1/namespaces/ml/pods/train-0"), 1);
  EXPECT_THAT(Log(), HasSubstr("pod labels and UID from the API server (kubeconfig " + Path("kubeconfig")));
  ::kill(pid_, SIGTERM);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = 0;
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << Log();
  kubelet.Stop();
}

TEST_F(ExporterPodLabelsProcessTest, AnAllowlistPatternThatDoesNotCompileExits3NamingIt) {
  auto r = RunGpunode("--simulate dgx-h200 exporter --kubernetes-enable-pod-labels "
                      "--kubernetes-pod-label-allowlist-regex 'team,a(b'");
  EXPECT_EQ(r.exit_code, 3) << r.out;
  EXPECT_THAT(r.out, HasSubstr("--kubernetes-pod-label-allowlist-regex: pod label allowlist pattern \"a(b\" does not "
                               "compile: "));
  auto env = RunGpunode("--simulate dgx-h200 exporter",
                        {{"DCGM_EXPORTER_KUBERNETES_POD_LABEL_ALLOWLIST_REGEX", "[z-a]"}});
  EXPECT_EQ(env.exit_code, 3) << env.out;
  EXPECT_THAT(env.out, HasSubstr("DCGM_EXPORTER_KUBERNETES_POD_LABEL_ALLOWLIST_REGEX: pod label allowlist pattern "
                                 "\"[z-a]\""));
  // The front serves what the agent rendered: the setting belongs to the agent's config.
  auto front = RunGpunode("exporter --from-dir " + Path("pub") + " --kubernetes-enable-pod-labels");
  EXPECT_EQ(front.exit_code, 3) << front.out;
  EXPECT_THAT(front.out, HasSubstr("--kubernetes-enable-pod-labels does not apply with --from-dir"));
}

}  // namespace
}  // namespace gpunode
