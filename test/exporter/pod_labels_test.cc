// The pods' own labels and pod_uid on the series (--kubernetes-enable-pod-labels,
// --kubernetes-enable-pod-uid): the rendered label set against dcgm-exporter's, and the running
// exporter with the kubelet's pod-resources API (test/testing/podresources_emulator.h) and an API
// server (test/testing/fake_api_server.h) read through the real kube::Client.
//
// Golden file: test/fixtures/exporter/pod-labels.prom (simulated dgx-h200, two counters and the
// driver version label, pods on GPUs 0 and 1; GPU 1's pod carries labels that would collide with
// the series' own). Its leading comment lines quote dcgm-exporter's source and are kept when it is
// regenerated:
//   GPUNODE_UPDATE_GOLDEN=1 build-asan/bin/exporter_tests --gtest_filter='*Golden*'
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "podresources/v1/api.pb.h"
#include "src/exporter/exporter.h"
#include "src/exporter/pod_metadata.h"
#include "src/exporter/render.h"
#include "src/kube/client.h"
#include "test/exporter/sim_node.h"
#include "test/testing/fake_api_server.h"
#include "test/testing/podresources_emulator.h"
#include "test/testing/status_matchers.h"

namespace gpunode::exporter {
namespace {

namespace fs = std::filesystem;
using ::gpunode::testing::FakeApiServer;
using ::gpunode::testing::PodResourcesEmulator;
using ::testing::HasSubstr;
using ::testing::Not;
using json = nlohmann::json;
using testing_sim::ReadAll;
using testing_sim::SimNode;

constexpr char kGpu0[] = "GPU-0b566429-adc1-458a-9244-af5a49e0505e";
constexpr char kGpu1[] = "GPU-7f553f48-e049-4eda-97cf-c73c16550250";

json Pod(const std::string& uid, json labels) {
  return {{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", {{"uid", uid}, {"labels", std::move(labels)}}}};
}

std::vector<Counter> Counters() {
  auto c = ParseCounters(
      "DCGM_FI_DEV_GPU_TEMP, gauge, GPU temperature (in C).\n"
      "DCGM_FI_DEV_FB_USED, gauge, Framebuffer memory used (in MiB).\n"
      "DCGM_FI_DRIVER_VERSION, label, Driver Version\n");
  EXPECT_OK(c) << c.status();
  return c.ok() ? *c : std::vector<Counter>{};
}

v1::ListPodResourcesResponse TwoPods() {
  v1::ListPodResourcesResponse r;
  PodResourcesEmulator::AddContainer(&r, "ml", "train-0", "main", "nvidia.com/gpu", {kGpu0});
  PodResourcesEmulator::AddContainer(&r, "tenant", "sly", "app", "nvidia.com/gpu", {kGpu1});
  return r;
}

json TrainPod() {
  return Pod("3f1c8e2a-0b6d-4c1e-9a57-2d4f6b8c0e13",
             {{"app.kubernetes.io/name", "trainer"}, {"team", "vision"}, {"pod-template-hash", "7d9c5b"}});
}

// A tenant's labels named like the series' own labels: left out (dcgm-exporter would print gpu,
// modelName and Hostname twice and Prometheus would refuse the scrape; it would replace
// DCGM_FI_DRIVER_VERSION and drop pod and pod_uid). err_code and err_msg are kept for XID's series.
json SlyPod() {
  return Pod("9b2d7c41-5e8f-4a63-b0d1-7c2e9f4a8b56", {{"gpu", "99"},
                                                    {"modelName", "fake"},
                                                    {"Hostname", "elsewhere"},
                                                    {"pod", "other"},
                                                    {"pod_uid", "x"},
                                                    {"DCGM_FI_DRIVER_VERSION", "1.0"},
                                                    {"err.code", "1"},
                                                    {"tier", "gold"}});
}

TEST(PodLabelsRenderTest, TheSimulatedDgxH200WithPodLabelsMatchesTheGoldenMetricsByteForByte) {
  SimNode node("dgx-h200");
  ASSERT_TRUE(node.ok());
  NodeSnapshot snap = node.Collect("dgx-h200-01");
  const PodMapping pods = BuildPodMapping(TwoPods(), {});
  PodMetadataSnapshot meta;
  auto train = ExtractPodMetadata(TrainPod(), nullptr, "pod ml/train-0");
  auto sly = ExtractPodMetadata(SlyPod(), nullptr, "pod tenant/sly");
  ASSERT_OK(train);
  ASSERT_OK(sly);
  meta.pods[PodKey{"ml", "train-0"}] = *train;
  meta.pods[PodKey{"tenant", "sly"}] = *sly;
  RenderOptions o;
  o.version = "test";
  o.pods = &pods;
  o.pod_metadata = &meta;
  o.pod_labels = true;
  o.pod_uid = true;
  const std::string text = RenderMetrics(snap, Counters(), o);

  const fs::path golden = fs::path(GPUNODE_SOURCE_DIR) / "test/fixtures/exporter/pod-labels.prom";
  const std::string file = ReadAll(golden);
  size_t body = 0;
  while (body < file.size() && file.compare(body, 2, "# ") == 0 && file.compare(body, 7, "# HELP ") != 0) {
    body = file.find('\n', body) + 1;
  }
  ASSERT_GT(body, 0u) << golden << " must start with comment lines naming its source";
  if (std::getenv("GPUNODE_UPDATE_GOLDEN") != nullptr) {
    std::ofstream(golden, std::ios::binary) << file.substr(0, body) << text;
  }
  EXPECT_EQ(text, file.substr(body)) << "regenerate: see the comment at the top of this file";

  // GPU 0: the pod's labels among the label rows by name, then container, namespace, pod, pod_uid.
  EXPECT_THAT(text, HasSubstr("DCGM_FI_DEV_GPU_TEMP{gpu=\"0\",UUID=\"" + std::string(kGpu0) +
                              "\",pci_bus_id=\"00000000:18:00.0\",device=\"nvidia0\",modelName=\"NVIDIA H200\","
                              "Hostname=\"dgx-h200-01\",DCGM_FI_DRIVER_VERSION=\"580.95.05\","
                              "app_kubernetes_io_name=\"trainer\",pod_template_hash=\"7d9c5b\",team=\"vision\","
                              "container=\"main\",namespace=\"ml\",pod=\"train-0\","
                              "pod_uid=\"3f1c8e2a-0b6d-4c1e-9a57-2d4f6b8c0e13\"} 31\n"));
  // GPU 1: only the labels that do not collide.
  EXPECT_THAT(text, HasSubstr("Hostname=\"dgx-h200-01\",DCGM_FI_DRIVER_VERSION=\"580.95.05\","
                              "tier=\"gold\",container=\"app\",namespace=\"tenant\",pod=\"sly\","
                              "pod_uid=\"9b2d7c41-5e8f-4a63-b0d1-7c2e9f4a8b56\"} 32\n"));
  // GPU 2 has no pod: no pod labels, no pod_uid.
  EXPECT_THAT(text, ::testing::ContainsRegex("DCGM_FI_DEV_GPU_TEMP\\{gpu=\"2\"[^}]*DCGM_FI_DRIVER_VERSION=\"580.95.05\"\\} 33\n"));
  EXPECT_THAT(text, HasSubstr("gpunode_pod_metadata_errors_total 0\n"));
  EXPECT_THAT(text, HasSubstr("gpunode_pod_labels_dropped 0\n"));
}

TEST(PodLabelsRenderTest, PodUidAloneAndAnUnreadPodAsDcgmExporterShowsThem) {
  SimNode node("dgx-h200");
  ASSERT_TRUE(node.ok());
  NodeSnapshot snap = node.Collect("dgx-h200-01");
  const PodMapping pods = BuildPodMapping(TwoPods(), {});
  PodMetadataSnapshot meta;
  auto train = ExtractPodMetadata(TrainPod(), nullptr, "pod ml/train-0");
  ASSERT_OK(train);
  meta.pods[PodKey{"ml", "train-0"}] = *train;
  meta.pods[PodKey{"tenant", "sly"}] = PodMetadata{};  // not read (forbidden, not found): no UID
  RenderOptions o;
  o.pods = &pods;
  o.pod_metadata = &meta;
  o.pod_uid = true;  // labels off
  const std::string text = RenderMetrics(snap, Counters(), o);
  EXPECT_THAT(text, HasSubstr(",container=\"main\",namespace=\"ml\",pod=\"train-0\","
                              "pod_uid=\"3f1c8e2a-0b6d-4c1e-9a57-2d4f6b8c0e13\"} 31\n"));
  EXPECT_THAT(text, Not(HasSubstr("team=")));
  // dcgm-exporter writes the UID it has, "" for a pod it could not read (Prometheus: no label).
  EXPECT_THAT(text, HasSubstr(",container=\"app\",namespace=\"tenant\",pod=\"sly\",pod_uid=\"\"} 32\n"));
}

// The whole path: the kubelet's List names the pods, the API server their labels, a scrape the page.
TEST(PodLabelsExporterTest, TheRunningExporterLabelsSeriesWithThePodsLabelsAndFollowsChanges) {
  SimNode node("dgx-h200");
  ASSERT_TRUE(node.ok());
  const std::string sock_dir = "/tmp/gpn-pl-" + std::to_string(::getpid());
  fs::create_directories(sock_dir);
  PodResourcesEmulator kubelet(sock_dir + "/kubelet.sock");
  ASSERT_TRUE(kubelet.Start());
  kubelet.SetResponse(TwoPods());
  FakeApiServer api;
  api.PutObject("/api/v1/namespaces/ml/pods/train-0", TrainPod());
  api.On("GET", "/api/v1/namespaces/tenant/pods/sly", {FakeApiServer::ApiStatus(403, "Forbidden", "forbidden")});
  kube::Connection conn;
  ASSERT_OK(kube::ParseServer(api.url(), &conn));
  kube::Client client(conn);

  ExporterOptions o;
  o.counters = Counters();
  o.interval = std::chrono::milliseconds(100);
  o.hostname = "dgx-h200-01";
  o.watch_xids = false;
  PodMapperOptions pm;
  pm.socket_path = sock_dir + "/kubelet.sock";
  pm.refresh_interval = std::chrono::milliseconds(100);
  o.pods = pm;
  PodMetadataOptions md;
  md.labels = true;
  md.uid = true;
  md.filter = *PodLabelFilter::Create({"^team$"});
  md.round = std::chrono::milliseconds(50);
  md.refresh = std::chrono::milliseconds(200);
  md.retry = std::chrono::milliseconds(200);
  o.pod_metadata = md;
  o.kube = &client;
  std::vector<std::string> lines;
  std::mutex mu;
  o.log = [&](const std::string& l) {
    std::lock_guard<std::mutex> lock(mu);
    lines.push_back(l);
  };
  Exporter e(node.nvml(), o);
  e.Start();
  auto eventually = [&](const std::string& want) {
    for (int i = 0; i < 100; ++i) {
      if (e.Metrics()->find(want) != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  };
  EXPECT_TRUE(eventually("team=\"vision\",container=\"main\",namespace=\"ml\",pod=\"train-0\","
                         "pod_uid=\"3f1c8e2a-0b6d-4c1e-9a57-2d4f6b8c0e13\"} 31\n"))
      << *e.Metrics();
  EXPECT_THAT(*e.Metrics(), HasSubstr(",namespace=\"tenant\",pod=\"sly\",pod_uid=\"\"} 32\n"));
  EXPECT_THAT(*e.Metrics(), Not(HasSubstr("app_kubernetes_io_name")));  // not in the allowlist
  // A label change reaches the page within the refresh, without a new sample of the GPUs.
  api.PutObject("/api/v1/namespaces/ml/pods/train-0",
                Pod("3f1c8e2a-0b6d-4c1e-9a57-2d4f6b8c0e13", {{"team", "robotics"}}));
  EXPECT_TRUE(eventually("team=\"robotics\",container=\"main\"")) << *e.Metrics();
  EXPECT_THAT(*e.Metrics(), ::testing::ContainsRegex("gpunode_pod_metadata_errors_total [1-9]"));
  e.Stop();
  {
    std::lock_guard<std::mutex> lock(mu);
    bool hinted = false;
    for (const std::string& l : lines) hinted = hinted || l.find("need `get` on pods") != std::string::npos;
    EXPECT_TRUE(hinted);
  }
  kubelet.Stop();
  fs::remove_all(sock_dir);
}

TEST(PodLabelsExporterTest, WithoutAnApiConnectionTheSeriesKeepTheirPodAndSaySo) {
  SimNode node("dgx-h200");
  ASSERT_TRUE(node.ok());
  ExporterOptions o;
  PodMapperOptions pm;
  pm.socket_path = "/tmp/gpn-none-" + std::to_string(::getpid()) + "/kubelet.sock";
  o.pods = pm;
  PodMetadataOptions md;
  md.labels = true;
  o.pod_metadata = md;
  std::vector<std::string> lines;
  o.log = [&lines](const std::string& l) { lines.push_back(l); };
  Exporter e(node.nvml(), o);
  ASSERT_FALSE(lines.empty());
  EXPECT_THAT(lines[0], HasSubstr("no Kubernetes API connection"));
}

}  // namespace
}  // namespace gpunode::exporter
