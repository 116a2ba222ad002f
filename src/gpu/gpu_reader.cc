#include "src/gpu/gpu_reader.h"

#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace gpunode {
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
  GpuInfo info;
  info.index = index;
  FieldReader r(nvml, info);

  char buf[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
  if (r.Ok(nvml.nvmlDeviceGetName(dev, buf, sizeof buf), "nvmlDeviceGetName")) {
    info.name = Buffer(buf, sizeof buf);
  }
  char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
  if (r.Ok(nvml.nvmlDeviceGetUUID(dev, uuid, sizeof uuid), "nvmlDeviceGetUUID")) {
    info.uuid = Buffer(uuid, sizeof uuid);
  }
  if (!r.lost().ok()) return r.lost();

  nvmlPciInfo_t pci{};
  if (r.Ok(nvml.nvmlDeviceGetPciInfo_v3(dev, &pci), "nvmlDeviceGetPciInfo_v3")) {
    info.pci_bus_id = NormalizeBusId(Buffer(pci.busId, sizeof pci.busId));
    info.pci_device_id = static_cast<uint16_t>(pci.pciDeviceId >> 16);
    info.pci_subsystem_id = pci.pciSubSystemId;
  }
  unsigned u = 0;
  if (r.Ok(nvml.nvmlDeviceGetMinorNumber(dev, &u), "nvmlDeviceGetMinorNumber")) {
    info.minor_number = u;
  }
  char vbios[NVML_DEVICE_VBIOS_VERSION_BUFFER_SIZE] = {};
  if (r.Ok(nvml.nvmlDeviceGetVbiosVersion(dev, vbios, sizeof vbios), "nvmlDeviceGetVbiosVersion")) {
    info.vbios_version = Buffer(vbios, sizeof vbios);
  }

  // Memory: v2 adds the reserved amount; fall back to v1 on drivers without it.
  bool have_memory = false;
  {
    nvmlMemory_v2_t mem{};
    mem.version = nvmlMemory_v2;
    nvmlReturn_t ret = nvml.nvmlDeviceGetMemoryInfo_v2(dev, &mem);
    if (ret == NVML_SUCCESS) {
      info.memory_total_bytes = mem.total;
      info.memory_used_bytes = mem.used;
      info.memory_free_bytes = mem.free;
      info.memory_reserved_bytes = mem.reserved;
      have_memory = true;
    } else if (!NvmlIsUnsupported(ret)) {
      r.Ok(ret, "nvmlDeviceGetMemoryInfo_v2");
    }
  }
  if (!have_memory) {
    nvmlMemory_t mem{};
    if (r.Ok(nvml.nvmlDeviceGetMemoryInfo(dev, &mem), "nvmlDeviceGetMemoryInfo")) {
      info.memory_total_bytes = mem.total;
      info.memory_used_bytes = mem.used;
      info.memory_free_bytes = mem.free;
    }
  }
  if (!r.lost().ok()) return r.lost();

  nvmlEnableState_t state{}, pending{};
  if (r.Ok(nvml.nvmlDeviceGetPersistenceMode(dev, &state), "nvmlDeviceGetPersistenceMode")) {
    info.persistence_mode = state == NVML_FEATURE_ENABLED;
  }
  if (r.Ok(nvml.nvmlDeviceGetEccMode(dev, &state, &pending), "nvmlDeviceGetEccMode")) {
    info.ecc_enabled = state == NVML_FEATURE_ENABLED;
    info.ecc_pending = pending == NVML_FEATURE_ENABLED;
  }
  if (info.ecc_enabled.value_or(false)) {
    unsigned long long n = 0;
    if (r.Ok(nvml.nvmlDeviceGetTotalEccErrors(dev, NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_VOLATILE_ECC, &n),
             "nvmlDeviceGetTotalEccErrors(corrected, volatile)")) info.ecc_corrected_volatile = n;
    if (r.Ok(nvml.nvmlDeviceGetTotalEccErrors(dev, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC, &n),
             "nvmlDeviceGetTotalEccErrors(uncorrected, volatile)")) info.ecc_uncorrected_volatile = n;
    if (r.Ok(nvml.nvmlDeviceGetTotalEccErrors(dev, NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_AGGREGATE_ECC, &n),
             "nvmlDeviceGetTotalEccErrors(corrected, aggregate)")) info.ecc_corrected_aggregate = n;
    if (r.Ok(nvml.nvmlDeviceGetTotalEccErrors(dev, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_AGGREGATE_ECC, &n),
             "nvmlDeviceGetTotalEccErrors(uncorrected, aggregate)")) info.ecc_uncorrected_aggregate = n;
  }
  if (r.Ok(nvml.nvmlDeviceGetRetiredPagesPendingStatus(dev, &state), "nvmlDeviceGetRetiredPagesPendingStatus")) {
    info.retired_pages_pending = state == NVML_FEATURE_ENABLED;
  }
  unsigned corr = 0, unc = 0, is_pending = 0, failure = 0;
  if (r.Ok(nvml.nvmlDeviceGetRemappedRows(dev, &corr, &unc, &is_pending, &failure), "nvmlDeviceGetRemappedRows")) {
    info.remapped_rows = RemappedRows{corr, unc, is_pending != 0, failure != 0};
  }

  if (r.Ok(nvml.nvmlDeviceGetCurrPcieLinkGeneration(dev, &u), "nvmlDeviceGetCurrPcieLinkGeneration")) info.pcie_gen_current = u;
  if (r.Ok(nvml.nvmlDeviceGetMaxPcieLinkGeneration(dev, &u), "nvmlDeviceGetMaxPcieLinkGeneration")) info.pcie_gen_max = u;
  if (r.Ok(nvml.nvmlDeviceGetGpuMaxPcieLinkGeneration(dev, &u), "nvmlDeviceGetGpuMaxPcieLinkGeneration")) info.pcie_gen_gpu_max = u;
  if (r.Ok(nvml.nvmlDeviceGetCurrPcieLinkWidth(dev, &u), "nvmlDeviceGetCurrPcieLinkWidth")) info.pcie_width_current = u;
  if (r.Ok(nvml.nvmlDeviceGetMaxPcieLinkWidth(dev, &u), "nvmlDeviceGetMaxPcieLinkWidth")) info.pcie_width_max = u;

  if (r.Ok(nvml.nvmlDeviceGetTemperature(dev, NVML_TEMPERATURE_GPU, &u), "nvmlDeviceGetTemperature")) info.temperature_c = u;
  if (options.live_metrics && r.Ok(nvml.nvmlDeviceGetPowerUsage(dev, &u), "nvmlDeviceGetPowerUsage")) {
    info.power_usage_w = u / 1000.0;
  }
  if (r.Ok(nvml.nvmlDeviceGetPowerManagementLimit(dev, &u), "nvmlDeviceGetPowerManagementLimit")) {
    info.power_limit_w = u / 1000.0;
  }
  if (r.Ok(nvml.nvmlDeviceGetEnforcedPowerLimit(dev, &u), "nvmlDeviceGetEnforcedPowerLimit")) {
    info.power_enforced_limit_w = u / 1000.0;
  }
  if (options.live_metrics && r.Ok(nvml.nvmlDeviceGetClockInfo(dev, NVML_CLOCK_SM, &u), "nvmlDeviceGetClockInfo(SM)")) {
    info.sm_clock_mhz = u;
  }
  if (options.live_metrics && r.Ok(nvml.nvmlDeviceGetClockInfo(dev, NVML_CLOCK_MEM, &u), "nvmlDeviceGetClockInfo(MEM)")) {
    info.mem_clock_mhz = u;
  }
  nvmlUtilization_t util{};
  if (options.live_metrics && r.Ok(nvml.nvmlDeviceGetUtilizationRates(dev, &util), "nvmlDeviceGetUtilizationRates")) {
    info.utilization_gpu_pct = util.gpu;
    info.utilization_memory_pct = util.memory;
  }
  int major = 0, minor = 0;
  if (r.Ok(nvml.nvmlDeviceGetCudaComputeCapability(dev, &major, &minor), "nvmlDeviceGetCudaComputeCapability")) {
    info.cc_major = major;
    info.cc_minor = minor;
  }
  if (!r.lost().ok()) return r.lost();

  // Compute processes: ask for the count first, then the list (NVML's two-call protocol).
  {
    unsigned count = 0;
    nvmlReturn_t ret = nvml.nvmlDeviceGetComputeRunningProcesses_v3(dev, &count, nullptr);
    if (ret == NVML_SUCCESS) {
      info.compute_processes.emplace();
    } else if (ret == NVML_ERROR_INSUFFICIENT_SIZE) {
      std::vector<nvmlProcessInfo_t> procs(count + 8);
      unsigned n = static_cast<unsigned>(procs.size());
      if (r.Ok(nvml.nvmlDeviceGetComputeRunningProcesses_v3(dev, &n, procs.data()),
               "nvmlDeviceGetComputeRunningProcesses_v3")) {
        info.compute_processes.emplace();
        for (unsigned i = 0; i < n && i < procs.size(); ++i) {
          GpuProcess p;
          p.pid = procs[i].pid;
          // NVML reports NVML_VALUE_NOT_AVAILABLE (all ones) when it cannot see the amount.
          if (procs[i].usedGpuMemory != ~0ULL) p.used_memory_bytes = procs[i].usedGpuMemory;
          info.compute_processes->push_back(p);
        }
      }
    } else {
      r.Ok(ret, "nvmlDeviceGetComputeRunningProcesses_v3");
    }
  }

  // MIG mode and instances.
  unsigned mig_current = 0, mig_pending = 0;
  if (r.Ok(nvml.nvmlDeviceGetMigMode(dev, &mig_current, &mig_pending), "nvmlDeviceGetMigMode")) {
    info.mig_enabled = mig_current == NVML_DEVICE_MIG_ENABLE;
    info.mig_pending = mig_pending == NVML_DEVICE_MIG_ENABLE;
  }
  if (info.mig_enabled) {
    unsigned max = 0;
    if (r.Ok(nvml.nvmlDeviceGetMaxMigDeviceCount(dev, &max), "nvmlDeviceGetMaxMigDeviceCount")) {
      info.mig_max_devices = max;
    }
  }
  if (info.mig_enabled.value_or(false) && info.mig_max_devices) {
    unsigned max = *info.mig_max_devices;
    {
      for (unsigned i = 0; i < max; ++i) {
        nvmlDevice_t mig = nullptr;
        nvmlReturn_t ret = nvml.nvmlDeviceGetMigDeviceHandleByIndex(dev, i, &mig);
        if (ret == NVML_ERROR_NOT_FOUND) continue;  // empty slot
        if (!r.Ok(ret, "nvmlDeviceGetMigDeviceHandleByIndex")) continue;
        MigDevice m;
        m.index = i;
        char mig_uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
        if (r.Ok(nvml.nvmlDeviceGetUUID(mig, mig_uuid, sizeof mig_uuid), "nvmlDeviceGetUUID(MIG)")) {
          m.uuid = Buffer(mig_uuid, sizeof mig_uuid);
        }
        if (r.Ok(nvml.nvmlDeviceGetGpuInstanceId(mig, &u), "nvmlDeviceGetGpuInstanceId")) {
          m.gpu_instance_id = u;
        }
        if (r.Ok(nvml.nvmlDeviceGetComputeInstanceId(mig, &u), "nvmlDeviceGetComputeInstanceId")) {
          m.compute_instance_id = u;
        }
        nvmlDeviceAttributes_t attr{};
        if (r.Ok(nvml.nvmlDeviceGetAttributes_v2(mig, &attr), "nvmlDeviceGetAttributes_v2")) {
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
        info.mig_devices.push_back(std::move(m));
      }
    }
  }

  // NVLink: links answer until the first invalid index; NOT_SUPPORTED means no NVLink at all.
  {
    for (unsigned link = 0; link < NVML_NVLINK_MAX_LINKS; ++link) {
      nvmlReturn_t ret = nvml.nvmlDeviceGetNvLinkState(dev, link, &state);
      if (ret == NVML_ERROR_INVALID_ARGUMENT || NvmlIsUnsupported(ret)) break;
      if (!r.Ok(ret, "nvmlDeviceGetNvLinkState")) break;
      NvLinkState l;
      l.link = link;
      l.active = state == NVML_FEATURE_ENABLED;
      nvmlPciInfo_t remote{};
      if (l.active && nvml.nvmlDeviceGetNvLinkRemotePciInfo_v2(dev, link, &remote) == NVML_SUCCESS) {
        l.remote_bus_id = NormalizeBusId(Buffer(remote.busId, sizeof remote.busId));
      }
      info.nvlinks.push_back(std::move(l));
    }
  }
  if (!r.lost().ok()) return r.lost();
  return info;
}

}  // namespace gpunode
