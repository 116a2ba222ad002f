#include "src/gpu/event_pump.h"

#include <pthread.h>

#include <chrono>

#include "src/base/backoff.h"

namespace gpunode::gpu {

NvmlEventPump::~NvmlEventPump() { Stop(); }

unsigned NvmlEventPump::Start(const std::vector<std::pair<unsigned, std::string>>& gpus) {
  if (started_) return registered_;
  started_ = true;
  if (nvml_.nvmlEventSetCreate(&set_) != NVML_SUCCESS) {  // e.g. FUNCTION_NOT_FOUND: no events
    set_ = nullptr;
    return 0;
  }
  for (const auto& [index, uuid] : gpus) {
    auto h = nvml_.DeviceHandle(index);
    if (!h.ok()) continue;
    unsigned long long supported = 0;
    if (nvml_.nvmlDeviceGetSupportedEventTypes(*h, &supported) != NVML_SUCCESS) continue;
    if ((supported & nvmlEventTypeXidCriticalError) == 0) continue;
    if (nvml_.nvmlDeviceRegisterEvents(*h, nvmlEventTypeXidCriticalError, set_) != NVML_SUCCESS) continue;
    gpu_of_[*h] = {index, uuid};
  }
  registered_ = static_cast<unsigned>(gpu_of_.size());
  if (registered_ == 0) {
    nvml_.nvmlEventSetFree(set_);
    set_ = nullptr;
    return 0;
  }
  thread_ = std::jthread([this](std::stop_token stop) {
    ::pthread_setname_np(::pthread_self(), "gn:nvml-events");
    Run(stop);
  });
  return registered_;
}

void NvmlEventPump::Stop() {
  if (thread_.joinable()) {
    thread_.request_stop();  // ends a pause at once; a wait in NVML within its 500 ms
    thread_.join();
  }
  if (set_ != nullptr) {
    nvml_.nvmlEventSetFree(set_);
    set_ = nullptr;
  }
}

bool NvmlEventPump::watching(unsigned index) const {
  for (const auto& [dev, gpu] : gpu_of_) {
    if (gpu.first == index) return true;
  }
  return false;
}

int NvmlEventPump::Subscribe(Subscriber s) {
  absl::MutexLock lock(&subscribers_mu_);
  const int id = next_id_++;
  subscribers_[id] = std::move(s);
  return id;
}

void NvmlEventPump::Unsubscribe(int id) {
  absl::MutexLock lock(&subscribers_mu_);
  subscribers_.erase(id);
}

void NvmlEventPump::Dispatch(const NvmlEvent& e) {
  absl::MutexLock lock(&subscribers_mu_);
  for (auto& [id, s] : subscribers_) s(e);
}

void NvmlEventPump::Run(std::stop_token stop) {
  // After an answer that is no event (a lost GPU NVML may report on every wait, a broken event
  // set): a pause on the clock, so the thread does not spin. Pollers notice lost GPUs too.
  Backoff pause({.initial = std::chrono::milliseconds(500), .max = std::chrono::milliseconds(500)});
  while (!stop.stop_requested()) {
    nvmlEventData_t data{};
    const nvmlReturn_t rc = nvml_.nvmlEventSetWait_v2(set_, &data, 500);
    if (rc == NVML_SUCCESS || rc == NVML_ERROR_GPU_IS_LOST) {
      if (rc == NVML_SUCCESS && (data.eventType & nvmlEventTypeXidCriticalError) == 0) continue;
      NvmlEvent e;
      e.kind = rc == NVML_SUCCESS ? NvmlEvent::Kind::kXid : NvmlEvent::Kind::kLost;
      e.xid = data.eventData;
      if (auto it = gpu_of_.find(data.device); it != gpu_of_.end()) {
        e.known = true;
        e.index = it->second.first;
        e.uuid = it->second.second;
      }
      Dispatch(e);
      if (rc == NVML_ERROR_GPU_IS_LOST) clock_.WaitFor(pause.Next(), stop);
    } else if (rc != NVML_ERROR_TIMEOUT) {
      clock_.WaitFor(pause.Next(), stop);  // a broken event set
    }
  }
}

}  // namespace gpunode::gpu
