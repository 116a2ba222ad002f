#include "src/exporter/catalogue.h"

#include <array>

namespace gpunode::exporter {
namespace {

using enum MetricType;

// HELP texts are dcgm-exporter's etc/default-counters.csv, verbatim (reference monitoring.md §1.1);
// NVML sources are DCGM's own (§2, §2.1).
constexpr std::array<FieldInfo, kFieldCount> kCatalogue = {{
    {FieldId::kDriverVersion, 1, "DCGM_FI_DRIVER_VERSION", kLabel, "Driver Version", "string",
     false, true, true, "nvmlSystemGetDriverVersion"},
    {FieldId::kSmClock, 100, "DCGM_FI_DEV_SM_CLOCK", kGauge, "SM clock frequency (in MHz).", "MHz",
     false, true, true, "nvmlDeviceGetClockInfo(NVML_CLOCK_SM)"},
    {FieldId::kMemClock, 101, "DCGM_FI_DEV_MEM_CLOCK", kGauge, "Memory clock frequency (in MHz).",
     "MHz", false, true, true, "nvmlDeviceGetClockInfo(NVML_CLOCK_MEM)"},
    {FieldId::kMemoryTemp, 140, "DCGM_FI_DEV_MEMORY_TEMP", kGauge, "Memory temperature (in C).",
     "C", false, true, true, "nvmlDeviceGetFieldValues(NVML_FI_DEV_MEMORY_TEMP=82)"},
    {FieldId::kGpuTemp, 150, "DCGM_FI_DEV_GPU_TEMP", kGauge, "GPU temperature (in C).", "C", false,
     true, true, "nvmlDeviceGetTemperature(NVML_TEMPERATURE_GPU)"},
    {FieldId::kPowerUsage, 155, "DCGM_FI_DEV_POWER_USAGE", kGauge, "Power draw (in W).", "W", true,
     true, true, "nvmlDeviceGetPowerUsage (mW / 1000)"},
    {FieldId::kTotalEnergyConsumption, 156, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", kCounter,
     "Total energy consumption since boot (in mJ).", "mJ", false, true, true,
     "nvmlDeviceGetTotalEnergyConsumption"},
    {FieldId::kPcieReplayCounter, 202, "DCGM_FI_DEV_PCIE_REPLAY_COUNTER", kCounter,
     "Total number of PCIe retries.", "count", false, true, true,
     "nvmlDeviceGetPcieReplayCounter"},
    {FieldId::kGpuUtil, 203, "DCGM_FI_DEV_GPU_UTIL", kGauge, "GPU utilization (in %).", "%", false,
     true, true, "nvmlDeviceGetUtilizationRates (.gpu)"},
    {FieldId::kMemCopyUtil, 204, "DCGM_FI_DEV_MEM_COPY_UTIL", kGauge, "Memory utilization (in %).",
     "%", false, true, true, "nvmlDeviceGetUtilizationRates (.memory)"},
    {FieldId::kEncUtil, 206, "DCGM_FI_DEV_ENC_UTIL", kGauge, "Encoder utilization (in %).", "%",
     false, true, true, "nvmlDeviceGetEncoderUtilization"},
    {FieldId::kDecUtil, 207, "DCGM_FI_DEV_DEC_UTIL", kGauge, "Decoder utilization (in %).", "%",
     false, true, true, "nvmlDeviceGetDecoderUtilization"},
    {FieldId::kXidErrors, 230, "DCGM_FI_DEV_XID_ERRORS", kGauge,
     "Value of the last XID error encountered.", "XID", false, true, true,
     "nvmlDeviceRegisterEvents(nvmlEventTypeXidCriticalError) + nvmlEventSetWait_v2"},
    // Not in dcgm-exporter's default-counters.csv nor dcp-metrics-included.csv (4.5.3-4.8.2): no
    // HELP text upstream; worded as its FB_FREE/FB_USED siblings (DCGM's dcgm_fields.h: "Total
    // Frame Buffer of the GPU in MB", DCGM stores total / 2^20).
    {FieldId::kFbTotal, 250, "DCGM_FI_DEV_FB_TOTAL", kGauge, "Framebuffer memory total (in MiB).",
     "MiB", false, false, true, "nvmlDeviceGetMemoryInfo_v2 (.total / 2^20)"},
    {FieldId::kFbFree, 251, "DCGM_FI_DEV_FB_FREE", kGauge, "Framebuffer memory free (in MiB).",
     "MiB", false, true, true, "nvmlDeviceGetMemoryInfo_v2 (.free / 2^20)"},
    {FieldId::kFbUsed, 252, "DCGM_FI_DEV_FB_USED", kGauge, "Framebuffer memory used (in MiB).",
     "MiB", false, true, true, "nvmlDeviceGetMemoryInfo_v2 (.used / 2^20)"},
    {FieldId::kFbReserved, 253, "DCGM_FI_DEV_FB_RESERVED", kGauge,
     "Framebuffer memory reserved (in MiB).", "MiB", false, true, true,
     "nvmlDeviceGetMemoryInfo_v2 (.reserved / 2^20)"},
    {FieldId::kUncorrectableRemappedRows, 393, "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", kCounter,
     "Number of remapped rows for uncorrectable errors", "count", false, true, true,
     "nvmlDeviceGetRemappedRows (uncRows)"},
    {FieldId::kCorrectableRemappedRows, 394, "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", kCounter,
     "Number of remapped rows for correctable errors", "count", false, true, true,
     "nvmlDeviceGetRemappedRows (corrRows)"},
    {FieldId::kRowRemapFailure, 395, "DCGM_FI_DEV_ROW_REMAP_FAILURE", kGauge,
     "Whether remapping of rows has failed", "0/1", false, true, true,
     "nvmlDeviceGetRemappedRows (failureOccurred)"},
    {FieldId::kNvlinkBandwidthTotal, 449, "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", kCounter,
     "Total number of NVLink bandwidth counters for all lanes.", "MiB/s", false, true, true,
     "nvmlDeviceGetFieldValues(NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX=138 + _RX=139), rate of the "
     "sum"},
    {FieldId::kVgpuLicenseStatus, 526, "DCGM_FI_DEV_VGPU_LICENSE_STATUS", kGauge,
     "vGPU License status", "0/1", false, true, false, "nvmlDeviceGetGridLicensableFeatures"},
    {FieldId::kProfGrEngineActive, 1001, "DCGM_FI_PROF_GR_ENGINE_ACTIVE", kGauge,
     "Ratio of time the graphics engine is active.", "ratio", true, true, true,
     "GPM NVML_GPM_METRIC_GRAPHICS_UTIL (1) / 100"},
    {FieldId::kProfSmActive, 1002, "DCGM_FI_PROF_SM_ACTIVE", kGauge,
     "The ratio of cycles an SM has at least 1 warp assigned.", "ratio", true, false, true,
     "GPM NVML_GPM_METRIC_SM_UTIL (2) / 100"},
    {FieldId::kProfSmOccupancy, 1003, "DCGM_FI_PROF_SM_OCCUPANCY", kGauge,
     "The ratio of number of warps resident on an SM.", "ratio", true, false, true,
     "GPM NVML_GPM_METRIC_SM_OCCUPANCY (3) / 100"},
    {FieldId::kProfPipeTensorActive, 1004, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", kGauge,
     "Ratio of cycles the tensor (HMMA) pipe is active.", "ratio", true, true, true,
     "GPM NVML_GPM_METRIC_ANY_TENSOR_UTIL (5) / 100"},
    {FieldId::kProfDramActive, 1005, "DCGM_FI_PROF_DRAM_ACTIVE", kGauge,
     "Ratio of cycles the device memory interface is active sending or receiving data.", "ratio",
     true, true, true, "GPM NVML_GPM_METRIC_DRAM_BW_UTIL (10) / 100"},
    {FieldId::kProfPipeFp64Active, 1006, "DCGM_FI_PROF_PIPE_FP64_ACTIVE", kGauge,
     "Ratio of cycles the fp64 pipes are active.", "ratio", true, false, true,
     "GPM NVML_GPM_METRIC_FP64_UTIL (11) / 100"},
    {FieldId::kProfPipeFp32Active, 1007, "DCGM_FI_PROF_PIPE_FP32_ACTIVE", kGauge,
     "Ratio of cycles the fp32 pipes are active.", "ratio", true, false, true,
     "GPM NVML_GPM_METRIC_FP32_UTIL (12) / 100"},
    {FieldId::kProfPipeFp16Active, 1008, "DCGM_FI_PROF_PIPE_FP16_ACTIVE", kGauge,
     "Ratio of cycles the fp16 pipes are active.", "ratio", true, false, true,
     "GPM NVML_GPM_METRIC_FP16_UTIL (13) / 100"},
    {FieldId::kProfPcieTxBytes, 1009, "DCGM_FI_PROF_PCIE_TX_BYTES", kGauge,
     "The rate of data transmitted over the PCIe bus - including both protocol headers and data "
     "payloads - in "
     "bytes per second.",
     "B/s", false, true, true, "GPM NVML_GPM_METRIC_PCIE_TX_PER_SEC (20), MiB/s * 1048576"},
    {FieldId::kProfPcieRxBytes, 1010, "DCGM_FI_PROF_PCIE_RX_BYTES", kGauge,
     "The rate of data received over the PCIe bus - including both protocol headers and data "
     "payloads - in bytes "
     "per second.",
     "B/s", false, true, true, "GPM NVML_GPM_METRIC_PCIE_RX_PER_SEC (21), MiB/s * 1048576"},
}};

constexpr bool CatalogueIsInEnumOrder() {
  for (size_t i = 0; i < kCatalogue.size(); ++i) {
    if (static_cast<size_t>(kCatalogue[i].id) != i) return false;
    if (i > 0 && kCatalogue[i - 1].dcgm_field_id >= kCatalogue[i].dcgm_field_id) return false;
  }
  return true;
}
static_assert(CatalogueIsInEnumOrder(),
              "kCatalogue must list FieldId in order, sorted by DCGM field id");

}  // namespace

std::string_view MetricTypeName(MetricType type) {
  switch (type) {
    case kGauge:
      return "gauge";
    case kCounter:
      return "counter";
    case kLabel:
      return "label";
  }
  return "gauge";
}

std::optional<MetricType> ParseMetricType(std::string_view text) {
  if (text == "gauge") return kGauge;
  if (text == "counter") return kCounter;
  if (text == "label") return kLabel;
  return std::nullopt;
}

std::span<const FieldInfo> Catalogue() { return kCatalogue; }

const FieldInfo& Field(FieldId id) { return kCatalogue[static_cast<size_t>(id)]; }

const FieldInfo* FindField(std::string_view name) {
  for (const FieldInfo& f : kCatalogue) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

}  // namespace gpunode::exporter
