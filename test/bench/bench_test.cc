// Unit tests of gpunode bench's pure parts: the ceilings table, verdicts, the GEMM result checker,
// option parsing, and the "no libcuda" / "no kernels" paths. No GPU needed.
#include <cmath>
#include <cstdlib>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/bench/bench.h"
#include "src/bench/ceilings.h"
#include "src/bench/cuda_driver.h"
#include "src/bench/report.h"
#include "test/testing/status_matchers.h"

namespace gpunode::bench {
namespace {

using ::testing::HasSubstr;

TEST(CeilingsTest, BuiltinTableLoadsAndEveryValueIsSourced) {
  auto table = BuiltinCeilings();
  ASSERT_OK(table) << table.status();
  EXPECT_GE(table->models.size(), 10u);
  for (const ModelCeilings& m : table->models) {
    for (const auto* v : {&m.bf16_tflops, &m.fp16_tflops, &m.fp32_tflops, &m.memory_gbps, &m.pcie_gen,
                          &m.pcie_width, &m.measured_bf16_tflops, &m.measured_copy_gbps}) {
      if (!*v) continue;
      EXPECT_FALSE((*v)->source.empty()) << m.id;
      EXPECT_THAT((std::vector<std::string>{"high", "medium", "low"}), ::testing::Contains((*v)->confidence)) << m.id;
    }
    EXPECT_TRUE(m.memory_gbps) << m.id << " lacks a memory bandwidth";
    // Every model but the A10G carries the basic datasheet ceilings; the A10G has no public datasheet
    // for fp32, tensor or PCIe figures (data/gpu-ceilings.yaml says why), so those stay out.
    if (m.id == "a10g") {
      EXPECT_FALSE(m.fp32_tflops || m.fp16_tflops || m.bf16_tflops || m.pcie_gen) << "a10g: unsourced figure";
    } else {
      EXPECT_TRUE(m.fp32_tflops && m.pcie_gen && m.pcie_width) << m.id << " lacks a basic ceiling";
    }
  }
}

TEST(CeilingsTest, RequiredModelsArePresent) {
  auto table = BuiltinCeilings();
  ASSERT_OK(table);
  for (const char* name : {"NVIDIA H200", "NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe", "NVIDIA A100-SXM4-40GB",
                           "NVIDIA A100-SXM4-80GB", "NVIDIA L40S", "NVIDIA L4", "Tesla T4", "NVIDIA B200",
                           // issue 33: the GPUs of hosts without Kubernetes
                           "NVIDIA A10", "NVIDIA A10G", "NVIDIA H100 NVL", "NVIDIA A100-PCIE-40GB",
                           "NVIDIA A100 80GB PCIe"}) {
    EXPECT_NE(table->Find(name), nullptr) << name;
  }
}

TEST(CeilingsTest, LookupByNvmlNameIsExactButCaseInsensitive) {
  auto table = BuiltinCeilings();
  ASSERT_OK(table);
  const ModelCeilings* h200 = table->Find("NVIDIA H200");
  ASSERT_NE(h200, nullptr);
  EXPECT_EQ(h200->id, "h200-sxm");
  ASSERT_TRUE(h200->measured_bf16_tflops);
  EXPECT_DOUBLE_EQ(h200->measured_bf16_tflops->value, 790);
  ASSERT_TRUE(h200->measured_copy_gbps);
  EXPECT_DOUBLE_EQ(h200->measured_copy_gbps->value, 4300);
  EXPECT_EQ(table->Find("  nvidia h200 "), h200);
  EXPECT_EQ(table->Find("NVIDIA H200 NVL")->id, "h200-nvl");  // not the SXM part
  EXPECT_EQ(table->Find("NVIDIA H100 80GB HBM3")->id, "h100-sxm");
  EXPECT_EQ(table->Find("NVIDIA GeForce RTX 4090"), nullptr);
  EXPECT_FALSE(table->Find("Tesla T4")->bf16_tflops);  // Turing has no bf16
}

TEST(CeilingsTest, RejectsAValueWithoutSource) {
  auto t = ParseCeilings(R"(models:
  - id: x
    names: ["X"]
    bf16_tflops: {value: 10, confidence: high}
)");
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("model x: bf16_tflops: missing source"));
}

TEST(CeilingsTest, RejectsANameClaimedTwiceAndBadYaml) {
  auto t = ParseCeilings(R"(models:
  - {id: a, names: ["X"]}
  - {id: b, names: ["x"]}
)");
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("belongs to two models"));
  EXPECT_FALSE(ParseCeilings("models: [").ok());
  EXPECT_FALSE(ParseCeilings("other: 1").ok());
}

TEST(VerdictTest, GemmUsesMeasuredCeilingWhenKnown) {
  auto table = BuiltinCeilings();
  const ModelCeilings* h200 = table->Find("NVIDIA H200");
  auto ref = GemmReference(h200, GemmDtype::kBf16, GemmKernel::kCublasLt, 9);
  ASSERT_TRUE(ref);
  EXPECT_EQ(ref->kind, "measured");
  EXPECT_DOUBLE_EQ(ref->value, 790);
  EXPECT_EQ(Judge(0.80 * 790, ref), Verdict::kPass);
  EXPECT_EQ(Judge(0.79 * 790, ref), Verdict::kFail);
  // fp16 has no measured ceiling: datasheet at 0.60.
  auto fp16 = GemmReference(h200, GemmDtype::kFp16, GemmKernel::kCublasLt, 9);
  EXPECT_EQ(fp16->kind, "datasheet");
  EXPECT_DOUBLE_EQ(fp16->fraction, kGemmDatasheetFraction);
  // The portable kernel on Hopper: calibrated to its measured 0.26 of 790 (205 TFLOP/s).
  auto own = GemmReference(h200, GemmDtype::kBf16, GemmKernel::kWmma, 9);
  EXPECT_EQ(Judge(205, own), Verdict::kPass);
  EXPECT_EQ(Judge(0.9 * 205, own), Verdict::kFail);
}

// Our kernels' thresholds follow what each reached on a healthy H200 (docs/bench.md, "Verdicts"):
// the healthy figure passes, the same GPU 10 % slower fails, against either reference kind.
TEST(VerdictTest, OwnKernelThresholdsCatchATenPercentSlowGpu) {
  auto table = BuiltinCeilings();
  const ModelCeilings* h200 = table->Find("NVIDIA H200");
  const ModelCeilings* h100 = table->Find("NVIDIA H100 80GB HBM3");
  ASSERT_NE(h200, nullptr);
  ASSERT_NE(h100, nullptr);
  struct Case {
    const ModelCeilings* model;
    GemmDtype dtype;
    GemmKernel kernel;
    double healthy;  // TFLOP/s, sustained, measured on the H200 (the H100 has the same tensor rate)
  };
  // H200 (docs/examples/h200/bench-sm90/): bf16 656.2-660.2, fp16 618.6-631.7 sustained.
  for (const Case& c : {Case{h200, GemmDtype::kBf16, GemmKernel::kWgmmaSm90, 656.2},
                        Case{h200, GemmDtype::kFp16, GemmKernel::kWgmmaSm90, 618.6},
                        Case{h100, GemmDtype::kBf16, GemmKernel::kWgmmaSm90, 656.2},
                        Case{h200, GemmDtype::kBf16, GemmKernel::kWmma, 204.7},
                        Case{h100, GemmDtype::kBf16, GemmKernel::kWmma, 204.7}}) {
    auto ref = GemmReference(c.model, c.dtype, c.kernel, 9);
    ASSERT_TRUE(ref);
    SCOPED_TRACE(std::string(GemmKernelName(c.kernel)) + " vs " + ref->kind + " " + std::to_string(ref->value));
    EXPECT_EQ(Judge(c.healthy, ref), Verdict::kPass);
    EXPECT_EQ(Judge(0.9 * c.healthy, ref), Verdict::kFail);
  }
  // Off Hopper the portable kernel has no calibration yet: the 0.15 floor.
  EXPECT_DOUBLE_EQ(OwnKernelFraction(GemmKernel::kWmma, GemmDtype::kBf16, 8, "datasheet"), 0.15);
  EXPECT_EQ(GemmKernelName(GemmKernel::kWgmmaSm90), "gpunode-wgmma-sm90");
}

// The T4's verdicts from the real table (Tesla T4 datasheet: 65 TFLOPS fp16 mixed precision, 8.1
// fp32, 320 GB/s, PCIe Gen3 x16; no bf16). The fractions are docs/bench.md's "Verdicts".
TEST(VerdictTest, TuringT4AgainstItsDatasheet) {
  auto table = BuiltinCeilings();
  ASSERT_OK(table);
  const ModelCeilings* t4 = table->Find("Tesla T4");
  ASSERT_NE(t4, nullptr);
  EXPECT_EQ(t4->id, "t4");

  // fp16 through cuBLASLt: 0.60 of the dense 65 = 39 TFLOP/s.
  auto fp16 = GemmReference(t4, GemmDtype::kFp16, GemmKernel::kCublasLt, 7);
  ASSERT_TRUE(fp16);
  EXPECT_DOUBLE_EQ(fp16->value, 65);
  EXPECT_EQ(fp16->kind, "datasheet");
  EXPECT_THAT(fp16->source, HasSubstr("t4-tensor-core-datasheet"));
  EXPECT_DOUBLE_EQ(fp16->fraction, kGemmDatasheetFraction);
  EXPECT_EQ(Judge(55, fp16), Verdict::kPass);   // 85 % of 65
  EXPECT_EQ(Judge(39, fp16), Verdict::kPass);   // exactly the pass mark
  EXPECT_EQ(Judge(38.9, fp16), Verdict::kFail);
  EXPECT_EQ(Judge(30, fp16), Verdict::kFail);   // a T4 stuck at low clocks

  // Our Turing kernel (compute_75 PTX): uncalibrated floor 0.15 of 65 = 9.75.
  auto own = GemmReference(t4, GemmDtype::kFp16, GemmKernel::kWmmaSm75, 7);
  ASSERT_TRUE(own);
  EXPECT_DOUBLE_EQ(own->fraction, 0.15);
  EXPECT_EQ(Judge(9.75, own), Verdict::kPass);
  EXPECT_EQ(Judge(9.7, own), Verdict::kFail);
  EXPECT_EQ(GemmKernelName(GemmKernel::kWmmaSm75), "gpunode-wmma-sm75");

  // No bf16 on Turing: no ceiling, and the compute_75 PTX has no bf16 kernel.
  EXPECT_FALSE(GemmReference(t4, GemmDtype::kBf16, GemmKernel::kCublasLt, 7));
  EXPECT_FALSE(PtxHasBf16(PtxTarget::kCompute75));
  EXPECT_TRUE(PtxHasBf16(PtxTarget::kCompute80));

  // fp32 (SIMT): 0.50 of 8.1 through cuBLASLt, the 0.15 floor for ours.
  auto fp32 = GemmReference(t4, GemmDtype::kFp32, GemmKernel::kCublasLt, 7);
  EXPECT_EQ(Judge(4.05, fp32), Verdict::kPass);
  EXPECT_EQ(Judge(4.0, fp32), Verdict::kFail);

  // Memory: 0.70 of 320 GB/s = 224.
  auto hbm = HbmReference(t4);
  ASSERT_TRUE(hbm);
  EXPECT_DOUBLE_EQ(hbm->value, 320);
  EXPECT_EQ(hbm->kind, "datasheet");
  EXPECT_EQ(Judge(300, hbm), Verdict::kPass);
  EXPECT_EQ(Judge(224, hbm), Verdict::kPass);
  EXPECT_EQ(Judge(200, hbm), Verdict::kFail);

  // PCIe: a Gen3 card in a Gen4 slot is judged against Gen3 x16 = 15.75 GB/s, pass at 11.0.
  auto pcie = PcieReference(t4, 4u, 16u);
  ASSERT_TRUE(pcie);
  EXPECT_EQ(pcie->kind, "link Gen3 x16");
  EXPECT_NEAR(pcie->value, 15.75, 0.01);
  EXPECT_EQ(Judge(12.3, pcie), Verdict::kPass);
  EXPECT_EQ(Judge(10.5, pcie), Verdict::kFail);
  // Trained down to x8 in the slot does not lower the reference: the model's width counts.
  EXPECT_NEAR(PcieReference(t4, 3u, 8u)->value, 15.75, 0.01);
}

// The A10G has only a memory ceiling: GEMM reports numbers without one, PCIe uses the slot.
TEST(VerdictTest, A10gHasOnlyItsSourcedCeilings) {
  auto table = BuiltinCeilings();
  ASSERT_OK(table);
  const ModelCeilings* a10g = table->Find("NVIDIA A10G");
  ASSERT_NE(a10g, nullptr);
  EXPECT_FALSE(GemmReference(a10g, GemmDtype::kFp16, GemmKernel::kCublasLt, 8));
  EXPECT_DOUBLE_EQ(HbmReference(a10g)->value, 600);
  auto pcie = PcieReference(a10g, 4u, 16u);
  ASSERT_TRUE(pcie);
  EXPECT_EQ(pcie->kind, "link Gen4 x16");
  EXPECT_EQ(pcie->source, "NVML maximum link generation/width");
  const ModelCeilings* a10 = table->Find("NVIDIA A10");
  ASSERT_NE(a10, nullptr);
  EXPECT_NE(a10, a10g);
  EXPECT_DOUBLE_EQ(a10->fp16_tflops->value, 125);
  EXPECT_DOUBLE_EQ(table->Find("NVIDIA H100 NVL")->memory_gbps->value, 3900);
}

TEST(VerdictTest, UnknownModelHasNoCeiling) {
  EXPECT_FALSE(GemmReference(nullptr, GemmDtype::kBf16, GemmKernel::kCublasLt, 9));
  EXPECT_FALSE(HbmReference(nullptr));
  EXPECT_EQ(Judge(123, std::nullopt), Verdict::kNoCeiling);
  // The PCIe link still gives a reference for an unknown model.
  auto p = PcieReference(nullptr, 4u, 16u);
  ASSERT_TRUE(p);
  EXPECT_NEAR(p->value, 31.5, 0.1);
}

TEST(VerdictTest, HbmAndPcieThresholds) {
  auto table = BuiltinCeilings();
  const ModelCeilings* h200 = table->Find("NVIDIA H200");
  auto hbm = HbmReference(h200);
  ASSERT_TRUE(hbm);
  EXPECT_DOUBLE_EQ(hbm->value, 4300);
  EXPECT_EQ(Judge(3500, hbm), Verdict::kPass);
  EXPECT_EQ(Judge(3000, hbm), Verdict::kFail);
  auto h100 = HbmReference(table->Find("NVIDIA H100 80GB HBM3"));
  EXPECT_EQ(h100->kind, "datasheet");
  EXPECT_DOUBLE_EQ(h100->fraction, kHbmDatasheetFraction);

  EXPECT_NEAR(PcieTheoreticalGBps(5, 16), 63.0, 0.05);
  EXPECT_NEAR(PcieTheoreticalGBps(3, 16), 15.75, 0.05);
  EXPECT_NEAR(PcieTheoreticalGBps(1, 1), 0.25, 1e-9);
  EXPECT_EQ(PcieTheoreticalGBps(9, 16), 0);
  // A Gen5 card in a Gen4 slot is judged against Gen4; the model's width wins.
  auto pcie = PcieReference(h200, 4u, 16u);
  EXPECT_NEAR(pcie->value, 31.5, 0.1);
  EXPECT_EQ(pcie->kind, "link Gen4 x16");
  auto full = PcieReference(h200, 5u, 16u);
  EXPECT_EQ(Judge(52, full), Verdict::kPass);
  EXPECT_EQ(Judge(40, full), Verdict::kFail);
  EXPECT_FALSE(PcieReference(nullptr, std::nullopt, std::nullopt));
}

std::vector<GemmSample> GoodSamples() {
  std::vector<GemmSample> s;
  for (int i = 0; i < 64; ++i) {
    float ref = std::sin(i) * 30.0f;
    float got = ref * (1.0f + 1.0f / 512);  // within bf16 output rounding
    s.push_back({i, 2 * i, ref, 2000.0f, got});
  }
  return s;
}

TEST(GemmCheckTest, AcceptsResultsWithinBf16Rounding) {
  GemmCheck c = CheckGemm(GoodSamples(), ToleranceFor(GemmDtype::kBf16, GemmDtype::kBf16));
  EXPECT_TRUE(c.ok());
  EXPECT_EQ(c.mismatches, 0);
  EXPECT_LE(c.worst_ratio, 1.0);
}

TEST(GemmCheckTest, AWrongResultFails) {
  auto s = GoodSamples();
  s[17].got = s[17].ref + 8.0f;  // e.g. a flipped high mantissa bit
  GemmCheck c = CheckGemm(s, ToleranceFor(GemmDtype::kBf16, GemmDtype::kBf16));
  EXPECT_FALSE(c.ok());
  EXPECT_EQ(c.mismatches, 1);
  EXPECT_THAT(c.first_mismatch, HasSubstr("D[17,34]"));
}

TEST(GemmCheckTest, NanAndZerosFail) {
  auto s = GoodSamples();
  s[3].got = std::nanf("");
  EXPECT_FALSE(CheckGemm(s, ToleranceFor(GemmDtype::kFp16, GemmDtype::kFp16)).ok());
  auto z = GoodSamples();
  for (auto& e : z) e.got = 0;  // a card that writes nothing
  EXPECT_GT(CheckGemm(z, ToleranceFor(GemmDtype::kBf16, GemmDtype::kFp32)).mismatches, 50);
  EXPECT_FALSE(CheckGemm({}, ToleranceFor(GemmDtype::kBf16, GemmDtype::kBf16)).ok());  // nothing checked
}

TEST(GemmCheckTest, Fp32ToleranceIsTighterThanBf16) {
  auto f32 = ToleranceFor(GemmDtype::kFp32, GemmDtype::kFp32);
  auto bf = ToleranceFor(GemmDtype::kBf16, GemmDtype::kBf16);
  EXPECT_LT(f32.out_rel, bf.out_rel);
  EXPECT_LT(f32.acc_rel, bf.acc_rel);
  auto s = GoodSamples();  // off by 2^-9 relative: fine for bf16, wrong for fp32
  EXPECT_FALSE(CheckGemm(s, f32).ok());
}

TEST(OptionsTest, ParsesTests) {
  auto all = ParseTests("all");
  ASSERT_OK(all);
  EXPECT_EQ(all->size(), 5u);
  auto two = ParseTests("hbm, gemm,hbm");
  ASSERT_OK(two);
  EXPECT_EQ(*two, (std::vector<TestKind>{TestKind::kGemm, TestKind::kHbm}));  // canonical order, no dups
  auto bad = ParseTests("gemm,flops");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("--tests: unknown test 'flops'"));
}

TEST(OptionsTest, ParsesGpus) {
  auto all = ParseGpus("all");
  ASSERT_OK(all);
  EXPECT_FALSE(all->has_value());
  auto some = ParseGpus("0,2,2");
  ASSERT_OK(some);
  EXPECT_EQ(**some, (std::vector<unsigned>{0, 2}));
  for (const char* bad : {"x", "-1", "0,", "1.5", "99999"}) {
    auto r = ParseGpus(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_THAT(std::string(r.status().message()), HasSubstr("--gpus")) << bad;
  }
}

TEST(OptionsTest, ValidatesDuration) {
  EXPECT_OK(ValidateDuration(1.5));
  for (double bad : {-1.0, 0.0, 601.0, std::nan("")}) {
    Status s = ValidateDuration(bad);
    ASSERT_FALSE(s.ok());
    EXPECT_THAT(std::string(s.message()), HasSubstr("--duration"));
  }
}

TEST(KernelsTest, NoPtxMeansBenchIsUnavailableWithAClearMessage) {
  Status s = KernelsAvailable(std::nullopt);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), HasSubstr("built without its GPU kernels"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("scripts/gen-ptx.sh"));
  EXPECT_FALSE(KernelsAvailable(std::string_view("not ptx")).ok());
  EXPECT_OK(KernelsAvailable(std::string_view(".visible .entry k()")));
}

TEST(KernelsTest, HopperPtxIsEmbeddedForSm90a) {
  auto ptx = EmbeddedPtxSm90a();
  ASSERT_TRUE(ptx.has_value());
  EXPECT_NE(ptx->find(".target sm_90a"), std::string_view::npos);
  for (const char* k : {"gpunode_gemm_bf16_sm90", "gpunode_gemm_f16_sm90"}) {
    EXPECT_NE(ptx->find(std::string(".entry ") + k + "("), std::string_view::npos) << k;
  }
  EXPECT_NE(ptx->find("wgmma.mma_async"), std::string_view::npos);
  EXPECT_NE(ptx->find("cp.async.bulk.tensor"), std::string_view::npos);
}

// Compute capability picks the PTX: 7.5 (Turing) the compute_75 one, 8.0 and newer compute_80;
// --ptx compute_75 forces the Turing kernels on any newer GPU.
TEST(KernelsTest, ComputeCapabilityPicksThePtx) {
  EXPECT_EQ(*ChoosePtx(7, 5, "auto"), PtxTarget::kCompute75);
  EXPECT_EQ(*ChoosePtx(8, 0, "auto"), PtxTarget::kCompute80);
  EXPECT_EQ(*ChoosePtx(8, 6, "auto"), PtxTarget::kCompute80);
  EXPECT_EQ(*ChoosePtx(9, 0, "auto"), PtxTarget::kCompute80);
  EXPECT_EQ(*ChoosePtx(12, 0, "auto"), PtxTarget::kCompute80);
  EXPECT_EQ(*ChoosePtx(9, 0, "compute_75"), PtxTarget::kCompute75);
  EXPECT_EQ(*ChoosePtx(7, 5, "compute_75"), PtxTarget::kCompute75);
  EXPECT_EQ(*ChoosePtx(9, 0, "compute_80"), PtxTarget::kCompute80);
  EXPECT_EQ(PtxTargetName(PtxTarget::kCompute75), "compute_75");

  auto too_new = ChoosePtx(7, 5, "compute_80");
  EXPECT_EQ(too_new.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(too_new.status().message()), HasSubstr("--ptx compute_80: this GPU is compute capability 7.5"));
  auto volta = ChoosePtx(7, 0, "auto");
  EXPECT_EQ(volta.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(volta.status().message()), HasSubstr("7.5 (Turing) or newer; this GPU is 7.0"));
  EXPECT_FALSE(ChoosePtx(7, 0, "compute_75").ok());
  auto bad = ChoosePtx(9, 0, "sm_75");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("--ptx: unknown PTX target 'sm_75'"));
  EXPECT_OK(ValidatePtxChoice("auto"));
}

// What a 7.5 GPU reports for bf16: not a failure, a reason. fp16 and fp32 run everywhere.
TEST(KernelsTest, Bf16OnTuringIsNotOnThisGpu) {
  for (bool own : {true, false}) {
    EXPECT_EQ(GemmUnsupportedReason(GemmDtype::kBf16, 7, 5, PtxTarget::kCompute75, own),
              "not on this GPU: bf16 tensor cores start with compute capability 8.0 (this GPU is 7.5)");
    EXPECT_EQ(GemmUnsupportedReason(GemmDtype::kFp16, 7, 5, PtxTarget::kCompute75, own), "");
    EXPECT_EQ(GemmUnsupportedReason(GemmDtype::kFp32, 7, 5, PtxTarget::kCompute75, own), "");
  }
  // Forced compute_75 on a Hopper: our bf16 kernel is not in that PTX, cuBLASLt's bf16 still runs.
  EXPECT_THAT(GemmUnsupportedReason(GemmDtype::kBf16, 9, 0, PtxTarget::kCompute75, true),
              HasSubstr("not in the compute_75 PTX (--ptx compute_75)"));
  EXPECT_EQ(GemmUnsupportedReason(GemmDtype::kBf16, 9, 0, PtxTarget::kCompute75, false), "");
  EXPECT_EQ(GemmUnsupportedReason(GemmDtype::kBf16, 8, 0, PtxTarget::kCompute80, true), "");
}

// The committed compute_75 PTX: every kernel bench launches but the bf16 GEMM, no sm_80 instruction.
TEST(KernelsTest, TuringPtxIsEmbeddedWithoutBf16OrCpAsync) {
#ifdef GPUNODE_TEST_EXPECT_PTX
  auto ptx = EmbeddedPtxSm75();
  ASSERT_TRUE(ptx.has_value());
  EXPECT_OK(KernelsAvailable(ptx));
  EXPECT_NE(ptx->find(".target sm_75"), std::string_view::npos);
  for (const char* k : {"gpunode_fill_uniform", "gpunode_gemm_check", "gpunode_gemm_f16", "gpunode_gemm_f32",
                        "gpunode_triad", "gpunode_memtest_write", "gpunode_memtest_verify"}) {
    EXPECT_NE(ptx->find(std::string(".entry ") + k + "("), std::string_view::npos) << k;
  }
  EXPECT_EQ(ptx->find(".entry gpunode_gemm_bf16("), std::string_view::npos);
  EXPECT_EQ(ptx->find("cp.async"), std::string_view::npos);
  EXPECT_NE(ptx->find("wmma.mma.sync.aligned.row.col.m16n16k16.f32.f32"), std::string_view::npos);
  // The compute_80 PTX keeps its bf16 kernel and cp.async pipeline.
  EXPECT_NE(EmbeddedPtx()->find(".entry gpunode_gemm_bf16("), std::string_view::npos);
  EXPECT_NE(EmbeddedPtx()->find("cp.async"), std::string_view::npos);
#else
  EXPECT_FALSE(EmbeddedPtxSm75().has_value());
#endif
}

TEST(KernelsTest, EmbeddedPtxMatchesTheBuild) {
#ifdef GPUNODE_TEST_EXPECT_PTX
  ASSERT_TRUE(EmbeddedPtx().has_value());
  EXPECT_OK(KernelsAvailable(EmbeddedPtx()));
  for (const char* k : {"gpunode_gemm_bf16", "gpunode_gemm_check", "gpunode_triad", "gpunode_memtest_verify"}) {
    EXPECT_NE(EmbeddedPtx()->find(k), std::string_view::npos) << k;
  }
#else
  EXPECT_FALSE(EmbeddedPtx().has_value());
#endif
}

TEST(CudaDriverTest, MissingLibraryIsAClearError) {
  auto drv = CudaDriver::Open("/nonexistent/libcuda.so.1");
  ASSERT_FALSE(drv.ok());
  EXPECT_EQ(drv.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(drv.status().message()), HasSubstr("load /nonexistent/libcuda.so.1"));
}

TEST(CudaDriverTest, SimulatedLibraryIsNotAFullDriver) {
  const char* sim = std::getenv("GPUNODE_SIM_LIBRARY");
  if (sim == nullptr) GTEST_SKIP() << "GPUNODE_SIM_LIBRARY not set";
  auto drv = CudaDriver::Open(sim);
  ASSERT_FALSE(drv.ok());
  EXPECT_EQ(drv.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(drv.status().message()), HasSubstr("not a full CUDA driver"));
}

TEST(ClockEventsTest, NamesBitsAndFlagsLimits) {
  EXPECT_THAT(ClockEventReasonNames(0x1 | 0x4), ::testing::ElementsAre("GpuIdle", "SwPowerCap"));
  EXPECT_THAT(ClockEventReasonNames(0x1000), ::testing::ElementsAre("0x1000"));
  EXPECT_TRUE(IsPerformanceLimiting(0x4));
  EXPECT_TRUE(IsPerformanceLimiting(0x40));
  EXPECT_FALSE(IsPerformanceLimiting(0x1 | 0x2));
}

TEST(BusIdTest, NormalizesNvmlAndCudaForms) {
  EXPECT_EQ(NormalizeBusId("00000000:18:00.0"), "0000:18:00.0");
  EXPECT_EQ(NormalizeBusId("0000:9A:00.0"), "0000:9a:00.0");
  EXPECT_EQ(NormalizeBusId("1:02:00.0"), "0001:02:00.0");
}

BenchReport SampleReport() {
  BenchReport r;
  r.hostname = "node1";
  r.options.tests = {TestKind::kGemm};
  r.cuda_driver_version = 13000;
  GpuResult g;
  g.index = 0;
  g.name = "NVIDIA H200";
  g.ceiling_model = "h200-sxm";
  TestResult t;
  t.test = TestKind::kGemm;
  Measurement m{"bf16", "cublasLt 13.0.0", 750, "TFLOP/s"};
  m.reference = Reference{790, "measured", "here", 0.8};
  m.verdict = Verdict::kPass;
  t.measurements.push_back(m);
  t.verdict = Verdict::kPass;
  g.tests.push_back(t);
  r.gpus.push_back(g);
  return r;
}

TEST(ReportTest, RollsUpAndRendersJson) {
  BenchReport r = SampleReport();
  Finalize(r);
  EXPECT_EQ(r.verdict, Verdict::kPass);
  EXPECT_EQ(ExitCode(r), 0);
  auto j = ToJson(r);
  EXPECT_EQ(j["apiVersion"], "gpunode/v1");
  EXPECT_EQ(j["kind"], "BenchReport");
  EXPECT_EQ(j["gpus"][0]["tests"][0]["results"][0]["ceiling"]["passAt"], 632);
  EXPECT_EQ(j["gpus"][0]["tests"][0]["results"][0]["fractionOfCeiling"], 0.949);
  EXPECT_THAT(RenderText(r, false), HasSubstr("verdict: pass"));
  EXPECT_EQ(CardSummary(r)["gpus"][0]["results"]["gemm.bf16"]["value"], 750);

  r.gpus[0].tests[0].verdict = Verdict::kFail;
  Finalize(r);
  EXPECT_EQ(r.verdict, Verdict::kFail);
  EXPECT_EQ(ExitCode(r), 2);
}

// bf16 on Turing is reported as not on this GPU: skipped in its row, ignored by the roll-up.
TEST(ReportTest, UnsupportedBf16IsReportedNotJudged) {
  BenchReport r = SampleReport();
  r.options.ptx = "compute_75";
  r.gpus[0].ptx_target = "compute_75";
  TestResult& t = r.gpus[0].tests[0];
  Measurement u{"bf16", "gpunode", 0, "TFLOP/s"};
  u.verdict = Verdict::kSkipped;
  u.unsupported = true;
  u.detail = "not in the compute_75 PTX (--ptx): Turing has no bf16 tensor cores";
  t.measurements.insert(t.measurements.begin(), u);
  EXPECT_EQ(RollUpTest(t), Verdict::kPass);
  t.verdict = RollUpTest(t);
  Finalize(r);
  EXPECT_EQ(r.verdict, Verdict::kPass);
  EXPECT_EQ(ExitCode(r), 0);
  auto j = ToJson(r);
  EXPECT_EQ(j["options"]["ptx"], "compute_75");
  EXPECT_EQ(j["gpus"][0]["ptxTarget"], "compute_75");
  EXPECT_EQ(j["gpus"][0]["tests"][0]["results"][0]["verdict"], "skipped");
  EXPECT_EQ(j["gpus"][0]["tests"][0]["results"][0]["supported"], false);
  EXPECT_FALSE(j["gpus"][0]["tests"][0]["results"][1].contains("supported"));
  std::string text = RenderText(r, false);
  EXPECT_THAT(text, HasSubstr("Turing has no bf16 tensor cores"));
  // Only unsupported rows: nothing judged, so no-ceiling rather than pass or skipped.
  TestResult only;
  only.measurements.push_back(u);
  EXPECT_EQ(RollUpTest(only), Verdict::kNoCeiling);
  // A real failure beside it still fails.
  t.measurements[1].verdict = Verdict::kFail;
  EXPECT_EQ(RollUpTest(t), Verdict::kFail);
}

TEST(ReportTest, SkippedBusyGpuAndUnknownModel) {
  BenchReport r = SampleReport();
  r.gpus[0].tests[0].verdict = Verdict::kNoCeiling;
  Finalize(r);
  EXPECT_EQ(r.verdict, Verdict::kNoCeiling);
  EXPECT_EQ(ExitCode(r), 0);
  GpuResult busy;
  busy.index = 1;
  busy.skipped = true;
  busy.skip_reason = "busy: 1 compute process(es)";
  r.gpus.push_back(busy);
  Finalize(r);
  EXPECT_EQ(r.verdict, Verdict::kSkipped);
  EXPECT_EQ(ExitCode(r), 1);
  EXPECT_THAT(RenderText(r, false), HasSubstr("busy: 1 compute process"));
}

}  // namespace
}  // namespace gpunode::bench
