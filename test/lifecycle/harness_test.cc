#include "src/lifecycle/harness.h"

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>

#include "gtest/gtest.h"

namespace gpunode::lifecycle {
namespace {

using std::chrono::milliseconds;

// Waits (real time, bounded) until `pred` holds.
template <typename P>
bool Eventually(P pred, milliseconds limit = milliseconds(5000)) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(milliseconds(2));
  }
  return pred();
}

// A component whose runs are scripted: fail `failures` times, then run until stopped.
class Scripted final : public Component {
 public:
  Scripted(std::string name, int failures, bool one_shot = false)
      : name_(std::move(name)), failures_(failures), one_shot_(one_shot) {}
  std::string name() const override { return name_; }
  bool one_shot() const override { return one_shot_; }
  Status Run(std::stop_token stop) override {
    const int run = ++runs;
    if (run <= failures_) return absl::UnavailableError("boom " + std::to_string(run));
    if (one_shot_) return absl::OkStatus();
    running = true;
    while (!stop.stop_requested()) std::this_thread::sleep_for(milliseconds(1));
    running = false;
    return absl::OkStatus();
  }
  std::atomic<int> runs{0};
  std::atomic<bool> running{false};

 private:
  std::string name_;
  int failures_;
  bool one_shot_;
};

ComponentInfo InfoOf(const Harness& h, const std::string& name) {
  for (const ComponentInfo& i : h.Components()) {
    if (i.name == name) return i;
  }
  return {};
}

class HarnessTest : public ::testing::Test {
 protected:
  FakeClock clock;
  std::vector<std::string> lines;
  std::mutex lines_mu;
  Log log{Log::Format::kText, [this](const std::string& l) {
            std::lock_guard<std::mutex> lock(lines_mu);
            lines.push_back(l);
          }};
};

TEST_F(HarnessTest, FailingComponentIsRunAgainWithDoublingBackoffAndOthersKeepRunning) {
  Harness h(clock, log);
  auto* bad = new Scripted("bad", 3);
  auto* good = new Scripted("good", 0);
  h.Add(std::unique_ptr<Component>(bad));
  h.Add(std::unique_ptr<Component>(good));
  h.Start();
  ASSERT_TRUE(Eventually([&] { return good->running.load(); }));
  // First failure: backoff 1 s on the fake clock; nothing happens until time moves.
  ASSERT_TRUE(Eventually([&] { return bad->runs == 1 && clock.waiters() == 1; }));
  EXPECT_EQ(InfoOf(h, "bad").state, ComponentState::kBackoff);
  EXPECT_FALSE(InfoOf(h, "bad").up);
  EXPECT_EQ(InfoOf(h, "bad").last_error, "boom 1");
  clock.Advance(milliseconds(999));
  std::this_thread::sleep_for(milliseconds(20));
  EXPECT_EQ(bad->runs, 1);
  clock.Advance(milliseconds(1));
  ASSERT_TRUE(Eventually([&] { return bad->runs == 2 && clock.waiters() == 1; }));
  // Second failure: 2 s.
  clock.Advance(milliseconds(1500));
  std::this_thread::sleep_for(milliseconds(20));
  EXPECT_EQ(bad->runs, 2);
  clock.Advance(milliseconds(500));
  ASSERT_TRUE(Eventually([&] { return bad->runs == 3 && clock.waiters() == 1; }));
  clock.Advance(milliseconds(4000));
  ASSERT_TRUE(Eventually([&] { return bad->running.load(); }));
  EXPECT_EQ(InfoOf(h, "bad").restarts, 3);
  EXPECT_TRUE(InfoOf(h, "bad").up);
  EXPECT_TRUE(good->running);
  EXPECT_EQ(good->runs, 1);  // never disturbed
  EXPECT_TRUE(h.AllUp());
  h.Stop();
  EXPECT_FALSE(bad->running);
  EXPECT_FALSE(good->running);
}

TEST_F(HarnessTest, SwitchedOffComponentStopsAndStartsAgainWhenSwitchedOn) {
  Harness h(clock, log);
  auto* c = new Scripted("plugin", 0);
  h.Add(std::unique_ptr<Component>(c));
  h.Add(std::make_unique<Scripted>("off", 0), /*enabled=*/false);
  h.Start();
  ASSERT_TRUE(Eventually([&] { return c->running.load(); }));
  EXPECT_EQ(InfoOf(h, "off").state, ComponentState::kDisabled);
  EXPECT_TRUE(h.AllUp());  // a disabled component does not count
  ASSERT_TRUE(h.SetEnabled("plugin", false));
  ASSERT_TRUE(Eventually([&] { return !c->running.load() && InfoOf(h, "plugin").state == ComponentState::kDisabled; }));
  EXPECT_EQ(InfoOf(h, "plugin").restarts, 0);  // switched off is not a failure
  ASSERT_TRUE(h.SetEnabled("plugin", true));
  ASSERT_TRUE(Eventually([&] { return c->running.load(); }));
  EXPECT_EQ(c->runs, 2);
  EXPECT_FALSE(h.SetEnabled("nope", true));
}

TEST_F(HarnessTest, RestartRunsAgainAtOnceWithoutBackoff) {
  Harness h(clock, log);
  auto* c = new Scripted("plugin", 0);
  h.Add(std::unique_ptr<Component>(c));
  h.Start();
  ASSERT_TRUE(Eventually([&] { return c->running.load(); }));
  ASSERT_TRUE(h.Restart("plugin"));
  ASSERT_TRUE(Eventually([&] { return c->runs == 2 && c->running.load(); }));
  EXPECT_EQ(clock.waiters(), 0);
  auto* next = new Scripted("plugin", 0);
  ASSERT_TRUE(h.Replace(std::unique_ptr<Component>(next)));
  ASSERT_TRUE(Eventually([&] { return next->running.load(); }));
}

TEST_F(HarnessTest, OneShotIsDoneAfterSuccessAndRetriedAfterFailure) {
  Harness h(clock, log);
  auto* c = new Scripted("cdi", 1, /*one_shot=*/true);
  h.Add(std::unique_ptr<Component>(c));
  h.Start();
  ASSERT_TRUE(Eventually([&] { return c->runs == 1 && clock.waiters() == 1; }));
  clock.Advance(milliseconds(1000));
  ASSERT_TRUE(Eventually([&] { return InfoOf(h, "cdi").state == ComponentState::kDone; }));
  EXPECT_TRUE(InfoOf(h, "cdi").up);
  std::this_thread::sleep_for(milliseconds(20));
  EXPECT_EQ(c->runs, 2);  // not run again by itself
  h.Restart("cdi");       // e.g. the driver changed
  ASSERT_TRUE(Eventually([&] { return c->runs == 3; }));
}

TEST_F(HarnessTest, BackoffIsCappedAndResetAfterAStableRun) {
  HarnessOptions o;
  o.initial_backoff = milliseconds(100);
  o.max_backoff = milliseconds(400);
  o.stable_after = milliseconds(10000);
  Harness h(clock, log, o);
  auto* c = new Scripted("x", 100);
  h.Add(std::unique_ptr<Component>(c));
  h.Start();
  // Backoffs: 100, 200, 400, 400 (capped).
  for (int run = 1, wait = 100; run <= 4; ++run, wait = std::min(wait * 2, 400)) {
    ASSERT_TRUE(Eventually([&] { return c->runs == run && clock.waiters() == 1; })) << run;
    clock.Advance(milliseconds(wait - 1));
    std::this_thread::sleep_for(milliseconds(10));
    ASSERT_EQ(c->runs, run);
    clock.Advance(milliseconds(1));
  }
  ASSERT_TRUE(Eventually([&] { return c->runs == 5; }));
  h.Stop();
}

TEST_F(HarnessTest, StopDuringBackoffReturnsAtOnce) {
  Harness h(clock, log);
  auto* c = new Scripted("x", 100);
  h.Add(std::unique_ptr<Component>(c));
  h.Start();
  ASSERT_TRUE(Eventually([&] { return clock.waiters() == 1; }));
  const auto start = std::chrono::steady_clock::now();
  h.Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(1000));
  EXPECT_EQ(InfoOf(h, "x").state, ComponentState::kStopped);
}

TEST_F(HarnessTest, MetricsNameEveryComponent) {
  Harness h(clock, log);
  h.Add(std::make_unique<Scripted>("plugin", 0));
  h.Add(std::make_unique<Scripted>("exporter", 0), false);
  h.Start();
  ASSERT_TRUE(Eventually([&] { return InfoOf(h, "plugin").up; }));
  const std::string m = h.MetricsText();
  EXPECT_NE(m.find("gpunode_component_up{component=\"plugin\"} 1\n"), std::string::npos) << m;
  EXPECT_NE(m.find("gpunode_component_up{component=\"exporter\"} 0\n"), std::string::npos) << m;
  EXPECT_NE(m.find("gpunode_component_enabled{component=\"exporter\"} 0\n"), std::string::npos) << m;
  EXPECT_NE(m.find("# TYPE gpunode_component_restarts_total counter"), std::string::npos) << m;
}

// A component that takes a while to return after its stop (a socket to close, a child to reap).
class SlowToStop final : public Component {
 public:
  explicit SlowToStop(std::string name, milliseconds linger) : name_(std::move(name)), linger_(linger) {}
  std::string name() const override { return name_; }
  Status Run(std::stop_token stop) override {
    ++runs;
    running = true;
    while (!stop.stop_requested()) std::this_thread::sleep_for(milliseconds(1));
    std::this_thread::sleep_for(linger_);
    running = false;
    return absl::CancelledError("stopped");  // what a run may well return when stopped
  }
  std::atomic<int> runs{0};
  std::atomic<bool> running{false};

 private:
  std::string name_;
  milliseconds linger_;
};

TEST_F(HarnessTest, SwitchedOffAndQuicklyOnAgainIsNoCrashAndNoBackoff) {
  Harness h(clock, log);
  auto* c = new SlowToStop("plugin", milliseconds(100));
  h.Add(std::unique_ptr<Component>(c));
  h.Start();
  ASSERT_TRUE(Eventually([&] { return c->running.load(); }));
  // On again before the run returned: the harness asked for that stop, so it is no failure.
  ASSERT_TRUE(h.SetEnabled("plugin", false));
  ASSERT_TRUE(h.SetEnabled("plugin", true));
  ASSERT_TRUE(Eventually([&] { return c->runs == 2 && c->running.load(); })) << InfoOf(h, "plugin").last_error;
  EXPECT_EQ(InfoOf(h, "plugin").restarts, 0);
  EXPECT_EQ(InfoOf(h, "plugin").state, ComponentState::kRunning);
  EXPECT_EQ(clock.waiters(), 0) << "a stop the harness asked for was backed off as a crash";
  // A restart whose run returns an error when stopped is no failure either.
  ASSERT_TRUE(h.Restart("plugin"));
  ASSERT_TRUE(Eventually([&] { return c->runs == 3 && c->running.load(); }));
  EXPECT_EQ(InfoOf(h, "plugin").restarts, 0);
  EXPECT_EQ(clock.waiters(), 0);
}

// A component whose Run throws.
class Throwing final : public Component {
 public:
  std::string name() const override { return "thrower"; }
  Status Run(std::stop_token stop) override {
    if (++runs == 1) throw std::runtime_error("kaboom");
    if (runs == 2) throw 42;
    running = true;
    while (!stop.stop_requested()) std::this_thread::sleep_for(milliseconds(1));
    running = false;
    return absl::OkStatus();
  }
  std::atomic<int> runs{0};
  std::atomic<bool> running{false};
};

TEST_F(HarnessTest, AnExceptionFromRunIsAFailedRunWithBackoffNotAnAbort) {
  Harness h(clock, log);
  auto* c = new Throwing;
  h.Add(std::unique_ptr<Component>(c));
  h.Start();
  ASSERT_TRUE(Eventually([&] { return c->runs == 1 && clock.waiters() == 1; }));
  EXPECT_EQ(InfoOf(h, "thrower").state, ComponentState::kBackoff);
  EXPECT_EQ(InfoOf(h, "thrower").last_error, "exception from its run: kaboom");
  {
    std::lock_guard<std::mutex> lock(lines_mu);
    bool logged = false;
    for (const std::string& l : lines) logged = logged || l.find("[thrower] error: exception from its run: kaboom") != std::string::npos;
    EXPECT_TRUE(logged);
  }
  clock.Advance(milliseconds(1000));
  ASSERT_TRUE(Eventually([&] { return c->runs == 2 && clock.waiters() == 1; }));
  EXPECT_EQ(InfoOf(h, "thrower").last_error, "exception from its run (not a std::exception)");
  clock.Advance(milliseconds(2000));
  ASSERT_TRUE(Eventually([&] { return c->running.load(); }));
  EXPECT_EQ(InfoOf(h, "thrower").restarts, 2);
}

// A component that ignores its stop until released.
class Stuck final : public Component {
 public:
  std::string name() const override { return "stuck"; }
  Status Run(std::stop_token) override {
    running = true;
    while (!release) std::this_thread::sleep_for(milliseconds(1));
    running = false;
    return absl::OkStatus();
  }
  std::atomic<bool> release{false};
  std::atomic<bool> running{false};
};

TEST_F(HarnessTest, StopReturnsAtItsDeadlineNamingAStuckComponent) {
  HarnessOptions o;
  o.stop_timeout = milliseconds(200);
  auto h = std::make_unique<Harness>(clock, log, o);
  auto* stuck = new Stuck;
  auto* good = new Scripted("good", 0);
  h->Add(std::unique_ptr<Component>(stuck));
  h->Add(std::unique_ptr<Component>(good));
  h->Start();
  ASSERT_TRUE(Eventually([&] { return stuck->running && good->running; }));
  const auto start = std::chrono::steady_clock::now();
  const std::vector<std::string> left = h->Stop();
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_GE(took, milliseconds(190));
  EXPECT_LT(took, milliseconds(2000)) << "Stop waited for a component that never stops";
  EXPECT_EQ(left, std::vector<std::string>{"stuck"});
  EXPECT_FALSE(good->running);
  {
    std::lock_guard<std::mutex> lock(lines_mu);
    bool named = false;
    for (const std::string& l : lines) named = named || l.find("[stuck] error: did not stop within 0.2 s") != std::string::npos;
    EXPECT_TRUE(named);
  }
  stuck->release = true;  // the destructor waits for it
  h.reset();
}

TEST_F(HarnessTest, OneReasonPerWriterAndTheComponentRunsOnlyWithNone) {
  Harness h(clock, log);
  auto* c = new Scripted("plugin", 0);
  h.Add(std::unique_ptr<Component>(c));
  h.Start();
  ASSERT_TRUE(Eventually([&] { return c->running.load(); }));
  // A Node label switches it off; a reload that says enabled: true must not switch it on again.
  ASSERT_TRUE(h.SetOff("plugin", OffReason::kNodeLabel, true, "nvidia.com/gpu.deploy.device-plugin=false"));
  ASSERT_TRUE(Eventually([&] { return !c->running.load() && InfoOf(h, "plugin").state == ComponentState::kDisabled; }));
  ASSERT_TRUE(h.SetEnabled("plugin", true));
  std::this_thread::sleep_for(milliseconds(50));
  EXPECT_FALSE(c->running) << "the config's switch undid a Node label's veto";
  EXPECT_FALSE(InfoOf(h, "plugin").enabled);
  EXPECT_EQ(InfoOf(h, "plugin").off_why, "off by a Node label (nvidia.com/gpu.deploy.device-plugin=false)");
  // The config switches it off too; the label goes: still off (the config says so).
  ASSERT_TRUE(h.SetEnabled("plugin", false));
  ASSERT_TRUE(h.SetOff("plugin", OffReason::kNodeLabel, false));
  std::this_thread::sleep_for(milliseconds(50));
  EXPECT_FALSE(c->running);
  // A hold (start barrier) keeps it enabled but waiting, and not up.
  ASSERT_TRUE(h.SetOff("plugin", OffReason::kStartBarrier, true));
  ASSERT_TRUE(h.SetEnabled("plugin", true));
  ASSERT_TRUE(Eventually([&] { return InfoOf(h, "plugin").state == ComponentState::kWaiting; }));
  EXPECT_TRUE(InfoOf(h, "plugin").enabled);
  EXPECT_FALSE(InfoOf(h, "plugin").up);
  EXPECT_FALSE(h.AllUp());
  std::this_thread::sleep_for(milliseconds(20));
  EXPECT_FALSE(c->running);
  ASSERT_TRUE(h.SetOff("plugin", OffReason::kStartBarrier, false));
  ASSERT_TRUE(Eventually([&] { return c->running.load(); }));
  EXPECT_EQ(InfoOf(h, "plugin").restarts, 0);
  EXPECT_FALSE(h.SetOff("nope", OffReason::kConfig, true));
}

TEST_F(HarnessTest, WaitStoppedReturnsWhenTheRunHasEnded) {
  Harness h(clock, log);
  auto* c = new SlowToStop("labels", milliseconds(500));
  h.Add(std::unique_ptr<Component>(c));
  h.Start();
  ASSERT_TRUE(Eventually([&] { return c->running.load(); }));
  EXPECT_FALSE(h.WaitStopped("labels", milliseconds(20)));  // still running
  ASSERT_TRUE(h.SetOff("labels", OffReason::kUninstall, true));
  EXPECT_FALSE(h.WaitStopped("labels", milliseconds(20)));  // still returning
  EXPECT_TRUE(h.WaitStopped("labels", milliseconds(2000)));
  EXPECT_FALSE(c->running);
  EXPECT_FALSE(h.WaitStopped("nope", milliseconds(1)));
}

TEST(LogTest, JsonLinesAreOneObjectPerLine) {
  std::vector<std::string> lines;
  Log log(Log::Format::kJson, [&](const std::string& l) { lines.push_back(l); });
  log.Warn("plugin", "a \"quoted\"\nmessage");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].find('\n'), std::string::npos);
  EXPECT_NE(lines[0].find("\"level\":\"warning\""), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("\"component\":\"plugin\""), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("\\\"quoted\\\"\\n"), std::string::npos) << lines[0];
}

}  // namespace
}  // namespace gpunode::lifecycle
