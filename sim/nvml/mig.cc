// MIG configuration calls of the simulated NVML (the model is described in sim/nvml/mig.h):
//   * nvmlDeviceSetMigMode: with no compute process on the GPU the new mode is current at once
//     (what Hopper does, and Ampere on bare metal where NVML resets the idle GPU itself), activation
//     status NVML_SUCCESS; with processes it is only pending, activation status NVML_ERROR_IN_USE.
//     Disabling while GPU instances exist is NVML_ERROR_IN_USE.
//   * GI/CI calls on a GPU whose current MIG mode is off: NVML_ERROR_NOT_SUPPORTED; on a GPU that
//     is not MIG-capable: NVML_ERROR_NOT_SUPPORTED; on MIG device handles: INVALID_ARGUMENT.
//   * profile enums out of range, unknown profile ids, placements not in the profile's list, stale
//     handles: NVML_ERROR_INVALID_ARGUMENT; a profile the product lacks: NVML_ERROR_NOT_SUPPORTED;
//     no room: NVML_ERROR_INSUFFICIENT_RESOURCES; destroying a GI with CIs, or a GI/CI with a
//     process in it: NVML_ERROR_IN_USE.
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "sim/nvml/mig.h"
#include "sim/nvml/sim_state.h"
#include "sim/support/profile.h"
#include "sim/support/str.h"
#include "src/base/host_fs.h"
#include "src/base/json.h"
#include "src/gpu/nvml_abi.h"

#define GPUNODE_SIM_DECLARE(ret, name, params) \
  extern "C" __attribute__((visibility("default"))) ret name params;
GPUNODE_NVML_FUNCTIONS(GPUNODE_SIM_DECLARE)
#undef GPUNODE_SIM_DECLARE

namespace gpunode::sim {
namespace {

constexpr char kStateMarker[] = "# gpunode-simnvml-mig-state: ";
constexpr unsigned kMemSlices = 8;

// ---- products ----------------------------------------------------------------------------------

struct Row {
  unsigned profile, id;
  const char* suffix;  // "" or "+me"
  unsigned slices, mem_slices;
  uint64_t memory_mib;
  unsigned sms, ce, dec, enc, jpg, ofa, count;
};

std::vector<unsigned> StartsFor(unsigned profile, unsigned mem_slices) {
  switch (mem_slices) {
    case 8:
      return {0};
    case 4:
      return profile == NVML_GPU_INSTANCE_PROFILE_4_SLICE ? std::vector<unsigned>{0}
                                                          : std::vector<unsigned>{0, 4};
    case 2:
      return profile == NVML_GPU_INSTANCE_PROFILE_2_SLICE ? std::vector<unsigned>{0, 2, 4}
                                                          : std::vector<unsigned>{0, 2, 4, 6};
    default:
      return {0, 1, 2, 3, 4, 5, 6};
  }
}

// mig-parted's name of a memory size: the fraction of the GPU's memory rounded up to eighths,
// times the GPU's memory in whole GB (rounded up).
std::string MemoryName(uint64_t memory_mib, uint64_t total_mib) {
  double frac = static_cast<double>(memory_mib) / static_cast<double>(total_mib);
  frac = std::ceil(frac * 8.0) / 8.0;
  double total_gb = static_cast<double>((total_mib + 1023) / 1024);
  return str::Cat(static_cast<uint64_t>(std::round(frac * total_gb)), "gb");
}

std::vector<GiProfileSpec> FromRows(const std::vector<Row>& rows, uint64_t total_mib) {
  std::vector<GiProfileSpec> out;
  for (const Row& r : rows) {
    GiProfileSpec s;
    s.profile = r.profile;
    s.id = r.id;
    s.name = str::Cat(r.slices, "g.", MemoryName(r.memory_mib, total_mib), r.suffix);
    s.slices = r.slices;
    s.mem_slices = r.mem_slices;
    s.memory_mib = r.memory_mib;
    s.multiprocessors = r.sms;
    s.copy_engines = r.ce;
    s.decoders = r.dec;
    s.encoders = r.enc;
    s.jpegs = r.jpg;
    s.ofas = r.ofa;
    s.instance_count = r.count;
    s.starts = StartsFor(r.profile, r.mem_slices);
    out.push_back(std::move(s));
  }
  return out;
}

// Hopper: H100 SXM/PCIe 80 GB and H200 141 GB share the slice layout and SM counts; memory per
// profile from `nvidia-smi mig -lgip` (GiB x 1024; H200: 1g.18gb 16.00, 1g.35gb/2g.35gb 32.50,
// 3g.71gb/4g.71gb 66.50 GiB).
std::vector<Row> HopperRows(uint64_t m1, uint64_t m2, uint64_t m4, uint64_t m8) {
  return {
      {NVML_GPU_INSTANCE_PROFILE_1_SLICE, 19, "", 1, 1, m1, 16, 1, 1, 0, 1, 0, 7},
      {NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1, 20, "+me", 1, 1, m1, 16, 1, 1, 0, 1, 1, 1},
      {NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2, 15, "", 1, 2, m2, 16, 1, 1, 0, 1, 0, 4},
      {NVML_GPU_INSTANCE_PROFILE_2_SLICE, 14, "", 2, 2, m2, 32, 2, 2, 0, 2, 0, 3},
      {NVML_GPU_INSTANCE_PROFILE_3_SLICE, 9, "", 3, 4, m4, 60, 3, 3, 0, 3, 0, 2},
      {NVML_GPU_INSTANCE_PROFILE_4_SLICE, 5, "", 4, 4, m4, 64, 4, 4, 0, 4, 0, 1},
      {NVML_GPU_INSTANCE_PROFILE_7_SLICE, 0, "", 7, 8, m8, 132, 8, 7, 0, 7, 1, 1},
  };
}

// Ampere A100: 14 SMs per slice, media engines only in +me and 7g.
std::vector<Row> AmpereRows(uint64_t m1, uint64_t m2, uint64_t m4, uint64_t m8) {
  return {
      {NVML_GPU_INSTANCE_PROFILE_1_SLICE, 19, "", 1, 1, m1, 14, 1, 0, 0, 0, 0, 7},
      {NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1, 20, "+me", 1, 1, m1, 14, 1, 1, 0, 1, 1, 1},
      {NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2, 15, "", 1, 2, m2, 14, 1, 1, 0, 0, 0, 4},
      {NVML_GPU_INSTANCE_PROFILE_2_SLICE, 14, "", 2, 2, m2, 28, 2, 1, 0, 0, 0, 3},
      {NVML_GPU_INSTANCE_PROFILE_3_SLICE, 9, "", 3, 4, m4, 42, 3, 2, 0, 0, 0, 2},
      {NVML_GPU_INSTANCE_PROFILE_4_SLICE, 5, "", 4, 4, m4, 56, 4, 2, 0, 0, 0, 1},
      {NVML_GPU_INSTANCE_PROFILE_7_SLICE, 0, "", 7, 8, m8, 98, 7, 5, 0, 1, 1, 1},
  };
}

}  // namespace

std::vector<GiProfileSpec> GiProfilesFor(const Gpu& g) {
  if (g.mig.max_devices == 0) return {};
  const uint64_t total = g.memory_total_mib;
  switch (g.device_id) {
    case 0x2335:  // H200 SXM 141GB
    case 0x233b:  // H200 NVL
      return FromRows(HopperRows(16384, 33280, 68096, 139264), total);
    case 0x2330:  // H100 SXM5 80GB
    case 0x2331:  // H100 PCIe 80GB
      return FromRows(HopperRows(9984, 20096, 40320, 80384), total);
    case 0x20b2:  // A100 SXM4 80GB
    case 0x20b5:  // A100 PCIe 80GB
      return FromRows(AmpereRows(9728, 19968, 40192, 80896), total);
    case 0x20b0:  // A100 SXM4 40GB
    case 0x20b1:  // A100 PCIe 40GB
      return FromRows(AmpereRows(4864, 9856, 19968, 40192), total);
    default:
      break;
  }
  // Another MIG-capable GPU: eighths of its memory (less 2 %), SMs split over 7 slices.
  const uint64_t eighth = total * 98 / 100 / 8;
  const unsigned per_slice = std::max(1u, g.multiprocessors / 7);
  std::vector<Row> rows = HopperRows(eighth, 2 * eighth, 4 * eighth, 8 * eighth);
  for (Row& r : rows) r.sms = r.slices == 7 ? g.multiprocessors : r.slices * per_slice;
  return FromRows(rows, total);
}

namespace {

// ---- layout helpers ----------------------------------------------------------------------------

unsigned GiIdFor(unsigned start, unsigned size) {
  switch (size) {
    case 8:
      return 0;
    case 4:
      return 1 + start / 4;
    case 2:
      return 3 + start / 2;
    default:
      return 7 + start;
  }
}

const GiProfileSpec* SpecByEnum(const std::vector<GiProfileSpec>& specs, unsigned profile) {
  for (const auto& s : specs) {
    if (s.profile == profile) return &s;
  }
  return nullptr;
}

const GiProfileSpec* SpecById(const std::vector<GiProfileSpec>& specs, unsigned id) {
  for (const auto& s : specs) {
    if (s.id == id) return &s;
  }
  return nullptr;
}

bool Overlaps(const MigRuntime& rt, unsigned start, unsigned size) {
  for (const SimGi& gi : rt.gis) {
    if (start < gi.start + gi.size && gi.start < start + size) return true;
  }
  return false;
}

// Whether one more GI of `spec` may exist beside the others (the single +me instance).
bool UnderInstanceLimit(const MigRuntime& rt, const GiProfileSpec& spec) {
  unsigned same = 0;
  for (const SimGi& gi : rt.gis) same += gi.profile == spec.profile ? 1 : 0;
  return same < spec.instance_count;
}

// The placement the driver picks for a GI of `spec` created without one: the last free start
// (small instances fill from the top, keeping low slices free for large ones). -1: none.
int AutoStart(const MigRuntime& rt, const GiProfileSpec& spec) {
  if (!UnderInstanceLimit(rt, spec)) return -1;
  for (auto it = spec.starts.rbegin(); it != spec.starts.rend(); ++it) {
    if (!Overlaps(rt, *it, spec.mem_slices)) return static_cast<int>(*it);
  }
  return -1;
}

unsigned CiSlices(unsigned profile) {
  switch (profile) {
    case NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE:
      return 1;
    case NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE:
      return 2;
    case NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE:
      return 3;
    case NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE:
      return 4;
    case NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE:
      return 7;
    default:
      return 0;  // 8, 6 and 1_REV1 exist on no simulated product
  }
}

unsigned CiProfileForSlices(unsigned slices) {
  switch (slices) {
    case 1:
      return NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE;
    case 2:
      return NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE;
    case 3:
      return NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE;
    case 4:
      return NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE;
    default:
      return NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE;
  }
}

// Whether a GI of `gi_slices` compute slices offers CIs of `ci_slices`.
bool CiOffered(unsigned gi_slices, unsigned ci_slices) {
  if (ci_slices == 0 || ci_slices > gi_slices) return false;
  if (ci_slices == 3) return gi_slices == 3 || gi_slices == 7;
  if (ci_slices == 7) return gi_slices == 7;
  return true;
}

unsigned CiMultiprocessors(const GiProfileSpec& gi, unsigned ci_slices) {
  if (ci_slices >= gi.slices) return gi.multiprocessors;
  const unsigned per_slice = gi.slices == 7 ? gi.multiprocessors / 8 : gi.multiprocessors / gi.slices;
  return per_slice * ci_slices;
}

std::string CiName(const GiProfileSpec& gi, unsigned ci_slices) {
  return ci_slices >= gi.slices ? gi.name : str::Cat(ci_slices, "c.", gi.name);
}

// First free run of `slices` compute slices in `gi` (aligned to its size), or -1.
int CiStart(const SimGi& gi, unsigned gi_slices, unsigned slices) {
  for (unsigned start = 0; start + slices <= gi_slices; start += slices) {
    bool free = true;
    for (const SimCi& ci : gi.cis) {
      if (start < ci.start + ci.slices && ci.start < start + slices) free = false;
    }
    if (free) return static_cast<int>(start);
  }
  return -1;
}

unsigned NextCiId(const SimGi& gi) {
  for (unsigned id = 0;; ++id) {
    bool used = false;
    for (const SimCi& ci : gi.cis) used = used || ci.id == id;
    if (!used) return id;
  }
}

std::string GeneratedMigUuid(std::string_view seed) {
  uint64_t a = 1469598103934665603ull, b = 1099511628211ull ^ 0x9e3779b97f4a7c15ull;
  for (char c : seed) {
    a = (a ^ static_cast<unsigned char>(c)) * 1099511628211ull;
    b = (b ^ static_cast<unsigned char>(c)) * 0x100000001b3ull + 7;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "MIG-%08x-%04x-%04x-%04x-%012llx",
                static_cast<unsigned>(a >> 32), static_cast<unsigned>((a >> 16) & 0xffff),
                static_cast<unsigned>(a & 0xffff), static_cast<unsigned>(b >> 48),
                static_cast<unsigned long long>(b & 0xffffffffffffull));
  return buf;
}

bool ProcessesOnGpu(const Gpu& g) { return !g.processes.empty(); }

bool ProcessesInGi(const Gpu& g, unsigned gi_id, const unsigned* ci_id = nullptr) {
  for (const auto& p : g.processes) {
    if (!p.gpu_instance_id || *p.gpu_instance_id != gi_id) continue;
    if (ci_id == nullptr || !p.compute_instance_id || *p.compute_instance_id == *ci_id) return true;
  }
  return false;
}

// ---- state line ----------------------------------------------------------------------------------

nlohmann::json ToJson(const std::vector<MigRuntime>& mig, const NodeProfile& p) {
  nlohmann::json gpus = nlohmann::json::array();
  for (size_t i = 0; i < mig.size() && i < p.gpus.size(); ++i) {
    const MigRuntime& rt = mig[i];
    nlohmann::json gis = nlohmann::json::array();
    for (const SimGi& gi : rt.gis) {
      nlohmann::json cis = nlohmann::json::array();
      for (const SimCi& ci : gi.cis) {
        cis.push_back({{"id", ci.id}, {"profile", ci.profile}, {"start", ci.start}, {"uuid", ci.uuid}});
      }
      gis.push_back({{"id", gi.id}, {"profile", gi.profile}, {"start", gi.start}, {"cis", cis}});
    }
    gpus.push_back({{"uuid", p.gpus[i].uuid}, {"current", rt.current}, {"pending", rt.pending},
                    {"gis", gis}});
  }
  return {{"gpus", gpus}};
}

// Reads the state JSON into `mig` (already seeded from the profile); entries for a GPU whose UUID
// differs, or that do not fit the product, are ignored (the seed stays).
void FromJson(const nlohmann::json& doc, const NodeProfile& p, std::vector<MigRuntime>* mig,
              uint64_t* serial) {
  if (!doc.is_object() || !doc.contains("gpus") || !doc["gpus"].is_array()) return;
  const auto& gpus = doc["gpus"];
  for (size_t i = 0; i < gpus.size() && i < p.gpus.size(); ++i) {
    const auto& e = gpus[i];
    if (!e.is_object() || e.value("uuid", std::string()) != p.gpus[i].uuid) continue;
    const auto specs = GiProfilesFor(p.gpus[i]);
    if (specs.empty()) continue;
    MigRuntime rt;
    rt.current = e.value("current", false);
    rt.pending = e.value("pending", rt.current);
    bool ok = true;
    if (e.contains("gis") && e["gis"].is_array()) {
      for (const auto& jg : e["gis"]) {
        if (!jg.is_object()) {
          ok = false;
          break;
        }
        const GiProfileSpec* spec = SpecByEnum(specs, jg.value("profile", 999u));
        const unsigned start = jg.value("start", 999u);
        if (spec == nullptr || std::find(spec->starts.begin(), spec->starts.end(), start) ==
                                   spec->starts.end() ||
            Overlaps(rt, start, spec->mem_slices)) {
          ok = false;
          break;
        }
        SimGi gi;
        gi.profile = spec->profile;
        gi.start = start;
        gi.size = spec->mem_slices;
        gi.id = GiIdFor(start, spec->mem_slices);
        gi.serial = ++*serial;
        if (jg.contains("cis") && jg["cis"].is_array()) {
          for (const auto& jc : jg["cis"]) {
            if (!jc.is_object()) continue;
            SimCi ci;
            ci.profile = jc.value("profile", 999u);
            ci.slices = CiSlices(ci.profile);
            if (!CiOffered(spec->slices, ci.slices)) continue;
            ci.id = jc.value("id", 0u);
            ci.start = jc.value("start", 0u);
            ci.uuid = jc.value("uuid", std::string());
            if (ci.uuid.rfind("MIG-", 0) != 0) ci.uuid = GeneratedMigUuid(str::Cat(p.gpus[i].uuid, "/", gi.id, "/", ci.id));
            ci.multiprocessors = CiMultiprocessors(*spec, ci.slices);
            ci.serial = ++*serial;
            gi.cis.push_back(ci);
          }
        }
        rt.gis.push_back(std::move(gi));
      }
    }
    if (!ok || (!rt.current && !rt.gis.empty())) continue;
    std::sort(rt.gis.begin(), rt.gis.end(), [](const SimGi& a, const SimGi& b) { return a.id < b.id; });
    (*mig)[i] = std::move(rt);
  }
}

// The GI/CI structure behind a profile's own `mig:` section.
MigRuntime SeedFromProfile(const Gpu& g, uint64_t* serial) {
  MigRuntime rt;
  rt.current = g.mig.enabled;
  rt.pending = g.mig.pending;
  const auto specs = GiProfilesFor(g);
  if (specs.empty()) return rt;
  // Group the MIG devices by GI id, in order.
  std::vector<unsigned> gi_ids;
  for (const MigDevice& d : g.mig.devices) {
    if (std::find(gi_ids.begin(), gi_ids.end(), d.gpu_instance_id) == gi_ids.end())
      gi_ids.push_back(d.gpu_instance_id);
  }
  for (unsigned gi_id : gi_ids) {
    const MigDevice* first = nullptr;
    for (const MigDevice& d : g.mig.devices) {
      if (d.gpu_instance_id == gi_id) {
        first = &d;
        break;
      }
    }
    // The GI profile: the one whose name the device's ends with ("1c.3g.40gb" -> "3g.40gb"),
    // else the first with the device's slice count.
    const GiProfileSpec* spec = nullptr;
    for (const auto& s : specs) {
      const std::string& n = first->profile;
      if (n == s.name || (n.size() > s.name.size() && n.compare(n.size() - s.name.size(), s.name.size(), s.name) == 0 &&
                          n[n.size() - s.name.size() - 1] == '.'))
        spec = &s;
    }
    if (spec == nullptr) {
      for (const auto& s : specs) {
        if (s.slices == first->slices && s.profile != NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1) {
          spec = &s;
          break;
        }
      }
    }
    if (spec == nullptr) continue;
    int start = -1;
    for (unsigned s : spec->starts) {
      if (GiIdFor(s, spec->mem_slices) == gi_id && !Overlaps(rt, s, spec->mem_slices)) start = static_cast<int>(s);
    }
    if (start < 0) {
      for (unsigned s : spec->starts) {
        if (!Overlaps(rt, s, spec->mem_slices)) {
          start = static_cast<int>(s);
          break;
        }
      }
    }
    if (start < 0) continue;
    SimGi gi;
    gi.id = gi_id;  // the profile's id, even where the placement would give another
    gi.profile = spec->profile;
    gi.start = static_cast<unsigned>(start);
    gi.size = spec->mem_slices;
    gi.serial = ++*serial;
    for (const MigDevice& d : g.mig.devices) {
      if (d.gpu_instance_id != gi_id) continue;
      SimCi ci;
      ci.id = d.compute_instance_id;
      ci.slices = std::max(1u, std::min(d.compute_slices, spec->slices));
      ci.profile = CiProfileForSlices(ci.slices);
      int cs = CiStart(gi, spec->slices, ci.slices);
      ci.start = cs < 0 ? 0 : static_cast<unsigned>(cs);
      ci.uuid = d.uuid;
      ci.multiprocessors = d.multiprocessors != 0 ? d.multiprocessors : CiMultiprocessors(*spec, ci.slices);
      ci.serial = ++*serial;
      gi.cis.push_back(ci);
    }
    rt.gis.push_back(std::move(gi));
  }
  return rt;
}

}  // namespace

void SimState::SeedMig(const std::string& text) {
  const NodeProfile& p = *profile_;
  std::vector<MigRuntime> seeded(p.gpus.size());
  for (size_t i = 0; i < p.gpus.size(); ++i) seeded[i] = SeedFromProfile(p.gpus[i], &mig_serial_);
  // The state line: the last one in the text (file), else the in-process copy (built-in).
  std::string state;
  if (!file_path_.empty()) {
    state = StateLine(text, kStateMarker);
  } else if (auto it = mig_memory_.find(profile_ref_); it != mig_memory_.end()) {
    state = it->second;
  }
  bool from_state = false;
  if (!state.empty()) {
    auto doc = ParseJson(state, "MIG state line");
    if (doc.ok()) {
      FromJson(*doc, p, &seeded, &mig_serial_);
      from_state = true;
    } else {
      Warn(str::Cat("ignoring the MIG state of ", profile_ref_, ": ", std::string(doc.status().message())));
    }
  }
  // Keep the identity (and so the handles) of GIs/CIs that did not change.
  for (size_t i = 0; i < seeded.size() && i < mig_.size(); ++i) {
    for (SimGi& gi : seeded[i].gis) {
      for (const SimGi& old : mig_[i].gis) {
        if (old.id != gi.id || old.profile != gi.profile || old.start != gi.start) continue;
        gi.serial = old.serial;
        for (SimCi& ci : gi.cis) {
          for (const SimCi& oc : old.cis) {
            if (oc.id == ci.id && oc.profile == ci.profile) ci.serial = oc.serial;
          }
        }
      }
    }
  }
  mig_ = std::move(seeded);
  if (from_state) {
    for (unsigned i = 0; i < mig_.size(); ++i) {
      // Rewrite the profile's view without saving again.
      Gpu& g = profile_->gpus[i];
      if (GiProfilesFor(g).empty()) continue;
      const MigRuntime& rt = mig_[i];
      const auto specs = GiProfilesFor(g);
      g.mig.enabled = rt.current;
      g.mig.pending = rt.pending;
      g.mig.devices.clear();
      for (const SimGi& gi : rt.gis) {
        const GiProfileSpec* spec = SpecByEnum(specs, gi.profile);
        for (const SimCi& ci : gi.cis) {
          MigDevice d;
          d.profile = CiName(*spec, ci.slices);
          d.uuid = ci.uuid;
          d.gpu_instance_id = gi.id;
          d.compute_instance_id = ci.id;
          d.slices = spec->slices;
          d.compute_slices = ci.slices;
          d.memory_mib = spec->memory_mib;
          d.multiprocessors = ci.multiprocessors;
          g.mig.devices.push_back(d);
        }
      }
    }
  }
}

void SimState::CommitMig(unsigned gpu) {
  Gpu& g = profile_->gpus[gpu];
  MigRuntime& rt = mig_[gpu];
  std::sort(rt.gis.begin(), rt.gis.end(), [](const SimGi& a, const SimGi& b) { return a.id < b.id; });
  for (SimGi& gi : rt.gis) {
    std::sort(gi.cis.begin(), gi.cis.end(), [](const SimCi& a, const SimCi& b) { return a.id < b.id; });
  }
  const auto specs = GiProfilesFor(g);
  g.mig.enabled = rt.current;
  g.mig.pending = rt.pending;
  g.mig.devices.clear();
  for (const SimGi& gi : rt.gis) {
    const GiProfileSpec* spec = SpecByEnum(specs, gi.profile);
    if (spec == nullptr) continue;
    for (const SimCi& ci : gi.cis) {
      MigDevice d;
      d.profile = CiName(*spec, ci.slices);
      d.uuid = ci.uuid;
      d.gpu_instance_id = gi.id;
      d.compute_instance_id = ci.id;
      d.slices = spec->slices;
      d.compute_slices = ci.slices;
      d.memory_mib = spec->memory_mib;
      d.multiprocessors = ci.multiprocessors;
      g.mig.devices.push_back(d);
    }
  }
  SaveMigState();
}

void SimState::SaveMigState() {
  const std::string state = DumpJson(ToJson(mig_, *profile_));
  if (file_path_.empty()) {
    mig_memory_[profile_ref_] = state;
    return;
  }
  WriteStateLine(kStateMarker, state, "the MIG layout");
}

std::string SimState::StateLine(const std::string& text, const char* marker) {
  size_t pos = text.rfind(marker);
  while (pos != std::string::npos && pos != 0 && text[pos - 1] != '\n') {
    pos = pos == 0 ? std::string::npos : text.rfind(marker, pos - 1);
  }
  if (pos == std::string::npos) return "";
  const size_t begin = pos + std::strlen(marker);
  const size_t end = text.find('\n', begin);
  return text.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}

void SimState::WriteStateLine(const char* marker, const std::string& state, const char* what) {
  std::string text;
  {
    FILE* f = std::fopen(file_path_.c_str(), "rb");
    if (f == nullptr) {
      Warn(str::Cat("cannot save ", what, " in ", file_path_, ": cannot read it"));
      return;
    }
    char buf[65536];
    size_t n = 0;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
    std::fclose(f);
  }
  // Drop earlier lines of this marker, keep every other line, append the new one.
  std::string out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    std::string_view line(text.data() + pos, (end == std::string::npos ? text.size() : end) - pos);
    if (line.substr(0, std::strlen(marker)) != marker) {
      out.append(line);
      out.push_back('\n');
    }
    if (end == std::string::npos) break;
    pos = end + 1;
  }
  str::Append(&out, marker, state, "\n");
  WriteOptions options;
  options.durable = false;  // a simulated node: speed over crash safety
  auto written = HostFs::Local().WriteFileAtomically(file_path_, out, options);
  if (!written.ok()) {
    Warn(str::Cat("cannot save ", what, ": ", std::string(written.status().message())));
    return;
  }
  // Our own write is not a change to reload.
  struct stat st;
  if (::stat(file_path_.c_str(), &st) == 0) {
    signature_.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
    signature_.size = static_cast<int64_t>(st.st_size);
    signature_.inode = static_cast<uint64_t>(st.st_ino);
  }
}

nvmlGpuInstance_t SimState::GiHandle(unsigned gpu, uint64_t serial) {
  auto& slot = gi_handles_[serial];
  if (!slot) {
    slot = std::make_unique<nvmlGpuInstance_st>();
    slot->gpu = gpu;
    slot->serial = serial;
    gi_handle_set_.insert(slot.get());
  }
  return slot.get();
}

nvmlComputeInstance_t SimState::CiHandle(unsigned gpu, uint64_t gi_serial, uint64_t serial) {
  auto& slot = ci_handles_[serial];
  if (!slot) {
    slot = std::make_unique<nvmlComputeInstance_st>();
    slot->gpu = gpu;
    slot->gi_serial = gi_serial;
    slot->serial = serial;
    ci_handle_set_.insert(slot.get());
  }
  return slot.get();
}

namespace {

// One MIG configuration call: the lock, initialisation, reload, and handle resolution.
class MigCall {
 public:
  MigCall() : state_(SimState::Get()), lock_(state_.mu) {
    if (state_.nvml_refcount == 0 || !state_.loaded()) {
      rc_ = NVML_ERROR_UNINITIALIZED;
    } else {
      state_.MaybeReload();
    }
  }
  nvmlReturn_t rc() const { return rc_; }
  SimState& state() { return state_; }

  // A full, present, MIG-capable GPU. `need_mig_on`: its current MIG mode must be on.
  nvmlReturn_t Device(nvmlDevice_t device, bool need_mig_on) {
    if (rc_ != NVML_SUCCESS) return rc_;
    if (device == nullptr || !state_.ValidHandle(device) || device->mig >= 0)
      return NVML_ERROR_INVALID_ARGUMENT;
    const NodeProfile& p = state_.profile();
    if (device->gpu >= p.gpus.size() || p.gpus[device->gpu].lost) return NVML_ERROR_GPU_IS_LOST;
    gpu_ = device->gpu;
    const Gpu& g = p.gpus[gpu_];
    if (g.Unsupported("mig")) return NVML_ERROR_NOT_SUPPORTED;
    specs_ = GiProfilesFor(g);
    if (specs_.empty()) return NVML_ERROR_NOT_SUPPORTED;
    if (gpu_ >= state_.mig().size()) return NVML_ERROR_GPU_IS_LOST;
    if (need_mig_on && !state_.mig()[gpu_].current) return NVML_ERROR_NOT_SUPPORTED;
    return NVML_SUCCESS;
  }

  nvmlReturn_t Gi(nvmlGpuInstance_t h) {
    if (rc_ != NVML_SUCCESS) return rc_;
    if (h == nullptr || !state_.ValidGiHandle(h)) return NVML_ERROR_INVALID_ARGUMENT;
    nvmlReturn_t r = Device(state_.Handle(h->gpu, -1), true);
    if (r == NVML_ERROR_NOT_SUPPORTED) return NVML_ERROR_INVALID_ARGUMENT;  // the GI is gone
    if (r != NVML_SUCCESS) return r;
    for (SimGi& gi : state_.mig()[gpu_].gis) {
      if (gi.serial == h->serial) {
        gi_ = &gi;
        gi_spec_ = SpecByEnum(specs_, gi.profile);
        return gi_spec_ != nullptr ? NVML_SUCCESS : NVML_ERROR_UNKNOWN;
      }
    }
    return NVML_ERROR_INVALID_ARGUMENT;
  }

  nvmlReturn_t Ci(nvmlComputeInstance_t h) {
    if (rc_ != NVML_SUCCESS) return rc_;
    if (h == nullptr || !state_.ValidCiHandle(h)) return NVML_ERROR_INVALID_ARGUMENT;
    if (auto r = Gi(state_.GiHandle(h->gpu, h->gi_serial))) return r;
    for (SimCi& ci : gi_->cis) {
      if (ci.serial == h->serial) {
        ci_ = &ci;
        return NVML_SUCCESS;
      }
    }
    return NVML_ERROR_INVALID_ARGUMENT;
  }

  unsigned gpu() const { return gpu_; }
  const Gpu& gpu_profile() { return state_.profile().gpus[gpu_]; }
  MigRuntime& rt() { return state_.mig()[gpu_]; }
  const std::vector<GiProfileSpec>& specs() const { return specs_; }
  SimGi* gi() { return gi_; }
  const GiProfileSpec* gi_spec() { return gi_spec_; }
  SimCi* ci() { return ci_; }

 private:
  SimState& state_;
  std::lock_guard<std::mutex> lock_;
  nvmlReturn_t rc_ = NVML_SUCCESS;
  unsigned gpu_ = 0;
  std::vector<GiProfileSpec> specs_;
  SimGi* gi_ = nullptr;
  const GiProfileSpec* gi_spec_ = nullptr;
  SimCi* ci_ = nullptr;
};

void FillGiInfo(const GiProfileSpec& s, nvmlGpuInstanceProfileInfo_t* info) {
  info->id = s.id;
  info->isP2pSupported = 0;
  info->sliceCount = s.slices;
  info->instanceCount = s.instance_count;
  info->multiprocessorCount = s.multiprocessors;
  info->copyEngineCount = s.copy_engines;
  info->decoderCount = s.decoders;
  info->encoderCount = s.encoders;
  info->jpegCount = s.jpegs;
  info->ofaCount = s.ofas;
  info->memorySizeMB = s.memory_mib;
}

nvmlReturn_t GiProfileLookup(MigCall& c, nvmlDevice_t device, unsigned profile,
                             const GiProfileSpec** out) {
  // Profile info is answered while MIG is off too (nvidia-smi mig -lgip needs MIG on; NVML
  // answers the profile table either way on R525+).
  if (auto r = c.Device(device, false)) return r;
  if (profile >= GPUNODE_NVML_GPU_INSTANCE_PROFILES_KNOWN) return NVML_ERROR_INVALID_ARGUMENT;
  *out = SpecByEnum(c.specs(), profile);
  return *out == nullptr ? NVML_ERROR_NOT_SUPPORTED : NVML_SUCCESS;
}

void FillCiInfo(const GiProfileSpec& gi, unsigned profile, const SimGi& g,
                nvmlComputeInstanceProfileInfo_t* info) {
  const unsigned slices = CiSlices(profile);
  info->id = profile;
  info->sliceCount = slices;
  info->instanceCount = gi.slices / slices;
  info->multiprocessorCount = CiMultiprocessors(gi, slices);
  info->sharedCopyEngineCount = gi.copy_engines;
  info->sharedDecoderCount = gi.decoders;
  info->sharedEncoderCount = gi.encoders;
  info->sharedJpegCount = gi.jpegs;
  info->sharedOfaCount = gi.ofas;
  (void)g;
}

}  // namespace
}  // namespace gpunode::sim

using gpunode::sim::GiProfileSpec;
using gpunode::sim::MigCall;
using gpunode::sim::SimCi;
using gpunode::sim::SimGi;

nvmlReturn_t nvmlDeviceSetMigMode(nvmlDevice_t device, unsigned int mode,
                                  nvmlReturn_t* activationStatus) {
  MigCall c;
  if (auto r = c.Device(device, false)) return r;
  if (activationStatus == nullptr ||
      (mode != NVML_DEVICE_MIG_ENABLE && mode != NVML_DEVICE_MIG_DISABLE))
    return NVML_ERROR_INVALID_ARGUMENT;
  auto& rt = c.rt();
  const bool on = mode == NVML_DEVICE_MIG_ENABLE;
  if (!on && !rt.gis.empty()) return NVML_ERROR_IN_USE;
  rt.pending = on;
  if (gpunode::sim::ProcessesOnGpu(c.gpu_profile())) {
    *activationStatus = rt.current == on ? NVML_SUCCESS : NVML_ERROR_IN_USE;
  } else {
    rt.current = on;
    *activationStatus = NVML_SUCCESS;
  }
  c.state().CommitMig(c.gpu());
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfo(nvmlDevice_t device, unsigned int profile,
                                                 nvmlGpuInstanceProfileInfo_t* info) {
  MigCall c;
  const GiProfileSpec* s = nullptr;
  if (auto r = gpunode::sim::GiProfileLookup(c, device, profile, &s)) return r;
  if (info == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  gpunode::sim::FillGiInfo(*s, info);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfoV(nvmlDevice_t device, unsigned int profile,
                                                  nvmlGpuInstanceProfileInfo_v2_t* info) {
  MigCall c;
  const GiProfileSpec* s = nullptr;
  if (auto r = gpunode::sim::GiProfileLookup(c, device, profile, &s)) return r;
  if (info == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (info->version != nvmlGpuInstanceProfileInfo_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  nvmlGpuInstanceProfileInfo_t v1{};
  gpunode::sim::FillGiInfo(*s, &v1);
  info->id = v1.id;
  info->isP2pSupported = v1.isP2pSupported;
  info->sliceCount = v1.sliceCount;
  info->instanceCount = v1.instanceCount;
  info->multiprocessorCount = v1.multiprocessorCount;
  info->copyEngineCount = v1.copyEngineCount;
  info->decoderCount = v1.decoderCount;
  info->encoderCount = v1.encoderCount;
  info->jpegCount = v1.jpegCount;
  info->ofaCount = v1.ofaCount;
  info->memorySizeMB = v1.memorySizeMB;
  std::snprintf(info->name, sizeof info->name, "MIG %s", s->name.c_str());
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstancePossiblePlacements_v2(nvmlDevice_t device,
                                                           unsigned int profileId,
                                                           nvmlGpuInstancePlacement_t* placements,
                                                           unsigned int* count) {
  MigCall c;
  if (auto r = c.Device(device, false)) return r;  // static: answered with MIG off too
  if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const GiProfileSpec* s = gpunode::sim::SpecById(c.specs(), profileId);
  if (s == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const unsigned n = static_cast<unsigned>(s->starts.size());
  if (placements == nullptr) {
    *count = n;
    return NVML_SUCCESS;
  }
  if (*count < n) {
    *count = n;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  for (unsigned i = 0; i < n; ++i) placements[i] = {s->starts[i], s->mem_slices};
  *count = n;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceRemainingCapacity(nvmlDevice_t device, unsigned int profileId,
                                                       unsigned int* count) {
  MigCall c;
  if (auto r = c.Device(device, true)) return r;
  if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const GiProfileSpec* s = gpunode::sim::SpecById(c.specs(), profileId);
  if (s == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  gpunode::sim::MigRuntime trial = c.rt();
  unsigned n = 0;
  for (int start; (start = gpunode::sim::AutoStart(trial, *s)) >= 0; ++n) {
    SimGi gi;
    gi.profile = s->profile;
    gi.start = static_cast<unsigned>(start);
    gi.size = s->mem_slices;
    trial.gis.push_back(gi);
  }
  *count = n;
  return NVML_SUCCESS;
}

namespace gpunode::sim {
namespace {
nvmlReturn_t CreateGi(MigCall& c, unsigned profileId, const nvmlGpuInstancePlacement_t* placement,
                      nvmlGpuInstance_t* out) {
  if (out == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const GiProfileSpec* s = SpecById(c.specs(), profileId);
  if (s == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  MigRuntime& rt = c.rt();
  int start = -1;
  if (placement != nullptr) {
    if (placement->size != s->mem_slices ||
        std::find(s->starts.begin(), s->starts.end(), placement->start) == s->starts.end())
      return NVML_ERROR_INVALID_ARGUMENT;
    if (!UnderInstanceLimit(rt, *s) || Overlaps(rt, placement->start, placement->size))
      return NVML_ERROR_INSUFFICIENT_RESOURCES;
    start = static_cast<int>(placement->start);
  } else {
    start = AutoStart(rt, *s);
    if (start < 0) return NVML_ERROR_INSUFFICIENT_RESOURCES;
  }
  SimGi gi;
  gi.profile = s->profile;
  gi.start = static_cast<unsigned>(start);
  gi.size = s->mem_slices;
  gi.id = GiIdFor(gi.start, gi.size);
  gi.serial = c.state().NextMigSerial();
  rt.gis.push_back(gi);
  *out = c.state().GiHandle(c.gpu(), gi.serial);
  c.state().CommitMig(c.gpu());
  return NVML_SUCCESS;
}
}  // namespace
}  // namespace gpunode::sim

nvmlReturn_t nvmlDeviceCreateGpuInstance(nvmlDevice_t device, unsigned int profileId,
                                         nvmlGpuInstance_t* gpuInstance) {
  MigCall c;
  if (auto r = c.Device(device, true)) return r;
  return gpunode::sim::CreateGi(c, profileId, nullptr, gpuInstance);
}

nvmlReturn_t nvmlDeviceCreateGpuInstanceWithPlacement(nvmlDevice_t device, unsigned int profileId,
                                                      const nvmlGpuInstancePlacement_t* placement,
                                                      nvmlGpuInstance_t* gpuInstance) {
  MigCall c;
  if (auto r = c.Device(device, true)) return r;
  if (placement == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  return gpunode::sim::CreateGi(c, profileId, placement, gpuInstance);
}

nvmlReturn_t nvmlGpuInstanceDestroy(nvmlGpuInstance_t gpuInstance) {
  MigCall c;
  if (auto r = c.Gi(gpuInstance)) return r;
  if (!c.gi()->cis.empty() || gpunode::sim::ProcessesInGi(c.gpu_profile(), c.gi()->id))
    return NVML_ERROR_IN_USE;
  auto& gis = c.rt().gis;
  const uint64_t serial = c.gi()->serial;
  gis.erase(std::remove_if(gis.begin(), gis.end(), [&](const SimGi& g) { return g.serial == serial; }),
            gis.end());
  c.state().CommitMig(c.gpu());
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstances(nvmlDevice_t device, unsigned int profileId,
                                       nvmlGpuInstance_t* gpuInstances, unsigned int* count) {
  MigCall c;
  if (auto r = c.Device(device, true)) return r;
  if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const GiProfileSpec* s = gpunode::sim::SpecById(c.specs(), profileId);
  if (s == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  unsigned n = 0;
  for (const SimGi& gi : c.rt().gis) {
    if (gi.profile != s->profile) continue;
    if (gpuInstances == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    gpuInstances[n++] = c.state().GiHandle(c.gpu(), gi.serial);
  }
  *count = n;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpuInstanceGetInfo(nvmlGpuInstance_t gpuInstance, nvmlGpuInstanceInfo_t* info) {
  MigCall c;
  if (auto r = c.Gi(gpuInstance)) return r;
  if (info == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  info->device = c.state().Handle(c.gpu(), -1);
  info->id = c.gi()->id;
  info->profileId = c.gi_spec()->id;
  info->placement = {c.gi()->start, c.gi()->size};
  return NVML_SUCCESS;
}

namespace gpunode::sim {
namespace {
nvmlReturn_t CiProfileCheck(MigCall& c, unsigned profile, unsigned engProfile) {
  if (profile >= GPUNODE_NVML_COMPUTE_INSTANCE_PROFILES_KNOWN ||
      engProfile != NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
    return NVML_ERROR_INVALID_ARGUMENT;
  return CiOffered(c.gi_spec()->slices, CiSlices(profile)) ? NVML_SUCCESS : NVML_ERROR_NOT_SUPPORTED;
}
}  // namespace
}  // namespace gpunode::sim

nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfo(nvmlGpuInstance_t gpuInstance,
                                                          unsigned int profile,
                                                          unsigned int engProfile,
                                                          nvmlComputeInstanceProfileInfo_t* info) {
  MigCall c;
  if (auto r = c.Gi(gpuInstance)) return r;
  if (info == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (auto r = gpunode::sim::CiProfileCheck(c, profile, engProfile)) return r;
  gpunode::sim::FillCiInfo(*c.gi_spec(), profile, *c.gi(), info);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfoV(
    nvmlGpuInstance_t gpuInstance, unsigned int profile, unsigned int engProfile,
    nvmlComputeInstanceProfileInfo_v2_t* info) {
  MigCall c;
  if (auto r = c.Gi(gpuInstance)) return r;
  if (info == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (info->version != nvmlComputeInstanceProfileInfo_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  if (auto r = gpunode::sim::CiProfileCheck(c, profile, engProfile)) return r;
  nvmlComputeInstanceProfileInfo_t v1{};
  gpunode::sim::FillCiInfo(*c.gi_spec(), profile, *c.gi(), &v1);
  info->id = v1.id;
  info->sliceCount = v1.sliceCount;
  info->instanceCount = v1.instanceCount;
  info->multiprocessorCount = v1.multiprocessorCount;
  info->sharedCopyEngineCount = v1.sharedCopyEngineCount;
  info->sharedDecoderCount = v1.sharedDecoderCount;
  info->sharedEncoderCount = v1.sharedEncoderCount;
  info->sharedJpegCount = v1.sharedJpegCount;
  info->sharedOfaCount = v1.sharedOfaCount;
  std::snprintf(info->name, sizeof info->name, "MIG %s",
                gpunode::sim::CiName(*c.gi_spec(), v1.sliceCount).c_str());
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstanceRemainingCapacity(nvmlGpuInstance_t gpuInstance,
                                                                unsigned int profileId,
                                                                unsigned int* count) {
  MigCall c;
  if (auto r = c.Gi(gpuInstance)) return r;
  if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (auto r = gpunode::sim::CiProfileCheck(c, profileId, NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)) {
    return r == NVML_ERROR_NOT_SUPPORTED ? NVML_ERROR_INVALID_ARGUMENT : r;
  }
  SimGi trial = *c.gi();
  const unsigned slices = gpunode::sim::CiSlices(profileId);
  unsigned n = 0;
  for (int start; (start = gpunode::sim::CiStart(trial, c.gi_spec()->slices, slices)) >= 0; ++n) {
    SimCi ci;
    ci.start = static_cast<unsigned>(start);
    ci.slices = slices;
    trial.cis.push_back(ci);
  }
  *count = n;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpuInstanceCreateComputeInstance(nvmlGpuInstance_t gpuInstance,
                                                  unsigned int profileId,
                                                  nvmlComputeInstance_t* computeInstance) {
  MigCall c;
  if (auto r = c.Gi(gpuInstance)) return r;
  if (computeInstance == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (auto r = gpunode::sim::CiProfileCheck(c, profileId, NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)) {
    return r == NVML_ERROR_NOT_SUPPORTED ? NVML_ERROR_INVALID_ARGUMENT : r;
  }
  SimGi& gi = *c.gi();
  const unsigned slices = gpunode::sim::CiSlices(profileId);
  const int start = gpunode::sim::CiStart(gi, c.gi_spec()->slices, slices);
  if (start < 0) return NVML_ERROR_INSUFFICIENT_RESOURCES;
  SimCi ci;
  ci.id = gpunode::sim::NextCiId(gi);
  ci.profile = profileId;
  ci.slices = slices;
  ci.start = static_cast<unsigned>(start);
  ci.uuid = gpunode::sim::GeneratedMigUuid(gpunode::sim::str::Cat(
      c.gpu_profile().uuid, "/", gi.id, "/", ci.id, "/", c.state().NextMigSerial()));
  ci.multiprocessors = gpunode::sim::CiMultiprocessors(*c.gi_spec(), slices);
  ci.serial = c.state().NextMigSerial();
  gi.cis.push_back(ci);
  *computeInstance = c.state().CiHandle(c.gpu(), gi.serial, ci.serial);
  c.state().CommitMig(c.gpu());
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlComputeInstanceDestroy(nvmlComputeInstance_t computeInstance) {
  MigCall c;
  if (auto r = c.Ci(computeInstance)) return r;
  const unsigned ci_id = c.ci()->id;
  if (gpunode::sim::ProcessesInGi(c.gpu_profile(), c.gi()->id, &ci_id)) return NVML_ERROR_IN_USE;
  auto& cis = c.gi()->cis;
  const uint64_t serial = c.ci()->serial;
  cis.erase(std::remove_if(cis.begin(), cis.end(), [&](const SimCi& x) { return x.serial == serial; }),
            cis.end());
  c.state().CommitMig(c.gpu());
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstances(nvmlGpuInstance_t gpuInstance,
                                                unsigned int profileId,
                                                nvmlComputeInstance_t* computeInstances,
                                                unsigned int* count) {
  MigCall c;
  if (auto r = c.Gi(gpuInstance)) return r;
  if (count == nullptr || profileId >= GPUNODE_NVML_COMPUTE_INSTANCE_PROFILES_KNOWN)
    return NVML_ERROR_INVALID_ARGUMENT;
  unsigned n = 0;
  for (const SimCi& ci : c.gi()->cis) {
    if (ci.profile != profileId) continue;
    if (computeInstances == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    computeInstances[n++] = c.state().CiHandle(c.gpu(), c.gi()->serial, ci.serial);
  }
  *count = n;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlComputeInstanceGetInfo_v2(nvmlComputeInstance_t computeInstance,
                                           nvmlComputeInstanceInfo_t* info) {
  MigCall c;
  if (auto r = c.Ci(computeInstance)) return r;
  if (info == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  info->device = c.state().Handle(c.gpu(), -1);
  info->gpuInstance = c.state().GiHandle(c.gpu(), c.gi()->serial);
  info->id = c.ci()->id;
  info->profileId = c.ci()->profile;
  info->placement = {c.ci()->start, c.ci()->slices};
  return NVML_SUCCESS;
}
