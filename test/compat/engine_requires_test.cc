// Rule image-requires: the image's NVIDIA_REQUIRE_* in the compat verdict, on the values of
// published images (published_env.h), agreeing with what the OCI shim does at container start.
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/compat/engine.h"
#include "test/compat/published_env.h"
#include "test/compat/test_data.h"

namespace gpunode::compat {
namespace {

using ::gpunode::compat::testing::BuiltinData;
using ::gpunode::compat::testing::kCuda1281Require;
using ::testing::HasSubstr;

WorkloadSpec Image(const std::string& cuda, std::vector<std::string> requirements, bool compat_libs = true) {
  auto w = WorkloadFromCuda(cuda);
  EXPECT_TRUE(w.ok()) << w.status();
  w->requirements = std::move(requirements);
  w->ships_cuda_compat = compat_libs;
  return *w;
}

NodeTarget Node(const std::string& driver, const std::string& cuda, const std::string& gpu,
                const std::string& brand) {
  NodeTarget t;
  t.driver = *Version::Parse(driver);
  t.cuda_driver = *Version::Parse(cuda);
  GpuCatalog catalog(BuiltinData());
  auto g = catalog.Lookup(gpu);
  EXPECT_TRUE(g.ok()) << g.status();
  g->brand = brand;
  t.gpus.push_back(*g);
  t.origin = "test node";
  return t;
}

const Finding* RuleFinding(const CompatReport& r, const std::string& rule) {
  for (const Finding& f : r.findings) {
    if (f.rule == rule) return &f;
  }
  return nullptr;
}

TEST(ImageRequiresTest, Cuda1281OnR550DatacenterHoldsThroughItsBranchGroup) {
  const std::string req = std::string("NVIDIA_REQUIRE_CUDA=") + kCuda1281Require;
  CompatReport r = Check(BuiltinData(), Image("12.8.1", {req}), Node("550.127.05", "12.4", "H200", "nvidia"));
  const Finding* f = RuleFinding(r, "image-requires");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, Verdict::kCompatible);
  EXPECT_THAT(f->sentence, HasSubstr("NVIDIA_REQUIRE_CUDA: brand=nvidia,driver>=550,driver<551"));
  EXPECT_NE(r.verdict, Verdict::kIncompatible);
}

TEST(ImageRequiresTest, Cuda1281OnAGeForceWithR550IsRefusedAsTheShimRefusesIt) {
  const std::string req = std::string("NVIDIA_REQUIRE_CUDA=") + kCuda1281Require;
  CompatReport r = Check(BuiltinData(), Image("12.8.1", {req}), Node("550.127.05", "12.4", "RTX 4090", "geforce"));
  EXPECT_EQ(r.verdict, Verdict::kIncompatible);
  EXPECT_EQ(r.decision.rule, "image-requires");
  EXPECT_THAT(r.decision.sentence,
              HasSubstr("cuda>=12.8 needs a driver that runs CUDA 12.8; this node's driver runs CUDA 12.4"));
  ASSERT_FALSE(r.fixes.empty());
  EXPECT_EQ(r.fixes[0].kind, "upgrade-driver");
  EXPECT_THAT(r.fixes[0].action, HasSubstr("which runs CUDA 12.8"));
}

TEST(ImageRequiresTest, Cuda13OnR550NamesTheFailedTermAndTheFixes) {
  CompatReport r = Check(BuiltinData(), Image("13.0", {"NVIDIA_REQUIRE_CUDA=cuda>=13.0"}, false),
                         Node("550.127.05", "12.4", "H200", "nvidia"));
  EXPECT_EQ(r.verdict, Verdict::kIncompatible);
  const Finding* f = RuleFinding(r, "image-requires");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, Verdict::kIncompatible);
  EXPECT_THAT(f->sentence, HasSubstr("unsatisfied condition: cuda>=13.0"));
  EXPECT_THAT(f->sentence, HasSubstr("this node's driver runs CUDA 12.4"));
  bool upgrade = false, disable = false;
  for (const Fix& x : r.fixes) {
    upgrade |= x.kind == "upgrade-driver" && absl::StrContains(x.action, "runs CUDA 13.0");
    disable |= x.kind == "disable-require" && absl::StrContains(x.action, "NVIDIA_DISABLE_REQUIRE=true");
  }
  EXPECT_TRUE(upgrade);
  EXPECT_TRUE(disable);
}

TEST(ImageRequiresTest, ForwardCompatBranchesOfTheImageAreOffered) {
  // R545 is not among the branches nvidia/cuda 12.8.1 admits; R535/R550/R560/R565 are.
  const std::string req = std::string("NVIDIA_REQUIRE_CUDA=") + kCuda1281Require;
  CompatReport r = Check(BuiltinData(), Image("12.8.1", {req}), Node("545.29.06", "12.3", "H200", "nvidia"));
  const Finding* f = RuleFinding(r, "image-requires");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, Verdict::kIncompatible);
  bool offered = false;
  for (const Fix& x : r.fixes) {
    offered |= x.kind == "change-driver" && absl::StrContains(x.action, "R470, R535, R550, R560, R565");
  }
  EXPECT_TRUE(offered);
}

TEST(ImageRequiresTest, DisableRequireOrNoRequirementLeavesTheRuleOut) {
  WorkloadSpec w = Image("13.0", {"NVIDIA_REQUIRE_CUDA=cuda>=13.0"}, false);
  w.disable_require = true;
  CompatReport r = Check(BuiltinData(), w, Node("550.127.05", "12.4", "H200", "nvidia"));
  EXPECT_EQ(RuleFinding(r, "image-requires"), nullptr);
  r = Check(BuiltinData(), Image("12.4", {}), Node("550.127.05", "12.4", "H200", "nvidia"));
  EXPECT_EQ(RuleFinding(r, "image-requires"), nullptr);
}

TEST(ImageRequiresTest, ABadRequirementIsIncompatibleAsTheShimRefusesIt) {
  CompatReport r = Check(BuiltinData(), Image("12.4", {"NVIDIA_REQUIRE_CUDA=cuda>=12.x"}),
                         Node("550.127.05", "12.4", "H200", "nvidia"));
  EXPECT_EQ(r.verdict, Verdict::kIncompatible);
  EXPECT_THAT(r.decision.sentence, HasSubstr("invalid expression \"cuda>=12.x\""));
}

TEST(ImageRequiresTest, BrandFromTheSegmentWhenNvmlDidNotSay) {
  const std::string req = std::string("NVIDIA_REQUIRE_CUDA=") + kCuda1281Require;
  CompatReport r = Check(BuiltinData(), Image("12.8.1", {req}), Node("550.127.05", "12.4", "RTX 4090", ""));
  EXPECT_EQ(r.verdict, Verdict::kIncompatible);
  bool noted = false;
  for (const std::string& n : r.notes) noted |= absl::StrContains(n, "taken as brand geforce");
  EXPECT_TRUE(noted);
}

}  // namespace
}  // namespace gpunode::compat
