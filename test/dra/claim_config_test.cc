// NVIDIA's opaque claim config (resource.nvidia.com/v1beta1) as gpunode reads it: NVIDIA's own
// examples, the defaults its Normalize fills in, and bad configs refused with the field named.
#include "src/dra/claim_config.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/status_matchers.h"

namespace gpunode::dra {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;

constexpr char kWhat[] = "ResourceClaim ns/c";
constexpr char kPath[] = "status.allocation.devices.config[0].opaque.parameters";

StatusOr<DeviceConfig> Parse(const std::string& text) { return ParseDeviceConfig(json::parse(text), kWhat, kPath); }

std::string ErrorOf(const std::string& text) {
  StatusOr<DeviceConfig> c = Parse(text);
  EXPECT_FALSE(c.ok()) << text;
  return c.ok() ? "" : std::string(c.status().message());
}

// NVIDIA's demo/specs/quickstart/v1/gpu-test5.yaml (ts-gpu) and gpu-test6.yaml, as JSON.
TEST(ClaimConfig, NvidiasTimeSlicingExample) {
  auto c = Parse(R"({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
                     "sharing": {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Long"}}})");
  ASSERT_OK(c);
  EXPECT_EQ(c->kind, ConfigKind::kGpu);
  ASSERT_TRUE(c->sharing);
  EXPECT_EQ(c->sharing->strategy, SharingStrategy::kTimeSlicing);
  EXPECT_EQ(c->sharing->interval, TimeSliceInterval::kLong);
  EXPECT_FALSE(c->sharing->mps);
}

// NVIDIA's demo/specs/quickstart/v1/gpu-test-mps.yaml, as JSON.
TEST(ClaimConfig, NvidiasMpsExample) {
  auto c = Parse(R"({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
                     "sharing": {"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": 50,
                                                                  "defaultPinnedDeviceMemoryLimit": "10Gi"}}})");
  ASSERT_OK(c);
  ASSERT_TRUE(c->sharing && c->sharing->mps);
  EXPECT_EQ(c->sharing->strategy, SharingStrategy::kMps);
  EXPECT_FALSE(c->sharing->interval);
  EXPECT_EQ(c->sharing->mps->default_active_thread_percentage, 50);
  EXPECT_EQ(c->sharing->mps->default_pinned_device_memory_limit, (Quantity{"10Gi", int64_t{10} << 30}));
}

// NVIDIA's tests/bats/specs/gpu-simple-mig-ts.yaml: a MIG device config with TimeSlicing (no
// interval: a MIG device has none).
TEST(ClaimConfig, NvidiasMigTimeSlicingExample) {
  auto c = Parse(R"({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "MigDeviceConfig",
                     "sharing": {"strategy": "TimeSlicing"}})");
  ASSERT_OK(c);
  EXPECT_EQ(c->kind, ConfigKind::kMigDevice);
  ASSERT_TRUE(c->sharing);
  EXPECT_FALSE(c->sharing->interval);
}

TEST(ClaimConfig, DefaultsAreNvidiasNormalize) {
  // No sharing: the device as it is.
  auto none = Parse(R"({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig"})");
  ASSERT_OK(none);
  EXPECT_FALSE(none->sharing);
  // TimeSlicing without a config: Default; MPS without one: an empty MpsConfig.
  auto ts = Parse(R"({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
                      "sharing": {"strategy": "TimeSlicing"}})");
  ASSERT_OK(ts);
  EXPECT_EQ(ts->sharing->interval, TimeSliceInterval::kDefault);
  auto ts_empty = Parse(R"({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
                            "sharing": {"strategy": "TimeSlicing", "timeSlicingConfig": {}}})");
  ASSERT_OK(ts_empty);
  EXPECT_EQ(ts_empty->sharing->interval, TimeSliceInterval::kDefault);
  auto mps = Parse(R"({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "MigDeviceConfig",
                       "sharing": {"strategy": "MPS"}})");
  ASSERT_OK(mps);
  EXPECT_EQ(mps->sharing->mps, MpsConfig{});
  // null reads as absent (Go leaves the pointer nil).
  auto null_sharing = Parse(R"({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig", "sharing": null})");
  ASSERT_OK(null_sharing);
  EXPECT_FALSE(null_sharing->sharing);
}

TEST(ClaimConfig, PerDeviceLimitsTakeQuantitiesAsStringsOrNumbers) {
  auto c = Parse(R"({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
                     "sharing": {"strategy": "MPS", "mpsConfig": {"defaultPerDevicePinnedMemoryLimit":
                        {"0": "1Gi", "GPU-1234": 2147483648}}}})");
  ASSERT_OK(c);
  const auto& per = c->sharing->mps->default_per_device_pinned_memory_limit;
  ASSERT_EQ(per.size(), 2u);
  EXPECT_EQ(per.at("0").value, int64_t{1} << 30);
  EXPECT_EQ(per.at("GPU-1234").value, int64_t{2} << 30);
}

TEST(ClaimConfig, RoundTripsThroughItsJson) {
  for (const char* text : {
           R"({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig"})",
           R"({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig", "sharing": {"strategy": "TimeSlicing",
               "timeSlicingConfig": {"interval": "Short"}}})",
           R"({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "MigDeviceConfig", "sharing": {"strategy": "MPS",
               "mpsConfig": {"defaultActiveThreadPercentage": 0, "defaultPinnedDeviceMemoryLimit": "512Mi",
               "defaultPerDevicePinnedMemoryLimit": {"MIG-1": "1G"}}}})",
       }) {
    auto c = Parse(text);
    ASSERT_OK(c) << text;
    auto again = ParseDeviceConfig(DeviceConfigToJson(*c), kWhat, kPath);
    ASSERT_OK(again) << DeviceConfigToJson(*c).dump();
    EXPECT_EQ(*again, *c) << text;
  }
}

TEST(ClaimConfig, UnknownFieldsAreNamedWithTheirPath) {
  EXPECT_EQ(ErrorOf(R"({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
                        "sharing": {"strategy": "MPS", "mpsConfig": {"foo": 1}}})"),
            "ResourceClaim ns/c: status.allocation.devices.config[0].opaque.parameters.sharing.mpsConfig.foo: "
            "unknown field (known here: defaultActiveThreadPercentage, defaultPinnedDeviceMemoryLimit, "
            "defaultPerDevicePinnedMemoryLimit)");
  // Case-sensitive, as NVIDIA's strict decoder.
  EXPECT_THAT(ErrorOf(R"({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig", "Sharing": {}})"),
              HasSubstr("opaque.parameters.Sharing: unknown field"));
  EXPECT_THAT(ErrorOf(R"({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig", "metadata": {}})"),
              HasSubstr("opaque.parameters.metadata: unknown field"));
  EXPECT_THAT(ErrorOf(R"({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
                          "sharing": {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Long", "x": 1}}})"),
              HasSubstr("sharing.timeSlicingConfig.x: unknown field"));
  // NVIDIA's MigDeviceSharing has no timeSlicingConfig.
  EXPECT_THAT(ErrorOf(R"({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "MigDeviceConfig",
                          "sharing": {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Long"}}})"),
              HasSubstr("sharing.timeSlicingConfig: unknown field"));
}

TEST(ClaimConfig, WrongTypesAreNamed) {
  EXPECT_THAT(ErrorOf(R"({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig", "sharing": {"strategy": 1}})"),
              HasSubstr("opaque.parameters.sharing.strategy: expected a string, got number"));
  EXPECT_THAT(ErrorOf(R"({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig", "sharing": []})"),
              HasSubstr("opaque.parameters.sharing: expected an object, got array"));
  EXPECT_THAT(ErrorOf(R"({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
                          "sharing": {"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": "50"}}})"),
              HasSubstr("mpsConfig.defaultActiveThreadPercentage: expected an integer, got string"));
  EXPECT_THAT(ErrorOf(R"({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
                          "sharing": {"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": 50.5}}})"),
              HasSubstr("expected an integer, got a fraction"));
  EXPECT_THAT(ErrorOf(R"({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
                          "sharing": {"strategy": "MPS", "mpsConfig": {"defaultPinnedDeviceMemoryLimit": true}}})"),
              HasSubstr("mpsConfig.defaultPinnedDeviceMemoryLimit: expected a quantity"));
  EXPECT_THAT(ErrorOf(R"({"apiVersion": "resource.nvidia.com/v1beta1", "kind": 7})"),
              HasSubstr("opaque.parameters.kind: expected a string, got number"));
  EXPECT_THAT(ErrorOf(R"([1])"), HasSubstr("opaque.parameters: expected an object, got array"));
}

TEST(ClaimConfig, NvidiasValidationMessages) {
  EXPECT_THAT(ErrorOf(R"({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig", "sharing": {}})"),
              HasSubstr("sharing.strategy: unknown GPU sharing strategy: \"\", supported GPU sharing strategies: "
                        "TimeSlicing, MPS"));
  EXPECT_THAT(ErrorOf(R"({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
                          "sharing": {"strategy": "Exclusive"}})"),
              HasSubstr("unknown GPU sharing strategy: \"Exclusive\""));
  EXPECT_THAT(ErrorOf(R"({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
                          "sharing": {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "long"}}})"),
              HasSubstr("timeSlicingConfig.interval: unknown time-slice interval: \"long\", supported time-slice "
                        "intervals: Default, Short, Medium, Long"));
  EXPECT_THAT(ErrorOf(R"({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
                          "sharing": {"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": 101}}})"),
              HasSubstr("active thread percentage must not be greater than 100"));
  EXPECT_THAT(ErrorOf(R"({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
                          "sharing": {"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": -1}}})"),
              HasSubstr("active thread percentage must not be negative"));
  EXPECT_THAT(ErrorOf(R"({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
                          "sharing": {"strategy": "MPS", "timeSlicingConfig": {"interval": "Long"}}})"),
              HasSubstr("sharing.timeSlicingConfig: cannot use TimeSlicingConfig with the \"MPS\" strategy"));
  EXPECT_THAT(ErrorOf(R"({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
                          "sharing": {"strategy": "TimeSlicing", "mpsConfig": {}}})"),
              HasSubstr("sharing.mpsConfig: cannot use MpsConfig with the \"TimeSlicing\" strategy"));
}

TEST(ClaimConfig, KindsAndVersionsOtherThanGpuAndMigAreRefused) {
  EXPECT_THAT(ErrorOf(R"({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "VfioDeviceConfig"})"),
              HasSubstr("opaque.parameters.kind: VfioDeviceConfig is not supported"));
  EXPECT_THAT(ErrorOf(R"({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "ComputeDomainChannelConfig"})"),
              HasSubstr("belongs to NVIDIA's compute-domain plugin"));
  EXPECT_THAT(ErrorOf(R"({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "TpuConfig"})"),
              HasSubstr("kind: unknown kind \"TpuConfig\" (known: GpuConfig, MigDeviceConfig)"));
  EXPECT_THAT(ErrorOf(R"({"apiVersion": "resource.nvidia.com/v1beta1"})"), HasSubstr("kind: required"));
  EXPECT_THAT(ErrorOf(R"({"apiVersion": "resource.nvidia.com/v1", "kind": "GpuConfig"})"),
              HasSubstr("apiVersion: \"resource.nvidia.com/v1\" is not resource.nvidia.com/v1beta1"));
  EXPECT_THAT(ErrorOf(R"({"kind": "GpuConfig"})"), HasSubstr("apiVersion: required"));
}

TEST(ClaimConfig, SizeIsBounded) {
  json big = {{"apiVersion", kConfigApiVersion}, {"kind", "GpuConfig"}};
  big["sharing"] = {{"strategy", "MPS"}, {"mpsConfig", {{"defaultPerDevicePinnedMemoryLimit", json::object()}}}};
  for (int i = 0; i < 2000; ++i) {
    big["sharing"]["mpsConfig"]["defaultPerDevicePinnedMemoryLimit"][std::to_string(i)] = "1Gi";
  }
  auto c = ParseDeviceConfig(big, kWhat, kPath);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("opaque.parameters: larger than 10240 bytes"));
  // Deep nesting is refused before anything walks it.
  json deep = json::array();
  for (int i = 0; i < 100; ++i) deep = json::array({deep});
  json nested = {{"apiVersion", kConfigApiVersion}, {"kind", "GpuConfig"}, {"x", deep}};
  EXPECT_FALSE(ParseDeviceConfig(nested, kWhat, kPath).ok());
}

TEST(Quantity, KubernetesSyntax) {
  struct Case {
    const char* text;
    int64_t value;
  };
  for (const Case& c : std::initializer_list<Case>{{"0", 0},
                                                   {"10Gi", int64_t{10} << 30},
                                                   {"512Mi", int64_t{512} << 20},
                                                   {"1Ki", 1024},
                                                   {"1Ei", int64_t{1} << 60},
                                                   {"1G", 1000000000},
                                                   {"1.5G", 1500000000},
                                                   {"1.5Gi", int64_t{3} << 29},
                                                   {"100m", 1},  // rounded up, as Quantity.Value()
                                                   {"2e3", 2000},
                                                   {"2E3", 2000},
                                                   {"1e-3", 1},
                                                   {"+5k", 5000},
                                                   {"-1Mi", -(int64_t{1} << 20)},
                                                   {".5Ki", 512},
                                                   {"9223372036854775807", INT64_MAX}}) {
    auto q = ParseQuantity(c.text);
    ASSERT_OK(q) << c.text;
    EXPECT_EQ(q->value, c.value) << c.text;
  }
  for (const char* bad : {"", "Gi", "1GB", "1K", "1 Gi", "1e", "1e1000", "10Ei", "9223372036854775808", "--1",
                          "1.2.3", "0x10"}) {
    EXPECT_FALSE(ParseQuantity(bad).ok()) << bad;
  }
}

// NVIDIA's own cases (api/nvidia.com/resource/v1beta1/sharing_test.go).
TEST(PinnedMemoryLimits, NvidiasNormalize) {
  auto q = [](const char* t) { return *ParseQuantity(t); };
  MpsConfig m;
  EXPECT_THAT(*PinnedMemoryLimits(m, {}), ::testing::IsEmpty());
  m.default_pinned_device_memory_limit = q("2Gi");
  EXPECT_EQ(*PinnedMemoryLimits(m, {"UUID0"}), (std::map<std::string, std::string>{{"UUID0", "2048M"}}));
  m.default_per_device_pinned_memory_limit = {{"0", q("1Gi")}};
  EXPECT_EQ(*PinnedMemoryLimits(m, {"UUID0"}), (std::map<std::string, std::string>{{"UUID0", "1024M"}}));
  EXPECT_THAT(PinnedMemoryLimits(m, {}).status().message(), HasSubstr("invalid device index 0"));
  m.default_per_device_pinned_memory_limit = {{"UUID0", q("1Gi")}};
  EXPECT_EQ(*PinnedMemoryLimits(m, {"UUID0"}), (std::map<std::string, std::string>{{"UUID0", "1024M"}}));
  m.default_per_device_pinned_memory_limit = {{"UUID1", q("1Gi")}};
  EXPECT_THAT(PinnedMemoryLimits(m, {"UUID0"}).status().message(), HasSubstr("invalid device"));
  m.default_per_device_pinned_memory_limit = {{"1", q("1Gi")}};
  EXPECT_THAT(PinnedMemoryLimits(m, {"UUID0"}).status().message(), HasSubstr("invalid device index 1"));
  m.default_per_device_pinned_memory_limit.clear();
  m.default_pinned_device_memory_limit = q("1M");
  EXPECT_THAT(PinnedMemoryLimits(m, {"UUID0"}).status().message(), HasSubstr("invalid limit"));
  m.default_pinned_device_memory_limit = q("10M");
  EXPECT_EQ(PinnedMemoryLimits(m, {"UUID0"})->at("UUID0"), "9M");
  m.default_pinned_device_memory_limit = q("1G");
  EXPECT_EQ(PinnedMemoryLimits(m, {"UUID0"})->at("UUID0"), "953M");
  m.default_pinned_device_memory_limit = q("10Mi");
  EXPECT_EQ(PinnedMemoryLimits(m, {"UUID0"})->at("UUID0"), "10M");
}

}  // namespace
}  // namespace gpunode::dra
