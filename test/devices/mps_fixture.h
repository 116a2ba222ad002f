// Shared by the MPS tests of src/devices (test/devices/mps_test.cc) and src/deviceplugin
// (test/deviceplugin/mps_allocate_test.cc): hand-made shared resources and a simulated node whose
// host root carries the simulated MPS control daemon (sim/mps).
#ifndef GPUNODE_TEST_DEVICES_MPS_FIXTURE_H_
#define GPUNODE_TEST_DEVICES_MPS_FIXTURE_H_

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/support/profile.h"
#include "src/base/clock.h"
#include "src/base/host_fs.h"
#include "src/devices/config.h"
#include "src/devices/devices.h"
#include "src/devices/mps.h"
#include "src/node/probe.h"
#include "test/testing/sim_library.h"
#include "test/testing/status_matchers.h"

namespace gpunode::devices::mps_testing {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using ::gpunode::testing::SimLibrary;

inline std::string ReadAll(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// A process that exists and is not a zombie.
inline bool Running(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  if (text.empty()) return false;
  const size_t close = text.rfind(')');
  return close != std::string::npos && close + 2 < text.size() && text[close + 2] != 'Z';
}

inline PluginConfig MpsConfig(int replicas) {
  auto c = ParseConfig("sharing: {mps: {resources: [{name: nvidia.com/gpu, replicas: " + std::to_string(replicas) +
                           "}]}}\n",
                       "mps.yaml");
  EXPECT_OK(c) << c.status();
  return *c;
}

inline PluginDevice Gpu(const std::string& uuid, uint64_t gib, int cc_major = 9) {
  PluginDevice d;
  d.uuid = d.gpu_uuid = d.base = d.id = d.visible = uuid;
  d.memory_total_bytes = gib << 30;
  d.cc_major = cc_major;
  d.cc_minor = 0;
  d.minor = 0;
  return d;
}

inline Resource Shared(const std::vector<PluginDevice>& gpus, int replicas, const std::string& name = "nvidia.com/gpu") {
  Resource r;
  r.name = name;
  r.replicas = replicas;
  r.shared = true;
  for (const PluginDevice& g : gpus) {
    for (int i = 0; i < replicas; ++i) {
      PluginDevice d = g;
      d.replica = i;
      d.id = g.base + "::" + std::to_string(i);
      r.devices.push_back(d);
    }
  }
  return r;
}

class MpsManagerTest : public ::testing::Test {
 protected:
  void SetUp() override { Open("pcie-l40s-4"); }

  void Open(const std::string& profile_name) {
    static int counter = 0;
    dir_ = fs::temp_directory_path() / ("gpn-mps-" + std::to_string(::getpid()) + "-" + std::to_string(++counter));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "dp");
    auto source = sim::ResolveProfile(profile_name);
    ASSERT_OK(source) << source.status();
    const std::string profile_path = (dir_ / "profile.yaml").string();
    std::ofstream(profile_path) << source->text;
    auto profile = sim::ParseProfile(source->text, profile_name);
    ASSERT_OK(profile) << profile.status();
    ::setenv("GPUNODE_SIM_LIBRARY", SimLibrary().c_str(), 0);  // where the host-root generator looks
    ASSERT_OK(sim::WriteHostRoot(*profile, root()));
    ASSERT_TRUE(fs::exists(root() + "/usr/bin/nvidia-cuda-mps-control"))
        << "the simulated MPS control daemon was not installed into the host root";
    ::setenv("GPUNODE_SIM_PROFILE", profile_path.c_str(), 1);
    auto host = HostFs::Open(root());
    ASSERT_OK(host);
    node::ProbeOptions options;
    options.nvml_library = options.cuda_library = SimLibrary();
    options.init_cuda = false;
    options.load_cuda = false;
    options.query_topology = false;
    options.live_metrics = false;
    auto inv = node::ProbeNode(*host, options);
    ASSERT_OK(inv) << inv.status();
    inv_ = *inv;
  }

  void TearDown() override {
    manager_.reset();
    fs::remove_all(dir_);
  }

  std::string root() const { return (dir_ / "root").string(); }
  std::string pipe() const { return root() + "/run/nvidia/mps/nvidia.com/gpu/pipe"; }
  std::string control_log() const { return root() + "/run/nvidia/mps/nvidia.com/gpu/log/control.log"; }

  MpsOptions Options() {
    MpsOptions o;
    // chroot and the private /dev/shm need root; as anyone else the fixture's program runs as is.
    const bool root_user = ::geteuid() == 0;
    o.chroot = root_user ? MpsOptions::Chroot::kAuto : MpsOptions::Chroot::kNever;
    o.isolate_shm = root_user;
    o.command_timeout = 3s;
    o.quit_timeout = 3s;
    o.health_interval = 100ms;
    o.min_backoff = 0ms;
    o.max_backoff = 400ms;
    return o;
  }

  void MakeManager(MpsOptions o) {
    auto host = HostFs::Open(root());
    ASSERT_OK(host);
    manager_ = std::make_unique<MpsManager>(*host, o, [this](const std::string& m) {
      std::lock_guard<std::mutex> l(log_mu_);
      log_ += m + "\n";
    });
  }

  std::vector<Resource> Resources(const PluginConfig& c) {
    auto r = BuildResources(inv_, c);
    EXPECT_OK(r) << r.status();
    return r.ok() ? *r : std::vector<Resource>{};
  }

  std::string Log() {
    std::lock_guard<std::mutex> l(log_mu_);
    return log_;
  }

  pid_t Pid() {
    auto d = manager_->Daemons();
    return d.empty() ? 0 : d.front().pid;
  }

  fs::path dir_;
  node::NodeInventory inv_;
  FakeClock fake_clock_;  // for managers on a fake clock: outlives manager_ (its monitor thread)
  std::unique_ptr<MpsManager> manager_;
  std::mutex log_mu_;
  std::string log_;
};

}  // namespace gpunode::devices::mps_testing

#endif  // GPUNODE_TEST_DEVICES_MPS_FIXTURE_H_
