// XID errors for the exporter: a thread that waits on NVML's XID critical-error events for every
// GPU and counts them by GPU and code. dcgm-exporter only shows the last XID as a gauge
// (DCGM_FI_DEV_XID_ERRORS), which hides repeats; gpunode keeps both: the last code for the gauge and
// a count per code for gpunode_xid_errors_total{xid}.
#ifndef GPUNODE_EXPORTER_XID_H_
#define GPUNODE_EXPORTER_XID_H_

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "src/gpu/event_pump.h"
#include "src/gpu/nvml.h"

namespace gpunode::exporter {

// NVIDIA's short text for an XID ("GPU has fallen off the bus"); "Unknown XID" otherwise. 0 is
// "No Error" (dcgm-exporter's err_msg before any XID).
std::string_view XidDescription(unsigned long long xid);

class XidWatcher {
 public:
  struct GpuXids {
    std::map<unsigned long long, uint64_t> counts;  // code -> events since Start
    std::optional<unsigned long long> last;         // the last code seen
  };

  // Events come from `pump` when given (the process's one event loop, started by its owner, which
  // must outlive the watcher); otherwise the watcher runs a pump of its own.
  explicit XidWatcher(const gpu::NvmlLibrary& nvml, gpu::NvmlEventPump* pump = nullptr) : nvml_(nvml), pump_(pump) {}
  ~XidWatcher();
  XidWatcher(const XidWatcher&) = delete;
  XidWatcher& operator=(const XidWatcher&) = delete;

  // Counts XID events of the GPUs `indices` (its own pump registers them). Returns how many GPUs
  // are watched (0: no event support).
  unsigned Start(const std::vector<unsigned>& indices);
  void Stop();
  bool watching(unsigned index) const;
  GpuXids For(unsigned index) const;

 private:
  void OnEvent(const gpu::NvmlEvent& e);

  const gpu::NvmlLibrary& nvml_;
  gpu::NvmlEventPump* pump_ = nullptr;
  std::unique_ptr<gpu::NvmlEventPump> own_pump_;
  int subscription_ = 0;
  std::set<unsigned> indices_;  // the GPUs counted
  mutable absl::Mutex mu_;  // the pump's thread counts, scrapes read
  std::map<unsigned, GpuXids> xids_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gpunode::exporter

#endif  // GPUNODE_EXPORTER_XID_H_
