// The DRA device model on simulated nodes (the real probes and the simulated NVML): NVIDIA's
// device names, attributes and capacities (NVIDIA's DRA driver v0.4.1, cmd/gpu-kubelet-plugin
// deviceinfo.go and mig.go) for the dgx-h200 and the a100-mig profiles, and on hand-made
// inventories for what the profiles do not show (minor numbers that differ from NVML's index, a
// GPU in MIG mode beside one that is not, what cannot be named).
#include "src/dra/device_model.h"

#include <algorithm>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/sim_inventory.h"

namespace gpunode::dra {
namespace {

using ::gpunode::testing::ProbeSimulated;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;
using nlohmann::json;

std::vector<std::string> Names(const std::vector<DraDevice>& devices) {
  std::vector<std::string> out;
  for (const DraDevice& d : devices) out.push_back(d.name);
  return out;
}

std::vector<std::string> Keys(const std::map<std::string, json>& m) {
  std::vector<std::string> out;
  for (const auto& [k, v] : m) out.push_back(k);
  return out;
}

TEST(DraDevicesOfTest, TheDgxH200IsEightGpusNamedByMinorWithNvidiasAttributes) {
  const node::NodeInventory& inv = ProbeSimulated("dgx-h200");
  ASSERT_THAT(inv.driver.gpus, SizeIs(8));
  std::vector<std::string> problems;
  const std::vector<DraDevice> devices = DraDevicesOf(inv, &problems);
  EXPECT_THAT(problems, IsEmpty());
  EXPECT_THAT(Names(devices),
              ElementsAre("gpu-0", "gpu-1", "gpu-2", "gpu-3", "gpu-4", "gpu-5", "gpu-6", "gpu-7"));

  const DraDevice& d = devices[0];
  EXPECT_EQ(d.type, "gpu");
  EXPECT_EQ(d.uuid, "GPU-0b566429-adc1-458a-9244-af5a49e0505e");
  EXPECT_EQ(d.pci_bus_id, "0000:18:00.0");
  EXPECT_TRUE(d.parent_uuid.empty());
  EXPECT_TRUE(d.healthy);
  EXPECT_THAT(d.taints, IsEmpty());
  // Exactly NVIDIA's attributes (no index or minor: v25.8.0 dropped them), addressingMode absent
  // because the simulated NVML reports none.
  EXPECT_THAT(Keys(d.attributes),
              ElementsAre("architecture", "brand", "cudaComputeCapability", "cudaDriverVersion", "driverVersion",
                          "productName", "resource.kubernetes.io/pciBusID", "resource.kubernetes.io/pcieRoot", "type",
                          "uuid"));
  EXPECT_EQ(d.attributes.at("type"), json({{"string", "gpu"}}));
  EXPECT_EQ(d.attributes.at("uuid"), json({{"string", "GPU-0b566429-adc1-458a-9244-af5a49e0505e"}}));
  EXPECT_EQ(d.attributes.at("productName"), json({{"string", "NVIDIA H200"}}));
  EXPECT_EQ(d.attributes.at("brand"), json({{"string", "Nvidia"}}));
  EXPECT_EQ(d.attributes.at("architecture"), json({{"string", "Hopper"}}));
  EXPECT_EQ(d.attributes.at("cudaComputeCapability"), json({{"version", "9.0.0"}}));
  EXPECT_EQ(d.attributes.at("driverVersion"), json({{"version", "580.95.5"}}));  // "580.95.05", semver
  EXPECT_EQ(d.attributes.at("cudaDriverVersion"), json({{"version", "13.0.0"}}));
  EXPECT_EQ(d.attributes.at("resource.kubernetes.io/pciBusID"), json({{"string", "0000:18:00.0"}}));
  EXPECT_EQ(d.attributes.at("resource.kubernetes.io/pcieRoot"), json({{"string", "pci0000:18"}}));
  EXPECT_EQ(d.capacity, (std::map<std::string, std::string>{{"memory", "143771Mi"}}));

  for (size_t i = 0; i < devices.size(); ++i) {
    EXPECT_EQ(devices[i].minor, i);
    EXPECT_EQ(devices[i].uuid, inv.driver.gpus[i].uuid);
    EXPECT_EQ(devices[i].attributes.at("uuid").at("string"), inv.driver.gpus[i].uuid);
    EXPECT_EQ(devices[i].capacity.at("memory"), "143771Mi");
  }
}

TEST(DraDevicesOfTest, TheA100InMigModeIsOnlyItsMigDevicesNamedByProfileIdAndPlacement) {
  const node::NodeInventory& inv = ProbeSimulated("a100-mig");
  ASSERT_THAT(inv.driver.gpus, SizeIs(1));
  const gpu::GpuInfo& g = inv.driver.gpus[0];
  ASSERT_THAT(g.mig_devices, SizeIs(3));
  for (const gpu::MigDevice& m : g.mig_devices) {
    ASSERT_TRUE(m.gi_profile_id && m.placement_start && m.placement_size) << m.uuid;
  }
  std::vector<std::string> problems;
  const std::vector<DraDevice> devices = DraDevicesOf(inv, &problems);
  EXPECT_THAT(problems, IsEmpty());
  ASSERT_THAT(devices, SizeIs(3));
  // The A100's GI profile ids: 3g.40gb is 9, 2g.20gb is 14 (nvidia-smi mig -lgip); ordered by
  // placement.
  for (const DraDevice& d : devices) {
    const gpu::MigDevice* m = nullptr;
    for (const gpu::MigDevice& c : g.mig_devices) {
      if (c.uuid == d.uuid) m = &c;
    }
    ASSERT_NE(m, nullptr) << d.name;
    const std::string profile = m->slices == 3u ? "3g40gb" : "2g20gb";
    EXPECT_EQ(d.name, "gpu-0-mig-" + profile + "-" + std::to_string(*m->gi_profile_id) + "-" +
                          std::to_string(*m->placement_start));
    EXPECT_EQ(*m->gi_profile_id, m->slices == 3u ? 9u : 14u);
    EXPECT_EQ(d.type, "mig");
    EXPECT_EQ(d.parent_uuid, g.uuid);
    EXPECT_EQ(d.attributes.at("type"), json({{"string", "mig"}}));
    EXPECT_EQ(d.attributes.at("parentUUID"), json({{"string", g.uuid}}));
    EXPECT_EQ(d.attributes.at("profile"), json({{"string", m->slices == 3u ? "3g.40gb" : "2g.20gb"}}));
    EXPECT_EQ(d.attributes.at("uuid"), json({{"string", m->uuid}}));
    EXPECT_EQ(d.attributes.at("productName"), json({{"string", "NVIDIA A100-SXM4-80GB"}}));
    EXPECT_EQ(d.attributes.at("architecture"), json({{"string", "Ampere"}}));
    EXPECT_EQ(d.attributes.at("driverVersion"), json({{"version", "550.127.5"}}));
    EXPECT_EQ(d.attributes.at("cudaDriverVersion"), json({{"version", "12.4.0"}}));
    EXPECT_EQ(d.attributes.at("resource.kubernetes.io/pciBusID"), json({{"string", "0000:07:00.0"}}));
    EXPECT_EQ(d.capacity.at("memory"), m->slices == 3u ? "40192Mi" : "19968Mi");
    EXPECT_EQ(d.capacity.at("multiprocessors"), m->slices == 3u ? "42" : "28");
    for (const char* engine : {"copyEngines", "decoders", "encoders", "jpegEngines", "ofaEngines"}) {
      EXPECT_TRUE(d.capacity.count(engine)) << d.name << " " << engine;
    }
    size_t slices = 0;
    for (const auto& [name, value] : d.capacity) {
      if (name.rfind("memorySlice", 0) == 0) {
        ++slices;
        EXPECT_EQ(value, "1");
      }
    }
    EXPECT_EQ(slices, *m->placement_size) << d.name;
    EXPECT_TRUE(d.capacity.count("memorySlice" + std::to_string(*m->placement_start))) << d.name;
  }
  EXPECT_TRUE(std::is_sorted(devices.begin(), devices.end(), [&](const DraDevice& a, const DraDevice& b) {
    return std::stoi(a.name.substr(a.name.rfind('-') + 1)) < std::stoi(b.name.substr(b.name.rfind('-') + 1));
  }));
  // No device of the parent GPU itself.
  EXPECT_EQ(std::count_if(devices.begin(), devices.end(), [](const DraDevice& d) { return d.type == "gpu"; }), 0);
}

// A hand-made inventory: two GPUs whose minor numbers are not their NVML indexes, the second in
// MIG mode with one 1g.10gb device (GI profile id 19, at memory slice 6).
node::NodeInventory TwoGpus() {
  node::NodeInventory inv;
  inv.driver.driver_version = *Version::Parse("570.86.15");
  inv.driver.cuda_version = *Version::Parse("12.8");
  gpu::GpuInfo a;
  a.index = 0;
  a.minor_number = 3;
  a.uuid = "GPU-aaaa";
  a.name = "NVIDIA A100-PCIE-40GB";
  a.pci_bus_id = "0000:65:00.0";
  a.memory_total_bytes = 40960ull << 20;
  a.cc_major = 8;
  a.cc_minor = 0;
  a.architecture = 7;
  a.brand = 14;
  a.addressing_mode = 1;  // HMM
  gpu::GpuInfo b = a;
  b.index = 1;
  b.minor_number = 1;
  b.uuid = "GPU-bbbb";
  b.pci_bus_id = "0000:ca:00.0";
  b.mig_enabled = true;
  gpu::MigDevice m;
  m.uuid = "MIG-cccc";
  m.gi_profile_id = 19;
  m.placement_start = 6;
  m.placement_size = 1;
  m.slices = 1;
  m.compute_slices = 1;
  m.memory_total_bytes = 9856ull << 20;
  m.multiprocessors = 14;
  m.copy_engines = 1;
  m.decoders = 0;
  m.encoders = 0;
  m.jpegs = 0;
  m.ofas = 0;
  b.mig_devices.push_back(m);
  inv.driver.gpus = {a, b};
  node::PciDevice pci;
  pci.bus_id = "0000:65:00.0";
  pci.pcie_root = "pci0000:64";
  inv.hardware.gpus.push_back(pci);
  return inv;
}

TEST(DraDevicesOfTest, NamesUseTheMinorNumberNotTheNvmlIndexAndSortByIt) {
  const std::vector<DraDevice> devices = DraDevicesOf(TwoGpus());
  ASSERT_THAT(Names(devices), ElementsAre("gpu-1-mig-1g10gb-19-6", "gpu-3"));
  const DraDevice& mig = devices[0];
  EXPECT_EQ(mig.minor, 1u);
  EXPECT_EQ(mig.index, 1u);
  EXPECT_EQ(mig.profile, "1g.10gb");
  EXPECT_EQ(mig.capacity, (std::map<std::string, std::string>{{"copyEngines", "1"},
                                                              {"decoders", "0"},
                                                              {"encoders", "0"},
                                                              {"jpegEngines", "0"},
                                                              {"memory", "9856Mi"},
                                                              {"memorySlice6", "1"},
                                                              {"multiprocessors", "14"},
                                                              {"ofaEngines", "0"}}));
  EXPECT_FALSE(mig.attributes.count("resource.kubernetes.io/pcieRoot"));  // its parent's is unknown
  const DraDevice& full = devices[1];
  EXPECT_EQ(full.minor, 3u);
  EXPECT_EQ(full.index, 0u);
  EXPECT_EQ(full.attributes.at("addressingMode"), json({{"string", "HMM"}}));
  EXPECT_EQ(full.attributes.at("brand"), json({{"string", "Nvidia"}}));
  EXPECT_EQ(full.attributes.at("architecture"), json({{"string", "Ampere"}}));
  EXPECT_EQ(full.attributes.at("cudaDriverVersion"), json({{"version", "12.8.0"}}));
  EXPECT_EQ(full.attributes.at("resource.kubernetes.io/pcieRoot"), json({{"string", "pci0000:64"}}));
  EXPECT_EQ(full.capacity.at("memory"), "40Gi");
}

TEST(DraDevicesOfTest, WhatCannotBeNamedIsLeftOutAndSaidSo) {
  node::NodeInventory inv = TwoGpus();
  inv.driver.gpus[0].minor_number.reset();
  inv.driver.gpus[1].mig_devices[0].placement_start.reset();
  std::vector<std::string> problems;
  EXPECT_THAT(DraDevicesOf(inv, &problems), IsEmpty());
  ASSERT_THAT(problems, SizeIs(2));
  EXPECT_THAT(problems[0], HasSubstr("no minor number"));
  EXPECT_THAT(problems[1], HasSubstr("MIG-cccc of gpu-1"));
  EXPECT_THAT(problems[1], HasSubstr("placement"));
}

TEST(DraDevicesOfTest, AttributesNvmlDidNotReportAreLeftOut) {
  node::NodeInventory inv = TwoGpus();
  gpu::GpuInfo& g = inv.driver.gpus[0];
  g.brand.reset();
  g.architecture.reset();
  g.addressing_mode.reset();
  g.cc_major.reset();
  g.memory_total_bytes.reset();
  g.pci_bus_id = "18:00.0";  // not the extended BDF form the attribute needs
  inv.driver.cuda_version.reset();
  const std::vector<DraDevice> devices = DraDevicesOf(inv);
  ASSERT_THAT(devices, SizeIs(2));
  EXPECT_THAT(Keys(devices[1].attributes), ElementsAre("driverVersion", "productName", "type", "uuid"));
  EXPECT_THAT(devices[1].capacity, IsEmpty());
}

TEST(DraDevicesOfTest, QuantitiesAndVersionsAreWrittenAsKubernetesAndNvidiaWriteThem) {
  EXPECT_EQ(CanonicalBinaryQuantity(0), "0");
  EXPECT_EQ(CanonicalBinaryQuantity(132), "132");
  EXPECT_EQ(CanonicalBinaryQuantity(1023), "1023");
  EXPECT_EQ(CanonicalBinaryQuantity(1024), "1Ki");
  EXPECT_EQ(CanonicalBinaryQuantity(1536), "1536");
  EXPECT_EQ(CanonicalBinaryQuantity(143771ull << 20), "143771Mi");
  EXPECT_EQ(CanonicalBinaryQuantity(80ull << 30), "80Gi");
  EXPECT_EQ(CanonicalBinaryQuantity(1ull << 60), "1Ei");
  EXPECT_EQ(CanonicalBinaryQuantity(1ull << 62), "4Ei");
  EXPECT_EQ(SemanticVersion(*Version::Parse("580.95.05")), "580.95.5");
  EXPECT_EQ(SemanticVersion(*Version::Parse("9.0")), "9.0.0");
  EXPECT_EQ(SemanticVersion(*Version::Parse("570")), "570.0.0");
  EXPECT_EQ(SemanticVersion(Version()), "");
}

}  // namespace
}  // namespace gpunode::dra
