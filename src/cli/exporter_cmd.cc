// gpunode exporter: Prometheus metrics with dcgm-exporter's names, labels and flags, read from NVML
// directly (src/exporter, docs/exporter.md).
#include <malloc.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iostream>
#include <mutex>
#include <sstream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "src/cli/common.h"
#include "src/exporter/counters.h"
#include "src/exporter/exporter.h"
#include "src/exporter/http_server.h"
#include "src/exporter/web_config.h"
#include "src/gpu/nvml.h"

namespace gpunode::cli {
namespace {

constexpr char kDefaultPodResourcesSocket[] = "/var/lib/kubelet/pod-resources/kubelet.sock";

struct ExporterFlags {
  std::string collectors;
  std::string listen = ":9400";
  std::string interval = "30000";
  bool kubernetes = false;
  std::string pod_resources_socket;
  std::string resource_names;
  std::string hostname_label = "Hostname";
  bool no_hostname = false;
  std::string web_config_file;
  bool once = false;
};

void Log(const std::string& msg) { std::cerr << "gpunode exporter: " << msg << std::endl; }

// A flag left at its default takes the environment variable dcgm-exporter reads.
void FromEnv(const CLI::App& cmd, const char* flag, const char* env, std::string* value) {
  if (cmd.count(flag) > 0) return;
  if (const char* v = std::getenv(env); v != nullptr && *v != '\0') *value = v;
}

bool EnvTrue(const char* env) {
  const char* v = std::getenv(env);
  if (v == nullptr) return false;
  const std::string s = v;
  return s == "1" || s == "true" || s == "TRUE" || s == "True" || s == "yes";
}

StatusOr<std::vector<exporter::Counter>> LoadCounters(const std::string& path) {
  if (path.empty()) return exporter::DefaultCounters();
  std::ifstream in(path);
  if (!in) return ErrnoToStatus(errno, "read counters file", path);
  std::stringstream text;
  text << in.rdbuf();
  return exporter::ParseCounters(text.str(), path);
}

std::string Hostname(const NodeSession& session) {
  if (const char* n = std::getenv("NODE_NAME"); n != nullptr && *n != '\0') return n;
  if (session.simulated()) {
    if (auto name = session.fs().ReadLine("/etc/hostname"); name.ok() && !name->empty()) return *name;
  }
  char buf[256] = {0};
  if (::gethostname(buf, sizeof buf - 1) == 0) return buf;
  return "";
}


int RunExporter(const GlobalOptions& global, ExporterFlags flags, const CLI::App& cmd) {
  // A long-running daemon with a handful of threads: two malloc arenas, not one per thread.
  ::mallopt(M_ARENA_MAX, 2);
  // The server holds a socket per client (up to 4096 at once): raise the soft open-file limit to
  // the hard one (systemd's and Docker's default soft limit is 1024), as Go programs do at start.
  if (rlimit nofile{}; ::getrlimit(RLIMIT_NOFILE, &nofile) == 0) {
    const rlim_t want = std::min<rlim_t>(nofile.rlim_max, 1 << 16);
    if (want > nofile.rlim_cur) {
      nofile.rlim_cur = want;
      ::setrlimit(RLIMIT_NOFILE, &nofile);
    }
  }
  FromEnv(cmd, "--collectors", "DCGM_EXPORTER_COLLECTORS", &flags.collectors);
  FromEnv(cmd, "--listen", "DCGM_EXPORTER_LISTEN", &flags.listen);
  FromEnv(cmd, "--collect-interval", "DCGM_EXPORTER_INTERVAL", &flags.interval);
  FromEnv(cmd, "--pod-resources-socket", "DCGM_POD_RESOURCES_KUBELET_SOCKET", &flags.pod_resources_socket);
  FromEnv(cmd, "--nvidia-resource-names", "NVIDIA_RESOURCE_NAMES", &flags.resource_names);
  FromEnv(cmd, "--web-config-file", "DCGM_EXPORTER_WEB_CONFIG_FILE", &flags.web_config_file);
  if (cmd.count("--kubernetes") == 0 && EnvTrue("DCGM_EXPORTER_KUBERNETES")) flags.kubernetes = true;
  if (cmd.count("--no-hostname") == 0 && EnvTrue("DCGM_EXPORTER_NO_HOSTNAME")) flags.no_hostname = true;

  auto counters = LoadCounters(flags.collectors);
  if (!counters.ok()) {
    PrintError(counters.status());
    return kExitUsage;
  }
  int64_t interval_ms = 0;
  if (!absl::SimpleAtoi(flags.interval, &interval_ms) || interval_ms < 100 || interval_ms > 3600000) {
    PrintError(absl::StrCat("--collect-interval \"", flags.interval,
                            "\": want milliseconds from 100 to 3600000 (dcgm-exporter's default is 30000)"));
    return kExitUsage;
  }
  if (flags.hostname_label != "Hostname" && flags.hostname_label != "hostname") {
    PrintError(absl::StrCat("--hostname-label \"", flags.hostname_label,
                            "\": want Hostname (released dcgm-exporter) or hostname (its main branch)"));
    return kExitUsage;
  }
  exporter::ServerOptions server_options;
  server_options.listen = flags.listen;
  if (auto addr = exporter::ParseListenAddress(flags.listen); !addr.ok()) {
    PrintError(addr.status());
    return kExitUsage;
  }
  if (!flags.web_config_file.empty()) {
    auto web = exporter::LoadWebConfig(flags.web_config_file);
    if (!web.ok()) {
      PrintError(web.status());
      return kExitUsage;
    }
    server_options.web = *std::move(web);
  }

  auto session = NodeSession::Open(global);
  if (!session.ok()) {
    PrintError(session.status());
    return kExitUsage;
  }
  auto nvml = NvmlLibrary::Open((*session)->probe_options().nvml_library);
  if (!nvml.ok()) {
    PrintError(absl::StrCat("NVML: ", nvml.status().message(), " (run `gpunode doctor` to see which layer is broken)"));
    return kExitFailed;
  }

  exporter::ExporterOptions options;
  options.counters = *std::move(counters);
  options.interval = std::chrono::milliseconds(flags.once ? std::min<int64_t>(interval_ms, 1000) : interval_ms);
  options.hostname = Hostname(**session);
  options.render.hostname_label = flags.no_hostname ? "" : flags.hostname_label;
  options.log = Log;
  // Pod attribution: on with --kubernetes or an explicit socket; otherwise on when the kubelet's
  // socket exists (on a Kubernetes node it does, so nothing needs to be set).
  const std::string socket = flags.pod_resources_socket.empty() ? kDefaultPodResourcesSocket : flags.pod_resources_socket;
  struct stat st {};
  const bool socket_exists = ::stat(socket.c_str(), &st) == 0;
  if (!flags.once && (flags.kubernetes || !flags.pod_resources_socket.empty() || socket_exists)) {
    exporter::PodMapperOptions pods;
    pods.socket_path = socket;
    for (absl::string_view r : absl::StrSplit(flags.resource_names, ',', absl::SkipWhitespace())) {
      pods.resource_names.emplace_back(absl::StripAsciiWhitespace(r));
    }
    options.pods = pods;
    Log(absl::StrCat("pod attribution from ", socket, socket_exists ? "" : " (not there yet)"));
  }

  if (flags.once) {
    exporter::Exporter exp(**nvml, std::move(options));
    exp.Start();
    std::this_thread::sleep_for(std::chrono::milliseconds(2 * std::min<int64_t>(interval_ms, 1000) + 200));
    std::cout << *exp.Metrics();
    exp.Stop();
    return kExitOk;
  }
  nvml->reset();  // the component opens the node's one NVML session itself
  // Serving: the agent's exporter component (src/agent) in its harness, with the settings
  // resolved above.
  agent::AgentConfig c;
  c.kubernetes.enabled = false;
  c.validator.enabled = false;
  agent::ExporterSection& e = c.exporter;
  e.listen = flags.listen;
  e.collect_interval = std::chrono::milliseconds(interval_ms);
  e.kubernetes = options.pods.has_value();
  e.pod_resources_socket = socket;
  e.collectors = flags.collectors;
  e.web_config_file = flags.web_config_file;
  e.hostname_label = options.render.hostname_label;
  if (options.pods) e.resource_names = options.pods->resource_names;
  return RunComponentCommand(global, **session, c, "exporter", options.hostname);
}

}  // namespace

void AddExporterCommand(CLI::App& app, GlobalOptions& global, int* exit_code) {
  auto flags = std::make_shared<ExporterFlags>();
  CLI::App* cmd = app.add_subcommand(
      "exporter",
      "Prometheus exporter: dcgm-exporter's metrics (names, HELP, labels, flags) read from NVML directly");
  cmd->footer(R"(
Serves /metrics (Prometheus text 0.0.4), /health (200 when the last collection is recent and
succeeded, 503 with the reason otherwise) and / (a status page). GPUs are read by background
samplers every --collect-interval; a scrape never touches NVML. The energy counter and the
DCGM_FI_PROF_* ratios (NVML GPM, Hopper and newer) are read by a second sampler so they never
delay the others. Fields a GPU does not support are omitted (one log line at start).

Every dcgm-exporter environment variable below is honoured when its flag is not given.

Examples:
  gpunode exporter                                   # :9400, default counters, 30 s interval
  gpunode exporter -c 1000 --listen 127.0.0.1:9400   # 1 s samples, loopback only
  gpunode exporter -f /etc/dcgm-exporter/dcp-metrics-included.csv
  gpunode exporter --web-config-file web.yml         # TLS / basic auth (exporter-toolkit format)
  gpunode --simulate dgx-h200 exporter --once        # print one page and exit
  curl -s localhost:9400/metrics | promtool check metrics
)");
  cmd->add_option("-f,--collectors", flags->collectors,
                  "dcgm-exporter counters CSV (field, type, help); default: its default-counters.csv, built "
                  "in [env DCGM_EXPORTER_COLLECTORS]");
  cmd->add_option("-a,--listen,--address", flags->listen,
                  "address to serve on: :9400, 127.0.0.1:9400, [::]:9400 [env DCGM_EXPORTER_LISTEN]")
      ->capture_default_str();
  cmd->add_option("-c,--collect-interval", flags->interval,
                  "sampling interval in milliseconds, 100..3600000 [env DCGM_EXPORTER_INTERVAL]")
      ->capture_default_str();
  cmd->add_flag("-k,--kubernetes", flags->kubernetes,
                "label GPUs with the pod using them (kubelet pod-resources API); on by default when the "
                "socket exists [env DCGM_EXPORTER_KUBERNETES]");
  cmd->add_option("--pod-resources-socket,--pod-resources-kubelet-socket", flags->pod_resources_socket,
                  std::string("kubelet pod-resources socket (default ") + kDefaultPodResourcesSocket +
                      ") [env DCGM_POD_RESOURCES_KUBELET_SOCKET]");
  cmd->add_option("--nvidia-resource-names", flags->resource_names,
                  "extra resource names to attribute, comma-separated (nvidia.com/gpu and nvidia.com/mig-* "
                  "always) [env NVIDIA_RESOURCE_NAMES]");
  cmd->add_option("--hostname-label", flags->hostname_label,
                  "name of the host label: Hostname (every released dcgm-exporter) or hostname (its main "
                  "branch)")
      ->capture_default_str();
  cmd->add_flag("-n,--no-hostname", flags->no_hostname, "leave the host label out [env DCGM_EXPORTER_NO_HOSTNAME]");
  cmd->add_option("--web-config-file", flags->web_config_file,
                  "TLS and basic-auth settings, Prometheus exporter-toolkit format "
                  "[env DCGM_EXPORTER_WEB_CONFIG_FILE]");
  cmd->add_flag("--once", flags->once, "print one /metrics page on stdout (after one sampling round) and exit");
  cmd->callback([&global, flags, cmd, exit_code] { *exit_code = RunExporter(global, *flags, *cmd); });
}

}  // namespace gpunode::cli
