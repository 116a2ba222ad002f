#include "src/devices/health.h"

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace gpunode::devices {

bool HealthOptions::IsFatal(unsigned long long xid) const {
  if (all_xids_fatal || forced_xids.count(xid)) return true;
  if (disabled) return false;
  return !ignored_xids.count(xid);
}

StatusOr<HealthOptions> HealthOptionsFromEnvironment(const std::map<std::string, std::string>& env,
                                                     HealthOptions base) {
  auto list = [&](const char* name, bool* all, std::set<unsigned long long>* out) -> Status {
    auto it = env.find(name);
    if (it == env.end()) return absl::OkStatus();
    for (absl::string_view t : absl::StrSplit(it->second, ',')) {
      t = absl::StripAsciiWhitespace(t);
      if (t.empty()) continue;
      if (t == "all" || t == "xids") {
        *all = true;
        continue;
      }
      unsigned long long xid = 0;
      if (!absl::SimpleAtoi(t, &xid)) {
        return absl::InvalidArgumentError(
            absl::StrCat("environment variable ", name, ": \"", t, "\" is not an XID number, `all` or `xids`"));
      }
      out->insert(xid);
    }
    return absl::OkStatus();
  };
  HealthOptions o = base;
  GPUNODE_RETURN_IF_ERROR(list("DP_DISABLE_HEALTHCHECKS", &o.disabled, &o.ignored_xids));
  GPUNODE_RETURN_IF_ERROR(list("DP_ENABLE_HEALTHCHECKS", &o.all_xids_fatal, &o.forced_xids));
  return o;
}

HealthMonitor::HealthMonitor(const gpu::NvmlLibrary& nvml, std::vector<std::pair<unsigned, std::string>> gpus,
                             HealthOptions options, Callback callback, gpu::NvmlEventPump* pump)
    : nvml_(nvml), gpus_(std::move(gpus)), options_(std::move(options)), callback_(std::move(callback)), pump_(pump) {
  for (const auto& [index, uuid] : gpus_) healthy_[uuid] = true;
}

HealthMonitor::~HealthMonitor() { Stop(); }

void HealthMonitor::Start() {
  // Disabled means no XID checks; a GPU that is lost is still noticed unless everything is off.
  if (options_.disabled && options_.forced_xids.empty() && !options_.all_xids_fatal) return;
  if (thread_.joinable()) return;
  stop_ = false;
  if (pump_ == nullptr) {
    own_pump_ = std::make_unique<gpu::NvmlEventPump>(nvml_);
    pump_ = own_pump_.get();
  }
  subscription_ = pump_->Subscribe([this](const gpu::NvmlEvent& e) { OnEvent(e); });
  if (own_pump_) own_pump_->Start(gpus_);
  thread_ = std::thread([this] { Run(); });
}

void HealthMonitor::Stop() {
  if (subscription_ != 0) {
    pump_->Unsubscribe(subscription_);
    subscription_ = 0;
  }
  if (own_pump_) {
    own_pump_->Stop();
    own_pump_.reset();
    pump_ = nullptr;
  }
  {
    std::lock_guard<std::mutex> lock(wait_mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void HealthMonitor::OnEvent(const gpu::NvmlEvent& e) {
  if (!e.known) return;
  bool ours = false;
  for (const auto& [index, uuid] : gpus_) ours = ours || uuid == e.uuid;
  if (!ours) return;
  if (e.kind == gpu::NvmlEvent::Kind::kLost) {
    Report(e.uuid, false, "GPU is lost (fell off the bus)");
  } else if (options_.IsFatal(e.xid)) {
    Report(e.uuid, false, absl::StrCat("XID ", e.xid));
  }
}

void HealthMonitor::Report(const std::string& uuid, bool healthy, const std::string& reason) {
  absl::MutexLock lock(&mu_);
  if (!healthy) last_bad_[uuid] = std::chrono::steady_clock::now();
  if (healthy_[uuid] == healthy) return;
  healthy_[uuid] = healthy;
  callback_({uuid, healthy, reason});
}

void HealthMonitor::Run() {
  using Clock = std::chrono::steady_clock;
  while (!stop_) {
    // The poll: each GPU must still answer; an unhealthy one that answered for the quiet period
    // with no new critical XID is healthy again. Events arrive meanwhile through the pump.
    for (const auto& [index, uuid] : gpus_) {
      auto h = nvml_.DeviceHandle(index);
      char buf[96] = {0};
      const bool answers = h.ok() && nvml_.nvmlDeviceGetUUID(*h, buf, sizeof buf) == NVML_SUCCESS && uuid == buf;
      if (!answers) {
        Report(uuid, false, h.ok() ? "GPU does not answer NVML" : std::string(h.status().message()));
        continue;
      }
      bool recover = false;
      {
        absl::MutexLock lock(&mu_);
        recover = !healthy_[uuid] && Clock::now() - last_bad_[uuid] >= options_.recovery_quiet;
      }
      if (recover) {
        Report(uuid, true,
               absl::StrCat("answered NVML normally for ",
                            std::chrono::duration_cast<std::chrono::seconds>(options_.recovery_quiet).count(),
                            " s with no critical XID"));
      }
    }
    // One wake-up per poll interval; Stop ends the wait at once.
    std::unique_lock<std::mutex> lock(wait_mu_);
    wake_.wait_for(lock, options_.poll_interval, [this] { return stop_.load(); });
  }
}

}  // namespace gpunode::devices
