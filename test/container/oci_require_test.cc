// The shim's requirement check (src/container/oci_require.h): the container's env, the facts of the
// GPUs it gets from an inventory, and the refusal.
#include "src/container/oci_require.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/status_matchers.h"

namespace gpunode::container {
namespace {

using ::testing::HasSubstr;

node::NodeInventory TwoGpus() {
  node::NodeInventory inv;
  inv.driver.driver_version = *Version::Parse("550.127.05");
  inv.driver.cuda_version = *Version::Parse("12.4");
  for (unsigned i = 0; i < 2; ++i) {
    gpu::GpuInfo g;
    g.index = i;
    g.uuid = i == 0 ? "GPU-aaaa" : "GPU-bbbb";
    g.name = i == 0 ? "NVIDIA L40S" : "NVIDIA GeForce RTX 4090";
    g.brand = i == 0 ? 14u : 5u;
    g.cc_major = 8;
    g.cc_minor = 9;
    inv.driver.gpus.push_back(g);
  }
  return inv;
}

TEST(OciRequireTest, TheInjectedDevicesAreTheGpusEvaluated) {
  const node::NodeInventory inv = TwoGpus();
  compat::ReqFacts f = FactsForDevices(inv, {"nvidia.com/gpu=1"});
  EXPECT_EQ(f.driver, "550.127.05");
  EXPECT_EQ(f.cuda, "12.4");
  ASSERT_EQ(f.devices.size(), 1u);
  EXPECT_EQ(f.devices[0].label, "GPU 1 (NVIDIA GeForce RTX 4090)");
  EXPECT_EQ(f.devices[0].brand, "geforce");
  EXPECT_EQ(f.devices[0].arch, "8.9");
  EXPECT_EQ(FactsForDevices(inv, {"nvidia.com/gpu=GPU-AAAA"}).devices.at(0).brand, "nvidia");
  EXPECT_EQ(FactsForDevices(inv, {"nvidia.com/gpu=all"}).devices.size(), 2u);
  EXPECT_EQ(FactsForDevices(inv, {"nvidia.com/gpu=0:1"}).devices.size(), 1u);  // a MIG device: its GPU
  EXPECT_TRUE(FactsForDevices(inv, {"nvidia.com/gpu=7"}).devices.empty());
}

TEST(OciRequireTest, TheEnvironmentOfTheProcessIsRead) {
  nlohmann::ordered_json config = nlohmann::ordered_json::parse(
      R"({"process": {"env": ["PATH=/bin", "NVIDIA_REQUIRE_CUDA=cuda>=12.8 brand=nvidia,driver>=550,driver<551"]}})");
  auto reqs = ContainerRequirements(config);
  ASSERT_OK(reqs) << reqs.status();
  ASSERT_EQ(reqs->requirements.size(), 1u);
  const node::NodeInventory inv = TwoGpus();
  // The L40S (brand nvidia) is admitted through the R550 group; the GeForce is not.
  EXPECT_OK(CheckRequirements(*reqs, FactsForDevices(inv, {"nvidia.com/gpu=0"})));
  Status st = CheckRequirements(*reqs, FactsForDevices(inv, {"nvidia.com/gpu=all"}));
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(st.message(), HasSubstr("unsatisfied condition: cuda>=12.8 (NVIDIA_REQUIRE_CUDA, GPU 1 (NVIDIA GeForce RTX 4090))"));
  EXPECT_THAT(st.message(), HasSubstr("NVIDIA_DISABLE_REQUIRE=true"));
  config["process"]["env"].push_back("NVIDIA_DISABLE_REQUIRE=true");
  reqs = ContainerRequirements(config);
  ASSERT_OK(reqs);
  EXPECT_OK(CheckRequirements(*reqs, FactsForDevices(inv, {"nvidia.com/gpu=all"})));
  // A term that does not parse refuses the container; no process or env: nothing to check.
  EXPECT_FALSE(ContainerRequirements(nlohmann::ordered_json::parse(R"({"process": {"env": ["NVIDIA_REQUIRE_X=gpu>1"]}})")).ok());
  auto none = ContainerRequirements(nlohmann::ordered_json::parse(R"({"root": {}})"));
  ASSERT_OK(none);
  EXPECT_TRUE(none->requirements.empty());
}

}  // namespace
}  // namespace gpunode::container
