#include "src/devices/topology.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <set>
#include <tuple>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "src/gpu/nvml_abi.h"

namespace gpunode::devices {
namespace {

int PcieScore(int level) {
  switch (level) {
    case NVML_TOPOLOGY_INTERNAL:
      return kScoreInternal;
    case NVML_TOPOLOGY_SINGLE:
      return kScoreSingle;
    case NVML_TOPOLOGY_MULTIPLE:
      return kScoreMultiple;
    case NVML_TOPOLOGY_HOSTBRIDGE:
      return kScoreHostBridge;
    case NVML_TOPOLOGY_NODE:
      return kScoreNode;
    case NVML_TOPOLOGY_SYSTEM:
      return kScoreSystem;
    default:
      return 0;
  }
}

std::string Lower(std::string_view s) {
  return absl::AsciiStrToLower(absl::string_view(s.data(), s.size()));
}

// The request, checked, with duplicate IDs dropped (first occurrence kept).
struct Request {
  std::vector<std::string> available;
  std::vector<std::string> must;
  std::set<std::string> must_set;
  size_t size = 0;
};

StatusOr<Request> CheckRequest(const std::vector<std::string>& available,
                               const std::vector<std::string>& must_include, int size) {
  Request req;
  if (size < 0) {
    return absl::InvalidArgumentError(absl::StrCat("allocation size ", size, " is negative"));
  }
  std::set<std::string> seen;
  for (const std::string& id : available) {
    if (seen.insert(id).second) req.available.push_back(id);
  }
  for (const std::string& id : must_include) {
    if (!req.must_set.insert(id).second) continue;
    if (seen.count(id) == 0) {
      return absl::InvalidArgumentError(absl::StrCat("must-include device ", id,
                                                     " is not among the ", req.available.size(),
                                                     " available devices"));
    }
    req.must.push_back(id);
  }
  if (static_cast<size_t>(size) < req.must.size()) {
    return absl::InvalidArgumentError(absl::StrCat("allocation size ", size,
                                                   " is smaller than the ", req.must.size(),
                                                   " must-include devices"));
  }
  if (static_cast<size_t>(size) > req.available.size()) {
    return absl::InvalidArgumentError(absl::StrCat("allocation size ", size, " exceeds the ",
                                                   req.available.size(), " available devices"));
  }
  req.size = static_cast<size_t>(size);
  return req;
}

// Maximise f(S) = sum over pairs {i, j} of S of pair[i][j] + sum over i in S of linear[i], over the
// subsets S of {0..k-1} with |S| = r (pair >= 0, symmetric, 0 on the diagonal). Among equal values
// the lexicographically smallest S (items ascending) wins.
struct Problem {
  size_t k = 0;
  size_t r = 0;
  std::vector<int64_t> pair;    // k*k
  std::vector<int64_t> linear;  // k
  int64_t Pair(size_t i, size_t j) const { return pair[i * k + j]; }
};

int64_t ValueOf(const Problem& p, const std::vector<size_t>& s) {
  int64_t v = 0;
  for (size_t a = 0; a < s.size(); ++a) {
    v += p.linear[s[a]];
    for (size_t b = a + 1; b < s.size(); ++b) v += p.Pair(s[a], s[b]);
  }
  return v;
}

// Greedy (largest marginal gain, lowest item on ties), then best-improvement single swaps until
// none improves. The incumbent the exact search starts from, and its answer if it runs out of
// steps.
std::vector<size_t> GreedyWithSwaps(const Problem& p) {
  std::vector<int64_t> gain = p.linear;  // gain[y] = linear[y] + sum over s in S of pair[s][y]
  std::vector<bool> in(p.k, false);
  std::vector<size_t> s;
  auto add = [&](size_t x, int sign) {
    for (size_t y = 0; y < p.k; ++y) gain[y] += sign * p.Pair(x, y);
  };
  for (size_t step = 0; step < p.r; ++step) {
    size_t best = p.k;
    for (size_t y = 0; y < p.k; ++y) {
      if (!in[y] && (best == p.k || gain[y] > gain[best])) best = y;
    }
    in[best] = true;
    s.push_back(best);
    add(best, +1);
  }
  for (size_t round = 0; round < 4 * p.k; ++round) {
    int64_t best_delta = 0;
    size_t bi = 0, by = 0;
    for (size_t i = 0; i < s.size(); ++i) {
      for (size_t y = 0; y < p.k; ++y) {
        if (in[y]) continue;
        int64_t delta = gain[y] - p.Pair(s[i], y) - gain[s[i]];
        if (delta > best_delta) best_delta = delta, bi = i, by = y;
      }
    }
    if (best_delta <= 0) break;
    in[s[bi]] = false;
    add(s[bi], -1);
    in[by] = true;
    add(by, +1);
    s[bi] = by;
  }
  std::sort(s.begin(), s.end());
  return s;
}

// Depth-first over "take item pos / skip it" (taking first, so sets come in lexicographic order),
// pruned by an upper bound: with t items still to take, each remaining y can add at most
// gain[y] + (the t-1 largest pair[y][*]) / 2, and the whole completion at most the t largest of
// those. A subtree is cut when its bound is below the best value, or equal to a value the search
// itself found (that set comes first in lexicographic order).
class BranchAndBound {
 public:
  // Internal nodes visited: 2^k bounds it, so k <= 16 always finishes within this budget.
  static constexpr int64_t kNodeBudget = int64_t{1} << 17;
  // Its bound tables take k^3 integers; past this many candidates only the greedy pick is used.
  static constexpr size_t kMaxItems = 64;

  BranchAndBound(const Problem& p, std::vector<size_t> seed)
      : p_(p), best_(std::move(seed)), best_value_(ValueOf(p, best_)) {
    // top_[(pos * k + y) * k + q]: the sum of the q largest pair[y][j] over j >= pos, j != y,
    // for y >= pos. Built from the last position down, inserting one weight at a time.
    const size_t k = p.k;
    top_.assign(k * k * k, 0);
    std::vector<std::vector<int64_t>> sorted(k);  // descending, for the current pos
    for (size_t pos = k; pos-- > 0;) {
      for (size_t y = 0; y < k; ++y) {
        if (y != pos) {
          std::vector<int64_t>& row = sorted[y];
          row.insert(std::upper_bound(row.begin(), row.end(), p.Pair(y, pos), std::greater<>()),
                     p.Pair(y, pos));
        }
        if (y < pos) continue;
        int64_t* prefix = &top_[(pos * k + y) * k];
        for (size_t q = 0; q < sorted[y].size(); ++q) prefix[q + 1] = prefix[q] + sorted[y][q];
      }
    }
    gain_.assign(p.r + 1, p.linear);
  }

  std::vector<size_t> Run() {
    Visit(0, 0);
    return best_;
  }

 private:
  void Visit(size_t pos, int64_t value) {
    const size_t c = current_.size();
    if (c == p_.r) {
      if (value > best_value_ || (value == best_value_ && !best_from_search_)) {
        best_ = current_;
        best_value_ = value;
        best_from_search_ = true;
      }
      return;
    }
    const size_t t = p_.r - c;
    if (p_.k - pos < t) return;
    if (++nodes_ > kNodeBudget) {
      out_of_budget_ = true;
      return;
    }
    const std::vector<int64_t>& g = gain_[c];
    scratch_.clear();
    const int64_t* top = &top_[pos * p_.k * p_.k];
    for (size_t y = pos; y < p_.k; ++y) scratch_.push_back(2 * g[y] + top[y * p_.k + t - 1]);
    std::nth_element(scratch_.begin(), scratch_.begin() + (t - 1), scratch_.end(),
                     std::greater<>());
    int64_t bound2 = 2 * value;
    for (size_t q = 0; q < t; ++q) bound2 += scratch_[q];
    if (bound2 < 2 * best_value_ || (bound2 == 2 * best_value_ && best_from_search_)) return;

    std::vector<int64_t>& next = gain_[c + 1];
    for (size_t y = pos + 1; y < p_.k; ++y) next[y] = g[y] + p_.Pair(pos, y);
    current_.push_back(pos);
    Visit(pos + 1, value + g[pos]);
    current_.pop_back();
    if (out_of_budget_) return;
    Visit(pos + 1, value);
  }

  const Problem& p_;
  std::vector<size_t> best_;
  int64_t best_value_;
  bool best_from_search_ = false;
  bool out_of_budget_ = false;
  int64_t nodes_ = 0;
  std::vector<int64_t> top_;                // k*k*k, see the constructor
  std::vector<std::vector<int64_t>> gain_;  // [depth][y]: linear[y] + pairs with current_
  std::vector<size_t> current_;
  std::vector<int64_t> scratch_;
};

// "<uuid>::<n>" -> n, for ordering the replicas of one GPU.
std::tuple<bool, uint64_t, std::string> ReplicaOrder(const std::string& id) {
  uint64_t n = 0;
  size_t p = id.rfind("::");
  if (p != std::string::npos && absl::SimpleAtoi(absl::string_view(id).substr(p + 2), &n)) {
    return {false, n, id};
  }
  return {true, 0, id};
}

}  // namespace

std::optional<size_t> LinkMatrix::Find(std::string_view id) const {
  for (size_t i = 0; i < uuids.size(); ++i) {
    if (uuids[i] == id) return i;
  }
  unsigned index = 0;
  if (!id.empty() && absl::ascii_isdigit(static_cast<unsigned char>(id[0])) &&
      absl::SimpleAtoi(absl::string_view(id.data(), id.size()), &index)) {
    for (size_t i = 0; i < indices.size(); ++i) {
      if (indices[i] == index) return i;
    }
  }
  return std::nullopt;
}

LinkMatrix BuildLinkMatrix(const node::NodeInventory& inv) {
  const std::vector<gpu::GpuInfo>& gpus = inv.driver.gpus;
  const size_t n = gpus.size();
  LinkMatrix m;
  m.score.assign(n * n, 0);
  std::map<std::string, size_t> position;  // bus ID -> GPU position
  for (size_t i = 0; i < n; ++i) {
    m.uuids.push_back(gpus[i].uuid);
    m.indices.push_back(gpus[i].index);
    position[Lower(gpus[i].pci_bus_id)] = i;
  }
  std::set<std::string> gpu_buses;  // every GPU function, also those NVML could not open
  std::map<std::string, int> numa_of_bus;
  for (const node::PciDevice& d : inv.hardware.gpus) {
    gpu_buses.insert(Lower(d.bus_id));
    if (d.numa_node) numa_of_bus[Lower(d.bus_id)] = *d.numa_node;
  }
  std::vector<std::optional<int>> numa(n);
  std::vector<std::map<size_t, int>> direct(n);       // peer GPU -> links
  std::vector<std::map<std::string, int>> fabric(n);  // NVSwitch bus ID -> links
  for (size_t i = 0; i < n; ++i) {
    const std::string bus = Lower(gpus[i].pci_bus_id);
    gpu_buses.insert(bus);
    if (auto it = numa_of_bus.find(bus); it != numa_of_bus.end()) numa[i] = it->second;
  }
  for (size_t i = 0; i < n; ++i) {
    for (const gpu::NvLinkState& l : gpus[i].nvlinks) {
      if (!l.active || l.remote_bus_id.empty()) continue;
      const std::string remote = Lower(l.remote_bus_id);
      if (auto it = position.find(remote); it != position.end()) {
        if (it->second != i) ++direct[i][it->second];
      } else if (gpu_buses.count(remote) == 0) {
        ++fabric[i][remote];
      }  // else: a GPU that NVML could not open; it is not in the matrix
    }
  }
  const bool have_levels = inv.driver.topology.size() == n * n;
  for (size_t a = 0; a < n; ++a) {
    for (size_t b = a + 1; b < n; ++b) {
      int s = have_levels ? PcieScore(inv.driver.topology[a * n + b]) : 0;
      if (numa[a] && numa[b] && *numa[a] == *numa[b]) s += kScoreSameNuma;
      int links = 0;
      if (auto it = direct[a].find(b); it != direct[a].end()) links = it->second;
      if (auto it = direct[b].find(a); it != direct[b].end()) links = std::max(links, it->second);
      for (const auto& [sw, count] : fabric[a]) {
        if (auto it = fabric[b].find(sw); it != fabric[b].end())
          links += std::min(count, it->second);
      }
      s += links * kScorePerNvLink;
      m.score[a * n + b] = m.score[b * n + a] = s;
    }
  }
  return m;
}

StatusOr<std::vector<std::string>> PreferredGpus(const LinkMatrix& m,
                                                 const std::vector<std::string>& available,
                                                 const std::vector<std::string>& must_include,
                                                 int size) {
  GPUNODE_ASSIGN_OR_RETURN(Request req, CheckRequest(available, must_include, size));
  std::vector<std::string> out = req.must;
  if (req.size == req.must.size()) return out;

  // The available IDs: must-include ones first, then the candidates in GPU order (unknown IDs
  // last, by name), which is the order ties are broken in.
  struct Item {
    std::string id;
    std::optional<size_t> gpu;
  };
  std::vector<Item> items;
  for (const std::string& id : req.must) items.push_back({id, m.Find(id)});
  const size_t first_candidate = items.size();
  for (const std::string& id : req.available) {
    if (req.must_set.count(id) == 0) items.push_back({id, m.Find(id)});
  }
  std::sort(items.begin() + static_cast<std::ptrdiff_t>(first_candidate), items.end(),
            [](const Item& x, const Item& y) {
              if (x.gpu.has_value() != y.gpu.has_value()) return x.gpu.has_value();
              if (x.gpu && *x.gpu != *y.gpu) return *x.gpu < *y.gpu;
              return x.id < y.id;
            });
  const size_t candidates = items.size() - first_candidate;
  if (req.size == items.size()) {
    for (size_t i = first_candidate; i < items.size(); ++i) out.push_back(items[i].id);
    return out;
  }

  const size_t na = items.size();
  std::vector<int64_t> w(na * na, 0);
  int64_t total = 0;
  for (size_t a = 0; a < na; ++a) {
    for (size_t b = a + 1; b < na; ++b) {
      if (items[a].gpu && items[b].gpu && *items[a].gpu != *items[b].gpu) {
        w[a * na + b] = w[b * na + a] = m.Score(*items[a].gpu, *items[b].gpu);
        total += w[a * na + b];
      }
    }
  }
  // One integer objective for "score first, then least linked to what is left": for the chosen
  // set T (must-include IDs and picks) among the available A,
  //   K * score(T) - cross(T, A \ T)  with  K = total + 1 > any cross,
  // and cross(T, A \ T) = sum of degrees over T - 2 * score(T), so it is
  //   (K + 2) * score(T) - sum over T of degree,
  // a pair term plus a per-item term over the picks (the must-include part is a constant).
  const int64_t f = total + 3;
  Problem p;
  p.k = candidates;
  p.r = req.size - req.must.size();
  p.pair.assign(p.k * p.k, 0);
  p.linear.assign(p.k, 0);
  for (size_t i = 0; i < p.k; ++i) {
    const size_t a = first_candidate + i;
    int64_t degree = 0, to_must = 0;
    for (size_t b = 0; b < na; ++b) degree += w[a * na + b];
    for (size_t b = 0; b < first_candidate; ++b) to_must += w[a * na + b];
    p.linear[i] = f * to_must - degree;
    for (size_t j = 0; j < p.k; ++j) p.pair[i * p.k + j] = f * w[a * na + first_candidate + j];
  }
  std::vector<size_t> chosen = GreedyWithSwaps(p);
  if (p.k <= BranchAndBound::kMaxItems) chosen = BranchAndBound(p, std::move(chosen)).Run();
  for (size_t i : chosen) out.push_back(items[first_candidate + i].id);
  return out;
}

std::string SharedGpuOf(std::string_view id, const std::map<std::string, std::string>& gpu_of) {
  std::string device(id.substr(0, id.find("::")));
  if (auto it = gpu_of.find(device); it != gpu_of.end()) return it->second;
  return device;
}

std::map<std::string, int> CountAllocatedPerGpu(const std::vector<std::string>& all,
                                                const std::vector<std::string>& available,
                                                const std::map<std::string, std::string>& gpu_of) {
  const std::set<std::string> free(available.begin(), available.end());
  std::map<std::string, int> count;
  for (const std::string& id : std::set<std::string>(all.begin(), all.end())) {
    int& c = count[SharedGpuOf(id, gpu_of)];
    if (free.count(id) == 0) ++c;
  }
  return count;
}

StatusOr<std::vector<std::string>> PreferredShared(
    const std::vector<std::string>& available, const std::vector<std::string>& must_include,
    int size, const std::map<std::string, int>& allocated_per_gpu, SharedPolicy policy,
    const std::map<std::string, std::string>& gpu_of) {
  GPUNODE_ASSIGN_OR_RETURN(Request req, CheckRequest(available, must_include, size));
  std::vector<std::string> out = req.must;
  std::map<std::string, int> picks;  // GPU -> IDs of it in this answer
  for (const std::string& id : req.must) ++picks[SharedGpuOf(id, gpu_of)];

  struct Queue {
    std::vector<std::string> ids;  // ascending replica number
    size_t next = 0;
  };
  std::map<std::string, Queue> by_gpu;  // ordered by GPU key: the last tie-break
  for (const std::string& id : req.available) {
    if (req.must_set.count(id) == 0) by_gpu[SharedGpuOf(id, gpu_of)].ids.push_back(id);
  }
  for (auto& [gpu, q] : by_gpu) {
    std::sort(q.ids.begin(), q.ids.end(), [](const std::string& x, const std::string& y) {
      return ReplicaOrder(x) < ReplicaOrder(y);
    });
  }
  auto allocated = [&](const std::string& gpu) {
    auto it = allocated_per_gpu.find(gpu);
    return it == allocated_per_gpu.end() ? 0 : it->second;
  };
  while (out.size() < req.size) {
    Queue* best = nullptr;
    std::string best_gpu;
    int best_used = 0, best_picks = 0;
    for (auto& [gpu, q] : by_gpu) {
      if (q.next == q.ids.size()) continue;
      const int mine = picks[gpu];
      const int used = allocated(gpu) + mine;
      bool better = best == nullptr;
      if (!better) {
        switch (policy) {
          case SharedPolicy::kDistributed:
            better = used < best_used || (used == best_used && mine < best_picks);
            break;
          case SharedPolicy::kPacked:
            better = used > best_used || (used == best_used && mine < best_picks);
            break;
          case SharedPolicy::kSpread:
            better = mine < best_picks || (mine == best_picks && used < best_used);
            break;
        }
      }
      if (better) best = &q, best_gpu = gpu, best_used = used, best_picks = mine;
    }
    out.push_back(best->ids[best->next++]);  // CheckRequest guarantees enough IDs
    ++picks[best_gpu];
  }
  return out;
}

}  // namespace gpunode::devices
