// Unit tests of gpu::ReadGpu (one GPU -> GpuInfo) and gpu::NormalizeBusId, through the real NVML
// loader against the simulated NVML library. Each test loads a node profile (a built-in one from
// data/profiles, sometimes edited in one place) and checks what ReadGpu makes of it: every field
// the profile sets, "not supported" as an empty field (never 0, never an error), and a lost GPU as
// a failure of the whole read.
#include "src/gpu/gpu_reader.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/support/profile.h"
#include "src/gpu/nvml.h"
#include "test/testing/sim_library.h"
#include "test/testing/status_matchers.h"

namespace gpunode::gpu {
namespace {

namespace fs = std::filesystem;
using ::gpunode::testing::SimLibrary;
using ::testing::IsEmpty;

constexpr uint64_t kMiB = 1024 * 1024;

// The text of built-in profile `name`, with `from` replaced by `to` (once; `from` must occur).
std::string ProfileText(const std::string& name, const std::string& from = "", const std::string& to = "") {
  auto source = sim::ResolveProfile(name);
  EXPECT_OK(source);
  if (!source.ok()) return "";
  std::string text = source->text;
  if (!from.empty()) {
    const size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << "\"" << from << "\" is not in profile " << name;
    if (at != std::string::npos) text.replace(at, from.size(), to);
  }
  return text;
}

// A simulated node: the profile text in a file of its own (so that a test can edit it while NVML
// is loaded) and the NVML library opened on it. The simulated library reads the profile when NVML
// is initialised, so each test gets a fresh node.
class SimNode {
 public:
  explicit SimNode(const std::string& profile_text) {
    static int counter = 0;
    dir_ = fs::temp_directory_path() /
           ("gpunode-gpu-reader-" + std::to_string(::getpid()) + "-" + std::to_string(++counter));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    path_ = (dir_ / "profile.yaml").string();
    Write(profile_text);
    ::setenv("GPUNODE_SIM_PROFILE", path_.c_str(), 1);
    ::setenv("GPUNODE_SIM_RELOAD_MS", "0", 1);  // an edit is seen by the next NVML call
    auto nvml = NvmlLibrary::Open(SimLibrary());
    EXPECT_OK(nvml);
    if (nvml.ok()) nvml_ = *std::move(nvml);
  }
  ~SimNode() {
    nvml_.reset();  // nvmlShutdown before the profile goes away
    ::unsetenv("GPUNODE_SIM_RELOAD_MS");
    fs::remove_all(dir_);
  }

  // Replaces the profile atomically (a new file renamed over the old one).
  void Write(const std::string& text) {
    const std::string tmp = path_ + ".tmp";
    std::ofstream(tmp) << text;
    fs::rename(tmp, path_);
  }

  bool ok() const { return nvml_ != nullptr; }
  const NvmlLibrary& nvml() const { return *nvml_; }

 private:
  fs::path dir_;
  std::string path_;
  std::unique_ptr<NvmlLibrary> nvml_;
};

// ---- NormalizeBusId --------------------------------------------------------------------------

TEST(NormalizeBusIdTest, TurnsNvmlsEightDigitDomainIntoSysfsForm) {
  EXPECT_EQ(NormalizeBusId("00000000:1B:00.0"), "0000:1b:00.0");
  EXPECT_EQ(NormalizeBusId("00000000:9A:00.1"), "0000:9a:00.1");
}

TEST(NormalizeBusIdTest, LeavesTheSysfsFormAsItIsOnlyLowerCased) {
  EXPECT_EQ(NormalizeBusId("0000:1b:00.0"), "0000:1b:00.0");
  EXPECT_EQ(NormalizeBusId("0000:AB:00.0"), "0000:ab:00.0");  // NVML's legacy 4-digit form
}

TEST(NormalizeBusIdTest, KeepsADomainThatNeedsMoreThanFourDigits) {
  // Only the leading zeros of a zero-padded domain can go; 0x10000 cannot be written in four.
  EXPECT_EQ(NormalizeBusId("00010000:1B:00.0"), "00010000:1b:00.0");
}

TEST(NormalizeBusIdTest, ReturnsAnythingElseLowerCased) {
  EXPECT_EQ(NormalizeBusId(""), "");
  EXPECT_EQ(NormalizeBusId("GPU-ABC"), "gpu-abc");
  EXPECT_EQ(NormalizeBusId("00000000"), "00000000");
}

// ---- ReadGpu on healthy built-in profiles ------------------------------------------------------

TEST(ReadGpuTest, ReadsEveryFieldOfAnH200FromTheDgxProfile) {
  SimNode node(ProfileText("dgx-h200"));
  ASSERT_TRUE(node.ok());
  auto gpu = ReadGpu(node.nvml(), 0);
  ASSERT_OK(gpu);
  EXPECT_EQ(gpu->index, 0u);
  EXPECT_EQ(gpu->name, "NVIDIA H200");
  EXPECT_EQ(gpu->uuid, "GPU-0b566429-adc1-458a-9244-af5a49e0505e");
  EXPECT_EQ(gpu->pci_bus_id, "0000:18:00.0");  // sysfs form, not NVML's 8-digit domain
  EXPECT_EQ(gpu->pci_device_id, 0x2335);
  EXPECT_EQ(gpu->pci_subsystem_id, 0x18be10deu);
  EXPECT_EQ(gpu->minor_number, 0u);
  EXPECT_EQ(gpu->vbios_version, "96.00.A5.00.01");
  // Memory through nvmlDeviceGetMemoryInfo_v2: the reserved part is its own number.
  EXPECT_EQ(gpu->memory_total_bytes, 143771 * kMiB);
  EXPECT_EQ(gpu->memory_used_bytes, 0u);
  EXPECT_EQ(gpu->memory_reserved_bytes, 568 * kMiB);
  EXPECT_EQ(gpu->memory_free_bytes, (143771 - 568) * kMiB);
  EXPECT_EQ(gpu->persistence_mode, true);
  EXPECT_EQ(gpu->ecc_enabled, true);
  EXPECT_EQ(gpu->ecc_pending, true);  // NVML's pending mode: the mode after the next reboot
  EXPECT_EQ(gpu->ecc_corrected_volatile, 0u);
  EXPECT_EQ(gpu->ecc_uncorrected_aggregate, 0u);
  ASSERT_TRUE(gpu->remapped_rows.has_value());
  EXPECT_EQ(gpu->remapped_rows->correctable, 0u);
  EXPECT_FALSE(gpu->remapped_rows->failure);
  EXPECT_FALSE(gpu->retired_pages_pending.has_value());  // Hopper: `unsupported: [retired_pages]`
  EXPECT_EQ(gpu->pcie_gen_current, 5u);
  EXPECT_EQ(gpu->pcie_gen_max, 5u);
  EXPECT_EQ(gpu->pcie_gen_gpu_max, 5u);
  EXPECT_EQ(gpu->pcie_width_current, 16u);
  EXPECT_EQ(gpu->pcie_width_max, 16u);
  EXPECT_EQ(gpu->temperature_c, 31u);
  EXPECT_EQ(gpu->power_usage_w, 74.5);
  EXPECT_EQ(gpu->power_limit_w, 700.0);
  EXPECT_EQ(gpu->power_enforced_limit_w, 700.0);
  EXPECT_EQ(gpu->sm_clock_mhz, 1980u);
  EXPECT_EQ(gpu->mem_clock_mhz, 3201u);
  EXPECT_EQ(gpu->utilization_gpu_pct, 0u);
  EXPECT_EQ(gpu->cc_major, 9);
  EXPECT_EQ(gpu->cc_minor, 0);
  // MIG-capable but off: the mode and the slot count are known, there are no MIG devices.
  EXPECT_EQ(gpu->mig_enabled, false);
  EXPECT_EQ(gpu->mig_pending, false);  // pending mode: stays off
  EXPECT_EQ(gpu->mig_max_devices, 7u);
  EXPECT_THAT(gpu->mig_devices, IsEmpty());
  // No process runs: an empty list, which is not the same as "unknown".
  ASSERT_TRUE(gpu->compute_processes.has_value());
  EXPECT_THAT(*gpu->compute_processes, IsEmpty());
  // 18 NVLinks, all up, to the four NVSwitch chips.
  ASSERT_EQ(gpu->nvlinks.size(), 18u);
  std::set<std::string> switches;
  for (unsigned i = 0; i < gpu->nvlinks.size(); ++i) {
    EXPECT_EQ(gpu->nvlinks[i].link, i);
    EXPECT_TRUE(gpu->nvlinks[i].active) << i;
    switches.insert(gpu->nvlinks[i].remote_bus_id);
  }
  EXPECT_EQ(switches, (std::set<std::string>{"0000:05:00.0", "0000:06:00.0", "0000:07:00.0", "0000:08:00.0"}));
  // NVML's own codes: Hopper, brand NVIDIA; no addressing mode (the simulated node describes no
  // coherent-memory platform: NOT_SUPPORTED is "unknown", not an error).
  EXPECT_EQ(gpu->architecture, 9u);
  EXPECT_EQ(gpu->brand, 14u);
  EXPECT_EQ(gpu->addressing_mode, std::nullopt);
  EXPECT_THAT(gpu->field_errors, IsEmpty());
}

TEST(ReadGpuTest, ReadsEachGpuOfANodeByItsOwnIndex) {
  auto profile = sim::ParseProfile(ProfileText("dgx-h200"), "dgx-h200");
  ASSERT_OK(profile);
  SimNode node(ProfileText("dgx-h200"));
  ASSERT_TRUE(node.ok());
  ASSERT_EQ(profile->gpus.size(), 8u);
  for (unsigned i = 0; i < profile->gpus.size(); ++i) {
    auto gpu = ReadGpu(node.nvml(), i);
    ASSERT_OK(gpu) << "GPU " << i;
    EXPECT_EQ(gpu->index, i);
    EXPECT_EQ(gpu->uuid, profile->gpus[i].uuid) << "GPU " << i;
    EXPECT_EQ(gpu->pci_bus_id, profile->gpus[i].bus_id) << "GPU " << i;
    EXPECT_EQ(gpu->minor_number, profile->gpus[i].minor) << "GPU " << i;
    EXPECT_EQ(gpu->temperature_c, profile->gpus[i].temperature_c) << "GPU " << i;
  }
}

TEST(ReadGpuTest, ReadsTheMigDevicesOfAnA100InMigMode) {
  SimNode node(ProfileText("a100-mig"));
  ASSERT_TRUE(node.ok());
  auto gpu = ReadGpu(node.nvml(), 0);
  ASSERT_OK(gpu);
  EXPECT_EQ(gpu->name, "NVIDIA A100-SXM4-80GB");
  EXPECT_EQ(gpu->cc_major, 8);
  EXPECT_EQ(gpu->mig_enabled, true);
  EXPECT_EQ(gpu->mig_max_devices, 7u);
  ASSERT_EQ(gpu->mig_devices.size(), 3u);
  const MigDevice& big = gpu->mig_devices[0];  // 3g.40gb
  EXPECT_EQ(big.index, 0u);
  EXPECT_EQ(big.uuid, "MIG-3566fd0d-6599-4b29-a558-a0b80cee56ab");
  EXPECT_EQ(big.gpu_instance_id, 2u);
  EXPECT_EQ(big.compute_instance_id, 0u);
  EXPECT_EQ(big.slices, 3u);
  EXPECT_EQ(big.memory_total_bytes, 40192 * kMiB);
  EXPECT_EQ(big.multiprocessors, 42u);
  // Its GPU instance: the A100's 3g profile (id 9) on memory slices 4-7.
  EXPECT_EQ(big.gi_profile_id, 9u);
  EXPECT_EQ(big.placement_start, 4u);
  EXPECT_EQ(big.placement_size, 4u);
  std::set<unsigned> starts;
  for (unsigned i = 1; i < 3; ++i) {  // two 2g.20gb
    const MigDevice& m = gpu->mig_devices[i];
    EXPECT_EQ(m.index, i);
    EXPECT_EQ(m.gpu_instance_id, i + 2);
    EXPECT_EQ(m.slices, 2u);
    EXPECT_EQ(m.memory_total_bytes, 19968 * kMiB);
    EXPECT_EQ(m.multiprocessors, 28u);
    EXPECT_EQ(m.gi_profile_id, 14u);
    EXPECT_EQ(m.placement_size, 2u);
    starts.insert(m.placement_start.value_or(99));
  }
  EXPECT_EQ(starts, (std::set<unsigned>{0, 2}));
  EXPECT_NE(gpu->mig_devices[1].uuid, gpu->mig_devices[2].uuid);
  // The process in the 3g.40gb instance is listed on its parent GPU.
  ASSERT_TRUE(gpu->compute_processes.has_value());
  ASSERT_EQ(gpu->compute_processes->size(), 1u);
  EXPECT_EQ((*gpu->compute_processes)[0].pid, 48213u);
  EXPECT_EQ((*gpu->compute_processes)[0].used_memory_bytes, 12288 * kMiB);
  EXPECT_EQ(gpu->memory_used_bytes, 12288 * kMiB);
  EXPECT_THAT(gpu->field_errors, IsEmpty());
}

TEST(ReadGpuTest, ReadsATeslaT4WithoutNvlinkMigOrRowRemapping) {
  SimNode node(ProfileText("t4-cloud"));
  ASSERT_TRUE(node.ok());
  auto gpu = ReadGpu(node.nvml(), 0);
  ASSERT_OK(gpu);
  EXPECT_EQ(gpu->name, "Tesla T4");
  EXPECT_EQ(gpu->pci_bus_id, "0000:00:04.0");
  EXPECT_EQ(gpu->pci_device_id, 0x1eb8);
  EXPECT_EQ(gpu->memory_total_bytes, 15360 * kMiB);
  EXPECT_EQ(gpu->pcie_gen_current, 3u);
  EXPECT_EQ(gpu->pcie_width_current, 16u);
  EXPECT_EQ(gpu->cc_major, 7);
  EXPECT_EQ(gpu->cc_minor, 5);
  EXPECT_EQ(gpu->power_limit_w, 70.0);
  // Turing retires pages and has no row remapper (`unsupported: [remapped_rows]`).
  EXPECT_EQ(gpu->retired_pages_pending, false);
  EXPECT_FALSE(gpu->remapped_rows.has_value());
  // Not MIG-capable, no NVLink: absent, not "off" and not an error.
  EXPECT_FALSE(gpu->mig_enabled.has_value());
  EXPECT_FALSE(gpu->mig_max_devices.has_value());
  EXPECT_THAT(gpu->mig_devices, IsEmpty());
  EXPECT_THAT(gpu->nvlinks, IsEmpty());
  EXPECT_THAT(gpu->field_errors, IsEmpty());
}

// ---- Values the built-in profiles leave at zero -----------------------------------------------

TEST(ReadGpuTest, ReadsEccCountersAndRemappedRowsAsTheDriverReportsThem) {
  SimNode node(ProfileText(
      "dgx-h200",
      "ecc: {enabled: true}\n  remapped_rows: {correctable: 0, uncorrectable: 0, pending: false, failure: false}",
      "ecc: {enabled: true, corrected_volatile: 3, uncorrected_volatile: 1, corrected_aggregate: 12, "
      "uncorrected_aggregate: 4}\n"
      "  remapped_rows: {correctable: 5, uncorrectable: 2, pending: true, failure: true}"));
  ASSERT_TRUE(node.ok());
  auto gpu = ReadGpu(node.nvml(), 0);
  ASSERT_OK(gpu);
  EXPECT_EQ(gpu->ecc_enabled, true);
  EXPECT_EQ(gpu->ecc_corrected_volatile, 3u);
  EXPECT_EQ(gpu->ecc_uncorrected_volatile, 1u);
  EXPECT_EQ(gpu->ecc_corrected_aggregate, 12u);
  EXPECT_EQ(gpu->ecc_uncorrected_aggregate, 4u);
  ASSERT_TRUE(gpu->remapped_rows.has_value());
  EXPECT_EQ(gpu->remapped_rows->correctable, 5u);
  EXPECT_EQ(gpu->remapped_rows->uncorrectable, 2u);
  EXPECT_TRUE(gpu->remapped_rows->pending);
  EXPECT_TRUE(gpu->remapped_rows->failure);
}

TEST(ReadGpuTest, LeavesEccCountersEmptyWhenEccIsOffAndReportsAPendingChange) {
  SimNode node(ProfileText("t4-cloud", "ecc: {enabled: true}", "ecc: {enabled: false, pending: true}"));
  ASSERT_TRUE(node.ok());
  auto gpu = ReadGpu(node.nvml(), 0);
  ASSERT_OK(gpu);
  EXPECT_EQ(gpu->ecc_enabled, false);
  EXPECT_EQ(gpu->ecc_pending, true);
  // With ECC off the driver counts nothing: unknown, not zero.
  EXPECT_FALSE(gpu->ecc_corrected_volatile.has_value());
  EXPECT_FALSE(gpu->ecc_uncorrected_volatile.has_value());
  EXPECT_FALSE(gpu->ecc_corrected_aggregate.has_value());
  EXPECT_FALSE(gpu->ecc_uncorrected_aggregate.has_value());
}

TEST(ReadGpuTest, ListsComputeProcessesWithTheirMemory) {
  SimNode node(ProfileText("t4-cloud", "    unsupported: [remapped_rows]",
                           "    unsupported: [remapped_rows]\n"
                           "    processes: [{pid: 4242, used_mib: 1024}, {pid: 4343, used_mib: 0}]"));
  ASSERT_TRUE(node.ok());
  auto gpu = ReadGpu(node.nvml(), 0);
  ASSERT_OK(gpu);
  ASSERT_TRUE(gpu->compute_processes.has_value());
  ASSERT_EQ(gpu->compute_processes->size(), 2u);
  EXPECT_EQ((*gpu->compute_processes)[0].pid, 4242u);
  EXPECT_EQ((*gpu->compute_processes)[0].used_memory_bytes, 1024 * kMiB);
  EXPECT_EQ((*gpu->compute_processes)[1].pid, 4343u);
  EXPECT_EQ((*gpu->compute_processes)[1].used_memory_bytes, 0u);
}

// ---- Options and unsupported fields -------------------------------------------------------------

TEST(ReadGpuTest, WithoutLiveMetricsLeavesPowerDrawClocksAndUtilizationUnread) {
  SimNode node(ProfileText("dgx-h200"));
  ASSERT_TRUE(node.ok());
  auto gpu = ReadGpu(node.nvml(), 0, GpuReadOptions{.live_metrics = false});
  ASSERT_OK(gpu);
  EXPECT_FALSE(gpu->power_usage_w.has_value());
  EXPECT_FALSE(gpu->sm_clock_mhz.has_value());
  EXPECT_FALSE(gpu->mem_clock_mhz.has_value());
  EXPECT_FALSE(gpu->utilization_gpu_pct.has_value());
  EXPECT_FALSE(gpu->utilization_memory_pct.has_value());
  // What a check needs is still read.
  EXPECT_EQ(gpu->name, "NVIDIA H200");
  EXPECT_EQ(gpu->temperature_c, 31u);
  EXPECT_EQ(gpu->power_limit_w, 700.0);
  EXPECT_EQ(gpu->memory_total_bytes, 143771 * kMiB);
  EXPECT_THAT(gpu->field_errors, IsEmpty());
}

TEST(ReadGpuTest, AFieldTheGpuDoesNotSupportIsEmptyNeverZeroAndNotAnError) {
  // Every query of the T4 but its name, UUID and PCI identity answers NVML_ERROR_NOT_SUPPORTED.
  SimNode node(ProfileText(
      "t4-cloud", "unsupported: [remapped_rows]",
      "unsupported: [vbios, minor_number, memory, persistence_mode, ecc, retired_pages, remapped_rows, "
      "pcie, temperature, power_usage, power_limit, enforced_power_limit, clocks, utilization, "
      "compute_capability, processes, mig, nvlink]"));
  ASSERT_TRUE(node.ok());
  auto gpu = ReadGpu(node.nvml(), 0);
  ASSERT_OK(gpu);
  EXPECT_EQ(gpu->name, "Tesla T4");
  EXPECT_EQ(gpu->uuid, "GPU-9fdfe6bb-3680-485a-8277-a2602bc7c9d0");
  EXPECT_EQ(gpu->pci_bus_id, "0000:00:04.0");
  EXPECT_FALSE(gpu->vbios_version.has_value());
  EXPECT_FALSE(gpu->minor_number.has_value());
  EXPECT_FALSE(gpu->memory_total_bytes.has_value());  // neither v2 nor the v1 fallback
  EXPECT_FALSE(gpu->memory_used_bytes.has_value());
  EXPECT_FALSE(gpu->memory_free_bytes.has_value());
  EXPECT_FALSE(gpu->memory_reserved_bytes.has_value());
  EXPECT_FALSE(gpu->persistence_mode.has_value());
  EXPECT_FALSE(gpu->ecc_enabled.has_value());
  EXPECT_FALSE(gpu->ecc_corrected_volatile.has_value());
  EXPECT_FALSE(gpu->retired_pages_pending.has_value());
  EXPECT_FALSE(gpu->remapped_rows.has_value());
  EXPECT_FALSE(gpu->pcie_gen_current.has_value());
  EXPECT_FALSE(gpu->pcie_width_max.has_value());
  EXPECT_FALSE(gpu->temperature_c.has_value());
  EXPECT_FALSE(gpu->power_usage_w.has_value());
  EXPECT_FALSE(gpu->power_limit_w.has_value());
  EXPECT_FALSE(gpu->power_enforced_limit_w.has_value());
  EXPECT_FALSE(gpu->sm_clock_mhz.has_value());
  EXPECT_FALSE(gpu->utilization_gpu_pct.has_value());
  EXPECT_FALSE(gpu->cc_major.has_value());
  EXPECT_FALSE(gpu->compute_processes.has_value());  // unknown, unlike an empty list
  EXPECT_FALSE(gpu->mig_enabled.has_value());
  EXPECT_THAT(gpu->nvlinks, IsEmpty());
  EXPECT_THAT(gpu->field_errors, IsEmpty());
}

TEST(ReadGpuTest, MigDevicesWithoutAttributesKeepTheirIdentity) {
  SimNode node(ProfileText("a100-mig", "unsupported: [retired_pages]", "unsupported: [retired_pages, attributes]"));
  ASSERT_TRUE(node.ok());
  auto gpu = ReadGpu(node.nvml(), 0);
  ASSERT_OK(gpu);
  ASSERT_EQ(gpu->mig_devices.size(), 3u);
  const MigDevice& m = gpu->mig_devices[0];
  EXPECT_EQ(m.uuid, "MIG-3566fd0d-6599-4b29-a558-a0b80cee56ab");
  EXPECT_EQ(m.gpu_instance_id, 2u);
  EXPECT_FALSE(m.slices.has_value());
  EXPECT_FALSE(m.memory_total_bytes.has_value());
  EXPECT_FALSE(m.multiprocessors.has_value());
  EXPECT_THAT(gpu->field_errors, IsEmpty());
}

// ---- GPUs that cannot be read ------------------------------------------------------------------

TEST(ReadGpuTest, ALostGpuFailsAsAWholeWithGpuIsLost) {
  SimNode node(ProfileText("broken-fallen-gpu"));
  ASSERT_TRUE(node.ok());
  auto lost = ReadGpu(node.nvml(), 2);  // fell off the bus (XID 79)
  ASSERT_FALSE(lost.ok());
  EXPECT_EQ(lost.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(NvmlReturnOf(lost.status()), NVML_ERROR_GPU_IS_LOST);
  // The GPUs around it read normally.
  for (unsigned i : {0u, 1u, 3u}) {
    auto gpu = ReadGpu(node.nvml(), i);
    ASSERT_OK(gpu) << "GPU " << i;
    EXPECT_EQ(gpu->name, "NVIDIA H100 80GB HBM3") << "GPU " << i;
    EXPECT_THAT(gpu->field_errors, IsEmpty()) << "GPU " << i;
  }
}

TEST(ReadGpuTest, AGpuLostWhileTheLibraryIsLoadedFailsTheNextRead) {
  const std::string healthy = ProfileText("t4-cloud");
  SimNode node(healthy);
  ASSERT_TRUE(node.ok());
  ASSERT_OK(ReadGpu(node.nvml(), 0));
  node.Write(ProfileText("t4-cloud", "    numa_node: 0", "    numa_node: 0\n    lost: true"));
  auto lost = ReadGpu(node.nvml(), 0);
  ASSERT_FALSE(lost.ok());
  EXPECT_EQ(NvmlReturnOf(lost.status()), NVML_ERROR_GPU_IS_LOST);
  // Back on the bus: readable again.
  node.Write(healthy);
  EXPECT_OK(ReadGpu(node.nvml(), 0));
}

TEST(ReadGpuTest, AnIndexPastTheLastGpuIsAnError) {
  SimNode node(ProfileText("t4-cloud"));
  ASSERT_TRUE(node.ok());
  auto gpu = ReadGpu(node.nvml(), 1);
  ASSERT_FALSE(gpu.ok());
  EXPECT_EQ(NvmlReturnOf(gpu.status()), NVML_ERROR_INVALID_ARGUMENT);
}

}  // namespace
}  // namespace gpunode::gpu
