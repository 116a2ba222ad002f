// gpunode: one program from "the card is in the slot" to "Kubernetes schedules it".
#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "src/bench/bench.h"
#include "src/cli/common.h"
#include "src/cli/ctk_cmd.h"
#include "src/cli/libcuda_guard.h"

namespace {
int Main(int argc, char** argv);
}  // namespace

namespace gpunode::cli {
void AddImageListCommand(CLI::App& app, GlobalOptions& global, int* exit_code);  // image_list_cmd.cc
}  // namespace gpunode::cli

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

extern const char kGpunodeCommit[];      // build_info.cc, generated at build time
extern const char kGpunodeCommitDate[];

namespace {

// Why `path` (e.g. "cdi generate") has no report for -o to format, or "" when it has one.
std::string NoReportReason(const std::string& path) {
  static const std::vector<std::pair<std::string, std::string>> kNoReport = {
      {"cdi generate", "it writes a CDI spec: its format is --format yaml|json, its file --output FILE"},
      {"cdi hook create-symlinks", "it is a container hook"},
      {"cdi hook update-ldcache", "it is a container hook"},
      {"exporter", "it serves Prometheus metrics; --once prints them"},
      {"sim hostroot", "it writes a host root folder"},
      {"sim capture", "it writes a profile: its file is --output FILE"},
      {"k8s uninstall", "it is the chart's pre-delete hook"},
      {"oci-runtime", "it is an OCI runtime"},
      {"completion", "it prints a shell script"},
      {"man", "it prints a man page"},
  };
  for (const auto& [p, why] : kNoReport) {
    if (path == p) return why;
  }
  return "";
}

// `gpunode --version`: the version, the commit and its date, the compiler, and what is built in.
std::string VersionText() {
  std::string compiler =
#if defined(__clang__)
      std::string("clang ") + __clang_version__;
#elif defined(__GNUC__)
      std::string("gcc ") + __VERSION__;
#else
      "unknown compiler";
#endif
  // What bench can run, read from the embedded files themselves.
  const bool ptx80 = ::gpunode::bench::KernelsAvailable(::gpunode::bench::EmbeddedPtx()).ok();
  const bool ptx90a = ::gpunode::bench::KernelsAvailable(::gpunode::bench::EmbeddedPtxSm90a()).ok();
  const bool ptx75 = ::gpunode::bench::KernelsAvailable(::gpunode::bench::EmbeddedPtxSm75()).ok();
  std::string kernels = !ptx80 ? "no bench kernels (built without their PTX)"
                        : ptx90a ? "bench kernels as PTX for compute_80 (Ampere and newer) and sm_90a (the Hopper "
                                   "wgmma/TMA GEMM), JIT-compiled by the driver"
                                 : "bench kernels as PTX for compute_80 (JIT-compiled by the driver; no sm_90a GEMM)";
  if (ptx80 && ptx75) kernels += ", and for compute_75 (Turing: fp16 only)";
  return std::string("gpunode ") + GPUNODE_VERSION + " (commit " + kGpunodeCommit + ", " + kGpunodeCommitDate +
         ")\nbuilt with " + compiler + "\nbuilt in: " + kernels +
         ", the compat data set, the simulated node profiles; NVML and libcuda are loaded at run time";
}

// Edit distance, for "did you mean".
size_t Distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t prev = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cur = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, prev + (a[i - 1] == b[j - 1] ? 0 : 1)});
      prev = cur;
    }
  }
  return row[b.size()];
}

// kubectl's answer to a mistyped command: `unknown command "docter" for "gpunode"` and the closest
// command names. Walks the arguments as CLI11 would (options and their values skipped) down the
// command tree; returns "" when every command word is known.
std::string UnknownCommand(CLI::App& app, const std::vector<std::string>& args) {
  CLI::App* current = &app;
  std::string path = "gpunode";
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") return "";
    if (!a.empty() && a[0] == '-') {
      if (a.find('=') == std::string::npos) {
        const CLI::Option* opt = current->get_option_no_throw(a);
        for (CLI::App* up = current->get_parent(); opt == nullptr && up != nullptr; up = up->get_parent()) {
          opt = up->get_option_no_throw(a);  // global options given after a command
        }
        if (opt != nullptr && opt->get_expected_min() > 0) ++i;  // its value
      }
      continue;
    }
    const auto subs = current->get_subcommands([](const CLI::App*) { return true; });
    if (subs.empty()) return "";  // a leaf command's arguments
    CLI::App* next = nullptr;
    for (CLI::App* sub : subs) {
      if (sub->get_name() == a) next = sub;
    }
    if (next == nullptr) {
      if (current->get_prefix_command() || current->get_allow_extras()) return "";
      std::vector<std::pair<size_t, std::string>> near;
      for (CLI::App* sub : subs) {
        const std::string& name = sub->get_name();
        const size_t d = Distance(a, name);
        if (d <= 2 || (a.size() >= 2 && name.rfind(a, 0) == 0)) near.emplace_back(d, name);
      }
      std::sort(near.begin(), near.end());
      std::string msg = "unknown command \"" + a + "\" for \"" + path + "\"";
      if (!near.empty()) {
        msg += "\n\nDid you mean this?";
        for (const auto& [d, name] : near) msg += "\n\t" + name;
      }
      msg += "\n\nRun '" + path + " --help' for usage.";
      return msg;
    }
    current = next;
    path += " " + a;
  }
  return "";
}

// gpunode installed as `nvidia-ctk`, or `gpunode [global flags] ctk ...` (ctk_cmd.h): the exit code
// when that answered the command line, else nothing (and `translated` is set when the command line
// became gpunode's own).
std::optional<int> DispatchCtk(int argc, char** argv, std::optional<std::vector<std::string>>& translated) {
  using namespace gpunode::cli;
  const std::string self = argc > 0 ? argv[0] : "";
  const std::string base = self.substr(self.rfind('/') + 1);
  const std::vector<std::string> args(argv + 1, argv + argc);
  std::optional<std::vector<std::string>> ctk_args = base == "nvidia-ctk" ? args : CtkArguments(args);
  if (!ctk_args) return std::nullopt;
  CtkOutcome ctk = RunNvidiaCtk(*ctk_args);
  if (ctk.exit_code >= 0) return ctk.exit_code;
  translated = std::move(ctk.gpunode_args);
  return std::nullopt;
}

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
    // `gpunode [--simulate PROFILE] oci-runtime ...`: the shim on a simulated node takes it from
    // GPUNODE_SIMULATE, as installed under the shim's name.
    int first = 1;
    std::string simulate;
    if (argc > 2 && std::string(argv[1]) == "--simulate") {
      simulate = argv[2];
      first = 3;
    } else if (argc > 1 && std::string(argv[1]).rfind("--simulate=", 0) == 0) {
      simulate = std::string(argv[1]).substr(11);
      first = 2;
    }
    if (argc > first && std::string(argv[first]) == "oci-runtime") {
      if (!simulate.empty()) ::setenv("GPUNODE_SIMULATE", simulate.c_str(), 1);
      return RunOciRuntime(std::vector<std::string>(argv + first + 1, argv + argc));
    }
  }
  // NVIDIA's `nvidia-ctk` command lines: answered there, or gpunode's own command line, parsed below.
  std::optional<std::vector<std::string>> translated;
  if (std::optional<int> done = DispatchCtk(argc, argv, translated)) return *done;
  // Installed under NVIDIA's program names (the image's links; their Helm charts run
  // `command: ["nvidia-device-plugin"]` etc.), gpunode is that component with NVIDIA's flags.
  std::string implied_command;
  {
    const std::string self = argc > 0 ? argv[0] : "";
    const std::string base = self.substr(self.rfind('/') + 1);
    if (base == "nvidia-device-plugin") implied_command = "plugin";
    if (base == "gpu-kubelet-plugin") implied_command = "dra-plugin";
    if (base == "gpu-feature-discovery") implied_command = "labels";
    if (base == "dcgm-exporter") implied_command = "exporter";
  }
  CLI::App app{
      "gpunode: check, describe and serve the NVIDIA GPUs of this node.\n"
      "Every command reads the host through --host-root (default /), or a simulated node with\n"
      "--simulate PROFILE (built-in names: see `gpunode sim list`)."};
  app.name("gpunode");
  app.set_version_flag("--version", VersionText());
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


  int exit_code = kExitOk;
  AddDoctorCommand(app, global, &exit_code);
  AddCompatCommand(app, global, &exit_code);
  AddSimCommand(app, global, &exit_code);
  AddBenchCommand(app, global, &exit_code);
  AddCdiCommand(app, global, &exit_code);
  AddRuntimeCommand(app, global, &exit_code);
  AddLabelsCommand(app, global, &exit_code);
  AddOciRuntimeHelp(app);
  AddCtkHelp(app);
  AddPluginCommand(app, global, &exit_code);
  AddDraPluginCommand(app, global, &exit_code);
  AddExporterCommand(app, global, &exit_code);
  AddK8sCommand(app, global, &exit_code);
  AddMigCommand(app, global, &exit_code);
  AddAgentCommand(app, global, &exit_code);
  AddFleetCommand(app, global, &exit_code);
  AddImageCommand(app, global, &exit_code);
  AddImageListCommand(app, global, &exit_code);  // image_list_cmd.cc: `image list` (and `image` if absent)
  AddCompletionCommands(app, &exit_code);  // last: it walks the whole tree
  // Set after the commands are added: CLI11 copies a parent's footer into subcommands made later,
  // and these examples and exit codes are the top level's (a command has its own or none).
  app.footer(
      "Examples:\n"
      "  gpunode doctor                         check every layer of this node's GPU stack\n"
      "  gpunode --simulate dgx-h200 doctor     the same on a simulated 8x H200 node\n"
      "  gpunode compat check --image pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime\n"
      "  gpunode bench                          measure each GPU against its model's ceilings\n"
      "  gpunode cdi generate                   write a CDI spec so containers get the GPUs\n"
      "  gpunode runtime configure --runtime containerd --cdi   add the nvidia runtime\n"
      "  nvidia-ctk runtime configure --runtime=docker   NVIDIA's nvidia-ctk command lines, run by gpunode\n"
      "                                         (installed as nvidia-ctk, or gpunode ctk ...; docs/nvidia-ctk.md)\n"
      "Exit codes: 0 ok, 1 warnings/incompatible, 2 failures/unknown, 3 usage or input errors.\n"
      "Docs named docs/<page>.md: in the source tree, and in /usr/share/doc/gpunode/ of the gpunode image.");
  // -o/--output is the output format everywhere. A command that prints no report refuses it (exit 3)
  // instead of ignoring it; files have their own flags. Runs after parsing, before any command.
  CLI::Option* output_flag = app.get_option("--output");
  app.parse_complete_callback([&app, &global, output_flag] {
    if (output_flag->count() == 0) return;
    std::string path;
    const CLI::App* leaf = &app;
    while (!leaf->get_subcommands().empty()) {
      leaf = leaf->get_subcommands().front();
      path += (path.empty() ? "" : " ") + leaf->get_name();
    }
    const std::string why = NoReportReason(path);
    if (!why.empty()) {
      throw CLI::ValidationError("-o/--output " + global.output,
                                 "gpunode " + path + " prints no report to format (" + why + ")");
    }
  });
  // The long-running services need NVML but not libcuda, which NVML would map (libcuda_guard.h).
  for (const char* service : {"plugin", "dra-plugin", "labels", "exporter", "agent"}) {
    app.get_subcommand(service)->preparse_callback([](size_t) { KeepLibcudaOut(); });
  }

  // `gpunode help [COMMAND...]` is `gpunode COMMAND... --help`, as kubectl and git take it.
  std::vector<std::string> args = translated ? *translated : std::vector<std::string>(argv + 1, argv + argc);
  if (!implied_command.empty()) args.insert(args.begin(), implied_command);
  if (!args.empty() && args[0] == "help") {
    args.erase(args.begin());
    args.push_back("--help");
  }
  if (std::string unknown = UnknownCommand(app, args); !unknown.empty()) {
    std::cerr << "error: " << unknown << "\n";
    return kExitUsage;
  }
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes them last-first

  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ExtrasError& e) {
    // CLI11 lists the extras last-first; name them in the order given.
    std::vector<std::string> extras = app.remaining(true);
    for (CLI::App* sub = &app; sub != nullptr;) {
      auto chosen = sub->get_subcommands();
      if (chosen.empty()) break;
      sub = chosen.front();
      for (const std::string& x : sub->remaining(false)) {
        if (std::find(extras.begin(), extras.end(), x) == extras.end()) extras.push_back(x);
      }
    }
    std::string list;
    for (const std::string& x : args) {
      if (std::find(extras.begin(), extras.end(), x) != extras.end()) list += (list.empty() ? "" : " ") + x;
    }
    PrintError(list.empty() ? std::string(e.what()) : "unknown arguments: " + list);
    std::cerr << "Run 'gpunode --help' (or 'gpunode COMMAND --help') for usage.\n";
    return kExitUsage;
  } catch (const CLI::ParseError& e) {
    PrintError(e.what());
    std::cerr << "Run 'gpunode --help' (or 'gpunode COMMAND --help') for usage.\n";
    return kExitUsage;
  }
  return exit_code;
}
}  // namespace
