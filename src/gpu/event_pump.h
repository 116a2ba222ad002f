// One NVML event loop per process. NVML delivers critical XIDs and "GPU is lost" through an event
// set that one thread waits on; the device plugin's health monitor and the exporter's XID counters
// both need them. The pump owns that set and that thread and hands each event to every subscriber,
// so a process that runs both (the agent) waits on NVML once, and each consumer is a plain callback
// that tests can also call directly.
#ifndef GPUNODE_GPU_EVENT_PUMP_H_
#define GPUNODE_GPU_EVENT_PUMP_H_

#include <atomic>
#include <functional>
#include <map>
#include <stop_token>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "src/base/clock.h"
#include "src/gpu/nvml.h"

namespace gpunode::gpu {

struct NvmlEvent {
  enum class Kind { kXid, kLost };
  Kind kind = Kind::kXid;
  unsigned index = 0;       // NVML index of the GPU (valid when `known`)
  std::string uuid;         // as given to Start
  bool known = false;       // false: NVML named a device we do not watch
  unsigned long long xid = 0;  // kXid: the XID code
};

class NvmlEventPump {
 public:
  using Subscriber = std::function<void(const NvmlEvent&)>;

  // `nvml` (and `clock`, on which its pauses after errors are taken) must outlive the pump.
  explicit NvmlEventPump(const NvmlLibrary& nvml, Clock& clock = SystemClock()) : nvml_(nvml), clock_(clock) {}
  ~NvmlEventPump();
  NvmlEventPump(const NvmlEventPump&) = delete;
  NvmlEventPump& operator=(const NvmlEventPump&) = delete;

  // Registers critical-XID events on each GPU (NVML index, UUID) that supports them and starts the
  // thread. Returns how many GPUs are registered; 0 means no event support (the thread still runs
  // nothing and subscribers simply get no events: pollers must not rely on the pump). Calling it
  // again while running changes nothing and returns the same count.
  unsigned Start(const std::vector<std::pair<unsigned, std::string>>& gpus);
  void Stop();
  // Whether GPU `index` is registered for events.
  bool watching(unsigned index) const;

  // Any thread. The callback runs on the pump's thread: keep it short, never call back into the
  // pump. Unsubscribe waits until a running callback of that subscriber has returned.
  int Subscribe(Subscriber s);
  void Unsubscribe(int id);

  // Hands `e` to every subscriber, as the pump thread does (tests, and injected events).
  void Dispatch(const NvmlEvent& e);

 private:
  void Run(std::stop_token stop);

  const NvmlLibrary& nvml_;
  nvmlEventSet_t set_ = nullptr;
  std::map<nvmlDevice_t, std::pair<unsigned, std::string>> gpu_of_;  // registered GPUs
  Clock& clock_;
  std::jthread thread_;
  bool started_ = false;
  unsigned registered_ = 0;

  absl::Mutex subscribers_mu_;  // held while callbacks run, so Unsubscribe waits for them
  std::map<int, Subscriber> subscribers_ ABSL_GUARDED_BY(subscribers_mu_);
  int next_id_ ABSL_GUARDED_BY(subscribers_mu_) = 1;
};

}  // namespace gpunode::gpu

#endif  // GPUNODE_GPU_EVENT_PUMP_H_
