#include "src/compat/gpu_catalog.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/compat/test_data.h"
#include "test/testing/status_matchers.h"

namespace gpunode::compat {
namespace {

using ::gpunode::compat::testing::BuiltinData;
using ::testing::HasSubstr;

struct NameCase {
  const char* typed;
  const char* name;  // expected data set name
};
void PrintTo(const NameCase& c, std::ostream* os) { *os << c.typed; }

class WhatPeopleType : public ::testing::TestWithParam<NameCase> {};

TEST_P(WhatPeopleType, FindsTheModel) {
  GpuCatalog catalog(BuiltinData());
  auto g = catalog.Lookup(GetParam().typed);
  ASSERT_OK(g) << g.status();
  EXPECT_EQ(g->name, GetParam().name);
  EXPECT_TRUE(g->in_data_set);
}

INSTANTIATE_TEST_SUITE_P(
    Names, WhatPeopleType,
    ::testing::Values(NameCase{"H100", "H100"}, NameCase{"h100", "H100"},
                      NameCase{"Tesla T4", "Tesla T4"}, NameCase{"T4", "Tesla T4"},
                      NameCase{"RTX 4090", "GeForce RTX 4090"},
                      NameCase{"GeForce RTX 4090", "GeForce RTX 4090"},
                      NameCase{"rtx-4090", "GeForce RTX 4090"},
                      NameCase{"A100 80GB", "A100 SXM4 80GB"},
                      NameCase{"A100-PCIe-80GB", "A100 PCIe 80GB"},
                      NameCase{"NVIDIA H200", "H200 SXM 141GB"}, NameCase{"L40S", "L40S"},
                      NameCase{"L40", "L40"}, NameCase{"K80", "Tesla K80"},
                      NameCase{"A10", "A10"}, NameCase{"a10g", "A10G"},
                      NameCase{"0x2335", "H200 SXM 141GB"}, NameCase{"2335", "H200 SXM 141GB"},
                      NameCase{"10de:1EB8", "Tesla T4"}, NameCase{"B200", "B200"}),
    [](const ::testing::TestParamInfo<NameCase>& i) {
      std::string s;
      for (const char* p = i.param.typed; *p; ++p) {
        s += (isalnum(static_cast<unsigned char>(*p)) ? *p : '_');
      }
      return s;
    });

TEST(GpuCatalog, A100AloneResolvesBecauseAllVariantsShareTheRules) {
  GpuCatalog catalog(BuiltinData());
  auto g = catalog.Lookup("A100");
  ASSERT_OK(g) << g.status();
  EXPECT_EQ(g->arch, "Ampere");
  EXPECT_EQ(g->cc->ToString(), "8.0");
  EXPECT_EQ(g->segment, "datacenter");
}

TEST(GpuCatalog, AmbiguousNameListsTheCandidates) {
  GpuCatalog catalog(BuiltinData());
  auto g = catalog.Lookup("RTX 6000");
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(g.status().message(), HasSubstr("ambiguous"));
  EXPECT_THAT(g.status().message(), HasSubstr("RTX 6000 Ada"));
  EXPECT_THAT(g.status().message(), HasSubstr("Blackwell"));
}

TEST(GpuCatalog, UnknownNameSuggestsCloseMatches) {
  GpuCatalog catalog(BuiltinData());
  auto g = catalog.Lookup("H300");
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(g.status().message(), HasSubstr("--gpu \"H300\""));
  EXPECT_THAT(g.status().message(), HasSubstr("close matches"));
  EXPECT_THAT(g.status().message(), HasSubstr("H100"));
}

TEST(GpuCatalog, UnknownPciIdIsAnError) {
  GpuCatalog catalog(BuiltinData());
  auto g = catalog.Lookup("0x9999");
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(g.status().message(), HasSubstr("0x9999"));
  EXPECT_FALSE(catalog.Lookup("0xZZZZ").ok());
  EXPECT_FALSE(catalog.Lookup("").ok());
}

TEST(GpuCatalog, NvmlNamesResolve) {
  GpuCatalog catalog(BuiltinData());
  struct {
    const char* nvml;
    const char* name;
  } cases[] = {{"NVIDIA H200", "H200 SXM 141GB"},
               {"Tesla T4", "Tesla T4"},
               {"NVIDIA A100-SXM4-80GB", "A100 SXM4 80GB"},
               {"NVIDIA A100 80GB PCIe", "A100 PCIe 80GB"},
               {"NVIDIA L40S", "L40S"},
               {"NVIDIA GeForce RTX 4090", "GeForce RTX 4090"},
               {"NVIDIA H100 80GB HBM3", "H100 SXM5 80GB"},
               {"Tesla V100-SXM2-16GB", "Tesla V100 SXM2 16GB"},
               {"NVIDIA RTX 6000 Ada Generation", "RTX 6000 Ada"},
               {"NVIDIA H100 NVL", "H100 NVL"}};
  for (const auto& c : cases) {
    auto g = catalog.LookupByName(c.nvml);
    ASSERT_TRUE(g.has_value()) << c.nvml;
    EXPECT_EQ(g->name, c.name) << c.nvml;
  }
  EXPECT_FALSE(catalog.LookupByName("Matrox G200").has_value());
}

TEST(GpuCatalog, PciIdLookupFindsEveryListedVariant) {
  GpuCatalog catalog(BuiltinData());
  EXPECT_EQ(catalog.LookupByPciId(0x20f1)->name, "A100 PCIe 40GB");
  EXPECT_EQ(catalog.LookupByPciId(0x102d)->arch, "Kepler");
  EXPECT_FALSE(catalog.LookupByPciId(0x0001).has_value());
}

TEST(GpuCatalog, UnknownNodeGpuKeepsItsComputeCapabilityAndGetsTheArchitecture) {
  GpuCatalog catalog(BuiltinData());
  GpuRef g = catalog.FromNode("Tesla M60", 0x13f2, 5, 2);
  EXPECT_FALSE(g.in_data_set);
  EXPECT_EQ(g.arch, "Maxwell");
  EXPECT_EQ(g.cc->ToString(), "5.2");
  EXPECT_EQ(g.segment, "");
  GpuRef h = catalog.FromNode("NVIDIA H200", 0x2335, 9, 0);
  EXPECT_TRUE(h.in_data_set);
  EXPECT_EQ(h.segment, "datacenter");
}

}  // namespace
}  // namespace gpunode::compat
