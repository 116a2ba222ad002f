// gpunode labels: gpu-feature-discovery's node labels (and gpunode's own) for this node, printed
// or written as node-feature-discovery's features file, once or every interval (docs/labels.md).
#include <climits>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/cli/common.h"
#include "src/cli/nvidia_flags.h"
#include "src/compat/dataset.h"
#include "src/container/cdi.h"
#include "src/devices/config.h"
#include "src/devices/sleep_interval.h"
#include "src/kube/client.h"
#include "src/kube/node.h"
#include "src/labels/host_facts.h"
#include "src/labels/labels.h"

extern char** environ;

namespace gpunode::cli {
namespace {

constexpr char kDefaultOutput[] = "/etc/kubernetes/node-feature-discovery/features.d/gpunode";

struct LabelsFlags {
  bool print = false;
  std::string output;
  std::string oneshot;  // Go booleans: bare, --oneshot=true|false
  std::string sleep_interval;
  std::string no_timestamp;
  std::string config_file;
  std::string mig_strategy;
  std::string machine_type_file;
  // Node labels through the Kubernetes API.
  bool node_labels = false;
  bool remove = false;
  std::string node_name;
  std::string kubeconfig;
  std::string daemonset;  // NAMESPACE/NAME: its deletion makes a stop an uninstall
  std::vector<std::string> remove_on_uninstall;
  // Set when given on the command line (flags win over the environment and the config file).
  CLI::Option* output_opt = nullptr;
  CLI::Option* oneshot_opt = nullptr;
  CLI::Option* sleep_opt = nullptr;
  CLI::Option* no_timestamp_opt = nullptr;
  CLI::Option* config_opt = nullptr;
  CLI::Option* mig_opt = nullptr;
  CLI::Option* machine_opt = nullptr;
};

std::map<std::string, std::string> Environment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string kv(*e);
    const size_t eq = kv.find('=');
    if (eq != std::string::npos) env.emplace(kv.substr(0, eq), kv.substr(eq + 1));
  }
  return env;
}

const std::string* Lookup(const std::map<std::string, std::string>& env, const char* name) {
  auto it = env.find(name);
  return it == env.end() ? nullptr : &it->second;
}

StatusOr<std::string> ReadConfigFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return ErrnoToStatus(errno, "read", path);
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return ErrnoToStatus(errno ? errno : EIO, "read", path);
  return text.str();
}

// Where the labels go: stdout, or a file.
struct Sink {
  bool none = false;  // labels go to the Node only
  bool to_stdout = false;
  std::string root = "/";  // the host root for the default file, "/" for a file the user names
  std::string path;        // a path below `root`
  std::string shown;       // the path on this machine, for messages
};

// The configuration with GFD's precedence: flag, then environment (GFD_* before the plugin's
// names), then the config file, then the default.
StatusOr<devices::PluginConfig> ResolveConfig(const LabelsFlags& flags,
                                             const std::map<std::string, std::string>& env,
                                             std::vector<std::string>* warnings) {
  std::string config_file;
  if (flags.config_opt->count() > 0) {
    config_file = flags.config_file;
  } else if (const std::string* v = Lookup(env, "GFD_CONFIG_FILE")) {
    config_file = *v;
  } else if (const std::string* w = Lookup(env, "CONFIG_FILE")) {
    config_file = *w;
  }
  devices::PluginConfig config;
  if (!config_file.empty()) {
    GPUNODE_ASSIGN_OR_RETURN(std::string text, ReadConfigFile(config_file));
    GPUNODE_ASSIGN_OR_RETURN(config, devices::ParseConfig(text, config_file));
    for (const std::string& w : config.warnings)
      warnings->push_back(absl::StrCat(config_file, ": ", w));
  }
  GPUNODE_RETURN_IF_ERROR(devices::ApplyEnvironment(env, &config));
  if (const std::string* v = Lookup(env, "GFD_MIG_STRATEGY")) {
    auto s = devices::ParseMigStrategy(*v);
    if (!s.ok())
      return absl::InvalidArgumentError(absl::StrCat("GFD_MIG_STRATEGY: ", s.status().message()));
    config.mig_strategy = *s;
  }
  if (const std::string* v = Lookup(env, "GFD_ONESHOT")) {
    GPUNODE_ASSIGN_OR_RETURN(config.gfd_oneshot, ParseGoBool("GFD_ONESHOT", *v));
  }
  if (const std::string* v = Lookup(env, "GFD_NO_TIMESTAMP")) {
    GPUNODE_ASSIGN_OR_RETURN(config.gfd_no_timestamp, ParseGoBool("GFD_NO_TIMESTAMP", *v));
  }
  if (const std::string* v = Lookup(env, "GFD_SLEEP_INTERVAL")) {
    auto s = devices::ParseSleepInterval(*v);
    if (!s.ok())
      return absl::InvalidArgumentError(absl::StrCat("GFD_SLEEP_INTERVAL: ", s.status().message()));
    config.gfd_sleep_interval_s = *s;
  }
  if (const std::string* v = Lookup(env, "GFD_OUTPUT_FILE")) config.gfd_output_file = *v;
  if (const std::string* v = Lookup(env, "GFD_MACHINE_TYPE_FILE")) config.machine_type_file = *v;

  if (flags.mig_opt->count() > 0) {
    auto s = devices::ParseMigStrategy(flags.mig_strategy);
    if (!s.ok())
      return absl::InvalidArgumentError(absl::StrCat("--mig-strategy: ", s.status().message()));
    config.mig_strategy = *s;
  }
  if (flags.oneshot_opt->count() > 0) {
    GPUNODE_ASSIGN_OR_RETURN(config.gfd_oneshot, ParseGoBool("--oneshot", flags.oneshot));
  }
  if (flags.no_timestamp_opt->count() > 0) {
    GPUNODE_ASSIGN_OR_RETURN(config.gfd_no_timestamp, ParseGoBool("--no-timestamp", flags.no_timestamp));
  }
  if (flags.sleep_opt->count() > 0) {
    auto s = devices::ParseSleepInterval(flags.sleep_interval);
    if (!s.ok())
      return absl::InvalidArgumentError(absl::StrCat("--sleep-interval: ", s.status().message()));
    config.gfd_sleep_interval_s = *s;
  }
  if (flags.output_opt->count() > 0) config.gfd_output_file = flags.output;
  if (flags.machine_opt->count() > 0) config.machine_type_file = flags.machine_type_file;
  return config;
}

// The file the labels go to. GFD's default path belongs to the host and is resolved below
// --host-root; a path the user names is used as given. "" or "-" is stdout, as in GFD.
StatusOr<Sink> ResolveSink(const GlobalOptions& global, const LabelsFlags& flags,
                           const devices::PluginConfig& config, bool simulated) {
  Sink sink;
  // With the Node as the destination, a features file only when one is asked for: the flag, the
  // environment, or a config file's flags.gfd.outputFile.
  const bool file_asked = flags.output_opt->count() > 0 || std::getenv("GFD_OUTPUT_FILE") != nullptr ||
                          config.gfd_output_file != kDefaultOutput;
  if ((flags.node_labels || flags.remove) && !file_asked) {
    sink.none = true;
    return sink;
  }
  if (flags.print || config.gfd_output_file.empty() || config.gfd_output_file == "-") {
    sink.to_stdout = true;
    return sink;
  }
  if (config.gfd_output_file != kDefaultOutput) {
    sink.path = config.gfd_output_file;  // HostFs::Local(): relative to the working directory
    sink.shown = sink.path;
    return sink;
  }
  if (simulated) {
    return absl::InvalidArgumentError(
        "a simulated node's labels do not belong in this host's node-feature-discovery directory: "
        "name a file with --output FILE, or use --print");
  }
  GPUNODE_ASSIGN_OR_RETURN(HostFs fs, HostFs::Open(global.host_root));
  sink.root = fs.root();
  sink.path = kDefaultOutput;
  sink.shown = fs.Resolve(kDefaultOutput);
  return sink;
}

// GFD's flags beyond gpunode's own options (NVIDIA/k8s-device-plugin v0.19.0,
// cmd/gpu-feature-discovery/main.go, internal/flags; docs/nvidia-flags.md).
void AddGfdFlags(CLI::App* cmd, NvidiaFlags& nv) {
  using K = NvidiaKind;
  nv.Add(cmd, {"--fail-on-init-error", {"GFD_FAIL_ON_INIT_ERROR", "FAIL_ON_INIT_ERROR"}, K::kBool,
               "true: exit when NVML cannot start; not given or false: label the node with what can be read "
               "(gpunode's default)"});
  nv.Add(cmd, {"--device-discovery-strategy", {"DEVICE_DISCOVERY_STRATEGY"}, K::kString,
               "auto, nvml, tegra or vfio; gpunode discovers GPUs through NVML"});
  nv.Add(cmd, {"--use-node-feature-api", {"GFD_USE_NODE_FEATURE_API", "USE_NODE_FEATURE_API"}, K::kBool,
               "publish NFD NodeFeature objects (GFD's default: true since v0.19.0)",
               "gpunode creates no NodeFeature objects: it writes the features file, which NFD's worker reads "
               "either way, or with --node-labels puts the labels straight onto the Node"});
  nv.Add(cmd, {"--driver-root-ctr-path,--container-driver-root", {"DRIVER_ROOT_CTR_PATH", "CONTAINER_DRIVER_ROOT"},
               K::kString, "where the driver root is mounted in this container",
               "gpunode reads the host's files through --host-root (GPUNODE_HOST_ROOT)"});
  const std::string no_nodefeature = "it is for NFD NodeFeature objects, which gpunode does not create";
  nv.Add(cmd, {"--namespace", {"NAMESPACE"}, K::kString, "namespace of the NodeFeature objects", no_nodefeature});
  nv.Add(cmd, {"--pod-name", {"POD_NAME"}, K::kString,
               "this Pod: with its DaemonSet, the owner of the NodeFeature objects", no_nodefeature});
  nv.Add(cmd, {"--kube-api-qps", {"KUBE_API_QPS"}, K::kFloat, "client rate limit",
               "gpunode's Kubernetes client sends a few requests per relabelling and has no client-side rate limit"});
  nv.Add(cmd, {"--kube-api-burst", {"KUBE_API_BURST"}, K::kInt, "client burst",
               "gpunode's Kubernetes client sends a few requests per relabelling and has no client-side rate limit"});
}

// Checks GFD's flags; the notes of those that do not apply.
StatusOr<std::vector<std::string>> ResolveGfdFlags(const NvidiaFlags& nv) {
  GPUNODE_ASSIGN_OR_RETURN(std::vector<std::string> notes, nv.Check());
  std::string source;
  if (auto d = nv.Value("device-discovery-strategy", &source)) {
    if (*d != "auto" && *d != "nvml" && *d != "tegra" && *d != "vfio") {
      return absl::InvalidArgumentError(
          absl::StrCat("invalid ", source, " \"", *d, "\": want auto, nvml, tegra or vfio"));
    }
    if (*d == "tegra" || *d == "vfio") {
      notes.push_back(nv.Note("device-discovery-strategy",
                              "gpunode discovers GPUs through NVML only (no Tegra or VFIO pass-through GPUs)"));
    }
  }
  return notes;
}

class Labeller {
 public:
  Labeller(const GlobalOptions& global, const LabelsFlags& flags, OutputFormat format, const NvidiaFlags& nv)
      : global_(global), flags_(flags), format_(format), nv_(nv) {}

  int Run() {
    auto notes = ResolveGfdFlags(nv_);
    if (!notes.ok()) {
      PrintError(notes.status());
      return kExitUsage;
    }
    for (const std::string& note : *notes) Warn(note);  // once: before the loop
    fail_on_init_error_ = nv_.Bool("fail-on-init-error").value_or(std::nullopt).value_or(false);
    const std::map<std::string, std::string> env = Environment();
    std::vector<std::string> config_warnings;
    auto config = ResolveConfig(flags_, env, &config_warnings);
    if (!config.ok()) {
      PrintError(config.status());
      return kExitUsage;
    }
    config_ = *config;
    for (const std::string& w : config_warnings) Warn(w);
    const bool once = flags_.print || config_->gfd_oneshot;
    // Loop mode: SIGTERM/SIGINT end the loop (the features file is removed, as GFD does), SIGHUP
    // reloads the configuration. Blocked here, before any thread starts, and taken by sigtimedwait.
    sigset_t signals;
    sigemptyset(&signals);
    if (!once) {
      sigaddset(&signals, SIGTERM);
      sigaddset(&signals, SIGINT);
      sigaddset(&signals, SIGHUP);
      pthread_sigmask(SIG_BLOCK, &signals, nullptr);
      // A shell starts background jobs with SIGINT ignored (nohup: SIGHUP); sigwait needs the
      // default disposition to see them. Blocked, they cannot kill us meanwhile.
      for (int s : {SIGTERM, SIGINT, SIGHUP}) ::signal(s, SIG_DFL);
    }
    if (flags_.remove) {  // the Node (and a named file) only: no GPU to probe
      auto sink = ResolveSink(global_, flags_, *config_, !global_.simulate.empty());
      if (!sink.ok()) {
        PrintError(sink.status());
        return kExitUsage;
      }
      sink_ = *sink;
      if (int rc = ConnectKube(); rc != kExitOk) return rc;
      return RemoveAll(/*uninstall=*/false);
    }
    auto session = NodeSession::Open(global_);
    if (!session.ok()) {
      PrintError(session.status());
      return kExitUsage;
    }
    session_ = std::move(*session);
    session_->probe_options().load_cuda = false;  // labels need NVML and the files, not libcuda
    session_->probe_options().query_topology = false;
    session_->probe_options().live_metrics = false;
    auto sink = ResolveSink(global_, flags_, *config_, session_->simulated().has_value());
    if (!sink.ok()) {
      PrintError(sink.status());
      return kExitUsage;
    }
    sink_ = *sink;
    if (flags_.node_labels) {
      if (int rc = ConnectKube(); rc != kExitOk) return rc;
    }
    if (auto data = compat::LoadBuiltin(compat::Sections::kCudaTables); data.ok()) {  // branches, Check()
      compat_ = std::move(*data);
    } else {
      Warn(absl::StrCat("compat data set: ", data.status().message(),
                        " (no gpunode.io/driver.cuda-* labels)"));
    }

    // The first round must succeed: a node that cannot be labelled at start, or an output that
    // cannot be written, is an error the user sees at once.
    if (int rc = Label(/*first=*/true); rc != kExitOk) return rc;
    if (once) return kExitOk;
    if (!sink_.to_stdout && !sink_.none)
      std::cerr << "wrote " << sink_.shown << "; relabelling every " << IntervalText() << "\n";
    if (kube_) std::cerr << "labelled Node " << node_ << "; relabelling every " << IntervalText() << "\n";

    while (true) {
      siginfo_t info;
      int sig;
      if (config_->gfd_sleep_interval_s < 0) {
        sig = sigwaitinfo(&signals, &info);
      } else {
        timespec timeout{config_->gfd_sleep_interval_s, 0};
        sig = sigtimedwait(&signals, &info, &timeout);
      }
      if (sig < 0) {
        if (errno == EAGAIN || errno == EINTR) {
          Label(/*first=*/false);
          continue;
        }
        PrintError(ErrnoToStatus(errno, "wait for", "signals"));
        Stop();
        return kExitFailed;
      }
      if (sig == SIGHUP) {
        std::vector<std::string> warnings;
        auto reloaded = ResolveConfig(flags_, Environment(), &warnings);
        if (!reloaded.ok()) {
          Warn(absl::StrCat("SIGHUP: keeping the previous configuration: ",
                            reloaded.status().message()));
        } else {
          for (const std::string& w : warnings) Warn(w);
          reloaded->gfd_output_file = config_->gfd_output_file;  // the file stays where it is
          config_ = *reloaded;
          std::cerr << "SIGHUP: configuration reloaded\n";
        }
        Label(/*first=*/false);
        continue;
      }
      std::cerr << "received " << strsignal(sig) << "\n";
      Stop();
      return kExitOk;
    }
  }

 private:
  std::string IntervalText() const {
    return config_->gfd_sleep_interval_s < 0 ? std::string("(never: infinite)")
                                             : absl::StrCat(config_->gfd_sleep_interval_s, "s");
  }

  // Each distinct warning once per process, so that a loop does not repeat itself every minute.
  void Warn(const std::string& w) {
    if (warned_.insert(w).second) std::cerr << "warning: " << w << "\n";
  }

  // One round: probe, build, print or write. In the loop, failures are warnings and the previous
  // file stays; a GPU that disappears changes the labels, nothing else.
  int Label(bool first) {
    auto inv = session_->Inventory();
    if (!inv.ok()) {
      if (first) {
        PrintError(inv.status());
        return kExitFailed;
      }
      Warn(absl::StrCat("probe failed, labels not refreshed: ", inv.status().message()));
      return kExitFailed;
    }
    if (first && fail_on_init_error_ && !inv->driver.status.ok()) {
      PrintError(absl::StrCat("NVML: ", inv->driver.status.message(),
                              " (--fail-on-init-error: run `gpunode doctor` to see which layer is broken)"));
      return kExitFailed;
    }
    labels::LabelOptions options;
    if (!config_->gfd_no_timestamp) options.timestamp = static_cast<int64_t>(std::time(nullptr));
    std::string machine_warning;
    options.machine_type =
        labels::MachineType(session_->fs(), config_->machine_type_file, &machine_warning);
    if (!machine_warning.empty()) Warn(machine_warning);
    std::string vgpu_warning;
    options.vgpu = labels::ReadVgpu(session_->fs(), &vgpu_warning);
    if (!vgpu_warning.empty()) Warn(vgpu_warning);
    options.compat = compat_ ? &*compat_ : nullptr;
    const labels::LabelSet set = labels::BuildLabels(*inv, *config_, options);
    for (const std::string& w : set.warnings) Warn(w);

    if (kube_) {
      std::map<std::string, std::string> node_labels = set.labels;
      node_labels.erase("nvidia.com/gfd.timestamp");  // a Node write a minute for nothing
      auto change = kube::ApplyNodeLabels(*kube_, node_, node_labels);
      if (!change.ok()) {
        if (first) {
          PrintError(change.status());
          return kExitFailed;
        }
        Warn(absl::StrCat("Node labels not refreshed: ", change.status().message()));
      } else if (!change->ignored.empty() && first) {
        Warn(absl::StrCat("left alone, not gpunode's (outside nvidia.com/ and gpunode.io/): ",
                          absl::StrJoin(change->ignored, ", ")));
      }
      if (change.ok() && change->patched) {
        std::cerr << "Node " << node_ << ": " << change->set.size() << " labels set";
        if (!change->removed.empty()) std::cerr << ", removed " << absl::StrJoin(change->removed, " ");
        std::cerr << "\n";
      }
      if (sink_.none) return change.ok() ? kExitOk : kExitFailed;
    }
    if (sink_.to_stdout) {
      if (format_ == OutputFormat::kTable) {
        std::cout << labels::RenderFeaturesFile(set.labels) << std::flush;
      } else {
        PrintDocument(labels::LabelsDocument(*inv, set), format_);
      }
      return kExitOk;
    }
    Status st = WriteSink(labels::RenderFeaturesFile(set.labels));
    if (!st.ok()) {
      if (first) {
        PrintError(st);
        return kExitUsage;
      }
      Warn(absl::StrCat("labels not refreshed: ", st.message()));
      return kExitFailed;
    }
    written_ = true;
    if (first && (flags_.print || config_->gfd_oneshot)) {
      std::cerr << "wrote " << sink_.shown << ": " << set.labels.size() << " labels\n";
    }
    return kExitOk;
  }

  Status WriteSink(const std::string& text) const {
    GPUNODE_ASSIGN_OR_RETURN(HostFs fs, HostFs::Open(sink_.root));
    WriteOptions w;
    w.mode = 0644;
    w.keep_mode = false;
    return fs.WriteFileAtomically(sink_.path, text, w).status();
  }

  int ConnectKube() {
    node_ = flags_.node_name;
    if (node_.empty()) {
      if (const char* n = std::getenv("NODE_NAME")) node_ = n;
    }
    if (node_.empty()) {
      PrintError("--node-labels needs the Node's name: --node-name NAME or NODE_NAME (in a pod, from the "
                 "downward API: fieldRef spec.nodeName)");
      return kExitUsage;
    }
    if (!flags_.daemonset.empty()) {
      if (Status st = kube::SplitNamespaced(flags_.daemonset, "--daemonset", &ds_ns_, &ds_name_); !st.ok()) {
        PrintError(st);
        return kExitUsage;
      }
    }
    auto conn = kube::ResolveConnection(flags_.kubeconfig);
    if (!conn.ok()) {
      PrintError(conn.status());
      return kExitUsage;
    }
    kube_ = std::make_unique<kube::Client>(*conn);
    return kExitOk;
  }

  // --remove, or a stop that is an uninstall: the Node labels of gpunode, then the files.
  int RemoveAll(bool uninstall) {
    int rc = kExitOk;
    auto change = kube::RemoveNodeLabels(*kube_, node_);
    if (!change.ok()) {
      PrintError(change.status());
      rc = kExitFailed;
    } else {
      std::cerr << "Node " << node_ << ": removed " << change->removed.size() << " gpunode labels\n";
    }
    if (uninstall) {
      for (const std::string& path : flags_.remove_on_uninstall) {
        Status st = HostFs::Local().RemoveFile(path);
        if (!st.ok() && !absl::IsNotFound(st)) {
          PrintError(st);
          rc = kExitFailed;
        } else if (st.ok()) {
          std::cerr << "removed " << path << "\n";
        }
      }
    }
    if (flags_.remove) RemoveOutputFile();
    return rc;
  }

  // SIGTERM/SIGINT: the features file goes (as GFD does). The Node labels stay unless this stop
  // is an uninstall (the DaemonSet named by --daemonset is being deleted): a pod restart or an
  // upgrade must not take nvidia.com/gpu.present away, or the DaemonSet's own affinity would
  // keep the new pod off the node (NFD's "flapping" labels).
  void Stop() {
    RemoveOutput();
    if (!kube_ || ds_name_.empty()) return;
    auto deleting = kube::DaemonSetDeleting(*kube_, ds_ns_, ds_name_);
    if (!deleting.ok()) {
      PrintError(absl::StrCat("cannot tell whether this stop is an uninstall, Node labels kept: ",
                              deleting.status().message()));
      return;
    }
    if (!*deleting) {
      std::cerr << "DaemonSet " << flags_.daemonset << " stays: Node labels kept\n";
      return;
    }
    std::cerr << "DaemonSet " << flags_.daemonset << " is being deleted: removing what gpunode put on the node\n";
    RemoveAll(/*uninstall=*/true);
  }

  void RemoveOutput() {
    if (written_) RemoveOutputFile();
  }

  void RemoveOutputFile() {
    if (sink_.to_stdout || sink_.none) return;
    auto fs = HostFs::Open(sink_.root);
    if (Status st = fs.ok() ? fs->RemoveFile(sink_.path) : fs.status(); !st.ok()) {
      PrintError(st);
    }
  }

  const GlobalOptions& global_;
  const LabelsFlags& flags_;
  OutputFormat format_;
  const NvidiaFlags& nv_;
  bool fail_on_init_error_ = false;  // GFD's --fail-on-init-error given true
  std::optional<devices::PluginConfig> config_;
  std::unique_ptr<NodeSession> session_;
  Sink sink_;
  std::optional<compat::CompatData> compat_;
  std::set<std::string> warned_;
  bool written_ = false;
  std::unique_ptr<kube::Client> kube_;
  std::string node_;
  std::string ds_ns_, ds_name_;
};

int RunLabels(const GlobalOptions& global, const LabelsFlags& flags, const NvidiaFlags& nv) {
  auto format = ParseOutputFormat(global.output);
  if (!format.ok()) {
    PrintError(format.status());
    return kExitUsage;
  }
  if (*format != OutputFormat::kTable && !flags.print) {
    PrintError("-o json/yaml applies to --print; the features file is always key=value lines");
    return kExitUsage;
  }
  if (flags.print && (flags.node_labels || flags.remove)) {
    PrintError("--print writes to stdout; --node-labels and --remove work on the Node");
    return kExitUsage;
  }
  if ((!flags.daemonset.empty() || !flags.remove_on_uninstall.empty()) && !flags.node_labels) {
    PrintError("--daemonset and --remove-on-uninstall go with --node-labels");
    return kExitUsage;
  }
  if (flags.print && flags.output_opt->count() > 0) {
    PrintError("--print and --output cannot be combined: --print writes to stdout");
    return kExitUsage;
  }
  return Labeller(global, flags, *format, nv).Run();
}

}  // namespace

void AddLabelsCommand(CLI::App& app, GlobalOptions& global, int* exit_code) {
  auto flags = std::make_shared<LabelsFlags>();
  auto nv = std::make_shared<NvidiaFlags>("gpu-feature-discovery");
  CLI::App* cmd = app.add_subcommand("labels",
                                     "Node labels of gpu-feature-discovery (nvidia.com/...) and "
                                     "gpunode (gpunode.io/...) (docs/labels.md)");
  cmd->add_flag("--print", flags->print,
                "Print the labels on stdout once (key=value, or -o json|yaml) and exit");
  flags->output_opt = cmd->add_option("--output,--output-file", flags->output,
                                      "Features file to write atomically (default: "
                                      "/etc/kubernetes/node-feature-discovery/features.d/gpunode "
                                      "under --host-root; '-' for stdout) [env GFD_OUTPUT_FILE]");
  flags->oneshot_opt =
      cmd->add_flag("--oneshot", flags->oneshot, "Label once and exit [env GFD_ONESHOT]");
  flags->sleep_opt =
      cmd->add_option("--sleep-interval", flags->sleep_interval,
                      "Time between relabellings: 60s, 5m, 1h30m or infinite (default 60s) "
                      "[env GFD_SLEEP_INTERVAL]");
  flags->no_timestamp_opt =
      cmd->add_flag("--no-timestamp", flags->no_timestamp,
                    "Leave out nvidia.com/gfd.timestamp [env GFD_NO_TIMESTAMP]");
  flags->config_opt = cmd->add_option("--config-file", flags->config_file,
                                      "Device plugin / GFD config file (version v1, YAML or JSON) "
                                      "[env GFD_CONFIG_FILE, CONFIG_FILE]");
  flags->mig_opt =
      cmd->add_option("--mig-strategy", flags->mig_strategy,
                      "none, single or mixed (default none) [env GFD_MIG_STRATEGY, MIG_STRATEGY]");
  flags->machine_opt =
      cmd->add_option("--machine-type-file", flags->machine_type_file,
                      "Host file with the machine type (default /sys/class/dmi/id/product_name) "
                      "[env GFD_MACHINE_TYPE_FILE]");
  cmd->add_flag("--node-labels", flags->node_labels,
                "Put the labels straight onto this node's Node object through the Kubernetes API "
                "(no NFD needed); the keys gpunode set are listed in the annotation "
                "gpunode.io/managed-labels, and only those are ever changed or removed");
  cmd->add_option("--node-name", flags->node_name, "The Node to label (default: $NODE_NAME)");
  AddKubeconfigOption(cmd, &flags->kubeconfig);
  cmd->add_option("--daemonset", flags->daemonset,
                  "NAMESPACE/NAME of the DaemonSet this runs in: a stop while it is being deleted "
                  "(helm uninstall) removes the Node labels and the --remove-on-uninstall files; "
                  "any other stop (pod restart, upgrade) keeps them");
  cmd->add_option("--remove-on-uninstall", flags->remove_on_uninstall,
                  "File to remove at uninstall (repeatable), e.g. the CDI spec");
  cmd->add_flag("--remove", flags->remove,
                "Remove the labels gpunode put on the Node (with --output: also that file) and exit");
  AddGfdFlags(cmd, *nv);
  cmd->footer(
      "Every flag and variable of gpu-feature-discovery v0.17/v0.18 is accepted; one gpunode has nothing\n"
      "to do with is logged once as \"does not apply\" and ignored (docs/nvidia-flags.md). GFD's -o is\n"
      "--output-file there; here -o stays gpunode's output format: write --output-file FILE.\n"
      "Examples:\n"
      "  gpunode labels --print                  the labels of this node on stdout\n"
      "  gpunode labels --node-labels --node-name gpu-1 --kubeconfig ~/.kube/config --oneshot\n"
      "  gpunode --simulate dgx-h200 labels --print --no-timestamp\n"
      "  gpunode labels --oneshot                write the features file once\n"
      "  gpunode labels --sleep-interval 5m      relabel every 5 minutes; SIGTERM removes the "
      "file");
  cmd->callback([&global, flags, nv, exit_code] { *exit_code = RunLabels(global, *flags, *nv); });
}

}  // namespace gpunode::cli
