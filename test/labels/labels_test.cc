// The node labels: GFD's names and value formats on hand-written inventories (sharing, MIG
// strategies, versions, PCI class), simulated nodes through the real probes (dgx-h200, a100-mig,
// a GPU fallen off the bus), the label-value sanitiser and the sleep-interval parser.
// The golden label set of the simulated dgx-h200 is checked end to end in
// test/cli/labels_cli_test.cc (test/fixtures/labels/dgx-h200.txt).
#include "src/devices/sleep_interval.h"
#include "src/labels/labels.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/support/profile.h"
#include "src/compat/dataset.h"
#include "src/node/probe.h"
#include "test/testing/sim_library.h"
#include "test/testing/status_matchers.h"

namespace gpunode::labels {
namespace {

namespace fs = std::filesystem;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Key;
using ::testing::Not;
using ::testing::Pair;

constexpr uint64_t kMiB = 1024 * 1024;

gpu::GpuInfo Gpu(unsigned index, const std::string& name, const std::string& bus, uint64_t mib,
            int cc_major, int cc_minor) {
  gpu::GpuInfo g;
  g.index = index;
  g.name = name;
  g.uuid = "GPU-" + std::to_string(index);
  g.pci_bus_id = bus;
  g.memory_total_bytes = mib * kMiB;
  g.cc_major = cc_major;
  g.cc_minor = cc_minor;
  return g;
}

gpu::MigDevice Mig(unsigned index, unsigned slices, uint64_t mib, unsigned sms) {
  gpu::MigDevice m;
  m.index = index;
  m.uuid = "MIG-" + std::to_string(index);
  m.slices = slices;
  m.compute_slices = slices;
  m.memory_total_bytes = mib * kMiB;
  m.multiprocessors = sms;
  // A 1g slice of an A100: one copy engine, no decoder, encoder, JPEG or OFA engine of its own.
  m.copy_engines = slices;
  m.decoders = m.encoders = m.jpegs = m.ofas = 0;
  return m;
}

// A node whose driver is 580.95.05 (CUDA 13.0) with `gpus`, each a 3D controller on the bus.
node::NodeInventory Node(std::vector<gpu::GpuInfo> gpus) {
  node::NodeInventory inv;
  inv.hostname = "node-1";
  inv.driver.driver_version = *Version::Parse("580.95.05");
  inv.driver.cuda_version = *Version::Parse("13.0");
  inv.driver.device_count = static_cast<unsigned>(gpus.size());
  inv.kernel.version = *Version::Parse("580.95.05");
  inv.kernel.flavor = node::ModuleFlavor::kOpen;
  for (const gpu::GpuInfo& g : gpus) {
    node::PciDevice p;
    p.bus_id = g.pci_bus_id;
    p.vendor = 0x10de;
    p.class_code = 0x030200;
    p.driver = "nvidia";
    inv.hardware.gpus.push_back(p);
  }
  inv.driver.gpus = std::move(gpus);
  return inv;
}

node::NodeInventory H100s(unsigned n) {
  std::vector<gpu::GpuInfo> gpus;
  for (unsigned i = 0; i < n; ++i) {
    gpus.push_back(
        Gpu(i, "NVIDIA H100 80GB HBM3", "0000:1" + std::to_string(i) + ":00.0", 81559, 9, 0));
  }
  return Node(std::move(gpus));
}

node::NodeInventory A100sInMig(std::vector<std::vector<gpu::MigDevice>> per_gpu) {
  std::vector<gpu::GpuInfo> gpus;
  for (unsigned i = 0; i < per_gpu.size(); ++i) {
    gpu::GpuInfo g =
        Gpu(i, "NVIDIA A100-SXM4-40GB", "0000:0" + std::to_string(i) + ":00.0", 40960, 8, 0);
    g.mig_enabled = true;
    g.mig_max_devices = 7;
    g.mig_devices = per_gpu[i];
    gpus.push_back(g);
  }
  return Node(std::move(gpus));
}

devices::PluginConfig TimeSliced(int replicas, bool rename_by_default = false) {
  devices::PluginConfig c;
  c.sharing.strategy = devices::SharingStrategy::kTimeSlicing;
  c.sharing.rename_by_default = rename_by_default;
  c.sharing.resources.push_back({"nvidia.com/gpu", replicas});
  return c;
}

LabelOptions NoTimestamp() { return LabelOptions{}; }

// --- values, keys, families, intervals -------------------------------------------------------

TEST(SanitizeLabelValueTest, BlanksBecomeOneDashAndOtherCharactersAreDropped) {
  EXPECT_EQ(SanitizeLabelValue("NVIDIA H200"), "NVIDIA-H200");
  EXPECT_EQ(SanitizeLabelValue("  Tesla   T4 "), "Tesla-T4");
  EXPECT_EQ(SanitizeLabelValue("ProLiant DL380 Gen10 (P19720-B21)"),
            "ProLiant-DL380-Gen10-P19720-B21");
  EXPECT_EQ(SanitizeLabelValue("NVIDIA A100-SXM4-80GB"), "NVIDIA-A100-SXM4-80GB");
  EXPECT_EQ(SanitizeLabelValue("Quadro RTX 8000/PCIe"), "Quadro-RTX-8000PCIe");
  EXPECT_EQ(SanitizeLabelValue("a\tb\nc"), "a-b-c");
}

TEST(SanitizeLabelValueTest, ValuesBeginAndEndWithALetterOrDigit) {
  EXPECT_EQ(SanitizeLabelValue("To be filled by O.E.M."), "To-be-filled-by-O.E.M");
  EXPECT_EQ(SanitizeLabelValue("--x--"), "x");
  EXPECT_EQ(SanitizeLabelValue("._-"), "");
  EXPECT_EQ(SanitizeLabelValue("(((("), "");
  EXPECT_EQ(SanitizeLabelValue(""), "");
  EXPECT_EQ(SanitizeLabelValue("05"), "05");
}

TEST(SanitizeLabelValueTest, LongValuesAreCutTo63CharactersAndRetrimmed) {
  const std::string s = SanitizeLabelValue(std::string(62, 'a') + "-b" + std::string(10, 'c'));
  EXPECT_EQ(s, std::string(62, 'a'));  // the cut ends on '-', which is trimmed
  EXPECT_TRUE(IsValidLabelValue(s));
  EXPECT_EQ(SanitizeLabelValue(std::string(100, 'x')).size(), 63u);
}

TEST(SanitizeLabelValueTest, ItsOutputIsAlwaysValidAndStableForAnyByte) {
  std::string all;
  for (int c = 0; c < 256; ++c) all.push_back(static_cast<char>(c));
  for (size_t i = 0; i + 20 <= all.size(); i += 7) {
    const std::string s = SanitizeLabelValue(all.substr(i, 20) + " x " + all.substr(i, 20));
    EXPECT_TRUE(IsValidLabelValue(s)) << s;
    EXPECT_EQ(SanitizeLabelValue(s), s);
  }
}

TEST(IsValidLabelValueTest, FollowsKubernetesRules) {
  EXPECT_TRUE(IsValidLabelValue(""));
  EXPECT_TRUE(IsValidLabelValue("NVIDIA-H200"));
  EXPECT_TRUE(IsValidLabelValue("580.95.05"));
  EXPECT_TRUE(IsValidLabelValue("a_b"));
  EXPECT_FALSE(IsValidLabelValue("-a"));
  EXPECT_FALSE(IsValidLabelValue("a."));
  EXPECT_FALSE(IsValidLabelValue("a b"));
  EXPECT_FALSE(IsValidLabelValue("a/b"));
  EXPECT_FALSE(IsValidLabelValue(std::string(64, 'a')));
  EXPECT_TRUE(IsValidLabelValue(std::string(63, 'a')));
}

TEST(IsValidLabelKeyTest, PrefixIsADnsSubdomainAndNameLikeAValue) {
  EXPECT_TRUE(IsValidLabelKey("nvidia.com/gpu.product"));
  EXPECT_TRUE(IsValidLabelKey("nvidia.com/mig-1g.10gb.sharing-strategy"));
  EXPECT_TRUE(IsValidLabelKey("gpunode.io/driver.cuda-12"));
  EXPECT_TRUE(IsValidLabelKey("plain"));
  EXPECT_FALSE(IsValidLabelKey("nvidia.com/"));
  EXPECT_FALSE(IsValidLabelKey("/gpu"));
  EXPECT_FALSE(IsValidLabelKey("NVIDIA.com/gpu"));
  EXPECT_FALSE(IsValidLabelKey("nvidia.com/mig-1g.10gb+me"));
  EXPECT_FALSE(IsValidLabelKey("nvidia.com/" + std::string(64, 'a')));
}

TEST(ArchFamilyTest, MapsComputeCapabilitiesAsGfdDoes) {
  EXPECT_EQ(ArchFamily(1, 3), "tesla");
  EXPECT_EQ(ArchFamily(2, 1), "fermi");
  EXPECT_EQ(ArchFamily(3, 7), "kepler");
  EXPECT_EQ(ArchFamily(5, 2), "maxwell");
  EXPECT_EQ(ArchFamily(6, 0), "pascal");
  EXPECT_EQ(ArchFamily(7, 0), "volta");
  EXPECT_EQ(ArchFamily(7, 2), "volta");
  EXPECT_EQ(ArchFamily(7, 5), "turing");
  EXPECT_EQ(ArchFamily(8, 0), "ampere");
  EXPECT_EQ(ArchFamily(8, 6), "ampere");
  EXPECT_EQ(ArchFamily(8, 7), "ampere");
  EXPECT_EQ(ArchFamily(8, 9), "ada-lovelace");
  EXPECT_EQ(ArchFamily(9, 0), "hopper");
  EXPECT_EQ(ArchFamily(10, 0), "blackwell");
  EXPECT_EQ(ArchFamily(12, 0), "blackwell");
  EXPECT_EQ(ArchFamily(13, 0), "rubin");
  EXPECT_EQ(ArchFamily(4, 0), "undefined");
  EXPECT_EQ(ArchFamily(99, 0), "undefined");
}

TEST(ParseSleepIntervalTest, AcceptsGoDurationsOfWholeSecondsAndInfinite) {
  EXPECT_EQ(*devices::ParseSleepInterval("60s"), 60);
  EXPECT_EQ(*devices::ParseSleepInterval("5m"), 300);
  EXPECT_EQ(*devices::ParseSleepInterval("1h30m"), 5400);
  EXPECT_EQ(*devices::ParseSleepInterval("1m30s"), 90);
  EXPECT_EQ(*devices::ParseSleepInterval("2000ms"), 2);
  EXPECT_EQ(*devices::ParseSleepInterval("90"), 90);
  EXPECT_EQ(*devices::ParseSleepInterval(" 1s "), 1);
  EXPECT_EQ(*devices::ParseSleepInterval("infinite"), -1);
}

TEST(ParseSleepIntervalTest, RejectsMalformedZeroAndSubSecondIntervals) {
  for (const char* bad : {"", "0", "0s", "-5s", "500ms", "1500ms", "1d", "s", "5 m", "1.5s",
                          "forever", "99999999999h"}) {
    auto r = devices::ParseSleepInterval(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
      EXPECT_THAT(std::string(r.status().message()), HasSubstr("sleep interval")) << bad;
    }
  }
}

TEST(RenderFeaturesFileTest, WritesSortedKeyValueLines) {
  Labels l = {{"nvidia.com/gpu.product", "NVIDIA-H200"},
              {"gpunode.io/x", "1"},
              {"nvidia.com/cuda.driver.rev", ""}};
  EXPECT_EQ(RenderFeaturesFile(l),
            "gpunode.io/x=1\nnvidia.com/cuda.driver.rev=\nnvidia.com/gpu.product=NVIDIA-H200\n");
  EXPECT_EQ(RenderFeaturesFile({}), "");
}

// --- GFD labels on hand-written inventories ----------------------------------------------------

TEST(BuildLabelsTest, FullGpusGetGfdsProductCountMemoryAndArchitecture) {
  const LabelSet set = BuildLabels(H100s(4), devices::PluginConfig{}, NoTimestamp());
  const Labels& l = set.labels;
  EXPECT_EQ(l.at("nvidia.com/gpu.present"), "true");
  EXPECT_EQ(l.at("nvidia.com/gpu.product"), "NVIDIA-H100-80GB-HBM3");
  EXPECT_EQ(l.at("nvidia.com/gpu.count"), "4");
  EXPECT_EQ(l.at("nvidia.com/gpu.memory"), "81559");
  EXPECT_EQ(l.at("nvidia.com/gpu.family"), "hopper");
  EXPECT_EQ(l.at("nvidia.com/gpu.compute.major"), "9");
  EXPECT_EQ(l.at("nvidia.com/gpu.compute.minor"), "0");
  EXPECT_EQ(l.at("nvidia.com/gpu.replicas"), "1");
  EXPECT_EQ(l.at("nvidia.com/gpu.sharing-strategy"), "none");
  EXPECT_EQ(l.at("nvidia.com/gpu.mode"), "compute");
  EXPECT_EQ(l.at("nvidia.com/mig.capable"), "false");
  EXPECT_EQ(l.at("nvidia.com/mps.capable"), "false");
  EXPECT_EQ(l.at("nvidia.com/gpu.machine"), "unknown");
  EXPECT_THAT(l, Not(Contains(Key("nvidia.com/mig.strategy"))));
  EXPECT_THAT(l, Not(Contains(Key("nvidia.com/gfd.timestamp"))));
  EXPECT_THAT(set.warnings, IsEmpty());
}

TEST(BuildLabelsTest, DriverAndCudaVersionsUseBothTheDeprecatedAndTheNewNames) {
  const Labels l = BuildLabels(H100s(1), devices::PluginConfig{}, NoTimestamp()).labels;
  EXPECT_EQ(l.at("nvidia.com/cuda.driver.major"), "580");
  EXPECT_EQ(l.at("nvidia.com/cuda.driver.minor"), "95");
  EXPECT_EQ(l.at("nvidia.com/cuda.driver.rev"), "05");
  EXPECT_EQ(l.at("nvidia.com/cuda.driver-version.major"), "580");
  EXPECT_EQ(l.at("nvidia.com/cuda.driver-version.minor"), "95");
  EXPECT_EQ(l.at("nvidia.com/cuda.driver-version.revision"), "05");
  EXPECT_EQ(l.at("nvidia.com/cuda.driver-version.full"), "580.95.05");
  EXPECT_EQ(l.at("nvidia.com/cuda.runtime.major"), "13");
  EXPECT_EQ(l.at("nvidia.com/cuda.runtime.minor"), "0");
  EXPECT_EQ(l.at("nvidia.com/cuda.runtime-version.major"), "13");
  EXPECT_EQ(l.at("nvidia.com/cuda.runtime-version.minor"), "0");
  EXPECT_EQ(l.at("nvidia.com/cuda.runtime-version.full"), "13.0");
}

// On a real node the services keep libcuda out, so NVML cannot give the CUDA version (it asks
// libcuda; seen on the H200, docs/examples/h200/peers/): the driver branch's, from the compat
// data, as GFD would have read it (580 -> 13.0).
TEST(BuildLabelsTest, TheCudaVersionComesFromTheDriverBranchWhenNvmlCannotSay) {
  node::NodeInventory inv = H100s(1);
  inv.driver.cuda_version.reset();
  EXPECT_THAT(BuildLabels(inv, devices::PluginConfig{}, NoTimestamp()).labels,
              Not(Contains(Key("nvidia.com/cuda.runtime-version.full"))));
  auto data = compat::LoadBuiltin();
  ASSERT_OK(data);
  LabelOptions options;
  options.compat = &*data;
  const Labels l = BuildLabels(inv, devices::PluginConfig{}, options).labels;
  EXPECT_EQ(l.at("nvidia.com/cuda.runtime-version.full"), "13.0");
  EXPECT_EQ(l.at("nvidia.com/cuda.runtime.major"), "13");
}

TEST(BuildLabelsTest, ATwoPartDriverVersionHasAnEmptyRevision) {
  node::NodeInventory inv = H100s(1);
  inv.driver.driver_version = *Version::Parse("570.26");
  const Labels l = BuildLabels(inv, devices::PluginConfig{}, NoTimestamp()).labels;
  EXPECT_EQ(l.at("nvidia.com/cuda.driver.minor"), "26");
  EXPECT_EQ(l.at("nvidia.com/cuda.driver.rev"), "");
  EXPECT_EQ(l.at("nvidia.com/cuda.driver-version.revision"), "");
  EXPECT_EQ(l.at("nvidia.com/cuda.driver-version.full"), "570.26");
}

TEST(BuildLabelsTest, TheTimestampIsUnixSecondsWhenAsked) {
  LabelOptions o;
  o.timestamp = 1767225600;
  const Labels l = BuildLabels(H100s(1), devices::PluginConfig{}, o).labels;
  EXPECT_EQ(l.at("nvidia.com/gfd.timestamp"), "1767225600");
}

TEST(BuildLabelsTest, TheMachineTypeIsSanitised) {
  LabelOptions o;
  o.machine_type = "DGX H200";
  EXPECT_EQ(BuildLabels(H100s(1), devices::PluginConfig{}, o).labels.at("nvidia.com/gpu.machine"),
            "DGX-H200");
  o.machine_type = "  (((  ";
  EXPECT_EQ(BuildLabels(H100s(1), devices::PluginConfig{}, o).labels.at("nvidia.com/gpu.machine"),
            "unknown");
  o.machine_type = "";
  EXPECT_EQ(BuildLabels(H100s(1), devices::PluginConfig{}, o).labels.at("nvidia.com/gpu.machine"),
            "unknown");
}

TEST(BuildLabelsTest, TimeSlicingAddsReplicasStrategyAndTheSharedSuffix) {
  const Labels l = BuildLabels(H100s(2), TimeSliced(4), NoTimestamp()).labels;
  EXPECT_EQ(l.at("nvidia.com/gpu.product"), "NVIDIA-H100-80GB-HBM3-SHARED");
  EXPECT_EQ(l.at("nvidia.com/gpu.replicas"), "4");
  EXPECT_EQ(l.at("nvidia.com/gpu.sharing-strategy"), "time-slicing");
  EXPECT_EQ(l.at("nvidia.com/gpu.count"), "2");  // physical GPUs, as in GFD
  EXPECT_EQ(l.at("nvidia.com/mps.capable"), "false");
}

TEST(BuildLabelsTest, RenameByDefaultDropsTheSharedSuffix) {
  const Labels l =
      BuildLabels(H100s(2), TimeSliced(4, /*rename_by_default=*/true), NoTimestamp()).labels;
  EXPECT_EQ(l.at("nvidia.com/gpu.product"), "NVIDIA-H100-80GB-HBM3");
  EXPECT_EQ(l.at("nvidia.com/gpu.replicas"), "4");
  EXPECT_EQ(l.at("nvidia.com/gpu.sharing-strategy"), "time-slicing");
}

TEST(BuildLabelsTest, MpsSharingMakesTheNodeMpsCapable) {
  devices::PluginConfig c = TimeSliced(3);
  c.sharing.strategy = devices::SharingStrategy::kMps;
  const Labels l = BuildLabels(H100s(1), c, NoTimestamp()).labels;
  EXPECT_EQ(l.at("nvidia.com/mps.capable"), "true");
  EXPECT_EQ(l.at("nvidia.com/gpu.sharing-strategy"), "mps");
  EXPECT_EQ(l.at("nvidia.com/gpu.product"), "NVIDIA-H100-80GB-HBM3-SHARED");
}

TEST(BuildLabelsTest, MpsWithAGpuInMigModeIsNotMpsCapableAndSaysWhy) {
  devices::PluginConfig c = TimeSliced(3);
  c.sharing.strategy = devices::SharingStrategy::kMps;
  const LabelSet set = BuildLabels(A100sInMig({{Mig(0, 1, 4864, 14)}}), c, NoTimestamp());
  EXPECT_EQ(set.labels.at("nvidia.com/mps.capable"), "false");
  EXPECT_THAT(set.warnings, Contains(HasSubstr("MPS")));
}

TEST(BuildLabelsTest, GpuModeComesFromThePciClassOfTheFirstGpu) {
  node::NodeInventory inv = H100s(2);
  inv.hardware.gpus[0].class_code = 0x030000;
  EXPECT_EQ(BuildLabels(inv, devices::PluginConfig{}, NoTimestamp()).labels.at("nvidia.com/gpu.mode"),
            "graphics");
  inv.hardware.gpus[0].class_code = 0x030001;
  EXPECT_EQ(BuildLabels(inv, devices::PluginConfig{}, NoTimestamp()).labels.at("nvidia.com/gpu.mode"),
            "unknown");
  inv.hardware.gpus.clear();
  EXPECT_EQ(BuildLabels(inv, devices::PluginConfig{}, NoTimestamp()).labels.at("nvidia.com/gpu.mode"),
            "unknown");
}

TEST(BuildLabelsTest, SeveralModelsLabelTheFirstFullGpusModelAndWarn) {
  node::NodeInventory inv = H100s(2);
  inv.driver.gpus.insert(inv.driver.gpus.begin(), Gpu(9, "Tesla T4", "0000:af:00.0", 15360, 7, 5));
  const LabelSet set = BuildLabels(inv, devices::PluginConfig{}, NoTimestamp());
  EXPECT_EQ(set.labels.at("nvidia.com/gpu.product"), "Tesla-T4");
  EXPECT_EQ(set.labels.at("nvidia.com/gpu.count"), "1");
  EXPECT_EQ(set.labels.at("nvidia.com/gpu.family"), "turing");
  EXPECT_THAT(set.warnings, Contains(HasSubstr("several GPU models")));
}

TEST(BuildLabelsTest, UnknownComputeCapabilityAndMemoryAreLeftOutNotZero) {
  node::NodeInventory inv = H100s(1);
  inv.driver.gpus[0].cc_major.reset();
  inv.driver.gpus[0].memory_total_bytes.reset();
  const Labels l = BuildLabels(inv, devices::PluginConfig{}, NoTimestamp()).labels;
  EXPECT_THAT(l, Not(Contains(Key("nvidia.com/gpu.family"))));
  EXPECT_THAT(l, Not(Contains(Key("nvidia.com/gpu.compute.major"))));
  EXPECT_THAT(l, Not(Contains(Key("nvidia.com/gpu.memory"))));
}

TEST(BuildLabelsTest, ANodeWithoutGpusKeepsOnlyMachineTimestampAndGpunodeLabels) {
  node::NodeInventory inv;
  inv.driver.status = absl::FailedPreconditionError("NVML: driver not loaded");
  LabelOptions o;
  o.timestamp = 1;
  const Labels l = BuildLabels(inv, devices::PluginConfig{}, o).labels;
  for (const auto& [k, v] : l) {
    if (k.rfind("gpunode.io/", 0) == 0) continue;
    EXPECT_THAT(k, ::testing::AnyOf("nvidia.com/gfd.timestamp", "nvidia.com/gpu.machine")) << k;
  }
  EXPECT_EQ(l.at("gpunode.io/gpu.healthy-count"), "0");
  EXPECT_EQ(l.at("gpunode.io/gpu.unhealthy-count"), "0");
  EXPECT_THAT(l, Not(Contains(Key("gpunode.io/driver.branch"))));
}

// --- MIG
// ------------------------------------------------------------------------------------------

TEST(BuildLabelsTest, MigStrategyNoneLabelsMigEnabledGpusAsFullGpusWithoutReplicas) {
  const Labels l =
      BuildLabels(A100sInMig({{Mig(0, 1, 4864, 14)}}), devices::PluginConfig{}, NoTimestamp()).labels;
  EXPECT_EQ(l.at("nvidia.com/mig.capable"), "true");
  EXPECT_EQ(l.at("nvidia.com/gpu.product"), "NVIDIA-A100-SXM4-40GB");
  EXPECT_EQ(l.at("nvidia.com/gpu.replicas"), "0");  // GFD labels MIG-enabled GPUs without sharing
  EXPECT_EQ(l.at("nvidia.com/gpu.family"), "ampere");
  EXPECT_THAT(l, Not(Contains(Key("nvidia.com/mig.strategy"))));
}

TEST(BuildLabelsTest, MigStrategySingleReplacesTheGpuLabelsWithTheMigDevices) {
  devices::PluginConfig c;
  c.mig_strategy = devices::MigStrategy::kSingle;
  node::NodeInventory inv =
      A100sInMig({{Mig(0, 1, 4864, 14), Mig(1, 1, 4864, 14)}, {Mig(0, 1, 4864, 14)}});
  const LabelSet set = BuildLabels(inv, c, NoTimestamp());
  const Labels& l = set.labels;
  EXPECT_EQ(l.at("nvidia.com/mig.strategy"), "single");
  EXPECT_EQ(l.at("nvidia.com/gpu.product"), "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb");
  EXPECT_EQ(l.at("nvidia.com/gpu.count"), "3");
  EXPECT_EQ(l.at("nvidia.com/gpu.replicas"), "1");
  EXPECT_EQ(l.at("nvidia.com/gpu.memory"), "4864");
  EXPECT_EQ(l.at("nvidia.com/gpu.multiprocessors"), "14");
  EXPECT_EQ(l.at("nvidia.com/gpu.slices.gi"), "1");
  EXPECT_EQ(l.at("nvidia.com/gpu.slices.ci"), "1");
  EXPECT_EQ(l.at("nvidia.com/gpu.engines.copy"), "1");  // the shared engines, as GFD
  EXPECT_EQ(l.at("nvidia.com/gpu.engines.ofa"), "0");
  EXPECT_EQ(l.at("nvidia.com/gpu.family"), "ampere");  // from the full-GPU labels, as in GFD
  EXPECT_THAT(set.warnings, IsEmpty());
}

TEST(BuildLabelsTest, MigStrategySingleWithTimeSlicingSharesTheMigDevices) {
  devices::PluginConfig c = TimeSliced(2);
  c.mig_strategy = devices::MigStrategy::kSingle;
  const Labels l = BuildLabels(A100sInMig({{Mig(0, 1, 4864, 14)}}), c, NoTimestamp()).labels;
  EXPECT_EQ(l.at("nvidia.com/gpu.product"), "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb-SHARED");
  EXPECT_EQ(l.at("nvidia.com/gpu.replicas"), "2");
  EXPECT_EQ(l.at("nvidia.com/gpu.sharing-strategy"), "time-slicing");
}

TEST(BuildLabelsTest, MigStrategySingleWithInvalidLayoutsSaysMigInvalid) {
  devices::PluginConfig c;
  c.mig_strategy = devices::MigStrategy::kSingle;
  struct Case {
    node::NodeInventory inv;
    std::string reason;
  };
  node::NodeInventory mixed_modes = A100sInMig({{Mig(0, 1, 4864, 14)}});
  mixed_modes.driver.gpus.push_back(Gpu(1, "NVIDIA A100-SXM4-40GB", "0000:01:00.0", 40960, 8, 0));
  std::vector<Case> cases = {
      {A100sInMig({{Mig(0, 1, 4864, 14)}, {}}), "enabled but empty"},
      {mixed_modes, "MIG enabled and disable"},
      {A100sInMig({{Mig(0, 1, 4864, 14), Mig(1, 2, 9984, 28)}}), "more than one MIG device type"},
  };
  for (const Case& k : cases) {
    const LabelSet set = BuildLabels(k.inv, c, NoTimestamp());
    EXPECT_EQ(set.labels.at("nvidia.com/gpu.product"), "NVIDIA-A100-SXM4-40GB-MIG-INVALID")
        << k.reason;
    EXPECT_EQ(set.labels.at("nvidia.com/gpu.count"), "0") << k.reason;
    EXPECT_EQ(set.labels.at("nvidia.com/gpu.replicas"), "0") << k.reason;
    EXPECT_EQ(set.labels.at("nvidia.com/gpu.memory"), "0") << k.reason;
    // GFD empties the strategy of the invalid resource (test/peers/labels_test.sh checks it
    // against GFD itself).
    EXPECT_EQ(set.labels.at("nvidia.com/gpu.sharing-strategy"), "") << k.reason;
    EXPECT_THAT(set.warnings, Contains(HasSubstr(k.reason))) << k.reason;
  }
}

TEST(BuildLabelsTest, MigStrategySingleWithoutMigGpusIsLikeNone) {
  devices::PluginConfig c;
  c.mig_strategy = devices::MigStrategy::kSingle;
  const Labels l = BuildLabels(H100s(2), c, NoTimestamp()).labels;
  EXPECT_EQ(l.at("nvidia.com/mig.strategy"), "single");
  EXPECT_EQ(l.at("nvidia.com/gpu.product"), "NVIDIA-H100-80GB-HBM3");
  EXPECT_EQ(l.at("nvidia.com/gpu.count"), "2");
}

TEST(BuildLabelsTest, MigStrategyMixedLabelsEachProfileAsItsOwnResource) {
  devices::PluginConfig c;
  c.mig_strategy = devices::MigStrategy::kMixed;
  node::NodeInventory inv =
      A100sInMig({{Mig(0, 1, 4864, 14), Mig(1, 2, 9984, 28)}, {Mig(0, 1, 4864, 14)}});
  inv.driver.gpus.push_back(Gpu(2, "NVIDIA A100-SXM4-40GB", "0000:02:00.0", 40960, 8, 0));
  const Labels l = BuildLabels(inv, c, NoTimestamp()).labels;
  EXPECT_EQ(l.at("nvidia.com/mig.strategy"), "mixed");
  EXPECT_EQ(l.at("nvidia.com/mig-1g.5gb.count"), "2");
  EXPECT_EQ(l.at("nvidia.com/mig-1g.5gb.product"), "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb");
  EXPECT_EQ(l.at("nvidia.com/mig-1g.5gb.memory"), "4864");
  EXPECT_EQ(l.at("nvidia.com/mig-1g.5gb.replicas"), "1");
  EXPECT_EQ(l.at("nvidia.com/mig-1g.5gb.sharing-strategy"), "none");
  EXPECT_EQ(l.at("nvidia.com/mig-2g.10gb.count"), "1");
  EXPECT_EQ(l.at("nvidia.com/mig-2g.10gb.multiprocessors"), "28");
  EXPECT_EQ(l.at("nvidia.com/mig-2g.10gb.slices.gi"), "2");
  // The full GPU (not in MIG mode) is the nvidia.com/gpu resource; all three A100s count.
  EXPECT_EQ(l.at("nvidia.com/gpu.product"), "NVIDIA-A100-SXM4-40GB");
  EXPECT_EQ(l.at("nvidia.com/gpu.count"), "3");
  EXPECT_EQ(l.at("nvidia.com/gpu.replicas"), "1");
}

// --- gpunode.io labels
// ------------------------------------------------------------------------------

TEST(BuildLabelsTest, DriverBranchKernelModuleAndCudaMajorsFromTheCompatDataSet) {
  auto data = compat::LoadBuiltin();
  ASSERT_OK(data) << data.status();
  LabelOptions o;
  o.compat = &*data;
  node::NodeInventory inv = H100s(1);
  inv.driver.driver_version = *Version::Parse("535.104.05");
  inv.kernel.flavor = node::ModuleFlavor::kProprietary;
  const Labels l = BuildLabels(inv, devices::PluginConfig{}, o).labels;
  EXPECT_EQ(l.at("gpunode.io/driver.branch"), "535");
  EXPECT_EQ(l.at("gpunode.io/driver.kernel-module"), "proprietary");
  EXPECT_EQ(l.at("gpunode.io/driver.cuda-11"), "true");
  EXPECT_EQ(l.at("gpunode.io/driver.cuda-12"), "true");
  EXPECT_EQ(l.at("gpunode.io/driver.cuda-13"), "false");
  // Every CUDA major the data set knows gets a label.
  for (const compat::MinorCompat& m : data->minor_compat) {
    EXPECT_THAT(l, Contains(Key("gpunode.io/driver.cuda-" + std::to_string(m.cuda_major))));
  }
  // Without the data set, no guesses.
  const Labels bare = BuildLabels(inv, devices::PluginConfig{}, NoTimestamp()).labels;
  EXPECT_THAT(bare, Not(Contains(Key("gpunode.io/driver.cuda-12"))));
}

TEST(BuildLabelsTest, TheDriverBranchFallsBackToTheKernelModule) {
  node::NodeInventory inv;
  inv.kernel.version = *Version::Parse("570.133.20");
  EXPECT_EQ(BuildLabels(inv, devices::PluginConfig{}, NoTimestamp()).labels.at("gpunode.io/driver.branch"),
            "570");
}

TEST(BuildLabelsTest, UnreadableOrFailedGpusCountAsUnhealthy) {
  node::NodeInventory inv = H100s(4);
  inv.driver.gpus[1].remapped_rows = gpu::RemappedRows{0, 3, false, true};
  inv.driver.gpus.erase(inv.driver.gpus.begin() + 2);
  inv.driver.gpu_failures.push_back({2, absl::UnavailableError("GPU is lost")});
  const Labels l = BuildLabels(inv, devices::PluginConfig{}, NoTimestamp()).labels;
  EXPECT_EQ(l.at("gpunode.io/gpu.healthy-count"), "2");
  EXPECT_EQ(l.at("gpunode.io/gpu.unhealthy-count"), "2");
  EXPECT_EQ(l.at("nvidia.com/gpu.count"), "3");  // the GPUs NVML reads, as GFD counts them
}

TEST(BuildLabelsTest, GpusOnTheBusThatNvmlDoesNotCountAreUnhealthy) {
  node::NodeInventory inv = H100s(4);
  inv.driver.gpus.pop_back();
  inv.driver.device_count = 3;
  Labels l = BuildLabels(inv, devices::PluginConfig{}, NoTimestamp()).labels;
  EXPECT_EQ(l.at("gpunode.io/gpu.healthy-count"), "3");
  EXPECT_EQ(l.at("gpunode.io/gpu.unhealthy-count"), "1");
  // ... unless it was given to a virtual machine.
  inv.hardware.gpus.back().driver = "vfio-pci";
  l = BuildLabels(inv, devices::PluginConfig{}, NoTimestamp()).labels;
  EXPECT_EQ(l.at("gpunode.io/gpu.unhealthy-count"), "0");
}

TEST(BuildLabelsTest, WithoutADriverEveryGpuOnTheBusIsUnhealthy) {
  node::NodeInventory inv = H100s(2);
  inv.driver.gpus.clear();
  inv.driver.device_count.reset();
  inv.driver.status = absl::FailedPreconditionError("NVML: driver not loaded");
  for (node::PciDevice& p : inv.hardware.gpus) p.driver.clear();
  const Labels l = BuildLabels(inv, devices::PluginConfig{}, NoTimestamp()).labels;
  EXPECT_EQ(l.at("nvidia.com/gpu.present"), "true");
  EXPECT_EQ(l.at("gpunode.io/gpu.healthy-count"), "0");
  EXPECT_EQ(l.at("gpunode.io/gpu.unhealthy-count"), "2");
  EXPECT_THAT(l, Not(Contains(Key("nvidia.com/gpu.product"))));
}

// --- simulated nodes, through the real probes
// ---------------------------------------------------------

using ::gpunode::testing::SimLibrary;

// A simulated node: its generated host root and the inventory the real probes read from it.
class SimNode {
 public:
  explicit SimNode(const std::string& profile_name)
      : dir_(fs::temp_directory_path() /
             ("gpunode-labels-" + profile_name + "-" + std::to_string(::getpid()))) {
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    auto source = sim::ResolveProfile(profile_name);
    EXPECT_OK(source) << source.status();
    const std::string profile_path = (dir_ / "profile.yaml").string();
    std::ofstream(profile_path) << source->text;
    auto profile = sim::ParseProfile(source->text, profile_name);
    EXPECT_OK(profile) << profile.status();
    Status st = sim::WriteHostRoot(*profile, (dir_ / "root").string());
    EXPECT_OK(st) << st;
    ::setenv("GPUNODE_SIM_PROFILE", profile_path.c_str(), 1);
    auto host = HostFs::Open((dir_ / "root").string());
    EXPECT_OK(host) << host.status();
    node::ProbeOptions options;
    options.nvml_library = options.cuda_library = SimLibrary();
    options.init_cuda = false;
    options.query_topology = false;
    options.live_metrics = false;
    auto inv = node::ProbeNode(*host, options);
    EXPECT_OK(inv) << inv.status();
    if (inv.ok()) inv_ = *inv;
  }
  ~SimNode() { fs::remove_all(dir_); }
  const node::NodeInventory& inventory() const { return inv_; }

 private:
  fs::path dir_;
  node::NodeInventory inv_;
};

TEST(BuildLabelsSimTest, TheDgxH200IsEightHealthyHopperGpusOnA580Driver) {
  SimNode node("dgx-h200");
  auto data = compat::LoadBuiltin();
  ASSERT_OK(data) << data.status();
  LabelOptions o;
  o.compat = &*data;
  const LabelSet set = BuildLabels(node.inventory(), devices::PluginConfig{}, o);
  const Labels& l = set.labels;
  EXPECT_THAT(l, Contains(Pair("nvidia.com/gpu.product", "NVIDIA-H200")));
  EXPECT_THAT(l, Contains(Pair("nvidia.com/gpu.count", "8")));
  EXPECT_THAT(l, Contains(Pair("nvidia.com/gpu.memory", "143771")));
  EXPECT_THAT(l, Contains(Pair("nvidia.com/gpu.family", "hopper")));
  EXPECT_THAT(l, Contains(Pair("nvidia.com/gpu.mode", "compute")));
  EXPECT_THAT(l, Contains(Pair("nvidia.com/mig.capable", "true")));
  EXPECT_THAT(l, Contains(Pair("nvidia.com/cuda.driver.rev", "05")));
  EXPECT_THAT(l, Contains(Pair("nvidia.com/cuda.runtime-version.full", "13.0")));
  EXPECT_THAT(l, Contains(Pair("gpunode.io/driver.branch", "580")));
  EXPECT_THAT(l, Contains(Pair("gpunode.io/driver.cuda-13", "true")));
  EXPECT_THAT(l, Contains(Pair("gpunode.io/gpu.healthy-count", "8")));
  EXPECT_THAT(l, Contains(Pair("gpunode.io/gpu.unhealthy-count", "0")));
  EXPECT_THAT(l, Contains(Pair("gpunode.io/doctor.status", "ok")));
  EXPECT_THAT(l, Not(Contains(Key("gpunode.io/doctor.first-finding"))));
  EXPECT_THAT(set.warnings, IsEmpty());
}

TEST(BuildLabelsSimTest, TheA100MigNodeUnderMixedHasOneResourcePerProfile) {
  SimNode node("a100-mig");
  devices::PluginConfig c;
  c.mig_strategy = devices::MigStrategy::kMixed;
  const Labels l = BuildLabels(node.inventory(), c, NoTimestamp()).labels;
  EXPECT_THAT(l, Contains(Pair("nvidia.com/mig-3g.40gb.count", "1")));
  EXPECT_THAT(l, Contains(Pair("nvidia.com/mig-3g.40gb.memory", "40192")));
  EXPECT_THAT(
      l, Contains(Pair("nvidia.com/mig-3g.40gb.product", "NVIDIA-A100-SXM4-80GB-MIG-3g.40gb")));
  EXPECT_THAT(l, Contains(Pair("nvidia.com/mig-2g.20gb.count", "2")));
  EXPECT_THAT(l, Contains(Pair("nvidia.com/mig-2g.20gb.multiprocessors", "28")));
  EXPECT_THAT(l, Contains(Pair("nvidia.com/mig.strategy", "mixed")));
}

TEST(BuildLabelsSimTest, AGpuFallenOffTheBusShowsInTheHealthLabels) {
  SimNode node("broken-fallen-gpu");
  const Labels l = BuildLabels(node.inventory(), devices::PluginConfig{}, NoTimestamp()).labels;
  EXPECT_THAT(l, Contains(Pair("gpunode.io/gpu.healthy-count", "3")));
  EXPECT_THAT(l, Contains(Pair("gpunode.io/gpu.unhealthy-count", "1")));
  EXPECT_THAT(l, Contains(Pair("gpunode.io/doctor.status", "fail")));
  EXPECT_THAT(l, Contains(Pair("gpunode.io/doctor.first-finding", "driver.gpu-lost")));
  EXPECT_THAT(l, Contains(Pair("nvidia.com/gpu.count", "3")));
}

// Whatever the node and the strategy, every key and value is one Kubernetes accepts.
TEST(BuildLabelsSimTest, EveryKeyAndValueIsAValidKubernetesLabelOnEveryBuiltinProfile) {
  auto data = compat::LoadBuiltin();
  ASSERT_OK(data) << data.status();
  for (const std::string& name : sim::BuiltinProfileNames()) {
    SimNode node(name);
    for (devices::MigStrategy s : {devices::MigStrategy::kNone, devices::MigStrategy::kSingle, devices::MigStrategy::kMixed}) {
      for (const devices::PluginConfig& base : {devices::PluginConfig{}, TimeSliced(4)}) {
        devices::PluginConfig c = base;
        c.mig_strategy = s;
        LabelOptions o;
        o.compat = &*data;
        o.timestamp = 1767225600;
        o.machine_type = "Some Vendor's Server (rev. 2) ";
        for (const auto& [k, v] : BuildLabels(node.inventory(), c, o).labels) {
          EXPECT_TRUE(IsValidLabelKey(k)) << name << ": " << k;
          EXPECT_TRUE(IsValidLabelValue(v)) << name << ": " << k << "=" << v;
        }
      }
    }
  }
}

}  // namespace
}  // namespace gpunode::labels

namespace gpunode::labels {
namespace {

// A 256-byte type-0 configuration space of an NVIDIA function; `caps` are written from 0x40 as
// (id, next, payload...) entries chained in order.
std::string ConfigSpace(const std::vector<std::string>& caps) {
  std::string c(256, '\0');
  c[0] = '\xde';
  c[1] = '\x10';
  if (caps.empty()) return c;
  c[0x06] = 0x10;  // status: capability list
  c[0x34] = 0x40;
  size_t pos = 0x40;
  for (size_t i = 0; i < caps.size(); ++i) {
    const size_t next = i + 1 < caps.size() ? pos + caps[i].size() + 2 : 0;
    c[pos] = caps[i][0];
    c[pos + 1] = static_cast<char>(next);
    c.replace(pos + 2, caps[i].size() - 1, caps[i].substr(1));
    pos += caps[i].size() + 2;
  }
  return c;
}

// NVIDIA's vGPU vendor capability: id 0x09, length, "VF", then records from byte 5.
std::string VgpuCapability(const std::string& records) {
  std::string cap;
  cap += '\x09';
  const std::string rest = std::string("VF", 2) + records;
  cap += static_cast<char>(3 + rest.size());  // length from the id byte
  cap += rest;
  return cap;
}

std::string Padded(const std::string& s, size_t n) { return s + std::string(n - s.size(), '\0'); }

TEST(ParseVgpuConfigSpaceTest, ABareMetalGpuIsNotAVgpu) {
  auto none = ParseVgpuConfigSpace(ConfigSpace({}));
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->has_value());
  // A vendor-specific capability that is not signed "VF" (power management first).
  auto other = ParseVgpuConfigSpace(ConfigSpace({std::string("\x01\x03\x00", 3),
                                                 std::string("\x09\x08XYabc", 7)}));
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_FALSE(other->has_value());
}

TEST(ParseVgpuConfigSpaceTest, AVgpuNamesItsHostDriverFromRecordZero) {
  // Record 1 (3 bytes) is skipped; record 0 holds version and branch, 10 bytes each.
  const std::string records = std::string("\x01\x03\x07", 3) + std::string("\x00\x16", 2) +
                              Padded("460.16", 10) + Padded("r460_00", 10);
  auto host = ParseVgpuConfigSpace(ConfigSpace({VgpuCapability(records)}));
  ASSERT_TRUE(host.ok()) << host.status();
  ASSERT_TRUE(host->has_value());
  EXPECT_EQ((*host)->driver_version, "460.16");
  EXPECT_EQ((*host)->driver_branch, "r460_00");
}

TEST(ParseVgpuConfigSpaceTest, ShortReadsAndMissingRecordsAreErrors) {
  EXPECT_EQ(ParseVgpuConfigSpace(std::string(64, '\0')).status().code(),
            absl::StatusCode::kFailedPrecondition);  // what an unprivileged read of sysfs gives
  const std::string no_record = std::string("\x01\x03\x07", 3);
  EXPECT_EQ(ParseVgpuConfigSpace(ConfigSpace({VgpuCapability(no_record)})).status().code(),
            absl::StatusCode::kNotFound);
  const std::string stuck = std::string("\x01\x00\x07", 3);  // a record of length 0
  EXPECT_EQ(ParseVgpuConfigSpace(ConfigSpace({VgpuCapability(stuck)})).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(BuildLabelsTest, VgpuLabelsFollowWhatTheConfigSpacesSaid) {
  LabelOptions o;
  o.timestamp.reset();
  EXPECT_THAT(BuildLabels(H100s(1), devices::PluginConfig(), o).labels,
              Not(Contains(Key("nvidia.com/vgpu.present"))));
  o.vgpu = VgpuInfo();
  Labels l = BuildLabels(H100s(1), devices::PluginConfig(), o).labels;
  EXPECT_EQ(l.at("nvidia.com/vgpu.present"), "false");
  EXPECT_THAT(l, Not(Contains(Key("nvidia.com/vgpu.host-driver-version"))));
  o.vgpu->present = true;
  o.vgpu->host = VgpuHost{"460.16", "r460_00"};
  l = BuildLabels(H100s(1), devices::PluginConfig(), o).labels;
  EXPECT_EQ(l.at("nvidia.com/vgpu.present"), "true");
  EXPECT_EQ(l.at("nvidia.com/vgpu.host-driver-version"), "460.16");
  EXPECT_EQ(l.at("nvidia.com/vgpu.host-driver-branch"), "r460_00");
}

}  // namespace
}  // namespace gpunode::labels
