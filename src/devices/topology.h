// Topology-aware preferred allocation for the device plugin's GetPreferredAllocation (pure).
//
// Full GPUs: `BuildLinkMatrix` turns the inventory's NVLink states and pairwise
// nvmlDeviceGetTopologyCommonAncestor levels into one symmetric pair score, once at start (and
// again when the devices change: never per call, unlike NVIDIA's plugin, which re-reads NVML on
// every call, shared/reference/device-plugin.md §1.7). `PreferredGpus` then picks, from the IDs
// the kubelet offers and including the must-include IDs, the set with the highest sum of pair
// scores.
//
// Shared devices (time-sliced replicas "<uuid>::<n>", MIG devices): `PreferredShared` is the
// greedy `distributed` / `packed` policy of NVIDIA's plugin.
//
// Errors are InvalidArgument with a message naming the problem; the gRPC server returns them to
// the kubelet as they are.
#ifndef GPUNODE_DEVICES_TOPOLOGY_H_
#define GPUNODE_DEVICES_TOPOLOGY_H_

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "src/base/status.h"
#include "src/node/inventory.h"

namespace gpunode::devices {

// Pair scores. PCIe as NVIDIA's go-gpuallocator (by nvmlGpuTopologyLevel_t):
constexpr int kScoreInternal = 60;    // same board
constexpr int kScoreSingle = 50;      // one PCIe switch
constexpr int kScoreMultiple = 40;    // several PCIe switches
constexpr int kScoreHostBridge = 30;  // one host bridge
constexpr int kScoreNode = 20;        // same CPU
constexpr int kScoreSystem = 10;      // across CPUs (SMP interconnect)
constexpr int kScoreSameNuma = 10;    // bonus when both GPUs sit on the same known NUMA node
// NVLink, per link: a direct GPU<->GPU link counts once (NVIDIA: 100 per link); through NVSwitch
// chips, a pair counts, per switch both reach, the smaller of their two link counts into it.
constexpr int kScorePerNvLink = 100;

struct LinkMatrix {
  std::vector<std::string> uuids;  // inventory order (driver.gpus)
  std::vector<unsigned> indices;   // NVML index of each
  std::vector<int> score;          // n*n, symmetric, 0 on the diagonal

  size_t size() const { return uuids.size(); }
  int Score(size_t a, size_t b) const { return score[a * uuids.size() + b]; }
  // Position of a device ID: its UUID, or its NVML index as decimal text ("3"). Empty if unknown.
  std::optional<size_t> Find(std::string_view id) const;
};

// The pair score of every two GPUs of `inv.driver.gpus`: the PCIe score of their common-ancestor
// level (0 when `driver.topology` was not read), plus kScoreSameNuma when `hardware.gpus` puts
// both on one NUMA node, plus the NVLink score. An active link whose remote bus ID is a GPU of the
// node is a direct link; one whose remote end is any other device is a link into an NVSwitch.
LinkMatrix BuildLinkMatrix(const node::NodeInventory& inv);

// The `size` IDs out of `available` (GPU UUIDs or indices, as `LinkMatrix::Find` reads them)
// that contain every `must_include` ID and maximise the sum of the matrix's pair scores.
// Among sets of equal score it takes the one least linked to the available GPUs it leaves
// behind (so the next request still finds well-linked GPUs), then the lowest GPU positions.
// Exact (branch and bound over the combinations) up to 16 available GPUs; beyond that the search
// stops after a fixed number of steps (and is skipped past 64) and returns the best set found,
// never worse than a greedy pick improved by swaps. IDs the matrix does not know score 0 with every
// GPU. Returns the must-include IDs first, then the others in GPU order. Duplicate IDs count once.
StatusOr<std::vector<std::string>> PreferredGpus(const LinkMatrix& m,
                                                 const std::vector<std::string>& available,
                                                 const std::vector<std::string>& must_include,
                                                 int size);

// NVIDIA's sharedDevicesAllocationPolicy (internal/rm/allocate.go). "In use" counts the replicas
// allocated before this request and those already in this answer.
enum class SharedPolicy {
  kDistributed,  // GPUs with the fewest replicas in use first (NVIDIA's default)
  kPacked,       // GPUs with the most replicas in use first
  kSpread,       // GPUs with the fewest IDs in this answer first, then fewest in use (NVIDIA
                 // after v0.20.0)
};

// The GPU a shared device ID belongs to: the ID without its "::<n>" replica suffix, mapped
// through `gpu_of` when listed there. NVIDIA groups by the ID without the suffix only (a MIG
// device is its own group); mapping MIG device IDs to their parent GPU's UUID in `gpu_of`
// spreads or packs MIG devices over the physical GPUs instead.
std::string SharedGpuOf(std::string_view id, const std::map<std::string, std::string>& gpu_of = {});

// How many IDs of each GPU (`SharedGpuOf`) are in `all` but not in `available`: the replicas in
// use.
std::map<std::string, int> CountAllocatedPerGpu(
    const std::vector<std::string>& all, const std::vector<std::string>& available,
    const std::map<std::string, std::string>& gpu_of = {});

// Greedy, one ID at a time: the GPU (with an available ID left) whose replicas in use
// (`allocated_per_gpu` plus the IDs of it already in this answer, must-include ones included) are
// fewest (kDistributed) or most (kPacked); ties go to the GPU with fewer IDs in this answer (as
// NVIDIA's comparators), then to the lowest GPU key; from that GPU the lowest replica number.
// The answer does not depend on the order of `available`. Returns the must-include IDs first,
// then the picks in pick order. Same errors as PreferredGpus.
StatusOr<std::vector<std::string>> PreferredShared(
    const std::vector<std::string>& available, const std::vector<std::string>& must_include,
    int size, const std::map<std::string, int>& allocated_per_gpu, SharedPolicy policy,
    const std::map<std::string, std::string>& gpu_of = {});

}  // namespace gpunode::devices

#endif  // GPUNODE_DEVICES_TOPOLOGY_H_
