// gpunode runtime configure: add an `nvidia` runtime to Docker, containerd or CRI-O's config.
#include <climits>
#include <iostream>

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "src/cli/common.h"
#include "src/container/runtime_config.h"

namespace gpunode::cli {
namespace {

struct ConfigureOptions {
  std::string runtime;
  std::string config;  // "" = default path under --host-root
  std::string runtime_name = "nvidia";
  std::string runtime_path;
  bool set_as_default = false;
  bool cdi = false;
  bool dry_run = false;
  bool restore = false;
  std::string backup_dir;  // "" = /var/lib/gpunode/backups under --host-root
  bool quiet = false;      // table output: only the --dry-run diff
};

constexpr char kPodmanHint[] =
    "podman needs no runtime configuration: it uses CDI directly (gpunode cdi generate, then podman run "
    "--device nvidia.com/gpu=all ...)";

// Bad input or a file we refuse to touch: 3. The write itself failed, or another program kept
// changing the file: 2.
int ExitCodeOf(const Status& st) {
  switch (st.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kNotFound:
      return kExitUsage;
    default:
      return kExitFailed;
  }
}

int RunRestore(const HostFs& fs, const std::string& path, const std::string& backup_dir, OutputFormat format,
               bool quiet) {
  auto result = container::RestoreRuntimeConfig(fs, path, backup_dir);
  if (!result.ok()) {
    PrintError(result.status());
    return ExitCodeOf(result.status());
  }
  if (format != OutputFormat::kTable) {
    nlohmann::ordered_json doc;
    doc["apiVersion"] = "gpunode/v1";
    doc["kind"] = "RuntimeRestoreResult";
    doc["config"] = fs.Resolve(result->path);
    doc["restoredFrom"] = result->restored.path;
    doc["restoredTime"] = result->restored.time;
    doc["removed"] = result->removed;
    doc["backup"] = result->backup_path;
    PrintDocument(doc, format);
    return kExitOk;
  }
  if (quiet) return kExitOk;
  if (result->removed) {
    std::cout << "removed " << fs.Resolve(result->path) << " (it did not exist before gpunode's change of "
              << result->restored.time << ")";
  } else {
    std::cout << "restored " << fs.Resolve(result->path) << " from " << result->restored.path;
  }
  std::cout << "\n(the state before this restore: " << result->backup_path
            << ")\nRestart the container engine to use it (gpunode restarts nothing).\n";
  return kExitOk;
}

int RunConfigure(const GlobalOptions& global, const ConfigureOptions& opts) {
  auto format = ParseOutputFormat(global.output);
  if (!format.ok()) {
    PrintError(format.status());
    return kExitUsage;
  }
  auto kind = container::ParseRuntimeKind(opts.runtime);
  if (!kind.ok()) {
    PrintError(kind.status());
    return kExitUsage;
  }
  container::RuntimeConfigOptions options;
  options.kind = *kind;
  options.runtime_name = opts.runtime_name;
  options.runtime_path = opts.runtime_path;
  options.set_as_default = opts.set_as_default;
  options.enable_cdi = opts.cdi;
  if (*kind != container::RuntimeKind::kDocker && !options.runtime_path.empty() &&
      options.runtime_path.front() != '/') {
    PrintError(absl::StrCat("--runtime-path \"", options.runtime_path, "\": ", opts.runtime,
                            " needs an absolute path"));
    return kExitUsage;
  }
  auto host = HostFs::Open(global.host_root);
  if (!host.ok()) {
    PrintError(host.status());
    return kExitUsage;
  }
  // The default file is a host path (below --host-root); --config names a file on this machine.
  const HostFs fs = opts.config.empty() ? *host : HostFs::Local();
  const std::string path = opts.config.empty() ? container::DefaultConfigPath(*kind) : opts.config;
  std::string backup_dir = opts.backup_dir;
  if (backup_dir.empty()) {
    auto dir = host->LocalPath(container::kBackupDir, /*follow_last=*/true, /*strict=*/true);
    if (!dir.ok()) {
      PrintError(dir.status());
      return kExitUsage;
    }
    backup_dir = *dir;
  }
  if (opts.restore) return RunRestore(fs, path, backup_dir, *format, opts.quiet);
  container::ApplyOptions apply;
  apply.dry_run = opts.dry_run;
  apply.backup_dir = backup_dir;
  auto result = container::ApplyRuntimeConfig(fs, path, options, apply);
  if (!result.ok()) {
    PrintError(result.status());
    return ExitCodeOf(result.status());
  }
  for (const std::string& w : result->warnings) std::cerr << "warning: " << w << "\n";
  std::string hook_note;
  if (*kind == container::RuntimeKind::kDocker) {
    auto hook = container::InstallDockerGpusHook(*host, opts.runtime_path, opts.dry_run, backup_dir);
    if (!hook.ok()) {
      PrintError(Annotate(hook.status(), "docker --gpus"));
      return kExitFailed;
    }
    hook_note = *hook;
    if (!opts.set_as_default) {
      hook_note += "\n`docker run --gpus` with runc as Docker's default runtime: gpunode, as that hook, injects the "
                   "GPUs (Linux 5.12 or later; on an older kernel add --set-as-default)";
    }
  }
  if (*format != OutputFormat::kTable) {
    nlohmann::ordered_json doc;
    doc["apiVersion"] = "gpunode/v1";
    doc["kind"] = "RuntimeConfigureResult";
    doc["runtime"] = container::RuntimeKindName(*kind);
    doc["config"] = fs.Resolve(result->path);  // the file written (a symlink's target)
    doc["changed"] = result->changed;
    doc["created"] = result->created;
    doc["dryRun"] = opts.dry_run;
    if (!result->backup_path.empty()) doc["backup"] = result->backup_path;
    if (result->attempts > 1) doc["attempts"] = result->attempts;
    if (!result->diff.empty()) doc["diff"] = result->diff;
    if (!hook_note.empty()) doc["dockerGpus"] = hook_note;
    PrintDocument(doc, *format);
    return kExitOk;
  }
  if (opts.quiet && !opts.dry_run) return kExitOk;
  if (!hook_note.empty() && !opts.quiet) std::cout << hook_note << "\n";
  if (!result->changed) {
    if (opts.quiet) return kExitOk;
    std::cout << fs.Resolve(result->path) << ": already configured (" << opts.runtime_name << " runtime for "
              << opts.runtime << "); nothing changed\n";
    return kExitOk;
  }
  if (opts.dry_run) {
    std::cout << result->diff;
    return kExitOk;
  }
  std::cout << (result->created ? "created " : "updated ") << fs.Resolve(result->path);
  if (!result->backup_path.empty()) std::cout << " (backup: " << result->backup_path << ")";
  std::cout << "\nRestart " << opts.runtime << " to use the " << opts.runtime_name
            << " runtime (gpunode restarts nothing).\n";
  return kExitOk;
}

}  // namespace

void AddRuntimeCommand(CLI::App& app, GlobalOptions& global, int* exit_code) {
  CLI::App* runtime = app.add_subcommand(
      "runtime", "Configure container engines (Docker, containerd, CRI-O) for NVIDIA GPUs");
  runtime->require_subcommand(1);
  auto opts = std::make_shared<ConfigureOptions>();
  CLI::App* configure = runtime->add_subcommand(
      "configure",
      "Add an nvidia runtime to the engine's config, keeping everything else in the file");
  configure->add_option("--runtime", opts->runtime,
                        "docker, containerd or crio (podman: nothing to configure, it uses CDI directly)")
      ->required()
      ->check(CLI::Validator(
          [](std::string& v) { return v == "podman" ? std::string(kPodmanHint) : std::string(); }, ""))
      ->check(CLI::IsMember({"docker", "containerd", "crio"}));
  configure->add_option("--config", opts->config,
                        "Config file to edit (default: /etc/docker/daemon.json, "
                        "/etc/containerd/config.toml, /etc/crio/crio.conf.d/99-nvidia.toml "
                        "under --host-root)");
  configure->add_option("--runtime-name", opts->runtime_name, "Name of the runtime (default nvidia)");
  configure->add_option("--runtime-path", opts->runtime_path,
                        "Runtime executable (default nvidia-container-runtime for docker, "
                        "/usr/bin/nvidia-container-runtime for containerd and crio)");
  configure->add_flag("--set-as-default", opts->set_as_default,
                      "Make the nvidia runtime the engine's default");
  configure->add_flag("--cdi", opts->cdi,
                      "Enable CDI in the engine (docker features.cdi, containerd enable_cdi)");
  configure->add_flag("--dry-run", opts->dry_run,
                      "Print the change as a unified diff; write nothing");
  configure->add_flag("--restore", opts->restore,
                      "Put back the file as it was before gpunode's last change (from the backup "
                      "folder); the current file is backed up first");
  configure->add_option("--backup-dir", opts->backup_dir,
                        "Where backups are kept (default /var/lib/gpunode/backups under --host-root; "
                        "one file per change, never in a drop-in folder)");
  configure->add_flag("-q,--quiet", opts->quiet,
                      "Print nothing on success but the --dry-run diff (errors and warnings still go to stderr)");
  configure->callback([&global, opts, exit_code] { *exit_code = RunConfigure(global, *opts); });
}

}  // namespace gpunode::cli
