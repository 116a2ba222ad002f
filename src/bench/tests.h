// The bench tests (gemm, hbm, pcie, memtest, p2p) on one Device, for the runner (runner.cc).
// Each returns its TestResult: measurements with their verdicts, or the error that stopped it.
// Internal to src/bench.
#ifndef GPUNODE_BENCH_TESTS_H_
#define GPUNODE_BENCH_TESTS_H_

#include <chrono>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "src/base/status.h"
#include "src/bench/bench.h"
#include "src/bench/ceilings.h"
#include "src/bench/cublaslt.h"
#include "src/bench/device.h"
#include "src/bench/report.h"
#include "src/bench/runner.h"

namespace gpunode::bench {

// What every test of one run shares.
struct Context {
  const BenchOptions& options;
  const RunnerEnv& env;
  CublasLt* cublas = nullptr;  // null: GEMM uses gpunode's own kernels
  std::string cublas_name;
  void Progress(const std::string& line) const {
    if (env.progress) env.progress(line);
  }
};

double SecondsSince(std::chrono::steady_clock::time_point t);

// Runs one test: `body` adds its measurements to the result of test `kind`; an error it returns
// becomes the test's verdict ("error") and reason, beside the measurements made before it.
TestResult RunTest(TestKind kind, const std::function<Status(TestResult&)>& body);

// Runs `test`, records its wall time and rolls its measurements' verdicts up into its own.
TestResult TimedTest(const std::function<TestResult()>& test);

TestResult RunGemm(Device& dev, const Context& ctx, const ModelCeilings* model);
TestResult RunHbm(Device& dev, const Context& ctx, const ModelCeilings* model);
TestResult RunPcie(Device& dev, const Context& ctx, const ModelCeilings* model, const GpuResult& g);
TestResult RunMemtest(Device& dev, const Context& ctx);
// Every ordered pair of the GPUs that ran; skipped below two.
TestResult RunP2p(std::vector<std::pair<GpuResult*, Device*>>& devs, const Context& ctx);

}  // namespace gpunode::bench

#endif  // GPUNODE_BENCH_TESTS_H_
