#include "src/exporter/counters.h"

#include <map>

namespace gpunode::exporter {
namespace {

// dcgm-exporter's etc/default-counters.csv: enabled rows and every HELP text as in the upstream
// file (research notes monitoring.md §1.1, including the stray space after DCGM_FI_DEV_DEC_UTIL).
constexpr std::string_view kDefaultCountersCsv = R"csv(# Format
# If line starts with a '#' it is considered a comment
# DCGM FIELD, Prometheus metric type, help message

# Clocks
DCGM_FI_DEV_SM_CLOCK,  gauge, SM clock frequency (in MHz).
DCGM_FI_DEV_MEM_CLOCK, gauge, Memory clock frequency (in MHz).

# Temperature
DCGM_FI_DEV_MEMORY_TEMP, gauge, Memory temperature (in C).
DCGM_FI_DEV_GPU_TEMP,    gauge, GPU temperature (in C).

# Power
DCGM_FI_DEV_POWER_USAGE,              gauge, Power draw (in W).
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION, counter, Total energy consumption since boot (in mJ).

# PCIE
# DCGM_FI_PROF_PCIE_TX_BYTES,  counter, Total number of bytes transmitted through PCIe TX via NVML.
# DCGM_FI_PROF_PCIE_RX_BYTES,  counter, Total number of bytes received through PCIe RX via NVML.
DCGM_FI_DEV_PCIE_REPLAY_COUNTER, counter, Total number of PCIe retries.

# Utilization (the sample period varies depending on the product)
DCGM_FI_DEV_GPU_UTIL,      gauge, GPU utilization (in %).
DCGM_FI_DEV_MEM_COPY_UTIL, gauge, Memory utilization (in %).
DCGM_FI_DEV_ENC_UTIL,      gauge, Encoder utilization (in %).
DCGM_FI_DEV_DEC_UTIL ,     gauge, Decoder utilization (in %).

# Errors and violations
DCGM_FI_DEV_XID_ERRORS,              gauge,   Value of the last XID error encountered.
# DCGM_FI_DEV_POWER_VIOLATION,       counter, Throttling duration due to power constraints (in ns).
# DCGM_FI_DEV_THERMAL_VIOLATION,     counter, Throttling duration due to thermal constraints (in ns).
# DCGM_FI_DEV_SYNC_BOOST_VIOLATION,  counter, Throttling duration due to sync-boost constraints (in ns).
# DCGM_FI_DEV_BOARD_LIMIT_VIOLATION, counter, Throttling duration due to board limit constraints (in ns).
# DCGM_FI_DEV_LOW_UTIL_VIOLATION,    counter, Throttling duration due to low utilization (in ns).
# DCGM_FI_DEV_RELIABILITY_VIOLATION, counter, Throttling duration due to reliability constraints (in ns).

# DCGM Exporter fields
# DCGM_EXP_CLOCK_EVENTS_COUNT, counter, reported clock events
# DCGM_EXP_XID_ERRORS_COUNT,   counter, reported XIDs during last window
# DCGM_EXP_GPU_HEALTH_STATUS,  counter, DCGM reported health status
# DCGM_EXP_P2P_STATUS,         counter, P2P NvLink status

# Memory usage
DCGM_FI_DEV_FB_FREE,     gauge, Framebuffer memory free (in MiB).
DCGM_FI_DEV_FB_USED,     gauge, Framebuffer memory used (in MiB).
DCGM_FI_DEV_FB_RESERVED, gauge, Framebuffer memory reserved (in MiB).

# ECC
# DCGM_FI_DEV_ECC_SBE_VOL_TOTAL, counter, Total number of single-bit volatile ECC errors.
# DCGM_FI_DEV_ECC_DBE_VOL_TOTAL, counter, Total number of double-bit volatile ECC errors.
# DCGM_FI_DEV_ECC_SBE_AGG_TOTAL, counter, Total number of single-bit persistent ECC errors.
# DCGM_FI_DEV_ECC_DBE_AGG_TOTAL, counter, Total number of double-bit persistent ECC errors.

# Retired pages
# DCGM_FI_DEV_RETIRED_SBE,     counter, Total number of retired pages due to single-bit errors.
# DCGM_FI_DEV_RETIRED_DBE,     counter, Total number of retired pages due to double-bit errors.
# DCGM_FI_DEV_RETIRED_PENDING, counter, Total number of pages pending retirement.

# NVLink
# DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL, counter, Total number of NVLink flow-control CRC errors.
# DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL, counter, Total number of NVLink data CRC errors.
# DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL,   counter, Total number of NVLink retries.
# DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL, counter, Total number of NVLink recovery errors.
DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL,            counter, Total number of NVLink bandwidth counters for all lanes.
# DCGM_FI_DEV_NVLINK_BANDWIDTH_L0,               counter, The number of bytes of active NVLink rx or tx data including both header and payload.

# VGPU License status
DCGM_FI_DEV_VGPU_LICENSE_STATUS, gauge, vGPU License status

# Remapped rows
DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS, counter, Number of remapped rows for uncorrectable errors
DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS,   counter, Number of remapped rows for correctable errors
DCGM_FI_DEV_ROW_REMAP_FAILURE,           gauge,   Whether remapping of rows has failed

# Static configuration information. These appear as labels on the other metrics
DCGM_FI_DRIVER_VERSION,        label, Driver Version
# DCGM_FI_NVML_VERSION,          label, NVML Version
# DCGM_FI_DEV_BRAND,             label, Device Brand
# DCGM_FI_DEV_SERIAL,            label, Device Serial Number
# DCGM_FI_DEV_OEM_INFOROM_VER,   label, OEM inforom version
# DCGM_FI_DEV_ECC_INFOROM_VER,   label, ECC inforom version
# DCGM_FI_DEV_POWER_INFOROM_VER, label, Power management object inforom version
# DCGM_FI_DEV_INFOROM_IMAGE_VER, label, Inforom image version
# DCGM_FI_DEV_VBIOS_VERSION,     label, VBIOS version of the device

# Datacenter Profiling (DCP) metrics
# NOTE: supported on Nvidia datacenter Volta GPUs and newer
DCGM_FI_PROF_GR_ENGINE_ACTIVE,   gauge, Ratio of time the graphics engine is active.
# DCGM_FI_PROF_SM_ACTIVE,          gauge, The ratio of cycles an SM has at least 1 warp assigned.
# DCGM_FI_PROF_SM_OCCUPANCY,       gauge, The ratio of number of warps resident on an SM.
DCGM_FI_PROF_PIPE_TENSOR_ACTIVE, gauge, Ratio of cycles the tensor (HMMA) pipe is active.
DCGM_FI_PROF_DRAM_ACTIVE,        gauge, Ratio of cycles the device memory interface is active sending or receiving data.
# DCGM_FI_PROF_PIPE_FP64_ACTIVE,   gauge, Ratio of cycles the fp64 pipes are active.
# DCGM_FI_PROF_PIPE_FP32_ACTIVE,   gauge, Ratio of cycles the fp32 pipes are active.
# DCGM_FI_PROF_PIPE_FP16_ACTIVE,   gauge, Ratio of cycles the fp16 pipes are active.
DCGM_FI_PROF_PCIE_TX_BYTES,      gauge, The rate of data transmitted over the PCIe bus - including both protocol headers and data payloads - in bytes per second.
DCGM_FI_PROF_PCIE_RX_BYTES,      gauge, The rate of data received over the PCIe bus - including both protocol headers and data payloads - in bytes per second.
)csv";

// Concatenates text and numbers (absl::StrCat wants absl::string_view, which Debian's abseil
// keeps distinct from std::string_view).
void AppendTo(std::string& out, std::string_view s) { out.append(s); }
void AppendTo(std::string& out, const char* s) { out.append(s); }
void AppendTo(std::string& out, size_t n) { out.append(std::to_string(n)); }
template <typename... Parts>
std::string Cat(const Parts&... parts) {
  std::string out;
  (AppendTo(out, parts), ...);
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

}  // namespace

StatusOr<std::vector<Counter>> ParseCounters(std::string_view csv, std::string_view source) {
  std::vector<Counter> out;
  std::map<std::string_view, size_t> seen;  // field name -> line
  size_t line_no = 0;
  while (!csv.empty()) {
    ++line_no;
    size_t eol = csv.find('\n');
    std::string_view line = Trim(csv.substr(0, eol));
    csv.remove_prefix(eol == std::string_view::npos ? csv.size() : eol + 1);
    if (line.empty() || line.front() == '#') continue;

    auto error = [&](auto&&... parts) {
      return absl::InvalidArgumentError(Cat(source, " line ", line_no, ": ", parts...));
    };
    std::vector<std::string_view> cells;
    for (size_t start = 0;;) {
      size_t comma = line.find(',', start);
      cells.push_back(Trim(line.substr(
          start, comma == std::string_view::npos ? std::string_view::npos : comma - start)));
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
    if (cells.size() != 3) {
      return error("expected 3 comma-separated fields (DCGM field, Prometheus type, help), got ",
                   cells.size(), " in '", line, "'");
    }
    const std::string_view name = cells[0];
    if (name.empty()) return error("empty field name");
    const FieldInfo* field = FindField(name);
    if (field == nullptr) {
      if (name.starts_with("DCGM_EXP_"))
        return error("exporter-computed field '", name, "' is not supported yet");
      return error("unknown field '", name, "'");
    }
    std::optional<MetricType> type = ParseMetricType(cells[1]);
    if (!type)
      return error("unknown type '", cells[1], "' for ", name, " (want gauge, counter or label)");
    if ((*type == MetricType::kLabel) != (field->type == MetricType::kLabel)) {
      return *type == MetricType::kLabel ? error(name, " is a number and cannot be a label")
                                         : error(name, " is a string and can only be a label");
    }
    auto [it, inserted] = seen.emplace(field->name, line_no);
    if (!inserted) return error(name, " is already listed on line ", it->second);
    out.push_back(Counter{field, *type, std::string(cells[2])});
  }
  return out;
}

std::string_view DefaultCountersCsv() { return kDefaultCountersCsv; }

const std::vector<Counter>& DefaultCounters() {
  static const std::vector<Counter>* const kDefault = [] {
    auto parsed = ParseCounters(kDefaultCountersCsv, "default-counters.csv");
    // The embedded file is ours; a parse failure is a broken invariant caught by the tests.
    return new std::vector<Counter>(parsed.ok() ? *std::move(parsed) : std::vector<Counter>{});
  }();
  return *kDefault;
}

}  // namespace gpunode::exporter
