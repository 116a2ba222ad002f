// The CDI spec model: minimum versions, the strict parser, the validator, rendering round trips.
#include "src/container/cdi_spec.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/status_matchers.h"

namespace gpunode::cdi {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::MatchesRegex;

constexpr char kGood[] = R"(---
cdiVersion: "0.5.0"
kind: "nvidia.com/gpu"
devices:
  - name: "0"
    containerEdits:
      deviceNodes:
        - path: "/dev/nvidia0"
          major: 195
          minor: 0
  - name: "all"
    containerEdits:
      deviceNodes:
        - path: "/dev/nvidia0"
containerEdits:
  env: ["NVIDIA_VISIBLE_DEVICES=void"]
  hooks:
    - hookName: createContainer
      path: /usr/bin/gpunode
      args: [gpunode, cdi, hook, update-ldcache, --folder, /usr/lib/x86_64-linux-gnu]
  mounts:
    - hostPath: /usr/lib/x86_64-linux-gnu/libcuda.so.580.95.05
      containerPath: /usr/lib/x86_64-linux-gnu/libcuda.so.580.95.05
      options: [ro, nosuid, nodev, rbind, rprivate]
)";

Spec Good() {
  auto spec = ParseSpec(kGood, "good.yaml");
  EXPECT_OK(spec) << spec.status();
  return *spec;
}

std::string ProblemsOf(absl::string_view text) {
  auto spec = ParseSpec(text, "t.yaml");
  if (!spec.ok()) return std::string(spec.status().message());
  Status st = ValidateSpec(*spec, "t.yaml");
  return st.ok() ? "" : std::string(st.message());
}

std::string Replace(std::string s, absl::string_view from, absl::string_view to) {
  size_t at = s.find(std::string(from));
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) s.replace(at, from.size(), std::string(to));
  return s;
}

TEST(CdiSpecTest, AGoodSpecParsesAndValidates) {
  Spec spec = Good();
  EXPECT_THAT(SpecProblems(spec), IsEmpty());
  EXPECT_THAT(QualifiedNames(spec), ElementsAre("nvidia.com/gpu=0", "nvidia.com/gpu=all"));
  ASSERT_EQ(spec.devices[0].edits.device_nodes.size(), 1u);
  EXPECT_EQ(spec.devices[0].edits.device_nodes[0].major, 195);
  EXPECT_EQ(spec.edits.hooks[0].args.size(), 6u);
}

TEST(CdiSpecTest, YamlAndJsonRenderingsParseBackToTheSameSpec) {
  Spec spec = Good();
  auto from_yaml = ParseSpec(RenderSpecYaml(spec), "y");
  auto from_json = ParseSpec(RenderSpecJson(spec), "j");
  ASSERT_OK(from_yaml) << from_yaml.status();
  ASSERT_OK(from_json) << from_json.status();
  EXPECT_EQ(SpecToJson(*from_yaml), SpecToJson(spec));
  EXPECT_EQ(SpecToJson(*from_json), SpecToJson(spec));
  EXPECT_EQ(RenderSpecYaml(spec).substr(0, 4), "---\n");
}

TEST(CdiSpecTest, TheMinimumVersionFollowsTheFieldsUsed) {
  Spec spec = Good();
  EXPECT_EQ(MinimumVersion(spec).version, "0.5.0");  // device "0" starts with a digit
  spec.devices[0].name = "gpu0";
  EXPECT_EQ(MinimumVersion(spec).version, "0.3.0");
  spec.edits.mounts[0].type = "bind";
  EXPECT_EQ(MinimumVersion(spec).version, "0.4.0");
  spec.devices[1].edits.device_nodes[0].host_path = "/host/dev/nvidia0";
  EXPECT_EQ(MinimumVersion(spec).version, "0.5.0");
  spec.annotations["a"] = "b";
  EXPECT_EQ(MinimumVersion(spec).version, "0.6.0");
  spec.edits.additional_gids.push_back(44);
  EXPECT_EQ(MinimumVersion(spec).version, "0.7.0");
  spec.devices[0].edits.net_devices.push_back({"eth0", "net0"});
  EXPECT_EQ(MinimumVersion(spec).version, "1.1.0");
}

TEST(CdiSpecTest, UnknownFieldsAreRejectedWithTheirPath) {
  EXPECT_THAT(ProblemsOf(Replace(kGood, "options:", "option:")),
              AllOf(HasSubstr("t.yaml:"), HasSubstr(": containerEdits.mounts[0]: unknown key \"option\" (known: "
                                                    "hostPath, containerPath, options, type)")));
  EXPECT_THAT(ProblemsOf(Replace(kGood, "          major: 195", "          majr: 195")),
              HasSubstr("t.yaml:9: devices[0].containerEdits.deviceNodes[0]: unknown key \"majr\""));
  EXPECT_THAT(ProblemsOf(std::string(kGood) + "extra: 1\n"), MatchesRegex("t\\.yaml:[0-9]+: unknown key \"extra\" \\(known: .*"));
}

TEST(CdiSpecTest, BadNamesAreRejected) {
  EXPECT_THAT(ProblemsOf(Replace(kGood, "name: \"0\"", "name: \"gpu/0\"")),
              HasSubstr("devices[0].name: device name \"gpu/0\" has an invalid character '/'"));
  EXPECT_THAT(ProblemsOf(Replace(kGood, "name: \"0\"", "name: \"0:\"")), HasSubstr("must end with a letter or digit"));
  EXPECT_THAT(ProblemsOf(Replace(kGood, "name: \"0\"", "name: \"all\"")),
              HasSubstr("devices[1].name: device \"all\" is defined more than once"));
  EXPECT_THAT(ProblemsOf(Replace(kGood, "kind: \"nvidia.com/gpu\"", "kind: \"nvidia.com\"")),
              HasSubstr("kind: kind \"nvidia.com\" is not vendor/class"));
  EXPECT_THAT(ProblemsOf(Replace(kGood, "kind: \"nvidia.com/gpu\"", "kind: \"1nvidia.com/gpu\"")),
              HasSubstr("vendor \"1nvidia.com\" must start with a letter"));
  EXPECT_EQ(CheckDeviceName("0:1"), "");
  EXPECT_EQ(CheckDeviceName("MIG-3566fd0d-6599-4b29-a558-a0b80cee56ab"), "");
}

TEST(CdiSpecTest, AnUnquotedNumericNameIsRejectedBecauseGoRuntimesWouldReadANumber) {
  EXPECT_THAT(ProblemsOf(Replace(kGood, "name: \"0\"", "name: 0")),
              HasSubstr("devices[0].name: expected a string, got the unquoted value 0"));
}

TEST(CdiSpecTest, BadOrTooLowVersionsAreRejected) {
  EXPECT_THAT(ProblemsOf(Replace(kGood, "\"0.5.0\"", "\"0.9.0\"")),
              HasSubstr("cdiVersion: \"0.9.0\" is not a known CDI version"));
  EXPECT_THAT(ProblemsOf(Replace(kGood, "\"0.5.0\"", "\"0.4.0\"")),
              HasSubstr("cdiVersion: 0.4.0 is too low: device name \"0\" starts with a digit, which needs 0.5.0"));
  EXPECT_EQ(ProblemsOf(Replace(kGood, "\"0.5.0\"", "\"v1.1.0\"")), "");
  EXPECT_THAT(ProblemsOf(Replace(kGood, "cdiVersion: \"0.5.0\"\n", "")), HasSubstr("cdiVersion: required"));
}

TEST(CdiSpecTest, HooksEnvAndDevicesAreChecked) {
  EXPECT_THAT(ProblemsOf(Replace(kGood, "hookName: createContainer", "hookName: preStart")),
              HasSubstr("containerEdits.hooks[0].hookName: \"preStart\" is not one of prestart"));
  EXPECT_THAT(ProblemsOf(Replace(kGood, "path: /usr/bin/gpunode", "path: gpunode")), HasSubstr("is not absolute"));
  EXPECT_THAT(ProblemsOf(Replace(kGood, "NVIDIA_VISIBLE_DEVICES=void", "=void")),
              HasSubstr("containerEdits.env[0]: \"=void\" is not NAME=VALUE"));
  EXPECT_THAT(ProblemsOf(Replace(kGood, "          major: 195", "          type: x")),
              HasSubstr("deviceNodes[0].type: \"x\" is not one of b, c, u, p"));
  EXPECT_THAT(ProblemsOf(Replace(kGood, "major: 195", "major: lots")),
              HasSubstr("t.yaml:9: devices[0].containerEdits.deviceNodes[0].major: expected an integer, got \"lots\""));
  EXPECT_THAT(ProblemsOf("cdiVersion: \"0.3.0\"\nkind: a.com/b\ndevices: []\n"),
              HasSubstr("devices: a spec needs at least one device"));
  EXPECT_THAT(ProblemsOf("cdiVersion: \"0.3.0\"\nkind: a.com/b\ndevices: [{name: x, containerEdits: {}}]\n"),
              HasSubstr("devices[0].containerEdits: a device needs at least one edit"));
}

TEST(CdiSpecTest, MalformedDocumentsFailWithoutThrowing) {
  for (const char* text : {"", "[", "{a: [}", "- 1\n- 2\n", "cdiVersion: [1]\n", "\t\x01"}) {
    auto spec = ParseSpec(text, "bad.yaml");
    EXPECT_FALSE(spec.ok()) << text;
    EXPECT_THAT(spec.status().message(), HasSubstr("bad.yaml")) << text;
  }
}

}  // namespace
}  // namespace gpunode::cdi
