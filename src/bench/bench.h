// `gpunode bench`: the report model and the pure parts (option parsing, verdicts against the
// ceilings table, the GEMM result checker, PCIe arithmetic, clock-event names, kernel
// availability). Everything here is pure and unit-tested without a GPU; the GPU work is in
// runner.h. Thresholds are documented in docs/bench.md; change both together.
#ifndef GPUNODE_BENCH_BENCH_H_
#define GPUNODE_BENCH_BENCH_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/string_view.h"
#include "src/base/status.h"
#include "src/bench/ceilings.h"

namespace gpunode::bench {

enum class TestKind { kGemm, kHbm, kPcie, kMemtest, kP2p };
inline constexpr TestKind kAllTests[] = {TestKind::kGemm, TestKind::kHbm, TestKind::kPcie,
                                         TestKind::kMemtest, TestKind::kP2p};
absl::string_view TestName(TestKind t);  // "gemm", "hbm", ...

// Ordered by severity for rolling up: the worst wins.
enum class Verdict { kPass = 0, kNoCeiling = 1, kSkipped = 2, kFail = 3, kError = 4 };
absl::string_view VerdictName(Verdict v);  // "pass", "no-ceiling", "skipped", "fail", "error"
Verdict Worst(Verdict a, Verdict b);

struct BenchOptions {
  std::vector<TestKind> tests;           // in kAllTests order, no duplicates
  std::optional<std::vector<unsigned>> gpus;  // NVML indices; empty optional = all
  double duration_s = 1.0;               // timed work per measurement
  bool force = false;                    // run on GPUs that have compute processes
  // GEMM code: "auto" (cuBLASLt when it loads, with our bf16 kernel beside it; else ours),
  // "cublaslt" (required: an error without it), "gpunode" (our kernels only, as on a node that has
  // only the driver).
  std::string gemm_library = "auto";
  // Which embedded PTX our kernels come from: "auto" (by compute capability: 7.5 -> compute_75,
  // 8.0 and newer -> compute_80, plus the sm_90a GEMM on 9.0), or "compute_75" / "compute_80"
  // forced (diagnostic: `bench --ptx compute_75` runs the Turing kernels on a newer GPU).
  std::string ptx = "auto";
};

// "gemm,hbm" -> tests. Empty text = all. Errors (kInvalidArgument) name the flag:
// "--tests: unknown test 'foo' (choose from gemm, hbm, pcie, memtest, p2p)".
StatusOr<std::vector<TestKind>> ParseTests(absl::string_view text);
// "all" or "" -> empty optional; "0,2" -> {0, 2}. Errors name --gpus.
StatusOr<std::optional<std::vector<unsigned>>> ParseGpus(absl::string_view text);
// duration must be finite and in (0, 600]. Errors name --duration.
Status ValidateDuration(double seconds);

// ---- GEMM result check -------------------------------------------------------------------
// One sampled output element: the GPU's value and an fp32 reference computed from the same
// inputs, with sum_k |a_ik * b_jk| that bounds accumulation-order differences.
struct GemmSample {
  int row = 0, col = 0;
  float ref = 0, abs_sum = 0, got = 0;
};
// |got - ref| <= out_rel * |ref| + acc_rel * abs_sum, and got must be finite.
struct GemmTolerance {
  double out_rel = 0;  // rounding of the output type (2 units of its roundoff)
  double acc_rel = 0;  // accumulation in fp32 with a different order / tensor-core internals
};
enum class GemmDtype { kBf16, kFp16, kFp32 };
absl::string_view GemmDtypeName(GemmDtype d);  // "bf16", "fp16", "fp32"
// The tolerance for output stored as `out` after inputs of `in` accumulated in fp32.
GemmTolerance ToleranceFor(GemmDtype in, GemmDtype out);

struct GemmCheck {
  int samples = 0;
  int mismatches = 0;
  double worst_ratio = 0;      // max |got-ref| / tolerance over samples (<= 1 means within)
  std::string first_mismatch;  // "D[12,345] = 3.5, expected 17.25 (tolerance 0.4)"
  bool ok() const { return samples > 0 && mismatches == 0; }
};
GemmCheck CheckGemm(const std::vector<GemmSample>& samples, const GemmTolerance& tol);

// ---- Verdicts --------------------------------------------------------------------------------
// Fractions of the reference that pass (docs/bench.md, "Verdicts").
inline constexpr double kGemmMeasuredFraction = 0.80;   // of a measured cuBLAS ceiling
inline constexpr double kGemmDatasheetFraction = 0.60;  // of a datasheet dense tensor peak
inline constexpr double kGemmFp32DatasheetFraction = 0.50;  // of the datasheet fp32 peak
inline constexpr double kHbmMeasuredFraction = 0.80;    // of a measured copy ceiling
inline constexpr double kHbmDatasheetFraction = 0.70;   // of the datasheet memory bandwidth
inline constexpr double kPcieFraction = 0.70;           // of the link's theoretical rate per direction

// The reference a measurement is judged against.
struct Reference {
  double value = 0;
  std::string kind;    // "measured", "datasheet", "link"
  std::string source;
  double fraction = 0;  // passes at >= fraction * value
};

// The code that computed a GEMM measurement.
enum class GemmKernel {
  kCublasLt,   // NVIDIA's library, when the node has it
  kWgmmaSm90,  // ours for Hopper (sm_90a): wgmma + TMA, warp-specialised (kernels/bench_kernels_sm90a.cu)
  kWmma,       // ours for any GPU from Ampere on: WMMA/mma.sync + cp.async (kernels/bench_kernels.cu)
  kWmmaSm75,   // ours from the compute_75 PTX (Turing): fp16 WMMA, stages filled through registers
  kSimt,       // ours for fp32: plain FMA, no tensor cores
};
// "cublasLt", "gpunode-wgmma-sm90", "gpunode-wmma", "gpunode-wmma-sm75", "gpunode-simt" (the
// JSON's `backend` for ours).
std::string_view GemmKernelName(GemmKernel k);

// Pass fraction for our own kernels, calibrated to what each reached on a healthy GPU of the
// architecture (`cc_major`) against the reference kind ("measured" or "datasheet"), less ~8 %:
// a GPU 10 % slower than the healthy one fails. docs/bench.md, "Verdicts", has the table and the
// measurements behind it; where no measurement exists (the WMMA kernel off Hopper) it is the
// uncalibrated sanity floor 0.15.
double OwnKernelFraction(GemmKernel k, GemmDtype dtype, int cc_major, std::string_view reference_kind);

// GEMM reference for `dtype` on `model` (null = unknown model), judged for `kernel` on a GPU of
// compute capability major `cc_major`.
std::optional<Reference> GemmReference(const ModelCeilings* model, GemmDtype dtype, GemmKernel kernel,
                                       int cc_major);
// Memory-bandwidth reference (copy and triad share it).
std::optional<Reference> HbmReference(const ModelCeilings* model);

// PCIe: per-direction theoretical GB/s of a link (gen 1..6, lanes), after line encoding
// (8b/10b for gen 1-2, 128b/130b for 3-5, 242/256 FLIT for 6). 0 for an unknown generation.
double PcieTheoreticalGBps(unsigned gen, unsigned width);
// The link the card should train to: the lower of the model's and the slot's maximum generation,
// at the model's width (or the slot's maximum width when the model is unknown). Empty when neither
// the NVML link maxima nor the model give a generation.
std::optional<Reference> PcieReference(const ModelCeilings* model, std::optional<unsigned> link_gen_max,
                                       std::optional<unsigned> link_width_max);

// value vs reference -> pass / fail; no reference -> no-ceiling.
Verdict Judge(double value, const std::optional<Reference>& ref);

// ---- NVML clock event (throttle) reasons ------------------------------------------------------
// Names of the bits of nvmlDeviceGetCurrentClocksEventReasons ("SwPowerCap", "HwSlowdown", ...),
// unknown bits as "0x...". 
std::vector<std::string> ClockEventReasonNames(uint64_t mask);
// Reasons that lower clocks under load (power, thermal, hardware slowdown), as opposed to idle or
// application settings.
bool IsPerformanceLimiting(uint64_t mask);

// ---- Kernels ----------------------------------------------------------------------------------
// The embedded PTX (bench_kernels.ptx, compute_80), if this binary was built with it.
std::optional<std::string_view> EmbeddedPtx();
// The Turing PTX (bench_kernels_sm75.ptx, compute_75: no bf16, no cp.async).
std::optional<std::string_view> EmbeddedPtxSm75();
// The Hopper GEMM's PTX (sm_90a; kernels/bench_kernels_sm90a.ptx), loaded only on compute 9.0.
std::optional<std::string_view> EmbeddedPtxSm90a();
// OK when `ptx` holds kernels; else kFailedPrecondition saying bench is unavailable because the
// build had no nvcc, and how to rebuild.
Status KernelsAvailable(std::optional<std::string_view> ptx);

// The virtual architectures of the embedded PTX.
enum class PtxTarget { kCompute75, kCompute80 };
absl::string_view PtxTargetName(PtxTarget t);  // "compute_75", "compute_80"
// --ptx: "auto", "compute_75" or "compute_80"; anything else is kInvalidArgument naming --ptx.
Status ValidatePtxChoice(absl::string_view choice);
// The PTX a GPU of compute capability `cc_major`.`cc_minor` loads under --ptx `choice`: auto picks
// compute_75 for 7.x and compute_80 from 8.0 on; a forced target is used when the GPU can run it
// (the driver JIT-compiles older PTX for newer GPUs, never the reverse). kFailedPrecondition, with
// the GPU's compute capability, below 7.5 or for compute_80 on a 7.5 GPU.
StatusOr<PtxTarget> ChoosePtx(int cc_major, int cc_minor, absl::string_view choice);
// Whether the kernels of `t` include the bf16 GEMM (compute_80 does; Turing has no bf16 tensor cores).
inline bool PtxHasBf16(PtxTarget t) { return t == PtxTarget::kCompute80; }
// Why a GEMM of `dtype` cannot run on a GPU of compute capability `cc_major`.`cc_minor` whose
// kernels came from `ptx` (by our kernel, or by cuBLASLt when `own_kernel` is false), or "" when it
// can: bf16 needs 8.0 ("not on this GPU: ..."), and our bf16 kernel is not in the compute_75 PTX
// that --ptx forced ("not in the compute_75 PTX ..."). Bench reports such a row as unsupported.
std::string GemmUnsupportedReason(GemmDtype dtype, int cc_major, int cc_minor, PtxTarget ptx, bool own_kernel);

// "0000:18:00.0" from NVML's "00000000:18:00.0" or CUDA's "0000:18:00.0", lower case.
std::string NormalizeBusId(absl::string_view bus_id);

}  // namespace gpunode::bench

#endif  // GPUNODE_BENCH_BENCH_H_
