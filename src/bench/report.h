// The BenchReport: what `gpunode bench` measured, per GPU and test, with the ceilings it was
// judged against; its JSON form (apiVersion gpunode/v1, kind BenchReport, docs/bench.md) and
// its table. Pure: the runner fills it, the renderers only read it.
#ifndef GPUNODE_BENCH_REPORT_H_
#define GPUNODE_BENCH_REPORT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "src/bench/bench.h"

namespace gpunode::bench {

struct Measurement {
  std::string name;     // "bf16", "copy", "triad", "h2d", "d2h", "patterns", "0->1"
  std::string backend;  // "cublasLt 13.0.2", "gpunode-wmma", "cuMemcpy", "kernel", ...
  double value = 0;
  std::string unit;     // "TFLOP/s", "GB/s"
  std::optional<Reference> reference;
  Verdict verdict = Verdict::kNoCeiling;
  std::optional<GemmCheck> check;  // GEMM result check
  int64_t iterations = 0;
  double seconds = 0;   // timed GPU seconds
  // GEMM only: ten products right after three warm-ups, timed as one, before the autotuning and
  // the sustained loop (how the reference ceiling of 790 TFLOP/s was measured: before the power
  // cap lowers the clocks). `value` is the sustained rate over --duration; the verdict uses it.
  std::optional<double> burst;
  std::string detail;   // size, what was tested, why it failed
  // The GPU (or the PTX that --ptx forced) has no such unit: bf16 on Turing. Verdict kSkipped,
  // detail says why; the test's roll-up ignores it, so it is neither a pass nor a failure.
  bool unsupported = false;
};

struct TestResult {
  TestKind test = TestKind::kGemm;
  Verdict verdict = Verdict::kNoCeiling;  // worst of the measurements, or error/skipped
  std::string reason;                     // for error / skipped
  std::vector<Measurement> measurements;
  double wall_s = 0;
};

// NVML readings while this GPU was under test (sampled every 100 ms).
struct Telemetry {
  int samples = 0;
  std::optional<unsigned> max_temperature_c;
  std::optional<double> max_power_w;
  std::optional<double> power_limit_w;
  std::optional<unsigned> min_sm_clock_mhz, max_sm_clock_mhz;
  std::optional<double> mean_sm_clock_mhz;
  uint64_t clock_event_reasons = 0;  // OR of every sample
  std::string error;                 // NVML unavailable, ...
};

struct GpuResult {
  unsigned index = 0;  // NVML index (as nvidia-smi)
  std::optional<int> cuda_ordinal;
  std::string name, uuid, bus_id;
  std::string compute_capability;
  std::string ptx_target;     // the PTX its kernels came from ("compute_80", "compute_75"); empty if not opened
  std::string ceiling_model;  // id in gpu-ceilings.yaml, empty when unknown
  std::optional<unsigned> pcie_gen, pcie_width, pcie_gen_max, pcie_width_max;
  std::vector<unsigned> busy_pids;
  bool skipped = false;
  std::string skip_reason;
  Verdict verdict = Verdict::kNoCeiling;
  std::vector<TestResult> tests;
  Telemetry telemetry;
};

struct BenchReport {
  std::string hostname;
  std::string driver_version;      // NVML's
  int cuda_driver_version = 0;     // cuDriverGetVersion
  std::string cuda_library;
  std::string gemm_library;        // "cublasLt 13.0.2 (/usr/local/cuda/lib64/libcublasLt.so.13)" or ""
  std::string gemm_library_note;   // why cuBLASLt was not used
  BenchOptions options;
  std::vector<GpuResult> gpus;
  std::optional<TestResult> p2p;   // node-wide
  Verdict verdict = Verdict::kNoCeiling;
  bool interrupted = false;
  double wall_s = 0;
};

// A test's verdict from its measurements: error/skipped as set, else the worst judged one;
// no-ceiling only when none was judged. Unsupported measurements (bf16 on Turing) are ignored.
Verdict RollUpTest(const TestResult& test);
// Rolls test verdicts up into GPUs and the report (worst wins; a skipped GPU counts as skipped,
// "no-ceiling" only when nothing passed or failed).
void Finalize(BenchReport& report);
// 0 pass / no-ceiling, 1 a GPU skipped or the run interrupted, 2 a test failed or errored.
int ExitCode(const BenchReport& report);

nlohmann::ordered_json ToJson(const BenchReport& report);
std::string RenderText(const BenchReport& report, bool color);
// The per-GPU summary that `doctor --with-bench` adds to the baseline card.
nlohmann::ordered_json CardSummary(const BenchReport& report);

}  // namespace gpunode::bench

#endif  // GPUNODE_BENCH_REPORT_H_
