// Component tests: the real probes and the real NVML loader against simulated nodes (the
// simulated libnvidia-ml speaks NVML's C ABI, so our binding code runs as on a GPU machine).
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/support/profile.h"
#include "src/doctor/doctor.h"
#include "src/gpu/nvml.h"
#include "src/node/probe.h"
#include "src/node/unreadable_gpus.h"
#include "test/testing/sim_library.h"
#include "test/testing/status_matchers.h"

namespace gpunode {
namespace {

using ::gpunode::testing::SimLibrary;

class SimNode {
 public:
  explicit SimNode(const std::string& profile_name) {
    dir_ = std::filesystem::temp_directory_path() /
           ("gpunode-probe-" + profile_name + "-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    auto source = sim::ResolveProfile(profile_name);
    EXPECT_OK(source) << source.status();
    profile_path_ = (dir_ / "profile.yaml").string();
    std::ofstream(profile_path_) << source->text;
    auto profile = sim::ParseProfile(source->text, profile_name);
    EXPECT_OK(profile) << profile.status();
    Status st = sim::WriteHostRoot(*profile, (dir_ / "root").string());
    EXPECT_OK(st) << st;
    ::setenv("GPUNODE_SIM_PROFILE", profile_path_.c_str(), 1);
  }
  ~SimNode() { std::filesystem::remove_all(dir_); }

  node::NodeInventory Probe() {
    auto fs = HostFs::Open((dir_ / "root").string());
    EXPECT_OK(fs) << fs.status();
    node::ProbeOptions options;
    options.nvml_library = options.cuda_library = SimLibrary();
    auto inv = node::ProbeNode(*fs, options);
    EXPECT_OK(inv) << inv.status();
    return *inv;
  }
  const std::string& profile_path() const { return profile_path_; }

 private:
  std::filesystem::path dir_;
  std::string profile_path_;
};

std::vector<std::string> FindingIds(const node::NodeInventory& inv) {
  std::vector<std::string> ids;
  for (const auto& c : doctor::RunDoctor(inv).checks) {
    for (const auto& f : c.findings) ids.push_back(f.id);
  }
  return ids;
}

TEST(ProbeSimTest, DgxH200IsEightHealthyH200sWithNvlinkAndTwoNumaNodes) {
  SimNode node("dgx-h200");
  node::NodeInventory inv = node.Probe();
  ASSERT_OK(inv.driver.status) << inv.driver.status;
  EXPECT_EQ(inv.hardware.gpus.size(), 8u);
  EXPECT_EQ(inv.hardware.numa_nodes, 2);
  ASSERT_EQ(inv.driver.gpus.size(), 8u);
  EXPECT_EQ(inv.driver.gpus[0].name, "NVIDIA H200");
  EXPECT_EQ(inv.driver.gpus[0].pci_device_id, 0x2335);
  EXPECT_EQ(inv.driver.gpus[0].pci_bus_id, inv.hardware.gpus[0].bus_id);
  EXPECT_FALSE(inv.driver.gpus[0].nvlinks.empty());
  EXPECT_EQ(inv.driver.topology.size(), 64u);
  EXPECT_EQ(inv.kernel.version, inv.driver.driver_version);
  EXPECT_EQ(inv.kernel.flavor, node::ModuleFlavor::kOpen);
  EXPECT_OK(inv.driver.cuda.status) << inv.driver.cuda.status;
  EXPECT_EQ(inv.driver.cuda.device_count, 8);
  EXPECT_THAT(FindingIds(inv), ::testing::IsEmpty());
  EXPECT_EQ(doctor::ExitCode(doctor::RunDoctor(inv)), 0);
}

TEST(ProbeSimTest, MismatchedModuleAndLibraryIsDiagnosedAsAVersionMismatch) {
  SimNode node("broken-mismatch");
  node::NodeInventory inv = node.Probe();
  EXPECT_EQ(gpu::NvmlReturnOf(inv.driver.status), NVML_ERROR_LIB_RM_VERSION_MISMATCH);
  auto report = doctor::RunDoctor(inv);
  ASSERT_TRUE(report.first.has_value());
  EXPECT_EQ(report.first->id, "driver.version-mismatch");
  EXPECT_EQ(doctor::ExitCode(report), 2);
}

TEST(ProbeSimTest, NoDriverIsAKernelLayerFailure) {
  SimNode node("broken-no-driver");
  node::NodeInventory inv = node.Probe();
  EXPECT_FALSE(inv.hardware.gpus.empty());
  EXPECT_FALSE(inv.kernel.proc_present);
  EXPECT_EQ(gpu::NvmlReturnOf(inv.driver.status), NVML_ERROR_DRIVER_NOT_LOADED);
  auto report = doctor::RunDoctor(inv);
  EXPECT_EQ(report.first->id, "kernel.module-not-loaded");
}

TEST(ProbeSimTest, AFallenGpuIsLostAndTheOthersStillAnswer) {
  SimNode node("broken-fallen-gpu");
  node::NodeInventory inv = node.Probe();
  ASSERT_OK(inv.driver.status) << inv.driver.status;
  EXPECT_EQ(inv.driver.device_count, 4u);
  EXPECT_EQ(inv.driver.gpus.size(), 3u);
  ASSERT_EQ(inv.driver.gpu_failures.size(), 1u);
  EXPECT_EQ(gpu::NvmlReturnOf(inv.driver.gpu_failures[0].status), NVML_ERROR_GPU_IS_LOST);
  EXPECT_THAT(FindingIds(inv), ::testing::Contains("driver.gpu-lost"));
}

// Issue #14: the lost GPU disappeared from the doctor's card. NVML cannot tell its bus id; the
// simulated host's sysfs and /proc can.
TEST(ProbeSimTest, AFallenGpuIsFoundOnTheBusAndKeepsItsRowOnTheDoctorsCard) {
  SimNode node("broken-fallen-gpu");
  node::NodeInventory inv = node.Probe();
  const std::map<unsigned, node::BusGpu> on_bus = node::UnreadableGpusOnBus(inv);
  ASSERT_EQ(on_bus.size(), 1u);
  ASSERT_EQ(on_bus.count(2), 1u);
  EXPECT_EQ(on_bus.at(2).pci_bus_id, "0000:3a:00.0");
  EXPECT_EQ(on_bus.at(2).uuid, "GPU-f48edef6-247e-4153-9d4f-19d7905b346f");
  EXPECT_EQ(on_bus.at(2).model, "NVIDIA H100 80GB HBM3");

  const doctor::DoctorReport report = doctor::RunDoctor(inv);
  ASSERT_EQ(report.card.gpus.size(), 4u);
  for (unsigned i = 0; i < 4; ++i) EXPECT_EQ(report.card.gpus[i].index, i);
  const doctor::GpuCard& lost = report.card.gpus[2];
  EXPECT_EQ(lost.state, "lost");
  EXPECT_EQ(lost.bus_id, "0000:3a:00.0");
  EXPECT_EQ(lost.uuid, "GPU-f48edef6-247e-4153-9d4f-19d7905b346f");
  EXPECT_EQ(lost.error, "GPU is lost");
  EXPECT_EQ(lost.nvml_error, "NVML_ERROR_GPU_IS_LOST");
  EXPECT_THAT(doctor::RenderText(report, false),
              ::testing::ContainsRegex("\n  2 +NVIDIA H100 80GB HBM3 +0000:3a:00.0 +lost \\(NVML: GPU is lost\\) +"
                                       "GPU-f48edef6-247e-4153-9d4f-19d7905b346f\n"));
  const nlohmann::json doc = doctor::ToJson(report);
  EXPECT_EQ(doc["baseline"]["node"]["gpuCount"], 4);
  EXPECT_EQ(doc["baseline"]["node"]["readableGpuCount"], 3);
  EXPECT_EQ(doc["baseline"]["node"]["lostGpuCount"], 1);
  EXPECT_EQ(doc["baseline"]["gpus"][2]["state"], "lost");
  EXPECT_EQ(doc["baseline"]["gpus"][2]["pciBusId"], "0000:3a:00.0");
}

TEST(ProbeSimTest, ADegradedLinkIsReportedWithItsGenerationAndWidth) {
  SimNode node("broken-degraded-link");
  node::NodeInventory inv = node.Probe();
  auto report = doctor::RunDoctor(inv);
  EXPECT_THAT(FindingIds(inv), ::testing::ElementsAre("hardware.pcie-degraded"));
  EXPECT_NE(report.first->observed.find("Gen3 x8"), std::string::npos) << report.first->observed;
}

TEST(ProbeSimTest, MigInstancesAreReadThroughMigHandles) {
  SimNode node("a100-mig");
  node::NodeInventory inv = node.Probe();
  ASSERT_EQ(inv.driver.gpus.size(), 1u);
  const gpu::GpuInfo& g = inv.driver.gpus[0];
  EXPECT_EQ(g.mig_enabled, true);
  ASSERT_FALSE(g.mig_devices.empty());
  EXPECT_EQ(g.mig_devices[0].uuid.rfind("MIG-", 0), 0u);
  EXPECT_TRUE(g.mig_devices[0].slices.has_value());
  EXPECT_TRUE(g.mig_devices[0].memory_total_bytes.has_value());
}

TEST(ProbeSimTest, EachGpuKnowsItsPcieRootFromTheSysfsLink) {
  SimNode node("dgx-h200");
  node::NodeInventory inv = node.Probe();
  ASSERT_EQ(inv.hardware.gpus.size(), 8u);
  for (const node::PciDevice& d : inv.hardware.gpus) {
    // The simulated host root links /sys/bus/pci/devices/0000:18:00.0 to
    // /sys/devices/pci0000:18/0000:18:00.0.
    EXPECT_EQ(d.pcie_root, "pci" + d.bus_id.substr(0, 7)) << d.bus_id;
  }
}

TEST(ProbeSimTest, EveryBuiltInProfileProbesWithoutCrashing) {
  for (const std::string& name : sim::BuiltinProfileNames()) {
    SimNode node(name);
    node::NodeInventory inv = node.Probe();
    auto report = doctor::RunDoctor(inv);
    EXPECT_EQ(report.checks.size(), 6u) << name;
  }
}

TEST(ProbeSimTest, ALiveEditOfTheProfileIsSeenByTheNextProbe) {
  SimNode node("t4-cloud");
  node::NodeInventory before = node.Probe();
  ASSERT_EQ(before.driver.gpus.size(), 1u);
  std::ifstream in(node.profile_path());
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t pos = text.find("temperature_c:");
  ASSERT_NE(pos, std::string::npos) << "t4-cloud sets temperature_c";
  size_t end = text.find('\n', pos);
  text.replace(pos, end - pos, "temperature_c: 91");
  std::ofstream(node.profile_path()) << text;
  ::usleep(120 * 1000);  // the simulator checks the file at most every ~50 ms
  node::NodeInventory after = node.Probe();
  ASSERT_EQ(after.driver.gpus.size(), 1u);
  EXPECT_EQ(after.driver.gpus[0].temperature_c, 91u);
  EXPECT_THAT(FindingIds(after), ::testing::Contains("hardware.hot"));
}

TEST(NvmlLoaderTest, AMissingLibraryIsNotFoundWithLibraryNotFoundCode) {
  auto nvml = gpu::NvmlLibrary::Open("/nonexistent/libnvidia-ml.so.1");
  EXPECT_EQ(nvml.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(gpu::NvmlReturnOf(nvml.status()), NVML_ERROR_LIBRARY_NOT_FOUND);
}

TEST(NvmlLoaderTest, NvmlReturnCodesMapToDistinctStatusCodes) {
  EXPECT_OK(gpu::NvmlReturnToStatus(NVML_SUCCESS, "x"));
  EXPECT_EQ(gpu::NvmlReturnToStatus(NVML_ERROR_NOT_SUPPORTED, "x").code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(gpu::NvmlReturnToStatus(NVML_ERROR_NO_PERMISSION, "x").code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(gpu::NvmlReturnToStatus(NVML_ERROR_GPU_IS_LOST, "x").code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(gpu::NvmlReturnToStatus(NVML_ERROR_LIB_RM_VERSION_MISMATCH, "x").code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(gpu::NvmlReturnToStatus(NVML_ERROR_TIMEOUT, "x").code(), absl::StatusCode::kDeadlineExceeded);
  Status st = gpu::NvmlReturnToStatus(NVML_ERROR_DRIVER_NOT_LOADED, "nvmlInit_v2", "Driver Not Loaded");
  EXPECT_EQ(gpu::NvmlReturnOf(st), NVML_ERROR_DRIVER_NOT_LOADED);
  EXPECT_EQ(st.message(), "nvmlInit_v2: Driver Not Loaded (NVML_ERROR_DRIVER_NOT_LOADED)");
  EXPECT_TRUE(gpu::NvmlIsUnsupported(NVML_ERROR_FUNCTION_NOT_FOUND));
  EXPECT_FALSE(gpu::NvmlIsUnsupported(NVML_ERROR_GPU_IS_LOST));
}

}  // namespace
}  // namespace gpunode
