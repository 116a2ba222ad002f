// The executable-level dlopen of src/cli/libcuda_guard.cc, compiled into this test binary as into
// gpunode: before KeepLibcudaOut() every library loads; after it libcuda.so* fails as a missing
// library does (by name and by path), with a dlerror() that says why, and nothing else changes.
// That NVML's own dlopen binds to it in gpunode is checked on the H200 (scripts/gpu-proof-gemm.sh:
// the footprint's libcuda column).
#include "src/cli/libcuda_guard.h"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpunode::cli {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

TEST(LibcudaGuardTest, RefusesOnlyLibcudaOnceAsked) {
  const char* sim = std::getenv("GPUNODE_SIM_LIBRARY");
  ASSERT_NE(sim, nullptr) << "ctest sets GPUNODE_SIM_LIBRARY";
  fs::path dir = fs::temp_directory_path() / ("gpunode-guard-" + std::to_string(getpid()));
  fs::create_directories(dir);
  // Any real shared library will do as the stand-in for the driver's files.
  fs::copy_file(sim, dir / "libcuda.so.1", fs::copy_options::overwrite_existing);
  fs::copy_file(sim, dir / "libnvidia-ml.so.1", fs::copy_options::overwrite_existing);
  const std::string cuda = (dir / "libcuda.so.1").string(), nvml = (dir / "libnvidia-ml.so.1").string();

  ASSERT_FALSE(LibcudaKeptOut());
  void* h = dlopen(cuda.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << dlerror();  // not asked yet: loads
  dlclose(h);

  KeepLibcudaOut();
  EXPECT_TRUE(LibcudaKeptOut());
  dlerror();
  EXPECT_EQ(dlopen(cuda.c_str(), RTLD_NOW | RTLD_LOCAL), nullptr);
  const char* err = dlerror();
  ASSERT_NE(err, nullptr);
  EXPECT_THAT(std::string(err), HasSubstr("kept out of gpunode's long-running commands"));
  EXPECT_EQ(dlopen("libcuda.so.1", RTLD_NOW), nullptr);  // by name, as NVML asks
  EXPECT_EQ(dlopen("libcuda.so", RTLD_NOW), nullptr);
  void* other = dlopen(nvml.c_str(), RTLD_NOW | RTLD_LOCAL);  // everything else still loads
  EXPECT_NE(other, nullptr) << dlerror();
  if (other) dlclose(other);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace gpunode::cli
