// The fixture host-root generator writes what a real host has, in the real formats.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "sim/support/profile.h"
#include "test/testing/status_matchers.h"

namespace gpunode::sim {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class HostRootTest : public ::testing::Test {
 protected:
  // Writes the host root of a built-in profile; returns its directory.
  std::string Write(const std::string& name) {
    auto src = ResolveProfile(name);
    EXPECT_OK(src) << src.status();
    auto profile = ParseProfile(src->text, name);
    EXPECT_OK(profile) << profile.status();
    std::string dir = Dir(name);
    Status s = WriteHostRoot(*profile, dir);
    EXPECT_OK(s) << s;
    return dir;
  }
  std::string Dir(const std::string& name) {
    std::string dir = ::testing::TempDir() + "/hostroot-" + std::to_string(getpid()) + "-" + name;
    fs::remove_all(dir);
    return dir;
  }
};

TEST_F(HostRootTest, OpenModuleVersionFileHasTheRealFormat) {
  std::string root = Write("dgx-h200");
  EXPECT_EQ(Read(root + "/proc/driver/nvidia/version"),
            "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build  "
            "(dvs-builder@U16-I3-B03-4-3)  Thu Sep 25 19:44:05 UTC 2025\n"
            "GCC version:  gcc version 13.3.0 (Ubuntu 13.3.0-6ubuntu2~24.04) \n");
  EXPECT_EQ(Read(root + "/sys/module/nvidia/version"), "580.95.05\n");
}

TEST_F(HostRootTest, ProprietaryModuleVersionFileHasTheRealFormat) {
  std::string root = Write("t4-cloud");
  EXPECT_THAT(Read(root + "/proc/driver/nvidia/version"),
              HasSubstr("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.183.01  Sun May 12 "
                        "19:39:15 UTC 2024\n"));
  EXPECT_THAT(Read(root + "/proc/modules"),
              HasSubstr("nvidia_uvm 2076672 0 - Live 0x0000000000000000 (PO)\n"));
}

TEST_F(HostRootTest, GpuInformationFileHasTheRealFormat) {
  std::string root = Write("dgx-h200");
  std::string info = Read(root + "/proc/driver/nvidia/gpus/0000:18:00.0/information");
  EXPECT_THAT(info, HasSubstr("Model: \t\t NVIDIA H200\n"));
  EXPECT_THAT(info, HasSubstr("GPU UUID: \t GPU-"));
  EXPECT_THAT(info,
              HasSubstr("Bus Type: \t PCIe\nDMA Size: \t 52 bits\nDMA Mask: \t 0xfffffffffffff\n"
                        "Bus Location: \t 0000:18:00.0\nDevice Minor: \t 0\n"));
  EXPECT_THAT(info, HasSubstr("GPU Excluded:\t No\n"));
  EXPECT_TRUE(fs::exists(root + "/proc/driver/nvidia/gpus/0000:db:00.0/information"));
}

TEST_F(HostRootTest, PciFunctionsLookLikeSysfs) {
  std::string root = Write("dgx-h200");
  const std::string dev = root + "/sys/bus/pci/devices/0000:18:00.0";
  EXPECT_EQ(Read(dev + "/vendor"), "0x10de\n");
  EXPECT_EQ(Read(dev + "/device"), "0x2335\n");
  EXPECT_EQ(Read(dev + "/class"), "0x030200\n");
  EXPECT_EQ(Read(dev + "/subsystem_vendor"), "0x10de\n");
  EXPECT_EQ(Read(dev + "/subsystem_device"), "0x18be\n");
  EXPECT_EQ(Read(dev + "/current_link_speed"), "32.0 GT/s PCIe\n");
  EXPECT_EQ(Read(dev + "/current_link_width"), "16\n");
  EXPECT_EQ(Read(dev + "/max_link_speed"), "32.0 GT/s PCIe\n");
  EXPECT_EQ(Read(dev + "/numa_node"), "0\n");
  EXPECT_EQ(Read(root + "/sys/bus/pci/devices/0000:db:00.0/numa_node"), "1\n");
  EXPECT_TRUE(fs::is_symlink(dev));
  EXPECT_EQ(fs::read_symlink(dev + "/driver").filename(), "nvidia");
  EXPECT_TRUE(fs::is_directory(dev + "/driver"));  // resolves inside the root
  // NVSwitches and non-NVIDIA functions are there too, so readers must filter.
  EXPECT_EQ(Read(root + "/sys/bus/pci/devices/0000:05:00.0/class"), "0x068000\n");
  EXPECT_EQ(Read(root + "/sys/bus/pci/devices/0000:00:00.0/vendor"), "0x8086\n");
  EXPECT_EQ(Read(root + "/sys/bus/pci/devices/0000:1a:00.0/vendor"), "0x15b3\n");
}

TEST_F(HostRootTest, DegradedLinkShowsInSysfs) {
  std::string root = Write("broken-degraded-link");
  const std::string dev = root + "/sys/bus/pci/devices/0000:31:00.0";
  EXPECT_EQ(Read(dev + "/current_link_speed"), "8.0 GT/s PCIe\n");
  EXPECT_EQ(Read(dev + "/current_link_width"), "8\n");
  EXPECT_EQ(Read(dev + "/max_link_speed"), "32.0 GT/s PCIe\n");
  EXPECT_EQ(Read(dev + "/max_link_width"), "16\n");
}

TEST_F(HostRootTest, DeviceNodesAreEmptyFilesWhenTheModuleIsLoaded) {
  std::string root = Write("dgx-h200");
  for (const char* node :
       {"nvidia0", "nvidia7", "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset"}) {
    EXPECT_TRUE(fs::is_regular_file(root + "/dev/" + node)) << node;
  }
  EXPECT_FALSE(fs::exists(root + "/dev/nvidia8"));
  EXPECT_FALSE(fs::exists(root + "/dev/nvidia-caps"));
  EXPECT_TRUE(fs::exists(root + "/sys/devices/system/node/node1"));
  EXPECT_FALSE(fs::exists(root + "/sys/devices/system/node/node2"));
  EXPECT_EQ(Read(root + "/etc/hostname"), "dgx-h200-01\n");
  EXPECT_EQ(Read(root + "/proc/sys/kernel/osrelease"), "6.8.0-85-generic\n");
}

TEST_F(HostRootTest, MigNodesGetCapabilityDevices) {
  std::string root = Write("a100-mig");
  EXPECT_TRUE(fs::exists(root + "/dev/nvidia-caps/nvidia-cap1"));
  EXPECT_TRUE(fs::exists(root + "/dev/nvidia-caps/nvidia-cap2"));
}

TEST_F(HostRootTest, NoDriverMeansNoProcNoDevAndNoBoundDriver) {
  std::string root = Write("broken-no-driver");
  EXPECT_FALSE(fs::exists(root + "/proc/driver/nvidia"));
  EXPECT_FALSE(fs::exists(root + "/dev/nvidiactl"));
  EXPECT_FALSE(fs::exists(root + "/dev/nvidia0"));
  EXPECT_FALSE(fs::exists(root + "/sys/module/nvidia"));
  EXPECT_THAT(Read(root + "/proc/modules"), Not(HasSubstr("nvidia")));
  EXPECT_EQ(Read(root + "/sys/bus/pci/devices/0000:17:00.0/vendor"), "0x10de\n");
  EXPECT_FALSE(fs::is_symlink(root + "/sys/bus/pci/devices/0000:17:00.0/driver"));
}

TEST_F(HostRootTest, NouveauIsListedAndBoundWhenTheProfileSaysSo) {
  auto src = ResolveProfile("broken-no-driver");
  std::string text = src->text;
  text.replace(text.find("nouveau_loaded: false"), 21, "nouveau_loaded: true");
  auto p = ParseProfile(text, "nouveau");
  ASSERT_OK(p) << p.status();
  std::string root = Dir("nouveau");
  ASSERT_OK(WriteHostRoot(*p, root));
  EXPECT_THAT(Read(root + "/proc/modules"), HasSubstr("nouveau "));
  EXPECT_EQ(fs::read_symlink(root + "/sys/bus/pci/devices/0000:17:00.0/driver").filename(),
            "nouveau");
}

TEST_F(HostRootTest, CudaToolkitVersionJsonHasTheRealShape) {
  std::string root = Write("pcie-l40s-4");
  auto j = nlohmann::json::parse(Read(root + "/usr/local/cuda/version.json"), nullptr, false);
  ASSERT_FALSE(j.is_discarded());
  EXPECT_EQ(j["cuda"]["name"], "CUDA SDK");
  EXPECT_EQ(j["cuda"]["version"], "12.4.1");
  EXPECT_EQ(j["cuda_nvcc"]["version"], "12.4.131");
  EXPECT_TRUE(fs::is_symlink(root + "/usr/local/cuda"));
}

TEST_F(HostRootTest, FallenGpuLeavesAnXidInTheKernelLog) {
  std::string root = Write("broken-fallen-gpu");
  EXPECT_THAT(Read(root + "/var/log/kern.log"),
              HasSubstr("NVRM: Xid (PCI:0000:3a:00): 79, pid='<unknown>', name=<unknown>, GPU has "
                        "fallen off the bus."));
}

TEST_F(HostRootTest, HostFilesAreWrittenVerbatim) {
  auto src = ResolveProfile("t4-cloud");
  std::string text = src->text + "";
  text.replace(text.find("  cuda_toolkit:"), 0,
               "  files:\n    /etc/containerd/config.toml: \"version = 2\\n\"\n"
               "  empty_files: [/var/lib/kubelet/device-plugins/kubelet.sock]\n");
  auto p = ParseProfile(text, "files");
  ASSERT_OK(p) << p.status();
  std::string root = Dir("files");
  ASSERT_OK(WriteHostRoot(*p, root));
  EXPECT_EQ(Read(root + "/etc/containerd/config.toml"), "version = 2\n");
  EXPECT_TRUE(fs::is_regular_file(root + "/var/lib/kubelet/device-plugins/kubelet.sock"));
}

TEST_F(HostRootTest, PathsEscapingTheRootAreRejected) {
  auto p = ParseProfile(ResolveProfile("t4-cloud")->text, "t4");
  ASSERT_OK(p);
  p->host.files["/etc/../../escape"] = "x";
  std::string root = Dir("escape");
  Status s = WriteHostRoot(*p, root);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(fs::exists(root + "/../escape"));
  EXPECT_FALSE(fs::exists(root + "/etc/hostname"));  // nothing written
}

}  // namespace
}  // namespace gpunode::sim
