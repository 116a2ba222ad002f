#include "src/bench/device.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "src/bench/runner.h"

namespace gpunode::bench {

StatusOr<std::unique_ptr<Device>> Device::Open(const CudaDriver& drv, int ordinal, const PtxModules& ptx,
                                               absl::string_view ptx_choice) {
  std::unique_ptr<Device> d(new Device(drv));
  GPUNODE_CU(drv, cuDeviceGet, &d->dev_, ordinal);
  GPUNODE_CU(drv, cuDevicePrimaryCtxRetain, &d->ctx_, d->dev_);
  d->retained_ = true;
  GPUNODE_RETURN_IF_ERROR(d->MakeCurrent());
  GPUNODE_CU(drv, cuDeviceGetAttribute, &d->sms_, kCuDevAttrMultiprocessorCount, d->dev_);
  GPUNODE_CU(drv, cuDeviceGetAttribute, &d->cc_major_, kCuDevAttrComputeCapabilityMajor, d->dev_);
  GPUNODE_CU(drv, cuDeviceGetAttribute, &d->cc_minor_, kCuDevAttrComputeCapabilityMinor, d->dev_);
  GPUNODE_ASSIGN_OR_RETURN(d->ptx_target_, ChoosePtx(d->cc_major_, d->cc_minor_, ptx_choice));
  const std::optional<std::string_view>& text =
      d->ptx_target_ == PtxTarget::kCompute75 ? ptx.compute_75 : ptx.compute_80;
  if (!text || text->find(".entry") == std::string_view::npos) {
    return absl::FailedPreconditionError(absl::StrCat(
        "this gpunode was built without the ", PtxTargetName(d->ptx_target_), " PTX (kernels/",
        d->ptx_target_ == PtxTarget::kCompute75 ? "bench_kernels_sm75.ptx" : "bench_kernels.ptx",
        ") that this GPU (compute capability ", d->cc(), ") needs"));
  }
  GPUNODE_CU(drv, cuStreamCreate, &d->stream_, kCuStreamNonBlocking);
  GPUNODE_CU(drv, cuEventCreate, &d->start_, 0);
  GPUNODE_CU(drv, cuEventCreate, &d->stop_, 0);
  // JIT the PTX (the driver caches the result in ~/.nv/ComputeCache).
  std::string image(*text);  // NUL-terminated copy
  std::string log(8192, '\0');
  CUjit_option opts[] = {kCuJitErrorLogBuffer, kCuJitErrorLogBufferSizeBytes};
  void* vals[] = {log.data(), reinterpret_cast<void*>(static_cast<uintptr_t>(log.size()))};
  CUresult r = drv.cuModuleLoadDataEx(&d->module_, image.c_str(), 2, opts, vals);
  if (r != GPUNODE_CUDA_SUCCESS) {
    Status s = drv.Check(r, absl::StrCat("cuModuleLoadDataEx (JIT of the embedded ", PtxTargetName(d->ptx_target_),
                                         " PTX)"));
    log.resize(strnlen(log.c_str(), log.size()));
    return log.empty() ? s : Annotate(s, log);
  }
  if (d->cc_major_ == 9 && d->cc_minor_ == 0 && d->ptx_target_ == PtxTarget::kCompute80) d->LoadSm90(ptx.sm90a);
  return d;
}

Device::~Device() {
  if (retained_) {
    MakeCurrent().IgnoreError();
    drv_.cuCtxSynchronize();
    if (start_) drv_.cuEventDestroy_v2(start_);
    if (stop_) drv_.cuEventDestroy_v2(stop_);
    if (stream_) drv_.cuStreamDestroy_v2(stream_);
    if (module_) drv_.cuModuleUnload(module_);
    if (sm90_module_) drv_.cuModuleUnload(sm90_module_);
    drv_.cuDevicePrimaryCtxRelease_v2(dev_);
  }
}

StatusOr<DeviceBuffer> Device::Alloc(size_t bytes) const {
  CUdeviceptr p = 0;
  GPUNODE_RETURN_IF_ERROR(drv_.Check(drv_.cuMemAlloc_v2(&p, bytes),
                                     absl::StrFormat("cuMemAlloc_v2(%.2f GiB)", bytes / kGiB)));
  return DeviceBuffer(&drv_, p);
}

StatusOr<CUfunction> Device::Function(const char* name) {
  auto it = functions_.find(name);
  if (it != functions_.end()) return it->second;
  CUfunction f = nullptr;
  CUmodule m = absl::EndsWith(name, "_sm90") ? sm90_module_ : module_;
  if (m == nullptr) return absl::FailedPreconditionError(absl::StrCat("kernel ", name, ": module not loaded"));
  GPUNODE_RETURN_IF_ERROR(drv_.Check(drv_.cuModuleGetFunction(&f, m, name),
                                     absl::StrCat("cuModuleGetFunction ", name)));
  functions_[name] = f;
  return f;
}

Status Device::Launch(const char* name, unsigned grid_x, unsigned grid_y, unsigned block,
                      std::initializer_list<void*> args, unsigned shared_bytes) {
  GPUNODE_ASSIGN_OR_RETURN(CUfunction f, Function(name));
  std::vector<void*> params(args);
  return drv_.Check(drv_.cuLaunchKernel(f, grid_x, grid_y, 1, block, 1, 1, shared_bytes, stream_,
                                             params.data(), nullptr),
                    absl::StrCat("cuLaunchKernel ", name));
}

StatusOr<Device::Timed> Device::TimeLoop(double duration, const std::function<Status()>& op) {
  for (int i = 0; i < 2; ++i) GPUNODE_RETURN_IF_ERROR(op());
  GPUNODE_RETURN_IF_ERROR(Sync());
  Timed t;
  int64_t chunk = 1;
  while (true) {
    GPUNODE_CU(drv_, cuEventRecord, start_, stream_);
    for (int64_t i = 0; i < chunk; ++i) GPUNODE_RETURN_IF_ERROR(op());
    GPUNODE_CU(drv_, cuEventRecord, stop_, stream_);
    GPUNODE_CU(drv_, cuEventSynchronize, stop_);
    float ms = 0;
    GPUNODE_CU(drv_, cuEventElapsedTime_v2, &ms, start_, stop_);
    t.iterations += chunk;
    t.seconds += ms / 1000.0;
    if (t.seconds >= duration || StopRequested()) break;
    double per = t.seconds / t.iterations;
    chunk = std::clamp<int64_t>(static_cast<int64_t>(0.1 / std::max(per, 1e-7)), 1, 100000);
  }
  return t;
}

void Device::LoadSm90(std::optional<std::string_view> ptx) {
  if (!ptx || ptx->find(".entry") == std::string_view::npos) {
    sm90_note_ = "this gpunode was built without the sm_90a PTX (kernels/bench_kernels_sm90a.ptx)";
    return;
  }
  if (!drv_.cuTensorMapEncodeTiled.bound()) {
    sm90_note_ = "the driver has no cuTensorMapEncodeTiled (TMA needs a CUDA 12.0 / R525 driver or newer)";
    return;
  }
  std::string image(*ptx);
  std::string log(8192, '\0');
  CUjit_option opts[] = {kCuJitErrorLogBuffer, kCuJitErrorLogBufferSizeBytes};
  void* vals[] = {log.data(), reinterpret_cast<void*>(static_cast<uintptr_t>(log.size()))};
  CUresult r = drv_.cuModuleLoadDataEx(&sm90_module_, image.c_str(), 2, opts, vals);
  if (r != GPUNODE_CUDA_SUCCESS) {
    sm90_module_ = nullptr;
    log.resize(strnlen(log.c_str(), log.size()));
    sm90_note_ = absl::StrCat(drv_.Check(r, "JIT of the sm_90a PTX").message(), log.empty() ? "" : ": ", log);
  }
}

}  // namespace gpunode::bench
