// nvidia-ctk v1.18's commands and flags (cmd/nvidia-ctk/ of NVIDIA/nvidia-container-toolkit@v1.18.2,
// and its --help in test/data/nvidia-ctk-1.18/), each with what gpunode does for it: the gpunode
// command line it runs, what gpunode runs itself (ctk_native.cc), or why it does not apply.
#include <limits.h>
#include <stdlib.h>

#include <cstdlib>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "src/cli/common.h"
#include "src/cli/ctk_internal.h"

namespace gpunode::cli::ctk {
namespace {

constexpr FlagKind kNoop = FlagKind::kNoop;
constexpr FlagKind kRefused = FlagKind::kRefused;

Status NotApplicable(const Call& call, const std::string& what, const std::string& why) {
  return absl::FailedPreconditionError(DoesNotApply(call.path, what, why));
}

// nvidia-ctk's file flags name host files: below --host-root (GPUNODE_HOST_ROOT) when one is set, as
// gpunode's default files are (gpunode's own --output/--config name files on this machine).
std::string OnHost(const Call& call, const std::string& path) {
  if (call.host_root == "/" || call.host_root.empty() || path.empty() || path.front() != '/') return path;
  auto fs = HostFs::Open(call.host_root);
  return fs.ok() ? fs->Resolve(path) : path;
}

// A boolean flag as gpunode's flag (only when true).
Status AddBool(const Call& call, const std::string& name, const std::string& gpunode_flag, Plan& plan) {
  GPUNODE_ASSIGN_OR_RETURN(bool on, call.Bool(name));
  if (on) plan.gpunode_args.push_back(gpunode_flag);
  return absl::OkStatus();
}

void AddValue(const Call& call, const std::string& name, const std::string& gpunode_flag, Plan& plan) {
  if (!call.Has(name)) return;
  plan.gpunode_args.push_back(gpunode_flag);
  plan.gpunode_args.push_back(call.Value(name));
}

// --- runtime configure -------------------------------------------------------------------------

StatusOr<Plan> RuntimeConfigure(const Call& call) {
  Plan plan;
  const std::string runtime = call.Value("runtime", "docker");  // NVIDIA's default
  plan.gpunode_args = {"runtime", "configure", "--runtime", runtime};
  const std::string mode = call.Value("config-mode");
  if (mode == "oci-hook" || mode == "hook") {
    return NotApplicable(call, "--config-mode=" + mode,
                         "gpunode writes the engine's runtime config, never an OCI hooks.d file (deprecated by NVIDIA; "
                         "its hook would run for every container)");
  }
  if (!mode.empty() && mode != "config" && mode != "config-file") {
    plan.notes.push_back(DoesNotApply(call.path, "--config-mode=" + mode,
                                      "nvidia-ctk ignores an unknown mode too; the config file is edited"));
  }
  const std::string source = call.Value("config-source", "file");
  if (source == "command" && runtime != "docker") {
    return NotApplicable(call, "--config-source=command",
                         "gpunode edits the config file and keeps every byte it does not change; it does not rebuild "
                         "it from `containerd config dump` or `crio status config`");
  }
  if (source != "file" && source != "command") {
    return absl::InvalidArgumentError(
        absl::StrCat("nvidia-ctk runtime configure --config-source \"", source, "\": not one of command, file"));
  }
  const bool dropin_given = call.Has("drop-in-config") && call.Value("drop-in-config") != "RUNTIME_SPECIFIC_DEFAULT";
  const std::string dropin = call.Value("drop-in-config");
  if (dropin_given && !dropin.empty()) {
    if (runtime == "docker") {
      return absl::InvalidArgumentError("nvidia-ctk runtime configure: runtime docker does not support drop-in configs");
    }
    if (runtime == "containerd") {
      return NotApplicable(call, "--drop-in-config=" + dropin,
                           "gpunode adds the nvidia runtime to containerd's own config file (--config, default "
                           "/etc/containerd/config.toml), keeping every other byte; it writes no drop-in and no imports");
    }
    // CRI-O: gpunode's file is a drop-in already; --config names it.
    if (call.Has("config")) {
      plan.notes.push_back(DoesNotApply(call.path, "--config=" + call.Value("config"),
                                        "for crio gpunode writes only the drop-in (--drop-in-config) and reads no "
                                        "main config"));
    }
    plan.gpunode_args.push_back("--config");
    plan.gpunode_args.push_back(OnHost(call, dropin));
  } else {
    if (runtime == "crio" && call.Has("config")) {
      plan.notes.push_back(DoesNotApply(call.path, "--config=" + call.Value("config"),
                                        "for crio gpunode writes its own drop-in (/etc/crio/crio.conf.d/99-nvidia.toml "
                                        "under --host-root; --drop-in-config names another) and edits no main config"));
    } else {
      if (call.Has("config")) {
        plan.gpunode_args.push_back("--config");
        plan.gpunode_args.push_back(OnHost(call, call.Value("config")));
      }
    }
  }
  AddValue(call, "nvidia-runtime-name", "--runtime-name", plan);
  AddValue(call, "nvidia-runtime-path", "--runtime-path", plan);
  GPUNODE_RETURN_IF_ERROR(AddBool(call, "nvidia-set-as-default", "--set-as-default", plan));
  GPUNODE_ASSIGN_OR_RETURN(bool cdi, call.Bool("cdi.enabled"));
  if (cdi && runtime == "crio") {
    plan.notes.push_back(DoesNotApply(call.path, "--cdi.enabled", "CRI-O has CDI on by default (nvidia-ctk ignores it too)"));
  } else if (cdi) {
    plan.gpunode_args.push_back("--cdi");
  }
  GPUNODE_RETURN_IF_ERROR(AddBool(call, "dry-run", "--dry-run", plan));
  if (call.quiet) plan.gpunode_args.push_back("-q");
  return plan;
}

// --- cdi generate ------------------------------------------------------------------------------

// The running gpunode's path when `path` (or the program `path` names on PATH) is gpunode itself.
std::string GpunodeAt(const std::string& path) {
  std::string full = path;
  if (path.find('/') == std::string::npos) {
    const char* env = std::getenv("PATH");
    full.clear();
    for (absl::string_view dir : absl::StrSplit(env ? env : "", ':', absl::SkipEmpty())) {
      const std::string candidate = absl::StrCat(dir, "/", path);
      if (::access(candidate.c_str(), X_OK) == 0) {
        full = candidate;
        break;
      }
    }
  }
  char real[PATH_MAX];
  const std::string self = SelfPath();
  if (full.empty() || ::realpath(full.c_str(), real) == nullptr) return "";
  return std::string(real) == self ? self : "";
}

const std::set<std::string>& GpunodeHooks() {
  static const std::set<std::string> hooks = {"create-symlinks", "enable-cuda-compat", "update-ldcache", "all"};
  return hooks;
}

// --mode and --device-name-strategy: what gpunode's NVML discovery and names can be.
Status CdiModeAndNames(const Call& call, Plan& plan) {
  const std::string mode = call.Value("mode", "auto");
  if (mode == "management") {
    return NotApplicable(call, "--mode=management",
                         "gpunode writes no management spec (every control device and NVML for monitoring containers "
                         "such as DCGM); request nvidia.com/gpu=all instead");
  }
  if (mode == "csv") {
    return NotApplicable(call, "--mode=csv", "CSV mode is for Tegra (Jetson) systems; gpunode finds GPUs through NVML");
  }
  if (mode == "wsl") {
    return NotApplicable(call, "--mode=wsl", "WSL2 (/dev/dxg) is not supported; gpunode runs on Linux hosts");
  }
  if (mode == "gdrcopy" || mode == "gds" || mode == "mofed" || mode == "imex" || mode == "nvswitch") {
    return NotApplicable(call, "--mode=" + mode,
                         "gpunode's spec has GPU devices only (no GDRCopy, GDS, MOFED, IMEX channel or NVSwitch "
                         "devices)");
  }
  if (mode != "auto" && mode != "nvml") {
    return absl::InvalidArgumentError(absl::StrCat(
        "nvidia-ctk cdi generate --mode \"", mode,
        "\": not one of auto, csv, gdrcopy, gds, imex, management, mofed, nvml, nvswitch, wsl"));
  }
  std::set<std::string> strategies;
  for (const std::string& s : call.Values("device-name-strategy")) strategies.insert(s);
  if (strategies.count("type-index")) {
    return NotApplicable(call, "--device-name-strategy=type-index",
                         "gpunode names devices by index and UUID (nvidia.com/gpu=0, =GPU-<uuid>, MIG =0:1), not "
                         "gpu0/mig0:1");
  }
  for (const std::string& s : strategies) {
    if (s != "index" && s != "uuid") {
      return absl::InvalidArgumentError(absl::StrCat("nvidia-ctk cdi generate --device-name-strategy \"", s,
                                                     "\": not one of index, uuid, type-index"));
    }
  }
  if (strategies.size() == 1) {
    plan.gpunode_args.push_back("--device-name-strategy");
    plan.gpunode_args.push_back(*strategies.begin());
  }
  return absl::OkStatus();
}

StatusOr<Plan> CdiGenerate(const Call& call) {
  Plan plan;
  plan.gpunode_args = {"cdi", "generate"};
  // nvidia-ctk writes the spec to stdout without --output; gpunode's default is a file.
  const std::string output = call.Value("output");
  plan.gpunode_args.push_back("--output");
  plan.gpunode_args.push_back(output.empty() ? "-" : OnHost(call, output));
  AddValue(call, "format", "--format", plan);
  GPUNODE_RETURN_IF_ERROR(CdiModeAndNames(call, plan));
  AddValue(call, "driver-root", "--driver-root", plan);
  if (call.Has("dev-root")) {
    // gpunode's --dev-root is for a root other than /; / is its default with the driver root /.
    const std::string dev_root = call.Value("dev-root");
    if (dev_root != "/" || call.Value("driver-root", "/") != "/") AddValue(call, "dev-root", "--dev-root", plan);
  }
  if (call.Has("nvidia-cdi-hook-path")) {
    const std::string hook = call.Value("nvidia-cdi-hook-path");
    const std::string self = GpunodeAt(hook);
    if (self.empty()) {
      return NotApplicable(call, "--nvidia-cdi-hook-path=" + hook,
                           "the spec's hooks are gpunode's own (`gpunode cdi hook ...`); " + hook +
                               " is not this gpunode (leave the flag out, or name gpunode or its nvidia-ctk link)");
    }
    plan.gpunode_args.push_back("--hook-path");
    plan.gpunode_args.push_back(self);
  }
  if (call.Has("ldconfig-path")) {
    const std::string ld = call.Value("ldconfig-path");
    if (ld != "/sbin/ldconfig" && ld != "@/sbin/ldconfig") {
      return NotApplicable(call, "--ldconfig-path=" + ld,
                           "gpunode's update-ldcache hook runs the host's /sbin/ldconfig -r <container root>");
    }
  }
  const std::string vendor = call.Value("vendor", "nvidia.com"), cls = call.Value("class", "gpu");
  if (vendor != "nvidia.com" || cls != "gpu") {
    return NotApplicable(call, absl::StrCat("--vendor=", vendor, " --class=", cls),
                         "gpunode's spec is kind nvidia.com/gpu, the kind its OCI runtime, device plugin and DRA "
                         "driver ask for");
  }
  std::set<std::string> disabled;
  for (const std::string& h : call.Values("disable-hook")) {
    if (h == "chmod" || h == "disable-device-node-modification") {
      plan.notes.push_back(DoesNotApply(call.path, "--disable-hook=" + h, "gpunode's spec never has that hook"));
      continue;
    }
    if (!GpunodeHooks().count(h)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "nvidia-ctk cdi generate --disable-hook \"", h,
          "\": not one of all, chmod, create-symlinks, disable-device-node-modification, enable-cuda-compat, "
          "update-ldcache"));
    }
    disabled.insert(h);
  }
  for (const std::string& h : call.Values("enable-hook")) {
    if (h == "all" || !GpunodeHooks().count(h)) {
      return NotApplicable(call, "--enable-hook=" + h,
                           "gpunode writes the hooks create-symlinks, enable-cuda-compat and update-ldcache (all on "
                           "by default); it has no other");
    }
    disabled.erase(h);
  }
  if (!disabled.empty()) {
    plan.gpunode_args.push_back("--disable-hook");
    plan.gpunode_args.push_back(absl::StrJoin(disabled, ","));
  }
  for (const std::string& f : call.Values("feature-flag")) {
    if (f == "disable-nvsandboxutils") {
      plan.notes.push_back(DoesNotApply(call.path, "--feature-flag=" + f, "gpunode does not use nvsandboxutils"));
    } else if (f == "enable-explicit-driver-libraries" || f == "enable-coherent-annotations") {
      return NotApplicable(call, "--feature-flag=" + f,
                           f == "enable-coherent-annotations"
                               ? "gpunode's devices carry no coherent/non-coherent annotations"
                               : "gpunode mounts the driver libraries it finds; it has no explicit list");
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "nvidia-ctk cdi generate --feature-flag \"", f,
          "\": not one of disable-nvsandboxutils, enable-coherent-annotations, enable-explicit-driver-libraries"));
    }
  }
  if (call.quiet) plan.gpunode_args.push_back("-q");
  return plan;
}

// --- hooks -------------------------------------------------------------------------------------

Status StdinSpecOnly(const Call& call) {
  const std::string spec = call.Value("container-spec", "-");
  if (spec == "-" || spec.empty()) return absl::OkStatus();
  return NotApplicable(call, "--container-spec=" + spec,
                       "gpunode's hooks read the OCI state on stdin and the bundle's config.json from it");
}

StatusOr<Plan> HookUpdateLdcache(const Call& call) {
  GPUNODE_RETURN_IF_ERROR(StdinSpecOnly(call));
  Plan plan;
  plan.gpunode_args = {"cdi", "hook", "update-ldcache"};
  for (const std::string& f : call.Values("folder")) {
    plan.gpunode_args.push_back("--folder");
    plan.gpunode_args.push_back(f);
  }
  AddValue(call, "ldconfig-path", "--ldconfig-path", plan);
  return plan;
}

StatusOr<Plan> HookCreateSymlinks(const Call& call) {
  Plan plan;
  plan.gpunode_args = {"cdi", "hook", "create-symlinks"};
  for (const std::string& l : call.Values("link")) {
    plan.gpunode_args.push_back("--link");
    plan.gpunode_args.push_back(l);
  }
  return plan;
}

StatusOr<Plan> HookEnableCudaCompat(const Call& call) {
  Plan plan;
  plan.gpunode_args = {"cdi", "hook", "enable-cuda-compat"};
  AddValue(call, "host-driver-version", "--host-driver-version", plan);
  return plan;
}

std::function<StatusOr<Plan>(const Call&)> Refuse(const std::string& why) {
  return [why](const Call& call) -> StatusOr<Plan> { return NotApplicable(call, "", why); };
}

// --- system ------------------------------------------------------------------------------------

StatusOr<Plan> SystemCreateDeviceNodes(const Call& call) {
  const std::string root = call.Value("root", "/");
  const std::string dev_root = call.Value("dev-root", root);
  GPUNODE_ASSIGN_OR_RETURN(bool control, call.Bool("control-devices"));
  GPUNODE_ASSIGN_OR_RETURN(bool modules, call.Bool("load-kernel-modules"));
  GPUNODE_ASSIGN_OR_RETURN(bool dry_run, call.Bool("dry-run"));
  Plan plan;
  plan.native_description = absl::StrCat(
      "gpunode itself: ", modules ? "modprobe nvidia, nvidia-uvm, nvidia-modeset" : "",
      modules ? (root == "/" ? "; " : " (chroot " + root + "); ") : "",
      control ? "mknod nvidiactl, nvidia-modeset, nvidia-uvm, nvidia-uvm-tools in " + dev_root + "/dev"
              : "no control devices (--control-devices not set)",
      dry_run ? " (dry run)" : "", call.host_root == "/" ? "" : ", below --host-root " + call.host_root);
  plan.native = [call, root, dev_root, control, modules, dry_run] {
    return CreateDeviceNodes(call, root, dev_root, control, modules, dry_run);
  };
  return plan;
}

StatusOr<Plan> SystemCreateDevCharSymlinks(const Call& call) {
  GPUNODE_ASSIGN_OR_RETURN(bool create_all, call.Bool("create-all"));
  if (create_all) {
    return NotApplicable(call, "--create-all",
                         "gpunode links the NVIDIA device nodes that exist (create them first with `nvidia-ctk system "
                         "create-device-nodes --control-devices`)");
  }
  const std::string driver_root = call.Value("driver-root", "/");
  const std::string dev_char = call.Value("dev-char-path", "/dev/char");
  GPUNODE_ASSIGN_OR_RETURN(bool dry_run, call.Bool("dry-run"));
  Plan plan;
  plan.native_description = absl::StrCat("gpunode itself: a link ", dev_char, "/MAJOR:MINOR for each NVIDIA device node in ",
                                         driver_root, "/dev", dry_run ? " (dry run)" : "",
                                         call.host_root == "/" ? "" : ", below --host-root " + call.host_root);
  plan.native = [call, driver_root, dev_char, dry_run] {
    return CreateDevCharSymlinks(call, driver_root, dev_char, dry_run);
  };
  return plan;
}

StatusOr<Plan> CdiListPlan(const Call& call) {
  std::vector<std::string> dirs = call.Values("spec-dir");
  if (!call.Has("spec-dir")) dirs = {"/etc/cdi", "/var/run/cdi"};
  Plan plan;
  plan.native_description = absl::StrCat("gpunode itself: the device names of the CDI specs in ", absl::StrJoin(dirs, ", "),
                                         call.host_root == "/" ? "" : " below --host-root " + call.host_root,
                                         " (one spec: gpunode cdi list FILE)");
  plan.native = [call, dirs] { return CdiList(call, dirs); };
  return plan;
}

constexpr char kCsvOnly[] = "it is for CSV mode (Tegra); gpunode finds GPUs through NVML";

void AddCdiCommands(std::vector<CommandSpec>& c);
void AddSystemAndConfigCommands(std::vector<CommandSpec>& c);

std::vector<CommandSpec> MakeCommands() {
  std::vector<CommandSpec> c;
  c.push_back({"", {}, "Tools to configure the NVIDIA Container Toolkit, answered by gpunode", {}, nullptr});
  c.push_back({"hook", {}, "The hooks a CDI spec runs: gpunode cdi hook ...", {}, nullptr});
  c.push_back({"hook update-ldcache", {}, "gpunode cdi hook update-ldcache",
               {{{"folder"}, true, true, {}, "--folder (repeatable)"},
                {{"ldconfig-path"}, true, false, {}, "--ldconfig-path"},
                {{"container-spec"}, true, false, {}, "'-' or empty: the OCI state on stdin, as gpunode reads it; a file "
                                                      "does not apply"}},
               HookUpdateLdcache});
  c.push_back({"hook create-symlinks", {}, "gpunode cdi hook create-symlinks",
               {{{"link"}, true, true, {}, "--link TARGET::LINK (repeatable)"}}, HookCreateSymlinks});
  c.push_back({"hook chmod", {}, "does not apply: gpunode's specs never call a chmod hook",
               {{{"path"}, true, true, {}, "(the command does not apply)"},
                {{"mode"}, true, false, {}, "(the command does not apply)"},
                {{"container-spec"}, true, false, {}, "(the command does not apply)"}},
               Refuse("gpunode's CDI specs never call a chmod hook (NVIDIA writes it for CSV-mode device folders); "
                      "the device nodes' modes come from the spec")});
  c.push_back({"hook enable-cuda-compat", {}, "gpunode cdi hook enable-cuda-compat",
               {{{"host-driver-version"}, true, false, {}, "--host-driver-version"}}, HookEnableCudaCompat});
  c.push_back({"hook disable-device-node-modification", {}, "does not apply: gpunode's specs never call it", {},
               Refuse("gpunode's specs do not mount a modified /proc/driver/nvidia/params (ModifyDeviceFiles: 0) in "
                      "containers")});
  c.push_back({"runtime", {}, "Container engine configuration: gpunode runtime configure", {}, nullptr});
  c.push_back(
      {"runtime configure",
       {},
       "gpunode runtime configure (backups kept; --restore undoes it: `gpunode runtime configure --help`)",
       {{{"dry-run"}, false, false, {}, "--dry-run (gpunode prints the change as a diff)"},
        {{"runtime"}, true, false, {}, "--runtime docker|containerd|crio (default docker, as nvidia-ctk)"},
        {{"config"}, true, false, {}, "--config (crio: see --drop-in-config)"},
        {{"drop-in-config"}, true, false, {}, "crio: gpunode's --config (its crio file is a drop-in); containerd: does "
                                              "not apply (gpunode edits config.toml itself); empty: the main file"},
        {{"executable-path"}, true, false, {}, "it is read only with --config-source=command", kNoop},
        {{"config-mode"}, true, false, {}, "config (the default): the config file; oci-hook does not apply"},
        {{"config-source"}, true, false, {}, "file (the default): what gpunode does; command does not apply"},
        {{"oci-hook-path"}, true, false, {}, "it is read only with --config-mode=oci-hook, which gpunode does not write",
         kNoop},
        {{"nvidia-runtime-name"}, true, false, {}, "--runtime-name"},
        {{"nvidia-runtime-path", "runtime-path"}, true, false, {}, "--runtime-path"},
        {{"nvidia-runtime-hook-path"}, true, false, {},
         "it is read only with --config-mode=oci-hook, which gpunode does not write", kNoop},
        {{"nvidia-set-as-default", "set-as-default"}, false, false, {}, "--set-as-default"},
        {{"cdi.enabled", "cdi.enable", "enable-cdi"}, false, false, {}, "--cdi"}},
       RuntimeConfigure});
  c.push_back({"info", {}, "gpunode doctor (nvidia-ctk v1.18's info prints only its help)", {},
               [](const Call&) -> StatusOr<Plan> {
                 Plan p;
                 p.gpunode_args = {"doctor"};
                 return p;
               }});
  AddCdiCommands(c);
  AddSystemAndConfigCommands(c);
  return c;
}

void AddCdiCommands(std::vector<CommandSpec>& c) {
  c.push_back({"cdi", {}, "CDI specs: gpunode cdi ...", {}, nullptr});
  c.push_back(
      {"cdi generate",
       {},
       "gpunode cdi generate (to stdout without --output, as nvidia-ctk)",
       {{{"config-search-path"}, true, true, {"NVIDIA_CTK_CDI_GENERATE_CONFIG_SEARCH_PATHS"},
         "gpunode looks for the driver's config files (Vulkan, EGL, GLX ICDs) in fixed places below --driver-root",
         kRefused},
        {{"output"}, true, false, {"NVIDIA_CTK_CDI_OUTPUT_FILE_PATH"}, "--output (empty: stdout)"},
        {{"format"}, true, false, {"NVIDIA_CTK_CDI_GENERATE_OUTPUT_FORMAT"}, "--format json|yaml"},
        {{"mode", "discovery-mode"}, true, false, {"NVIDIA_CTK_CDI_GENERATE_MODE"},
         "auto, nvml: gpunode's NVML discovery; the others do not apply"},
        {{"dev-root"}, true, false, {"NVIDIA_CTK_DEV_ROOT"}, "--dev-root"},
        {{"device-name-strategy"}, true, true, {"NVIDIA_CTK_CDI_GENERATE_DEVICE_NAME_STRATEGIES"},
         "index and/or uuid: --device-name-strategy index|uuid|both; type-index does not apply"},
        {{"driver-root"}, true, false, {"NVIDIA_CTK_DRIVER_ROOT"}, "--driver-root"},
        {{"library-search-path"}, true, true, {"NVIDIA_CTK_CDI_GENERATE_LIBRARY_SEARCH_PATHS"}, kCsvOnly, kRefused},
        {{"nvidia-cdi-hook-path", "nvidia-ctk-path"}, true, false, {"NVIDIA_CTK_CDI_HOOK_PATH"},
         "--hook-path when it is this gpunode (or its nvidia-ctk link); another program does not apply"},
        {{"ldconfig-path"}, true, false, {"NVIDIA_CTK_CDI_GENERATE_LDCONFIG_PATH"},
         "/sbin/ldconfig (what gpunode's hook runs); another does not apply"},
        {{"vendor", "cdi-vendor"}, true, false, {"NVIDIA_CTK_CDI_GENERATE_VENDOR"}, "nvidia.com only"},
        {{"class", "cdi-class"}, true, false, {"NVIDIA_CTK_CDI_GENERATE_CLASS"}, "gpu only"},
        {{"csv.file"}, true, true, {"NVIDIA_CTK_CDI_GENERATE_CSV_FILES"}, kCsvOnly, kRefused},
        {{"csv.ignore-pattern"}, true, true, {"NVIDIA_CTK_CDI_GENERATE_CSV_IGNORE_PATTERNS"}, kCsvOnly, kRefused},
        {{"disable-hook", "disable-hooks"}, true, true, {"NVIDIA_CTK_CDI_GENERATE_DISABLED_HOOKS"},
         "--disable-hook (chmod, disable-device-node-modification: gpunode never writes them)"},
        {{"enable-hook", "enable-hooks"}, true, true, {"NVIDIA_CTK_CDI_GENERATE_ENABLED_HOOKS"},
         "gpunode's hooks are on by default; it re-enables one disabled here, another does not apply"},
        {{"feature-flag", "feature-flags"}, true, true, {"NVIDIA_CTK_CDI_GENERATE_FEATURE_FLAGS"},
         "disable-nvsandboxutils: nothing to do; the others do not apply"}},
       CdiGenerate});
  c.push_back({"cdi list", {}, "the device names of every spec in the spec folders (gpunode cdi list FILE for one)",
               {{{"spec-dir"}, true, true, {"NVIDIA_CTK_CDI_SPEC_DIRS"}, "folders to read (default /etc/cdi, /var/run/cdi)"}},
               CdiListPlan});
  c.push_back({"cdi transform", {}, "does not apply: regenerate instead", {}, nullptr});
  c.push_back({"cdi transform root", {}, "does not apply: gpunode cdi generate --driver-root/--dev-root writes the spec "
                                         "for a root directly",
               {{{"from"}, true, false, {}, "(the command does not apply)"},
                {{"input"}, true, false, {}, "(the command does not apply)"},
                {{"output"}, true, false, {}, "(the command does not apply)"},
                {{"relative-to"}, true, false, {}, "(the command does not apply)"},
                {{"to"}, true, false, {}, "(the command does not apply)"}},
               Refuse("gpunode does not rewrite specs; `gpunode cdi generate --driver-root DIR --dev-root DIR` writes "
                      "the spec for that root")});
}

void AddSystemAndConfigCommands(std::vector<CommandSpec>& c) {
  c.push_back({"system", {}, "Device nodes and /dev/char links", {}, nullptr});
  c.push_back({"system create-dev-char-symlinks", {}, "gpunode links /dev/char/MAJOR:MINOR to each NVIDIA device node",
               {{{"dev-char-path"}, true, false, {"DEV_CHAR_PATH"}, "where the links go (default /dev/char)"},
                {{"driver-root"}, true, false, {"NVIDIA_DRIVER_ROOT", "DRIVER_ROOT"}, "its dev/ is searched (default /)"},
                {{"create-all"}, false, false, {"CREATE_ALL"}, "(does not apply: gpunode links existing nodes)"},
                {{"load-kernel-modules"}, false, false, {"LOAD_KERNEL_MODULES"}, "it is read only with --create-all",
                 kNoop},
                {{"create-device-nodes"}, false, false, {"CREATE_DEVICE_NODES"}, "it is read only with --create-all",
                 kNoop},
                {{"dry-run"}, false, false, {"DRY_RUN"}, "print the links; create none"}},
               SystemCreateDevCharSymlinks});
  c.push_back({"system create-device-nodes", {}, "gpunode loads the modules and creates the control device nodes",
               {{{"root", "driver-root"}, true, false, {"ROOT", "NVIDIA_DRIVER_ROOT", "DRIVER_ROOT"},
                 "the root modprobe runs in (chroot) and, without --dev-root, whose dev/ gets the nodes"},
                {{"dev-root"}, true, false, {"NVIDIA_DEV_ROOT", "DEV_ROOT"}, "whose dev/ gets the nodes"},
                {{"control-devices"}, false, false, {}, "mknod nvidiactl, nvidia-modeset, nvidia-uvm, nvidia-uvm-tools "
                                                        "(majors from /proc/devices)"},
                {{"load-kernel-modules"}, false, false, {}, "modprobe nvidia, nvidia-uvm, nvidia-modeset first"},
                {{"dry-run"}, false, false, {"DRY_RUN"}, "print what would be done; do nothing"}},
               SystemCreateDeviceNodes});
  const std::vector<FlagSpec> config_flags = {
      {{"config-file", "config", "c"}, true, false, {}, "the file (default /etc/nvidia-container-runtime/config.toml "
                                                        "under --host-root)"},
      {{"set"}, true, true, {}, "KEY[=VALUE] (repeatable): the two keys gpunode's OCI runtime reads; others: see "
                                 "docs/nvidia-ctk.md"},
      {{"in-place", "i"}, false, false, {}, "write the file itself"},
      {{"output", "o"}, true, false, {}, "write to this file (default stdout)"}};
  c.push_back({"config", {}, "the toolkit config keys gpunode's OCI runtime reads (show, --set)", config_flags,
               [](const Call& call) { return ConfigPlan(call, false); }});
  c.push_back({"config default",
               {"config create-default", "config generate-default"},
               "gpunode's defaults of the keys its OCI runtime reads",
               {{{"output", "o"}, true, false, {}, "write to this file (default stdout)"}},
               [](const Call& call) { return ConfigPlan(call, true); }});
}

}  // namespace

const std::vector<CommandSpec>& Commands() {
  static const std::vector<CommandSpec> commands = MakeCommands();
  return commands;
}

}  // namespace gpunode::cli::ctk
