// MIG GPU instances as their own entities, as dcgm-exporter shows them. With its default device
// selection (`-d f`) dcgm-exporter watches every GPU instance of a GPU in MIG mode instead of the
// GPU itself (NVIDIA/dcgm-exporter internal/pkg/devicemonitoring/device_monitoring.go,
// monitorAllGPUInstances: a GPU without instances is watched whole), and each series carries
// GPU_I_PROFILE and GPU_I_ID after modelName (internal/pkg/rendermetrics/render_metrics.go).
//
// What an instance series holds (DCGM 4.6 dcgmlib/src/dcgm_fields.cpp: each field's entity level;
// DcgmCacheManager.cpp answers a GPU-level field asked of a GPU instance with its parent GPU's):
//   DCGM_FI_DEV_FB_TOTAL/FREE/USED/RESERVED  the instance's own: nvmlDeviceGetMemoryInfo_v2 on a
//                                            MIG device of the instance (DCGM's ReadAndCacheFBMemoryInfo)
//   DCGM_FI_PROF_*                           per instance in DCGM (nvmlGpmMigSampleGet in NVML):
//                                            not produced by gpunode, left out of instance series
//   DCGM_FI_DEV_GPU_UTIL, MEM_COPY_UTIL,     NVML answers NOT_SUPPORTED on a GPU in MIG mode
//   ENC_UTIL, DEC_UTIL                       (nvml.h), so there is no value, as with DCGM
//   every other field (clocks, temperatures, the parent GPU's value, repeated on each instance
//   power, energy, PCIe, NVLink, remapped      series (issue NVIDIA/dcgm-exporter#713 shows
//   rows, XID)                                 DCGM_FI_DEV_SM_CLOCK with GPU_I_PROFILE="7g.79gb")
#ifndef GPUNODE_EXPORTER_MIG_SAMPLE_H_
#define GPUNODE_EXPORTER_MIG_SAMPLE_H_

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "src/base/status.h"
#include "src/exporter/catalogue.h"
#include "src/gpu/gpu.h"
#include "src/gpu/nvml.h"

namespace gpunode::exporter {

struct GpuSample;

// One GPU instance (DCGM's GPU_I entity) of a GPU in MIG mode.
struct MigInstanceSample {
  unsigned gpu_instance_id = 0;  // GPU_I_ID="2" (nvmlDeviceGetGpuInstanceId)
  std::string profile;           // GPU_I_PROFILE="3g.40gb" (MigInstanceProfileName)
  // The MIG devices of its compute instances ("MIG-..."): pod attribution, no label.
  std::vector<std::string> uuids;
  // Its GI profile id and placement start: NVIDIA's DRA device name ends with them
  // ("gpu-<minor>-mig-<profile>-<GI profile id>-<placement start>"); empty when NVML did not say.
  std::optional<unsigned> gi_profile_id;
  std::optional<unsigned> placement_start;
  // The instance's own framebuffer fields (kFbTotal, kFbFree, kFbUsed, kFbReserved), MiB.
  std::array<std::optional<double>, kFieldCount> values{};

  const std::optional<double>& value(FieldId id) const { return values[static_cast<size_t>(id)]; }
};

// DCGM's name of a GPU instance profile: "<slices>g.<memory in GiB, rounded up>gb" (DCGM 4.6
// DcgmCacheManager.cpp, GpuInstanceProfiles: `(memorySizeMB + 1024 - 1) / 1024`), so an A100 80GB's
// 7-slice instance of 80896 MiB is "7g.79gb" as dcgm-exporter labels it (its issue #713), where
// nvidia-smi says "7g.80gb". "" when the slice count or memory size is unknown.
std::string MigInstanceProfileName(std::optional<unsigned> slices, std::optional<uint64_t> memory_bytes);

// Whether `id` is one of the framebuffer fields an instance has of its own.
bool IsPerInstanceField(FieldId id);

// The value of `id` on the series of `instance` of GPU `gpu`: its own FB fields; nothing for the
// DCGM_FI_PROF_* ratios; the parent GPU's value for every other field.
std::optional<double> InstanceValue(const GpuSample& gpu, const MigInstanceSample& instance, FieldId id);

// The GPU instances of `info` (a GPU in MIG mode, as gpu::ReadGpu read it), by GPU instance id,
// with their memory read through a MIG device handle of each (nvmlDeviceGetMigDeviceHandleByIndex
// on `parent`, then nvmlDeviceGetMemoryInfo_v2). A failed memory read other than "not supported"
// goes to `errors` (field -> status) and leaves the instance's FB fields empty.
std::vector<MigInstanceSample> ReadMigInstances(const gpu::NvmlLibrary& nvml, nvmlDevice_t parent,
                                                const gpu::GpuInfo& info, std::map<FieldId, Status>* errors);

}  // namespace gpunode::exporter

#endif  // GPUNODE_EXPORTER_MIG_SAMPLE_H_
