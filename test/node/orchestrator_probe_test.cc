// The kubelet layer's probe on a host root made by the test: the device plugin's sockets and the
// GPU DRA drivers registered in the kubelet's plugin registry (with and without the pod UID of a
// rolling update); other drivers there (CSI) and the registry's own dot files are not GPUs'.
#include <algorithm>
#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/base/host_fs.h"
#include "src/node/probe.h"
#include "test/testing/temp_dir_test.h"

namespace gpunode::node {
namespace {

using ::testing::ElementsAre;

class OrchestratorProbeTest : public testing::TempDirTest {};

TEST_F(OrchestratorProbeTest, DevicePluginSocketsAndGpuDraDriversAreFound) {
  namespace fs = std::filesystem;
  for (const char* d : {"var/lib/kubelet/device-plugins", "var/lib/kubelet/plugins_registry"}) fs::create_directories(Path(d));
  for (const char* f : {"var/lib/kubelet/device-plugins/kubelet.sock", "var/lib/kubelet/device-plugins/nvidia-gpu.sock",
                        "var/lib/kubelet/plugins_registry/gpu.nvidia.com-reg.sock",
                        "var/lib/kubelet/plugins_registry/compute-domain.nvidia.com-0b5a6e64-3a8f-4c43-9d0e-6f1c2a3b4c5d-reg.sock",
                        "var/lib/kubelet/plugins_registry/csi.example.com-reg.sock",
                        "var/lib/kubelet/plugins_registry/.gpunode-abc"}) {
    std::ofstream(Path(f)) << "";
  }
  auto host = HostFs::Open(Path(""));
  ASSERT_TRUE(host.ok());
  OrchestratorLayer o = ProbeOrchestrator(*host);
  EXPECT_TRUE(o.kubelet_present);
  EXPECT_TRUE(o.kubelet_socket);
  EXPECT_THAT(o.plugin_sockets, ElementsAre("nvidia-gpu.sock"));
  std::sort(o.dra_drivers.begin(), o.dra_drivers.end());
  EXPECT_THAT(o.dra_drivers, ElementsAre("compute-domain.nvidia.com", "gpu.nvidia.com"));
}

}  // namespace
}  // namespace gpunode::node
