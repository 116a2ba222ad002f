// `gpunode sim capture` round trip: a profile captured from a (simulated) node, replayed by the
// simulator, reads back as the same inventory.
#include "src/node/capture.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"
#include "sim/support/profile.h"
#include "src/node/probe.h"
#include "yaml-cpp/yaml.h"
#include "test/testing/sim_library.h"
#include "test/testing/status_matchers.h"

namespace gpunode {
namespace {

using ::gpunode::testing::SimLibrary;

node::NodeInventory ProbeProfileText(const std::string& text, const std::string& tag) {
  auto dir = std::filesystem::temp_directory_path() / ("gpunode-capture-" + tag + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::string path = (dir / "profile.yaml").string();
  std::ofstream(path) << text;
  auto profile = sim::ParseProfile(text, path);
  EXPECT_OK(profile) << profile.status() << "\n" << text;
  EXPECT_OK(sim::WriteHostRoot(*profile, (dir / "root").string()));
  ::setenv("GPUNODE_SIM_PROFILE", path.c_str(), 1);
  auto fs = HostFs::Open((dir / "root").string());
  node::ProbeOptions options;
  options.nvml_library = options.cuda_library = SimLibrary();
  auto inv = node::ProbeNode(*fs, options);
  std::filesystem::remove_all(dir);
  return *inv;
}

// nlohmann -> YAML text the simple way (JSON is YAML).
std::string AsYaml(const nlohmann::ordered_json& doc) { return doc.dump(2); }

TEST(CaptureProfileTest, ACapturedNodeReplaysAsTheSameInventory) {
  for (const char* name : {"dgx-h200", "a100-mig", "t4-cloud", "h200-real", "pcie-l40s-4"}) {
    auto source = sim::ResolveProfile(name);
    ASSERT_OK(source) << source.status();
    node::NodeInventory original = ProbeProfileText(source->text, std::string(name) + "-a");
    std::string captured = AsYaml(node::CaptureProfile(original, std::string(name) + "-captured", "round trip"));
    node::NodeInventory replay = ProbeProfileText(captured, std::string(name) + "-b");
    ASSERT_EQ(replay.driver.gpus.size(), original.driver.gpus.size()) << name;
    EXPECT_EQ(replay.driver.driver_version, original.driver.driver_version) << name;
    EXPECT_EQ(replay.kernel.version, original.kernel.version) << name;
    EXPECT_EQ(replay.kernel.flavor, original.kernel.flavor) << name;
    EXPECT_EQ(replay.hardware.numa_nodes, original.hardware.numa_nodes) << name;
    for (size_t i = 0; i < original.driver.gpus.size(); ++i) {
      const gpu::GpuInfo& a = original.driver.gpus[i];
      const gpu::GpuInfo& b = replay.driver.gpus[i];
      EXPECT_EQ(a.uuid, b.uuid) << name;
      EXPECT_EQ(a.pci_bus_id, b.pci_bus_id) << name;
      EXPECT_EQ(a.pci_device_id, b.pci_device_id) << name;
      EXPECT_EQ(a.memory_total_bytes, b.memory_total_bytes) << name;
      EXPECT_EQ(a.pcie_width_current, b.pcie_width_current) << name;
      EXPECT_EQ(a.cc_major, b.cc_major) << name;
      EXPECT_EQ(a.mig_enabled, b.mig_enabled) << name;
      EXPECT_EQ(a.mig_devices.size(), b.mig_devices.size()) << name;
      EXPECT_EQ(a.nvlinks.size(), b.nvlinks.size()) << name;
      EXPECT_EQ(a.remapped_rows.has_value(), b.remapped_rows.has_value()) << name;
      EXPECT_EQ(a.temperature_c, b.temperature_c) << name;
    }
  }
}

}  // namespace
}  // namespace gpunode
