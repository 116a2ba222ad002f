#include "src/exporter/xid.h"

#include <utility>

namespace gpunode::exporter {

std::string_view XidDescription(unsigned long long xid) {
  // NVIDIA's XID catalogue (docs.nvidia.com/deploy/xid-errors), the codes seen on data-centre GPUs.
  static const auto* const kTexts = new std::map<unsigned long long, std::string_view>{
      {0, "No Error"},
      {13, "Graphics Engine Exception"},
      {31, "GPU memory page fault"},
      {32, "Invalid or corrupted push buffer stream"},
      {43, "GPU stopped processing"},
      {45, "Preemptive cleanup, due to previous errors"},
      {48, "Double Bit ECC Error"},
      {61, "Internal micro-controller breakpoint/warning"},
      {62, "Internal micro-controller halt"},
      {63, "ECC page retirement or row remapping recording event"},
      {64, "ECC page retirement or row remapper recording failure"},
      {68, "NVDEC0 Exception"},
      {69, "Graphics Engine class error"},
      {74, "NVLINK Error"},
      {79, "GPU has fallen off the bus"},
      {92, "High single-bit ECC error rate"},
      {94, "Contained ECC error"},
      {95, "Uncontained ECC error"},
      {109, "Context Switch Timeout Error"},
      {119, "GSP RPC Timeout"},
      {120, "GSP Error"},
      {121, "C2C Link corrected error"},
      {140, "Unrecovered ECC Error"},
      {143, "GPU Initialization Failure"},
      {154, "GPU Recovery Action Changed"},
  };
  auto it = kTexts->find(xid);
  return it == kTexts->end() ? std::string_view("Unknown XID") : it->second;
}

XidWatcher::~XidWatcher() { Stop(); }

unsigned XidWatcher::Start(const std::vector<unsigned>& indices) {
  if (thread_.joinable()) return static_cast<unsigned>(index_of_.size());
  const auto& fn = nvml_.fn();
  if (fn.nvmlEventSetCreate == nullptr || fn.nvmlEventSetCreate(&set_) != NVML_SUCCESS) {
    set_ = nullptr;
    return 0;
  }
  for (unsigned index : indices) {
    auto h = nvml_.DeviceHandle(index);
    if (!h.ok()) continue;
    unsigned long long supported = 0;
    if (fn.nvmlDeviceGetSupportedEventTypes(*h, &supported) != NVML_SUCCESS) continue;
    if ((supported & nvmlEventTypeXidCriticalError) == 0) continue;
    if (fn.nvmlDeviceRegisterEvents(*h, nvmlEventTypeXidCriticalError, set_) != NVML_SUCCESS) continue;
    index_of_[*h] = index;
  }
  if (index_of_.empty()) {
    fn.nvmlEventSetFree(set_);
    set_ = nullptr;
    return 0;
  }
  stop_ = false;
  thread_ = std::thread([this] { Run(); });
  return static_cast<unsigned>(index_of_.size());
}

void XidWatcher::Stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  if (set_ != nullptr) {
    nvml_.fn().nvmlEventSetFree(set_);
    set_ = nullptr;
  }
}

bool XidWatcher::watching(unsigned index) const {
  for (const auto& [dev, i] : index_of_) {
    if (i == index) return true;
  }
  return false;
}

XidWatcher::GpuXids XidWatcher::For(unsigned index) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = xids_.find(index);
  return it == xids_.end() ? GpuXids{} : it->second;
}

void XidWatcher::Run() {
  const auto& fn = nvml_.fn();
  while (!stop_) {
    nvmlEventData_t data{};
    const nvmlReturn_t rc = fn.nvmlEventSetWait_v2(set_, &data, 500);
    if (rc == NVML_SUCCESS) {
      if ((data.eventType & nvmlEventTypeXidCriticalError) == 0) continue;
      auto it = index_of_.find(data.device);
      if (it == index_of_.end()) continue;
      std::lock_guard<std::mutex> lock(mu_);
      GpuXids& x = xids_[it->second];
      ++x.counts[data.eventData];
      x.last = data.eventData;
    } else if (rc != NVML_ERROR_TIMEOUT) {
      // A lost GPU or a broken event set: do not spin. The sampler reports lost GPUs itself.
      for (int i = 0; i < 5 && !stop_; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
}

}  // namespace gpunode::exporter
