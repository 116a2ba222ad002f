// The exporter component: `gpunode exporter` inside the agent, XIDs from the shared event pump.
// It serves on exporter.listen, publishes its pages into publishDir for the unprivileged front
// (src/exporter/publish.h), or both.
#include <sys/stat.h>

#include <condition_variable>
#include <mutex>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "src/agent/components.h"
#include "src/exporter/counters.h"
#include "src/exporter/exporter.h"
#include "src/exporter/http_server.h"
#include "src/exporter/pod_metadata.h"
#include "src/exporter/publish.h"
#include "src/exporter/web_config.h"
#include "src/node/probe.h"
#include "src/node/unreadable_gpus.h"

namespace gpunode::agent {
namespace {

class ExporterComponent final : public Component {
 public:
  ExporterComponent(NodeContext& ctx, ExporterSection s, std::string publish_dir, exporter::DraSource dra, Log& log,
                    std::function<std::string()> extra,
                    std::function<std::optional<exporter::RouteResponse>(std::string_view)> routes)
      : ctx_(ctx), s_(std::move(s)), publish_dir_(std::move(publish_dir)), dra_(std::move(dra)),
        log_(log), extra_(std::move(extra)), routes_(std::move(routes)) {}
  std::string name() const override { return "exporter"; }
  bool Ready() const override {
    absl::MutexLock lock(&mu_);
    return exporter_ != nullptr && exporter_->Health().ok;
  }

  Status Run(std::stop_token stop) override {
    if (s_.listen.empty() && publish_dir_.empty()) {
      return absl::InvalidArgumentError(
          "exporter.listen is \"\" and publishDir is not set: the metrics would be served nowhere");
    }
    std::vector<exporter::Counter> counters = exporter::DefaultCounters();
    if (!s_.collectors.empty()) {
      GPUNODE_ASSIGN_OR_RETURN(std::string text, HostFs::Local().ReadFile(s_.collectors));
      GPUNODE_ASSIGN_OR_RETURN(counters, exporter::ParseCounters(text, s_.collectors));
    }
    exporter::ServerOptions server_options;
    server_options.listen = s_.listen;
    server_options.routes = routes_;
    if (!s_.web_config_file.empty()) {
      GPUNODE_ASSIGN_OR_RETURN(exporter::WebConfig web, exporter::LoadWebConfig(s_.web_config_file));
      server_options.web = std::move(web);
    }
    Status why;
    const gpu::NvmlLibrary* nvml = ctx_.Nvml(&why);
    if (nvml == nullptr) return absl::FailedPreconditionError(absl::StrCat("NVML: ", why.message()));
    exporter::ExporterOptions options;
    options.counters = std::move(counters);
    options.interval = s_.collect_interval;
    options.hostname = ctx_.node_name();
    options.render.hostname_label = s_.hostname_label;
    options.log = log_.For(name());
    options.events = ctx_.Pump();
    options.extra_metrics = extra_;
    // A GPU lost before the first pass still gets its bus id and UUID: sysfs and /proc keep them.
    options.bus_gpus = node::NvidiaGpusOnBus(node::ProbeHardware(ctx_.fs()), node::ProbeKernelDriver(ctx_.fs()));
    struct stat st {};
    if (s_.kubernetes || ::stat(s_.pod_resources_socket.c_str(), &st) == 0) {
      exporter::PodMapperOptions pods;
      pods.socket_path = s_.pod_resources_socket;
      pods.resource_names = s_.resource_names;
      pods.dra = dra_;
      options.pods = pods;
      // The GPU pods' labels and UID through the agent's Kubernetes client (none without one: the
      // exporter logs that it cannot read them).
      if (s_.pod_labels || s_.pod_uid) {
        exporter::PodMetadataOptions md;
        md.labels = s_.pod_labels;
        md.uid = s_.pod_uid;
        GPUNODE_ASSIGN_OR_RETURN(md.filter, exporter::PodLabelFilter::Create(s_.pod_label_allowlist));
        options.pod_metadata = md;
        options.kube = ctx_.kube();
      }
    } else if (s_.pod_labels || s_.pod_uid) {
      log_.Warn(name(), "exporter.podLabels/podUid need pod attribution (the pod-resources socket "
                        "or exporter.kubernetes): no pod labels or UID");
    }
    auto exp = std::make_unique<exporter::Exporter>(*nvml, std::move(options));
    std::unique_ptr<exporter::MetricsServer> server;
    if (!s_.listen.empty()) {
      GPUNODE_ASSIGN_OR_RETURN(server, exporter::MetricsServer::Create(*exp, server_options));
    }
    std::optional<exporter::PublishDir> dir;
    if (!publish_dir_.empty()) {
      GPUNODE_ASSIGN_OR_RETURN(dir, exporter::PublishDir::Open(publish_dir_));
    }
    exp->Start();
    exporter::ExporterPageSource pages(*exp);
    std::unique_ptr<exporter::PagePublisher> publisher;
    if (dir) {
      exporter::PublisherOptions po;
      po.log = log_.For(name());
      publisher = std::make_unique<exporter::PagePublisher>(pages, *std::move(dir), std::move(po));
      publisher->Start().IgnoreError();  // a failed write is logged; the publisher tries every second
      log_.Info(name(), absl::StrCat("publishing /metrics, /health and / into ", publish_dir_,
                                     " every ", exporter::kDefaultPublishPeriod.count(), " ms"));
    }
    {
      absl::MutexLock lock(&mu_);
      exporter_ = exp.get();
    }
    if (server) {
      log_.Info(name(), absl::StrCat("serving ", server->tls() ? "https" : "http", " on ", s_.listen, " (port ",
                                     server->port(), "): /metrics, /health, /healthz, /readyz, /; collect interval ",
                                     s_.collect_interval.count(), " ms"));
      std::stop_callback on_stop(stop, [&] { server->Stop(); });
      server->Serve();
    } else {
      log_.Info(name(), absl::StrCat("no port (exporter.listen \"\"); collect interval ", s_.collect_interval.count(),
                                     " ms"));
      std::mutex m;
      std::condition_variable_any cv;
      std::unique_lock<std::mutex> lock(m);
      cv.wait(lock, stop, [] { return false; });
    }
    {
      absl::MutexLock lock(&mu_);
      exporter_ = nullptr;
    }
    if (publisher) publisher->Stop();  // removes the files: the front says "not published" at once
    exp->Stop();
    return absl::OkStatus();
  }

 private:
  NodeContext& ctx_;
  ExporterSection s_;
  std::string publish_dir_;
  exporter::DraSource dra_;  // the DRA driver whose claims attribute GPUs, this node's pool
  Log& log_;
  std::function<std::string()> extra_;
  std::function<std::optional<exporter::RouteResponse>(std::string_view)> routes_;
  mutable absl::Mutex mu_;
  exporter::Exporter* exporter_ ABSL_GUARDED_BY(mu_) = nullptr;  // while serving
};

}  // namespace

std::unique_ptr<Component> MakeExporter(NodeContext& ctx, const AgentConfig& c, Log& log,
                                        std::function<std::string()> extra_metrics,
                                        std::function<std::optional<exporter::RouteResponse>(std::string_view)> routes) {
  // DRA claims of the node's GPU driver (dra.driverName, whether or not the dra component runs:
  // NVIDIA's DRA driver has the same name) in this node's pool (its name; "": any pool).
  return std::make_unique<ExporterComponent>(ctx, c.exporter, c.publish_dir,
                                             exporter::DraSource{.driver = c.dra.driver_name, .pool = c.node_name}, log,
                                             std::move(extra_metrics), std::move(routes));
}

}  // namespace gpunode::agent
