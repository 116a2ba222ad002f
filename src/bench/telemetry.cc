#include "src/bench/telemetry.h"

#include <algorithm>
#include <utility>

#include "absl/time/time.h"

namespace gpunode::bench {

TelemetrySampler::TelemetrySampler(const std::string& nvml_library) {
  if (nvml_library.empty()) {
    error_ = "no NVML library";
    return;
  }
  auto lib = gpu::NvmlLibrary::Open(nvml_library);
  if (!lib.ok()) {
    error_ = std::string(lib.status().message());
    return;
  }
  nvml_ = std::move(*lib);
  thread_ = std::thread([this] { Loop(); });
}

TelemetrySampler::~TelemetrySampler() {
  {
    absl::MutexLock l(&mu_);
    done_ = true;  // wakes Loop's wait
  }
  if (thread_.joinable()) thread_.join();
}

void TelemetrySampler::Begin(unsigned index) {
  absl::MutexLock l(&mu_);
  active_ = index;
  current_ = Telemetry();
  clock_sum_ = 0;
  clock_n_ = 0;
  if (!error_.empty()) current_.error = error_;
}

Telemetry TelemetrySampler::Take() {
  absl::MutexLock l(&mu_);
  active_.reset();
  if (clock_n_ > 0) current_.mean_sm_clock_mhz = clock_sum_ / clock_n_;
  return current_;
}

void TelemetrySampler::Loop() {
  absl::MutexLock l(&mu_);
  while (!done_) {
    if (active_) Sample(*active_);
    // Every 100 ms, or at once when the destructor sets done_.
    mu_.AwaitWithTimeout(absl::Condition(&done_), absl::Milliseconds(100));
  }
}

void TelemetrySampler::Sample(unsigned index) {
  const gpu::NvmlLibrary& f = *nvml_;
  nvmlDevice_t dev = nullptr;
  if (f.nvmlDeviceGetHandleByIndex_v2(index, &dev) != NVML_SUCCESS) return;
  Telemetry& t = current_;
  ++t.samples;
  unsigned v = 0;
  if (f.nvmlDeviceGetTemperature(dev, NVML_TEMPERATURE_GPU, &v) == NVML_SUCCESS) {
    t.max_temperature_c = std::max(t.max_temperature_c.value_or(0), v);
  }
  if (f.nvmlDeviceGetPowerUsage(dev, &v) == NVML_SUCCESS) {
    t.max_power_w = std::max(t.max_power_w.value_or(0), v / 1000.0);
  }
  if (!t.power_limit_w && f.nvmlDeviceGetEnforcedPowerLimit(dev, &v) == NVML_SUCCESS) {
    t.power_limit_w = v / 1000.0;
  }
  if (f.nvmlDeviceGetClockInfo(dev, NVML_CLOCK_SM, &v) == NVML_SUCCESS) {
    t.min_sm_clock_mhz = std::min(t.min_sm_clock_mhz.value_or(v), v);
    t.max_sm_clock_mhz = std::max(t.max_sm_clock_mhz.value_or(0), v);
    clock_sum_ += v;
    ++clock_n_;
  }
  // Drivers before R535 export this as nvmlDeviceGetCurrentClocksThrottleReasons (a fallback).
  unsigned long long reasons = 0;
  if (f.nvmlDeviceGetCurrentClocksEventReasons(dev, &reasons) == NVML_SUCCESS) t.clock_event_reasons |= reasons;
}

}  // namespace gpunode::bench
