// The node's ResourceSlice objects as JSON: the v1 shape (v1beta2 the same, v1beta1 with `basic`),
// the pool (name, generation, resourceSliceCount, nodeName), the split at 128 devices (64 when a
// device has taints), deterministic names within the API's rules, taints, and what the API would
// refuse caught before it is sent.
#include "src/dra/resource_slices.h"

#include <cctype>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/status_matchers.h"

namespace gpunode::dra {
namespace {

using ::testing::HasSubstr;
using ::testing::SizeIs;
using nlohmann::json;

DraDevice Gpu(int minor) {
  DraDevice d;
  d.name = "gpu-" + std::to_string(minor);
  d.type = "gpu";
  d.uuid = "GPU-" + std::to_string(minor);
  d.attributes = {{"type", {{"string", "gpu"}}}, {"uuid", {{"string", d.uuid}}}};
  d.capacity = {{"memory", "143771Mi"}};
  return d;
}

std::vector<DraDevice> Gpus(int n) {
  std::vector<DraDevice> out;
  for (int i = 0; i < n; ++i) out.push_back(Gpu(i));
  return out;
}

SliceSpec Spec() {
  SliceSpec s;
  s.node = "node-1";
  s.generation = 7;
  return s;
}

TEST(ResourceSlicesTest, OnePoolPerNodeInTheV1Shape) {
  SliceSpec spec = Spec();
  spec.node_uid = "uid-1";
  const std::vector<json> slices = BuildResourceSlices(Gpus(2), spec);
  ASSERT_THAT(slices, SizeIs(1));
  const json want = json::parse(R"({
    "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
    "metadata": {"name": "node-1-gpu-nvidia-com-0",
                 "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "node-1", "uid": "uid-1",
                                      "controller": true}]},
    "spec": {"driver": "gpu.nvidia.com", "nodeName": "node-1",
             "pool": {"name": "node-1", "generation": 7, "resourceSliceCount": 1},
             "devices": [
               {"name": "gpu-0", "attributes": {"type": {"string": "gpu"}, "uuid": {"string": "GPU-0"}},
                "capacity": {"memory": {"value": "143771Mi"}}},
               {"name": "gpu-1", "attributes": {"type": {"string": "gpu"}, "uuid": {"string": "GPU-1"}},
                "capacity": {"memory": {"value": "143771Mi"}}}]}})");
  EXPECT_EQ(slices[0], want) << slices[0].dump(2);
  // v1beta2 is the same but for apiVersion.
  json beta2 = BuildResourceSlices(Gpus(2), spec, SliceApi::kV1beta2)[0];
  EXPECT_EQ(beta2["apiVersion"], "resource.k8s.io/v1beta2");
  beta2["apiVersion"] = "resource.k8s.io/v1";
  EXPECT_EQ(beta2, want);
}

TEST(ResourceSlicesTest, V1beta1WrapsEachDeviceInBasic) {
  DraDevice d = Gpu(0);
  d.taints = {{kTaintGpuLost, "", kTaintEffectNoSchedule, ""}};
  const json slice = BuildResourceSlices({d}, Spec(), SliceApi::kV1beta1)[0];
  EXPECT_EQ(slice["apiVersion"], "resource.k8s.io/v1beta1");
  EXPECT_EQ(slice["spec"]["devices"][0], json::parse(R"({"name": "gpu-0", "basic": {
      "attributes": {"type": {"string": "gpu"}, "uuid": {"string": "GPU-0"}},
      "capacity": {"memory": {"value": "143771Mi"}},
      "taints": [{"key": "gpu.nvidia.com/gpu-lost", "effect": "NoSchedule"}]}})"));
}

TEST(ResourceSlicesTest, TaintsAreWrittenWithTheirValueAndTime) {
  DraDevice d = Gpu(3);
  d.taints = {{kTaintXid, "79", kTaintEffectNoSchedule, "2026-12-01T13:00:00Z"}};
  const json device = DeviceJson(d, SliceApi::kV1);
  EXPECT_EQ(device["taints"], json::parse(R"([{"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoSchedule",
                                              "timeAdded": "2026-12-01T13:00:00Z"}])"));
  EXPECT_FALSE(DeviceJson(Gpu(3), SliceApi::kV1).contains("taints"));
}

TEST(ResourceSlicesTest, MoreThan128DevicesAreSplitAndEverySliceKnowsTheCount) {
  const std::vector<json> slices = BuildResourceSlices(Gpus(300), Spec());
  ASSERT_THAT(slices, SizeIs(3));
  size_t total = 0;
  for (size_t i = 0; i < slices.size(); ++i) {
    EXPECT_EQ(slices[i]["metadata"]["name"], "node-1-gpu-nvidia-com-" + std::to_string(i));
    EXPECT_EQ(slices[i]["spec"]["pool"]["resourceSliceCount"], 3);
    EXPECT_EQ(slices[i]["spec"]["pool"]["generation"], 7);
    EXPECT_EQ(slices[i]["spec"]["pool"]["name"], "node-1");
    total += slices[i]["spec"]["devices"].size();
  }
  EXPECT_EQ(slices[0]["spec"]["devices"].size(), 128u);
  EXPECT_EQ(slices[2]["spec"]["devices"].size(), 300u - 256u);
  EXPECT_EQ(total, 300u);
  EXPECT_EQ(slices[1]["spec"]["devices"][0]["name"], "gpu-128");
  EXPECT_THAT(BuildResourceSlices(Gpus(128), Spec()), SizeIs(1));
  EXPECT_THAT(BuildResourceSlices(Gpus(129), Spec()), SizeIs(2));
}

TEST(ResourceSlicesTest, ASliceWithATaintedDeviceHoldsAtMost64) {
  std::vector<DraDevice> devices = Gpus(130);
  devices[10].taints = {{kTaintGpuLost, "", kTaintEffectNoSchedule, ""}};
  const std::vector<json> slices = BuildResourceSlices(devices, Spec());
  ASSERT_THAT(slices, SizeIs(2));
  EXPECT_EQ(slices[0]["spec"]["devices"].size(), 64u);  // holds the tainted gpu-10
  EXPECT_EQ(slices[1]["spec"]["devices"].size(), 66u);  // no taint: up to 128
}

TEST(ResourceSlicesTest, APoolWithoutDevicesIsOneEmptySlice) {
  const std::vector<json> slices = BuildResourceSlices({}, Spec());
  ASSERT_THAT(slices, SizeIs(1));
  EXPECT_FALSE(slices[0]["spec"].contains("devices"));
  EXPECT_EQ(slices[0]["spec"]["pool"]["resourceSliceCount"], 1);
}

// metadata.name is a DNS subdomain of at most 253 characters.
bool IsDnsSubdomain(const std::string& s) {
  if (s.empty() || s.size() > 253) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (!alnum && c != '-' && c != '.') return false;
    if (c == '.' && (i == 0 || !(std::isalnum(s[i - 1])) || i + 1 == s.size() || !std::isalnum(s[i + 1]))) return false;
  }
  return std::isalnum(s.front()) && std::isalnum(s.back());
}

TEST(ResourceSlicesTest, NamesAreDeterministicAndValidEvenForTheLongestNodeNames) {
  EXPECT_EQ(SliceName("node-1", "gpu.nvidia.com", 0), "node-1-gpu-nvidia-com-0");
  EXPECT_EQ(SliceName("dgx.example.com", "gpu.nvidia.com", 12), "dgx.example.com-gpu-nvidia-com-12");
  // A 253-character node name (labels of 63): cut, a hash added, still distinct per node.
  std::string node = std::string(63, 'a') + "." + std::string(63, 'b') + "." + std::string(63, 'c') + "." +
                     std::string(61, 'd');
  ASSERT_EQ(node.size(), 253u);
  const std::string name = SliceName(node, "gpu.nvidia.com", 1);
  EXPECT_LE(name.size(), 253u);
  EXPECT_TRUE(IsDnsSubdomain(name)) << name;
  EXPECT_EQ(name, SliceName(node, "gpu.nvidia.com", 1));
  std::string other = node;
  other.back() = 'e';
  EXPECT_NE(name, SliceName(other, "gpu.nvidia.com", 1));
  // A cut that would end on a dot or dash drops it.
  const std::string dotted = std::string(180, 'a') + "." + std::string(72, 'b');
  EXPECT_TRUE(IsDnsSubdomain(SliceName(dotted, "gpu.nvidia.com", 0))) << SliceName(dotted, "gpu.nvidia.com", 0);
}

TEST(ResourceSlicesTest, WhatTheApiWouldRefuseIsCaughtBeforeItIsSent) {
  EXPECT_OK(ValidateSlices(Spec(), Gpus(3)));
  SliceSpec bad = Spec();
  bad.driver = "GPU.nvidia.com";
  EXPECT_THAT(ValidateSlices(bad, Gpus(1)).message(), HasSubstr("DRA driver name \"GPU.nvidia.com\""));
  bad = Spec();
  bad.driver = std::string(60, 'a') + ".com";
  EXPECT_THAT(ValidateSlices(bad, Gpus(1)).message(), HasSubstr("at most 63"));
  bad = Spec();
  bad.node = "";
  EXPECT_THAT(ValidateSlices(bad, Gpus(1)).message(), HasSubstr("node name"));

  std::vector<DraDevice> devices = Gpus(2);
  devices[1].name = "gpu-0";
  EXPECT_THAT(ValidateSlices(Spec(), devices).message(), HasSubstr("two devices of this name"));
  devices = Gpus(1);
  devices[0].name = "GPU_0";
  EXPECT_THAT(ValidateSlices(Spec(), devices).message(), HasSubstr("must be a DNS label"));
  devices = Gpus(1);
  for (int i = 0; i < 31; ++i) devices[0].capacity["memorySlice" + std::to_string(i)] = "1";
  EXPECT_THAT(ValidateSlices(Spec(), devices).message(), HasSubstr("the API allows 32"));
  devices = Gpus(1);
  devices[0].taints = {{kTaintXid, "79", "PreferNoSchedule", ""}};
  EXPECT_THAT(ValidateSlices(Spec(), devices).message(), HasSubstr("taint gpu.nvidia.com/xid=79:PreferNoSchedule"));
  devices[0].taints = {{"not a key", "", "NoSchedule", ""}};
  EXPECT_FALSE(ValidateSlices(Spec(), devices).ok());
  devices[0].taints.assign(17, {kTaintGpuLost, "", "NoSchedule", ""});
  EXPECT_THAT(ValidateSlices(Spec(), devices).message(), HasSubstr("the API allows 16"));
}

}  // namespace
}  // namespace gpunode::dra
