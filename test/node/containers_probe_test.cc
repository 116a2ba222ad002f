// The container-runtime layer's probe of containerd's config on a host root made by the test: the
// nvidia runtime table's runtime_type and options.BinaryName in the layouts people write (a
// sub-table, a dotted key, an inline table), so doctor can tell a real NVIDIA runtime from a
// table that only names runc's shim (issue 32: the seeds' own example config).
#include <algorithm>
#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"
#include "src/base/host_fs.h"
#include "src/node/probe.h"
#include "test/testing/temp_dir_test.h"

namespace gpunode::node {
namespace {

class ContainersProbeTest : public testing::TempDirTest {
 protected:
  ContainerRuntime Containerd(const std::string& toml) {
    std::filesystem::create_directories(Path("etc/containerd"));
    std::ofstream(Path("etc/containerd/config.toml")) << toml;
    auto host = HostFs::Open(Path(""));
    EXPECT_TRUE(host.ok());
    ContainerLayer layer = ProbeContainers(*host);
    auto it = std::find_if(layer.runtimes.begin(), layer.runtimes.end(),
                           [](const ContainerRuntime& r) { return r.name == "containerd"; });
    EXPECT_NE(it, layer.runtimes.end());
    return it == layer.runtimes.end() ? ContainerRuntime{} : *it;
  }
};

TEST_F(ContainersProbeTest, ARuncShimWithoutBinaryNameIsSeen) {
  ContainerRuntime rt = Containerd(
      "version = 2\n"
      "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.nvidia]\n"
      "  runtime_type = \"io.containerd.runc.v2\"\n");
  EXPECT_TRUE(rt.nvidia_runtime);
  EXPECT_EQ(rt.nvidia_runtime_type, "io.containerd.runc.v2");
  EXPECT_EQ(rt.nvidia_binary_name, "");
}

TEST_F(ContainersProbeTest, BinaryNameIsReadFromTheOptionsTableADottedKeyOrAnInlineTable) {
  EXPECT_EQ(Containerd("[plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.nvidia]\n"
                       "  runtime_type = \"io.containerd.runc.v2\"\n"
                       "[plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.nvidia.options]\n"
                       "  BinaryName = \"/usr/bin/nvidia-container-runtime\"\n")
                .nvidia_binary_name,
            "/usr/bin/nvidia-container-runtime");
  EXPECT_EQ(Containerd("[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.\"nvidia\"]\n"
                       "  options.BinaryName = \"/usr/local/bin/gpunode\"\n")
                .nvidia_binary_name,
            "/usr/local/bin/gpunode");
  EXPECT_EQ(Containerd("[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.nvidia]\n"
                       "  options = { BinaryName = \"/usr/bin/nvidia-container-runtime\", SystemdCgroup = true }\n")
                .nvidia_binary_name,
            "/usr/bin/nvidia-container-runtime");
  // Another runtime's options do not count.
  EXPECT_EQ(Containerd("[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.nvidia]\n"
                       "  runtime_type = \"io.containerd.runc.v2\"\n"
                       "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc.options]\n"
                       "  BinaryName = \"/usr/bin/runc\"\n")
                .nvidia_binary_name,
            "");
}

}  // namespace
}  // namespace gpunode::node
