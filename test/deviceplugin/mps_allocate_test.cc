// MPS through the kubelet's protocol: the Allocate response of an MPS-shared resource (pure), and
// the whole path from MpsManager's simulated daemon through a ResourceServer registered at the
// kubelet emulator over real gRPC.
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/deviceplugin/allocate.h"
#include "src/deviceplugin/server.h"
#include "src/devices/mps.h"
#include "src/devices/topology.h"
#include "test/devices/mps_fixture.h"
#include "test/testing/kubelet_emulator.h"
#include "test/testing/status_matchers.h"

namespace gpunode::deviceplugin {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using namespace std::chrono_literals;
using namespace ::gpunode::devices;
using namespace ::gpunode::devices::mps_testing;

TEST(MpsAllocateTest, AReplicaGetsThePipeShmAndItsLimits) {
  PluginConfig config = MpsConfig(2);
  config.mps_root = "/var/lib/mps";
  Resource r = Shared({Gpu("GPU-a", 140), Gpu("GPU-b", 80)}, 2);
  auto resp = BuildAllocateResponse(r, config, {"GPU-b::1"}, {});
  ASSERT_OK(resp) << resp.status();
  const auto& envs = resp->envs();
  EXPECT_EQ(envs.at("NVIDIA_VISIBLE_DEVICES"), "GPU-b");
  EXPECT_EQ(envs.at("CUDA_MPS_PIPE_DIRECTORY"), "/mps/nvidia.com/gpu/pipe");
  EXPECT_EQ(envs.at("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), "50");
  EXPECT_EQ(envs.at("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"), "0=40960M");
  ASSERT_EQ(resp->mounts_size(), 2);
  EXPECT_EQ(resp->mounts(0).host_path(), "/var/lib/mps/nvidia.com/gpu/pipe");
  EXPECT_EQ(resp->mounts(0).container_path(), "/mps/nvidia.com/gpu/pipe");
  EXPECT_EQ(resp->mounts(1).host_path(), "/var/lib/mps/shm");
  EXPECT_EQ(resp->mounts(1).container_path(), "/dev/shm");
  EXPECT_FALSE(resp->mounts(0).read_only());

  // failRequestsGreaterThanOne is on for MPS unless the config turns it off (NVIDIA's default).
  auto two = BuildAllocateResponse(r, config, {"GPU-a::0", "GPU-b::0"}, {});
  EXPECT_EQ(two.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(two.status().message(), HasSubstr("maximum request size for shared resources is 1"));
  config.sharing.fail_requests_greater_than_one = false;
  auto both = BuildAllocateResponse(r, config, {"GPU-a::0", "GPU-b::0", "GPU-a::1"}, {});
  ASSERT_OK(both) << both.status();
  EXPECT_EQ(both->envs().at("NVIDIA_VISIBLE_DEVICES"), "GPU-a,GPU-b");
  EXPECT_EQ(both->envs().at("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"), "0=71680M,1=40960M");
}

TEST(MpsAllocateTest, RenamedResourcesAndCdiOnlyStrategiesStillGetMps) {
  auto c = ParseConfig(
      "flags: {plugin: {deviceListStrategy: [cdi-cri]}}\n"
      "sharing: {mps: {renameByDefault: true, resources: [{name: nvidia.com/gpu, replicas: 3}]}}\n",
      "mps.yaml");
  ASSERT_OK(c) << c.status();
  Resource r = Shared({Gpu("GPU-a", 96)}, 3, "nvidia.com/gpu.shared");
  auto resp = BuildAllocateResponse(r, *c, {"GPU-a::2"}, {});
  ASSERT_OK(resp) << resp.status();
  EXPECT_EQ(resp->envs().count("NVIDIA_VISIBLE_DEVICES"), 0u);
  ASSERT_EQ(resp->cdi_devices_size(), 1);
  EXPECT_EQ(resp->envs().at("CUDA_MPS_PIPE_DIRECTORY"), "/mps/nvidia.com/gpu.shared/pipe");
  EXPECT_EQ(resp->envs().at("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), "33");
  EXPECT_EQ(resp->envs().at("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"), "0=32768M");
  EXPECT_EQ(resp->mounts(0).host_path(), "/run/nvidia/mps/nvidia.com/gpu.shared/pipe");

  // Time-slicing gets none of it.
  c->sharing.strategy = SharingStrategy::kTimeSlicing;
  auto ts = BuildAllocateResponse(r, *c, {"GPU-a::2"}, {});
  ASSERT_OK(ts);
  EXPECT_EQ(ts->envs().count("CUDA_MPS_PIPE_DIRECTORY"), 0u);
  EXPECT_EQ(ts->mounts_size(), 0);
}

// ---------------------------------------------------------------------------------------------

// The whole path: the daemon, a ResourceServer registered at the kubelet emulator, the replicas
// in ListAndWatch, and Allocate's answer pointing at the daemon's pipe.
TEST_F(MpsManagerTest, TheKubeletSeesReplicasAndAllocateGetsTheDaemonsPipe) {
  MakeManager(Options());
  PluginConfig config = MpsConfig(2);
  config.mps_root = "/run/nvidia/mps";
  ASSERT_OK(ValidateConfig(config));
  std::vector<Resource> resources = Resources(config);
  ASSERT_EQ(resources.size(), 1u);
  ASSERT_OK(manager_->Apply(config, resources)) << Log();

  gpunode::testing::KubeletEmulator kubelet((dir_ / "dp").string());
  ASSERT_TRUE(kubelet.Start());
  std::string plog;
  std::mutex plog_mu;
  ResourceServer server(resources[0], config, {"/dev/nvidiactl"}, std::make_shared<LinkMatrix>(BuildLinkMatrix(inv_)), [&](const std::string& m) {
    std::lock_guard<std::mutex> l(plog_mu);
    plog += m + "\n";
  });
  ASSERT_OK(server.Serve((dir_ / "dp").string()));
  ASSERT_OK(server.Register(kubelet.socket(), 5s));
  ASSERT_TRUE(kubelet.WaitFor("nvidia.com/gpu",
                                  [](const v1beta1::ListAndWatchResponse& r) { return r.devices_size() == 8; }, 5s));
  const auto list = kubelet.Lists("nvidia.com/gpu").back();
  int replicas_of_first = 0;
  for (const auto& d : list.devices()) replicas_of_first += d.id().rfind(inv_.driver.gpus[0].uuid + "::", 0) == 0;
  EXPECT_EQ(replicas_of_first, 2);

  v1beta1::AllocateResponse a;
  const std::string id = inv_.driver.gpus[1].uuid + "::1";
  ASSERT_TRUE(kubelet.Allocate("nvidia.com/gpu", {id}, &a).ok());
  ASSERT_EQ(a.container_responses_size(), 1);
  const auto& c = a.container_responses(0);
  EXPECT_EQ(c.envs().at("NVIDIA_VISIBLE_DEVICES"), inv_.driver.gpus[1].uuid);
  EXPECT_EQ(c.envs().at("CUDA_MPS_PIPE_DIRECTORY"), "/mps/nvidia.com/gpu/pipe");
  EXPECT_EQ(c.envs().at("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), "50");
  EXPECT_THAT(c.envs().at("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"), ::testing::StartsWith("0="));
  ASSERT_EQ(c.mounts_size(), 2);
  // The host path the kubelet would mount is the daemon's pipe directory, serving its control pipe.
  EXPECT_EQ(c.mounts(0).host_path(), manager_->Daemons().front().spec.pipe_dir);
  EXPECT_TRUE(fs::exists(root() + c.mounts(0).host_path() + "/control"));
  EXPECT_EQ(c.mounts(1).host_path(), "/run/nvidia/mps/shm");
  EXPECT_TRUE(fs::is_directory(root() + "/run/nvidia/mps/shm"));

  // Two replicas in one request: refused, as NVIDIA's plugin does for MPS.
  v1beta1::AllocateResponse two;
  grpc::Status refused =
      kubelet.Allocate("nvidia.com/gpu", {inv_.driver.gpus[0].uuid + "::0", inv_.driver.gpus[0].uuid + "::1"}, &two);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(refused.error_message(), HasSubstr("maximum request size for shared resources is 1"));

  kubelet.Stop();
  server.Shutdown();
  manager_->Stop();
  EXPECT_FALSE(fs::exists(root() + c.mounts(0).host_path() + "/control"));
}

}  // namespace
}  // namespace gpunode::deviceplugin
