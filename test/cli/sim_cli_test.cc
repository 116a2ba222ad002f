// `gpunode sim hostroot --device-nodes`: real character devices for the simulated node's
// /dev/nvidia* (what the Helm chart's simulate mode gives to GPU pods), and a clear error without
// CAP_MKNOD.
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/run_gpunode.h"

namespace {

using ::gpunode::testing::Result;
using ::gpunode::testing::RunGpunode;
using ::gpunode::testing::RunShell;

std::string TempDir(const std::string& name) {
  std::string dir = std::filesystem::temp_directory_path() / (name + "." + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  return dir;
}

// Whether this process may mknod (root with CAP_MKNOD, not in a user namespace that forbids it).
bool CanMknod() {
  std::string probe = TempDir("gpunode-mknod-probe");
  bool ok = ::mknod(probe.c_str(), S_IFCHR | 0600, makedev(1, 3)) == 0;
  ::unlink(probe.c_str());
  return ok;
}

TEST(CliSimHostRootTest, WithoutTheFlagDeviceNodesArePlainFiles) {
  std::string dir = TempDir("gpunode-sim-plain");
  Result r = RunGpunode("sim hostroot dgx-h200 " + dir);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  struct stat st {};
  ASSERT_EQ(::stat((dir + "/dev/nvidia0").c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  std::filesystem::remove_all(dir);
}

// The chart's simulate mode points GPUNODE_SIM_PROFILE at this file, so a test can lose a GPU by
// editing it; the simulated NVML reads it like any profile file.
TEST(CliSimHostRootTest, ProfileFileHoldsTheProfileTheNvmlReads) {
  std::string dir = TempDir("gpunode-sim-profile");
  Result r = RunGpunode("sim hostroot --profile-file " + dir + "/profile.yaml dgx-h200 " + dir);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  ASSERT_TRUE(std::filesystem::exists(dir + "/profile.yaml"));
  Result list = RunGpunode("--host-root " + dir + " --nvml-library " + std::string(GPUNODE_BIN_DIR) +
                               "/libgpunode-simnvml.so plugin --print",
                           {{"GPUNODE_SIM_PROFILE", dir + "/profile.yaml"}});
  EXPECT_EQ(list.exit_code, 0) << list.out;
  EXPECT_THAT(list.out, ::testing::HasSubstr("GPU-ba8397f6-35c6-4721-9454-6cc61818e68c"));
  std::filesystem::remove_all(dir);
}

TEST(CliSimHostRootTest, DeviceNodesAreCharacterDevicesWithTheDriversNumbers) {
  if (!CanMknod()) GTEST_SKIP() << "this process cannot mknod (needs root with CAP_MKNOD)";
  std::string dir = TempDir("gpunode-sim-devnodes");
  Result r = RunGpunode("sim hostroot --device-nodes dgx-h200 " + dir);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, ::testing::HasSubstr("character devices"));
  struct Node { std::string path; unsigned major, minor; };
  for (const Node& n : {Node{"nvidia0", 195, 0}, Node{"nvidia7", 195, 7}, Node{"nvidiactl", 195, 255},
                        Node{"nvidia-modeset", 195, 254}, Node{"nvidia-uvm", 510, 0},
                        Node{"nvidia-uvm-tools", 510, 1}}) {
    struct stat st {};
    ASSERT_EQ(::lstat((dir + "/dev/" + n.path).c_str(), &st), 0) << n.path;
    EXPECT_TRUE(S_ISCHR(st.st_mode)) << n.path;
    EXPECT_EQ(major(st.st_rdev), n.major) << n.path;
    EXPECT_EQ(minor(st.st_rdev), n.minor) << n.path;
    EXPECT_EQ(st.st_mode & 07777, 0666u) << n.path;
  }
  // The numbers used are named in the fixture's proc/devices, so every reader agrees.
  Result devices = RunShell("grep -c 'nvidia-frontend' " + dir + "/proc/devices");
  EXPECT_EQ(devices.out, "1\n");
  // Writing the same host root again (a restarted init container) replaces the nodes.
  Result again = RunGpunode("sim hostroot --device-nodes dgx-h200 " + dir);
  EXPECT_EQ(again.exit_code, 0) << again.out;
  // The rest of the fixture still answers as the simulated node.
  const std::string lib = std::string(GPUNODE_BIN_DIR) + "/libgpunode-simnvml.so";
  Result print = RunGpunode("--host-root " + dir + " --nvml-library " + lib + " plugin --print",
                            {{"GPUNODE_SIM_PROFILE", "dgx-h200"}});
  EXPECT_EQ(print.exit_code, 0) << print.out;
  std::filesystem::remove_all(dir);
}

TEST(CliSimHostRootTest, WithoutCapMknodTheErrorSaysWhatIsNeeded) {
  if (!CanMknod()) GTEST_SKIP() << "this process cannot mknod itself, so it cannot drop the capability either";
  if (RunShell("command -v setpriv").exit_code != 0) GTEST_SKIP() << "setpriv (util-linux) missing";
  std::string dir = TempDir("gpunode-sim-nomknod");
  Result r = RunShell("setpriv --bounding-set -mknod --inh-caps -mknod " + std::string(GPUNODE_BIN_DIR) +
                      "/gpunode sim hostroot --device-nodes dgx-h200 " + dir);
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_THAT(r.out, ::testing::HasSubstr("cannot create the character device"));
  EXPECT_THAT(r.out, ::testing::HasSubstr("CAP_MKNOD"));
  std::filesystem::remove_all(dir);
}

}  // namespace
