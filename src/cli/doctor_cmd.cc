// gpunode doctor: check every layer of the GPU stack, print the baseline card.
#include <iostream>

#include "src/cli/common.h"
#include "src/doctor/doctor.h"

namespace gpunode::cli {
namespace {

struct DoctorOptions {
  bool no_cuda = false;
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
  auto inv = (*session)->Inventory();
  if (!inv.ok()) {
    PrintError(inv.status());
    return kExitUsage;
  }
  doctor::DoctorReport report = doctor::RunDoctor(*inv);
  if (*format == OutputFormat::kTable) {
    std::cout << doctor::RenderText(report, UseColor(global));
  } else {
    PrintDocument(doctor::ToJson(report), *format);
  }
  return doctor::ExitCode(report);
}

}  // namespace

void AddDoctorCommand(CLI::App& app, GlobalOptions& global, int* exit_code) {
  auto opts = std::make_shared<DoctorOptions>();
  CLI::App* cmd = app.add_subcommand(
      "doctor",
      "Check every layer of the GPU stack (PCI, kernel module, NVML/libcuda, toolkit, container runtime,\n"
      "kubelet), print the node's baseline card, and say which layer is broken and what to do first.");
  cmd->add_flag("--no-cuda", opts->no_cuda, "Skip cuInit (the slowest step); libcuda's version is still read");
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
