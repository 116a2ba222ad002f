// Table-driven cases taken from NVIDIA's published rules (data/compat.yaml cites them):
// Table 3 toolkit drivers, the minor-version floors, the architecture cut-offs, the forward-
// compatibility matrix, and the framework arch lists.
#include "src/compat/engine.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/compat/test_data.h"
#include "test/testing/status_matchers.h"

namespace gpunode::compat {
namespace {

using ::gpunode::compat::testing::BuiltinData;
using ::testing::HasSubstr;

// What the case runs: an image reference, "--cuda X", or a pip requirement.
struct Case {
  std::string name;      // the test's name: reads as a sentence
  std::string workload;  // "image:REF", "cuda:X.Y", "pip:SPEC"
  std::string driver;
  std::vector<std::string> gpus;  // --gpu texts; "cc:5.2" builds a GPU from NVML facts only
  Verdict verdict;
  std::string rule;            // deciding rule id
  std::string text_contains;   // substring of the deciding sentence ("" = not checked)
};

// Short parameter text in test listings (instead of gtest's byte dump).
void PrintTo(const Case& c, std::ostream* os) { *os << c.workload << " on " << c.driver; }

WorkloadSpec MakeWorkload(const std::string& w) {
  const CompatData& d = BuiltinData();
  StatusOr<WorkloadSpec> spec = absl::InvalidArgumentError("bad case");
  if (absl::StartsWith(w, "image:")) spec = WorkloadFromImage(d, w.substr(6));
  if (absl::StartsWith(w, "cuda:")) spec = WorkloadFromCuda(w.substr(5));
  if (absl::StartsWith(w, "pip:")) spec = WorkloadFromPip(d, w.substr(4));
  EXPECT_OK(spec) << spec.status();
  return spec.ok() ? *spec : WorkloadSpec{};
}

NodeTarget MakeTarget(const std::string& driver, const std::vector<std::string>& gpus) {
  NodeTarget t;
  t.origin = "--driver/--gpu";
  if (!driver.empty()) {
    auto v = Version::Parse(driver, "--driver");
    EXPECT_OK(v) << v.status();
    if (v.ok()) t.driver = *v;
  }
  GpuCatalog catalog(BuiltinData());
  for (const std::string& g : gpus) {
    if (absl::StartsWith(g, "cc:")) {
      auto cc = Version::Parse(g.substr(3));
      t.gpus.push_back(catalog.FromNode("Maxwell-or-other GPU", 0, static_cast<int>(cc->major()),
                                        static_cast<int>(cc->minor())));
      continue;
    }
    auto ref = catalog.Lookup(g);
    EXPECT_OK(ref) << ref.status();
    if (ref.ok()) t.gpus.push_back(*ref);
  }
  return t;
}

CompatReport RunCase(const Case& c) {
  return Check(BuiltinData(), MakeWorkload(c.workload), MakeTarget(c.driver, c.gpus));
}

class NvidiaRules : public ::testing::TestWithParam<Case> {};

TEST_P(NvidiaRules, DecidesAsNvidiaDocuments) {
  const Case& c = GetParam();
  CompatReport r = RunCase(c);
  std::string all;
  for (const Finding& f : r.findings) all += "\n  " + f.rule + ": " + f.sentence;
  EXPECT_EQ(VerdictName(r.verdict), VerdictName(c.verdict)) << all;
  EXPECT_EQ(r.decision.rule, c.rule) << all;
  if (!c.text_contains.empty()) {
    EXPECT_THAT(r.decision.sentence, HasSubstr(c.text_contains));
  }
}

const Case kCases[] = {
    // Paired (toolkit) driver, Table 3.
    {"Cuda124OnItsGaDriverIsCompatible", "cuda:12.4", "550.54.14", {"H100"},
     Verdict::kCompatible, "paired-driver", ">= 550.54.14"},
    {"Cuda1241NeedsUpdate1DriverForFullCompat", "cuda:12.4.1", "550.54.14", {"H100"},
     Verdict::kCompatibleWithCaveats, "minor-version-compat", "550.54.15"},
    {"Cuda130OnItsGaDriverIsCompatible", "cuda:13.0.0", "580.65.06", {"H100"},
     Verdict::kCompatible, "paired-driver", ""},
    {"Cuda120OnItsGaDriverIsCompatible", "cuda:12.0", "525.60.13", {"A100"},
     Verdict::kCompatible, "paired-driver", ""},
    {"Cuda1102OnItsOwnDriverIsCompatibleBelowThe11Floor", "cuda:11.0.2", "450.51.05", {"T4"},
     Verdict::kCompatible, "paired-driver", ""},
    {"Cuda102On440IsCompatible", "cuda:10.2", "440.33", {"T4"}, Verdict::kCompatible,
     "paired-driver", ""},
    {"Cuda101On418IsCompatible", "cuda:10.1", "418.39", {"V100"}, Verdict::kCompatible,
     "paired-driver", ""},
    {"NewerDriverRunsOlderCuda", "cuda:12.9", "580.95.05", {"H100"}, Verdict::kCompatible,
     "paired-driver", ""},
    {"Cuda114RunsOnR535", "cuda:11.4", "535.104.05", {"A100 80GB"}, Verdict::kCompatible,
     "paired-driver", ""},
    // A bare branch is that branch (regression #14: `--driver 550` was judged as 550.0 and told
    // to upgrade to R550).
    {"BareBranchOfTheToolkitDriverIsCompatible", "cuda:12.4", "550", {"H100"}, Verdict::kCompatible,
     "paired-branch", "R550 is the branch of the toolkit driver"},
    {"BareNewerBranchIsCompatible", "cuda:12.4", "570", {"H100"}, Verdict::kCompatible, "paired-driver", ""},
    {"BareOlderBranchStaysMinorVersionCompat", "cuda:12.4", "535", {"H100"},
     Verdict::kCompatibleWithCaveats, "minor-version-compat", ""},
    // Minor-version compatibility floors.
    {"Cuda13MinorFloorIs5806506", "cuda:13.0.2", "580.65.06", {"H100"},
     Verdict::kCompatibleWithCaveats, "minor-version-compat", "580.65.06"},
    {"Cuda13BelowFloorIsIncompatible", "cuda:13.1", "580.65.05", {"T4"}, Verdict::kIncompatible,
     "minimum-driver", ">= 580.65.06"},
    {"Cuda12MinorFloorIs5256013", "cuda:12.8", "525.60.13", {"A100"},
     Verdict::kCompatibleWithCaveats, "minor-version-compat", "525.60.13"},
    {"Cuda12BelowFloorIsIncompatible", "cuda:12.8", "525.60.12", {"A100"},
     Verdict::kIncompatible, "minimum-driver", ">= 525.60.13"},
    {"Cuda11MinorFloorIs4508002", "cuda:11.8", "450.80.02", {"T4"},
     Verdict::kCompatibleWithCaveats, "minor-version-compat", "450.80.02"},
    {"Cuda11BelowFloorIsIncompatible", "cuda:11.8", "450.80.01", {"T4"}, Verdict::kIncompatible,
     "minimum-driver", ">= 450.80.02"},
    {"Cuda10HasNoMinorVersionCompat", "cuda:10.2", "418.39", {"T4"}, Verdict::kIncompatible,
     "minimum-driver", "no minor-version compatibility"},
    {"UnreleasedCuda127IsCoveredByR565Banner", "cuda:12.7", "565.57.01", {"L4"},
     Verdict::kCompatible, "branch-max-cuda", ""},
    {"Cuda135WithoutCapturedDriverFallsBackToTheFloor", "cuda:13.5", "620.10", {"H200"},
     Verdict::kCompatibleWithCaveats, "minor-version-compat", ""},
    // Architecture cut-offs per driver branch.
    {"KeplerRunsCuda114OnR470", "cuda:11.4", "470.82.01", {"Tesla K80"}, Verdict::kCompatible,
     "paired-driver", ""},
    {"KeplerIsNotDrivenAfterR470", "cuda:11.8", "535.104.05", {"K80"}, Verdict::kIncompatible,
     "driver-drops-arch", "R470 was the last branch for Kepler"},
    {"KeplerRunsCuda118ThroughMinorCompatOnR470", "cuda:11.8", "470.82.01", {"K80"},
     Verdict::kCompatibleWithCaveats, "minor-version-compat", ""},
    {"VoltaIsNotDrivenAfterR580", "cuda:12.4", "590.44.01", {"V100"}, Verdict::kIncompatible,
     "driver-drops-arch", "R580 was the last branch for Volta"},
    {"PascalIsNotDrivenAfterR580", "cuda:12.4", "595.45.04", {"0x15f8"}, Verdict::kIncompatible,
     "driver-drops-arch", "Pascal"},
    {"MaxwellIsNotDrivenAfterR580", "cuda:12.2", "595.45.04", {"cc:5.2"}, Verdict::kIncompatible,
     "driver-drops-arch", "Maxwell"},
    {"VoltaStillRunsCuda128OnR580", "cuda:12.8", "580.95.05", {"V100"}, Verdict::kCompatible,
     "paired-driver", ""},
    // Architecture cut-offs per toolkit.
    {"Cuda13DropsVolta", "image:nvidia/cuda:13.0.2-base-ubuntu24.04", "580.95.05", {"V100"},
     Verdict::kIncompatible, "toolkit-drops-arch", "CUDA 13 dropped Volta"},
    {"Cuda13DropsPascal", "cuda:13.0", "580.95.05", {"Tesla P40"}, Verdict::kIncompatible,
     "toolkit-drops-arch", "Pascal"},
    {"Cuda13DropsMaxwell", "cuda:13.1", "580.95.05", {"cc:5.2"}, Verdict::kIncompatible,
     "toolkit-drops-arch", "CUDA 13 dropped Maxwell"},
    {"Cuda12OnKeplerFailsAtTheDriverFirst", "cuda:12.0", "470.82.01", {"K80"}, Verdict::kIncompatible,
     "minimum-driver", "R470 is the last branch for Kepler"},
    {"TuringSurvivesCuda13", "cuda:13.0", "580.95.05", {"T4"}, Verdict::kCompatible,
     "paired-driver", ""},
    {"BlackwellNeedsR570", "cuda:12.4", "550.54.15", {"B200"}, Verdict::kIncompatible,
     "driver-predates-arch", "R570"},
    {"Cuda124PredatesBlackwell", "cuda:12.4", "570.124.06", {"B200"},
     Verdict::kCompatibleWithCaveats, "toolkit-predates-arch", "first toolkit 12.8"},
    // Framework arch lists.
    {"TorchCu126HasNoBlackwellKernels", "pip:torch==2.6.0+cu126", "570.124.06", {"RTX 5090"},
     Verdict::kIncompatible, "framework-arch-list", "no kernel image"},
    {"TorchCu128RunsOnBlackwell", "pip:torch==2.7.0+cu128", "570.124.06", {"B200"},
     Verdict::kCompatible, "paired-driver", ""},
    {"TorchCu124IsBelowTheBlackwellFloor", "pip:torch 2.5.1+cu124", "575.57.08", {"B200"},
     Verdict::kIncompatible, "framework-gpu-floor", "PyTorch >= 2.7.0"},
    {"Torch212Cu126RunsOnHopper", "pip:torch==2.12.0+cu126", "560.35.05", {"H100"},
     Verdict::kCompatible, "paired-driver", ""},
    {"Torch213Cu126FailsOnRtxPro6000Blackwell", "pip:torch==2.13.0+cu126", "580.95.05",
     {"RTX PRO 6000 Blackwell Server Edition"}, Verdict::kIncompatible, "framework-arch-list",
     "sm_90"},
    {"JaxCuda12NeedsSm52", "pip:jax[cuda12]", "580.95.05", {"cc:5.0"}, Verdict::kIncompatible,
     "framework-min-cc", "5.2"},
    {"VllmNeedsCc75", "image:vllm/vllm-openai:v0.8.5", "550.54.15", {"V100"},
     Verdict::kIncompatible, "framework-min-cc", "7.5"},
    {"Tensorflow215RunsOnR535", "pip:tensorflow==2.15.0", "535.104.05", {"T4"},
     Verdict::kCompatible, "paired-driver", ""},
    // Forward compatibility.
    {"ForwardCompatCarriesCuda13OnDatacenterR535", "image:nvidia/cuda:13.0.2-base-ubuntu24.04",
     "535.104.05", {"H100"}, Verdict::kCompatibleWithCaveats, "forward-compat", "cuda-compat-13-0"},
    {"ForwardCompatWorksOnL40sWithR570", "image:nvidia/cuda:13.1.1-runtime-ubuntu24.04",
     "570.124.06", {"L40S"}, Verdict::kCompatibleWithCaveats, "forward-compat", ""},
    {"ForwardCompatIsNotForConsumerGpus", "image:nvidia/cuda:13.0.2-base-ubuntu24.04",
     "570.124.06", {"RTX 4090"}, Verdict::kIncompatible, "minimum-driver", "580.65.06"},
    {"ForwardCompatNeedsAMatrixBranch", "image:nvidia/cuda:13.2.0-base-ubuntu24.04",
     "550.54.15", {"H100"}, Verdict::kIncompatible, "minimum-driver", ""},
    {"TritonVllmImageUsesForwardCompatOnR535",
     "image:nvcr.io/nvidia/tritonserver:25.08-vllm-python-py3", "535.104.05", {"H200"},
     Verdict::kCompatibleWithCaveats, "forward-compat", ""},
    // The examples.
    {"PytorchImageOnR535H100IsMinorCompat",
     "image:pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime", "535.104.05", {"H100"},
     Verdict::kCompatibleWithCaveats, "minor-version-compat", "525.60.13"},
    {"PytorchImageOnR580H200IsCompatible",
     "image:pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime", "580.65.06", {"H200"},
     Verdict::kCompatible, "paired-driver", ""},
    {"PytorchImageOnR470IsIncompatible",
     "image:pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime", "470.82.01", {"H100"},
     Verdict::kIncompatible, "minimum-driver", ">= 525.60.13"},
    {"Cuda12ImageOnK80WithR470HasNoDriverFix", "image:nvidia/cuda:12.4.1-base-ubuntu22.04",
     "470.82.01", {"Tesla K80"}, Verdict::kIncompatible, "minimum-driver",
     "no driver upgrade makes this GPU run CUDA 12.x"},
    // Unknown.
    {"NgcPytorchMonthWithoutDataIsUnknown", "image:nvcr.io/nvidia/pytorch:23.10-py3",
     "535.104.05", {"H100"}, Verdict::kUnknown, "workload-not-mapped", "23.10"},
    {"NgcPytorchKnownMonthIsMapped", "image:nvcr.io/nvidia/pytorch:24.05-py3", "550.54.15",
     {"H100"}, Verdict::kCompatible, "paired-driver", ""},
    {"UnknownRepositoryIsUnknown", "image:ubuntu:22.04", "535.104.05", {"H100"},
     Verdict::kUnknown, "workload-not-mapped", "docker.io/library/ubuntu"},
    {"FutureCudaMajorIsUnknown", "cuda:14.0", "620.10", {"H100"}, Verdict::kUnknown,
     "unknown-toolkit", "CUDA 14.0"},
};

INSTANTIATE_TEST_SUITE_P(Table, NvidiaRules, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case>& i) { return i.param.name; });

std::vector<std::string> FixActions(const CompatReport& r) {
  std::vector<std::string> out;
  for (const Fix& f : r.fixes) out.push_back(f.kind + ": " + f.action);
  return out;
}

TEST(CompatExample, PytorchOnR535H100ListsDriverThenForwardCompatThenImage) {
  CompatReport r = RunCase({"", "image:pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime", "535.104.05",
                        {"H100"}, Verdict::kUnknown, "", ""});
  ASSERT_EQ(r.fixes.size(), 3u) << absl::StrJoin(FixActions(r), "\n");
  EXPECT_EQ(r.fixes[0].kind, "upgrade-driver");
  EXPECT_THAT(r.fixes[0].action, HasSubstr(">= 550.54.15 (R550+)"));
  EXPECT_EQ(r.fixes[1].kind, "forward-compat");
  EXPECT_THAT(r.fixes[1].action, HasSubstr("cuda-compat-12-4"));
  EXPECT_THAT(r.fixes[1].action, HasSubstr("R535"));
  EXPECT_EQ(r.fixes[2].kind, "change-image");
  EXPECT_THAT(r.fixes[2].action, HasSubstr("CUDA <= 12.2"));
  EXPECT_THAT(absl::StrJoin(r.caveats, "\n"), HasSubstr("PTX"));
  EXPECT_EQ(r.decision.layer, "user-space driver");
  EXPECT_EQ(r.facts.toolkit_driver->ToString(), "550.54.14");
  EXPECT_EQ(r.facts.minor_compat_floor->ToString(), "525.60.13");
  EXPECT_EQ(r.facts.branch_max_cuda->ToString(), "12.2");
}

TEST(CompatExample, PytorchOnR470NamesTheUserSpaceDriverLayerAndMinimum) {
  CompatReport r = RunCase({"", "image:pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime", "470.82.01",
                        {"H100"}, Verdict::kUnknown, "", ""});
  EXPECT_EQ(r.decision.layer, "user-space driver");
  EXPECT_EQ(r.facts.minor_compat_floor->ToString(), "525.60.13");
}

TEST(CompatExample, K80WithR470OffersOnlyACuda11Image) {
  CompatReport r = RunCase({"", "image:nvidia/cuda:12.4.1-base-ubuntu22.04", "470.82.01",
                        {"K80"}, Verdict::kUnknown, "", ""});
  for (const Fix& f : r.fixes) {
    EXPECT_NE(f.kind, "upgrade-driver") << f.action;
    EXPECT_NE(f.kind, "forward-compat") << f.action;
  }
  ASSERT_FALSE(r.fixes.empty());
  EXPECT_EQ(r.fixes[0].kind, "change-image");
  EXPECT_THAT(r.fixes[0].action, HasSubstr("CUDA <= 11.4"));
}

TEST(CompatExample, Cuda13ImageOnV100BlamesTheArchitecture) {
  CompatReport r = RunCase({"", "image:nvidia/cuda:13.0.2-base-ubuntu24.04", "535.104.05", {"V100"},
                        Verdict::kUnknown, "", ""});
  EXPECT_EQ(r.verdict, Verdict::kIncompatible);
  EXPECT_EQ(r.decision.rule, "toolkit-drops-arch");
  EXPECT_EQ(r.decision.layer, "GPU architecture");
  ASSERT_FALSE(r.fixes.empty());
  EXPECT_THAT(r.fixes[0].action, HasSubstr("CUDA 12.x"));
}

TEST(ForwardCompat, ConsumerGpuGetsA804NoteInsteadOfAForwardCompatFix) {
  CompatReport r = RunCase({"", "cuda:13.0", "570.124.06", {"RTX 4090"}, Verdict::kUnknown, "", ""});
  for (const Fix& f : r.fixes) EXPECT_NE(f.kind, "forward-compat");
  EXPECT_THAT(absl::StrJoin(r.notes, "\n"), HasSubstr("804"));
}

TEST(ForwardCompat, PlainCudaVersionOnDatacenterGpuOffersTheCompatPackage) {
  CompatReport r = RunCase({"", "cuda:13.0", "535.104.05", {"H100"}, Verdict::kUnknown, "", ""});
  EXPECT_EQ(r.verdict, Verdict::kIncompatible);
  std::vector<std::string> kinds;
  for (const Fix& f : r.fixes) kinds.push_back(f.kind);
  EXPECT_THAT(kinds, ::testing::ElementsAre("upgrade-driver", "forward-compat", "change-image"));
}

TEST(ForwardCompat, NewFeatureBranchIsFlagged) {
  CompatReport r = RunCase({"", "cuda:13.4", "610.43.02", {"H100"}, Verdict::kUnknown, "", ""});
  EXPECT_EQ(r.verdict, Verdict::kCompatibleWithCaveats);
  EXPECT_THAT(absl::StrJoin(r.notes, "\n"), HasSubstr("New Feature Branch"));
}

TEST(CompatReportJson, CarriesKindVerdictAndRule) {
  CompatReport r = RunCase({"", "image:pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime", "535.104.05",
                        {"H100"}, Verdict::kUnknown, "", ""});
  nlohmann::json j = ToJson(r);
  EXPECT_EQ(j["apiVersion"], "gpunode/v1");
  EXPECT_EQ(j["kind"], "CompatReport");
  EXPECT_EQ(j["verdict"], "compatible-with-caveats");
  EXPECT_EQ(j["rule"]["id"], "minor-version-compat");
  EXPECT_EQ(j["facts"]["minorCompatFloor"], "525.60.13");
  EXPECT_EQ(j["fixes"][0]["kind"], "upgrade-driver");
  EXPECT_FALSE(j["sources"].empty());
}

TEST(CompatReportText, NamesVerdictRuleFixesAndSources) {
  CompatReport r = RunCase({"", "image:pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime", "535.104.05",
                        {"H100"}, Verdict::kUnknown, "", ""});
  std::string text = RenderText(r, /*color=*/false);
  EXPECT_THAT(text, HasSubstr("verdict: compatible-with-caveats"));
  EXPECT_THAT(text, HasSubstr("rule: minor-version-compat"));
  EXPECT_THAT(text, HasSubstr("fixes (cheapest first):"));
  EXPECT_THAT(text, HasSubstr("[MVC]"));
  EXPECT_EQ(text.find('\033'), std::string::npos);
}

TEST(VerdictNames, AreTheDocumentedWordsAndExitCodes) {
  EXPECT_EQ(VerdictName(Verdict::kCompatible), "compatible");
  EXPECT_EQ(VerdictName(Verdict::kCompatibleWithCaveats), "compatible-with-caveats");
  EXPECT_EQ(VerdictName(Verdict::kIncompatible), "incompatible");
  EXPECT_EQ(VerdictName(Verdict::kUnknown), "unknown");
  EXPECT_EQ(VerdictExitCode(Verdict::kCompatible), 0);
  EXPECT_EQ(VerdictExitCode(Verdict::kCompatibleWithCaveats), 0);
  EXPECT_EQ(VerdictExitCode(Verdict::kIncompatible), 1);
  EXPECT_EQ(VerdictExitCode(Verdict::kUnknown), 2);
}

TEST(Check, WithoutGpusSaysArchitectureRulesWereSkipped) {
  CompatReport r = RunCase({"", "cuda:12.4", "550.54.15", {}, Verdict::kUnknown, "", ""});
  EXPECT_EQ(r.verdict, Verdict::kCompatible);
  EXPECT_THAT(absl::StrJoin(r.notes, "\n"), HasSubstr("--gpu"));
}

TEST(DriverFor, Cuda124GivesFullAndMinorCompatMinimums) {
  DriverForReport r = DriverFor(BuiltinData(), *Version::Parse("12.4"), {});
  ASSERT_TRUE(r.toolkit_driver);
  EXPECT_EQ(r.toolkit_driver->ToString(), "550.54.14");
  EXPECT_EQ(r.toolkit_driver_latest->ToString(), "550.54.15");
  EXPECT_EQ(r.minor_compat_floor->ToString(), "525.60.13");
  ASSERT_FALSE(r.branches.empty());
  EXPECT_EQ(r.branches.front(), 550);
  EXPECT_THAT(r.forward_compat, ::testing::Contains("cuda-compat-12-4 on R535"));
  EXPECT_TRUE(r.warnings.empty());
}

TEST(DriverFor, Cuda12OnKeplerWarnsThatNoDriverSupportsIt) {
  GpuCatalog c(BuiltinData());
  DriverForReport r = DriverFor(BuiltinData(), *Version::Parse("12.4"), {*c.Lookup("K80")});
  EXPECT_THAT(absl::StrJoin(r.warnings, "\n"), HasSubstr("R470 is the last branch for Kepler"));
  EXPECT_THAT(absl::StrJoin(r.warnings, "\n"), HasSubstr("does not support Kepler"));
}

TEST(DriverFor, Cuda13OnVoltaWarnsThatTheToolkitDroppedIt) {
  GpuCatalog c(BuiltinData());
  DriverForReport r = DriverFor(BuiltinData(), *Version::Parse("13.0"), {*c.Lookup("V100")});
  EXPECT_EQ(r.minor_compat_floor->ToString(), "580.65.06");
  EXPECT_THAT(absl::StrJoin(r.warnings, "\n"), HasSubstr("last toolkit for Volta is CUDA 12.x"));
}

TEST(DriverFor, Cuda10HasNoMinorVersionCompat) {
  DriverForReport r = DriverFor(BuiltinData(), *Version::Parse("10.2"), {});
  EXPECT_FALSE(r.minor_compat_floor);
  EXPECT_EQ(r.toolkit_driver->ToString(), "440.33");
}

TEST(DriverFor, ConsumerGpuIsWarnedAboutForwardCompat) {
  GpuCatalog c(BuiltinData());
  DriverForReport r = DriverFor(BuiltinData(), *Version::Parse("12.8"), {*c.Lookup("RTX 4090")});
  EXPECT_THAT(absl::StrJoin(r.warnings, "\n"), HasSubstr("804"));
  nlohmann::json j = ToJson(r);
  EXPECT_EQ(j["kind"], "DriverRequirement");
  EXPECT_EQ(j["fullCompatibility"]["minimumDriver"], "570.26");
}

}  // namespace
}  // namespace gpunode::compat
