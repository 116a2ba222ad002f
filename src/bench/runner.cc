#include "src/bench/runner.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "src/bench/ceilings.h"
#include "src/bench/cublaslt.h"
#include "src/bench/cuda_driver.h"
#include "src/bench/device.h"
#include "src/bench/telemetry.h"
#include "src/bench/tests.h"
#include "src/gpu/nvml.h"

namespace gpunode::bench {
namespace {

std::atomic<bool> g_stop{false};
static_assert(std::atomic<bool>::is_always_lock_free);

bool Wants(const BenchOptions& options, TestKind t) {
  return std::find(options.tests.begin(), options.tests.end(), t) != options.tests.end();
}

// The GPUs of the node, in NVML's (nvidia-smi's) order and indices, each with its CUDA ordinal
// (matched by PCI bus id); CUDA's own list when NVML saw nothing.
std::vector<GpuResult> ListGpus(const CudaDriver& drv, int count, const node::NodeInventory& inv) {
  std::map<std::string, int> ordinal_by_bus;
  std::vector<std::string> cuda_names(count);
  for (int i = 0; i < count; ++i) {
    CUdevice dev = 0;
    char bus[64] = {}, name[256] = {};
    if (drv.cuDeviceGet(&dev, i) != GPUNODE_CUDA_SUCCESS) continue;
    if (drv.cuDeviceGetPCIBusId(bus, sizeof bus, dev) == GPUNODE_CUDA_SUCCESS) {
      ordinal_by_bus[NormalizeBusId(bus)] = i;
    }
    drv.cuDeviceGetName(name, sizeof name, dev);
    cuda_names[i] = name;
  }
  std::vector<GpuResult> all;
  if (inv.driver.gpus.empty()) {  // NVML saw nothing (or is missing): fall back to CUDA's own list
    for (int i = 0; i < count; ++i) {
      GpuResult r;
      r.index = static_cast<unsigned>(i);
      r.cuda_ordinal = i;
      r.name = cuda_names[i];
      all.push_back(std::move(r));
    }
    return all;
  }
  for (const gpu::GpuInfo& g : inv.driver.gpus) {
    GpuResult r;
    r.index = g.index;
    r.name = g.name;
    r.uuid = g.uuid;
    r.bus_id = g.pci_bus_id;
    r.pcie_gen = g.pcie_gen_current, r.pcie_width = g.pcie_width_current;
    r.pcie_gen_max = g.pcie_gen_max, r.pcie_width_max = g.pcie_width_max;
    if (g.compute_processes) {
      for (const gpu::GpuProcess& p : *g.compute_processes) r.busy_pids.push_back(p.pid);
    }
    if (auto it = ordinal_by_bus.find(NormalizeBusId(g.pci_bus_id)); it != ordinal_by_bus.end()) {
      r.cuda_ordinal = it->second;
    }
    all.push_back(std::move(r));
  }
  return all;
}

Status CheckGpuSelection(const std::vector<GpuResult>& all, const BenchOptions& options) {
  if (all.empty()) return absl::NotFoundError("bench: no GPU found (NVML and CUDA list none)");
  if (!options.gpus) return absl::OkStatus();
  for (unsigned want : *options.gpus) {
    bool found = false;
    for (const GpuResult& g : all) found |= g.index == want;
    if (!found) {
      return absl::InvalidArgumentError(
          absl::StrCat("--gpus: GPU ", want, " does not exist (this node has ", all.size(), ")"));
    }
  }
  return absl::OkStatus();
}

// Marks `r` skipped when it cannot run now (a stop was requested, it is busy, CUDA cannot see it);
// returns whether it was.
bool SkipGpu(GpuResult& r, const BenchOptions& options) {
  if (g_stop.load()) {
    r.skipped = true, r.skip_reason = "interrupted";
  } else if (!r.busy_pids.empty() && !options.force) {
    r.skipped = true;
    r.skip_reason = absl::StrCat("busy: ", r.busy_pids.size(), " compute process(es) (pid ",
                                 r.busy_pids.front(), r.busy_pids.size() > 1 ? ", ..." : "",
                                 "); use --force to run anyway");
  } else if (!r.cuda_ordinal) {
    r.skipped = true;
    r.skip_reason = "not visible to CUDA (CUDA_VISIBLE_DEVICES, MIG, or the driver lost it)";
  }
  return r.skipped;
}

// The GEMM library for the GPU whose context is current. A cuBLASLt handle belongs to the device
// that was current when it was made (a handle made on GPU 0 fails its bf16/fp16 matmuls on GPU 1
// with status 13, seen on a 2x H200): one per GPU, made after this GPU's context is current.
// Fails only when --gemm-library cublaslt asked for a cuBLASLt that does not load.
Status OpenGemmLibrary(const BenchOptions& options, Context& ctx, std::unique_ptr<CublasLt>& cublas,
                       BenchReport& report) {
  if (!Wants(options, TestKind::kGemm)) return absl::OkStatus();
  if (options.gemm_library == "gpunode") {
    ctx.cublas_name = "none";
    report.gemm_library_note = "--gemm-library gpunode: GEMM uses gpunode's own kernels";
    return absl::OkStatus();
  }
  if (ctx.cublas_name == "none") return absl::OkStatus();  // did not load for an earlier GPU
  auto lt = CublasLt::Open();
  if (!lt.ok() && options.gemm_library == "cublaslt") {
    return Annotate(lt.status(), "--gemm-library cublaslt");
  }
  if (lt.ok()) {
    cublas = std::move(*lt);
    ctx.cublas = cublas.get();
    ctx.cublas_name = absl::StrCat("cublasLt ", cublas->version());
    report.gemm_library = absl::StrCat(ctx.cublas_name, " (", cublas->path(), ")");
  } else {
    ctx.cublas_name = "none";
    report.gemm_library_note = absl::StrCat(lt.status().message(), "; GEMM uses gpunode's own kernels");
  }
  return absl::OkStatus();
}

// The tests of options.tests but p2p, on one GPU, in order.
void RunGpuTests(Device& dev, const Context& ctx, const ModelCeilings* model, GpuResult& r) {
  for (TestKind t : ctx.options.tests) {
    if (t == TestKind::kP2p) continue;
    r.tests.push_back(TimedTest([&]() -> TestResult {
      TestResult tr;
      tr.test = t;
      if (g_stop.load()) {
        tr.verdict = Verdict::kSkipped;
        tr.reason = "interrupted";
        return tr;
      }
      ctx.Progress(absl::StrCat("GPU ", r.index, ": ", TestName(t)));
      switch (t) {
        case TestKind::kGemm: return RunGemm(dev, ctx, model);
        case TestKind::kHbm: return RunHbm(dev, ctx, model);
        case TestKind::kPcie: return RunPcie(dev, ctx, model, r);
        case TestKind::kMemtest: return RunMemtest(dev, ctx);
        case TestKind::kP2p: break;
      }
      return tr;
    }));
  }
}

}  // namespace

void RequestStop() { g_stop.store(true); }
void ResetStop() { g_stop.store(false); }
bool StopRequested() { return g_stop.load(); }

StatusOr<BenchReport> RunBench(const node::NodeInventory& inv, const BenchOptions& options, const RunnerEnv& env) {
  const auto wall_start = std::chrono::steady_clock::now();
  const PtxModules ptx{EmbeddedPtx(), EmbeddedPtxSm75(), EmbeddedPtxSm90a()};
  GPUNODE_RETURN_IF_ERROR(KernelsAvailable(ptx.compute_80));
  GPUNODE_RETURN_IF_ERROR(ValidatePtxChoice(options.ptx));
  static const StatusOr<CeilingsTable> ceilings = BuiltinCeilings();
  if (!ceilings.ok()) return ceilings.status();
  const CeilingsTable* table = &*ceilings;
  if (inv.simulated_profile) {
    return absl::FailedPreconditionError(
        "bench needs real GPUs: a simulated node has no CUDA driver to run kernels on");
  }
  GPUNODE_ASSIGN_OR_RETURN(std::unique_ptr<CudaDriver> drv, CudaDriver::Open(env.cuda_library));

  BenchReport report;
  report.hostname = inv.hostname;
  report.options = options;
  report.cuda_library = env.cuda_library;
  report.cuda_driver_version = drv->version();
  if (inv.driver.driver_version) report.driver_version = inv.driver.driver_version->ToString();

  // CUDA ordinals by PCI bus id, so --gpus and the report use NVML's (nvidia-smi's) indices.
  int count = 0;
  GPUNODE_RETURN_IF_ERROR(drv->Check(drv->cuDeviceGetCount(&count), "cuDeviceGetCount"));
  std::vector<GpuResult> all = ListGpus(*drv, count, inv);
  GPUNODE_RETURN_IF_ERROR(CheckGpuSelection(all, options));

  Context ctx{options, env};
  std::unique_ptr<CublasLt> cublas;
  TelemetrySampler sampler(env.nvml_library);
  std::vector<std::unique_ptr<Device>> devices;  // released after p2p
  std::vector<std::pair<GpuResult*, Device*>> ran;
  report.gpus.reserve(all.size());
  for (GpuResult& g : all) {
    if (options.gpus && std::find(options.gpus->begin(), options.gpus->end(), g.index) == options.gpus->end()) continue;
    report.gpus.push_back(std::move(g));
    GpuResult& r = report.gpus.back();
    const ModelCeilings* model = table->Find(r.name);
    if (model) r.ceiling_model = model->id;
    if (SkipGpu(r, options)) continue;
    ctx.Progress(absl::StrCat("GPU ", r.index, " ", r.name, ": opening (JIT of the kernels)"));
    auto dev = Device::Open(*drv, *r.cuda_ordinal, ptx, options.ptx);
    if (!dev.ok()) {
      r.skipped = true;
      r.skip_reason = std::string(dev.status().message());
      r.verdict = Verdict::kError;
      continue;
    }
    r.compute_capability = (*dev)->cc();
    r.ptx_target = std::string(PtxTargetName((*dev)->ptx_target()));
    GPUNODE_RETURN_IF_ERROR(OpenGemmLibrary(options, ctx, cublas, report));
    sampler.Begin(r.index);
    RunGpuTests(**dev, ctx, model, r);
    r.telemetry = sampler.Take();
    ctx.cublas = nullptr;
    cublas.reset();  // while this GPU's context is still current
    devices.push_back(std::move(*dev));
    ran.emplace_back(&r, devices.back().get());
  }
  if (Wants(options, TestKind::kP2p)) report.p2p = TimedTest([&] { return RunP2p(ran, ctx); });
  cublas.reset();
  devices.clear();
  report.interrupted = g_stop.load();
  report.wall_s = SecondsSince(wall_start);
  Finalize(report);
  return report;
}

}  // namespace gpunode::bench
