// The simulated driver's compute mode and time slice: NVML's nvmlDeviceGet/SetComputeMode and the
// simulator's gpunodeSimDeviceGet/SetTimeslice with NVML's error codes, kept across processes in
// the profile file; and the simulated nvidia-smi (sim/smi) that a generated host root carries,
// run as NVIDIA's DRA driver runs it (LD_PRELOAD = the root's libnvidia-ml.so.1).
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/nvml/nvml_abi_more.h"
#include "sim/support/profile.h"
#include "test/sim/sim_nvml_fixture.h"
#include "test/testing/sim_library.h"
#include "test/testing/status_matchers.h"

namespace gpunode::sim {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

struct ComputeApi {
#define GPUNODE_TEST_FIELD(ret, name, params) ret(*name) params = nullptr;
  GPUNODE_SIM_COMPUTE_FUNCTIONS(GPUNODE_TEST_FIELD)
  GPUNODE_SIM_PRIVATE_FUNCTIONS(GPUNODE_TEST_FIELD)
#undef GPUNODE_TEST_FIELD
};

const ComputeApi& Compute() {
  static const ComputeApi* api = [] {
    auto* a = new ComputeApi();
    void* h = dlopen(testing::SimLibrary().c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) return a;
#define GPUNODE_TEST_RESOLVE(ret, name, params) a->name = reinterpret_cast<ret(*) params>(dlsym(h, #name));
    GPUNODE_SIM_COMPUTE_FUNCTIONS(GPUNODE_TEST_RESOLVE)
    GPUNODE_SIM_PRIVATE_FUNCTIONS(GPUNODE_TEST_RESOLVE)
#undef GPUNODE_TEST_RESOLVE
    return a;
  }();
  return *api;
}

std::string ProfileText(const char* name) {
  auto source = ResolveProfile(name);
  EXPECT_OK(source);
  return source.ok() ? source->text : "";
}

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

using SimComputeTest = SimNvmlFixture;

TEST_F(SimComputeTest, ComputeModeWithNvmlErrorCodes) {
  const ComputeApi& c = Compute();
  ASSERT_NE(c.nvmlDeviceGetComputeMode, nullptr);
  ASSERT_NE(c.gpunodeSimDeviceSetTimeslice, nullptr);
  UseFile(ProfileText("dgx-h200"));
  nvmlComputeMode_t mode{};
  EXPECT_EQ(c.nvmlDeviceGetComputeMode(nullptr, &mode), NVML_ERROR_UNINITIALIZED);
  ASSERT_EQ(nvml().nvmlInit_v2(), NVML_SUCCESS);
  nvmlDevice_t d = Device(2);
  ASSERT_EQ(c.nvmlDeviceGetComputeMode(d, &mode), NVML_SUCCESS);
  EXPECT_EQ(mode, NVML_COMPUTEMODE_DEFAULT);
  EXPECT_EQ(c.nvmlDeviceGetComputeMode(d, nullptr), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(c.nvmlDeviceSetComputeMode(d, static_cast<nvmlComputeMode_t>(4)), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(c.nvmlDeviceSetComputeMode(d, NVML_COMPUTEMODE_EXCLUSIVE_THREAD), NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(c.nvmlDeviceSetComputeMode(reinterpret_cast<nvmlDevice_t>(&mode), NVML_COMPUTEMODE_DEFAULT),
            NVML_ERROR_INVALID_ARGUMENT);
  ASSERT_EQ(c.nvmlDeviceSetComputeMode(d, NVML_COMPUTEMODE_EXCLUSIVE_PROCESS), NVML_SUCCESS);
  ASSERT_EQ(c.nvmlDeviceGetComputeMode(d, &mode), NVML_SUCCESS);
  EXPECT_EQ(mode, NVML_COMPUTEMODE_EXCLUSIVE_PROCESS);

  unsigned slice = 9;
  ASSERT_EQ(c.gpunodeSimDeviceGetTimeslice(d, &slice), NVML_SUCCESS);
  EXPECT_EQ(slice, 0u);
  EXPECT_EQ(c.gpunodeSimDeviceSetTimeslice(d, 4), NVML_ERROR_INVALID_ARGUMENT);
  ASSERT_EQ(c.gpunodeSimDeviceSetTimeslice(d, 2), NVML_SUCCESS);
  // Kept in the profile file: a fresh load (another process) sees both.
  EXPECT_THAT(Read(path_), HasSubstr("# gpunode-simnvml-compute-state: "));
  while (nvml().nvmlShutdown() == NVML_SUCCESS) {
  }
  ASSERT_EQ(nvml().nvmlInit_v2(), NVML_SUCCESS);
  d = Device(2);
  ASSERT_EQ(c.nvmlDeviceGetComputeMode(d, &mode), NVML_SUCCESS);
  EXPECT_EQ(mode, NVML_COMPUTEMODE_EXCLUSIVE_PROCESS);
  ASSERT_EQ(c.gpunodeSimDeviceGetTimeslice(d, &slice), NVML_SUCCESS);
  EXPECT_EQ(slice, 2u);
  nvmlDevice_t other = Device(3);
  ASSERT_EQ(c.nvmlDeviceGetComputeMode(other, &mode), NVML_SUCCESS);
  EXPECT_EQ(mode, NVML_COMPUTEMODE_DEFAULT);
}

TEST_F(SimComputeTest, MigDevicesAndMigGpusHaveNoTimeSlice) {
  const ComputeApi& c = Compute();
  UseFile(ProfileText("a100-mig"));
  ASSERT_EQ(nvml().nvmlInit_v2(), NVML_SUCCESS);
  nvmlDevice_t gpu = Device(0);
  nvmlDevice_t mig = nullptr;
  ASSERT_EQ(nvml().nvmlDeviceGetMigDeviceHandleByIndex(gpu, 0, &mig), NVML_SUCCESS);
  unsigned slice = 0;
  EXPECT_EQ(c.gpunodeSimDeviceSetTimeslice(mig, 1), NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(c.gpunodeSimDeviceSetTimeslice(gpu, 1), NVML_ERROR_NOT_SUPPORTED);  // in MIG mode
  EXPECT_EQ(c.gpunodeSimDeviceGetTimeslice(gpu, &slice), NVML_ERROR_NOT_SUPPORTED);
  nvmlComputeMode_t mode{};
  EXPECT_EQ(c.nvmlDeviceGetComputeMode(mig, &mode), NVML_ERROR_NOT_SUPPORTED);
}

// The simulated nvidia-smi in a generated host root.
class SimNvidiaSmiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/simsmi-" + std::to_string(::getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    profile_ = dir_ + "/profile.yaml";
    std::ofstream(profile_) << ProfileText("dgx-h200");
    auto parsed = ParseProfile(Read(profile_), profile_);
    ASSERT_OK(parsed);
    ASSERT_OK(WriteHostRoot(*parsed, dir_ + "/root"));
    uuid_ = parsed->gpus[1].uuid;
  }
  void TearDown() override { fs::remove_all(dir_); }

  struct Run {
    int exit_code;
    std::string out;
  };
  // As NVIDIA's DRA driver runs it: the root's nvidia-smi with LD_PRELOAD = the root's NVML.
  Run Smi(const std::string& args) {
    const std::string root = dir_ + "/root";
    const std::string cmd = "GPUNODE_SIM_PROFILE=" + profile_ + " LD_PRELOAD=" + root +
                            "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1 ASAN_OPTIONS=verify_asan_link_order=0:"
                            "detect_leaks=0 " + root + "/usr/bin/nvidia-smi " + args + " 2>&1";
    FILE* p = ::popen(cmd.c_str(), "r");
    std::string out;
    char buf[512];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    const int status = ::pclose(p);
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
  }
  std::string dir_, profile_, uuid_;
};

TEST_F(SimNvidiaSmiTest, DoesWhatNvidiasDraDriverRuns) {
  Run list = Smi("-L");
  ASSERT_EQ(list.exit_code, 0) << list.out;
  EXPECT_THAT(list.out, HasSubstr("GPU 1: NVIDIA H200 (UUID: " + uuid_ + ")\n"));

  Run mode = Smi("-i " + uuid_ + " -c EXCLUSIVE_PROCESS");
  ASSERT_EQ(mode.exit_code, 0) << mode.out;
  EXPECT_THAT(mode.out, HasSubstr("Set compute mode to EXCLUSIVE_PROCESS for GPU "));
  mode = Smi("-i " + uuid_ + " -c DEFAULT");
  ASSERT_EQ(mode.exit_code, 0) << mode.out;
  EXPECT_THAT(mode.out, HasSubstr("All done."));
  EXPECT_EQ(Smi("-i 1 -c 3").exit_code, 0);
  EXPECT_EQ(Smi("-i 1 --query-gpu=uuid,compute_mode --format=csv,noheader").out,
            uuid_ + ", Exclusive_Process\n");
  EXPECT_EQ(Smi("-i 1 -c 0").exit_code, 0);

  Run slice = Smi("compute-policy -i " + uuid_ + " --set-timeslice 3");
  ASSERT_EQ(slice.exit_code, 0) << slice.out;
  EXPECT_THAT(Smi("compute-policy -i " + uuid_ + " -l").out, HasSubstr("Timeslice 3 (LONG)"));
  EXPECT_EQ(Smi("compute-policy -i " + uuid_ + " --set-timeslice=0").exit_code, 0);
  EXPECT_THAT(Smi("compute-policy --list").out, HasSubstr("GPU 1 (" + uuid_ + "): Timeslice 0 (DEFAULT)"));

  // Errors as the real one gives them.
  Run unknown = Smi("-i GPU-00000000-0000-0000-0000-000000000000 -c DEFAULT");
  EXPECT_EQ(unknown.exit_code, 6);
  EXPECT_THAT(unknown.out, HasSubstr("No devices were found"));
  EXPECT_EQ(Smi("-i 42 -c 0").exit_code, 6);
  Run bad = Smi("-i 1 -c SHARED");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.out, HasSubstr("Invalid combination of input arguments"));
  EXPECT_EQ(Smi("compute-policy -i 1 --set-timeslice 4").exit_code, 2);
  EXPECT_EQ(Smi("-i 1 -c EXCLUSIVE_THREAD").exit_code, 3);
}

TEST_F(SimNvidiaSmiTest, WithoutNvmlSaysSo) {
  const std::string cmd = dir_ + "/root/usr/bin/nvidia-smi -L >/dev/null 2>&1";
  // No LD_PRELOAD and no profile: the root's library is found beside the program, NVML does not start.
  const std::string env = "env -u GPUNODE_SIM_PROFILE ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0 ";
  const int status = std::system((env + cmd).c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 9);
}

}  // namespace
}  // namespace gpunode::sim
