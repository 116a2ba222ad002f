#include "src/dra/device_model.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "src/devices/devices.h"
#include "src/gpu/gpu.h"

namespace gpunode::dra {
namespace {

using nlohmann::json;

// The API's limit on a string or version attribute's value.
constexpr size_t kMaxAttributeValue = 64;

// go-nvlib's names (pkg/nvlib/device GetArchitectureAsString) of nvmlDeviceArchitecture_t.
const char* ArchitectureName(unsigned code) {
  switch (code) {
    case 2: return "Kepler";
    case 3: return "Maxwell";
    case 4: return "Pascal";
    case 5: return "Volta";
    case 6: return "Turing";
    case 7: return "Ampere";
    case 8: return "Ada Lovelace";
    case 9: return "Hopper";
    case 10: return "Blackwell";
    case 0xffffffffu: return "Unknown";
  }
  return nullptr;
}

// go-nvlib's names (GetBrandAsString) of nvmlBrandType_t.
const char* BrandName(unsigned code) {
  static constexpr const char* kNames[] = {
      "Unknown",   "Quadro",     "Tesla",     "NVS",       "Grid",      "GeForce",
      "Titan",     "NvidiaVApps", "NvidiaVPC", "NvidiaVCS", "NvidiaVWS", "NvidiaCloudGaming",
      "QuadroRTX", "NvidiaRTX",  "Nvidia",    "GeForceRTX", "TitanRTX"};
  return code < std::size(kNames) ? kNames[code] : nullptr;
}

// go-nvlib's names (GetAddressingModeAsString) of nvmlDeviceAddressingModeType_t.
const char* AddressingModeName(unsigned code) {
  switch (code) {
    case 0: return "None";
    case 1: return "HMM";
    case 2: return "ATS";
  }
  return nullptr;
}

// "0000:18:00.0": the extended BDF form the resource.kubernetes.io/pciBusID attribute requires.
bool IsBdf(const std::string& id) {
  if (id.size() != 12 || id[4] != ':' || id[7] != ':' || id[10] != '.') return false;
  for (size_t i = 0; i < id.size(); ++i) {
    if (i == 4 || i == 7 || i == 10) continue;
    const char c = id[i];
    if (!(absl::ascii_isdigit(static_cast<unsigned char>(c)) || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// NVIDIA's toRFC1123Compliant of a profile without its dots: lower case, anything but [a-z0-9-.]
// as '-', no '-' at either end, no '.' at the end ("1g.10gb+me" -> "1g10gb-me").
std::string ProfileForName(const std::string& profile) {
  std::string out;
  for (char c : absl::AsciiStrToLower(profile)) {
    if (c == '.') continue;
    out.push_back(absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' ? c : '-');
  }
  const size_t first = out.find_first_not_of('-');
  if (first == std::string::npos) return "";
  out = out.substr(first, out.find_last_not_of('-') - first + 1);
  return out;
}

// The attributes a GPU and its MIG devices share.
class Attributes {
 public:
  Attributes(std::map<std::string, json>* out, std::vector<std::string>* problems, std::string device)
      : out_(*out), problems_(problems), device_(std::move(device)) {}

  void SetString(const std::string& name, const std::string& value) {
    if (value.empty()) return;
    if (value.size() > kMaxAttributeValue) return Problem(name, "longer than 64 characters: left out");
    out_[name] = json{{"string", value}};
  }
  void SetVersion(const std::string& name, const std::string& value) {
    if (value.empty()) return;
    if (value.size() > kMaxAttributeValue) return Problem(name, "longer than 64 characters: left out");
    out_[name] = json{{"version", value}};
  }

 private:
  void Problem(const std::string& name, const std::string& what) {
    if (problems_ != nullptr) problems_->push_back(absl::StrCat(device_, ": attribute ", name, " ", what));
  }

  std::map<std::string, json>& out_;
  std::vector<std::string>* problems_;
  std::string device_;
};

void CommonAttributes(const node::NodeInventory& inv, const gpu::GpuInfo& g, Attributes& a) {
  a.SetString("productName", g.name);
  if (g.brand) a.SetString("brand", BrandName(*g.brand) ? BrandName(*g.brand) : "");
  if (g.architecture) a.SetString("architecture", ArchitectureName(*g.architecture) ? ArchitectureName(*g.architecture) : "");
  if (g.cc_major && g.cc_minor && *g.cc_major >= 0 && *g.cc_minor >= 0) {
    a.SetVersion("cudaComputeCapability",
              SemanticVersion(Version::Of({static_cast<uint32_t>(*g.cc_major), static_cast<uint32_t>(*g.cc_minor)})));
  }
  if (inv.driver.driver_version) a.SetVersion("driverVersion", SemanticVersion(*inv.driver.driver_version));
  // NVIDIA writes the CUDA version as major.minor from NVML's integer: the patch is always 0.
  if (inv.driver.cuda_version) a.SetVersion("cudaDriverVersion", SemanticVersion(inv.driver.cuda_version->Truncate(2)));
  if (g.addressing_mode && AddressingModeName(*g.addressing_mode)) {
    a.SetString("addressingMode", AddressingModeName(*g.addressing_mode));
  }
  if (IsBdf(g.pci_bus_id)) {
    a.SetString("resource.kubernetes.io/pciBusID", g.pci_bus_id);
    for (const node::PciDevice& d : inv.hardware.gpus) {
      if (d.bus_id == g.pci_bus_id) a.SetString("resource.kubernetes.io/pcieRoot", d.pcie_root);
    }
  }
}

DraDevice FullGpu(const node::NodeInventory& inv, const gpu::GpuInfo& g, std::vector<std::string>* problems) {
  DraDevice d;
  d.name = absl::StrCat("gpu-", *g.minor_number);
  d.type = "gpu";
  d.uuid = g.uuid;
  d.minor = *g.minor_number;
  d.index = g.index;
  d.pci_bus_id = g.pci_bus_id;
  Attributes a(&d.attributes, problems, d.name);
  a.SetString("type", "gpu");
  a.SetString("uuid", g.uuid);
  CommonAttributes(inv, g, a);
  if (g.memory_total_bytes) d.capacity["memory"] = CanonicalBinaryQuantity(*g.memory_total_bytes);
  return d;
}

// "2g.20gb", or "1c.3g.40gb" for a compute instance smaller than its GPU instance (go-nvlib's
// form; NVIDIA's driver announces no such device).
std::string MigProfile(const gpu::GpuInfo& g, const gpu::MigDevice& m) {
  std::string profile = devices::MigProfileName(m, g.memory_total_bytes);
  if (m.compute_slices && m.slices && *m.compute_slices != *m.slices) {
    profile = absl::StrCat(*m.compute_slices, "c.", profile);
  }
  return profile;
}

std::optional<DraDevice> MigOf(const node::NodeInventory& inv, const gpu::GpuInfo& g, const gpu::MigDevice& m,
                               std::vector<std::string>* problems) {
  auto problem = [&](const std::string& what) {
    if (problems != nullptr) {
      problems->push_back(absl::StrCat("MIG device ", m.uuid.empty() ? absl::StrCat("#", m.index) : m.uuid,
                                       " of gpu-", *g.minor_number, ": ", what, ": left out"));
    }
    return std::nullopt;
  };
  if (m.uuid.empty()) return problem("no UUID");
  if (!m.gi_profile_id || !m.placement_start || !m.placement_size) {
    return problem("NVML gave no GPU instance profile and placement (they name the device)");
  }
  if (!m.slices || !m.memory_total_bytes) return problem("NVML gave no slice count or memory size");
  DraDevice d;
  d.profile = MigProfile(g, m);
  d.name = absl::StrCat("gpu-", *g.minor_number, "-mig-", ProfileForName(d.profile), "-", *m.gi_profile_id, "-",
                        *m.placement_start);
  d.type = "mig";
  d.uuid = m.uuid;
  d.parent_uuid = g.uuid;
  d.minor = *g.minor_number;
  d.index = g.index;
  d.pci_bus_id = g.pci_bus_id;
  Attributes a(&d.attributes, problems, d.name);
  a.SetString("type", "mig");
  a.SetString("uuid", m.uuid);
  a.SetString("parentUUID", g.uuid);
  a.SetString("profile", d.profile);
  CommonAttributes(inv, g, a);
  auto count = [&d](const char* name, const std::optional<unsigned>& v) {
    if (v) d.capacity[name] = CanonicalBinaryQuantity(*v);
  };
  count("multiprocessors", m.multiprocessors);
  count("copyEngines", m.copy_engines);
  count("decoders", m.decoders);
  count("encoders", m.encoders);
  count("jpegEngines", m.jpegs);
  count("ofaEngines", m.ofas);
  d.capacity["memory"] = CanonicalBinaryQuantity(*m.memory_total_bytes);
  // A GPU has 8 memory slices (NVIDIA announces them to tell placements apart).
  for (unsigned i = *m.placement_start; i < *m.placement_start + std::min(*m.placement_size, 8u); ++i) {
    d.capacity[absl::StrCat("memorySlice", i)] = "1";
  }
  return d;
}

}  // namespace

std::string CanonicalBinaryQuantity(uint64_t value) {
  if (value < 1024) return absl::StrCat(value);
  static constexpr const char* kSuffix[] = {"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
  size_t power = 0;
  while (value >= 1024 && value % 1024 == 0 && power + 1 < std::size(kSuffix)) {
    value /= 1024;
    ++power;
  }
  return absl::StrCat(value, kSuffix[power]);
}

std::string SemanticVersion(const Version& v) {
  if (v.empty()) return "";
  return absl::StrCat(v.major(), ".", v.minor(), ".", v.patch());
}

std::vector<DraDevice> DraDevicesOf(const node::NodeInventory& inv, std::vector<std::string>* problems) {
  std::vector<const gpu::GpuInfo*> gpus;
  for (const gpu::GpuInfo& g : inv.driver.gpus) {
    if (!g.minor_number) {
      if (problems != nullptr) {
        problems->push_back(absl::StrCat("GPU ", g.index, " (", g.uuid, "): NVML gave no minor number (it names the device): left out"));
      }
      continue;
    }
    if (g.uuid.empty()) {
      if (problems != nullptr) problems->push_back(absl::StrCat("gpu-", *g.minor_number, ": no UUID: left out"));
      continue;
    }
    gpus.push_back(&g);
  }
  std::sort(gpus.begin(), gpus.end(),
            [](const gpu::GpuInfo* a, const gpu::GpuInfo* b) { return *a->minor_number < *b->minor_number; });
  std::vector<DraDevice> out;
  for (const gpu::GpuInfo* g : gpus) {
    if (!g->mig_enabled.value_or(false)) {
      out.push_back(FullGpu(inv, *g, problems));
      continue;
    }
    std::vector<std::pair<unsigned, DraDevice>> migs;
    for (const gpu::MigDevice& m : g->mig_devices) {
      if (auto d = MigOf(inv, *g, m, problems)) migs.emplace_back(m.placement_start.value_or(0), std::move(*d));
    }
    std::sort(migs.begin(), migs.end(), [](const auto& a, const auto& b) {
      return std::tie(a.first, a.second.name) < std::tie(b.first, b.second.name);
    });
    for (auto& [start, d] : migs) out.push_back(std::move(d));
  }
  // Two devices of one name (a GPU instance listed twice) would make the slice invalid: keep the first.
  std::vector<DraDevice> unique;
  for (DraDevice& d : out) {
    const bool seen = std::any_of(unique.begin(), unique.end(), [&](const DraDevice& u) { return u.name == d.name; });
    if (seen) {
      if (problems != nullptr) problems->push_back(absl::StrCat(d.name, ": a second device of this name: left out"));
      continue;
    }
    unique.push_back(std::move(d));
  }
  return unique;
}

}  // namespace gpunode::dra
