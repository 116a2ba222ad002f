// A simulated node for the claim preparer's tests: the host root the simulator generates for a
// profile (device nodes, driver files, /proc) in a fresh temp folder, the inventory the real probes
// read from it through the simulated NVML, and its DRA devices written out by hand (NVIDIA's names:
// gpu-<minor>, MIG devices gpu-<minor>-mig-<index>) — the device model proper is DraDevicesOf's.
#ifndef GPUNODE_TEST_DRA_SIM_NODE_H_
#define GPUNODE_TEST_DRA_SIM_NODE_H_

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "sim/support/profile.h"
#include "src/base/host_fs.h"
#include "src/dra/device_model.h"
#include "src/node/inventory.h"
#include "src/node/probe.h"
#include "test/testing/sim_library.h"
#include "test/testing/status_matchers.h"

namespace gpunode::dra {

class SimNode {
 public:
  explicit SimNode(const std::string& profile_name) {
    static int counter = 0;
    dir_ = std::filesystem::temp_directory_path() /
           ("gpunode-dra-sim-" + std::to_string(::getpid()) + "-" + std::to_string(++counter));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    auto source = sim::ResolveProfile(profile_name);
    EXPECT_OK(source);
    const std::string profile_path = (dir_ / "profile.yaml").string();
    std::ofstream(profile_path) << source->text;
    auto profile = sim::ParseProfile(source->text, profile_name);
    EXPECT_OK(profile);
    EXPECT_OK(sim::WriteHostRoot(*profile, root().string()));
    ::setenv("GPUNODE_SIM_PROFILE", profile_path.c_str(), 1);
    auto fs = HostFs::Open(root().string());
    EXPECT_OK(fs);
    fs_.emplace(*fs);
    node::ProbeOptions options;
    options.nvml_library = options.cuda_library = testing::SimLibrary();
    options.init_cuda = false;
    auto inv = node::ProbeNode(*fs_, options);
    EXPECT_OK(inv);
    inventory_ = std::make_shared<const node::NodeInventory>(*inv);
  }
  ~SimNode() { std::filesystem::remove_all(dir_); }
  SimNode(const SimNode&) = delete;
  SimNode& operator=(const SimNode&) = delete;

  std::filesystem::path root() const { return dir_ / "root"; }
  const HostFs& fs() const { return *fs_; }
  std::shared_ptr<const node::NodeInventory> inventory() const { return inventory_; }

  // Full GPUs (those without MIG mode), then each MIG device.
  std::vector<DraDevice> Devices() const {
    std::vector<DraDevice> out;
    for (const gpu::GpuInfo& g : inventory_->driver.gpus) {
      const unsigned minor = g.minor_number.value_or(g.index);
      if (!g.mig_enabled.value_or(false)) {
        DraDevice d;
        d.name = "gpu-" + std::to_string(minor);
        d.type = "gpu";
        d.uuid = g.uuid;
        d.minor = minor;
        d.index = g.index;
        d.pci_bus_id = g.pci_bus_id;
        out.push_back(d);
        continue;
      }
      for (const gpu::MigDevice& m : g.mig_devices) {
        DraDevice d;
        d.name = "gpu-" + std::to_string(minor) + "-mig-" + std::to_string(m.index);
        d.type = "mig";
        d.uuid = m.uuid;
        d.parent_uuid = g.uuid;
        d.minor = minor;
        d.index = g.index;
        d.pci_bus_id = g.pci_bus_id;
        out.push_back(d);
      }
    }
    return out;
  }

 private:
  std::filesystem::path dir_;
  std::optional<HostFs> fs_;
  std::shared_ptr<const node::NodeInventory> inventory_;
};

}  // namespace gpunode::dra

#endif  // GPUNODE_TEST_DRA_SIM_NODE_H_
