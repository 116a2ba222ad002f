// The NodeInventory the real probes read from a simulated node: the profile's host root written
// to a temp folder, the simulated NVML (sim_library.h) loaded, ProbeNode run, the folder removed.
// ProbeSimulated() probes each profile once per test binary (a probe takes a few hundred ms in a
// Debug build). The same steps test/devices/topology_test.cc takes. Needs gpunode_simsupport
// and gpunode_node.
#ifndef GPUNODE_TEST_TESTING_SIM_INVENTORY_H_
#define GPUNODE_TEST_TESTING_SIM_INVENTORY_H_

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "gtest/gtest.h"
#include "sim/support/profile.h"
#include "src/base/host_fs.h"
#include "src/node/probe.h"
#include "test/testing/sim_library.h"
#include "test/testing/status_matchers.h"

namespace gpunode::testing {

// A built-in profile by name, or the profile's YAML text when `text` is set.
inline node::NodeInventory ProbeSimulatedOnce(const std::string& name, const std::string& text = "") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("gpunode-siminv-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::string yaml = text;
  if (yaml.empty()) {
    auto source = sim::ResolveProfile(name);
    EXPECT_OK(source);
    if (source.ok()) yaml = source->text;
  }
  const std::string profile_path = (dir / "profile.yaml").string();
  std::ofstream(profile_path) << yaml;
  node::NodeInventory inv;
  auto profile = sim::ParseProfile(yaml, name);
  EXPECT_OK(profile);
  if (profile.ok()) {
    EXPECT_OK(sim::WriteHostRoot(*profile, (dir / "root").string()));
    ::setenv("GPUNODE_SIM_PROFILE", profile_path.c_str(), 1);
    auto host = HostFs::Open((dir / "root").string());
    EXPECT_OK(host);
    if (host.ok()) {
      node::ProbeOptions options;
      options.nvml_library = options.cuda_library = SimLibrary();
      options.init_cuda = false;
      options.live_metrics = false;
      auto probed = node::ProbeNode(*host, options);
      EXPECT_OK(probed);
      if (probed.ok()) inv = *probed;
    }
  }
  fs::remove_all(dir);
  return inv;
}

inline const node::NodeInventory& ProbeSimulated(const std::string& name) {
  static auto* cache = new std::map<std::string, node::NodeInventory>();
  auto it = cache->find(name);
  if (it == cache->end()) it = cache->emplace(name, ProbeSimulatedOnce(name)).first;
  return it->second;
}

}  // namespace gpunode::testing

#endif  // GPUNODE_TEST_TESTING_SIM_INVENTORY_H_
