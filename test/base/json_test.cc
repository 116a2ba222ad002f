#include "src/base/json.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/base/yaml.h"
#include "test/testing/status_matchers.h"

namespace gpunode {
namespace {

using ::testing::HasSubstr;

TEST(JsonTest, KeepsKeyOrderAndTheLastDuplicateWins) {
  auto doc = ParseOrderedJson(R"({"b": 1, "a": 2, "b": 3})", "t.json");
  ASSERT_OK(doc) << doc.status();
  EXPECT_EQ(DumpJson(*doc), R"({"b":3,"a":2})");
  auto plain = ParseJson(R"({"b": 1, "b": [true, null, 1.5, "x"]})", "t.json");
  ASSERT_OK(plain);
  EXPECT_EQ(DumpJson(*plain), R"({"b":[true,null,1.5,"x"]})");
}

TEST(JsonTest, LargeObjectsWithDuplicatesStayCorrect) {
  std::string text = "{";
  for (int i = 0; i < 1000; ++i) text += "\"k" + std::to_string(i % 500) + "\": " + std::to_string(i) + ",";
  text += "\"end\": 0}";
  auto doc = ParseOrderedJson(text, "t.json");
  ASSERT_OK(doc);
  EXPECT_EQ(doc->size(), 501u);
  EXPECT_EQ((*doc)["k0"], 500);
  EXPECT_EQ(doc->begin().key(), "k0");
}

TEST(JsonTest, ErrorsNameTheSourceAndThePlace) {
  auto bad = ParseJson("{\n  \"a\": tru\n}", "/etc/docker/daemon.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("/etc/docker/daemon.json: line 3, column 0: not valid JSON: syntax error"));
  EXPECT_FALSE(ParseJson("", "empty").ok());
  EXPECT_FALSE(ParseJson("{} {}", "two").ok());
}

// Issue 11, row 6: 100 000 levels of nesting is an error, not a stack overflow.
TEST(JsonTest, NestingDeeperThanTheLimitIsRefused) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  for (auto st : {ParseJson(deep, "config.json").status(), ParseOrderedJson(deep, "config.json").status()}) {
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(st.message(), HasSubstr("config.json: JSON nested deeper than 128 levels"));
  }
  EXPECT_OK(ParseJson(std::string(128, '[') + std::string(128, ']'), "ok"));
  EXPECT_FALSE(ParseJson(std::string(129, '[') + std::string(129, ']'), "ok").ok());
}

// Issue 11, row 7: invalid UTF-8 is found, and DumpJson never throws on it.
TEST(JsonTest, InvalidUtf8IsRejectedOnInputAndReplacedOnOutput) {
  EXPECT_FALSE(ParseJson("{\"a\": \"\xff\"}", "t.json").ok());
  nlohmann::json j = std::string("bad \xc3\x28 byte");
  EXPECT_EQ(DumpJson(j), "\"bad \xEF\xBF\xBD( byte\"");
  EXPECT_TRUE(IsValidUtf8("plain ascii, caf\xc3\xa9, \xf0\x9f\x98\x80"));
  EXPECT_FALSE(IsValidUtf8("\xc0\xaf"));          // overlong
  EXPECT_FALSE(IsValidUtf8("\xed\xa0\x80"));      // surrogate
  EXPECT_FALSE(IsValidUtf8("\xf4\x90\x80\x80"));  // > U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\xe2\x82"));          // truncated
}

TEST(YamlTest, NestingAndExpansionAreBounded) {
  auto deep_flow = LoadYaml("a: " + std::string(100000, '[') + std::string(100000, ']'), "spec.yaml");
  EXPECT_EQ(deep_flow.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(deep_flow.status().message(), HasSubstr("spec.yaml"));
  std::string block;
  for (int i = 0; i < 300; ++i) block += "- ";
  block += "x\n";
  auto deep_block = LoadYaml(block, "spec.yaml");
  EXPECT_EQ(deep_block.status().code(), absl::StatusCode::kInvalidArgument);
  // Billion laughs: each level doubles through aliases.
  std::string laughs = "a0: &a0 [x, x]\n";
  for (int i = 1; i < 40; ++i) {
    laughs += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [*a" + std::to_string(i - 1) + ", *a" +
              std::to_string(i - 1) + "]\n";
  }
  auto bomb = LoadYaml(laughs, "bomb.yaml");
  EXPECT_EQ(bomb.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bomb.status().message(), HasSubstr("aliases"));
  auto bad = LoadYaml("a: [1, 2\n", "bad.yaml");
  EXPECT_THAT(bad.status().message(), HasSubstr("bad.yaml: line 2"));
  EXPECT_OK(LoadYaml("a: {b: [1, 2]}\n", "ok.yaml"));
}

}  // namespace
}  // namespace gpunode
