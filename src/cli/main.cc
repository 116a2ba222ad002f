// gpunode: one program from "the card is in the slot" to "Kubernetes schedules it".
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "src/cli/common.h"

namespace {
int Main(int argc, char** argv);
}  // namespace

// Every error below main is a Status; an exception that still arrives here (a library call that
// was not wrapped) is a gpunode bug: reported as such, exit 2, never an abort.
int main(int argc, char** argv) {
  try {
    return Main(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "error: internal error (a gpunode bug; please report it): " << e.what() << "\n";
  } catch (...) {
    std::cerr << "error: internal error (a gpunode bug; please report it): unknown exception\n";
  }
  return gpunode::cli::kExitFailed;
}

namespace {
int Main(int argc, char** argv) {
  using namespace gpunode::cli;
  // The OCI runtime shim takes runc's arguments, which CLI11 must not see: as
  // `gpunode oci-runtime ...`, or as gpunode installed under the shim's name.
  {
    const std::string self = argc > 0 ? argv[0] : "";
    const std::string base = self.substr(self.rfind('/') + 1);
    if (base == "nvidia-container-runtime" || base == "gpunode-oci-runtime") {
      return RunOciRuntime(std::vector<std::string>(argv + 1, argv + argc));
    }
    if (base == "nvidia-container-runtime-hook") {
      return RunLegacyHook(std::vector<std::string>(argv + 1, argv + argc));
    }
    if (argc > 1 && std::string(argv[1]) == "oci-runtime") {
      return RunOciRuntime(std::vector<std::string>(argv + 2, argv + argc));
    }
  }
  CLI::App app{
      "gpunode: check, describe and serve the NVIDIA GPUs of this node.\n"
      "Every command reads the host through --host-root (default /), or a simulated node with\n"
      "--simulate PROFILE (built-in names: see `gpunode sim list`)."};
  app.name("gpunode");
  app.set_version_flag("--version", std::string("gpunode ") + GPUNODE_VERSION);
  app.require_subcommand(1);
  app.fallthrough();
  GlobalOptions global;
  app.add_option("--host-root", global.host_root,
                 "Root of the host's filesystem (/host when running in a container)")
      ->envname("GPUNODE_HOST_ROOT");
  app.add_option("--simulate", global.simulate,
                 "Run against a simulated node: a built-in profile name or a profile file")
      ->envname("GPUNODE_SIMULATE");
  app.add_option("-o,--output", global.output, "Output format: table, json or yaml");
  app.add_option("--color", global.color, "Color: auto, always or never")
      ->check(CLI::IsMember({"auto", "always", "never"}));
  app.add_option("--nvml-library", global.nvml_library,
                 "NVML library to load (default libnvidia-ml.so.1)")
      ->envname("GPUNODE_NVML_LIBRARY");
  app.add_option("--cuda-library", global.cuda_library, "CUDA driver library (default libcuda.so.1)")
      ->envname("GPUNODE_CUDA_LIBRARY");
  app.footer(
      "Examples:\n"
      "  gpunode doctor                         check every layer of this node's GPU stack\n"
      "  gpunode --simulate dgx-h200 doctor     the same on a simulated 8x H200 node\n"
      "  gpunode compat check --image pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime\n"
      "  gpunode bench                          measure each GPU against its model's ceilings\n"
      "  gpunode cdi generate                   write a CDI spec so containers get the GPUs\n"
      "  gpunode runtime configure --runtime containerd --cdi   add the nvidia runtime\n"
      "Exit codes: 0 ok, 1 warnings/incompatible, 2 failures/unknown, 3 usage or input errors.");

  int exit_code = kExitOk;
  AddDoctorCommand(app, global, &exit_code);
  AddCompatCommand(app, global, &exit_code);
  AddSimCommand(app, global, &exit_code);
  AddBenchCommand(app, global, &exit_code);
  AddCdiCommand(app, global, &exit_code);
  AddRuntimeCommand(app, global, &exit_code);
  AddLabelsCommand(app, global, &exit_code);
  AddOciRuntimeHelp(app);
  AddPluginCommand(app, global, &exit_code);
  AddExporterCommand(app, global, &exit_code);
  AddK8sCommand(app, global, &exit_code);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    PrintError(e.what());
    std::cerr << "Run 'gpunode --help' (or 'gpunode COMMAND --help') for usage.\n";
    return kExitUsage;
  }
  return exit_code;
}
}  // namespace
