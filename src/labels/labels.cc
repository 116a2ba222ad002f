#include "src/labels/labels.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "src/base/well_known.h"
#include "src/compat/engine.h"
#include "src/compat/image_ref.h"
#include "src/devices/devices.h"
#include "src/doctor/doctor.h"
#include "src/gpu/nvml.h"

namespace gpunode::labels {
namespace {

constexpr uint64_t kMiB = 1024 * 1024;
constexpr const auto& kGpu = wellknown::kResourceGpu;

bool Alnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }
bool ValueChar(char c) { return Alnum(c) || c == '-' || c == '_' || c == '.'; }

// GFD's product name: the parts sanitised and joined with '-', "SHARED" appended when the
// resource is time-sliced or MPS-shared under its own name.
std::string ProductName(const std::vector<std::string>& parts, bool shared_suffix) {
  std::vector<std::string> kept;
  for (const std::string& p : parts) {
    std::string s = SanitizeLabelValue(p);
    if (!s.empty()) kept.push_back(std::move(s));
  }
  if (kept.empty()) return "";
  if (shared_suffix) kept.push_back("SHARED");
  return SanitizeLabelValue(absl::StrJoin(kept, "-"));
}

// The labels of one resource (`nvidia.com/gpu`, `nvidia.com/mig-1g.10gb`): product, count,
// replicas, sharing-strategy. `sharing` null: sharing does not apply (GFD labels MIG-enabled GPUs
// so, with 0 replicas).
void ResourceLabels(const std::string& resource, const std::vector<std::string>& product_parts,
                    int count, const devices::Sharing* sharing, Labels* out) {
  int replicas = 0;
  std::string strategy = "none";
  bool shared = false;
  if (sharing != nullptr) {
    replicas = std::max(1, sharing->ReplicasOf(resource));
    if (replicas > 1) {
      shared = true;
      strategy = devices::SharingStrategyName(sharing->strategy);
    }
  }
  const std::string product =
      ProductName(product_parts, shared && !(sharing && sharing->rename_by_default));
  if (!product.empty()) (*out)[resource + ".product"] = product;
  (*out)[resource + ".count"] = absl::StrCat(count);
  (*out)[resource + ".replicas"] = absl::StrCat(replicas);
  (*out)[resource + ".sharing-strategy"] = strategy;
}

// Memory, compute capability and family of a full GPU.
void FullGpuAttributes(const gpu::GpuInfo& g, Labels* out) {
  const uint64_t mib = g.memory_total_bytes.value_or(0) / kMiB;
  if (mib != 0) (*out)[wellknown::kLabelGpuMemory] = absl::StrCat(mib);
  if (g.cc_major && *g.cc_major != 0) {
    const int minor = g.cc_minor.value_or(0);
    (*out)[wellknown::kLabelGpuFamily] = ArchFamily(*g.cc_major, minor);
    (*out)[wellknown::kLabelComputeMajor] = absl::StrCat(*g.cc_major);
    (*out)[wellknown::kLabelComputeMinor] = absl::StrCat(minor);
  }
}

// A MIG device's attributes under `resource`, as GFD: memory, multiprocessors, slices and the
// engines it shares.
void MigAttributes(const std::string& resource, const gpu::MigDevice& m, Labels* out) {
  if (m.memory_total_bytes)
    (*out)[resource + ".memory"] = absl::StrCat(*m.memory_total_bytes / kMiB);
  if (m.multiprocessors) (*out)[resource + ".multiprocessors"] = absl::StrCat(*m.multiprocessors);
  if (m.slices) (*out)[resource + ".slices.gi"] = absl::StrCat(*m.slices);
  if (m.compute_slices) (*out)[resource + ".slices.ci"] = absl::StrCat(*m.compute_slices);
  const std::pair<const char*, const std::optional<unsigned>*> engines[] = {
      {"copy", &m.copy_engines}, {"decoder", &m.decoders}, {"encoder", &m.encoders},
      {"jpeg", &m.jpegs},        {"ofa", &m.ofas}};
  for (const auto& [name, count] : engines) {
    if (*count) (*out)[absl::StrCat(resource, ".engines.", name)] = absl::StrCat(**count);
  }
}

bool MigEnabled(const gpu::GpuInfo& g) { return g.mig_enabled.value_or(false); }

// nvidia.com/gpu.*: one model. GFD keys its full-GPU labels by model and lets the last one win
// (Go map order); gpunode picks deterministically: the model of the first GPU not in MIG mode,
// else of the first MIG-enabled GPU (labelled without sharing). The count is every GPU of that
// model.
void FullGpuLabels(const std::vector<gpu::GpuInfo>& gpus, const devices::PluginConfig& config, LabelSet* set) {
  std::map<std::string, int> counts;
  std::vector<std::string> models;
  for (const gpu::GpuInfo& g : gpus) {
    if (counts[g.name]++ == 0) models.push_back(g.name);
  }
  if (models.size() > 1) {
    set->warnings.push_back(
        absl::StrCat("several GPU models on this node (", absl::StrJoin(models, ", "),
                     "): the nvidia.com/gpu.* labels describe one of them, as in GFD"));
  }
  const gpu::GpuInfo* chosen = nullptr;
  for (const gpu::GpuInfo& g : gpus) {
    if (!MigEnabled(g)) {
      chosen = &g;
      break;
    }
  }
  const bool with_sharing = chosen != nullptr;
  if (chosen == nullptr) chosen = &gpus.front();
  ResourceLabels(kGpu, {chosen->name}, counts[chosen->name],
                 with_sharing ? &config.sharing : nullptr, &set->labels);
  FullGpuAttributes(*chosen, &set->labels);
}

// MIG devices grouped by profile name, in the order first seen.
struct MigGroup {
  std::string profile;
  std::string model;  // of the parent GPU of the first device
  const gpu::MigDevice* first = nullptr;
  int count = 0;
};

std::vector<MigGroup> GroupMigDevices(const std::vector<gpu::GpuInfo>& gpus) {
  std::vector<MigGroup> groups;
  for (const gpu::GpuInfo& g : gpus) {
    if (!MigEnabled(g)) continue;
    for (const gpu::MigDevice& m : g.mig_devices) {
      const std::string profile = devices::MigProfileName(m, g.memory_total_bytes);
      auto it = std::find_if(groups.begin(), groups.end(),
                             [&](const MigGroup& x) { return x.profile == profile; });
      if (it == groups.end()) {
        groups.push_back({profile, g.name, &m, 0});
        it = groups.end() - 1;
      }
      ++it->count;
    }
  }
  return groups;
}

void InvalidSingleLabels(const gpu::GpuInfo& first_mig, const std::string& reason, LabelSet* set) {
  set->warnings.push_back(absl::StrCat("invalid configuration for mig-strategy=single: ", reason,
                                       "; nvidia.com/gpu.product says MIG-INVALID"));
  Labels& l = set->labels;
  l[wellknown::kLabelGpuProduct] = ProductName({first_mig.name, "MIG", "INVALID"}, false);
  l[wellknown::kLabelGpuCount] = "0";
  l[wellknown::kLabelGpuReplicas] = "0";
  l[wellknown::kLabelSharingStrategy] = "";  // GFD empties it: no resource to share
  l[wellknown::kLabelGpuMemory] = "0";
}

void MigLabels(const std::vector<gpu::GpuInfo>& gpus, const devices::PluginConfig& config, LabelSet* set) {
  if (config.mig_strategy == devices::MigStrategy::kNone) return;
  set->labels[wellknown::kLabelMigStrategy] = devices::MigStrategyName(config.mig_strategy);
  const gpu::GpuInfo* first_mig = nullptr;
  bool any_full = false;
  bool any_empty = false;
  for (const gpu::GpuInfo& g : gpus) {
    if (MigEnabled(g)) {
      if (first_mig == nullptr) first_mig = &g;
      if (g.mig_devices.empty()) any_empty = true;
    } else {
      any_full = true;
    }
  }
  const std::vector<MigGroup> groups = GroupMigDevices(gpus);
  if (config.mig_strategy == devices::MigStrategy::kSingle) {
    if (first_mig == nullptr) return;  // no GPU in MIG mode: the same as `none`
    if (any_empty)
      return InvalidSingleLabels(*first_mig, "at least one MIG device is enabled but empty", set);
    if (any_full)
      return InvalidSingleLabels(*first_mig, "devices with MIG enabled and disable detected", set);
    if (groups.size() != 1) {
      return InvalidSingleLabels(*first_mig, "more than one MIG device type present on node", set);
    }
    const MigGroup& g = groups.front();
    ResourceLabels(kGpu, {g.model, "MIG", g.profile}, g.count, &config.sharing, &set->labels);
    MigAttributes(kGpu, *g.first, &set->labels);
    return;
  }
  for (const MigGroup& g : groups) {
    const std::string resource = absl::StrCat("nvidia.com/mig-", g.profile);
    ResourceLabels(resource, {g.model, "MIG", g.profile}, g.count, &config.sharing, &set->labels);
    MigAttributes(resource, *g.first, &set->labels);
  }
}

// The highest CUDA the driver supports when NVML could not say: nvmlSystemGetCudaDriverVersion
// asks libcuda, which gpunode's services keep out of their process (src/cli/libcuda_guard.h), so
// on a real node it fails there; the driver branch's CUDA version from the compat data set is the
// same number (580 -> 13.0; a branch's CUDA version is fixed at release).
std::optional<Version> CudaOfDriverBranch(const node::UserDriverLayer& d, const compat::CompatData* data) {
  if (data == nullptr || !d.driver_version) return std::nullopt;
  return compat::MaxCudaOfDriver(*data, *d.driver_version);
}

void VersionLabels(const node::UserDriverLayer& d, const compat::CompatData* compat_data, LabelSet* set) {
  Labels& l = set->labels;
  if (d.driver_version) {
    const std::string full = d.driver_version->ToString();
    std::vector<std::string> parts = absl::StrSplit(full, '.');
    if (parts.size() < 2 || parts.size() > 3) {
      set->warnings.push_back(absl::StrCat("driver version \"", full,
                                           "\" does not match X.Y[.Z]: no cuda.driver labels"));
    } else {
      const std::string rev = parts.size() > 2 ? parts[2] : "";
      l[wellknown::kLabelDriverMajor] = parts[0];  // deprecated names, still emitted by GFD
      l["nvidia.com/cuda.driver.minor"] = parts[1];
      l["nvidia.com/cuda.driver.rev"] = rev;
      l["nvidia.com/cuda.driver-version.major"] = parts[0];
      l["nvidia.com/cuda.driver-version.minor"] = parts[1];
      l["nvidia.com/cuda.driver-version.revision"] = rev;
      l[wellknown::kLabelDriverVersion] = full;
    }
  }
  const std::optional<Version> cuda = d.cuda_version ? d.cuda_version : CudaOfDriverBranch(d, compat_data);
  if (cuda) {
    const std::string major = absl::StrCat(cuda->major());
    const std::string minor = absl::StrCat(cuda->minor());
    l["nvidia.com/cuda.runtime.major"] = major;  // deprecated
    l["nvidia.com/cuda.runtime.minor"] = minor;  // deprecated
    l["nvidia.com/cuda.runtime-version.major"] = major;
    l["nvidia.com/cuda.runtime-version.minor"] = minor;
    l[wellknown::kLabelCudaMax] = absl::StrCat(major, ".", minor);
  }
}

// GFD reads the PCI class of each device and keeps the first one's.
std::string GpuMode(const node::NodeInventory& inv) {
  const gpu::GpuInfo& first = inv.driver.gpus.front();
  for (const node::PciDevice& p : inv.hardware.gpus) {
    if (absl::AsciiStrToLower(p.bus_id) != absl::AsciiStrToLower(first.pci_bus_id)) continue;
    if (p.class_code == 0x030200) return "compute";
    if (p.class_code == 0x030000) return "graphics";
    return "unknown";
  }
  return "unknown";
}

bool Lost(const Status& s) { return gpu::NvmlReturnOf(s) == NVML_ERROR_GPU_IS_LOST; }

// A GPU NVML opened, that has not lost the bus since and whose memory has not failed row remapping.
bool Healthy(const gpu::GpuInfo& g) {
  if (g.remapped_rows && g.remapped_rows->failure) return false;
  for (const auto& [query, status] : g.field_errors) {
    if (Lost(status)) return false;
  }
  return true;
}

std::optional<Version> DriverVersion(const node::NodeInventory& inv) {
  if (inv.driver.driver_version) return inv.driver.driver_version;
  return inv.kernel.version;
}

void GpunodeLabels(const node::NodeInventory& inv, const LabelOptions& options, LabelSet* set) {
  Labels& l = set->labels;
  const std::optional<Version> driver = DriverVersion(inv);
  if (driver) {
    l[wellknown::kLabelBranch] = absl::StrCat(driver->major());
    if (options.compat != nullptr) {
      std::set<int> majors;
      for (const compat::MinorCompat& m : options.compat->minor_compat) majors.insert(m.cuda_major);
      compat::NodeTarget target;
      target.driver = driver;
      target.origin = "this node";
      for (int major : majors) {
        auto workload = compat::WorkloadFromCuda(absl::StrCat(major, ".0"));
        if (!workload.ok()) continue;
        const compat::CompatReport report = compat::Check(*options.compat, *workload, target);
        if (report.verdict == compat::Verdict::kUnknown) continue;
        const bool runs = report.verdict == compat::Verdict::kCompatible ||
                          report.verdict == compat::Verdict::kCompatibleWithCaveats;
        l[absl::StrCat("gpunode.io/driver.cuda-", major)] = runs ? "true" : "false";
      }
    }
  }
  if (inv.kernel.flavor == node::ModuleFlavor::kOpen) l[wellknown::kLabelKernelModule] = "open";
  if (inv.kernel.flavor == node::ModuleFlavor::kProprietary)
    l[wellknown::kLabelKernelModule] = "proprietary";

  // Health: the GPUs NVML counts, or more when the bus has more (not counting passthrough GPUs):
  // a GPU without a driver, or that NVML lost entirely, is not healthy.
  size_t healthy = 0;
  for (const gpu::GpuInfo& g : inv.driver.gpus) healthy += Healthy(g) ? 1 : 0;
  size_t total = inv.driver.device_count ? *inv.driver.device_count
                                         : inv.driver.gpus.size() + inv.driver.gpu_failures.size();
  size_t on_bus = 0;
  for (const node::PciDevice& p : inv.hardware.gpus) {
    // GPUs handed to virtual machines are not this node's to use.
    const bool passthrough = absl::StartsWith(p.driver, "vfio") || p.driver == "pci-stub";
    on_bus += passthrough ? 0 : 1;
  }
  total = std::max({total, on_bus, healthy});
  l[wellknown::kLabelHealthy] = absl::StrCat(healthy);
  l[wellknown::kLabelUnhealthy] = absl::StrCat(total - healthy);

  const doctor::DoctorReport report = doctor::RunDoctor(inv);
  const doctor::CheckStatus overall =
      report.overall == doctor::CheckStatus::kSkip ? doctor::CheckStatus::kOk : report.overall;
  l[wellknown::kLabelDoctorStatus] = std::string(doctor::StatusName(overall));
  if (overall != doctor::CheckStatus::kOk && report.first) {
    l[wellknown::kLabelDoctorFirst] = report.first->id;
  }
}

}  // namespace

LabelSet BuildLabels(const node::NodeInventory& inv, const devices::PluginConfig& config,
                     const LabelOptions& options) {
  LabelSet set;
  Labels& l = set.labels;
  if (options.timestamp) l["nvidia.com/gfd.timestamp"] = absl::StrCat(*options.timestamp);
  {
    std::string machine = options.machine_type.empty() ? "unknown" : options.machine_type;
    std::string value = SanitizeLabelValue(machine);
    l["nvidia.com/gpu.machine"] = value.empty() ? "unknown" : value;
  }
  if (!inv.hardware.gpus.empty() || !inv.driver.gpus.empty()) l[wellknown::kLabelGpuPresent] = "true";

  const std::vector<gpu::GpuInfo>& gpus = inv.driver.gpus;
  if (!gpus.empty()) {
    VersionLabels(inv.driver, options.compat, &set);
    const bool capable = std::any_of(gpus.begin(), gpus.end(), [](const gpu::GpuInfo& g) {
      return g.mig_enabled.has_value() || g.mig_max_devices.value_or(0) > 0;
    });
    l["nvidia.com/mig.capable"] = capable ? "true" : "false";
    const bool any_mig = std::any_of(gpus.begin(), gpus.end(), MigEnabled);
    bool mps = config.sharing.strategy == devices::SharingStrategy::kMps;
    if (mps && any_mig) {
      set.warnings.push_back(
          "MPS sharing is not supported for MIG devices: nvidia.com/mps.capable=false");
      mps = false;
    }
    l["nvidia.com/mps.capable"] = mps ? "true" : "false";
    FullGpuLabels(gpus, config, &set);
    MigLabels(gpus, config, &set);
    l["nvidia.com/gpu.mode"] = GpuMode(inv);
  }
  if (options.vgpu) {
    l["nvidia.com/vgpu.present"] = options.vgpu->present ? "true" : "false";
    if (options.vgpu->host) {
      l["nvidia.com/vgpu.host-driver-version"] = options.vgpu->host->driver_version;
      l["nvidia.com/vgpu.host-driver-branch"] = options.vgpu->host->driver_branch;
    }
  }
  GpunodeLabels(inv, options, &set);

  // Every value must be a valid label value; the builders above already produce them, this keeps
  // that true whatever the hardware reports.
  for (auto& [key, value] : l) {
    if (!IsValidLabelValue(value)) value = SanitizeLabelValue(value);
  }
  return set;
}

StatusOr<std::optional<VgpuHost>> ParseVgpuConfigSpace(absl::string_view config) {
  // PCI: status register bit 4 says a capability list exists; its head is at 0x34; each entry is
  // id, next, and (vendor-specific, id 0x09) a length byte.
  constexpr size_t kStatus = 0x06, kCapList = 0x34;
  constexpr uint8_t kHasCapList = 0x10, kVendorSpecific = 0x09;
  // NVIDIA's vGPU capability: "VF" at bytes 3-4, then records from byte 5: id, length, data;
  // record 0 holds the host driver's version and branch, 10 NUL-padded bytes each.
  constexpr size_t kRecordStart = 5, kVersionLen = 10, kBranchLen = 10;
  if (config.size() < 256) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the PCI configuration space is ", config.size(),
        " bytes, not the 256 of a privileged read"));
  }
  auto byte = [&config](size_t at) -> uint8_t {
    return at < config.size() ? static_cast<uint8_t>(config[at]) : 0;
  };
  if ((byte(kStatus) & kHasCapList) == 0) return std::optional<VgpuHost>();
  absl::string_view cap;
  bool visited[256] = {};
  for (uint8_t pos = byte(kCapList); pos != 0;) {
    const uint8_t id = byte(pos), next = byte(pos + 1u), length = byte(pos + 2u);
    if (visited[pos] || id == 0xff) break;  // a looping or broken chain
    if (id == kVendorSpecific) {
      cap = config.substr(pos, std::min<size_t>(length, config.size() - pos));
      break;
    }
    visited[pos] = true;
    pos = next;
  }
  if (cap.size() < 5 || cap[3] != 'V' || cap[4] != 'F') return std::optional<VgpuHost>();
  auto at = [&cap](size_t i) -> uint8_t {
    return i < cap.size() ? static_cast<uint8_t>(cap[i]) : 0;
  };
  size_t pos = kRecordStart;
  uint8_t record = at(pos);
  while (record != 0 && pos < cap.size()) {
    const uint8_t length = at(pos + 1);
    if (length == 0) break;  // a record that does not advance: no host driver record
    pos = (pos + length) & 0xff;  // GFD walks with a one-byte offset
    record = at(pos);
  }
  if (record != 0 || pos + 2 + kVersionLen + kBranchLen > cap.size()) {
    return absl::NotFoundError("the vGPU capability has no host driver record");
  }
  auto field = [&cap](size_t from, size_t n) {
    std::string s(cap.substr(from, n));
    const size_t b = s.find_first_not_of('\0');
    if (b == std::string::npos) return std::string();
    return s.substr(b, s.find_last_not_of('\0') - b + 1);
  };
  VgpuHost host;
  host.driver_version = field(pos + 2, kVersionLen);
  host.driver_branch = field(pos + 2 + kVersionLen, kBranchLen);
  return std::optional<VgpuHost>(std::move(host));
}

std::string RenderFeaturesFile(const Labels& labels) {
  std::string out;
  for (const auto& [key, value] : labels) absl::StrAppend(&out, key, "=", value, "\n");
  return out;
}

std::string ArchFamily(int cc_major, int cc_minor) {
  switch (cc_major) {
    case 1:
      return "tesla";
    case 2:
      return "fermi";
    case 3:
      return "kepler";
    case 5:
      return "maxwell";
    case 6:
      return "pascal";
    case 7:
      return cc_minor < 5 ? "volta" : "turing";
    case 8:
      return cc_minor < 9 ? "ampere" : "ada-lovelace";
    case 9:
      return "hopper";
    case 10:
    case 12:
      return "blackwell";
    case 13:
      return "rubin";
    default:
      return "undefined";
  }
}

std::string SanitizeLabelValue(absl::string_view raw) {
  std::string out;
  bool pending_dash = false;
  for (char c : raw) {
    if (absl::ascii_isspace(static_cast<unsigned char>(c))) {
      pending_dash = !out.empty();
      continue;
    }
    if (!ValueChar(c)) continue;
    if (pending_dash) out.push_back('-');
    pending_dash = false;
    out.push_back(c);
  }
  auto trim = [](std::string* s) {
    size_t b = 0;
    while (b < s->size() && !Alnum((*s)[b])) ++b;
    size_t e = s->size();
    while (e > b && !Alnum((*s)[e - 1])) --e;
    *s = s->substr(b, e - b);
  };
  trim(&out);
  if (out.size() > 63) {
    out.resize(63);
    trim(&out);
  }
  return out;
}

bool IsValidLabelValue(absl::string_view value) {
  if (value.empty()) return true;
  if (value.size() > 63) return false;
  if (!Alnum(value.front()) || !Alnum(value.back())) return false;
  return std::all_of(value.begin(), value.end(), ValueChar);
}

bool IsValidLabelKey(absl::string_view key) {
  absl::string_view name = key;
  const size_t slash = key.find('/');
  if (slash != absl::string_view::npos) {
    const absl::string_view prefix = key.substr(0, slash);
    name = key.substr(slash + 1);
    if (prefix.empty() || prefix.size() > 253) return false;
    for (absl::string_view part : absl::StrSplit(prefix, '.')) {
      if (part.empty() || part.size() > 63 || !Alnum(part.front()) || !Alnum(part.back()))
        return false;
      for (char c : part) {
        if (!(std::islower(static_cast<unsigned char>(c)) ||
              std::isdigit(static_cast<unsigned char>(c)) || c == '-')) {
          return false;
        }
      }
    }
  }
  return !name.empty() && IsValidLabelValue(name);
}

nlohmann::ordered_json LabelsDocument(const node::NodeInventory& inv, const LabelSet& set) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (const auto& [k, v] : set.labels) out[k] = v;
  nlohmann::ordered_json metadata = {{"hostname", inv.hostname}};
  if (inv.simulated_profile) metadata["simulated"] = *inv.simulated_profile;
  metadata["gpunodeVersion"] = GPUNODE_VERSION;
  return {{"apiVersion", "gpunode/v1"},
          {"kind", "NodeLabels"},
          {"metadata", metadata},
          {"labels", out},
          {"warnings", set.warnings}};
}

}  // namespace gpunode::labels
