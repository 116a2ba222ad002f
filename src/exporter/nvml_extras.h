// dcgm-exporter fields that need NVML calls beyond gpu::ReadGpu (reference monitoring.md §2, §2.1):
//   DCGM_FI_DEV_MEMORY_TEMP            nvmlDeviceGetFieldValues(NVML_FI_DEV_MEMORY_TEMP), C
//   DCGM_FI_DEV_PCIE_REPLAY_COUNTER    nvmlDeviceGetPcieReplayCounter, count
//   DCGM_FI_DEV_ENC_UTIL / _DEC_UTIL   nvmlDeviceGetEncoderUtilization / ...DecoderUtilization, %
//   DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL field values NVLINK_THROUGHPUT_DATA_TX + _RX (scope: all
//                                      links), cumulative KiB; reported as DCGM does:
//                                      (delta of the sum / delta t in seconds) / 1000 between two
//                                      passes (the first pass gives nothing)
//   DCGM_FI_PROF_*                     NVML GPM (Hopper+): two samples >= 100 ms apart;
//                                      percentages / 100 (ratio), PCIe MiB/s * 1048576 (B/s)
// "Not supported" (the GPU, the driver, or a missing entry point; for a field-value entry also
// INVALID_ARGUMENT, a driver that does not know the id) leaves the field empty and adds no error;
// any other failure goes to GpuSample::errors for the field (e.g. GPU_IS_LOST -> kUnavailable).
#ifndef GPUNODE_EXPORTER_NVML_EXTRAS_H_
#define GPUNODE_EXPORTER_NVML_EXTRAS_H_

#include <array>
#include <functional>
#include <optional>

#include "src/exporter/catalogue.h"
#include "src/exporter/sample.h"
#include "src/gpu/nvml.h"

namespace gpunode::exporter {

// Per-GPU state kept between passes: the last NVLink counters (for the rate) and the GPM sample
// buffers. One state per GPU per thread that reads it; not thread-safe. Movable, not copyable.
// The gpu::NvmlLibrary used with it must outlive it (the destructor frees the GPM samples through it).
class GpuExtrasState {
 public:
  // `monotonic_seconds` is the clock for rates and the 100 ms GPM spacing (default: steady_clock).
  explicit GpuExtrasState(std::function<double()> monotonic_seconds = {});
  ~GpuExtrasState();
  GpuExtrasState(GpuExtrasState&& other) noexcept;
  GpuExtrasState& operator=(GpuExtrasState&& other) noexcept;
  GpuExtrasState(const GpuExtrasState&) = delete;
  GpuExtrasState& operator=(const GpuExtrasState&) = delete;

  // Forgets the NVLink baseline and frees the GPM samples (e.g. when the GPU was replaced); the
  // remembered "GPM unsupported" answer is kept.
  void Reset();

  // nullopt until nvmlGpmQueryDeviceSupport answered; then whether GPM works on this GPU.
  std::optional<bool> gpm_supported() const { return gpm_supported_; }

 private:
  friend void ReadFastExtras(const gpu::NvmlLibrary&, nvmlDevice_t, const std::array<bool, kFieldCount>&,
                             GpuExtrasState&, GpuSample&);
  friend bool ReadGpmFields(const gpu::NvmlLibrary&, nvmlDevice_t, const std::array<bool, kFieldCount>&,
                            GpuExtrasState&, GpuSample&);
  double Now() const;
  void FreeSamples();

  std::function<double()> clock_;
  // NVLink: the last TX + RX sum (KiB) and when it was read.
  std::optional<unsigned long long> nvlink_sum_kib_;
  double nvlink_time_ = 0;
  // GPM.
  std::optional<bool> gpm_supported_;
  const gpu::NvmlLibrary* nvml_ = nullptr;    // the library that allocated the samples
  nvmlGpmSample_t gpm_previous_ = nullptr;  // the older sample, filled at gpm_previous_time_
  double gpm_previous_time_ = 0;
  nvmlGpmSample_t gpm_current_ = nullptr;  // the buffer for the next sample
};

// Fast reads (microseconds each): memory temperature, PCIe replays, encoder/decoder utilisation,
// NVLink bandwidth rate. Sets sample.set(field, value) for what the GPU supports and adds
// sample.errors for failures other than "not supported". Only fields with wanted[field] are read.
void ReadFastExtras(const gpu::NvmlLibrary& nvml, nvmlDevice_t dev,
                    const std::array<bool, kFieldCount>& wanted, GpuExtrasState& state,
                    GpuSample& sample);

// GPM: takes a new sample; when the previous one is >= 100 ms old, sets the wanted
// DCGM_FI_PROF_* fields from the pair (and the new sample becomes the previous one). Returns false
// and sets nothing when GPM is unsupported on this GPU (asked once, then remembered in `state`).
// With no PROF field wanted it calls nothing.
bool ReadGpmFields(const gpu::NvmlLibrary& nvml, nvmlDevice_t dev,
                   const std::array<bool, kFieldCount>& wanted, GpuExtrasState& state,
                   GpuSample& sample);

// The GPM metric behind a DCGM_FI_PROF_* field and the factor DCGM applies (0.01 for percent ->
// ratio, 1048576 for MiB/s -> B/s); nullopt for other fields.
struct GpmMapping {
  unsigned metric_id;
  double scale;
};
std::optional<GpmMapping> GpmMetricFor(FieldId field);

}  // namespace gpunode::exporter

#endif  // GPUNODE_EXPORTER_NVML_EXTRAS_H_
