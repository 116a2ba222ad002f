// Reads one GPU's snapshot (GpuInfo) through a loaded NvmlLibrary.
#ifndef GPUNODE_GPU_GPU_READER_H_
#define GPUNODE_GPU_GPU_READER_H_

#include <string>
#include "absl/strings/string_view.h"

#include "src/gpu/gpu.h"
#include "src/gpu/nvml.h"

namespace gpunode::gpu {

// Every field of GpuInfo for GPU `index`. Fails as a whole only when the GPU cannot be opened or
// is lost (kUnavailable with NVML_ERROR_GPU_IS_LOST); unsupported fields stay empty and other
// per-field failures land in GpuInfo::field_errors.
struct GpuReadOptions {
  // Power draw, SM/memory clocks and utilization: what a monitor samples, not what a check needs.
  // Their first calls cost ~5 ms per GPU (NVML sets them up lazily), so doctor leaves them out.
  bool live_metrics = true;
};
StatusOr<GpuInfo> ReadGpu(const NvmlLibrary& nvml, unsigned index, const GpuReadOptions& options = {});

// NVML's "00000000:1B:00.0" -> sysfs's "0000:1b:00.0". Returns the input lower-cased when it does
// not have that shape.
std::string NormalizeBusId(absl::string_view bus_id);

}  // namespace gpunode::gpu

#endif  // GPUNODE_GPU_GPU_READER_H_
