// gpunode cdi: generate, list and validate CDI specs for the node's GPUs; the hooks those specs run.
#include <limits.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <optional>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/str_cat.h"
#include "src/cli/common.h"
#include "src/container/cdi.h"
#include "src/container/hooks.h"

namespace gpunode::cli {
namespace {


struct GenerateOptions {
  std::string output;  // "" = default path under the host root; "-" = stdout
  std::string format;  // yaml | json; default from the output's extension, else yaml
  std::string names = "both";
  std::string driver_root = "/";
  std::string dev_root;  // default: the driver root
  std::string hook_path;  // default: this executable
  std::vector<std::string> disabled_hooks;
  bool no_all_device = false;
  bool allow_incomplete = false;  // write a spec without driver libraries
  bool quiet = false;             // no "wrote ..." note
};

// "-" is stdin (`gpunode cdi generate --output - | gpunode cdi list -`).
StatusOr<std::string> ReadExplicitFile(const std::string& path) {
  if (path == "-") {
    std::string text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
    if (std::cin.bad()) return ErrnoToStatus(errno ? errno : EIO, "read", "stdin");
    return text;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return ErrnoToStatus(errno, "read", path);
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return ErrnoToStatus(errno ? errno : EIO, "read", path);
  return text.str();
}

// The default spec path, below --host-root (the spec belongs to the host).
StatusOr<std::string> DefaultSpecPath(const GlobalOptions& global) {
  GPUNODE_ASSIGN_OR_RETURN(HostFs fs, HostFs::Open(global.host_root));
  return fs.Resolve(container::kDefaultSpecPath);
}

int RunGenerate(const GlobalOptions& global, const GenerateOptions& opts) {
  if (IsOutputFormatName(opts.output)) {
    // nvidia-ctk users type --output FILE; a format name there is almost always meant as a format
    PrintError(absl::StrCat("--output \"", opts.output, "\" names the file to write; for the spec as ", opts.output,
                            " on stdout use --format ", opts.output == "table" ? "yaml" : opts.output,
                            " --output - (a file of that name: --output ./", opts.output, ")"));
    return kExitUsage;
  }
  std::string format = opts.format;
  if (format.empty()) format = absl::EndsWith(opts.output, ".json") ? "json" : "yaml";
  if (format != "yaml" && format != "json") {
    PrintError(absl::StrCat("--format \"", format, "\": not one of yaml, json"));
    return kExitUsage;
  }
  auto names = container::ParseNameStrategy(opts.names);
  if (!names.ok()) {
    PrintError(names.status());
    return kExitUsage;
  }
  container::BuildOptions build;
  build.names = *names;
  build.all_device = !opts.no_all_device;
  build.hook_path = opts.hook_path.empty() ? SelfPath() : opts.hook_path;
  for (const std::string& h : opts.disabled_hooks) {
    for (absl::string_view one : absl::StrSplit(h, ',', absl::SkipEmpty())) {
      if (one == "all") {
        build.disabled_hooks.insert("create-symlinks");
        build.disabled_hooks.insert("enable-cuda-compat");
        build.disabled_hooks.insert("update-ldcache");
      } else {
        build.disabled_hooks.insert(std::string(one));
      }
    }
  }

  auto generated = GenerateHostSpec(global, opts.driver_root, opts.dev_root, build);
  if (!generated.ok()) {
    PrintError(generated.status());
    return generated.status().code() == absl::StatusCode::kInvalidArgument ? kExitUsage : kExitFailed;
  }
  const container::BuildResult* built = &generated->built;
  const container::DriverFiles* files = &generated->files;
  for (const std::string& w : files->warnings) std::cerr << "warning: " << w << "\n";
  for (const std::string& w : built->warnings) std::cerr << "warning: " << w << "\n";
  if (files->libraries.empty() && !opts.allow_incomplete) {
    // A spec without the driver's libraries gives containers device nodes that no CUDA program can
    // use: refuse it rather than write a spec that looks right.
    PrintError(absl::StrCat("no driver library (lib*.so.", files->version.empty() ? "<version>" : files->version,
                            ") found under driver root ", files->driver_root,
                            ": the spec would give containers the device nodes only. Fix the driver (gpunode "
                            "doctor says which layer is broken) or pass --driver-root; --allow-incomplete "
                            "writes the spec anyway"));
    return kExitFailed;
  }
  const std::string text =
      format == "json" ? cdi::RenderSpecJson(built->spec) : cdi::RenderSpecYaml(built->spec);
  if (opts.output == "-") {
    std::cout << text;
    return kExitOk;
  }
  // The default spec belongs to the host: written inside --host-root (through its symlinks, such as
  // /var/run -> /run, never out of it). --output names a file on this machine.
  auto host = HostFs::Open(generated->host_root);
  if (!host.ok()) {
    PrintError(host.status());
    return kExitUsage;
  }
  const bool to_host = opts.output.empty();
  const HostFs fs = to_host ? *host : HostFs::Local();
  const std::string target = to_host ? std::string(container::kDefaultSpecPath) : opts.output;
  WriteOptions w;
  w.mode = 0644;
  w.keep_mode = false;
  auto written = fs.WriteFileAtomically(target, text, w);
  if (!written.ok()) {
    PrintError(written.status());
    return absl::IsFailedPrecondition(written.status()) ? kExitUsage : kExitFailed;
  }
  const std::string path = to_host ? host->Resolve(*written) : *written;
  if (opts.quiet) return kExitOk;
  std::cerr << "wrote " << path << ": " << built->spec.devices.size() << " devices, driver " << files->version
            << ", cdiVersion " << built->spec.cdi_version << " (names: gpunode cdi list " << path << ")\n";
  return kExitOk;
}

// How messages name a spec file ("-" is stdin).
std::string SpecName(const std::string& path) { return path == "-" ? "<stdin>" : path; }

// Reads and strictly parses a spec; prints the error and returns nullopt when it cannot.
std::optional<cdi::Spec> LoadSpec(const std::string& path) {
  auto text = ReadExplicitFile(path);
  if (!text.ok()) {
    PrintError(text.status());
    return std::nullopt;
  }
  auto spec = cdi::ParseSpec(*text, SpecName(path));
  if (!spec.ok()) {
    PrintError(spec.status());
    return std::nullopt;
  }
  return *spec;
}

int RunList(const GlobalOptions& global, std::string path) {
  auto format = ParseOutputFormat(global.output);
  if (!format.ok()) {
    PrintError(format.status());
    return kExitUsage;
  }
  if (path.empty()) {
    auto def = DefaultSpecPath(global);
    if (!def.ok()) {
      PrintError(def.status());
      return kExitUsage;
    }
    path = *def;
  }
  std::optional<cdi::Spec> spec = LoadSpec(path);
  if (!spec) return kExitUsage;
  std::vector<std::string> names = cdi::QualifiedNames(*spec);
  if (*format == OutputFormat::kTable) {
    for (const std::string& n : names) std::cout << n << "\n";
  } else {
    PrintDocument({{"apiVersion", "gpunode/v1"},
                   {"kind", "CdiDeviceList"},
                   {"file", SpecName(path)},
                   {"cdiVersion", spec->cdi_version},
                   {"devices", names}},
                  *format);
  }
  return kExitOk;
}

int RunValidate(const GlobalOptions& global, const std::string& path) {
  auto format = ParseOutputFormat(global.output);
  if (!format.ok()) {
    PrintError(format.status());
    return kExitUsage;
  }
  std::vector<std::string> problems;
  std::optional<cdi::Spec> spec;
  auto text = ReadExplicitFile(path);
  if (!text.ok()) {
    PrintError(text.status());
    return kExitUsage;
  }
  const std::string name = SpecName(path);
  auto parsed = cdi::ParseSpec(*text, name);
  if (parsed.ok()) {
    spec = *parsed;
    problems = cdi::SpecProblems(*spec);
  } else {
    problems.push_back(std::string(parsed.status().message()));
  }
  if (*format != OutputFormat::kTable) {
    PrintDocument({{"apiVersion", "gpunode/v1"},
                   {"kind", "CdiValidation"},
                   {"file", name},
                   {"valid", problems.empty()},
                   {"problems", problems}},
                  *format);
    return problems.empty() ? kExitOk : kExitUsage;
  }
  if (!problems.empty()) {
    if (parsed.ok()) {
      PrintError(absl::StrCat(name, ": invalid CDI spec (", problems.size(), " problem",
                              problems.size() == 1 ? "" : "s", "):"));
      for (const std::string& p : problems) std::cerr << "  " << p << "\n";
    } else {
      PrintError(problems.front());
    }
    return kExitUsage;
  }
  std::cout << name << ": valid (cdiVersion " << spec->cdi_version << ", kind " << spec->kind << ", "
            << spec->devices.size() << " devices)\n";
  return kExitOk;
}

// The hooks: OCI state on stdin -> the container's root.
StatusOr<std::string> RootFromStdin() {
  std::string state((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  return container::ContainerRootFromState(state);
}

int RunHook(const StatusOr<std::string>& root, const std::function<Status(const std::string&)>& action) {
  if (!root.ok()) {
    PrintError(root.status());
    return kExitUsage;
  }
  if (Status st = action(*root); !st.ok()) {
    PrintError(st);
    return kExitFailed;
  }
  return kExitOk;
}

}  // namespace

std::string SelfPath() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string("/usr/bin/gpunode");
}

StatusOr<GeneratedSpec> GenerateHostSpec(const GlobalOptions& global, const std::string& driver_root,
                                         const std::string& dev_root, const container::BuildOptions& build) {
  GPUNODE_ASSIGN_OR_RETURN(std::unique_ptr<NodeSession> session, NodeSession::Open(global));
  session->probe_options().init_cuda = false;  // NVML and the files are all a spec needs
  session->probe_options().query_topology = false;
  GPUNODE_ASSIGN_OR_RETURN(node::NodeInventory inv, session->Inventory());
  GeneratedSpec out;
  GPUNODE_ASSIGN_OR_RETURN(out.files, container::DiscoverDriverFiles(session->fs(), inv, {driver_root, dev_root}));
  GPUNODE_ASSIGN_OR_RETURN(out.built, container::BuildSpec(inv, out.files, build));
  out.host_root = session->fs().root();
  out.session = std::move(session);
  return out;
}

void AddCdiCommand(CLI::App& app, GlobalOptions& global, int* exit_code) {
  CLI::App* cmd = app.add_subcommand("cdi", "CDI specs for the GPUs: generate, list, validate (docs/cdi.md)");
  cmd->require_subcommand(1);
  cmd->footer(
      "Examples:\n"
      "  gpunode cdi generate                   write /var/run/cdi/nvidia.yaml for this node\n"
      "  gpunode --simulate dgx-h200 cdi generate --output -\n"
      "  gpunode cdi list                       the names to request: nvidia.com/gpu=0, ...=all\n"
      "  gpunode cdi validate /etc/cdi/nvidia.yaml\n"
      "  gpunode --simulate dgx-h200 cdi generate --output - | gpunode cdi list -");

  auto gen = std::make_shared<GenerateOptions>();
  CLI::App* g = cmd->add_subcommand("generate", "Write a CDI spec (kind nvidia.com/gpu) for this node's GPUs");
  g->add_option("--output", gen->output,
                "File to write atomically (mode 0644), '-' for stdout (default: /var/run/cdi/nvidia.yaml "
                "under --host-root)");
  g->add_option("--format", gen->format, "yaml or json (default: from the --output extension, else yaml)");
  g->add_option("--device-name-strategy", gen->names, "Device names: index, uuid or both (default both)");
  g->add_option("--driver-root", gen->driver_root,
                "Host path of the root the driver is installed in (default /), e.g. /run/nvidia/driver");
  g->add_option("--dev-root", gen->dev_root,
                "Host path of the root whose /dev holds the device nodes (default: the driver root, as "
                "nvidia-ctk); not /: the nodes get a hostPath below it");
  g->add_option("--hook-path", gen->hook_path,
                "Absolute path of the gpunode binary the spec's hooks call (default: this executable)");
  g->add_option("--disable-hook", gen->disabled_hooks,
                "Leave a hook out: create-symlinks, enable-cuda-compat, update-ldcache or all (repeatable or comma-separated, "
                "as nvidia-ctk)");
  g->add_flag("--no-all-device", gen->no_all_device, "Leave out the \"all\" device");
  g->add_flag("--allow-incomplete", gen->allow_incomplete,
              "Write the spec even when no driver library is found (device nodes only); default: exit 2");
  g->add_flag("-q,--quiet", gen->quiet, kQuietHelp);
  g->callback([&global, gen, exit_code] { *exit_code = RunGenerate(global, *gen); });

  auto list_file = std::make_shared<std::string>();
  CLI::App* l = cmd->add_subcommand("list", "Print the fully-qualified device names a spec offers");
  l->add_option("FILE", *list_file,
                "Spec file, '-' for stdin (default: /var/run/cdi/nvidia.yaml under --host-root)");
  l->callback([&global, list_file, exit_code] { *exit_code = RunList(global, *list_file); });

  auto validate_file = std::make_shared<std::string>();
  CLI::App* v = cmd->add_subcommand("validate", "Check a spec: fields, names, cdiVersion, hooks (exit 3 if invalid)");
  v->add_option("FILE", *validate_file, "Spec file (YAML or JSON), '-' for stdin")->required();
  v->callback([&global, validate_file, exit_code] { *exit_code = RunValidate(global, *validate_file); });

  CLI::App* hook = cmd->add_subcommand("hook", "Hooks run by the container runtime (OCI state on stdin)");
  hook->require_subcommand(1);
  auto links = std::make_shared<std::vector<std::string>>();
  CLI::App* sym = hook->add_subcommand("create-symlinks", "Create symlinks in the container");
  sym->add_option("--link", *links, "TARGET::LINK (repeatable)");
  sym->callback([links, exit_code] {
    *exit_code = RunHook(RootFromStdin(), [&](const std::string& root) { return container::CreateSymlinks(root, *links); });
  });
  auto folders = std::make_shared<std::vector<std::string>>();
  auto ldconfig = std::make_shared<std::string>("/sbin/ldconfig");
  CLI::App* ld = hook->add_subcommand("update-ldcache", "Add the driver folders to the container's linker cache");
  ld->add_option("--folder", *folders, "Folder holding mounted driver libraries (repeatable)");
  ld->add_option("--ldconfig-path", *ldconfig, "ldconfig to run with -r <container root> (default /sbin/ldconfig)");
  ld->callback([folders, ldconfig, exit_code] {
    *exit_code = RunHook(RootFromStdin(), [&](const std::string& root) {
      return container::UpdateLdCache(root, *folders, *ldconfig);
    });
  });
  auto host_driver = std::make_shared<std::string>();
  auto compat_root = std::make_shared<std::string>("/usr/local/cuda/compat");
  CLI::App* cc = hook->add_subcommand(
      "enable-cuda-compat", "Put the image's CUDA compat libraries first in the container's ld cache when newer than the driver");
  cc->add_option("--host-driver-version", *host_driver, "The host driver's version (as nvidia-cdi-hook's flag)")->required();
  cc->add_option("--cuda-compat-container-root", *compat_root,
                 "Folder of the compat libraries in the container (default /usr/local/cuda/compat)");
  cc->callback([host_driver, compat_root, exit_code] {
    *exit_code = RunHook(RootFromStdin(), [&](const std::string& root) {
      return container::EnableCudaCompat(root, *host_driver, *compat_root).status();
    });
  });
}

}  // namespace gpunode::cli
