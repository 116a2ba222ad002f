#include "src/bench/bench.h"

#include <cmath>
#include <iterator>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "src/base/embedded.h"

namespace gpunode::bench {

absl::string_view TestName(TestKind t) {
  switch (t) {
    case TestKind::kGemm: return "gemm";
    case TestKind::kHbm: return "hbm";
    case TestKind::kPcie: return "pcie";
    case TestKind::kMemtest: return "memtest";
    case TestKind::kP2p: return "p2p";
  }
  return "?";
}

absl::string_view VerdictName(Verdict v) {
  switch (v) {
    case Verdict::kPass: return "pass";
    case Verdict::kNoCeiling: return "no-ceiling";
    case Verdict::kSkipped: return "skipped";
    case Verdict::kFail: return "fail";
    case Verdict::kError: return "error";
  }
  return "?";
}

Verdict Worst(Verdict a, Verdict b) { return static_cast<int>(a) >= static_cast<int>(b) ? a : b; }

StatusOr<std::vector<TestKind>> ParseTests(absl::string_view text) {
  std::vector<bool> want(std::size(kAllTests), text.empty() || text == "all");
  if (!(text.empty() || text == "all")) {
    for (absl::string_view part : absl::StrSplit(text, ',')) {
      part = absl::StripAsciiWhitespace(part);
      bool found = false;
      for (size_t i = 0; i < std::size(kAllTests); ++i) {
        if (part == TestName(kAllTests[i])) {
          want[i] = true;
          found = true;
        }
      }
      if (!found) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--tests: unknown test '", part, "' (choose from gemm, hbm, pcie, memtest, p2p, or all)"));
      }
    }
  }
  std::vector<TestKind> out;
  for (size_t i = 0; i < std::size(kAllTests); ++i) {
    if (want[i]) out.push_back(kAllTests[i]);
  }
  return out;
}

StatusOr<std::optional<std::vector<unsigned>>> ParseGpus(absl::string_view text) {
  text = absl::StripAsciiWhitespace(text);
  if (text.empty() || text == "all") return std::optional<std::vector<unsigned>>();
  std::vector<unsigned> out;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    part = absl::StripAsciiWhitespace(part);
    unsigned v = 0;
    if (part.empty() || !absl::SimpleAtoi(part, &v) || part[0] == '-' || part[0] == '+' || v > 1023) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--gpus: '", part, "' is not a GPU index (use indices as nvidia-smi shows them, e.g. 0,2, or all)"));
    }
    bool dup = false;
    for (unsigned u : out) dup |= (u == v);
    if (!dup) out.push_back(v);
  }
  return std::optional<std::vector<unsigned>>(std::move(out));
}

Status ValidateDuration(double seconds) {
  if (!std::isfinite(seconds) || seconds <= 0 || seconds > 600) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--duration: must be a number of seconds in (0, 600] (got ", seconds, ")"));
  }
  return absl::OkStatus();
}

absl::string_view GemmDtypeName(GemmDtype d) {
  switch (d) {
    case GemmDtype::kBf16: return "bf16";
    case GemmDtype::kFp16: return "fp16";
    case GemmDtype::kFp32: return "fp32";
  }
  return "?";
}

GemmTolerance ToleranceFor(GemmDtype in, GemmDtype out) {
  // Unit roundoff of the stored output: bf16 2^-8, fp16 2^-11, fp32 2^-24; we allow two units.
  double out_rel = out == GemmDtype::kBf16 ? std::ldexp(1.0, -7)
                   : out == GemmDtype::kFp16 ? std::ldexp(1.0, -10)
                                             : std::ldexp(1.0, -23);
  // fp32 accumulation in another order (split-K, tensor-core internals) differs from the
  // sequential reference by at most ~K*2^-24 * sum|a*b| in the worst case and ~sqrt(K)*2^-24 in
  // practice; 2^-12 of sum|a*b| covers the worst case for K <= 4096 and is still far below what a
  // flipped exponent or mantissa-high bit, or a wrong tile, produces (errors of order |ref| or
  // sum|a*b| itself). Tensor-core inputs are already rounded to bf16/fp16 on both sides, so the
  // input type does not add error.
  double acc_rel = in == GemmDtype::kFp32 ? std::ldexp(1.0, -16) : std::ldexp(1.0, -12);
  return {out_rel, acc_rel};
}

GemmCheck CheckGemm(const std::vector<GemmSample>& samples, const GemmTolerance& tol) {
  GemmCheck c;
  c.samples = static_cast<int>(samples.size());
  for (const GemmSample& s : samples) {
    double bound = tol.out_rel * std::fabs(s.ref) + tol.acc_rel * std::fabs(s.abs_sum);
    if (bound <= 0) bound = 1e-30;
    double err = std::fabs(static_cast<double>(s.got) - s.ref);
    bool bad = !std::isfinite(s.got) || !(err <= bound);
    double ratio = std::isfinite(err) ? err / bound : INFINITY;
    if (ratio > c.worst_ratio || !std::isfinite(ratio)) c.worst_ratio = ratio;
    if (bad) {
      if (c.mismatches == 0) {
        c.first_mismatch = absl::StrFormat("D[%d,%d] = %g, expected %g (tolerance %.3g)", s.row,
                                           s.col, s.got, s.ref, bound);
      }
      ++c.mismatches;
    }
  }
  return c;
}

namespace {

std::optional<Reference> FromValue(const std::optional<SourcedValue>& v, const char* kind,
                                   double fraction) {
  if (!v) return std::nullopt;
  return Reference{v->value, kind, v->source, fraction};
}

}  // namespace

std::string_view GemmKernelName(GemmKernel k) {
  switch (k) {
    case GemmKernel::kCublasLt: return "cublasLt";
    case GemmKernel::kWgmmaSm90: return "gpunode-wgmma-sm90";
    case GemmKernel::kWmma: return "gpunode-wmma";
    case GemmKernel::kWmmaSm75: return "gpunode-wmma-sm75";
    case GemmKernel::kSimt: return "gpunode-simt";
  }
  return "?";
}

double OwnKernelFraction(GemmKernel k, GemmDtype dtype, int cc_major, std::string_view reference_kind) {
  const bool measured = reference_kind == "measured";
  switch (k) {
    case GemmKernel::kWgmmaSm90:
      // H200, sustained: bf16 656-660 TFLOP/s = 0.83 of the measured 790 (0.67 of a 989 datasheet
      // peak); fp16 619-632 = 0.63-0.64 of the 990 datasheet peak (random fp16 inputs draw more
      // power than bf16 under the 700 W cap: cuBLASLt's fp16 is slower too).
      if (dtype == GemmDtype::kFp16) return measured ? 0.73 : 0.58;
      return measured ? 0.77 : 0.61;
    case GemmKernel::kWmma:
      // H200: 205 TFLOP/s = 0.26 of 790 (0.21 of 989). Not measured off Hopper: a floor.
      if (cc_major == 9) return measured ? 0.24 : 0.19;
      return 0.15;
    case GemmKernel::kWmmaSm75:
      // Not measured on a T4 (none is lent here): the uncalibrated sanity floor, as for kWmma off
      // Hopper. scripts/gpu-proof-bench-turing.sh measures it JIT-compiled on an H200.
      return 0.15;
    case GemmKernel::kSimt:
    case GemmKernel::kCublasLt:
      break;
  }
  return 0.15;
}

std::optional<Reference> GemmReference(const ModelCeilings* model, GemmDtype dtype, GemmKernel kernel,
                                       int cc_major) {
  if (model == nullptr) return std::nullopt;
  std::optional<Reference> ref;
  switch (dtype) {
    case GemmDtype::kBf16:
      ref = FromValue(model->measured_bf16_tflops, "measured", kGemmMeasuredFraction);
      if (!ref) ref = FromValue(model->bf16_tflops, "datasheet", kGemmDatasheetFraction);
      break;
    case GemmDtype::kFp16:
      ref = FromValue(model->measured_fp16_tflops, "measured", kGemmMeasuredFraction);
      if (!ref) ref = FromValue(model->fp16_tflops, "datasheet", kGemmDatasheetFraction);
      break;
    case GemmDtype::kFp32:
      ref = FromValue(model->measured_fp32_tflops, "measured", kGemmMeasuredFraction);
      if (!ref) ref = FromValue(model->fp32_tflops, "datasheet", kGemmFp32DatasheetFraction);
      break;
  }
  if (ref && kernel != GemmKernel::kCublasLt) ref->fraction = OwnKernelFraction(kernel, dtype, cc_major, ref->kind);
  return ref;
}

std::optional<Reference> HbmReference(const ModelCeilings* model) {
  if (model == nullptr) return std::nullopt;
  if (auto r = FromValue(model->measured_copy_gbps, "measured", kHbmMeasuredFraction)) return r;
  return FromValue(model->memory_gbps, "datasheet", kHbmDatasheetFraction);
}

double PcieTheoreticalGBps(unsigned gen, unsigned width) {
  double per_lane = 0;  // GB/s per lane per direction after encoding
  switch (gen) {
    case 1: per_lane = 2.5 * 8 / 10 / 8; break;
    case 2: per_lane = 5.0 * 8 / 10 / 8; break;
    case 3: per_lane = 8.0 * 128 / 130 / 8; break;
    case 4: per_lane = 16.0 * 128 / 130 / 8; break;
    case 5: per_lane = 32.0 * 128 / 130 / 8; break;
    case 6: per_lane = 64.0 * 242 / 256 / 8; break;
    default: return 0;
  }
  return per_lane * width;
}

std::optional<Reference> PcieReference(const ModelCeilings* model, std::optional<unsigned> link_gen_max,
                                       std::optional<unsigned> link_width_max) {
  std::optional<unsigned> gen = link_gen_max;
  std::optional<unsigned> width = link_width_max;
  std::string source = "NVML maximum link generation/width";
  if (model != nullptr && model->pcie_gen) {
    unsigned mg = static_cast<unsigned>(model->pcie_gen->value);
    gen = gen ? std::min(*gen, mg) : mg;
    if (model->pcie_width) width = static_cast<unsigned>(model->pcie_width->value);
    source = absl::StrCat("min(model ", model->id, " Gen", mg, ", slot max",
                          link_gen_max ? absl::StrCat(" Gen", *link_gen_max) : " unknown", ")");
  }
  if (!gen || !width || PcieTheoreticalGBps(*gen, *width) <= 0) return std::nullopt;
  return Reference{PcieTheoreticalGBps(*gen, *width), absl::StrCat("link Gen", *gen, " x", *width),
                   source, kPcieFraction};
}

Verdict Judge(double value, const std::optional<Reference>& ref) {
  if (!ref || ref->value <= 0) return Verdict::kNoCeiling;
  return value >= ref->fraction * ref->value ? Verdict::kPass : Verdict::kFail;
}

std::vector<std::string> ClockEventReasonNames(uint64_t mask) {
  static constexpr std::pair<uint64_t, const char*> kNames[] = {
      {0x1, "GpuIdle"},           {0x2, "ApplicationsClocksSetting"}, {0x4, "SwPowerCap"},
      {0x8, "HwSlowdown"},        {0x10, "SyncBoost"},                {0x20, "SwThermalSlowdown"},
      {0x40, "HwThermalSlowdown"}, {0x80, "HwPowerBrakeSlowdown"},    {0x100, "DisplayClockSetting"}};
  std::vector<std::string> out;
  uint64_t known = 0;
  for (const auto& [bit, name] : kNames) {
    known |= bit;
    if (mask & bit) out.emplace_back(name);
  }
  if (uint64_t rest = mask & ~known) out.push_back(absl::StrFormat("0x%x", rest));
  return out;
}

bool IsPerformanceLimiting(uint64_t mask) { return (mask & (0x4 | 0x8 | 0x20 | 0x40 | 0x80)) != 0; }

std::optional<std::string_view> EmbeddedPtx() { return FindEmbedded("bench-ptx", "bench_kernels.ptx"); }
std::optional<std::string_view> EmbeddedPtxSm75() {
  return FindEmbedded("bench-ptx-sm75", "bench_kernels_sm75.ptx");
}
std::optional<std::string_view> EmbeddedPtxSm90a() {
  return FindEmbedded("bench-ptx-sm90a", "bench_kernels_sm90a.ptx");
}

Status KernelsAvailable(std::optional<std::string_view> ptx) {
  if (ptx && ptx->find(".entry") != std::string_view::npos) return absl::OkStatus();
  return absl::FailedPreconditionError(
      "bench is unavailable: this gpunode was built without its GPU kernels (PTX): the build "
      "embeds kernels/bench_kernels.ptx; if it is missing or empty, run scripts/gen-ptx.sh where "
      "nvcc exists and rebuild.");
}

absl::string_view PtxTargetName(PtxTarget t) {
  return t == PtxTarget::kCompute75 ? "compute_75" : "compute_80";
}

Status ValidatePtxChoice(absl::string_view choice) {
  if (choice == "auto" || choice == "compute_75" || choice == "compute_80") return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("--ptx: unknown PTX target '", choice, "' (choose from auto, compute_75, compute_80)"));
}

StatusOr<PtxTarget> ChoosePtx(int cc_major, int cc_minor, absl::string_view choice) {
  GPUNODE_RETURN_IF_ERROR(ValidatePtxChoice(choice));
  const int cc = cc_major * 10 + cc_minor;
  if (cc < 75) {
    return absl::FailedPreconditionError(absl::StrCat(
        "bench kernels need compute capability 7.5 (Turing) or newer; this GPU is ", cc_major, ".", cc_minor));
  }
  if (choice == "compute_75") return PtxTarget::kCompute75;
  if (cc < 80) {
    if (choice == "compute_80") {
      return absl::FailedPreconditionError(absl::StrCat(
          "--ptx compute_80: this GPU is compute capability ", cc_major, ".", cc_minor,
          "; compute_80 PTX (bf16 tensor cores, cp.async) needs 8.0 or newer (use auto or compute_75)"));
    }
    return PtxTarget::kCompute75;
  }
  return PtxTarget::kCompute80;
}

std::string GemmUnsupportedReason(GemmDtype dtype, int cc_major, int cc_minor, PtxTarget ptx, bool own_kernel) {
  if (dtype != GemmDtype::kBf16) return "";
  if (cc_major < 8) {
    return absl::StrCat("not on this GPU: bf16 tensor cores start with compute capability 8.0 (this GPU is ",
                        cc_major, ".", cc_minor, ")");
  }
  if (own_kernel && !PtxHasBf16(ptx)) {
    return absl::StrCat("not in the ", PtxTargetName(ptx), " PTX (--ptx ", PtxTargetName(ptx),
                        "): Turing has no bf16 tensor cores");
  }
  return "";
}

std::string NormalizeBusId(absl::string_view bus_id) {
  std::string s = absl::AsciiStrToLower(absl::StripAsciiWhitespace(bus_id));
  size_t colon = s.find(':');
  if (colon == std::string::npos || s.find(':', colon + 1) == std::string::npos) return s;
  std::string domain = s.substr(0, colon);
  while (domain.size() > 4 && domain[0] == '0') domain.erase(0, 1);
  while (domain.size() < 4) domain.insert(0, "0");
  return domain + s.substr(colon);
}

}  // namespace gpunode::bench
