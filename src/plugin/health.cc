#include "src/plugin/health.h"

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace gpunode::plugin {

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

HealthMonitor::HealthMonitor(const NvmlLibrary& nvml, std::vector<std::pair<unsigned, std::string>> gpus,
                             HealthOptions options, Callback callback)
    : nvml_(nvml), gpus_(std::move(gpus)), options_(std::move(options)), callback_(std::move(callback)) {
  for (const auto& [index, uuid] : gpus_) healthy_[uuid] = true;
}

HealthMonitor::~HealthMonitor() { Stop(); }

void HealthMonitor::Start() {
  // Disabled means no XID checks; a GPU that is lost is still noticed unless everything is off.
  if (options_.disabled && options_.forced_xids.empty() && !options_.all_xids_fatal) return;
  if (thread_.joinable()) return;
  stop_ = false;
  thread_ = std::thread([this] { Run(); });
}

void HealthMonitor::Stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

std::string HealthMonitor::UuidOf(nvmlDevice_t device) const {
  char buf[96] = {0};
  if (nvml_.fn().nvmlDeviceGetUUID(device, buf, sizeof buf) == NVML_SUCCESS) return buf;
  // A lost GPU no longer answers: find it by handle.
  for (const auto& [index, uuid] : gpus_) {
    auto h = nvml_.DeviceHandle(index);
    if (h.ok() && *h == device) return uuid;
  }
  return "";
}

void HealthMonitor::Report(const std::string& uuid, bool healthy, const std::string& reason) {
  if (!healthy) last_bad_[uuid] = std::chrono::steady_clock::now();
  if (healthy_[uuid] == healthy) return;
  healthy_[uuid] = healthy;
  callback_({uuid, healthy, reason});
}

void HealthMonitor::RegisterEvents() {
  const auto& fn = nvml_.fn();
  if (set_ != nullptr) {
    fn.nvmlEventSetFree(set_);
    set_ = nullptr;
  }
  if (fn.nvmlEventSetCreate(&set_) != NVML_SUCCESS) {
    set_ = nullptr;
    return;
  }
  for (const auto& [index, uuid] : gpus_) {
    auto h = nvml_.DeviceHandle(index);
    if (!h.ok()) continue;
    unsigned long long supported = 0;
    if (fn.nvmlDeviceGetSupportedEventTypes(*h, &supported) != NVML_SUCCESS) continue;
    const unsigned long long mask = supported & nvmlEventTypeXidCriticalError;
    if (mask != 0) fn.nvmlDeviceRegisterEvents(*h, mask, set_);
  }
}

void HealthMonitor::Run() {
  using Clock = std::chrono::steady_clock;
  const auto& fn = nvml_.fn();
  RegisterEvents();
  auto next_poll = Clock::now();
  const unsigned wait_ms = static_cast<unsigned>(std::min<int64_t>(options_.poll_interval.count(), 500));
  while (!stop_) {
    if (set_ != nullptr) {
      nvmlEventData_t data{};
      const nvmlReturn_t rc = fn.nvmlEventSetWait_v2(set_, &data, wait_ms);
      if (rc == NVML_SUCCESS && (data.eventType & nvmlEventTypeXidCriticalError)) {
        const std::string uuid = UuidOf(data.device);
        if (!uuid.empty() && options_.IsFatal(data.eventData)) {
          Report(uuid, false, absl::StrCat("XID ", data.eventData));
        }
      } else if (rc == NVML_ERROR_GPU_IS_LOST) {
        const std::string uuid = UuidOf(data.device);
        if (!uuid.empty()) Report(uuid, false, "GPU is lost (fell off the bus)");
      }
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms));
    }
    if (Clock::now() < next_poll) continue;
    next_poll = Clock::now() + options_.poll_interval;
    // The poll: each GPU must still answer; an unhealthy one that answered for the quiet period
    // with no new critical XID is healthy again.
    for (const auto& [index, uuid] : gpus_) {
      auto h = nvml_.DeviceHandle(index);
      char buf[96] = {0};
      const bool answers = h.ok() && fn.nvmlDeviceGetUUID(*h, buf, sizeof buf) == NVML_SUCCESS && uuid == buf;
      if (!answers) {
        Report(uuid, false, h.ok() ? "GPU does not answer NVML" : std::string(h.status().message()));
        continue;
      }
      if (!healthy_[uuid] && Clock::now() - last_bad_[uuid] >= options_.recovery_quiet) {
        Report(uuid, true,
               absl::StrCat("answered NVML normally for ",
                            std::chrono::duration_cast<std::chrono::seconds>(options_.recovery_quiet).count(),
                            " s with no critical XID"));
      }
    }
    // The event set stays as it is: its registrations outlive a GPU's bad spell, and a GPU lost
    // again is caught by this poll even when NVML reports the loss only once per registration.
  }
  if (set_ != nullptr) {
    fn.nvmlEventSetFree(set_);
    set_ = nullptr;
  }
}

}  // namespace gpunode::plugin
