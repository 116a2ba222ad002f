// `gpunode mig show|apply` through the real binary on simulated nodes: plans, reports, JSON,
// exit codes, idempotence, and the refusal to touch a real GPU without --allow-real.
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "test/testing/run_gpunode.h"
#include "test/testing/temp_dir_test.h"

namespace gpunode {
namespace {

using ::gpunode::testing::RunGpunode;
using ::gpunode::testing::RunShell;
using ::testing::HasSubstr;

constexpr char kConfig[] = R"(version: v1
mig-configs:
  all-disabled:
    - devices: all
      mig-enabled: false
  all-1g.18gb:
    - devices: all
      mig-enabled: true
      mig-devices:
        "1g.18gb": 7
  all-balanced:
    - device-filter: ["0x233510DE", "0x233B10DE"]
      devices: all
      mig-enabled: true
      mig-devices: {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1}
  too-big:
    - devices: all
      mig-enabled: true
      mig-devices: {"7g.141gb": 1, "1g.18gb": 1}
)";

class MigCliTest : public ::gpunode::testing::TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    std::ofstream(Path("mig.yaml")) << kConfig;
  }
  std::string Config() { return Path("mig.yaml"); }
};

TEST_F(MigCliTest, ShowOnASimulatedNode) {
  auto r = RunGpunode("--simulate dgx-h200 mig show");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("GPU 7  NVIDIA H200  MIG off"));
  auto j = RunGpunode("--simulate a100-mig -o json mig show");
  ASSERT_EQ(j.exit_code, 0) << j.out;
  auto doc = nlohmann::json::parse(j.out);
  EXPECT_EQ(doc["kind"], "MigState");
  EXPECT_EQ(doc["gpus"][0]["migDevices"]["2g.20gb"], 2);
  EXPECT_EQ(doc["gpus"][0]["migDevices"]["3g.40gb"], 1);
}

TEST_F(MigCliTest, ApplyDryRunAndApplyOnAProfileFile) {
  // A profile file: the layout persists in it, so a second process sees it.
  std::string profile = Path("node.yaml");
  ASSERT_EQ(RunShell("cp " + std::string(GPUNODE_SOURCE_DIR) + "/data/profiles/dgx-h200.yaml " + profile).exit_code, 0);
  auto dry = RunGpunode("--simulate " + profile + " mig apply --config-file " + Config() +
                        " --config all-balanced --dry-run");
  EXPECT_EQ(dry.exit_code, 0) << dry.out;
  EXPECT_THAT(dry.out, HasSubstr("plan (72 steps)"));
  EXPECT_THAT(dry.out, HasSubstr("GPU 0: create GPU instance 3g.71gb at memory slices"));

  auto apply = RunGpunode("--simulate " + profile + " -o json mig apply -f " + Config() + " -c all-balanced");
  ASSERT_EQ(apply.exit_code, 0) << apply.out;
  auto doc = nlohmann::json::parse(apply.out);
  EXPECT_EQ(doc["kind"], "MigApplyReport");
  EXPECT_EQ(doc["ok"], true);
  EXPECT_EQ(doc["done"].size(), 72u);
  EXPECT_EQ(doc["gpus"][3]["migDevices"]["1g.18gb"], 2);

  // Another process: the same layout, and applying again does nothing.
  auto show = RunGpunode("--simulate " + profile + " -o json mig show");
  ASSERT_EQ(show.exit_code, 0) << show.out;
  EXPECT_EQ(nlohmann::json::parse(show.out)["gpus"][7]["migDevices"]["3g.71gb"], 1);
  auto again = RunGpunode("--simulate " + profile + " mig apply -f " + Config() + " -c all-balanced");
  EXPECT_EQ(again.exit_code, 0) << again.out;
  EXPECT_THAT(again.out, HasSubstr("nothing to do"));
  auto off = RunGpunode("--simulate " + profile + " mig apply -f " + Config() + " -c all-disabled");
  EXPECT_EQ(off.exit_code, 0) << off.out;
}

TEST_F(MigCliTest, ErrorsAndExitCodes) {
  auto unknown = RunGpunode("--simulate dgx-h200 mig apply -f " + Config() + " -c nope");
  EXPECT_EQ(unknown.exit_code, 3);
  EXPECT_THAT(unknown.out, HasSubstr("MIG config \"nope\" is not in"));
  auto big = RunGpunode("--simulate dgx-h200 mig apply -f " + Config() + " -c too-big");
  EXPECT_EQ(big.exit_code, 3);
  EXPECT_THAT(big.out, HasSubstr("does not fit GPU 0 (NVIDIA H200)"));
  std::ofstream(Path("bad.yaml")) << "version: v1\nmig-configs:\n  a:\n    - devices: all\n";
  auto bad = RunGpunode("--simulate dgx-h200 mig apply -f " + Path("bad.yaml") + " -c a");
  EXPECT_EQ(bad.exit_code, 3);
  EXPECT_THAT(bad.out, HasSubstr("bad.yaml:4: mig-configs.a[0].mig-enabled: expected true or false, got nothing"));
  auto missing = RunGpunode("--simulate dgx-h200 mig apply -f " + Path("none.yaml") + " -c a");
  EXPECT_EQ(missing.exit_code, 3);
  auto busy = RunGpunode("--simulate a100-mig mig apply -f " + Config() + " -c all-disabled");
  EXPECT_EQ(busy.exit_code, 3);
  EXPECT_THAT(busy.out, HasSubstr("compute processes are running on it (pid 48213)"));
}

TEST_F(MigCliTest, RefusesARealNvmlWithoutAllowReal) {
  // The simulated library under another name reads as a real NVML.
  std::string lib = Path("libnvidia-ml.so.1");
  ASSERT_EQ(RunShell("cp " + std::string(GPUNODE_BIN_DIR) + "/libgpunode-simnvml.so " + lib).exit_code, 0);
  auto r = RunGpunode("mig apply -f " + Config() + " -c all-1g.18gb",
                      {{"GPUNODE_NVML_LIBRARY", lib}, {"GPUNODE_SIM_PROFILE", "dgx-h200"}});
  EXPECT_EQ(r.exit_code, 3) << r.out;
  EXPECT_THAT(r.out, HasSubstr("refusing to change MIG on the real GPUs of this node"));
  auto dry = RunGpunode("mig apply -f " + Config() + " -c all-1g.18gb --dry-run",
                        {{"GPUNODE_NVML_LIBRARY", lib}, {"GPUNODE_SIM_PROFILE", "dgx-h200"}});
  EXPECT_EQ(dry.exit_code, 0) << dry.out;
  EXPECT_THAT(dry.out, HasSubstr("plan (120 steps)"));
}

}  // namespace
}  // namespace gpunode
