// XID errors for the exporter: a thread that waits on NVML's XID critical-error events for every
// GPU and counts them by GPU and code. dcgm-exporter only shows the last XID as a gauge
// (DCGM_FI_DEV_XID_ERRORS), which hides repeats; gpunode keeps both: the last code for the gauge and
// a count per code for gpunode_xid_errors_total{xid}.
#ifndef GPUNODE_EXPORTER_XID_H_
#define GPUNODE_EXPORTER_XID_H_

#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>
#include <vector>

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

  explicit XidWatcher(const NvmlLibrary& nvml) : nvml_(nvml) {}
  ~XidWatcher();
  XidWatcher(const XidWatcher&) = delete;
  XidWatcher& operator=(const XidWatcher&) = delete;

  // Registers XID events on each GPU of `indices` that supports them and starts the thread.
  // Returns how many GPUs are watched (0: no event support; the thread is not started).
  unsigned Start(const std::vector<unsigned>& indices);
  void Stop();
  bool watching(unsigned index) const;
  GpuXids For(unsigned index) const;

 private:
  void Run();

  const NvmlLibrary& nvml_;
  nvmlEventSet_t set_ = nullptr;
  std::map<nvmlDevice_t, unsigned> index_of_;  // registered GPUs
  mutable std::mutex mu_;
  std::map<unsigned, GpuXids> xids_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace gpunode::exporter

#endif  // GPUNODE_EXPORTER_XID_H_
