// NVIDIA's requirement language (src/compat/requirement.h) on the values of published images
// (published_env.h) and on the edge cases of libnvidia-container's dsl.c.
#include "src/compat/requirement.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/compat/published_env.h"
#include "test/testing/status_matchers.h"

namespace gpunode::compat {
namespace {

using ::gpunode::compat::testing::kCuda1281Require;
using ::gpunode::compat::testing::kCuda1281Version;
using ::gpunode::compat::testing::kNgcRequire;
using ::testing::HasSubstr;

ReqFacts Node(std::string driver, std::string cuda, std::vector<ReqDevice> devices) {
  return ReqFacts{std::move(driver), std::move(cuda), std::move(devices)};
}
ReqDevice H200() { return {"GPU 0 (NVIDIA H200)", "nvidia", "9.0"}; }
ReqDevice T4() { return {"GPU 0 (Tesla T4)", "tesla", "7.5"}; }
ReqDevice Rtx4090() { return {"GPU 0 (NVIDIA GeForce RTX 4090)", "geforce", "8.9"}; }
ReqDevice A100() { return {"GPU 0 (NVIDIA A100-SXM4-80GB)", "nvidia", "8.0"}; }

RequirementOutcome Eval(const std::string& text, const ReqFacts& facts) {
  auto r = ParseRequirement("NVIDIA_REQUIRE_CUDA", text);
  EXPECT_TRUE(r.ok()) << r.status();
  return EvaluateRequirements({*r}, facts);
}

TEST(RequirementTest, ParsesTheCuda1281ValueIntoItsGroups) {
  auto r = ParseRequirement("NVIDIA_REQUIRE_CUDA", kCuda1281Require);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->groups.size(), 61u);  // cuda>=12.8, then 12 brands x 5 branches
  EXPECT_EQ(r->groups[0].text, "cuda>=12.8");
  ASSERT_EQ(r->groups[0].terms.size(), 1u);
  EXPECT_EQ(r->groups[0].terms[0].key, ReqKey::kCuda);
  EXPECT_EQ(r->groups[0].terms[0].op, ReqOp::kGreaterEqual);
  EXPECT_EQ(r->groups[0].terms[0].value, "12.8");
  EXPECT_EQ(r->groups[15].text, "brand=tesla,driver>=535,driver<536");
  ASSERT_EQ(r->groups[15].terms.size(), 3u);
  EXPECT_EQ(r->groups[15].terms[2].op, ReqOp::kLess);
}

TEST(RequirementTest, Cuda1281RunsNativelyOnR580) {
  RequirementOutcome o = Eval(kCuda1281Require, Node("580.95.05", "13.0", {H200()}));
  EXPECT_TRUE(o.satisfied);
  ASSERT_EQ(o.held_by.size(), 1u);
  EXPECT_EQ(o.held_by[0], "NVIDIA_REQUIRE_CUDA: cuda>=12.8");
}

TEST(RequirementTest, Cuda1281IsAdmittedOnR550DatacenterThroughItsBranchGroup) {
  RequirementOutcome o = Eval(kCuda1281Require, Node("550.127.05", "12.4", {H200()}));
  EXPECT_TRUE(o.satisfied);
  ASSERT_EQ(o.held_by.size(), 1u);
  EXPECT_EQ(o.held_by[0], "NVIDIA_REQUIRE_CUDA: brand=nvidia,driver>=550,driver<551");
  // Tesla-branded T4 on R535: the tesla group of branch 535.
  o = Eval(kCuda1281Require, Node("535.183.01", "12.2", {T4()}));
  EXPECT_TRUE(o.satisfied);
  EXPECT_EQ(o.held_by[0], "NVIDIA_REQUIRE_CUDA: brand=tesla,driver>=535,driver<536");
}

TEST(RequirementTest, Cuda1281IsRefusedOnAGeForceWithAnOlderDriver) {
  RequirementOutcome o = Eval(kCuda1281Require, Node("550.127.05", "12.4", {Rtx4090()}));
  EXPECT_FALSE(o.satisfied);
  ASSERT_EQ(o.failures.size(), 1u);
  const RequirementFailure& f = o.failures[0];
  EXPECT_EQ(f.device, "GPU 0 (NVIDIA GeForce RTX 4090)");
  ASSERT_EQ(f.groups.size(), 61u);
  EXPECT_EQ(f.groups[0].term, "cuda>=12.8");
  EXPECT_EQ(f.groups[0].sentence,
            "cuda>=12.8 needs a driver that runs CUDA 12.8; this node's driver runs CUDA 12.4");
  EXPECT_EQ(f.groups[1].term, "brand=unknown");
  EXPECT_FALSE(f.groups[1].brand_matched);
  EXPECT_THAT(o.Message(), HasSubstr("unsatisfied condition: cuda>=12.8 (NVIDIA_REQUIRE_CUDA, GPU 0"));
  EXPECT_THAT(o.Message(), HasSubstr("60 more alternatives"));
}

TEST(RequirementTest, Cuda1281OnAnUnlistedBranchNamesTheVersionTermsThatFailed) {
  // R545 is not among the branches the image admits: every nvidia group fails on driver>=.
  RequirementOutcome o = Eval(kCuda1281Require, Node("545.29.06", "12.3", {H200()}));
  ASSERT_FALSE(o.satisfied);
  const std::string summary = o.failures[0].Summary();
  EXPECT_THAT(summary, HasSubstr("cuda>=12.8 needs a driver that runs CUDA 12.8; this node's driver runs CUDA 12.3"));
  EXPECT_THAT(summary, HasSubstr("brand=nvidia,driver>=470,driver<471: driver<471 needs a driver version below 471; "
                                 "this node has driver 545.29.06"));
  EXPECT_THAT(summary, HasSubstr("brand=nvidia,driver>=550,driver<551: driver>=550 needs a driver version at least "
                                 "550; this node has driver 545.29.06"));
}

TEST(RequirementTest, NgcFrameworkImagesRequireOnlyCuda9) {
  // kNgcRequire: NGC's long-standing value (published_env.h says where it was read).
  EXPECT_TRUE(Eval(kNgcRequire, Node("535.183.01", "12.2", {T4()})).satisfied);
  EXPECT_TRUE(Eval(kNgcRequire, Node("470.256.02", "11.4", {T4()})).satisfied);
  EXPECT_FALSE(Eval(kNgcRequire, Node("375.26", "8.0", {T4()})).satisfied);
}

// R570 runs CUDA 12.8 itself (NVIDIA's CUDA 12.8 release notes: 570.26+); R565 is one of the
// branches nvidia/cuda 12.8.1's requirement admits through its compat libraries.
TEST(RequirementTest, Cuda1281OnA100AndT4AcrossR565R570AndCuda13NotOnR570) {
  RequirementOutcome o = Eval(kCuda1281Require, Node("570.86.10", "12.8", {A100()}));
  EXPECT_TRUE(o.satisfied);
  ASSERT_EQ(o.held_by.size(), 1u);
  EXPECT_EQ(o.held_by[0], "NVIDIA_REQUIRE_CUDA: cuda>=12.8");
  o = Eval(kCuda1281Require, Node("570.86.10", "12.8", {T4()}));
  EXPECT_TRUE(o.satisfied);
  EXPECT_EQ(o.held_by[0], "NVIDIA_REQUIRE_CUDA: cuda>=12.8");
  o = Eval(kCuda1281Require, Node("565.57.01", "12.7", {A100()}));
  EXPECT_TRUE(o.satisfied);
  ASSERT_EQ(o.held_by.size(), 1u);
  EXPECT_EQ(o.held_by[0], "NVIDIA_REQUIRE_CUDA: brand=nvidia,driver>=565,driver<566");
  o = Eval("cuda>=13.0", Node("570.86.10", "12.8", {A100()}));
  ASSERT_FALSE(o.satisfied);
  EXPECT_EQ(o.Message(),
            "unsatisfied condition: cuda>=13.0 (NVIDIA_REQUIRE_CUDA, GPU 0 (NVIDIA A100-SXM4-80GB)): cuda>=13.0 "
            "needs a driver that runs CUDA 13.0; this node's driver runs CUDA 12.8");
  o = Eval("arch>=9.0", Node("580.95.05", "13.0", {A100()}));
  EXPECT_FALSE(o.satisfied) << "an A100 is compute capability 8.0";
}

TEST(RequirementTest, Cuda13OnR550NamesTheTermAndBothVersions) {
  RequirementOutcome o = Eval("cuda>=13.0", Node("550.127.05", "12.4", {H200()}));
  ASSERT_FALSE(o.satisfied);
  EXPECT_EQ(o.Message(),
            "unsatisfied condition: cuda>=13.0 (NVIDIA_REQUIRE_CUDA, GPU 0 (NVIDIA H200)): cuda>=13.0 needs a "
            "driver that runs CUDA 13.0; this node's driver runs CUDA 12.4");
}

TEST(RequirementTest, VersionsCompareAsNumbersComponentByComponent) {
  EXPECT_EQ(CompareDotted("12", "12.0"), 0);
  EXPECT_EQ(CompareDotted("12.0.0", "12"), 0);
  EXPECT_EQ(CompareDotted("535.104.05", "535.104.5"), 0);
  EXPECT_EQ(CompareDotted("12.10", "12.9"), 1);
  EXPECT_EQ(CompareDotted("550.54.14", "551"), -1);
  EXPECT_EQ(CompareDotted("99999999999999999999999", "1"), 1);
  EXPECT_EQ(CompareDotted("12.x", "12"), std::nullopt);
  EXPECT_EQ(CompareDotted("", "12"), std::nullopt);
}

TEST(RequirementTest, EveryOperatorAndCaseInsensitiveKeysAndBrands) {
  const ReqFacts node = Node("550.127.05", "12.4", {T4()});
  EXPECT_TRUE(Eval("CUDA=12.4", node).satisfied);
  EXPECT_TRUE(Eval("cuda!=12.3", node).satisfied);
  EXPECT_TRUE(Eval("driver<551", node).satisfied);
  EXPECT_TRUE(Eval("driver<=550.127.05", node).satisfied);
  EXPECT_TRUE(Eval("driver>550", node).satisfied);
  EXPECT_TRUE(Eval("arch>=7.5", node).satisfied);
  EXPECT_FALSE(Eval("arch>=8.0", node).satisfied);
  EXPECT_TRUE(Eval("Brand=TESLA", node).satisfied);
  EXPECT_TRUE(Eval("brand!=geforce", node).satisfied);
  // Doubled separators are skipped, as strsep's empty tokens in dsl.c.
  EXPECT_TRUE(Eval("  cuda>=99,,  driver>=1,,arch>=1.0 ", node).satisfied);
  // An empty value: no group, nothing to fail.
  EXPECT_TRUE(Eval("", node).satisfied);
}

TEST(RequirementTest, UnknownFactsHoldAsInConfigureC) {
  EXPECT_TRUE(Eval("cuda>=13.0,driver>=999", Node("", "", {})).satisfied);
  // No device: arch and brand hold.
  EXPECT_TRUE(Eval("brand=tesla,arch>=10.0", Node("550.127.05", "12.4", {})).satisfied);
  EXPECT_TRUE(Eval("brand=tesla", Node("550.127.05", "12.4", {{"GPU 0", "", ""}})).satisfied);
}

TEST(RequirementTest, EachDeviceMustSatisfyEveryRequirement) {
  auto cuda = ParseRequirement("NVIDIA_REQUIRE_CUDA", "cuda>=12.8 brand=tesla,driver>=535,driver<536");
  auto arch = ParseRequirement("NVIDIA_REQUIRE_ARCH", "arch>=7.0");
  ASSERT_TRUE(cuda.ok() && arch.ok());
  ReqDevice geforce{"GPU 1 (NVIDIA GeForce RTX 4090)", "geforce", "8.9"};
  RequirementOutcome o = EvaluateRequirements({*cuda, *arch}, Node("535.183.01", "12.2", {T4(), geforce}));
  ASSERT_FALSE(o.satisfied);
  ASSERT_EQ(o.failures.size(), 1u);
  EXPECT_EQ(o.failures[0].device, "GPU 1 (NVIDIA GeForce RTX 4090)");
  EXPECT_EQ(o.failures[0].requirement, "NVIDIA_REQUIRE_CUDA");
  EXPECT_EQ(o.failures[0].groups[1].sentence,
            "brand=tesla needs a GPU of brand tesla; GPU 1 (NVIDIA GeForce RTX 4090) is geforce");
}

TEST(RequirementTest, BadTermsAreErrorsNamingTheTerm) {
  struct Bad {
    std::string text;
    std::string says;
  };
  for (const Bad& b : std::vector<Bad>{{"cuda>=12.x", "\"cuda>=12.x\": \"12.x\" is not a version"},
                                       {"gpu>=1", "unknown key \"gpu\""},
                                       {"cuda=>12.0", "unknown operator \"=>\""},
                                       {"cuda>=", "no value after the operator"},
                                       {"brand>tesla", "brand compares with = or != only"},
                                       {">=12.0", "expected KEY OP VALUE"},
                                       {"cuda12", "expected KEY OP VALUE"},
                                       {"cuda>=12.4 brand=tesla,drver>=535", "unknown key \"drver\""}}) {
    auto r = ParseRequirement("NVIDIA_REQUIRE_CUDA", b.text);
    ASSERT_FALSE(r.ok()) << b.text;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr("NVIDIA_REQUIRE_CUDA: invalid expression")) << b.text;
    EXPECT_THAT(r.status().message(), HasSubstr(b.says)) << b.text;
  }
  EXPECT_FALSE(ParseRequirement("NVIDIA_REQUIRE_X", std::string(kMaxRequirementLength + 1, 'a')).ok());
  std::string many;
  for (size_t i = 0; i <= kMaxRequirementTerms; ++i) many += "cuda>=1,";
  EXPECT_THAT(ParseRequirement("NVIDIA_REQUIRE_X", many).status().message(), HasSubstr("more than 4096 terms"));
}

TEST(RequirementTest, EnvironmentCollectsTheVariablesAsNvidiasToolkit) {
  auto r = RequirementsFromEnv({"PATH=/usr/bin", std::string("NVIDIA_REQUIRE_CUDA=") + kCuda1281Require,
                                std::string("CUDA_VERSION=") + kCuda1281Version, "NVIDIA_REQUIRE_ARCH=arch>=7.0",
                                "NVIDIA_REQUIRE_JETPACK_HOST_MOUNTS=", "NVIDIA_REQUIRE_JETPACK=csv-mounts=all"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->disabled);
  EXPECT_FALSE(r->legacy);  // NVIDIA_REQUIRE_CUDA is set
  ASSERT_EQ(r->requirements.size(), 2u);
  EXPECT_EQ(r->requirements[0].name, "NVIDIA_REQUIRE_ARCH");
  EXPECT_EQ(r->requirements[1].name, "NVIDIA_REQUIRE_CUDA");
}

TEST(RequirementTest, LegacyImagesRequireTheirCudaVersion) {
  auto r = RequirementsFromEnv({"CUDA_VERSION=10.0.130"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->legacy);
  ASSERT_EQ(r->requirements.size(), 1u);
  EXPECT_EQ(r->requirements[0].text, "cuda>=10.0");
  // An empty NVIDIA_REQUIRE_CUDA counts as unset.
  r = RequirementsFromEnv({"CUDA_VERSION=12.8.1", "NVIDIA_REQUIRE_CUDA="});
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->legacy);
  EXPECT_EQ(r->requirements.back().text, "cuda>=12.8");
  EXPECT_THAT(RequirementsFromEnv({"CUDA_VERSION=twelve"}).status().message(), HasSubstr("CUDA_VERSION=twelve"));
}

TEST(RequirementTest, DisableRequireReadsAsGoParseBool) {
  for (const char* yes : {"1", "t", "T", "TRUE", "true", "True"}) {
    auto r = RequirementsFromEnv({"NVIDIA_REQUIRE_CUDA=cuda>=99.0", std::string("NVIDIA_DISABLE_REQUIRE=") + yes});
    ASSERT_TRUE(r.ok());
    EXPECT_TRUE(r->disabled) << yes;
    EXPECT_TRUE(r->requirements.empty());
  }
  for (const char* no : {"0", "false", "yes", "on", ""}) {
    auto r = RequirementsFromEnv({"NVIDIA_REQUIRE_CUDA=cuda>=99.0", std::string("NVIDIA_DISABLE_REQUIRE=") + no});
    ASSERT_TRUE(r.ok());
    EXPECT_FALSE(r->disabled) << no;
    EXPECT_EQ(r->requirements.size(), 1u);
  }
  // A bad term is ignored when the checks are off (the toolkit does not collect them).
  EXPECT_TRUE(RequirementsFromEnv({"NVIDIA_REQUIRE_CUDA=garbage", "NVIDIA_DISABLE_REQUIRE=true"}).ok());
  // The last entry of a name wins.
  auto r = RequirementsFromEnv({"NVIDIA_DISABLE_REQUIRE=true", "NVIDIA_DISABLE_REQUIRE=false", "CUDA_VERSION=9.0"});
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->disabled);
}

TEST(RequirementTest, BrandNamesAreThoseOfCudaImages) {
  EXPECT_EQ(BrandName(2), "tesla");
  EXPECT_EQ(BrandName(5), "geforce");
  EXPECT_EQ(BrandName(11), "cloudgaming");
  EXPECT_EQ(BrandName(12), "quadrortx");
  EXPECT_EQ(BrandName(14), "nvidia");
  EXPECT_EQ(BrandName(0), "unknown");
  EXPECT_EQ(BrandName(99), "unknown");
}

}  // namespace
}  // namespace gpunode::compat
