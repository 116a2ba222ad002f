// What the bus tells of GPUs NVML cannot open (src/node/unreadable_gpus.h), over hand-made layers.
#include "src/node/unreadable_gpus.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/gpu/nvml.h"

namespace gpunode {
namespace {

node::PciDevice Gpu(const std::string& bus_id, const std::string& driver = "nvidia") {
  node::PciDevice d;
  d.bus_id = bus_id;
  d.vendor = 0x10de;
  d.device = 0x2330;
  d.class_code = 0x030200;
  d.numa_node = 1;
  d.driver = driver;
  return d;
}

std::vector<std::string> BusIds(const std::vector<node::BusGpu>& gpus) {
  std::vector<std::string> ids;
  for (const node::BusGpu& g : gpus) ids.push_back(g.pci_bus_id);
  return ids;
}

TEST(NvidiaGpusOnBusTest, AreTheNvidiaBoundGpusInBusOrderWithTheDriversModelAndUuid) {
  node::HardwareLayer hw;
  hw.gpus = {Gpu("0000:5d:00.0"), Gpu("0000:18:00.0"), Gpu("0000:2a:00.0", "vfio-pci"), Gpu("0000:3a:00.0", "")};
  node::KernelDriverLayer kernel;
  node::ProcGpu lost;
  lost.bus_id = "0000:3a:00.0";
  lost.model = "NVIDIA H100 80GB HBM3";
  lost.uuid = "GPU-f48edef6";
  node::ProcGpu unknown;
  unknown.bus_id = "0000:5d:00.0";
  unknown.model = "??";
  unknown.uuid = "??";
  kernel.gpus = {lost, unknown};
  const std::vector<node::BusGpu> gpus = node::NvidiaGpusOnBus(hw, kernel);
  // vfio-pci is a VM's; a GPU whose driver link could not be read stays.
  EXPECT_THAT(BusIds(gpus), ::testing::ElementsAre("0000:18:00.0", "0000:3a:00.0", "0000:5d:00.0"));
  EXPECT_EQ(gpus[1].model, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(gpus[1].uuid, "GPU-f48edef6");
  EXPECT_EQ(gpus[1].pci_device_id, 0x2330);
  EXPECT_EQ(gpus[1].numa_node, 1);
  EXPECT_EQ(gpus[2].model, "");  // "??": the driver could not read it
  EXPECT_EQ(gpus[2].uuid, "");
}

TEST(NvidiaGpusOnBusTest, LeaveOutExcludedGpusAndFallBackToProcWithoutSysfs) {
  node::KernelDriverLayer kernel;
  node::ProcGpu a, b;
  a.bus_id = "0000:2A:00.0";
  b.bus_id = "0000:18:00.0";
  b.excluded = true;
  kernel.gpus = {a, b};
  EXPECT_THAT(BusIds(node::NvidiaGpusOnBus(node::HardwareLayer{}, kernel)), ::testing::ElementsAre("0000:2a:00.0"));
  node::HardwareLayer hw;
  hw.gpus = {Gpu("0000:18:00.0"), Gpu("0000:2a:00.0")};
  EXPECT_THAT(BusIds(node::NvidiaGpusOnBus(hw, kernel)), ::testing::ElementsAre("0000:2a:00.0"));
}

std::vector<node::BusGpu> Bus(std::initializer_list<const char*> ids) {
  std::vector<node::BusGpu> out;
  for (const char* id : ids) out.push_back(node::BusGpu{.pci_bus_id = id});
  return out;
}

TEST(MatchUnreadableGpusTest, TheUnclaimedBusGpusGoToTheUnreadableIndicesInOrder) {
  const auto bus = Bus({"0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0", "0000:5d:00.0"});
  // NVML's form of the readable ones' bus ids is accepted as well as sysfs's.
  auto one = node::MatchUnreadableGpus(bus, {"00000000:18:00.0", "00000000:2A:00.0", "0000:5d:00.0"}, {2});
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one.at(2).pci_bus_id, "0000:3a:00.0");
  auto two = node::MatchUnreadableGpus(bus, {"0000:2a:00.0", "0000:5d:00.0"}, {2, 0});
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two.at(0).pci_bus_id, "0000:18:00.0");
  EXPECT_EQ(two.at(2).pci_bus_id, "0000:3a:00.0");
}

TEST(MatchUnreadableGpusTest, TellsNothingWhenTheNumbersDisagree) {
  // A GPU on the bus NVML does not count: two candidates for one lost GPU.
  EXPECT_TRUE(node::MatchUnreadableGpus(Bus({"0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0"}), {"0000:18:00.0"}, {1})
                  .empty());
  // The lost GPU is gone from sysfs too.
  EXPECT_TRUE(node::MatchUnreadableGpus(Bus({"0000:18:00.0"}), {"0000:18:00.0"}, {1}).empty());
  EXPECT_TRUE(node::MatchUnreadableGpus({}, {}, {0}).empty());
  EXPECT_TRUE(node::MatchUnreadableGpus(Bus({"0000:18:00.0"}), {"0000:18:00.0"}, {}).empty());
}

TEST(UnreadableGpuWordsTest, StateAndReasonComeFromTheNvmlCode) {
  const Status lost = gpu::NvmlReturnToStatus(NVML_ERROR_GPU_IS_LOST, "nvmlDeviceGetHandleByIndex_v2(2)", "GPU is lost");
  EXPECT_STREQ(node::UnreadableState(lost), "lost");
  EXPECT_EQ(node::UnreadableReason(lost), "GPU is lost");
  const Status denied = gpu::NvmlReturnToStatus(NVML_ERROR_NO_PERMISSION, "nvmlDeviceGetHandleByIndex_v2(0)");
  EXPECT_STREQ(node::UnreadableState(denied), "unreadable");
  EXPECT_EQ(node::UnreadableReason(denied), "NVML_ERROR_NO_PERMISSION (4)");  // no text from NVML
  EXPECT_EQ(node::UnreadableReason(absl::InternalError("something else")), "something else");
  EXPECT_EQ(node::SysfsBusId("00000000:3A:00.0"), "0000:3a:00.0");
  EXPECT_EQ(node::SysfsBusId("0000:3a:00.0"), "0000:3a:00.0");
}

}  // namespace
}  // namespace gpunode
