// Unit tests of the device plugin's health monitor (src/devices/health.h): which XIDs and lost GPUs
// make a GPU unhealthy, when it is reported healthy again, and that stopping is prompt.
//
// Two ways in: events handed straight to the monitor through an event pump's Dispatch (exact and
// instant, for the XID rules), and live edits of a simulated node's profile, which the simulated
// NVML delivers as real NVML events or "GPU is lost" answers (the monitor's own pump and poll, end
// to end). Waits for real events are bounded by a few seconds.
#include "src/devices/health.h"

#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/support/profile.h"
#include "src/gpu/event_pump.h"
#include "src/gpu/nvml.h"
#include "test/testing/sim_library.h"
#include "test/testing/status_matchers.h"

namespace gpunode::devices {
namespace {

namespace fs = std::filesystem;
using ::gpunode::testing::SimLibrary;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using namespace std::chrono_literals;

// ---- HealthOptions::IsFatal (pure) -----------------------------------------------------------

TEST(HealthOptionsIsFatalTest, ApplicationXidsAreIgnoredAndEveryOtherXidIsFatal) {
  const HealthOptions options;
  for (unsigned long long xid : {13, 31, 43, 45, 68, 109}) EXPECT_FALSE(options.IsFatal(xid)) << xid;
  for (unsigned long long xid : {48, 63, 64, 74, 79, 92, 94, 95, 119, 1234}) EXPECT_TRUE(options.IsFatal(xid)) << xid;
}

TEST(HealthOptionsIsFatalTest, AForcedXidIsFatalEvenWhenIgnoredOrChecksAreDisabled) {
  HealthOptions options;
  options.forced_xids = {13};
  EXPECT_TRUE(options.IsFatal(13));
  options.disabled = true;
  EXPECT_TRUE(options.IsFatal(13));
  EXPECT_FALSE(options.IsFatal(79));  // disabled: only the forced ones count
}

TEST(HealthOptionsIsFatalTest, AllXidsFatalOverridesTheIgnoredList) {
  HealthOptions options;
  options.all_xids_fatal = true;
  EXPECT_TRUE(options.IsFatal(13));
  EXPECT_TRUE(options.IsFatal(109));
}

// ---- The monitor on a simulated node -----------------------------------------------------------

// Health changes as the callback saw them, in order, with a bounded wait.
class Recorder {
 public:
  HealthMonitor::Callback callback() {
    return [this](const HealthEvent& e) {
      std::lock_guard<std::mutex> lock(mu_);
      events_.push_back(e);
      cv_.notify_all();
    };
  }
  std::vector<HealthEvent> events() const {
    std::lock_guard<std::mutex> lock(mu_);
    return events_;
  }
  // Waits until an event matches `match`; false after `timeout`.
  bool WaitFor(const std::function<bool(const HealthEvent&)>& match, std::chrono::milliseconds timeout = 3s) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] {
      for (const HealthEvent& e : events_) {
        if (match(e)) return true;
      }
      return false;
    });
  }
  bool WaitFor(const std::string& uuid, bool healthy, std::chrono::milliseconds timeout = 3s) {
    return WaitFor([&](const HealthEvent& e) { return e.uuid == uuid && e.healthy == healthy; }, timeout);
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<HealthEvent> events_;
};

// A simulated node (four L40S by default) whose profile can be edited while NVML is loaded, the
// NVML library opened on it and the (index, UUID) of its GPUs.
class HealthMonitorTest : public ::testing::Test {
 protected:
  void Open(const std::string& profile_name = "pcie-l40s-4") {
    static int counter = 0;
    dir_ = fs::temp_directory_path() /
           ("gpunode-health-" + std::to_string(::getpid()) + "-" + std::to_string(++counter));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    auto source = sim::ResolveProfile(profile_name);
    ASSERT_OK(source);
    text_ = source->text;
    auto profile = sim::ParseProfile(text_, profile_name);
    ASSERT_OK(profile);
    for (unsigned i = 0; i < profile->gpus.size(); ++i) {
      gpus_.emplace_back(i, profile->gpus[i].uuid);
      bus_ids_.push_back(profile->gpus[i].bus_id);
    }
    path_ = (dir_ / "profile.yaml").string();
    Write();
    ::setenv("GPUNODE_SIM_PROFILE", path_.c_str(), 1);
    ::setenv("GPUNODE_SIM_RELOAD_MS", "0", 1);
    auto nvml = gpu::NvmlLibrary::Open(SimLibrary());
    ASSERT_OK(nvml);
    nvml_ = *std::move(nvml);
  }

  void TearDown() override {
    monitor_.reset();  // before the pump it subscribed to
    pump_.reset();
    nvml_.reset();
    ::unsetenv("GPUNODE_SIM_RELOAD_MS");
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  // A pump that is never started: events reach the monitor only through its Dispatch. It outlives
  // the monitor (TearDown), as HealthMonitor requires.
  gpu::NvmlEventPump& Pump() {
    pump_ = std::make_unique<gpu::NvmlEventPump>(*nvml_);
    return *pump_;
  }

  // Starts a monitor over every GPU of the node; events from `pump` when given.
  void StartMonitor(HealthOptions options, gpu::NvmlEventPump* pump = nullptr) {
    monitor_ = std::make_unique<HealthMonitor>(*nvml_, gpus_, options, recorder_.callback(), pump);
    monitor_->Start();
  }

  // Adds `extra` ("lost: true", "events: [...]") to the entry of GPU `index` and rewrites the
  // profile atomically; the simulated NVML sees it on its next call.
  void EditGpu(unsigned index, const std::string& extra) {
    const std::string key = "bus_id: \"" + bus_ids_[index] + "\",";
    const size_t at = text_.find(key);
    ASSERT_NE(at, std::string::npos) << key;
    text_.insert(at + key.size(), " " + extra + ",");
    Write();
  }
  void RemoveFromProfile(const std::string& what) {
    for (size_t at; (at = text_.find(what)) != std::string::npos;) text_.erase(at, what.size());
    Write();
  }
  void Write() {
    const std::string tmp = path_ + ".tmp";
    std::ofstream(tmp) << text_;
    fs::rename(tmp, path_);
  }
  const std::string& Uuid(unsigned index) const { return gpus_[index].second; }

  fs::path dir_;
  std::string path_, text_;
  std::vector<std::pair<unsigned, std::string>> gpus_;
  std::vector<std::string> bus_ids_;
  std::unique_ptr<gpu::NvmlLibrary> nvml_;
  std::unique_ptr<gpu::NvmlEventPump> pump_;
  Recorder recorder_;
  std::unique_ptr<HealthMonitor> monitor_;
};

// An XID event as the pump hands it on, for GPU `index` of the node.
gpu::NvmlEvent Xid(unsigned index, const std::string& uuid, unsigned long long xid) {
  gpu::NvmlEvent e;
  e.kind = gpu::NvmlEvent::Kind::kXid;
  e.index = index;
  e.uuid = uuid;
  e.known = true;
  e.xid = xid;
  return e;
}

// Options for the tests that drive the monitor by Dispatch: the poll (which runs once at Start)
// never comes round again during the test, so only the dispatched events count.
HealthOptions EventsOnly() {
  HealthOptions options;
  options.poll_interval = 10min;
  return options;
}

TEST_F(HealthMonitorTest, StartsWithEveryAnsweringGpuHealthyAndReportsNothing) {
  ASSERT_NO_FATAL_FAILURE(Open());
  HealthOptions options;
  options.poll_interval = 20ms;
  StartMonitor(options);
  std::this_thread::sleep_for(200ms);  // several polls
  monitor_->Stop();
  EXPECT_THAT(recorder_.events(), IsEmpty());  // only changes are reported
}

TEST_F(HealthMonitorTest, AFatalXidMakesOnlyItsGpuUnhealthyNamingTheXid) {
  ASSERT_NO_FATAL_FAILURE(Open());
  gpu::NvmlEventPump& pump = Pump();
  StartMonitor(EventsOnly(), &pump);
  pump.Dispatch(Xid(1, Uuid(1), 48));  // double-bit ECC error
  const std::vector<HealthEvent> events = recorder_.events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].uuid, Uuid(1));
  EXPECT_FALSE(events[0].healthy);
  EXPECT_THAT(events[0].reason, HasSubstr("48"));
  // A second fatal XID on the same GPU changes nothing the kubelet needs to hear.
  pump.Dispatch(Xid(1, Uuid(1), 79));
  EXPECT_EQ(recorder_.events().size(), 1u);
}

TEST_F(HealthMonitorTest, ApplicationXidsThatNvidiasPluginIgnoresKeepTheGpuHealthy) {
  ASSERT_NO_FATAL_FAILURE(Open());
  gpu::NvmlEventPump& pump = Pump();
  StartMonitor(EventsOnly(), &pump);
  for (unsigned long long xid : {13, 31, 43, 45, 68, 109}) pump.Dispatch(Xid(0, Uuid(0), xid));
  EXPECT_THAT(recorder_.events(), IsEmpty());
}

TEST_F(HealthMonitorTest, ForcedAndAllFatalOptionsTurnApplicationXidsFatal) {
  ASSERT_NO_FATAL_FAILURE(Open());
  gpu::NvmlEventPump& pump = Pump();
  HealthOptions options = EventsOnly();
  options.forced_xids = {13};  // DP_ENABLE_HEALTHCHECKS=13
  StartMonitor(options, &pump);
  pump.Dispatch(Xid(0, Uuid(0), 31));
  pump.Dispatch(Xid(2, Uuid(2), 13));
  const std::vector<HealthEvent> events = recorder_.events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].uuid, Uuid(2));
  EXPECT_FALSE(events[0].healthy);
}

TEST_F(HealthMonitorTest, EventsOfGpusItDoesNotWatchAreIgnored) {
  ASSERT_NO_FATAL_FAILURE(Open());
  gpu::NvmlEventPump& pump = Pump();
  StartMonitor(EventsOnly(), &pump);
  gpu::NvmlEvent unknown = Xid(0, "", 79);
  unknown.known = false;  // NVML named a device the pump did not register
  pump.Dispatch(unknown);
  pump.Dispatch(Xid(9, "GPU-not-on-this-node", 79));
  EXPECT_THAT(recorder_.events(), IsEmpty());
}

TEST_F(HealthMonitorTest, ALostGpuEventMakesItUnhealthy) {
  ASSERT_NO_FATAL_FAILURE(Open());
  gpu::NvmlEventPump& pump = Pump();
  StartMonitor(EventsOnly(), &pump);
  gpu::NvmlEvent lost = Xid(3, Uuid(3), 0);
  lost.kind = gpu::NvmlEvent::Kind::kLost;
  pump.Dispatch(lost);
  const std::vector<HealthEvent> events = recorder_.events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].uuid, Uuid(3));
  EXPECT_FALSE(events[0].healthy);
  EXPECT_THAT(events[0].reason, HasSubstr("lost"));
}

TEST_F(HealthMonitorTest, DisabledHealthChecksReportNothingAtAll) {
  ASSERT_NO_FATAL_FAILURE(Open());
  gpu::NvmlEventPump& pump = Pump();
  HealthOptions options = EventsOnly();
  options.disabled = true;  // DP_DISABLE_HEALTHCHECKS=all
  StartMonitor(options, &pump);
  pump.Dispatch(Xid(0, Uuid(0), 79));
  EditGpu(1, "lost: true");
  std::this_thread::sleep_for(300ms);
  EXPECT_THAT(recorder_.events(), IsEmpty());
}

TEST_F(HealthMonitorTest, AnUnhealthyGpuThatAnswersForTheQuietPeriodIsHealthyAgain) {
  ASSERT_NO_FATAL_FAILURE(Open());
  gpu::NvmlEventPump& pump = Pump();
  HealthOptions options;
  options.poll_interval = 20ms;
  options.recovery_quiet = 300ms;  // 5 min by default
  StartMonitor(options, &pump);
  const auto t0 = std::chrono::steady_clock::now();
  pump.Dispatch(Xid(2, Uuid(2), 79));
  ASSERT_TRUE(recorder_.WaitFor(Uuid(2), true));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 300ms);  // not before the quiet period
  const std::vector<HealthEvent> events = recorder_.events();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_FALSE(events[0].healthy);
  EXPECT_TRUE(events[1].healthy);
  EXPECT_THAT(events[1].reason, HasSubstr("answered NVML normally"));
}

TEST_F(HealthMonitorTest, ANewFatalXidRestartsTheQuietPeriod) {
  ASSERT_NO_FATAL_FAILURE(Open());
  gpu::NvmlEventPump& pump = Pump();
  HealthOptions options;
  options.poll_interval = 20ms;
  options.recovery_quiet = 400ms;
  StartMonitor(options, &pump);
  const auto t0 = std::chrono::steady_clock::now();
  pump.Dispatch(Xid(0, Uuid(0), 79));
  std::this_thread::sleep_for(250ms);
  const auto t1 = std::chrono::steady_clock::now();
  pump.Dispatch(Xid(0, Uuid(0), 79));  // while still unhealthy: no report, but a new start
  ASSERT_TRUE(recorder_.WaitFor(Uuid(0), true));
  EXPECT_GE(std::chrono::steady_clock::now() - t1, 400ms);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 650ms);
  EXPECT_EQ(recorder_.events().size(), 2u);
}

TEST_F(HealthMonitorTest, StopIsPromptEvenWithALongPollInterval) {
  ASSERT_NO_FATAL_FAILURE(Open());
  HealthOptions options;
  options.poll_interval = 10min;
  StartMonitor(options);  // its own pump, waiting on NVML
  std::this_thread::sleep_for(50ms);
  const auto t0 = std::chrono::steady_clock::now();
  monitor_->Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);
  monitor_->Stop();  // again: nothing left to stop
  monitor_.reset();  // and the destructor after Stop
}

TEST_F(HealthMonitorTest, AfterStopEventsAreNoLongerReported) {
  ASSERT_NO_FATAL_FAILURE(Open());
  gpu::NvmlEventPump& pump = Pump();
  StartMonitor(EventsOnly(), &pump);
  monitor_->Stop();
  pump.Dispatch(Xid(0, Uuid(0), 79));
  EXPECT_THAT(recorder_.events(), IsEmpty());
}

// ---- End to end through the simulated NVML: the monitor's own pump and poll ----------------------

TEST_F(HealthMonitorTest, AnXidInjectedIntoTheSimulatedDriverMakesItsGpuUnhealthy) {
  ASSERT_NO_FATAL_FAILURE(Open());
  HealthOptions options;
  options.poll_interval = 50ms;
  StartMonitor(options);
  // Ignored XIDs on GPU 0, then a fatal one on GPU 1: NVML delivers them in that order, so by the
  // time GPU 1 is reported, GPU 0's events have been seen (and must not have counted).
  EditGpu(0, "events: [{type: xid, xid: 13}, {type: xid, xid: 43}]");
  EditGpu(1, "events: [{type: xid, xid: 79}]");
  ASSERT_TRUE(recorder_.WaitFor(Uuid(1), false));
  const std::vector<HealthEvent> events = recorder_.events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_THAT(events[0].reason, HasSubstr("79"));
}

TEST_F(HealthMonitorTest, AGpuThatFallsOffTheBusIsUnhealthyAndRecoversWhenItAnswersAgain) {
  ASSERT_NO_FATAL_FAILURE(Open());
  HealthOptions options;
  options.poll_interval = 50ms;
  options.recovery_quiet = 300ms;
  StartMonitor(options);
  EditGpu(3, "lost: true");
  ASSERT_TRUE(recorder_.WaitFor(Uuid(3), false));
  RemoveFromProfile(" lost: true,");
  ASSERT_TRUE(recorder_.WaitFor(Uuid(3), true));
  for (const HealthEvent& e : recorder_.events()) EXPECT_EQ(e.uuid, Uuid(3));
}

TEST_F(HealthMonitorTest, AGpuAlreadyLostAtStartIsReportedByTheFirstPoll) {
  ASSERT_NO_FATAL_FAILURE(Open("broken-fallen-gpu"));  // GPU 2 fell off the bus
  HealthOptions options;
  options.poll_interval = 10min;  // the first poll runs at Start
  StartMonitor(options);
  ASSERT_TRUE(recorder_.WaitFor(Uuid(2), false));
  monitor_->Stop();
  const std::vector<HealthEvent> events = recorder_.events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].uuid, Uuid(2));
}

}  // namespace
}  // namespace gpunode::devices
