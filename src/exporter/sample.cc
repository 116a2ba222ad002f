#include "src/exporter/sample.h"

#include <chrono>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "src/exporter/nvml_extras.h"
#include "src/exporter/pod_mapper.h"
#include "src/gpu/gpu_reader.h"

namespace gpunode::exporter {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

// gpu::ReadGpu's query names -> the fields they feed.
const std::vector<std::pair<std::string_view, std::vector<FieldId>>>& QueryFields() {
  static const auto* const kMap =
      new std::vector<std::pair<std::string_view, std::vector<FieldId>>>{
          {"nvmlDeviceGetClockInfo(SM)", {FieldId::kSmClock}},
          {"nvmlDeviceGetClockInfo(MEM)", {FieldId::kMemClock}},
          {"nvmlDeviceGetTemperature", {FieldId::kGpuTemp}},
          {"nvmlDeviceGetPowerUsage", {FieldId::kPowerUsage}},
          {"nvmlDeviceGetUtilizationRates", {FieldId::kGpuUtil, FieldId::kMemCopyUtil}},
          {"nvmlDeviceGetMemoryInfo_v2",
           {FieldId::kFbTotal, FieldId::kFbFree, FieldId::kFbUsed, FieldId::kFbReserved}},
          {"nvmlDeviceGetMemoryInfo", {FieldId::kFbTotal, FieldId::kFbFree, FieldId::kFbUsed, FieldId::kFbReserved}},
          {"nvmlDeviceGetRemappedRows",
           {FieldId::kUncorrectableRemappedRows, FieldId::kCorrectableRemappedRows,
            FieldId::kRowRemapFailure}},
      };
  return *kMap;
}

double SecondsSinceEpoch() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

// "0000:18:00.0" (gpu::GpuInfo's sysfs form) -> "00000000:18:00.0" (what NVML and DCGM print).
std::string DcgmBusId(const std::string& bus_id) {
  std::string id = absl::AsciiStrToUpper(bus_id);
  if (id.find(':') == 4) id.insert(0, "0000");
  return id;
}

void IdentifyUnreadableGpus(NodeSnapshot& snapshot, const std::vector<node::BusGpu>& bus) {
  if (bus.empty()) return;
  std::vector<std::string> claimed;  // bus ids NVML told us, this pass or an earlier one
  std::vector<unsigned> unknown;     // GPUs that never told theirs
  for (const GpuSample& g : snapshot.gpus) {
    if (!g.pci_bus_id.empty()) {
      claimed.push_back(g.pci_bus_id);
    } else if (!g.healthy) {
      unknown.push_back(g.index);
    }
  }
  if (unknown.empty()) return;
  const std::map<unsigned, node::BusGpu> found = node::MatchUnreadableGpus(bus, claimed, unknown);
  for (GpuSample& g : snapshot.gpus) {
    auto it = found.find(g.index);
    if (g.healthy || it == found.end()) continue;
    g.pci_bus_id = DcgmBusId(it->second.pci_bus_id);
    if (g.uuid.empty()) g.uuid = it->second.uuid;
    if (g.model_name.empty()) g.model_name = it->second.model;
  }
}

GpuSample SampleFromGpuInfo(const gpu::GpuInfo& info) {
  GpuSample s;
  s.index = info.index;
  s.uuid = info.uuid;
  s.pci_bus_id = DcgmBusId(info.pci_bus_id);
  s.device = absl::StrCat("nvidia", info.index);
  if (info.minor_number) s.dra_device = DraGpuName(*info.minor_number);
  s.minor = info.minor_number;
  s.mig_enabled = info.mig_enabled.value_or(false);
  s.model_name = info.name;
  if (info.memory_total_bytes) s.memory_total_mib = static_cast<double>(*info.memory_total_bytes) / kMiB;

  auto set = [&s](FieldId id, const auto& opt, double scale = 1.0) {
    if (opt) s.set(id, static_cast<double>(*opt) / scale);
  };
  set(FieldId::kSmClock, info.sm_clock_mhz);
  set(FieldId::kMemClock, info.mem_clock_mhz);
  set(FieldId::kGpuTemp, info.temperature_c);
  set(FieldId::kPowerUsage, info.power_usage_w);
  set(FieldId::kGpuUtil, info.utilization_gpu_pct);
  set(FieldId::kMemCopyUtil, info.utilization_memory_pct);
  // DCGM stores bytes / 2^20 as an integer (floor).
  auto mib = [&s](FieldId id, const std::optional<uint64_t>& bytes) {
    if (bytes) s.set(id, static_cast<double>(*bytes / static_cast<uint64_t>(kMiB)));
  };
  mib(FieldId::kFbTotal, info.memory_total_bytes);
  mib(FieldId::kFbFree, info.memory_free_bytes);
  mib(FieldId::kFbUsed, info.memory_used_bytes);
  mib(FieldId::kFbReserved, info.memory_reserved_bytes);
  if (info.remapped_rows) {
    s.set(FieldId::kUncorrectableRemappedRows, info.remapped_rows->uncorrectable);
    s.set(FieldId::kCorrectableRemappedRows, info.remapped_rows->correctable);
    s.set(FieldId::kRowRemapFailure, info.remapped_rows->failure ? 1 : 0);
  }
  for (const auto& [query, fields] : QueryFields()) {
    auto it = info.field_errors.find(std::string(query));
    if (it == info.field_errors.end()) continue;
    for (FieldId id : fields) {
      if (!s.value(id)) s.errors.emplace(id, it->second);
    }
  }
  return s;
}

void ReadEnergy(const gpu::NvmlLibrary& nvml, nvmlDevice_t device, GpuSample& s) {
  unsigned long long mj = 0;
  nvmlReturn_t ret = nvml.nvmlDeviceGetTotalEnergyConsumption(device, &mj);
  if (ret == NVML_SUCCESS) {
    s.set(FieldId::kTotalEnergyConsumption, static_cast<double>(mj));
  } else if (!gpu::NvmlIsUnsupported(ret)) {
    s.errors.emplace(FieldId::kTotalEnergyConsumption,
                     nvml.Check(ret, "nvmlDeviceGetTotalEnergyConsumption"));
  }
}

GpuSample SampleGpu(const gpu::NvmlLibrary& nvml, unsigned index, const GpuSample* previous,
                    bool read_energy) {
  StatusOr<gpu::GpuInfo> info = gpu::ReadGpu(nvml, index, gpu::GpuReadOptions{.live_metrics = true});
  if (!info.ok()) {
    GpuSample s;
    if (previous != nullptr && previous->index == index) s = *previous;
    s.index = index;
    s.device = absl::StrCat("nvidia", index);
    s.healthy = false;
    s.status = info.status();
    s.values.fill(std::nullopt);
    s.errors.clear();
    return s;
  }
  GpuSample s = SampleFromGpuInfo(*info);
  if (!read_energy && !s.mig_enabled) return s;
  StatusOr<nvmlDevice_t> dev = nvml.DeviceHandle(index);
  // The GPU instances' own memory (a MIG device handle each).
  if (s.mig_enabled && dev.ok()) s.mig_instances = ReadMigInstances(nvml, *dev, *info, &s.errors);
  if (!read_energy) return s;
  // Energy is not part of gpu::GpuInfo: read it here (one call, ~4 ms on a real H200).
  if (dev.ok()) {
    ReadEnergy(nvml, *dev, s);
  } else {
    s.errors.emplace(FieldId::kTotalEnergyConsumption, dev.status());
  }
  return s;
}

NodeSnapshot CollectSnapshot(const gpu::NvmlLibrary& nvml, const CollectOptions& options,
                             const NodeSnapshot* previous) {
  const auto start = std::chrono::steady_clock::now();
  NodeSnapshot snap;
  snap.hostname = options.hostname;
  if (previous != nullptr) snap.collection_errors_total = previous->collection_errors_total;

  StatusOr<Version> driver = nvml.DriverVersion();
  if (driver.ok()) {
    snap.driver_version = driver->ToString();
  } else {
    ++snap.collection_errors_total["driver_version"];
  }
  StatusOr<Version> cuda = nvml.CudaDriverVersion();
  if (cuda.ok()) snap.cuda_driver_version = cuda->ToString();
  StatusOr<unsigned> count = nvml.DeviceCount();
  if (!count.ok()) {
    snap.status = count.status();
    ++snap.collection_errors_total["device_count"];
  } else {
    snap.gpus.reserve(*count);
    for (unsigned i = 0; i < *count; ++i) {
      const GpuSample* before = nullptr;
      if (previous != nullptr) {
        for (const GpuSample& g : previous->gpus) {
          if (g.index == i) before = &g;
        }
      }
      GpuSample s = SampleGpu(nvml, i, before);
      if (s.healthy) {
        // One-shot: the fast extra fields (no NVLink rate and no GPM ratios: those need two passes,
        // which the Exporter's samplers make).
        if (StatusOr<nvmlDevice_t> dev = nvml.DeviceHandle(i); dev.ok()) {
          std::array<bool, kFieldCount> all;
          all.fill(true);
          GpuExtrasState state;
          ReadFastExtras(nvml, *dev, all, state, s);
        }
      }
      if (!s.healthy) ++snap.collection_errors_total["gpu"];
      for (const auto& [field, status] : s.errors)
        ++snap.collection_errors_total[std::string(Field(field).name)];
      snap.gpus.push_back(std::move(s));
    }
  }
  IdentifyUnreadableGpus(snap, options.bus_gpus);
  snap.collection_duration_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  snap.timestamp_seconds = SecondsSinceEpoch();
  return snap;
}

void SnapshotStore::Publish(NodeSnapshot snapshot) {
  auto next = std::make_shared<const NodeSnapshot>(std::move(snapshot));
  absl::MutexLock lock(&mu_);
  latest_ = std::move(next);
}

std::shared_ptr<const NodeSnapshot> SnapshotStore::Latest() const {
  absl::MutexLock lock(&mu_);
  return latest_;
}

}  // namespace gpunode::exporter
