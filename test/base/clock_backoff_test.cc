// src/base/clock.h and src/base/backoff.h: the one clock and the one backoff of every retry loop.
#include <chrono>
#include <stop_token>
#include <thread>

#include "gtest/gtest.h"
#include "src/base/backoff.h"
#include "src/base/clock.h"

namespace gpunode {
namespace {

using namespace std::chrono_literals;

TEST(BackoffTest, DoublesUpToTheMaximumAndResets) {
  Backoff b({.initial = 1s, .max = 5s});
  EXPECT_EQ(b.Next(), 1s);
  EXPECT_EQ(b.Next(), 2s);
  EXPECT_FALSE(b.at_max());  // the next pause is 4 s
  EXPECT_EQ(b.Next(), 4s);
  EXPECT_TRUE(b.at_max());   // the next pause is the maximum
  EXPECT_EQ(b.Next(), 5s);
  EXPECT_EQ(b.Next(), 5s);
  b.Reset();
  EXPECT_EQ(b.current(), 1s);
  EXPECT_EQ(b.Next(), 1s);
}

TEST(BackoffTest, AFirstPauseAboveTheMaximumIsTakenOnceThenTheMaximum) {
  // As the device plugin's registration retry always did with maxBackoff below 1 s.
  Backoff b({.initial = 1000ms, .max = 400ms});
  EXPECT_EQ(b.Next(), 1000ms);
  EXPECT_EQ(b.Next(), 400ms);
  EXPECT_EQ(b.Next(), 400ms);
  Backoff zero({.initial = 0ms, .max = 400ms});  // MPS's tests: restart at once, every time
  EXPECT_EQ(zero.Next(), 0ms);
  EXPECT_EQ(zero.Next(), 0ms);
}

TEST(BackoffTest, JitteredPausesStayWithinTheirRangeAndDiffer) {
  Backoff b({.initial = 1000ms, .max = 8000ms, .jitter = 1.0}, /*seed=*/42);
  std::chrono::milliseconds base = 1000ms;
  bool differs = false;
  for (int i = 0; i < 6; ++i) {
    const auto pause = b.Next();
    EXPECT_GE(pause, base);
    EXPECT_LT(pause, 2 * base);
    differs = differs || pause != base;
    base = std::min(base * 2, std::chrono::milliseconds(8000));
  }
  EXPECT_TRUE(differs);
  // Two loops that failed together do not retry together.
  Backoff x({.initial = 1000ms, .max = 8000ms, .jitter = 1.0}, 1), y({.initial = 1000ms, .max = 8000ms, .jitter = 1.0}, 2);
  EXPECT_NE(x.Next(), y.Next());
}

TEST(FakeClockTest, AWaitEndsWhenTimeIsAdvancedPastItOrAtAStop) {
  FakeClock clock;
  const auto start = clock.Now();
  bool done = false;
  std::jthread waiter([&](std::stop_token) { done = clock.WaitFor(10s, std::stop_token()); });
  ASSERT_TRUE(clock.AwaitWaiters(1, 5s));
  clock.Advance(9s);
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(clock.waiters(), 1);
  clock.Advance(1s);
  waiter.join();
  EXPECT_TRUE(done);
  EXPECT_EQ(clock.Now() - start, 10s);

  std::stop_source stop;
  bool result = true;
  std::jthread stopped([&](std::stop_token) { result = clock.WaitFor(1h, stop.get_token()); });
  ASSERT_TRUE(clock.AwaitWaiters(1, 5s));
  stop.request_stop();
  stopped.join();
  EXPECT_FALSE(result);
  EXPECT_FALSE(SystemClock().WaitFor(1h, stop.get_token()));  // a stopped token: at once
}

}  // namespace
}  // namespace gpunode
