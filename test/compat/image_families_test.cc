// The NGC framework / serving image families (issue #14): tag matching, the "known family,
// release not in the data set" answer, digests, coverage counts and the sourcing of every fact.
#include <set>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/base/embedded.h"
#include "src/compat/coverage.h"
#include "src/compat/dataset.h"
#include "src/compat/engine.h"
#include "src/compat/gpu_catalog.h"
#include "src/compat/image_ref.h"
#include "test/compat/test_data.h"
#include "test/testing/status_matchers.h"

namespace gpunode::compat {
namespace {

using ::gpunode::compat::testing::BuiltinData;
using ::testing::HasSubstr;

WorkloadSpec Image(const std::string& ref) {
  auto w = WorkloadFromImage(BuiltinData(), ref);
  EXPECT_OK(w) << ref << ": " << w.status();
  return w.ok() ? *w : WorkloadSpec();
}

std::string Cuda(const WorkloadSpec& w) { return w.cuda ? w.cuda->ToString() : "none"; }

CompatReport CheckImage(const std::string& ref, const std::string& driver, const std::string& gpu) {
  NodeTarget t;
  t.origin = "--driver/--gpu";
  t.driver = *Version::Parse(driver);
  auto g = GpuCatalog(BuiltinData()).Lookup(gpu);
  EXPECT_OK(g) << gpu;
  if (g.ok()) t.gpus.push_back(*g);
  return Check(BuiltinData(), Image(ref), t);
}

TEST(ImageFamilies, NgcPytorch2508MapsToCuda13) {
  WorkloadSpec w = Image("nvcr.io/nvidia/pytorch:25.08-py3");
  EXPECT_EQ(Cuda(w), "13.0");
  EXPECT_EQ(w.family, "nvcr.io/nvidia/pytorch");
  EXPECT_TRUE(w.ships_cuda_compat);
  EXPECT_FALSE(w.source.empty());
}

TEST(ImageFamilies, NgcPytorch2508VerdictsAcrossDrivers) {
  const std::string ref = "nvcr.io/nvidia/pytorch:25.08-py3";
  CompatReport r580 = CheckImage(ref, "580.65.06", "H100");
  EXPECT_EQ(r580.verdict, Verdict::kCompatible);
  ASSERT_TRUE(r580.facts.toolkit_driver);
  EXPECT_EQ(r580.facts.toolkit_driver->ToString(), "580.65.06");  // minimum driver for 13.0

  // R535 on a datacenter GPU: forward compatibility (cuda-compat-13-0 is supported on R535).
  CompatReport r535 = CheckImage(ref, "535.104.05", "H100");
  EXPECT_EQ(r535.verdict, Verdict::kCompatibleWithCaveats);
  EXPECT_EQ(r535.decision.rule, "forward-compat");

  // R550 is not a forward-compatibility target and below the CUDA 13 floor.
  CompatReport r550 = CheckImage(ref, "550.54.15", "H100");
  EXPECT_EQ(r550.verdict, Verdict::kIncompatible);
  EXPECT_EQ(r550.decision.rule, "minimum-driver");
  ASSERT_TRUE(r550.facts.minor_compat_floor);
  EXPECT_EQ(r550.facts.minor_compat_floor->ToString(), "580.65.06");
}

TEST(ImageFamilies, DigestWithTagUsesTheTag) {
  const std::string digest(64, 'a');
  WorkloadSpec w = Image("nvcr.io/nvidia/pytorch:25.08-py3@sha256:" + digest);
  EXPECT_EQ(Cuda(w), "13.0");
}

TEST(ImageFamilies, DigestAloneIsUnknownWithAReason) {
  const std::string digest(64, 'b');
  WorkloadSpec w = Image("nvcr.io/nvidia/pytorch@sha256:" + digest);
  EXPECT_FALSE(w.cuda);
  EXPECT_THAT(w.derived_from, HasSubstr("digest alone"));
  EXPECT_THAT(w.derived_from, HasSubstr("nvcr.io/nvidia/pytorch:TAG@sha256:"));
}

TEST(ImageFamilies, UnknownMonthOfAKnownFamilySaysWhatTheDataCovers) {
  WorkloadSpec w = Image("nvcr.io/nvidia/pytorch:23.10-py3");
  EXPECT_FALSE(w.cuda);
  EXPECT_THAT(w.derived_from, HasSubstr("known family NGC PyTorch"));
  EXPECT_THAT(w.derived_from, HasSubstr("release \"23.10\" not in the data set"));
  EXPECT_THAT(w.derived_from, HasSubstr("data covers 22.05\u201325.12"));
}

TEST(ImageFamilies, UnknownVllmReleaseIsAKnownFamily) {
  WorkloadSpec w = Image("vllm/vllm-openai:v0.10.1");
  EXPECT_FALSE(w.cuda);
  EXPECT_EQ(w.family, "vllm/vllm-openai");
  EXPECT_THAT(w.derived_from, HasSubstr("known family vLLM"));
  CompatReport r = CheckImage("vllm/vllm-openai:v0.10.1", "580.65.06", "H100");
  EXPECT_EQ(r.verdict, Verdict::kUnknown);
}

TEST(ImageFamilies, FamiliesWithoutReleasesSayNoReleasesYet) {
  for (const char* ref : {"nvcr.io/nvidia/jax:25.04-py3", "nvcr.io/nvidia/nemo:25.04",
                          "nvcr.io/nvidia/tensorrt-llm/release:1.0.0"}) {
    WorkloadSpec w = Image(ref);
    EXPECT_FALSE(w.cuda) << ref;
    EXPECT_THAT(w.derived_from, HasSubstr("known family")) << ref;
    EXPECT_THAT(w.derived_from, HasSubstr("no releases of it yet")) << ref;
  }
}

TEST(ImageFamilies, NgcTablesAndTritonPlainPy3FromReleaseNotes) {
  EXPECT_EQ(Cuda(Image("nvcr.io/nvidia/tensorflow:23.01-tf2-py3")), "12.0.1");
  EXPECT_EQ(Cuda(Image("nvcr.io/nvidia/sglang:25.10-py3")), "13.0.2");
  // The plain -py3 Triton image of 24.01 comes from its own release notes...
  WorkloadSpec t = Image("nvcr.io/nvidia/tritonserver:24.01-py3");
  EXPECT_EQ(Cuda(t), "12.3.2");
  EXPECT_EQ(t.confidence, Confidence::kOfficial);
  EXPECT_THAT(t.derived_from, HasSubstr("R545"));
  // ... while months without such a row still use the vllm-python-py3 table (derived).
  EXPECT_EQ(Image("nvcr.io/nvidia/tritonserver:25.10-py3").confidence, Confidence::kDerived);
  EXPECT_EQ(Cuda(Image("nvcr.io/nvidia/tritonserver:26.08-vllm-python-py3")), "13.4.1");
}

TEST(ImageFamilies, TgiAndSglangTags) {
  EXPECT_EQ(Cuda(Image("ghcr.io/huggingface/text-generation-inference:3.3.7")), "12.8");
  EXPECT_EQ(Cuda(Image("ghcr.io/huggingface/text-generation-inference:v3.0.1")), "12.4");
  EXPECT_EQ(Cuda(Image("ghcr.io/huggingface/text-generation-inference:2.2.0")), "12.1");
  WorkloadSpec s = Image("lmsysorg/sglang:v0.5.12-cu130");
  EXPECT_EQ(Cuda(s), "13.0");
  EXPECT_EQ(s.framework, "sglang");
  EXPECT_EQ(Cuda(Image("lmsysorg/sglang:v0.5.0rc0-cu126")), "12.6");
  WorkloadSpec bare = Image("lmsysorg/sglang:v0.5.6");
  EXPECT_FALSE(bare.cuda);
  EXPECT_THAT(bare.derived_from, HasSubstr("known family SGLang"));
}

TEST(ImageFamilies, EveryReleaseHasASourceAndAKnownFamily) {
  const CompatData& d = BuiltinData();
  for (const ImageRelease& r : d.image_releases) {
    EXPECT_FALSE(r.provenance.source.empty()) << r.family;
    EXPECT_NE(d.FindFamily(r.family), nullptr) << r.family;
    for (const std::string& id : CompatData::SourceIds(r.provenance.source)) {
      EXPECT_TRUE(d.sources.count(id)) << id;
    }
  }
  for (const ImageFamily& f : d.image_families) EXPECT_FALSE(f.provenance.source.empty()) << f.family;
  for (const MonthCuda& m : d.ngc_pytorch) EXPECT_FALSE(m.provenance.source.empty());
  for (const MonthCuda& m : d.tritonserver) EXPECT_FALSE(m.provenance.source.empty());
  for (const VllmImage& v : d.vllm_images) EXPECT_FALSE(v.provenance.source.empty());
}

const FamilyCoverage* Find(const DataCoverage& c, const std::string& name) {
  for (const FamilyCoverage& f : c.families) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

TEST(Coverage, CountsMatchTheData) {
  const CompatData& d = BuiltinData();
  DataCoverage c = Coverage(d);
  EXPECT_EQ(c.updated, d.updated);
  EXPECT_FALSE(c.updated.empty());
  EXPECT_EQ(c.sources, d.sources.size());
  ASSERT_NE(Find(c, "CUDA toolkits"), nullptr);
  EXPECT_EQ(Find(c, "CUDA toolkits")->count, d.toolkits.size());
  EXPECT_EQ(Find(c, "Driver branches")->count, d.branches.size());
  EXPECT_EQ(Find(c, "GPU models")->count, d.gpus.size());
  EXPECT_EQ(Find(c, "PyTorch wheels")->count, d.torch_releases.size());
  EXPECT_EQ(Find(c, "NGC PyTorch")->count, d.ngc_pytorch.size());
  EXPECT_EQ(Find(c, "vLLM")->count, d.vllm_images.size());
  std::set<std::string> triton;
  for (const MonthCuda& m : d.tritonserver) triton.insert(m.tags.begin(), m.tags.end());
  for (const ImageRelease* r : d.ReleasesOf("nvcr.io/nvidia/tritonserver")) {
    triton.insert(r->tags.begin(), r->tags.end());
  }
  EXPECT_EQ(Find(c, "NGC Triton Inference Server")->count, triton.size());
  size_t tgi = 0;
  for (const ImageRelease* r : d.ReleasesOf("ghcr.io/huggingface/text-generation-inference")) {
    tgi += r->tags.size();
  }
  const FamilyCoverage* t = Find(c, "TGI");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->count, tgi);
  EXPECT_EQ(t->first, "2.0.4");
  EXPECT_EQ(t->last, "3.3.7");
  EXPECT_EQ(Find(c, "NGC JAX")->count, 0u);
  EXPECT_EQ(CoverageSummary(*Find(c, "NGC JAX")), "no releases in the data set");
}

TEST(Coverage, SortsTagsByTheirNumbers) {
  EXPECT_EQ(SortTags({"3.10.0", "3.3.7", "v0.8.5", "25.08", "3.3.7"}),
            (std::vector<std::string>{"v0.8.5", "3.3.7", "3.10.0", "25.08"}));
  FamilyCoverage f;
  f.unit = "releases";
  f.count = 34;
  f.first = "23.01";
  f.last = "25.10";
  EXPECT_EQ(CoverageSummary(f), "23.01\u201325.10, 34 releases");
}

TEST(Coverage, JsonDocumentHasApiVersionAndKind) {
  auto j = ToJson(Coverage(BuiltinData()));
  EXPECT_EQ(j["apiVersion"], "gpunode/v1");
  EXPECT_EQ(j["kind"], "CompatDataCoverage");
  EXPECT_FALSE(j["families"].empty());
  EXPECT_THAT(RenderText(Coverage(BuiltinData())), HasSubstr("NGC PyTorch"));
}

std::string Edited(const std::string& from, const std::string& to) {
  auto t = FindEmbedded("compat", "compat.yaml");
  std::string text = t ? std::string(*t) : std::string();
  size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

TEST(Dataset, RejectsAReleaseOfAnUnknownFamilyWithFileAndLine) {
  auto d = ParseCompatData(
      Edited("- {family: nvcr.io/nvidia/sglang, tags: [\"25.10\"]", "- {family: nvcr.io/nvidia/nope, tags: [\"25.10\"]"),
      "x.yaml");
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(std::string(d.status().message()), ::testing::MatchesRegex("x\\.yaml:[0-9]+: images\\.releases\\[[0-9]+\\]\\.family: .*"));
}

TEST(Dataset, RejectsAReleaseWithoutSourceOrWithABadCuda) {
  auto no_source = ParseCompatData(
      Edited("cuda: \"13.0.2\", source: SGLNGC, confidence: official}", "cuda: \"13.0.2\", confidence: official}"),
      "x.yaml");
  ASSERT_FALSE(no_source.ok());
  EXPECT_THAT(no_source.status().message(), HasSubstr(".source: expected a string, got nothing"));
  auto bad_cuda = ParseCompatData(
      Edited("cuda: \"13.0.2\", source: SGLNGC", "cuda: \"13.x\", source: SGLNGC"), "x.yaml");
  ASSERT_FALSE(bad_cuda.ok());
  EXPECT_THAT(std::string(bad_cuda.status().message()), ::testing::MatchesRegex("x\\.yaml:[0-9]+: images\\.releases\\[[0-9]+\\]\\.cuda: .*"));
}

}  // namespace
}  // namespace gpunode::compat
