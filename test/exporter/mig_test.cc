// MIG GPU instances as their own entities (src/exporter/mig_sample.h) on the simulated a100-mig
// node (one A100-SXM4-80GB in MIG mode: a 3g.40gb GPU instance 2 and two 2g.20gb, instances 3
// and 4; one process of 12288 MiB in instance 2), through the real NVML loader and the simulated
// libnvidia-ml.
//
// Golden file: test/fixtures/exporter/a100-mig.prom, the default counters plus
// DCGM_FI_DEV_FB_TOTAL, with pods on two instances (by MIG UUID and by NVIDIA's DRA name). Its
// leading comment lines quote dcgm-exporter's source for the label set; they are kept when the
// file is regenerated:
//   GPUNODE_UPDATE_GOLDEN=1 build-asan/bin/exporter_tests --gtest_filter='*Golden*'
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "podresources/v1/api.pb.h"
#include "src/exporter/exporter.h"
#include "src/exporter/mig_sample.h"
#include "src/exporter/pod_mapper.h"
#include "src/exporter/render.h"
#include "src/exporter/status_page.h"
#include "test/exporter/sim_node.h"
#include "test/testing/podresources_emulator.h"
#include "test/testing/status_matchers.h"

namespace gpunode::exporter {
namespace {

namespace fs = std::filesystem;
using ::gpunode::testing::PodResourcesEmulator;
using ::testing::HasSubstr;
using ::testing::Not;
using testing_sim::ReadAll;
using testing_sim::SimNode;

constexpr char kMig3g[] = "MIG-3566fd0d-6599-4b29-a558-a0b80cee56ab";   // GPU instance 2
constexpr char kMig2gA[] = "MIG-e14bc570-a58b-467a-b377-bfae0b8deff0";  // GPU instance 3
constexpr char kParent[] = "GPU-9ea7edb1-507a-4f83-9f24-40c38a689ab1";

RenderOptions TestOptions() {
  RenderOptions o;
  o.version = "test";
  return o;
}

std::vector<Counter> DefaultPlusFbTotal() {
  std::vector<Counter> c = DefaultCounters();
  c.push_back(Counter{&Field(FieldId::kFbTotal), MetricType::kGauge, std::string(Field(FieldId::kFbTotal).help)});
  return c;
}

// The golden file's leading comment lines (not HELP/TYPE) and the rest.
std::pair<std::string, std::string> SplitGolden(const std::string& text) {
  size_t pos = 0;
  while (pos < text.size() && text.compare(pos, 1, "#") == 0 && text.compare(pos, 7, "# HELP ") != 0 &&
         text.compare(pos, 7, "# TYPE ") != 0) {
    const size_t eol = text.find('\n', pos);
    pos = eol == std::string::npos ? text.size() : eol + 1;
  }
  return {text.substr(0, pos), text.substr(pos)};
}

void ExpectGolden(const std::string& text, const std::string& name) {
  const fs::path golden = fs::path(GPUNODE_SOURCE_DIR) / "test/fixtures/exporter" / name;
  auto [header, body] = SplitGolden(ReadAll(golden));
  ASSERT_FALSE(header.empty()) << golden << " must start with comment lines naming its source";
  if (std::getenv("GPUNODE_UPDATE_GOLDEN") != nullptr) std::ofstream(golden, std::ios::binary) << header << text;
  EXPECT_EQ(text, body) << "regenerate: see the comment at the top of this file";
}

TEST(MigInstanceTest, ProfileNamesAreDcgmsSlicesAndMemoryRoundedUpToGiB) {
  constexpr uint64_t kMiB = 1024 * 1024;
  EXPECT_EQ(MigInstanceProfileName(3, 40192 * kMiB), "3g.40gb");
  EXPECT_EQ(MigInstanceProfileName(2, 19968 * kMiB), "2g.20gb");
  // An A100 80GB's whole-GPU instance: dcgm-exporter issue #713 shows GPU_I_PROFILE="7g.79gb".
  EXPECT_EQ(MigInstanceProfileName(7, 80896 * kMiB), "7g.79gb");
  EXPECT_EQ(MigInstanceProfileName(1, 9856 * kMiB), "1g.10gb");
  EXPECT_EQ(MigInstanceProfileName(std::nullopt, 9856 * kMiB), "");
  EXPECT_EQ(MigInstanceProfileName(1, std::nullopt), "");
}

TEST(MigInstanceTest, AGpuInMigModeIsSampledPerGpuInstanceWithItsOwnMemory) {
  SimNode node("a100-mig");
  ASSERT_TRUE(node.ok());
  const NodeSnapshot snap = node.Collect("a100-mig-01");
  ASSERT_EQ(snap.gpus.size(), 1u);
  const GpuSample& g = snap.gpus[0];
  EXPECT_TRUE(g.mig_enabled);
  EXPECT_TRUE(g.errors.empty());
  ASSERT_EQ(g.mig_instances.size(), 3u);
  const MigInstanceSample& big = g.mig_instances[0];
  EXPECT_EQ(big.gpu_instance_id, 2u);
  EXPECT_EQ(big.profile, "3g.40gb");
  EXPECT_THAT(big.uuids, ::testing::ElementsAre(kMig3g));
  EXPECT_EQ(big.gi_profile_id, 9u);
  EXPECT_EQ(big.placement_start, 4u);
  // nvmlDeviceGetMemoryInfo_v2 on its MIG device: the instance's 40192 MiB, the process's 12288.
  EXPECT_EQ(big.value(FieldId::kFbTotal), 40192);
  EXPECT_EQ(big.value(FieldId::kFbUsed), 12288);
  EXPECT_EQ(big.value(FieldId::kFbFree), 40192 - 12288);
  EXPECT_EQ(big.value(FieldId::kFbReserved), 0);
  EXPECT_EQ(g.mig_instances[1].gpu_instance_id, 3u);
  EXPECT_EQ(g.mig_instances[1].profile, "2g.20gb");
  EXPECT_EQ(g.mig_instances[1].value(FieldId::kFbUsed), 0);
  EXPECT_EQ(g.mig_instances[2].gpu_instance_id, 4u);

  // What an instance series carries: its memory, the parent's clocks and temperature, no
  // utilization (NVML: not supported in MIG mode), no DCGM_FI_PROF_* (not per instance here).
  EXPECT_EQ(InstanceValue(g, big, FieldId::kFbUsed), 12288);
  EXPECT_EQ(InstanceValue(g, big, FieldId::kSmClock), 1410);
  EXPECT_EQ(InstanceValue(g, big, FieldId::kGpuTemp), 41);
  EXPECT_EQ(InstanceValue(g, big, FieldId::kGpuUtil), std::nullopt);
  EXPECT_EQ(g.value(FieldId::kGpuUtil), std::nullopt);
  EXPECT_EQ(g.value(FieldId::kEncUtil), std::nullopt);
  GpuSample with_prof = g;
  with_prof.set(FieldId::kProfGrEngineActive, 0.5);
  EXPECT_EQ(InstanceValue(with_prof, big, FieldId::kProfGrEngineActive), std::nullopt);
}

// The pods of the golden file: the 3g.40gb by its MIG UUID (nvidia.com/mig-3g.40gb, the device
// plugin), one 2g.20gb by NVIDIA's DRA name (gpu-<minor>-mig-<profile>-<GI profile id>-<start>;
// the a100-mig GPU has minor 0 and its 2g GI 3 is A100 profile id 14 at memory slice 0), and a
// GKE-style id for GPU instance 4 of GPU 0.
PodMapping MigPods() {
  v1::ListPodResourcesResponse r;
  PodResourcesEmulator::AddContainer(&r, "ml", "train-0", "main", "nvidia.com/mig-3g.40gb", {kMig3g});
  PodResourcesEmulator::AddContainer(&r, "ml", "serve-0", "server", "nvidia.com/gpu", {"nvidia0/gi4"});
  v1::ListPodResourcesResponse dra;
  auto* pod = dra.add_pod_resources();
  pod->set_name("infer-0");
  pod->set_namespace_("inference");
  auto* c = pod->add_containers();
  c->set_name("model");
  auto* claim = c->add_dynamic_resources();
  claim->set_claim_name("mig-claim");
  claim->set_claim_namespace("inference");
  auto* cr = claim->add_claim_resources();
  cr->set_driver_name("gpu.nvidia.com");
  cr->set_pool_name("a100-mig-01");
  cr->set_device_name("gpu-0-mig-2g20gb-14-0");
  for (const auto& p : dra.pod_resources()) *r.add_pod_resources() = p;
  return BuildPodMapping(r, {}, DraSource{.driver = "gpu.nvidia.com", .pool = "a100-mig-01"});
}

TEST(MigInstanceTest, TheSimulatedA100MigMatchesTheGoldenMetricsByteForByte) {
  SimNode node("a100-mig");
  ASSERT_TRUE(node.ok());
  const NodeSnapshot snap = node.Collect("a100-mig-01");
  const PodMapping pods = MigPods();
  RenderOptions o = TestOptions();
  o.pods = &pods;
  ExpectGolden(RenderMetrics(snap, DefaultPlusFbTotal(), o), "a100-mig.prom");
}

TEST(MigInstanceTest, InstanceSeriesReplaceTheGpusAndCarryItsPods) {
  SimNode node("a100-mig");
  ASSERT_TRUE(node.ok());
  const NodeSnapshot snap = node.Collect("a100-mig-01");
  const PodMapping pods = MigPods();
  RenderOptions o = TestOptions();
  o.pods = &pods;
  const std::string text = RenderMetrics(snap, DefaultPlusFbTotal(), o);
  const std::string ids = std::string("gpu=\"0\",UUID=\"") + kParent +
                          "\",pci_bus_id=\"00000000:07:00.0\",device=\"nvidia0\",modelName=\"NVIDIA A100-SXM4-80GB\",";
  EXPECT_THAT(text, HasSubstr("DCGM_FI_DEV_FB_USED{" + ids +
                              "GPU_I_PROFILE=\"3g.40gb\",GPU_I_ID=\"2\",Hostname=\"a100-mig-01\","
                              "DCGM_FI_DRIVER_VERSION=\"550.127.05\",container=\"main\",namespace=\"ml\","
                              "pod=\"train-0\"} 12288\n"));
  EXPECT_THAT(text, HasSubstr("DCGM_FI_DEV_FB_TOTAL{" + ids +
                              "GPU_I_PROFILE=\"2g.20gb\",GPU_I_ID=\"3\",Hostname=\"a100-mig-01\","
                              "DCGM_FI_DRIVER_VERSION=\"550.127.05\",container=\"model\",namespace=\"inference\","
                              "pod=\"infer-0\"} 19968\n"));
  EXPECT_THAT(text, HasSubstr("DCGM_FI_DEV_SM_CLOCK{" + ids +
                              "GPU_I_PROFILE=\"2g.20gb\",GPU_I_ID=\"4\",Hostname=\"a100-mig-01\","
                              "DCGM_FI_DRIVER_VERSION=\"550.127.05\",container=\"server\",namespace=\"ml\","
                              "pod=\"serve-0\"} 1410\n"));
  // No series of the whole GPU, and none without GPU_I_ID.
  EXPECT_THAT(text, Not(HasSubstr("modelName=\"NVIDIA A100-SXM4-80GB\",Hostname=")));
  EXPECT_THAT(text, Not(HasSubstr("DCGM_FI_DEV_GPU_UTIL")));
  // gpunode_gpu_health stays one per GPU.
  EXPECT_THAT(text, HasSubstr(std::string("gpunode_gpu_health{gpu=\"0\",UUID=\"") + kParent +
                              "\",pci_bus_id=\"00000000:07:00.0\",device=\"nvidia0\",Hostname=\"a100-mig-01\"} 1\n"));
  // The status page names each instance's pod with its profile.
  StatusPageOptions sp;
  sp.pods = &pods;
  const std::string page = RenderStatusPage(&snap, sp);
  EXPECT_THAT(page, HasSubstr("ml/train-0 (3g.40gb)"));
  EXPECT_THAT(page, HasSubstr("inference/infer-0 (2g.20gb)"));
}

TEST(MigInstanceTest, TheExporterServesInstanceSeriesAndCallsMigUtilizationUnsupported) {
  SimNode node("a100-mig");
  ASSERT_TRUE(node.ok());
  ExporterOptions o;
  o.interval = std::chrono::milliseconds(100);
  o.counters = DefaultPlusFbTotal();
  o.hostname = "a100-mig-01";
  std::vector<std::string> lines;
  o.log = [&lines](const std::string& line) { lines.push_back(line); };
  Exporter e(node.nvml(), o);
  e.CollectOnce(std::chrono::milliseconds(100));
  const std::string text = *e.Metrics();
  EXPECT_THAT(text, HasSubstr("GPU_I_PROFILE=\"3g.40gb\",GPU_I_ID=\"2\",Hostname=\"a100-mig-01\","
                              "DCGM_FI_DRIVER_VERSION=\"550.127.05\"} 12288\n"));
  // Both rounds are done: what has no value is not supported, nothing "waits for a second sample"
  // (utilization in MIG mode, GPM on an A100).
  std::string omitting, waiting;
  for (const std::string& l : lines) {
    if (l.starts_with("omitting")) omitting = l;
    if (l.starts_with("first values after")) waiting = l;
  }
  EXPECT_THAT(omitting, HasSubstr("DCGM_FI_DEV_GPU_UTIL (no GPU supports it)"));
  EXPECT_THAT(omitting, HasSubstr("DCGM_FI_PROF_GR_ENGINE_ACTIVE (no GPU supports it)"));
  EXPECT_EQ(waiting, "");
}

TEST(MigInstanceTest, AGpuInMigModeWithoutInstancesKeepsItsOwnSeries) {
  SimNode node("a100-mig");
  ASSERT_TRUE(node.ok());
  NodeSnapshot snap = node.Collect("a100-mig-01");
  ASSERT_EQ(snap.gpus.size(), 1u);
  snap.gpus[0].mig_instances.clear();
  const std::string text = RenderMetrics(snap, DefaultPlusFbTotal(), TestOptions());
  EXPECT_THAT(text, HasSubstr("modelName=\"NVIDIA A100-SXM4-80GB\",Hostname=\"a100-mig-01\","));
  EXPECT_THAT(text, Not(HasSubstr("GPU_I_ID")));
}

TEST(MigInstanceTest, PodsFindAnInstanceByAnyOfItsKeys) {
  MigInstanceSample m;
  m.gpu_instance_id = 3;
  m.uuids = {"MIG-aaaa", "MIG-bbbb"};
  m.gi_profile_id = 14;
  m.placement_start = 2;
  v1::ListPodResourcesResponse r;
  PodResourcesEmulator::AddContainer(&r, "ns", "by-second-ci", "c", "nvidia.com/mig-1c.2g.20gb", {"MIG-bbbb"});
  PodMapping by_uuid = BuildPodMapping(r, {});
  ASSERT_NE(by_uuid.ForMigInstance(1, 5, m), nullptr);
  EXPECT_EQ(by_uuid.ForMigInstance(1, 5, m)->front().pod, "by-second-ci");

  v1::ListPodResourcesResponse gke;
  PodResourcesEmulator::AddContainer(&gke, "ns", "gke", "c", "nvidia.com/gpu", {"nvidia1/gi3/vgpu2"});
  PodMapping by_gke = BuildPodMapping(gke, {});
  EXPECT_EQ(by_gke.by_device.count("nvidia1/gi3"), 1u);
  ASSERT_NE(by_gke.ForMigInstance(1, 5, m), nullptr);
  EXPECT_EQ(by_gke.ForMigInstance(0, 5, m), nullptr);  // GPU index 0 is another GPU

  PodMapping by_dra;
  by_dra.ok = true;
  by_dra.by_device["gpu-5-mig-2g20gb-14-2"] = {PodRef{"dra", "ns", "c"}};
  by_dra.by_device["gpu-5-mig-2g20gb-14-20"] = {PodRef{"other-start", "ns", "c"}};
  by_dra.by_device["gpu-5-mig-1g10gb-114-2"] = {PodRef{"other-profile-id", "ns", "c"}};
  ASSERT_NE(by_dra.ForMigInstance(1, 5, m), nullptr);
  EXPECT_EQ(by_dra.ForMigInstance(1, 5, m)->front().pod, "dra");
  EXPECT_EQ(by_dra.ForMigInstance(1, 6, m), nullptr);             // another minor number
  EXPECT_EQ(by_dra.ForMigInstance(1, std::nullopt, m), nullptr);  // no minor: no DRA name
  m.placement_start = 4;
  EXPECT_EQ(by_dra.ForMigInstance(1, 5, m), nullptr);
}

}  // namespace
}  // namespace gpunode::exporter
