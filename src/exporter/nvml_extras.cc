#include "src/exporter/nvml_extras.h"

#include <chrono>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace gpunode::exporter {
namespace {

constexpr unsigned kAllLinks = 0xFFFFFFFFu;
constexpr double kGpmMinSpacingSeconds = 0.1;  // nvml.h: samples should be > 100 ms apart
constexpr double kMiB = 1048576.0;

bool Wanted(const std::array<bool, kFieldCount>& wanted, FieldId id) {
  return wanted[static_cast<size_t>(id)];
}

// The value of a field-value entry as a double (nvmlReturn must be NVML_SUCCESS).
std::optional<double> FieldNumber(const nvmlFieldValue_t& v) {
  switch (v.valueType) {
    case NVML_VALUE_TYPE_DOUBLE:
      return v.value.dVal;
    case NVML_VALUE_TYPE_UNSIGNED_INT:
      return static_cast<double>(v.value.uiVal);
    case NVML_VALUE_TYPE_UNSIGNED_LONG:
      return static_cast<double>(v.value.ulVal);
    case NVML_VALUE_TYPE_UNSIGNED_LONG_LONG:
      return static_cast<double>(v.value.ullVal);
    case NVML_VALUE_TYPE_SIGNED_LONG_LONG:
      return static_cast<double>(v.value.sllVal);
    case NVML_VALUE_TYPE_SIGNED_INT:
      return static_cast<double>(v.value.siVal);
    case NVML_VALUE_TYPE_UNSIGNED_SHORT:
      return static_cast<double>(v.value.usVal);
    default:
      return std::nullopt;
  }
}

// Counters as integers (for exact deltas of the cumulative NVLink KiB).
std::optional<unsigned long long> FieldCounter(const nvmlFieldValue_t& v) {
  switch (v.valueType) {
    case NVML_VALUE_TYPE_UNSIGNED_INT:
      return v.value.uiVal;
    case NVML_VALUE_TYPE_UNSIGNED_LONG:
      return v.value.ulVal;
    case NVML_VALUE_TYPE_UNSIGNED_LONG_LONG:
      return v.value.ullVal;
    case NVML_VALUE_TYPE_SIGNED_LONG_LONG:
      if (v.value.sllVal < 0) return std::nullopt;
      return static_cast<unsigned long long>(v.value.sllVal);
    default:
      return std::nullopt;
  }
}

// Records `ret` for `field` unless it means "not supported".
void NoteFailure(const gpu::NvmlLibrary& nvml, nvmlReturn_t ret, absl::string_view op, FieldId field,
                 GpuSample& sample) {
  if (ret == NVML_SUCCESS || gpu::NvmlIsUnsupported(ret)) return;
  sample.errors[field] = nvml.Check(ret, op);
}

struct GpmField {
  FieldId field;
  unsigned metric;
  double scale;
};
constexpr GpmField kGpmFields[] = {
    {FieldId::kProfGrEngineActive, NVML_GPM_METRIC_GRAPHICS_UTIL, 0.01},
    {FieldId::kProfSmActive, NVML_GPM_METRIC_SM_UTIL, 0.01},
    {FieldId::kProfSmOccupancy, NVML_GPM_METRIC_SM_OCCUPANCY, 0.01},
    {FieldId::kProfPipeTensorActive, NVML_GPM_METRIC_ANY_TENSOR_UTIL, 0.01},
    {FieldId::kProfDramActive, NVML_GPM_METRIC_DRAM_BW_UTIL, 0.01},
    {FieldId::kProfPipeFp64Active, NVML_GPM_METRIC_FP64_UTIL, 0.01},
    {FieldId::kProfPipeFp32Active, NVML_GPM_METRIC_FP32_UTIL, 0.01},
    {FieldId::kProfPipeFp16Active, NVML_GPM_METRIC_FP16_UTIL, 0.01},
    {FieldId::kProfPcieTxBytes, NVML_GPM_METRIC_PCIE_TX_PER_SEC, kMiB},
    {FieldId::kProfPcieRxBytes, NVML_GPM_METRIC_PCIE_RX_PER_SEC, kMiB},
};

}  // namespace

std::optional<GpmMapping> GpmMetricFor(FieldId field) {
  for (const auto& f : kGpmFields) {
    if (f.field == field) return GpmMapping{f.metric, f.scale};
  }
  return std::nullopt;
}

// ---- GpuExtrasState -----------------------------------------------------------------------------

GpuExtrasState::GpuExtrasState(std::function<double()> monotonic_seconds)
    : clock_(std::move(monotonic_seconds)) {}

GpuExtrasState::~GpuExtrasState() { FreeSamples(); }

GpuExtrasState::GpuExtrasState(GpuExtrasState&& other) noexcept
    : clock_(std::move(other.clock_)),
      nvlink_sum_kib_(other.nvlink_sum_kib_),
      nvlink_time_(other.nvlink_time_),
      gpm_supported_(other.gpm_supported_),
      nvml_(other.nvml_),
      gpm_previous_(std::exchange(other.gpm_previous_, nullptr)),
      gpm_previous_time_(other.gpm_previous_time_),
      gpm_current_(std::exchange(other.gpm_current_, nullptr)) {}

GpuExtrasState& GpuExtrasState::operator=(GpuExtrasState&& other) noexcept {
  if (this == &other) return *this;
  FreeSamples();
  clock_ = std::move(other.clock_);
  nvlink_sum_kib_ = other.nvlink_sum_kib_;
  nvlink_time_ = other.nvlink_time_;
  gpm_supported_ = other.gpm_supported_;
  nvml_ = other.nvml_;
  gpm_previous_ = std::exchange(other.gpm_previous_, nullptr);
  gpm_previous_time_ = other.gpm_previous_time_;
  gpm_current_ = std::exchange(other.gpm_current_, nullptr);
  return *this;
}

void GpuExtrasState::Reset() {
  nvlink_sum_kib_.reset();
  FreeSamples();
}

double GpuExtrasState::Now() const {
  if (clock_) return clock_();
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void GpuExtrasState::FreeSamples() {
  for (nvmlGpmSample_t* s : {&gpm_previous_, &gpm_current_}) {
    if (*s != nullptr && nvml_ != nullptr) nvml_->nvmlGpmSampleFree(*s);
    *s = nullptr;
  }
}

// ---- fast fields --------------------------------------------------------------------------------

namespace {

// Per-entry failure of a field value. A driver older than a field id answers that entry with
// INVALID_ARGUMENT (driver 580 does so for ids it does not know): that reads as "not supported".
void NoteEntryFailure(const gpu::NvmlLibrary& nvml, nvmlReturn_t ret, absl::string_view op,
                      FieldId field, GpuSample& sample) {
  if (ret == NVML_ERROR_INVALID_ARGUMENT) return;
  NoteFailure(nvml, ret, op, field, sample);
}

void ReadFieldValues(const gpu::NvmlLibrary& nvml, nvmlDevice_t dev,
                     const std::array<bool, kFieldCount>& wanted, GpuSample& sample,
                     std::optional<unsigned long long>* nvlink_sum) {
  const bool want_temp = Wanted(wanted, FieldId::kMemoryTemp);
  const bool want_nvlink = Wanted(wanted, FieldId::kNvlinkBandwidthTotal);
  if (!want_temp && !want_nvlink) return;
  nvmlFieldValue_t values[3] = {};
  int n = 0;
  int temp_at = -1, tx_at = -1, rx_at = -1;
  if (want_temp) {
    temp_at = n;
    values[n++].fieldId = NVML_FI_DEV_MEMORY_TEMP;
  }
  if (want_nvlink) {
    tx_at = n;
    values[n].fieldId = NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX;
    values[n++].scopeId = kAllLinks;
    rx_at = n;
    values[n].fieldId = NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX;
    values[n++].scopeId = kAllLinks;
  }
  const nvmlReturn_t ret = nvml.nvmlDeviceGetFieldValues(dev, n, values);
  if (ret != NVML_SUCCESS) {
    if (want_temp)
      NoteFailure(nvml, ret, "nvmlDeviceGetFieldValues", FieldId::kMemoryTemp, sample);
    if (want_nvlink)
      NoteFailure(nvml, ret, "nvmlDeviceGetFieldValues", FieldId::kNvlinkBandwidthTotal, sample);
    return;
  }
  if (temp_at >= 0) {
    const nvmlFieldValue_t& v = values[temp_at];
    if (v.nvmlReturn == NVML_SUCCESS) {
      if (auto x = FieldNumber(v)) sample.set(FieldId::kMemoryTemp, *x);
    } else {
      NoteEntryFailure(nvml, v.nvmlReturn, "nvmlDeviceGetFieldValues(NVML_FI_DEV_MEMORY_TEMP)",
                  FieldId::kMemoryTemp, sample);
    }
  }
  if (tx_at >= 0) {
    const nvmlFieldValue_t& tx = values[tx_at];
    const nvmlFieldValue_t& rx = values[rx_at];
    if (tx.nvmlReturn != NVML_SUCCESS || rx.nvmlReturn != NVML_SUCCESS) {
      const bool tx_bad = tx.nvmlReturn != NVML_SUCCESS;
      NoteEntryFailure(nvml, tx_bad ? tx.nvmlReturn : rx.nvmlReturn,
                  tx_bad ? "nvmlDeviceGetFieldValues(NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX)"
                         : "nvmlDeviceGetFieldValues(NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX)",
                  FieldId::kNvlinkBandwidthTotal, sample);
      return;
    }
    auto t = FieldCounter(tx);
    auto r = FieldCounter(rx);
    if (t && r) *nvlink_sum = *t + *r;
  }
}

}  // namespace

void ReadFastExtras(const gpu::NvmlLibrary& nvml, nvmlDevice_t dev,
                    const std::array<bool, kFieldCount>& wanted, GpuExtrasState& state,
                    GpuSample& sample) {
  std::optional<unsigned long long> nvlink_sum;
  ReadFieldValues(nvml, dev, wanted, sample, &nvlink_sum);
  if (Wanted(wanted, FieldId::kNvlinkBandwidthTotal)) {
    if (!nvlink_sum) {
      state.nvlink_sum_kib_.reset();  // no baseline across a gap
    } else {
      const double now = state.Now();
      if (state.nvlink_sum_kib_ && *nvlink_sum >= *state.nvlink_sum_kib_ &&
          now > state.nvlink_time_) {
        const double delta_kib = static_cast<double>(*nvlink_sum - *state.nvlink_sum_kib_);
        sample.set(FieldId::kNvlinkBandwidthTotal, delta_kib / (now - state.nvlink_time_) / 1000.0);
      }
      // A counter that went backwards (driver reload) starts a new baseline.
      state.nvlink_sum_kib_ = nvlink_sum;
      state.nvlink_time_ = now;
    }
  }

  if (Wanted(wanted, FieldId::kPcieReplayCounter)) {
    unsigned int count = 0;
    const nvmlReturn_t ret = nvml.nvmlDeviceGetPcieReplayCounter(dev, &count);
    if (ret == NVML_SUCCESS) {
      sample.set(FieldId::kPcieReplayCounter, count);
    } else {
      NoteFailure(nvml, ret, "nvmlDeviceGetPcieReplayCounter", FieldId::kPcieReplayCounter, sample);
    }
  }
  if (Wanted(wanted, FieldId::kEncUtil)) {
    unsigned int util = 0, period_us = 0;
    const nvmlReturn_t ret = nvml.nvmlDeviceGetEncoderUtilization(dev, &util, &period_us);
    if (ret == NVML_SUCCESS) {
      sample.set(FieldId::kEncUtil, util);
    } else {
      NoteFailure(nvml, ret, "nvmlDeviceGetEncoderUtilization", FieldId::kEncUtil, sample);
    }
  }
  if (Wanted(wanted, FieldId::kDecUtil)) {
    unsigned int util = 0, period_us = 0;
    const nvmlReturn_t ret = nvml.nvmlDeviceGetDecoderUtilization(dev, &util, &period_us);
    if (ret == NVML_SUCCESS) {
      sample.set(FieldId::kDecUtil, util);
    } else {
      NoteFailure(nvml, ret, "nvmlDeviceGetDecoderUtilization", FieldId::kDecUtil, sample);
    }
  }
}

// ---- GPM ----------------------------------------------------------------------------------------

bool ReadGpmFields(const gpu::NvmlLibrary& nvml, nvmlDevice_t dev,
                   const std::array<bool, kFieldCount>& wanted, GpuExtrasState& state,
                   GpuSample& sample) {
  if (state.gpm_supported_ == false) return false;
  std::vector<const GpmField*> fields;
  for (const auto& f : kGpmFields) {
    if (Wanted(wanted, f.field)) fields.push_back(&f);
  }
  if (fields.empty()) return true;
  auto fail_all = [&](nvmlReturn_t ret, absl::string_view op) {
    for (const auto* f : fields) sample.errors[f->field] = nvml.Check(ret, op);
  };

  if (!state.gpm_supported_) {
    // A driver without GPM (before R520) lacks the whole nvmlGpm* family: the query then answers
    // NVML_ERROR_FUNCTION_NOT_FOUND, which gpu::NvmlIsUnsupported counts as unsupported.
    nvmlGpmSupport_t support = {};
    support.version = NVML_GPM_SUPPORT_VERSION;
    const nvmlReturn_t ret = nvml.nvmlGpmQueryDeviceSupport(dev, &support);
    if (ret != NVML_SUCCESS) {
      if (gpu::NvmlIsUnsupported(ret)) {
        state.gpm_supported_ = false;
        return false;
      }
      fail_all(ret, "nvmlGpmQueryDeviceSupport");  // e.g. GPU lost: ask again next pass
      return true;
    }
    state.gpm_supported_ = support.isSupportedDevice != 0;
    if (!*state.gpm_supported_) return false;
  }

  if (state.nvml_ != nullptr && state.nvml_ != &nvml) state.FreeSamples();  // another library
  state.nvml_ = &nvml;
  if (state.gpm_current_ == nullptr) {
    nvmlGpmSample_t s = nullptr;
    const nvmlReturn_t ret = nvml.nvmlGpmSampleAlloc(&s);
    if (ret != NVML_SUCCESS) {
      fail_all(ret, "nvmlGpmSampleAlloc");
      return true;
    }
    state.gpm_current_ = s;
  }
  const nvmlReturn_t got = nvml.nvmlGpmSampleGet(dev, state.gpm_current_);
  const double now = state.Now();
  if (got != NVML_SUCCESS) {
    if (!gpu::NvmlIsUnsupported(got)) fail_all(got, "nvmlGpmSampleGet");
    return true;
  }
  if (state.gpm_previous_ == nullptr) {  // the first sample: values from the next pass
    state.gpm_previous_ = std::exchange(state.gpm_current_, nullptr);
    state.gpm_previous_time_ = now;
    return true;
  }
  if (now - state.gpm_previous_time_ < kGpmMinSpacingSeconds) {
    return true;  // too close: keep the older sample, reuse this buffer next time
  }

  // nvmlGpmMetricsGet_t is large (NVML_GPM_METRIC_MAX entries): keep it off the stack.
  auto get = std::make_unique<nvmlGpmMetricsGet_t>();
  *get = {};
  get->version = NVML_GPM_METRICS_GET_VERSION;
  get->numMetrics = static_cast<unsigned int>(fields.size());
  get->sample1 = state.gpm_previous_;
  get->sample2 = state.gpm_current_;
  for (size_t i = 0; i < fields.size(); ++i) get->metrics[i].metricId = fields[i]->metric;
  const nvmlReturn_t ret = nvml.nvmlGpmMetricsGet(get.get());
  // The newer sample becomes the baseline either way; the older buffer is reused.
  std::swap(state.gpm_previous_, state.gpm_current_);
  state.gpm_previous_time_ = now;
  if (ret != NVML_SUCCESS) {
    if (!gpu::NvmlIsUnsupported(ret)) fail_all(ret, "nvmlGpmMetricsGet");
    return true;
  }
  for (size_t i = 0; i < fields.size(); ++i) {
    const nvmlGpmMetric_t& m = get->metrics[i];
    if (m.nvmlReturn == NVML_SUCCESS) {
      sample.set(fields[i]->field, m.value * fields[i]->scale);
    } else {
      NoteFailure(nvml, m.nvmlReturn,
                  absl::StrCat("nvmlGpmMetricsGet(metric ", fields[i]->metric, ")"),
                  fields[i]->field, sample);
    }
  }
  return true;
}

}  // namespace gpunode::exporter
