// The MIG configuration calls of libgpunode-simnvml.so (sim/nvml/mig.cc), loaded like the real
// NVML: mode changes, GI/CI profiles, placements, create/destroy with NVML's error codes, and the
// existing MIG enumeration seeing the result.
#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "sim/support/profile.h"
#include "src/gpu/nvml_abi.h"
#include "test/sim/sim_nvml_fixture.h"
#include "test/testing/status_matchers.h"

namespace gpunode::sim {
namespace {

const SimApi& Api() { return SimLib(); }

class SimMigTest : public SimNvmlFixture {
 protected:
  void Use(const char* builtin, const std::string& gpu_extra = "") {
    auto src = ResolveProfile(builtin);
    ASSERT_OK(src);
    std::string text = src->text;
    if (!gpu_extra.empty()) {
      size_t pos = text.find("\ngpus:\n  - {bus_id:");
      ASSERT_NE(pos, std::string::npos);
      text.insert(pos + 12, gpu_extra + ", ");
    }
    std::ofstream(path_) << text;
    setenv("GPUNODE_SIM_PROFILE", path_.c_str(), 1);
    ASSERT_EQ(Api().nvmlInit_v2(), NVML_SUCCESS);
  }
};

TEST_F(SimMigTest, H200ProfilesAndModeChange) {
  Use("dgx-h200");
  const auto& n = Api();
  nvmlDevice_t d = Device(0);
  nvmlGpuInstanceProfileInfo_v2_t info{};
  info.version = nvmlGpuInstanceProfileInfo_v2;
  ASSERT_EQ(n.nvmlDeviceGetGpuInstanceProfileInfoV(d, NVML_GPU_INSTANCE_PROFILE_1_SLICE, &info), NVML_SUCCESS);
  EXPECT_STREQ(info.name, "MIG 1g.18gb");
  EXPECT_EQ(info.id, 19u);
  EXPECT_EQ(info.instanceCount, 7u);
  EXPECT_EQ(info.multiprocessorCount, 16u);
  const char* expected[] = {"MIG 2g.35gb", "MIG 3g.71gb", "MIG 4g.71gb", "MIG 7g.141gb"};
  unsigned profiles[] = {NVML_GPU_INSTANCE_PROFILE_2_SLICE, NVML_GPU_INSTANCE_PROFILE_3_SLICE,
                         NVML_GPU_INSTANCE_PROFILE_4_SLICE, NVML_GPU_INSTANCE_PROFILE_7_SLICE};
  for (int i = 0; i < 4; ++i) {
    ASSERT_EQ(n.nvmlDeviceGetGpuInstanceProfileInfoV(d, profiles[i], &info), NVML_SUCCESS);
    EXPECT_STREQ(info.name, expected[i]);
  }
  ASSERT_EQ(n.nvmlDeviceGetGpuInstanceProfileInfoV(d, NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2, &info), NVML_SUCCESS);
  EXPECT_STREQ(info.name, "MIG 1g.35gb");
  EXPECT_EQ(n.nvmlDeviceGetGpuInstanceProfileInfoV(d, NVML_GPU_INSTANCE_PROFILE_6_SLICE, &info), NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(n.nvmlDeviceGetGpuInstanceProfileInfoV(d, 99, &info), NVML_ERROR_INVALID_ARGUMENT);
  info.version = 1;
  EXPECT_EQ(n.nvmlDeviceGetGpuInstanceProfileInfoV(d, 0, &info), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);

  // MIG off: no GI calls.
  nvmlGpuInstance_t gi = nullptr;
  EXPECT_EQ(n.nvmlDeviceCreateGpuInstance(d, 19, &gi), NVML_ERROR_NOT_SUPPORTED);
  nvmlReturn_t activation = NVML_ERROR_UNKNOWN;
  ASSERT_EQ(n.nvmlDeviceSetMigMode(d, NVML_DEVICE_MIG_ENABLE, &activation), NVML_SUCCESS);
  EXPECT_EQ(activation, NVML_SUCCESS);  // Hopper, idle: at once
  unsigned cur = 0, pend = 0;
  ASSERT_EQ(n.nvmlDeviceGetMigMode(d, &cur, &pend), NVML_SUCCESS);
  EXPECT_EQ(cur, unsigned{NVML_DEVICE_MIG_ENABLE});
  EXPECT_EQ(n.nvmlDeviceSetMigMode(d, 7, &activation), NVML_ERROR_INVALID_ARGUMENT);
}

TEST_F(SimMigTest, PendingWhileAProcessHoldsTheGpu) {
  Use("dgx-h200", "processes: [{pid: 31, used_mib: 100}]");
  nvmlReturn_t activation = NVML_SUCCESS;
  ASSERT_EQ(Api().nvmlDeviceSetMigMode(Device(0), NVML_DEVICE_MIG_ENABLE, &activation), NVML_SUCCESS);
  EXPECT_EQ(activation, NVML_ERROR_IN_USE);
  unsigned cur = 9, pend = 9;
  ASSERT_EQ(Api().nvmlDeviceGetMigMode(Device(0), &cur, &pend), NVML_SUCCESS);
  EXPECT_EQ(cur, unsigned{NVML_DEVICE_MIG_DISABLE});
  EXPECT_EQ(pend, unsigned{NVML_DEVICE_MIG_ENABLE});
}

TEST_F(SimMigTest, CreateDestroyWithRealErrorCodes) {
  Use("dgx-h200");
  const auto& n = Api();
  nvmlDevice_t d = Device(1);
  nvmlReturn_t activation;
  ASSERT_EQ(n.nvmlDeviceSetMigMode(d, NVML_DEVICE_MIG_ENABLE, &activation), NVML_SUCCESS);
  unsigned count = 0;
  ASSERT_EQ(n.nvmlDeviceGetGpuInstancePossiblePlacements_v2(d, 9, nullptr, &count), NVML_SUCCESS);
  EXPECT_EQ(count, 2u);
  std::vector<nvmlGpuInstancePlacement_t> pl(1);
  count = 1;
  EXPECT_EQ(n.nvmlDeviceGetGpuInstancePossiblePlacements_v2(d, 9, pl.data(), &count), NVML_ERROR_INSUFFICIENT_SIZE);
  EXPECT_EQ(count, 2u);
  pl.resize(2);
  ASSERT_EQ(n.nvmlDeviceGetGpuInstancePossiblePlacements_v2(d, 9, pl.data(), &count), NVML_SUCCESS);
  EXPECT_EQ(pl[1].start, 4u);
  EXPECT_EQ(pl[1].size, 4u);

  nvmlGpuInstancePlacement_t at4{4, 4};
  nvmlGpuInstance_t g3 = nullptr, g3b = nullptr, g4 = nullptr;
  ASSERT_EQ(n.nvmlDeviceCreateGpuInstanceWithPlacement(d, 9, &at4, &g3), NVML_SUCCESS);
  EXPECT_EQ(n.nvmlDeviceCreateGpuInstanceWithPlacement(d, 9, &at4, &g3b), NVML_ERROR_INSUFFICIENT_RESOURCES);
  nvmlGpuInstancePlacement_t bad{1, 4};
  EXPECT_EQ(n.nvmlDeviceCreateGpuInstanceWithPlacement(d, 9, &bad, &g3b), NVML_ERROR_INVALID_ARGUMENT);
  ASSERT_EQ(n.nvmlDeviceCreateGpuInstance(d, 5, &g4), NVML_SUCCESS);  // 4g at 0
  nvmlGpuInstance_t full = nullptr;
  EXPECT_EQ(n.nvmlDeviceCreateGpuInstance(d, 19, &full), NVML_ERROR_INSUFFICIENT_RESOURCES);
  unsigned remaining = 9;
  ASSERT_EQ(n.nvmlDeviceGetGpuInstanceRemainingCapacity(d, 19, &remaining), NVML_SUCCESS);
  EXPECT_EQ(remaining, 0u);
  nvmlGpuInstanceInfo_t gi_info{};
  ASSERT_EQ(n.nvmlGpuInstanceGetInfo(g3, &gi_info), NVML_SUCCESS);
  EXPECT_EQ(gi_info.id, 2u);
  EXPECT_EQ(gi_info.profileId, 9u);

  // A CI in the 3g GI; the MIG device appears in the existing enumeration.
  nvmlComputeInstanceProfileInfo_v2_t ci_info{};
  ci_info.version = nvmlComputeInstanceProfileInfo_v2;
  ASSERT_EQ(n.nvmlGpuInstanceGetComputeInstanceProfileInfoV(g3, NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE,
                                                            NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, &ci_info),
            NVML_SUCCESS);
  EXPECT_STREQ(ci_info.name, "MIG 1c.3g.71gb");
  EXPECT_EQ(ci_info.instanceCount, 3u);
  EXPECT_EQ(n.nvmlGpuInstanceGetComputeInstanceProfileInfoV(g3, NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE, 0, &ci_info),
            NVML_ERROR_NOT_SUPPORTED);
  nvmlComputeInstance_t ci = nullptr;
  ASSERT_EQ(n.nvmlGpuInstanceCreateComputeInstance(g3, NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE, &ci), NVML_SUCCESS);
  nvmlComputeInstance_t ci2 = nullptr;
  EXPECT_EQ(n.nvmlGpuInstanceCreateComputeInstance(g3, NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE, &ci2),
            NVML_ERROR_INSUFFICIENT_RESOURCES);
  nvmlDevice_t mig = nullptr;
  ASSERT_EQ(n.nvmlDeviceGetMigDeviceHandleByIndex(d, 0, &mig), NVML_SUCCESS);
  char name[96];
  ASSERT_EQ(n.nvmlDeviceGetName(mig, name, sizeof name), NVML_SUCCESS);
  EXPECT_STREQ(name, "NVIDIA H200 MIG 3g.71gb");
  unsigned gi_id = 0;
  ASSERT_EQ(n.nvmlDeviceGetGpuInstanceId(mig, &gi_id), NVML_SUCCESS);
  EXPECT_EQ(gi_id, 2u);

  // Destroy order: GI with a CI is IN_USE; MIG off with GIs is IN_USE; stale handles are invalid.
  EXPECT_EQ(n.nvmlGpuInstanceDestroy(g3), NVML_ERROR_IN_USE);
  nvmlReturn_t activation2;
  EXPECT_EQ(n.nvmlDeviceSetMigMode(d, NVML_DEVICE_MIG_DISABLE, &activation2), NVML_ERROR_IN_USE);
  ASSERT_EQ(n.nvmlComputeInstanceDestroy(ci), NVML_SUCCESS);
  EXPECT_EQ(n.nvmlComputeInstanceDestroy(ci), NVML_ERROR_INVALID_ARGUMENT);
  ASSERT_EQ(n.nvmlGpuInstanceDestroy(g3), NVML_SUCCESS);
  ASSERT_EQ(n.nvmlGpuInstanceDestroy(g4), NVML_SUCCESS);
  EXPECT_EQ(n.nvmlGpuInstanceGetInfo(g3, &gi_info), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(n.nvmlDeviceGetMigDeviceHandleByIndex(d, 0, &mig), NVML_ERROR_NOT_FOUND);
  ASSERT_EQ(n.nvmlDeviceSetMigMode(d, NVML_DEVICE_MIG_DISABLE, &activation2), NVML_SUCCESS);
}

TEST_F(SimMigTest, NotMigCapableGpuSaysNotSupported) {
  Use("t4-cloud");
  nvmlReturn_t activation;
  EXPECT_EQ(Api().nvmlDeviceSetMigMode(Device(0), NVML_DEVICE_MIG_ENABLE, &activation), NVML_ERROR_NOT_SUPPORTED);
  nvmlGpuInstanceProfileInfo_t info{};
  EXPECT_EQ(Api().nvmlDeviceGetGpuInstanceProfileInfo(Device(0), 0, &info), NVML_ERROR_NOT_SUPPORTED);
}

}  // namespace
}  // namespace gpunode::sim
