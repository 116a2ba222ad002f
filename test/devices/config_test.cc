// NVIDIA's device plugin config format v1: what parses, what is refused (with the field's path),
// and the environment's precedence.
#include "src/devices/config.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/status_matchers.h"

namespace gpunode::devices {
namespace {

using ::testing::HasSubstr;

TEST(PluginConfigTest, AFullFileParses) {
  auto c = ParseConfig(R"(
version: v1
flags:
  migStrategy: mixed
  failOnInitError: false
  nvidiaDriverRoot: /run/nvidia/driver
  plugin:
    passDeviceSpecs: true
    deviceListStrategy: [envvar, cdi-cri]
    deviceIDStrategy: index
  gfd:
    oneshot: true
    sleepInterval: 1m30s
sharing:
  timeSlicing:
    renameByDefault: true
    failRequestsGreaterThanOne: true
    resources:
    - name: nvidia.com/gpu
      replicas: 10
)",
                       "config.yaml");
  ASSERT_OK(c) << c.status();
  EXPECT_EQ(c->mig_strategy, MigStrategy::kMixed);
  EXPECT_FALSE(c->fail_on_init_error);
  EXPECT_EQ(c->driver_root, "/run/nvidia/driver");
  EXPECT_TRUE(c->pass_device_specs);
  EXPECT_TRUE(c->device_list.envvar);
  EXPECT_TRUE(c->device_list.cdi_cri);
  EXPECT_FALSE(c->device_list.volume_mounts);
  EXPECT_EQ(c->device_id, DeviceIdStrategy::kIndex);
  EXPECT_TRUE(c->gfd_oneshot);
  EXPECT_EQ(c->gfd_sleep_interval_s, 90);
  EXPECT_EQ(c->sharing.strategy, SharingStrategy::kTimeSlicing);
  EXPECT_TRUE(c->sharing.rename_by_default);
  EXPECT_EQ(c->sharing.ReplicasOf("nvidia.com/gpu"), 10);
  EXPECT_EQ(c->sharing.ReplicasOf("nvidia.com/mig-1g.10gb"), 1);
  EXPECT_OK(ValidateConfig(*c));
}

TEST(PluginConfigTest, JsonAndAnEmptyFileWork) {
  auto j = ParseConfig(R"({"version": "v1", "flags": {"migStrategy": "single"}})", "c.json");
  ASSERT_OK(j) << j.status();
  EXPECT_EQ(j->mig_strategy, MigStrategy::kSingle);
  auto empty = ParseConfig("", "empty.yaml");
  ASSERT_OK(empty);
  EXPECT_EQ(empty->mig_strategy, MigStrategy::kNone);
  EXPECT_TRUE(empty->device_list.envvar);
}

TEST(PluginConfigTest, BadFilesNameTheFieldThatIsWrong) {
  struct Case {
    const char* text;
    const char* message;
  } cases[] = {
      {"version: v2\n", "config.yaml:1: version: expected v1, got \"v2\""},
      {"flags: {migStrategy: some}\n", "config.yaml:1: flags.migStrategy: MIG strategy \"some\""},
      {"flags: {plugin: {deviceIDStrategy: serial}}\n", "flags.plugin.deviceIDStrategy"},
      {"flags: {plugin: {deviceListStrategy: [envvar, magic]}}\n", "device list strategy \"magic\""},
      {"flags: {migStrategi: none}\n", "config.yaml:1: flags: unknown key \"migStrategi\" (known: migStrategy, "},
      {"sharing: {timeSlicing: {resources: [{name: nvidia.com/gpu, replicas: 1}]}}\n",
       "sharing.timeSlicing.resources[0].replicas: expected 2 or more replicas (1 means not shared), got \"1\""},
      {"sharing: {timeSlicing: {resources: [{name: gpu, replicas: 4}]}}\n",
       "resources[0].name: expected an nvidia.com/ resource name, got \"gpu\""},
      {"sharing: {timeSlicing: {resources: [{name: nvidia.com/gpu, replicas: four}]}}\n", "replicas: expected an integer, got \"four\""},
      {"sharing: {timeSlicing: {}, mps: {}}\n", "config.yaml:1: sharing: timeSlicing and mps are mutually exclusive"},
      {"flags:\n  plugin:\n    passDeviceSpecs: maybe\n",
       "config.yaml:3: flags.plugin.passDeviceSpecs: expected true or false, got \"maybe\""},
      {"flags: [\n", "not valid YAML"},
      {"flags: {gfd: {sleepInterval: 500ms}}\n", "flags.gfd.sleepInterval"},
  };
  for (const Case& c : cases) {
    auto r = ParseConfig(c.text, "config.yaml");
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_THAT(r.status().message(), HasSubstr("config.yaml")) << c.text;
    EXPECT_THAT(r.status().message(), HasSubstr(c.message)) << c.text;
  }
}

TEST(PluginConfigTest, UnsupportedPartsWarnAndMpsIsAcceptedExceptWithMixedMig) {
  auto c = ParseConfig("resources: {gpus: [{pattern: '*', name: gpu}]}\nflags: {gdsEnabled: true}\n", "c.yaml");
  ASSERT_OK(c);
  EXPECT_EQ(c->warnings.size(), 2u);
  auto mps = ParseConfig("sharing: {mps: {resources: [{name: nvidia.com/gpu, replicas: 4}]}}\n", "c.yaml");
  ASSERT_OK(mps);
  EXPECT_TRUE(mps->sharing.fail_requests_greater_than_one);  // NVIDIA's MPS default
  EXPECT_EQ(mps->sharing.strategy, SharingStrategy::kMps);
  EXPECT_OK(ValidateConfig(*mps)) << ValidateConfig(*mps);
  EXPECT_EQ(MpsRootOf(*mps), "/run/nvidia/mps");
  mps->mps_root = "run/mps";
  EXPECT_THAT(ValidateConfig(*mps).message(), HasSubstr("must be an absolute path"));
  mps->mps_root = "/var/run/mps/";
  EXPECT_EQ(MpsRootOf(*mps), "/var/run/mps");
  mps->mig_strategy = MigStrategy::kMixed;
  EXPECT_THAT(ValidateConfig(*mps).message(), HasSubstr("mixed is not supported with MPS"));
}

TEST(PluginConfigTest, TheEnvironmentOverridesTheFileAndBadValuesNameTheVariable) {
  auto c = ParseConfig("flags: {migStrategy: single}\n", "c.yaml");
  ASSERT_OK(c);
  ASSERT_TRUE(ApplyEnvironment({{"MIG_STRATEGY", "mixed"}, {"DEVICE_LIST_STRATEGY", "volume-mounts"},
                                {"PASS_DEVICE_SPECS", "true"}, {"UNRELATED", "x"}},
                               &*c)
                  .ok());
  EXPECT_EQ(c->mig_strategy, MigStrategy::kMixed);
  EXPECT_TRUE(c->device_list.volume_mounts);
  EXPECT_FALSE(c->device_list.envvar);
  EXPECT_TRUE(c->pass_device_specs);
  Status bad = ApplyEnvironment({{"DEVICE_ID_STRATEGY", "serial"}}, &*c);
  EXPECT_THAT(bad.message(), HasSubstr("environment variable DEVICE_ID_STRATEGY"));
  EXPECT_THAT(ApplyEnvironment({{"FAIL_ON_INIT_ERROR", "maybe"}}, &*c).message(), HasSubstr("FAIL_ON_INIT_ERROR"));
}

}  // namespace
}  // namespace gpunode::devices

#include "src/devices/health.h"

namespace gpunode::devices {
namespace {

TEST(HealthOptionsTest, ApplicationXidsAreIgnoredAndTheVariablesBehaveAsNvidiasPlugin) {
  auto d = HealthOptionsFromEnvironment({});
  ASSERT_OK(d);
  for (unsigned long long x : {13, 31, 43, 45, 68, 109}) EXPECT_FALSE(d->IsFatal(x)) << x;
  EXPECT_TRUE(d->IsFatal(79));
  EXPECT_TRUE(d->IsFatal(48));

  auto extra = HealthOptionsFromEnvironment({{"DP_DISABLE_HEALTHCHECKS", "48, 63"}});
  ASSERT_OK(extra);
  EXPECT_FALSE(extra->IsFatal(48));
  EXPECT_FALSE(extra->IsFatal(63));
  EXPECT_TRUE(extra->IsFatal(79));

  auto all_off = HealthOptionsFromEnvironment({{"DP_DISABLE_HEALTHCHECKS", "all"}});
  ASSERT_OK(all_off);
  EXPECT_FALSE(all_off->IsFatal(79));

  auto forced = HealthOptionsFromEnvironment({{"DP_DISABLE_HEALTHCHECKS", "109"}, {"DP_ENABLE_HEALTHCHECKS", "109"}});
  ASSERT_OK(forced);
  EXPECT_TRUE(forced->IsFatal(109));

  auto every = HealthOptionsFromEnvironment({{"DP_ENABLE_HEALTHCHECKS", "all"}});
  ASSERT_OK(every);
  EXPECT_TRUE(every->IsFatal(13));

  auto bad = HealthOptionsFromEnvironment({{"DP_ENABLE_HEALTHCHECKS", "79,xid48"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("DP_ENABLE_HEALTHCHECKS: \"xid48\""));
}

}  // namespace
}  // namespace gpunode::devices
