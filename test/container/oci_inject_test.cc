// GPU injection into OCI configs: what a container asks for, spec resolution, and the edits as the
// CDI library applies them. The specs are the golden dgx-h200 spec (test/fixtures/cdi) and small
// hand-made ones; the host's device nodes are the one thing replaced (a stat function standing in
// for lstat on /dev/nvidia*, which this machine does not have), except where /dev/null is used.
#include "src/container/oci_inject.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/status_matchers.h"

namespace gpunode::container {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::string ReadAll(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

Json ConfigWithEnv(std::vector<std::string> env) {
  Json c = Json::parse(R"({
    "ociVersion": "1.0.2",
    "process": {"user": {"uid": 0, "gid": 0}, "args": ["sh"], "env": ["PATH=/bin"]},
    "root": {"path": "rootfs"},
    "mounts": [
      {"destination": "/proc", "type": "proc", "source": "proc"},
      {"destination": "/dev", "type": "tmpfs", "source": "tmpfs"},
      {"destination": "/dev/pts", "type": "devpts", "source": "devpts"}
    ],
    "linux": {"resources": {"devices": [{"allow": false, "access": "rwm"}]}}
  })");
  for (auto& e : env) c["process"]["env"].push_back(e);
  return c;
}

StatusOr<HostNodeInfo> FakeNvidiaNodes(const std::string& path) {
  // /dev/nvidia<N> -> c 195:N, /dev/nvidiactl -> c 195:255, other /dev/nvidia-* -> c 511:<len>.
  HostNodeInfo info{"c", 195, 0, 0666};
  const std::string base = fs::path(path).filename().string();
  if (base == "nvidiactl") {
    info.minor = 255;
  } else if (base.rfind("nvidia", 0) == 0 && base.size() > 6 && std::isdigit(static_cast<unsigned char>(base[6]))) {
    info.minor = std::stoi(base.substr(6));
  } else if (base.rfind("nvidia", 0) == 0) {
    info.major = 511;
    info.minor = static_cast<int64_t>(base.size());
  } else {
    return absl::NotFoundError(absl::StrCat("stat ", path, ": no such file"));
  }
  return info;
}

SpecRegistry GoldenRegistry() {
  const fs::path golden = fs::path(GPUNODE_SOURCE_DIR) / "test/fixtures/cdi/dgx-h200.yaml";
  auto spec = cdi::ParseSpec(ReadAll(golden), golden.string());
  EXPECT_OK(spec) << spec.status();
  SpecRegistry r;
  r.Add(*spec, golden.string());
  return r;
}

std::vector<std::string> DevicePaths(const Json& config) {
  std::vector<std::string> out;
  if (!config.contains("linux") || !config["linux"].contains("devices")) return out;
  for (const Json& d : config["linux"]["devices"]) out.push_back(d["path"].get<std::string>());
  return out;
}

// Step 1 for a container whose NVIDIA_VISIBLE_DEVICES is believed (oci_request_test.cc tests when it is).
StatusOr<DeviceRequest> Request(const Json& config) {
  return RequestedDevices(config, "nvidia.com/gpu", RequestPolicy{.accept_envvar_when_unprivileged = true});
}

std::vector<std::string> Env(const Json& config) {
  return config["process"]["env"].get<std::vector<std::string>>();
}

// --- the edits -----------------------------------------------------------------------------------

TEST(ApplyEditsTest, DeviceNodesGetTheirHostNumbersAndACgroupRuleAndReplaceTheSamePath) {
  Json c = ConfigWithEnv({});
  c["linux"]["devices"] = Json::array({{{"path", "/dev/nvidia0"}, {"type", "c"}, {"major", 1}, {"minor", 3}}});
  cdi::ContainerEdits edits;
  edits.device_nodes.push_back({.path = "/dev/nvidia0"});
  edits.device_nodes.push_back({.path = "/dev/nvidia-uvm", .permissions = "rw"});
  ASSERT_OK(ApplyContainerEdits(c, edits, FakeNvidiaNodes));
  EXPECT_THAT(DevicePaths(c), ElementsAre("/dev/nvidia0", "/dev/nvidia-uvm"));
  EXPECT_EQ(c["linux"]["devices"][0]["major"], 195);
  EXPECT_EQ(c["linux"]["devices"][0]["minor"], 0);
  EXPECT_EQ(c["linux"]["devices"][0]["fileMode"], 0666);
  const Json& rules = c["linux"]["resources"]["devices"];
  ASSERT_EQ(rules.size(), 3u);  // the deny-all first, then ours
  EXPECT_EQ(rules[1], Json::parse(R"({"allow":true,"type":"c","major":195,"minor":0,"access":"rwm"})"));
  EXPECT_EQ(rules[2]["access"], "rw");
}

TEST(ApplyEditsTest, ARealHostNodeIsStatted) {
  Json c = ConfigWithEnv({});
  cdi::ContainerEdits edits;
  edits.device_nodes.push_back({.path = "/dev/gpunode-null", .host_path = "/dev/null"});
  ASSERT_OK(ApplyContainerEdits(c, edits));
  const Json& d = c["linux"]["devices"][0];
  EXPECT_EQ(d["path"], "/dev/gpunode-null");
  EXPECT_EQ(d["type"], "c");
  EXPECT_EQ(d["major"], 1);
  EXPECT_EQ(d["minor"], 3);
}

TEST(ApplyEditsTest, AMissingHostNodeWithoutNumbersIsAnError) {
  Json c = ConfigWithEnv({});
  cdi::ContainerEdits edits;
  edits.device_nodes.push_back({.path = "/dev/gpunode-does-not-exist"});
  Status st = ApplyContainerEdits(c, edits);
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.message(), HasSubstr("failed to stat CDI host device /dev/gpunode-does-not-exist"));
}

TEST(ApplyEditsTest, ATypeThatDisagreesWithTheHostIsAnError) {
  Json c = ConfigWithEnv({});
  cdi::ContainerEdits edits;
  edits.device_nodes.push_back({.path = "/dev/null", .type = "b"});
  Status st = ApplyContainerEdits(c, edits);
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.message(), HasSubstr("the spec says type \"b\" but the host has \"c\""));
}

TEST(ApplyEditsTest, TheProcessUserOwnsTheNodesWhenNotRoot) {
  Json c = ConfigWithEnv({});
  c["process"]["user"] = {{"uid", 1000}, {"gid", 100}};
  cdi::ContainerEdits edits;
  edits.device_nodes.push_back({.path = "/dev/nvidia3"});
  ASSERT_OK(ApplyContainerEdits(c, edits, FakeNvidiaNodes));
  EXPECT_EQ(c["linux"]["devices"][0]["uid"], 1000);
  EXPECT_EQ(c["linux"]["devices"][0]["gid"], 100);
}

TEST(ApplyEditsTest, MountsReplaceTheSameDestinationAndAreSortedByDepth) {
  Json c = ConfigWithEnv({});
  c["mounts"].push_back({{"destination", "/usr/lib/x86_64-linux-gnu/libcuda.so.1"}, {"source", "/old"}});
  cdi::ContainerEdits edits;
  edits.mounts.push_back({"/host/libcuda.so.580", "/usr/lib/x86_64-linux-gnu/libcuda.so.1/", {"ro", "rbind"}, ""});
  edits.mounts.push_back({"/host/bin/nvidia-smi", "/usr/bin/nvidia-smi", {"ro"}, "bind"});
  ASSERT_OK(ApplyContainerEdits(c, edits));
  std::vector<std::string> dests;
  for (const Json& m : c["mounts"]) dests.push_back(m["destination"].get<std::string>());
  EXPECT_THAT(dests, ElementsAre("/proc", "/dev", "/dev/pts", "/usr/bin/nvidia-smi",
                                 "/usr/lib/x86_64-linux-gnu/libcuda.so.1/"));
  EXPECT_EQ(c["mounts"][4]["source"], "/host/libcuda.so.580");
  EXPECT_EQ(c["mounts"][3]["type"], "bind");
}

TEST(ApplyEditsTest, EnvAppendsAndHooksGoToTheirListAndGidsAreAdded) {
  Json c = ConfigWithEnv({});
  c["hooks"] = {{"createContainer", Json::array({{{"path", "/bin/existing"}}})}};
  cdi::ContainerEdits edits;
  edits.env = {"A=1", "NVIDIA_VISIBLE_DEVICES=void"};
  edits.hooks.push_back({"createContainer", "/usr/bin/gpunode", {"gpunode", "cdi", "hook", "update-ldcache"}, {}, 5});
  edits.hooks.push_back({"poststop", "/bin/true", {}, {"X=1"}, std::nullopt});
  edits.additional_gids = {44, 44, 39};
  ASSERT_OK(ApplyContainerEdits(c, edits));
  EXPECT_THAT(Env(c), ElementsAre("PATH=/bin", "A=1", "NVIDIA_VISIBLE_DEVICES=void"));
  ASSERT_EQ(c["hooks"]["createContainer"].size(), 2u);
  EXPECT_EQ(c["hooks"]["createContainer"][1]["timeout"], 5);
  EXPECT_EQ(c["hooks"]["poststop"][0]["env"][0], "X=1");
  EXPECT_EQ(c["process"]["user"]["additionalGids"], Json::parse("[44, 39]"));
}

// --- whole requests against the golden dgx-h200 spec ----------------------------------------------

TEST(InjectDevicesTest, GpuOneGetsItsNodeAndNotGpuZeros) {
  SpecRegistry registry = GoldenRegistry();
  Json c = ConfigWithEnv({"NVIDIA_VISIBLE_DEVICES=1"});
  auto request = Request(c);
  ASSERT_OK(request);
  auto result = InjectDevices(c, registry, *request, "nvidia.com/gpu", FakeNvidiaNodes);
  ASSERT_OK(result) << result.status();
  EXPECT_THAT(result->devices, ElementsAre("nvidia.com/gpu=1"));
  const auto paths = DevicePaths(c);
  EXPECT_THAT(paths, ::testing::Contains("/dev/nvidia1"));
  EXPECT_THAT(paths, ::testing::Contains("/dev/nvidiactl"));
  EXPECT_THAT(paths, ::testing::Not(::testing::Contains("/dev/nvidia0")));
  EXPECT_EQ(c["annotations"][kInjectedAnnotation], "nvidia.com/gpu=1");
  // The driver's libraries are mounted, the spec-level env came first, the hooks were added.
  bool libcuda = false;
  for (const Json& m : c["mounts"]) {
    libcuda |= m["destination"].get<std::string>().find("libcuda.so.") != std::string::npos;
  }
  EXPECT_TRUE(libcuda);
  EXPECT_EQ(Env(c).back(), "NVIDIA_VISIBLE_DEVICES=void");
  EXPECT_GE(c["hooks"]["createContainer"].size(), 2u);

  // A second pass (a runtime calling the shim twice) changes nothing: every edit is there once.
  const Json before = c;
  auto again = Request(c);
  ASSERT_OK(again);
  EXPECT_TRUE(again->Empty());  // the spec's NVIDIA_VISIBLE_DEVICES=void comes last now
  auto second = InjectDevices(c, registry, *request, "nvidia.com/gpu", FakeNvidiaNodes);
  ASSERT_OK(second) << second.status();
  EXPECT_FALSE(second->changed);
  EXPECT_EQ(c, before);
}

// Issue 11, row 10: an image's config.json that already carries our annotation still gets the GPU
// it asks for; the annotation is a record, not a reason to skip.
TEST(InjectDevicesTest, APreexistingInjectedAnnotationIsNotTrusted) {
  SpecRegistry registry = GoldenRegistry();
  Json c = ConfigWithEnv({"NVIDIA_VISIBLE_DEVICES=0"});
  c["annotations"][kInjectedAnnotation] = "nvidia.com/gpu=0";
  auto result = InjectDevices(c, registry, *Request(c), "nvidia.com/gpu", FakeNvidiaNodes);
  ASSERT_OK(result) << result.status();
  EXPECT_TRUE(result->changed);
  EXPECT_THAT(DevicePaths(c), ::testing::Contains("/dev/nvidia0"));
  EXPECT_THAT(DevicePaths(c), ::testing::Contains("/dev/nvidiactl"));
}

TEST(InjectDevicesTest, AllGivesEveryGpuAndUuidsWorkToo) {
  SpecRegistry registry = GoldenRegistry();
  Json c = ConfigWithEnv({"NVIDIA_VISIBLE_DEVICES=all"});
  ASSERT_OK(InjectDevices(c, registry, *Request(c), "nvidia.com/gpu", FakeNvidiaNodes));
  int gpus = 0;
  for (const std::string& p : DevicePaths(c)) gpus += (p.size() == 12 && p.rfind("/dev/nvidia", 0) == 0);
  EXPECT_EQ(gpus, 8);

  Json u = ConfigWithEnv({"NVIDIA_VISIBLE_DEVICES=GPU-7f553f48-e049-4eda-97cf-c73c16550250"});
  ASSERT_OK(InjectDevices(u, registry, *Request(u), "nvidia.com/gpu", FakeNvidiaNodes));
  EXPECT_THAT(DevicePaths(u), ::testing::Contains("/dev/nvidia1"));
}

TEST(InjectDevicesTest, NoneGivesTheDriverButNoGpu) {
  SpecRegistry registry = GoldenRegistry();
  Json c = ConfigWithEnv({"NVIDIA_VISIBLE_DEVICES=none"});
  auto result = InjectDevices(c, registry, *Request(c), "nvidia.com/gpu", FakeNvidiaNodes);
  ASSERT_OK(result) << result.status();
  for (const std::string& p : DevicePaths(c)) EXPECT_FALSE(p.size() == 12 && std::isdigit(p.back())) << p;
  EXPECT_THAT(DevicePaths(c), ::testing::Contains("/dev/nvidiactl"));
  EXPECT_EQ(c["annotations"][kInjectedAnnotation], "none");
}

TEST(InjectDevicesTest, AnUnknownGpuNamesWhatTheSpecsOfferAndWhoAsked) {
  SpecRegistry registry = GoldenRegistry();
  Json c = ConfigWithEnv({"NVIDIA_VISIBLE_DEVICES=9"});
  const Json before = c;
  auto result = InjectDevices(c, registry, *Request(c), "nvidia.com/gpu", FakeNvidiaNodes);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(result.status().message(), HasSubstr("unresolvable CDI device nvidia.com/gpu=9"));
  EXPECT_THAT(result.status().message(), HasSubstr("0, 1, 2, 3, 4, 5, 6, 7"));
  EXPECT_THAT(result.status().message(), HasSubstr("requested by NVIDIA_VISIBLE_DEVICES=9"));
  EXPECT_EQ(c, before);  // nothing half-applied

  Json other = ConfigWithEnv({});
  other["annotations"] = {{"cdi.k8s.io/fpga", "vendor.com/fpga=0"}};
  auto r2 = InjectDevices(other, registry, *Request(other), "nvidia.com/gpu");
  ASSERT_FALSE(r2.ok());
  EXPECT_THAT(r2.status().message(), HasSubstr("no CDI spec offers kind vendor.com/fpga"));
}

// --- spec directories ---------------------------------------------------------------------------

TEST(SpecRegistryTest, LaterDirectoriesWinAndBrokenFilesAreNamedWhenTheyMatter) {
  const fs::path dir = fs::temp_directory_path() / ("gpunode-oci-reg-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "etc");
  fs::create_directories(dir / "run");
  auto spec_with_node = [](const std::string& node) {
    return "cdiVersion: \"0.5.0\"\nkind: \"nvidia.com/gpu\"\ndevices:\n  - name: \"0\"\n    containerEdits:\n"
           "      deviceNodes:\n        - path: \"" + node + "\"\n";
  };
  std::ofstream(dir / "etc/nvidia.yaml") << spec_with_node("/dev/from-etc");
  std::ofstream(dir / "run/nvidia.yaml") << spec_with_node("/dev/from-run");
  std::ofstream(dir / "run/broken.yaml") << "cdiVersion: [\n";
  std::ofstream(dir / "run/notes.txt") << "ignored";
  SpecRegistry r = SpecRegistry::Load({(dir / "etc").string(), (dir / "run").string(), (dir / "missing").string()});
  EXPECT_EQ(r.size(), 2u);
  ASSERT_EQ(r.errors().size(), 1u);
  EXPECT_THAT(r.errors()[0], HasSubstr("broken.yaml"));
  auto zero = r.Resolve("nvidia.com/gpu=0");
  ASSERT_OK(zero);
  EXPECT_EQ(zero->device->edits.device_nodes[0].path, "/dev/from-run");
  auto one = r.Resolve("nvidia.com/gpu=1");
  ASSERT_FALSE(one.ok());
  EXPECT_THAT(one.status().message(), HasSubstr("broken.yaml"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace gpunode::container
