#include "src/mig/plan.h"

#include <algorithm>
#include <functional>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace gpunode::mig {
namespace {

constexpr unsigned kMemorySlices = 8;
constexpr unsigned kComputeSlices = 7;

// What a GI of `gi_slices` compute slices offers (NVIDIA's CI profiles on A100/H100/H200).
bool CiOffered(unsigned gi_slices, unsigned ci_slices) {
  if (ci_slices == 0 || ci_slices > gi_slices) return false;
  if (ci_slices == 3) return gi_slices == 3 || gi_slices == 7;
  if (ci_slices == 7) return gi_slices == 7;
  return ci_slices == 1 || ci_slices == 2 || ci_slices == 4 || ci_slices == gi_slices;
}

// CIs of `ci_slices` that fit in one GI of `gi_slices`, at aligned starts.
unsigned CisPerGi(unsigned gi_slices, unsigned ci_slices) {
  unsigned n = 0;
  for (unsigned start = 0; start + ci_slices <= gi_slices; start += ci_slices) ++n;
  return n;
}

unsigned CiProfileForSlices(unsigned slices) {
  switch (slices) {
    case 1: return 0;  // NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE
    case 2: return 1;
    case 3: return 2;
    case 4: return 3;
    case 8: return 5;
    case 6: return 6;
    default: return 4;  // 7 slices
  }
}

// One GI with its CIs, wanted or present.
struct Unit {
  const GiProfile* profile = nullptr;
  std::vector<unsigned> ci_slices;  // sorted
  std::string name;                 // the MIG device name of its CIs (one name per unit)
  bool operator<(const Unit& o) const {
    if (profile->id != o.profile->id) return profile->id < o.profile->id;
    return ci_slices < o.ci_slices;
  }
};

const GiProfile* ProfileById(const GpuMigState& g, unsigned id) {
  for (const GiProfile& p : g.profiles) {
    if (p.id == id) return &p;
  }
  return nullptr;
}

std::string Offered(const GpuMigState& g) {
  std::vector<std::string> names;
  for (const GiProfile& p : g.profiles) names.push_back(p.name);
  return names.empty() ? "none known (MIG is off: the driver lists profiles once it is on)"
                       : absl::StrJoin(names, ", ");
}

std::string GpuLabel(const GpuMigState& g) { return absl::StrCat("GPU ", g.index, " (", g.name, ")"); }

// Wanted units of one entry on one GPU.
StatusOr<std::vector<Unit>> WantedUnits(const GpuMigState& g, const MigConfigEntry& e) {
  std::vector<Unit> out;
  for (const auto& [name, count] : e.mig_devices) {
    if (count == 0) continue;
    const std::string gi_name = name.GpuInstanceName();
    const GiProfile* p = nullptr;
    for (const GiProfile& gp : g.profiles) {
      if (gp.name == gi_name) p = &gp;
    }
    if (p == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(GpuLabel(g), " offers no MIG device ",
                                                     name.ToString(), "; it offers: ", Offered(g)));
    }
    if (!CiOffered(p->slices, name.compute_slices)) {
      return absl::InvalidArgumentError(absl::StrCat(GpuLabel(g), ": a ", gi_name,
                                                     " GPU instance has no compute instance of ",
                                                     name.compute_slices, " slices"));
    }
    const unsigned per_gi = name.compute_slices == p->slices ? 1 : CisPerGi(p->slices, name.compute_slices);
    for (unsigned left = count; left > 0;) {
      Unit u;
      u.profile = p;
      u.name = name.ToString();
      const unsigned n = std::min(left, per_gi);
      u.ci_slices.assign(n, name.compute_slices);
      out.push_back(std::move(u));
      left -= n;
    }
  }
  return out;
}

// Chooses placements for `todo` beside `occupied` (start, size) by depth-first search, largest
// first. Returns the starts in `todo`'s order, or nullopt when nothing fits.
std::optional<std::vector<unsigned>> Place(const std::vector<const GiProfile*>& todo,
                                           std::vector<std::pair<unsigned, unsigned>> occupied) {
  std::vector<size_t> order(todo.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return todo[a]->placement_size > todo[b]->placement_size;
  });
  std::vector<unsigned> starts(todo.size(), 0);
  std::function<bool(size_t)> dfs = [&](size_t k) {
    if (k == order.size()) return true;
    const GiProfile* p = todo[order[k]];
    for (unsigned s : p->starts) {
      bool free = s + p->placement_size <= kMemorySlices;
      for (auto [os, osz] : occupied) free = free && !(s < os + osz && os < s + p->placement_size);
      if (!free) continue;
      occupied.emplace_back(s, p->placement_size);
      starts[order[k]] = s;
      if (dfs(k + 1)) return true;
      occupied.pop_back();
    }
    return false;
  };
  if (!dfs(0)) return std::nullopt;
  return starts;
}

std::string SliceSummary(const std::vector<Unit>& units) {
  unsigned compute = 0, memory = 0;
  for (const Unit& u : units) {
    compute += u.profile->slices;
    memory += u.profile->placement_size;
  }
  return absl::StrCat(compute, " of ", kComputeSlices, " compute slices and ", memory, " of ",
                      kMemorySlices, " memory slices");
}

}  // namespace

std::vector<std::pair<std::string, unsigned>> DeviceCounts(const GpuMigState& gpu) {
  std::map<std::string, unsigned> counts;
  for (const GiState& gi : gpu.gis) {
    for (const CiState& ci : gi.cis) ++counts[ci.name];
  }
  return {counts.begin(), counts.end()};
}

std::string StepKindName(StepKind kind) {
  switch (kind) {
    case StepKind::kDestroyCi: return "destroy-ci";
    case StepKind::kDestroyGi: return "destroy-gi";
    case StepKind::kDisableMig: return "disable-mig";
    case StepKind::kEnableMig: return "enable-mig";
    case StepKind::kCreateGi: return "create-gi";
    case StepKind::kCreateCi: return "create-ci";
  }
  return "unknown";
}

std::string Step::Describe() const {
  std::string gpu_text = absl::StrCat("GPU ", gpu, ": ");
  switch (kind) {
    case StepKind::kDestroyCi:
      return absl::StrCat(gpu_text, "destroy compute instance ", ci_id, " (", name, ") of GPU instance ", gi_id);
    case StepKind::kDestroyGi:
      return absl::StrCat(gpu_text, "destroy GPU instance ", gi_id, " (", name, ")");
    case StepKind::kDisableMig:
      return absl::StrCat(gpu_text, "disable MIG mode");
    case StepKind::kEnableMig:
      return absl::StrCat(gpu_text, "enable MIG mode");
    case StepKind::kCreateGi:
      return absl::StrCat(gpu_text, "create GPU instance ", name,
                          start ? absl::StrCat(" at memory slices ", *start, "-", *start + size - 1)
                                : std::string(" (placement chosen by the driver)"));
    case StepKind::kCreateCi:
      return absl::StrCat(gpu_text, "create compute instance ", name, " in ",
                          gi_id >= 0 ? absl::StrCat("GPU instance ", gi_id)
                                     : absl::StrCat("the new GPU instance #", new_gi));
  }
  return gpu_text;
}

StatusOr<MigPlan> PlanMigConfig(const std::vector<GpuMigState>& gpus, const MigConfigFile& file,
                                const std::string& name) {
  const MigConfig* config = file.Find(name);
  if (config == nullptr) {
    return absl::NotFoundError(absl::StrCat("MIG config \"", name, "\" is not in ", file.origin,
                                            "; it has: ", absl::StrJoin(file.Names(), ", ")));
  }
  MigPlan plan;
  plan.config = name;
  // Entries that name GPU indexes the node lacks.
  for (size_t i = 0; i < config->entries.size(); ++i) {
    for (unsigned d : config->entries[i].devices) {
      if (d >= gpus.size()) {
        return absl::InvalidArgumentError(absl::StrCat(
            file.origin, ":", config->entries[i].line, ": config ", name, " entry ", i,
            " names GPU ", d, " but the node has ", gpus.size(), " GPU(s)"));
      }
    }
  }
  int next_gi = 0;
  for (const GpuMigState& g : gpus) {
    GpuPlan gp;
    gp.gpu = g.index;
    for (size_t i = 0; i < config->entries.size(); ++i) {
      if (!config->entries[i].Selects(g.index, g.pci_id, g.name)) continue;
      if (gp.selected) {
        return absl::InvalidArgumentError(absl::StrCat(
            "config ", name, ": ", GpuLabel(g), " is selected by entries ", gp.entry, " and ", i,
            " (lines ", config->entries[gp.entry].line, " and ", config->entries[i].line,
            "); one entry per GPU"));
      }
      gp.selected = true;
      gp.entry = static_cast<int>(i);
    }
    if (!gp.selected) {
      plan.gpus.push_back(gp);
      continue;
    }
    const MigConfigEntry& e = config->entries[gp.entry];
    gp.want_mig = e.mig_enabled;
    for (const auto& [n, c] : e.mig_devices) {
      if (c > 0) gp.wanted.emplace_back(n.ToString(), c);
    }
    std::vector<Step> steps;
    auto destroy = [&](const GiState& gi) {
      for (const CiState& ci : gi.cis) {
        Step s;
        s.kind = StepKind::kDestroyCi;
        s.gpu = g.index;
        s.gi_id = static_cast<int>(gi.id);
        s.ci_id = static_cast<int>(ci.id);
        s.name = ci.name;
        steps.push_back(s);
      }
      Step s;
      s.kind = StepKind::kDestroyGi;
      s.gpu = g.index;
      s.gi_id = static_cast<int>(gi.id);
      s.name = gi.name;
      steps.push_back(s);
    };
    if (!e.mig_enabled) {
      for (const GiState& gi : g.gis) destroy(gi);
      if (g.mig_capable && (g.mig_current || g.mig_pending)) {
        Step s;
        s.kind = StepKind::kDisableMig;
        s.gpu = g.index;
        steps.push_back(s);
      }
    } else {
      if (!g.mig_capable) {
        return absl::FailedPreconditionError(absl::StrCat(
            "config ", name, ": ", GpuLabel(g), " is not MIG-capable (entry ", gp.entry, ", line ", e.line, ")"));
      }
      GPUNODE_ASSIGN_OR_RETURN(std::vector<Unit> wanted, WantedUnits(g, e));
      // Limits that do not depend on placement.
      std::map<unsigned, unsigned> per_profile;
      unsigned compute = 0, memory = 0;
      for (const Unit& u : wanted) {
        ++per_profile[u.profile->id];
        compute += u.profile->slices;
        memory += u.profile->placement_size;
      }
      for (const auto& [id, n] : per_profile) {
        const GiProfile* p = ProfileById(g, id);
        if (p->instance_count > 0 && n > p->instance_count) {
          return absl::InvalidArgumentError(absl::StrCat(
              "config ", name, " does not fit ", GpuLabel(g), ": ", n, " GPU instances of ", p->name,
              " wanted, the GPU holds at most ", p->instance_count));
        }
      }
      if (compute > kComputeSlices || memory > kMemorySlices) {
        return absl::InvalidArgumentError(absl::StrCat("config ", name, " does not fit ", GpuLabel(g),
                                                       ": it needs ", SliceSummary(wanted)));
      }
      // Present units; keep those that are wanted.
      std::vector<Unit> present;
      std::vector<bool> present_known(g.gis.size(), true);
      for (size_t i = 0; i < g.gis.size(); ++i) {
        const GiState& gi = g.gis[i];
        Unit u;
        u.profile = ProfileById(g, gi.profile_id);
        if (u.profile == nullptr) present_known[i] = false;
        for (const CiState& ci : gi.cis) u.ci_slices.push_back(ci.slices);
        std::sort(u.ci_slices.begin(), u.ci_slices.end());
        present.push_back(u);
      }
      for (Unit& u : wanted) std::sort(u.ci_slices.begin(), u.ci_slices.end());
      auto attempt = [&](bool keep) -> std::optional<std::pair<std::vector<bool>, std::vector<std::pair<size_t, std::optional<unsigned>>>>> {
        std::vector<bool> kept(g.gis.size(), false);
        std::vector<bool> matched(wanted.size(), false);
        if (keep) {
          for (size_t i = 0; i < present.size(); ++i) {
            if (!present_known[i] || present[i].ci_slices.empty()) continue;
            for (size_t j = 0; j < wanted.size(); ++j) {
              if (matched[j] || wanted[j].profile != present[i].profile ||
                  wanted[j].ci_slices != present[i].ci_slices)
                continue;
              matched[j] = kept[i] = true;
              break;
            }
          }
        }
        std::vector<std::pair<unsigned, unsigned>> occupied;
        for (size_t i = 0; i < g.gis.size(); ++i) {
          if (kept[i]) occupied.emplace_back(g.gis[i].start, g.gis[i].size);
        }
        std::vector<size_t> todo_index;
        std::vector<const GiProfile*> todo;
        bool starts_known = true;
        for (size_t j = 0; j < wanted.size(); ++j) {
          if (matched[j]) continue;
          todo_index.push_back(j);
          todo.push_back(wanted[j].profile);
          starts_known = starts_known && !wanted[j].profile->starts.empty();
        }
        std::vector<std::pair<size_t, std::optional<unsigned>>> creates;
        if (!starts_known) {
          if (keep && !occupied.empty()) return std::nullopt;  // cannot check the fit: start over
          for (size_t j : todo_index) creates.emplace_back(j, std::nullopt);
          return std::make_pair(kept, creates);
        }
        auto placed = Place(todo, occupied);
        if (!placed) return std::nullopt;
        for (size_t k = 0; k < todo_index.size(); ++k) creates.emplace_back(todo_index[k], (*placed)[k]);
        return std::make_pair(kept, creates);
      };
      auto result = attempt(true);
      if (!result) result = attempt(false);
      if (!result) {
        return absl::InvalidArgumentError(absl::StrCat(
            "config ", name, " does not fit ", GpuLabel(g), ": no placement of ",
            absl::StrJoin(gp.wanted, ", ", [](std::string* out, const auto& p) {
              absl::StrAppend(out, p.second, "x ", p.first);
            }),
            " on the 8 memory slices (", SliceSummary(wanted), ")"));
      }
      const auto& [kept, creates] = *result;
      for (size_t i = 0; i < g.gis.size(); ++i) {
        if (!kept[i]) destroy(g.gis[i]);
      }
      if (!g.mig_current || !g.mig_pending) {
        Step s;
        s.kind = StepKind::kEnableMig;
        s.gpu = g.index;
        steps.push_back(s);
      }
      // Create in a stable order: by placement.
      std::vector<std::pair<size_t, std::optional<unsigned>>> ordered = creates;
      std::stable_sort(ordered.begin(), ordered.end(), [](const auto& a, const auto& b) {
        return a.second.value_or(0) < b.second.value_or(0);
      });
      for (const auto& [j, start] : ordered) {
        const Unit& u = wanted[j];
        Step s;
        s.kind = StepKind::kCreateGi;
        s.gpu = g.index;
        s.new_gi = next_gi;
        s.name = u.profile->name;
        s.gi_profile = u.profile->profile;
        s.gi_profile_id = u.profile->id;
        s.start = start;
        s.size = u.profile->placement_size;
        steps.push_back(s);
        for (unsigned c : u.ci_slices) {
          Step ci;
          ci.kind = StepKind::kCreateCi;
          ci.gpu = g.index;
          ci.new_gi = next_gi;
          ci.name = c == u.profile->slices ? u.profile->name : absl::StrCat(c, "c.", u.profile->name);
          ci.ci_profile = CiProfileForSlices(c);
          steps.push_back(ci);
        }
        ++next_gi;
      }
    }
    if (!steps.empty()) {
      gp.changes = true;
      if (!g.process_error.empty()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "refusing to change MIG on ", GpuLabel(g), ": its compute processes could not be read (",
            g.process_error, ")"));
      }
      if (!g.process_pids.empty()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "refusing to change MIG on ", GpuLabel(g), ": compute processes are running on it (pid ",
            absl::StrJoin(g.process_pids, ", "), "); stop them first"));
      }
      plan.steps.insert(plan.steps.end(), steps.begin(), steps.end());
    }
    plan.gpus.push_back(gp);
  }
  return plan;
}

}  // namespace gpunode::mig
