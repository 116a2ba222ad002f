// Unit tests of the exporter's XID watcher (src/exporter/xid.h): counts per GPU and XID code, the
// last code seen, which GPUs are watched, and Stop. Events reach the watcher either through the
// event pump's Dispatch (exact and instant) or as real NVML events of the simulated driver, made by
// editing the simulated node's profile while it runs (waits bounded by a few seconds).
#include "src/exporter/xid.h"

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/support/profile.h"
#include "src/gpu/event_pump.h"
#include "src/gpu/nvml.h"
#include "test/testing/sim_library.h"
#include "test/testing/status_matchers.h"

namespace gpunode::exporter {
namespace {

namespace fs = std::filesystem;
using ::gpunode::testing::SimLibrary;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Pair;
using namespace std::chrono_literals;

TEST(XidDescriptionTest, NamesTheXidsOfNvidiasCatalogue) {
  EXPECT_EQ(XidDescription(79), "GPU has fallen off the bus");
  EXPECT_EQ(XidDescription(48), "Double Bit ECC Error");
  EXPECT_EQ(XidDescription(13), "Graphics Engine Exception");
}

TEST(XidDescriptionTest, ZeroIsNoErrorAndAnUnlistedCodeIsUnknown) {
  EXPECT_EQ(XidDescription(0), "No Error");  // dcgm-exporter's err_msg before any XID
  EXPECT_EQ(XidDescription(12345), "Unknown XID");
}

// A simulated node (four L40S) whose profile can be edited while NVML is loaded.
class XidWatcherTest : public ::testing::Test {
 protected:
  void Open(const std::string& profile_text) {
    static int counter = 0;
    dir_ = fs::temp_directory_path() /
           ("gpunode-xid-" + std::to_string(::getpid()) + "-" + std::to_string(++counter));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    text_ = profile_text;
    path_ = (dir_ / "profile.yaml").string();
    Write();
    ::setenv("GPUNODE_SIM_PROFILE", path_.c_str(), 1);
    ::setenv("GPUNODE_SIM_RELOAD_MS", "0", 1);
    auto nvml = gpu::NvmlLibrary::Open(SimLibrary());
    ASSERT_OK(nvml);
    nvml_ = *std::move(nvml);
  }
  void OpenBuiltin(const std::string& name, const std::string& from = "", const std::string& to = "") {
    auto source = sim::ResolveProfile(name);
    ASSERT_OK(source);
    std::string text = source->text;
    if (!from.empty()) {
      const size_t at = text.find(from);
      ASSERT_NE(at, std::string::npos) << from;
      text.replace(at, from.size(), to);
    }
    Open(text);
  }

  void TearDown() override {
    pump_.reset();
    nvml_.reset();
    ::unsetenv("GPUNODE_SIM_RELOAD_MS");
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  // Adds `extra` to the entry of the GPU at `bus_id` and rewrites the profile atomically.
  void EditGpu(const std::string& bus_id, const std::string& extra) {
    const std::string key = "bus_id: \"" + bus_id + "\",";
    const size_t at = text_.find(key);
    ASSERT_NE(at, std::string::npos) << key;
    text_.insert(at + key.size(), " " + extra + ",");
    Write();
  }
  void Write() {
    const std::string tmp = path_ + ".tmp";
    std::ofstream(tmp) << text_;
    fs::rename(tmp, path_);
  }

  // A started pump over GPUs 0-3 (UUIDs do not matter to the watcher).
  gpu::NvmlEventPump& StartedPump() {
    pump_ = std::make_unique<gpu::NvmlEventPump>(*nvml_);
    EXPECT_EQ(pump_->Start({{0, ""}, {1, ""}, {2, ""}, {3, ""}}), 4u);
    return *pump_;
  }

  // Total events counted for GPU `index`.
  static uint64_t Total(const XidWatcher& w, unsigned index) {
    uint64_t n = 0;
    for (const auto& [xid, count] : w.For(index).counts) n += count;
    return n;
  }
  // Polls until GPU `index` has `n` events counted; false after `timeout`.
  static bool WaitForTotal(const XidWatcher& w, unsigned index, uint64_t n, std::chrono::milliseconds timeout = 3s) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (Total(w, index) < n) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(10ms);
    }
    return true;
  }

  fs::path dir_;
  std::string path_, text_;
  std::unique_ptr<gpu::NvmlLibrary> nvml_;
  std::unique_ptr<gpu::NvmlEventPump> pump_;
};

gpu::NvmlEvent Xid(unsigned index, unsigned long long xid) {
  gpu::NvmlEvent e;
  e.kind = gpu::NvmlEvent::Kind::kXid;
  e.index = index;
  e.known = true;
  e.xid = xid;
  return e;
}

TEST_F(XidWatcherTest, CountsEachXidPerGpuAndRemembersTheLastCode) {
  ASSERT_NO_FATAL_FAILURE(OpenBuiltin("pcie-l40s-4"));
  gpu::NvmlEventPump& pump = StartedPump();
  XidWatcher watcher(*nvml_, &pump);
  ASSERT_EQ(watcher.Start({0, 1, 2, 3}), 4u);
  pump.Dispatch(Xid(1, 79));
  pump.Dispatch(Xid(1, 48));
  pump.Dispatch(Xid(1, 79));
  pump.Dispatch(Xid(3, 13));
  const XidWatcher::GpuXids one = watcher.For(1);
  EXPECT_THAT(one.counts, ElementsAre(Pair(48ull, 1u), Pair(79ull, 2u)));
  EXPECT_EQ(one.last, 79u);
  EXPECT_THAT(watcher.For(3).counts, ElementsAre(Pair(13ull, 1u)));
  EXPECT_EQ(watcher.For(3).last, 13u);
}

TEST_F(XidWatcherTest, AGpuWithoutXidsHasNoCountsAndNoLastCode) {
  ASSERT_NO_FATAL_FAILURE(OpenBuiltin("pcie-l40s-4"));
  gpu::NvmlEventPump& pump = StartedPump();
  XidWatcher watcher(*nvml_, &pump);
  ASSERT_EQ(watcher.Start({0, 1, 2, 3}), 4u);
  const XidWatcher::GpuXids none = watcher.For(0);
  EXPECT_THAT(none.counts, IsEmpty());
  EXPECT_FALSE(none.last.has_value());  // not 0: "no XID yet" is not "XID 0"
  EXPECT_THAT(watcher.For(42).counts, IsEmpty());  // a GPU it never heard of
}

TEST_F(XidWatcherTest, CountsOnlyTheGpusItWasAskedToWatch) {
  ASSERT_NO_FATAL_FAILURE(OpenBuiltin("pcie-l40s-4"));
  gpu::NvmlEventPump& pump = StartedPump();
  XidWatcher watcher(*nvml_, &pump);
  ASSERT_EQ(watcher.Start({0, 2}), 2u);
  EXPECT_TRUE(watcher.watching(0));
  EXPECT_FALSE(watcher.watching(1));
  pump.Dispatch(Xid(1, 79));
  EXPECT_THAT(watcher.For(1).counts, IsEmpty());
}

TEST_F(XidWatcherTest, IgnoresLostGpuEventsAndDevicesThePumpDoesNotKnow) {
  ASSERT_NO_FATAL_FAILURE(OpenBuiltin("pcie-l40s-4"));
  gpu::NvmlEventPump& pump = StartedPump();
  XidWatcher watcher(*nvml_, &pump);
  ASSERT_EQ(watcher.Start({0, 1, 2, 3}), 4u);
  gpu::NvmlEvent lost = Xid(0, 0);
  lost.kind = gpu::NvmlEvent::Kind::kLost;  // not an XID: the poller reports lost GPUs
  pump.Dispatch(lost);
  gpu::NvmlEvent unknown = Xid(0, 79);
  unknown.known = false;
  pump.Dispatch(unknown);
  EXPECT_THAT(watcher.For(0).counts, IsEmpty());
}

TEST_F(XidWatcherTest, CountsXidsTheSimulatedDriverReportsThroughItsOwnPump) {
  ASSERT_NO_FATAL_FAILURE(OpenBuiltin("pcie-l40s-4"));
  XidWatcher watcher(*nvml_);  // no pump given: it runs its own
  ASSERT_EQ(watcher.Start({0, 1, 2, 3}), 4u);
  EditGpu("0000:ca:00.0", "events: [{type: xid, xid: 79}, {type: xid, xid: 79}, {type: xid, xid: 94}]");  // GPU 2
  ASSERT_TRUE(WaitForTotal(watcher, 2, 3));
  const XidWatcher::GpuXids two = watcher.For(2);
  EXPECT_THAT(two.counts, ElementsAre(Pair(79ull, 2u), Pair(94ull, 1u)));
  EXPECT_EQ(two.last, 94u);
  for (unsigned other : {0u, 1u, 3u}) EXPECT_THAT(watcher.For(other).counts, IsEmpty()) << other;
  // Delivered once: no recount while the events stay in the profile.
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(Total(watcher, 2), 3u);
}

TEST_F(XidWatcherTest, WatchesNoGpuThatCannotReportEvents) {
  // GPU 2 of this node is lost (NVML cannot register it for events).
  ASSERT_NO_FATAL_FAILURE(OpenBuiltin("broken-fallen-gpu"));
  XidWatcher watcher(*nvml_);
  EXPECT_EQ(watcher.Start({0, 1, 2, 3}), 3u);
  EXPECT_TRUE(watcher.watching(1));
  EXPECT_FALSE(watcher.watching(2));
}

TEST_F(XidWatcherTest, StartReturnsZeroWhenTheDriverHasNoEvents) {
  ASSERT_NO_FATAL_FAILURE(OpenBuiltin("t4-cloud", "unsupported: [remapped_rows]", "unsupported: [remapped_rows, events]"));
  XidWatcher watcher(*nvml_);
  EXPECT_EQ(watcher.Start({0}), 0u);
  EXPECT_FALSE(watcher.watching(0));
  watcher.Stop();  // nothing to stop: no crash
}

TEST_F(XidWatcherTest, StartingTwiceChangesNothing) {
  ASSERT_NO_FATAL_FAILURE(OpenBuiltin("pcie-l40s-4"));
  gpu::NvmlEventPump& pump = StartedPump();
  XidWatcher watcher(*nvml_, &pump);
  ASSERT_EQ(watcher.Start({0, 1}), 2u);
  EXPECT_EQ(watcher.Start({0, 1, 2, 3}), 2u);
  pump.Dispatch(Xid(0, 79));
  EXPECT_EQ(Total(watcher, 0), 1u);  // subscribed once, counted once
}

TEST_F(XidWatcherTest, AfterStopNewXidsAreNotCountedAndTheCountsSoFarRemain) {
  ASSERT_NO_FATAL_FAILURE(OpenBuiltin("pcie-l40s-4"));
  gpu::NvmlEventPump& pump = StartedPump();
  XidWatcher watcher(*nvml_, &pump);
  ASSERT_EQ(watcher.Start({0, 1, 2, 3}), 4u);
  pump.Dispatch(Xid(0, 79));
  watcher.Stop();
  pump.Dispatch(Xid(0, 79));
  pump.Dispatch(Xid(0, 48));
  EXPECT_THAT(watcher.For(0).counts, ElementsAre(Pair(79ull, 1u)));
  watcher.Stop();  // twice: fine
}

TEST_F(XidWatcherTest, StoppingItsOwnPumpIsPrompt) {
  ASSERT_NO_FATAL_FAILURE(OpenBuiltin("pcie-l40s-4"));
  auto watcher = std::make_unique<XidWatcher>(*nvml_);
  ASSERT_EQ(watcher->Start({0, 1, 2, 3}), 4u);
  std::this_thread::sleep_for(50ms);  // the pump is waiting on NVML
  const auto t0 = std::chrono::steady_clock::now();
  watcher->Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);
  watcher.reset();  // the destructor after Stop
}

}  // namespace
}  // namespace gpunode::exporter
