// The simulated NVML loaded the way a real libnvidia-ml.so.1 is (dlopen RTLD_NOW|RTLD_LOCAL, every
// entry point resolved by name), and a test fixture that points it at a built-in profile or a
// profile file the test writes. Shared by the simulator's own tests (test/sim/simnvml*_test.cc).
#ifndef GPUNODE_TEST_SIM_SIM_NVML_FIXTURE_H_
#define GPUNODE_TEST_SIM_SIM_NVML_FIXTURE_H_

#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "src/gpu/nvml_abi.h"
#include "test/testing/sim_library.h"

namespace gpunode::sim {

// Every NVML and libcuda entry point of src/gpu/nvml_abi.h, resolved in the simulated library.
struct SimApi {
#define GPUNODE_TEST_FIELD(ret, name, params) ret(*name) params = nullptr;
  GPUNODE_NVML_FUNCTIONS(GPUNODE_TEST_FIELD)
  GPUNODE_CUDA_FUNCTIONS(GPUNODE_TEST_FIELD)
#undef GPUNODE_TEST_FIELD
  std::vector<std::string> missing;  // what did not resolve ("dlopen: ..." when nothing did)
};

inline const SimApi& SimLib() {
  static const SimApi* api = [] {
    auto* a = new SimApi();
    void* h = dlopen(testing::SimLibrary().c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) {
      a->missing.push_back(std::string("dlopen: ") + dlerror());
      return a;
    }
#define GPUNODE_TEST_RESOLVE(ret, name, params)               \
  a->name = reinterpret_cast<ret(*) params>(dlsym(h, #name)); \
  if (a->name == nullptr) a->missing.push_back(#name);
    GPUNODE_NVML_FUNCTIONS(GPUNODE_TEST_RESOLVE)
    GPUNODE_CUDA_FUNCTIONS(GPUNODE_TEST_RESOLVE)
#undef GPUNODE_TEST_RESOLVE
    return a;
  }();
  return *api;
}

// Each test gets its own profile file (suite and test name in the path, so tests of different
// suites can run in parallel), live reload off, and NVML shut down after it.
class SimNvmlFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(SimLib().missing.empty()) << SimLib().missing[0];
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = ::testing::TempDir() + "/simnvml-" + std::to_string(getpid()) + "-" + info->test_suite_name() +
            "-" + info->name() + ".yaml";
    setenv("GPUNODE_SIM_RELOAD_MS", "0", 1);
  }
  void TearDown() override {
    if (!SimLib().missing.empty()) return;
    while (SimLib().nvmlShutdown() == NVML_SUCCESS) {
    }
    std::remove(path_.c_str());
  }
  // Points GPUNODE_SIM_PROFILE at a built-in profile.
  void UseBuiltin(const char* name) { setenv("GPUNODE_SIM_PROFILE", name, 1); }
  // Writes `text` atomically to the profile file and points GPUNODE_SIM_PROFILE at it.
  void UseFile(const std::string& text) {
    std::string tmp = path_ + ".tmp";
    std::ofstream(tmp) << text;
    std::rename(tmp.c_str(), path_.c_str());
    setenv("GPUNODE_SIM_PROFILE", path_.c_str(), 1);
  }
  nvmlDevice_t Device(unsigned i) {
    nvmlDevice_t d = nullptr;
    EXPECT_EQ(SimLib().nvmlDeviceGetHandleByIndex_v2(i, &d), NVML_SUCCESS);
    return d;
  }
  const SimApi& nvml() { return SimLib(); }
  std::string path_;
};

}  // namespace gpunode::sim

#endif  // GPUNODE_TEST_SIM_SIM_NVML_FIXTURE_H_
