// Pod attribution of GPUs allocated through DRA, end to end in one process: the real Exporter on
// the simulated NVML (dgx-h200), its PodMapper reading the kubelet's pod-resources API from the
// emulator over gRPC on a unix socket, whose List names the containers' ResourceClaims
// (dynamic_resources: driver, pool, device name) as the kubelet does (1.36:
// containerManagerImpl.GetDynamicResources).
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "podresources/v1/api.pb.h"
#include "sim/support/profile.h"
#include "src/exporter/exporter.h"
#include "test/testing/podresources_emulator.h"
#include "test/testing/sim_library.h"
#include "test/testing/status_matchers.h"

namespace gpunode::exporter {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;

// One container holding one ResourceClaim with `devices` of `driver` in `pool`.
void AddClaim(v1::ListPodResourcesResponse* resp, const std::string& ns, const std::string& pod,
              const std::string& container, const std::string& claim, const std::string& driver,
              const std::string& pool, const std::vector<std::string>& devices) {
  auto* p = resp->add_pod_resources();
  p->set_name(pod);
  p->set_namespace_(ns);
  auto* c = p->add_containers();
  c->set_name(container);
  auto* d = c->add_dynamic_resources();
  d->set_claim_name(claim);
  d->set_claim_namespace(ns);
  for (const std::string& device : devices) {
    auto* r = d->add_claim_resources();
    r->set_driver_name(driver);
    r->set_pool_name(pool);
    r->set_device_name(device);
    // NVIDIA's CDI device names for a claim (what the kubelet copies from the plugin's answer).
    r->add_cdi_devices()->set_name("k8s.gpu.nvidia.com/claim=6c1e3bf2-" + device);
  }
}

class DraPodsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    dir_ = fs::temp_directory_path() / ("gpn-dra-pods-" + std::to_string(::getpid()) + "-" + name);
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    // A short socket path (sun_path holds 108 bytes).
    socket_ = "/tmp/gpn-drap-" + std::to_string(::getpid()) + ".sock";
    auto source = sim::ResolveProfile("dgx-h200");
    ASSERT_OK(source) << source.status();
    profile_ = source->text;
  }
  void TearDown() override {
    exporter_.reset();
    nvml_.reset();
    kubelet_.reset();
    fs::remove_all(dir_);
    ::unlink(socket_.c_str());
  }

  void WriteProfile() {
    const std::string path = (dir_ / "profile.yaml").string();
    std::ofstream(path) << profile_;
    ::setenv("GPUNODE_SIM_PROFILE", path.c_str(), 1);
    ::setenv("GPUNODE_SIM_RELOAD_MS", "0", 1);
  }

  void Start(const v1::ListPodResourcesResponse& resp, DraSource dra) {
    WriteProfile();
    kubelet_ = std::make_unique<testing::PodResourcesEmulator>(socket_);
    kubelet_->SetResponse(resp);
    ASSERT_TRUE(kubelet_->Start());
    auto nvml = gpu::NvmlLibrary::Open(testing::SimLibrary());
    ASSERT_OK(nvml) << nvml.status();
    nvml_ = *std::move(nvml);
    ExporterOptions o;
    o.hostname = "dgx-h200-01";
    o.interval = 100ms;
    o.watch_xids = false;
    PodMapperOptions pods;
    pods.socket_path = socket_;
    pods.refresh_interval = 100ms;
    pods.dra = std::move(dra);
    o.pods = pods;
    exporter_ = std::make_unique<Exporter>(*nvml_, std::move(o));
    exporter_->Start();
  }

  // The page once the pod mapping is up and rendered.
  std::string PageWithPods() {
    const auto until = std::chrono::steady_clock::now() + 5s;
    std::string text;
    while (std::chrono::steady_clock::now() < until) {
      text = *exporter_->Metrics();
      if (text.find("gpunode_pod_mapping_up 1\n") != std::string::npos) return text;
      std::this_thread::sleep_for(20ms);
    }
    ADD_FAILURE() << "pod mapping never came up:\n" << text;
    return text;
  }

  fs::path dir_;
  std::string socket_;
  std::string profile_;
  std::unique_ptr<testing::PodResourcesEmulator> kubelet_;
  std::unique_ptr<gpu::NvmlLibrary> nvml_;
  std::unique_ptr<Exporter> exporter_;
};

TEST_F(DraPodsTest, ADraClaimOfGpu2LabelsGpu2AndAnotherDriversClaimIsIgnored) {
  v1::ListPodResourcesResponse resp;
  AddClaim(&resp, "ml", "train-dra", "main", "gpu-claim", "gpu.nvidia.com", "dgx-h200-01", {"gpu-2"});
  // Another driver's device with the same name is not a GPU of ours.
  AddClaim(&resp, "net", "nic-pod", "app", "nic-claim", "nic.example.com", "dgx-h200-01", {"gpu-5"});
  // Our driver, but another pool: not this node's device.
  AddClaim(&resp, "ml", "elsewhere", "main", "gpu-claim", "gpu.nvidia.com", "other-node", {"gpu-6"});
  Start(resp, DraSource{.driver = "gpu.nvidia.com", .pool = "dgx-h200-01"});
  const std::string text = PageWithPods();
  EXPECT_THAT(text, HasSubstr("DCGM_FI_DEV_GPU_TEMP{gpu=\"2\",UUID=\"GPU-31c2c315-5e4a-4ea9-9589-dbd68102602d\","
                              "pci_bus_id=\"00000000:3A:00.0\",device=\"nvidia2\",modelName=\"NVIDIA H200\","
                              "Hostname=\"dgx-h200-01\",DCGM_FI_DRIVER_VERSION=\"580.95.05\",container=\"main\","
                              "namespace=\"ml\",pod=\"train-dra\"} 33\n"));
  EXPECT_THAT(text, Not(HasSubstr("pod=\"nic-pod\"")));
  EXPECT_THAT(text, Not(HasSubstr("pod=\"elsewhere\"")));
  EXPECT_THAT(text, ContainsRegex("DCGM_FI_DEV_GPU_TEMP\\{gpu=\"5\"[^}]*DCGM_FI_DRIVER_VERSION=\"580.95.05\"\\} 33\n"));
  auto pods = exporter_->Pods();
  ASSERT_NE(pods, nullptr);
  EXPECT_EQ(pods->by_device.size(), 1u);
  EXPECT_EQ(pods->dra_ignored, 1u);  // the other pool's; the other driver's is not ours to count
}

// The DRA name is the minor number (/dev/nvidia<minor>), not the NVML index: on a node where they
// differ, gpu-2 is the GPU whose minor is 2.
TEST_F(DraPodsTest, TheDraNameFollowsTheMinorNumberNotTheIndex) {
  // NVML index 2 gets minor 6 and index 6 minor 2.
  const size_t i2 = profile_.find("minor: 2,");
  const size_t i6 = profile_.find("minor: 6,");
  ASSERT_NE(i2, std::string::npos);
  ASSERT_NE(i6, std::string::npos);
  profile_.replace(i2, 9, "minor: 6,");
  profile_.replace(i6, 9, "minor: 2,");
  v1::ListPodResourcesResponse resp;
  AddClaim(&resp, "ml", "train-dra", "main", "gpu-claim", "gpu.nvidia.com", "dgx-h200-01", {"gpu-2"});
  Start(resp, DraSource{.driver = "gpu.nvidia.com", .pool = ""});  // any pool
  const std::string text = PageWithPods();
  EXPECT_THAT(text, ContainsRegex("DCGM_FI_DEV_GPU_TEMP\\{gpu=\"6\"[^}]*,pod=\"train-dra\"\\} 31\n"));
  EXPECT_THAT(text, Not(ContainsRegex("DCGM_FI_DEV_GPU_TEMP\\{gpu=\"2\"[^}]*,pod=")));
}

TEST_F(DraPodsTest, ARenamedDriverIsFollowed) {
  v1::ListPodResourcesResponse resp;
  AddClaim(&resp, "ml", "renamed", "main", "c", "gpu.example.com", "dgx-h200-01", {"gpu-0", "gpu-1"});
  AddClaim(&resp, "ml", "nvidia", "main", "c", "gpu.nvidia.com", "dgx-h200-01", {"gpu-3"});
  Start(resp, DraSource{.driver = "gpu.example.com", .pool = "dgx-h200-01"});
  const std::string text = PageWithPods();
  EXPECT_THAT(text, ContainsRegex("DCGM_FI_DEV_GPU_TEMP\\{gpu=\"0\"[^}]*,pod=\"renamed\"\\} 31\n"));
  EXPECT_THAT(text, ContainsRegex("DCGM_FI_DEV_GPU_TEMP\\{gpu=\"1\"[^}]*,pod=\"renamed\"\\} 32\n"));
  EXPECT_THAT(text, Not(HasSubstr("pod=\"nvidia\"")));
}

}  // namespace
}  // namespace gpunode::exporter
