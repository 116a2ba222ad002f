// Times the topology-aware preferred allocation (src/devices/topology.h):
//   * BuildLinkMatrix on the simulated dgx-h200 (probed once through the simulated NVML);
//   * PreferredGpus on it (8 GPUs, NVSwitch: every pair ties but for PCIe/NUMA), sizes 1..8;
//   * PreferredGpus on a 16-GPU node of four NVLink islands, sizes 1..16, all available and
//     with one GPU of each island in use (12 available);
//   * PreferredGpus on random 16x16 score matrices (scores 0..1999, few ties: the hardest case for
//     the bound), sizes 1..16, one new matrix per run.
// Each row: median, 99th percentile and maximum over the runs, in microseconds of the thread's
// CPU time (clock_gettime(CLOCK_THREAD_CPUTIME_ID)).
// Usage: preferred_alloc_bench [--runs N] [--sim-library PATH]
//   (default: libgpunode-simnvml.so beside this program, or $GPUNODE_SIM_LIBRARY)
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sim/support/profile.h"
#include "src/devices/topology.h"
#include "src/gpu/nvml_abi.h"
#include "src/node/probe.h"

namespace {

namespace fs = std::filesystem;
using gpunode::node::NodeInventory;
using gpunode::devices::LinkMatrix;

struct Stats {
  double median_us = 0, p99_us = 0, max_us = 0;
};

// This thread's CPU time in microseconds: unlike the wall clock it does not count the time the
// thread was preempted, so the tail shows the search's own worst cases on a busy machine.
double ThreadCpuUs() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

Stats Measure(int runs, const std::function<void()>& setup, const std::function<void()>& call) {
  std::vector<double> v;
  v.reserve(runs);
  for (int i = 0; i < runs; ++i) {
    setup();
    const double a = ThreadCpuUs();
    call();
    v.push_back(ThreadCpuUs() - a);
  }
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v[std::min(v.size() - 1, v.size() * 99 / 100)], v.back()};
}

void PrintRow(const std::string& what, int gpus, int size, const Stats& s) {
  std::printf("%-34s %4d %4d %10.2f %10.2f %10.2f\n", what.c_str(), gpus, size, s.median_us,
              s.p99_us, s.max_us);
}

gpunode::StatusOr<gpunode::node::NodeInventory> ProbeDgxH200(const std::string& sim_library) {
  const fs::path dir =
      fs::temp_directory_path() / ("gpunode-alloc-bench-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  GPUNODE_ASSIGN_OR_RETURN(auto source, gpunode::sim::ResolveProfile("dgx-h200"));
  GPUNODE_ASSIGN_OR_RETURN(auto profile, gpunode::sim::ParseProfile(source.text, "dgx-h200"));
  const std::string profile_path = (dir / "profile.yaml").string();
  std::ofstream(profile_path) << source.text;
  GPUNODE_RETURN_IF_ERROR(gpunode::sim::WriteHostRoot(profile, (dir / "root").string()));
  ::setenv("GPUNODE_SIM_PROFILE", profile_path.c_str(), 1);
  GPUNODE_ASSIGN_OR_RETURN(auto host, gpunode::HostFs::Open((dir / "root").string()));
  gpunode::node::ProbeOptions options;
  options.nvml_library = options.cuda_library = sim_library;
  options.init_cuda = false;
  options.query_topology = true;
  options.live_metrics = false;
  auto inv = gpunode::node::ProbeNode(host, options);
  fs::remove_all(dir);
  return inv;
}

// Four islands of 4 GPUs ({0,1,8,9}, {2,3,10,11}, ...) joined by direct NVLinks, 6 links per
// pair in islands 0 and 2, 2 in islands 1 and 3; two PCIe switches per socket; 8 GPUs a socket.
gpunode::node::NodeInventory SixteenGpus() {
  gpunode::node::NodeInventory inv;
  const unsigned n = 16;
  for (unsigned i = 0; i < n; ++i) {
    gpunode::gpu::GpuInfo g;
    g.index = i;
    g.uuid = absl::StrCat("GPU-bench-", i);
    g.pci_bus_id = absl::StrFormat("0000:%02x:00.0", 0x10 + i * 0x0e);
    inv.driver.gpus.push_back(g);
    gpunode::node::PciDevice d;
    d.bus_id = g.pci_bus_id;
    d.numa_node = i < 8 ? 0 : 1;
    inv.hardware.gpus.push_back(d);
  }
  auto island = [](unsigned i) { return (i / 2) % 4; };
  for (unsigned i = 0; i < n; ++i) {
    unsigned link = 0;
    for (unsigned j = 0; j < n; ++j) {
      if (j == i || island(j) != island(i)) continue;
      for (int l = 0; l < (island(i) % 2 == 0 ? 6 : 2); ++l) {
        inv.driver.gpus[i].nvlinks.push_back({link++, true, inv.driver.gpus[j].pci_bus_id});
      }
    }
  }
  inv.driver.topology.assign(n * n, 0);
  for (unsigned a = 0; a < n; ++a) {
    for (unsigned b = 0; b < n; ++b) {
      int level = a / 4 == b / 4   ? NVML_TOPOLOGY_SINGLE
                  : a / 8 == b / 8 ? NVML_TOPOLOGY_NODE
                                   : NVML_TOPOLOGY_SYSTEM;
      inv.driver.topology[a * n + b] = a == b ? 0 : level;
    }
  }
  return inv;
}

void TimeSizes(const std::string& what, const LinkMatrix& m, const std::vector<std::string>& ids,
               int runs) {
  for (int size = 1; size <= static_cast<int>(ids.size()); ++size) {
    Stats s = Measure(
        runs, [] {},
        [&] {
          auto got = gpunode::devices::PreferredGpus(m, ids, {}, size);
          if (!got.ok()) std::abort();
        });
    PrintRow(what, static_cast<int>(ids.size()), size, s);
  }
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 2000;
  std::string sim_library;
  if (const char* env = std::getenv("GPUNODE_SIM_LIBRARY")) sim_library = env;
  if (sim_library.empty()) {
    sim_library = (fs::absolute(argv[0]).parent_path() / "libgpunode-simnvml.so").string();
  }
  for (int i = 1; i + 1 < argc; ++i) {
    if (!std::strcmp(argv[i], "--runs"))
      runs = std::max(1, std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "--sim-library"))
      sim_library = argv[++i];
  }
  auto dgx = ProbeDgxH200(sim_library);
  if (!dgx.ok() || dgx->driver.gpus.size() != 8) {
    std::fprintf(stderr, "probe of the simulated dgx-h200 failed: %s\n",
                 dgx.ok() ? "not 8 GPUs" : std::string(dgx.status().message()).c_str());
    return 1;
  }
  std::printf("preferred allocation, %d runs per row, microseconds of thread CPU time\n", runs);
  std::printf("%-34s %4s %4s %10s %10s %10s\n", "case", "gpus", "size", "median", "p99", "max");

  LinkMatrix dgx_matrix;
  PrintRow("BuildLinkMatrix dgx-h200", 8, 0,
           Measure(
               runs, [] {}, [&] { dgx_matrix = gpunode::devices::BuildLinkMatrix(*dgx); }));
  TimeSizes("PreferredGpus dgx-h200", dgx_matrix, dgx_matrix.uuids, runs);

  const gpunode::node::NodeInventory sixteen = SixteenGpus();
  const LinkMatrix islands = gpunode::devices::BuildLinkMatrix(sixteen);
  TimeSizes("PreferredGpus 16 islands", islands, islands.uuids, runs);
  std::vector<std::string> partial;
  for (size_t i = 0; i < islands.size(); ++i) {
    if (i != 0 && i != 2 && i != 4 && i != 6) partial.push_back(islands.uuids[i]);
  }
  TimeSizes("PreferredGpus 16 islands, 4 in use", islands, partial, runs);

  std::mt19937 rng(42);
  LinkMatrix random = islands;
  for (int size = 1; size <= 16; ++size) {
    Stats s = Measure(
        runs,
        [&] {
          for (size_t a = 0; a < 16; ++a) {
            for (size_t b = a + 1; b < 16; ++b) {
              random.score[a * 16 + b] = random.score[b * 16 + a] = static_cast<int>(rng() % 2000);
            }
          }
        },
        [&] {
          auto got = gpunode::devices::PreferredGpus(random, random.uuids, {}, size);
          if (!got.ok()) std::abort();
        });
    PrintRow("PreferredGpus 16 random scores", 16, size, s);
  }
  return 0;
}
