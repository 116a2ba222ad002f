#include "src/exporter/pod_mapper.h"

#include <stdlib.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "podresources/v1/api.pb.h"
#include "test/testing/podresources_emulator.h"
#include "test/testing/status_matchers.h"

namespace gpunode::exporter {
namespace {

using ::gpunode::testing::PodResourcesEmulator;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

const std::string kGpu0 = "GPU-8f2c1d6e-1111-2222-3333-444455556666";
const std::string kGpu1 = "GPU-9a3b2c1d-aaaa-bbbb-cccc-ddddeeeeffff";
const std::string kMig = "MIG-5c7f9d2e-0123-4567-89ab-cdef01234567";

void Add(v1::ListPodResourcesResponse* r, const std::string& ns, const std::string& pod, const std::string& container,
         const std::string& resource, const std::vector<std::string>& devices) {
  PodResourcesEmulator::AddContainer(r, ns, pod, container, resource, devices);
}

PodRef Ref(const std::string& ns, const std::string& pod, const std::string& container) {
  return PodRef{pod, ns, container};
}

MATCHER_P3(IsRef, ns, pod, container, "") {
  return arg.namespace_name == ns && arg.pod == pod && arg.container == container;
}

bool WaitUntil(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    if (pred()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return pred();
}

// ---- BuildPodMapping (pure) ----

TEST(PodMappingTest, WholeGpusMapToTheirContainers) {
  v1::ListPodResourcesResponse r;
  Add(&r, "ml", "train-0", "main", "nvidia.com/gpu", {kGpu0, kGpu1});
  Add(&r, "ml", "train-0", "sidecar", "example.com/nic", {"nic0"});
  PodMapping m = BuildPodMapping(r, {});
  EXPECT_TRUE(m.ok);
  ASSERT_EQ(m.by_device.size(), 2u);
  EXPECT_THAT(m.by_device.at(kGpu0), ElementsAre(IsRef("ml", "train-0", "main")));
  EXPECT_THAT(m.by_device.at(kGpu1), ElementsAre(IsRef("ml", "train-0", "main")));
  const auto* refs = m.ForGpu(kGpu1, "nvidia1");
  ASSERT_NE(refs, nullptr);
  EXPECT_EQ(refs->front().pod, "train-0");
  EXPECT_EQ(m.ForGpu("GPU-unknown", "nvidia7"), nullptr);
  EXPECT_EQ(m.ForGpu("", ""), nullptr);
}

TEST(PodMappingTest, MigDevicesKeptAsGiven) {
  v1::ListPodResourcesResponse r;
  Add(&r, "inference", "llm-0", "server", "nvidia.com/mig-1g.10gb", {kMig});
  Add(&r, "inference", "llm-1", "server", "nvidia.com/mig-3g.40gb", {"MIG-GPU-" + kGpu0.substr(4) + "/1/0"});
  PodMapping m = BuildPodMapping(r, {});
  EXPECT_THAT(m.by_device.at(kMig), ElementsAre(IsRef("inference", "llm-0", "server")));
  // Old-style MIG IDs (driver < 470) contain '/' and stay whole.
  EXPECT_EQ(m.by_device.count("MIG-GPU-" + kGpu0.substr(4) + "/1/0"), 1u);
  EXPECT_NE(m.ForGpu(kMig, ""), nullptr);
}

TEST(PodMappingTest, SharedReplicaIdsStripped) {
  v1::ListPodResourcesResponse r;
  Add(&r, "team-b", "notebook", "jupyter", "nvidia.com/gpu", {kGpu0 + "::3"});
  Add(&r, "team-a", "batch", "worker", "nvidia.com/gpu", {kGpu0 + "::1", kGpu0 + "::2"});
  PodMapping m = BuildPodMapping(r, {});
  ASSERT_EQ(m.by_device.size(), 1u);
  // Sorted by namespace, pod, container; the pod holding two replicas appears once.
  EXPECT_THAT(m.by_device.at(kGpu0),
              ElementsAre(IsRef("team-a", "batch", "worker"), IsRef("team-b", "notebook", "jupyter")));
  EXPECT_EQ(PodDeviceKey(kGpu0 + "::12"), kGpu0);
  EXPECT_EQ(PodDeviceKey("GPU-a::b"), "GPU-a::b");  // only numeric replica suffixes
}

TEST(PodMappingTest, RenamedResourceNeedsResourceNames) {
  v1::ListPodResourcesResponse r;
  Add(&r, "ml", "shared-0", "main", "nvidia.com/gpu.shared", {kGpu0 + "::0"});
  EXPECT_TRUE(BuildPodMapping(r, {}).by_device.empty());
  PodMapping m = BuildPodMapping(r, {"nvidia.com/gpu.shared"});
  EXPECT_THAT(m.by_device.at(kGpu0), ElementsAre(IsRef("ml", "shared-0", "main")));
}

TEST(PodMappingTest, UnrelatedResourcesIgnored) {
  v1::ListPodResourcesResponse r;
  Add(&r, "net", "router", "main", "example.com/sriov", {"0000:3b:00.1"});
  Add(&r, "ml", "odd", "main", "nvidia.com/gpu-other", {kGpu1});
  Add(&r, "ml", "odd", "main", "amd.com/gpu", {"card0"});
  auto* c = r.mutable_pod_resources(0)->mutable_containers(0);
  c->add_cpu_ids(3);
  auto* mem = c->add_memory();
  mem->set_memory_type("hugepages-1Gi");
  mem->set_size(1 << 30);
  auto* dra = c->add_dynamic_resources();
  dra->set_claim_name("gpu-claim");
  auto* cr = dra->add_claim_resources();
  cr->set_driver_name("example.com/other");
  cr->set_device_name("gpu-0");
  cr->add_cdi_devices()->set_name("nvidia.com/gpu=0");
  PodMapping m = BuildPodMapping(r, {});
  EXPECT_TRUE(m.ok);
  EXPECT_TRUE(m.by_device.empty());
  EXPECT_EQ(m.dra_ignored, 0u);  // another driver's device is not counted
}

// ---- DRA claims (dynamic_resources) ----

// One container holding one claim with `devices` (driver, pool, device name).
void AddClaim(v1::ListPodResourcesResponse* r, const std::string& ns, const std::string& pod,
              const std::string& container, const std::vector<std::array<std::string, 3>>& devices) {
  auto* p = r->add_pod_resources();
  p->set_name(pod);
  p->set_namespace_(ns);
  auto* c = p->add_containers();
  c->set_name(container);
  auto* claim = c->add_dynamic_resources();
  claim->set_claim_name(pod + "-gpu");
  claim->set_claim_namespace(ns);
  for (const auto& [driver, pool, device] : devices) {
    auto* cr = claim->add_claim_resources();
    cr->set_driver_name(driver);
    cr->set_pool_name(pool);
    cr->set_device_name(device);
  }
}

TEST(PodMappingDraTest, GpuAndMigDevicesOfTheDriverInThisPool) {
  v1::ListPodResourcesResponse r;
  AddClaim(&r, "ml", "train-0", "main", {{"gpu.nvidia.com", "node-a", "gpu-2"}, {"gpu.nvidia.com", "node-a", "gpu-3"}});
  AddClaim(&r, "ml", "infer-0", "server", {{"gpu.nvidia.com", "node-a", "gpu-4-mig-1g18gb-19-6"}});
  AddClaim(&r, "net", "nic", "app", {{"nic.example.com", "node-a", "gpu-5"}});
  AddClaim(&r, "ml", "away", "main", {{"gpu.nvidia.com", "node-b", "gpu-6"}});
  const PodMapping m = BuildPodMapping(r, {}, DraSource{.driver = "gpu.nvidia.com", .pool = "node-a"});
  ASSERT_EQ(m.by_device.size(), 3u);
  EXPECT_THAT(m.by_device.at("gpu-2"), ElementsAre(IsRef("ml", "train-0", "main")));
  EXPECT_THAT(m.by_device.at("gpu-3"), ElementsAre(IsRef("ml", "train-0", "main")));
  EXPECT_THAT(m.by_device.at("gpu-4-mig-1g18gb-19-6"), ElementsAre(IsRef("ml", "infer-0", "server")));
  EXPECT_EQ(m.dra_ignored, 1u);  // node-b's gpu-6
  // Looked up after the UUID and the device name, by the GPU's DRA name.
  EXPECT_EQ(m.ForGpu("GPU-none", "nvidia2", DraGpuName(2))->front().pod, "train-0");
  EXPECT_EQ(m.ForGpu("GPU-none", "nvidia5", DraGpuName(5)), nullptr);
  // Any pool when this node's is not known; no claims at all with no driver.
  EXPECT_EQ(BuildPodMapping(r, {}, DraSource{.driver = "gpu.nvidia.com", .pool = ""}).by_device.count("gpu-6"), 1u);
  EXPECT_TRUE(BuildPodMapping(r, {}, DraSource{.driver = "", .pool = ""}).by_device.empty());
  // By default: gpu.nvidia.com, any pool.
  EXPECT_EQ(BuildPodMapping(r, {}).by_device.size(), 4u);
}

TEST(PodMappingDraTest, SharedClaimAndDevicePluginSideBySide) {
  v1::ListPodResourcesResponse r;
  Add(&r, "ml", "plugin-pod", "main", "nvidia.com/gpu", {kGpu0});
  AddClaim(&r, "team-b", "reader", "c", {{"gpu.nvidia.com", "n", "gpu-1"}});
  AddClaim(&r, "team-a", "writer", "c", {{"gpu.nvidia.com", "n", "gpu-1"}});
  const PodMapping m = BuildPodMapping(r, {}, DraSource{.driver = "gpu.nvidia.com", .pool = "n"});
  EXPECT_THAT(m.by_device.at("gpu-1"), ElementsAre(IsRef("team-a", "writer", "c"), IsRef("team-b", "reader", "c")));
  EXPECT_THAT(m.by_device.at(kGpu0), ElementsAre(IsRef("ml", "plugin-pod", "main")));
  // The UUID (device plugin) wins over the DRA name.
  EXPECT_EQ(m.ForGpu(kGpu0, "nvidia1", "gpu-1")->front().pod, "plugin-pod");
}

TEST(PodMappingDraTest, MalformedNamesAndOverlongListsAreIgnoredAndCounted) {
  v1::ListPodResourcesResponse r;
  std::vector<std::array<std::string, 3>> bad;
  for (const std::string& name : std::vector<std::string>{
           "", "gpu-", "gpu-01", "gpu-a", "GPU-1", "gpu-1 ", "gpu--1", "gpu-123456", "gpu-1-mig-", "gpu-1-mig-1g10gb-19",
        "gpu-1-mig--19-0", "gpu-1-mig-1g.10gb-19-0", "gpu-1-mig-1G10GB-19-0", "gpu-1-mig-1g10gb-019-0",
        "gpu-1-mig-1g10gb-19-0-", "nvidia0", "../../etc/passwd", std::string(64, 'a'),
        "gpu-1-mig-" + std::string(60, 'a') + "-1-0", std::string("gpu-1\0", 6)}) {
    bad.push_back({"gpu.nvidia.com", "n", name});
  }
  AddClaim(&r, "x", "bad", "c", bad);
  PodMapping m = BuildPodMapping(r, {}, DraSource{.driver = "gpu.nvidia.com", .pool = "n"});
  EXPECT_TRUE(m.by_device.empty()) << m.by_device.begin()->first;
  EXPECT_EQ(m.dra_ignored, bad.size());

  // A claim holds at most kMaxDraDevicesPerClaim devices; the rest are not read.
  v1::ListPodResourcesResponse many;
  std::vector<std::array<std::string, 3>> devices;
  for (int i = 0; i < kMaxDraDevicesPerClaim + 8; ++i) devices.push_back({"gpu.nvidia.com", "n", DraGpuName(i)});
  AddClaim(&many, "x", "many", "c", devices);
  m = BuildPodMapping(many, {}, DraSource{.driver = "gpu.nvidia.com", .pool = "n"});
  EXPECT_EQ(m.by_device.size(), static_cast<size_t>(kMaxDraDevicesPerClaim));
  EXPECT_EQ(m.dra_ignored, 8u);

  // A container holds at most kMaxDraClaimsPerContainer claims.
  v1::ListPodResourcesResponse claims;
  AddClaim(&claims, "x", "claims", "c", {});
  auto* c = claims.mutable_pod_resources(0)->mutable_containers(0);
  c->clear_dynamic_resources();
  for (int i = 0; i < kMaxDraClaimsPerContainer + 3; ++i) {
    auto* cr = c->add_dynamic_resources()->add_claim_resources();
    cr->set_driver_name("gpu.nvidia.com");
    cr->set_pool_name("n");
    cr->set_device_name(DraGpuName(i));
  }
  m = BuildPodMapping(claims, {}, DraSource{.driver = "gpu.nvidia.com", .pool = "n"});
  EXPECT_EQ(m.by_device.size(), static_cast<size_t>(kMaxDraClaimsPerContainer));
  EXPECT_EQ(m.dra_ignored, 3u);
}

TEST(PodMappingDraTest, NvidiaDeviceNames) {
  for (const char* good : {"gpu-0", "gpu-7", "gpu-255", "gpu-0-mig-1g10gb-19-0", "gpu-3-mig-7g141gb-0-0",
                           "gpu-1-mig-1g10gb-me-20-4", "gpu-12-mig-1c3g40gb-9-4"}) {
    EXPECT_TRUE(IsNvidiaDraDeviceName(good)) << good;
  }
  EXPECT_EQ(DraGpuName(3), "gpu-3");
}

TEST(PodMappingTest, GkeDeviceNames) {
  v1::ListPodResourcesResponse r;
  Add(&r, "gke", "a", "c", "nvidia.com/gpu", {"nvidia0"});
  Add(&r, "gke", "b", "c", "nvidia.com/gpu", {"nvidia1/gi0"});
  Add(&r, "gke", "d", "c", "nvidia.com/gpu", {"nvidia2/gi0/vgpu1"});
  Add(&r, "gke", "e", "c", "nvidia.com/gpu", {"nvidia3/vgpu0", "nvidia3/vgpu1"});
  PodMapping m = BuildPodMapping(r, {});
  ASSERT_EQ(m.by_device.size(), 4u);
  EXPECT_THAT(m.by_device.at("nvidia0"), ElementsAre(IsRef("gke", "a", "c")));
  // A MIG instance keeps its GPU instance id: its series are the instance's (mig_test.cc).
  EXPECT_THAT(m.by_device.at("nvidia1/gi0"), ElementsAre(IsRef("gke", "b", "c")));
  EXPECT_THAT(m.by_device.at("nvidia2/gi0"), ElementsAre(IsRef("gke", "d", "c")));
  EXPECT_THAT(m.by_device.at("nvidia3"), ElementsAre(IsRef("gke", "e", "c")));
  EXPECT_EQ(PodDeviceKey("nvidia4/gix"), "nvidia4");  // not a GPU instance id
  // The UUID is tried first, then the device name.
  const auto* refs = m.ForGpu(kGpu0, "nvidia3");
  ASSERT_NE(refs, nullptr);
  EXPECT_EQ(refs->front().pod, "e");
}

TEST(PodMappingTest, UuidWinsOverDeviceName) {
  v1::ListPodResourcesResponse r;
  Add(&r, "x", "by-uuid", "c", "nvidia.com/gpu", {kGpu0});
  Add(&r, "x", "by-name", "c", "nvidia.com/gpu", {"nvidia0"});
  PodMapping m = BuildPodMapping(r, {});
  EXPECT_EQ(m.ForGpu(kGpu0, "nvidia0")->front().pod, "by-uuid");
  EXPECT_EQ(m.ForGpu(kGpu1, "nvidia0")->front().pod, "by-name");
  EXPECT_TRUE(Ref("a", "b", "c") < Ref("b", "a", "a"));  // namespace first
}

// ---- over a real socket ----

class PodSocketTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpn-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    options_.socket_path = dir_ + "/kubelet.sock";
    options_.refresh_interval = 20ms;
    options_.timeout = 2000ms;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  static v1::ListPodResourcesResponse OnePod(const std::string& pod, const std::string& device) {
    v1::ListPodResourcesResponse r;
    Add(&r, "ml", pod, "main", "nvidia.com/gpu", {device});
    return r;
  }

  std::string dir_;
  PodMapperOptions options_;
};

TEST_F(PodSocketTest, PodListOnceOverUnixSocket) {
  PodResourcesEmulator k(options_.socket_path);
  k.SetResponse(OnePod("train-0", kGpu0));
  ASSERT_TRUE(k.Start());
  auto m = ListOnce(options_);
  ASSERT_OK(m) << m.status();
  EXPECT_TRUE(m->ok);
  EXPECT_GT(m->last_success_timestamp_seconds, 1.6e9);
  EXPECT_THAT(m->by_device.at(kGpu0), ElementsAre(IsRef("ml", "train-0", "main")));
  EXPECT_EQ(k.list_calls(), 1);
}

TEST_F(PodSocketTest, PodListOnceMissingSocketNamesPath) {
  auto m = ListOnce(options_);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(m.status().message()), HasSubstr(options_.socket_path));
  EXPECT_THAT(std::string(m.status().message()), HasSubstr("does not exist"));
}

TEST_F(PodSocketTest, PodListOnceUnavailable) {
  PodResourcesEmulator k(options_.socket_path);
  k.SetUnavailable(true);
  ASSERT_TRUE(k.Start());
  auto m = ListOnce(options_);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(m.status().message()), HasSubstr(options_.socket_path));
}

// dcgm-exporter failed with gRPC's 4 MiB default (#509): 20k pods must parse.
TEST_F(PodSocketTest, PodListOnceLargeResponse) {
  v1::ListPodResourcesResponse r;
  for (int i = 0; i < 20000; ++i) {
    char uuid[64];
    std::snprintf(uuid, sizeof(uuid), "GPU-%08d-aaaa-bbbb-cccc-ddddeeeeffff", i);
    auto* p = r.add_pod_resources();
    p->set_name("distributed-training-job-with-a-long-name-" + std::to_string(i) + "-worker");
    p->set_namespace_("research-team-with-a-long-namespace");
    auto* c = p->add_containers();
    c->set_name("pytorch-main-container");
    auto* d = c->add_devices();
    d->set_resource_name("nvidia.com/gpu");
    d->add_device_ids(std::string(uuid) + "::0");
    d->add_device_ids(std::string(uuid) + "::1");
    d->mutable_topology()->add_nodes()->set_id(i % 2);
  }
  ASSERT_GT(r.ByteSizeLong(), 4u << 20);
  PodResourcesEmulator k(options_.socket_path);
  k.SetResponse(std::move(r));
  ASSERT_TRUE(k.Start());
  auto m = ListOnce(options_);
  ASSERT_OK(m) << m.status();
  EXPECT_EQ(m->by_device.size(), 20000u);
  EXPECT_EQ(m->by_device.at("GPU-00012345-aaaa-bbbb-cccc-ddddeeeeffff").front().pod,
            "distributed-training-job-with-a-long-name-12345-worker");
}

// ---- PodMapper (background refresh) ----

TEST_F(PodSocketTest, PodMapperNotYetRefreshed) {
  PodMapper mapper(options_);
  auto latest = mapper.Latest();
  ASSERT_NE(latest, nullptr);
  EXPECT_FALSE(latest->ok);
  EXPECT_THAT(std::string(latest->status.message()), HasSubstr("not yet refreshed"));
  EXPECT_EQ(mapper.generation(), 0u);
}

TEST_F(PodSocketTest, PodMapperPicksUpChanges) {
  PodResourcesEmulator k(options_.socket_path);
  k.SetResponse(OnePod("train-0", kGpu0));
  ASSERT_TRUE(k.Start());
  PodMapper mapper(options_);
  mapper.Start();
  ASSERT_TRUE(WaitUntil([&] { return mapper.Latest()->ok; }, 5s));
  EXPECT_EQ(mapper.Latest()->ForGpu(kGpu0, "")->front().pod, "train-0");
  const uint64_t gen = mapper.generation();
  EXPECT_GE(gen, 1u);
  // Unchanged answers do not bump the generation.
  const int calls = k.list_calls();
  ASSERT_TRUE(WaitUntil([&] { return k.list_calls() >= calls + 3; }, 5s));
  EXPECT_EQ(mapper.generation(), gen);

  k.SetResponse(OnePod("train-1", kGpu1));
  ASSERT_TRUE(WaitUntil([&] { return mapper.Latest()->ForGpu(kGpu1, "") != nullptr; }, 5s));
  auto latest = mapper.Latest();
  EXPECT_TRUE(latest->ok);
  EXPECT_EQ(latest->ForGpu(kGpu0, ""), nullptr);
  EXPECT_EQ(latest->ForGpu(kGpu1, "")->front().pod, "train-1");
  EXPECT_GT(mapper.generation(), gen);
  EXPECT_EQ(latest->refresh_errors_total, 0u);
}

TEST_F(PodSocketTest, PodMapperMissingSocketThenRecovers) {
  PodMapper mapper(options_);
  mapper.Start();
  ASSERT_TRUE(WaitUntil([&] { return mapper.Latest()->refresh_errors_total >= 2; }, 5s));
  auto latest = mapper.Latest();
  EXPECT_FALSE(latest->ok);
  EXPECT_EQ(latest->status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(latest->status.message()), HasSubstr(options_.socket_path));
  EXPECT_EQ(latest->last_success_timestamp_seconds, 0);

  PodResourcesEmulator k(options_.socket_path);
  k.SetResponse(OnePod("train-0", kGpu0));
  ASSERT_TRUE(k.Start());
  ASSERT_TRUE(WaitUntil([&] { return mapper.Latest()->ok; }, 5s));
  latest = mapper.Latest();
  EXPECT_OK(latest->status);
  EXPECT_GT(latest->last_success_timestamp_seconds, 0);
  EXPECT_GE(latest->refresh_errors_total, 2u);  // kept across the recovery
  EXPECT_NE(latest->ForGpu(kGpu0, ""), nullptr);
}

TEST_F(PodSocketTest, PodMapperUnavailableCountsErrorsAndKeepsLastMapping) {
  PodResourcesEmulator k(options_.socket_path);
  k.SetResponse(OnePod("train-0", kGpu0));
  ASSERT_TRUE(k.Start());
  PodMapper mapper(options_);
  mapper.Start();
  ASSERT_TRUE(WaitUntil([&] { return mapper.Latest()->ok; }, 5s));
  const uint64_t gen = mapper.generation();

  k.SetUnavailable(true);
  ASSERT_TRUE(WaitUntil([&] { return mapper.Latest()->refresh_errors_total >= 3; }, 5s));
  auto latest = mapper.Latest();
  EXPECT_FALSE(latest->ok);
  EXPECT_EQ(latest->status.code(), absl::StatusCode::kUnavailable);
  EXPECT_GT(latest->last_success_timestamp_seconds, 0);
  EXPECT_NE(latest->ForGpu(kGpu0, ""), nullptr);  // stale mapping kept
  EXPECT_EQ(mapper.generation(), gen + 1);        // ok flipped once

  k.SetUnavailable(false);
  ASSERT_TRUE(WaitUntil([&] { return mapper.Latest()->ok; }, 5s));
  EXPECT_EQ(mapper.generation(), gen + 2);

  // A kubelet restart (socket removed and recreated) is survived too.
  k.Stop();
  ASSERT_TRUE(WaitUntil([&] { return !mapper.Latest()->ok; }, 5s));
  ASSERT_TRUE(k.Start());
  ASSERT_TRUE(WaitUntil([&] { return mapper.Latest()->ok; }, 5s));
}

TEST_F(PodSocketTest, PodMapperStartDoesNotBlockAndStopIsPrompt) {
  PodResourcesEmulator k(options_.socket_path);
  k.SetResponse(OnePod("train-0", kGpu0));
  k.SetDelay(3000ms);  // a slow kubelet: Stop must cancel the List in flight
  ASSERT_TRUE(k.Start());
  options_.refresh_interval = 10000ms;
  options_.timeout = 5000ms;
  PodMapper mapper(options_);
  auto t0 = std::chrono::steady_clock::now();
  mapper.Start();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 500ms);
  ASSERT_TRUE(WaitUntil([&] { return k.list_calls() == 1; }, 5s));
  t0 = std::chrono::steady_clock::now();
  mapper.Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1000ms);

  // Waiting out the interval: Stop wakes the thread at once.
  k.SetDelay(0ms);
  mapper.Start();
  ASSERT_TRUE(WaitUntil([&] { return mapper.Latest()->ok; }, 5s));
  t0 = std::chrono::steady_clock::now();
  mapper.Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1000ms);
  EXPECT_EQ(k.list_calls(), 2);
}

}  // namespace
}  // namespace gpunode::exporter
