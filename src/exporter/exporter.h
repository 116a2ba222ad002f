// The exporter's engine: background samplers fill a snapshot, a scrape only renders it.
//   - the fast sampler (every --collect-interval): clocks, temperatures, power, utilization,
//     memory, remapped rows, PCIe replays, encoder/decoder, NVLink rate: microsecond calls;
//   - the slow sampler (its own thread, same interval): the energy counter (~4 ms per GPU on an
//     H200) and GPM samples for the DCGM_FI_PROF_* ratios, so they never delay the fast ones;
//   - the XID watcher: NVML events, counted by GPU and code;
//   - the pod mapper (when enabled): kubelet pod-resources List in its own thread;
//   - the pod metadata reader (pod labels / UID on): a GET of each GPU pod, in its own thread.
// Each fast pass merges the latest slow values and XID counts, publishes the snapshot and renders
// the /metrics body once; scrapes get that body (re-rendered only when the pod mapping or the
// pods' metadata changed).
// NVML is never called from a scrape.
#ifndef GPUNODE_EXPORTER_EXPORTER_H_
#define GPUNODE_EXPORTER_EXPORTER_H_

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "src/exporter/counters.h"
#include "src/exporter/nvml_extras.h"
#include "src/exporter/pod_mapper.h"
#include "src/exporter/pod_metadata.h"
#include "src/exporter/render.h"
#include "src/exporter/sample.h"
#include "src/exporter/xid.h"
#include "src/gpu/nvml.h"

namespace gpunode::exporter {

struct ExporterOptions {
  std::vector<Counter> counters = DefaultCounters();
  std::chrono::milliseconds interval{30000};
  std::string hostname;  // Hostname label value
  RenderOptions render;
  // Pod attribution; nullopt = off (no pod labels, no gpunode_pod_mapping_* metrics).
  std::optional<PodMapperOptions> pods;
  // The pods' own labels and UID from the API server (dcgm-exporter's --kubernetes-enable-pod-labels,
  // --kubernetes-enable-pod-uid), through `kube` (which must outlive the exporter); only with `pods`.
  // Without a client they are not read: no pod labels, pod_uid="" (one log line).
  std::optional<PodMetadataOptions> pod_metadata;
  kube::Client* kube = nullptr;
  // The driver's GPUs as sysfs and /proc tell them (node::NvidiaGpusOnBus, read once by the caller): a
  // GPU NVML cannot open from the start (lost) still gets its pci_bus_id, UUID and model from
  // them (IdentifyUnreadableGpus). Empty: such a GPU has only what an earlier pass read.
  std::vector<node::BusGpu> bus_gpus;
  bool watch_xids = true;
  // The process's NVML event loop (the agent's); nullptr: the XID watcher runs its own.
  gpu::NvmlEventPump* events = nullptr;
  // Text appended to every rendered page (the agent's gpunode_component_* metrics), called when a
  // page is rendered (each sampling pass), never per scrape.
  std::function<std::string()> extra_metrics;
  // One line per notable event (start-up field support, GPUs lost/back); stderr in the CLI.
  std::function<void(const std::string&)> log = [](const std::string&) {};
};

class Exporter {
 public:
  // `nvml` must outlive the exporter.
  Exporter(const gpu::NvmlLibrary& nvml, ExporterOptions options);
  ~Exporter();
  Exporter(const Exporter&) = delete;
  Exporter& operator=(const Exporter&) = delete;

  // Runs the first passes in the caller (so the first scrape has data), then starts the threads.
  void Start();
  // `--once`: both passes, `gap`, both passes again (rates and GPM need two samples), all in the
  // caller and without threads; then Metrics() has the complete page. Not with Start().
  void CollectOnce(std::chrono::milliseconds gap);
  void Stop();

  // The /metrics body of the last snapshot (never nullptr after Start): Page().text.
  // The same with its gzip encoding, made once per snapshot (Prometheus asks for gzip: 45 KB of
  // text for 8 GPUs becomes ~3 KB, and no scrape pays for compressing it).
  struct RenderedPage {
    std::shared_ptr<const std::string> text;
    std::shared_ptr<const std::string> gzip;  // nullptr if compression failed
  };
  RenderedPage Page();
  std::shared_ptr<const std::string> Metrics() { return Page().text; }
  struct HealthState {
    bool ok = false;
    std::string reason;  // "OK", or why not
  };
  // ok when the last collection succeeded and is recent (within 2 intervals + 5 s).
  HealthState Health() const;
  std::shared_ptr<const NodeSnapshot> Latest() const { return store_.Latest(); }
  // nullptr when pod attribution is off.
  std::shared_ptr<const PodMapping> Pods() const;
  const ExporterOptions& options() const { return options_; }

 private:
  struct SlowSample {
    std::string uuid;
    GpuSample values;  // only the slow fields are set
  };
  void StartXids();
  void FastPass();
  void SlowPass();
  // Runs `pass` every interval until Stop (missed ticks are skipped, not made up).
  void Every(const std::function<void()>& pass);
  void FastLoop();
  void SlowLoop();
  void Publish(NodeSnapshot snapshot);
  // One log line of the selected fields no GPU has (and one of the rates still waiting for their
  // second sample, unless `final_round`: both sampling rounds are done).
  void LogFieldSupport(bool final_round);
  bool WaitFor(std::chrono::milliseconds d);  // false when stopping

  const gpu::NvmlLibrary& nvml_;
  ExporterOptions options_;
  std::array<bool, kFieldCount> wanted_{};
  bool want_slow_ = false;

  SnapshotStore store_;
  XidWatcher xids_;
  std::unique_ptr<PodMapper> pods_;
  std::unique_ptr<PodMetadataCache> pod_metadata_;

  // Per NVML index, owned by the thread that uses them.
  std::map<unsigned, GpuExtrasState> fast_state_;
  std::map<unsigned, GpuExtrasState> slow_state_;
  std::map<std::string, uint64_t> fast_errors_total_;

  mutable absl::Mutex slow_mu_;
  std::map<unsigned, SlowSample> slow_ ABSL_GUARDED_BY(slow_mu_);
  std::map<std::string, uint64_t> slow_errors_total_ ABSL_GUARDED_BY(slow_mu_);

  mutable absl::Mutex body_mu_;
  void SetBody(std::string text) ABSL_EXCLUSIVE_LOCKS_REQUIRED(body_mu_);
  RenderedPage body_ ABSL_GUARDED_BY(body_mu_);
  std::shared_ptr<const NodeSnapshot> body_snapshot_ ABSL_GUARDED_BY(body_mu_);
  uint64_t body_pod_generation_ ABSL_GUARDED_BY(body_mu_) = 0;
  uint64_t body_metadata_generation_ ABSL_GUARDED_BY(body_mu_) = 0;
  // The render options with the current pod mapping and metadata (kept alive by the caller's
  // `mapping` and `metadata` while it renders).
  RenderOptions CurrentRender(std::shared_ptr<const PodMapping>* mapping,
                              std::shared_ptr<const PodMetadataSnapshot>* metadata) const;

  // Only for the samplers' timed waits, which Stop ends at once. A std::mutex: this abseil
  // (20220623) times Mutex and CondVar waits on the wall clock, the standard wait on the steady
  // clock.
  std::mutex wait_mu_;
  std::condition_variable wait_cv_;
  bool stopping_ = false;
  bool started_ = false;
  std::thread fast_thread_;
  std::thread slow_thread_;
  std::map<unsigned, bool> last_healthy_;  // fast thread: for "GPU lost/back" log lines
};

}  // namespace gpunode::exporter

#endif  // GPUNODE_EXPORTER_EXPORTER_H_
