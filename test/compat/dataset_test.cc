#include "src/compat/dataset.h"

#include <cstdio>
#include <fstream>
#include <string>

#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/base/embedded.h"
#include "test/compat/test_data.h"
#include "test/testing/status_matchers.h"

namespace gpunode::compat {
namespace {

using ::gpunode::compat::testing::BuiltinData;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;

std::string BuiltinText() {
  auto t = FindEmbedded("compat", "compat.yaml");
  return t ? std::string(*t) : std::string();
}

// The built-in text with one substring replaced (the replacement must happen).
std::string Edited(const std::string& from, const std::string& to) {
  std::string text = BuiltinText();
  size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

TEST(Dataset, BuiltinLoadsWithEveryFactSourced) {
  const CompatData& d = BuiltinData();
  EXPECT_GT(d.toolkits.size(), 50u);
  EXPECT_GT(d.gpus.size(), 40u);
  for (const Toolkit& t : d.toolkits) {
    EXPECT_FALSE(t.provenance.source.empty()) << t.cuda.ToString();
  }
  EXPECT_EQ(d.FindMinorCompat(12)->floor->ToString(), "525.60.13");
  EXPECT_EQ(d.FindMinorCompat(11)->floor->ToString(), "450.80.02");
  EXPECT_EQ(d.FindMinorCompat(13)->floor->ToString(), "580.65.06");
  EXPECT_FALSE(d.FindMinorCompat(10)->floor);
  EXPECT_EQ(d.FindBranch(535)->max_cuda->ToString(), "12.2");
  EXPECT_EQ(d.FindArchitecture(*Version::Parse("3.7"))->last_branch, 470);
  EXPECT_EQ(d.FindArchitecture(*Version::Parse("7.0"))->last_branch, 580);
  EXPECT_EQ(d.FindArchitecture(*Version::Parse("6.1"))->last_cuda_major, 12);
}

TEST(Dataset, MalformedYamlNamesFileAndLine) {
  auto d = ParseCompatData("apiVersion: gpunode/v1\nkind: [unclosed\n", "bad.yaml");
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(d.status().message(), HasSubstr("bad.yaml"));
  EXPECT_THAT(d.status().message(), HasSubstr("not valid YAML"));
}

TEST(Dataset, EmptyFileIsAnError) {
  auto d = ParseCompatData("", "empty.yaml");
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(d.status().message(), HasSubstr("empty.yaml: the file is empty"));
}

TEST(Dataset, UnknownKeyIsRejectedWithItsPath) {
  auto d = ParseCompatData(
      Edited("{cuda: \"12.4.1\", release:", "{cuda: \"12.4.1\", relaese: x, release:"), "x.yaml");
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(std::string(d.status().message()), MatchesRegex("x\\.yaml:[0-9]+: toolkits\\[[0-9]+\\]: unknown key \"relaese\" \\(known: .*"));
}

TEST(Dataset, BadVersionIsRejectedWithItsPath) {
  auto d = ParseCompatData(Edited("driver: \"550.54.15\"", "driver: \"550.x\""), "x.yaml");
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(d.status().message(), HasSubstr(".driver"));
  EXPECT_THAT(d.status().message(), HasSubstr("550.x"));
}

TEST(Dataset, UnknownSourceIdIsRejected) {
  auto d = ParseCompatData(Edited("source: CR135,", "source: NOPE,"), "x.yaml");
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(d.status().message(), HasSubstr("unknown source id \"NOPE\""));
}

TEST(Dataset, BadConfidenceIsRejected) {
  auto d = ParseCompatData(Edited("confidence: unconfirmed, note: \"toolkit exists",
                                  "confidence: sure, note: \"toolkit exists"),
                           "x.yaml");
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(d.status().message(), HasSubstr("confidence: expected one of official, derived, third_party, unconfirmed, got \"sure\""));
}

TEST(Dataset, WrongKindIsRejected) {
  auto d = ParseCompatData(Edited("kind: CompatData", "kind: Other"), "x.yaml");
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(d.status().message(), HasSubstr("kind"));
}

TEST(Dataset, ForwardCompatRowMustMatchTheColumns) {
  auto d = ParseCompatData(Edited("support: [C, C, C, C, C, C, N/A]", "support: [C, C]"), "x.yaml");
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(d.status().message(), HasSubstr("forward_compat.packages[0].support"));
}

TEST(Dataset, MissingRequiredKeyIsRejected) {
  auto d = ParseCompatData(Edited("{cuda: \"12.4.1\", release: \"12.4 Update 1\", ",
                                  "{release: \"12.4 Update 1\", "),
                           "x.yaml");
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(d.status().message(), HasSubstr("].cuda: expected a string, got nothing"));
}

TEST(Dataset, DataFileOverridesTheBuiltinFacts) {
  std::string path = ::testing::TempDir() + "/compat-override.yaml";
  {
    std::ofstream out(path);
    out << Edited("driver: \"550.54.14\"", "driver: \"550.99.99\"");
  }
  auto d = LoadFile(path);
  ASSERT_OK(d) << d.status();
  EXPECT_EQ(d->origin, path);
  bool found = false;
  for (const Toolkit& t : d->toolkits) {
    if (t.cuda.ToString() == "12.4.0") {
      found = true;
      EXPECT_EQ(t.driver->ToString(), "550.99.99");
    }
  }
  EXPECT_TRUE(found);
  std::remove(path.c_str());
}

TEST(Dataset, MissingDataFileIsNotFound) {
  auto d = LoadFile("/nonexistent/compat.yaml");
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(d.status().message(), HasSubstr("/nonexistent/compat.yaml"));
}

TEST(Dataset, SourceIdsSplitOnSemicolonsAndDropDetails) {
  EXPECT_THAT(CompatData::SourceIds("MVC - Table 1; T3 - floor; MVC"),
              ::testing::ElementsAre("MVC", "T3"));
}

}  // namespace
}  // namespace gpunode::compat
