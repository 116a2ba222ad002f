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
  if (subscription_ != 0) return static_cast<unsigned>(indices_.size());
  if (pump_ == nullptr) {
    own_pump_ = std::make_unique<gpu::NvmlEventPump>(nvml_);
    std::vector<std::pair<unsigned, std::string>> gpus;
    for (unsigned i : indices) gpus.emplace_back(i, "");
    if (own_pump_->Start(gpus) == 0) {
      own_pump_.reset();
      return 0;
    }
    pump_ = own_pump_.get();
  }
  for (unsigned i : indices) {
    if (pump_->watching(i)) indices_.insert(i);
  }
  subscription_ = pump_->Subscribe([this](const gpu::NvmlEvent& e) { OnEvent(e); });
  return static_cast<unsigned>(indices_.size());
}

void XidWatcher::Stop() {
  if (subscription_ != 0) {
    pump_->Unsubscribe(subscription_);
    subscription_ = 0;
  }
  if (own_pump_) {
    own_pump_->Stop();
    own_pump_.reset();
    pump_ = nullptr;
  }
}

bool XidWatcher::watching(unsigned index) const { return indices_.count(index) > 0; }

XidWatcher::GpuXids XidWatcher::For(unsigned index) const {
  absl::MutexLock lock(&mu_);
  auto it = xids_.find(index);
  return it == xids_.end() ? GpuXids{} : it->second;
}

void XidWatcher::OnEvent(const gpu::NvmlEvent& e) {
  if (e.kind != gpu::NvmlEvent::Kind::kXid || !e.known || indices_.count(e.index) == 0) return;
  absl::MutexLock lock(&mu_);
  GpuXids& x = xids_[e.index];
  ++x.counts[e.xid];
  x.last = e.xid;
}

}  // namespace gpunode::exporter
