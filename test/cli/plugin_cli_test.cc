// `gpunode plugin`, the real binary: what it would advertise, bad input, and a clean stop. The
// gRPC conversation with a kubelet is in test/deviceplugin/server_test.cc.
#include <signal.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "test/testing/run_gpunode.h"
#include "test/testing/temp_dir_test.h"

namespace gpunode {
namespace {

using ::gpunode::testing::RunGpunode;
using ::testing::HasSubstr;

class PluginCliTest : public gpunode::testing::TempDirTest {};

TEST_F(PluginCliTest, PrintShowsWhatItWouldAdvertise) {
  auto r = RunGpunode("--simulate dgx-h200 plugin --print -o json 2>/dev/null");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["kind"], "DevicePluginResources");
  ASSERT_EQ(doc["resources"].size(), 1u);
  EXPECT_EQ(doc["resources"][0]["name"], "nvidia.com/gpu");
  EXPECT_EQ(doc["resources"][0]["devices"].size(), 8u);
  auto idx = RunGpunode("--simulate a100-mig plugin --print --mig-strategy single --device-id-strategy index");
  EXPECT_EQ(idx.exit_code, 2);  // 3g.40gb + 2g.20gb: single needs one profile
  EXPECT_THAT(idx.out, HasSubstr("more than one MIG device type present on node"));
}

TEST_F(PluginCliTest, BooleanFlagsAreBareOrTakeAValueAsNvidiasPlugin) {
  auto doc = [](const std::string& flags) {
    auto r = RunGpunode("--simulate dgx-h200 plugin --print -o json " + flags);
    EXPECT_EQ(r.exit_code, 0) << r.out;
    return nlohmann::json::parse(r.out.substr(r.out.find('{')));
  };
  EXPECT_EQ(doc("")["passDeviceSpecs"], false);
  EXPECT_EQ(doc("")["failOnInitError"], true);
  EXPECT_EQ(doc("--pass-device-specs")["passDeviceSpecs"], true);
  EXPECT_EQ(doc("--pass-device-specs=false")["passDeviceSpecs"], false);
  EXPECT_EQ(doc("--fail-on-init-error=false")["failOnInitError"], false);
  auto bad = RunGpunode("--simulate dgx-h200 plugin --print --pass-device-specs=maybe");
  EXPECT_EQ(bad.exit_code, 3);
  EXPECT_THAT(bad.out, HasSubstr("--pass-device-specs=maybe: not a boolean"));
}

TEST_F(PluginCliTest, BadConfigurationIsRefusedWithTheReason) {
  std::ofstream(Path("bad.yaml")) << "sharing: {timeSlicing: {resources: [{name: nvidia.com/gpu, replicas: 0}]}}\n";
  auto r = RunGpunode("--simulate dgx-h200 plugin --print --config-file " + Path("bad.yaml"));
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_THAT(r.out, HasSubstr("bad.yaml:1: sharing.timeSlicing.resources[0].replicas: expected 2 or more replicas"));
  auto missing = RunGpunode("--simulate dgx-h200 plugin --print --config-file " + Path("nope.yaml"));
  EXPECT_EQ(missing.exit_code, 3);
  EXPECT_THAT(missing.out, HasSubstr("nope.yaml"));
  // MPS with mixed MIG: refused as NVIDIA's plugin refuses it.
  std::ofstream(Path("mps.yaml")) << "sharing: {mps: {resources: [{name: nvidia.com/gpu, replicas: 2}]}}\n";
  auto mps = RunGpunode("--simulate dgx-h200 plugin --print --mig-strategy mixed --config-file " + Path("mps.yaml"));
  EXPECT_EQ(mps.exit_code, 3);
  EXPECT_THAT(mps.out, HasSubstr("sharing.mps"));
  auto bad_env = gpunode::testing::RunShell("MIG_STRATEGY=odd " + std::string(GPUNODE_BIN_DIR) +
                                            "/gpunode --simulate dgx-h200 plugin --print");
  EXPECT_EQ(bad_env.exit_code, 3);
  EXPECT_THAT(bad_env.out, HasSubstr("environment variable MIG_STRATEGY"));
}

TEST_F(PluginCliTest, WithoutAKubeletItRetriesAndSigtermStopsItCleanly) {
  const std::string dir = Path("dp");
  std::filesystem::create_directories(dir);
  const std::string log = Path("plugin.log");
  pid_t pid = testing::SpawnGpunode({"--simulate", "pcie-l40s-4", "plugin", "--kubelet-dir", dir}, log);
  // (30 s: an ASan build on a loaded 2-core CI machine starts slowly; a pass takes ~1 s.)
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!std::filesystem::exists(dir + "/nvidia-gpu.sock") && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(std::filesystem::exists(dir + "/nvidia-gpu.sock")) << Read("plugin.log");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ::kill(pid, SIGTERM);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_THAT(Read("plugin.log"), HasSubstr("no kubelet socket at"));
  EXPECT_THAT(Read("plugin.log"), HasSubstr("stopped"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/nvidia-gpu.sock"));  // its socket is removed
}

}  // namespace
}  // namespace gpunode
