// Tuning harness for the Hopper GEMM of `gpunode bench` (kernels/bench_kernels_sm90a.cu), run on
// an H100/H200 by scripts/gpu-gemm-sm90.sh. It compiles the kernel source itself (with its tuning
// variants), checks every variant's full output against cuBLASLt on fresh random inputs (relative
// Frobenius error, poisoned output, non-square shapes), then times each variant and cuBLASLt on
// 8192^3 the way `gpunode bench` does (burst: 10 products after 3 warm-ups, timed as one; sustained:
// back-to-back products for --seconds), and prints a table. Not part of the build: nvcc only.
//
//   nvcc -gencode=arch=compute_90a,code=sm_90a -O3 -std=c++17 -DGPUNODE_SM90_VARIANTS \
//        -o gemm_sm90_tune benchmarks/gemm_sm90_tune.cu -lcuda -ldl
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <glob.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../kernels/bench_kernels_sm90a.cu"

#define CK(x)                                                                               \
  do {                                                                                      \
    cudaError_t e_ = (x);                                                                   \
    if (e_ != cudaSuccess) {                                                                \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                         \
    }                                                                                       \
  } while (0)
#define CU(x)                                                                               \
  do {                                                                                      \
    CUresult r_ = (x);                                                                      \
    if (r_ != CUDA_SUCCESS) {                                                               \
      const char* s_ = nullptr;                                                             \
      cuGetErrorString(r_, &s_);                                                            \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, s_ ? s_ : "?");      \
      std::exit(1);                                                                         \
    }                                                                                       \
  } while (0)

namespace tune {

__global__ void Fill(__nv_bfloat16* p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    unsigned long long x = i + 0x9E3779B97F4A7C15ull * (seed + 1u);
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    x ^= x >> 31;
    p[i] = __float2bfloat16(float(unsigned(x) >> 8) * (2.0f / 16777216.0f) - 1.0f);
  }
}

// sums (got-ref)^2, ref^2 and non-finite outputs
__global__ void Diff(const float* got, const float* ref, size_t n, double* out) {
  double e = 0, r = 0, bad = 0;
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    double g = got[i], f = ref[i];
    if (!isfinite(g)) bad += 1;
    else e += (g - f) * (g - f);
    r += f * f;
  }
  atomicAdd(&out[0], e);
  atomicAdd(&out[1], r);
  atomicAdd(&out[2], bad);
}

// cuBLASLt through dlopen (no headers or link-time dependency).
struct Lt {
  using St = int;
  St (*create)(void**);
  St (*desc_create)(void**, int, int);
  St (*desc_set)(void*, int, const void*, size_t);
  St (*layout_create)(void**, int, uint64_t, uint64_t, int64_t);
  St (*pref_create)(void**);
  St (*pref_set)(void*, int, const void*, size_t);
  St (*heur)(void*, void*, void*, void*, void*, void*, void*, int, void*, int*);
  St (*matmul)(void*, void*, const void*, const void*, void*, const void*, void*, const void*, void*, void*,
               void*, void*, const void*, void*, size_t, cudaStream_t);
  void* h = nullptr;
  void *desc, *la, *lb, *ld, *pref;
  unsigned char algo[8][128];  // cublasLtMatmulHeuristicResult_t: algo (64 B) + sizes; 128 B is ample
  int n_algo = 0, chosen = 0;
  void* ws = nullptr;
  size_t ws_bytes = 64 << 20;

  bool Open() {
    const char* names[] = {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"};
    void* lib = nullptr;
    for (const char* n : names)
      if ((lib = dlopen(n, RTLD_NOW))) break;
    if (!lib) {
      glob_t g;
      if (glob("/opt/torch/.venv/lib/python3*/site-packages/nvidia/cu*/lib/libcublasLt.so*", 0, nullptr, &g) == 0 ||
          glob("/opt/torch/.venv/lib/python3*/site-packages/nvidia/cublas/lib/libcublasLt.so*", 0, nullptr, &g) == 0) {
        for (size_t i = 0; i < g.gl_pathc && !lib; ++i) lib = dlopen(g.gl_pathv[i], RTLD_NOW);
      }
    }
    if (!lib) return false;
#define SYM(f, s) f = reinterpret_cast<decltype(f)>(dlsym(lib, s))
    SYM(create, "cublasLtCreate");
    SYM(desc_create, "cublasLtMatmulDescCreate");
    SYM(desc_set, "cublasLtMatmulDescSetAttribute");
    SYM(layout_create, "cublasLtMatrixLayoutCreate");
    SYM(pref_create, "cublasLtMatmulPreferenceCreate");
    SYM(pref_set, "cublasLtMatmulPreferenceSetAttribute");
    SYM(heur, "cublasLtMatmulAlgoGetHeuristic");
    SYM(matmul, "cublasLtMatmul");
#undef SYM
    Dl_info info;
    if (dladdr(reinterpret_cast<void*>(matmul), &info)) std::printf("cuBLASLt: %s\n", info.dli_fname);
    return create && matmul && create(&h) == 0;
  }
  // D (M x N col-major fp32) = A (M x K row-major bf16) * B (N x K row-major bf16)^T: "TN".
  bool Plan(int M, int N, int K) {
    CK(cudaMalloc(&ws, ws_bytes));
    const int kCompute32F = 68, kR32F = 0, kR16BF = 14, kTransA = 3, kOpT = 1;
    if (desc_create(&desc, kCompute32F, kR32F)) return false;
    desc_set(desc, kTransA, &kOpT, sizeof(kOpT));
    layout_create(&la, kR16BF, K, M, K);
    layout_create(&lb, kR16BF, K, N, K);
    layout_create(&ld, kR32F, M, N, M);
    pref_create(&pref);
    pref_set(pref, 1, &ws_bytes, sizeof(ws_bytes));
    unsigned char results[8][1024];  // each result is well under 1 KiB
    std::memset(results, 0, sizeof(results));
    if (heur(h, desc, la, lb, ld, ld, pref, 8, results, &n_algo) || n_algo == 0) return false;
    // cublasLtMatmulHeuristicResult_t starts with the 64-byte algo; its size is 96 bytes in 12.x/13.x.
    unsigned char* flat = &results[0][0];
    for (int i = 0; i < n_algo; ++i) std::memcpy(algo[i], flat + 96 * i, 64);
    return true;
  }
  void Run(const void* A, const void* B, float* D, cudaStream_t s) {
    float one = 1, zero = 0;
    int st = matmul(h, desc, &one, A, la, B, lb, &zero, D, ld, D, ld, algo[chosen], ws, ws_bytes, s);
    if (st) {
      std::fprintf(stderr, "cublasLtMatmul: status %d\n", st);
      std::exit(1);
    }
  }
};

using Kernel = void (*)(const TensorMap, const TensorMap, float*, int, int, int, int);

struct Variant {
  const char* name;
  Kernel k;
  int stages;
  int group_m;
};

size_t SmemBytes(int stages) { return size_t(stages) * kStageBytes + 1024 + 256; }

TensorMap MakeMap(const void* p, int rows, int k, int box_rows) {
  TensorMap m;
  cuuint64_t dims[2] = {cuuint64_t(k), cuuint64_t(rows)};
  cuuint64_t strides[1] = {cuuint64_t(k) * 2};
  cuuint32_t box[2] = {64, cuuint32_t(box_rows)};
  cuuint32_t es[2] = {1, 1};
  CU(cuTensorMapEncodeTiled(reinterpret_cast<CUtensorMap*>(&m), CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2,
                            const_cast<void*>(p), dims, strides, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
                            CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  return m;
}

void Launch(const Variant& v, const TensorMap& ma, const TensorMap& mb, float* D, int M, int N, int K,
            cudaStream_t s) {
  dim3 grid((M / kBM) * (N / kBN));
  v.k<<<grid, kThreads, SmemBytes(v.stages), s>>>(ma, mb, D, M, N, K, v.group_m);
}

}  // namespace tune

int main(int argc, char** argv) {
  using namespace tune;
  double seconds = argc > 1 ? std::atof(argv[1]) : 2.0;
  CU(cuInit(0));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s, sm_%d%d, %d SMs, L2 %d MiB\n", prop.name, prop.major, prop.minor,
              prop.multiProcessorCount, prop.l2CacheSize >> 20);
  std::vector<Variant> variants = {
      {"s4 overlap g0", gpunode_gemm_bf16_sm90, 4, 0},
      {"s4 overlap g8", gpunode_gemm_bf16_sm90, 4, 8},
      {"s4 overlap g16", gpunode_gemm_bf16_sm90, 4, 16},
      {"s4 wait0 g8", gpunode_gemm_bf16_sm90_s4_wait0, 4, 8},
      {"s3 overlap g8", gpunode_gemm_bf16_sm90_s3, 3, 8},
  };
  for (auto& v : variants)
    CK(cudaFuncSetAttribute(v.k, cudaFuncAttributeMaxDynamicSharedMemorySize, int(SmemBytes(v.stages))));
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  Lt lt;
  bool have_lt = lt.Open();
  if (!have_lt) std::printf("cuBLASLt not found: checks and comparison skipped\n");

  // Correctness on several shapes, fresh inputs each.
  struct Shape {
    int M, N, K;
  };
  int fails = 0;
  unsigned seed = 1;
  for (Shape sh : {Shape{128, 256, 64}, Shape{256, 512, 128}, Shape{384, 768, 4096}, Shape{4096, 2048, 1024},
                   Shape{8192, 8192, 8192}}) {
    if (!have_lt) break;
    Lt plan = lt;
    if (!plan.Plan(sh.M, sh.N, sh.K)) {
      std::printf("cuBLASLt plan failed\n");
      return 1;
    }
    __nv_bfloat16 *A, *B;
    float *D, *R;
    double* acc;
    CK(cudaMalloc(&A, size_t(sh.M) * sh.K * 2));
    CK(cudaMalloc(&B, size_t(sh.N) * sh.K * 2));
    CK(cudaMalloc(&D, size_t(sh.M) * sh.N * 4));
    CK(cudaMalloc(&R, size_t(sh.M) * sh.N * 4));
    CK(cudaMalloc(&acc, 3 * sizeof(double)));
    Fill<<<1024, 256, 0, s>>>(A, size_t(sh.M) * sh.K, seed++);
    Fill<<<1024, 256, 0, s>>>(B, size_t(sh.N) * sh.K, seed++);
    plan.Run(A, B, R, s);
    TensorMap ma = MakeMap(A, sh.M, sh.K, kBM), mb = MakeMap(B, sh.N, sh.K, kBN);
    for (auto& v : variants) {
      CK(cudaMemsetAsync(D, 0xFF, size_t(sh.M) * sh.N * 4, s));  // NaN poison
      CK(cudaMemsetAsync(acc, 0, 3 * sizeof(double), s));
      Launch(v, ma, mb, D, sh.M, sh.N, sh.K, s);
      CK(cudaGetLastError());
      Diff<<<1024, 256, 0, s>>>(D, R, size_t(sh.M) * sh.N, acc);
      double h[3];
      CK(cudaMemcpyAsync(h, acc, sizeof(h), cudaMemcpyDeviceToHost, s));
      CK(cudaStreamSynchronize(s));
      double rel = std::sqrt(h[0] / h[1]);
      bool ok = h[2] == 0 && rel < 1e-4;
      fails += !ok;
      std::printf("check %5dx%5dx%5d %-16s rel err %.2e, non-finite %.0f: %s\n", sh.M, sh.N, sh.K, v.name, rel,
                  h[2], ok ? "ok" : "FAIL");
    }
    cudaFree(A), cudaFree(B), cudaFree(D), cudaFree(R), cudaFree(acc), cudaFree(plan.ws);
  }

  // Timing, 8192^3.
  const int n = 8192;
  __nv_bfloat16 *A, *B;
  float* D;
  CK(cudaMalloc(&A, size_t(n) * n * 2));
  CK(cudaMalloc(&B, size_t(n) * n * 2));
  CK(cudaMalloc(&D, size_t(n) * n * 4));
  Fill<<<1024, 256, 0, s>>>(A, size_t(n) * n, 77);
  Fill<<<1024, 256, 0, s>>>(B, size_t(n) * n, 78);
  TensorMap ma = MakeMap(A, n, n, kBM), mb = MakeMap(B, n, n, kBN);
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  const double flop = 2.0 * n * n * double(n);
  auto time = [&](auto&& op, double& burst, double& sustained) {
    for (int i = 0; i < 3; ++i) op();
    CK(cudaStreamSynchronize(s));
    CK(cudaEventRecord(e0, s));
    for (int i = 0; i < 10; ++i) op();
    CK(cudaEventRecord(e1, s));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    burst = flop * 10 / (ms / 1e3) / 1e12;
    int iters = 0;
    float total = 0;
    while (total < seconds * 1e3) {
      CK(cudaEventRecord(e0, s));
      for (int i = 0; i < 20; ++i) op();
      CK(cudaEventRecord(e1, s));
      CK(cudaEventSynchronize(e1));
      CK(cudaEventElapsedTime(&ms, e0, e1));
      total += ms;
      iters += 20;
    }
    sustained = flop * iters / (total / 1e3) / 1e12;
  };
  struct Row {
    std::string name;
    double burst, sustained;
  };
  std::vector<Row> rows;
  double lt_burst = 0, lt_sus = 0;
  if (have_lt) {
    Lt plan = lt;
    plan.Plan(n, n, n);
    // autotune like gpunode bench: the fastest of the offered algorithms
    double best = 0;
    for (int i = 0; i < plan.n_algo; ++i) {
      plan.chosen = i;
      for (int w = 0; w < 2; ++w) plan.Run(A, B, D, s);
      CK(cudaEventRecord(e0, s));
      for (int r = 0; r < 5; ++r) plan.Run(A, B, D, s);
      CK(cudaEventRecord(e1, s));
      CK(cudaEventSynchronize(e1));
      float ms;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      if (5 / ms > best) best = 5 / ms, lt.chosen = i;
    }
    plan.chosen = lt.chosen;
    time([&] { plan.Run(A, B, D, s); }, lt_burst, lt_sus);
    rows.push_back({"cuBLASLt (algo " + std::to_string(plan.chosen + 1) + "/" + std::to_string(plan.n_algo) + ")",
                    lt_burst, lt_sus});
  }
  for (auto& v : variants) {
    double b, su;
    time([&] { Launch(v, ma, mb, D, n, n, n, s); }, b, su);
    CK(cudaGetLastError());
    rows.push_back({std::string("gpunode sm90 ") + v.name, b, su});
  }
  std::printf("\n%-32s %12s %12s %10s\n", "8192^3 bf16 -> fp32", "burst TF/s", "sust. TF/s", "of cuBLASLt");
  for (auto& r : rows)
    std::printf("%-32s %12.1f %12.1f %9.1f%%\n", r.name.c_str(), r.burst, r.sustained,
                lt_sus > 0 ? 100 * r.sustained / lt_sus : 0.0);
  std::printf("checks: %s\n", fails ? "FAILED" : "all ok");
  return fails ? 1 : 0;
}
