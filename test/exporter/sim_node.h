// A simulated node for the exporter's tests: its profile file selected through
// GPUNODE_SIM_PROFILE and the simulated libnvidia-ml opened through the real NVML loader.
#ifndef GPUNODE_TEST_EXPORTER_SIM_NODE_H_
#define GPUNODE_TEST_EXPORTER_SIM_NODE_H_

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "sim/support/profile.h"
#include "src/exporter/sample.h"
#include "src/node/probe.h"
#include "src/node/unreadable_gpus.h"
#include "test/testing/sim_library.h"
#include "test/testing/status_matchers.h"

namespace gpunode::exporter::testing_sim {

namespace fs = std::filesystem;
using ::gpunode::testing::SimLibrary;

inline std::string ReadAll(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A simulated node: its profile file selected through GPUNODE_SIM_PROFILE and the simulated NVML
// opened through the real loader.
class SimNode {
 public:
  explicit SimNode(const std::string& profile_name)
      : dir_(fs::temp_directory_path() /
             ("gpunode-exporter-" + profile_name + "-" + std::to_string(::getpid()))) {
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    auto source = sim::ResolveProfile(profile_name);
    EXPECT_OK(source) << source.status();
    const std::string profile_path = (dir_ / "profile.yaml").string();
    if (source.ok()) std::ofstream(profile_path) << source->text;
    ::setenv("GPUNODE_SIM_PROFILE", profile_path.c_str(), 1);
    auto nvml = gpu::NvmlLibrary::Open(SimLibrary());
    EXPECT_OK(nvml) << nvml.status();
    if (nvml.ok()) nvml_ = *std::move(nvml);
    if (source.ok()) profile_text_ = source->text;
  }

  // The driver's GPUs as the simulated host's sysfs and /proc tell them (what the exporter's
  // caller reads at start).
  std::vector<node::BusGpu> BusGpus() const {
    auto profile = sim::ParseProfile(profile_text_, "profile");
    EXPECT_OK(profile) << profile.status();
    if (!profile.ok()) return {};
    const std::string root = (dir_ / "root").string();
    Status written = sim::WriteHostRoot(*profile, root);
    EXPECT_OK(written) << written;
    auto host = HostFs::Open(root);
    EXPECT_OK(host) << host.status();
    if (!host.ok()) return {};
    return node::NvidiaGpusOnBus(node::ProbeHardware(*host), node::ProbeKernelDriver(*host));
  }
  ~SimNode() { fs::remove_all(dir_); }

  const gpu::NvmlLibrary& nvml() const { return *nvml_; }
  bool ok() const { return nvml_ != nullptr; }

  // A pass with the fixed clock values of the golden file.
  NodeSnapshot Collect(const std::string& hostname, const NodeSnapshot* previous = nullptr,
                       std::vector<node::BusGpu> bus_gpus = {}) const {
    NodeSnapshot s = CollectSnapshot(
        *nvml_, CollectOptions{.hostname = hostname, .bus_gpus = std::move(bus_gpus)}, previous);
    s.timestamp_seconds = 1767225600.5;
    s.collection_duration_seconds = 0.0125;
    return s;
  }

 private:
  fs::path dir_;
  std::string profile_text_;
  std::unique_ptr<gpu::NvmlLibrary> nvml_;
};

}  // namespace gpunode::exporter::testing_sim

#endif  // GPUNODE_TEST_EXPORTER_SIM_NODE_H_
