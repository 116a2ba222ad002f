// Kernels of `gpunode bench`, compiled to PTX by scripts/gen-ptx.sh twice: -arch=compute_80
// (bench_kernels.ptx, Ampere and newer) and -arch=compute_75 (bench_kernels_sm75.ptx, Turing: T4),
// embedded in the binary and JIT-compiled by the driver at run time (see docs/bench.md). Every
// entry point is extern "C" so the host code finds it by name with cuModuleGetFunction.
//
// Turing has fp16 tensor cores (mma.sync m16n8k8, which WMMA's m16n16k16 lowers to) but neither
// bf16 tensor cores nor cp.async (both sm_80; PTX ISA "Warp Level Matrix Multiply-Accumulate
// Instructions" and "cp.async" target notes): its PTX has no gpunode_gemm_bf16 (bench reports bf16
// as not on this GPU) and its fp16 GEMM fills shared memory through registers.
//
// Matrix layout shared with the host (src/bench/gemm.cc) and cuBLASLt's "TN" call:
//   A: M x K, row-major (k contiguous)      B: N x K, row-major (k contiguous)
//   D: M x N, column-major (D[i + j*M])     D = A * B^T
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>
#include <stdint.h>

namespace {

__device__ __forceinline__ uint32_t Hash(uint64_t x, uint32_t seed) {
  // splitmix64 finaliser: cheap, well mixed, reproducible on host and device.
  x += 0x9E3779B97F4A7C15ull * (seed + 1u);
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  x ^= x >> 31;
  return static_cast<uint32_t>(x);
}

// Uniform in [-1, 1).
__device__ __forceinline__ float Uniform(uint64_t i, uint32_t seed) {
  return static_cast<float>(Hash(i, seed) >> 8) * (2.0f / 16777216.0f) - 1.0f;
}

// dtype codes shared with the host: 0 fp32, 1 fp16, 2 bf16.
__device__ __forceinline__ float Load(const void* p, int dtype, uint64_t i) {
  switch (dtype) {
    case 1: return __half2float(static_cast<const __half*>(p)[i]);
    case 2: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    default: return static_cast<const float*>(p)[i];
  }
}

// True in the compute_75 compilation (Turing); false for compute_80 and the host pass.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define GPUNODE_TURING 1
#else
#define GPUNODE_TURING 0
#endif

#if !GPUNODE_TURING
__device__ __forceinline__ void CpAsync16(void* smem, const void* gmem) {
  unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem));
}
__device__ __forceinline__ void CpAsyncCommit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void CpAsyncWait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }
#endif

// Tensor-core GEMM with WMMA (mma.sync underneath): 128x128 block tile, K step 32, 8 warps each
// computing 64x32, two shared-memory stages. From Ampere on the stages are filled with cp.async;
// on Turing (no cp.async) each thread loads the next stage's four 16-byte chunks into registers
// before the current stage's products and stores them after. M, N multiples of 128; K of 32.
constexpr int kBM = 128, kBN = 128, kBK = 32, kLd = kBK + 8;  // +8 halves: no bank conflicts

template <typename T>
__device__ void GemmWmma(const T* __restrict__ A, const T* __restrict__ B, float* __restrict__ D,
                         int M, int N, int K) {
  using namespace nvcuda;
  __shared__ __align__(128) T smem[2][(kBM + kBN) * kLd];
  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int warp_m = warp / 4;  // 0..1 -> 64 rows each
  const int warp_n = warp % 4;  // 0..3 -> 32 cols each
  const int block_m = blockIdx.y * kBM;
  const int block_n = blockIdx.x * kBN;

  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[4][2];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

  // Each stage: A rows 128 x 32 and B rows 128 x 32 -> 2 x 512 chunks of 16 bytes (8 elements).
#if GPUNODE_TURING
  uint4 next_a[2], next_b[2];
  auto fetch = [&](int k0) {  // global -> registers
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      int chunk = tid + c * 256;
      int row = chunk / 4, col = (chunk % 4) * 8;
      next_a[c] = *reinterpret_cast<const uint4*>(A + static_cast<size_t>(block_m + row) * K + k0 + col);
      next_b[c] = *reinterpret_cast<const uint4*>(B + static_cast<size_t>(block_n + row) * K + k0 + col);
    }
  };
  auto stash = [&](int stage) {  // registers -> shared
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      int chunk = tid + c * 256;
      int row = chunk / 4, col = (chunk % 4) * 8;
      *reinterpret_cast<uint4*>(smem[stage] + row * kLd + col) = next_a[c];
      *reinterpret_cast<uint4*>(smem[stage] + kBM * kLd + row * kLd + col) = next_b[c];
    }
  };
#else
  auto load_stage = [&](int stage, int k0) {
    T* sa = smem[stage];
    T* sb = smem[stage] + kBM * kLd;
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      int chunk = tid + c * 256;   // 0..511
      int row = chunk / 4;         // 4 chunks per 32-element row
      int col = (chunk % 4) * 8;
      CpAsync16(sa + row * kLd + col, A + static_cast<size_t>(block_m + row) * K + k0 + col);
      CpAsync16(sb + row * kLd + col, B + static_cast<size_t>(block_n + row) * K + k0 + col);
    }
    CpAsyncCommit();
  };
#endif

  const int tiles = K / kBK;
#if GPUNODE_TURING
  fetch(0);
  stash(0);
  __syncthreads();
#else
  load_stage(0, 0);
#endif
  for (int t = 0; t < tiles; ++t) {
    const int stage = t & 1;
#if GPUNODE_TURING
    // Stage t^1 was last read in iteration t-1, which every warp has left (the barrier below).
    if (t + 1 < tiles) fetch((t + 1) * kBK);
#else
    if (t + 1 < tiles) {
      load_stage(stage ^ 1, (t + 1) * kBK);
      CpAsyncWait<1>();
    } else {
      CpAsyncWait<0>();
    }
    __syncthreads();
#endif
    const T* sa = smem[stage];
    const T* sb = smem[stage] + kBM * kLd;
#pragma unroll
    for (int kk = 0; kk < kBK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a[4];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> b[2];
#pragma unroll
      for (int i = 0; i < 4; ++i)
        wmma::load_matrix_sync(a[i], sa + (warp_m * 64 + i * 16) * kLd + kk, kLd);
#pragma unroll
      for (int j = 0; j < 2; ++j)
        wmma::load_matrix_sync(b[j], sb + (warp_n * 32 + j * 16) * kLd + kk, kLd);
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
    }
#if GPUNODE_TURING
    if (t + 1 < tiles) stash(stage ^ 1);
#endif
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      int row = block_m + warp_m * 64 + i * 16;
      int col = block_n + warp_n * 32 + j * 16;
      wmma::store_matrix_sync(D + row + static_cast<size_t>(col) * M, acc[i][j], M, wmma::mem_col_major);
    }
}

}  // namespace

extern "C" {

// Fills p[0..n) with uniform values in [-1, 1) (dtype 0 fp32, 1 fp16, 2 bf16).
__global__ void gpunode_fill_uniform(void* p, unsigned long long n, int dtype, unsigned seed) {
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    float v = Uniform(i, seed);
    switch (dtype) {
      case 1: static_cast<__half*>(p)[i] = __float2half_rn(v); break;
      case 2: static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v); break;
      default: static_cast<float*>(p)[i] = v;
    }
  }
}

// Reference for sampled outputs: per sample s, out[3s] = sum_k A[i,k]*B[j,k] in fp32 (sequential),
// out[3s+1] = sum_k |A[i,k]*B[j,k]| (scales the tolerance), out[3s+2] = D[i + j*M] as computed.
__global__ void gpunode_gemm_check(const void* A, const void* B, const void* D, int in_dtype,
                                   int out_dtype, int M, int K, const int* rows, const int* cols,
                                   int samples, float* out) {
  int s = blockIdx.x * blockDim.x + threadIdx.x;
  if (s >= samples) return;
  const uint64_t i = rows[s], j = cols[s];
  float sum = 0.0f, abs_sum = 0.0f;
  for (int k = 0; k < K; ++k) {
    float p = Load(A, in_dtype, i * K + k) * Load(B, in_dtype, j * K + k);
    sum += p;
    abs_sum += fabsf(p);
  }
  out[3 * s] = sum;
  out[3 * s + 1] = abs_sum;
  out[3 * s + 2] = Load(D, out_dtype, i + j * static_cast<uint64_t>(M));
}

#if !GPUNODE_TURING  // bf16 tensor cores start with Ampere
__global__ void __launch_bounds__(256) gpunode_gemm_bf16(const __nv_bfloat16* A, const __nv_bfloat16* B,
                                                         float* D, int M, int N, int K) {
  GemmWmma<__nv_bfloat16>(A, B, D, M, N, K);
}
#endif

__global__ void __launch_bounds__(256) gpunode_gemm_f16(const __half* A, const __half* B, float* D,
                                                        int M, int N, int K) {
  GemmWmma<__half>(A, B, D, M, N, K);
}

// FP32 SIMT GEMM (no tensor cores): 64x64 block tile, 256 threads with 4x4 outputs each.
__global__ void __launch_bounds__(256) gpunode_gemm_f32(const float* A, const float* B, float* D,
                                                        int M, int N, int K) {
  constexpr int BM = 64, BN = 64, BK = 16;
  __shared__ float As[BK][BM + 4];
  __shared__ float Bs[BK][BN + 4];
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int bm = blockIdx.y * BM, bn = blockIdx.x * BN;
  float acc[4][4] = {};
  for (int k0 = 0; k0 < K; k0 += BK) {
    for (int e = threadIdx.x; e < BM * BK; e += 256) {
      int r = e / BK, k = e % BK;
      As[k][r] = A[static_cast<size_t>(bm + r) * K + k0 + k];
      Bs[k][r] = B[static_cast<size_t>(bn + r) * K + k0 + k];
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      float a[4], b[4];
#pragma unroll
      for (int x = 0; x < 4; ++x) {
        a[x] = As[k][tx * 4 + x];
        b[x] = Bs[k][ty * 4 + x];
      }
#pragma unroll
      for (int x = 0; x < 4; ++x)
#pragma unroll
        for (int y = 0; y < 4; ++y) acc[x][y] = fmaf(a[x], b[y], acc[x][y]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int x = 0; x < 4; ++x)
#pragma unroll
    for (int y = 0; y < 4; ++y)
      D[(bm + tx * 4 + x) + static_cast<size_t>(bn + ty * 4 + y) * M] = acc[x][y];
}

// a = b + s * c over n4 float4 elements (STREAM triad: 2 reads + 1 write per element).
__global__ void gpunode_triad(float4* a, const float4* b, const float4* c, float s,
                              unsigned long long n4) {
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < n4;
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    float4 x = b[i], y = c[i];
    a[i] = make_float4(x.x + s * y.x, x.y + s * y.y, x.z + s * y.z, x.w + s * y.w);
  }
}

// Memory test patterns (shared with src/bench/memtest.cc): 0 zeros, 1 ones, 2 checkerboard
// (0xAAAAAAAA / 0x55555555 alternating by word), 3 inverse checkerboard, 4 own address (word
// index xor seed), 5 random (hash of index and seed).
__device__ __forceinline__ uint32_t PatternWord(int pattern, uint64_t i, uint32_t seed) {
  switch (pattern) {
    case 0: return 0u;
    case 1: return 0xFFFFFFFFu;
    case 2: return (i & 1) ? 0x55555555u : 0xAAAAAAAAu;
    case 3: return (i & 1) ? 0xAAAAAAAAu : 0x55555555u;
    case 4: return static_cast<uint32_t>(i) ^ static_cast<uint32_t>(i >> 32) ^ seed;
    default: return Hash(i, seed);
  }
}

__global__ void gpunode_memtest_write(uint32_t* p, unsigned long long n, int pattern, unsigned seed) {
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x)
    p[i] = PatternWord(pattern, i, seed);
}

// result[0] += mismatching words; result[1] = min bad word index; result[2] = max bad index.
// The host sets result to {0, ~0, 0} before the launch.
__global__ void gpunode_memtest_verify(const uint32_t* p, unsigned long long n, int pattern,
                                       unsigned seed, unsigned long long* result) {
  unsigned long long bad = 0, lo = ~0ull, hi = 0;
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    if (p[i] != PatternWord(pattern, i, seed)) {
      ++bad;
      lo = min(lo, static_cast<unsigned long long>(i));
      hi = max(hi, static_cast<unsigned long long>(i));
    }
  }
  if (bad) {
    atomicAdd(&result[0], bad);
    atomicMin(&result[1], lo);
    atomicMax(&result[2], hi);
  }
}

}  // extern "C"
