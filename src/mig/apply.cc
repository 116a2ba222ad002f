#include "src/mig/apply.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace gpunode::mig {
namespace {

std::string Trim(const char* buf, size_t size) { return std::string(buf, strnlen(buf, size)); }

// mig-parted's memory name when the driver gives no profile name: the share of the GPU's memory
// rounded up to eighths, times its memory in whole GB.
std::string MemoryName(uint64_t memory_mib, uint64_t total_mib) {
  if (total_mib == 0) return "0gb";
  double frac = std::ceil(static_cast<double>(memory_mib) / static_cast<double>(total_mib) * 8.0) / 8.0;
  double total_gb = static_cast<double>((total_mib + 1023) / 1024);
  return absl::StrCat(static_cast<uint64_t>(std::round(frac * total_gb)), "gb");
}

bool Unsupported(const Status& s) {
  auto code = gpu::NvmlReturnOf(s);
  return absl::IsUnimplemented(s) ||
         (code && (*code == NVML_ERROR_NOT_SUPPORTED || *code == NVML_ERROR_INVALID_ARGUMENT ||
                   *code == NVML_ERROR_NOT_FOUND));
}

Status Annotate(const Status& s, const std::string& what) {
  if (s.ok()) return s;
  Status out(s.code(), absl::StrCat(what, ": ", s.message()));
  s.ForEachPayload([&](absl::string_view url, const absl::Cord& payload) { out.SetPayload(url, payload); });
  return out;
}

StatusOr<GpuMigState> ReadGpu(const gpu::NvmlLibrary& nvml, unsigned index) {
  GpuMigState g;
  g.index = index;
  GPUNODE_ASSIGN_OR_RETURN(nvmlDevice_t dev, nvml.DeviceHandle(index));
  char buf[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
  if (nvml.Check(nvml.nvmlDeviceGetName(dev, buf, sizeof buf), "nvmlDeviceGetName").ok())
    g.name = Trim(buf, sizeof buf);
  char ubuf[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
  if (nvml.Check(nvml.nvmlDeviceGetUUID(dev, ubuf, sizeof ubuf), "nvmlDeviceGetUUID").ok())
    g.uuid = Trim(ubuf, sizeof ubuf);
  nvmlPciInfo_t pci{};
  if (nvml.Check(nvml.nvmlDeviceGetPciInfo_v3(dev, &pci), "nvmlDeviceGetPciInfo_v3").ok())
    g.pci_id = pci.pciDeviceId;
  uint64_t total_mib = 0;
  nvmlMemory_t mem{};
  if (nvml.nvmlDeviceGetMemoryInfo(dev, &mem) == NVML_SUCCESS)
    total_mib = mem.total >> 20;

  auto mode = nvml.GetMigMode(dev);
  if (!mode.ok()) {
    if (!Unsupported(mode.status())) return mode.status();
  } else {
    g.mig_capable = true;
    g.mig_current = mode->current == NVML_DEVICE_MIG_ENABLE;
    g.mig_pending = mode->pending == NVML_DEVICE_MIG_ENABLE;
  }
  if (g.mig_capable) {
    for (unsigned p = 0; p < GPUNODE_NVML_GPU_INSTANCE_PROFILES_KNOWN; ++p) {
      auto info = nvml.GpuInstanceProfileInfo(dev, p);
      if (!info.ok()) {
        if (Unsupported(info.status())) continue;
        return info.status();
      }
      GiProfile gp;
      gp.profile = p;
      gp.id = info->id;
      std::string name = Trim(info->name, sizeof info->name);
      if (absl::StartsWith(name, "MIG ")) name = name.substr(4);
      if (name.empty()) {
        name = absl::StrCat(info->sliceCount, "g.", MemoryName(info->memorySizeMB, total_mib),
                            p == NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1 ||
                                    p == NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1
                                ? "+me"
                                : "");
      }
      gp.name = name;
      gp.slices = info->sliceCount;
      gp.instance_count = info->instanceCount;
      gp.memory_mib = info->memorySizeMB;
      gp.multiprocessors = info->multiprocessorCount;
      auto placements = nvml.GpuInstancePossiblePlacements(dev, info->id);
      if (placements.ok()) {
        for (const auto& pl : *placements) {
          gp.starts.push_back(pl.start);
          gp.placement_size = pl.size;
        }
      }
      g.profiles.push_back(gp);
    }
    if (g.mig_current) {
      for (const GiProfile& gp : g.profiles) {
        auto gis = nvml.GpuInstances(dev, gp.id);
        if (!gis.ok()) {
          if (Unsupported(gis.status())) continue;
          return gis.status();
        }
        for (nvmlGpuInstance_t gi : *gis) {
          GPUNODE_ASSIGN_OR_RETURN(nvmlGpuInstanceInfo_t info, nvml.GpuInstanceInfo(gi));
          GiState s;
          s.id = info.id;
          s.profile = gp.profile;
          s.profile_id = gp.id;
          s.name = gp.name;
          s.start = info.placement.start;
          s.size = info.placement.size;
          for (unsigned cp = 0; cp < GPUNODE_NVML_COMPUTE_INSTANCE_PROFILES_KNOWN; ++cp) {
            auto cinfo = nvml.ComputeInstanceProfileInfo(gi, cp, NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED);
            if (!cinfo.ok()) continue;
            auto cis = nvml.ComputeInstances(gi, cinfo->id);
            if (!cis.ok()) {
              if (Unsupported(cis.status())) continue;
              return cis.status();
            }
            for (nvmlComputeInstance_t ci : *cis) {
              GPUNODE_ASSIGN_OR_RETURN(nvmlComputeInstanceInfo_t ciinfo, nvml.ComputeInstanceInfo(ci));
              CiState c;
              c.id = ciinfo.id;
              c.profile = cp;
              c.slices = cinfo->sliceCount;
              c.name = c.slices == gp.slices ? gp.name : absl::StrCat(c.slices, "c.", gp.name);
              s.cis.push_back(c);
            }
          }
          std::sort(s.cis.begin(), s.cis.end(), [](const CiState& a, const CiState& b) { return a.id < b.id; });
          g.gis.push_back(std::move(s));
        }
      }
      std::sort(g.gis.begin(), g.gis.end(), [](const GiState& a, const GiState& b) { return a.id < b.id; });
    }
  }
  // Compute processes on the GPU and on each of its MIG devices.
  std::vector<nvmlDevice_t> devices = {dev};
  if (g.mig_current) {
    unsigned max = 0;
    if (nvml.nvmlDeviceGetMaxMigDeviceCount(dev, &max) == NVML_SUCCESS) {
      for (unsigned i = 0; i < max; ++i) {
        nvmlDevice_t m = nullptr;
        if (nvml.nvmlDeviceGetMigDeviceHandleByIndex(dev, i, &m) == NVML_SUCCESS) devices.push_back(m);
      }
    }
  }
  for (nvmlDevice_t d : devices) {
    auto procs = nvml.ComputeProcesses(d);
    if (!procs.ok()) {
      if (Unsupported(procs.status())) continue;
      g.process_error = std::string(procs.status().message());
      continue;
    }
    for (const auto& p : *procs) {
      if (std::find(g.process_pids.begin(), g.process_pids.end(), p.pid) == g.process_pids.end())
        g.process_pids.push_back(p.pid);
    }
  }
  return g;
}

StatusOr<nvmlGpuInstance_t> FindGi(const gpu::NvmlLibrary& nvml, nvmlDevice_t dev,
                                   const GpuMigState& state, unsigned gi_id) {
  for (const GiProfile& gp : state.profiles) {
    auto gis = nvml.GpuInstances(dev, gp.id);
    if (!gis.ok()) continue;
    for (nvmlGpuInstance_t gi : *gis) {
      auto info = nvml.GpuInstanceInfo(gi);
      if (info.ok() && info->id == gi_id) return gi;
    }
  }
  return absl::NotFoundError(absl::StrCat("GPU ", state.index, ": GPU instance ", gi_id, " is gone"));
}

StatusOr<nvmlComputeInstance_t> FindCi(const gpu::NvmlLibrary& nvml, nvmlGpuInstance_t gi,
                                       unsigned gpu, unsigned ci_id) {
  for (unsigned cp = 0; cp < GPUNODE_NVML_COMPUTE_INSTANCE_PROFILES_KNOWN; ++cp) {
    auto cis = nvml.ComputeInstances(gi, cp);
    if (!cis.ok()) continue;
    for (nvmlComputeInstance_t ci : *cis) {
      auto info = nvml.ComputeInstanceInfo(ci);
      if (info.ok() && info->id == ci_id) return ci;
    }
  }
  return absl::NotFoundError(absl::StrCat("GPU ", gpu, ": compute instance ", ci_id, " is gone"));
}

// Runs one step; `created` maps the plan's new GI numbers to handles.
Status RunStep(const gpu::NvmlLibrary& nvml, const std::vector<GpuMigState>& state, const Step& step,
               std::map<int, nvmlGpuInstance_t>* created, std::string* detail) {
  GPUNODE_ASSIGN_OR_RETURN(nvmlDevice_t dev, nvml.DeviceHandle(step.gpu));
  const GpuMigState& g = state.at(step.gpu);
  switch (step.kind) {
    case StepKind::kDestroyCi: {
      GPUNODE_ASSIGN_OR_RETURN(nvmlGpuInstance_t gi, FindGi(nvml, dev, g, static_cast<unsigned>(step.gi_id)));
      GPUNODE_ASSIGN_OR_RETURN(nvmlComputeInstance_t ci,
                               FindCi(nvml, gi, step.gpu, static_cast<unsigned>(step.ci_id)));
      return nvml.DestroyComputeInstance(ci);
    }
    case StepKind::kDestroyGi: {
      GPUNODE_ASSIGN_OR_RETURN(nvmlGpuInstance_t gi, FindGi(nvml, dev, g, static_cast<unsigned>(step.gi_id)));
      return nvml.DestroyGpuInstance(gi);
    }
    case StepKind::kEnableMig:
    case StepKind::kDisableMig: {
      const bool on = step.kind == StepKind::kEnableMig;
      GPUNODE_ASSIGN_OR_RETURN(nvmlReturn_t activation,
                               nvml.SetMigMode(dev, on ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE));
      if (activation != NVML_SUCCESS) {
        *detail = absl::StrCat("pending: ", gpu::NvmlReturnName(activation));
        return absl::FailedPreconditionError(absl::StrCat(
            "GPU ", step.gpu, ": MIG mode ", on ? "enable" : "disable", " is pending, not active (",
            gpu::NvmlReturnName(activation), activation == NVML_ERROR_RESET_REQUIRED
                                            ? "): the GPU needs a reset (nvidia-smi -r) or a reboot"
                                            : "): a client holds the GPU; stop it and apply again"));
      }
      *detail = on ? "MIG on" : "MIG off";
      return absl::OkStatus();
    }
    case StepKind::kCreateGi: {
      std::optional<nvmlGpuInstancePlacement_t> placement;
      if (step.start) placement = nvmlGpuInstancePlacement_t{*step.start, step.size};
      GPUNODE_ASSIGN_OR_RETURN(nvmlGpuInstance_t gi, nvml.CreateGpuInstance(dev, step.gi_profile_id, placement));
      (*created)[step.new_gi] = gi;
      auto info = nvml.GpuInstanceInfo(gi);
      if (info.ok()) {
        *detail = absl::StrCat("GPU instance ", info->id, " at memory slices ", info->placement.start, "-",
                               info->placement.start + info->placement.size - 1);
      }
      return absl::OkStatus();
    }
    case StepKind::kCreateCi: {
      nvmlGpuInstance_t gi = nullptr;
      if (step.new_gi >= 0) {
        auto it = created->find(step.new_gi);
        if (it == created->end())
          return absl::InternalError(absl::StrCat("GPU ", step.gpu, ": the plan's GPU instance #", step.new_gi, " was not created"));
        gi = it->second;
      } else {
        GPUNODE_ASSIGN_OR_RETURN(gi, FindGi(nvml, dev, g, static_cast<unsigned>(step.gi_id)));
      }
      GPUNODE_ASSIGN_OR_RETURN(
          nvmlComputeInstanceProfileInfo_v2_t info,
          nvml.ComputeInstanceProfileInfo(gi, step.ci_profile, NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED));
      GPUNODE_ASSIGN_OR_RETURN(nvmlComputeInstance_t ci, nvml.CreateComputeInstance(gi, info.id));
      auto cinfo = nvml.ComputeInstanceInfo(ci);
      auto ginfo = nvml.GpuInstanceInfo(gi);
      if (cinfo.ok() && ginfo.ok())
        *detail = absl::StrCat("compute instance ", cinfo->id, " in GPU instance ", ginfo->id);
      return absl::OkStatus();
    }
  }
  return absl::InternalError("unknown MIG step");
}

bool IsModeStep(const Step& s) {
  return s.kind == StepKind::kEnableMig || s.kind == StepKind::kDisableMig ||
         s.kind == StepKind::kDestroyCi || s.kind == StepKind::kDestroyGi;
}

}  // namespace

StatusOr<std::vector<GpuMigState>> ReadMigState(const gpu::NvmlLibrary& nvml) {
  GPUNODE_ASSIGN_OR_RETURN(unsigned count, nvml.DeviceCount());
  std::vector<GpuMigState> out;
  for (unsigned i = 0; i < count; ++i) {
    auto g = ReadGpu(nvml, i);
    if (!g.ok()) return Annotate(g.status(), absl::StrCat("read the MIG state of GPU ", i));
    out.push_back(*std::move(g));
  }
  return out;
}

bool IsSimulatedNvml(const gpu::NvmlLibrary& nvml) {
  if (absl::StrContains(nvml.path(), "gpunode-simnvml")) return true;
  return absl::StrContains(gpu::LoadedLibraryFile(nvml.path()), "gpunode-simnvml");
}

StatusOr<MigReport> ApplyMigConfig(const gpu::NvmlLibrary& nvml, const MigConfigFile& file,
                                   const std::string& name, const ApplyOptions& options) {
  MigReport report;
  report.config = name;
  report.dry_run = options.dry_run;
  report.simulated = IsSimulatedNvml(nvml);
  GPUNODE_ASSIGN_OR_RETURN(report.before, ReadMigState(nvml));
  GPUNODE_ASSIGN_OR_RETURN(report.plan, PlanMigConfig(report.before, file, name));
  if (options.dry_run || report.plan.empty()) {
    report.after = report.before;
    return report;
  }
  if (!report.simulated && !options.allow_real) {
    return absl::PermissionDeniedError(absl::StrCat(
        "refusing to change MIG on the real GPUs of this node (NVML ", nvml.path(), ", ",
        report.plan.steps.size(), " step(s) planned): pass --allow-real to do it, or --dry-run to "
        "see the plan"));
  }
  // Creates whose placement is not known yet (MIG was off on a driver that lists placements only
  // with MIG on) are planned again once the mode and destroy steps are done.
  const bool replan = std::any_of(report.plan.steps.begin(), report.plan.steps.end(), [](const Step& s) {
    return s.kind == StepKind::kCreateGi && !s.start;
  });
  std::vector<GpuMigState> state = report.before;
  std::vector<Step> steps = report.plan.steps;
  for (int round = 0; round < 2; ++round) {
    std::map<int, nvmlGpuInstance_t> created;
    for (const Step& step : steps) {
      if (replan && round == 0 && !IsModeStep(step)) continue;
      StepResult r;
      r.step = step;
      r.status = RunStep(nvml, state, step, &created, &r.detail);
      if (r.status.ok() || !r.detail.empty()) report.changed = true;
      const bool ok = r.status.ok();
      if (!ok) report.status = Annotate(r.status, step.Describe());
      report.done.push_back(std::move(r));
      if (!ok) break;
    }
    if (!report.status.ok() || !replan || round == 1) break;
    auto reread = ReadMigState(nvml);
    if (!reread.ok()) {
      report.status = reread.status();
      break;
    }
    state = *std::move(reread);
    auto again = PlanMigConfig(state, file, name);
    if (!again.ok()) {
      report.status = again.status();
      break;
    }
    steps = again->steps;
  }
  auto after = ReadMigState(nvml);
  if (after.ok()) {
    report.after = *std::move(after);
  } else if (report.status.ok()) {
    report.status = after.status();
  }
  return report;
}

}  // namespace gpunode::mig
