// gpunode labels: gpu-feature-discovery's node labels (and gpunode's own) for this node, printed
// or written as node-feature-discovery's features file, once or every interval (docs/labels.md).
#include <climits>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "src/cli/common.h"
#include "src/compat/dataset.h"
#include "src/container/cdi.h"
#include "src/plugin/config.h"
#include "src/plugin/labels.h"

extern char** environ;

namespace gpunode::cli {
namespace {

constexpr char kDefaultOutput[] = "/etc/kubernetes/node-feature-discovery/features.d/gpunode";

struct LabelsFlags {
  bool print = false;
  std::string output;
  bool oneshot = false;
  std::string sleep_interval;
  bool no_timestamp = false;
  std::string config_file;
  std::string mig_strategy;
  std::string machine_type_file;
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

// Go's strconv.ParseBool, as GFD reads its boolean environment variables.
StatusOr<bool> ParseGoBool(const std::string& name, const std::string& text) {
  for (const char* t : {"1", "t", "T", "TRUE", "true", "True"}) {
    if (text == t) return true;
  }
  for (const char* f : {"0", "f", "F", "FALSE", "false", "False"}) {
    if (text == f) return false;
  }
  return absl::InvalidArgumentError(
      absl::StrCat(name, "=\"", text, "\": not a boolean (true or false)"));
}

StatusOr<std::string> ReadExplicitFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return ErrnoToStatus(errno, "read", path);
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return ErrnoToStatus(errno ? errno : EIO, "read", path);
  return text.str();
}

// Where the labels go: stdout, or a file.
struct Sink {
  bool to_stdout = false;
  std::string root = "/";  // the host root for the default file, "/" for a file the user names
  std::string path;        // a path below `root`
  std::string shown;       // the path on this machine, for messages
};

// The configuration with GFD's precedence: flag, then environment (GFD_* before the plugin's
// names), then the config file, then the default.
StatusOr<plugin::PluginConfig> ResolveConfig(const LabelsFlags& flags,
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
  plugin::PluginConfig config;
  if (!config_file.empty()) {
    GPUNODE_ASSIGN_OR_RETURN(std::string text, ReadExplicitFile(config_file));
    GPUNODE_ASSIGN_OR_RETURN(config, plugin::ParseConfig(text, config_file));
    for (const std::string& w : config.warnings)
      warnings->push_back(absl::StrCat(config_file, ": ", w));
  }
  GPUNODE_RETURN_IF_ERROR(plugin::ApplyEnvironment(env, &config));
  if (const std::string* v = Lookup(env, "GFD_MIG_STRATEGY")) {
    auto s = plugin::ParseMigStrategy(*v);
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
    auto s = plugin::ParseSleepInterval(*v);
    if (!s.ok())
      return absl::InvalidArgumentError(absl::StrCat("GFD_SLEEP_INTERVAL: ", s.status().message()));
    config.gfd_sleep_interval_s = *s;
  }
  if (const std::string* v = Lookup(env, "GFD_OUTPUT_FILE")) config.gfd_output_file = *v;
  if (const std::string* v = Lookup(env, "GFD_MACHINE_TYPE_FILE")) config.machine_type_file = *v;

  if (flags.mig_opt->count() > 0) {
    auto s = plugin::ParseMigStrategy(flags.mig_strategy);
    if (!s.ok())
      return absl::InvalidArgumentError(absl::StrCat("--mig-strategy: ", s.status().message()));
    config.mig_strategy = *s;
  }
  if (flags.oneshot_opt->count() > 0) config.gfd_oneshot = flags.oneshot;
  if (flags.no_timestamp_opt->count() > 0) config.gfd_no_timestamp = flags.no_timestamp;
  if (flags.sleep_opt->count() > 0) {
    auto s = plugin::ParseSleepInterval(flags.sleep_interval);
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
                           const plugin::PluginConfig& config, bool simulated) {
  Sink sink;
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

// The DMI product name (GFD's nvidia.com/gpu.machine), through the host root.
std::string MachineType(const HostFs& fs, const std::string& path, std::string* warning) {
  if (path.empty()) return "unknown";
  auto text = fs.ReadFile(path, 4096);
  if (!text.ok()) {
    *warning = absl::StrCat("machine type: ", text.status().message(),
                            " (nvidia.com/gpu.machine=unknown)");
    return "unknown";
  }
  std::string t(absl::StripAsciiWhitespace(*text));
  return t.empty() ? "unknown" : t;
}

nlohmann::ordered_json LabelsDocument(const NodeInventory& inv, const plugin::LabelSet& set) {
  nlohmann::ordered_json labels = nlohmann::ordered_json::object();
  for (const auto& [k, v] : set.labels) labels[k] = v;
  nlohmann::ordered_json metadata = {{"hostname", inv.hostname}};
  if (inv.simulated_profile) metadata["simulated"] = *inv.simulated_profile;
  metadata["gpunodeVersion"] = GPUNODE_VERSION;
  return {{"apiVersion", "gpunode/v1"},
          {"kind", "NodeLabels"},
          {"metadata", metadata},
          {"labels", labels},
          {"warnings", set.warnings}};
}

class Labeller {
 public:
  Labeller(const GlobalOptions& global, const LabelsFlags& flags, OutputFormat format)
      : global_(global), flags_(flags), format_(format) {}

  int Run() {
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
    auto session = NodeSession::Open(global_);
    if (!session.ok()) {
      PrintError(session.status());
      return kExitUsage;
    }
    session_ = std::move(*session);
    session_->probe_options().init_cuda =
        false;  // labels need NVML and the files, not a CUDA context
    session_->probe_options().query_topology = false;
    session_->probe_options().live_metrics = false;
    auto sink = ResolveSink(global_, flags_, *config_, session_->simulated().has_value());
    if (!sink.ok()) {
      PrintError(sink.status());
      return kExitUsage;
    }
    sink_ = *sink;
    if (auto data = compat::LoadBuiltin(); data.ok()) {
      compat_ = std::move(*data);
    } else {
      Warn(absl::StrCat("compat data set: ", data.status().message(),
                        " (no gpunode.io/driver.cuda-* labels)"));
    }

    // The first round must succeed: a node that cannot be labelled at start, or an output that
    // cannot be written, is an error the user sees at once.
    if (int rc = Label(/*first=*/true); rc != kExitOk) return rc;
    if (once) return kExitOk;
    if (!sink_.to_stdout)
      std::cerr << "wrote " << sink_.shown << "; relabelling every " << IntervalText() << "\n";

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
        RemoveOutput();
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
      std::cerr << "received " << strsignal(sig) << ", removing the labels and exiting\n";
      RemoveOutput();
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
    plugin::LabelOptions options;
    if (!config_->gfd_no_timestamp) options.timestamp = static_cast<int64_t>(std::time(nullptr));
    std::string machine_warning;
    options.machine_type =
        MachineType(session_->fs(), config_->machine_type_file, &machine_warning);
    if (!machine_warning.empty()) Warn(machine_warning);
    options.compat = compat_ ? &*compat_ : nullptr;
    const plugin::LabelSet set = plugin::BuildLabels(*inv, *config_, options);
    for (const std::string& w : set.warnings) Warn(w);

    if (sink_.to_stdout) {
      if (format_ == OutputFormat::kTable) {
        std::cout << plugin::RenderFeaturesFile(set.labels) << std::flush;
      } else {
        PrintDocument(LabelsDocument(*inv, set), format_);
      }
      return kExitOk;
    }
    Status st = WriteSink(plugin::RenderFeaturesFile(set.labels));
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

  void RemoveOutput() {
    if (sink_.to_stdout || !written_) return;
    auto fs = HostFs::Open(sink_.root);
    if (Status st = fs.ok() ? fs->RemoveFile(sink_.path) : fs.status(); !st.ok()) {
      PrintError(st);
    }
  }

  const GlobalOptions& global_;
  const LabelsFlags& flags_;
  OutputFormat format_;
  std::optional<plugin::PluginConfig> config_;
  std::unique_ptr<NodeSession> session_;
  Sink sink_;
  std::optional<compat::CompatData> compat_;
  std::set<std::string> warned_;
  bool written_ = false;
};

int RunLabels(const GlobalOptions& global, const LabelsFlags& flags) {
  auto format = ParseOutputFormat(global.output);
  if (!format.ok()) {
    PrintError(format.status());
    return kExitUsage;
  }
  if (*format != OutputFormat::kTable && !flags.print) {
    PrintError("-o json/yaml applies to --print; the features file is always key=value lines");
    return kExitUsage;
  }
  if (flags.print && flags.output_opt->count() > 0) {
    PrintError("--print and --output cannot be combined: --print writes to stdout");
    return kExitUsage;
  }
  return Labeller(global, flags, *format).Run();
}

}  // namespace

void AddLabelsCommand(CLI::App& app, GlobalOptions& global, int* exit_code) {
  auto flags = std::make_shared<LabelsFlags>();
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
  cmd->footer(
      "Examples:\n"
      "  gpunode labels --print                  the labels of this node on stdout\n"
      "  gpunode --simulate dgx-h200 labels --print --no-timestamp\n"
      "  gpunode labels --oneshot                write the features file once\n"
      "  gpunode labels --sleep-interval 5m      relabel every 5 minutes; SIGTERM removes the "
      "file");
  cmd->callback([&global, flags, exit_code] { *exit_code = RunLabels(global, *flags); });
}

}  // namespace gpunode::cli
