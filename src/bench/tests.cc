#include "src/bench/tests.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace gpunode::bench {
namespace {

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
  if (dev.ptx_target() == PtxTarget::kCompute75) return GemmKernel::kWmmaSm75;
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
      for (int i = 0; i < candidates && !StopRequested(); ++i) {
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

}  // namespace

double SecondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

TestResult RunTest(TestKind kind, const std::function<Status(TestResult&)>& body) {
  TestResult r;
  r.test = kind;
  if (Status s = body(r); !s.ok()) {
    r.verdict = Verdict::kError;
    r.reason = std::string(s.message());
  }
  return r;
}

TestResult TimedTest(const std::function<TestResult()>& test) {
  auto start = std::chrono::steady_clock::now();
  TestResult r = test();
  r.wall_s = SecondsSince(start);
  r.verdict = RollUpTest(r);
  return r;
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
  if (have_lt) {  // our tensor-core kernel beside cuBLASLt: bf16, or fp16 where there is no bf16
    variants.push_back({PtxHasBf16(dev.ptx_target()) ? GemmDtype::kBf16 : GemmDtype::kFp16, true});
  }
  for (const Variant& v : variants) {
    if (StopRequested()) break;
    if (std::string why = GemmUnsupportedReason(v.dtype, dev.cc_major(), dev.cc_minor(), dev.ptx_target(), v.own);
        !why.empty()) {
      Measurement u;
      u.name = std::string(GemmDtypeName(v.dtype));
      u.backend = v.own ? "gpunode" : ctx.cublas_name;
      u.unit = "TFLOP/s";
      u.verdict = Verdict::kSkipped;
      u.unsupported = true;
      u.detail = why;
      r.measurements.push_back(u);
      continue;
    }
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
  return RunTest(TestKind::kHbm, [&](TestResult& r) -> Status {
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
    if (StopRequested()) return absl::OkStatus();
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
  });
}

TestResult RunPcie(Device& dev, const Context& ctx, const ModelCeilings* model, const GpuResult& g) {
  return RunTest(TestKind::kPcie, [&](TestResult& r) -> Status {
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
      if (StopRequested()) break;
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
  });
}

TestResult RunMemtest(Device& dev, const Context& ctx) {
  return RunTest(TestKind::kMemtest, [&](TestResult& r) -> Status {
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
    for (int pattern = 0; pattern < 6 && !StopRequested(); ++pattern) {
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
  });
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
      if (src == dst || StopRequested()) continue;
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

}  // namespace gpunode::bench
