#include "sim/support/profile.h"

#include "src/base/yaml.h"
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <initializer_list>
#include <sstream>
#include <utility>

#include "absl/strings/str_format.h"
#include "sim/support/str.h"
#include "src/base/embedded.h"
#include "src/base/version.h"
#include "yaml-cpp/yaml.h"

namespace gpunode::sim {
namespace {

constexpr size_t kMaxProfileBytes = 4 << 20;
constexpr size_t kMaxGpus = 64;
constexpr size_t kMaxListItems = 4096;

struct ReturnName {
  nvmlReturn_t code;
  std::string_view name;
};
constexpr ReturnName kReturnNames[] = {
    {NVML_SUCCESS, "SUCCESS"},
    {NVML_ERROR_UNINITIALIZED, "UNINITIALIZED"},
    {NVML_ERROR_INVALID_ARGUMENT, "INVALID_ARGUMENT"},
    {NVML_ERROR_NOT_SUPPORTED, "NOT_SUPPORTED"},
    {NVML_ERROR_NO_PERMISSION, "NO_PERMISSION"},
    {NVML_ERROR_ALREADY_INITIALIZED, "ALREADY_INITIALIZED"},
    {NVML_ERROR_NOT_FOUND, "NOT_FOUND"},
    {NVML_ERROR_INSUFFICIENT_SIZE, "INSUFFICIENT_SIZE"},
    {NVML_ERROR_INSUFFICIENT_POWER, "INSUFFICIENT_POWER"},
    {NVML_ERROR_DRIVER_NOT_LOADED, "DRIVER_NOT_LOADED"},
    {NVML_ERROR_TIMEOUT, "TIMEOUT"},
    {NVML_ERROR_IRQ_ISSUE, "IRQ_ISSUE"},
    {NVML_ERROR_LIBRARY_NOT_FOUND, "LIBRARY_NOT_FOUND"},
    {NVML_ERROR_FUNCTION_NOT_FOUND, "FUNCTION_NOT_FOUND"},
    {NVML_ERROR_CORRUPTED_INFOROM, "CORRUPTED_INFOROM"},
    {NVML_ERROR_GPU_IS_LOST, "GPU_IS_LOST"},
    {NVML_ERROR_RESET_REQUIRED, "RESET_REQUIRED"},
    {NVML_ERROR_OPERATING_SYSTEM, "OPERATING_SYSTEM"},
    {NVML_ERROR_LIB_RM_VERSION_MISMATCH, "LIB_RM_VERSION_MISMATCH"},
    {NVML_ERROR_IN_USE, "IN_USE"},
    {NVML_ERROR_MEMORY, "MEMORY"},
    {NVML_ERROR_NO_DATA, "NO_DATA"},
    {NVML_ERROR_VGPU_ECC_NOT_SUPPORTED, "VGPU_ECC_NOT_SUPPORTED"},
    {NVML_ERROR_INSUFFICIENT_RESOURCES, "INSUFFICIENT_RESOURCES"},
    {NVML_ERROR_FREQ_NOT_SUPPORTED, "FREQ_NOT_SUPPORTED"},
    {NVML_ERROR_ARGUMENT_VERSION_MISMATCH, "ARGUMENT_VERSION_MISMATCH"},
    {NVML_ERROR_DEPRECATED, "DEPRECATED"},
    {NVML_ERROR_NOT_READY, "NOT_READY"},
    {NVML_ERROR_GPU_NOT_FOUND, "GPU_NOT_FOUND"},
    {NVML_ERROR_INVALID_STATE, "INVALID_STATE"},
    {NVML_ERROR_UNKNOWN, "UNKNOWN"},
};

struct CudaName {
  int code;
  std::string_view name;
};
constexpr CudaName kCudaInitNames[] = {
    {0, "SUCCESS"},     {3, "NOT_INITIALIZED"},          {35, "INSUFFICIENT_DRIVER"},
    {100, "NO_DEVICE"}, {803, "SYSTEM_DRIVER_MISMATCH"}, {804, "COMPAT_NOT_SUPPORTED_ON_DEVICE"},
    {999, "UNKNOWN"},
};

struct EventName {
  EventType type;
  std::string_view name;
};
constexpr EventName kEventNames[] = {
    {EventType::kXid, "xid"},
    {EventType::kSingleBitEcc, "single_bit_ecc"},
    {EventType::kDoubleBitEcc, "double_bit_ecc"},
    {EventType::kPState, "pstate"},
    {EventType::kClock, "clock"},
};

struct TopologyName {
  nvmlGpuTopologyLevel_t level;
  std::string_view name;
};
constexpr TopologyName kTopologyNames[] = {
    {NVML_TOPOLOGY_INTERNAL, "INTERNAL"}, {NVML_TOPOLOGY_SINGLE, "SINGLE"},
    {NVML_TOPOLOGY_MULTIPLE, "MULTIPLE"}, {NVML_TOPOLOGY_HOSTBRIDGE, "HOSTBRIDGE"},
    {NVML_TOPOLOGY_NODE, "NODE"},         {NVML_TOPOLOGY_SYSTEM, "SYSTEM"},
};

// The `gpm:` keys of a GPU: nvmlGpmMetricId_t and the largest value the profile may give.
struct GpmMetricName {
  unsigned id;
  std::string_view name;
  double max;
};
constexpr GpmMetricName kGpmMetricNames[] = {
    {NVML_GPM_METRIC_GRAPHICS_UTIL, "graphics_util", 100},
    {NVML_GPM_METRIC_SM_UTIL, "sm_util", 100},
    {NVML_GPM_METRIC_SM_OCCUPANCY, "sm_occupancy", 100},
    {NVML_GPM_METRIC_ANY_TENSOR_UTIL, "tensor_util", 100},
    {NVML_GPM_METRIC_DRAM_BW_UTIL, "dram_bw_util", 100},
    {NVML_GPM_METRIC_FP64_UTIL, "fp64_util", 100},
    {NVML_GPM_METRIC_FP32_UTIL, "fp32_util", 100},
    {NVML_GPM_METRIC_FP16_UTIL, "fp16_util", 100},
    {NVML_GPM_METRIC_PCIE_TX_PER_SEC, "pcie_tx_mib_s", 1e7},
    {NVML_GPM_METRIC_PCIE_RX_PER_SEC, "pcie_rx_mib_s", 1e7},
};

std::string Quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s.substr(0, 60)) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += absl::StrFormat("\\x%02x", static_cast<unsigned char>(c));
    } else {
      out += c;
    }
  }
  if (s.size() > 60) out += "...";
  return out + "\"";
}

std::string Describe(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Null:
      return "null";
    case YAML::NodeType::Scalar:
      return Quote(n.Scalar());
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a mapping";
    default:
      return "nothing";
  }
}

std::string Join(std::string_view path, std::string_view key) {
  if (path.empty()) return std::string(key);
  return str::Cat(path, ".", key);
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string Upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

// Parses a decimal or 0x-hex integer, the whole text.
bool ParseInt(std::string_view text, int64_t* out) {
  bool neg = false;
  std::string_view t = text;
  if (!t.empty() && (t[0] == '-' || t[0] == '+')) {
    neg = t[0] == '-';
    t.remove_prefix(1);
  }
  int base = 10;
  if (t.size() > 2 && t[0] == '0' && (t[1] == 'x' || t[1] == 'X')) {
    base = 16;
    t.remove_prefix(2);
  }
  if (t.empty()) return false;
  uint64_t v = 0;
  auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), v, base);
  if (ec != std::errc() || ptr != t.data() + t.size()) return false;
  if (v > static_cast<uint64_t>(INT64_MAX)) return false;
  *out = neg ? -static_cast<int64_t>(v) : static_cast<int64_t>(v);
  return true;
}

// A strict reader over a YAML tree: the first error wins and is kept with its key path.
class Reader {
 public:
  explicit Reader(std::string_view origin) : origin_(origin) {}

  bool ok() const { return error_.empty(); }
  Status status() const {
    if (ok()) return absl::OkStatus();
    return absl::InvalidArgumentError(str::Cat("profile ", origin_, ": ", error_));
  }
  void Fail(std::string_view path, std::string_view msg) {
    if (!ok()) return;
    error_ = path.empty() ? std::string(msg) : str::Cat(path, ": ", msg);
  }

  // `n` must be a mapping whose keys are all in `keys`.
  bool Map(const YAML::Node& n, std::string_view path,
           std::initializer_list<std::string_view> keys) {
    if (!ok()) return false;
    if (!n.IsMap()) {
      Fail(path, str::Cat("expected a mapping, got ", Describe(n)));
      return false;
    }
    for (auto it = n.begin(); it != n.end(); ++it) {
      if (!it->first.IsScalar()) {
        Fail(path, "keys must be plain strings");
        return false;
      }
      const std::string& key = it->first.Scalar();
      if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
        Fail(Join(path, key),
             str::Cat("unknown key (expected one of: ", str::Join(keys, ", "), ")"));
        return false;
      }
    }
    return true;
  }

  // `n` must be a list of at most `max` items.
  bool Seq(const YAML::Node& n, std::string_view path, size_t max = kMaxListItems) {
    if (!ok()) return false;
    if (!n.IsSequence()) {
      Fail(path, str::Cat("expected a list, got ", Describe(n)));
      return false;
    }
    if (n.size() > max) {
      Fail(path, str::Cat("at most ", max, " items are allowed, got ", n.size()));
      return false;
    }
    return true;
  }

  // Field getters: return true when the key is present and valid; absent keys keep `*out` and
  // fail only when `required`.
  bool Present(const YAML::Node& map, std::string_view key, std::string_view path, bool required) {
    if (!ok()) return false;
    if (map[std::string(key)].IsDefined()) return true;
    if (required) Fail(Join(path, key), "required field is missing");
    return false;
  }

  bool Str(const YAML::Node& map, std::string_view key, std::string_view path, std::string* out,
           bool required = false) {
    if (!Present(map, key, path, required)) return false;
    const YAML::Node n = map[std::string(key)];
    if (!n.IsScalar()) {
      Fail(Join(path, key), str::Cat("expected a string, got ", Describe(n)));
      return false;
    }
    *out = n.Scalar();
    return true;
  }

  bool Bool(const YAML::Node& map, std::string_view key, std::string_view path, bool* out,
            bool required = false) {
    if (!Present(map, key, path, required)) return false;
    const YAML::Node n = map[std::string(key)];
    bool v = false;
    if (!n.IsScalar() || !YAML::convert<bool>::decode(n, v)) {
      Fail(Join(path, key), str::Cat("expected true or false, got ", Describe(n)));
      return false;
    }
    *out = v;
    return true;
  }

  template <typename T>
  bool Int(const YAML::Node& map, std::string_view key, std::string_view path, T* out, int64_t min,
           int64_t max, bool required = false) {
    if (!Present(map, key, path, required)) return false;
    return IntNode(map[std::string(key)], Join(path, key), out, min, max);
  }

  template <typename T>
  bool IntNode(const YAML::Node& n, std::string_view path, T* out, int64_t min, int64_t max) {
    int64_t v = 0;
    if (!n.IsScalar() || !ParseInt(n.Scalar(), &v) || v < min || v > max) {
      Fail(path, str::Cat("expected an integer ", min, "-", max, ", got ", Describe(n)));
      return false;
    }
    *out = static_cast<T>(v);
    return true;
  }

  bool Double(const YAML::Node& map, std::string_view key, std::string_view path, double* out,
              double min, double max) {
    if (!Present(map, key, path, false)) return false;
    const YAML::Node n = map[std::string(key)];
    double v = 0;
    bool good = n.IsScalar();
    if (good) {
      const std::string& s = n.Scalar();
      auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
      good = !s.empty() && ec == std::errc() && ptr == s.data() + s.size() && v >= min && v <= max;
    }
    if (!good) {
      Fail(Join(path, key), str::Cat("expected a number ", min, "-", max, ", got ", Describe(n)));
      return false;
    }
    *out = v;
    return true;
  }

  // A string that must be one of `names` (case-insensitive); returns its index.
  bool Enum(const YAML::Node& map, std::string_view key, std::string_view path,
            const std::vector<std::string_view>& names, size_t* index) {
    std::string s;
    if (!Str(map, key, path, &s)) return false;
    for (size_t i = 0; i < names.size(); ++i) {
      if (Lower(names[i]) == Lower(s)) {
        *index = i;
        return true;
      }
    }
    Fail(Join(path, key), str::Cat("expected one of ", str::Join(names, ", "), ", got ", Quote(s)));
    return false;
  }

  bool BusId(const YAML::Node& map, std::string_view key, std::string_view path, std::string* out,
             bool required) {
    std::string s;
    if (!Str(map, key, path, &s, required)) return false;
    unsigned d, b, dev, f;
    if (!ParseBusId(s, &d, &b, &dev, &f)) {
      Fail(Join(path, key),
           str::Cat("expected a PCI bus id like \"0000:18:00.0\", got ", Quote(s)));
      return false;
    }
    *out = absl::StrFormat("%04x:%02x:%02x.%x", d, b, dev, f);
    return true;
  }

  bool VersionStr(const YAML::Node& map, std::string_view key, std::string_view path,
                  std::string* out, bool required) {
    std::string s;
    if (!Str(map, key, path, &s, required)) return false;
    if (!Version::Parse(s).ok()) {
      Fail(Join(path, key),
           str::Cat("expected a dotted version like \"580.95.05\", got ", Quote(s)));
      return false;
    }
    *out = s;
    return true;
  }

 private:
  std::string origin_;
  std::string error_;
};

// Deep-merges `overlay` onto a copy of `base` (mappings merge key by key; anything else replaces).
YAML::Node Merge(const YAML::Node& base, const YAML::Node& overlay, int depth = 0) {
  if (!base.IsMap() || !overlay.IsMap() || depth > 8) return YAML::Clone(overlay);
  YAML::Node out = YAML::Clone(base);
  for (auto it = overlay.begin(); it != overlay.end(); ++it) {
    if (!it->first.IsScalar()) continue;  // reported by the strict reader on the overlay itself
    const std::string key = it->first.Scalar();
    YAML::Node prev = out[key];
    out[key] = prev.IsDefined() ? Merge(prev, it->second, depth + 1) : YAML::Clone(it->second);
  }
  return out;
}

uint64_t Fnv1a(std::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  return h;
}

std::string GeneratedUuid(const std::string& prefix, std::string_view seed) {
  uint64_t a = Fnv1a(seed);
  uint64_t b = Fnv1a(str::Cat(seed, "#2"));
  return absl::StrFormat("%s-%08x-%04x-%04x-%04x-%012x", prefix, a >> 32, (a >> 16) & 0xffff,
                         a & 0xffff, b >> 48, b & 0xffffffffffffull);
}

bool ValidUuid(std::string_view uuid, std::string_view prefix) {
  if (uuid.size() < prefix.size() + 2 || uuid.substr(0, prefix.size()) != prefix ||
      uuid[prefix.size()] != '-')
    return false;
  for (char c : uuid.substr(prefix.size() + 1)) {
    if (!std::isxdigit(static_cast<unsigned char>(c)) && c != '-') return false;
  }
  return true;
}

std::vector<std::string_view> Names(auto const& table) {
  std::vector<std::string_view> out;
  for (const auto& e : table) out.push_back(e.name);
  return out;
}

void ParseHost(Reader& r, const YAML::Node& n, Host* host) {
  const std::string p = "host";
  if (!r.Map(n, p,
             {"hostname", "kernel_release", "numa_nodes", "module", "nouveau_loaded",
              "cuda_toolkit", "pci_devices", "files", "empty_files", "nvidia_utils"}))
    return;
  r.Bool(n, "nvidia_utils", p, &host->nvidia_utils);
  r.Str(n, "hostname", p, &host->hostname);
  r.Str(n, "kernel_release", p, &host->kernel_release);
  r.Int(n, "numa_nodes", p, &host->numa_nodes, 1, 64);
  r.Bool(n, "nouveau_loaded", p, &host->nouveau_loaded);
  if (r.Present(n, "module", p, false)) {
    const YAML::Node m = n["module"];
    const std::string mp = "host.module";
    if (r.Map(m, mp, {"loaded", "flavor", "version"})) {
      r.Bool(m, "loaded", mp, &host->module.loaded);
      size_t flavor = 0;
      if (r.Enum(m, "flavor", mp, {"open", "proprietary"}, &flavor)) {
        host->module.flavor = flavor == 0 ? ModuleFlavor::kOpen : ModuleFlavor::kProprietary;
      }
      r.VersionStr(m, "version", mp, &host->module.version, false);
    }
  }
  if (r.Present(n, "cuda_toolkit", p, false)) {
    const YAML::Node t = n["cuda_toolkit"];
    const std::string tp = "host.cuda_toolkit";
    if (r.Map(t, tp, {"version", "nvcc_version"})) {
      CudaToolkit tk;
      r.VersionStr(t, "version", tp, &tk.version, true);
      r.VersionStr(t, "nvcc_version", tp, &tk.nvcc_version, false);
      if (tk.nvcc_version.empty() && r.ok()) {
        Version v = Version::Parse(tk.version).value();
        tk.nvcc_version = str::Cat(v.major(), ".", v.minor(), ".", 131);
      }
      host->cuda_toolkit = tk;
    }
  }
  if (r.Present(n, "pci_devices", p, false)) {
    const YAML::Node list = n["pci_devices"];
    if (r.Seq(list, "host.pci_devices", 256)) {
      for (size_t i = 0; i < list.size() && r.ok(); ++i) {
        const YAML::Node d = list[i];
        const std::string dp = str::Cat("host.pci_devices[", i, "]");
        if (!r.Map(d, dp, {"bus_id", "vendor", "device", "class", "numa_node", "driver", "name"}))
          break;
        PciFunction f;
        r.BusId(d, "bus_id", dp, &f.bus_id, true);
        r.Int(d, "vendor", dp, &f.vendor, 0, 0xffff);
        r.Int(d, "device", dp, &f.device, 0, 0xffff, true);
        r.Int(d, "class", dp, &f.class_code, 0, 0xffffff, true);
        r.Int(d, "numa_node", dp, &f.numa_node, -1, 63);
        r.Str(d, "driver", dp, &f.driver);
        r.Str(d, "name", dp, &f.name);
        host->pci_devices.push_back(f);
      }
    }
  }
  // host.files: see ParseHostFiles.
  if (r.Present(n, "empty_files", p, false)) {
    const YAML::Node list = n["empty_files"];
    if (r.Seq(list, "host.empty_files", 1024)) {
      for (size_t i = 0; i < list.size() && r.ok(); ++i) {
        const std::string ep = str::Cat("host.empty_files[", i, "]");
        if (!list[i].IsScalar() || list[i].Scalar().empty() || list[i].Scalar()[0] != '/') {
          r.Fail(ep, str::Cat("expected an absolute path, got ", Describe(list[i])));
          break;
        }
        host->empty_files.push_back(list[i].Scalar());
      }
    }
  }
}

// host.files is a free-form mapping of absolute paths to contents.
void ParseHostFiles(Reader& r, const YAML::Node& host, Host* out) {
  if (!r.ok() || !host.IsMap() || !host["files"].IsDefined()) return;
  const YAML::Node files = host["files"];
  if (!files.IsMap()) {
    r.Fail("host.files",
           str::Cat("expected a mapping of paths to contents, got ", Describe(files)));
    return;
  }
  if (files.size() > 1024) {
    r.Fail("host.files", "at most 1024 files are allowed");
    return;
  }
  for (auto it = files.begin(); it != files.end(); ++it) {
    if (!it->first.IsScalar() || it->first.Scalar().empty() || it->first.Scalar()[0] != '/') {
      r.Fail("host.files", str::Cat("keys must be absolute paths, got ", Describe(it->first)));
      return;
    }
    const std::string fp = str::Cat("host.files.", it->first.Scalar());
    if (!it->second.IsScalar()) {
      r.Fail(fp, str::Cat("expected the file content as a string, got ", Describe(it->second)));
      return;
    }
    out->files[it->first.Scalar()] = it->second.Scalar();
  }
}

void ParseDriver(Reader& r, const YAML::Node& n, Driver* d) {
  const std::string p = "driver";
  if (!r.Map(n, p, {"version", "nvml_version", "cuda_version", "init_error", "cuda_init_error"}))
    return;
  r.VersionStr(n, "version", p, &d->version, true);
  r.VersionStr(n, "nvml_version", p, &d->nvml_version, false);
  r.VersionStr(n, "cuda_version", p, &d->cuda_version, true);
  if (r.Present(n, "init_error", p, false)) {
    std::string s;
    if (r.Str(n, "init_error", p, &s)) {
      auto code = NvmlReturnFromName(s);
      if (!code) {
        r.Fail("driver.init_error",
               str::Cat("expected an NVML return code name (", str::Join(Names(kReturnNames), ", "),
                        "), got ", Quote(s)));
      } else {
        d->init_error = *code;
      }
    }
  }
  if (r.Present(n, "cuda_init_error", p, false)) {
    const YAML::Node c = n["cuda_init_error"];
    int64_t v = 0;
    if (c.IsScalar() && ParseInt(c.Scalar(), &v) && v >= 0 && v <= 999) {
      d->cuda_init_error = static_cast<int>(v);
    } else {
      std::string s = c.IsScalar() ? Upper(c.Scalar()) : "";
      if (s.rfind("CUDA_ERROR_", 0) == 0) s = s.substr(11);
      if (s == "CUDA_SUCCESS") s = "SUCCESS";
      bool found = false;
      for (const auto& e : kCudaInitNames) {
        if (e.name == s) {
          d->cuda_init_error = e.code;
          found = true;
        }
      }
      if (!found) {
        r.Fail("driver.cuda_init_error",
               str::Cat("expected a CUresult 0-999 or one of ",
                        str::Join(Names(kCudaInitNames), ", "), ", got ", Describe(c)));
      }
    }
  }
  if (r.ok() && d->nvml_version.empty()) {
    d->nvml_version = str::Cat(Version::Parse(d->cuda_version).value().major(), ".", d->version);
  }
}

void ParseMig(Reader& r, const YAML::Node& n, const std::string& p, const Gpu& gpu, Mig* mig) {
  if (!r.Map(n, p, {"enabled", "pending", "max_devices", "devices"})) return;
  r.Bool(n, "enabled", p, &mig->enabled);
  mig->pending = mig->enabled;
  r.Bool(n, "pending", p, &mig->pending);
  r.Int(n, "max_devices", p, &mig->max_devices, 0, 8);
  if (r.Present(n, "devices", p, false)) {
    const YAML::Node list = n["devices"];
    if (!r.Seq(list, Join(p, "devices"), 8)) return;
    for (size_t i = 0; i < list.size() && r.ok(); ++i) {
      const YAML::Node d = list[i];
      const std::string dp = str::Cat(p, ".devices[", i, "]");
      if (!r.Map(d, dp,
                 {"profile", "uuid", "gpu_instance_id", "compute_instance_id", "slices",
                  "compute_slices", "memory_mib", "multiprocessors"}))
        return;
      MigDevice m;
      r.Str(d, "profile", dp, &m.profile, true);
      r.Int(d, "gpu_instance_id", dp, &m.gpu_instance_id, 0, 64, true);
      r.Int(d, "compute_instance_id", dp, &m.compute_instance_id, 0, 64);
      r.Int(d, "slices", dp, &m.slices, 1, 8, true);
      m.compute_slices = m.slices;
      r.Int(d, "compute_slices", dp, &m.compute_slices, 1, 8);
      r.Int(d, "memory_mib", dp, &m.memory_mib, 1, int64_t{1} << 30, true);
      r.Int(d, "multiprocessors", dp, &m.multiprocessors, 0, 1024);
      if (r.Str(d, "uuid", dp, &m.uuid) && !ValidUuid(m.uuid, "MIG")) {
        r.Fail(Join(dp, "uuid"), str::Cat("expected \"MIG-<hex>\", got ", Quote(m.uuid)));
      }
      if (m.uuid.empty()) m.uuid = GeneratedUuid("MIG", str::Cat(gpu.uuid, "/", i));
      mig->devices.push_back(m);
    }
  }
  if (!r.ok()) return;
  if (mig->enabled && mig->max_devices == 0) {
    r.Fail(Join(p, "max_devices"), "MIG is enabled but max_devices is 0 (not MIG-capable)");
  } else if (mig->devices.size() > mig->max_devices) {
    r.Fail(Join(p, "devices"), str::Cat("more devices than max_devices (", mig->max_devices, ")"));
  } else if (!mig->enabled && !mig->devices.empty()) {
    r.Fail(Join(p, "devices"), "MIG devices are listed but MIG is not enabled");
  }
}

void ParseGpu(Reader& r, const YAML::Node& n, const std::string& p, size_t index,
              const std::string& profile_name, int numa_nodes, Gpu* g) {
  if (!r.Map(n, p,
             {"name",
              "uuid",
              "bus_id",
              "device_id",
              "subsystem_id",
              "minor",
              "vbios",
              "memory",
              "persistence",
              "ecc",
              "retired_pages_pending",
              "remapped_rows",
              "pcie",
              "numa_node",
              "pcie_switch",
              "compute_capability",
              "multiprocessors",
              "temperature_c",
              "power",
              "energy_mj",
              "clocks",
              "utilization",
              "memory_temp_c",
              "pcie_replay_count",
              "encoder_util",
              "decoder_util",
              "nvlink_throughput_kib",
              "gpm",
              "mig",
              "nvlinks",
              "processes",
              "lost",
              "events",
              "unsupported",
              "on_pci_bus"}))
    return;
  r.Str(n, "name", p, &g->name, true);
  if (r.Str(n, "uuid", p, &g->uuid) && !ValidUuid(g->uuid, "GPU")) {
    r.Fail(Join(p, "uuid"), str::Cat("expected \"GPU-<hex>\", got ", Quote(g->uuid)));
  }
  if (g->uuid.empty()) g->uuid = GeneratedUuid("GPU", str::Cat(profile_name, "/", index));
  r.BusId(n, "bus_id", p, &g->bus_id, true);
  r.Int(n, "device_id", p, &g->device_id, 0, 0xffff, true);
  r.Int(n, "subsystem_id", p, &g->subsystem_id, 0, 0xffffffffll);
  g->minor = static_cast<unsigned>(index);
  r.Int(n, "minor", p, &g->minor, 0, 254);
  r.Str(n, "vbios", p, &g->vbios);
  if (r.Present(n, "memory", p, true)) {
    const YAML::Node m = n["memory"];
    const std::string mp = Join(p, "memory");
    if (r.Map(m, mp, {"total_mib", "used_mib", "reserved_mib"})) {
      r.Int(m, "total_mib", mp, &g->memory_total_mib, 1, int64_t{1} << 30, true);
      r.Int(m, "used_mib", mp, &g->memory_used_mib, 0, int64_t{1} << 30);
      r.Int(m, "reserved_mib", mp, &g->memory_reserved_mib, 0, int64_t{1} << 30);
      if (r.ok() && g->memory_used_mib + g->memory_reserved_mib > g->memory_total_mib) {
        r.Fail(mp, "used_mib + reserved_mib exceeds total_mib");
      }
    }
  }
  r.Bool(n, "persistence", p, &g->persistence);
  if (r.Present(n, "ecc", p, false)) {
    const YAML::Node e = n["ecc"];
    const std::string ep = Join(p, "ecc");
    if (r.Map(e, ep,
              {"enabled", "pending", "corrected_volatile", "uncorrected_volatile",
               "corrected_aggregate", "uncorrected_aggregate"})) {
      r.Bool(e, "enabled", ep, &g->ecc.enabled);
      g->ecc.pending = g->ecc.enabled;
      r.Bool(e, "pending", ep, &g->ecc.pending);
      constexpr int64_t kMax = int64_t{1} << 53;
      r.Int(e, "corrected_volatile", ep, &g->ecc.corrected_volatile, 0, kMax);
      r.Int(e, "uncorrected_volatile", ep, &g->ecc.uncorrected_volatile, 0, kMax);
      r.Int(e, "corrected_aggregate", ep, &g->ecc.corrected_aggregate, 0, kMax);
      r.Int(e, "uncorrected_aggregate", ep, &g->ecc.uncorrected_aggregate, 0, kMax);
    }
  }
  r.Bool(n, "retired_pages_pending", p, &g->retired_pages_pending);
  if (r.Present(n, "remapped_rows", p, false)) {
    const YAML::Node e = n["remapped_rows"];
    const std::string ep = Join(p, "remapped_rows");
    if (r.Map(e, ep, {"correctable", "uncorrectable", "pending", "failure"})) {
      r.Int(e, "correctable", ep, &g->remapped_rows.correctable, 0, 1 << 20);
      r.Int(e, "uncorrectable", ep, &g->remapped_rows.uncorrectable, 0, 1 << 20);
      r.Bool(e, "pending", ep, &g->remapped_rows.pending);
      r.Bool(e, "failure", ep, &g->remapped_rows.failure);
    }
  }
  if (r.Present(n, "pcie", p, true)) {
    const YAML::Node e = n["pcie"];
    const std::string ep = Join(p, "pcie");
    if (r.Map(e, ep, {"gen", "width", "max_gen", "max_width", "gpu_max_gen"})) {
      PcieLink& l = g->pcie;
      r.Int(e, "gen", ep, &l.gen, 1, 6, true);
      r.Int(e, "width", ep, &l.width, 1, 32, true);
      l.max_gen = l.gen;
      l.max_width = l.width;
      r.Int(e, "max_gen", ep, &l.max_gen, 1, 6);
      r.Int(e, "max_width", ep, &l.max_width, 1, 32);
      l.gpu_max_gen = l.max_gen;
      r.Int(e, "gpu_max_gen", ep, &l.gpu_max_gen, 1, 6);
      for (auto [key, w] :
           {std::pair<const char*, unsigned>{"width", l.width}, {"max_width", l.max_width}}) {
        if (r.ok() && w != 1 && w != 2 && w != 4 && w != 8 && w != 16 && w != 32) {
          r.Fail(Join(ep, key), str::Cat("expected a link width 1, 2, 4, 8, 16 or 32, got ", w));
        }
      }
      if (r.ok() && (l.gen > l.max_gen || l.width > l.max_width)) {
        r.Fail(ep, "the current link is faster than max_gen/max_width");
      }
    }
  }
  if (r.Int(n, "numa_node", p, &g->numa_node, -1, 63) && g->numa_node >= numa_nodes) {
    r.Fail(Join(p, "numa_node"),
           str::Cat("the host has ", numa_nodes, " NUMA node(s) (host.numa_nodes)"));
  }
  r.Str(n, "pcie_switch", p, &g->pcie_switch);
  std::string cc;
  if (r.Str(n, "compute_capability", p, &cc, true)) {
    auto v = Version::Parse(cc);
    if (!v.ok() || v->parts().size() != 2 || v->major() > 20 || v->minor() > 9) {
      r.Fail(Join(p, "compute_capability"),
             str::Cat("expected \"<major>.<minor>\" like \"9.0\", got ", Quote(cc)));
    } else {
      g->cc_major = static_cast<int>(v->major());
      g->cc_minor = static_cast<int>(v->minor());
    }
  }
  r.Int(n, "multiprocessors", p, &g->multiprocessors, 0, 1024);
  r.Int(n, "temperature_c", p, &g->temperature_c, 0, 200);
  if (r.Present(n, "power", p, false)) {
    const YAML::Node e = n["power"];
    const std::string ep = Join(p, "power");
    if (r.Map(e, ep, {"usage_w", "limit_w", "enforced_limit_w"})) {
      r.Double(e, "usage_w", ep, &g->power_usage_w, 0, 5000);
      r.Double(e, "limit_w", ep, &g->power_limit_w, 0, 5000);
      g->power_enforced_limit_w = g->power_limit_w;
      r.Double(e, "enforced_limit_w", ep, &g->power_enforced_limit_w, 0, 5000);
    }
  }
  r.Int(n, "energy_mj", p, &g->energy_mj, 0, int64_t{1} << 62);
  if (r.Present(n, "clocks", p, false)) {
    const YAML::Node e = n["clocks"];
    const std::string ep = Join(p, "clocks");
    if (r.Map(e, ep, {"sm_mhz", "mem_mhz", "graphics_mhz", "video_mhz"})) {
      r.Int(e, "sm_mhz", ep, &g->clock_sm_mhz, 0, 10000);
      g->clock_graphics_mhz = g->clock_sm_mhz;
      r.Int(e, "mem_mhz", ep, &g->clock_mem_mhz, 0, 20000);
      r.Int(e, "graphics_mhz", ep, &g->clock_graphics_mhz, 0, 10000);
      r.Int(e, "video_mhz", ep, &g->clock_video_mhz, 0, 10000);
    }
  }
  if (r.Present(n, "utilization", p, false)) {
    const YAML::Node e = n["utilization"];
    const std::string ep = Join(p, "utilization");
    if (r.Map(e, ep, {"gpu", "memory"})) {
      r.Int(e, "gpu", ep, &g->utilization_gpu, 0, 100);
      r.Int(e, "memory", ep, &g->utilization_memory, 0, 100);
    }
  }
  unsigned u = 0;
  if (r.Int(n, "memory_temp_c", p, &u, 0, 200)) g->memory_temp_c = u;
  if (r.Int(n, "pcie_replay_count", p, &u, 0, 0xffffffffll)) g->pcie_replay_count = u;
  if (r.Int(n, "encoder_util", p, &u, 0, 100)) g->encoder_util = u;
  if (r.Int(n, "decoder_util", p, &u, 0, 100)) g->decoder_util = u;
  if (r.Present(n, "nvlink_throughput_kib", p, false)) {
    const YAML::Node e = n["nvlink_throughput_kib"];
    const std::string ep = Join(p, "nvlink_throughput_kib");
    if (r.Map(e, ep, {"tx", "rx"})) {
      NvLinkThroughput t;
      constexpr int64_t kMax = int64_t{1} << 62;
      r.Int(e, "tx", ep, &t.tx_kib, 0, kMax, true);
      r.Int(e, "rx", ep, &t.rx_kib, 0, kMax, true);
      g->nvlink_throughput_kib = t;
    }
  }
  if (r.Present(n, "gpm", p, false)) {
    const YAML::Node e = n["gpm"];
    const std::string ep = Join(p, "gpm");
    if (r.Map(e, ep,
              {"supported", "graphics_util", "sm_util", "sm_occupancy", "tensor_util",
               "dram_bw_util", "fp64_util", "fp32_util", "fp16_util", "pcie_tx_mib_s",
               "pcie_rx_mib_s"})) {
      Gpm gpm;
      r.Bool(e, "supported", ep, &gpm.supported);
      for (const auto& m : kGpmMetricNames) {
        double v = 0;
        if (r.Double(e, m.name, ep, &v, 0, m.max)) gpm.metrics[m.id] = v;
      }
      g->gpm = gpm;
    }
  }
  if (r.Present(n, "mig", p, false)) ParseMig(r, n["mig"], Join(p, "mig"), *g, &g->mig);
  if (r.Present(n, "nvlinks", p, false)) {
    const YAML::Node list = n["nvlinks"];
    const std::string lp = Join(p, "nvlinks");
    if (r.Seq(list, lp, NVML_NVLINK_MAX_LINKS)) {
      for (size_t i = 0; i < list.size() && r.ok(); ++i) {
        const YAML::Node e = list[i];
        const std::string ep = str::Cat(lp, "[", i, "]");
        if (!r.Map(e, ep, {"link", "active", "remote_bus_id"})) break;
        NvLink l;
        l.link = static_cast<unsigned>(i);
        r.Int(e, "link", ep, &l.link, 0, NVML_NVLINK_MAX_LINKS - 1);
        r.Bool(e, "active", ep, &l.active);
        r.BusId(e, "remote_bus_id", ep, &l.remote_bus_id, false);
        for (const NvLink& other : g->nvlinks) {
          if (r.ok() && other.link == l.link)
            r.Fail(Join(ep, "link"), str::Cat("link ", l.link, " is listed twice"));
        }
        g->nvlinks.push_back(l);
      }
    }
  }
  if (r.Present(n, "processes", p, false)) {
    const YAML::Node list = n["processes"];
    const std::string lp = Join(p, "processes");
    if (r.Seq(list, lp)) {
      for (size_t i = 0; i < list.size() && r.ok(); ++i) {
        const YAML::Node e = list[i];
        const std::string ep = str::Cat(lp, "[", i, "]");
        if (!r.Map(e, ep, {"pid", "used_mib", "gpu_instance_id", "compute_instance_id"})) break;
        Process pr;
        r.Int(e, "pid", ep, &pr.pid, 1, 0x7fffffff, true);
        r.Int(e, "used_mib", ep, &pr.used_mib, 0, int64_t{1} << 30);
        unsigned id = 0;
        if (r.Int(e, "gpu_instance_id", ep, &id, 0, 64)) pr.gpu_instance_id = id;
        if (r.Int(e, "compute_instance_id", ep, &id, 0, 64)) pr.compute_instance_id = id;
        g->processes.push_back(pr);
      }
    }
  }
  r.Bool(n, "lost", p, &g->lost);
  if (r.Present(n, "events", p, false)) {
    const YAML::Node list = n["events"];
    const std::string lp = Join(p, "events");
    if (r.Seq(list, lp)) {
      for (size_t i = 0; i < list.size() && r.ok(); ++i) {
        const YAML::Node e = list[i];
        const std::string ep = str::Cat(lp, "[", i, "]");
        if (!r.Map(e, ep, {"type", "xid", "data", "gpu_instance_id", "compute_instance_id"})) break;
        Event ev;
        size_t type = 0;
        if (r.Present(e, "type", ep, true) && r.Enum(e, "type", ep, Names(kEventNames), &type)) {
          ev.type = kEventNames[type].type;
        }
        bool has_xid = r.Int(e, "xid", ep, &ev.data, 0, 0xffffffffll);
        r.Int(e, "data", ep, &ev.data, 0, 0x7fffffffffffffffll);
        if (r.ok() && ev.type == EventType::kXid && !has_xid)
          r.Fail(Join(ep, "xid"), "required for type xid");
        if (r.ok() && ev.type != EventType::kXid && has_xid)
          r.Fail(Join(ep, "xid"), "only allowed for type xid");
        unsigned id = 0;
        if (r.Int(e, "gpu_instance_id", ep, &id, 0, 64)) ev.gpu_instance_id = id;
        if (r.Int(e, "compute_instance_id", ep, &id, 0, 64)) ev.compute_instance_id = id;
        g->events.push_back(ev);
      }
    }
  }
  if (r.Present(n, "unsupported", p, false)) {
    const YAML::Node list = n["unsupported"];
    const std::string lp = Join(p, "unsupported");
    if (r.Seq(list, lp, 64)) {
      const auto& names = UnsupportedFieldNames();
      for (size_t i = 0; i < list.size() && r.ok(); ++i) {
        const YAML::Node e = list[i];
        if (!e.IsScalar() || std::find(names.begin(), names.end(), e.Scalar()) == names.end()) {
          r.Fail(str::Cat(lp, "[", i, "]"),
                 str::Cat("expected one of ", str::Join(names, ", "), ", got ", Describe(e)));
          break;
        }
        g->unsupported.insert(e.Scalar());
      }
    }
  }
  r.Bool(n, "on_pci_bus", p, &g->on_pci_bus);
}

StatusOr<NodeProfile> ParseTree(const YAML::Node& root, std::string_view origin) {
  Reader r(origin);
  NodeProfile profile;
  if (!root.IsMap()) {
    r.Fail("", str::Cat("expected a mapping at the top level, got ", Describe(root)));
    return r.status();
  }
  if (!r.Map(root, "",
             {"apiVersion", "kind", "name", "description", "host", "driver", "gpu_defaults", "gpus",
              "topology"}))
    return r.status();
  std::string api, kind;
  if (r.Str(root, "apiVersion", "", &api, true) && api != kProfileApiVersion) {
    r.Fail("apiVersion", str::Cat("expected \"", kProfileApiVersion, "\", got ", Quote(api)));
  }
  if (r.Str(root, "kind", "", &kind, true) && kind != kProfileKind) {
    r.Fail("kind", str::Cat("expected \"", kProfileKind, "\", got ", Quote(kind)));
  }
  if (r.Str(root, "name", "", &profile.name, true)) {
    bool good = !profile.name.empty() && profile.name.size() <= 63;
    for (char c : profile.name) {
      good =
          good && (std::islower(static_cast<unsigned char>(c)) ||
                   std::isdigit(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.');
    }
    if (!good)
      r.Fail("name", str::Cat("expected lower-case letters, digits, '-', '_' or '.', got ",
                              Quote(profile.name)));
  }
  r.Str(root, "description", "", &profile.description);
  if (r.Present(root, "host", "", false)) {
    ParseHost(r, root["host"], &profile.host);
    ParseHostFiles(r, root["host"], &profile.host);
  }
  if (r.Present(root, "driver", "", true)) ParseDriver(r, root["driver"], &profile.driver);
  if (profile.host.module.version.empty()) profile.host.module.version = profile.driver.version;

  YAML::Node defaults;
  if (r.Present(root, "gpu_defaults", "", false)) {
    defaults = root["gpu_defaults"];
    if (!defaults.IsMap())
      r.Fail("gpu_defaults", str::Cat("expected a mapping, got ", Describe(defaults)));
  }
  if (r.Present(root, "gpus", "", true)) {
    const YAML::Node list = root["gpus"];
    if (r.Seq(list, "gpus", kMaxGpus)) {
      for (size_t i = 0; i < list.size() && r.ok(); ++i) {
        const std::string gp = str::Cat("gpus[", i, "]");
        YAML::Node item = list[i];
        if (defaults.IsMap() && item.IsMap()) item = Merge(defaults, item);
        Gpu g;
        ParseGpu(r, item, gp, i, profile.name, profile.host.numa_nodes, &g);
        profile.gpus.push_back(std::move(g));
      }
    }
  }
  // Cross-checks.
  std::set<std::string> bus_ids, uuids;
  std::set<unsigned> minors;
  for (size_t i = 0; i < profile.gpus.size() && r.ok(); ++i) {
    const Gpu& g = profile.gpus[i];
    const std::string gp = str::Cat("gpus[", i, "]");
    if (!bus_ids.insert(g.bus_id).second)
      r.Fail(Join(gp, "bus_id"), str::Cat("duplicate bus id ", g.bus_id));
    if (r.ok() && !uuids.insert(g.uuid).second)
      r.Fail(Join(gp, "uuid"), str::Cat("duplicate uuid ", g.uuid));
    if (r.ok() && !minors.insert(g.minor).second)
      r.Fail(Join(gp, "minor"), str::Cat("duplicate minor ", g.minor));
    for (size_t j = 0; j < g.mig.devices.size() && r.ok(); ++j) {
      if (!uuids.insert(g.mig.devices[j].uuid).second) {
        r.Fail(str::Cat(gp, ".mig.devices[", j, "].uuid"), "duplicate uuid");
      }
    }
  }
  for (size_t i = 0; i < profile.host.pci_devices.size() && r.ok(); ++i) {
    const PciFunction& f = profile.host.pci_devices[i];
    if (!bus_ids.insert(f.bus_id).second) {
      r.Fail(str::Cat("host.pci_devices[", i, "].bus_id"), str::Cat("duplicate bus id ", f.bus_id));
    }
    if (r.ok() && f.numa_node >= profile.host.numa_nodes) {
      r.Fail(str::Cat("host.pci_devices[", i, "].numa_node"), "beyond host.numa_nodes");
    }
  }
  if (r.Present(root, "topology", "", false)) {
    const YAML::Node list = root["topology"];
    if (r.Seq(list, "topology")) {
      for (size_t i = 0; i < list.size() && r.ok(); ++i) {
        const std::string tp = str::Cat("topology[", i, "]");
        if (!r.Map(list[i], tp, {"a", "b", "level"})) break;
        TopologyOverride t;
        const int64_t last = static_cast<int64_t>(profile.gpus.size()) - 1;
        r.Int(list[i], "a", tp, &t.a, 0, last, true);
        r.Int(list[i], "b", tp, &t.b, 0, last, true);
        size_t level = 0;
        if (r.Present(list[i], "level", tp, true) &&
            r.Enum(list[i], "level", tp, Names(kTopologyNames), &level)) {
          t.level = kTopologyNames[level].level;
        }
        profile.topology.push_back(t);
      }
    }
  }
  if (!r.ok()) return r.status();
  return profile;
}

}  // namespace

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
