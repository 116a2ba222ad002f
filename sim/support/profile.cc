#include "sim/support/profile.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <utility>

#include "sim/support/profile_internal.h"
#include "sim/support/str.h"
#include "src/base/embedded.h"
#include "src/base/version.h"
#include "src/base/yaml.h"
#include "yaml-cpp/yaml.h"

namespace gpunode::sim {

using namespace profile_internal;  // NOLINT(build/namespaces): the tables and helpers of this file's siblings

const std::vector<std::string_view>& UnsupportedFieldNames() {
  static const std::vector<std::string_view> kNames = {
      "vbios",       "minor_number",  "memory",        "persistence_mode",
      "ecc",         "retired_pages", "remapped_rows", "pcie",
      "temperature", "power_usage",   "power_limit",   "enforced_power_limit",
      "energy",      "clocks",        "utilization",   "compute_capability",
      "processes",   "mig",           "nvlink",        "events",
      "topology",    "attributes"};
  return kNames;
}

nvmlReturn_t NodeProfile::EffectiveInitError() const {
  if (driver.init_error) return *driver.init_error;
  if (!host.module.loaded) return NVML_ERROR_DRIVER_NOT_LOADED;
  if (host.module.version != driver.version) return NVML_ERROR_LIB_RM_VERSION_MISMATCH;
  return NVML_SUCCESS;
}

int NodeProfile::EffectiveCudaInitError() const {
  if (driver.cuda_init_error) return *driver.cuda_init_error;
  if (!host.module.loaded) return GPUNODE_CUDA_ERROR_NO_DEVICE;
  if (host.module.version != driver.version) return GPUNODE_CUDA_ERROR_SYSTEM_DRIVER_MISMATCH;
  for (const Gpu& g : gpus) {
    if (!g.lost) return GPUNODE_CUDA_SUCCESS;
  }
  return GPUNODE_CUDA_ERROR_NO_DEVICE;
}

nvmlGpuTopologyLevel_t NodeProfile::CommonAncestor(unsigned a, unsigned b) const {
  if (a == b) return NVML_TOPOLOGY_INTERNAL;
  for (const TopologyOverride& t : topology) {
    if ((t.a == a && t.b == b) || (t.a == b && t.b == a)) return t.level;
  }
  const Gpu& ga = gpus[a];
  const Gpu& gb = gpus[b];
  if (!ga.pcie_switch.empty() && ga.pcie_switch == gb.pcie_switch) return NVML_TOPOLOGY_SINGLE;
  if (ga.numa_node >= 0 && ga.numa_node == gb.numa_node) return NVML_TOPOLOGY_NODE;
  return NVML_TOPOLOGY_SYSTEM;
}

const Gpu* NodeProfile::FindGpuByBusId(std::string_view bus_id) const {
  for (const Gpu& g : gpus) {
    if (g.bus_id == Lower(bus_id)) return &g;
  }
  return nullptr;
}

std::optional<nvmlReturn_t> NvmlReturnFromName(std::string_view name) {
  std::string s = Upper(name);
  if (s.rfind("NVML_ERROR_", 0) == 0) s = s.substr(11);
  if (s == "NVML_SUCCESS") s = "SUCCESS";
  for (const auto& e : kReturnNames) {
    if (e.name == s) return e.code;
  }
  return std::nullopt;
}

bool ParseBusId(std::string_view bus_id, unsigned* domain, unsigned* bus, unsigned* device,
                unsigned* function) {
  // [dddd]dddd:bb:dd.f
  size_t c1 = bus_id.find(':');
  if (c1 == std::string_view::npos || (c1 != 4 && c1 != 8)) return false;
  if (bus_id.size() != c1 + 8 || bus_id[c1 + 3] != ':' || bus_id[c1 + 6] != '.') return false;
  auto hex = [](std::string_view s, unsigned* out) {
    if (s.empty()) return false;
    for (char c : s) {
      if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
    }
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *out, 16);
    return ec == std::errc() && ptr == s.data() + s.size();
  };
  return hex(bus_id.substr(0, c1), domain) && hex(bus_id.substr(c1 + 1, 2), bus) &&
         hex(bus_id.substr(c1 + 4, 2), device) && hex(bus_id.substr(c1 + 7, 1), function) &&
         *domain <= 0xffff && *device < 32 && *function < 8;
}

std::string NvmlBusId(std::string_view sysfs_bus_id) {
  unsigned d = 0, b = 0, dev = 0, f = 0;
  ParseBusId(sysfs_bus_id, &d, &b, &dev, &f);
  return absl::StrFormat("%08X:%02X:%02X.%X", d, b, dev, f);
}

std::string NvmlLegacyBusId(std::string_view sysfs_bus_id) {
  unsigned d = 0, b = 0, dev = 0, f = 0;
  ParseBusId(sysfs_bus_id, &d, &b, &dev, &f);
  return absl::StrFormat("%04X:%02X:%02X.%X", d, b, dev, f);
}

StatusOr<NodeProfile> ParseProfile(std::string_view text, std::string_view origin) {
  if (text.size() > kMaxProfileBytes) {
    return absl::InvalidArgumentError(
        str::Cat("profile ", origin, ": larger than ", kMaxProfileBytes, " bytes"));
  }
  try {
    auto loaded = LoadYaml(absl::string_view(text.data(), text.size()), str::Cat("profile ", origin));  // nesting limit; never throws
    if (!loaded.ok()) return loaded.status();
    return ParseTree(*loaded, origin);
  } catch (const YAML::Exception& e) {
    std::string where =
        e.mark.is_null() ? ""
                         : str::Cat("line ", e.mark.line + 1, ", column ", e.mark.column + 1, ": ");
    return absl::InvalidArgumentError(str::Cat("profile ", origin, ": ", where, e.msg));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(str::Cat("profile ", origin, ": ", e.what()));
  } catch (...) {
    return absl::InvalidArgumentError(str::Cat("profile ", origin, ": malformed input"));
  }
}

std::vector<std::string> BuiltinProfileNames() {
  std::vector<std::string> names;
  for (const EmbeddedFile& f : EmbeddedFiles()) {
    if (f.group != "profiles") continue;
    std::string_view n = f.name;
    if (n.size() > 5 && n.substr(n.size() - 5) == ".yaml")
      names.emplace_back(n.substr(0, n.size() - 5));
  }
  std::sort(names.begin(), names.end());
  return names;
}

StatusOr<ProfileSource> ResolveProfile(std::string_view ref) {
  std::string name(ref);
  if (name.size() > 5 && name.substr(name.size() - 5) == ".yaml" &&
      name.find('/') == std::string::npos) {
    name = name.substr(0, name.size() - 5);
  }
  if (name.find('/') == std::string::npos) {
    if (auto data = FindEmbedded("profiles", str::Cat(name, ".yaml"))) {
      return ProfileSource{name, "", std::string(*data)};
    }
  }
  std::string path(ref);
  std::ifstream in(path, std::ios::binary);
  if (in) {
    std::ostringstream ss;
    ss << in.rdbuf();
    if (in.bad()) return ErrnoToStatus(errno, "read profile", path);
    std::string base = path.substr(path.find_last_of('/') + 1);
    size_t dot = base.find_last_of('.');
    if (dot != std::string::npos && dot > 0) base = base.substr(0, dot);
    return ProfileSource{base, path, ss.str()};
  }
  return absl::NotFoundError(str::Cat("profile ", Quote(ref),
                                      ": no such built-in profile or file (built-in: ",
                                      str::Join(BuiltinProfileNames(), ", "), ")"));
}

StatusOr<NodeProfile> LoadProfileFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return ErrnoToStatus(errno, "open profile", path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ParseProfile(ss.str(), path);
}

}  // namespace gpunode::sim
