// Reading a ResourceClaim's allocation and choosing each device's config as NVIDIA's driver does.
#include "src/dra/claim_allocation.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/status_matchers.h"

namespace gpunode::dra {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;

json Result(const std::string& request, const std::string& device, const std::string& driver = "gpu.nvidia.com",
            const std::string& pool = "node-1") {
  return {{"request", request}, {"driver", driver}, {"pool", pool}, {"device", device}};
}

json Config(const std::string& source, std::vector<std::string> requests, const std::string& kind,
            const std::string& strategy, const std::string& driver = "gpu.nvidia.com") {
  json params = {{"apiVersion", "resource.nvidia.com/v1beta1"}, {"kind", kind}};
  if (!strategy.empty()) params["sharing"] = {{"strategy", strategy}};
  json c = {{"source", source}, {"opaque", {{"driver", driver}, {"parameters", params}}}};
  if (!requests.empty()) c["requests"] = requests;
  return c;
}

json Claim(json results, json configs = json::array()) {
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "ResourceClaim"},
          {"metadata", {{"name", "c"}, {"namespace", "ns"}, {"uid", "uid-1"}}},
          {"status", {{"allocation", {{"devices", {{"results", results}, {"config", configs}}}}}}}};
}

std::string TypeOf(const std::string& device) { return device.find("-mig-") != std::string::npos ? "mig" : "gpu"; }

TEST(ClaimAllocation, ReadsOurDevicesAndSkipsOtherDrivers) {
  json results = json::array({Result("gpu", "gpu-0"), Result("nic", "eth-0", "net.example.com"),
                              Result("gpu", "gpu-1")});
  results[2]["adminAccess"] = true;
  results[2]["shareID"] = "6c2d8a8e-0000-4000-8000-000000000001";
  auto a = ReadClaimAllocation(Claim(results), "ResourceClaim ns/c", "gpu.nvidia.com");
  ASSERT_OK(a);
  EXPECT_EQ(a->uid, "uid-1");
  EXPECT_TRUE(a->allocated);
  ASSERT_EQ(a->devices.size(), 2u);
  EXPECT_EQ(a->devices[0].device, "gpu-0");
  EXPECT_EQ(a->devices[0].path, "status.allocation.devices.results[0]");
  EXPECT_FALSE(a->devices[0].admin_access);
  EXPECT_EQ(a->devices[1].device, "gpu-1");
  EXPECT_EQ(a->devices[1].path, "status.allocation.devices.results[2]");
  EXPECT_TRUE(a->devices[1].admin_access);
  EXPECT_EQ(a->devices[1].share_id, "6c2d8a8e-0000-4000-8000-000000000001");
}

TEST(ClaimAllocation, AnUnallocatedClaimSaysSo) {
  json claim = Claim(json::array());
  claim["status"] = json::object();
  auto a = ReadClaimAllocation(claim, "ResourceClaim ns/c", "gpu.nvidia.com");
  ASSERT_OK(a);
  EXPECT_FALSE(a->allocated);
}

TEST(ClaimAllocation, ClaimConfigsOverrideClassConfigs) {
  // In the list the claim's config comes first; the class's still has the lower precedence.
  json configs = json::array({Config("FromClaim", {"gpu"}, "GpuConfig", "MPS"),
                              Config("FromClass", {}, "GpuConfig", "TimeSlicing")});
  auto a = ReadClaimAllocation(Claim(json::array({Result("gpu", "gpu-0"), Result("other", "gpu-1")}), configs),
                               "ResourceClaim ns/c", "gpu.nvidia.com");
  ASSERT_OK(a);
  ASSERT_EQ(a->configs.size(), 2u);
  EXPECT_TRUE(a->configs[0].from_class);
  EXPECT_EQ(a->configs[0].path, "status.allocation.devices.config[1]");
  ASSERT_OK(AssignConfigs(*a, TypeOf));
  EXPECT_EQ(a->configs[a->devices[0].config].config.sharing->strategy, SharingStrategy::kMps);
  EXPECT_EQ(a->configs[a->devices[1].config].config.sharing->strategy, SharingStrategy::kTimeSlicing);
}

TEST(ClaimAllocation, LaterConfigsWinAndTypesSelectConfigsWithoutRequests) {
  json configs = json::array({Config("FromClaim", {}, "GpuConfig", "TimeSlicing"),
                              Config("FromClaim", {}, "GpuConfig", "MPS"),
                              Config("FromClaim", {}, "MigDeviceConfig", "TimeSlicing")});
  auto a = ReadClaimAllocation(Claim(json::array({Result("a", "gpu-0"), Result("b", "gpu-1-mig-1g10gb-19-0")}),
                                     configs),
                               "ResourceClaim ns/c", "gpu.nvidia.com");
  ASSERT_OK(a);
  ASSERT_OK(AssignConfigs(*a, TypeOf));
  EXPECT_EQ(a->devices[0].config, 1);  // the later GpuConfig
  EXPECT_EQ(a->devices[1].config, 2);  // the MIG device skips the GpuConfigs
}

TEST(ClaimAllocation, ARequestNamesItsSubrequestsAndOtherDriversConfigsAreSkipped) {
  json configs = json::array({Config("FromClaim", {"gpu"}, "GpuConfig", "MPS"),
                              Config("FromClaim", {}, "GpuConfig", "TimeSlicing", "other.example.com")});
  auto a = ReadClaimAllocation(Claim(json::array({Result("gpu/large", "gpu-0"), Result("gpux", "gpu-1")}), configs),
                               "ResourceClaim ns/c", "gpu.nvidia.com");
  ASSERT_OK(a);
  EXPECT_EQ(a->configs.size(), 1u);
  ASSERT_OK(AssignConfigs(*a, TypeOf));
  EXPECT_EQ(a->devices[0].config, 0);
  EXPECT_EQ(a->devices[1].config, -1);  // no config: the device as it is
}

TEST(ClaimAllocation, AConfigNamedForTheWrongDeviceTypeIsAnError) {
  json configs = json::array({Config("FromClaim", {"mig"}, "GpuConfig", "MPS")});
  auto a = ReadClaimAllocation(Claim(json::array({Result("mig", "gpu-0-mig-1g10gb-19-0")}), configs),
                               "ResourceClaim ns/c", "gpu.nvidia.com");
  ASSERT_OK(a);
  Status s = AssignConfigs(*a, TypeOf);
  EXPECT_THAT(s.message(), HasSubstr("ResourceClaim ns/c: status.allocation.devices.config[0]: cannot apply GpuConfig "
                                     "to device \"gpu-0-mig-1g10gb-19-0\" of type \"mig\""));
}

TEST(ClaimAllocation, HostileClaimsAreErrorsNamingTheField) {
  auto error = [](const json& claim) {
    auto a = ReadClaimAllocation(claim, "ResourceClaim ns/c", "gpu.nvidia.com");
    EXPECT_FALSE(a.ok()) << claim.dump();
    return a.ok() ? std::string() : std::string(a.status().message());
  };
  json c = Claim(json::array({Result("gpu", "gpu-0")}));
  c["status"]["allocation"]["devices"]["results"][0]["device"] = 5;
  EXPECT_THAT(error(c), HasSubstr("ResourceClaim ns/c: status.allocation.devices.results[0].device: expected a string"));
  c = Claim(json::array({Result("gpu", "../../etc/passwd")}));
  EXPECT_THAT(error(c), HasSubstr("results[0]: device: \"../../etc/passwd\" is not a DNS label"));
  c = Claim(json::array({Result("", "gpu-0")}));
  EXPECT_THAT(error(c), HasSubstr("results[0]: request: required"));
  c = Claim(json::array({Result("gpu", "gpu-0")}));
  c["status"]["allocation"]["devices"]["results"] = "gpu-0";
  EXPECT_THAT(error(c), HasSubstr("status.allocation.devices.results: expected an array, got string"));
  json many = json::array();
  for (int i = 0; i < 33; ++i) many.push_back(Result("gpu", "gpu-" + std::to_string(i)));
  EXPECT_THAT(error(Claim(many)), HasSubstr("results: more than 32 devices"));
  c = Claim(json::array({Result("gpu", "gpu-0")}), json::array({Config("FromNowhere", {}, "GpuConfig", "")}));
  EXPECT_THAT(error(c), HasSubstr("config[0]: source: invalid config source \"FromNowhere\""));
  json not_opaque = {{"source", "FromClaim"}};
  EXPECT_THAT(error(Claim(json::array(), json::array({not_opaque}))),
              HasSubstr("config[0]: only opaque parameters are supported"));
  c = Claim(json::array(), json::array({Config("FromClaim", {}, "GpuConfig", "Exclusive")}));
  EXPECT_THAT(error(c), HasSubstr("status.allocation.devices.config[0].opaque.parameters.sharing.strategy: unknown GPU"));
  c = Claim(json::array());
  c["metadata"] = "x";
  EXPECT_THAT(error(c), HasSubstr("metadata: expected an object, got string"));
}

}  // namespace
}  // namespace gpunode::dra
