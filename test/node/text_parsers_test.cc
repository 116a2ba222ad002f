#include "src/node/text_parsers.h"

#include "gtest/gtest.h"
#include "test/testing/status_matchers.h"

namespace gpunode {
namespace {

TEST(ParseNvrmVersionTest, ReadsTheOpenModuleLine) {
  auto v = node::ParseNvrmVersion(
      "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build  "
      "(dvs-builder@U16-I3-B03-4-3)  Thu Sep 25 19:44:05 UTC 2025\nGCC version:  gcc version 13.3.0\n");
  ASSERT_OK(v) << v.status();
  EXPECT_EQ(v->version.ToString(), "580.95.05");
  EXPECT_EQ(v->flavor, node::ModuleFlavor::kOpen);
}

TEST(ParseNvrmVersionTest, ReadsTheProprietaryModuleLine) {
  auto v = node::ParseNvrmVersion("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.183.01  Sun May 12 19:39:15 UTC 2024\n");
  ASSERT_OK(v) << v.status();
  EXPECT_EQ(v->version.ToString(), "535.183.01");
  EXPECT_EQ(v->flavor, node::ModuleFlavor::kProprietary);
}

TEST(ParseNvrmVersionTest, ATruncatedFileIsDataLossNamingTheFile) {
  for (const char* text : {"", "NVRM vers", "NVRM version: NVIDIA UNIX x86_64 Kernel Module  ", "garbage\n"}) {
    auto v = node::ParseNvrmVersion(text);
    EXPECT_EQ(v.status().code(), absl::StatusCode::kDataLoss) << text;
    EXPECT_NE(v.status().message().find("/proc/driver/nvidia/version"), absl::string_view::npos);
  }
}

TEST(PcieGenFromSpeedTest, MapsEveryGenerationAndRejectsUnknown) {
  EXPECT_EQ(node::PcieGenFromSpeed("2.5 GT/s PCIe"), 1u);
  EXPECT_EQ(node::PcieGenFromSpeed("5.0 GT/s PCIe"), 2u);
  EXPECT_EQ(node::PcieGenFromSpeed("8.0 GT/s PCIe"), 3u);
  EXPECT_EQ(node::PcieGenFromSpeed("16.0 GT/s PCIe"), 4u);
  EXPECT_EQ(node::PcieGenFromSpeed("32.0 GT/s PCIe"), 5u);
  EXPECT_EQ(node::PcieGenFromSpeed("64.0 GT/s PCIe"), 6u);
  EXPECT_EQ(node::PcieGenFromSpeed("8 GT/s"), 3u);
  EXPECT_EQ(node::PcieGenFromSpeed("Unknown"), std::nullopt);
  EXPECT_EQ(node::PcieGenFromSpeed(""), std::nullopt);
}

TEST(ParseHexTest, AcceptsSysfsHexAndRejectsJunk) {
  EXPECT_EQ(node::ParseHex("0x10de\n"), 0x10deu);
  EXPECT_EQ(node::ParseHex("030200"), 0x030200u);
  EXPECT_EQ(node::ParseHex("0xzz"), std::nullopt);
  EXPECT_EQ(node::ParseHex(""), std::nullopt);
  EXPECT_EQ(node::ParseHex("0x123456789"), std::nullopt);
}

TEST(ParseProcGpuInformationTest, ReadsModelUuidBusAndMinor) {
  node::ProcGpu g = node::ParseProcGpuInformation(
      "Model: \t\t NVIDIA H200\nIRQ:   \t\t 123\nGPU UUID: \t GPU-1234\nVideo BIOS: \t 96.00.99.00.01\n"
      "Bus Type: \t PCIe\nBus Location: \t 0000:18:00.0\nDevice Minor: \t 3\nGPU Excluded:\t No\n");
  EXPECT_EQ(g.model, "NVIDIA H200");
  EXPECT_EQ(g.uuid, "GPU-1234");
  EXPECT_EQ(g.bus_id, "0000:18:00.0");
  EXPECT_EQ(g.minor, 3u);
  EXPECT_FALSE(g.excluded);
}

TEST(ParseProcModulesTest, ListsModuleNames) {
  EXPECT_EQ(node::ParseProcModules("nvidia_uvm 1531904 0 - Live 0x0 (PO)\nnvidia 1 2 - Live 0x0\n"),
            (std::vector<std::string>{"nvidia_uvm", "nvidia"}));
}

TEST(DriverVersionFromLibraryPathTest, ReadsTheVersionOfDriverLibrariesOnly) {
  EXPECT_EQ(node::DriverVersionFromLibraryPath("/usr/lib/x86_64-linux-gnu/libcuda.so.580.95.05")->ToString(), "580.95.05");
  EXPECT_EQ(node::DriverVersionFromLibraryPath("/usr/lib/libnvidia-ml.so.535.183.01")->ToString(), "535.183.01");
  EXPECT_EQ(node::DriverVersionFromLibraryPath("/usr/lib/libcuda.so.1"), std::nullopt);
  EXPECT_EQ(node::DriverVersionFromLibraryPath("/usr/lib/libcudart.so.12.4.127"), std::nullopt);
}

TEST(CudaVersionFromHeaderTest, ReadsTheCudaVersionDefine) {
  EXPECT_EQ(node::CudaVersionFromHeader("/* cuda.h */\n#define CUDA_VERSION_MAJOR 13\n#define CUDA_VERSION 13000\n")->ToString(),
            "13.0");
  EXPECT_EQ(node::CudaVersionFromHeader("#define  CUDA_VERSION\t12040\n")->ToString(), "12.4");
  EXPECT_EQ(node::CudaVersionFromHeader("#define CUDA_VERSIONX 1\n"), std::nullopt);
  EXPECT_EQ(node::CudaVersionFromHeader(""), std::nullopt);
}

}  // namespace
}  // namespace gpunode
