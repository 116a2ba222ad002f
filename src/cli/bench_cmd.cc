// gpunode bench: measure each GPU against its model's ceilings (GEMM, memory bandwidth, PCIe,
// memory integrity, peer-to-peer) through the CUDA driver API. See docs/bench.md.
#include <signal.h>
#include <unistd.h>

#include <time.h>

#include <atomic>
#include <cstdint>
#include <iostream>

#include "src/bench/bench.h"
#include "src/bench/report.h"
#include "src/bench/runner.h"
#include "src/cli/common.h"

namespace gpunode::cli {
namespace {

struct BenchCmdOptions {
  std::string tests = "all";
  std::string gpus = "all";
  double duration = 1.0;
  bool force = false;
  bool quiet = false;
  std::string gemm_library = "auto";
  std::string ptx = "auto";
};

std::atomic<int64_t> g_first_sigint_ns{0};

int64_t MonotonicNs() {
  struct timespec ts {};
  clock_gettime(CLOCK_MONOTONIC, &ts);  // async-signal-safe
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// Async-signal-safe: atomics, clock_gettime, signal, raise.
void OnSigint(int) {
  int64_t now = MonotonicNs();
  int64_t first = g_first_sigint_ns.load();
  if (first == 0) {
    g_first_sigint_ns.store(now);
    bench::RequestStop();
  } else if (now - first > 1000000000) {  // a second Ctrl-C, a second later: die
    signal(SIGINT, SIG_DFL);
    raise(SIGINT);
  }
  // Repeats within a second are the same interrupt delivered twice (to the process and to its
  // process group, as `timeout -s INT` does) and are ignored.
}

// Ctrl-C asks the runner to stop at the next iteration; it frees its buffers and contexts and
// reports what it measured. A second Ctrl-C (more than a second later) kills the process.
class SigintScope {
 public:
  SigintScope() {
    bench::ResetStop();
    g_first_sigint_ns.store(0);
    struct sigaction sa {};
    sa.sa_handler = OnSigint;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;
    sigaction(SIGINT, &sa, &old_);
  }
  ~SigintScope() { sigaction(SIGINT, &old_, nullptr); }

 private:
  struct sigaction old_ {};
};

int RunBenchCommand(const GlobalOptions& global, const BenchCmdOptions& o) {
  auto format = ParseOutputFormat(global.output);
  if (!format.ok()) {
    PrintError(format.status());
    return kExitUsage;
  }
  bench::BenchOptions options;
  auto tests = bench::ParseTests(o.tests);
  auto gpus = bench::ParseGpus(o.gpus);
  Status duration = bench::ValidateDuration(o.duration);
  Status ptx = bench::ValidatePtxChoice(o.ptx);
  for (const Status& s : {tests.status(), gpus.status(), duration, ptx}) {
    if (!s.ok()) {
      PrintError(s);
      return kExitUsage;
    }
  }
  options.tests = *tests;
  options.gpus = *gpus;
  options.duration_s = o.duration;
  options.gemm_library = o.gemm_library;
  options.ptx = o.ptx;
  options.force = o.force;
  if (Status s = bench::KernelsAvailable(bench::EmbeddedPtx()); !s.ok()) {
    PrintError(s);
    return kExitUsage;
  }
  auto session = NodeSession::Open(global);
  if (!session.ok()) {
    PrintError(session.status());
    return kExitUsage;
  }
  auto report = RunBenchOnSession(**session, options, !o.quiet);
  if (!report.ok()) {
    PrintError(report.status());
    return kExitUsage;
  }
  if (*format == OutputFormat::kTable) {
    std::cout << bench::RenderText(*report, UseColor(global));
  } else {
    PrintDocument(bench::ToJson(*report), *format);
  }
  return bench::ExitCode(*report);
}

}  // namespace

StatusOr<bench::BenchReport> RunBenchOnSession(const NodeSession& session,
                                               const bench::BenchOptions& options, bool progress) {
  if (session.simulated()) {
    return absl::FailedPreconditionError(
        "bench needs real GPUs: under --simulate there is no CUDA driver to run kernels on");
  }
  node::ProbeOptions probe = session.probe_options();
  probe.init_cuda = false;  // the runner initialises CUDA itself
  auto inv = node::ProbeNode(session.fs(), probe);
  if (!inv.ok()) return inv.status();
  bench::RunnerEnv env;
  env.cuda_library = probe.cuda_library;
  env.nvml_library = probe.nvml_library;
  if (progress) {
    env.progress = [](const std::string& line) { std::cerr << line << std::endl; };
  }
  SigintScope sigint;
  return bench::RunBench(*inv, options, env);
}

void AddBenchCommand(CLI::App& app, GlobalOptions& global, int* exit_code) {
  auto opts = std::make_shared<BenchCmdOptions>();
  CLI::App* cmd = app.add_subcommand(
      "bench",
      "Measure each GPU against its model's ceilings: dense GEMM (bf16/fp16/fp32, result-checked),\n"
      "memory bandwidth (copy, triad), PCIe host<->device, a memory pattern test and GPU<->GPU copies.");
  cmd->add_option("--tests", opts->tests, "Comma-separated: gemm,hbm,pcie,memtest,p2p (default all)");
  cmd->add_option("--gpus", opts->gpus, "GPU indices as nvidia-smi numbers them, e.g. 0,2, or all (default)");
  cmd->add_option("--duration", opts->duration, "Seconds of timed work per measurement (default 1)");
  cmd->add_flag("--force", opts->force, "Also run on GPUs that have compute processes");
  cmd->add_option("--gemm-library", opts->gemm_library,
                  "GEMM code: auto (cuBLASLt when found, our bf16 kernel beside it), cublaslt (required),\n"
                  "gpunode (our kernels only: what a node with only the driver gets; on Hopper the\n"
                  "wgmma/TMA kernel)")
      ->check(CLI::IsMember({"auto", "cublaslt", "gpunode"}))
      ->default_str("auto");
  cmd->add_option("--ptx", opts->ptx,
                  "Which embedded PTX our kernels come from: auto (by compute capability: 7.5 compute_75,\n"
                  "8.0+ compute_80), compute_75 (diagnostic: the Turing kernels on a newer GPU, JIT-compiled\n"
                  "there; no bf16) or compute_80")
      ->check(CLI::IsMember({"auto", "compute_75", "compute_80"}))
      ->default_str("auto");
  cmd->add_flag("-q,--quiet", opts->quiet, "No progress lines on stderr");
  cmd->footer(
      "Each measurement passes at a documented fraction of its ceiling (docs/bench.md); GPUs whose\n"
      "model is not in the ceilings table report numbers with verdict no-ceiling.\n"
      "Exit codes: 0 pass, 1 a GPU skipped (busy) or interrupted, 2 a test failed, 3 usage error or\n"
      "bench unavailable (no libcuda, no GPU, built without its kernels).\n"
      "Examples:\n"
      "  gpunode bench\n"
      "  gpunode bench --tests gemm,hbm --gpus 0 -o json    # apiVersion gpunode/v1, kind BenchReport\n"
      "  gpunode bench --ptx compute_75 --gemm-library gpunode   # the T4 (Turing) path on a newer GPU");
  cmd->callback([&global, opts, exit_code] { *exit_code = RunBenchCommand(global, *opts); });
}

}  // namespace gpunode::cli
