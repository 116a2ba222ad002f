#include "src/bench/runner.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <optional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "src/bench/cublaslt.h"
#include "src/bench/cuda_driver.h"
#include "src/gpu/nvml.h"

namespace gpunode::bench {
namespace {

std::atomic<bool> g_stop{false};
static_assert(std::atomic<bool>::is_always_lock_free);

constexpr double kGiB = 1024.0 * 1024 * 1024;
constexpr size_t kMiB = 1024 * 1024;

double SecondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// ---- one CUDA device ---------------------------------------------------------------------------

class Device;

// Device memory owned by one context; freed with that context current.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const CudaDriver* drv, CUdeviceptr p, size_t bytes) : drv_(drv), p_(p), bytes_(bytes) {}
  DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    Reset();
    drv_ = o.drv_, p_ = o.p_, bytes_ = o.bytes_;
    o.p_ = 0;
    return *this;
  }
  ~DeviceBuffer() { Reset(); }
  void Reset() {
    if (p_ != 0 && drv_ != nullptr) drv_->cuMemFree_v2(p_);
    p_ = 0;
  }
  CUdeviceptr get() const { return p_; }
  size_t bytes() const { return bytes_; }

 private:
  const CudaDriver* drv_ = nullptr;
  CUdeviceptr p_ = 0;
  size_t bytes_ = 0;
};

class Device {
 public:
  // `ptx` (compute_80) must load; `ptx_sm90a`, the Hopper GEMM, is loaded on compute capability 9.0
  // when given, and when it cannot be (no tensor-map entry point, JIT error) the reason is kept and
  // the portable kernel is used.
  static StatusOr<std::unique_ptr<Device>> Open(const CudaDriver& drv, int ordinal, std::string_view ptx,
                                                std::optional<std::string_view> ptx_sm90a) {
    std::unique_ptr<Device> d(new Device(drv));
    GPUNODE_CU(drv, cuDeviceGet, &d->dev_, ordinal);
    GPUNODE_CU(drv, cuDevicePrimaryCtxRetain, &d->ctx_, d->dev_);
    d->retained_ = true;
    GPUNODE_RETURN_IF_ERROR(d->MakeCurrent());
    GPUNODE_CU(drv, cuDeviceGetAttribute, &d->sms_, kCuDevAttrMultiprocessorCount, d->dev_);
    GPUNODE_CU(drv, cuDeviceGetAttribute, &d->cc_major_, kCuDevAttrComputeCapabilityMajor, d->dev_);
    GPUNODE_CU(drv, cuDeviceGetAttribute, &d->cc_minor_, kCuDevAttrComputeCapabilityMinor, d->dev_);
    if (d->cc_major_ < 8) {
      return absl::FailedPreconditionError(absl::StrCat(
          "bench kernels need compute capability 8.0 or newer (bf16 tensor cores, cp.async); this GPU is ",
          d->cc_major_, ".", d->cc_minor_));
    }
    GPUNODE_CU(drv, cuStreamCreate, &d->stream_, kCuStreamNonBlocking);
    GPUNODE_CU(drv, cuEventCreate, &d->start_, 0);
    GPUNODE_CU(drv, cuEventCreate, &d->stop_, 0);
    // JIT the PTX (the driver caches the result in ~/.nv/ComputeCache).
    std::string image(ptx);  // NUL-terminated copy
    std::string log(8192, '\0');
    CUjit_option opts[] = {kCuJitErrorLogBuffer, kCuJitErrorLogBufferSizeBytes};
    void* vals[] = {log.data(), reinterpret_cast<void*>(static_cast<uintptr_t>(log.size()))};
    CUresult r = drv.cuModuleLoadDataEx(&d->module_, image.c_str(), 2, opts, vals);
    if (r != GPUNODE_CUDA_SUCCESS) {
      Status s = drv.Check(r, "cuModuleLoadDataEx (JIT of the embedded PTX)");
      log.resize(strnlen(log.c_str(), log.size()));
      return log.empty() ? s : Annotate(s, log);
    }
    if (d->cc_major_ == 9 && d->cc_minor_ == 0) d->LoadSm90(ptx_sm90a);
    return d;
  }

  // The Hopper GEMM's module, or why it is not there (empty note when the GPU is not Hopper).
  bool sm90() const { return sm90_module_ != nullptr; }
  const std::string& sm90_note() const { return sm90_note_; }


  ~Device() {
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

  Status MakeCurrent() const { return drv_.Check(drv_.cuCtxSetCurrent(ctx_), "cuCtxSetCurrent"); }

  StatusOr<DeviceBuffer> Alloc(size_t bytes) const {
    CUdeviceptr p = 0;
    GPUNODE_RETURN_IF_ERROR(drv_.Check(drv_.cuMemAlloc_v2(&p, bytes),
                                       absl::StrFormat("cuMemAlloc_v2(%.2f GiB)", bytes / kGiB)));
    return DeviceBuffer(&drv_, p, bytes);
  }

  // A kernel of the portable module, or of the Hopper one for names ending in "_sm90".
  StatusOr<CUfunction> Function(const char* name) {
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

  // Launches `name` with the given kernel arguments (pointers to each argument value) and
  // `shared_bytes` of dynamic shared memory.
  Status Launch(const char* name, unsigned grid_x, unsigned grid_y, unsigned block,
                std::initializer_list<void*> args, unsigned shared_bytes = 0) {
    GPUNODE_ASSIGN_OR_RETURN(CUfunction f, Function(name));
    std::vector<void*> params(args);
    return drv_.Check(drv_.cuLaunchKernel(f, grid_x, grid_y, 1, block, 1, 1, shared_bytes, stream_,
                                               params.data(), nullptr),
                      absl::StrCat("cuLaunchKernel ", name));
  }

  Status Sync() const { return drv_.Check(drv_.cuStreamSynchronize(stream_), "cuStreamSynchronize"); }

  // Fills `n` elements at `p` with uniform values in [-1, 1) of `dtype` (0 fp32, 1 fp16, 2 bf16).
  Status Fill(CUdeviceptr p, unsigned long long n, int dtype, unsigned seed) {
    unsigned grid = static_cast<unsigned>(sms_) * 8;
    return Launch("gpunode_fill_uniform", grid, 1, 256, {&p, &n, &dtype, &seed});
  }

  struct Timed {
    int64_t iterations = 0;
    double seconds = 0;
  };
  // Runs `op` twice to warm up, then in chunks of ~100 ms timed with CUDA events until `duration`
  // seconds of GPU time are measured or a stop is requested (at least one chunk).
  StatusOr<Timed> TimeLoop(double duration, const std::function<Status()>& op) {
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
      if (t.seconds >= duration || g_stop.load()) break;
      double per = t.seconds / t.iterations;
      chunk = std::clamp<int64_t>(static_cast<int64_t>(0.1 / std::max(per, 1e-7)), 1, 100000);
    }
    return t;
  }

  const CudaDriver& drv() const { return drv_; }
  CUcontext ctx() const { return ctx_; }
  CUdevice dev() const { return dev_; }
  CUstream stream() const { return stream_; }
  CUevent start_event() const { return start_; }
  CUevent stop_event() const { return stop_; }
  int sms() const { return sms_; }
  std::string cc() const { return absl::StrCat(cc_major_, ".", cc_minor_); }
  int cc_major() const { return cc_major_; }

 private:
  explicit Device(const CudaDriver& drv) : drv_(drv) {}

  void LoadSm90(std::optional<std::string_view> ptx) {
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
  const CudaDriver& drv_;
  CUdevice dev_ = 0;
  CUcontext ctx_ = nullptr;
  bool retained_ = false;
  CUstream stream_ = nullptr;
  CUevent start_ = nullptr, stop_ = nullptr;
  CUmodule module_ = nullptr;
  CUmodule sm90_module_ = nullptr;
  std::string sm90_note_;
  std::map<std::string, CUfunction> functions_;
  int sms_ = 0, cc_major_ = 0, cc_minor_ = 0;
};

// ---- telemetry -----------------------------------------------------------------------------------

class TelemetrySampler {
 public:
  explicit TelemetrySampler(const std::string& nvml_library) {
    if (nvml_library.empty()) {
      error_ = "no NVML library";
      return;
    }
    auto lib = NvmlLibrary::Open(nvml_library);
    if (!lib.ok()) {
      error_ = std::string(lib.status().message());
      return;
    }
    nvml_ = std::move(*lib);
    thread_ = std::thread([this] { Loop(); });
  }
  ~TelemetrySampler() {
    {
      std::lock_guard<std::mutex> l(mu_);
      done_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  // Starts sampling NVML GPU `index` into a fresh Telemetry; Take() returns it.
  void Begin(unsigned index) {
    std::lock_guard<std::mutex> l(mu_);
    active_ = index;
    current_ = Telemetry();
    clock_sum_ = 0;
    clock_n_ = 0;
    if (!error_.empty()) current_.error = error_;
  }
  Telemetry Take() {
    std::lock_guard<std::mutex> l(mu_);
    active_.reset();
    if (clock_n_ > 0) current_.mean_sm_clock_mhz = clock_sum_ / clock_n_;
    return current_;
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> l(mu_);
    while (!done_) {
      if (active_) Sample(*active_);
      cv_.wait_for(l, std::chrono::milliseconds(100));
    }
  }
  void Sample(unsigned index) {  // mu_ held
    const NvmlLibrary& f = *nvml_;
    nvmlDevice_t dev = nullptr;
    if (f.nvmlDeviceGetHandleByIndex_v2(index, &dev) != NVML_SUCCESS) return;
    Telemetry& t = current_;
    ++t.samples;
    unsigned v = 0;
    if (f.nvmlDeviceGetTemperature(dev, NVML_TEMPERATURE_GPU, &v) == NVML_SUCCESS) {
      t.max_temperature_c = std::max(t.max_temperature_c.value_or(0), v);
    }
    if (f.nvmlDeviceGetPowerUsage(dev, &v) == NVML_SUCCESS) {
      t.max_power_w = std::max(t.max_power_w.value_or(0), v / 1000.0);
    }
    if (!t.power_limit_w && f.nvmlDeviceGetEnforcedPowerLimit(dev, &v) == NVML_SUCCESS) {
      t.power_limit_w = v / 1000.0;
    }
    if (f.nvmlDeviceGetClockInfo(dev, NVML_CLOCK_SM, &v) == NVML_SUCCESS) {
      t.min_sm_clock_mhz = std::min(t.min_sm_clock_mhz.value_or(v), v);
      t.max_sm_clock_mhz = std::max(t.max_sm_clock_mhz.value_or(0), v);
      clock_sum_ += v;
      ++clock_n_;
    }
    // Drivers before R535 export this as nvmlDeviceGetCurrentClocksThrottleReasons (a fallback).
    unsigned long long reasons = 0;
    if (f.nvmlDeviceGetCurrentClocksEventReasons(dev, &reasons) == NVML_SUCCESS) t.clock_event_reasons |= reasons;
  }

  std::unique_ptr<NvmlLibrary> nvml_;
  std::string error_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::optional<unsigned> active_;
  Telemetry current_;
  double clock_sum_ = 0;
  int clock_n_ = 0;
};

// ---- the tests ---------------------------------------------------------------------------------

struct Context {
  const BenchOptions& options;
  const RunnerEnv& env;
  CublasLt* cublas = nullptr;
  std::string cublas_name;
  void Progress(const std::string& line) const {
    if (env.progress) env.progress(line);
  }
};

int DtypeCode(GemmDtype d) { return d == GemmDtype::kFp32 ? 0 : d == GemmDtype::kFp16 ? 1 : 2; }
size_t DtypeSize(GemmDtype d) { return d == GemmDtype::kFp32 ? 4 : 2; }

uint32_t Mix(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  x ^= x >> 16;
  return x;
}

// Samples 256 output elements (corners included) and checks them against the reference kernel.
StatusOr<GemmCheck> CheckGemmOnDevice(Device& dev, GemmDtype in, GemmDtype out, int n,
                                      CUdeviceptr a, CUdeviceptr b, CUdeviceptr d) {
  constexpr int kSamples = 256;
  std::vector<int> rc(2 * kSamples);
  for (int s = 0; s < kSamples; ++s) {
    rc[s] = static_cast<int>(Mix(2 * s + 1) % n);
    rc[kSamples + s] = static_cast<int>(Mix(2 * s + 2) % n);
  }
  rc[0] = 0, rc[kSamples] = 0, rc[1] = n - 1, rc[kSamples + 1] = n - 1;
  GPUNODE_ASSIGN_OR_RETURN(DeviceBuffer idx, dev.Alloc(rc.size() * sizeof(int)));
  GPUNODE_ASSIGN_OR_RETURN(DeviceBuffer res, dev.Alloc(3 * kSamples * sizeof(float)));
  const CudaDriver& drv = dev.drv();
  GPUNODE_CU(drv, cuMemcpyHtoD_v2, idx.get(), rc.data(), rc.size() * sizeof(int));
  CUdeviceptr rows = idx.get(), cols = idx.get() + kSamples * sizeof(int), out_p = res.get();
  int in_code = DtypeCode(in), out_code = DtypeCode(out), m = n, k = n, samples = kSamples;
  GPUNODE_RETURN_IF_ERROR(dev.Launch("gpunode_gemm_check", kSamples / 64, 1, 64,
                                     {&a, &b, &d, &in_code, &out_code, &m, &k, &rows, &cols, &samples, &out_p}));
  GPUNODE_RETURN_IF_ERROR(dev.Sync());
  std::vector<float> host(3 * kSamples);
  GPUNODE_CU(drv, cuMemcpyDtoH_v2, host.data(), res.get(), host.size() * sizeof(float));
  std::vector<GemmSample> gs(kSamples);
  for (int s = 0; s < kSamples; ++s) {
    gs[s] = GemmSample{rc[s], rc[kSamples + s], host[3 * s], host[3 * s + 1], host[3 * s + 2]};
  }
  return CheckGemm(gs, ToleranceFor(in, out));
}

// Which of our kernels computes `dtype` on this GPU (kCublasLt when `own` is false).
GemmKernel OwnGemmKernel(const Device& dev, GemmDtype dtype, bool own) {
  if (!own) return GemmKernel::kCublasLt;
  if (dtype == GemmDtype::kFp32) return GemmKernel::kSimt;
  return dev.sm90() ? GemmKernel::kWgmmaSm90 : GemmKernel::kWmma;
}

// Launch parameters of the Hopper GEMM (kernels/bench_kernels_sm90a.cu): 128 x 256 tiles, 384
// threads (a TMA producer warpgroup and two wgmma consumers), 4 stages of 48 KiB in shared memory.
struct Sm90Gemm {
  static constexpr unsigned kThreads = 384;
  static constexpr unsigned kSharedBytes = 4 * 48 * 1024 + 1024 + 256;
  CUtensorMap map_a{}, map_b{};
  unsigned blocks = 0;
  int group_m = 16;  // tile rows per block group (L2 reuse; 16 was fastest on the H200)
};

// Tensor maps for A and B (n x n, K contiguous, 64-element boxes with 128-byte swizzle) and the
// kernel's shared-memory limit. n must be a multiple of 256.
StatusOr<Sm90Gemm> PrepareSm90Gemm(Device& dev, const char* kernel, GemmDtype dtype, CUdeviceptr a,
                                   CUdeviceptr b, int n) {
  if (n % 256 != 0) return absl::InvalidArgumentError(absl::StrCat("sm90 GEMM: n=", n, " is not a multiple of 256"));
  Sm90Gemm g;
  g.blocks = static_cast<unsigned>((n / 128) * (n / 256));
  const CudaDriver& drv = dev.drv();
  const int type = dtype == GemmDtype::kBf16 ? kCuTensorMapDataTypeBfloat16 : kCuTensorMapDataTypeFloat16;
  auto encode = [&](CUtensorMap* map, CUdeviceptr p, unsigned box_rows) {
    const unsigned long long dims[2] = {static_cast<unsigned long long>(n), static_cast<unsigned long long>(n)};
    const unsigned long long strides[1] = {static_cast<unsigned long long>(n) * 2};
    const unsigned box[2] = {64, box_rows};
    const unsigned element_strides[2] = {1, 1};
    return drv.Check(drv.cuTensorMapEncodeTiled(map, type, 2, reinterpret_cast<void*>(p), dims, strides, box,
                                                     element_strides, kCuTensorMapInterleaveNone,
                                                     kCuTensorMapSwizzle128B, kCuTensorMapL2Promotion256B,
                                                     kCuTensorMapOobFillNone),
                     "cuTensorMapEncodeTiled");
  };
  GPUNODE_RETURN_IF_ERROR(encode(&g.map_a, a, 128));
  GPUNODE_RETURN_IF_ERROR(encode(&g.map_b, b, 256));
  GPUNODE_ASSIGN_OR_RETURN(CUfunction f, dev.Function(kernel));
  GPUNODE_CU(drv, cuFuncSetAttribute, f, kCuFuncAttributeMaxDynamicSharedSizeBytes,
             static_cast<int>(Sm90Gemm::kSharedBytes));
  return g;
}

StatusOr<Measurement> RunGemmOne(Device& dev, const Context& ctx, const ModelCeilings* model,
                                 GemmDtype dtype, bool own_kernel, int n) {
  Measurement m;
  m.name = std::string(GemmDtypeName(dtype));
  m.unit = "TFLOP/s";
  const GemmKernel kernel_kind = OwnGemmKernel(dev, dtype, own_kernel);
  m.backend = own_kernel ? std::string(GemmKernelName(kernel_kind)) : ctx.cublas_name;
  const GemmDtype out = own_kernel ? GemmDtype::kFp32 : dtype;
  const size_t elems = static_cast<size_t>(n) * n;
  GPUNODE_ASSIGN_OR_RETURN(DeviceBuffer a, dev.Alloc(elems * DtypeSize(dtype)));
  GPUNODE_ASSIGN_OR_RETURN(DeviceBuffer b, dev.Alloc(elems * DtypeSize(dtype)));
  GPUNODE_ASSIGN_OR_RETURN(DeviceBuffer d, dev.Alloc(elems * DtypeSize(out)));
  GPUNODE_RETURN_IF_ERROR(dev.Fill(a.get(), elems, DtypeCode(dtype), 11));
  GPUNODE_RETURN_IF_ERROR(dev.Fill(b.get(), elems, DtypeCode(dtype), 23));
  DeviceBuffer workspace;
  constexpr size_t kWorkspace = 64 * kMiB;
  if (!own_kernel) {
    GPUNODE_ASSIGN_OR_RETURN(workspace, dev.Alloc(kWorkspace));
  }
  CUdeviceptr pa = a.get(), pb = b.get(), pd = d.get();
  int mm = n, nn = n, kk = n;
  const char* kernel = dtype == GemmDtype::kBf16   ? "gpunode_gemm_bf16"
                       : dtype == GemmDtype::kFp16 ? "gpunode_gemm_f16"
                                                   : "gpunode_gemm_f32";
  unsigned tile = dtype == GemmDtype::kFp32 ? 64 : 128;
  Sm90Gemm sm90;
  if (kernel_kind == GemmKernel::kWgmmaSm90) {
    kernel = dtype == GemmDtype::kBf16 ? "gpunode_gemm_bf16_sm90" : "gpunode_gemm_f16_sm90";
    GPUNODE_ASSIGN_OR_RETURN(sm90, PrepareSm90Gemm(dev, kernel, dtype, pa, pb, n));
  }
  std::function<Status()> op = [&]() -> Status {
    if (kernel_kind == GemmKernel::kWgmmaSm90) {
      return dev.Launch(kernel, sm90.blocks, 1, Sm90Gemm::kThreads,
                        {&sm90.map_a, &sm90.map_b, &pd, &mm, &nn, &kk, &sm90.group_m}, Sm90Gemm::kSharedBytes);
    }
    if (own_kernel) {
      return dev.Launch(kernel, n / tile, n / tile, 256, {&pa, &pb, &pd, &mm, &nn, &kk});
    }
    return ctx.cublas->Matmul(dtype, out, n, n, n, pa, pb, pd, workspace.get(), kWorkspace, dev.stream());
  };
  {
    // Burst: three warm-ups, then ten products timed as one, before anything else loads the GPU
    // (the reference ceiling's method; the power cap has not lowered the clocks yet).
    for (int i = 0; i < 3; ++i) GPUNODE_RETURN_IF_ERROR(op());
    GPUNODE_RETURN_IF_ERROR(dev.Sync());
    GPUNODE_CU(dev.drv(), cuEventRecord, dev.start_event(), dev.stream());
    for (int i = 0; i < 10; ++i) GPUNODE_RETURN_IF_ERROR(op());
    GPUNODE_CU(dev.drv(), cuEventRecord, dev.stop_event(), dev.stream());
    GPUNODE_CU(dev.drv(), cuEventSynchronize, dev.stop_event());
    float ms = 0;
    GPUNODE_CU(dev.drv(), cuEventElapsedTime_v2, &ms, dev.start_event(), dev.stop_event());
    if (ms > 0) m.burst = 2.0 * n * n * static_cast<double>(n) * 10 / (ms / 1000.0) / 1e12;
  }
  std::string tuned;
  if (!own_kernel) {  // autotune: time each algorithm the heuristic offers briefly, keep the fastest
    GPUNODE_RETURN_IF_ERROR(op());
    int candidates = ctx.cublas->candidates();
    if (candidates > 1) {
      int best = 0;
      double best_rate = 0;
      for (int i = 0; i < candidates && !g_stop.load(); ++i) {
        ctx.cublas->Choose(i);
        auto t = dev.TimeLoop(0.02, op);
        if (!t.ok()) continue;  // an algorithm that fails to launch is just not chosen
        double rate = t->iterations / t->seconds;
        if (rate > best_rate) best_rate = rate, best = i;
      }
      ctx.cublas->Choose(best);
      tuned = absl::StrCat(", algorithm ", best + 1, " of ", candidates, " offered (autotuned)");
    }
  }
  GPUNODE_ASSIGN_OR_RETURN(Device::Timed t, dev.TimeLoop(ctx.options.duration_s, op));
  m.iterations = t.iterations;
  m.seconds = t.seconds;
  m.value = 2.0 * n * n * static_cast<double>(n) * t.iterations / t.seconds / 1e12;
  GPUNODE_ASSIGN_OR_RETURN(GemmCheck check, CheckGemmOnDevice(dev, dtype, out, n, pa, pb, pd));
  m.check = check;
  m.reference = GemmReference(model, dtype, own_kernel ? kernel_kind : GemmKernel::kCublasLt, dev.cc_major());
  m.detail = absl::StrCat(n, "x", n, "x", n, ", ", GemmDtypeName(dtype), " in, ", GemmDtypeName(out),
                          " out, fp32 accumulate", tuned);
  if (own_kernel && kernel_kind == GemmKernel::kWmma && !dev.sm90_note().empty()) {
    absl::StrAppend(&m.detail, "; the Hopper kernel is not used: ", dev.sm90_note());
  }
  m.verdict = Judge(m.value, m.reference);
  if (!check.ok()) {
    m.verdict = Verdict::kFail;
    m.detail = absl::StrCat("wrong results: ", check.mismatches, " of ", check.samples,
                            " sampled outputs outside tolerance; first ", check.first_mismatch);
  }
  return m;
}

TestResult RunGemm(Device& dev, const Context& ctx, const ModelCeilings* model) {
  TestResult r;
  r.test = TestKind::kGemm;
  // 8192^3: large enough for cuBLASLt to reach its plateau on H100/H200-class GPUs; smaller when
  // memory is short (three matrices of up to 256 MiB each plus a workspace).
  size_t free_b = 0, total_b = 0;
  dev.drv().cuMemGetInfo_v2(&free_b, &total_b);
  int n = free_b > 2 * kGiB ? 8192 : 4096;
  struct Variant {
    GemmDtype dtype;
    bool own;
  };
  std::vector<Variant> variants;
  const bool have_lt = ctx.cublas != nullptr;
  for (GemmDtype d : {GemmDtype::kBf16, GemmDtype::kFp16, GemmDtype::kFp32}) variants.push_back({d, !have_lt});
  if (have_lt) variants.push_back({GemmDtype::kBf16, true});  // our kernel beside cuBLASLt
  for (const Variant& v : variants) {
    if (g_stop.load()) break;
    ctx.Progress(absl::StrCat("  gemm ", GemmDtypeName(v.dtype), v.own ? " (gpunode kernel)" : " (cuBLASLt)"));
    auto m = RunGemmOne(dev, ctx, model, v.dtype, v.own, n);
    if (!m.ok()) {
      Measurement e;
      e.name = std::string(GemmDtypeName(v.dtype));
      e.backend = v.own ? std::string(GemmKernelName(OwnGemmKernel(dev, v.dtype, true))) : ctx.cublas_name;
      e.unit = "TFLOP/s";
      e.verdict = Verdict::kError;
      e.detail = std::string(m.status().message());
      r.measurements.push_back(e);
      continue;
    }
    r.measurements.push_back(*m);
  }
  return r;
}

TestResult RunHbm(Device& dev, const Context& ctx, const ModelCeilings* model) {
  TestResult r;
  r.test = TestKind::kHbm;
  auto body = [&]() -> Status {
    size_t free_b = 0, total_b = 0;
    GPUNODE_CU(dev.drv(), cuMemGetInfo_v2, &free_b, &total_b);
    size_t bytes = std::min<size_t>(static_cast<size_t>(kGiB), free_b / 8) / kMiB * kMiB;
    GPUNODE_ASSIGN_OR_RETURN(DeviceBuffer x, dev.Alloc(bytes));
    GPUNODE_ASSIGN_OR_RETURN(DeviceBuffer y, dev.Alloc(bytes));
    GPUNODE_ASSIGN_OR_RETURN(DeviceBuffer z, dev.Alloc(bytes));
    for (const DeviceBuffer* buf : {&x, &y, &z}) {
      GPUNODE_RETURN_IF_ERROR(dev.Fill(buf->get(), bytes / 4, 0, 7));
    }
    std::optional<Reference> ref = HbmReference(model);
    {  // device-to-device copy engine / SM copy: read + write counted
      ctx.Progress("  hbm copy");
      GPUNODE_ASSIGN_OR_RETURN(Device::Timed t, dev.TimeLoop(ctx.options.duration_s, [&]() {
        return dev.drv().Check(dev.drv().cuMemcpyDtoDAsync_v2(y.get(), x.get(), bytes, dev.stream()),
                               "cuMemcpyDtoDAsync_v2");
      }));
      Measurement m{"copy", "cuMemcpyDtoD", 2.0 * bytes * t.iterations / t.seconds / 1e9, "GB/s"};
      m.iterations = t.iterations, m.seconds = t.seconds, m.reference = ref;
      m.verdict = Judge(m.value, ref);
      m.detail = absl::StrFormat("%.0f MiB buffers, read+write counted", bytes / double(kMiB));
      r.measurements.push_back(m);
    }
    if (g_stop.load()) return absl::OkStatus();
    {  // STREAM triad a = b + s*c
      ctx.Progress("  hbm triad");
      CUdeviceptr pa = x.get(), pb = y.get(), pc = z.get();
      float s = 3.0f;
      unsigned long long n4 = bytes / 16;
      unsigned grid = static_cast<unsigned>(dev.sms()) * 8;
      GPUNODE_ASSIGN_OR_RETURN(Device::Timed t, dev.TimeLoop(ctx.options.duration_s, [&]() {
        return dev.Launch("gpunode_triad", grid, 1, 256, {&pa, &pb, &pc, &s, &n4});
      }));
      Measurement m{"triad", "kernel", 3.0 * bytes * t.iterations / t.seconds / 1e9, "GB/s"};
      m.iterations = t.iterations, m.seconds = t.seconds, m.reference = ref;
      m.verdict = Judge(m.value, ref);
      m.detail = absl::StrFormat("a = b + s*c over %.0f MiB arrays, 2 reads + 1 write counted", bytes / double(kMiB));
      r.measurements.push_back(m);
    }
    return absl::OkStatus();
  };
  if (Status s = body(); !s.ok()) {
    r.verdict = Verdict::kError;
    r.reason = std::string(s.message());
  }
  return r;
}

TestResult RunPcie(Device& dev, const Context& ctx, const ModelCeilings* model, const GpuResult& g) {
  TestResult r;
  r.test = TestKind::kPcie;
  auto body = [&]() -> Status {
    constexpr size_t kBytes = 256 * kMiB;
    void* host = nullptr;
    GPUNODE_CU(dev.drv(), cuMemHostAlloc, &host, kBytes, kCuMemHostAllocPortable);
    struct HostFree {
      const CudaDriver& drv;
      void* p;
      ~HostFree() { drv.cuMemFreeHost(p); }
    } host_free{dev.drv(), host};
    std::memset(host, 0x5a, kBytes);
    GPUNODE_ASSIGN_OR_RETURN(DeviceBuffer dbuf, dev.Alloc(kBytes));
    std::optional<Reference> ref = PcieReference(model, g.pcie_gen_max, g.pcie_width_max);
    std::string link = g.pcie_gen && g.pcie_width
                           ? absl::StrCat("link now Gen", *g.pcie_gen, " x", *g.pcie_width)
                           : "link unknown";
    for (bool h2d : {true, false}) {
      if (g_stop.load()) break;
      ctx.Progress(h2d ? "  pcie h2d" : "  pcie d2h");
      GPUNODE_ASSIGN_OR_RETURN(Device::Timed t, dev.TimeLoop(ctx.options.duration_s, [&]() {
        const CudaDriver& d = dev.drv();
        return h2d ? d.Check(d.cuMemcpyHtoDAsync_v2(dbuf.get(), host, kBytes, dev.stream()), "cuMemcpyHtoDAsync_v2")
                   : d.Check(d.cuMemcpyDtoHAsync_v2(host, dbuf.get(), kBytes, dev.stream()), "cuMemcpyDtoHAsync_v2");
      }));
      Measurement m{h2d ? "h2d" : "d2h", "cuMemcpy pinned", double(kBytes) * t.iterations / t.seconds / 1e9, "GB/s"};
      m.iterations = t.iterations, m.seconds = t.seconds, m.reference = ref;
      m.verdict = Judge(m.value, ref);
      m.detail = absl::StrCat("256 MiB pinned buffer, ", link);
      r.measurements.push_back(m);
    }
    return absl::OkStatus();
  };
  if (Status s = body(); !s.ok()) {
    r.verdict = Verdict::kError;
    r.reason = std::string(s.message());
  }
  return r;
}

TestResult RunMemtest(Device& dev, const Context& ctx) {
  TestResult r;
  r.test = TestKind::kMemtest;
  auto body = [&]() -> Status {
    size_t free_b = 0, total_b = 0;
    GPUNODE_CU(dev.drv(), cuMemGetInfo_v2, &free_b, &total_b);
    // Leave room for the driver and other tenants: 2% of total or 512 MiB, whichever is more.
    size_t reserve = std::max<size_t>(512 * kMiB, total_b / 50);
    size_t bytes = free_b > reserve ? (free_b - reserve) / kMiB * kMiB : 0;
    DeviceBuffer buf;
    for (int attempt = 0; bytes >= 64 * kMiB; ++attempt) {
      auto b = dev.Alloc(bytes);
      if (b.ok()) {
        buf = std::move(*b);
        break;
      }
      if (attempt >= 8) return b.status();
      bytes -= std::max<size_t>(bytes / 10, kMiB) / kMiB * kMiB;
    }
    if (buf.get() == 0) return absl::ResourceExhaustedError("memtest: not enough free memory to test");
    GPUNODE_ASSIGN_OR_RETURN(DeviceBuffer result, dev.Alloc(3 * sizeof(unsigned long long)));
    CUdeviceptr p = buf.get(), res = result.get();
    unsigned long long words = bytes / 4;
    unsigned grid = static_cast<unsigned>(dev.sms()) * 8;
    const char* kPatternNames[] = {"zeros", "ones", "checkerboard", "inverse-checkerboard", "address", "random"};
    Measurement m{"patterns", "kernel", 0, "GB/s"};
    uint64_t total_bad = 0;
    std::string failures;
    auto start = std::chrono::steady_clock::now();
    int done = 0;
    for (int pattern = 0; pattern < 6 && !g_stop.load(); ++pattern) {
      ctx.Progress(absl::StrCat("  memtest ", kPatternNames[pattern]));
      unsigned seed = 0x9e3779b9u * (pattern + 1);
      unsigned long long init[3] = {0, ~0ull, 0};
      GPUNODE_CU(dev.drv(), cuMemcpyHtoD_v2, res, init, sizeof init);
      GPUNODE_RETURN_IF_ERROR(dev.Launch("gpunode_memtest_write", grid, 1, 256, {&p, &words, &pattern, &seed}));
      GPUNODE_RETURN_IF_ERROR(dev.Launch("gpunode_memtest_verify", grid, 1, 256, {&p, &words, &pattern, &seed, &res}));
      GPUNODE_RETURN_IF_ERROR(dev.Sync());
      unsigned long long out[3] = {};
      GPUNODE_CU(dev.drv(), cuMemcpyDtoH_v2, out, res, sizeof out);
      ++done;
      if (out[0] != 0) {
        total_bad += out[0];
        absl::StrAppendFormat(&failures, "%s%s: %llu bad words in 0x%x-0x%x (offset %.3f-%.3f GiB)",
                              failures.empty() ? "" : "; ", kPatternNames[pattern], out[0],
                              p + out[1] * 4, p + out[2] * 4 + 3, out[1] * 4 / kGiB, (out[2] * 4 + 3) / kGiB);
      }
    }
    double secs = SecondsSince(start);
    m.iterations = done;
    m.seconds = secs;
    m.value = secs > 0 ? 2.0 * bytes * done / secs / 1e9 : 0;
    m.verdict = total_bad == 0 ? Verdict::kPass : Verdict::kFail;
    m.detail = total_bad == 0
                   ? absl::StrFormat("%.1f GiB of %.1f GiB written and verified with %d patterns, no mismatch",
                                     bytes / kGiB, total_b / kGiB, done)
                   : absl::StrCat("MISMATCH: ", failures);
    r.measurements.push_back(m);
    return absl::OkStatus();
  };
  if (Status s = body(); !s.ok()) {
    r.verdict = Verdict::kError;
    r.reason = std::string(s.message());
  }
  return r;
}

TestResult RunP2p(std::vector<std::pair<GpuResult*, Device*>>& devs, const Context& ctx) {
  TestResult r;
  r.test = TestKind::kP2p;
  if (devs.size() < 2) {
    r.verdict = Verdict::kSkipped;
    r.reason = absl::StrCat("needs at least 2 GPUs; ", devs.size(), " ran");
    return r;
  }
  constexpr size_t kBytes = 256 * kMiB;
  double per_pair = std::max(0.1, ctx.options.duration_s / 4);
  for (auto& [gs, src] : devs) {
    for (auto& [gd, dst] : devs) {
      if (src == dst || g_stop.load()) continue;
      Measurement m{absl::StrCat(gs->index, "->", gd->index), "cuMemcpyPeer", 0, "GB/s"};
      auto body = [&]() -> Status {
        const CudaDriver& drv = src->drv();
        int can = 0;
        GPUNODE_CU(drv, cuDeviceCanAccessPeer, &can, dst->dev(), src->dev());
        if (can) {
          GPUNODE_RETURN_IF_ERROR(dst->MakeCurrent());
          CUresult e = drv.cuCtxEnablePeerAccess(src->ctx(), 0);
          if (e != GPUNODE_CUDA_SUCCESS && e != kCuErrorPeerAccessAlreadyEnabled) {
            GPUNODE_RETURN_IF_ERROR(drv.Check(e, "cuCtxEnablePeerAccess"));
          }
        }
        GPUNODE_RETURN_IF_ERROR(dst->MakeCurrent());
        GPUNODE_ASSIGN_OR_RETURN(DeviceBuffer dbuf, dst->Alloc(kBytes));
        GPUNODE_RETURN_IF_ERROR(src->MakeCurrent());
        GPUNODE_ASSIGN_OR_RETURN(DeviceBuffer sbuf, src->Alloc(kBytes));
        ctx.Progress(absl::StrCat("  p2p ", m.name));
        GPUNODE_ASSIGN_OR_RETURN(Device::Timed t, src->TimeLoop(per_pair, [&]() {
          return drv.Check(drv.cuMemcpyPeerAsync(dbuf.get(), dst->ctx(), sbuf.get(), src->ctx(), kBytes,
                                                      src->stream()),
                           "cuMemcpyPeerAsync");
        }));
        m.value = double(kBytes) * t.iterations / t.seconds / 1e9;
        m.iterations = t.iterations, m.seconds = t.seconds;
        m.verdict = Verdict::kNoCeiling;
        m.detail = can ? "peer access enabled" : "no peer access: staged through host";
        sbuf.Reset();
        GPUNODE_RETURN_IF_ERROR(dst->MakeCurrent());
        dbuf.Reset();
        return absl::OkStatus();
      };
      if (Status s = body(); !s.ok()) {
        m.verdict = Verdict::kError;
        m.detail = std::string(s.message());
      }
      r.measurements.push_back(m);
    }
  }
  return r;
}

Verdict RollUp(const TestResult& t) {
  if (t.verdict == Verdict::kError || t.verdict == Verdict::kSkipped) return t.verdict;
  if (t.measurements.empty()) return Verdict::kSkipped;
  bool any_pass = false;
  Verdict worst = Verdict::kPass;
  for (const Measurement& m : t.measurements) {
    any_pass |= m.verdict == Verdict::kPass;
    if (m.verdict != Verdict::kNoCeiling) worst = Worst(worst, m.verdict);
  }
  if (!any_pass && worst == Verdict::kPass) return Verdict::kNoCeiling;
  return worst;
}

}  // namespace

void RequestStop() { g_stop.store(true); }
void ResetStop() { g_stop.store(false); }
bool StopRequested() { return g_stop.load(); }

StatusOr<BenchReport> RunBench(const NodeInventory& inv, const BenchOptions& options, const RunnerEnv& env) {
  const auto wall_start = std::chrono::steady_clock::now();
  std::optional<std::string_view> ptx = EmbeddedPtx();
  GPUNODE_RETURN_IF_ERROR(KernelsAvailable(ptx));
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
  std::map<std::string, int> ordinal_by_bus;
  std::vector<std::string> cuda_names(count);
  for (int i = 0; i < count; ++i) {
    CUdevice dev = 0;
    char bus[64] = {}, name[256] = {};
    if (drv->cuDeviceGet(&dev, i) != GPUNODE_CUDA_SUCCESS) continue;
    if (drv->cuDeviceGetPCIBusId(bus, sizeof bus, dev) == GPUNODE_CUDA_SUCCESS) {
      ordinal_by_bus[NormalizeBusId(bus)] = i;
    }
    drv->cuDeviceGetName(name, sizeof name, dev);
    cuda_names[i] = name;
  }
  std::vector<GpuResult> all;
  if (!inv.driver.gpus.empty()) {
    for (const GpuInfo& g : inv.driver.gpus) {
      GpuResult r;
      r.index = g.index;
      r.name = g.name;
      r.uuid = g.uuid;
      r.bus_id = g.pci_bus_id;
      r.pcie_gen = g.pcie_gen_current, r.pcie_width = g.pcie_width_current;
      r.pcie_gen_max = g.pcie_gen_max, r.pcie_width_max = g.pcie_width_max;
      if (g.compute_processes) {
        for (const GpuProcess& p : *g.compute_processes) r.busy_pids.push_back(p.pid);
      }
      if (auto it = ordinal_by_bus.find(NormalizeBusId(g.pci_bus_id)); it != ordinal_by_bus.end()) {
        r.cuda_ordinal = it->second;
      }
      all.push_back(std::move(r));
    }
  } else {  // NVML saw nothing (or is missing): fall back to CUDA's own list
    for (int i = 0; i < count; ++i) {
      GpuResult r;
      r.index = static_cast<unsigned>(i);
      r.cuda_ordinal = i;
      r.name = cuda_names[i];
      all.push_back(std::move(r));
    }
  }
  if (all.empty()) return absl::NotFoundError("bench: no GPU found (NVML and CUDA list none)");
  if (options.gpus) {
    for (unsigned want : *options.gpus) {
      bool found = false;
      for (const GpuResult& g : all) found |= g.index == want;
      if (!found) {
        return absl::InvalidArgumentError(
            absl::StrCat("--gpus: GPU ", want, " does not exist (this node has ", all.size(), ")"));
      }
    }
  }

  Context ctx{options, env};
  std::unique_ptr<CublasLt> cublas;
  bool want_gemm = std::find(options.tests.begin(), options.tests.end(), TestKind::kGemm) != options.tests.end();
  auto want = [&](TestKind t) { return std::find(options.tests.begin(), options.tests.end(), t) != options.tests.end(); };
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
    if (g_stop.load()) {
      r.skipped = true, r.skip_reason = "interrupted";
      continue;
    }
    if (!r.busy_pids.empty() && !options.force) {
      r.skipped = true;
      r.skip_reason = absl::StrCat("busy: ", r.busy_pids.size(), " compute process(es) (pid ",
                                   r.busy_pids.front(), r.busy_pids.size() > 1 ? ", ..." : "",
                                   "); use --force to run anyway");
      continue;
    }
    if (!r.cuda_ordinal) {
      r.skipped = true;
      r.skip_reason = "not visible to CUDA (CUDA_VISIBLE_DEVICES, MIG, or the driver lost it)";
      continue;
    }
    ctx.Progress(absl::StrCat("GPU ", r.index, " ", r.name, ": opening (JIT of the kernels)"));
    auto dev = Device::Open(*drv, *r.cuda_ordinal, *ptx, EmbeddedPtxSm90a());
    if (!dev.ok()) {
      r.skipped = true;
      r.skip_reason = std::string(dev.status().message());
      r.verdict = Verdict::kError;
      continue;
    }
    r.compute_capability = (*dev)->cc();
    // A cuBLASLt handle belongs to the device that was current when it was made (a handle made on
    // GPU 0 fails its bf16/fp16 matmuls on GPU 1 with status 13, seen on a 2x H200): one per GPU,
    // made after this GPU's context is current.
    if (want_gemm && options.gemm_library == "gpunode") {
      ctx.cublas_name = "none";
      report.gemm_library_note = "--gemm-library gpunode: GEMM uses gpunode's own kernels";
    } else if (want_gemm && ctx.cublas_name != "none") {
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
    }
    sampler.Begin(r.index);
    for (TestKind t : options.tests) {
      if (t == TestKind::kP2p) continue;
      auto start = std::chrono::steady_clock::now();
      TestResult tr;
      tr.test = t;
      if (g_stop.load()) {
        tr.verdict = Verdict::kSkipped;
        tr.reason = "interrupted";
      } else {
        ctx.Progress(absl::StrCat("GPU ", r.index, ": ", TestName(t)));
        switch (t) {
          case TestKind::kGemm: tr = RunGemm(**dev, ctx, model); break;
          case TestKind::kHbm: tr = RunHbm(**dev, ctx, model); break;
          case TestKind::kPcie: tr = RunPcie(**dev, ctx, model, r); break;
          case TestKind::kMemtest: tr = RunMemtest(**dev, ctx); break;
          case TestKind::kP2p: break;
        }
      }
      tr.wall_s = SecondsSince(start);
      tr.verdict = RollUp(tr);
      r.tests.push_back(std::move(tr));
    }
    r.telemetry = sampler.Take();
    ctx.cublas = nullptr;
    cublas.reset();  // while this GPU's context is still current
    devices.push_back(std::move(*dev));
    ran.emplace_back(&r, devices.back().get());
  }
  if (want(TestKind::kP2p)) {
    auto start = std::chrono::steady_clock::now();
    TestResult p2p = RunP2p(ran, ctx);
    p2p.wall_s = SecondsSince(start);
    if (p2p.verdict != Verdict::kSkipped) p2p.verdict = RollUp(p2p);
    report.p2p = std::move(p2p);
  }
  cublas.reset();
  devices.clear();
  report.interrupted = g_stop.load();
  report.wall_s = SecondsSince(wall_start);
  Finalize(report);
  return report;
}

}  // namespace gpunode::bench
