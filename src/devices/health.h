// GPU health for the device plugin: a thread that waits on NVML events (XID critical errors, a GPU
// that falls off the bus) and polls each GPU once a second, and reports health changes through a
// callback. Application XIDs do not count (13, 31, 43, 45, 68, 109 by default); the environment
// variables DP_DISABLE_HEALTHCHECKS / DP_ENABLE_HEALTHCHECKS behave as in NVIDIA's plugin
// (shared/reference/device-plugin.md §1.6). Unlike NVIDIA's plugin, a GPU that answers NVML
// normally again for a quiet period (default 5 min) without a new critical XID is reported
// healthy again.
#ifndef GPUNODE_DEVICES_HEALTH_H_
#define GPUNODE_DEVICES_HEALTH_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "src/base/status.h"
#include "src/gpu/event_pump.h"
#include "src/gpu/nvml.h"

namespace gpunode::devices {

struct HealthOptions {
  bool disabled = false;                   // DP_DISABLE_HEALTHCHECKS=all|xids
  bool all_xids_fatal = false;             // DP_ENABLE_HEALTHCHECKS=all
  std::set<unsigned long long> ignored_xids = {13, 31, 43, 45, 68, 109};
  std::set<unsigned long long> forced_xids;  // DP_ENABLE_HEALTHCHECKS list: fatal even if ignored
  std::chrono::milliseconds recovery_quiet{std::chrono::minutes(5)};
  std::chrono::milliseconds poll_interval{1000};

  bool IsFatal(unsigned long long xid) const;
};

// Reads DP_DISABLE_HEALTHCHECKS and DP_ENABLE_HEALTHCHECKS from `env` over `base`. A token that
// is not a number, `all` or `xids` is InvalidArgument naming the variable.
StatusOr<HealthOptions> HealthOptionsFromEnvironment(const std::map<std::string, std::string>& env,
                                                     HealthOptions base = {});

struct HealthEvent {
  std::string uuid;  // the GPU's
  bool healthy = false;
  std::string reason;  // "XID 79", "GPU is lost", "answered NVML normally for 300 s"
};

class HealthMonitor {
 public:
  using Callback = std::function<void(const HealthEvent&)>;
  // `gpus` are (NVML index, UUID) of the GPUs to watch. The NVML library must outlive the monitor.
  // Events (critical XIDs, a lost GPU) come from `pump` when given (the agent's one event loop for
  // the whole process; it must outlive the monitor and be started by its owner); otherwise the
  // monitor runs a pump of its own over `gpus`.
  HealthMonitor(const gpu::NvmlLibrary& nvml, std::vector<std::pair<unsigned, std::string>> gpus,
                HealthOptions options, Callback callback, gpu::NvmlEventPump* pump = nullptr);
  ~HealthMonitor();
  HealthMonitor(const HealthMonitor&) = delete;
  HealthMonitor& operator=(const HealthMonitor&) = delete;

  void Start();  // no-op when options.disabled
  void Stop();

 private:
  void Run();  // the poll
  void OnEvent(const gpu::NvmlEvent& e);
  void Report(const std::string& uuid, bool healthy, const std::string& reason) ABSL_LOCKS_EXCLUDED(mu_);

  const gpu::NvmlLibrary& nvml_;
  std::vector<std::pair<unsigned, std::string>> gpus_;
  HealthOptions options_;
  Callback callback_;
  std::unique_ptr<gpu::NvmlEventPump> own_pump_;
  gpu::NvmlEventPump* pump_ = nullptr;
  int subscription_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  absl::Mutex mu_;  // events (pump thread) and the poll (own thread) both report
  // Only for the poll's timed wait, which Stop ends at once. A std::mutex: this abseil (20220623)
  // times Mutex and CondVar waits on the wall clock, the standard wait on the steady clock.
  std::mutex wait_mu_;
  std::condition_variable wake_;
  std::map<std::string, bool> healthy_ ABSL_GUARDED_BY(mu_);  // by UUID
  std::map<std::string, std::chrono::steady_clock::time_point> last_bad_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gpunode::devices

#endif  // GPUNODE_DEVICES_HEALTH_H_
