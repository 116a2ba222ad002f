// ReadFastExtras / ReadGpmFields through the real NVML loader against the simulated libnvidia-ml,
// with profiles edited live to move counters, and a hand-driven clock.
#include "src/exporter/nvml_extras.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <type_traits>

#include "gtest/gtest.h"
#include "sim/support/profile.h"
#include "test/testing/sim_library.h"
#include "test/testing/status_matchers.h"

namespace gpunode::exporter {
namespace {

namespace fs = std::filesystem;

static_assert(!std::is_copy_constructible_v<GpuExtrasState>);
static_assert(!std::is_copy_assignable_v<GpuExtrasState>);
static_assert(std::is_nothrow_move_constructible_v<GpuExtrasState>);
static_assert(std::is_nothrow_move_assignable_v<GpuExtrasState>);
static_assert(std::is_default_constructible_v<GpuExtrasState>);

using ::gpunode::testing::SimLibrary;

// A simulated node whose profile file the test can rewrite while NVML is open.
class LiveNode {
 public:
  explicit LiveNode(const std::string& text)
      : dir_(fs::temp_directory_path() /
             ("gpunode-extras-" + std::to_string(::getpid()) + "-" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name())) {
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    ::setenv("GPUNODE_SIM_RELOAD_MS", "0", 1);
    Write(text);
    ::setenv("GPUNODE_SIM_PROFILE", (dir_ / "profile.yaml").c_str(), 1);
    auto nvml = gpu::NvmlLibrary::Open(SimLibrary());
    EXPECT_OK(nvml) << nvml.status();
    if (nvml.ok()) nvml_ = *std::move(nvml);
  }
  static LiveNode Builtin(const std::string& name) {
    auto source = sim::ResolveProfile(name);
    EXPECT_OK(source) << source.status();
    return LiveNode(source.ok() ? source->text : "");
  }
  ~LiveNode() {
    nvml_.reset();
    fs::remove_all(dir_);
  }
  LiveNode(const LiveNode&) = delete;
  LiveNode& operator=(const LiveNode&) = delete;

  // Replaces the profile atomically (the simulator re-reads it on the next call).
  void Write(const std::string& text) {
    text_ = text;
    const fs::path tmp = dir_ / "profile.yaml.tmp";
    std::ofstream(tmp) << text;
    fs::rename(tmp, dir_ / "profile.yaml");
  }
  // Writes the profile with `from` replaced by `to` (which must occur).
  void Edit(const std::string& from, const std::string& to) {
    std::string t = text_;
    const size_t at = t.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    t.replace(at, from.size(), to);
    Write(t);
  }

  const gpu::NvmlLibrary& nvml() const { return *nvml_; }
  bool ok() const { return nvml_ != nullptr; }
  nvmlDevice_t Device(unsigned i) const {
    auto d = nvml_->DeviceHandle(i);
    EXPECT_OK(d) << d.status();
    return d.ok() ? *d : nullptr;
  }

 private:
  fs::path dir_;
  std::string text_;
  std::unique_ptr<gpu::NvmlLibrary> nvml_;
};

std::array<bool, kFieldCount> All() {
  std::array<bool, kFieldCount> w;
  w.fill(true);
  return w;
}

std::array<bool, kFieldCount> Only(std::initializer_list<FieldId> ids) {
  std::array<bool, kFieldCount> w{};
  for (FieldId id : ids) w[static_cast<size_t>(id)] = true;
  return w;
}

// A clock the test moves by hand.
struct FakeClock {
  double now = 1000.0;
  std::function<double()> fn() {
    return [this] { return now; };
  }
};

// One H100-class GPU with the given extra keys (flow-map entries starting with ", ").
std::string OneGpu(const std::string& extra) {
  return R"(apiVersion: gpunode/v1
kind: NodeProfile
name: extras
driver: {version: "580.95.05", cuda_version: "13.0"}
gpus:
  - {name: NVIDIA H200, device_id: 0x2335, memory: {total_mib: 143771}, pcie: {gen: 5, width: 16}, compute_capability: "9.0", bus_id: "0000:18:00.0")" +
         extra + "}\n";
}

const char kBusyGpm[] =
    ", gpm: {supported: true, graphics_util: 35.0, sm_util: 50.0, sm_occupancy: 25.0, "
    "tensor_util: 12.5, dram_bw_util: 40.0, fp64_util: 1.0, fp32_util: 20.0, fp16_util: 3.0, "
    "pcie_tx_mib_s: 100.0, pcie_rx_mib_s: 0.5}";

// ---- fast fields --------------------------------------------------------------------------------

TEST(NvmlExtrasTest, FastFieldsOnTheDgxH200AndTheNvLinkRateFromTheSecondPass) {
  LiveNode node = LiveNode::Builtin("dgx-h200");
  ASSERT_TRUE(node.ok());
  FakeClock clock;
  GpuExtrasState state(clock.fn());
  GpuSample first;
  ReadFastExtras(node.nvml(), node.Device(0), All(), state, first);
  EXPECT_TRUE(first.errors.empty());
  EXPECT_EQ(first.value(FieldId::kMemoryTemp), 36);
  EXPECT_EQ(first.value(FieldId::kPcieReplayCounter), 0);
  EXPECT_EQ(first.value(FieldId::kEncUtil), 0);
  EXPECT_EQ(first.value(FieldId::kDecUtil), 0);
  EXPECT_EQ(first.value(FieldId::kNvlinkBandwidthTotal), std::nullopt);  // no previous pass

  // 2,000,000 KiB more TX and 1,000,000 more RX in 2 s: (3e6 / 2) / 1000 = 1500.
  node.Edit("nvlink_throughput_kib: {tx: 52428800, rx: 52428800}",
            "nvlink_throughput_kib: {tx: 54428800, rx: 53428800}");
  clock.now += 2.0;
  GpuSample second;
  ReadFastExtras(node.nvml(), node.Device(0), All(), state, second);
  EXPECT_TRUE(second.errors.empty());
  EXPECT_EQ(second.value(FieldId::kNvlinkBandwidthTotal), 1500.0);

  // No traffic: 0, not absent.
  clock.now += 1.0;
  GpuSample third;
  ReadFastExtras(node.nvml(), node.Device(0), All(), state, third);
  EXPECT_EQ(third.value(FieldId::kNvlinkBandwidthTotal), 0.0);
}

TEST(NvmlExtrasTest, ACounterThatGoesBackwardsStartsANewBaseline) {
  LiveNode node(OneGpu(", nvlink_throughput_kib: {tx: 5000, rx: 5000}"));
  ASSERT_TRUE(node.ok());
  FakeClock clock;
  GpuExtrasState state(clock.fn());
  const auto wanted = Only({FieldId::kNvlinkBandwidthTotal});
  GpuSample a;
  ReadFastExtras(node.nvml(), node.Device(0), wanted, state, a);
  node.Edit("{tx: 5000, rx: 5000}", "{tx: 10, rx: 10}");  // driver reloaded
  clock.now += 1;
  GpuSample b;
  ReadFastExtras(node.nvml(), node.Device(0), wanted, state, b);
  EXPECT_EQ(b.value(FieldId::kNvlinkBandwidthTotal), std::nullopt);
  node.Edit("{tx: 10, rx: 10}", "{tx: 1010, rx: 1010}");
  clock.now += 1;
  GpuSample c;
  ReadFastExtras(node.nvml(), node.Device(0), wanted, state, c);
  EXPECT_EQ(c.value(FieldId::kNvlinkBandwidthTotal), 2.0);  // 2000 KiB / 1 s / 1000
}

TEST(NvmlExtrasTest, OnlyTheWantedFieldsAreRead) {
  LiveNode node = LiveNode::Builtin("dgx-h200");
  ASSERT_TRUE(node.ok());
  GpuExtrasState state;
  GpuSample s;
  ReadFastExtras(node.nvml(), node.Device(0), Only({FieldId::kMemoryTemp}), state, s);
  EXPECT_EQ(s.value(FieldId::kMemoryTemp), 36);
  for (FieldId id : {FieldId::kPcieReplayCounter, FieldId::kEncUtil, FieldId::kDecUtil,
                     FieldId::kNvlinkBandwidthTotal}) {
    EXPECT_EQ(s.value(id), std::nullopt) << Field(id).name;
  }
  GpuSample none;
  ReadFastExtras(node.nvml(), node.Device(0), Only({}), state, none);
  for (const auto& v : none.values) EXPECT_EQ(v, std::nullopt);
}

TEST(NvmlExtrasTest, TheRealH200GivesNoNvLinkBandwidthAndNoError) {
  LiveNode node = LiveNode::Builtin("h200-real");
  ASSERT_TRUE(node.ok());
  FakeClock clock;
  GpuExtrasState state(clock.fn());
  for (int pass = 0; pass < 2; ++pass) {
    GpuSample s;
    ReadFastExtras(node.nvml(), node.Device(0), All(), state, s);
    EXPECT_TRUE(s.errors.empty());
    EXPECT_EQ(s.value(FieldId::kMemoryTemp), 41);
    EXPECT_EQ(s.value(FieldId::kPcieReplayCounter), 2);
    EXPECT_EQ(s.value(FieldId::kNvlinkBandwidthTotal), std::nullopt);
    clock.now += 1;
  }
}

TEST(NvmlExtrasTest, UnsupportedFieldsAreAbsentNotZeroAndNotErrors) {
  LiveNode node = LiveNode::Builtin("t4-cloud");
  ASSERT_TRUE(node.ok());
  GpuExtrasState state;
  GpuSample s;
  ReadFastExtras(node.nvml(), node.Device(0), All(), state, s);
  EXPECT_TRUE(s.errors.empty());
  EXPECT_EQ(s.value(FieldId::kMemoryTemp), std::nullopt);  // GDDR6: no sensor
  EXPECT_EQ(s.value(FieldId::kNvlinkBandwidthTotal), std::nullopt);
  EXPECT_EQ(s.value(FieldId::kEncUtil), 0);
  EXPECT_EQ(s.value(FieldId::kDecUtil), 0);
}

// ---- GPM ----------------------------------------------------------------------------------------

TEST(NvmlExtrasTest, GpmFieldsNeedTwoSamplesAtLeast100MsApart) {
  LiveNode node(OneGpu(kBusyGpm));
  ASSERT_TRUE(node.ok());
  FakeClock clock;
  GpuExtrasState state(clock.fn());
  const nvmlDevice_t dev = node.Device(0);

  GpuSample first;
  EXPECT_TRUE(ReadGpmFields(node.nvml(), dev, All(), state, first));
  EXPECT_EQ(state.gpm_supported(), true);
  EXPECT_EQ(first.value(FieldId::kProfGrEngineActive), std::nullopt);  // one sample so far
  EXPECT_TRUE(first.errors.empty());

  clock.now += 0.05;  // too soon
  GpuSample soon;
  EXPECT_TRUE(ReadGpmFields(node.nvml(), dev, All(), state, soon));
  EXPECT_EQ(soon.value(FieldId::kProfGrEngineActive), std::nullopt);

  clock.now += 0.06;  // 110 ms after the first sample
  GpuSample s;
  EXPECT_TRUE(ReadGpmFields(node.nvml(), dev, All(), state, s));
  EXPECT_TRUE(s.errors.empty());
  EXPECT_DOUBLE_EQ(*s.value(FieldId::kProfGrEngineActive), 0.35);
  EXPECT_DOUBLE_EQ(*s.value(FieldId::kProfSmActive), 0.50);
  EXPECT_DOUBLE_EQ(*s.value(FieldId::kProfSmOccupancy), 0.25);
  EXPECT_DOUBLE_EQ(*s.value(FieldId::kProfPipeTensorActive), 0.125);
  EXPECT_DOUBLE_EQ(*s.value(FieldId::kProfDramActive), 0.40);
  EXPECT_DOUBLE_EQ(*s.value(FieldId::kProfPipeFp64Active), 0.01);
  EXPECT_DOUBLE_EQ(*s.value(FieldId::kProfPipeFp32Active), 0.20);
  EXPECT_DOUBLE_EQ(*s.value(FieldId::kProfPipeFp16Active), 0.03);
  EXPECT_DOUBLE_EQ(*s.value(FieldId::kProfPcieTxBytes), 100.0 * 1048576);
  EXPECT_DOUBLE_EQ(*s.value(FieldId::kProfPcieRxBytes), 0.5 * 1048576);
  // Only PROF fields are touched.
  EXPECT_EQ(s.value(FieldId::kMemoryTemp), std::nullopt);

  // The next pass pairs with the sample just taken.
  node.Edit("graphics_util: 35.0", "graphics_util: 80.0");
  clock.now += 30;
  GpuSample next;
  EXPECT_TRUE(ReadGpmFields(node.nvml(), dev, Only({FieldId::kProfGrEngineActive}), state, next));
  EXPECT_DOUBLE_EQ(*next.value(FieldId::kProfGrEngineActive), 0.80);
  EXPECT_EQ(next.value(FieldId::kProfSmActive), std::nullopt);  // not wanted
}

TEST(NvmlExtrasTest, MetricsTheGpuDoesNotGiveStayAbsent) {
  LiveNode node(OneGpu(", gpm: {supported: true, sm_util: 10}"));
  ASSERT_TRUE(node.ok());
  FakeClock clock;
  GpuExtrasState state(clock.fn());
  GpuSample a, b;
  ReadGpmFields(node.nvml(), node.Device(0), All(), state, a);
  clock.now += 1;
  ReadGpmFields(node.nvml(), node.Device(0), All(), state, b);
  EXPECT_TRUE(b.errors.empty());
  EXPECT_DOUBLE_EQ(*b.value(FieldId::kProfSmActive), 0.10);
  EXPECT_EQ(b.value(FieldId::kProfGrEngineActive), std::nullopt);
}

TEST(NvmlExtrasTest, GpmUnsupportedIsRememberedAndSetsNothing) {
  for (const char* profile : {"t4-cloud", "pcie-l40s-4"}) {
    LiveNode node = LiveNode::Builtin(profile);
    ASSERT_TRUE(node.ok());
    GpuExtrasState state;
    GpuSample s;
    EXPECT_FALSE(ReadGpmFields(node.nvml(), node.Device(0), All(), state, s)) << profile;
    EXPECT_EQ(state.gpm_supported(), false);
    EXPECT_FALSE(ReadGpmFields(node.nvml(), node.Device(0), All(), state, s));
    for (const auto& v : s.values) EXPECT_EQ(v, std::nullopt);
    EXPECT_TRUE(s.errors.empty());
  }
}

TEST(NvmlExtrasTest, NoProfFieldWantedMeansNoGpmCalls) {
  LiveNode node = LiveNode::Builtin("dgx-h200");
  ASSERT_TRUE(node.ok());
  GpuExtrasState state;
  GpuSample s;
  EXPECT_TRUE(ReadGpmFields(node.nvml(), node.Device(0), Only({FieldId::kMemoryTemp}), state, s));
  EXPECT_EQ(state.gpm_supported(), std::nullopt);  // not even asked
}

TEST(NvmlExtrasTest, AMovedStateKeepsItsSamples) {
  LiveNode node(OneGpu(kBusyGpm));
  ASSERT_TRUE(node.ok());
  FakeClock clock;
  GpuExtrasState original(clock.fn());
  GpuSample a;
  ReadGpmFields(node.nvml(), node.Device(0), All(), original, a);
  GpuExtrasState moved(std::move(original));
  GpuExtrasState assigned;
  assigned = std::move(moved);
  clock.now += 1;
  GpuSample b;
  EXPECT_TRUE(ReadGpmFields(node.nvml(), node.Device(0), All(), assigned, b));
  EXPECT_TRUE(b.errors.empty());
  EXPECT_DOUBLE_EQ(*b.value(FieldId::kProfGrEngineActive), 0.35);
  assigned.Reset();  // frees the samples: the next pass starts over
  clock.now += 1;
  GpuSample c;
  EXPECT_TRUE(ReadGpmFields(node.nvml(), node.Device(0), All(), assigned, c));
  EXPECT_EQ(c.value(FieldId::kProfGrEngineActive), std::nullopt);
}

TEST(NvmlExtrasTest, ALostGpuIsAnErrorForEveryWantedFieldAndGpmIsAskedAgainLater) {
  const std::string extra = std::string(", memory_temp_c: 40, pcie_replay_count: 0, encoder_util: 1, "
                                        "decoder_util: 2, nvlink_throughput_kib: {tx: 1, rx: 1}") +
                            kBusyGpm;
  LiveNode node(OneGpu(extra));
  ASSERT_TRUE(node.ok());
  FakeClock clock;
  GpuExtrasState fast(clock.fn());
  GpuExtrasState slow(clock.fn());
  const nvmlDevice_t dev = node.Device(0);
  GpuSample before;
  ReadFastExtras(node.nvml(), dev, All(), fast, before);
  ReadGpmFields(node.nvml(), dev, All(), slow, before);
  EXPECT_TRUE(before.errors.empty());

  node.Write(OneGpu(extra + ", lost: true"));
  clock.now += 1;
  GpuSample s;
  ReadFastExtras(node.nvml(), dev, All(), fast, s);
  EXPECT_TRUE(ReadGpmFields(node.nvml(), dev, All(), slow, s));
  for (FieldId id : {FieldId::kMemoryTemp, FieldId::kPcieReplayCounter, FieldId::kEncUtil,
                     FieldId::kDecUtil, FieldId::kNvlinkBandwidthTotal,
                     FieldId::kProfGrEngineActive, FieldId::kProfPcieRxBytes}) {
    EXPECT_EQ(s.value(id), std::nullopt) << Field(id).name;
    ASSERT_TRUE(s.errors.count(id)) << Field(id).name;
    EXPECT_EQ(s.errors.at(id).code(), absl::StatusCode::kUnavailable) << s.errors.at(id);
    EXPECT_EQ(gpu::NvmlReturnOf(s.errors.at(id)), NVML_ERROR_GPU_IS_LOST);
  }
  EXPECT_EQ(slow.gpm_supported(), true);  // a lost GPU does not make GPM "unsupported"

  // Back on the bus: the NVLink baseline starts again, GPM pairs with the pre-loss sample.
  node.Write(OneGpu(extra));
  clock.now += 1;
  GpuSample back;
  ReadFastExtras(node.nvml(), dev, All(), fast, back);
  EXPECT_TRUE(ReadGpmFields(node.nvml(), dev, All(), slow, back));
  EXPECT_TRUE(back.errors.empty());
  EXPECT_EQ(back.value(FieldId::kNvlinkBandwidthTotal), std::nullopt);
  EXPECT_EQ(back.value(FieldId::kMemoryTemp), 40);
  EXPECT_DOUBLE_EQ(*back.value(FieldId::kProfGrEngineActive), 0.35);
}

TEST(NvmlExtrasTest, GpmMappingFollowsDcgm) {
  EXPECT_EQ(GpmMetricFor(FieldId::kProfGrEngineActive)->metric_id, 1u);
  EXPECT_EQ(GpmMetricFor(FieldId::kProfPipeTensorActive)->metric_id, 5u);
  EXPECT_EQ(GpmMetricFor(FieldId::kProfDramActive)->metric_id, 10u);
  EXPECT_EQ(GpmMetricFor(FieldId::kProfPcieRxBytes)->metric_id, 21u);
  EXPECT_EQ(GpmMetricFor(FieldId::kProfPcieRxBytes)->scale, 1048576.0);
  EXPECT_EQ(GpmMetricFor(FieldId::kProfSmOccupancy)->scale, 0.01);
  EXPECT_EQ(GpmMetricFor(FieldId::kGpuTemp), std::nullopt);
}

}  // namespace
}  // namespace gpunode::exporter
