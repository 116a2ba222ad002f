// Topology-aware preferred allocation: the link matrix of simulated nodes (real probes, real
// simulated NVML, generated host roots), the choice of GPUs on them and on hand-made inventories,
// checked against brute force, and the shared-device (replica / MIG) policies.
#include "src/devices/topology.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/support/profile.h"
#include "src/gpu/nvml_abi.h"
#include "src/node/probe.h"
#include "test/testing/sim_library.h"
#include "test/testing/status_matchers.h"

namespace gpunode::devices {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

using ::gpunode::testing::SimLibrary;

// The inventory the real probes read from a simulated node (a built-in profile name, or a
// profile's YAML text when `text` is set).
node::NodeInventory ProbeOnce(const std::string& name, const std::string& text) {
  const fs::path dir =
      fs::temp_directory_path() / ("gpunode-topology-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::string yaml = text;
  if (yaml.empty()) {
    auto source = sim::ResolveProfile(name);
    EXPECT_OK(source) << source.status();
    if (source.ok()) yaml = source->text;
  }
  const std::string profile_path = (dir / "profile.yaml").string();
  std::ofstream(profile_path) << yaml;
  node::NodeInventory inv;
  auto profile = sim::ParseProfile(yaml, name);
  EXPECT_OK(profile) << profile.status();
  if (profile.ok()) {
    Status st = sim::WriteHostRoot(*profile, (dir / "root").string());
    EXPECT_OK(st) << st;
    ::setenv("GPUNODE_SIM_PROFILE", profile_path.c_str(), 1);
    auto host = HostFs::Open((dir / "root").string());
    EXPECT_OK(host) << host.status();
    if (host.ok()) {
      node::ProbeOptions options;
      options.nvml_library = options.cuda_library = SimLibrary();
      options.init_cuda = false;
      options.query_topology = true;
      options.live_metrics = false;
      auto probed = node::ProbeNode(*host, options);
      EXPECT_OK(probed) << probed.status();
      if (probed.ok()) inv = *probed;
    }
  }
  fs::remove_all(dir);
  return inv;
}

// Probed once per test binary (a probe takes a few hundred ms in a Debug build).
const node::NodeInventory& ProbeSimulated(const std::string& name, const std::string& text = "") {
  static std::map<std::string, node::NodeInventory>* cache = new std::map<std::string, node::NodeInventory>();
  auto it = cache->find(name);
  if (it == cache->end()) it = cache->emplace(name, ProbeOnce(name, text)).first;
  return it->second;
}

// The two-island node: 8 GPUs on two sockets (0-3 on NUMA node 0, 4-7 on node 1), NVLink
// bridges joining islands {0,1,4,5} and {2,3,6,7} (each GPU has 4 links to each island peer), so
// an island spans both sockets and a NUMA-only choice would be wrong.
const char* const kIslandBus[8] = {"0000:17:00.0", "0000:31:00.0", "0000:4b:00.0", "0000:65:00.0",
                                   "0000:ca:00.0", "0000:d1:00.0", "0000:e3:00.0", "0000:f1:00.0"};
const int kIsland[8] = {0, 0, 1, 1, 0, 0, 1, 1};

std::string TwoIslandProfile() {
  std::ostringstream y;
  y << "apiVersion: gpunode/v1\nkind: NodeProfile\nname: two-islands\n"
       "description: 8 GPUs, two NVLink-bridged islands of 4 across two sockets\n"
       "host:\n  hostname: islands\n  kernel_release: 6.8.0-85-generic\n  numa_nodes: 2\n"
       "  module: {loaded: true, flavor: open, version: \"580.95.05\"}\n"
       "driver:\n  version: \"580.95.05\"\n  cuda_version: \"13.0\"\n"
       "gpu_defaults:\n  name: NVIDIA H100 NVL\n  device_id: 0x2321\n"
       "  memory: {total_mib: 95830}\n  compute_capability: \"9.0\"\n  pcie: {gen: 5, width: 16}\n"
       "gpus:\n";
  for (int i = 0; i < 8; ++i) {
    y << "  - bus_id: \"" << kIslandBus[i] << "\"\n    numa_node: " << (i < 4 ? 0 : 1)
      << "\n    nvlinks:\n";
    int link = 0;
    for (int j = 0; j < 8; ++j) {
      if (j == i || kIsland[j] != kIsland[i]) continue;
      for (int l = 0; l < 4; ++l) {
        y << "      - {link: " << link++ << ", remote_bus_id: \"" << kIslandBus[j] << "\"}\n";
      }
    }
  }
  return y.str();
}

std::vector<std::string> Uuids(const node::NodeInventory& inv, std::vector<int> positions) {
  std::vector<std::string> out;
  for (int p : positions) out.push_back(inv.driver.gpus.at(p).uuid);  // throws if the probe failed
  return out;
}

std::vector<std::string> AllUuids(const node::NodeInventory& inv) {
  std::vector<std::string> out;
  for (const gpu::GpuInfo& g : inv.driver.gpus) out.push_back(g.uuid);
  return out;
}

// Positions in the matrix of an answer, sorted.
std::vector<size_t> Positions(const LinkMatrix& m, const std::vector<std::string>& ids) {
  std::vector<size_t> out;
  for (const std::string& id : ids) {
    auto p = m.Find(id);
    EXPECT_TRUE(p.has_value()) << id;
    if (p) out.push_back(*p);
  }
  std::sort(out.begin(), out.end());
  return out;
}

int64_t SetScore(const LinkMatrix& m, const std::vector<size_t>& s) {
  int64_t v = 0;
  for (size_t a = 0; a < s.size(); ++a) {
    for (size_t b = a + 1; b < s.size(); ++b) v += m.Score(s[a], s[b]);
  }
  return v;
}

// Brute force over every subset, with the documented order: highest score, then least linked to
// the available GPUs left, then lowest positions.
std::vector<size_t> BruteForce(const LinkMatrix& m, const std::vector<size_t>& available,
                               const std::vector<size_t>& must, size_t size) {
  const size_t k = available.size();
  std::vector<size_t> best;
  int64_t best_score = -1, best_cross = 0;
  for (uint32_t mask = 0; mask < (uint32_t{1} << k); ++mask) {
    if (static_cast<size_t>(__builtin_popcount(mask)) != size) continue;
    std::vector<size_t> set, rest;
    for (size_t i = 0; i < k; ++i) ((mask >> i) & 1 ? set : rest).push_back(available[i]);
    if (!std::includes(set.begin(), set.end(), must.begin(), must.end())) continue;
    const int64_t score = SetScore(m, set);
    int64_t cross = 0;
    for (size_t a : set) {
      for (size_t b : rest) cross += m.Score(a, b);
    }
    if (score > best_score || (score == best_score && cross < best_cross) ||
        (score == best_score && cross == best_cross && set < best)) {
      best = set, best_score = score, best_cross = cross;
    }
  }
  return best;
}

LinkMatrix HandMadeMatrix(size_t n, const std::function<int(size_t, size_t)>& score) {
  LinkMatrix m;
  m.score.assign(n * n, 0);
  for (size_t i = 0; i < n; ++i) {
    m.uuids.push_back(absl::StrCat("GPU-hand-", i));
    m.indices.push_back(static_cast<unsigned>(i));
  }
  for (size_t a = 0; a < n; ++a) {
    for (size_t b = a + 1; b < n; ++b) m.score[a * n + b] = m.score[b * n + a] = score(a, b);
  }
  return m;
}

std::vector<std::string> IdsOf(const LinkMatrix& m, const std::vector<size_t>& positions) {
  std::vector<std::string> out;
  for (size_t p : positions) out.push_back(m.uuids[p]);
  return out;
}

// A 16-GPU node as the probes would report it: four islands of 4 GPUs joined by direct NVLinks
// (islands 0 and 2 with 6 links per pair, 1 and 3 with 2), two PCIe switches per socket.
node::NodeInventory SixteenGpuInventory() {
  node::NodeInventory inv;
  const size_t n = 16;
  for (unsigned i = 0; i < n; ++i) {
    gpu::GpuInfo g;
    g.index = i;
    g.uuid = absl::StrCat("GPU-sixteen-", i);
    g.pci_bus_id = absl::StrFormat("0000:%02x:00.0", 0x10 + i * 0x0e);
    inv.driver.gpus.push_back(g);
    node::PciDevice d;
    d.bus_id = g.pci_bus_id;
    d.class_code = 0x030200;
    d.numa_node = i < 8 ? 0 : 1;
    inv.hardware.gpus.push_back(d);
  }
  auto island = [](size_t i) { return (i / 2) % 4; };  // {0,1,8,9}, {2,3,10,11}, ...
  for (size_t i = 0; i < n; ++i) {
    unsigned link = 0;
    const int per_pair = island(i) % 2 == 0 ? 6 : 2;
    for (size_t j = 0; j < n; ++j) {
      if (j == i || island(j) != island(i)) continue;
      for (int l = 0; l < per_pair; ++l) {
        inv.driver.gpus[i].nvlinks.push_back({link++, true, inv.driver.gpus[j].pci_bus_id});
      }
    }
  }
  inv.driver.topology.assign(n * n, 0);
  for (size_t a = 0; a < n; ++a) {
    for (size_t b = 0; b < n; ++b) {
      int level = NVML_TOPOLOGY_SYSTEM;
      if (a == b)
        level = NVML_TOPOLOGY_INTERNAL;
      else if (a / 4 == b / 4)
        level = NVML_TOPOLOGY_SINGLE;
      else if (a / 8 == b / 8)
        level = NVML_TOPOLOGY_NODE;
      inv.driver.topology[a * n + b] = level;
    }
  }
  return inv;
}

// --- link matrix ---------------------------------------------------------------------------

TEST(LinkMatrixTest, DgxH200PairsScoreTheirEighteenNvSwitchLinksPlusPcieAndNuma) {
  const node::NodeInventory& inv = ProbeSimulated("dgx-h200");
  ASSERT_EQ(inv.driver.gpus.size(), 8u);
  ASSERT_EQ(inv.driver.topology.size(), 64u);
  LinkMatrix m = BuildLinkMatrix(inv);
  ASSERT_EQ(m.size(), 8u);
  EXPECT_EQ(m.uuids[0], inv.driver.gpus[0].uuid);
  EXPECT_EQ(m.Score(0, 0), 0);
  // 5 + 4 + 4 + 5 links into the four shared NVSwitch chips, NODE (same CPU) and same NUMA node.
  EXPECT_EQ(m.Score(0, 1), 18 * kScorePerNvLink + kScoreNode + kScoreSameNuma);
  EXPECT_EQ(m.Score(5, 7), 18 * kScorePerNvLink + kScoreNode + kScoreSameNuma);
  EXPECT_EQ(m.Score(3, 4), 18 * kScorePerNvLink + kScoreSystem);
  EXPECT_EQ(m.Score(4, 3), m.Score(3, 4));
}

TEST(LinkMatrixTest, PcieL40sPairsBehindOneSwitchOutscoreEveryOtherPair) {
  const node::NodeInventory& inv = ProbeSimulated("pcie-l40s-4");
  LinkMatrix m = BuildLinkMatrix(inv);
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m.Score(0, 1), kScoreSingle + kScoreSameNuma);
  EXPECT_EQ(m.Score(2, 3), kScoreSingle + kScoreSameNuma);
  EXPECT_EQ(m.Score(0, 2), kScoreSystem);
  EXPECT_EQ(m.Score(1, 3), kScoreSystem);
}

TEST(LinkMatrixTest, DirectNvLinksCountOneHundredPerLinkAndOnlyWithinAnIsland) {
  const node::NodeInventory& inv = ProbeSimulated("two-islands", TwoIslandProfile());
  ASSERT_EQ(inv.driver.gpus.size(), 8u);
  ASSERT_EQ(inv.driver.gpus[0].nvlinks.size(), 12u);
  LinkMatrix m = BuildLinkMatrix(inv);
  EXPECT_EQ(m.Score(0, 1), 4 * kScorePerNvLink + kScoreNode + kScoreSameNuma);
  EXPECT_EQ(m.Score(0, 4), 4 * kScorePerNvLink + kScoreSystem);  // island across the sockets
  EXPECT_EQ(m.Score(0, 2), kScoreNode + kScoreSameNuma);         // same socket, other island
  EXPECT_EQ(m.Score(0, 6), kScoreSystem);
}

TEST(LinkMatrixTest, HgxNvSwitchLinksWithTheUnknownRemoteBusIdCountAsOneSharedFabric) {
  // What NVML reports on a real HGX H200 (2 GPUs of one passed through, checked with
  // `nvidia-smi nvlink -R`): the NVSwitch chips are not on the host's PCI bus, every one of the
  // 18 links of each GPU has the remote bus ID FFFFFFFF:FF:FF.0, and `nvidia-smi topo -m` says
  // NV18.
  node::NodeInventory inv;
  for (unsigned i = 0; i < 2; ++i) {
    gpu::GpuInfo g;
    g.index = i;
    g.uuid = absl::StrCat("GPU-hgx-", i);
    g.pci_bus_id = i == 0 ? "0000:00:06.0" : "0000:00:07.0";
    for (unsigned l = 0; l < 18; ++l) g.nvlinks.push_back({l, true, "ffffffff:ff:ff.0"});
    inv.driver.gpus.push_back(g);
  }
  LinkMatrix m = BuildLinkMatrix(inv);
  EXPECT_EQ(m.Score(0, 1), 18 * kScorePerNvLink);
}

TEST(LinkMatrixTest, WithoutTopologyLevelsOrNumaOnlyNvLinksScore) {
  node::NodeInventory inv = SixteenGpuInventory();
  inv.driver.topology.clear();
  inv.hardware.gpus.clear();
  LinkMatrix m = BuildLinkMatrix(inv);
  EXPECT_EQ(m.Score(0, 1), 6 * kScorePerNvLink);
  EXPECT_EQ(m.Score(2, 3), 2 * kScorePerNvLink);
  EXPECT_EQ(m.Score(0, 2), 0);
}

TEST(LinkMatrixTest, InactiveLinksAndLinksToGpusNvmlCouldNotOpenAreNotCounted) {
  node::NodeInventory inv = SixteenGpuInventory();
  inv.driver.gpus[0].nvlinks[0].active = false;  // one of the 6 links to GPU 1, seen from 0
  inv.driver.gpus[1].nvlinks[0].active = false;  // and the same from GPU 1
  // GPU 9 is lost: NVML does not list it, but sysfs still does.
  inv.driver.gpus.erase(inv.driver.gpus.begin() + 9);
  inv.driver.topology.clear();
  LinkMatrix m = BuildLinkMatrix(inv);
  ASSERT_EQ(m.size(), 15u);
  EXPECT_EQ(m.Score(0, 1), 5 * kScorePerNvLink + kScoreSameNuma);
  EXPECT_EQ(m.Score(0, 8), 6 * kScorePerNvLink);  // the links to GPU 9 are not switch links
}

TEST(LinkMatrixTest, FindReadsUuidsAndIndices) {
  node::NodeInventory inv = SixteenGpuInventory();
  LinkMatrix m = BuildLinkMatrix(inv);
  EXPECT_EQ(m.Find("GPU-sixteen-7"), 7u);
  EXPECT_EQ(m.Find("12"), 12u);
  EXPECT_EQ(m.Find("16"), std::nullopt);
  EXPECT_EQ(m.Find("GPU-other"), std::nullopt);
  EXPECT_EQ(m.Find("-1"), std::nullopt);
  EXPECT_EQ(m.Find(""), std::nullopt);
}

// --- full GPUs on simulated nodes ----------------------------------------------------------

TEST(PreferredGpusTest, DgxH200FourGpusComeFromOneNumaNode) {
  const node::NodeInventory& inv = ProbeSimulated("dgx-h200");
  LinkMatrix m = BuildLinkMatrix(inv);
  auto got = PreferredGpus(m, AllUuids(inv), {}, 4);
  ASSERT_OK(got) << got.status();
  EXPECT_THAT(*got, ElementsAre(inv.driver.gpus[0].uuid, inv.driver.gpus[1].uuid,
                                inv.driver.gpus[2].uuid, inv.driver.gpus[3].uuid));
  // With one GPU of socket 1 required, the rest of socket 1.
  got = PreferredGpus(m, AllUuids(inv), Uuids(inv, {6}), 4);
  ASSERT_OK(got) << got.status();
  EXPECT_THAT(Positions(m, *got), ElementsAre(4, 5, 6, 7));
  EXPECT_EQ((*got)[0], inv.driver.gpus[6].uuid);  // must-include IDs first
}

TEST(PreferredGpusTest, DgxH200AnswerDoesNotDependOnTheOrderOfAvailable) {
  const node::NodeInventory& inv = ProbeSimulated("dgx-h200");
  LinkMatrix m = BuildLinkMatrix(inv);
  std::vector<std::string> ids = AllUuids(inv);
  std::reverse(ids.begin(), ids.end());
  for (int size = 1; size <= 8; ++size) {
    auto forward = PreferredGpus(m, AllUuids(inv), {}, size);
    auto backward = PreferredGpus(m, ids, {}, size);
    ASSERT_TRUE(forward.ok() && backward.ok());
    EXPECT_EQ(*forward, *backward) << "size " << size;
  }
}

TEST(PreferredGpusTest, DgxH200WithIndexIdsAnswersIndexIds) {
  const node::NodeInventory& inv = ProbeSimulated("dgx-h200");
  LinkMatrix m = BuildLinkMatrix(inv);
  // Four GPUs: all of socket 1, where four are free.
  auto got = PreferredGpus(m, {"2", "3", "4", "5", "6", "7"}, {}, 4);
  ASSERT_OK(got) << got.status();
  EXPECT_THAT(*got, ElementsAre("4", "5", "6", "7"));
  // Two GPUs: a same-socket pair, the one that leaves three GPUs of socket 0 together.
  got = PreferredGpus(m, {"0", "1", "2", "4", "5"}, {}, 2);
  ASSERT_OK(got) << got.status();
  EXPECT_THAT(*got, ElementsAre("4", "5"));
}

TEST(PreferredGpusTest, PcieL40sTwoGpusAreASwitchPair) {
  const node::NodeInventory& inv = ProbeSimulated("pcie-l40s-4");
  LinkMatrix m = BuildLinkMatrix(inv);
  auto got = PreferredGpus(m, AllUuids(inv), {}, 2);
  ASSERT_OK(got) << got.status();
  EXPECT_EQ(*got, Uuids(inv, {0, 1}));
  got = PreferredGpus(m, AllUuids(inv), Uuids(inv, {3}), 2);
  ASSERT_OK(got) << got.status();
  EXPECT_EQ(*got, Uuids(inv, {3, 2}));
  got = PreferredGpus(m, AllUuids(inv), Uuids(inv, {1}), 2);
  ASSERT_OK(got) << got.status();
  EXPECT_EQ(*got, Uuids(inv, {1, 0}));
}

TEST(PreferredGpusTest, PcieL40sOneGpuIsTakenWhereItBreaksNoSwitchPair) {
  const node::NodeInventory& inv = ProbeSimulated("pcie-l40s-4");
  LinkMatrix m = BuildLinkMatrix(inv);
  // GPU 3 is in use: GPU 2 is alone behind its switch; taking it keeps the pair 0-1 whole.
  auto got = PreferredGpus(m, Uuids(inv, {0, 1, 2}), {}, 1);
  ASSERT_OK(got) << got.status();
  EXPECT_EQ(*got, Uuids(inv, {2}));
  got = PreferredGpus(m, Uuids(inv, {3, 2, 1}), {}, 2);
  ASSERT_OK(got) << got.status();
  EXPECT_EQ(*got, Uuids(inv, {2, 3}));
}

TEST(PreferredGpusTest, TwoIslandsFourGpusAreOneIslandNotOneSocket) {
  const node::NodeInventory& inv = ProbeSimulated("two-islands", TwoIslandProfile());
  LinkMatrix m = BuildLinkMatrix(inv);
  auto got = PreferredGpus(m, AllUuids(inv), {}, 4);
  ASSERT_OK(got) << got.status();
  EXPECT_THAT(Positions(m, *got), ElementsAre(0, 1, 4, 5));
  // Island A has a GPU in use: the whole of island B.
  got = PreferredGpus(m, Uuids(inv, {1, 2, 3, 4, 5, 6, 7}), {}, 4);
  ASSERT_OK(got) << got.status();
  EXPECT_THAT(Positions(m, *got), ElementsAre(2, 3, 6, 7));
}

TEST(PreferredGpusTest, TwoIslandsMustIncludeInIslandBGetsItsPartnerInIslandB) {
  const node::NodeInventory& inv = ProbeSimulated("two-islands", TwoIslandProfile());
  LinkMatrix m = BuildLinkMatrix(inv);
  for (int b : {2, 3, 6, 7}) {
    auto got = PreferredGpus(m, AllUuids(inv), Uuids(inv, {b}), 2);
    ASSERT_OK(got) << got.status();
    ASSERT_EQ(got->size(), 2u);
    EXPECT_EQ((*got)[0], inv.driver.gpus[b].uuid);
    const size_t partner = *m.Find((*got)[1]);
    EXPECT_EQ(kIsland[partner], 1) << "must-include " << b << " got partner " << partner;
    EXPECT_EQ(partner / 4, static_cast<size_t>(b) / 4) << "same socket preferred";
  }
}

TEST(PreferredGpusTest, TwoIslandsOneGpuIsTakenFromTheBrokenIsland) {
  const node::NodeInventory& inv = ProbeSimulated("two-islands", TwoIslandProfile());
  LinkMatrix m = BuildLinkMatrix(inv);
  // GPU 7 is in use: island B is the broken one.
  auto got = PreferredGpus(m, Uuids(inv, {0, 1, 2, 3, 4, 5, 6}), {}, 1);
  ASSERT_OK(got) << got.status();
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ(kIsland[*m.Find((*got)[0])], 1);
  // GPU 0 is in use: island A is.
  got = PreferredGpus(m, Uuids(inv, {1, 2, 3, 4, 5, 6, 7}), {}, 1);
  ASSERT_OK(got) << got.status();
  EXPECT_EQ(kIsland[*m.Find((*got)[0])], 0);
}

// --- errors and edge cases -----------------------------------------------------------------

TEST(PreferredGpusTest, ImpossibleRequestsAreInvalidArgumentsThatSayWhy) {
  LinkMatrix m = BuildLinkMatrix(SixteenGpuInventory());
  auto got = PreferredGpus(m, {"0", "1"}, {}, 3);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(got.status().message(),
              HasSubstr("allocation size 3 exceeds the 2 available devices"));
  got = PreferredGpus(m, {"0", "1"}, {"5"}, 1);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(got.status().message(),
              HasSubstr("must-include device 5 is not among the 2 available"));
  got = PreferredGpus(m, {"0", "1", "2"}, {"0", "1"}, 1);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(got.status().message(),
              HasSubstr("allocation size 1 is smaller than the 2 must-include devices"));
  got = PreferredGpus(m, {"0"}, {}, -1);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(got.status().message(), HasSubstr("negative"));
}

TEST(PreferredGpusTest, EdgeSizesAndDuplicateIds) {
  LinkMatrix m = BuildLinkMatrix(SixteenGpuInventory());
  auto got = PreferredGpus(m, {"3", "1", "2"}, {}, 0);
  ASSERT_OK(got);
  EXPECT_THAT(*got, ::testing::IsEmpty());
  got = PreferredGpus(m, {"3", "1", "2"}, {"2"}, 1);
  ASSERT_OK(got);
  EXPECT_THAT(*got, ElementsAre("2"));
  got = PreferredGpus(m, {"3", "1", "2", "3"}, {"2", "2"}, 3);  // everything there is
  ASSERT_OK(got) << got.status();
  EXPECT_THAT(*got, ElementsAre("2", "1", "3"));
  got = PreferredGpus(m, {"0", "0", "1"}, {}, 2);  // two different IDs
  ASSERT_OK(got) << got.status();
  EXPECT_THAT(*got, ElementsAre("0", "1"));
}

TEST(PreferredGpusTest, UnknownIdsScoreZeroButCanStillBeHandedOut) {
  LinkMatrix m = BuildLinkMatrix(SixteenGpuInventory());
  auto got = PreferredGpus(m, {"GPU-gone", "0", "2", "1"}, {}, 2);
  ASSERT_OK(got) << got.status();
  EXPECT_THAT(*got, ElementsAre("0", "1"));
  got = PreferredGpus(m, {"GPU-gone", "0", "2", "1"}, {}, 4);
  ASSERT_OK(got) << got.status();
  EXPECT_THAT(*got, ElementsAre("0", "1", "2", "GPU-gone"));
  got = PreferredGpus(m, {"GPU-gone", "0", "2", "1"}, {"GPU-gone"}, 2);
  ASSERT_OK(got) << got.status();
  EXPECT_EQ((*got)[0], "GPU-gone");
}

// --- exactness against brute force --------------------------------------------------------

TEST(PreferredGpusTest, SixteenGpuNodeMatchesBruteForceOnEverySizeAndSomeRestrictions) {
  LinkMatrix m = BuildLinkMatrix(SixteenGpuInventory());
  std::vector<size_t> all(16);
  for (size_t i = 0; i < 16; ++i) all[i] = i;
  struct Case {
    std::vector<size_t> available;
    std::vector<size_t> must;
  };
  std::vector<Case> cases = {{all, {}},
                             {all, {3}},
                             {all, {2, 9}},
                             {all, {0, 15}},
                             {{1, 2, 3, 5, 6, 8, 10, 11, 12, 13, 15}, {}},
                             {{0, 2, 4, 6, 8, 9, 10, 11, 13, 14}, {13}}};
  for (const Case& c : cases) {
    for (size_t size = std::max<size_t>(c.must.size(), 1); size <= c.available.size(); ++size) {
      auto got = PreferredGpus(m, IdsOf(m, c.available), IdsOf(m, c.must), static_cast<int>(size));
      ASSERT_OK(got) << got.status();
      EXPECT_EQ(Positions(m, *got), BruteForce(m, c.available, c.must, size))
          << "size " << size << " must " << c.must.size() << " available " << c.available.size();
    }
  }
  // The islands themselves: 4 from everything is the 6-link island with GPUs 0 and 1.
  auto got = PreferredGpus(m, IdsOf(m, all), {}, 4);
  ASSERT_OK(got);
  EXPECT_THAT(Positions(m, *got), ElementsAre(0, 1, 8, 9));
}

TEST(PreferredGpusTest, RandomMatricesWithManyTiesMatchBruteForce) {
  std::mt19937 rng(20240611);
  const int values[] = {0, 10, 20, 50, 100, 100, 200, 1800};
  for (int trial = 0; trial < 120; ++trial) {
    const size_t n = trial < 100 ? 4 + trial % 7 : 16;  // 4..10 GPUs, then 16
    LinkMatrix m = HandMadeMatrix(n, [&](size_t, size_t) { return values[rng() % 8]; });
    std::vector<size_t> available;
    for (size_t i = 0; i < n; ++i) {
      if (rng() % 5 != 0) available.push_back(i);
    }
    if (available.empty()) continue;
    std::vector<size_t> must;
    for (size_t a : available) {
      if (rng() % 6 == 0) must.push_back(a);
    }
    for (size_t size = std::max<size_t>(must.size(), 1); size <= available.size(); ++size) {
      auto got = PreferredGpus(m, IdsOf(m, available), IdsOf(m, must), static_cast<int>(size));
      ASSERT_OK(got) << got.status();
      ASSERT_EQ(Positions(m, *got), BruteForce(m, available, must, size))
          << "trial " << trial << " n " << n << " size " << size;
    }
  }
}

TEST(PreferredGpusTest, SixteenGpusAnswerEverySizeFast) {
  LinkMatrix m = BuildLinkMatrix(SixteenGpuInventory());
  std::vector<std::string> all = IdsOf(m, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15});
  double worst_ms = 0;
  for (int size = 1; size <= 16; ++size) {
    const auto start = std::chrono::steady_clock::now();
    auto got = PreferredGpus(m, all, {}, size);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    ASSERT_OK(got);
    EXPECT_EQ(got->size(), static_cast<size_t>(size));
    worst_ms = std::max(worst_ms, ms);
  }
  // The benchmark (benchmarks/preferred_alloc_bench.cc) measures it properly; this only catches a
  // search that stopped pruning (a Debug build on a busy machine stays far below this).
  EXPECT_LT(worst_ms, 50.0);
}

TEST(PreferredGpusTest, BeyondSixteenGpusTheBudgetedSearchStillFindsAnIsland) {
  // 40 GPUs in five islands of 8 (positions i with i % 5 equal), all other pairs far apart.
  LinkMatrix m = HandMadeMatrix(40, [](size_t a, size_t b) { return a % 5 == b % 5 ? 1000 : 10; });
  std::vector<size_t> all(40);
  for (size_t i = 0; i < 40; ++i) all[i] = i;
  auto got = PreferredGpus(m, IdsOf(m, all), IdsOf(m, {13}), 8);
  ASSERT_OK(got) << got.status();
  EXPECT_THAT(Positions(m, *got), ElementsAre(3, 8, 13, 18, 23, 28, 33, 38));
  got = PreferredGpus(m, IdsOf(m, all), {}, 16);
  ASSERT_OK(got) << got.status();
  EXPECT_EQ(SetScore(m, Positions(m, *got)), 2 * 28 * 1000 + 64 * 10);  // two whole islands
}

// --- shared devices -----------------------------------------------------------------------

TEST(PreferredSharedTest, DistributedTakesTheLeastUsedGpuThenSpreadsThisRequest) {
  const std::vector<std::string> available = {"GPU-a::1", "GPU-a::2", "GPU-a::3", "GPU-b::0",
                                              "GPU-b::1", "GPU-b::2", "GPU-b::3"};
  // a has 1 replica in use, b none: b first; then a and b both have 1 in use, and b already
  // gave one to this request, so a.
  auto got = PreferredShared(available, {}, 2, {{"GPU-a", 1}}, SharedPolicy::kDistributed);
  ASSERT_OK(got) << got.status();
  EXPECT_THAT(*got, ElementsAre("GPU-b::0", "GPU-a::1"));
  // a has 2 in use: b twice before a is as little used.
  got = PreferredShared(available, {}, 3, {{"GPU-a", 2}}, SharedPolicy::kDistributed);
  ASSERT_OK(got) << got.status();
  EXPECT_THAT(*got, ElementsAre("GPU-b::0", "GPU-b::1", "GPU-a::1"));
}

TEST(PreferredSharedTest, PackedFillsTheMostUsedGpu) {
  const std::vector<std::string> available = {"GPU-a::1", "GPU-a::2", "GPU-a::3", "GPU-b::0",
                                              "GPU-b::1", "GPU-b::2", "GPU-b::3"};
  auto got = PreferredShared(available, {}, 4, {{"GPU-a", 1}}, SharedPolicy::kPacked);
  ASSERT_OK(got) << got.status();
  EXPECT_THAT(*got, ElementsAre("GPU-a::1", "GPU-a::2", "GPU-a::3", "GPU-b::0"));
  // Nothing in use before: the GPU this request already uses.
  got = PreferredShared(available, {"GPU-b::2"}, 3, {}, SharedPolicy::kPacked);
  ASSERT_OK(got) << got.status();
  EXPECT_THAT(*got, ElementsAre("GPU-b::2", "GPU-b::0", "GPU-b::1"));
  // a and b both have 2 in use, one of b's in this request: a, as NVIDIA breaks the tie.
  got = PreferredShared(available, {"GPU-b::2"}, 2, {{"GPU-a", 2}, {"GPU-b", 1}},
                        SharedPolicy::kPacked);
  ASSERT_OK(got) << got.status();
  EXPECT_THAT(*got, ElementsAre("GPU-b::2", "GPU-a::1"));
}

TEST(PreferredSharedTest, SpreadTakesGpusThisRequestHasNotTouchedFirst) {
  const std::vector<std::string> available = {"GPU-a::1", "GPU-a::2", "GPU-b::1", "GPU-b::2",
                                              "GPU-c::0"};
  // c has 3 in use, a and b 1: the third ID is c's under spread (this request has not touched
  // it yet), a's under distributed.
  auto got = PreferredShared(available, {}, 2, {{"GPU-a", 1}, {"GPU-b", 1}, {"GPU-c", 3}},
                             SharedPolicy::kSpread);
  ASSERT_OK(got) << got.status();
  EXPECT_THAT(*got, ElementsAre("GPU-a::1", "GPU-b::1"));
  got = PreferredShared(available, {}, 3, {{"GPU-a", 1}, {"GPU-b", 1}, {"GPU-c", 3}},
                        SharedPolicy::kSpread);
  ASSERT_OK(got) << got.status();
  EXPECT_THAT(*got, ElementsAre("GPU-a::1", "GPU-b::1", "GPU-c::0"));
  got = PreferredShared(available, {}, 3, {{"GPU-a", 1}, {"GPU-b", 1}, {"GPU-c", 3}},
                        SharedPolicy::kDistributed);
  ASSERT_OK(got) << got.status();
  EXPECT_THAT(*got, ElementsAre("GPU-a::1", "GPU-b::1", "GPU-a::2"));
}

TEST(PreferredSharedTest, MustIncludeIdsCountAsPicksOfThisRequest) {
  const std::vector<std::string> available = {"GPU-a::0", "GPU-a::1", "GPU-b::0", "GPU-b::1"};
  auto got = PreferredShared(available, {"GPU-a::1"}, 2, {}, SharedPolicy::kDistributed);
  ASSERT_OK(got) << got.status();
  EXPECT_THAT(*got, ElementsAre("GPU-a::1", "GPU-b::0"));
}

TEST(PreferredSharedTest, AnswerDoesNotDependOnOrderAndReplicaNumbersSortNumerically) {
  std::vector<std::string> available = {"GPU-b::10", "GPU-a::10", "GPU-b::2", "GPU-a::9"};
  auto got = PreferredShared(available, {}, 2, {}, SharedPolicy::kDistributed);
  ASSERT_OK(got) << got.status();
  EXPECT_THAT(*got, ElementsAre("GPU-a::9", "GPU-b::2"));
  std::reverse(available.begin(), available.end());
  auto again = PreferredShared(available, {}, 2, {}, SharedPolicy::kDistributed);
  ASSERT_OK(again);
  EXPECT_EQ(*again, *got);
}

TEST(PreferredSharedTest, MigDevicesAreGroupedByTheirParentGpu) {
  const std::map<std::string, std::string> parent = {
      {"MIG-1", "GPU-a"}, {"MIG-2", "GPU-a"}, {"MIG-3", "GPU-b"}, {"MIG-4", "GPU-b"}};
  const std::vector<std::string> all = {"MIG-1", "MIG-2", "MIG-3", "MIG-4"};
  const std::vector<std::string> available = {"MIG-2", "MIG-3", "MIG-4"};
  const std::map<std::string, int> used = CountAllocatedPerGpu(all, available, parent);
  EXPECT_EQ(used, (std::map<std::string, int>{{"GPU-a", 1}, {"GPU-b", 0}}));
  auto got = PreferredShared(available, {}, 1, used, SharedPolicy::kDistributed, parent);
  ASSERT_OK(got) << got.status();
  EXPECT_THAT(*got, ElementsAre("MIG-3"));
  got = PreferredShared(available, {}, 1, used, SharedPolicy::kPacked, parent);
  ASSERT_OK(got) << got.status();
  EXPECT_THAT(*got, ElementsAre("MIG-2"));
  // Time-sliced MIG devices: "<mig uuid>::<n>" belongs to the parent too.
  EXPECT_EQ(SharedGpuOf("MIG-3::4", parent), "GPU-b");
  EXPECT_EQ(SharedGpuOf("GPU-x::4"), "GPU-x");
  EXPECT_EQ(SharedGpuOf("GPU-x"), "GPU-x");
}

TEST(PreferredSharedTest, CountAllocatedPerGpuCountsReplicasNotAvailable) {
  const std::vector<std::string> all = {"GPU-a::0", "GPU-a::1", "GPU-a::2", "GPU-b::0", "GPU-b::1"};
  EXPECT_EQ(CountAllocatedPerGpu(all, {"GPU-a::2", "GPU-b::0", "GPU-b::1"}),
            (std::map<std::string, int>{{"GPU-a", 2}, {"GPU-b", 0}}));
}

TEST(PreferredSharedTest, ImpossibleRequestsAreInvalidArguments) {
  auto got = PreferredShared({"GPU-a::0"}, {}, 2, {}, SharedPolicy::kDistributed);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(got.status().message(), HasSubstr("exceeds the 1 available devices"));
  got = PreferredShared({"GPU-a::0"}, {"GPU-a::1"}, 1, {}, SharedPolicy::kPacked);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(got.status().message(), HasSubstr("must-include device GPU-a::1"));
  got = PreferredShared({"GPU-a::0", "GPU-a::1"}, {"GPU-a::0", "GPU-a::1"}, 1, {},
                        SharedPolicy::kPacked);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gpunode::devices
