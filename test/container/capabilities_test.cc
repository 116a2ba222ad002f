// NVIDIA_DRIVER_CAPABILITIES: parsing, which group a driver file belongs to, and the spec-level
// edits a container gets for the capabilities it asks for.
#include "src/container/capabilities.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/container/oci_inject.h"
#include "test/testing/status_matchers.h"

namespace gpunode::container {
namespace {

using ::testing::ElementsAre;
using ::testing::UnorderedElementsAre;

TEST(DriverCapabilities, DefaultAllListsAndUnknownNames) {
  EXPECT_THAT(*ParseDriverCapabilities(""), UnorderedElementsAre("utility", "compute"));
  EXPECT_THAT(*ParseDriverCapabilities(" video , utility "), UnorderedElementsAre("video", "utility"));
  auto all = ParseDriverCapabilities("all");
  ASSERT_OK(all);
  EXPECT_EQ(all->size(), DriverCapabilityTable().size());
  auto bad = ParseDriverCapabilities("compute,warp");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("unknown driver capability \"warp\""), std::string::npos) << bad.status();
}

TEST(DriverCapabilities, FilesBelongToTheirGroups) {
  EXPECT_EQ(CapabilityOfFile("/usr/lib/x86_64-linux-gnu/libcuda.so.580.95.05"), "compute");
  EXPECT_EQ(CapabilityOfFile("/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"), "utility");
  EXPECT_EQ(CapabilityOfFile("/usr/bin/nvidia-smi"), "utility");
  EXPECT_EQ(CapabilityOfFile("/usr/lib/x86_64-linux-gnu/libnvcuvid.so.580.95.05"), "video");
  EXPECT_EQ(CapabilityOfFile("/usr/lib/x86_64-linux-gnu/libEGL_nvidia.so.0"), "graphics");
  EXPECT_EQ(CapabilityOfFile("/run/nvidia-persistenced/socket"), "utility");
  EXPECT_EQ(CapabilityOfFile("/lib/firmware/nvidia/580.95.05/gsp_ga10x.bin"), "");
  EXPECT_EQ(CapabilityOfFile("/usr/lib/x86_64-linux-gnu/libcudart.so.12"), "") << "not a driver file: no group";
}

TEST(DriverCapabilities, FilterKeepsUngroupedFilesAndDropsLinksToDroppedOnes) {
  cdi::ContainerEdits e;
  e.device_nodes.push_back({"/dev/nvidiactl", "", "", 195, 255, std::nullopt, "", std::nullopt, std::nullopt});
  for (const char* p : {"/usr/lib/x86_64-linux-gnu/libcuda.so.580.95.05", "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.580.95.05",
                        "/usr/lib/x86_64-linux-gnu/libnvcuvid.so.580.95.05", "/lib/firmware/nvidia/580.95.05/gsp_ga10x.bin"}) {
    e.mounts.push_back({p, p, {"ro"}, ""});
  }
  e.hooks.push_back({"createContainer", "/usr/bin/gpunode",
                     {"gpunode", "cdi", "hook", "create-symlinks", "--link", "libcuda.so.580.95.05::/usr/lib/x86_64-linux-gnu/libcuda.so.1",
                      "--link", "libnvcuvid.so.580.95.05::/usr/lib/x86_64-linux-gnu/libnvcuvid.so.1"},
                     {}, std::nullopt});
  cdi::ContainerEdits f = FilterByCapabilities(e, {"video"});
  std::vector<std::string> kept;
  for (const auto& m : f.mounts) kept.push_back(m.container_path);
  EXPECT_THAT(kept, ElementsAre("/usr/lib/x86_64-linux-gnu/libnvcuvid.so.580.95.05", "/lib/firmware/nvidia/580.95.05/gsp_ga10x.bin"));
  EXPECT_EQ(f.device_nodes.size(), 1u) << "device nodes are not a capability";
  EXPECT_THAT(f.hooks[0].args, ElementsAre("gpunode", "cdi", "hook", "create-symlinks", "--link",
                                           "libnvcuvid.so.580.95.05::/usr/lib/x86_64-linux-gnu/libnvcuvid.so.1"));
}

TEST(DriverCapabilities, OnlyEnvironmentRequestsCarryThem) {
  const RequestPolicy believe_env{.accept_envvar_when_unprivileged = true};
  nlohmann::ordered_json c = {{"process", {{"env", {"NVIDIA_VISIBLE_DEVICES=0", "NVIDIA_DRIVER_CAPABILITIES=utility"}}}}};
  auto r = RequestedDevices(c, "nvidia.com/gpu", believe_env);
  ASSERT_OK(r) << r.status();
  ASSERT_TRUE(r->capabilities.has_value());
  EXPECT_THAT(*r->capabilities, ElementsAre("utility"));
  nlohmann::ordered_json cdi = {{"process", {{"env", {"NVIDIA_DRIVER_CAPABILITIES=utility"}}}},
                                {"annotations", {{"cdi.k8s.io/x", "nvidia.com/gpu=0"}}}};
  auto a = RequestedDevices(cdi, "nvidia.com/gpu", believe_env);
  ASSERT_OK(a) << a.status();
  EXPECT_FALSE(a->capabilities.has_value()) << "a CDI request gets the whole spec, as NVIDIA's CDI mode";
  nlohmann::ordered_json bad = {{"process", {{"env", {"NVIDIA_VISIBLE_DEVICES=all", "NVIDIA_DRIVER_CAPABILITIES=warp"}}}}};
  EXPECT_FALSE(RequestedDevices(bad, "nvidia.com/gpu", believe_env).ok());
}

TEST(LegacyHook, DockersPrestartHookIsRemovedOthersStay) {
  nlohmann::ordered_json c = {{"hooks",
                               {{"prestart",
                                 {{{"path", "/usr/bin/nvidia-container-runtime-hook"}, {"args", {"nvidia-container-runtime-hook", "prestart"}}},
                                  {{"path", "/usr/libexec/other-hook"}}}},
                                {"poststop", {{{"path", "/opt/x/nvidia-container-runtime-hook"}}}}}}};
  EXPECT_EQ(RemoveLegacyNvidiaHooks(c), 2);
  ASSERT_EQ(c["hooks"]["prestart"].size(), 1u);
  EXPECT_EQ(c["hooks"]["prestart"][0]["path"], "/usr/libexec/other-hook");
  EXPECT_TRUE(c["hooks"]["poststop"].empty());
  EXPECT_EQ(RemoveLegacyNvidiaHooks(c), 0);
  nlohmann::ordered_json none = {{"process", nlohmann::ordered_json::object()}};
  EXPECT_EQ(RemoveLegacyNvidiaHooks(none), 0);
}

}  // namespace
}  // namespace gpunode::container
