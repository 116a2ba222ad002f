// gpunode oci-runtime: the OCI runtime shim (what nvidia-container-runtime is to runc).
//
// Called by containerd, Docker or CRI-O with runc's arguments. For `create` (and `run`, which is
// create + start) it reads the bundle's config.json, works out which GPUs the container asks for
// (src/container/oci_inject.h), applies the CDI edits of those devices, writes config.json back
// atomically, and then execs the real runtime with the original arguments. Every other command
// (start, state, kill, delete, features, ...) goes straight to the real runtime.
//
// Installed under the name the runtime configs point at (/usr/bin/nvidia-container-runtime, a
// symlink to gpunode), it takes no flags of its own: settings come from the environment
// (GPUNODE_RUNTIME_PATH, GPUNODE_CDI_SPEC_DIRS, GPUNODE_OCI_LOG, GPUNODE_HOST_ROOT,
// GPUNODE_ACCEPT_ENVVAR_WHEN_UNPRIVILEGED, GPUNODE_ACCEPT_VOLUME_MOUNTS) and NVIDIA's config file
// (which request channels are believed: src/container/oci_request.h). As `gpunode oci-runtime`, our
// flags come first and everything from the first other argument (or after `--`) belongs to the
// runtime. Requests the shim does not use are logged as warnings (debug log, runtime's log).
//
// Errors go to stderr and, when the runtime was given `--log FILE`, into that log in its format
// (containerd shows the last error of that file), and the exit status is 1 without running the
// runtime: a container that asked for a GPU must not start without one.
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "src/base/host_fs.h"
#include "src/base/json.h"
#include "src/cli/common.h"
#include "src/container/hook_inject.h"
#include "src/container/oci_inject.h"
#include "src/container/oci_require.h"

namespace gpunode::cli {
namespace {

constexpr char kDefaultSpecDirs[] = "/etc/cdi:/var/run/cdi";
constexpr char kDefaultKind[] = "nvidia.com/gpu";

constexpr char kHelp[] =
    "gpunode oci-runtime: an OCI runtime shim that gives containers the GPUs allocated to them.\n"
    "\n"
    "Usage: gpunode oci-runtime [SHIM OPTIONS] [--] RUNTIME ARGS...\n"
    "       nvidia-container-runtime RUNTIME ARGS...   (gpunode installed under that name)\n"
    "\n"
    "For `create` and `run` it reads <bundle>/config.json, works out which GPUs the container asks\n"
    "for, applies those devices' CDI edits (device nodes and their cgroup rules, mounts, env, hooks),\n"
    "then execs the real runtime with the same arguments. Every other command goes straight to the\n"
    "runtime. Devices come from the CDI specs in the spec directories; when none offers\n"
    "nvidia.com/gpu, a spec is generated in memory from this node (as `gpunode cdi generate`).\n"
    "\n"
    "Three ways to ask, as in NVIDIA's container toolkit; the first that asks wins:\n"
    "  1. CDI annotations cdi.k8s.io/*=<CDI names> (written by the kubelet from the device plugin's\n"
    "     allocation): always used, any kind.\n"
    "  2. Volume mounts: /dev/null bind-mounted at /var/run/nvidia-container-devices/<id> (the device\n"
    "     plugin's volume-mounts strategy; <id> 0 | GPU-<uuid> | 0:1 | all | cdi/nvidia.com/gpu/<name>).\n"
    "     Used when accept-nvidia-visible-devices-as-volume-mounts is true (gpunode's default).\n"
    "  3. NVIDIA_VISIBLE_DEVICES=all | 0,1 | GPU-<uuid> | 0:1 (MIG) | nvidia.com/gpu=0 | none (driver\n"
    "     only) in the container's env (its last entry; void, empty or unset = nothing). An image or a\n"
    "     pod can set it, so it is used only when the container is privileged (CAP_SYS_ADMIN), when\n"
    "     Docker's --gpus hook is in the spec (docker run --gpus), or when\n"
    "     accept-nvidia-visible-devices-envvar-when-unprivileged is true (gpunode's default: false;\n"
    "     NVIDIA's: true). NVIDIA_VISIBLE_DEVICES=/var/run/nvidia-container-devices is the marker of\n"
    "     way 2, not a request. The variable and the mounts name only nvidia.com/gpu devices: another\n"
    "     kind there stops the container (exit 1).\n"
    "A request not used is logged as a warning (--debug-log, and the runtime's --log file) naming\n"
    "the setting that would change it.\n"
    "\n"
    "Settings (NVIDIA's keys): read from NVIDIA's config file, top-level keys, when it exists:\n"
    "$NVIDIA_CTK_CONFIG_FILE_PATH, else ${XDG_CONFIG_HOME:-/etc}/nvidia-container-runtime/config.toml\n"
    "(a malformed file stops every GPU container: exit 1, the file and key named); then the shim's\n"
    "environment; then its flags:\n"
    "  --accept-envvar-when-unprivileged=BOOL  accept-nvidia-visible-devices-envvar-when-unprivileged\n"
    "                        (GPUNODE_ACCEPT_ENVVAR_WHEN_UNPRIVILEGED; default false)\n"
    "  --accept-volume-mounts=BOOL  accept-nvidia-visible-devices-as-volume-mounts\n"
    "                        (GPUNODE_ACCEPT_VOLUME_MOUNTS; default true)\n"
    "  (BOOL as Go reads it: true, false, 1, 0, t, f, TRUE, FALSE, True, False)\n"
    "\n"
    "Other shim options (or environment):\n"
    "  --runtime-path PATH   the real runtime (GPUNODE_RUNTIME_PATH; default runc, from PATH)\n"
    "  --spec-dir DIR        CDI spec directory, repeatable; later ones win a name conflict\n"
    "                        (GPUNODE_CDI_SPEC_DIRS, colon-separated; default /etc/cdi:/var/run/cdi)\n"
    "  --no-generate         never generate a spec in memory; fail when no spec file has the device\n"
    "  --debug-log FILE      append one line per decision to FILE (GPUNODE_OCI_LOG)\n"
    "  (gpunode --simulate PROFILE oci-runtime ..., or GPUNODE_SIMULATE: the spec generated in memory is\n"
    "  the simulated node's, its files and device nodes taken from its generated host root)\n"
    "  -h, --help            this text\n"
    "\n"
    "Examples:\n"
    "  gpunode oci-runtime --runtime-path /usr/sbin/runc run --bundle ./bundle demo\n"
    "  ln -s /usr/bin/gpunode /usr/bin/nvidia-container-runtime   # what runtime configs point at\n"
    "  gpunode runtime configure --runtime containerd                # adds the `nvidia` runtime\n"
    "  printf 'accept-nvidia-visible-devices-envvar-when-unprivileged = true\\n' \\\n"
    "    >> /etc/nvidia-container-runtime/config.toml               # NVIDIA's behaviour (unsafe)\n";

constexpr char kEnvvarFlag[] = "--accept-envvar-when-unprivileged";
constexpr char kEnvvarEnv[] = "GPUNODE_ACCEPT_ENVVAR_WHEN_UNPRIVILEGED";
constexpr char kVolumeMountsFlag[] = "--accept-volume-mounts";
constexpr char kVolumeMountsEnv[] = "GPUNODE_ACCEPT_VOLUME_MOUNTS";

struct ShimOptions {
  std::string runtime_path;
  std::vector<std::string> spec_dirs;
  bool generate = true;
  std::string debug_log;
  std::optional<bool> accept_envvar_when_unprivileged;  // the flags, when given
  std::optional<bool> accept_volume_mounts;
};

std::string EnvOrEmpty(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// What we need from runc's arguments.
struct RuntimeCall {
  std::string command;  // "create", "run", "start", ... ; empty when none
  std::string bundle;   // create/run: --bundle, else the working directory
  std::string log_file;
  std::string log_format = "text";
};

bool TakesValue(absl::string_view global_flag) {
  static const char* kValueFlags[] = {"--log", "--log-format", "--root", "--criu", "--rootless"};
  for (const char* f : kValueFlags) {
    if (global_flag == f) return true;
  }
  return false;
}

// runc [global options] command [command options] [arguments...]. Global flags also accept a
// single dash (urfave/cli), and `--flag=value`.
RuntimeCall ParseRuntimeCall(const std::vector<std::string>& args) {
  RuntimeCall call;
  size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.empty() || a[0] != '-') break;
    std::string flag = absl::StartsWith(a, "--") ? a : "-" + a;  // -log == --log
    std::string value;
    bool has_value = false;
    if (size_t eq = flag.find('='); eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
      has_value = true;
    }
    if (TakesValue(flag) && !has_value && i + 1 < args.size()) {
      value = args[++i];
      has_value = true;
    }
    if (flag == "--log" && has_value) call.log_file = value;
    if (flag == "--log-format" && has_value) call.log_format = value;
  }
  if (i >= args.size()) return call;
  call.command = args[i];
  for (size_t j = i + 1; j < args.size(); ++j) {
    const std::string& a = args[j];
    if (a == "--bundle" || a == "-b" || a == "-bundle") {
      if (j + 1 < args.size()) call.bundle = args[++j];
    } else if (absl::StartsWith(a, "--bundle=") || absl::StartsWith(a, "-b=")) {
      call.bundle = a.substr(a.find('=') + 1);
    }
  }
  if (call.bundle.empty()) {
    char cwd[PATH_MAX];
    if (::getcwd(cwd, sizeof cwd) != nullptr) call.bundle = cwd;
  }
  return call;
}

std::string Now() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

class ShimLog {
 public:
  ShimLog(const RuntimeCall& call, std::string debug_log)
      : call_(call), debug_log_(std::move(debug_log)) {}

  void Info(const std::string& msg) const { Debug("info", msg); }

  // Our debug log and the runtime's log (a request the shim did not use; the container starts).
  void Warning(const std::string& msg) const {
    Debug("warning", msg);
    RuntimeLog("warning", msg);
  }

  // stderr, the runtime's log (so containerd reports it), and our debug log.
  void Error(const std::string& msg) const {
    std::cerr << "gpunode oci-runtime: error: " << msg << "\n";
    Debug("error", msg);
    RuntimeLog("error", msg);
  }

 private:
  // One line in the runtime's --log file, in its --log-format (runc's logrus: json or text).
  void RuntimeLog(const char* level, const std::string& msg) const {
    if (call_.log_file.empty()) return;
    std::ofstream out(call_.log_file, std::ios::app);
    const std::string full = absl::StrCat("gpunode oci-runtime: ", msg);
    if (call_.log_format == "json") {
      out << DumpJson(nlohmann::json{{"level", level}, {"msg", full}, {"time", Now()}}) << "\n";
    } else {
      out << "time=\"" << Now() << "\" level=" << level << " msg=" << DumpJson(nlohmann::json(full)) << "\n";
    }
  }

  void Debug(const char* level, const std::string& msg) const {
    if (debug_log_.empty()) return;
    std::ofstream out(debug_log_, std::ios::app);
    out << Now() << " " << level << " [" << ::getpid() << "] " << msg << "\n";
  }
  const RuntimeCall& call_;
  std::string debug_log_;
};

// PATH lookup as execvp does it, so we can refuse to exec ourselves.
std::string FindInPath(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  std::string path = EnvOrEmpty("PATH");
  if (path.empty()) path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  for (absl::string_view dir : absl::StrSplit(path, ':')) {
    if (dir.empty()) continue;
    std::string candidate = absl::StrCat(dir, "/", name);
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

std::string RealPath(const std::string& p) {
  char buf[PATH_MAX];
  return ::realpath(p.c_str(), buf) ? std::string(buf) : p;
}

// The numbers the simulated driver's nodes stand for (those of `gpunode sim hostroot
// --device-nodes`): nvidia<N> 195:N, nvidiactl 195:255, nvidia-modeset 195:254, nvidia-uvm 510:0,
// nvidia-uvm-tools 510:1, nvidia-caps/nvidia-cap<N> 511:N.
std::optional<std::pair<int64_t, int64_t>> SimulatedDeviceNumber(const std::string& container_path) {
  const std::string name = container_path.substr(container_path.rfind('/') + 1);
  auto number = [&](const std::string& prefix) -> std::optional<int64_t> {
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0 || name.size() > prefix.size() + 6 ||
        name.find_first_not_of("0123456789", prefix.size()) != std::string::npos) {
      return std::nullopt;
    }
    return std::stoll(name.substr(prefix.size()));
  };
  if (name == "nvidiactl") return std::make_pair(195, 255);
  if (name == "nvidia-modeset") return std::make_pair(195, 254);
  if (name == "nvidia-uvm") return std::make_pair(510, 0);
  if (name == "nvidia-uvm-tools") return std::make_pair(510, 1);
  if (auto n = number("nvidia-cap")) return std::make_pair(int64_t{511}, *n);
  if (auto n = number("nvidia")) return std::make_pair(int64_t{195}, *n);
  return std::nullopt;
}

// A spec generated for a simulated node (--simulate, GPUNODE_SIMULATE) names paths of that node;
// on this machine they are below its generated host root, where the device nodes are plain files.
// Points the host paths there and gives those nodes the simulated driver's numbers, so the runtime
// mounts the simulated driver's files and creates the device nodes in the container.
void LocalizeSimulatedSpec(cdi::Spec& spec, const std::string& root) {
  auto local = [&](const std::string& p) { return p.empty() || p[0] != '/' ? p : root + p; };
  auto edit = [&](cdi::ContainerEdits& e) {
    for (cdi::DeviceNode& n : e.device_nodes) {
      n.host_path = local(n.host_path.empty() ? n.path : n.host_path);
      struct stat st {};
      if (n.major || ::lstat(n.host_path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
      if (auto mm = SimulatedDeviceNumber(n.path)) {
        n.type = "c";
        n.major = mm->first;
        n.minor = mm->second;
      }
    }
    for (cdi::Mount& m : e.mounts) m.host_path = local(m.host_path);
  };
  edit(spec.edits);
  for (cdi::Device& d : spec.devices) edit(d.edits);
}

// Which request channels are believed: gpunode's defaults, then NVIDIA's config file, then our
// environment, then our flags. Read for create/run only, so a broken file never blocks a delete.
StatusOr<container::RequestPolicy> ResolvePolicy(const ShimOptions& options, std::string* config_path) {
  container::RequestPolicy policy;
  *config_path = container::NvidiaToolkitConfigPath(EnvOrEmpty("NVIDIA_CTK_CONFIG_FILE_PATH"), EnvOrEmpty("XDG_CONFIG_HOME"));
  GPUNODE_RETURN_IF_ERROR(container::LoadNvidiaToolkitConfig(*config_path, policy).status());
  struct Setting {
    const char* env;
    const char* flag;
    const std::optional<bool>& from_flag;
    bool& value;
    std::string& source;
  };
  for (const Setting& s :
       {Setting{kEnvvarEnv, kEnvvarFlag, options.accept_envvar_when_unprivileged,
                policy.accept_envvar_when_unprivileged, policy.envvar_source},
        Setting{kVolumeMountsEnv, kVolumeMountsFlag, options.accept_volume_mounts, policy.accept_volume_mounts,
                policy.volume_mounts_source}}) {
    if (const char* v = std::getenv(s.env); v != nullptr && *v != '\0') {
      GPUNODE_ASSIGN_OR_RETURN(s.value, ParseGoBool(s.env, v));
      s.source = s.env;
    }
    if (s.from_flag) {
      s.value = *s.from_flag;
      s.source = s.flag;
    }
  }
  return policy;
}

// "ignored X: why; to use it, set KEY = true in FILE (or --flag=true, ENV=true)".
std::string IgnoredMessage(const container::IgnoredRequest& r, const std::string& config_path) {
  std::string msg = absl::StrCat("ignored ", r.what, ": ", r.why);
  if (r.setting == container::kAcceptEnvvarUnprivilegedKey) {
    absl::StrAppend(&msg, "; to use it, set ", r.setting, " = true in ", config_path, " (or ", kEnvvarFlag,
                    "=true, ", kEnvvarEnv, "=true), or give the GPU through the device plugin");
  } else if (r.setting == container::kAcceptVolumeMountsKey) {
    absl::StrAppend(&msg, "; to use them, set ", r.setting, " = true in ", config_path, " (or ", kVolumeMountsFlag,
                    "=true, ", kVolumeMountsEnv, "=true)");
  }
  return msg;
}

// The container's requirements against this node's driver and the GPUs it gets (NVML through the
// node's loader, or the simulated node), before the runtime runs: a failure refuses the container.
Status CheckNodeRequirements(const compat::ImageRequirements& reqs, const std::vector<std::string>& devices,
                             const ShimLog& log, const std::string& bundle, std::shared_ptr<NodeSession> session) {
  if (reqs.disabled) {
    log.Info(absl::StrCat(bundle, ": NVIDIA_DISABLE_REQUIRE=", reqs.disable_value, ": requirements not checked"));
    return absl::OkStatus();
  }
  if (reqs.requirements.empty()) return absl::OkStatus();
  if (session == nullptr) {  // no spec was generated in memory: open the node for its facts
    GlobalOptions global;
    if (std::string root = EnvOrEmpty("GPUNODE_HOST_ROOT"); !root.empty()) global.host_root = root;
    GPUNODE_ASSIGN_OR_RETURN(session, NodeSession::Open(global));
  }
  session->probe_options().init_cuda = false;  // NVML says the driver's CUDA version
  session->probe_options().query_topology = false;
  GPUNODE_ASSIGN_OR_RETURN(node::NodeInventory inv, session->Inventory());
  const compat::ReqFacts facts = container::FactsForDevices(inv, devices);
  GPUNODE_RETURN_IF_ERROR(container::CheckRequirements(reqs, facts));
  std::vector<std::string> names;
  for (const compat::Requirement& r : reqs.requirements) names.push_back(r.name);
  log.Info(absl::StrCat(bundle, ": ", absl::StrJoin(names, ", "), " hold (driver ", facts.driver, ", CUDA ",
                        facts.cuda, ", ", facts.devices.size(), " GPU(s))"));
  return absl::OkStatus();
}

// What the shim does to a config, in memory: `config` gets the edits of the devices it asks for.
struct ShimEdits {
  bool requested = false;  // a GPU (or the driver alone) was asked for and granted
  bool changed = false;    // `config` differs from what was read
  int legacy_hooks = 0;    // Docker's nvidia-container-runtime-hook entries removed
  std::string summary;     // for the log: "NVIDIA_VISIBLE_DEVICES=all -> injected ..."
};

// `keep` holds a simulated node's host root while its files are needed (the runtime mounts from
// it; the exec skips its removal: the next --simulate run removes it, common.cc).
StatusOr<ShimEdits> EditConfig(nlohmann::ordered_json& config, const RuntimeCall& call, const ShimOptions& options,
                               const ShimLog& log, std::shared_ptr<NodeSession>* keep) {
  ShimEdits out;
  std::string toolkit_config;
  GPUNODE_ASSIGN_OR_RETURN(const container::RequestPolicy policy, ResolvePolicy(options, &toolkit_config));
  GPUNODE_ASSIGN_OR_RETURN(container::DeviceRequest request,
                           container::RequestedDevices(config, kDefaultKind, policy));
  for (const container::IgnoredRequest& ignored : request.ignored) {
    log.Warning(absl::StrCat(call.bundle, ": ", IgnoredMessage(ignored, toolkit_config)));
  }
  // Docker's --gpus hook: this shim does its work, so it goes (the hook would inject a second time).
  const int legacy_hooks = out.legacy_hooks = container::RemoveLegacyNvidiaHooks(config);
  if (request.Empty()) {
    out.changed = legacy_hooks > 0;
    out.summary = absl::StrCat(call.command, " ", call.bundle, ": no GPU requested",
                               request.ignored.empty() ? "" : " (none of the requests above was used)");
    return out;
  }
  out.requested = true;
  // NVIDIA_REQUIRE_* of the container (a term that does not parse refuses it, as NVIDIA's hook).
  GPUNODE_ASSIGN_OR_RETURN(const compat::ImageRequirements requirements, container::ContainerRequirements(config));
  container::SpecRegistry registry = container::SpecRegistry::Load(options.spec_dirs);
  std::shared_ptr<NodeSession> session;  // the node a spec was generated from, reused for its facts
  if (!registry.HasKind(kDefaultKind) && options.generate) {
    GlobalOptions global;
    if (std::string root = EnvOrEmpty("GPUNODE_HOST_ROOT"); !root.empty()) global.host_root = root;
    container::BuildOptions build;
    build.hook_path = SelfPath();
    auto generated = GenerateHostSpec(global, "/", "", build);
    if (!generated.ok()) {
      return Status(generated.status().code(),
                    absl::StrCat("no CDI spec for ", kDefaultKind, " in ", absl::StrJoin(options.spec_dirs, ", "),
                                 " and none could be generated: ", generated.status().message(),
                                 " (requested by ", request.source, "; run `gpunode doctor`)"));
    }
    if (generated->session->simulated()) {
      LocalizeSimulatedSpec(generated->built.spec, generated->host_root);
      generated->session->KeepAcrossExec();
      *keep = generated->session;
    }
    log.Info(absl::StrCat("no spec file offers ", kDefaultKind, "; generated one in memory (driver ",
                          generated->files.version,
                          generated->session->simulated() ? ", simulated node " + *generated->session->simulated() : "",
                          ")"));
    session = generated->session;
    registry.Add(std::move(generated->built.spec), "generated in memory");
  }
  GPUNODE_ASSIGN_OR_RETURN(container::InjectResult result,
                           container::InjectDevices(config, registry, request, kDefaultKind));
  GPUNODE_RETURN_IF_ERROR(CheckNodeRequirements(requirements, result.devices, log, call.bundle, session));
  out.changed = result.changed || legacy_hooks > 0;
  out.summary = absl::StrCat(
      call.command, " ", call.bundle, ": ", request.source, " -> injected ",
      result.devices.empty() ? std::string("the driver only") : absl::StrJoin(result.devices, ", "), " from ",
      absl::StrJoin(result.specs, ", "),
      request.capabilities ? absl::StrCat(" (driver capabilities ", absl::StrJoin(*request.capabilities, ","), ")") : "");
  return out;
}

// The bundle's config.json: runc's, not the host root's, a path on this machine. Read with the
// size and nesting limits and in linear time (a hostile image's config must not crash or stall us).
StatusOr<nlohmann::ordered_json> ReadBundleConfig(const std::string& bundle) {
  const std::string config_path = bundle + "/config.json";
  auto file = HostFs::Local().ReadVersioned(config_path);
  if (!file.ok()) return Annotate(file.status(), "read the bundle's config");
  if (!file->identity.exists) return absl::NotFoundError(absl::StrCat("read the bundle's ", config_path, ": no such file"));
  GPUNODE_ASSIGN_OR_RETURN(nlohmann::ordered_json config, ParseOrderedJson(file->text, config_path));
  if (!config.is_object()) return absl::InvalidArgumentError(absl::StrCat(config_path, ": not a JSON object"));
  return config;
}

Status Inject(const RuntimeCall& call, const ShimOptions& options, const ShimLog& log,
              std::shared_ptr<NodeSession>* keep) {
  GPUNODE_ASSIGN_OR_RETURN(nlohmann::ordered_json config, ReadBundleConfig(call.bundle));
  GPUNODE_ASSIGN_OR_RETURN(const ShimEdits edits, EditConfig(config, call, options, log, keep));
  if (edits.changed) {
    WriteOptions w;
    w.durable = false;  // the bundle lives as long as the container
    GPUNODE_RETURN_IF_ERROR(
        HostFs::Local().WriteFileAtomically(call.bundle + "/config.json", DumpJson(config), w).status());
  } else if (edits.requested) {
    log.Info(absl::StrCat(call.bundle, ": every requested edit is already in the spec; spec untouched"));
    return absl::OkStatus();
  }
  log.Info(absl::StrCat(edits.summary,
                        edits.legacy_hooks > 0 ? "; removed nvidia-container-runtime-hook"
                        : edits.requested      ? ""
                                               : "; spec untouched"));
  return absl::OkStatus();
}

// The shim's settings from its environment alone (the hook has no flags of its own).
ShimOptions OptionsFromEnvironment() {
  ShimOptions options;
  options.runtime_path = EnvOrEmpty("GPUNODE_RUNTIME_PATH");
  if (options.runtime_path.empty()) options.runtime_path = "runc";
  options.debug_log = EnvOrEmpty("GPUNODE_OCI_LOG");
  const std::string dirs = EnvOrEmpty("GPUNODE_CDI_SPEC_DIRS");
  for (absl::string_view d : absl::StrSplit(dirs.empty() ? kDefaultSpecDirs : dirs, ':')) {
    if (!d.empty()) options.spec_dirs.emplace_back(d);
  }
  return options;
}

// The hook's work (RunLegacyHook): the shim's edits made on a copy of the config, the difference
// applied to the created container (src/container/hook_inject.h).
Status InjectFromHook(const std::string& state_text, const ShimLog& log, RuntimeCall& call) {
  GPUNODE_ASSIGN_OR_RETURN(const container::HookState state, container::ParseHookState(state_text));
  call.bundle = state.bundle;
  const ShimOptions options = OptionsFromEnvironment();
  GPUNODE_ASSIGN_OR_RETURN(const nlohmann::ordered_json before, ReadBundleConfig(state.bundle));
  nlohmann::ordered_json after = before;
  std::shared_ptr<NodeSession> keep;
  GPUNODE_ASSIGN_OR_RETURN(const ShimEdits edits, EditConfig(after, call, options, log, &keep));
  if (!edits.requested) {
    log.Info(absl::StrCat(edits.summary, " (hook: nothing to do)"));
    return absl::OkStatus();
  }
  GPUNODE_ASSIGN_OR_RETURN(const container::InjectionPlan plan, container::PlanFromConfigs(before, after));
  GPUNODE_ASSIGN_OR_RETURN(const std::string rootfs, container::BundleRootPath(before, state.bundle));
  GPUNODE_RETURN_IF_ERROR(container::AllowDevicesInCgroup(state.pid, plan.rules));
  GPUNODE_RETURN_IF_ERROR(container::ApplyInContainer(state.pid, rootfs, plan, state_text));
  log.Info(absl::StrCat(edits.summary, "; hook: pid ", state.pid, ", ", plan.devices.size(), " device nodes, ",
                        plan.mounts.size(), " mounts, ", plan.hooks.size(), " hooks, ", plan.rules.size(),
                        " cgroup rules", plan.env.empty() ? "" : absl::StrCat("; env not applied: ", absl::StrJoin(plan.env, " "))));
  return absl::OkStatus();
}

}  // namespace

void AddOciRuntimeHelp(CLI::App& app) {
  // Parsed by hand in main() before CLI11 sees the arguments; registered so `gpunode --help` lists it.
  app.add_subcommand("oci-runtime", "OCI runtime shim: inject requested GPUs, then exec runc (see its --help)")
      ->allow_extras()
      ->prefix_command();
}

// gpunode installed as `nvidia-container-runtime-hook`: Docker offers `--gpus` only when a program
// of that name is in its PATH, and adds it as a prestart hook of every --gpus container. When the
// container's runtime is gpunode's shim, the shim has removed the hook and done the injection;
// when it is runc (Docker's default runtime left as it was), this hook does the injection itself,
// into the created container, as NVIDIA's hook does through libnvidia-container
// (src/container/hook_inject.h). No GPU asked for: nothing is done, exit 0.
int RunLegacyHook(const std::vector<std::string>& args) {
  std::string command;
  for (const std::string& a : args) {
    if (a == "--version" || a == "-version") {
      std::cout << "gpunode " << GPUNODE_VERSION << " (answering as nvidia-container-runtime-hook)\n";
      return kExitOk;
    }
    if (a == "-h" || a == "--help") {
      std::cout
          << "nvidia-container-runtime-hook (gpunode): Docker's `docker run --gpus` hook.\n"
             "\n"
             "Usage: nvidia-container-runtime-hook prestart   (OCI state JSON on stdin, as runc runs it)\n"
             "\n"
             "Docker adds this hook to a --gpus container. With gpunode's shim as the runtime the shim gives\n"
             "the GPUs and removes the hook. With runc as the runtime, this hook gives them: it reads the\n"
             "bundle's config.json, works out the request as the shim does (NVIDIA_VISIBLE_DEVICES,\n"
             "NVIDIA_DRIVER_CAPABILITIES, NVIDIA_REQUIRE_*; CDI specs in GPUNODE_CDI_SPEC_DIRS, default\n"
             "/etc/cdi:/var/run/cdi), allows the devices in the container's device cgroup (v1 or v2), and in\n"
             "the container's mount namespace creates the device nodes, bind-mounts the driver files\n"
             "read-only and runs the spec's hooks (symlinks, ld cache). Other commands (poststart,\n"
             "poststop) do nothing. Decisions are logged to GPUNODE_OCI_LOG when set. docs/docker.md.\n";
      return kExitOk;
    }
    if (!a.empty() && a[0] != '-' && command.empty()) command = a;
  }
  if (command != "prestart" && command != "createRuntime") return kExitOk;  // poststart, poststop: nothing to do
  // The state is small; read one byte past the limit so ParseHookState can refuse a bigger one.
  std::string state(container::kMaxHookStateBytes + 1, '\0');
  std::cin.read(state.data(), static_cast<std::streamsize>(state.size()));
  state.resize(static_cast<size_t>(std::cin.gcount()));
  RuntimeCall call;
  call.command = command;
  const ShimLog log(call, EnvOrEmpty("GPUNODE_OCI_LOG"));
  if (Status st = InjectFromHook(state, log, call); !st.ok()) {
    std::cerr << "nvidia-container-runtime-hook (gpunode): error: " << st.message() << "\n";
    log.Info(absl::StrCat("hook error: ", st.message()));
    return 1;
  }
  return kExitOk;
}

int RunOciRuntime(const std::vector<std::string>& args) {
  ShimOptions options;
  options.runtime_path = EnvOrEmpty("GPUNODE_RUNTIME_PATH");
  if (options.runtime_path.empty()) options.runtime_path = "runc";
  std::string dirs = EnvOrEmpty("GPUNODE_CDI_SPEC_DIRS");
  bool dirs_from_flags = false;
  options.debug_log = EnvOrEmpty("GPUNODE_OCI_LOG");

  size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](const char* flag) -> std::optional<std::string> {
      const std::string eq = absl::StrCat(flag, "=");
      if (absl::StartsWith(a, eq)) return a.substr(eq.size());
      if (a == flag && i + 1 < args.size()) return args[++i];
      return std::nullopt;
    };
    if (a == "--") {
      ++i;
      break;
    }
    if (a == "-h" || a == "--help") {
      std::cout << kHelp;
      return kExitOk;
    }
    if (auto v = value("--runtime-path")) {
      options.runtime_path = *v;
    } else if (auto d = value("--spec-dir")) {
      if (!dirs_from_flags) options.spec_dirs.clear();
      dirs_from_flags = true;
      options.spec_dirs.push_back(*d);
    } else if (auto l = value("--debug-log")) {
      options.debug_log = *l;
    } else if (a == "--no-generate") {
      options.generate = false;
    } else if (a == "--runtime-path" || a == "--spec-dir" || a == "--debug-log") {
      PrintError(absl::StrCat(a, " needs a value"));
      return kExitUsage;
    } else if (a == kEnvvarFlag || a == kVolumeMountsFlag) {
      PrintError(absl::StrCat(a, " needs a value: ", a, "=true or ", a, "=false"));
      return kExitUsage;
    } else if (absl::StartsWith(a, absl::StrCat(kEnvvarFlag, "=")) ||
               absl::StartsWith(a, absl::StrCat(kVolumeMountsFlag, "="))) {
      const size_t eq = a.find('=');
      auto b = ParseGoBool(a.substr(0, eq), a.substr(eq + 1));
      if (!b.ok()) {
        PrintError(b.status());
        return kExitUsage;
      }
      (a.substr(0, eq) == kEnvvarFlag ? options.accept_envvar_when_unprivileged : options.accept_volume_mounts) = *b;
    } else {
      break;  // the runtime's arguments start here
    }
  }
  if (!dirs_from_flags) {
    for (absl::string_view d : absl::StrSplit(dirs.empty() ? kDefaultSpecDirs : dirs, ':')) {
      if (!d.empty()) options.spec_dirs.emplace_back(d);
    }
  }
  const std::vector<std::string> runtime_args(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
  const RuntimeCall call = ParseRuntimeCall(runtime_args);
  const ShimLog log(call, options.debug_log);

  const std::string runtime = FindInPath(options.runtime_path);
  if (runtime.empty() || ::access(runtime.c_str(), X_OK) != 0) {
    log.Error(absl::StrCat("the runtime \"", options.runtime_path,
                           "\" is not an executable file (not found in PATH?); set --runtime-path or "
                           "GPUNODE_RUNTIME_PATH to runc's or crun's path"));
    return 1;
  }
  if (RealPath(runtime) == RealPath("/proc/self/exe")) {
    log.Error(absl::StrCat("the runtime path \"", options.runtime_path,
                           "\" is gpunode itself; set GPUNODE_RUNTIME_PATH to the real runc"));
    return 1;
  }
  std::shared_ptr<NodeSession> simulated_node;
  if (call.command == "create" || call.command == "run") {
    if (Status st = Inject(call, options, log, &simulated_node); !st.ok()) {
      log.Error(std::string(st.message()));
      return 1;
    }
  }
  std::vector<char*> argv;
  std::string argv0 = options.runtime_path;
  argv.push_back(argv0.data());
  std::vector<std::string> owned = runtime_args;
  for (std::string& a : owned) argv.push_back(a.data());
  argv.push_back(nullptr);
  ::execv(runtime.c_str(), argv.data());
  log.Error(absl::StrCat("exec ", runtime, ": ", std::strerror(errno)));
  return 1;
}

}  // namespace gpunode::cli
