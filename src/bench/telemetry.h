// NVML telemetry for the bench runner (runner.cc): a thread samples the GPU under test every
// 100 ms (temperature, power, SM clock, clock-event reasons). Internal to src/bench.
#ifndef GPUNODE_BENCH_TELEMETRY_H_
#define GPUNODE_BENCH_TELEMETRY_H_

#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "src/bench/report.h"
#include "src/gpu/nvml.h"

namespace gpunode::bench {

class TelemetrySampler {
 public:
  // Without a usable NVML library every Telemetry carries the reason in `error`.
  explicit TelemetrySampler(const std::string& nvml_library);
  ~TelemetrySampler();
  TelemetrySampler(const TelemetrySampler&) = delete;
  TelemetrySampler& operator=(const TelemetrySampler&) = delete;

  // Starts sampling NVML GPU `index` into a fresh Telemetry; Take() returns it.
  void Begin(unsigned index) ABSL_LOCKS_EXCLUDED(mu_);
  Telemetry Take() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Loop() ABSL_LOCKS_EXCLUDED(mu_);
  void Sample(unsigned index) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Set by the constructor before the thread starts, then only read.
  std::unique_ptr<gpu::NvmlLibrary> nvml_;
  std::string error_;
  std::thread thread_;

  absl::Mutex mu_;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<unsigned> active_ ABSL_GUARDED_BY(mu_);
  Telemetry current_ ABSL_GUARDED_BY(mu_);
  double clock_sum_ ABSL_GUARDED_BY(mu_) = 0;
  int clock_n_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace gpunode::bench

#endif  // GPUNODE_BENCH_TELEMETRY_H_
