#include "src/gpu/gpu_reader.h"

#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace gpunode::gpu {
namespace {

constexpr uint64_t kMiB = 1024 * 1024;

// Collects the outcome of each query: a value, "absent" for unsupported, or a recorded error.
// A lost GPU aborts the whole read.
class FieldReader {
 public:
  FieldReader(const NvmlLibrary& nvml, GpuInfo& info) : nvml_(nvml), info_(info) {}

  // Returns true when the call succeeded.
  bool Ok(nvmlReturn_t ret, const char* op) {
    if (ret == NVML_SUCCESS) return true;
    if (NvmlIsUnsupported(ret)) return false;
    if (ret == NVML_ERROR_GPU_IS_LOST && lost_.ok()) lost_ = nvml_.Check(ret, op);
    info_.field_errors.emplace(op, nvml_.Check(ret, op));
    return false;
  }

  const Status& lost() const { return lost_; }

 private:
  const NvmlLibrary& nvml_;
  GpuInfo& info_;
  Status lost_;
};

std::string Buffer(const char* buf, size_t size) { return std::string(buf, strnlen(buf, size)); }

// The steps of ReadGpu, each filling its part of one GpuInfo; lost() says when the GPU fell off
// the bus, after which the read stops at the next check.
class GpuReader {
 public:
  GpuReader(const NvmlLibrary& nvml, nvmlDevice_t dev, unsigned index) : nvml_(nvml), dev_(dev), r_(nvml, info_) {
    info_.index = index;
  }

  const Status& lost() const { return r_.lost(); }
  GpuInfo Take() { return std::move(info_); }

  // Name and UUID.
  void ReadIdentity() {
    char buf[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
    if (r_.Ok(nvml_.nvmlDeviceGetName(dev_, buf, sizeof buf), "nvmlDeviceGetName")) {
      info_.name = Buffer(buf, sizeof buf);
    }
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
    if (r_.Ok(nvml_.nvmlDeviceGetUUID(dev_, uuid, sizeof uuid), "nvmlDeviceGetUUID")) {
      info_.uuid = Buffer(uuid, sizeof uuid);
    }
  }

  // PCI ids, the device minor number, the VBIOS version.
  void ReadBoard() {
    nvmlPciInfo_t pci{};
    if (r_.Ok(nvml_.nvmlDeviceGetPciInfo_v3(dev_, &pci), "nvmlDeviceGetPciInfo_v3")) {
      info_.pci_bus_id = NormalizeBusId(Buffer(pci.busId, sizeof pci.busId));
      info_.pci_device_id = static_cast<uint16_t>(pci.pciDeviceId >> 16);
      info_.pci_subsystem_id = pci.pciSubSystemId;
    }
    unsigned u = 0;
    if (r_.Ok(nvml_.nvmlDeviceGetMinorNumber(dev_, &u), "nvmlDeviceGetMinorNumber")) {
      info_.minor_number = u;
    }
    char vbios[NVML_DEVICE_VBIOS_VERSION_BUFFER_SIZE] = {};
    if (r_.Ok(nvml_.nvmlDeviceGetVbiosVersion(dev_, vbios, sizeof vbios), "nvmlDeviceGetVbiosVersion")) {
      info_.vbios_version = Buffer(vbios, sizeof vbios);
    }
    nvmlDeviceArchitecture_t arch = 0;
    if (r_.Ok(nvml_.nvmlDeviceGetArchitecture(dev_, &arch), "nvmlDeviceGetArchitecture")) {
      info_.architecture = arch;
    }
    nvmlBrandType_t brand = NVML_BRAND_UNKNOWN;
    if (r_.Ok(nvml_.nvmlDeviceGetBrand(dev_, &brand), "nvmlDeviceGetBrand")) {
      info_.brand = static_cast<unsigned>(brand);
    }
    nvmlDeviceAddressingMode_t mode{};
    mode.version = nvmlDeviceAddressingMode_v1;
    if (r_.Ok(nvml_.nvmlDeviceGetAddressingMode(dev_, &mode), "nvmlDeviceGetAddressingMode")) {
      info_.addressing_mode = mode.value;
    }
  }

  // Memory: v2 adds the reserved amount; fall back to v1 on drivers without it.
  void ReadMemory() {
    nvmlMemory_v2_t mem2{};
    mem2.version = nvmlMemory_v2;
    nvmlReturn_t ret = nvml_.nvmlDeviceGetMemoryInfo_v2(dev_, &mem2);
    if (ret == NVML_SUCCESS) {
      info_.memory_total_bytes = mem2.total;
      info_.memory_used_bytes = mem2.used;
      info_.memory_free_bytes = mem2.free;
      info_.memory_reserved_bytes = mem2.reserved;
      return;
    }
    if (!NvmlIsUnsupported(ret)) r_.Ok(ret, "nvmlDeviceGetMemoryInfo_v2");
    nvmlMemory_t mem{};
    if (r_.Ok(nvml_.nvmlDeviceGetMemoryInfo(dev_, &mem), "nvmlDeviceGetMemoryInfo")) {
      info_.memory_total_bytes = mem.total;
      info_.memory_used_bytes = mem.used;
      info_.memory_free_bytes = mem.free;
    }
  }

  // Persistence mode, ECC mode and counts, retired pages, remapped rows.
  void ReadMemoryHealth() {
    nvmlEnableState_t state{}, pending{};
    if (r_.Ok(nvml_.nvmlDeviceGetPersistenceMode(dev_, &state), "nvmlDeviceGetPersistenceMode")) {
      info_.persistence_mode = state == NVML_FEATURE_ENABLED;
    }
    if (r_.Ok(nvml_.nvmlDeviceGetEccMode(dev_, &state, &pending), "nvmlDeviceGetEccMode")) {
      info_.ecc_enabled = state == NVML_FEATURE_ENABLED;
      info_.ecc_pending = pending == NVML_FEATURE_ENABLED;
    }
    if (info_.ecc_enabled.value_or(false)) ReadEccCounts();
    if (r_.Ok(nvml_.nvmlDeviceGetRetiredPagesPendingStatus(dev_, &state), "nvmlDeviceGetRetiredPagesPendingStatus")) {
      info_.retired_pages_pending = state == NVML_FEATURE_ENABLED;
    }
    unsigned corr = 0, unc = 0, is_pending = 0, failure = 0;
    if (r_.Ok(nvml_.nvmlDeviceGetRemappedRows(dev_, &corr, &unc, &is_pending, &failure), "nvmlDeviceGetRemappedRows")) {
      info_.remapped_rows = RemappedRows{corr, unc, is_pending != 0, failure != 0};
    }
  }

  // PCIe link generation and width, current and maximum.
  void ReadPcieLink() {
    unsigned u = 0;
    if (r_.Ok(nvml_.nvmlDeviceGetCurrPcieLinkGeneration(dev_, &u), "nvmlDeviceGetCurrPcieLinkGeneration")) info_.pcie_gen_current = u;
    if (r_.Ok(nvml_.nvmlDeviceGetMaxPcieLinkGeneration(dev_, &u), "nvmlDeviceGetMaxPcieLinkGeneration")) info_.pcie_gen_max = u;
    if (r_.Ok(nvml_.nvmlDeviceGetGpuMaxPcieLinkGeneration(dev_, &u), "nvmlDeviceGetGpuMaxPcieLinkGeneration")) info_.pcie_gen_gpu_max = u;
    if (r_.Ok(nvml_.nvmlDeviceGetCurrPcieLinkWidth(dev_, &u), "nvmlDeviceGetCurrPcieLinkWidth")) info_.pcie_width_current = u;
    if (r_.Ok(nvml_.nvmlDeviceGetMaxPcieLinkWidth(dev_, &u), "nvmlDeviceGetMaxPcieLinkWidth")) info_.pcie_width_max = u;
  }

  // Temperature, power, clocks, utilization (the live metrics only when asked), compute capability.
  void ReadPowerAndClocks(const GpuReadOptions& options) {
    unsigned u = 0;
    if (r_.Ok(nvml_.nvmlDeviceGetTemperature(dev_, NVML_TEMPERATURE_GPU, &u), "nvmlDeviceGetTemperature")) info_.temperature_c = u;
    if (options.live_metrics && r_.Ok(nvml_.nvmlDeviceGetPowerUsage(dev_, &u), "nvmlDeviceGetPowerUsage")) {
      info_.power_usage_w = u / 1000.0;
    }
    if (r_.Ok(nvml_.nvmlDeviceGetPowerManagementLimit(dev_, &u), "nvmlDeviceGetPowerManagementLimit")) {
      info_.power_limit_w = u / 1000.0;
    }
    if (r_.Ok(nvml_.nvmlDeviceGetEnforcedPowerLimit(dev_, &u), "nvmlDeviceGetEnforcedPowerLimit")) {
      info_.power_enforced_limit_w = u / 1000.0;
    }
    if (options.live_metrics && r_.Ok(nvml_.nvmlDeviceGetClockInfo(dev_, NVML_CLOCK_SM, &u), "nvmlDeviceGetClockInfo(SM)")) {
      info_.sm_clock_mhz = u;
    }
    if (options.live_metrics && r_.Ok(nvml_.nvmlDeviceGetClockInfo(dev_, NVML_CLOCK_MEM, &u), "nvmlDeviceGetClockInfo(MEM)")) {
      info_.mem_clock_mhz = u;
    }
    nvmlUtilization_t util{};
    if (options.live_metrics && r_.Ok(nvml_.nvmlDeviceGetUtilizationRates(dev_, &util), "nvmlDeviceGetUtilizationRates")) {
      info_.utilization_gpu_pct = util.gpu;
      info_.utilization_memory_pct = util.memory;
    }
    int major = 0, minor = 0;
    if (r_.Ok(nvml_.nvmlDeviceGetCudaComputeCapability(dev_, &major, &minor), "nvmlDeviceGetCudaComputeCapability")) {
      info_.cc_major = major;
      info_.cc_minor = minor;
    }
  }

  // Compute processes: ask for the count first, then the list (NVML's two-call protocol).
  void ReadProcesses() {
    unsigned count = 0;
    nvmlReturn_t ret = nvml_.nvmlDeviceGetComputeRunningProcesses_v3(dev_, &count, nullptr);
    if (ret == NVML_SUCCESS) {
      info_.compute_processes.emplace();
      return;
    }
    if (ret != NVML_ERROR_INSUFFICIENT_SIZE) {
      r_.Ok(ret, "nvmlDeviceGetComputeRunningProcesses_v3");
      return;
    }
    std::vector<nvmlProcessInfo_t> procs(count + 8);
    unsigned n = static_cast<unsigned>(procs.size());
    if (!r_.Ok(nvml_.nvmlDeviceGetComputeRunningProcesses_v3(dev_, &n, procs.data()),
               "nvmlDeviceGetComputeRunningProcesses_v3")) {
      return;
    }
    info_.compute_processes.emplace();
    for (unsigned i = 0; i < n && i < procs.size(); ++i) {
      GpuProcess p;
      p.pid = procs[i].pid;
      // NVML reports NVML_VALUE_NOT_AVAILABLE (all ones) when it cannot see the amount.
      if (procs[i].usedGpuMemory != ~0ULL) p.used_memory_bytes = procs[i].usedGpuMemory;
      info_.compute_processes->push_back(p);
    }
  }

  // MIG mode and instances.
  void ReadMig() {
    unsigned mig_current = 0, mig_pending = 0;
    if (r_.Ok(nvml_.nvmlDeviceGetMigMode(dev_, &mig_current, &mig_pending), "nvmlDeviceGetMigMode")) {
      info_.mig_enabled = mig_current == NVML_DEVICE_MIG_ENABLE;
      info_.mig_pending = mig_pending == NVML_DEVICE_MIG_ENABLE;
    }
    if (info_.mig_enabled) {
      unsigned max = 0;
      if (r_.Ok(nvml_.nvmlDeviceGetMaxMigDeviceCount(dev_, &max), "nvmlDeviceGetMaxMigDeviceCount")) {
        info_.mig_max_devices = max;
      }
    }
    if (!info_.mig_enabled.value_or(false) || !info_.mig_max_devices) return;
    for (unsigned i = 0; i < *info_.mig_max_devices; ++i) {
      nvmlDevice_t mig = nullptr;
      nvmlReturn_t ret = nvml_.nvmlDeviceGetMigDeviceHandleByIndex(dev_, i, &mig);
      if (ret == NVML_ERROR_NOT_FOUND) continue;  // empty slot
      if (!r_.Ok(ret, "nvmlDeviceGetMigDeviceHandleByIndex")) continue;
      info_.mig_devices.push_back(ReadMigDevice(mig, i));
    }
  }

  // NVLink: links answer until the first invalid index; NOT_SUPPORTED means no NVLink at all.
  void ReadNvLinks() {
    for (unsigned link = 0; link < NVML_NVLINK_MAX_LINKS; ++link) {
      nvmlEnableState_t state{};
      nvmlReturn_t ret = nvml_.nvmlDeviceGetNvLinkState(dev_, link, &state);
      if (ret == NVML_ERROR_INVALID_ARGUMENT || NvmlIsUnsupported(ret)) break;
      if (!r_.Ok(ret, "nvmlDeviceGetNvLinkState")) break;
      NvLinkState l;
      l.link = link;
      l.active = state == NVML_FEATURE_ENABLED;
      nvmlPciInfo_t remote{};
      if (l.active && nvml_.nvmlDeviceGetNvLinkRemotePciInfo_v2(dev_, link, &remote) == NVML_SUCCESS) {
        l.remote_bus_id = NormalizeBusId(Buffer(remote.busId, sizeof remote.busId));
      }
      info_.nvlinks.push_back(std::move(l));
    }
  }

 private:
  void ReadEccCounts() {
    unsigned long long n = 0;
    if (r_.Ok(nvml_.nvmlDeviceGetTotalEccErrors(dev_, NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_VOLATILE_ECC, &n),
              "nvmlDeviceGetTotalEccErrors(corrected, volatile)")) info_.ecc_corrected_volatile = n;
    if (r_.Ok(nvml_.nvmlDeviceGetTotalEccErrors(dev_, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC, &n),
              "nvmlDeviceGetTotalEccErrors(uncorrected, volatile)")) info_.ecc_uncorrected_volatile = n;
    if (r_.Ok(nvml_.nvmlDeviceGetTotalEccErrors(dev_, NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_AGGREGATE_ECC, &n),
              "nvmlDeviceGetTotalEccErrors(corrected, aggregate)")) info_.ecc_corrected_aggregate = n;
    if (r_.Ok(nvml_.nvmlDeviceGetTotalEccErrors(dev_, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_AGGREGATE_ECC, &n),
              "nvmlDeviceGetTotalEccErrors(uncorrected, aggregate)")) info_.ecc_uncorrected_aggregate = n;
  }

  MigDevice ReadMigDevice(nvmlDevice_t mig, unsigned index) {
    MigDevice m;
    m.index = index;
    char mig_uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
    if (r_.Ok(nvml_.nvmlDeviceGetUUID(mig, mig_uuid, sizeof mig_uuid), "nvmlDeviceGetUUID(MIG)")) {
      m.uuid = Buffer(mig_uuid, sizeof mig_uuid);
    }
    unsigned u = 0;
    if (r_.Ok(nvml_.nvmlDeviceGetGpuInstanceId(mig, &u), "nvmlDeviceGetGpuInstanceId")) {
      m.gpu_instance_id = u;
      nvmlGpuInstance_t gi = nullptr;
      nvmlGpuInstanceInfo_t gi_info{};
      if (r_.Ok(nvml_.nvmlDeviceGetGpuInstanceById(dev_, u, &gi), "nvmlDeviceGetGpuInstanceById") &&
          r_.Ok(nvml_.nvmlGpuInstanceGetInfo(gi, &gi_info), "nvmlGpuInstanceGetInfo")) {
        m.gi_profile_id = gi_info.profileId;
        m.placement_start = gi_info.placement.start;
        m.placement_size = gi_info.placement.size;
      }
    }
    if (r_.Ok(nvml_.nvmlDeviceGetComputeInstanceId(mig, &u), "nvmlDeviceGetComputeInstanceId")) {
      m.compute_instance_id = u;
    }
    nvmlDeviceAttributes_t attr{};
    if (r_.Ok(nvml_.nvmlDeviceGetAttributes_v2(mig, &attr), "nvmlDeviceGetAttributes_v2")) {
      m.slices = attr.gpuInstanceSliceCount;
      m.compute_slices = attr.computeInstanceSliceCount;
      m.memory_total_bytes = attr.memorySizeMB * kMiB;
      m.multiprocessors = attr.multiprocessorCount;
      m.copy_engines = attr.sharedCopyEngineCount;
      m.decoders = attr.sharedDecoderCount;
      m.encoders = attr.sharedEncoderCount;
      m.jpegs = attr.sharedJpegCount;
      m.ofas = attr.sharedOfaCount;
    }
    return m;
  }

  const NvmlLibrary& nvml_;
  nvmlDevice_t dev_;
  GpuInfo info_;
  FieldReader r_;
};

}  // namespace

std::string NormalizeBusId(absl::string_view bus_id) {
  std::string id = absl::AsciiStrToLower(bus_id);
  // domain:bus:device.function with an 8-digit domain -> 4-digit domain
  size_t colon = id.find(':');
  if (colon == 8 && id.compare(0, 4, "0000") == 0) id.erase(0, 4);
  return id;
}

StatusOr<GpuInfo> ReadGpu(const NvmlLibrary& nvml, unsigned index, const GpuReadOptions& options) {
  GPUNODE_ASSIGN_OR_RETURN(nvmlDevice_t dev, nvml.DeviceHandle(index));
  GpuReader g(nvml, dev, index);
  g.ReadIdentity();
  if (!g.lost().ok()) return g.lost();
  g.ReadBoard();
  g.ReadMemory();
  if (!g.lost().ok()) return g.lost();
  g.ReadMemoryHealth();
  g.ReadPcieLink();
  g.ReadPowerAndClocks(options);
  if (!g.lost().ok()) return g.lost();
  g.ReadProcesses();
  g.ReadMig();
  g.ReadNvLinks();
  if (!g.lost().ok()) return g.lost();
  return g.Take();
}

}  // namespace gpunode::gpu
