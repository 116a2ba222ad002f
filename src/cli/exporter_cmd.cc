// gpunode exporter: Prometheus metrics with dcgm-exporter's names, labels and flags, read from NVML
// directly (src/exporter, docs/exporter.md).
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iostream>
#include <mutex>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "src/agent/config.h"
#include "src/cli/common.h"
#include "src/cli/nvidia_flags.h"
#include "src/exporter/counters.h"
#include "src/exporter/exporter.h"
#include "src/exporter/http_server.h"
#include "src/exporter/pod_metadata.h"
#include "src/exporter/published.h"
#include "src/exporter/web_config.h"
#include "src/gpu/nvml.h"
#include "src/kube/client.h"
#include "src/lifecycle/harness.h"
#include "src/node/probe.h"
#include "src/node/unreadable_gpus.h"

namespace gpunode::cli {
namespace {

constexpr char kDefaultPodResourcesSocket[] = "/var/lib/kubelet/pod-resources/kubelet.sock";

struct ExporterFlags {
  std::string collectors;
  std::string listen = ":9400";
  std::string interval = "30000";
  bool kubernetes = false;     // -k/--kubernetes (NvidiaFlags, Go booleans)
  bool kubernetes_off = false;  // --kubernetes=false: no pod attribution even where the socket exists
  std::string pod_resources_socket;
  std::string resource_names;
  std::string dra_driver = exporter::kDefaultDraDriver;  // --dra-driver-name; "": DRA claims not read
  std::string hostname_label = "Hostname";
  bool no_hostname = false;    // -n/--no-hostname (NvidiaFlags)
  // --kubernetes-enable-pod-labels, --kubernetes-pod-label-allowlist-regex, --kubernetes-enable-pod-uid
  // (NvidiaFlags): the GPU pods' labels and UID from the API server.
  bool pod_labels = false;
  bool pod_uid = false;
  std::vector<std::string> pod_label_allowlist;
  std::string log_format = "text";  // --log-format (NvidiaFlags)
  std::string web_config_file;
  bool once = false;
  // --from-dir: the unprivileged front over what `gpunode agent` publishes (publishDir).
  std::string from_dir;
  std::string health_listen;
  std::string stale_after;
};

void Log(const std::string& msg) { std::cerr << "gpunode exporter: " << msg << std::endl; }

// A flag left at its default takes the environment variable dcgm-exporter reads.
void FromEnv(const CLI::App& cmd, const char* flag, const char* env, std::string* value) {
  if (cmd.count(flag) > 0) return;
  if (const char* v = std::getenv(env); v != nullptr && *v != '\0') *value = v;
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


// dcgm-exporter's flags beyond gpunode's own options: the ones gpunode wires (booleans read as Go
// reads them, the log format, the GPU ID type) and the ones that do not apply (noted once at
// start). Source: NVIDIA/dcgm-exporter pkg/cmd/app.go at tag 4.5.3-4.8.2 (docs/nvidia-flags.md).
void AddDcgmExporterFlags(CLI::App* cmd, NvidiaFlags& nv) {
  using K = NvidiaKind;
  const std::string no_dcgm = "gpunode reads NVML in-process; there is no DCGM library or host engine";
  const std::string dump = "dcgm-exporter's debug dumps of DCGM data; gpunode has no DCGM data to dump";
  const std::string bind = "gpunode follows GPUs that are lost and come back through NVML events and polling itself";
  nv.Add(cmd, {"-k,--kubernetes", {"DCGM_EXPORTER_KUBERNETES"}, K::kBool,
               "label GPUs with the pod using them (kubelet pod-resources API); on by default when the socket "
               "exists"});
  nv.Add(cmd, {"-n,--no-hostname", {"DCGM_EXPORTER_NO_HOSTNAME"}, K::kBool, "leave the host label out"});
  nv.Add(cmd, {"--log-format", {"DCGM_EXPORTER_LOG_FORMAT"}, K::kString, "log lines as text (default) or json"});
  nv.Add(cmd, {"--kubernetes-gpu-id-type", {"DCGM_EXPORTER_KUBERNETES_GPU_ID_TYPE"}, K::kString,
               "uid or device-name: how the device plugin names GPUs; gpunode matches both forms either way"});
  nv.Add(cmd, {"-d,--devices", {"DCGM_EXPORTER_DEVICES_STR"}, K::kString,
               "GPUs to monitor: f or g (every GPU, what gpunode does); a list is not supported"});
  nv.Add(cmd, {"-o,--use-old-namespace", {"DCGM_EXPORTER_USE_OLD_NAMESPACE"}, K::kBool, "dcgm-exporter 1.x metric names",
               "gpunode serves the DCGM_FI_* names of dcgm-exporter 2.x and later, not the dcgm_* names of 1.x"});
  nv.Add(cmd, {"-p,--cpu-devices", {"DCGM_EXPORTER_CPU_DEVICES_STR"}, K::kString, "CPUs to monitor",
               "gpunode exports GPUs through NVML; CPU metrics come from DCGM only"});
  nv.Add(cmd, {"-s,--switch-devices", {"DCGM_EXPORTER_OTHER_DEVICES_STR"}, K::kString, "NVSwitches to monitor",
               "gpunode exports GPUs through NVML; NVSwitch metrics come from DCGM only"});
  nv.Add(cmd, {"-m,--configmap-data", {"DCGM_EXPORTER_CONFIGMAP_DATA"}, K::kString, "NAMESPACE:NAME of a counters ConfigMap",
               "gpunode does not read counters through the Kubernetes API; mount the ConfigMap as a file and "
               "pass it with -f/--collectors"});
  nv.Add(cmd, {"-r,--remote-hostengine-info", {"DCGM_REMOTE_HOSTENGINE_INFO"}, K::kString, "DCGM host engine HOST:PORT",
               no_dcgm});
  nv.Add(cmd, {"--kubernetes-enable-pod-labels", {"DCGM_EXPORTER_KUBERNETES_ENABLE_POD_LABELS"}, K::kBool,
               "add the labels of the pod using a GPU to its series, read from the API server (get on pods; at "
               "most 32 per pod); needs pod attribution"});
  nv.Add(cmd, {"--kubernetes-enable-pod-uid", {"DCGM_EXPORTER_KUBERNETES_ENABLE_POD_UID"}, K::kBool,
               "add pod_uid (the pod's metadata.uid, from the API server) to series labelled with a pod"});
  nv.Add(cmd, {"--kubernetes-pod-label-allowlist-regex", {"DCGM_EXPORTER_KUBERNETES_POD_LABEL_ALLOWLIST_REGEX"},
               K::kStringList,
               "with --kubernetes-enable-pod-labels: keep only the pod label keys a pattern matches (RE2, Go's "
               "syntax, anywhere in the key; comma-separated); none: every label"});
  nv.Add(cmd, {"--fake-gpus", {"DCGM_EXPORTER_USE_FAKE_GPUS"}, K::kBool, "accept DCGM's fake GPUs",
               "DCGM's fake GPUs do not exist in gpunode; simulate a whole node with --simulate PROFILE "
               "(or GPUNODE_SIMULATE)"});
  nv.Add(cmd, {"-x,--xid-count-window-size", {"DCGM_EXPORTER_XID_COUNT_WINDOW_SIZE"}, K::kInt,
               "window of DCGM_EXP_XID_ERRORS_COUNT, ms",
               "gpunode has no DCGM_EXP_XID_ERRORS_COUNT; it counts XIDs since start in gpunode_xid_errors_total"});
  nv.Add(cmd, {"--replace-blanks-in-model-name,--rbmn", {"DCGM_EXPORTER_REPLACE_BLANKS_IN_MODEL_NAME"}, K::kBool,
               "dashes for blanks in modelName",
               "gpunode's exporter keeps modelName as NVML reports it (dcgm-exporter's default)"});
  nv.Add(cmd, {"--debug", {"DCGM_EXPORTER_DEBUG"}, K::kBool, "debug logging",
               "gpunode has no debug log level; it always logs start-up, field support and GPU changes"});
  nv.Add(cmd, {"--clock-events-count-window-size", {"DCGM_EXPORTER_CLOCK_EVENTS_COUNT_WINDOW_SIZE"}, K::kInt,
               "window of DCGM_EXP_CLOCK_EVENTS_COUNT, ms", "gpunode has no DCGM_EXP_CLOCK_EVENTS_COUNT"});
  nv.Add(cmd, {"--enable-dcgm-log", {"DCGM_EXPORTER_ENABLE_DCGM_LOG"}, K::kBool, "DCGM's log on stdout", no_dcgm});
  nv.Add(cmd, {"--dcgm-log-level", {"DCGM_EXPORTER_DCGM_LOG_LEVEL"}, K::kString, "DCGM's log level", no_dcgm});
  nv.Add(cmd, {"--hpc-job-mapping-dir", {"DCGM_HPC_JOB_MAPPING_DIR"}, K::kString, "HPC job mapping files",
               "HPC job attribution is not implemented by gpunode"});
  nv.Add(cmd, {"--kubernetes-virtual-gpus", {"KUBERNETES_VIRTUAL_GPUS"}, K::kBool, "one series per shared GPU replica",
               "gpunode labels a shared (time-sliced or MPS) GPU with one of its pods"});
  nv.Add(cmd, {"--dump-enabled", {"DCGM_EXPORTER_DUMP_ENABLED"}, K::kBool, "debug dumps", dump});
  nv.Add(cmd, {"--dump-directory", {"DCGM_EXPORTER_DUMP_DIRECTORY"}, K::kString, "debug dump folder", dump});
  nv.Add(cmd, {"--dump-retention", {"DCGM_EXPORTER_DUMP_RETENTION"}, K::kInt, "debug dump retention, hours", dump});
  nv.Add(cmd, {"--dump-compression", {"DCGM_EXPORTER_DUMP_COMPRESSION"}, K::kBool, "gzip debug dumps", dump});
  nv.Add(cmd, {"--kubernetes-enable-dra", {"KUBERNETES_ENABLE_DRA"}, K::kBool,
               "attribute GPUs allocated through DRA ResourceClaims (of --dra-driver-name); on by default in "
               "gpunode, =false turns it off"});
  nv.Add(cmd, {"--disable-startup-validate", {"DISABLE_STARTUP_VALIDATE"}, K::kBool, "skip DCGM start-up checks",
               "gpunode runs no DCGM start-up validation"});
  nv.Add(cmd, {"--enable-gpu-bind-unbind-watch", {"DCGM_EXPORTER_ENABLE_GPU_BIND_UNBIND_WATCH"}, K::kBool,
               "reload on GPU bind/unbind", bind});
  nv.Add(cmd, {"--gpu-bind-unbind-poll-interval", {"DCGM_EXPORTER_GPU_BIND_UNBIND_POLL_INTERVAL"}, K::kString,
               "bind/unbind poll interval", bind});
  nv.Add(cmd, {"--enable-pprof", {"DCGM_EXPORTER_ENABLE_PPROF"}, K::kBool, "Go's /debug/pprof",
               "Go's profiler endpoints; gpunode is not a Go program"});
  nv.Add(cmd, {"--web-systemd-socket", {"DCGM_EXPORTER_SYSTEMD_SOCKET"}, K::kBool, "systemd socket activation",
               "gpunode opens its listening socket itself (--address)"});
}

// Resolves the settings gpunode wires into `flags`; the notes of those that do not apply.
StatusOr<std::vector<std::string>> ResolveDcgmExporterFlags(const NvidiaFlags& nv, ExporterFlags* flags) {
  GPUNODE_ASSIGN_OR_RETURN(std::vector<std::string> notes, nv.Check());
  // dcgm-exporter's `-rbmn` (Go takes any flag name after one dash) reaches CLI11 as `-r bmn`.
  std::string r_source;
  if (nv.Value("remote-hostengine-info", &r_source) == "bmn" && r_source == "--remote-hostengine-info") {
    for (std::string& note : notes) {
      if (absl::StartsWith(note, "--remote-hostengine-info=bmn ")) {
        note = "-rbmn (--replace-blanks-in-model-name) does not apply: gpunode's exporter keeps modelName as NVML "
               "reports it (dcgm-exporter's default); ignored";
      }
    }
  }
  GPUNODE_ASSIGN_OR_RETURN(std::optional<bool> k, nv.Bool("kubernetes"));
  if (k) {
    flags->kubernetes = *k;
    flags->kubernetes_off = !*k;
  }
  GPUNODE_ASSIGN_OR_RETURN(std::optional<bool> n, nv.Bool("no-hostname"));
  if (n) flags->no_hostname = *n;
  std::string source;
  if (auto f = nv.Value("log-format", &source)) {
    if (*f != "text" && *f != "json") {
      return absl::InvalidArgumentError(absl::StrCat(source, " \"", *f, "\": want text or json"));
    }
    flags->log_format = *f;
  }
  if (auto t = nv.Value("kubernetes-gpu-id-type", &source); t && *t != "uid" && *t != "device-name") {
    return absl::InvalidArgumentError(absl::StrCat(source, " \"", *t, "\": want uid or device-name"));
  }
  GPUNODE_ASSIGN_OR_RETURN(std::optional<bool> pod_labels, nv.Bool("kubernetes-enable-pod-labels"));
  flags->pod_labels = pod_labels.value_or(false);
  GPUNODE_ASSIGN_OR_RETURN(std::optional<bool> pod_uid, nv.Bool("kubernetes-enable-pod-uid"));
  flags->pod_uid = pod_uid.value_or(false);
  // urfave/cli's StringSlice: comma-separated in the flag and the variable alike.
  if (auto allow = nv.Value("kubernetes-pod-label-allowlist-regex", &source)) {
    for (absl::string_view p : absl::StrSplit(*allow, ',', absl::SkipEmpty())) flags->pod_label_allowlist.emplace_back(p);
    if (auto filter = exporter::PodLabelFilter::Create(flags->pod_label_allowlist); !filter.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(source, ": ", filter.status().message()));
    }
  }
  GPUNODE_ASSIGN_OR_RETURN(std::optional<bool> dra, nv.Bool("kubernetes-enable-dra"));
  if (dra && !*dra) flags->dra_driver.clear();
  if (auto d = nv.Value("devices"); d && *d != "f" && *d != "g") {
    notes.push_back(nv.Note("devices", "gpunode exports every GPU NVML sees (f or g); a selection is not supported"));
  }
  return notes;
}

// `gpunode exporter --from-dir DIR`: privilege separation's network side. Serves what the agent
// published into DIR (src/exporter/published.h) with the exporter's server and web config: no
// NVML, no host files, no Kubernetes API; DIR is only read.
int RunFront(const ExporterFlags& flags, const CLI::App& cmd) {
  // Settings of sampling and rendering, given as flags, are refused (their environment variables
  // are ignored: a front's environment may be copied from an exporter's).
  for (const char* f : {"--collectors", "--collect-interval", "--pod-resources-socket", "--nvidia-resource-names",
                        "--dra-driver-name", "--hostname-label", "--once", "--kubernetes", "--no-hostname",
                        "--kubernetes-enable-pod-labels", "--kubernetes-enable-pod-uid",
                        "--kubernetes-pod-label-allowlist-regex"}) {
    if (cmd.count(f) > 0) {
      PrintError(absl::StrCat(f, " does not apply with --from-dir: the agent samples and renders the page (set it in "
                                 "the exporter section of the agent's config)"));
      return kExitUsage;
    }
  }
  exporter::ServerOptions main_options;
  main_options.listen = flags.listen;
  exporter::ServerOptions health_options;
  health_options.listen = flags.health_listen;
  health_options.loop_threads = 1;
  for (const auto* o : {&main_options, &health_options}) {
    if (o == &health_options && flags.health_listen.empty()) continue;
    if (auto addr = exporter::ParseListenAddress(o->listen); !addr.ok()) {
      PrintError(absl::StrCat(o == &main_options ? "--listen: " : "--health-listen: ", addr.status().message()));
      return kExitUsage;
    }
  }
  exporter::FreshnessOptions freshness;
  if (!flags.stale_after.empty()) {
    auto d = agent::ParseDuration(flags.stale_after);
    if (!d.ok() || d->count() <= 0) {
      PrintError(absl::StrCat("--stale-after \"", flags.stale_after, "\": want a duration such as 5s or 1500ms"));
      return kExitUsage;
    }
    freshness.stale_after = *d;
  }
  if (!flags.web_config_file.empty()) {
    auto web = exporter::LoadWebConfig(flags.web_config_file);
    if (!web.ok()) {
      PrintError(web.status());
      return kExitUsage;
    }
    main_options.web = *std::move(web);
  }
  // Signals are taken by sigwait on this thread: blocked before any thread starts.
  sigset_t signals;
  sigemptyset(&signals);
  for (int s : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&signals, s);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  lifecycle::Log log(flags.log_format == "json" ? lifecycle::Log::Format::kJson : lifecycle::Log::Format::kText);
  log.set_program("gpunode exporter");
  exporter::PublishedDir dir(flags.from_dir);
  exporter::FilePageSource pages(dir, freshness);
  exporter::PublishedRoutes main_routes(dir, freshness, /*health_port=*/false);
  exporter::PublishedRoutes health_routes(dir, freshness, /*health_port=*/true);
  main_options.routes = [&main_routes](std::string_view path) { return main_routes(path); };
  health_options.routes = [&health_routes](std::string_view path) { return health_routes(path); };
  auto server = exporter::MetricsServer::Create(pages, main_options);
  if (!server.ok()) {
    PrintError(server.status());
    return kExitFailed;
  }
  std::unique_ptr<exporter::MetricsServer> health;
  if (!flags.health_listen.empty()) {
    auto h = exporter::MetricsServer::Create(nullptr, health_options);
    if (!h.ok()) {
      PrintError(absl::StrCat("--health-listen: ", h.status().message()));
      return kExitFailed;
    }
    health = *std::move(h);
  }
  struct stat st {};
  if (::stat(flags.from_dir.c_str(), &st) != 0) {
    log.Warn("exporter", absl::StrCat(flags.from_dir, " does not exist (yet): every path answers 503 until the agent "
                                      "publishes there"));
  }
  log.Info("exporter", absl::StrCat("serving ", (*server)->tls() ? "https" : "http", " on ", flags.listen, " (port ",
                                    (*server)->port(), ") what the agent publishes into ", flags.from_dir,
                                    ": /metrics, /health, /, /healthz, /readyz",
                                    health ? absl::StrCat("; the agent's health on ", flags.health_listen, " (port ",
                                                          health->port(), "): /healthz, /readyz, /metrics")
                                           : std::string()));
  std::thread main_thread([&server] { (*server)->Serve(); });
  std::thread health_thread([&health] {
    if (health) health->Serve();
  });
  int sig = 0;
  while (sig != SIGTERM && sig != SIGINT) {
    sig = sigwaitinfo(&signals, nullptr);
    if (sig == SIGHUP) log.Info("exporter", "SIGHUP: nothing to reload (the files are read when they change)");
  }
  log.Info("exporter", absl::StrCat("received ", strsignal(sig), ": stopping"));
  (*server)->Stop();
  if (health) health->Stop();
  main_thread.join();
  health_thread.join();
  log.Info("exporter", "stopped");
  return kExitOk;
}

int RunExporter(const GlobalOptions& global, ExporterFlags flags, const CLI::App& cmd, const NvidiaFlags& nv) {
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
  auto notes = ResolveDcgmExporterFlags(nv, &flags);
  if (!notes.ok()) {
    PrintError(notes.status());
    return kExitUsage;
  }
  if (!flags.from_dir.empty()) return RunFront(flags, cmd);
  if (!flags.health_listen.empty() || !flags.stale_after.empty()) {
    PrintError(absl::StrCat(!flags.health_listen.empty() ? "--health-listen" : "--stale-after",
                            " needs --from-dir (the agent's own health port is healthListen in its config)"));
    return kExitUsage;
  }

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
  auto nvml = gpu::NvmlLibrary::Open((*session)->probe_options().nvml_library);
  if (!nvml.ok()) {
    PrintError(absl::StrCat("NVML: ", nvml.status().message(), " (run `gpunode doctor` to see which layer is broken)"));
    return kExitFailed;
  }

  // Each setting that does not apply: one line at start (a SIGHUP restart does not repeat it).
  {
    lifecycle::Log log(flags.log_format == "json" ? lifecycle::Log::Format::kJson : lifecycle::Log::Format::kText);
    log.set_program("gpunode exporter");
    for (const std::string& note : *notes) log.Warn("exporter", note);
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
  std::string dra_pool;
  if (!flags.once && !flags.kubernetes_off &&
      (flags.kubernetes || !flags.pod_resources_socket.empty() || socket_exists)) {
    exporter::PodMapperOptions pods;
    pods.socket_path = socket;
    for (absl::string_view r : absl::StrSplit(flags.resource_names, ',', absl::SkipWhitespace())) {
      pods.resource_names.emplace_back(absl::StripAsciiWhitespace(r));
    }
    // The pool is checked only against NODE_NAME: the host name of a pod is the pod's name.
    const char* node = std::getenv("NODE_NAME");
    pods.dra = {.driver = flags.dra_driver, .pool = node != nullptr ? node : ""};
    dra_pool = pods.dra.pool;
    options.pods = pods;
    Log(absl::StrCat("pod attribution from ", socket, socket_exists ? "" : " (not there yet)",
                     flags.dra_driver.empty() ? "" : absl::StrCat(", DRA claims of ", flags.dra_driver)));
  }

  if (flags.once) {
    // A GPU NVML cannot open keeps its bus id and name from sysfs and /proc (as when serving).
    options.bus_gpus = node::NvidiaGpusOnBus(node::ProbeHardware((*session)->fs()), node::ProbeKernelDriver((*session)->fs()));
    exporter::Exporter exp(**nvml, std::move(options));
    // Two sampling rounds one interval apart (at most 1 s): rates and GPM need two samples.
    exp.CollectOnce(std::chrono::milliseconds(std::min<int64_t>(interval_ms, 1000)));
    std::cout << *exp.Metrics();
    return kExitOk;
  }
  nvml->reset();  // the component opens the node's one NVML session itself
  // Serving: the agent's exporter component (src/agent) in its harness, with the settings
  // resolved above.
  agent::AgentConfig c;
  c.kubernetes.enabled = false;
  c.validator.enabled = false;
  c.log_format = flags.log_format;
  agent::ExporterSection& e = c.exporter;
  e.listen = flags.listen;
  e.collect_interval = std::chrono::milliseconds(interval_ms);
  e.kubernetes = options.pods.has_value();
  e.pod_resources_socket = socket;
  e.collectors = flags.collectors;
  e.web_config_file = flags.web_config_file;
  e.hostname_label = options.render.hostname_label;
  if (options.pods) e.resource_names = options.pods->resource_names;
  c.dra.driver_name = flags.dra_driver;
  c.node_name = dra_pool;  // the exporter component's DRA pool
  // Pod labels and UID: read from the API server (in-cluster, $KUBECONFIG or ~/.kube/config). As
  // dcgm-exporter, without a connection they are left out and the exporter serves on.
  std::unique_ptr<kube::Client> kube;
  if ((flags.pod_labels || flags.pod_uid) && options.pods) {
    e.pod_labels = flags.pod_labels;
    e.pod_uid = flags.pod_uid;
    e.pod_label_allowlist = flags.pod_label_allowlist;
    if (auto conn = kube::ResolveConnection(); conn.ok()) {
      Log(absl::StrCat("pod ", flags.pod_labels ? "labels" : "", flags.pod_labels && flags.pod_uid ? " and " : "",
                       flags.pod_uid ? "UID" : "", " from the API server (", conn->source, ")"));
      kube = std::make_unique<kube::Client>(*conn);
    } else {
      Log(absl::StrCat("pod labels and UID cannot be read: the Kubernetes API: ", conn.status().message()));
    }
  } else if (flags.pod_labels || flags.pod_uid) {
    Log("--kubernetes-enable-pod-labels/-uid need pod attribution (--kubernetes or the pod-resources socket): "
        "no pod labels or UID");
  }
  return RunComponentCommand(global, **session, c, "exporter", options.hostname, std::move(kube));
}

}  // namespace

void AddExporterCommand(CLI::App& app, GlobalOptions& global, int* exit_code) {
  auto flags = std::make_shared<ExporterFlags>();
  auto nv = std::make_shared<NvidiaFlags>("dcgm-exporter");
  CLI::App* cmd = app.add_subcommand(
      "exporter",
      "Prometheus exporter: dcgm-exporter's metrics (names, HELP, labels, flags) read from NVML directly");
  cmd->footer(R"(
Serves /metrics (Prometheus text 0.0.4), /health (200 when the last collection is recent and
succeeded, 503 with the reason otherwise) and / (a status page). GPUs are read by background
samplers every --collect-interval; a scrape never touches NVML. The energy counter and the
DCGM_FI_PROF_* ratios (NVML GPM, Hopper and newer) are read by a second sampler so they never
delay the others. Fields a GPU does not support are omitted (one log line at start).

Every flag and environment variable of dcgm-exporter 4.x is accepted with its spelling (booleans
bare or --flag=true|false); one that gpunode has nothing to do with is logged once as "does not
apply" and ignored (docs/nvidia-flags.md). -o is dcgm-exporter's --use-old-namespace here; give
gpunode's global -o/--output before the command.

Examples:
  gpunode exporter                                   # :9400, default counters, 30 s interval
  gpunode exporter -c 1000 --listen 127.0.0.1:9400   # 1 s samples, loopback only
  gpunode exporter -f /etc/dcgm-exporter/dcp-metrics-included.csv
  gpunode exporter --web-config-file web.yml         # TLS / basic auth (exporter-toolkit format)
  gpunode --simulate dgx-h200 exporter --once        # print one page and exit
  gpunode exporter --from-dir /run/gpunode/publish --health-listen :9401
                                                     # serve what the agent publishes (publishDir)
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
  cmd->add_option("--pod-resources-socket,--pod-resources-kubelet-socket", flags->pod_resources_socket,
                  std::string("kubelet pod-resources socket (default ") + kDefaultPodResourcesSocket +
                      ") [env DCGM_POD_RESOURCES_KUBELET_SOCKET]");
  cmd->add_option("--nvidia-resource-names", flags->resource_names,
                  "extra resource names to attribute, comma-separated (nvidia.com/gpu and nvidia.com/mig-* "
                  "always) [env NVIDIA_RESOURCE_NAMES]");
  cmd->add_option("--dra-driver-name", flags->dra_driver,
                  "the DRA driver whose ResourceClaims attribute GPUs to pods (its devices gpu-<minor>, "
                  "gpu-<minor>-mig-... in this node's pool, NODE_NAME)")
      ->capture_default_str();
  cmd->add_option("--hostname-label", flags->hostname_label,
                  "name of the host label: Hostname (every released dcgm-exporter) or hostname (its main "
                  "branch)")
      ->capture_default_str();
  cmd->add_option("--web-config-file", flags->web_config_file,
                  "TLS and basic-auth settings, Prometheus exporter-toolkit format "
                  "[env DCGM_EXPORTER_WEB_CONFIG_FILE]");
  cmd->add_flag("--once", flags->once, "print one /metrics page on stdout (after one sampling round) and exit");
  cmd->add_option("--from-dir", flags->from_dir,
                  "serve what `gpunode agent` publishes into this folder (its publishDir) instead of reading NVML: "
                  "the unprivileged front of privilege separation (docs/exporter.md)");
  cmd->add_option("--health-listen", flags->health_listen,
                  "with --from-dir: also serve the agent's /healthz, /readyz and component /metrics here "
                  "(what its healthListen served), e.g. :9401");
  cmd->add_option("--stale-after", flags->stale_after,
                  "with --from-dir: a heartbeat older than this answers 503 (default: 5 times the agent's write "
                  "period, 5s)");
  AddDcgmExporterFlags(cmd, *nv);
  cmd->callback([&global, flags, nv, cmd, exit_code] { *exit_code = RunExporter(global, *flags, *cmd, *nv); });
}

}  // namespace gpunode::cli
