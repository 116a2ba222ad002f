// Internal to sim/support/profile*.cc: the strict reader of node profiles, the name tables and
// helpers the profile's sections share (profile_host.cc: host, driver and the document;
// profile_gpu.cc: one GPU and its MIG devices). Not for use outside sim/support.
#ifndef GPUNODE_SIM_SUPPORT_PROFILE_INTERNAL_H_
#define GPUNODE_SIM_SUPPORT_PROFILE_INTERNAL_H_

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "absl/strings/str_format.h"
#include "sim/support/profile.h"
#include "sim/support/str.h"
#include "src/base/version.h"
#include "src/base/yaml_reader.h"
#include "yaml-cpp/yaml.h"

namespace gpunode::sim::profile_internal {

inline constexpr size_t kMaxProfileBytes = 4 << 20;
inline constexpr size_t kMaxGpus = 64;
inline constexpr size_t kMaxListItems = 4096;

struct ReturnName {
  nvmlReturn_t code;
  std::string_view name;
};
inline constexpr ReturnName kReturnNames[] = {
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
inline constexpr CudaName kCudaInitNames[] = {
    {0, "SUCCESS"},     {3, "NOT_INITIALIZED"},          {35, "INSUFFICIENT_DRIVER"},
    {100, "NO_DEVICE"}, {803, "SYSTEM_DRIVER_MISMATCH"}, {804, "COMPAT_NOT_SUPPORTED_ON_DEVICE"},
    {999, "UNKNOWN"},
};

struct EventName {
  EventType type;
  std::string_view name;
};
inline constexpr EventName kEventNames[] = {
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
inline constexpr TopologyName kTopologyNames[] = {
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
inline constexpr GpmMetricName kGpmMetricNames[] = {
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

inline std::string Quote(std::string_view s) { return YamlQuote(absl::string_view(s.data(), s.size())); }
inline std::string Describe(const YAML::Node& n) { return YamlDescribe(n); }
std::string Join(std::string_view path, std::string_view key);
std::string Lower(std::string_view s);
std::string Upper(std::string_view s);
// Parses a decimal or 0x-hex integer, the whole text.
// Deep-merges `overlay` onto a copy of `base` (mappings merge key by key; anything else replaces).
YAML::Node Merge(const YAML::Node& base, const YAML::Node& overlay, int depth = 0);
std::string GeneratedUuid(const std::string& prefix, std::string_view seed);
bool ValidUuid(std::string_view uuid, std::string_view prefix);

std::vector<std::string_view> Names(auto const& table) {
  std::vector<std::string_view> out;
  for (const auto& e : table) out.push_back(e.name);
  return out;
}

// A strict reader over a YAML tree: the first error wins. It remembers the line of each key path
// it visits, so a check made after reading (a duplicate, a cross-field rule) still names the
// line; errors are worded by src/base/yaml_reader.h ("profile F:LINE: gpus[1].x: expected ...").
class Reader {
 public:
  explicit Reader(std::string_view origin) : origin_(str::Cat("profile ", origin)) {}

  bool ok() const { return error_.empty(); }
  Status status() const {
    if (ok()) return absl::OkStatus();
    return absl::InvalidArgumentError(error_);
  }
  // At the line of `path`, else of the nearest enclosing path that was visited.
  void Fail(std::string_view path, std::string_view msg) { Fail(path, msg, LineOf(path)); }
  void Fail(std::string_view path, std::string_view msg, int line) {
    if (!ok()) return;
    const YamlValue at(YAML::Node(YAML::NodeType::Undefined), origin_, std::string(path), line);
    error_ = std::string(at.Error(absl::string_view(msg.data(), msg.size())).message());
  }
  // "expected WHAT, got <the node>", at the node's line.
  void Expected(const YAML::Node& n, std::string_view path, std::string_view what) {
    Note(path, n);
    Fail(path, str::Cat("expected ", what, ", got ", YamlDescribe(n)));
  }

  // `n` must be a mapping whose keys are all in `keys`.
  bool Map(const YAML::Node& n, std::string_view path, std::initializer_list<std::string_view> keys) {
    if (!ok()) return false;
    Note(path, n);
    const YamlValue at(n, origin_, std::string(path), LineOf(path));
    const Status st = at.ExpectMap(std::vector<std::string>(keys.begin(), keys.end()));
    if (!st.ok()) {
      if (ok()) error_ = std::string(st.message());
      return false;
    }
    return true;
  }

  // `n` must be a list of at most `max` items.
  bool Seq(const YAML::Node& n, std::string_view path, size_t max = kMaxListItems) {
    if (!ok()) return false;
    Note(path, n);
    const Status st = YamlValue(n, origin_, std::string(path), LineOf(path)).ExpectList(max);
    if (!st.ok()) {
      if (ok()) error_ = std::string(st.message());
      return false;
    }
    return true;
  }

  // Field getters: return true when the key is present and valid; absent keys keep `*out` and
  // fail only when `required`.
  bool Present(const YAML::Node& map, std::string_view key, std::string_view path, bool required) {
    if (!ok()) return false;
    const YAML::Node n = map[std::string(key)];
    if (n.IsDefined()) {
      Note(Join(path, key), n);
      return true;
    }
    if (required) Fail(Join(path, key), "expected a value, got nothing (the key is required)");
    return false;
  }

  bool Str(const YAML::Node& map, std::string_view key, std::string_view path, std::string* out,
           bool required = false) {
    if (!Present(map, key, path, required)) return false;
    const YAML::Node n = map[std::string(key)];
    if (!n.IsScalar()) {
      Expected(n, Join(path, key), "a string");
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
      Expected(n, Join(path, key), "true or false");
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
    if (!n.IsScalar() || !ParseInteger(n.Scalar(), &v) || v < min || v > max) {
      Expected(n, path, str::Cat("an integer ", min, "-", max));
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
      Expected(n, Join(path, key), str::Cat("a number ", min, "-", max));
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
      Fail(Join(path, key), str::Cat("expected a PCI bus id like \"0000:18:00.0\", got ", Quote(s)));
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
      Fail(Join(path, key), str::Cat("expected a dotted version like \"580.95.05\", got ", Quote(s)));
      return false;
    }
    *out = s;
    return true;
  }

  // Remembers the line of `path` (nodes that carry a mark only).
  void Note(std::string_view path, const YAML::Node& n) {
    if (n.IsDefined() && n.Mark().line >= 0) lines_[std::string(path)] = n.Mark().line + 1;
  }
  int LineOf(std::string_view path) const {
    std::string p(path);
    while (true) {
      if (auto it = lines_.find(p); it != lines_.end()) return it->second;
      const size_t cut = p.find_last_of(".[");
      if (cut == std::string::npos || p.empty()) return lines_.count("") ? lines_.at("") : 0;
      p.resize(cut);
    }
  }

 private:
  std::string origin_;
  std::string error_;
  std::map<std::string, int> lines_;
};


// The sections, each reporting into `r` (the first error wins).
void ParseHost(Reader& r, const YAML::Node& n, Host* host);
void ParseHostFiles(Reader& r, const YAML::Node& host, Host* out);
void ParseDriver(Reader& r, const YAML::Node& n, Driver* d);
void ParseMig(Reader& r, const YAML::Node& n, const std::string& p, const Gpu& gpu, Mig* mig);
void ParseGpu(Reader& r, const YAML::Node& n, const std::string& p, size_t index,
              const std::string& profile_name, int numa_nodes, Gpu* g);
StatusOr<NodeProfile> ParseTree(const YAML::Node& root, std::string_view origin);

}  // namespace gpunode::sim::profile_internal

#endif  // GPUNODE_SIM_SUPPORT_PROFILE_INTERNAL_H_
