// The device plugin over real gRPC on Unix sockets, against a kubelet emulator
// (test/testing/kubelet_emulator.h), on simulated nodes (the simulated NVML library, with live
// profile edits for a GPU that falls off the bus or reports an XID).
#include "src/deviceplugin/server.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/support/profile.h"
#include "src/base/clock.h"
#include "src/deviceplugin/allocate.h"
#include "src/devices/devices.h"
#include "src/devices/health.h"
#include "src/node/probe.h"
#include "test/testing/kubelet_emulator.h"
#include "test/testing/sim_library.h"
#include "test/testing/status_matchers.h"

namespace gpunode::deviceplugin {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

using ::gpunode::testing::SimLibrary;
using namespace ::gpunode::devices;  // the device model this server serves

// A simulated node in a temp dir: profile file (editable live), host root, inventory; plus the
// kubelet's device-plugin directory.
class PluginTest : public ::testing::Test {
 protected:
  void Open(const std::string& profile_name) {
    // Short: a Unix socket path has at most 107 characters.
    static int counter = 0;
    dir_ = fs::temp_directory_path() / ("gpn-dp-" + std::to_string(::getpid()) + "-" + std::to_string(++counter));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "dp");
    auto source = sim::ResolveProfile(profile_name);
    ASSERT_OK(source) << source.status();
    profile_text_ = source->text;
    profile_path_ = (dir_ / "profile.yaml").string();
    WriteProfile(profile_text_);
    auto profile = sim::ParseProfile(source->text, profile_name);
    ASSERT_OK(profile) << profile.status();
    ASSERT_OK(sim::WriteHostRoot(*profile, (dir_ / "root").string()));
    ::setenv("GPUNODE_SIM_PROFILE", profile_path_.c_str(), 1);
    ::setenv("GPUNODE_SIM_RELOAD_MS", "0", 1);
    auto host = HostFs::Open((dir_ / "root").string());
    ASSERT_OK(host);
    node::ProbeOptions options;
    options.nvml_library = options.cuda_library = SimLibrary();
    options.init_cuda = false;
    options.query_topology = true;
    auto inv = node::ProbeNode(*host, options);
    ASSERT_OK(inv) << inv.status();
    inv_ = *inv;
  }

  // Replaces the profile atomically (the simulated NVML re-reads it).
  void WriteProfile(const std::string& text) {
    const std::string tmp = profile_path_ + ".tmp";
    std::ofstream(tmp) << text;
    fs::rename(tmp, profile_path_);
  }
  // Adds `extra` (e.g. "lost: true") to the entry of the GPU with `minor`.
  void EditGpu(unsigned minor, const std::string& extra) {
    const std::string key = "minor: " + std::to_string(minor) + ",";
    const size_t at = profile_text_.find(key);
    ASSERT_NE(at, std::string::npos);
    profile_text_.insert(at + key.size(), " " + extra + ",");
    WriteProfile(profile_text_);
  }

  void StartPlugin(PluginConfig config = {}, HealthOptions health = {}) {
    auto resources = BuildResources(inv_, config);
    ASSERT_OK(resources) << resources.status();
    auto links = std::make_shared<LinkMatrix>(BuildLinkMatrix(inv_));
    ManagerOptions mo;
    mo.plugin_dir = (dir_ / "dp").string();
    mo.watch_interval = 50ms;
    mo.max_backoff = max_backoff_;
    if (clock_ != nullptr) mo.clock = clock_;
    manager_ = std::make_unique<PluginManager>(*std::move(resources), config, std::vector<std::string>{"/dev/nvidiactl"},
                                               links, mo, [this](const std::string& m) {
                                                 std::lock_guard<std::mutex> l(log_mu_);
                                                 log_ += m + "\n";
                                               });
    std::vector<std::pair<unsigned, std::string>> watched;
    for (const gpu::GpuInfo& g : inv_.driver.gpus) watched.emplace_back(g.index, g.uuid);
    auto nvml = gpu::NvmlLibrary::Open(SimLibrary());
    ASSERT_OK(nvml) << nvml.status();
    nvml_ = *std::move(nvml);
    health.poll_interval = 100ms;
    monitor_ = std::make_unique<HealthMonitor>(*nvml_, watched, health, [this](const HealthEvent& e) {
      manager_->SetHealth(e.uuid, e.healthy, e.reason);
    });
    monitor_->Start();
    runner_ = std::thread([this] { run_status_ = manager_->Run(stop_); });
  }

  void TearDown() override {
    stop_ = true;
    if (manager_) manager_->Interrupt();
    if (monitor_) monitor_->Stop();
    if (runner_.joinable()) runner_.join();
    kubelet_.reset();
    manager_.reset();
    nvml_.reset();
    fs::remove_all(dir_);
  }

  std::string Log() {
    std::lock_guard<std::mutex> l(log_mu_);
    return log_;
  }
  static int Count(const v1beta1::ListAndWatchResponse& r, const std::string& health) {
    int n = 0;
    for (const auto& d : r.devices()) n += d.health() == health;
    return n;
  }
  std::string Uuid(unsigned i) const { return inv_.driver.gpus[i].uuid; }

  FakeClock fake_clock_;    // outlives the manager's thread (joined in TearDown)
  Clock* clock_ = nullptr;  // the manager's clock; nullptr: the real one
  std::chrono::milliseconds max_backoff_ = 400ms;
  fs::path dir_;
  std::string profile_text_, profile_path_;
  node::NodeInventory inv_;
  std::unique_ptr<PluginManager> manager_;
  std::unique_ptr<gpu::NvmlLibrary> nvml_;
  std::unique_ptr<HealthMonitor> monitor_;
  std::unique_ptr<gpunode::testing::KubeletEmulator> kubelet_;
  std::atomic<bool> stop_{false};
  std::thread runner_;
  Status run_status_;
  std::mutex log_mu_;
  std::string log_;
};

TEST_F(PluginTest, RegistersAndListsEveryGpuHealthyWithItsNumaNode) {
  Open("dgx-h200");
  kubelet_ = std::make_unique<gpunode::testing::KubeletEmulator>((dir_ / "dp").string());
  ASSERT_TRUE(kubelet_->Start());
  StartPlugin();
  ASSERT_TRUE(kubelet_->WaitFor(kGpuResource, [](const auto& r) { return r.devices_size() == 8; }, 10s)) << Log();
  auto list = kubelet_->Lists(kGpuResource).back();
  EXPECT_EQ(Count(list, kHealthy), 8);
  EXPECT_EQ(list.devices(0).id(), Uuid(0));
  ASSERT_EQ(list.devices(0).topology().nodes_size(), 1);
  EXPECT_EQ(list.devices(0).topology().nodes(0).id(), 0);
  EXPECT_EQ(list.devices(7).topology().nodes(0).id(), 1);
  EXPECT_TRUE(kubelet_->Options(kGpuResource).get_preferred_allocation_available());
  EXPECT_TRUE(fs::exists(dir_ / "dp/nvidia-gpu.sock"));
}

TEST_F(PluginTest, AllocateAnswersPerContainerAndNamesUnknownIds) {
  Open("dgx-h200");
  kubelet_ = std::make_unique<gpunode::testing::KubeletEmulator>((dir_ / "dp").string());
  ASSERT_TRUE(kubelet_->Start());
  PluginConfig config;
  config.device_list.cdi_cri = true;
  config.pass_device_specs = true;
  StartPlugin(config);
  ASSERT_TRUE(kubelet_->WaitForRegistrations(1, 10s)) << Log();
  v1beta1::AllocateResponse resp;
  ASSERT_TRUE(kubelet_->Allocate(kGpuResource, {Uuid(2), Uuid(5)}, &resp).ok());
  ASSERT_EQ(resp.container_responses_size(), 1);
  const auto& c = resp.container_responses(0);
  EXPECT_EQ(c.envs().at("NVIDIA_VISIBLE_DEVICES"), Uuid(2) + "," + Uuid(5));
  ASSERT_EQ(c.cdi_devices_size(), 2);
  EXPECT_EQ(c.cdi_devices(0).name(), "nvidia.com/gpu=" + Uuid(2));
  std::vector<std::string> specs;
  for (const auto& d : c.devices()) specs.push_back(d.container_path() + ":" + d.permissions());
  EXPECT_THAT(specs, ElementsAre("/dev/nvidia2:rw", "/dev/nvidia5:rw", "/dev/nvidiactl:rw"));

  grpc::Status bad = kubelet_->Allocate(kGpuResource, {Uuid(1), "GPU-not-here"}, &resp);
  EXPECT_EQ(bad.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(bad.error_message(), HasSubstr("unknown device ID(s) for nvidia.com/gpu: GPU-not-here"));
}

// As NVIDIA's plugin: the kubelet's IDs stay UUIDs under deviceIDStrategy index (it checkpoints
// them across reboots that may renumber GPUs); only what the container is told becomes an index.
TEST_F(PluginTest, IndexIdStrategyKeepsUuidIdsAndPassesIndices) {
  Open("dgx-h200");
  kubelet_ = std::make_unique<gpunode::testing::KubeletEmulator>((dir_ / "dp").string());
  ASSERT_TRUE(kubelet_->Start());
  PluginConfig config;
  config.device_id = DeviceIdStrategy::kIndex;
  config.device_list.volume_mounts = true;
  StartPlugin(config);
  ASSERT_TRUE(kubelet_->WaitFor(kGpuResource, [](const auto& r) { return r.devices_size() == 8; }, 10s)) << Log();
  EXPECT_EQ(kubelet_->Lists(kGpuResource).back().devices(3).id(), Uuid(3));
  v1beta1::AllocateResponse resp;
  ASSERT_TRUE(kubelet_->Allocate(kGpuResource, {Uuid(3), Uuid(6)}, &resp).ok());
  const auto& c = resp.container_responses(0);
  EXPECT_EQ(c.envs().at("NVIDIA_VISIBLE_DEVICES"), "3,6");
  std::vector<std::string> mounts;
  for (const auto& m : c.mounts()) mounts.push_back(m.container_path());
  EXPECT_THAT(mounts, ElementsAre("/var/run/nvidia-container-devices/3", "/var/run/nvidia-container-devices/6"));
}

TEST_F(PluginTest, PreferredAllocationKeepsFourGpusOnOneNumaNodeAndHonoursMustInclude) {
  Open("dgx-h200");
  kubelet_ = std::make_unique<gpunode::testing::KubeletEmulator>((dir_ / "dp").string());
  ASSERT_TRUE(kubelet_->Start());
  StartPlugin();
  ASSERT_TRUE(kubelet_->WaitForRegistrations(1, 10s)) << Log();
  std::vector<std::string> all;
  for (unsigned i = 0; i < 8; ++i) all.push_back(Uuid(i));
  std::vector<std::string> got;
  ASSERT_TRUE(kubelet_->Preferred(kGpuResource, all, {Uuid(6)}, 4, &got).ok());
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[0], Uuid(6));
  for (const std::string& id : got) {
    const auto it = std::find(all.begin(), all.end(), id);
    EXPECT_GE(it - all.begin(), 4) << id << " is not on NUMA node 1 with GPU 6";
  }
  grpc::Status too_many = kubelet_->Preferred(kGpuResource, {Uuid(0)}, {}, 2, &got);
  EXPECT_EQ(too_many.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(PluginTest, AKubeletRestartIsFollowedByAFreshRegistrationWithinFiveSeconds) {
  Open("dgx-h200");
  kubelet_ = std::make_unique<gpunode::testing::KubeletEmulator>((dir_ / "dp").string());
  ASSERT_TRUE(kubelet_->Start());
  StartPlugin();
  ASSERT_TRUE(kubelet_->WaitForRegistrations(1, 10s)) << Log();
  const auto restart = std::chrono::steady_clock::now();
  ASSERT_TRUE(kubelet_->Restart());  // wipes nvidia-gpu.sock, new kubelet.sock
  ASSERT_TRUE(kubelet_->WaitForRegistrations(2, 5s)) << Log();
  const auto took = kubelet_->last_registration() - restart;
  EXPECT_LT(took, 5s);
  ASSERT_TRUE(kubelet_->WaitFor(kGpuResource, [](const auto& r) { return r.devices_size() == 8; }, 5s));
  EXPECT_TRUE(fs::exists(dir_ / "dp/nvidia-gpu.sock"));
  EXPECT_THAT(Log(), HasSubstr("re-registering"));
  std::cout << "re-registered " << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
            << " ms after the kubelet restart\n";
}

TEST_F(PluginTest, AnAbsentKubeletIsRetriedWithBackoffAndJoinedWhenItAppears) {
  Open("pcie-l40s-4");
  StartPlugin();
  std::this_thread::sleep_for(700ms);
  EXPECT_THAT(Log(), HasSubstr("no kubelet socket at"));
  EXPECT_THAT(Log(), HasSubstr("retrying in"));
  kubelet_ = std::make_unique<gpunode::testing::KubeletEmulator>((dir_ / "dp").string());
  ASSERT_TRUE(kubelet_->Start());
  ASSERT_TRUE(kubelet_->WaitFor(kGpuResource, [](const auto& r) { return r.devices_size() == 4; }, 5s)) << Log();
}

// The registration retry waits on the manager's clock (src/base/backoff.h, 1 s doubling): a refused
// registration is tried again exactly when a fake clock passes the pause, never on real time.
TEST_F(PluginTest, ARefusedRegistrationIsRetriedWhenTheFakeClockPassesTheBackoff) {
  Open("pcie-l40s-4");
  kubelet_ = std::make_unique<gpunode::testing::KubeletEmulator>((dir_ / "dp").string());
  ASSERT_TRUE(kubelet_->Start());
  kubelet_->RefuseRegistrations(true);
  FakeClock& clock = fake_clock_;
  clock_ = &clock;
  max_backoff_ = 8s;
  StartPlugin();
  auto attempts_reach = [&](int n) {
    for (int i = 0; i < 500 && manager_->attempts() < n; ++i) std::this_thread::sleep_for(10ms);
    return manager_->attempts() >= n;
  };
  ASSERT_TRUE(attempts_reach(1)) << Log();
  EXPECT_THAT(Log(), HasSubstr("retrying in 1 s"));
  std::this_thread::sleep_for(300ms);  // real time: the loop looks every 50 ms, the pause is not over
  EXPECT_EQ(manager_->attempts(), 1);
  clock.Advance(999ms);
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(manager_->attempts(), 1);
  clock.Advance(1ms);
  ASSERT_TRUE(attempts_reach(2)) << Log();
  clock.Advance(1999ms);  // the second pause is 2 s
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(manager_->attempts(), 2);
  clock.Advance(1ms);
  ASSERT_TRUE(attempts_reach(3)) << Log();
  EXPECT_EQ(kubelet_->refused(), 3);
  EXPECT_EQ(manager_->registrations(), 0);
  kubelet_->RefuseRegistrations(false);
  clock.Advance(4s);
  ASSERT_TRUE(kubelet_->WaitFor(kGpuResource, [](const auto& r) { return r.devices_size() == 4; }, 5s)) << Log();
  EXPECT_EQ(manager_->registrations(), 1);
}

TEST_F(PluginTest, ALostGpuTurnsUnhealthyWithinASecondAndComesBackAfterTheQuietPeriod) {
  Open("dgx-h200");
  kubelet_ = std::make_unique<gpunode::testing::KubeletEmulator>((dir_ / "dp").string());
  ASSERT_TRUE(kubelet_->Start());
  HealthOptions health;
  health.recovery_quiet = 600ms;
  StartPlugin({}, health);
  ASSERT_TRUE(kubelet_->WaitFor(kGpuResource, [](const auto& r) { return Count(r, kHealthy) == 8; }, 10s)) << Log();
  const auto t0 = std::chrono::steady_clock::now();
  EditGpu(3, "lost: true");
  const std::string uuid3 = Uuid(3);
  auto gpu3_is = [&](const char* health_name) {
    return [&, health_name](const v1beta1::ListAndWatchResponse& r) {
      for (const auto& d : r.devices()) {
        if (d.id() == uuid3) return d.health() == health_name;
      }
      return false;
    };
  };
  ASSERT_TRUE(kubelet_->WaitFor(kGpuResource, gpu3_is(kUnhealthy), 1s)) << Log();
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_LT(took, 1s);
  EXPECT_EQ(Count(kubelet_->Lists(kGpuResource).back(), kHealthy), 7);  // the others keep reporting
  // Back on the bus: Healthy again once it answered for the quiet period.
  profile_text_ = std::regex_replace(profile_text_, std::regex(" lost: true,"), "");
  WriteProfile(profile_text_);
  ASSERT_TRUE(kubelet_->WaitFor(kGpuResource, gpu3_is(kHealthy), 5s)) << Log();
  for (int i = 0; i < 100 && Log().find("is now Healthy") == std::string::npos; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_THAT(Log(), HasSubstr("is now Healthy: answered NVML normally"));
}

TEST_F(PluginTest, XidSeventyNineMakesGpuThreeUnhealthyXidThirteenDoesNotAndItRecovers) {
  Open("dgx-h200");
  kubelet_ = std::make_unique<gpunode::testing::KubeletEmulator>((dir_ / "dp").string());
  ASSERT_TRUE(kubelet_->Start());
  HealthOptions health;
  health.recovery_quiet = 800ms;  // 5 min in production, shortened here
  StartPlugin({}, health);
  ASSERT_TRUE(kubelet_->WaitFor(kGpuResource, [](const auto& r) { return Count(r, kHealthy) == 8; }, 10s)) << Log();
  EditGpu(1, "events: [{type: xid, xid: 13}]");  // application error: ignored
  std::this_thread::sleep_for(600ms);
  EXPECT_EQ(Count(kubelet_->Lists(kGpuResource).back(), kHealthy), 8);
  const size_t messages = kubelet_->Lists(kGpuResource).size();
  const auto t0 = std::chrono::steady_clock::now();
  EditGpu(3, "events: [{type: xid, xid: 79}]");  // fell off the bus: fatal
  ASSERT_TRUE(kubelet_->WaitFor(kGpuResource, [](const auto& r) { return Count(r, kUnhealthy) == 1; }, 1s)) << Log();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);
  EXPECT_EQ(kubelet_->Lists(kGpuResource).size(), messages + 1);  // one new message
  const v1beta1::ListAndWatchResponse latest = kubelet_->Lists(kGpuResource).back();
  for (const auto& d : latest.devices()) {
    EXPECT_EQ(d.health(), d.id() == Uuid(3) ? kUnhealthy : kHealthy) << d.id();
  }
  // The health change reaches the kubelet before its log line is written (SetHealth, then log).
  for (int i = 0; i < 100 && Log().find("XID 79") == std::string::npos; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_THAT(Log(), HasSubstr("XID 79"));
  // It answers NVML normally and no new critical XID comes: Healthy after the quiet period.
  ASSERT_TRUE(kubelet_->WaitFor(kGpuResource, [](const auto& r) { return Count(r, kHealthy) == 8; }, 5s)) << Log();
  // ... and stays so: the event is not delivered again.
  std::this_thread::sleep_for(1500ms);
  EXPECT_EQ(Count(kubelet_->Lists(kGpuResource).back(), kHealthy), 8);
}

TEST_F(PluginTest, TimeSlicedReplicasAreAdvertisedAndSpreadAcrossGpus) {
  Open("pcie-l40s-4");
  kubelet_ = std::make_unique<gpunode::testing::KubeletEmulator>((dir_ / "dp").string());
  ASSERT_TRUE(kubelet_->Start());
  PluginConfig config;
  config.sharing.strategy = SharingStrategy::kTimeSlicing;
  config.sharing.resources.push_back({"nvidia.com/gpu", 4});
  config.sharing.fail_requests_greater_than_one = true;
  StartPlugin(config);
  ASSERT_TRUE(kubelet_->WaitFor(kGpuResource, [](const auto& r) { return r.devices_size() == 16; }, 10s)) << Log();
  EXPECT_EQ(kubelet_->Lists(kGpuResource).back().devices(1).id(), Uuid(0) + "::1");
  std::vector<std::string> all;
  const v1beta1::ListAndWatchResponse latest = kubelet_->Lists(kGpuResource).back();
  for (const auto& d : latest.devices()) all.push_back(d.id());
  std::vector<std::string> got;
  ASSERT_TRUE(kubelet_->Preferred(kGpuResource, all, {}, 2, &got).ok());
  ASSERT_EQ(got.size(), 2u);
  EXPECT_NE(got[0].substr(0, got[0].find("::")), got[1].substr(0, got[1].find("::")));  // two GPUs
  v1beta1::AllocateResponse resp;
  grpc::Status two = kubelet_->Allocate(kGpuResource, {all[0], all[5]}, &resp);
  EXPECT_EQ(two.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(two.error_message(), HasSubstr("maximum request size for shared resources is 1"));
  ASSERT_TRUE(kubelet_->Allocate(kGpuResource, {all[6]}, &resp).ok());
  EXPECT_EQ(resp.container_responses(0).envs().at("NVIDIA_VISIBLE_DEVICES"), Uuid(1));
}

TEST_F(PluginTest, MixedMigStrategyServesOneResourcePerProfile) {
  Open("a100-mig");
  kubelet_ = std::make_unique<gpunode::testing::KubeletEmulator>((dir_ / "dp").string());
  ASSERT_TRUE(kubelet_->Start());
  PluginConfig config;
  config.mig_strategy = MigStrategy::kMixed;
  StartPlugin(config);
  ASSERT_TRUE(kubelet_->WaitFor("nvidia.com/mig-2g.20gb", [](const auto& r) { return r.devices_size() == 2; }, 10s))
      << Log();
  ASSERT_TRUE(kubelet_->WaitFor("nvidia.com/mig-3g.40gb", [](const auto& r) { return r.devices_size() == 1; }, 10s));
  EXPECT_TRUE(fs::exists(dir_ / "dp/nvidia-mig-2g.20gb.sock"));
  v1beta1::AllocateResponse resp;
  const std::string mig = kubelet_->Lists("nvidia.com/mig-3g.40gb").back().devices(0).id();
  ASSERT_TRUE(kubelet_->Allocate("nvidia.com/mig-3g.40gb", {mig}, &resp).ok());
  EXPECT_EQ(resp.container_responses(0).envs().at("NVIDIA_VISIBLE_DEVICES"), mig);
}

}  // namespace
}  // namespace gpunode::deviceplugin

namespace gpunode::deviceplugin {
namespace {

TEST(MigProfileNameTest, FollowsNvidiasRoundingOfTheShareOfTheParentsMemory) {
  gpu::MigDevice m;
  m.slices = 1;
  m.memory_total_bytes = 16768ull << 20;  // an H200 1g.18gb instance
  EXPECT_EQ(MigProfileName(m, 143771ull << 20), "1g.18gb");
  EXPECT_EQ(MigProfileName(m), "1g.17gb");  // without the parent: GiB rounded up
  m.slices = 3;
  m.memory_total_bytes = 40192ull << 20;  // A100 80GB 3g.40gb
  EXPECT_EQ(MigProfileName(m, 81920ull << 20), "3g.40gb");
  m.slices = 1;
  m.memory_total_bytes = 4864ull << 20;  // A100 40GB 1g.5gb
  EXPECT_EQ(MigProfileName(m, 40960ull << 20), "1g.5gb");
}

}  // namespace
}  // namespace gpunode::deviceplugin
