// NVML's C ABI (the GPUNODE_NVML_FUNCTIONS list of src/gpu/nvml_abi.h), answered from a node
// profile with NVML's semantics:
//   * calls before nvmlInit_v2 (or after the matching nvmlShutdown) -> NVML_ERROR_UNINITIALIZED;
//     nvmlInit_v2/nvmlShutdown are reference counted;
//   * unknown handles, null output pointers, bad indexes/enums -> NVML_ERROR_INVALID_ARGUMENT;
//   * short string/array buffers -> NVML_ERROR_INSUFFICIENT_SIZE (arrays report the size needed);
//   * a GPU with `lost: true` (or removed by a live edit) -> NVML_ERROR_GPU_IS_LOST on its handle;
//   * a field named in the GPU's `unsupported:` list -> NVML_ERROR_NOT_SUPPORTED;
//   * MIG device handles answer name, UUID, memory, instance ids, attributes, PCI info and
//     processes; other calls on them say NVML_ERROR_NOT_SUPPORTED (or INVALID_ARGUMENT for the
//     parent-only MIG calls).
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "sim/nvml/sim_state.h"
#include "sim/support/profile.h"
#include "sim/support/str.h"
#include "src/base/version.h"
#include "src/gpu/nvml_abi.h"

// Declares every entry point with C linkage and default visibility, so a definition whose
// signature differs from the ABI list fails to compile.
#define GPUNODE_SIM_DECLARE(ret, name, params) \
  extern "C" __attribute__((visibility("default"))) ret name params;
GPUNODE_NVML_FUNCTIONS(GPUNODE_SIM_DECLARE)
GPUNODE_NVML_FALLBACK_FUNCTIONS(GPUNODE_SIM_DECLARE)
#undef GPUNODE_SIM_DECLARE

namespace gpunode::sim {
namespace {

constexpr unsigned kNoInstance = 0xFFFFFFFFu;
constexpr unsigned long long kMiB = 1ull << 20;

// One API call: holds the lock, checks initialisation, reloads a changed profile.
class Call {
 public:
  Call() : state_(SimState::Get()), lock_(state_.mu) {
    if (state_.nvml_refcount == 0 || !state_.loaded()) {
      rc_ = NVML_ERROR_UNINITIALIZED;
    } else {
      state_.MaybeReload();
    }
  }

  nvmlReturn_t rc() const { return rc_; }
  const NodeProfile& profile() const { return state_.profile(); }
  SimState& state() { return state_; }

  // Resolves a handle. `field` (may be empty) is checked against the GPU's unsupported list.
  // MIG device handles are accepted only with `allow_mig`.
  nvmlReturn_t Resolve(nvmlDevice_t device, std::string_view field, const Gpu** gpu,
                       const MigDevice** mig = nullptr, bool allow_mig = false) {
    if (rc_ != NVML_SUCCESS) return rc_;
    if (device == nullptr || !state_.ValidHandle(device)) return NVML_ERROR_INVALID_ARGUMENT;
    const NodeProfile& p = profile();
    if (device->gpu >= p.gpus.size()) return NVML_ERROR_GPU_IS_LOST;
    const Gpu& g = p.gpus[device->gpu];
    if (g.lost) return NVML_ERROR_GPU_IS_LOST;
    if (device->mig >= 0) {
      if (!allow_mig) return NVML_ERROR_NOT_SUPPORTED;
      if (!g.mig.enabled || static_cast<size_t>(device->mig) >= g.mig.devices.size()) {
        return NVML_ERROR_INVALID_ARGUMENT;  // the MIG device went away
      }
      if (mig != nullptr) *mig = &g.mig.devices[device->mig];
    } else if (mig != nullptr) {
      *mig = nullptr;
    }
    if (!field.empty() && g.Unsupported(field)) return NVML_ERROR_NOT_SUPPORTED;
    *gpu = &g;
    return NVML_SUCCESS;
  }

 private:
  SimState& state_;
  std::lock_guard<std::mutex> lock_;
  nvmlReturn_t rc_ = NVML_SUCCESS;
};

nvmlReturn_t CopyString(const std::string& s, char* buf, unsigned int length) {
  if (buf == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (length < s.size() + 1) return NVML_ERROR_INSUFFICIENT_SIZE;
  std::memcpy(buf, s.c_str(), s.size() + 1);
  return NVML_SUCCESS;
}

unsigned int Milliwatts(double watts) {
  return static_cast<unsigned int>(std::lround(watts * 1000.0));
}

void FillPci(const std::string& bus_id, unsigned vendor, unsigned device_id, unsigned subsystem,
             nvmlPciInfo_t* pci) {
  std::memset(pci, 0, sizeof(*pci));
  unsigned d = 0, b = 0, dev = 0, f = 0;
  ParseBusId(bus_id, &d, &b, &dev, &f);
  std::string legacy = NvmlLegacyBusId(bus_id);
  std::string full = NvmlBusId(bus_id);
  std::memcpy(pci->busIdLegacy, legacy.c_str(),
              std::min(legacy.size() + 1, sizeof(pci->busIdLegacy)));
  std::memcpy(pci->busId, full.c_str(), std::min(full.size() + 1, sizeof(pci->busId)));
  pci->domain = d;
  pci->bus = b;
  pci->device = dev;
  pci->pciDeviceId = (device_id << 16) | vendor;
  pci->pciSubSystemId = subsystem;
}

unsigned long long EventMask(EventType t) {
  switch (t) {
    case EventType::kXid:
      return nvmlEventTypeXidCriticalError;
    case EventType::kSingleBitEcc:
      return nvmlEventTypeSingleBitEccError;
    case EventType::kDoubleBitEcc:
      return nvmlEventTypeDoubleBitEccError;
    case EventType::kPState:
      return nvmlEventTypePState;
    case EventType::kClock:
      return nvmlEventTypeClock;
  }
  return 0;
}

unsigned long long SupportedEvents(const Gpu& g) {
  unsigned long long m = nvmlEventTypeXidCriticalError | nvmlEventTypePState | nvmlEventTypeClock;
  if (g.ecc.enabled && !g.Unsupported("ecc"))
    m |= nvmlEventTypeSingleBitEccError | nvmlEventTypeDoubleBitEccError;
  return m;
}

const char* ErrorText(nvmlReturn_t r) {
  switch (r) {
    case NVML_SUCCESS:
      return "Success";
    case NVML_ERROR_UNINITIALIZED:
      return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT:
      return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED:
      return "Not Supported";
    case NVML_ERROR_NO_PERMISSION:
      return "Insufficient Permissions";
    case NVML_ERROR_ALREADY_INITIALIZED:
      return "Already Initialized";
    case NVML_ERROR_NOT_FOUND:
      return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE:
      return "Insufficient Size";
    case NVML_ERROR_INSUFFICIENT_POWER:
      return "Insufficient External Power";
    case NVML_ERROR_DRIVER_NOT_LOADED:
      return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT:
      return "Timeout";
    case NVML_ERROR_IRQ_ISSUE:
      return "Interrupt request issue";
    case NVML_ERROR_LIBRARY_NOT_FOUND:
      return "NVML Shared Library Not Found";
    case NVML_ERROR_FUNCTION_NOT_FOUND:
      return "Function Not Found";
    case NVML_ERROR_CORRUPTED_INFOROM:
      return "Corrupted infoROM";
    case NVML_ERROR_GPU_IS_LOST:
      return "GPU is lost";
    case NVML_ERROR_RESET_REQUIRED:
      return "GPU requires restart";
    case NVML_ERROR_OPERATING_SYSTEM:
      return "The operating system has blocked the request.";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH:
      return "Driver/library version mismatch";
    case NVML_ERROR_IN_USE:
      return "In use by another client";
    case NVML_ERROR_MEMORY:
      return "Insufficient Memory";
    case NVML_ERROR_NO_DATA:
      return "No data";
    case NVML_ERROR_VGPU_ECC_NOT_SUPPORTED:
      return "The requested vgpu operation is not available on target device, becasue ECC is "
             "enabled";
    case NVML_ERROR_INSUFFICIENT_RESOURCES:
      return "Insufficient resources";
    case NVML_ERROR_FREQ_NOT_SUPPORTED:
      return "Frequency not supported";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH:
      return "Argument version mismatch";
    case NVML_ERROR_DEPRECATED:
      return "Deprecated";
    case NVML_ERROR_NOT_READY:
      return "Not ready";
    case NVML_ERROR_GPU_NOT_FOUND:
      return "GPU not found";
    case NVML_ERROR_INVALID_STATE:
      return "Invalid state";
    case NVML_ERROR_UNKNOWN:
      return "Unknown Error";
  }
  return "Unknown Error";
}

}  // namespace
}  // namespace gpunode::sim

using gpunode::sim::Call;
using gpunode::sim::CopyString;
using gpunode::sim::Gpu;
using gpunode::sim::kMiB;
using gpunode::sim::kNoInstance;
using gpunode::sim::MigDevice;
using gpunode::sim::SimState;

// ---- library ----------------------------------------------------------------------------------

nvmlReturn_t nvmlInit_v2(void) {
  SimState& s = SimState::Get();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.nvml_refcount > 0) {
    ++s.nvml_refcount;
    s.MaybeReload();
    return NVML_SUCCESS;
  }
  nvmlReturn_t rc = s.Load();
  if (rc != NVML_SUCCESS) return rc;
  rc = s.profile().EffectiveInitError();
  if (rc != NVML_SUCCESS) return rc;
  s.nvml_refcount = 1;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlShutdown(void) {
  SimState& s = SimState::Get();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.nvml_refcount == 0) return NVML_ERROR_UNINITIALIZED;
  --s.nvml_refcount;
  return NVML_SUCCESS;
}

const char* nvmlErrorString(nvmlReturn_t result) { return gpunode::sim::ErrorText(result); }

// ---- system -----------------------------------------------------------------------------------

nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  Call c;
  if (c.rc()) return c.rc();
  return CopyString(c.profile().driver.version, version, length);
}

nvmlReturn_t nvmlSystemGetNVMLVersion(char* version, unsigned int length) {
  Call c;
  if (c.rc()) return c.rc();
  return CopyString(c.profile().driver.nvml_version, version, length);
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int* cudaDriverVersion) {
  Call c;
  if (c.rc()) return c.rc();
  if (cudaDriverVersion == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  auto v = gpunode::Version::Parse(c.profile().driver.cuda_version);
  if (!v.ok()) return NVML_ERROR_UNKNOWN;
  *cudaDriverVersion = static_cast<int>(v->major() * 1000 + v->minor() * 10);
  return NVML_SUCCESS;
}

// ---- devices ----------------------------------------------------------------------------------

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* deviceCount) {
  Call c;
  if (c.rc()) return c.rc();
  if (deviceCount == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *deviceCount = static_cast<unsigned int>(c.profile().gpus.size());
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  Call c;
  if (c.rc()) return c.rc();
  if (device == nullptr || index >= c.profile().gpus.size()) return NVML_ERROR_INVALID_ARGUMENT;
  // The handle is written even for a lost GPU, so callers can tell which one it is.
  *device = c.state().Handle(index, -1);
  return c.profile().gpus[index].lost ? NVML_ERROR_GPU_IS_LOST : NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length) {
  Call c;
  const Gpu* g = nullptr;
  const MigDevice* m = nullptr;
  if (auto rc = c.Resolve(device, "", &g, &m, true)) return rc;
  return CopyString(m ? gpunode::sim::str::Cat(g->name, " MIG ", m->profile) : g->name, name,
                    length);
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length) {
  Call c;
  const Gpu* g = nullptr;
  const MigDevice* m = nullptr;
  if (auto rc = c.Resolve(device, "", &g, &m, true)) return rc;
  return CopyString(m ? m->uuid : g->uuid, uuid, length);
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  Call c;
  const Gpu* g = nullptr;
  if (auto rc = c.Resolve(device, "", &g, nullptr, true)) return rc;
  if (pci == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  gpunode::sim::FillPci(g->bus_id, 0x10de, g->device_id, g->subsystem_id, pci);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int* minorNumber) {
  Call c;
  const Gpu* g = nullptr;
  if (auto rc = c.Resolve(device, "minor_number", &g)) return rc;
  if (minorNumber == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *minorNumber = g->minor;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int* index) {
  Call c;
  const Gpu* g = nullptr;
  if (auto rc = c.Resolve(device, "", &g)) return rc;
  if (index == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *index = device->gpu;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetVbiosVersion(nvmlDevice_t device, char* version, unsigned int length) {
  Call c;
  const Gpu* g = nullptr;
  if (auto rc = c.Resolve(device, "vbios", &g)) return rc;
  return CopyString(g->vbios, version, length);
}

namespace {
// Memory of a GPU or MIG device, in bytes.
struct MemoryBytes {
  unsigned long long total, reserved, used;
};
MemoryBytes MemoryOf(const Gpu& g, const MigDevice* m) {
  if (m == nullptr)
    return {g.memory_total_mib * kMiB, g.memory_reserved_mib * kMiB, g.memory_used_mib * kMiB};
  unsigned long long used = 0;
  for (const auto& p : g.processes) {
    if (p.gpu_instance_id && *p.gpu_instance_id == m->gpu_instance_id) used += p.used_mib * kMiB;
  }
  used = std::min<unsigned long long>(used, m->memory_mib * kMiB);
  return {m->memory_mib * kMiB, 0, used};
}
}  // namespace

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  Call c;
  const Gpu* g = nullptr;
  const MigDevice* m = nullptr;
  if (auto rc = c.Resolve(device, "memory", &g, &m, true)) return rc;
  if (memory == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  MemoryBytes b = MemoryOf(*g, m);
  memory->total = b.total;
  memory->used = b.used + b.reserved;  // v1 counts the reserved memory as used
  memory->free = b.total - memory->used;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t* memory) {
  Call c;
  const Gpu* g = nullptr;
  const MigDevice* m = nullptr;
  if (auto rc = c.Resolve(device, "memory", &g, &m, true)) return rc;
  if (memory == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (memory->version != nvmlMemory_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  MemoryBytes b = MemoryOf(*g, m);
  memory->total = b.total;
  memory->reserved = b.reserved;
  memory->used = b.used;
  memory->free = b.total - b.reserved - b.used;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t device, nvmlEnableState_t* mode) {
  Call c;
  const Gpu* g = nullptr;
  if (auto rc = c.Resolve(device, "persistence_mode", &g)) return rc;
  if (mode == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *mode = g->persistence ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t device, nvmlEnableState_t* current,
                                  nvmlEnableState_t* pending) {
  Call c;
  const Gpu* g = nullptr;
  if (auto rc = c.Resolve(device, "ecc", &g)) return rc;
  if (current == nullptr || pending == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *current = g->ecc.enabled ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
  *pending = g->ecc.pending ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, nvmlMemoryErrorType_t errorType,
                                         nvmlEccCounterType_t counterType,
                                         unsigned long long* eccCounts) {
  Call c;
  const Gpu* g = nullptr;
  if (auto rc = c.Resolve(device, "ecc", &g)) return rc;
  if (eccCounts == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const bool corrected = errorType == NVML_MEMORY_ERROR_TYPE_CORRECTED;
  if (!corrected && errorType != NVML_MEMORY_ERROR_TYPE_UNCORRECTED)
    return NVML_ERROR_INVALID_ARGUMENT;
  if (counterType == NVML_VOLATILE_ECC) {
    *eccCounts = corrected ? g->ecc.corrected_volatile : g->ecc.uncorrected_volatile;
  } else if (counterType == NVML_AGGREGATE_ECC) {
    *eccCounts = corrected ? g->ecc.corrected_aggregate : g->ecc.uncorrected_aggregate;
  } else {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t device,
                                                    nvmlEnableState_t* isPending) {
  Call c;
  const Gpu* g = nullptr;
  if (auto rc = c.Resolve(device, "retired_pages", &g)) return rc;
  if (isPending == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *isPending = g->retired_pages_pending ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t device, unsigned int* corrRows,
                                       unsigned int* uncRows, unsigned int* isPending,
                                       unsigned int* failureOccurred) {
  Call c;
  const Gpu* g = nullptr;
  if (auto rc = c.Resolve(device, "remapped_rows", &g)) return rc;
  if (!corrRows || !uncRows || !isPending || !failureOccurred) return NVML_ERROR_INVALID_ARGUMENT;
  *corrRows = g->remapped_rows.correctable;
  *uncRows = g->remapped_rows.uncorrectable;
  *isPending = g->remapped_rows.pending ? 1 : 0;
  *failureOccurred = g->remapped_rows.failure ? 1 : 0;
  return NVML_SUCCESS;
}

#define GPUNODE_SIM_UINT_GETTER(fn, field, expr)            \
  nvmlReturn_t fn(nvmlDevice_t device, unsigned int* out) { \
    Call c;                                                 \
    const Gpu* g = nullptr;                                 \
    if (auto rc = c.Resolve(device, field, &g)) return rc;  \
    if (out == nullptr) return NVML_ERROR_INVALID_ARGUMENT; \
    *out = (expr);                                          \
    return NVML_SUCCESS;                                    \
  }

GPUNODE_SIM_UINT_GETTER(nvmlDeviceGetCurrPcieLinkGeneration, "pcie", g->pcie.gen)
GPUNODE_SIM_UINT_GETTER(nvmlDeviceGetMaxPcieLinkGeneration, "pcie", g->pcie.max_gen)
GPUNODE_SIM_UINT_GETTER(nvmlDeviceGetGpuMaxPcieLinkGeneration, "pcie", g->pcie.gpu_max_gen)
GPUNODE_SIM_UINT_GETTER(nvmlDeviceGetCurrPcieLinkWidth, "pcie", g->pcie.width)
GPUNODE_SIM_UINT_GETTER(nvmlDeviceGetMaxPcieLinkWidth, "pcie", g->pcie.max_width)
GPUNODE_SIM_UINT_GETTER(nvmlDeviceGetPowerUsage, "power_usage",
                        gpunode::sim::Milliwatts(g->power_usage_w))
GPUNODE_SIM_UINT_GETTER(nvmlDeviceGetPowerManagementLimit, "power_limit",
                        gpunode::sim::Milliwatts(g->power_limit_w))
GPUNODE_SIM_UINT_GETTER(nvmlDeviceGetEnforcedPowerLimit, "enforced_power_limit",
                        gpunode::sim::Milliwatts(g->power_enforced_limit_w))
#undef GPUNODE_SIM_UINT_GETTER

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, nvmlTemperatureSensors_t sensor,
                                      unsigned int* temp) {
  Call c;
  const Gpu* g = nullptr;
  if (auto rc = c.Resolve(device, "temperature", &g)) return rc;
  if (temp == nullptr || sensor != NVML_TEMPERATURE_GPU) return NVML_ERROR_INVALID_ARGUMENT;
  *temp = g->temperature_c;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device,
                                                 unsigned long long* millijoules) {
  Call c;
  const Gpu* g = nullptr;
  if (auto rc = c.Resolve(device, "energy", &g)) return rc;
  if (millijoules == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *millijoules = g->energy_mj;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t* utilization) {
  Call c;
  const Gpu* g = nullptr;
  if (auto rc = c.Resolve(device, "utilization", &g)) return rc;
  if (utilization == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  // nvml.h: "On MIG-enabled GPUs, querying device utilization rates is not currently supported."
  if (g->mig.enabled) return NVML_ERROR_NOT_SUPPORTED;
  utilization->gpu = g->utilization_gpu;
  utilization->memory = g->utilization_memory;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, nvmlClockType_t type,
                                    unsigned int* clockMHz) {
  Call c;
  const Gpu* g = nullptr;
  if (auto rc = c.Resolve(device, "clocks", &g)) return rc;
  if (clockMHz == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  switch (type) {
    case NVML_CLOCK_GRAPHICS:
      *clockMHz = g->clock_graphics_mhz;
      break;
    case NVML_CLOCK_SM:
      *clockMHz = g->clock_sm_mhz;
      break;
    case NVML_CLOCK_MEM:
      *clockMHz = g->clock_mem_mhz;
      break;
    case NVML_CLOCK_VIDEO:
      *clockMHz = g->clock_video_mhz;
      break;
    default:
      return NVML_ERROR_INVALID_ARGUMENT;
  }
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int* major, int* minor) {
  Call c;
  const Gpu* g = nullptr;
  if (auto rc = c.Resolve(device, "compute_capability", &g)) return rc;
  if (major == nullptr || minor == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *major = g->cc_major;
  *minor = g->cc_minor;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int* infoCount,
                                                     nvmlProcessInfo_t* infos) {
  Call c;
  const Gpu* g = nullptr;
  const MigDevice* m = nullptr;
  if (auto rc = c.Resolve(device, "processes", &g, &m, true)) return rc;
  if (infoCount == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  std::vector<const gpunode::sim::Process*> list;
  for (const auto& p : g->processes) {
    if (m == nullptr || (p.gpu_instance_id && *p.gpu_instance_id == m->gpu_instance_id))
      list.push_back(&p);
  }
  if (*infoCount < list.size()) {
    *infoCount = static_cast<unsigned int>(list.size());
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  if (infos == nullptr && !list.empty()) return NVML_ERROR_INVALID_ARGUMENT;
  for (size_t i = 0; i < list.size(); ++i) {
    infos[i].pid = list[i]->pid;
    infos[i].usedGpuMemory = list[i]->used_mib * kMiB;
    infos[i].gpuInstanceId = list[i]->gpu_instance_id.value_or(kNoInstance);
    infos[i].computeInstanceId = list[i]->compute_instance_id.value_or(kNoInstance);
  }
  *infoCount = static_cast<unsigned int>(list.size());
  return NVML_SUCCESS;
}

// ---- MIG --------------------------------------------------------------------------------------

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int* currentMode,
                                  unsigned int* pendingMode) {
  Call c;
  const Gpu* g = nullptr;
  if (auto rc = c.Resolve(device, "mig", &g, nullptr, true)) return rc;
  if (device->mig >= 0 || currentMode == nullptr || pendingMode == nullptr)
    return NVML_ERROR_INVALID_ARGUMENT;
  if (g->mig.max_devices == 0) return NVML_ERROR_NOT_SUPPORTED;
  *currentMode = g->mig.enabled ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE;
  *pendingMode = g->mig.pending ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int* count) {
  Call c;
  const Gpu* g = nullptr;
  if (auto rc = c.Resolve(device, "mig", &g, nullptr, true)) return rc;
  if (device->mig >= 0 || count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (g->mig.max_devices == 0) return NVML_ERROR_NOT_SUPPORTED;
  *count = g->mig.max_devices;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index,
                                                 nvmlDevice_t* migDevice) {
  Call c;
  const Gpu* g = nullptr;
  if (auto rc = c.Resolve(device, "mig", &g, nullptr, true)) return rc;
  if (device->mig >= 0 || migDevice == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (g->mig.max_devices == 0) return NVML_ERROR_NOT_SUPPORTED;
  if (index >= g->mig.max_devices) return NVML_ERROR_INVALID_ARGUMENT;
  if (!g->mig.enabled || index >= g->mig.devices.size()) return NVML_ERROR_NOT_FOUND;
  *migDevice = c.state().Handle(device->gpu, static_cast<int>(index));
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int* id) {
  Call c;
  const Gpu* g = nullptr;
  const MigDevice* m = nullptr;
  if (auto rc = c.Resolve(device, "", &g, &m, true)) return rc;
  if (id == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (m == nullptr) return NVML_ERROR_NOT_SUPPORTED;
  *id = m->gpu_instance_id;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int* id) {
  Call c;
  const Gpu* g = nullptr;
  const MigDevice* m = nullptr;
  if (auto rc = c.Resolve(device, "", &g, &m, true)) return rc;
  if (id == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (m == nullptr) return NVML_ERROR_NOT_SUPPORTED;
  *id = m->compute_instance_id;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetAttributes_v2(nvmlDevice_t device, nvmlDeviceAttributes_t* attributes) {
  Call c;
  const Gpu* g = nullptr;
  const MigDevice* m = nullptr;
  if (auto rc = c.Resolve(device, "attributes", &g, &m, true)) return rc;
  if (attributes == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  std::memset(attributes, 0, sizeof(*attributes));
  if (m != nullptr) {
    // Engine counts scale with the instance's slices (approximately as on A100/H100).
    attributes->multiprocessorCount = m->multiprocessors;
    attributes->sharedCopyEngineCount = m->slices;
    attributes->sharedDecoderCount = m->slices / 2 + (m->slices >= 7 ? 1 : 0);
    attributes->sharedEncoderCount = 0;
    attributes->sharedJpegCount = m->slices >= 7 ? 1 : 0;
    attributes->sharedOfaCount = m->slices >= 7 ? 1 : 0;
    attributes->gpuInstanceSliceCount = m->slices;
    attributes->computeInstanceSliceCount = m->compute_slices;
    attributes->memorySizeMB = m->memory_mib;
  } else {
    attributes->multiprocessorCount = g->multiprocessors;
    attributes->sharedCopyEngineCount = 7;
    attributes->sharedDecoderCount = 7;
    attributes->sharedEncoderCount = 0;
    attributes->sharedJpegCount = 7;
    attributes->sharedOfaCount = 1;
    attributes->gpuInstanceSliceCount = g->mig.max_devices;
    attributes->computeInstanceSliceCount = g->mig.max_devices;
    attributes->memorySizeMB = g->memory_total_mib;
  }
  return NVML_SUCCESS;
}

// ---- topology and NVLink -----------------------------------------------------------------------

nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t device1, nvmlDevice_t device2,
                                                 nvmlGpuTopologyLevel_t* pathInfo) {
  Call c;
  const Gpu* g1 = nullptr;
  const Gpu* g2 = nullptr;
  if (auto rc = c.Resolve(device1, "topology", &g1)) return rc;
  if (auto rc = c.Resolve(device2, "topology", &g2)) return rc;
  if (pathInfo == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *pathInfo = c.profile().CommonAncestor(device1->gpu, device2->gpu);
  return NVML_SUCCESS;
}

namespace {
nvmlReturn_t FindLink(const Gpu& g, unsigned int link, const gpunode::sim::NvLink** out) {
  if (g.nvlinks.empty()) return NVML_ERROR_NOT_SUPPORTED;
  if (link >= NVML_NVLINK_MAX_LINKS) return NVML_ERROR_INVALID_ARGUMENT;
  for (const auto& l : g.nvlinks) {
    if (l.link == link) {
      *out = &l;
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_INVALID_ARGUMENT;  // past the GPU's last link
}
}  // namespace

nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link,
                                      nvmlEnableState_t* isActive) {
  Call c;
  const Gpu* g = nullptr;
  if (auto rc = c.Resolve(device, "nvlink", &g)) return rc;
  if (isActive == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const gpunode::sim::NvLink* l = nullptr;
  if (auto rc = FindLink(*g, link, &l)) return rc;
  *isActive = l->active ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device, unsigned int link,
                                                 nvmlPciInfo_t* pci) {
  Call c;
  const Gpu* g = nullptr;
  if (auto rc = c.Resolve(device, "nvlink", &g)) return rc;
  if (pci == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const gpunode::sim::NvLink* l = nullptr;
  if (auto rc = FindLink(*g, link, &l)) return rc;
  if (l->remote_bus_id.empty()) return NVML_ERROR_NOT_FOUND;
  unsigned vendor = 0x10de, dev = 0, subsystem = 0;
  if (const Gpu* remote = c.profile().FindGpuByBusId(l->remote_bus_id)) {
    dev = remote->device_id;
    subsystem = remote->subsystem_id;
  } else {
    for (const auto& f : c.profile().host.pci_devices) {
      if (f.bus_id == l->remote_bus_id) {
        vendor = f.vendor;
        dev = f.device;
        subsystem = f.vendor;
      }
    }
  }
  gpunode::sim::FillPci(l->remote_bus_id, vendor, dev, subsystem, pci);
  return NVML_SUCCESS;
}

// ---- events -----------------------------------------------------------------------------------

nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t* set) {
  Call c;
  if (c.rc()) return c.rc();
  if (set == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *set = new nvmlEventSet_st();
  c.state().event_sets.insert(*set);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t device, unsigned long long* eventTypes) {
  Call c;
  const Gpu* g = nullptr;
  if (auto rc = c.Resolve(device, "events", &g)) return rc;
  if (eventTypes == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *eventTypes = gpunode::sim::SupportedEvents(*g);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long eventTypes,
                                      nvmlEventSet_t set) {
  Call c;
  const Gpu* g = nullptr;
  if (auto rc = c.Resolve(device, "events", &g)) return rc;
  if (set == nullptr || !c.state().event_sets.count(set)) return NVML_ERROR_INVALID_ARGUMENT;
  if (eventTypes == 0 || (eventTypes & ~gpunode::sim::SupportedEvents(*g)) != 0)
    return NVML_ERROR_NOT_SUPPORTED;
  for (auto& r : set->regs) {
    if (r.gpu == device->gpu) {
      r.mask |= eventTypes;
      return NVML_SUCCESS;
    }
  }
  nvmlEventSet_st::Registration r;
  r.gpu = device->gpu;
  r.mask = eventTypes;
  set->regs.push_back(r);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t* data,
                                 unsigned int timeoutms) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeoutms);
  SimState& s = SimState::Get();
  bool changed = false;
  int change_fd = -1;
  uint64_t generation = 0;
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(s.mu);
      if (s.nvml_refcount == 0 || !s.loaded()) return NVML_ERROR_UNINITIALIZED;
      if (set == nullptr || data == nullptr || !s.event_sets.count(set))
        return NVML_ERROR_INVALID_ARGUMENT;
      s.MaybeReload(/*force=*/changed || s.change_generation != generation);
      changed = false;
      change_fd = s.ChangeFd();
      generation = s.change_generation;
      const auto& gpus = s.profile().gpus;
      // Pending events first, in registration order.
      for (auto& r : set->regs) {
        if (r.gpu >= gpus.size()) continue;
        const auto& events = gpus[r.gpu].events;
        r.delivered = std::min(r.delivered, events.size());
        while (r.delivered < events.size()) {
          const gpunode::sim::Event& ev = events[r.delivered++];
          const unsigned long long type = gpunode::sim::EventMask(ev.type);
          if ((r.mask & type) == 0) continue;
          data->device = s.Handle(r.gpu, -1);
          data->eventType = type;
          data->eventData = ev.data;
          data->gpuInstanceId = ev.gpu_instance_id.value_or(kNoInstance);
          data->computeInstanceId = ev.compute_instance_id.value_or(kNoInstance);
          return NVML_SUCCESS;
        }
      }
      // Then a registered GPU that fell off the bus, once.
      for (auto& r : set->regs) {
        if (r.lost_reported || (r.gpu < gpus.size() && !gpus[r.gpu].lost)) continue;
        r.lost_reported = true;
        data->device = s.Handle(r.gpu, -1);
        data->eventType = 0;
        data->eventData = 0;
        data->gpuInstanceId = kNoInstance;
        data->computeInstanceId = kNoInstance;
        return NVML_ERROR_GPU_IS_LOST;
      }
    }
    auto now = Clock::now();
    if (now >= deadline) return NVML_ERROR_TIMEOUT;
    // The real driver blocks in the kernel until an event or the timeout. The simulator blocks on
    // inotify of the profile's folder (SimState::ChangeFd), a second at most at a time so that a
    // second waiter, whose wake-up another one consumed, looks again within a second; without
    // inotify (a built-in profile cannot change) it just sleeps.
    const auto slice = std::min<Clock::duration>(deadline - now, std::chrono::milliseconds(1000));
    if (change_fd < 0) {
      std::this_thread::sleep_for(slice);
      continue;
    }
    pollfd pfd{change_fd, POLLIN, 0};
    const int ms = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(slice).count()) + 1;
    if (::poll(&pfd, 1, ms) > 0 && (pfd.revents & POLLIN)) {
      char buf[4096];
      while (::read(change_fd, buf, sizeof buf) > 0) {
      }
      std::lock_guard<std::mutex> lock(s.mu);
      ++s.change_generation;
      changed = true;
    }
  }
}

nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
  Call c;
  if (c.rc()) return c.rc();
  if (set == nullptr || !c.state().event_sets.erase(set)) return NVML_ERROR_INVALID_ARGUMENT;
  delete set;
  return NVML_SUCCESS;
}

// Clock event (throttle) reasons: simulated GPUs run unthrottled (0 = no reason); a "clocks" fault
// in the profile fails the call like the other clock queries.
nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device,
                                                    unsigned long long* clocksEventReasons) {
  Call c;
  const Gpu* g = nullptr;
  if (auto rc = c.Resolve(device, "clocks", &g)) return rc;
  if (clocksEventReasons == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *clocksEventReasons = 0;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device,
                                                       unsigned long long* clocksThrottleReasons) {
  return nvmlDeviceGetCurrentClocksEventReasons(device, clocksThrottleReasons);
}

// ---- field values, PCIe replays, encoder/decoder ---------------------------------------------
// Each GPU answers what its profile gives (memory_temp_c, energy_mj, nvlink_throughput_kib); any
// other known field id is NOT_SUPPORTED in its entry; ids 0 and >= 256 are INVALID_ARGUMENT.

namespace gpunode::sim {
namespace {

constexpr unsigned kAllLinks = 0xFFFFFFFFu;
constexpr unsigned kFieldIdLimit = 256;

long long NowMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void FillField(const Gpu& g, nvmlFieldValue_t* v) {
  v->timestamp = NowMicros();
  v->latencyUsec = 0;
  v->valueType = NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
  v->value.ullVal = 0;
  if (v->fieldId == 0 || v->fieldId >= kFieldIdLimit) {
    v->nvmlReturn = NVML_ERROR_INVALID_ARGUMENT;
    return;
  }
  v->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
  switch (v->fieldId) {
    case NVML_FI_DEV_MEMORY_TEMP:
      if (g.memory_temp_c && !g.Unsupported("temperature")) {
        v->valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
        v->value.uiVal = *g.memory_temp_c;
        v->nvmlReturn = NVML_SUCCESS;
      }
      return;
    case NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION:
      if (!g.Unsupported("energy")) {
        v->value.ullVal = g.energy_mj;
        v->nvmlReturn = NVML_SUCCESS;
      }
      return;
    case NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX:
    case NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX: {
      if (!g.nvlink_throughput_kib || g.Unsupported("nvlink")) return;
      unsigned long long total = v->fieldId == NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX
                                     ? g.nvlink_throughput_kib->tx_kib
                                     : g.nvlink_throughput_kib->rx_kib;
      if (v->scopeId == kAllLinks) {
        v->value.ullVal = total;
        v->nvmlReturn = NVML_SUCCESS;
        return;
      }
      // One link: the total shared evenly by the active links.
      unsigned long long active = 0;
      bool found = false;
      for (const NvLink& l : g.nvlinks) {
        if (l.active) ++active;
        if (l.link == v->scopeId) found = l.active;
      }
      if (!found) {
        v->nvmlReturn = NVML_ERROR_INVALID_ARGUMENT;
        return;
      }
      v->value.ullVal = total / active;
      v->nvmlReturn = NVML_SUCCESS;
      return;
    }
    default:
      return;
  }
}

}  // namespace
}  // namespace gpunode::sim

nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int valuesCount,
                                      nvmlFieldValue_t* values) {
  Call c;
  const Gpu* g = nullptr;
  if (auto rc = c.Resolve(device, "", &g)) return rc;
  if (values == nullptr || valuesCount <= 0) return NVML_ERROR_INVALID_ARGUMENT;
  for (int i = 0; i < valuesCount; ++i) gpunode::sim::FillField(*g, &values[i]);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPcieReplayCounter(nvmlDevice_t device, unsigned int* value) {
  Call c;
  const Gpu* g = nullptr;
  if (auto rc = c.Resolve(device, "pcie", &g)) return rc;
  if (value == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (!g->pcie_replay_count) return NVML_ERROR_NOT_SUPPORTED;
  *value = *g->pcie_replay_count;
  return NVML_SUCCESS;
}

namespace gpunode::sim {
namespace {

// Encoder/decoder utilisation: NVML reports the sampling period with the value (µs).
constexpr unsigned kCodecSamplingPeriodUs = 100000;  // the H200's answer

nvmlReturn_t CodecUtil(nvmlDevice_t device, bool encoder, unsigned int* utilization,
                       unsigned int* samplingPeriodUs) {
  Call c;
  const Gpu* g = nullptr;
  if (auto rc = c.Resolve(device, "utilization", &g)) return rc;
  if (utilization == nullptr || samplingPeriodUs == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  // nvml.h: "On MIG-enabled GPUs, querying encoder (decoder) utilization is not currently supported."
  if (g->mig.enabled) return NVML_ERROR_NOT_SUPPORTED;
  const std::optional<unsigned>& v = encoder ? g->encoder_util : g->decoder_util;
  if (!v) return NVML_ERROR_NOT_SUPPORTED;
  *utilization = *v;
  *samplingPeriodUs = kCodecSamplingPeriodUs;
  return NVML_SUCCESS;
}

}  // namespace
}  // namespace gpunode::sim

nvmlReturn_t nvmlDeviceGetEncoderUtilization(nvmlDevice_t device, unsigned int* utilization,
                                             unsigned int* samplingPeriodUs) {
  return gpunode::sim::CodecUtil(device, true, utilization, samplingPeriodUs);
}

nvmlReturn_t nvmlDeviceGetDecoderUtilization(nvmlDevice_t device, unsigned int* utilization,
                                             unsigned int* samplingPeriodUs) {
  return gpunode::sim::CodecUtil(device, false, utilization, samplingPeriodUs);
}

// ---- GPM --------------------------------------------------------------------------------------
// nvmlGpmQueryDeviceSupport answers SUCCESS with isSupportedDevice = 0 for a GPU whose profile has
// no `gpm:` (or `supported: false`), like pre-Hopper boards; nvmlGpmSampleGet then says
// NOT_SUPPORTED. Samples are real objects: freeing an unknown one is INVALID_ARGUMENT.
// nvmlGpmMetricsGet checks the struct version (ARGUMENT_VERSION_MISMATCH), numMetrics, that both
// samples were filled, on one GPU, sample1 before sample2 (else INVALID_ARGUMENT), and fills
// each metric's nvmlReturn: NOT_SUPPORTED for metrics the profile does not give,
// INVALID_ARGUMENT for ids outside 1..NVML_GPM_METRIC_MAX-1 (as the real driver does).
// Stricter than the real driver on purpose: driver 580.159.04 answers SUCCESS (with zeros) for
// unfilled or swapped samples; the simulator rejects them so our callers' mistakes show.

namespace gpunode::sim {
namespace {

bool GpmSupported(const Gpu& g) { return g.gpm && g.gpm->supported; }

struct GpmInfo {
  unsigned id;
  const char* short_name;
  const char* long_name;
  const char* unit;
};
constexpr GpmInfo kGpmInfo[] = {
    // What driver 580.159.04 answers on the H200.
    {NVML_GPM_METRIC_GRAPHICS_UTIL, "gract", "GRAPHICS_UTIL", "%"},
    {NVML_GPM_METRIC_SM_UTIL, "smutil", "SM_UTIL", "%"},
    {NVML_GPM_METRIC_SM_OCCUPANCY, "smocc", "SM_OCCUPANCY", "%"},
    {NVML_GPM_METRIC_ANY_TENSOR_UTIL, "mmaact", "ANY_TENSOR_UTIL", "%"},
    {NVML_GPM_METRIC_DRAM_BW_UTIL, "dram", "DRAM_BW_UTIL", "%"},
    {NVML_GPM_METRIC_FP64_UTIL, "fp64", "FP64_UTIL", "%"},
    {NVML_GPM_METRIC_FP32_UTIL, "fp32", "FP32_UTIL", "%"},
    {NVML_GPM_METRIC_FP16_UTIL, "fp16", "FP16_UTIL", "%"},
    {NVML_GPM_METRIC_PCIE_TX_PER_SEC, "pcitx", "PCIE_TX_PER_SEC", "MiB/s"},
    {NVML_GPM_METRIC_PCIE_RX_PER_SEC, "pcirx", "PCIE_RX_PER_SEC", "MiB/s"},
};

}  // namespace
}  // namespace gpunode::sim

nvmlReturn_t nvmlGpmQueryDeviceSupport(nvmlDevice_t device, nvmlGpmSupport_t* gpmSupport) {
  Call c;
  const Gpu* g = nullptr;
  if (auto rc = c.Resolve(device, "", &g)) return rc;
  if (gpmSupport == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (gpmSupport->version != NVML_GPM_SUPPORT_VERSION) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  gpmSupport->isSupportedDevice = gpunode::sim::GpmSupported(*g) ? 1 : 0;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpmSampleAlloc(nvmlGpmSample_t* gpmSample) {
  Call c;
  if (c.rc()) return c.rc();
  if (gpmSample == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *gpmSample = new nvmlGpmSample_st();
  c.state().gpm_samples.insert(*gpmSample);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpmSampleFree(nvmlGpmSample_t gpmSample) {
  Call c;
  if (c.rc()) return c.rc();
  if (gpmSample == nullptr || !c.state().gpm_samples.erase(gpmSample))
    return NVML_ERROR_INVALID_ARGUMENT;
  delete gpmSample;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpmSampleGet(nvmlDevice_t device, nvmlGpmSample_t gpmSample) {
  Call c;
  const Gpu* g = nullptr;
  if (auto rc = c.Resolve(device, "", &g)) return rc;
  if (gpmSample == nullptr || !c.state().gpm_samples.count(gpmSample))
    return NVML_ERROR_INVALID_ARGUMENT;
  if (!gpunode::sim::GpmSupported(*g)) return NVML_ERROR_NOT_SUPPORTED;
  gpmSample->filled = true;
  gpmSample->gpu = device->gpu;
  gpmSample->sequence = ++c.state().gpm_sequence;
  gpmSample->metrics = g->gpm->metrics;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpmMetricsGet(nvmlGpmMetricsGet_t* metricsGet) {
  Call c;
  if (c.rc()) return c.rc();
  if (metricsGet == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (metricsGet->version != NVML_GPM_METRICS_GET_VERSION)
    return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  if (metricsGet->numMetrics == 0 || metricsGet->numMetrics > NVML_GPM_METRIC_MAX)
    return NVML_ERROR_INVALID_ARGUMENT;
  const auto& samples = c.state().gpm_samples;
  nvmlGpmSample_t s1 = metricsGet->sample1;
  nvmlGpmSample_t s2 = metricsGet->sample2;
  if (s1 == nullptr || s2 == nullptr || !samples.count(s1) || !samples.count(s2))
    return NVML_ERROR_INVALID_ARGUMENT;
  if (!s1->filled || !s2->filled || s1->gpu != s2->gpu || s1->sequence >= s2->sequence)
    return NVML_ERROR_INVALID_ARGUMENT;
  for (unsigned i = 0; i < metricsGet->numMetrics; ++i) {
    nvmlGpmMetric_t& m = metricsGet->metrics[i];
    m.value = 0;
    m.metricInfo.shortName = nullptr;
    m.metricInfo.longName = nullptr;
    m.metricInfo.unit = nullptr;
    if (m.metricId == 0 || m.metricId >= NVML_GPM_METRIC_MAX) {
      m.nvmlReturn = NVML_ERROR_INVALID_ARGUMENT;
      continue;
    }
    for (const auto& info : gpunode::sim::kGpmInfo) {
      if (info.id != m.metricId) continue;
      m.metricInfo.shortName = const_cast<char*>(info.short_name);
      m.metricInfo.longName = const_cast<char*>(info.long_name);
      m.metricInfo.unit = const_cast<char*>(info.unit);
    }
    auto it = s2->metrics.find(m.metricId);
    if (it == s2->metrics.end()) {
      m.nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
      continue;
    }
    m.value = it->second;
    m.nvmlReturn = NVML_SUCCESS;
  }
  return NVML_SUCCESS;
}

// ---- Entry points NVIDIA's device plugin reads (gpunode itself does not call them)
extern "C" __attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetHandleByUUID(
    const char* uuid, nvmlDevice_t* device);

// A GPU's "GPU-..." or a MIG device's "MIG-..." UUID -> its handle, as the driver answers (the
// device plugin's health check re-resolves every device it watches this way).
nvmlReturn_t nvmlDeviceGetHandleByUUID(const char* uuid, nvmlDevice_t* device) {
  Call c;
  if (c.rc()) return c.rc();
  if (uuid == nullptr || device == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const auto& gpus = c.profile().gpus;
  for (unsigned i = 0; i < gpus.size(); ++i) {
    const Gpu& g = gpus[i];
    if (g.uuid == uuid) {
      if (g.lost) return NVML_ERROR_GPU_IS_LOST;
      *device = c.state().Handle(i, -1);
      return NVML_SUCCESS;
    }
    if (!g.mig.enabled) continue;
    for (unsigned m = 0; m < g.mig.devices.size(); ++m) {
      if (g.mig.devices[m].uuid != uuid) continue;
      if (g.lost) return NVML_ERROR_GPU_IS_LOST;
      *device = c.state().Handle(i, static_cast<int>(m));
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_NOT_FOUND;
}

// ---- Entry points NVIDIA's nvidia-ctk reads (cdi generate on a node with MIG devices)
// (The lead's note: this block was cut by accident at 19:16 while removing a duplicate; the two
// entry points below are the device plugin's and nvidia-ctk's MIG checks, restored.)
extern "C" __attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceIsMigDeviceHandle(
    nvmlDevice_t device, unsigned int* isMigDevice);
extern "C" __attribute__((visibility("default"))) nvmlReturn_t
nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t migDevice, nvmlDevice_t* device);

nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int* isMigDevice) {
  Call c;
  const Gpu* g = nullptr;
  if (auto rc = c.Resolve(device, "", &g, nullptr, true)) return rc;
  if (isMigDevice == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *isMigDevice = device->mig >= 0 ? 1 : 0;
  return NVML_SUCCESS;
}

// A MIG device's parent GPU; a GPU handle is refused, as the driver does.
nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t migDevice,
                                                          nvmlDevice_t* device) {
  Call c;
  const Gpu* g = nullptr;
  if (auto rc = c.Resolve(migDevice, "", &g, nullptr, true)) return rc;
  if (device == nullptr || migDevice->mig < 0) return NVML_ERROR_INVALID_ARGUMENT;
  *device = c.state().Handle(migDevice->gpu, -1);
  return NVML_SUCCESS;
}

// ---- Entry points NVIDIA's gpu-feature-discovery reads
// (its version, MIG-capability, resource and IMEX labelers, through go-nvlib's device walk; gpunode
// itself does not call them).
#include "sim/nvml/nvml_abi_more.h"

#define GPUNODE_SIM_DECLARE_GFD(ret, name, params) \
  extern "C" __attribute__((visibility("default"))) ret name params;
GPUNODE_SIM_GFD_FUNCTIONS(GPUNODE_SIM_DECLARE_GFD)
#undef GPUNODE_SIM_DECLARE_GFD

namespace gpunode::sim {
namespace {

// The architecture NVML reports for a compute capability (the profile names the capability).
nvmlDeviceArchitecture_t ArchitectureOf(int major, int minor) {
  switch (major) {
    case 3:
      return NVML_DEVICE_ARCH_KEPLER;
    case 5:
      return NVML_DEVICE_ARCH_MAXWELL;
    case 6:
      return NVML_DEVICE_ARCH_PASCAL;
    case 7:
      return minor < 5 ? NVML_DEVICE_ARCH_VOLTA : NVML_DEVICE_ARCH_TURING;
    case 8:
      return minor < 9 ? NVML_DEVICE_ARCH_AMPERE : NVML_DEVICE_ARCH_ADA;
    case 9:
      return NVML_DEVICE_ARCH_HOPPER;
    case 10:
    case 11:
    case 12:
      return NVML_DEVICE_ARCH_BLACKWELL;
  }
  return NVML_DEVICE_ARCH_UNKNOWN;
}

// The brand NVML reports, from the product name as current drivers word it: data-centre parts
// ("NVIDIA H200", "Tesla T4" on old drivers, "NVIDIA A100-SXM4-80GB") say NVIDIA or Tesla, the
// workstation and consumer lines say so in their names.
nvmlBrandType_t BrandOf(const std::string& name) {
  auto has = [&name](const char* word) { return name.find(word) != std::string::npos; };
  if (has("GeForce")) return NVML_BRAND_GEFORCE;
  if (has("TITAN")) return NVML_BRAND_TITAN;
  if (has("Quadro RTX")) return NVML_BRAND_QUADRO_RTX;
  if (has("Quadro")) return NVML_BRAND_QUADRO;
  if (has("NVS")) return NVML_BRAND_NVS;
  if (has("RTX")) return NVML_BRAND_NVIDIA_RTX;
  if (has("Tesla")) return NVML_BRAND_TESLA;
  return NVML_BRAND_NVIDIA;
}

}  // namespace
}  // namespace gpunode::sim

// The CUDA driver API version, as nvmlSystemGetCudaDriverVersion_v2 gives it (13000 for 13.0):
// the unversioned entry point answers the same on current drivers.
nvmlReturn_t nvmlSystemGetCudaDriverVersion(int* cudaDriverVersion) {
  return nvmlSystemGetCudaDriverVersion_v2(cudaDriverVersion);
}

// Derived from the GPU's compute capability. A MIG device handle is not answered (as the other
// full-GPU queries here).
nvmlReturn_t nvmlDeviceGetArchitecture(nvmlDevice_t device, nvmlDeviceArchitecture_t* arch) {
  Call c;
  const Gpu* g = nullptr;
  if (auto rc = c.Resolve(device, "", &g)) return rc;
  if (arch == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *arch = gpunode::sim::ArchitectureOf(g->cc_major, g->cc_minor);
  return NVML_SUCCESS;
}

// Derived from the GPU's name.
nvmlReturn_t nvmlDeviceGetBrand(nvmlDevice_t device, nvmlBrandType_t* type) {
  Call c;
  const Gpu* g = nullptr;
  if (auto rc = c.Resolve(device, "", &g)) return rc;
  if (type == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *type = gpunode::sim::BrandOf(g->name);
  return NVML_SUCCESS;
}

// The simulated GPUs sit on no coherent-memory platform the profile describes: NOT_SUPPORTED, as
// the weak stub answered before gpunode read it (NVIDIA's components then leave the mode out; a
// real H200 on x86 with driver 580 says NONE).
nvmlReturn_t nvmlDeviceGetAddressingMode(nvmlDevice_t device, nvmlDeviceAddressingMode_t* mode) {
  Call c;
  const Gpu* g = nullptr;
  if (auto rc = c.Resolve(device, "", &g)) return rc;
  if (mode == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  return NVML_ERROR_NOT_SUPPORTED;
}

// A GPU instance of a full GPU by its id: NOT_SUPPORTED when the GPU cannot do MIG or MIG is off,
// NOT_FOUND when no instance has that id.
nvmlReturn_t nvmlDeviceGetGpuInstanceById(nvmlDevice_t device, unsigned int id,
                                          nvmlGpuInstance_t* gpuInstance) {
  Call c;
  const Gpu* g = nullptr;
  if (auto rc = c.Resolve(device, "mig", &g, nullptr, true)) return rc;
  if (device->mig >= 0 || gpuInstance == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (gpunode::sim::GiProfilesFor(*g).empty()) return NVML_ERROR_NOT_SUPPORTED;
  auto& runtime = c.state().mig();
  if (device->gpu >= runtime.size() || !runtime[device->gpu].current)
    return NVML_ERROR_NOT_SUPPORTED;
  for (const gpunode::sim::SimGi& gi : runtime[device->gpu].gis) {
    if (gi.id != id) continue;
    *gpuInstance = c.state().GiHandle(device->gpu, gi.serial);
    return NVML_SUCCESS;
  }
  return NVML_ERROR_NOT_FOUND;
}

// A compute instance of a GPU instance by its id: INVALID_ARGUMENT for a GPU instance that was
// destroyed, NOT_FOUND when no compute instance has that id.
nvmlReturn_t nvmlGpuInstanceGetComputeInstanceById(nvmlGpuInstance_t gpuInstance, unsigned int id,
                                                   nvmlComputeInstance_t* computeInstance) {
  Call c;
  if (c.rc()) return c.rc();
  if (gpuInstance == nullptr || computeInstance == nullptr ||
      !c.state().ValidGiHandle(gpuInstance))
    return NVML_ERROR_INVALID_ARGUMENT;
  const Gpu* g = nullptr;
  if (auto rc = c.Resolve(c.state().Handle(gpuInstance->gpu, -1), "mig", &g)) return rc;
  auto& runtime = c.state().mig();
  if (gpuInstance->gpu >= runtime.size() || !runtime[gpuInstance->gpu].current)
    return NVML_ERROR_INVALID_ARGUMENT;
  for (const gpunode::sim::SimGi& gi : runtime[gpuInstance->gpu].gis) {
    if (gi.serial != gpuInstance->serial) continue;
    for (const gpunode::sim::SimCi& ci : gi.cis) {
      if (ci.id != id) continue;
      *computeInstance = c.state().CiHandle(gpuInstance->gpu, gi.serial, ci.serial);
      return NVML_SUCCESS;
    }
    return NVML_ERROR_NOT_FOUND;
  }
  return NVML_ERROR_INVALID_ARGUMENT;  // the GPU instance is gone
}

// GPU fabric (multi-node NVLink) registration. Before Hopper the query is NOT_SUPPORTED; Hopper
// and newer answer, and a simulated node is never part of a multi-node NVLink domain (profiles
// describe no IMEX domain), so the probe state is "not supported" and the cluster UUID is zero:
// no GPU is fabric-attached, as on HGX/DGX and PCIe systems.
nvmlReturn_t nvmlDeviceGetGpuFabricInfo(nvmlDevice_t device, nvmlGpuFabricInfo_t* gpuFabricInfo) {
  Call c;
  const Gpu* g = nullptr;
  if (auto rc = c.Resolve(device, "", &g)) return rc;
  if (gpuFabricInfo == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (g->cc_major < 9) return NVML_ERROR_NOT_SUPPORTED;
  std::memset(gpuFabricInfo, 0, sizeof(*gpuFabricInfo));
  gpuFabricInfo->status = NVML_SUCCESS;
  gpuFabricInfo->state = NVML_GPU_FABRIC_STATE_NOT_SUPPORTED;
  return NVML_SUCCESS;
}
