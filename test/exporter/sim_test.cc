// Sampling simulated nodes through the real NVML loader and the simulated libnvidia-ml, and
// rendering what /metrics will answer.
//
// Golden file: test/fixtures/exporter/dgx-h200.prom is the exact text for the simulated dgx-h200
// with the default counters, timestamp 1767225600.5, duration 0.0125 s and version "test". After
// an intended change, regenerate it with
//   GPUNODE_UPDATE_GOLDEN=1 build-exp/bin/exporter_tests --gtest_filter='*Golden*'
// and review the diff.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/support/profile.h"
#include "src/exporter/exporter.h"
#include "src/exporter/render.h"
#include "src/exporter/sample.h"
#include "src/node/probe.h"
#include "src/node/unreadable_gpus.h"
#include "test/exporter/sim_node.h"
#include "test/testing/sim_library.h"
#include "test/testing/status_matchers.h"

namespace gpunode::exporter {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

using ::gpunode::testing::SimLibrary;
using testing_sim::ReadAll;
using testing_sim::SimNode;

RenderOptions TestOptions() {
  RenderOptions o;
  o.version = "test";
  return o;
}

TEST(ExporterSimTest, TheSimulatedDgxH200MatchesTheGoldenMetricsByteForByte) {
  SimNode node("dgx-h200");
  ASSERT_TRUE(node.ok());
  const NodeSnapshot snap = node.Collect("dgx-h200-01");
  const std::string text = RenderMetrics(snap, DefaultCounters(), TestOptions());
  const fs::path golden = fs::path(GPUNODE_SOURCE_DIR) / "test/fixtures/exporter/dgx-h200.prom";
  if (std::getenv("GPUNODE_UPDATE_GOLDEN") != nullptr)
    std::ofstream(golden, std::ios::binary) << text;
  EXPECT_EQ(text, ReadAll(golden)) << "regenerate: see the comment at the top of this file";
}

TEST(ExporterSimTest, SamplesEveryDgxH200GpuWithTheFieldsNvmlGives) {
  SimNode node("dgx-h200");
  ASSERT_TRUE(node.ok());
  const NodeSnapshot snap = node.Collect("dgx-h200-01");
  EXPECT_OK(snap.status) << snap.status;
  EXPECT_EQ(snap.driver_version, "580.95.05");
  ASSERT_EQ(snap.gpus.size(), 8u);
  EXPECT_TRUE(snap.collection_errors_total.empty());
  const GpuSample& g = snap.gpus[0];
  EXPECT_TRUE(g.healthy);
  EXPECT_EQ(g.uuid, "GPU-0b566429-adc1-458a-9244-af5a49e0505e");
  EXPECT_EQ(g.pci_bus_id, "00000000:18:00.0");
  EXPECT_EQ(g.device, "nvidia0");
  EXPECT_EQ(g.model_name, "NVIDIA H200");
  EXPECT_EQ(g.value(FieldId::kGpuTemp), 31);
  EXPECT_EQ(g.value(FieldId::kPowerUsage), 74.5);
  EXPECT_EQ(g.value(FieldId::kSmClock), 1980);
  EXPECT_EQ(g.value(FieldId::kMemClock), 3201);
  EXPECT_EQ(g.value(FieldId::kTotalEnergyConsumption), 183920331);
  EXPECT_EQ(g.value(FieldId::kFbReserved), 568);
  // DCGM_FI_DEV_FB_TOTAL (250): nvmlDeviceGetMemoryInfo_v2's total / 2^20, reserved included.
  EXPECT_EQ(g.value(FieldId::kFbTotal), 143771);
  EXPECT_EQ(*g.value(FieldId::kFbTotal),
            *g.value(FieldId::kFbFree) + *g.value(FieldId::kFbUsed) + *g.value(FieldId::kFbReserved));
  EXPECT_EQ(g.value(FieldId::kRowRemapFailure), 0);
  EXPECT_EQ(g.value(FieldId::kMemoryTemp), 36);
  EXPECT_EQ(g.value(FieldId::kPcieReplayCounter), 0);
  EXPECT_EQ(g.value(FieldId::kEncUtil), 0);
  // Two-pass fields are not in a one-shot collection: left out, not 0.
  EXPECT_EQ(g.value(FieldId::kProfGrEngineActive), std::nullopt);
  EXPECT_EQ(g.value(FieldId::kNvlinkBandwidthTotal), std::nullopt);
  EXPECT_TRUE(g.errors.empty());
  EXPECT_EQ(snap.gpus[7].index, 7u);
  EXPECT_EQ(snap.gpus[7].device, "nvidia7");
}

TEST(ExporterSimTest, EveryFieldTheCatalogueMarksProducedHasAValueAndNoOtherDoes) {
  SimNode node("dgx-h200");
  ASSERT_TRUE(node.ok());
  const NodeSnapshot snap = node.Collect("dgx-h200-01");
  ASSERT_FALSE(snap.gpus.empty());
  for (const FieldInfo& f : Catalogue()) {
    if (f.type == MetricType::kLabel) continue;
    // A one-shot pass cannot give rates or GPM ratios (two samples) nor XIDs (the event watcher):
    // the Exporter's test below covers those.
    const bool two_pass = f.id == FieldId::kNvlinkBandwidthTotal || f.id == FieldId::kXidErrors ||
                          f.name.rfind("DCGM_FI_PROF_", 0) == 0;
    EXPECT_EQ(snap.gpus[0].value(f.id).has_value(), f.produced && !two_pass) << f.name;
  }
}

TEST(ExporterSimTest, TheRunningExporterProducesEveryProducedFieldIncludingTheTwoPassOnes) {
  SimNode node("dgx-h200");
  ASSERT_TRUE(node.ok());
  ExporterOptions o;
  o.interval = std::chrono::milliseconds(150);
  std::vector<Counter> all;
  for (const FieldInfo& f : Catalogue()) {
    all.push_back(Counter{&f, f.type, std::string(f.help)});
  }
  o.counters = all;
  Exporter e(node.nvml(), o);
  e.Start();
  auto complete = [&] {
    auto snap = e.Latest();
    return snap && !snap->gpus.empty() && snap->gpus[0].value(FieldId::kProfGrEngineActive) &&
           snap->gpus[0].value(FieldId::kNvlinkBandwidthTotal);
  };
  for (int i = 0; i < 100 && !complete(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  auto snap = e.Latest();
  e.Stop();
  ASSERT_TRUE(snap);
  ASSERT_EQ(snap->gpus.size(), 8u);
  for (const FieldInfo& f : Catalogue()) {
    if (f.type == MetricType::kLabel) continue;
    EXPECT_EQ(snap->gpus[0].value(f.id).has_value(), f.produced) << f.name;
  }
  // The profile's GPM values, converted as DCGM does (percent / 100; MiB/s * 2^20).
  const GpuSample& g = snap->gpus[0];
  EXPECT_EQ(g.value(FieldId::kXidErrors), 0);
  EXPECT_GT(*g.value(FieldId::kProfPcieTxBytes), 1e6);
  EXPECT_LE(*g.value(FieldId::kProfDramActive), 1.0);
  // The profile's NVLink counters do not move: the rate is 0.
  EXPECT_EQ(g.value(FieldId::kNvlinkBandwidthTotal), 0);
}

// At a long interval the start-up log must not call a rate "unsupported" because its second sample
// has not come yet (#14: NVLink bandwidth was "no GPU supports it", then appeared 30 s later).
TEST(ExporterSimTest, StartupLogSaysARateWaitsForItsSecondSampleInsteadOfUnsupported) {
  SimNode node("dgx-h200");
  ASSERT_TRUE(node.ok());
  ExporterOptions o;
  o.interval = std::chrono::milliseconds(30000);
  std::vector<Counter> all;
  for (const FieldInfo& f : Catalogue()) {
    if (f.produced) all.push_back(Counter{&f, f.type, std::string(f.help)});
  }
  o.counters = all;
  std::mutex mu;
  std::vector<std::string> lines;
  o.log = [&](const std::string& line) {
    std::lock_guard<std::mutex> lock(mu);
    lines.push_back(line);
  };
  Exporter e(node.nvml(), o);
  e.Start();
  auto logged = [&](const std::string& what) {
    std::lock_guard<std::mutex> lock(mu);
    for (const std::string& l : lines) {
      if (l.find(what) != std::string::npos) return l;
    }
    return std::string();
  };
  // The field-support line comes after the second GPM sample (1 s).
  for (int i = 0; i < 100 && logged("first values after").empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  e.Stop();
  const std::string pending = logged("first values after");
  EXPECT_NE(pending.find("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL"), std::string::npos) << pending;
  EXPECT_NE(pending.find("30 s"), std::string::npos) << pending;
  EXPECT_EQ(logged("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL (no GPU supports it)"), "");
}

TEST(ExporterSimTest, ALostGpuKeepsTheOtherGpusSeriesAndReportsHealthZero) {
  SimNode node("broken-fallen-gpu");
  ASSERT_TRUE(node.ok());
  const NodeSnapshot snap = node.Collect("gpu-node-fallen");
  ASSERT_EQ(snap.gpus.size(), 4u);
  EXPECT_TRUE(snap.gpus[0].healthy);
  EXPECT_TRUE(snap.gpus[1].healthy);
  EXPECT_FALSE(snap.gpus[2].healthy);
  EXPECT_TRUE(snap.gpus[3].healthy);
  EXPECT_EQ(snap.gpus[2].status.code(), absl::StatusCode::kUnavailable) << snap.gpus[2].status;
  EXPECT_EQ(snap.collection_errors_total.at("gpu"), 1u);

  const std::string text = RenderMetrics(snap, DefaultCounters(), TestOptions());
  for (const char* gpu : {"0", "1", "3"}) {
    EXPECT_THAT(text, HasSubstr(std::string("DCGM_FI_DEV_GPU_TEMP{gpu=\"") + gpu + "\""));
    EXPECT_THAT(text, HasSubstr(std::string("DCGM_FI_DEV_FB_USED{gpu=\"") + gpu + "\""));
  }
  EXPECT_THAT(text,
              Not(HasSubstr("{gpu=\"2\",UUID=\"\",pci_bus_id=\"\",device=\"nvidia2\",modelName")));
  EXPECT_THAT(text, Not(HasSubstr("DCGM_FI_DEV_GPU_TEMP{gpu=\"2\"")));
  EXPECT_THAT(text,
              HasSubstr("gpunode_gpu_health{gpu=\"2\",UUID=\"\",pci_bus_id=\"\",device=\"nvidia2\","
                        "Hostname=\"gpu-node-fallen\"} 0\n"));
  EXPECT_THAT(
      text,
      HasSubstr(
          "gpunode_gpu_health{gpu=\"3\",UUID=\"GPU-fa1829e0-9825-4249-98c2-7e4d3297dd5f\","
          "pci_bus_id=\"00000000:5D:00.0\",device=\"nvidia3\",Hostname=\"gpu-node-fallen\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("gpunode_collection_errors_total{field=\"gpu\"} 1\n"));
}

// Issue #14: a GPU lost before the exporter started had `UUID="",pci_bus_id=""` although sysfs
// and /proc know it; NVML itself can no longer tell either.
TEST(ExporterSimTest, ALostGpuTakesItsBusIdUuidAndModelFromTheBus) {
  SimNode node("broken-fallen-gpu");
  ASSERT_TRUE(node.ok());
  const std::vector<node::BusGpu> bus = node.BusGpus();
  ASSERT_EQ(bus.size(), 4u);
  const NodeSnapshot snap = node.Collect("gpu-node-fallen", nullptr, bus);
  ASSERT_EQ(snap.gpus.size(), 4u);
  const GpuSample& lost = snap.gpus[2];
  EXPECT_FALSE(lost.healthy);
  EXPECT_EQ(lost.pci_bus_id, "00000000:3A:00.0");
  EXPECT_EQ(lost.uuid, "GPU-f48edef6-247e-4153-9d4f-19d7905b346f");
  EXPECT_EQ(lost.model_name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(lost.device, "nvidia2");

  const std::string text = RenderMetrics(snap, DefaultCounters(), TestOptions());
  EXPECT_THAT(
      text,
      HasSubstr(
          "gpunode_gpu_health{gpu=\"2\",UUID=\"GPU-f48edef6-247e-4153-9d4f-19d7905b346f\","
          "pci_bus_id=\"00000000:3A:00.0\",device=\"nvidia2\",Hostname=\"gpu-node-fallen\"} 0\n"));
  // Still no DCGM series for it: it has no values.
  EXPECT_THAT(text, Not(HasSubstr("DCGM_FI_DEV_GPU_TEMP{gpu=\"2\"")));
  // The others keep NVML's own identity.
  EXPECT_THAT(text, HasSubstr("gpunode_gpu_health{gpu=\"3\",UUID=\"GPU-fa1829e0-9825-4249-98c2-7e4d3297dd5f\","
                              "pci_bus_id=\"00000000:5D:00.0\""));
}

TEST(ExporterSimTest, ALostGpuKeepsTheIdentityOfThePreviousPassAndErrorsAccumulate) {
  SimNode node("broken-fallen-gpu");
  ASSERT_TRUE(node.ok());
  NodeSnapshot before = node.Collect("gpu-node-fallen");
  ASSERT_EQ(before.gpus.size(), 4u);
  // As if GPU 2 had answered on the pass before it fell off the bus.
  before.gpus[2].uuid = "GPU-f48edef6-247e-4153-9d4f-19d7905b346f";
  before.gpus[2].pci_bus_id = "00000000:3A:00.0";
  before.gpus[2].model_name = "NVIDIA H100 80GB HBM3";
  const NodeSnapshot after = node.Collect("gpu-node-fallen", &before);
  ASSERT_EQ(after.gpus.size(), 4u);
  EXPECT_FALSE(after.gpus[2].healthy);
  EXPECT_EQ(after.gpus[2].uuid, "GPU-f48edef6-247e-4153-9d4f-19d7905b346f");
  EXPECT_EQ(after.collection_errors_total.at("gpu"), 2u);
  EXPECT_THAT(
      RenderSelfMetrics(after, TestOptions()),
      HasSubstr(
          "gpunode_gpu_health{gpu=\"2\",UUID=\"GPU-f48edef6-247e-4153-9d4f-19d7905b346f\","
          "pci_bus_id=\"00000000:3A:00.0\",device=\"nvidia2\",Hostname=\"gpu-node-fallen\"} 0\n"));
}

TEST(SnapshotStoreTest, PublishesTheLatestSnapshotWithoutCopying) {
  SnapshotStore store;
  EXPECT_EQ(store.Latest(), nullptr);
  NodeSnapshot a;
  a.hostname = "a";
  store.Publish(a);
  std::shared_ptr<const NodeSnapshot> held = store.Latest();
  ASSERT_NE(held, nullptr);
  NodeSnapshot b;
  b.hostname = "b";
  store.Publish(b);
  EXPECT_EQ(held->hostname, "a");  // a scrape in progress keeps its snapshot
  EXPECT_EQ(store.Latest()->hostname, "b");
}

}  // namespace
}  // namespace gpunode::exporter
