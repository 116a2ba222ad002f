// The Gpu model: one immutable snapshot of what NVML reported for one GPU.
// A field NVML does not support on this GPU is an empty optional, never 0; a field whose query
// failed for another reason is empty too, and the failure is kept in `field_errors`.
#ifndef GPUNODE_GPU_GPU_H_
#define GPUNODE_GPU_GPU_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "src/base/status.h"

namespace gpunode::gpu {

struct RemappedRows {
  unsigned correctable = 0;
  unsigned uncorrectable = 0;
  bool pending = false;
  bool failure = false;
};

struct GpuProcess {
  unsigned pid = 0;
  std::optional<uint64_t> used_memory_bytes;
};

struct MigDevice {
  unsigned index = 0;  // slot in nvmlDeviceGetMigDeviceHandleByIndex
  std::string uuid;
  std::optional<unsigned> gpu_instance_id;
  std::optional<unsigned> compute_instance_id;
  // Its GPU instance (nvmlDeviceGetGpuInstanceById + nvmlGpuInstanceGetInfo): the GI profile id
  // nvidia-smi shows (19 for 1g.10gb on an A100 40GB) and its memory slices; NVIDIA's DRA driver
  // names MIG devices by them.
  std::optional<unsigned> gi_profile_id;
  std::optional<unsigned> placement_start;
  std::optional<unsigned> placement_size;
  std::optional<unsigned> slices;            // gpuInstanceSliceCount
  std::optional<unsigned> compute_slices;    // computeInstanceSliceCount
  std::optional<uint64_t> memory_total_bytes;
  std::optional<unsigned> multiprocessors;
  // Engines the MIG device shares (nvmlDeviceAttributes_t: shared*Count).
  std::optional<unsigned> copy_engines;
  std::optional<unsigned> decoders;
  std::optional<unsigned> encoders;
  std::optional<unsigned> jpegs;
  std::optional<unsigned> ofas;
};

struct NvLinkState {
  unsigned link = 0;
  bool active = false;
  std::string remote_bus_id;  // empty when unknown
};

struct GpuInfo {
  unsigned index = 0;
  std::string name;
  std::string uuid;
  std::string pci_bus_id;        // normalised "0000:18:00.0" (NVML prints 8-digit domains)
  uint16_t pci_device_id = 0;    // e.g. 0x2335
  uint32_t pci_subsystem_id = 0;
  std::optional<unsigned> minor_number;
  std::optional<std::string> vbios_version;

  std::optional<uint64_t> memory_total_bytes;
  std::optional<uint64_t> memory_used_bytes;
  std::optional<uint64_t> memory_free_bytes;
  std::optional<uint64_t> memory_reserved_bytes;

  std::optional<bool> persistence_mode;
  std::optional<bool> ecc_enabled;
  std::optional<bool> ecc_pending;
  std::optional<uint64_t> ecc_corrected_volatile;
  std::optional<uint64_t> ecc_uncorrected_volatile;
  std::optional<uint64_t> ecc_corrected_aggregate;
  std::optional<uint64_t> ecc_uncorrected_aggregate;
  std::optional<bool> retired_pages_pending;
  std::optional<RemappedRows> remapped_rows;

  std::optional<unsigned> pcie_gen_current;
  std::optional<unsigned> pcie_gen_max;      // max of GPU and system
  std::optional<unsigned> pcie_gen_gpu_max;  // what the GPU itself can do
  std::optional<unsigned> pcie_width_current;
  std::optional<unsigned> pcie_width_max;

  std::optional<unsigned> temperature_c;
  std::optional<double> power_usage_w;
  std::optional<double> power_limit_w;
  std::optional<double> power_enforced_limit_w;
  std::optional<unsigned> sm_clock_mhz;
  std::optional<unsigned> mem_clock_mhz;
  std::optional<unsigned> utilization_gpu_pct;
  std::optional<unsigned> utilization_memory_pct;

  std::optional<int> cc_major;
  std::optional<int> cc_minor;
  // NVML's own codes: nvmlDeviceArchitecture_t (9 Hopper), nvmlBrandType_t (14 NVIDIA) and the
  // addressing mode (0 none, 1 HMM, 2 ATS; empty where NOT_SUPPORTED) (src/gpu/nvml_abi.h).
  std::optional<unsigned> architecture;
  std::optional<unsigned> brand;
  std::optional<unsigned> addressing_mode;

  std::optional<bool> mig_enabled;
  std::optional<bool> mig_pending;
  std::optional<unsigned> mig_max_devices;  // MIG-capable GPUs report their instance slots
  std::vector<MigDevice> mig_devices;

  std::optional<std::vector<GpuProcess>> compute_processes;
  std::vector<NvLinkState> nvlinks;  // empty when NVLink is not supported

  // Query name ("nvmlDeviceGetPowerUsage") -> what went wrong, for queries that failed with
  // something other than "not supported".
  std::map<std::string, Status> field_errors;
};

// A GPU that NVML counts but cannot open (lost, no permission, ...).
struct GpuFailure {
  unsigned index = 0;
  Status status;
};

}  // namespace gpunode::gpu

#endif  // GPUNODE_GPU_GPU_H_
