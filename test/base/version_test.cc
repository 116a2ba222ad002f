#include "src/base/version.h"

#include "gtest/gtest.h"
#include "test/testing/status_matchers.h"

namespace gpunode {
namespace {

TEST(VersionTest, ParsesDriverVersionsKeepingTheirText) {
  auto v = Version::Parse("580.65.06");
  ASSERT_OK(v) << v.status();
  EXPECT_EQ(v->major(), 580u);
  EXPECT_EQ(v->minor(), 65u);
  EXPECT_EQ(v->patch(), 6u);
  EXPECT_EQ(v->ToString(), "580.65.06");
}

TEST(VersionTest, ComparesNumericallyComponentByComponent) {
  EXPECT_LT(*Version::Parse("580.65.06"), *Version::Parse("580.95.05"));
  EXPECT_LT(*Version::Parse("535.183.01"), *Version::Parse("550.54.14"));
  EXPECT_LT(*Version::Parse("9.2"), *Version::Parse("10.0"));
  EXPECT_GT(*Version::Parse("570.124.06"), *Version::Parse("570.26"));
}

TEST(VersionTest, MissingTrailingComponentsCountAsZero) {
  EXPECT_EQ(*Version::Parse("12.4"), *Version::Parse("12.4.0"));
  EXPECT_LT(*Version::Parse("12.4"), *Version::Parse("12.4.1"));
}

TEST(VersionTest, RejectsMalformedTextNamingTheInput) {
  for (const char* bad : {"", "abc", "12.x", "1..2", "12.", ".12", "v12.4", "12.4 ", "1.2.3.4.5.6",
                          "1234567890.1", "-1.0", "12,4"}) {
    auto v = Version::Parse(bad, "--driver");
    EXPECT_FALSE(v.ok()) << bad;
    EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(v.status().message().find("--driver"), absl::string_view::npos) << v.status();
  }
}

TEST(VersionTest, DecodesCudaDriverIntegers) {
  EXPECT_EQ(Version::FromCudaInt(13000).ToString(), "13.0");
  EXPECT_EQ(Version::FromCudaInt(12040).ToString(), "12.4");
  EXPECT_EQ(Version::FromCudaInt(11080).ToString(), "11.8");
}

TEST(VersionTest, TruncateKeepsLeadingComponents) {
  EXPECT_EQ(Version::Parse("12.4.131")->Truncate(2).ToString(), "12.4");
}

}  // namespace
}  // namespace gpunode
