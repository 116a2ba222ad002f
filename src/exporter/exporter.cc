#include "src/exporter/exporter.h"

#include <algorithm>
#include <zlib.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace gpunode::exporter {
namespace {

bool IsSlowField(FieldId id) {
  return id == FieldId::kTotalEnergyConsumption || Field(id).name.rfind("DCGM_FI_PROF_", 0) == 0;
}

// RFC 1952 gzip of `text` (zlib level 6); nullptr on failure.
std::shared_ptr<const std::string> Gzip(const std::string& text) {
  z_stream z{};
  if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) return nullptr;
  std::string out(deflateBound(&z, static_cast<uLong>(text.size())) + 32, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = static_cast<uInt>(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  if (rc != Z_STREAM_END) return nullptr;
  return std::make_shared<const std::string>(std::move(out));
}

double Now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

Exporter::Exporter(const gpu::NvmlLibrary& nvml, ExporterOptions options)
    : nvml_(nvml), options_(std::move(options)), xids_(nvml, options_.events) {
  for (const Counter& c : options_.counters) {
    if (c.type == MetricType::kLabel) continue;
    wanted_[static_cast<size_t>(c.field->id)] = true;
    if (IsSlowField(c.field->id)) want_slow_ = true;
  }
  if (options_.pods) pods_ = std::make_unique<PodMapper>(*options_.pods);
  if (pods_ && options_.pod_metadata && (options_.pod_metadata->labels || options_.pod_metadata->uid)) {
    if (options_.kube != nullptr) {
      PodMetadataOptions o = *options_.pod_metadata;
      if (!o.log) o.log = options_.log;
      pod_metadata_ = std::make_unique<PodMetadataCache>(*options_.kube, std::move(o),
                                                         [this] { return pods_->Latest(); });
    } else {
      options_.log("pod labels and UID: no Kubernetes API connection, so they are not read (series keep pod, "
                   "namespace and container; pod_uid is \"\")");
    }
  }
}

Exporter::~Exporter() { Stop(); }

bool Exporter::WaitFor(std::chrono::milliseconds d) {
  std::unique_lock<std::mutex> lock(wait_mu_);
  return !wait_cv_.wait_for(lock, d, [this] { return stopping_; });
}

void Exporter::Start() {
  if (started_) return;
  started_ = true;
  if (pods_) pods_->Start();
  if (pod_metadata_) pod_metadata_->Start();
  StartXids();
  if (want_slow_) SlowPass();  // energy now; the first GPM sample (values need a second one)
  FastPass();
  if (!want_slow_) LogFieldSupport(/*final_round=*/false);
  fast_thread_ = std::thread([this] { FastLoop(); });
  if (want_slow_) slow_thread_ = std::thread([this] { SlowLoop(); });
}

void Exporter::StartXids() {
  if (!options_.watch_xids || !wanted_[static_cast<size_t>(FieldId::kXidErrors)]) return;
  std::vector<unsigned> indices;
  if (StatusOr<unsigned> n = nvml_.DeviceCount(); n.ok()) {
    for (unsigned i = 0; i < *n; ++i) indices.push_back(i);
  }
  const unsigned watched = xids_.Start(indices);
  options_.log(absl::StrCat("XID events: watching ", watched, " of ", indices.size(), " GPUs"));
}

void Exporter::CollectOnce(std::chrono::milliseconds gap) {
  if (started_) return;
  StartXids();  // XIDs during the gap count; DCGM_FI_DEV_XID_ERRORS is 0 when none came
  if (want_slow_) SlowPass();
  FastPass();
  std::this_thread::sleep_for(gap);
  if (want_slow_) SlowPass();
  FastPass();  // merges the second slow pass
  LogFieldSupport(/*final_round=*/true);
  xids_.Stop();
}

void Exporter::Stop() {
  {
    std::lock_guard<std::mutex> lock(wait_mu_);
    stopping_ = true;
  }
  wait_cv_.notify_all();
  if (fast_thread_.joinable()) fast_thread_.join();
  if (slow_thread_.joinable()) slow_thread_.join();
  xids_.Stop();
  if (pod_metadata_) pod_metadata_->Stop();
  if (pods_) pods_->Stop();
}

void Exporter::Every(const std::function<void()>& pass) {
  auto next = std::chrono::steady_clock::now() + options_.interval;
  while (true) {
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next - std::chrono::steady_clock::now());
    if (!WaitFor(std::max(wait, std::chrono::milliseconds(0)))) return;
    next += options_.interval;
    // A pass that overran skips the missed ticks instead of running back to back.
    if (next < std::chrono::steady_clock::now()) next = std::chrono::steady_clock::now() + options_.interval;
    pass();
  }
}

void Exporter::FastLoop() {
  Every([this] { FastPass(); });
}

void Exporter::SlowLoop() {
  // The first GPM values need a second sample: take it soon (DCGM waits at least 100 ms).
  if (!WaitFor(std::min(options_.interval, std::chrono::milliseconds(1000)))) return;
  SlowPass();
  LogFieldSupport(/*final_round=*/false);
  Every([this] { SlowPass(); });
}

void Exporter::SlowPass() {
  StatusOr<unsigned> count = nvml_.DeviceCount();
  if (!count.ok()) return;  // the fast pass reports it
  std::map<unsigned, SlowSample> out;
  std::map<std::string, uint64_t> errors;
  for (unsigned i = 0; i < *count; ++i) {
    StatusOr<nvmlDevice_t> dev = nvml_.DeviceHandle(i);
    if (!dev.ok()) continue;
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {0};
    if (nvml_.nvmlDeviceGetUUID(*dev, uuid, sizeof uuid) != NVML_SUCCESS) continue;
    SlowSample s;
    s.uuid = uuid;
    GpuExtrasState& state = slow_state_[i];
    if (wanted_[static_cast<size_t>(FieldId::kTotalEnergyConsumption)]) ReadEnergy(nvml_, *dev, s.values);
    ReadGpmFields(nvml_, *dev, wanted_, state, s.values);
    for (const auto& [field, status] : s.values.errors) ++errors[std::string(Field(field).name)];
    out.emplace(i, std::move(s));
  }
  absl::MutexLock lock(&slow_mu_);
  slow_ = std::move(out);
  for (const auto& [name, n] : errors) slow_errors_total_[name] += n;
}

void Exporter::FastPass() {
  const auto start = std::chrono::steady_clock::now();
  std::shared_ptr<const NodeSnapshot> previous = store_.Latest();
  NodeSnapshot snap;
  snap.hostname = options_.hostname;
  if (StatusOr<Version> driver = nvml_.DriverVersion(); driver.ok()) {
    snap.driver_version = driver->ToString();
  } else {
    ++fast_errors_total_["driver_version"];
  }
  if (StatusOr<Version> cuda = nvml_.CudaDriverVersion(); cuda.ok()) {
    snap.cuda_driver_version = cuda->ToString();
  }
  StatusOr<unsigned> count = nvml_.DeviceCount();
  if (!count.ok()) {
    snap.status = count.status();
    ++fast_errors_total_["device_count"];
  } else {
    std::map<unsigned, SlowSample> slow;
    {
      absl::MutexLock lock(&slow_mu_);
      slow = slow_;
    }
    snap.gpus.reserve(*count);
    for (unsigned i = 0; i < *count; ++i) {
      const GpuSample* before = nullptr;
      if (previous) {
        for (const GpuSample& g : previous->gpus) {
          if (g.index == i) before = &g;
        }
      }
      GpuSample s = SampleGpu(nvml_, i, before, /*read_energy=*/false);
      if (s.healthy) {
        if (StatusOr<nvmlDevice_t> dev = nvml_.DeviceHandle(i); dev.ok()) {
          ReadFastExtras(nvml_, *dev, wanted_, fast_state_[i], s);
        }
        if (auto it = slow.find(i); it != slow.end() && it->second.uuid == s.uuid) {
          for (size_t f = 0; f < kFieldCount; ++f) {
            if (it->second.values.values[f]) s.values[f] = it->second.values.values[f];
          }
        }
      } else {
        ++fast_errors_total_["gpu"];
      }
      // XIDs whether or not the GPU answers now: the XID 79 of a GPU that falls off the bus arrives
      // as it becomes unreadable, and is the one that must be seen.
      if (xids_.watching(i)) {
        XidWatcher::GpuXids x = xids_.For(i);
        s.xid_counts = std::move(x.counts);
        s.last_xid = x.last;
        if (s.healthy) s.set(FieldId::kXidErrors, static_cast<double>(x.last.value_or(0)));
      }
      for (const auto& [field, status] : s.errors) ++fast_errors_total_[std::string(Field(field).name)];
      snap.gpus.push_back(std::move(s));
    }
    IdentifyUnreadableGpus(snap, options_.bus_gpus);
    // One log line when a GPU stops answering and when it is back.
    for (const GpuSample& s : snap.gpus) {
      auto seen = last_healthy_.find(s.index);
      if (seen == last_healthy_.end() || seen->second != s.healthy) {
        if (!s.healthy) {
          options_.log(absl::StrCat("GPU ", s.index, " (", s.uuid.empty() ? "unknown UUID" : s.uuid,
                                    ") cannot be read", s.pci_bus_id.empty() ? "" : " at PCI ", s.pci_bus_id, ": ",
                                    s.status.message()));
        } else if (seen != last_healthy_.end()) {
          options_.log(absl::StrCat("GPU ", s.index, " (", s.uuid, ") answers again"));
        }
        last_healthy_[s.index] = s.healthy;
      }
    }
  }
  snap.collection_errors_total = fast_errors_total_;
  {
    absl::MutexLock lock(&slow_mu_);
    for (const auto& [name, n] : slow_errors_total_) snap.collection_errors_total[name] += n;
  }
  snap.collection_duration_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  snap.timestamp_seconds = Now();
  Publish(std::move(snap));
}

RenderOptions Exporter::CurrentRender(std::shared_ptr<const PodMapping>* mapping,
                                      std::shared_ptr<const PodMetadataSnapshot>* metadata) const {
  RenderOptions render = options_.render;
  *mapping = Pods();
  render.pods = mapping->get();
  if (options_.pod_metadata && pods_) {
    render.pod_labels = options_.pod_metadata->labels;
    render.pod_uid = options_.pod_metadata->uid;
  }
  if (pod_metadata_) {
    *metadata = pod_metadata_->Latest();
    render.pod_metadata = metadata->get();
  }
  return render;
}

void Exporter::Publish(NodeSnapshot snapshot) {
  store_.Publish(std::move(snapshot));
  std::shared_ptr<const NodeSnapshot> snap = store_.Latest();
  const uint64_t generation = pods_ ? pods_->generation() : 0;
  const uint64_t metadata_generation = pod_metadata_ ? pod_metadata_->generation() : 0;
  std::shared_ptr<const PodMapping> pods;
  std::shared_ptr<const PodMetadataSnapshot> metadata;
  std::string text = RenderMetrics(*snap, options_.counters, CurrentRender(&pods, &metadata));
  absl::MutexLock lock(&body_mu_);
  SetBody(std::move(text));
  body_snapshot_ = std::move(snap);
  body_pod_generation_ = generation;
  body_metadata_generation_ = metadata_generation;
}

std::shared_ptr<const PodMapping> Exporter::Pods() const {
  return pods_ ? pods_->Latest() : nullptr;
}

void Exporter::SetBody(std::string text) {
  if (options_.extra_metrics) text += options_.extra_metrics();
  body_.gzip = Gzip(text);
  body_.text = std::make_shared<const std::string>(std::move(text));
}

Exporter::RenderedPage Exporter::Page() {
  absl::MutexLock lock(&body_mu_);
  const uint64_t generation = pods_ ? pods_->generation() : 0;
  const uint64_t metadata_generation = pod_metadata_ ? pod_metadata_->generation() : 0;
  if (body_snapshot_ && (generation != body_pod_generation_ || metadata_generation != body_metadata_generation_)) {
    // The pod mapping or the pods' labels changed since the snapshot was rendered: relabel (text
    // work only, once per change).
    body_pod_generation_ = generation;
    body_metadata_generation_ = metadata_generation;
    std::shared_ptr<const PodMapping> pods;
    std::shared_ptr<const PodMetadataSnapshot> metadata;
    SetBody(RenderMetrics(*body_snapshot_, options_.counters, CurrentRender(&pods, &metadata)));
  }
  return body_;
}

Exporter::HealthState Exporter::Health() const {
  std::shared_ptr<const NodeSnapshot> snap = store_.Latest();
  if (!snap) return {false, "no collection has finished yet"};
  if (!snap->status.ok()) {
    return {false, absl::StrCat("the last collection failed: ", snap->status.message())};
  }
  const double age = Now() - snap->timestamp_seconds;
  const double limit = 2.0 * std::chrono::duration<double>(options_.interval).count() + 5.0;
  if (age > limit) {
    return {false, absl::StrCat("the last collection finished ", static_cast<long long>(age),
                                " s ago (collect interval ",
                                std::chrono::duration<double>(options_.interval).count(),
                                " s): the sampler is stuck")};
  }
  return {true, "OK"};
}

void Exporter::LogFieldSupport(bool final_round) {
  std::shared_ptr<const NodeSnapshot> snap = store_.Latest();
  if (!snap) return;
  std::map<unsigned, SlowSample> slow;
  {
    absl::MutexLock lock(&slow_mu_);
    slow = slow_;
  }
  std::vector<std::string> omitted, pending;
  for (const Counter& c : options_.counters) {
    if (c.type == MetricType::kLabel) continue;
    const FieldId id = c.field->id;
    bool any = false;
    for (const GpuSample& g : snap->gpus) any = any || g.value(id).has_value();
    for (const auto& [i, s] : slow) any = any || s.values.value(id).has_value();
    if (any) continue;
    // A rate read without error has no value until its second sample: not "unsupported". Only
    // the NVLink rate of the fast pass can still wait (GPM's ratios are logged after their second
    // sample, --once after both rounds); any other field without a value is not supported (e.g.
    // utilization of a GPU in MIG mode).
    const bool can_wait = id == FieldId::kNvlinkBandwidthTotal && !final_round;
    bool answered = false;
    for (const GpuSample& g : snap->gpus) answered = answered || (g.healthy && g.errors.count(id) == 0);
    if (c.field->produced && answered && can_wait) {
      pending.push_back(std::string(c.field->name));
      continue;
    }
    if (!c.field->produced) {
      omitted.push_back(absl::StrCat(std::string(c.field->name), " (not collected by gpunode: ", std::string(c.field->nvml_source), ")"));
    } else {
      omitted.push_back(absl::StrCat(std::string(c.field->name), " (no GPU supports it)"));
    }
  }
  if (omitted.empty()) {
    options_.log("every selected field is supported");
  } else {
    options_.log(absl::StrCat("omitting ", omitted.size(), " field(s): ", absl::StrJoin(omitted, ", ")));
  }
  if (!pending.empty()) {
    const auto secs = std::chrono::duration_cast<std::chrono::milliseconds>(options_.interval).count() / 1000.0;
    options_.log(absl::StrCat("first values after one collection interval (", secs,
                              " s; rates need two samples): ", absl::StrJoin(pending, ", ")));
  }
}

}  // namespace gpunode::exporter
