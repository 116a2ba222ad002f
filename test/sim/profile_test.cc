// Node profiles: the built-in ones parse; malformed ones fail with errors that name the key.
#include "sim/support/profile.h"

#include <algorithm>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/status_matchers.h"

namespace gpunode::sim {
namespace {

using ::testing::HasSubstr;

constexpr char kMinimal[] = R"(apiVersion: gpunode/v1
kind: NodeProfile
name: test-node
driver: {version: "580.95.05", cuda_version: "13.0"}
gpus:
  - name: NVIDIA H200
    bus_id: "0000:18:00.0"
    device_id: 0x2335
    memory: {total_mib: 143771}
    pcie: {gen: 5, width: 16}
    compute_capability: "9.0"
)";

std::string Replace(std::string text, const std::string& from, const std::string& to) {
  size_t pos = text.find(from);
  EXPECT_NE(pos, std::string::npos) << from;
  if (pos != std::string::npos) text.replace(pos, from.size(), to);
  return text;
}

std::string ErrorOf(std::string_view text) {
  auto p = ParseProfile(text, "t.yaml");
  EXPECT_FALSE(p.ok());
  if (p.ok()) return "";
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(p.status().message());
}

NodeProfile Builtin(const std::string& name) {
  auto src = ResolveProfile(name);
  EXPECT_OK(src) << src.status();
  auto p = ParseProfile(src->text, name);
  EXPECT_OK(p) << p.status();
  return p.ok() ? *p : NodeProfile{};
}

TEST(ProfileTest, EveryBuiltinProfileParses) {
  std::vector<std::string> names = BuiltinProfileNames();
  for (const char* expected : {"dgx-h200", "pcie-l40s-4", "t4-cloud", "a100-mig", "broken-mismatch",
                               "broken-no-driver", "broken-fallen-gpu", "broken-degraded-link"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), expected), names.end()) << expected;
  }
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  for (const std::string& name : names) {
    NodeProfile p = Builtin(name);
    EXPECT_EQ(p.name, name);
  }
}

TEST(ProfileTest, ResolveAcceptsBuiltinNamesWithOrWithoutExtension) {
  auto a = ResolveProfile("dgx-h200");
  auto b = ResolveProfile("dgx-h200.yaml");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->text, b->text);
  EXPECT_TRUE(a->file_path.empty());
}

TEST(ProfileTest, ResolveReadsAFileByPath) {
  std::string path = ::testing::TempDir() + "/resolve-test-node.yaml";
  std::ofstream(path) << kMinimal;
  auto src = ResolveProfile(path);
  ASSERT_OK(src) << src.status();
  EXPECT_EQ(src->name, "resolve-test-node");
  EXPECT_EQ(src->file_path, path);
  EXPECT_EQ(src->text, kMinimal);
}

TEST(ProfileTest, ResolveOfAnUnknownNameListsTheBuiltins) {
  auto src = ResolveProfile("no-such-node");
  ASSERT_FALSE(src.ok());
  EXPECT_EQ(src.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(src.status().message(), HasSubstr("dgx-h200"));
  EXPECT_THAT(src.status().message(), HasSubstr("no-such-node"));
}

TEST(ProfileTest, DgxH200IsEightHealthyH200sOnTwoNumaNodes) {
  NodeProfile p = Builtin("dgx-h200");
  ASSERT_EQ(p.gpus.size(), 8u);
  EXPECT_EQ(p.EffectiveInitError(), NVML_SUCCESS);
  EXPECT_EQ(p.EffectiveCudaInitError(), 0);
  EXPECT_EQ(p.driver.cuda_version, "13.0");
  EXPECT_EQ(p.host.module.flavor, ModuleFlavor::kOpen);
  for (size_t i = 0; i < 8; ++i) {
    const Gpu& g = p.gpus[i];
    EXPECT_EQ(g.name, "NVIDIA H200");
    EXPECT_EQ(g.device_id, 0x2335);
    EXPECT_EQ(g.memory_total_mib, 143771u);
    EXPECT_EQ(g.numa_node, i < 4 ? 0 : 1);
    EXPECT_EQ(g.nvlinks.size(), 18u);
    EXPECT_EQ(g.pcie.gen, 5u);
    EXPECT_EQ(g.pcie.width, 16u);
    EXPECT_TRUE(g.persistence && g.ecc.enabled && !g.lost);
    EXPECT_EQ(g.minor, i);
  }
  EXPECT_TRUE(p.host.files.empty());
  EXPECT_EQ(p.CommonAncestor(0, 3), NVML_TOPOLOGY_NODE);
  EXPECT_EQ(p.CommonAncestor(0, 4), NVML_TOPOLOGY_SYSTEM);
  EXPECT_EQ(p.CommonAncestor(2, 2), NVML_TOPOLOGY_INTERNAL);
}

TEST(ProfileTest, GpusBehindOneSwitchAreSingleApart) {
  NodeProfile p = Builtin("pcie-l40s-4");
  EXPECT_EQ(p.CommonAncestor(0, 1), NVML_TOPOLOGY_SINGLE);
  EXPECT_EQ(p.CommonAncestor(1, 2), NVML_TOPOLOGY_SYSTEM);
}

TEST(ProfileTest, BrokenProfilesDeriveTheirInitErrors) {
  EXPECT_EQ(Builtin("broken-mismatch").EffectiveInitError(), NVML_ERROR_LIB_RM_VERSION_MISMATCH);
  EXPECT_EQ(Builtin("broken-mismatch").EffectiveCudaInitError(), 803);
  EXPECT_EQ(Builtin("broken-no-driver").EffectiveInitError(), NVML_ERROR_DRIVER_NOT_LOADED);
  EXPECT_EQ(Builtin("broken-no-driver").EffectiveCudaInitError(), 100);
  NodeProfile fallen = Builtin("broken-fallen-gpu");
  EXPECT_TRUE(fallen.gpus[2].lost);
  ASSERT_EQ(fallen.gpus[2].events.size(), 1u);
  EXPECT_EQ(fallen.gpus[2].events[0].data, 79u);
  NodeProfile degraded = Builtin("broken-degraded-link");
  EXPECT_EQ(degraded.gpus[1].pcie.gen, 3u);
  EXPECT_EQ(degraded.gpus[1].pcie.width, 8u);
  EXPECT_EQ(degraded.gpus[1].pcie.max_gen, 5u);
  EXPECT_EQ(degraded.gpus[0].pcie.gen, 5u);
}

TEST(ProfileTest, AMismatchedModuleVersionImpliesVersionMismatch) {
  auto p = ParseProfile(Replace(kMinimal, "name: test-node\n",
                                "name: test-node\nhost: {module: {version: \"550.127.05\"}}\n"),
                        "t.yaml");
  ASSERT_OK(p) << p.status();
  EXPECT_EQ(p->EffectiveInitError(), NVML_ERROR_LIB_RM_VERSION_MISMATCH);
}

TEST(ProfileTest, MinimalProfileGetsDefaults) {
  auto p = ParseProfile(kMinimal, "t.yaml");
  ASSERT_OK(p) << p.status();
  const Gpu& g = p->gpus[0];
  EXPECT_EQ(g.pcie.max_gen, 5u);
  EXPECT_EQ(g.pcie.gpu_max_gen, 5u);
  EXPECT_EQ(g.pcie.max_width, 16u);
  EXPECT_EQ(g.cc_major, 9);
  EXPECT_EQ(g.cc_minor, 0);
  EXPECT_EQ(g.uuid.substr(0, 4), "GPU-");
  EXPECT_EQ(g.uuid.size(), 40u);
  EXPECT_EQ(p->driver.nvml_version, "13.580.95.05");
  EXPECT_EQ(p->host.module.version, "580.95.05");
  // Generated UUIDs are stable.
  EXPECT_EQ(ParseProfile(kMinimal, "again.yaml")->gpus[0].uuid, g.uuid);
}

TEST(ProfileTest, GpuDefaultsMergeKeyByKey) {
  std::string text = Replace(
      kMinimal, "gpus:\n", "gpu_defaults: {pcie: {gen: 4, width: 16}, temperature_c: 50}\ngpus:\n");
  text = Replace(text, "    pcie: {gen: 5, width: 16}\n", "    pcie: {gen: 3}\n");
  auto p = ParseProfile(text, "t.yaml");
  ASSERT_OK(p) << p.status();
  EXPECT_EQ(p->gpus[0].pcie.gen, 3u);
  EXPECT_EQ(p->gpus[0].pcie.width, 16u);
  EXPECT_EQ(p->gpus[0].temperature_c, 50u);
}

TEST(ProfileTest, JsonIsAccepted) {
  auto p = ParseProfile(
      R"({"apiVersion": "gpunode/v1", "kind": "NodeProfile", "name": "j",
          "driver": {"version": "535.183.01", "cuda_version": "12.2"},
          "gpus": [{"name": "Tesla T4", "bus_id": "0000:00:04.0", "device_id": 7864,
                    "memory": {"total_mib": 15360}, "pcie": {"gen": 3, "width": 16},
                    "compute_capability": "7.5"}]})",
      "j.json");
  ASSERT_OK(p) << p.status();
  EXPECT_EQ(p->gpus[0].device_id, 0x1eb8);
}

TEST(ProfileTest, WrongTypeNamesFileAndKeyPath) {
  EXPECT_EQ(ErrorOf(Replace(kMinimal, "gen: 5", "gen: x")),
            "profile t.yaml:10: gpus[0].pcie.gen: expected an integer 1-6, got \"x\"");
  EXPECT_THAT(ErrorOf(Replace(kMinimal, "gen: 5", "gen: 9")),
              HasSubstr("gpus[0].pcie.gen: expected an integer 1-6, got \"9\""));
  EXPECT_THAT(ErrorOf(Replace(kMinimal, "pcie: {gen: 5, width: 16}", "pcie: [5, 16]")),
              HasSubstr("t.yaml:10: gpus[0].pcie: expected a map, got a list"));
  EXPECT_THAT(ErrorOf(Replace(kMinimal, "gpus:\n", "host: {numa_nodes: two}\ngpus:\n")),
              HasSubstr("host.numa_nodes: expected an integer"));
}

TEST(ProfileTest, UnknownKeyIsRejectedWithItsPath) {
  EXPECT_THAT(ErrorOf(Replace(kMinimal, "    device_id:", "    colour: green\n    device_id:")),
              HasSubstr("profile t.yaml:8: gpus[0]: unknown key \"colour\" (known: name, uuid, bus_id, "));
  EXPECT_THAT(ErrorOf(Replace(kMinimal, "kind: NodeProfile\n", "kind: NodeProfile\nextra: 1\n")),
              HasSubstr("profile t.yaml:3: unknown key \"extra\" (known: apiVersion, kind, "));
}

TEST(ProfileTest, BadEnumValueListsTheChoices) {
  EXPECT_THAT(ErrorOf(Replace(kMinimal, "name: test-node\n",
                              "name: test-node\nhost: {module: {flavor: closed}}\n")),
              HasSubstr("host.module.flavor: expected one of open, proprietary, got \"closed\""));
  EXPECT_THAT(ErrorOf(Replace(kMinimal, "cuda_version: \"13.0\"",
                              "cuda_version: \"13.0\", init_error: BROKEN")),
              HasSubstr("driver.init_error: expected an NVML return code name"));
  EXPECT_THAT(
      ErrorOf(Replace(kMinimal, "    device_id:", "    unsupported: [warp_drive]\n    device_id:")),
      HasSubstr("gpus[0].unsupported[0]: expected one of"));
}

TEST(ProfileTest, MissingRequiredFieldsAreNamed) {
  EXPECT_THAT(ErrorOf(Replace(kMinimal, "version: \"580.95.05\", ", "")),
              HasSubstr("t.yaml:4: driver.version: expected a value, got nothing"));
  EXPECT_THAT(ErrorOf(Replace(kMinimal, "    bus_id: \"0000:18:00.0\"\n", "")),
              HasSubstr("t.yaml:6: gpus[0].bus_id: expected a value, got nothing"));
  EXPECT_THAT(ErrorOf(Replace(kMinimal, "apiVersion: gpunode/v1\n", "")),
              HasSubstr("t.yaml:1: apiVersion: expected a value, got nothing"));
}

TEST(ProfileTest, WrongApiVersionIsRejected) {
  EXPECT_THAT(ErrorOf(Replace(kMinimal, "gpunode/v1", "gpunode/v9")),
              HasSubstr("apiVersion: expected \"gpunode/v1\""));
}

TEST(ProfileTest, BadYamlGivesTheLine) {
  EXPECT_THAT(ErrorOf("apiVersion: gpunode/v1\nkind: [NodeProfile\n"),
              HasSubstr("profile t.yaml: line "));
}

TEST(ProfileTest, TruncatedProfileIsAnErrorNotACrash) {
  const std::string text = ResolveProfile("dgx-h200").value().text;
  for (size_t cut : {size_t{0}, size_t{10}, text.size() / 3, text.size() / 2, text.size() - 40}) {
    auto p = ParseProfile(text.substr(0, cut), "dgx.yaml");
    EXPECT_FALSE(p.ok()) << cut;
  }
}

TEST(ProfileTest, EmptyAndScalarDocumentsAreRejected) {
  EXPECT_THAT(ErrorOf(""), HasSubstr("expected a map at the top level, got null"));
  EXPECT_THAT(ErrorOf("42"), HasSubstr("expected a map at the top level"));
  EXPECT_THAT(ErrorOf("\x01\x02\xff{{{"), HasSubstr("profile t.yaml"));
}

TEST(ProfileTest, CrossChecksCatchDuplicatesAndInconsistencies) {
  std::string two = std::string(kMinimal) +
                    "  - {name: X, bus_id: \"0000:18:00.0\", device_id: 1, memory: {total_mib: 1}, "
                    "pcie: {gen: 1, width: 1}, compute_capability: \"8.0\"}\n";
  EXPECT_THAT(ErrorOf(two), HasSubstr("gpus[1].bus_id: duplicate bus id 0000:18:00.0"));
  EXPECT_THAT(ErrorOf(Replace(kMinimal, "{total_mib: 143771}", "{total_mib: 10, used_mib: 11}")),
              HasSubstr("t.yaml:9: gpus[0].memory: used_mib + reserved_mib exceeds total_mib"));
  EXPECT_THAT(ErrorOf(Replace(kMinimal, "    device_id:", "    numa_node: 1\n    device_id:")),
              HasSubstr("gpus[0].numa_node: the host has 1 NUMA node(s)"));
  EXPECT_THAT(
      ErrorOf(Replace(kMinimal, "    device_id:", "    mig: {enabled: true}\n    device_id:")),
      HasSubstr("gpus[0].mig.max_devices"));
  EXPECT_THAT(ErrorOf(Replace(kMinimal, "\"0000:18:00.0\"", "\"18:00\"")),
              HasSubstr("gpus[0].bus_id: expected a PCI bus id"));
}

TEST(ProfileTest, BusIdHelpersUseNvmlsFormats) {
  EXPECT_EQ(NvmlBusId("0000:b1:00.0"), "00000000:B1:00.0");
  EXPECT_EQ(NvmlLegacyBusId("0000:b1:00.0"), "0000:B1:00.0");
  unsigned d, b, dev, f;
  EXPECT_TRUE(ParseBusId("00000000:B1:1f.7", &d, &b, &dev, &f));
  EXPECT_EQ(b, 0xb1u);
  EXPECT_EQ(dev, 0x1fu);
  EXPECT_EQ(f, 7u);
  EXPECT_FALSE(ParseBusId("0000:b1:00", &d, &b, &dev, &f));
  EXPECT_EQ(NvmlReturnFromName("NVML_ERROR_GPU_IS_LOST"), NVML_ERROR_GPU_IS_LOST);
  EXPECT_EQ(NvmlReturnFromName("driver_not_loaded"), NVML_ERROR_DRIVER_NOT_LOADED);
}

}  // namespace
}  // namespace gpunode::sim
