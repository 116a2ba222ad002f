// gpunode agent: the node's GPU services in one process (src/agent, docs/agent.md).
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>

#include <csignal>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/agent/components.h"
#include "src/agent/config.h"
#include "src/agent/events.h"
#include "src/agent/node_context.h"
#include "src/agent/uninstall.h"
#include "src/cli/common.h"
#include "src/exporter/http_server.h"
#include "src/exporter/publish.h"
#include "src/kube/node.h"
#include "src/lifecycle/harness.h"

namespace gpunode::cli {
namespace {

struct AgentFlags {
  std::string config;
  std::string node_name;
  std::string kubeconfig;
  std::string log_format;
  bool print_config = false;
};

std::optional<exporter::RouteResponse> HealthRoutes(const lifecycle::Harness& h, std::string_view path) {
  auto one = [&](const std::string& name, bool ready) -> std::optional<exporter::RouteResponse> {
    for (const lifecycle::ComponentInfo& i : h.Components()) {
      if (i.name != name) continue;
      const bool ok = !i.enabled || (ready ? i.up : i.state != lifecycle::ComponentState::kBackoff);
      return exporter::RouteResponse{ok ? 200 : 503, "text/plain; charset=utf-8",
                                     absl::StrCat(name, " ", i.enabled ? lifecycle::ComponentStateName(i.state) : "disabled",
                                                  i.off_why.empty() ? "" : absl::StrCat(": ", i.off_why),
                                                  i.last_error.empty() ? "" : absl::StrCat(" (", i.last_error, ")"), "\n")};
    }
    return exporter::RouteResponse{404, "text/plain; charset=utf-8", absl::StrCat("no component ", name, "\n")};
  };
  for (const char* kind : {"/healthz", "/readyz"}) {
    const bool ready = std::string_view(kind) == "/readyz";
    if (path == kind) {
      // /readyz: every switched-on component is up. /healthz: the agent answers (the liveness probe
      // must not kill the whole pod for one component: the harness runs a failing one again
      // itself); each component's state is listed, and /healthz/<component> fails in its backoff.
      bool ok = true;
      std::string body;
      for (const lifecycle::ComponentInfo& i : h.Components()) {
        const bool good = !i.enabled || (ready ? i.up : i.state != lifecycle::ComponentState::kBackoff);
        if (ready) ok = ok && good;
        absl::StrAppend(&body, good ? "[+] " : "[-] ", i.name, " ",
                        i.enabled ? lifecycle::ComponentStateName(i.state) : "disabled",
                        i.off_why.empty() ? "" : absl::StrCat(" (", i.off_why, ")"),
                        i.last_error.empty() || good ? "" : absl::StrCat(": ", i.last_error), "\n");
      }
      absl::StrAppend(&body, ready ? "readyz " : "healthz ", ok ? "ok" : "failed", "\n");
      return exporter::RouteResponse{ok ? 200 : 503, "text/plain; charset=utf-8", body};
    }
    const std::string prefix = std::string(kind) + "/";
    if (path.substr(0, prefix.size()) == prefix) return one(std::string(path.substr(prefix.size())), ready);
  }
  if (path == "/metrics") {
    return exporter::RouteResponse{200, "text/plain; version=0.0.4; charset=utf-8", h.MetricsText()};
  }
  return std::nullopt;
}

// The components by name, built over `c` (which must outlive them).
std::map<std::string, std::unique_ptr<lifecycle::Component>> BuildComponents(
    agent::NodeContext& ctx, const agent::AgentConfig& c, lifecycle::Log& log, lifecycle::Harness& harness,
    const std::function<std::string()>& metrics,
    const std::function<std::optional<exporter::RouteResponse>(std::string_view)>& exporter_routes) {
  std::map<std::string, std::unique_ptr<lifecycle::Component>> m;
  m["cdi"] = agent::MakeOneShot("cdi", ctx, c.cdi, log);
  m["runtime"] = agent::MakeOneShot("runtime", ctx, c.runtime, log);
  // A new driver: the CDI spec names its files, and the Node's labels its version (the
  // driver-upgrade controller's gate reads them with GpuStackReady).
  m["validator"] = agent::MakeValidator(ctx, c, log, [&harness, &c] {
    if (c.cdi.enabled) harness.Restart("cdi");
    if (c.labels.enabled) harness.Restart("labels");
  });
  m["plugin"] = agent::MakePlugin(ctx, c, log);
  m["dra"] = agent::MakeDra(ctx, c, log);
  m["labels"] = agent::MakeLabels(ctx, c, log);
  m["exporter"] = agent::MakeExporter(ctx, c, log, metrics, exporter_routes);
  return m;
}

// "; policy file F (origin)" when one was applied, "; policy file F: none yet" when it is not there.
std::string PolicyNote(const agent::AgentConfig& config) {
  if (config.policy_file.empty()) return "";
  if (config.policy_source.empty()) return absl::StrCat("; policy file ", config.policy_file, ": none yet");
  return absl::StrCat("; policy file ", config.policy_source,
                      config.policy_origin.empty() ? "" : absl::StrCat(" (", config.policy_origin, ")"));
}

// The running configuration and what a reload does with a new one.
class Reloader {
 public:
  Reloader(agent::AgentConfig config, agent::NodeContext& ctx, lifecycle::Log& log, lifecycle::Harness& harness,
           agent::NodeWatcher* watcher, agent::EventPoster* events, std::function<std::string()> metrics,
           std::function<std::optional<exporter::RouteResponse>(std::string_view)> exporter_routes)
      : current_(std::make_unique<agent::AgentConfig>(std::move(config))),
        ctx_(ctx),
        log_(log),
        harness_(harness),
        watcher_(watcher),
        events_(events),
        metrics_(std::move(metrics)),
        exporter_routes_(std::move(exporter_routes)) {}

  const agent::AgentConfig& current() const { return *current_; }
  void set_watcher(agent::NodeWatcher* w) { watcher_ = w; }

  void AddComponents() {
    auto m = BuildComponents(ctx_, *current_, log_, harness_, metrics_, exporter_routes_);
    for (const std::string& name : agent::ComponentNames()) {
      harness_.Add(std::move(m[name]), agent::ComponentEnabled(*current_, name));
    }
  }

  // Reads `path` again. A file that does not parse, or that changes what is fixed while the agent
  // runs (CheckReloadable), keeps the running configuration; either way an Event on the Node says
  // what happened.
  void Reload(const std::string& path, const char* trigger) {
    auto next = agent::LoadAgentConfig(path);
    Status ok = next.ok() ? agent::CheckReloadable(*current_, *next) : next.status();
    if (!ok.ok()) {
      log_.Error("agent", absl::StrCat("reload (", trigger, ") refused: ", ok.message(),
                                       "; keeping the running configuration"));
      Event("Warning", "AgentConfigRefused",
            absl::StrCat("gpunode agent kept its running configuration: ", ok.message()));
      return;
    }
    // Read at start only.
    next->node_name = current_->node_name;
    next->kubernetes = current_->kubernetes;
    next->log_format = current_->log_format;
    next->health_listen = current_->health_listen;
    next->publish_dir = current_->publish_dir;
    next->stop_timeout = current_->stop_timeout;
    auto fresh = std::make_unique<agent::AgentConfig>(*next);
    const auto before = agent::ConfigToJson(*current_);
    const auto after = agent::ConfigToJson(*fresh);
    auto m = BuildComponents(ctx_, *fresh, log_, harness_, metrics_, exporter_routes_);
    std::vector<std::string> changed;
    // The exporter attributes GPUs from claims of dra.driverName too.
    const bool dra_driver_changed = before["dra"]["driverName"] != after["dra"]["driverName"];
    for (const std::string& name : agent::ComponentNames()) {
      if (before[name] == after[name] && !(name == "exporter" && dra_driver_changed)) continue;
      changed.push_back(name);
      harness_.Replace(std::move(m[name]));
      // The config's switch only: a Node label's veto (OffReason::kNodeLabel) stays.
      harness_.SetEnabled(name, agent::ComponentEnabled(*fresh, name));
    }
    if (watcher_ != nullptr && (before["mig"] != after["mig"] || before["plugin"] != after["plugin"])) {
      watcher_->Reconfigure(*fresh);
      harness_.Restart("node");  // reads the Node again with the new settings
    }
    const std::string what = absl::StrCat(changed.size(), " component(s) with new settings",
                                          changed.empty() ? "" : absl::StrCat(" (", absl::StrJoin(changed, ", "), ")"));
    log_.Info("agent", absl::StrCat(trigger, ": ", what, PolicyNote(*fresh)));
    Event("Normal", "AgentConfigReloaded", absl::StrCat("gpunode agent reloaded ", path, PolicyNote(*fresh), ": ", what));
    keep_.push_back(std::move(current_));  // components built over it may still run
    current_ = std::move(fresh);
  }

 private:
  void Event(const std::string& type, const std::string& reason, const std::string& message) {
    if (events_ != nullptr) events_->Post(type, reason, message);
  }

  std::unique_ptr<agent::AgentConfig> current_;
  std::vector<std::unique_ptr<agent::AgentConfig>> keep_;
  agent::NodeContext& ctx_;
  lifecycle::Log& log_;
  lifecycle::Harness& harness_;
  agent::NodeWatcher* watcher_;
  agent::EventPoster* events_;
  std::function<std::string()> metrics_;
  std::function<std::optional<exporter::RouteResponse>(std::string_view)> exporter_routes_;
};

// publishDir: the health port's answers (HealthRoutes for every component) written into the folder
// every second for the unprivileged front (`gpunode exporter --from-dir`); Start() it after the harness.
StatusOr<std::unique_ptr<exporter::RoutesPublisher>> PublishHealth(const std::string& dir, const lifecycle::Harness& h,
                                                                   lifecycle::Log& log) {
  GPUNODE_ASSIGN_OR_RETURN(exporter::PublishDir folder, exporter::PublishDir::Open(dir));
  auto paths = [&h] {
    std::vector<std::string> names;
    for (const lifecycle::ComponentInfo& i : h.Components()) names.push_back(i.name);
    return exporter::AgentHealthPaths(names);
  };
  auto routes = [&h](std::string_view path) { return HealthRoutes(h, path); };
  exporter::PublisherOptions o;
  o.log = log.For("agent");
  return std::make_unique<exporter::RoutesPublisher>(paths, routes, std::move(folder), std::move(o));
}

// The config file with the command line (and NODE_NAME) over it.
StatusOr<agent::AgentConfig> AgentConfigWithFlags(const AgentFlags& flags) {
  GPUNODE_ASSIGN_OR_RETURN(agent::AgentConfig config, agent::LoadAgentConfig(flags.config));
  if (!flags.log_format.empty()) {
    if (flags.log_format != "text" && flags.log_format != "json") {
      return absl::InvalidArgumentError(absl::StrCat("--log-format \"", flags.log_format, "\": want text or json"));
    }
    config.log_format = flags.log_format;
  }
  if (!flags.node_name.empty()) config.node_name = flags.node_name;
  if (config.node_name.empty()) {
    if (const char* n = std::getenv("NODE_NAME"); n != nullptr) config.node_name = n;
  }
  if (!flags.kubeconfig.empty()) config.kubernetes.kubeconfig = flags.kubeconfig;
  return config;
}

// Signals are taken by sigwait on the main thread: blocked before any thread starts (threads
// inherit the mask; children get a clean one, see src/base/subprocess.h).
sigset_t BlockStopAndReloadSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  for (int s : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&signals, s);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  return signals;
}

// The node the agent runs on: its session (real or simulated), the API server, the shared context.
struct AgentNode {
  std::unique_ptr<NodeSession> session;
  std::optional<kube::Connection> conn;
  std::unique_ptr<agent::NodeContext> ctx;
};

// The probe settings of a long-running process, and the command line its children (doctor, cdi
// generate) use to reach the same node.
agent::NodeContextOptions NodeContextFor(const GlobalOptions& global, const NodeSession& session,
                                         const agent::AgentConfig& config) {
  agent::NodeContextOptions o{.fs = session.fs()};
  o.probe = session.probe_options();
  o.probe.load_cuda = false;  // the validator's CUDA check runs in a child process
  o.probe.query_topology = true;
  o.probe.live_metrics = false;
  o.node_name = config.node_name;
  o.gate_pending = config.validator.enabled && config.validator.gate;
  o.self_args = {SelfPath(), "--host-root", session.fs().root()};
  if (session.simulated()) {
    // Children reach the same simulated node: its host root, library and profile file.
    o.self_args.insert(o.self_args.end(), {"--nvml-library", o.probe.nvml_library, "--cuda-library", o.probe.cuda_library});
    ::unsetenv("GPUNODE_SIMULATE");
  } else {
    if (!global.nvml_library.empty()) o.self_args.insert(o.self_args.end(), {"--nvml-library", global.nvml_library});
    if (!global.cuda_library.empty()) o.self_args.insert(o.self_args.end(), {"--cuda-library", global.cuda_library});
  }
  return o;
}

StatusOr<AgentNode> OpenAgentNode(const GlobalOptions& global, const agent::AgentConfig& config, lifecycle::Log& log) {
  AgentNode node;
  GPUNODE_ASSIGN_OR_RETURN(node.session, NodeSession::Open(global));
  agent::NodeContextOptions o = NodeContextFor(global, *node.session, config);
  if (config.kubernetes.enabled && config.node_name.empty()) {
    log.Warn("agent", "no node name (nodeName, --node-name or NODE_NAME): no Node labels, condition, events or "
                      "per-node settings");
  } else if (config.kubernetes.enabled) {
    auto resolved = kube::ResolveConnection(config.kubernetes.kubeconfig);
    if (!resolved.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("kubernetes: ", resolved.status().message(),
                                                     " (kubernetes.enabled: false runs the agent without the API)"));
    }
    node.conn = *resolved;
    o.kube = std::make_unique<kube::Client>(*node.conn);
  }
  node.ctx = std::make_unique<agent::NodeContext>(std::move(o));
  return node;
}

// What runs in the harness besides the components: the Node watch (with its start barrier), the
// uninstall's DaemonSet watch, the Events poster, and the reloader that owns the configuration.
struct AgentParts {
  std::unique_ptr<agent::EventPoster> events;
  std::unique_ptr<agent::Uninstaller> uninstaller;
  std::unique_ptr<Reloader> reloader;
};

AgentParts AddAgentParts(const agent::AgentConfig& config, const AgentNode& node, lifecycle::Log& log,
                         lifecycle::Harness& harness) {
  AgentParts parts;
  auto metrics = [&harness] { return harness.MetricsText(); };
  // On the exporter's port: /healthz and /readyz; its /metrics stays the exporter's page (which
  // carries the component metrics through `metrics`).
  auto exporter_routes = [&harness](std::string_view path) -> std::optional<exporter::RouteResponse> {
    if (path == "/metrics") return std::nullopt;
    return HealthRoutes(harness, path);
  };
  if (node.conn) parts.events = std::make_unique<agent::EventPoster>(*node.conn, config.node_name, log);
  parts.reloader = std::make_unique<Reloader>(config, *node.ctx, log, harness, nullptr, parts.events.get(), metrics,
                                              exporter_routes);
  parts.reloader->AddComponents();
  if (!node.conn) return parts;
  auto w = agent::MakeNodeWatcher(*node.ctx, parts.reloader->current(), log, harness);
  agent::NodeWatcher* watcher = w.get();
  harness.Add(std::move(w));
  watcher->HoldUntilFirstRead();  // plugin and labels start with the Node's settings
  parts.reloader->set_watcher(watcher);
  if (!config.kubernetes.daemonset.empty()) {
    agent::UninstallOptions u;
    u.daemonset = config.kubernetes.daemonset;
    u.remove_files = config.kubernetes.remove_on_uninstall;
    u.node_name = config.node_name;
    if (config.dra.enabled) u.dra_driver = config.dra.driver_name;
    parts.uninstaller = std::make_unique<agent::Uninstaller>(*node.conn, u, harness, log);
    harness.Add(parts.uninstaller->MakeWatcher());
  }
  return parts;
}

// The health answers: on healthListen (none when "") and, with publishDir, written into that
// folder for the unprivileged front (docs/agent.md).
class HealthEndpoints {
 public:
  Status Open(const agent::AgentConfig& config, const lifecycle::Harness& harness, lifecycle::Log& log) {
    if (!config.publish_dir.empty()) {
      auto p = PublishHealth(config.publish_dir, harness, log);
      if (!p.ok()) return absl::Status(p.status().code(), absl::StrCat("publishDir: ", p.status().message()));
      published_ = *std::move(p);
    }
    if (config.health_listen.empty()) return absl::OkStatus();
    exporter::ServerOptions o;
    o.listen = config.health_listen;
    o.routes = [&harness](std::string_view path) { return HealthRoutes(harness, path); };
    o.loop_threads = 1;
    auto server = exporter::MetricsServer::Create(nullptr, o);
    if (!server.ok()) return absl::Status(server.status().code(), absl::StrCat("health endpoint: ", server.status().message()));
    server_ = *std::move(server);
    thread_ = std::thread([this] { server_->Serve(); });
    return absl::OkStatus();
  }
  // "on :9401 (port 9401)"-style words for the start line.
  std::string Where(const agent::AgentConfig& config) const {
    return absl::StrCat(server_ ? absl::StrCat("on ", config.health_listen, " (port ", server_->port(), ")")
                                : std::string("on no port"),
                        config.publish_dir.empty() ? "" : absl::StrCat(", published into ", config.publish_dir));
  }
  void StartPublishing() {
    if (published_) published_->Start().IgnoreError();  // a failed write is logged, tried again
  }
  void StopPublishing() {
    if (published_) published_->Stop();  // removed: the front answers 503 at once
  }
  void StopServing() {
    if (server_) server_->Stop();
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::unique_ptr<exporter::RoutesPublisher> published_;
  std::unique_ptr<exporter::MetricsServer> server_;
  std::thread thread_;
};

void LogStarting(const agent::AgentConfig& config, const NodeSession& session, const HealthEndpoints& health,
                 lifecycle::Log& log) {
  std::string enabled;
  for (const std::string& name : agent::ComponentNames()) {
    if (agent::ComponentEnabled(config, name)) absl::StrAppend(&enabled, enabled.empty() ? "" : ", ", name);
  }
  log.Info("agent", absl::StrCat("gpunode ", GPUNODE_VERSION, " agent starting on ",
                                 config.node_name.empty() ? "(no node name)" : config.node_name,
                                 session.simulated() ? absl::StrCat(" (simulated ", *session.simulated(), ")") : "",
                                 ": ", enabled, "; health ", health.Where(config), ": /healthz /readyz /metrics",
                                 PolicyNote(config)));
}

// How long the start took, logged once: the plugin's registration (allocatable advertised) and
// every component up (pod Ready). Looks every 10 ms while a start should finish, then every 250 ms
// (a node without a kubelet yet), for at most a minute.
std::jthread LogStartTimes(const agent::AgentConfig& config, agent::NodeContext& ctx, const lifecycle::Harness& harness,
                           lifecycle::Log& log) {
  return std::jthread([&config, &ctx, &harness, &log](std::stop_token stop) {
    ::pthread_setname_np(::pthread_self(), "gn:timing");
    bool plugin_logged = !config.plugin.enabled, all_logged = false;
    while (!stop.stop_requested() && !(plugin_logged && all_logged) && ctx.MsSinceStart() < 60000) {
      for (const lifecycle::ComponentInfo& i : harness.Components()) {
        if (!plugin_logged && i.name == "plugin" && i.up && ctx.gate().open) {
          log.Info("agent", absl::StrCat("allocatable advertised (plugin registered, validation passed) ",
                                         ctx.MsSinceStart(), " ms after start"));
          plugin_logged = true;
        }
      }
      if (!all_logged && harness.AllUp()) {
        log.Info("agent", absl::StrCat("ready: every component up ", ctx.MsSinceStart(), " ms after start"));
        all_logged = true;
      }
      ctx.clock().WaitFor(std::chrono::milliseconds(ctx.MsSinceStart() < 3000 ? 10 : 250), stop);
    }
  });
}

// Until SIGTERM or SIGINT (returned): SIGHUP, or a change of the config file's or of its policy
// file's modification time (the policy file's appearing or going too: an optional ConfigMap
// volume), reloads them.
int ServeUntilStopSignal(const sigset_t& signals, const std::string& path, std::chrono::milliseconds watch,
                         Reloader& reloader) {
  auto mtime = [](const std::string& file) -> int64_t {
    struct stat st {};
    if (file.empty() || ::stat(file.c_str(), &st) != 0) return 0;
    return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  };
  auto stamps = [&] { return std::make_pair(mtime(path), mtime(reloader.current().policy_file)); };
  auto seen = stamps();
  while (true) {
    timespec timeout{static_cast<time_t>(watch.count() / 1000), static_cast<long>((watch.count() % 1000) * 1000000)};
    if (timeout.tv_sec == 0 && timeout.tv_nsec == 0) timeout.tv_sec = 2;
    const int sig = sigtimedwait(&signals, nullptr, &timeout);
    if (sig == SIGTERM || sig == SIGINT) return sig;
    const auto now = stamps();
    if (sig != SIGHUP && now == seen) continue;
    const char* trigger = sig == SIGHUP ? "SIGHUP" : now.first != seen.first ? "config file changed" : "policy file changed";
    const std::string policy_before = reloader.current().policy_file;
    seen = now;
    reloader.Reload(path, trigger);
    if (reloader.current().policy_file != policy_before) seen.second = mtime(reloader.current().policy_file);
  }
}

// An uninstall (the DaemonSet is being deleted), not a restart: remove what gpunode put on the
// node before the components are stopped (a stuck one must not delay it past the kubelet's
// SIGKILL). The DaemonSet watch has usually done it already.
void CleanUpIfUninstalling(agent::Uninstaller* uninstaller, int stop_signal, lifecycle::Log& log) {
  if (uninstaller == nullptr || uninstaller->done()) return;
  auto deleting = uninstaller->DaemonSetDeleting();
  if (!deleting.ok()) {
    log.Warn("agent", absl::StrCat("cannot tell whether this stop is an uninstall, Node labels kept: ",
                                   deleting.status().message()));
  } else if (*deleting) {
    uninstaller->CleanUp(absl::StrCat("DaemonSet ", uninstaller->daemonset(), " is being deleted (seen at ",
                                      strsignal(stop_signal), ")"));
  }
}

// The stop: the uninstall's cleanup first, then the API calls in flight, the components (with the
// harness's deadline), the health port and the Events. A component still stuck is left behind
// with _Exit (its objects stay valid).
int StopAgent(int stop_signal, AgentNode& node, AgentParts& parts, lifecycle::Harness& harness,
              HealthEndpoints& health, lifecycle::Log& log) {
  const auto started = std::chrono::steady_clock::now();
  log.Info("agent", absl::StrCat("received ", strsignal(stop_signal), ": stopping"));
  health.StopPublishing();
  CleanUpIfUninstalling(parts.uninstaller.get(), stop_signal, log);
  // Calls the components have in flight end now (the uninstall above has its own connection): a
  // slow or silent API server does not hold the stop.
  if (node.ctx->kube() != nullptr) node.ctx->kube()->Stop();
  const std::vector<std::string> stuck = harness.Stop();
  health.StopServing();
  if (parts.events) parts.events->Idle(std::chrono::seconds(1));
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
  if (!stuck.empty()) {
    log.Warn("agent", absl::StrCat("stopped in ", ms.count(), " ms, leaving ", absl::StrJoin(stuck, ", "),
                                   " behind (still stopping)"));
    std::cout.flush();
    std::cerr.flush();
    std::_Exit(kExitOk);
  }
  log.Info("agent", absl::StrCat("stopped in ", ms.count(), " ms"));
  return kExitOk;
}

int RunAgent(const GlobalOptions& global, const AgentFlags& flags) {
  ::mallopt(M_ARENA_MAX, 2);
  auto config = AgentConfigWithFlags(flags);
  if (!config.ok()) {
    PrintError(config.status());
    return kExitUsage;
  }
  if (flags.print_config) {
    auto format = ParseOutputFormat(global.output == "table" ? "yaml" : global.output);
    if (!format.ok()) {
      PrintError(format.status());
      return kExitUsage;
    }
    PrintDocument(agent::ConfigToJson(*config), *format);
    return kExitOk;
  }
  lifecycle::Log log(config->log_format == "json" ? lifecycle::Log::Format::kJson : lifecycle::Log::Format::kText);
  const sigset_t signals = BlockStopAndReloadSignals();
  auto node = OpenAgentNode(global, *config, log);
  if (!node.ok()) {
    PrintError(node.status());
    return kExitUsage;
  }
  lifecycle::HarnessOptions ho;
  ho.stop_timeout = config->stop_timeout;
  lifecycle::Harness harness(node->ctx->clock(), log, ho);
  AgentParts parts = AddAgentParts(*config, *node, log, harness);
  HealthEndpoints health;
  if (Status st = health.Open(*config, harness, log); !st.ok()) {
    PrintError(st);
    return kExitFailed;
  }
  LogStarting(*config, *node->session, health, log);
  harness.Start();
  health.StartPublishing();
  std::jthread timing = LogStartTimes(*config, *node->ctx, harness, log);
  const int stop_signal = ServeUntilStopSignal(signals, flags.config, config->watch_config, *parts.reloader);
  timing.request_stop();
  timing.join();
  return StopAgent(stop_signal, *node, parts, harness, health, log);
}

}  // namespace

void AddAgentCommand(CLI::App& app, GlobalOptions& global, int* exit_code) {
  auto f = std::make_shared<AgentFlags>();
  CLI::App* cmd = app.add_subcommand(
      "agent", "The node's GPU services in one process: device plugin, labels, exporter, validation gate, CDI (docs/agent.md)");
  cmd->add_option("--config", f->config, "Agent config file (YAML, kind AgentConfig); none: NVIDIA's defaults")
      ->envname("GPUNODE_AGENT_CONFIG");
  cmd->add_option("--node-name", f->node_name, "This node's name (default: nodeName in the config, else $NODE_NAME)");
  AddKubeconfigOption(cmd, &f->kubeconfig);
  cmd->add_option("--log-format", f->log_format, "text or json (one JSON object per line)");
  cmd->add_flag("--print-config", f->print_config, "Print the effective configuration (every key) and exit (-o json|yaml)");
  cmd->footer(
      "Components: cdi and runtime (one-shot, opt-in), validator (doctor's checks gate the plugin), plugin,\n"
      "labels, exporter; each restarts with backoff on its own. Health: /healthz, /readyz (also /healthz/<component>),\n"
      "/metrics with gpunode_component_up on healthListen (:9401). SIGHUP or a change of the file (or of its policyFile) reloads it.\n"
      "Per-node labels: nvidia.com/gpu.deploy.<component>=false, nvidia.com/device-plugin.config=<name>.\n"
      "Examples:\n"
      "  gpunode --simulate dgx-h200 agent --node-name n1 --config agent.yaml\n"
      "  gpunode agent --print-config -o yaml       every key with its default");
  cmd->callback([&global, f, exit_code] { *exit_code = RunAgent(global, *f); });
}

}  // namespace gpunode::cli
