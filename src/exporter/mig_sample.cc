#include "src/exporter/mig_sample.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "src/exporter/sample.h"

namespace gpunode::exporter {
namespace {

constexpr uint64_t kMiB = 1024ull * 1024;
constexpr uint64_t kGiB = 1024ull * kMiB;

}  // namespace

std::string MigInstanceProfileName(std::optional<unsigned> slices, std::optional<uint64_t> memory_bytes) {
  if (!slices || !memory_bytes || *slices == 0 || *memory_bytes == 0) return "";
  return absl::StrCat(*slices, "g.", (*memory_bytes + kGiB - 1) / kGiB, "gb");
}

bool IsPerInstanceField(FieldId id) {
  return id == FieldId::kFbTotal || id == FieldId::kFbFree || id == FieldId::kFbUsed || id == FieldId::kFbReserved;
}

std::optional<double> InstanceValue(const GpuSample& gpu, const MigInstanceSample& instance, FieldId id) {
  if (IsPerInstanceField(id)) return instance.value(id);
  if (Field(id).name.starts_with("DCGM_FI_PROF_")) return std::nullopt;
  return gpu.value(id);
}

std::vector<MigInstanceSample> ReadMigInstances(const gpu::NvmlLibrary& nvml, nvmlDevice_t parent,
                                                const gpu::GpuInfo& info, std::map<FieldId, Status>* errors) {
  std::map<unsigned, MigInstanceSample> by_id;
  for (const gpu::MigDevice& m : info.mig_devices) {
    if (!m.gpu_instance_id) continue;  // NVML did not say which instance: no entity to put it in
    auto [it, first] = by_id.try_emplace(*m.gpu_instance_id);
    MigInstanceSample& inst = it->second;
    if (!m.uuid.empty()) inst.uuids.push_back(m.uuid);
    if (!first) continue;  // the GI's identity and memory come from its first compute instance
    inst.gpu_instance_id = *m.gpu_instance_id;
    inst.profile = MigInstanceProfileName(m.slices, m.memory_total_bytes);
    inst.gi_profile_id = m.gi_profile_id;
    inst.placement_start = m.placement_start;
    nvmlDevice_t handle = nullptr;
    nvmlReturn_t ret = nvml.nvmlDeviceGetMigDeviceHandleByIndex(parent, m.index, &handle);
    nvmlMemory_v2_t mem{};
    mem.version = nvmlMemory_v2;
    if (ret == NVML_SUCCESS) ret = nvml.nvmlDeviceGetMemoryInfo_v2(handle, &mem);
    if (ret == NVML_SUCCESS) {
      // DCGM stores bytes / 2^20 as an integer (floor), as for a whole GPU.
      auto set = [&inst](FieldId id, unsigned long long bytes) {
        inst.values[static_cast<size_t>(id)] = static_cast<double>(bytes / kMiB);
      };
      set(FieldId::kFbTotal, mem.total);
      set(FieldId::kFbFree, mem.free);
      set(FieldId::kFbUsed, mem.used);
      set(FieldId::kFbReserved, mem.reserved);
    } else if (!gpu::NvmlIsUnsupported(ret) && errors != nullptr) {
      const Status st = nvml.Check(
          ret, absl::StrCat("nvmlDeviceGetMemoryInfo_v2(MIG device ", m.index, ", GPU instance ", *m.gpu_instance_id, ")"));
      for (FieldId id : {FieldId::kFbTotal, FieldId::kFbFree, FieldId::kFbUsed, FieldId::kFbReserved}) {
        errors->emplace(id, st);
      }
    }
  }
  std::vector<MigInstanceSample> out;
  out.reserve(by_id.size());
  for (auto& [id, inst] : by_id) out.push_back(std::move(inst));
  return out;
}

}  // namespace gpunode::exporter
