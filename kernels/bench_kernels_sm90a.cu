// Hopper (sm_90a) kernels of `gpunode bench`: the bf16/fp16 GEMM with wgmma and the tensor memory
// accelerator (TMA). Compiled to PTX for sm_90a (scripts/gen-ptx.sh writes
// kernels/bench_kernels_sm90a.ptx), embedded beside the compute_80 PTX of bench_kernels.cu, and
// loaded only on compute capability 9.0 (the driver JITs sm_90a PTX for that architecture alone).
// Entry points are extern "C" (cuModuleGetFunction finds them by name).
//
// Layout shared with the host and with the portable kernel (bench_kernels.cu):
//   A: M x K, row-major (K contiguous)      B: N x K, row-major (K contiguous)
//   D: M x N fp32, column-major (D[i + j*M])     D = A * B^T
// Both operands are "K-major", the layout wgmma reads without transposing.
//
// Design (docs/bench.md, "Our GEMM kernels"):
// - Block tile 128 x 256, K step 64; 384 threads = 3 warpgroups. Warpgroup 0 is the producer: one
//   thread issues TMA copies of the A (128 x 64) and B (256 x 64) tiles into a ring of kStages
//   shared-memory stages (48 KiB each, 128-byte swizzle), each completing on the stage's "full"
//   mbarrier. Warpgroups 1 and 2 are consumers: each owns 64 rows x 256 columns of the tile
//   (128 fp32 accumulators per thread) and issues wgmma.m64n256k16 straight from shared memory,
//   then arrives on the stage's "empty" mbarrier, which the producer waits for before refilling.
// - setmaxnreg moves registers from the producer (40) to the consumers (232).
// - Blocks are numbered in groups of `group_m` tile rows so the tiles running at one time share
//   their A and B panels in L2 (group_m 0: plain row order).
// - M must be a multiple of 128, N of 256, K of 64 (the host checks; bench uses 8192).
#include <stdint.h>

// Dynamic shared memory, at file scope: a name inside the anonymous namespace would carry a
// per-compile hash in the PTX and make the committed file differ on every regeneration.
extern __shared__ __align__(1024) uint8_t gpunode_sm90_smem[];

namespace {

constexpr int kBM = 128, kBN = 256, kBK = 64;
constexpr int kThreads = 384;
constexpr uint32_t kABytes = kBM * kBK * 2;  // 16 KiB
constexpr uint32_t kBBytes = kBN * kBK * 2;  // 32 KiB
constexpr uint32_t kStageBytes = kABytes + kBBytes;

// A CUtensorMap (cuda.h): 128 opaque bytes, 64-byte aligned, passed by value as __grid_constant__.
struct alignas(64) TensorMap {
  uint64_t opaque[16];
};

__device__ __forceinline__ void BarInit(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count));
}
__device__ __forceinline__ void BarExpectTx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void BarArrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void BarWait(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
}

// 2-D TMA copy of the box at (c0 = K offset, c1 = row offset) into shared memory at `dst`,
// completing `bytes` of the mbarrier's transaction count.
__device__ __forceinline__ void TmaLoad(uint32_t dst, const TensorMap* map, uint32_t bar, int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1)
      : "memory");
}

// wgmma shared-memory matrix descriptor for a K-major tile with 128-byte swizzle: rows of 128
// bytes, 8-row groups 1024 bytes apart (stride byte offset), leading byte offset unused.
__device__ __forceinline__ uint64_t Desc(uint32_t saddr) {
  uint64_t d = (saddr & 0x3FFFF) >> 4;
  d |= uint64_t{1} << 16;
  d |= uint64_t{1024 >> 4} << 32;
  d |= uint64_t{1} << 62;
  return d;
}

__device__ __forceinline__ void WgmmaFence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void WgmmaCommit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void WgmmaWait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

#define GPUNODE_WGMMA_M64N256K16(TY)                                                          \
  asm volatile(                                                                               \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"                                         \
      "wgmma.mma_async.sync.aligned.m64n256k16.f32." TY "." TY " "                             \
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, " \
      "%128, %129, p, 1, 1, 0, 0;\n}\n"                                                     \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
      "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
      "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
      "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
      "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
      "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
      "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), \
      "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), \
      "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), \
      "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), \
      "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), \
      "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), \
      "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), \
      "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), \
      "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127]) \
      : "l"(desc_a), "l"(desc_b), "r"(scale_d))

// d += A(64 x 16, K-major, smem) * B(256 x 16, K-major, smem)^T; scale_d 0 ignores d's old value.
template <bool kF16>
__device__ __forceinline__ void Wgmma(float (&d)[128], uint64_t desc_a, uint64_t desc_b, uint32_t scale_d) {
  if constexpr (kF16) {
    GPUNODE_WGMMA_M64N256K16("f16");
  } else {
    GPUNODE_WGMMA_M64N256K16("bf16");
  }
}

// kOverlap: keep one wgmma group in flight across K steps (release stage t-1 after issuing t);
// otherwise wait for each step's group before releasing its stage.
template <bool kF16, int kStages, bool kOverlap>
__device__ __forceinline__ void GemmSm90(const TensorMap& map_a, const TensorMap& map_b, float* __restrict__ D,
                                         int M, int N, int K, int group_m) {
  const uint32_t raw = static_cast<uint32_t>(__cvta_generic_to_shared(gpunode_sm90_smem));
  const uint32_t base = (raw + 1023u) & ~1023u;  // 128-byte swizzle wants 1024-byte aligned tiles
  const uint32_t full = base + kStages * kStageBytes;
  const uint32_t empty = full + 8 * kStages;
  const int wg = threadIdx.x / 128;
  const int tiles_k = K / kBK;

  // Block -> tile, grouped by group_m tile rows.
  const int tiles_m = M / kBM, tiles_n = N / kBN;
  int tm = blockIdx.x / tiles_n, tn = blockIdx.x % tiles_n;
  if (group_m > 0) {
    const int per_group = group_m * tiles_n;
    const int first = (blockIdx.x / per_group) * group_m;
    const int rows = min(group_m, tiles_m - first);
    const int in_group = blockIdx.x % per_group;
    tm = first + in_group % rows;
    tn = in_group / rows;
  }
  const int bm = tm * kBM, bn = tn * kBN;

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      BarInit(full + 8 * s, 1);
      BarInit(empty + 8 * s, 2);  // one arrival per consumer warpgroup
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  if (wg == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
    if (threadIdx.x == 0) {
      asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(&map_a)) : "memory");
      asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(&map_b)) : "memory");
      for (int t = 0; t < tiles_k; ++t) {
        const int s = t % kStages;
        if (t >= kStages) BarWait(empty + 8 * s, ((t / kStages) + 1) & 1);
        const uint32_t sa = base + s * kStageBytes;
        BarExpectTx(full + 8 * s, kStageBytes);
        TmaLoad(sa, &map_a, full + 8 * s, t * kBK, bm);
        TmaLoad(sa + kABytes, &map_b, full + 8 * s, t * kBK, bn);
      }
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
    const int cw = wg - 1;  // which 64 rows of the tile
    float d[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) d[i] = 0.0f;
    for (int t = 0; t < tiles_k; ++t) {
      const int s = t % kStages;
      BarWait(full + 8 * s, (t / kStages) & 1);
      const uint32_t sa = base + s * kStageBytes + cw * 64 * 128;
      const uint32_t sb = base + s * kStageBytes + kABytes;
      WgmmaFence();
#pragma unroll
      for (int kk = 0; kk < kBK / 16; ++kk) Wgmma<kF16>(d, Desc(sa + kk * 32), Desc(sb + kk * 32), 1);
      WgmmaCommit();
      if constexpr (kOverlap) {
        WgmmaWait<1>();
        if (t > 0 && threadIdx.x % 128 == 0) BarArrive(empty + 8 * ((t - 1) % kStages));
      } else {
        WgmmaWait<0>();
        if (threadIdx.x % 128 == 0) BarArrive(empty + 8 * s);
      }
    }
    WgmmaWait<0>();
    // Accumulator layout of wgmma m64nNk16: warp w of the warpgroup holds rows 16w..16w+15; for
    // each 8-column chunk j, registers 4j..4j+3 are (r, c), (r, c+1), (r+8, c), (r+8, c+1) with
    // r = lane/4, c = 8j + 2*(lane%4).
    const int lane = threadIdx.x % 32, warp = (threadIdx.x % 128) / 32;
    const int r = bm + cw * 64 + warp * 16 + lane / 4;
    float* col0 = D + static_cast<size_t>(bn + 2 * (lane % 4)) * M + r;
#pragma unroll
    for (int j = 0; j < 32; ++j) {
      float* p = col0 + static_cast<size_t>(8 * j) * M;
      p[0] = d[4 * j];
      p[M] = d[4 * j + 1];
      p[8] = d[4 * j + 2];
      p[M + 8] = d[4 * j + 3];
    }
  }
}

}  // namespace

extern "C" {

// Shared memory: kStages * 48 KiB + 1 KiB alignment slack + the mbarriers (the host sets
// CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES; gpunode_gemm_sm90_smem_bytes below).
__global__ void __launch_bounds__(kThreads, 1)
    gpunode_gemm_bf16_sm90(const __grid_constant__ TensorMap map_a, const __grid_constant__ TensorMap map_b,
                           float* D, int M, int N, int K, int group_m) {
  GemmSm90<false, 4, true>(map_a, map_b, D, M, N, K, group_m);
}

__global__ void __launch_bounds__(kThreads, 1)
    gpunode_gemm_f16_sm90(const __grid_constant__ TensorMap map_a, const __grid_constant__ TensorMap map_b,
                          float* D, int M, int N, int K, int group_m) {
  GemmSm90<true, 4, true>(map_a, map_b, D, M, N, K, group_m);
}

#ifdef GPUNODE_SM90_VARIANTS  // benchmarks/gemm_sm90_tune.cu: the variants compared on the H200
__global__ void __launch_bounds__(kThreads, 1)
    gpunode_gemm_bf16_sm90_s4_wait0(const __grid_constant__ TensorMap map_a, const __grid_constant__ TensorMap map_b,
                                    float* D, int M, int N, int K, int group_m) {
  GemmSm90<false, 4, false>(map_a, map_b, D, M, N, K, group_m);
}
__global__ void __launch_bounds__(kThreads, 1)
    gpunode_gemm_bf16_sm90_s3(const __grid_constant__ TensorMap map_a, const __grid_constant__ TensorMap map_b,
                              float* D, int M, int N, int K, int group_m) {
  GemmSm90<false, 3, true>(map_a, map_b, D, M, N, K, group_m);
}
#endif

}  // extern "C"
