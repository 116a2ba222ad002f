// MPS sharing: the plan (pure), and MpsManager running the simulated driver's MPS control daemon
// (sim/mps, installed by the host-root generator as usr/bin/nvidia-cuda-mps-control) in a
// generated host root: start, settings (read back from its control.log), a killed daemon
// restarted, a config change, stop. The Allocate response and the whole path through a
// ResourceServer are test/deviceplugin/mps_allocate_test.cc.
#include "src/devices/mps.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/support/profile.h"
#include "src/devices/devices.h"
#include "src/labels/labels.h"
#include "src/node/probe.h"
#include "test/devices/mps_fixture.h"
#include "test/testing/sim_library.h"
#include "test/testing/status_matchers.h"

namespace gpunode::devices {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;
using namespace std::chrono_literals;

using ::gpunode::testing::SimLibrary;
using namespace mps_testing;

TEST(MpsPlanTest, OneDaemonPerSharedResourceWithNvidiasLimits) {
  EXPECT_EQ(MpsPipeDir("/run/nvidia/mps", "nvidia.com/gpu"), "/run/nvidia/mps/nvidia.com/gpu/pipe");
  EXPECT_EQ(MpsLogDir("/run/nvidia/mps", "nvidia.com/gpu"), "/run/nvidia/mps/nvidia.com/gpu/log");
  EXPECT_EQ(MpsShmDir("/run/nvidia/mps"), "/run/nvidia/mps/shm");
  EXPECT_EQ(MpsContainerPipeDir("nvidia.com/gpu.shared"), "/mps/nvidia.com/gpu.shared/pipe");
  EXPECT_EQ(MpsActiveThreadPercentage(3), 33);
  EXPECT_EQ(*MpsPinnedMemLimit(Gpu("GPU-a", 140), 2), "71680M");
  PluginDevice unknown = Gpu("GPU-x", 1);
  unknown.memory_total_bytes.reset();
  EXPECT_FALSE(MpsPinnedMemLimit(unknown, 2).has_value());

  auto plan = PlanMpsDaemons(MpsConfig(4), {Shared({Gpu("GPU-a", 80), Gpu("GPU-b", 40)}, 4)});
  ASSERT_OK(plan) << plan.status();
  ASSERT_EQ(plan->size(), 1u);
  const MpsDaemonSpec& s = plan->front();
  EXPECT_EQ(s.resource, "nvidia.com/gpu");
  EXPECT_EQ(s.gpu_uuids, (std::vector<std::string>{"GPU-a", "GPU-b"}));
  EXPECT_EQ(s.active_thread_percentage, 25);
  EXPECT_EQ(s.pinned_mem_limits, (std::vector<std::string>{"20480M", "10240M"}));
  EXPECT_EQ(s.pipe_dir, "/run/nvidia/mps/nvidia.com/gpu/pipe");

  // Time-slicing and no sharing need no daemon.
  PluginConfig ts = MpsConfig(2);
  ts.sharing.strategy = SharingStrategy::kTimeSlicing;
  EXPECT_TRUE(PlanMpsDaemons(ts, {Shared({Gpu("GPU-a", 80)}, 2)})->empty());
}

TEST(MpsPlanTest, MigDevicesAndTooManyReplicasAreRefusedNamingTheDevice) {
  Resource mig = Shared({Gpu("MIG-1", 10)}, 2);
  for (PluginDevice& d : mig.devices) d.mig = true;
  auto plan = PlanMpsDaemons(MpsConfig(2), {mig});
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(plan.status().message(), HasSubstr("not supported for MIG devices"));
  EXPECT_THAT(plan.status().message(), HasSubstr("MIG-1"));

  auto many = PlanMpsDaemons(MpsConfig(49), {Shared({Gpu("GPU-v", 16)}, 49)});
  EXPECT_THAT(many.status().message(), HasSubstr("49 replicas exceed the 48 MPS clients GPU GPU-v"));
  auto pascal = PlanMpsDaemons(MpsConfig(17), {Shared({Gpu("GPU-p", 16, 6)}, 17)});
  EXPECT_THAT(pascal.status().message(), HasSubstr("exceed the 16 MPS clients"));
}

// ---------------------------------------------------------------------------------------------
// The manager against the simulated daemon.

TEST_F(MpsManagerTest, StartsOneDaemonWithTheReplicasSettingsAndStopLeavesNothing) {
  MakeManager(Options());
  const PluginConfig config = MpsConfig(2);
  ASSERT_OK(manager_->Apply(config, Resources(config))) << Log();
  const pid_t pid = Pid();
  ASSERT_GT(pid, 0);
  EXPECT_TRUE(Running(pid));
  struct stat st{};
  ASSERT_EQ(::stat((pipe() + "/control").c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  EXPECT_OK(manager_->Healthy());

  const std::string log = ReadAll(control_log());
  EXPECT_THAT(log, HasSubstr("Cmd:set_default_active_thread_percentage 50"));
  // Every L40S (46068 MiB in the profile) gets half its memory per client, by ordinal.
  ASSERT_EQ(inv_.driver.gpus.size(), 4u);
  const uint64_t half = *inv_.driver.gpus[0].memory_total_bytes / 2 / 1024 / 1024;
  for (int i = 0; i < 4; ++i) {
    EXPECT_THAT(log, HasSubstr("Cmd:set_default_device_pinned_mem_limit " + std::to_string(i) + " " +
                               std::to_string(half) + "M"));
  }
  // It was given the GPUs by UUID, in order.
  std::string uuids;
  for (const gpu::GpuInfo& g : inv_.driver.gpus) uuids += (uuids.empty() ? "" : ",") + g.uuid;
  EXPECT_THAT(log, HasSubstr("CUDA_VISIBLE_DEVICES=" + uuids + " (4 device(s))"));
  EXPECT_THAT(Log(), HasSubstr("MPS: started the control daemon for nvidia.com/gpu (pid " + std::to_string(pid)));

  auto answer = manager_->Command("nvidia.com/gpu", "get_default_active_thread_percentage");
  ASSERT_OK(answer) << answer.status();
  EXPECT_EQ(*answer, "50.0\n");
  auto servers = manager_->Command("nvidia.com/gpu", "get_server_list");
  ASSERT_OK(servers) << servers.status();

  manager_->Stop();
  EXPECT_FALSE(Running(pid));
  EXPECT_FALSE(fs::exists(pipe() + "/control"));
  EXPECT_FALSE(fs::exists(pipe() + "/nvidia-cuda-mps-control.pid"));
  EXPECT_THAT(ReadAll(control_log()), HasSubstr("Cmd:quit"));
  EXPECT_THAT(Log(), HasSubstr("MPS: stopped the control daemon for nvidia.com/gpu (pid " + std::to_string(pid) +
                               ", shutdown; quit)"));
  EXPECT_TRUE(manager_->Daemons().empty());
}

TEST_F(MpsManagerTest, AKilledDaemonIsRestartedByTheMonitor) {
  MakeManager(Options());
  const PluginConfig config = MpsConfig(2);
  ASSERT_OK(manager_->Apply(config, Resources(config))) << Log();
  manager_->Start();
  const pid_t first = Pid();
  ASSERT_GT(first, 0);
  ASSERT_EQ(::kill(first, SIGKILL), 0);
  pid_t second = 0;
  for (int i = 0; i < 100 && (second == 0 || second == first); ++i) {
    std::this_thread::sleep_for(50ms);
    second = Pid();
  }
  ASSERT_NE(second, first) << Log();
  ASSERT_GT(second, 0) << Log();
  EXPECT_TRUE(Running(second));
  EXPECT_FALSE(Running(first));
  auto daemons = manager_->Daemons();
  ASSERT_EQ(daemons.size(), 1u);
  EXPECT_EQ(daemons[0].starts, 2);
  EXPECT_THAT(Log(), HasSubstr("is not healthy: process " + std::to_string(first) + " is gone"));
  EXPECT_THAT(Log(), HasSubstr("MPS: restarted the control daemon for nvidia.com/gpu (start #2)"));
  // The new daemon has its settings again.
  EXPECT_EQ(Count(ReadAll(control_log()), "Cmd:set_default_active_thread_percentage 50"), 2);
  manager_->Stop();
  EXPECT_FALSE(Running(second));
}

// The health checks and the restart backoff run on the manager's clock: with a fake one, a killed
// daemon is restarted only when the clock passes the pause (min_backoff 1 s, then 2 s), and the
// monitor looks only when the clock passes health_interval — no sleeping for either.
TEST_F(MpsManagerTest, TheRestartBackoffAndTheMonitorRunOnTheFakeClock) {
  FakeClock& clock = fake_clock_;
  MpsOptions o = Options();
  o.clock = &clock;
  o.min_backoff = 1s;
  o.max_backoff = 8s;
  o.health_interval = 5s;
  MakeManager(o);
  const PluginConfig config = MpsConfig(2);
  ASSERT_OK(manager_->Apply(config, Resources(config))) << Log();
  const pid_t first = Pid();
  ASSERT_GT(first, 0);
  ASSERT_EQ(::kill(first, SIGKILL), 0);
  for (int i = 0; i < 200 && Running(first); ++i) std::this_thread::sleep_for(10ms);

  EXPECT_FALSE(manager_->CheckNow().ok());  // seen gone: the restart waits 1 s of the clock
  EXPECT_THAT(Log(), HasSubstr("restarting the control daemon for nvidia.com/gpu in 1000 ms"));
  clock.Advance(999ms);
  EXPECT_FALSE(manager_->CheckNow().ok());
  EXPECT_EQ(manager_->Daemons()[0].starts, 1);
  clock.Advance(1ms);
  EXPECT_OK(manager_->CheckNow()) << Log();
  const pid_t second = Pid();
  EXPECT_EQ(manager_->Daemons()[0].starts, 2);
  ASSERT_GT(second, 0);
  EXPECT_NE(second, first);

  // Killed again before a check found it healthy: the pause has doubled.
  ASSERT_EQ(::kill(second, SIGKILL), 0);
  for (int i = 0; i < 200 && Running(second); ++i) std::this_thread::sleep_for(10ms);
  EXPECT_FALSE(manager_->CheckNow().ok());
  EXPECT_THAT(Log(), HasSubstr("restarting the control daemon for nvidia.com/gpu in 2000 ms"));
  clock.Advance(1999ms);
  EXPECT_FALSE(manager_->CheckNow().ok());
  EXPECT_EQ(manager_->Daemons()[0].starts, 2);

  // The monitor: it waits health_interval on the clock, then checks (and restarts: 2 s passed).
  manager_->Start();
  ASSERT_TRUE(clock.AwaitWaiters(1, 5s));
  clock.Advance(5s);
  for (int i = 0; i < 500 && manager_->Daemons()[0].starts < 3; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(manager_->Daemons()[0].starts, 3) << Log();
  EXPECT_TRUE(Running(Pid()));
  manager_->Stop();  // ends the monitor's wait on the fake clock at once
}

TEST_F(MpsManagerTest, AHungDaemonIsKilledAndRestarted) {
  MpsOptions o = Options();
  o.command_timeout = 1s;
  MakeManager(o);
  const PluginConfig config = MpsConfig(2);
  ASSERT_OK(manager_->Apply(config, Resources(config))) << Log();
  const pid_t first = Pid();
  ASSERT_EQ(::kill(first, SIGSTOP), 0);  // alive, but its pipe does not answer
  Status st = manager_->CheckNow();
  EXPECT_OK(st) << st << Log();  // restarted within the same pass (min_backoff 0)
  EXPECT_THAT(Log(), HasSubstr("its control pipe does not answer"));
  EXPECT_THAT(Log(), HasSubstr("SIGKILL"));
  EXPECT_FALSE(Running(first));
  EXPECT_NE(Pid(), first);
  EXPECT_TRUE(Running(Pid()));
}

TEST_F(MpsManagerTest, AConfigChangeQuitsTheOldDaemonAndStartsANewOne) {
  MakeManager(Options());
  PluginConfig two = MpsConfig(2);
  ASSERT_OK(manager_->Apply(two, Resources(two))) << Log();
  const pid_t first = Pid();
  // The same config again keeps the daemon.
  ASSERT_OK(manager_->Apply(two, Resources(two)));
  EXPECT_EQ(Pid(), first);

  PluginConfig four = MpsConfig(4);
  ASSERT_OK(manager_->Apply(four, Resources(four))) << Log();
  const pid_t second = Pid();
  EXPECT_NE(second, first);
  EXPECT_FALSE(Running(first));
  EXPECT_TRUE(Running(second));
  const std::string log = ReadAll(control_log());
  EXPECT_THAT(log, HasSubstr("Cmd:quit"));
  EXPECT_THAT(log.substr(log.find("Cmd:quit")), HasSubstr("Cmd:set_default_active_thread_percentage 25"));
  EXPECT_THAT(Log(), HasSubstr("configuration changed; quit"));

  // Time-slicing needs no daemon: it quits.
  PluginConfig ts = two;
  ts.sharing.strategy = SharingStrategy::kTimeSlicing;
  ASSERT_OK(manager_->Apply(ts, Resources(ts)));
  EXPECT_TRUE(manager_->Daemons().empty());
  EXPECT_FALSE(Running(second));
  EXPECT_FALSE(fs::exists(pipe() + "/control"));
  EXPECT_THAT(Log(), HasSubstr("no longer shared with MPS"));
}

TEST_F(MpsManagerTest, AMissingControlProgramIsAClearErrorNamingIt) {
  fs::remove(root() + "/usr/bin/nvidia-cuda-mps-control");
  MakeManager(Options());
  const PluginConfig config = MpsConfig(2);
  Status st = manager_->Apply(config, Resources(config));
  EXPECT_EQ(st.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(st.message(), HasSubstr("nvidia-cuda-mps-control"));
  EXPECT_THAT(st.message(), HasSubstr("driver root /"));
  EXPECT_TRUE(manager_->Daemons().empty());

  // A program that is there but fails is an error with what it said, retried by the monitor.
  std::ofstream(root() + "/usr/bin/nvidia-cuda-mps-control") << "not a program\n";
  fs::permissions(root() + "/usr/bin/nvidia-cuda-mps-control", fs::perms(0755));
  Status bad = manager_->Apply(config, Resources(config));
  EXPECT_EQ(bad.code(), absl::StatusCode::kUnavailable) << bad;
  EXPECT_THAT(bad.message(), HasSubstr("nvidia.com/gpu"));
  EXPECT_THAT(bad.message(), HasSubstr("nvidia-cuda-mps-control"));
  EXPECT_FALSE(manager_->Healthy().ok());
}

TEST_F(MpsManagerTest, MigDevicesAreRefusedBeforeAnythingStarts) {
  MakeManager(Options());
  PluginConfig config = MpsConfig(2);
  config.mig_strategy = MigStrategy::kSingle;
  Resource mig = Shared({Gpu("MIG-4f1b", 10)}, 2);
  for (PluginDevice& d : mig.devices) d.mig = true;
  Status st = manager_->Apply(config, {mig});
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(st.message(), HasSubstr("not supported for MIG devices"));
  EXPECT_TRUE(manager_->Daemons().empty());
  EXPECT_FALSE(fs::exists(pipe()));
  // MIG mixed with MPS is refused by the config check already, as NVIDIA's plugin does.
  config.mig_strategy = MigStrategy::kMixed;
  EXPECT_THAT(ValidateConfig(config).message(), HasSubstr("mixed is not supported with MPS"));
}

TEST_F(MpsManagerTest, LabelsSayMpsWithTheReplicas) {
  const PluginConfig config = MpsConfig(2);
  labels::LabelOptions options;
  const labels::LabelSet set = labels::BuildLabels(inv_, config, options);
  EXPECT_EQ(set.labels.at("nvidia.com/mps.capable"), "true");
  EXPECT_EQ(set.labels.at("nvidia.com/gpu.sharing-strategy"), "mps");
  EXPECT_EQ(set.labels.at("nvidia.com/gpu.replicas"), "2");
  EXPECT_EQ(set.labels.at("nvidia.com/gpu.count"), "4");
  EXPECT_THAT(set.labels.at("nvidia.com/gpu.product"), ::testing::EndsWith("-SHARED"));
}

// The bits of one line of /proc/<pid>/status ("SigBlk:\t0000000000004002").
uint64_t SignalMask(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(field + ":", 0) == 0) return std::stoull(line.substr(field.size() + 1), nullptr, 16);
  }
  return ~0ull;
}

bool Has(uint64_t mask, int sig) { return (mask >> (sig - 1)) & 1; }

// The agent blocks SIGTERM, SIGINT and SIGHUP for its sigwait, in every thread; what the daemon
// inherited of that survives exec, and then it cannot be stopped by SIGTERM.
TEST_F(MpsManagerTest, TheDaemonStartsWithSignalsUnblockedAndAtTheirDefaults) {
  MakeManager(Options());
  const PluginConfig config = MpsConfig(2);
  struct sigaction ignore {}, old {};
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(::sigaction(SIGUSR2, &ignore, &old), 0);
  Status applied;
  std::thread agent_thread([&] {
    sigset_t blocked;
    sigemptyset(&blocked);
    for (int s : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&blocked, s);
    pthread_sigmask(SIG_BLOCK, &blocked, nullptr);
    applied = manager_->Apply(config, Resources(config));
  });
  agent_thread.join();
  ::sigaction(SIGUSR2, &old, nullptr);
  ASSERT_OK(applied) << Log();
  const pid_t pid = Pid();
  ASSERT_GT(pid, 0);
  const uint64_t blocked = SignalMask(pid, "SigBlk");
  const uint64_t ignored = SignalMask(pid, "SigIgn");
  EXPECT_EQ(blocked, 0u) << "the MPS daemon started with signals blocked (SIGTERM: " << Has(blocked, SIGTERM) << ")";
  EXPECT_FALSE(Has(ignored, SIGUSR2)) << "the MPS daemon inherited an ignored signal";
  EXPECT_FALSE(Has(ignored, SIGTERM));
  // So SIGTERM stops it (the simulated daemon cleans up on SIGTERM).
  ASSERT_EQ(::kill(pid, SIGTERM), 0);
  bool gone = false;
  for (int i = 0; i < 100 && !gone; ++i) {
    std::this_thread::sleep_for(20ms);
    gone = !Running(pid);
  }
  EXPECT_TRUE(gone) << "SIGTERM did not stop the MPS daemon";
}

// The pipe folder is mounted read-write into every client pod: a pid written into the daemon's pid
// file there must never be signalled. The daemon's pid is the one the fork returned.
TEST_F(MpsManagerTest, ThePidInThePipeFolderIsNeverSignalled) {
  // A process of ours that a client pod would like to see killed.
  const pid_t victim = ::fork();
  ASSERT_GE(victim, 0);
  if (victim == 0) {
    ::execl("/bin/sleep", "sleep", "60", nullptr);
    ::_exit(127);
  }
  struct Reap {
    pid_t pid;
    ~Reap() {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  } reap{victim};
  // The driver's program, behind a wrapper that writes the victim's pid into the pid file once the
  // daemon serves (as a client pod can at any time).
  const std::string bin = root() + "/usr/bin";
  fs::rename(bin + "/nvidia-cuda-mps-control", bin + "/real-mps-control");
  const std::string pid_file = pipe() + "/nvidia-cuda-mps-control.pid";
  std::ofstream(bin + "/nvidia-cuda-mps-control")
      << "#!/bin/sh\n"
      << "if [ \"$1\" = -d ]; then " << bin << "/real-mps-control -d; rc=$?; echo " << victim << " > " << pid_file
      << "; exit $rc; fi\n"
      << "exec " << bin << "/real-mps-control \"$@\"\n";
  fs::permissions(bin + "/nvidia-cuda-mps-control", fs::perms(0755));
  MpsOptions o = Options();
  o.chroot = MpsOptions::Chroot::kNever;  // the wrapper is a shell script of this machine
  o.isolate_shm = false;
  MakeManager(o);
  const PluginConfig config = MpsConfig(2);
  ASSERT_OK(manager_->Apply(config, Resources(config))) << Log();
  const pid_t daemon = Pid();
  ASSERT_NE(daemon, victim) << "the daemon's pid was read from the pid file";
  std::ofstream(pid_file, std::ios::trunc) << victim << "\n";
  // Unhealthy (killed), restarted, stopped: the victim is never touched.
  ASSERT_EQ(::kill(daemon, SIGKILL), 0);
  Status st = manager_->CheckNow();
  EXPECT_OK(st) << st << Log();
  std::ofstream(pid_file, std::ios::trunc) << victim << "\n";
  manager_->Stop();
  EXPECT_TRUE(Running(victim)) << "the pid a client wrote was signalled\n" << Log();
  EXPECT_FALSE(Running(daemon));
}

}  // namespace
}  // namespace gpunode::devices
