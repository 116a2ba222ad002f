// The simulated driver's nvidia-cuda-mps-control (sim/mps): daemon and client at their boundary,
// and its place in the generated host root.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/support/profile.h"
#include "test/testing/status_matchers.h"

namespace gpunode::sim {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::string Program() { return std::string(GPUNODE_BIN_DIR) + "/gpunode-sim-mps-control"; }

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct ShellRun {
  int exit_code;
  std::string out;
};

class SimMpsControlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/simmps-" + std::to_string(::getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    Sh("echo quit | " + Program());
    fs::remove_all(dir_);
  }
  // Runs `command` with the daemon's environment; stdout and stderr together.
  ShellRun Sh(const std::string& command) {
    const std::string full = "export CUDA_MPS_PIPE_DIRECTORY=" + dir_ + "/pipe CUDA_MPS_LOG_DIRECTORY=" + dir_ +
                             "/log CUDA_VISIBLE_DEVICES=GPU-aaaa,GPU-bbbb; (" + command + ") 2>&1";
    FILE* p = ::popen(full.c_str(), "r");
    std::string out;
    char buf[512];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    const int status = ::pclose(p);
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
  }
  std::string dir_;
};

TEST_F(SimMpsControlTest, DaemonAnswersCommandsAndRecordsSettingsInItsLog) {
  ShellRun start = Sh(Program() + " -d");
  ASSERT_EQ(start.exit_code, 0) << start.out;
  struct stat st{};
  ASSERT_EQ(::stat((dir_ + "/pipe/control").c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  const std::string pid = Read(dir_ + "/pipe/nvidia-cuda-mps-control.pid");
  EXPECT_FALSE(pid.empty());
  EXPECT_TRUE(fs::exists("/proc/" + pid.substr(0, pid.find('\n'))));

  EXPECT_EQ(Sh("echo get_default_active_thread_percentage | " + Program()).out, "100.0\n");
  EXPECT_EQ(Sh("echo set_default_active_thread_percentage 50 | " + Program()).out, "50.0\n");
  EXPECT_EQ(Sh("echo set_default_device_pinned_mem_limit 1 1024M | " + Program()).exit_code, 0);
  EXPECT_EQ(Sh("echo set_default_device_pinned_mem_limit GPU-aaaa 2G | " + Program()).exit_code, 0);
  EXPECT_EQ(Sh("echo get_default_device_pinned_mem_limit 0 | " + Program()).out, "2G\n");
  ShellRun server_list = Sh("echo get_server_list | " + Program());
  EXPECT_EQ(server_list.exit_code, 0);
  EXPECT_EQ(server_list.out, "");
  ShellRun bad = Sh("echo set_default_device_pinned_mem_limit 7 1G | " + Program());
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_THAT(bad.out, HasSubstr("Invalid device 7"));
  EXPECT_EQ(Sh("echo frobnicate | " + Program()).exit_code, 1);

  // A second daemon on the same pipe directory refuses to start.
  ShellRun second = Sh(Program() + " -d");
  EXPECT_EQ(second.exit_code, 1);
  EXPECT_THAT(second.out, HasSubstr("already running"));

  EXPECT_EQ(Sh("echo quit | " + Program()).exit_code, 0);
  for (int i = 0; i < 50 && fs::exists(dir_ + "/pipe/control"); ++i) ::usleep(20000);
  EXPECT_FALSE(fs::exists(dir_ + "/pipe/control"));
  EXPECT_FALSE(fs::exists(dir_ + "/pipe/nvidia-cuda-mps-control.pid"));
  const std::string log = Read(dir_ + "/log/control.log");
  EXPECT_THAT(log, HasSubstr("Cmd:set_default_active_thread_percentage 50"));
  EXPECT_THAT(log, HasSubstr("Set default pinned device memory limit of device 1 (1) to 1024M"));
  EXPECT_THAT(log, HasSubstr("Set default pinned device memory limit of device 0 (GPU-aaaa) to 2G"));
  EXPECT_THAT(log, HasSubstr("Cmd:quit"));
  EXPECT_THAT(log, HasSubstr("] Exit"));
}

TEST_F(SimMpsControlTest, AClientWithoutADaemonSaysSoAtOnce) {
  ShellRun r = Sh("echo get_server_list | " + Program());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.out, HasSubstr("Cannot find MPS control daemon process"));
  ShellRun opt = Sh(Program() + " -x");
  EXPECT_EQ(opt.exit_code, 1);
  EXPECT_THAT(opt.out, HasSubstr("usage: nvidia-cuda-mps-control [-d | -f]"));
}

TEST(SimMpsHostRootTest, TheGeneratorInstallsTheDaemonBesideTheSimulatedNvml) {
  ::setenv("GPUNODE_SIM_LIBRARY", (std::string(GPUNODE_BIN_DIR) + "/libgpunode-simnvml.so").c_str(), 1);
  auto src = ResolveProfile("h200-real");
  ASSERT_OK(src);
  auto profile = ParseProfile(src->text, "h200-real");
  ASSERT_OK(profile);
  const std::string dir = ::testing::TempDir() + "/simmps-root-" + std::to_string(::getpid());
  fs::remove_all(dir);
  ASSERT_OK(WriteHostRoot(*profile, dir));
  const std::string installed = dir + "/usr/bin/nvidia-cuda-mps-control";
  ASSERT_TRUE(fs::exists(installed));
  EXPECT_EQ(fs::file_size(installed), fs::file_size(Program()));
  EXPECT_EQ(::access(installed.c_str(), X_OK), 0);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace gpunode::sim
