#include "src/base/yaml_reader.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "src/base/yaml.h"
#include "src/base/yaml_emitter.h"
#include "test/testing/status_matchers.h"

namespace gpunode {
namespace {

using ::testing::HasSubstr;

YamlValue Load(const std::string& text, const std::string& source = "config.yaml") {
  auto node = LoadYaml(text, source);
  EXPECT_OK(node.status());
  return YamlValue(node.ok() ? *node : YAML::Node(), source);
}

std::string ErrorOf(const Status& st) { return st.ok() ? "(ok)" : std::string(st.message()); }
template <typename T>
std::string ErrorOf(const StatusOr<T>& v) {
  return ErrorOf(v.status());
}

constexpr char kDoc[] = R"(gpus:
  - name: a
    memory_mib: 1024
  - name: b
    memory_mib: lots
sharing:
  timeSlicing:
    renameByDefault: true
    replica: 2
)";

TEST(YamlReaderTest, ErrorsNameSourceLineKeyPathAndExpectation) {
  YamlValue doc = Load(kDoc, "profile.yaml");
  EXPECT_EQ(ErrorOf(doc.Child("gpus").Item(1).Child("memory_mib").Int(0, 1 << 20)),
            "profile.yaml:5: gpus[1].memory_mib: expected an integer 0-1048576, got \"lots\"");
  EXPECT_EQ(ErrorOf(doc.Child("gpus").Item(0).Child("name").Int()),
            "profile.yaml:2: gpus[0].name: expected an integer, got \"a\"");
}

TEST(YamlReaderTest, UnknownKeysNameTheMapTheKeyAndTheKnownOnes) {
  YamlValue ts = Load(kDoc).Child("sharing").Child("timeSlicing");
  EXPECT_EQ(ErrorOf(ts.ExpectMap({"renameByDefault", "failRequestsGreaterThanOne", "resources"})),
            "config.yaml:9: sharing.timeSlicing: unknown key \"replica\" (known: renameByDefault, "
            "failRequestsGreaterThanOne, resources)");
  EXPECT_OK(ts.ExpectMap({"renameByDefault", "replica"}));
  EXPECT_OK(ts.ExpectMap());
  std::vector<std::string> known = {"renameByDefault"};
  EXPECT_THAT(ErrorOf(ts.ExpectMap(known)), HasSubstr("unknown key \"replica\" (known: renameByDefault)"));
}

TEST(YamlReaderTest, AKeyGivenTwiceIsRefusedInEveryMap) {
  const std::string text = "users:\n  bob: a\n  alice: b\n  bob: c\n";
  EXPECT_EQ(ErrorOf(Load(text).Child("users").ExpectMap()), "config.yaml:4: users: key \"bob\" given twice");
  EXPECT_EQ(ErrorOf(Load(text).Child("users").ExpectMap({"bob", "alice"})),
            "config.yaml:4: users: key \"bob\" given twice");
  EXPECT_THAT(ErrorOf(Load(text).Child("users").ForEachEntry([](const std::string&, const YamlValue&) {
    return absl::OkStatus();
  })),
              HasSubstr("key \"bob\" given twice"));
}

TEST(YamlReaderTest, TheRootHasNoKeyPath) {
  EXPECT_EQ(ErrorOf(Load("a: 1\nb: 2\n").ExpectMap({"a"})), "config.yaml:2: unknown key \"b\" (known: a)");
  EXPECT_EQ(ErrorOf(Load("- 1\n").ExpectMap({"a"})), "config.yaml:1: expected a map, got a list");
  EXPECT_EQ(ErrorOf(Load("{[1]: 2}\n").ExpectMap({"a"})), "config.yaml:1: expected a plain string as key, got a list");
}

TEST(YamlReaderTest, AScalarWhereAMapOrListIsExpected) {
  YamlValue doc = Load("sharing: yes\nlist: 3\n");
  EXPECT_EQ(ErrorOf(doc.Child("sharing").ExpectMap({"mps"})), "config.yaml:1: sharing: expected a map, got \"yes\"");
  EXPECT_EQ(ErrorOf(doc.Child("list").ExpectList()), "config.yaml:2: list: expected a list, got \"3\"");
  EXPECT_EQ(ErrorOf(Load("l: [1, 2, 3]\n").Child("l").ExpectList(2)),
            "config.yaml:1: l: expected at most 2 items, got 3");
}

TEST(YamlReaderTest, MissingKeysAreNothingAtTheParentsLine) {
  YamlValue doc = Load("a: 1\nb:\n  c: 2\n");
  YamlValue missing = doc.Child("b").Child("d");
  EXPECT_FALSE(missing.IsSet());
  EXPECT_EQ(missing.path(), "b.d");
  EXPECT_EQ(ErrorOf(missing.String()), "config.yaml:3: b.d: expected a string, got nothing");
  // A child of a scalar, or past the end of a list, is nothing too (no exception).
  EXPECT_FALSE(doc.Child("a").Child("x").IsSet());
  EXPECT_FALSE(doc.Child("a").Item(3).IsSet());
  EXPECT_EQ(doc.Child("a").Item(3).path(), "a[3]");
  EXPECT_FALSE(doc.Has("zzz"));
  EXPECT_TRUE(doc.Has("a"));
  EXPECT_FALSE(Load("a: ~\n").Has("a"));
}

TEST(YamlReaderTest, Strings) {
  YamlValue doc = Load("s: text\nn: 12\nl: [a, b]\nm: {x: 1}\nbad: [a, [b]]\n");
  EXPECT_EQ(*doc.Child("s").String(), "text");
  EXPECT_EQ(*doc.Child("n").String(), "12");
  EXPECT_EQ(ErrorOf(doc.Child("l").String()), "config.yaml:3: l: expected a string, got a list");
  EXPECT_EQ(ErrorOf(doc.Child("m").String()), "config.yaml:4: m: expected a string, got a map");
  EXPECT_THAT(*doc.Child("l").Strings(), ::testing::ElementsAre("a", "b"));
  EXPECT_TRUE(doc.Child("none").Strings()->empty());
  EXPECT_EQ(ErrorOf(doc.Child("bad").Strings()), "config.yaml:5: bad[1]: expected a string, got a list");
  EXPECT_EQ(ErrorOf(doc.Child("s").Strings()), "config.yaml:1: s: expected a list of strings, got \"text\"");
}

TEST(YamlReaderTest, BooleansInEachStyle) {
  YamlValue doc = Load("t: T\ny: yes\ntrue_: true\nno_: maybe\n");
  EXPECT_TRUE(*doc.Child("t").Bool());                        // Go: T
  EXPECT_FALSE(doc.Child("t").Bool(YamlBool::kYaml11).ok());  // yaml-cpp: no T
  EXPECT_FALSE(doc.Child("y").Bool().ok());                   // Go: no yes
  EXPECT_TRUE(*doc.Child("y").Bool(YamlBool::kYaml11));
  EXPECT_FALSE(doc.Child("y").Bool(YamlBool::kStrict).ok());
  EXPECT_TRUE(*doc.Child("true_").Bool(YamlBool::kStrict));
  EXPECT_EQ(ErrorOf(doc.Child("no_").Bool()), "config.yaml:4: no_: expected true or false, got \"maybe\"");
}

TEST(YamlReaderTest, IntegersAndTheirRanges) {
  YamlValue doc = Load("d: 42\nh: 0x1F\nneg: -3\nbig: 99999999999999999999\nf: 1.5\n");
  EXPECT_EQ(*doc.Child("d").Int(), 42);
  EXPECT_EQ(*doc.Child("h").Int(), 31);
  EXPECT_EQ(*doc.Child("neg").Int(), -3);
  EXPECT_EQ(ErrorOf(doc.Child("neg").Int(0, 10)), "config.yaml:3: neg: expected an integer 0-10, got \"-3\"");
  EXPECT_EQ(ErrorOf(doc.Child("d").Int(0, 10)), "config.yaml:1: d: expected an integer 0-10, got \"42\"");
  EXPECT_FALSE(doc.Child("big").Int().ok());
  EXPECT_FALSE(doc.Child("f").Int().ok());
  int small = 7;
  EXPECT_OK(doc.GetInt("missing", &small, 0, 100));
  EXPECT_EQ(small, 7);
  EXPECT_OK(doc.GetInt("d", &small, 0, 100));
  EXPECT_EQ(small, 42);
}

TEST(YamlReaderTest, Doubles) {
  YamlValue doc = Load("p: 2.5\nq: high\n");
  EXPECT_DOUBLE_EQ(*doc.Child("p").Double(), 2.5);
  EXPECT_EQ(ErrorOf(doc.Child("p").Double(0, 1)), "config.yaml:1: p: expected a number 0-1, got \"2.5\"");
  EXPECT_EQ(ErrorOf(doc.Child("q").Double()), "config.yaml:2: q: expected a number, got \"high\"");
  double d = 0;
  EXPECT_OK(doc.GetDouble("p", &d, 0, 10));
  EXPECT_DOUBLE_EQ(d, 2.5);
}

TEST(YamlReaderTest, OptionalGettersKeepDefaultsAndCheckTypes) {
  YamlValue doc = Load("name: x\nflag: false\nlist: [a]\nnull_: ~\n");
  std::string s = "default";
  bool b = true;
  std::vector<std::string> l;
  EXPECT_OK(doc.Get("null_", &s));
  EXPECT_EQ(s, "default");
  EXPECT_OK(doc.Get("name", &s));
  EXPECT_OK(doc.Get("flag", &b));
  EXPECT_OK(doc.Get("list", &l));
  EXPECT_EQ(s, "x");
  EXPECT_FALSE(b);
  EXPECT_EQ(l.size(), 1u);
  EXPECT_EQ(ErrorOf(doc.Get("list", &s)), "config.yaml:3: list: expected a string, got a list");
}

TEST(YamlReaderTest, ItemsAndEntriesCarryTheirPathsAndLines) {
  YamlValue doc = Load("gpus:\n  - {id: 1}\n  - {id: x}\nfiles:\n  /a: one\n  /b: [2]\n");
  EXPECT_EQ(ErrorOf(doc.Child("gpus").ForEachItem([](const YamlValue& g) { return g.Child("id").Int().status(); })),
            "config.yaml:3: gpus[1].id: expected an integer, got \"x\"");
  EXPECT_EQ(ErrorOf(doc.Child("files").ForEachEntry([](const std::string&, const YamlValue& v) {
              return v.String().status();
            })),
            "config.yaml:6: files./b: expected a string, got a list");
  EXPECT_EQ(ErrorOf(doc.Child("files").ForEachItem([](const YamlValue&) { return absl::OkStatus(); })),
            "config.yaml:5: files: expected a list, got a map");
}

TEST(YamlReaderTest, DeepNestingIsRefusedByTheLoaderAndPathsStayReadable) {
  std::string deep;
  for (int i = 0; i < 200; ++i) deep += "[";
  EXPECT_FALSE(LoadYaml(deep, "deep.yaml").ok());
  YamlValue doc = Load("a:\n  b:\n    - c:\n        d: [1, {e: bad}]\n");
  YamlValue e = doc.Child("a").Child("b").Item(0).Child("c").Child("d").Item(1).Child("e");
  EXPECT_EQ(ErrorOf(e.Int()), "config.yaml:4: a.b[0].c.d[1].e: expected an integer, got \"bad\"");
}

TEST(YamlReaderTest, QuoteEscapesAndCuts) {
  EXPECT_EQ(YamlQuote("a\"b\\c\n"), "\"a\\\"b\\\\c\\x0a\"");
  EXPECT_EQ(YamlQuote(std::string(70, 'x')), "\"" + std::string(60, 'x') + "...\"");
  EXPECT_EQ(YamlDescribe(YAML::Node(YAML::NodeType::Undefined)), "nothing");
  EXPECT_EQ(YamlDescribe(YAML::Node(YAML::NodeType::Null)), "null");
}

TEST(YamlEmitterTest, WritesJsonAsYaml) {
  nlohmann::ordered_json doc = {{"b", "true"}, {"a", {1, 2.5, false, nullptr}}, {"m", nlohmann::ordered_json::object()}};
  EXPECT_EQ(JsonToYaml(doc), "b: \"true\"\na:\n  - 1\n  - 2.5\n  - false\n  - ~\nm:\n  {}");
}

}  // namespace
}  // namespace gpunode
