// src/mig: the mig-parted config parser, the pure planner, and the applier against the simulated
// NVML (libgpunode-simnvml.so through gpu::NvmlLibrary, like `gpunode --simulate`).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/support/profile.h"
#include "src/gpu/nvml.h"
#include "src/mig/apply.h"
#include "src/mig/config.h"
#include "src/mig/plan.h"
#include "test/testing/status_matchers.h"

namespace gpunode::mig {
namespace {

using ::testing::HasSubstr;

// Written after the GPU Operator's default-mig-parted-config (H200 and A100 entries).
constexpr char kConfig[] = R"(version: v1
mig-configs:
  all-disabled:
    - devices: all
      mig-enabled: false

  all-enabled:
    - devices: all
      mig-enabled: true
      mig-devices: {}

  all-1g.18gb:
    - devices: all
      mig-enabled: true
      mig-devices:
        "1g.18gb": 7

  all-balanced:
    - device-filter: ["0x233510DE", "0x233B10DE"]
      devices: all
      mig-enabled: true
      mig-devices:
        "1g.18gb": 2
        "2g.35gb": 1
        "3g.71gb": 1
    - device-filter: ["0x20B210DE", "0x20B510DE"]
      devices: all
      mig-enabled: true
      mig-devices:
        "1g.10gb": 2
        "2g.20gb": 1
        "3g.40gb": 1

  all-7g.141gb:
    - devices: all
      mig-enabled: true
      mig-devices:
        "7g.141gb": 1

  too-many:
    - devices: all
      mig-enabled: true
      mig-devices:
        "4g.71gb": 1
        "3g.71gb": 1
        "1g.18gb": 1

  half:
    - devices: [0, 1, 2, 3]
      mig-enabled: true
      mig-devices:
        "3g.71gb": 2
    - devices: [4, 5, 6, 7]
      mig-enabled: false

  split-ci:
    - devices: [0]
      mig-enabled: true
      mig-devices:
        "1c.3g.71gb": 3
)";

MigConfigFile Parsed() {
  auto f = ParseMigConfigFile(kConfig, "config.yaml");
  EXPECT_OK(f) << f.status();
  return f.ok() ? *f : MigConfigFile{};
}

// ---- parser ------------------------------------------------------------------------------------

TEST(MigConfigParse, ReadsMigPartedFormat) {
  MigConfigFile f = Parsed();
  EXPECT_THAT(f.Names(), ::testing::ElementsAre("all-disabled", "all-enabled", "all-1g.18gb",
                                                "all-balanced", "all-7g.141gb", "too-many", "half",
                                                "split-ci"));
  const MigConfig* b = f.Find("all-balanced");
  ASSERT_NE(b, nullptr);
  ASSERT_EQ(b->entries.size(), 2u);
  EXPECT_THAT(b->entries[0].filter_ids, ::testing::ElementsAre(0x233510DEu, 0x233B10DEu));
  EXPECT_TRUE(b->entries[0].all_devices);
  ASSERT_EQ(b->entries[0].mig_devices.size(), 3u);
  EXPECT_EQ(b->entries[0].mig_devices[1].first.ToString(), "2g.35gb");
  EXPECT_EQ(b->entries[0].mig_devices[1].second, 1u);
  EXPECT_TRUE(b->entries[0].Selects(3, 0x233510DE, "NVIDIA H200"));
  EXPECT_FALSE(b->entries[0].Selects(3, 0x20B210DE, "NVIDIA A100-SXM4-80GB"));
  EXPECT_TRUE(f.Find("all-enabled")->entries[0].mig_enabled);
  EXPECT_TRUE(f.Find("all-enabled")->entries[0].mig_devices.empty());
  EXPECT_THAT(f.Find("half")->entries[0].devices, ::testing::ElementsAre(0u, 1u, 2u, 3u));
}

TEST(MigConfigParse, ProfileNames) {
  auto p = ParseMigProfileName("1c.3g.71gb");
  ASSERT_OK(p);
  EXPECT_EQ(p->compute_slices, 1u);
  EXPECT_EQ(p->GpuInstanceName(), "3g.71gb");
  EXPECT_EQ(ParseMigProfileName("3c.3g.71gb")->ToString(), "3g.71gb");
  EXPECT_EQ(ParseMigProfileName("1g.18gb+me")->ToString(), "1g.18gb+me");
  for (const char* bad : {"", "1g", "g.18gb", "1g.18", "1g.18gb+xx", "4c.3g.40gb", "01g.5gb"}) {
    EXPECT_FALSE(ParseMigProfileName(bad).ok()) << bad;
  }
}

TEST(MigConfigParse, ReadsAConfigMap) {
  std::string cm = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: custom-mig-parted-config}\n"
                   "data:\n  config.yaml: |\n    version: v1\n    mig-configs:\n      a:\n"
                   "        - devices: all\n          mig-enabled: false\n";
  auto f = ParseMigConfigFile(cm, "cm.yaml");
  ASSERT_OK(f) << f.status();
  EXPECT_NE(f->Find("a"), nullptr);
}

struct BadCase {
  const char* text;
  const char* message;
};

TEST(MigConfigParse, RefusesBadFilesNamingLineAndKey) {
  const BadCase cases[] = {
      {"mig-configs: {a: [{devices: all, mig-enabled: false}]}\n", "config.yaml:1: version: expected v1 (mig-parted's format has version: v1), got nothing"},
      {"version: v2\nmig-configs: {a: [{devices: all, mig-enabled: false}]}\n", "config.yaml:1: version: expected v1, got \"v2\""},
      {"version: v1\n", "config.yaml:1: mig-configs: expected a map of config names to their entries, got nothing"},
      {"version: v1\nmig-configs: {}\n", "at least one config"},
      {"version: v1\nmig-configs:\n  a: []\n", "config.yaml:3: mig-configs.a: expected a list of at least one entry, got an empty list"},
      {"version: v1\nmig-configs:\n  a:\n    - devices: all\n", "config.yaml:4: mig-configs.a[0].mig-enabled: expected true or false, got nothing"},
      {"version: v1\nmig-configs:\n  a:\n    - mig-enabled: false\n", "mig-configs.a[0].devices: expected \"all\" or a list of GPU indexes, got nothing"},
      {"version: v1\nmig-configs:\n  a:\n    - devices: some\n      mig-enabled: false\n",
       "config.yaml:4: mig-configs.a[0].devices: expected \"all\" or a list"},
      {"version: v1\nmig-configs:\n  a:\n    - devices: all\n      mig-enabled: yes please\n",
       "config.yaml:5: mig-configs.a[0].mig-enabled: expected true or false, got \"yes please\""},
      {"version: v1\nmig-configs:\n  a:\n    - devices: all\n      mig-enabled: true\n",
       "mig-devices is missing"},
      {"version: v1\nmig-configs:\n  a:\n    - devices: all\n      mig-enabled: false\n      mig-devices: {\"1g.10gb\": 1}\n",
       "listed but mig-enabled is false"},
      {"version: v1\nmig-configs:\n  a:\n    - devices: all\n      mig-enabled: true\n      mig-devices:\n        \"1g.10gb\": -1\n",
       "config.yaml:7: mig-configs.a[0].mig-devices.\"1g.10gb\": expected a count 0-64"},
      {"version: v1\nmig-configs:\n  a:\n    - devices: all\n      mig-enabled: true\n      mig-devices:\n        \"1x.10gb\": 1\n",
       "not a MIG device name"},
      {"version: v1\nmig-configs:\n  a:\n    - devices: all\n      mig-enabled: false\n      colour: red\n",
       "config.yaml:6: mig-configs.a[0]: unknown key \"colour\" (known: device-filter, devices, mig-enabled, mig-devices)"},
      {"version: v1\nmig-configs:\n  a:\n    - devices: all\n      mig-enabled: false\n  a:\n    - devices: all\n      mig-enabled: true\n",
       "duplicate key"},
      {"version: v1\nmig-configs:\n  a:\n    - device-filter: 0xZZ\n      devices: all\n      mig-enabled: false\n",
       "config.yaml:4: mig-configs.a[0].device-filter: expected a PCI device id (0x + up to 8 hex digits), got \"0xZZ\""},
      {"version: v1\nmig-configs:\n  a:\n    - devices: [0, 0]\n      mig-enabled: false\n", "GPU 0 is listed twice"},
      {"version: v1\nmig-configs: [oops\n", "config.yaml"},
  };
  for (const BadCase& c : cases) {
    auto f = ParseMigConfigFile(c.text, "config.yaml");
    ASSERT_FALSE(f.ok()) << c.text;
    EXPECT_TRUE(absl::IsInvalidArgument(f.status())) << f.status();
    EXPECT_THAT(std::string(f.status().message()), HasSubstr(c.message)) << c.text;
  }
}

TEST(MigConfigParse, MissingFileIsNotFound) {
  auto f = LoadMigConfigFile("/nonexistent/mig.yaml");
  ASSERT_FALSE(f.ok());
  EXPECT_THAT(std::string(f.status().message()), HasSubstr("/nonexistent/mig.yaml"));
}

// ---- planner (pure) ------------------------------------------------------------------------------

GiProfile H200Profile(unsigned profile, unsigned id, const char* name, unsigned slices, unsigned size,
                      std::vector<unsigned> starts, unsigned count) {
  GiProfile p;
  p.profile = profile;
  p.id = id;
  p.name = name;
  p.slices = slices;
  p.placement_size = size;
  p.starts = std::move(starts);
  p.instance_count = count;
  return p;
}

GpuMigState H200(unsigned index, bool mig_on) {
  GpuMigState g;
  g.index = index;
  g.name = "NVIDIA H200";
  g.pci_id = 0x233510DE;
  g.mig_capable = true;
  g.mig_current = g.mig_pending = mig_on;
  g.profiles = {H200Profile(0, 19, "1g.18gb", 1, 1, {0, 1, 2, 3, 4, 5, 6}, 7),
                H200Profile(7, 20, "1g.18gb+me", 1, 1, {0, 1, 2, 3, 4, 5, 6}, 1),
                H200Profile(9, 15, "1g.35gb", 1, 2, {0, 2, 4, 6}, 4),
                H200Profile(1, 14, "2g.35gb", 2, 2, {0, 2, 4}, 3),
                H200Profile(2, 9, "3g.71gb", 3, 4, {0, 4}, 2),
                H200Profile(3, 5, "4g.71gb", 4, 4, {0}, 1),
                H200Profile(4, 0, "7g.141gb", 7, 8, {0}, 1)};
  return g;
}

std::map<StepKind, int> Kinds(const MigPlan& p) {
  std::map<StepKind, int> m;
  for (const Step& s : p.steps) ++m[s.kind];
  return m;
}

TEST(MigPlanner, EnablesAndCreatesWithPlacementsThatFit) {
  auto plan = PlanMigConfig({H200(0, false)}, Parsed(), "all-balanced");
  ASSERT_OK(plan) << plan.status();
  auto k = Kinds(*plan);
  EXPECT_EQ(k[StepKind::kEnableMig], 1);
  EXPECT_EQ(k[StepKind::kCreateGi], 4);
  EXPECT_EQ(k[StepKind::kCreateCi], 4);
  EXPECT_EQ(plan->steps[0].kind, StepKind::kEnableMig);
  // The 3g instance takes slices 0-3 or 4-7; no two GIs overlap.
  std::vector<int> used(8, 0);
  for (const Step& s : plan->steps) {
    if (s.kind != StepKind::kCreateGi) continue;
    ASSERT_TRUE(s.start.has_value());
    for (unsigned i = *s.start; i < *s.start + s.size; ++i) EXPECT_EQ(++used[i], 1) << s.Describe();
  }
}

TEST(MigPlanner, NothingToDoWhenTheLayoutIsThere) {
  GpuMigState g = H200(0, true);
  for (unsigned i = 0; i < 7; ++i) {
    GiState gi;
    gi.id = 7 + i;
    gi.profile = 0;
    gi.profile_id = 19;
    gi.name = "1g.18gb";
    gi.start = i;
    gi.size = 1;
    gi.cis.push_back(CiState{0, 0, 1, "1g.18gb"});
    g.gis.push_back(gi);
  }
  auto plan = PlanMigConfig({g}, Parsed(), "all-1g.18gb");
  ASSERT_OK(plan) << plan.status();
  EXPECT_TRUE(plan->empty());
  // To all-disabled: 7 CIs, 7 GIs, then MIG off, in that order.
  auto off = PlanMigConfig({g}, Parsed(), "all-disabled");
  ASSERT_OK(off);
  auto k = Kinds(*off);
  EXPECT_EQ(k[StepKind::kDestroyCi], 7);
  EXPECT_EQ(k[StepKind::kDestroyGi], 7);
  EXPECT_EQ(off->steps.back().kind, StepKind::kDisableMig);
  EXPECT_EQ(off->steps[0].kind, StepKind::kDestroyCi);
}

TEST(MigPlanner, KeepsInstancesThatAreWanted) {
  GpuMigState g = H200(0, true);
  GiState gi;
  gi.id = 2;
  gi.profile = 2;
  gi.profile_id = 9;
  gi.name = "3g.71gb";
  gi.start = 4;
  gi.size = 4;
  gi.cis.push_back(CiState{0, 2, 3, "3g.71gb"});
  g.gis.push_back(gi);
  auto plan = PlanMigConfig({g}, Parsed(), "all-balanced");
  ASSERT_OK(plan) << plan.status();
  auto k = Kinds(*plan);
  EXPECT_EQ(k[StepKind::kDestroyGi], 0);
  EXPECT_EQ(k[StepKind::kCreateGi], 3);
}

TEST(MigPlanner, RefusesWhatDoesNotFit) {
  auto plan = PlanMigConfig({H200(0, true)}, Parsed(), "too-many");
  ASSERT_FALSE(plan.ok());
  EXPECT_THAT(std::string(plan.status().message()),
              HasSubstr("config too-many does not fit GPU 0 (NVIDIA H200): it needs 8 of 7 compute slices"));
  // A device name the H200 does not offer.
  GpuMigState a = H200(0, true);
  a.pci_id = 0x20B210DE;
  auto wrong = PlanMigConfig({a}, Parsed(), "all-balanced");
  ASSERT_FALSE(wrong.ok());
  EXPECT_THAT(std::string(wrong.status().message()), HasSubstr("offers no MIG device 1g.10gb; it offers: 1g.18gb"));
  auto missing = PlanMigConfig({H200(0, true)}, Parsed(), "nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("it has: all-disabled, all-enabled"));
  auto short_node = PlanMigConfig({H200(0, true)}, Parsed(), "half");
  ASSERT_FALSE(short_node.ok());
  EXPECT_THAT(std::string(short_node.status().message()), HasSubstr("names GPU 1 but the node has 1 GPU(s)"));
}

TEST(MigPlanner, PacksComputeInstancesIntoOneGpuInstance) {
  auto plan = PlanMigConfig({H200(0, true)}, Parsed(), "split-ci");
  ASSERT_OK(plan) << plan.status();
  auto k = Kinds(*plan);
  EXPECT_EQ(k[StepKind::kCreateGi], 1);
  EXPECT_EQ(k[StepKind::kCreateCi], 3);
}

TEST(MigPlanner, RefusesAGpuWithProcesses) {
  GpuMigState g = H200(0, false);
  g.process_pids = {4242};
  auto plan = PlanMigConfig({g}, Parsed(), "all-1g.18gb");
  ASSERT_FALSE(plan.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(plan.status()));
  EXPECT_THAT(std::string(plan.status().message()), HasSubstr("compute processes are running on it (pid 4242)"));
  // Nothing to change: no refusal.
  EXPECT_OK(PlanMigConfig({g}, Parsed(), "all-disabled"));
}

// ---- applier on the simulated NVML --------------------------------------------------------------

std::string SimLibrary() {
  const char* env = std::getenv("GPUNODE_SIM_LIBRARY");
  return env != nullptr && *env ? env : std::string(GPUNODE_BIN_DIR) + "/libgpunode-simnvml.so";
}

class MigApplyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = ::testing::TempDir() + "/migapply-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".yaml";
    setenv("GPUNODE_SIM_RELOAD_MS", "0", 1);
  }
  void TearDown() override { std::remove(path_.c_str()); }
  // A private copy of a built-in profile (each test starts from the profile's own layout).
  void UseProfile(const char* name, const std::string& extra_gpu_yaml = "") {
    auto src = sim::ResolveProfile(name);
    ASSERT_OK(src);
    std::string text = src->text;
    if (!extra_gpu_yaml.empty()) {
      // Add to the first GPU line "  - {bus_id: ..." the extra keys.
      size_t pos = text.find("\ngpus:\n  - {bus_id:");
      ASSERT_NE(pos, std::string::npos);
      text.insert(pos + 12, extra_gpu_yaml + ", ");
    }
    std::ofstream(path_) << text;
    setenv("GPUNODE_SIM_PROFILE", path_.c_str(), 1);
  }
  std::unique_ptr<gpu::NvmlLibrary> Open() {
    auto lib = gpu::NvmlLibrary::Open(SimLibrary());
    EXPECT_OK(lib) << lib.status();
    return lib.ok() ? *std::move(lib) : nullptr;
  }
  // MIG devices the existing enumeration (nvmlDeviceGetMigDeviceHandleByIndex) shows, node-wide.
  static unsigned EnumeratedMigDevices(const gpu::NvmlLibrary& nvml) {
    unsigned total = 0, n = 0;
    EXPECT_EQ(nvml.nvmlDeviceGetCount_v2(&n), NVML_SUCCESS);
    for (unsigned i = 0; i < n; ++i) {
      nvmlDevice_t d = nullptr;
      nvml.nvmlDeviceGetHandleByIndex_v2(i, &d);
      unsigned max = 0;
      if (nvml.nvmlDeviceGetMaxMigDeviceCount(d, &max) != NVML_SUCCESS) continue;
      for (unsigned k = 0; k < max; ++k) {
        nvmlDevice_t m = nullptr;
        if (nvml.nvmlDeviceGetMigDeviceHandleByIndex(d, k, &m) == NVML_SUCCESS) ++total;
      }
    }
    return total;
  }
  std::string path_;
};

TEST_F(MigApplyTest, DgxH200ThroughLayoutsAndBackIsIdempotent) {
  UseProfile("dgx-h200");
  auto nvml = Open();
  ASSERT_NE(nvml, nullptr);
  MigConfigFile f = Parsed();
  ASSERT_TRUE(IsSimulatedNvml(*nvml));
  EXPECT_EQ(EnumeratedMigDevices(*nvml), 0u);

  auto r = ApplyMigConfig(*nvml, f, "all-1g.18gb", {});
  ASSERT_OK(r) << r.status();
  ASSERT_OK(r->status) << r->status;
  EXPECT_TRUE(r->changed);
  EXPECT_EQ(r->plan.steps.size(), 8u * (1 + 7 + 7));
  EXPECT_EQ(EnumeratedMigDevices(*nvml), 56u);
  ASSERT_EQ(r->after.size(), 8u);
  EXPECT_THAT(DeviceCounts(r->after[5]), ::testing::ElementsAre(std::make_pair(std::string("1g.18gb"), 7u)));

  auto again = ApplyMigConfig(*nvml, f, "all-1g.18gb", {});
  ASSERT_OK(again);
  EXPECT_TRUE(again->plan.empty());
  EXPECT_FALSE(again->changed);
  EXPECT_TRUE(again->done.empty());

  auto balanced = ApplyMigConfig(*nvml, f, "all-balanced", {});
  ASSERT_OK(balanced) << balanced.status();
  ASSERT_OK(balanced->status) << balanced->status;
  EXPECT_EQ(EnumeratedMigDevices(*nvml), 8u * 4);
  EXPECT_THAT(DeviceCounts(balanced->after[0]),
              ::testing::ElementsAre(std::make_pair(std::string("1g.18gb"), 2u),
                                     std::make_pair(std::string("2g.35gb"), 1u),
                                     std::make_pair(std::string("3g.71gb"), 1u)));
  // The MIG devices carry the real names and sizes.
  nvmlDevice_t gpu0 = nullptr, m = nullptr;
  nvml->nvmlDeviceGetHandleByIndex_v2(0, &gpu0);
  std::map<std::string, unsigned long long> sizes;
  for (unsigned k = 0; k < 7; ++k) {
    if (nvml->nvmlDeviceGetMigDeviceHandleByIndex(gpu0, k, &m) != NVML_SUCCESS) continue;
    char name[96] = {};
    nvmlMemory_t mem{};
    nvml->nvmlDeviceGetName(m, name, sizeof name);
    nvml->nvmlDeviceGetMemoryInfo(m, &mem);
    sizes[name] = mem.total >> 20;
  }
  EXPECT_EQ(sizes["NVIDIA H200 MIG 1g.18gb"], 16384u);
  EXPECT_EQ(sizes["NVIDIA H200 MIG 3g.71gb"], 68096u);

  auto off = ApplyMigConfig(*nvml, f, "all-disabled", {});
  ASSERT_OK(off);
  ASSERT_OK(off->status) << off->status;
  EXPECT_EQ(EnumeratedMigDevices(*nvml), 0u);
  for (const auto& g : off->after) EXPECT_FALSE(g.mig_current);
  auto off_again = ApplyMigConfig(*nvml, f, "all-disabled", {});
  ASSERT_OK(off_again);
  EXPECT_TRUE(off_again->plan.empty());
}

TEST_F(MigApplyTest, DryRunChangesNothing) {
  UseProfile("dgx-h200");
  auto nvml = Open();
  ASSERT_NE(nvml, nullptr);
  ApplyOptions o;
  o.dry_run = true;
  auto r = ApplyMigConfig(*nvml, Parsed(), "all-balanced", o);
  ASSERT_OK(r) << r.status();
  EXPECT_EQ(r->plan.steps.size(), 8u * 9);
  EXPECT_TRUE(r->done.empty());
  EXPECT_EQ(EnumeratedMigDevices(*nvml), 0u);
}

TEST_F(MigApplyTest, ALayoutThatDoesNotFitChangesNothing) {
  UseProfile("dgx-h200");
  auto nvml = Open();
  ASSERT_NE(nvml, nullptr);
  auto r = ApplyMigConfig(*nvml, Parsed(), "too-many", {});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("does not fit GPU 0"));
  auto state = ReadMigState(*nvml);
  ASSERT_OK(state);
  EXPECT_FALSE((*state)[0].mig_current);
}

TEST_F(MigApplyTest, RefusesAGpuRunningAProcess) {
  UseProfile("dgx-h200", "processes: [{pid: 777, used_mib: 1024}]");
  auto nvml = Open();
  ASSERT_NE(nvml, nullptr);
  auto r = ApplyMigConfig(*nvml, Parsed(), "all-1g.18gb", {});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(r.status()));
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("pid 777"));
  EXPECT_EQ(EnumeratedMigDevices(*nvml), 0u);
}

TEST_F(MigApplyTest, A100ProfileSeedsItsInstancesAndRebalances) {
  UseProfile("a100-mig");
  auto nvml = Open();
  ASSERT_NE(nvml, nullptr);
  auto state = ReadMigState(*nvml);
  ASSERT_OK(state) << state.status();
  ASSERT_EQ((*state)[0].gis.size(), 3u);
  EXPECT_EQ((*state)[0].gis[0].name, "3g.40gb");
  EXPECT_EQ((*state)[0].gis[0].start, 4u);
  // A process runs in the 3g.40gb instance: rebalancing would destroy it, so it is refused.
  auto r = ApplyMigConfig(*nvml, Parsed(), "all-balanced", {});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("pid 48213"));
}

TEST_F(MigApplyTest, OtherProcessesSeeTheLayoutThroughTheProfileFile) {
  UseProfile("dgx-h200");
  {
    auto nvml = Open();
    ASSERT_NE(nvml, nullptr);
    auto r = ApplyMigConfig(*nvml, Parsed(), "all-7g.141gb", {});
    ASSERT_TRUE(r.ok() && r->status.ok());
  }
  std::ifstream in(path_);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_THAT(text.str(), HasSubstr("# gpunode-simnvml-mig-state: "));
  // The file is still a valid profile for every reader.
  EXPECT_OK(sim::LoadProfileFile(path_));
  // A fresh NVML session (another process reads the same file) sees the instances.
  auto nvml = Open();
  ASSERT_NE(nvml, nullptr);
  EXPECT_EQ(EnumeratedMigDevices(*nvml), 8u);
}

}  // namespace
}  // namespace gpunode::mig
