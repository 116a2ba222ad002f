// The real `gpunode dra-plugin` (the agent's dra component behind NVIDIA's flags) on a simulated
// node, with the kubelet's DRA manager stood in for by the DRA kubelet emulator over real gRPC and
// the API server by the fake API server: it registers, publishes the node's ResourceSlices,
// prepares an allocated claim into a CDI spec with exactly that GPU, taints a GPU that falls off
// the bus and clears the taint when it is back, and unprepares.
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

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/support/profile.h"
#include "test/testing/fake_api_server.h"
#include "test/testing/run_gpunode.h"
#include "test/testing/kubelet_dra_emulator.h"
#include "test/testing/sim_library.h"
#include "test/testing/status_matchers.h"

namespace gpunode {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using ::testing::HasSubstr;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr char kDriver[] = "gpu.nvidia.com";
constexpr char kSlices[] = "/apis/resource.k8s.io/v1/resourceslices";
constexpr char kUid[] = "6f1c2a3b-0000-4000-8000-000000000001";

class DraProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::remove_all(dir_);
    for (const char* d : {"reg", "plugins", "cdi"}) fs::create_directories(dir_ / d);
    api_.AddNode("n1");
    api_.ServeCollection(kSlices);
    api_.WriteKubeconfig(Path("kubeconfig"));
    auto source = sim::ResolveProfile("pcie-l40s-4");
    ASSERT_OK(source) << source.status();
    profile_text_ = source->text;
    WriteProfile(profile_text_);
  }
  void TearDown() override {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    kubelet_.Stop();
    fs::remove_all(dir_);
  }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }
  void WriteProfile(const std::string& text) {
    std::ofstream(Path("profile.yaml.tmp")) << text;
    fs::rename(Path("profile.yaml.tmp"), Path("profile.yaml"));
  }
  std::string Log() const {
    std::ifstream in(Path("dra.log"));
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  void Start() {
    pid_ = testing::SpawnGpunode({"--simulate", Path("profile.yaml"), "dra-plugin", "--node-name", "n1", "--kubeconfig",
                                  Path("kubeconfig"), "--cdi-root", Path("cdi"), "--kubelet-registrar-directory-path",
                                  Path("reg"), "--kubelet-plugins-directory-path", Path("plugins"), "--disable-hook",
                                  "all", "--health-recovery", "2s"},
                                 Path("dra.log"), {{"GPUNODE_SIM_LIBRARY", testing::SimLibrary()}});
  }
  int Stop() {
    ::kill(pid_, SIGTERM);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = 0;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
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
  // The devices of the node's slices: name -> the device as published.
  std::map<std::string, json> Devices() {
    std::map<std::string, json> out;
    for (const json& s : api_.Items(kSlices)) {
      for (const json& d : s["spec"].value("devices", json::array())) out[d.value("name", "")] = d;
    }
    return out;
  }
  static bool Tainted(const json& d, const std::string& key) {
    for (const json& t : d.value("taints", json::array())) {
      if (t.value("key", "") == key) return true;
    }
    return false;
  }

  const fs::path dir_ = fs::temp_directory_path() / ("gpunode-dra-" + std::to_string(::getpid()));
  testing::FakeApiServer api_;
  testing::KubeletDraEmulator kubelet_{(dir_ / "reg").string()};
  std::string profile_text_;
  pid_t pid_ = 0;
};

TEST_F(DraProcessTest, RegistersPublishesPreparesTaintsAndUnprepares) {
  ASSERT_TRUE(kubelet_.Start());
  Start();
  ASSERT_TRUE(kubelet_.WaitForRegistrations(1, seconds(60))) << Log();
  ASSERT_TRUE(Eventually([&] { return Devices().size() == 4; }, seconds(30))) << Log();
  std::map<std::string, json> devices = Devices();
  for (const char* name : {"gpu-0", "gpu-1", "gpu-2", "gpu-3"}) {
    ASSERT_TRUE(devices.count(name)) << name << "\n" << Log();
    EXPECT_EQ(devices[name]["attributes"]["productName"]["string"], "NVIDIA L40S");
    EXPECT_FALSE(Tainted(devices[name], "gpu.nvidia.com/gpu-lost"));
  }
  const json slice = api_.Items(kSlices).at(0);
  EXPECT_EQ(slice["spec"]["driver"], kDriver);
  EXPECT_EQ(slice["spec"]["nodeName"], "n1");
  EXPECT_EQ(slice["spec"]["pool"]["name"], "n1");

  // The scheduler allocated gpu-2 to a claim: the kubelet prepares it.
  api_.PutObject("/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/c1",
                 {{"apiVersion", "resource.k8s.io/v1"},
                  {"kind", "ResourceClaim"},
                  {"metadata", {{"name", "c1"}, {"namespace", "ns"}, {"uid", kUid}}},
                  {"spec", {{"devices", {{"requests", json::array({{{"name", "gpu"}, {"exactly", {{"deviceClassName", kDriver}}}}})}}}}},
                  {"status",
                   {{"allocation",
                     {{"devices",
                       {{"results", json::array({{{"request", "gpu"}, {"driver", kDriver}, {"pool", "n1"}, {"device", "gpu-2"}}})},
                        {"config", json::array()}}}}}}}});
  std::map<std::string, testing::DraClaimResult> answers;
  grpc::Status st = kubelet_.Prepare(kDriver, {{kUid, "ns", "c1", {"gpu"}}}, &answers);
  ASSERT_TRUE(st.ok()) << st.error_message() << "\n" << Log();
  ASSERT_TRUE(answers.count(kUid));
  ASSERT_EQ(answers[kUid].error, "") << Log();
  ASSERT_EQ(answers[kUid].devices.size(), 1u);
  EXPECT_EQ(answers[kUid].devices[0].device_name, "gpu-2");
  EXPECT_EQ(answers[kUid].devices[0].pool_name, "n1");
  EXPECT_THAT(answers[kUid].devices[0].cdi_device_ids,
              ::testing::ElementsAre(absl::StrCat("k8s.gpu.nvidia.com/claim=", kUid, "-gpu-2")));
  const std::string spec_path = Path(absl::StrCat("cdi/k8s.gpu.nvidia.com-claim_", kUid, ".yaml"));
  std::ifstream in(spec_path);
  std::stringstream spec;
  spec << in.rdbuf();
  EXPECT_THAT(spec.str(), HasSubstr("/dev/nvidia2"));
  EXPECT_THAT(spec.str(), ::testing::Not(HasSubstr("/dev/nvidia1\"")));

  // GPU 3 falls off the bus: its device is tainted; back and quiet for 2 s: the taint goes.
  const size_t gpus = Devices().size();
  std::string lost = profile_text_;
  const std::string last = "temperature_c: 31}";
  ASSERT_NE(lost.find(last), std::string::npos);
  lost.replace(lost.find(last), last.size(), "temperature_c: 31, lost: true}");
  WriteProfile(lost);
  EXPECT_TRUE(Eventually([&] { return Tainted(Devices()["gpu-3"], "gpu.nvidia.com/gpu-lost"); }, seconds(30)))
      << Log();
  EXPECT_FALSE(Tainted(Devices()["gpu-2"], "gpu.nvidia.com/gpu-lost"));
  // Still published, tainted, after the node's inventory is read again without it (NVML no longer
  // enumerates a lost GPU): it does not vanish from the pool.
  std::this_thread::sleep_for(seconds(2));
  EXPECT_EQ(Devices().size(), gpus) << Log();
  EXPECT_TRUE(Tainted(Devices()["gpu-3"], "gpu.nvidia.com/gpu-lost")) << Log();
  WriteProfile(profile_text_);
  EXPECT_TRUE(Eventually(
      [&] {
        auto d = Devices();
        return d.size() == gpus && d.count("gpu-3") && !Tainted(d["gpu-3"], "gpu.nvidia.com/gpu-lost");
      },
      seconds(30)))
      << "the taint stayed after the GPU recovered\n" << Log();

  std::map<std::string, std::string> errors;
  st = kubelet_.Unprepare(kDriver, {{kUid, "ns", "c1", {"gpu"}}}, &errors);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(errors[kUid], "");
  EXPECT_FALSE(fs::exists(spec_path));
  EXPECT_EQ(Stop(), 0) << Log();
}

}  // namespace
}  // namespace gpunode
