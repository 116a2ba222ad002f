// The simulated NVML's field values, PCIe replay, encoder/decoder and GPM entry points (the ones
// src/exporter/nvml_extras.h reads), loaded like the real libnvidia-ml.so.1, and the profile keys
// that drive them.
#include <dlfcn.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "sim/support/profile.h"
#include "src/gpu/nvml_abi.h"
#include "test/sim/sim_nvml_fixture.h"
#include "test/testing/status_matchers.h"

namespace gpunode::sim {
namespace {

using SimNvmlExtrasTest = SimNvmlFixture;

// One H200 whose GPU 0 gets `extra` (YAML flow-map entries, starting with ", ").
std::string OneGpuProfile(const std::string& extra) {
  return R"(apiVersion: gpunode/v1
kind: NodeProfile
name: extras
driver: {version: "580.95.05", cuda_version: "13.0"}
gpus:
  - {name: NVIDIA H200, device_id: 0x2335, memory: {total_mib: 143771}, pcie: {gen: 5, width: 16}, compute_capability: "9.0", bus_id: "0000:18:00.0")" +
         extra + R"(}
  - {name: NVIDIA H200, device_id: 0x2335, memory: {total_mib: 143771}, pcie: {gen: 5, width: 16}, compute_capability: "9.0", bus_id: "0000:2a:00.0", gpm: {supported: true, sm_util: 5}}
)";
}

nvmlFieldValue_t Field(unsigned id, unsigned scope = 0) {
  nvmlFieldValue_t v;
  std::memset(&v, 0, sizeof v);
  v.fieldId = id;
  v.scopeId = scope;
  v.nvmlReturn = NVML_ERROR_UNKNOWN;  // must be overwritten
  return v;
}

// ---- field values -----------------------------------------------------------------------------

TEST_F(SimNvmlExtrasTest, FieldValuesFillEachEntryWithItsOwnReturnCode) {
  UseBuiltin("dgx-h200");
  ASSERT_EQ(nvml().nvmlInit_v2(), NVML_SUCCESS);
  nvmlFieldValue_t v[6] = {Field(NVML_FI_DEV_MEMORY_TEMP),
                           Field(NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, UINT_MAX),
                           Field(NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX, UINT_MAX),
                           Field(NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION),
                           Field(100),    // a field id the simulator does not give
                           Field(9999)};  // beyond NVML's field ids
  ASSERT_EQ(nvml().nvmlDeviceGetFieldValues(Device(0), 6, v), NVML_SUCCESS);
  EXPECT_EQ(v[0].nvmlReturn, NVML_SUCCESS);
  EXPECT_EQ(v[0].valueType, NVML_VALUE_TYPE_UNSIGNED_INT);  // as the real H200 answers
  EXPECT_EQ(v[0].value.uiVal, 36u);
  EXPECT_GT(v[0].timestamp, 1600000000000000LL);  // microseconds since 1970
  EXPECT_EQ(v[1].nvmlReturn, NVML_SUCCESS);
  EXPECT_EQ(v[1].valueType, NVML_VALUE_TYPE_UNSIGNED_LONG_LONG);
  EXPECT_EQ(v[1].value.ullVal, 52428800ull);
  EXPECT_EQ(v[2].value.ullVal, 52428800ull);
  EXPECT_EQ(v[3].nvmlReturn, NVML_SUCCESS);
  EXPECT_EQ(v[3].value.ullVal, 183920331ull);
  EXPECT_EQ(v[4].nvmlReturn, NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(v[5].nvmlReturn, NVML_ERROR_INVALID_ARGUMENT);

  // One link: the total shared by the 18 active links; a link that does not exist is invalid.
  nvmlFieldValue_t link[2] = {Field(NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, 3),
                              Field(NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, 40)};
  ASSERT_EQ(nvml().nvmlDeviceGetFieldValues(Device(0), 2, link), NVML_SUCCESS);
  EXPECT_EQ(link[0].nvmlReturn, NVML_SUCCESS);
  EXPECT_EQ(link[0].value.ullVal, 52428800ull / 18);
  EXPECT_EQ(link[1].nvmlReturn, NVML_ERROR_INVALID_ARGUMENT);
}

TEST_F(SimNvmlExtrasTest, TheRealH200HasMemoryTemperatureButNoNvLinkThroughput) {
  UseBuiltin("h200-real");
  ASSERT_EQ(nvml().nvmlInit_v2(), NVML_SUCCESS);
  nvmlFieldValue_t v[3] = {Field(NVML_FI_DEV_MEMORY_TEMP),
                           Field(NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, UINT_MAX),
                           Field(NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX, UINT_MAX)};
  ASSERT_EQ(nvml().nvmlDeviceGetFieldValues(Device(0), 3, v), NVML_SUCCESS);
  EXPECT_EQ(v[0].nvmlReturn, NVML_SUCCESS);
  EXPECT_EQ(v[0].value.uiVal, 41u);
  EXPECT_EQ(v[1].nvmlReturn, NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(v[2].nvmlReturn, NVML_ERROR_NOT_SUPPORTED);
}

TEST_F(SimNvmlExtrasTest, BoardsWithoutAMemorySensorSayNotSupportedInTheEntry) {
  UseBuiltin("pcie-l40s-4");
  ASSERT_EQ(nvml().nvmlInit_v2(), NVML_SUCCESS);
  nvmlFieldValue_t v = Field(NVML_FI_DEV_MEMORY_TEMP);
  ASSERT_EQ(nvml().nvmlDeviceGetFieldValues(Device(0), 1, &v), NVML_SUCCESS);
  EXPECT_EQ(v.nvmlReturn, NVML_ERROR_NOT_SUPPORTED);
}

TEST_F(SimNvmlExtrasTest, FieldValuesRejectBadArguments) {
  UseBuiltin("dgx-h200");
  nvmlFieldValue_t v = Field(NVML_FI_DEV_MEMORY_TEMP);
  EXPECT_EQ(nvml().nvmlDeviceGetFieldValues(nullptr, 1, &v), NVML_ERROR_UNINITIALIZED);
  ASSERT_EQ(nvml().nvmlInit_v2(), NVML_SUCCESS);
  EXPECT_EQ(nvml().nvmlDeviceGetFieldValues(Device(0), 0, &v), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(nvml().nvmlDeviceGetFieldValues(Device(0), -1, &v), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(nvml().nvmlDeviceGetFieldValues(Device(0), 1, nullptr), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(nvml().nvmlDeviceGetFieldValues(nullptr, 1, &v), NVML_ERROR_INVALID_ARGUMENT);
}

// ---- PCIe replays, encoder, decoder -------------------------------------------------------------

TEST_F(SimNvmlExtrasTest, ReplayCounterAndCodecUtilisationComeFromTheProfile) {
  UseBuiltin("h200-real");
  ASSERT_EQ(nvml().nvmlInit_v2(), NVML_SUCCESS);
  unsigned value = 99, period = 0;
  EXPECT_EQ(nvml().nvmlDeviceGetPcieReplayCounter(Device(0), &value), NVML_SUCCESS);
  EXPECT_EQ(value, 2u);
  EXPECT_EQ(nvml().nvmlDeviceGetEncoderUtilization(Device(0), &value, &period), NVML_SUCCESS);
  EXPECT_EQ(value, 0u);
  EXPECT_EQ(period, 100000u);
  value = 99;
  EXPECT_EQ(nvml().nvmlDeviceGetDecoderUtilization(Device(0), &value, &period), NVML_SUCCESS);
  EXPECT_EQ(value, 0u);
  EXPECT_EQ(nvml().nvmlDeviceGetEncoderUtilization(Device(0), nullptr, &period),
            NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(nvml().nvmlDeviceGetPcieReplayCounter(Device(0), nullptr), NVML_ERROR_INVALID_ARGUMENT);
}

TEST_F(SimNvmlExtrasTest, AbsentKeysMeanNotSupported) {
  UseFile(OneGpuProfile(""));
  ASSERT_EQ(nvml().nvmlInit_v2(), NVML_SUCCESS);
  unsigned value = 0, period = 0;
  EXPECT_EQ(nvml().nvmlDeviceGetPcieReplayCounter(Device(0), &value), NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(nvml().nvmlDeviceGetEncoderUtilization(Device(0), &value, &period),
            NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(nvml().nvmlDeviceGetDecoderUtilization(Device(0), &value, &period),
            NVML_ERROR_NOT_SUPPORTED);
  nvmlFieldValue_t v[2] = {Field(NVML_FI_DEV_MEMORY_TEMP),
                           Field(NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX, UINT_MAX)};
  ASSERT_EQ(nvml().nvmlDeviceGetFieldValues(Device(0), 2, v), NVML_SUCCESS);
  EXPECT_EQ(v[0].nvmlReturn, NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(v[1].nvmlReturn, NVML_ERROR_NOT_SUPPORTED);
  nvmlGpmSupport_t s = {NVML_GPM_SUPPORT_VERSION, 7};
  EXPECT_EQ(nvml().nvmlGpmQueryDeviceSupport(Device(0), &s), NVML_SUCCESS);
  EXPECT_EQ(s.isSupportedDevice, 0u);
}

// ---- GPM ----------------------------------------------------------------------------------------

TEST_F(SimNvmlExtrasTest, PreHopperGpusSayGpmIsUnsupported) {
  UseBuiltin("t4-cloud");
  ASSERT_EQ(nvml().nvmlInit_v2(), NVML_SUCCESS);
  nvmlGpmSupport_t s = {NVML_GPM_SUPPORT_VERSION, 1};
  ASSERT_EQ(nvml().nvmlGpmQueryDeviceSupport(Device(0), &s), NVML_SUCCESS);
  EXPECT_EQ(s.isSupportedDevice, 0u);
  nvmlGpmSample_t sample = nullptr;
  ASSERT_EQ(nvml().nvmlGpmSampleAlloc(&sample), NVML_SUCCESS);
  EXPECT_EQ(nvml().nvmlGpmSampleGet(Device(0), sample), NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(nvml().nvmlGpmSampleFree(sample), NVML_SUCCESS);
}

TEST_F(SimNvmlExtrasTest, GpmSupportChecksItsStructVersion) {
  UseBuiltin("dgx-h200");
  ASSERT_EQ(nvml().nvmlInit_v2(), NVML_SUCCESS);
  nvmlGpmSupport_t s = {7, 0};
  EXPECT_EQ(nvml().nvmlGpmQueryDeviceSupport(Device(0), &s), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
  s.version = NVML_GPM_SUPPORT_VERSION;
  ASSERT_EQ(nvml().nvmlGpmQueryDeviceSupport(Device(0), &s), NVML_SUCCESS);
  EXPECT_EQ(s.isSupportedDevice, 1u);
  EXPECT_EQ(nvml().nvmlGpmQueryDeviceSupport(Device(0), nullptr), NVML_ERROR_INVALID_ARGUMENT);
}

TEST_F(SimNvmlExtrasTest, GpmMetricsFromTwoSamplesWithPerMetricReturnCodes) {
  UseBuiltin("h200-real");
  ASSERT_EQ(nvml().nvmlInit_v2(), NVML_SUCCESS);
  nvmlGpmSample_t a = nullptr, b = nullptr;
  ASSERT_EQ(nvml().nvmlGpmSampleAlloc(&a), NVML_SUCCESS);
  ASSERT_EQ(nvml().nvmlGpmSampleAlloc(&b), NVML_SUCCESS);
  ASSERT_NE(a, b);
  auto get = std::make_unique<nvmlGpmMetricsGet_t>();
  std::memset(get.get(), 0, sizeof *get);
  get->version = NVML_GPM_METRICS_GET_VERSION;
  get->sample1 = a;
  get->sample2 = b;
  const unsigned ids[] = {NVML_GPM_METRIC_DRAM_BW_UTIL, NVML_GPM_METRIC_PCIE_TX_PER_SEC,
                          NVML_GPM_METRIC_INTEGER_UTIL, 0, NVML_GPM_METRIC_MAX};
  get->numMetrics = 5;
  for (unsigned i = 0; i < 5; ++i) get->metrics[i].metricId = ids[i];

  // Samples that were never filled.
  EXPECT_EQ(nvml().nvmlGpmMetricsGet(get.get()), NVML_ERROR_INVALID_ARGUMENT);
  ASSERT_EQ(nvml().nvmlGpmSampleGet(Device(0), a), NVML_SUCCESS);
  ASSERT_EQ(nvml().nvmlGpmSampleGet(Device(0), b), NVML_SUCCESS);
  // Wrong struct version, wrong order, bad counts.
  get->version = 2;
  EXPECT_EQ(nvml().nvmlGpmMetricsGet(get.get()), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
  get->version = NVML_GPM_METRICS_GET_VERSION;
  get->sample1 = b;
  get->sample2 = a;
  EXPECT_EQ(nvml().nvmlGpmMetricsGet(get.get()), NVML_ERROR_INVALID_ARGUMENT);
  get->sample2 = b;
  EXPECT_EQ(nvml().nvmlGpmMetricsGet(get.get()), NVML_ERROR_INVALID_ARGUMENT);  // same sample
  get->sample1 = a;
  get->numMetrics = 0;
  EXPECT_EQ(nvml().nvmlGpmMetricsGet(get.get()), NVML_ERROR_INVALID_ARGUMENT);
  get->numMetrics = NVML_GPM_METRIC_MAX + 1;
  EXPECT_EQ(nvml().nvmlGpmMetricsGet(get.get()), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(nvml().nvmlGpmMetricsGet(nullptr), NVML_ERROR_INVALID_ARGUMENT);

  get->numMetrics = 5;
  ASSERT_EQ(nvml().nvmlGpmMetricsGet(get.get()), NVML_SUCCESS);
  EXPECT_EQ(get->metrics[0].nvmlReturn, NVML_SUCCESS);
  EXPECT_DOUBLE_EQ(get->metrics[0].value, 0.000376);
  ASSERT_NE(get->metrics[0].metricInfo.longName, nullptr);
  EXPECT_STREQ(get->metrics[0].metricInfo.longName, "DRAM_BW_UTIL");
  EXPECT_STREQ(get->metrics[0].metricInfo.unit, "%");
  EXPECT_EQ(get->metrics[1].nvmlReturn, NVML_SUCCESS);
  EXPECT_DOUBLE_EQ(get->metrics[1].value, 1.349311);
  EXPECT_STREQ(get->metrics[1].metricInfo.unit, "MiB/s");
  EXPECT_EQ(get->metrics[2].nvmlReturn, NVML_ERROR_NOT_SUPPORTED);  // not in the profile
  EXPECT_EQ(get->metrics[3].nvmlReturn, NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(get->metrics[3].metricInfo.shortName, nullptr);
  EXPECT_EQ(get->metrics[4].nvmlReturn, NVML_ERROR_INVALID_ARGUMENT);

  EXPECT_EQ(nvml().nvmlGpmSampleFree(a), NVML_SUCCESS);
  EXPECT_EQ(nvml().nvmlGpmSampleFree(a), NVML_ERROR_INVALID_ARGUMENT);  // already freed
  EXPECT_EQ(nvml().nvmlGpmSampleFree(b), NVML_SUCCESS);
  EXPECT_EQ(nvml().nvmlGpmSampleFree(nullptr), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(nvml().nvmlGpmSampleAlloc(nullptr), NVML_ERROR_INVALID_ARGUMENT);
}

TEST_F(SimNvmlExtrasTest, GpmSamplesOfTwoGpusDoNotMakeAPair) {
  UseFile(OneGpuProfile(", gpm: {supported: true, sm_util: 10}"));
  ASSERT_EQ(nvml().nvmlInit_v2(), NVML_SUCCESS);
  nvmlGpmSample_t a = nullptr, b = nullptr;
  ASSERT_EQ(nvml().nvmlGpmSampleAlloc(&a), NVML_SUCCESS);
  ASSERT_EQ(nvml().nvmlGpmSampleAlloc(&b), NVML_SUCCESS);
  ASSERT_EQ(nvml().nvmlGpmSampleGet(Device(0), a), NVML_SUCCESS);
  ASSERT_EQ(nvml().nvmlGpmSampleGet(Device(1), b), NVML_SUCCESS);
  auto get = std::make_unique<nvmlGpmMetricsGet_t>();
  std::memset(get.get(), 0, sizeof *get);
  get->version = NVML_GPM_METRICS_GET_VERSION;
  get->numMetrics = 1;
  get->sample1 = a;
  get->sample2 = b;
  get->metrics[0].metricId = NVML_GPM_METRIC_SM_UTIL;
  EXPECT_EQ(nvml().nvmlGpmMetricsGet(get.get()), NVML_ERROR_INVALID_ARGUMENT);
  // The newer sample's values count: a live edit between the samples shows in the result.
  UseFile(OneGpuProfile(", gpm: {supported: true, sm_util: 55.5}"));
  ASSERT_EQ(nvml().nvmlGpmSampleGet(Device(0), b), NVML_SUCCESS);
  ASSERT_EQ(nvml().nvmlGpmMetricsGet(get.get()), NVML_SUCCESS);
  EXPECT_EQ(get->metrics[0].nvmlReturn, NVML_SUCCESS);
  EXPECT_DOUBLE_EQ(get->metrics[0].value, 55.5);
  EXPECT_EQ(nvml().nvmlGpmSampleFree(a), NVML_SUCCESS);
  EXPECT_EQ(nvml().nvmlGpmSampleFree(b), NVML_SUCCESS);
}

TEST_F(SimNvmlExtrasTest, ALostGpuSaysGpuIsLostToEveryNewEntryPoint) {
  const std::string extra =
      ", memory_temp_c: 40, pcie_replay_count: 0, encoder_util: 0, decoder_util: 0, "
      "nvlink_throughput_kib: {tx: 1, rx: 2}, gpm: {supported: true, sm_util: 1}";
  UseFile(OneGpuProfile(extra));
  ASSERT_EQ(nvml().nvmlInit_v2(), NVML_SUCCESS);
  nvmlDevice_t d = Device(0);
  nvmlGpmSample_t s = nullptr;
  ASSERT_EQ(nvml().nvmlGpmSampleAlloc(&s), NVML_SUCCESS);
  ASSERT_EQ(nvml().nvmlGpmSampleGet(d, s), NVML_SUCCESS);
  UseFile(OneGpuProfile(extra + ", lost: true"));
  nvmlFieldValue_t v = Field(NVML_FI_DEV_MEMORY_TEMP);
  EXPECT_EQ(nvml().nvmlDeviceGetFieldValues(d, 1, &v), NVML_ERROR_GPU_IS_LOST);
  unsigned value = 0, period = 0;
  EXPECT_EQ(nvml().nvmlDeviceGetPcieReplayCounter(d, &value), NVML_ERROR_GPU_IS_LOST);
  EXPECT_EQ(nvml().nvmlDeviceGetEncoderUtilization(d, &value, &period), NVML_ERROR_GPU_IS_LOST);
  EXPECT_EQ(nvml().nvmlDeviceGetDecoderUtilization(d, &value, &period), NVML_ERROR_GPU_IS_LOST);
  nvmlGpmSupport_t support = {NVML_GPM_SUPPORT_VERSION, 0};
  EXPECT_EQ(nvml().nvmlGpmQueryDeviceSupport(d, &support), NVML_ERROR_GPU_IS_LOST);
  EXPECT_EQ(nvml().nvmlGpmSampleGet(d, s), NVML_ERROR_GPU_IS_LOST);
  EXPECT_EQ(nvml().nvmlGpmSampleFree(s), NVML_SUCCESS);  // freeing still works
}

// ---- profile keys -------------------------------------------------------------------------------

TEST(ProfileExtrasTest, TheNewKeysParseAndGpuDefaultsMergeIntoEachGpu) {
  auto p = ParseProfile(R"(apiVersion: gpunode/v1
kind: NodeProfile
name: keys
driver: {version: "580.95.05", cuda_version: "13.0"}
gpu_defaults:
  name: NVIDIA H200
  device_id: 0x2335
  memory: {total_mib: 143771}
  pcie: {gen: 5, width: 16}
  compute_capability: "9.0"
  memory_temp_c: 36
  nvlink_throughput_kib: {tx: 10, rx: 20}
  gpm: {supported: true, graphics_util: 35.0, pcie_rx_mib_s: 2.5}
gpus:
  - {bus_id: "0000:18:00.0", pcie_replay_count: 3, encoder_util: 4, decoder_util: 5}
  - {bus_id: "0000:2a:00.0", memory_temp_c: 39, gpm: {sm_util: 7}}
)",
                        "keys.yaml");
  ASSERT_OK(p) << p.status();
  const Gpu& a = p->gpus[0];
  EXPECT_EQ(a.memory_temp_c, 36u);
  EXPECT_EQ(a.pcie_replay_count, 3u);
  EXPECT_EQ(a.encoder_util, 4u);
  EXPECT_EQ(a.decoder_util, 5u);
  ASSERT_TRUE(a.nvlink_throughput_kib.has_value());
  EXPECT_EQ(a.nvlink_throughput_kib->tx_kib, 10u);
  EXPECT_EQ(a.nvlink_throughput_kib->rx_kib, 20u);
  ASSERT_TRUE(a.gpm.has_value());
  EXPECT_TRUE(a.gpm->supported);
  EXPECT_EQ(a.gpm->metrics.at(NVML_GPM_METRIC_GRAPHICS_UTIL), 35.0);
  EXPECT_EQ(a.gpm->metrics.at(NVML_GPM_METRIC_PCIE_RX_PER_SEC), 2.5);
  EXPECT_EQ(a.gpm->metrics.count(NVML_GPM_METRIC_SM_UTIL), 0u);
  const Gpu& b = p->gpus[1];
  EXPECT_EQ(b.memory_temp_c, 39u);
  EXPECT_EQ(b.pcie_replay_count, std::nullopt);
  ASSERT_TRUE(b.gpm.has_value());
  EXPECT_EQ(b.gpm->metrics.at(NVML_GPM_METRIC_SM_UTIL), 7.0);
  EXPECT_EQ(b.gpm->metrics.at(NVML_GPM_METRIC_GRAPHICS_UTIL), 35.0);  // merged from defaults
}

TEST(ProfileExtrasTest, BadValuesAreRejectedWithTheirPath) {
  const std::string head = R"(apiVersion: gpunode/v1
kind: NodeProfile
name: bad
driver: {version: "580.95.05", cuda_version: "13.0"}
gpus:
  - {name: NVIDIA H200, device_id: 0x2335, memory: {total_mib: 1}, pcie: {gen: 5, width: 16}, compute_capability: "9.0", bus_id: "0000:18:00.0", )";
  struct Case {
    const char* extra;
    const char* expect;
  } cases[] = {
      {"encoder_util: 101}", "gpus[0].encoder_util"},
      {"gpm: {sm_util: 150}}", "gpus[0].gpm.sm_util"},
      {"gpm: {tensor: 1}}", "bad.yaml:6: gpus[0].gpm: unknown key \"tensor\""},
      {"nvlink_throughput_kib: {tx: 1}}", "gpus[0].nvlink_throughput_kib.rx"},
      {"memory_temp_c: hot}", "gpus[0].memory_temp_c"},
  };
  for (const Case& c : cases) {
    auto p = ParseProfile(head + c.extra + "\n", "bad.yaml");
    ASSERT_FALSE(p.ok()) << c.extra;
    EXPECT_NE(std::string(p.status().message()).find(c.expect), std::string::npos)
        << p.status() << " for " << c.extra;
  }
}

}  // namespace
}  // namespace gpunode::sim
