// gpunode doctor: check every layer of the GPU stack, print the baseline card.
#include <algorithm>
#include <iostream>
#include <optional>

#include "src/base/terminal.h"
#include "src/cli/common.h"
#include "src/doctor/doctor.h"

namespace gpunode::cli {
namespace {

struct DoctorOptions {
  bool no_cuda = false;
  bool with_bench = false;
};

int RunDoctor(const GlobalOptions& global, const DoctorOptions& opts) {
  auto format = ParseOutputFormat(global.output);
  if (!format.ok()) {
    PrintError(format.status());
    return kExitUsage;
  }
  auto session = NodeSession::Open(global);
  if (!session.ok()) {
    PrintError(session.status());
    return kExitUsage;
  }
  (*session)->probe_options().init_cuda = !opts.no_cuda;
  (*session)->probe_options().live_metrics = false;  // no check reads them; ~5 ms per GPU
  auto inv = (*session)->Inventory();
  if (!inv.ok()) {
    PrintError(inv.status());
    return kExitUsage;
  }
  doctor::DoctorReport report = doctor::RunDoctor(*inv);
  const int doctor_code = doctor::ExitCode(report);
  int code = doctor_code;
  // --with-bench: the default bench, merged into the baseline card (JSON: baseline.bench).
  std::optional<StatusOr<bench::BenchReport>> bench_report;
  if (opts.with_bench) {
    bench::BenchOptions bench_options;
    bench_options.tests.assign(std::begin(bench::kAllTests), std::end(bench::kAllTests));
    bench_report = RunBenchOnSession(**session, bench_options, *format == OutputFormat::kTable);
    if (!bench_report->ok()) {
      code = std::max(code, 2);
    } else {
      code = std::max(code, bench::ExitCode(**bench_report));
    }
  }
  if (*format == OutputFormat::kTable) {
    // Host files and driver strings inside: escape sequences shown, only our colours kept.
    std::cout << TerminalSafeText(doctor::RenderText(report, UseColor(global)), UseColor(global));
    if (bench_report) {
      std::cout << "\nBench (baseline card)\n";
      if (bench_report->ok()) {
        std::cout << bench::RenderText(**bench_report, UseColor(global));
      } else {
        std::cout << "  bench could not run: " << bench_report->status().message() << "\n";
      }
      // One truth: when the bench changes the outcome, the last line says so (and the exit code).
      if (code != doctor_code) {
        std::cout << "\nOverall: " << (code >= 2 ? "FAIL" : "WARN") << " (exit " << code << "): the checks "
                  << (doctor_code == 0 ? "passed" : "warned") << ", the bench "
                  << (bench_report->ok() ? "missed its ceilings" : "could not run") << "\n";
      }
    }
  } else {
    nlohmann::ordered_json doc = doctor::ToJson(report);
    if (bench_report) {
      doc["baseline"]["bench"] = bench_report->ok()
                                     ? bench::CardSummary(**bench_report)
                                     : nlohmann::ordered_json{{"verdict", "error"},
                                                              {"error", std::string(bench_report->status().message())}};
      // One truth: the summary carries the exit code the process returns, bench included.
      doc["summary"]["exitCode"] = code;
      if (code != doctor_code) doc["summary"]["status"] = code >= 2 ? "fail" : "warn";
      doc["summary"]["checksExitCode"] = doctor_code;
    }
    PrintDocument(doc, *format);
  }
  return code;
}

}  // namespace

void AddDoctorCommand(CLI::App& app, GlobalOptions& global, int* exit_code) {
  auto opts = std::make_shared<DoctorOptions>();
  CLI::App* cmd = app.add_subcommand(
      "doctor",
      "Check every layer of the GPU stack (PCI, kernel module, NVML/libcuda, toolkit, container runtime,\n"
      "kubelet), print the node's baseline card, and say which layer is broken and what to do first.");
  cmd->add_flag("--no-cuda", opts->no_cuda, "Skip cuInit (the slowest step); libcuda's version is still read");
  cmd->add_flag("--with-bench", opts->with_bench,
                "Also run `gpunode bench` (default tests) and add its results to the baseline card");
  cmd->footer(
      "Each layer is ok, warn, fail or skip (a layer this node does not have, e.g. no kubelet).\n"
      "Exit codes: 0 all ok, 1 a warning, 2 a failure, 3 usage error.\n"
      "Examples:\n"
      "  gpunode doctor\n"
      "  gpunode doctor -o json                     # apiVersion gpunode/v1, kind DoctorReport\n"
      "  gpunode --host-root /host doctor           # from a container with the host at /host\n"
      "  gpunode --simulate broken-mismatch doctor  # see a diagnosis without a broken machine");
  cmd->callback([&global, opts, exit_code] { *exit_code = RunDoctor(global, *opts); });
}

}  // namespace gpunode::cli
