// The exporter's metric catalogue: every dcgm-exporter field gpunode knows, with exactly
// dcgm-exporter's Prometheus name, default type and HELP text (etc/default-counters.csv), the
// unit of the value, and which NVML call produces it (docs/exporter.md has the table).
#ifndef GPUNODE_EXPORTER_CATALOGUE_H_
#define GPUNODE_EXPORTER_CATALOGUE_H_

#include <cstddef>
#include <optional>
#include <span>
#include <string_view>

namespace gpunode::exporter {

// Prometheus metric type as the counters CSV names it; kLabel turns the field into a label on
// every series of the GPU.
enum class MetricType { kGauge, kCounter, kLabel };
std::string_view MetricTypeName(MetricType type);                  // "gauge", "counter", "label"
std::optional<MetricType> ParseMetricType(std::string_view text);  // exact, lower case

// One entry per field; the order of the enum is the order of the catalogue (DCGM field id).
enum class FieldId {
  kDriverVersion,              // 1, label
  kSmClock,                    // 100
  kMemClock,                   // 101
  kMemoryTemp,                 // 140
  kGpuTemp,                    // 150
  kPowerUsage,                 // 155
  kTotalEnergyConsumption,     // 156
  kPcieReplayCounter,          // 202
  kGpuUtil,                    // 203
  kMemCopyUtil,                // 204
  kEncUtil,                    // 206
  kDecUtil,                    // 207
  kXidErrors,                  // 230
  kFbTotal,                    // 250
  kFbFree,                     // 251
  kFbUsed,                     // 252
  kFbReserved,                 // 253
  kUncorrectableRemappedRows,  // 393
  kCorrectableRemappedRows,    // 394
  kRowRemapFailure,            // 395
  kNvlinkBandwidthTotal,       // 449
  kVgpuLicenseStatus,          // 526
  kProfGrEngineActive,         // 1001
  kProfSmActive,               // 1002
  kProfSmOccupancy,            // 1003
  kProfPipeTensorActive,       // 1004
  kProfDramActive,             // 1005
  kProfPipeFp64Active,         // 1006
  kProfPipeFp32Active,         // 1007
  kProfPipeFp16Active,         // 1008
  kProfPcieTxBytes,            // 1009
  kProfPcieRxBytes,            // 1010
};
inline constexpr size_t kFieldCount = static_cast<size_t>(FieldId::kProfPcieRxBytes) + 1;

struct FieldInfo {
  FieldId id;
  int dcgm_field_id;      // DCGM's numeric id; families render in this order
  std::string_view name;  // "DCGM_FI_DEV_SM_CLOCK": the Prometheus metric name
  MetricType type;        // dcgm-exporter's default type (the CSV may override)
  std::string_view help;  // dcgm-exporter's HELP text, verbatim
  std::string_view
      unit;        // "MHz", "C", "W", "mJ", "count", "%", "MiB", "ratio", "B/s", "0/1", "string"
  bool is_double;  // DCGM field type FP64: rendered "%f"; otherwise INT64 "%d"
  bool default_enabled;          // enabled in dcgm-exporter's default-counters.csv
  bool produced;                 // gpunode fills it today (with the NVML ABI of src/gpu/nvml_abi.h)
  std::string_view nvml_source;  // the NVML call that gives the value (reference §2)
};

// Every field, in FieldId order.
std::span<const FieldInfo> Catalogue();
const FieldInfo& Field(FieldId id);
// By exact metric name ("DCGM_FI_DEV_GPU_TEMP"); nullptr when unknown.
const FieldInfo* FindField(std::string_view name);

}  // namespace gpunode::exporter

#endif  // GPUNODE_EXPORTER_CATALOGUE_H_
