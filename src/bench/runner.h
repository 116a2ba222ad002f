// Runs the benchmarks on real GPUs through the CUDA driver API (cuda_driver.h), cuBLASLt when it
// loads (cublaslt.h) and the embedded PTX kernels, with NVML telemetry sampled on a thread.
// GPUs run one after another; p2p runs last over every pair of GPUs that ran.
#ifndef GPUNODE_BENCH_RUNNER_H_
#define GPUNODE_BENCH_RUNNER_H_

#include <functional>
#include <string>

#include "src/base/status.h"
#include "src/bench/bench.h"
#include "src/bench/report.h"
#include "src/node/inventory.h"

namespace gpunode::bench {

struct RunnerEnv {
  std::string cuda_library = "libcuda.so.1";
  std::string nvml_library = "libnvidia-ml.so.1";  // telemetry; empty = none
  std::function<void(const std::string&)> progress;  // one line per step; may be empty
};

// Asks a running RunBench to stop at the next iteration boundary (async-signal-safe: a lock-free
// atomic store; called from the SIGINT handler). ResetStop() clears it (tests, doctor).
void RequestStop();
void ResetStop();
bool StopRequested();

// Runs `options` on the GPUs of `inv` (NVML's list; GPUs with compute processes are skipped
// unless options.force). Fails as a whole (kFailedPrecondition / kNotFound / kInvalidArgument)
// only when nothing can run: no embedded kernels, libcuda missing or unusable, no GPU, a --gpus
// index that does not exist. Per-test problems land in that test's verdict ("error") and reason.
StatusOr<BenchReport> RunBench(const node::NodeInventory& inv, const BenchOptions& options,
                               const RunnerEnv& env);

}  // namespace gpunode::bench

#endif  // GPUNODE_BENCH_RUNNER_H_
