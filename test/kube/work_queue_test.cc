// The work queue's client-go semantics: one entry per key, never two workers on one key, a key
// added while processed is processed again, per-key backoff with jitter under a queue-wide cap,
// delays on the Clock, shut down.
#include "src/kube/work_queue.h"

#include <atomic>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace gpunode::kube {
namespace {

using std::chrono::milliseconds;

TEST(WorkQueue, AKeyAddedTwiceBeforeAWorkerTakesItIsThereOnce) {
  WorkQueue q;
  q.Add("a");
  q.Add("b");
  q.Add("a");
  EXPECT_EQ(q.Len(), 2u);
  EXPECT_EQ(q.Get(), "a");
  EXPECT_EQ(q.Get(), "b");
  EXPECT_EQ(q.Len(), 0u);
}

TEST(WorkQueue, AKeyAddedWhileProcessedIsProcessedAgainAfterDoneNotBefore) {
  WorkQueue q;
  q.Add("a");
  auto k = q.Get();
  ASSERT_EQ(k, "a");
  q.Add("a");  // an event while a worker syncs it
  EXPECT_EQ(q.Len(), 0u) << "not handed to a second worker while the first has it";
  q.Done("a");
  EXPECT_EQ(q.Len(), 1u);
  EXPECT_EQ(q.Get(), "a");
  q.Done("a");
  EXPECT_EQ(q.Len(), 0u);
}

TEST(WorkQueue, ManyWorkersNeverProcessOneKeyAtOnceAndNoAddIsLost) {
  WorkQueue q;
  constexpr int kKeys = 20;
  std::vector<std::atomic<int>> busy(kKeys), processed(kKeys);
  std::atomic<int> overlaps{0};
  std::vector<std::thread> workers;
  for (int w = 0; w < 8; ++w) {
    workers.emplace_back([&] {
      while (auto key = q.Get()) {
        const int i = std::stoi(*key);
        if (busy[i].fetch_add(1) != 0) ++overlaps;
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        busy[i].fetch_sub(1);
        ++processed[i];
        q.Done(*key);
      }
    });
  }
  for (int round = 0; round < 200; ++round) {
    for (int i = 0; i < kKeys; ++i) q.Add(std::to_string(i));
  }
  // Drained: every key was processed after its last add.
  while (q.Len() > 0) std::this_thread::sleep_for(milliseconds(5));
  std::this_thread::sleep_for(milliseconds(20));
  q.ShutDown();
  for (auto& t : workers) t.join();
  EXPECT_EQ(overlaps.load(), 0);
  for (int i = 0; i < kKeys; ++i) EXPECT_GE(processed[i].load(), 1) << i;
}

TEST(WorkQueue, RateLimitedRetriesBackOffExponentiallyWithJitterUpToTheCap) {
  FakeClock clock;
  WorkQueueOptions o;
  o.base_delay = milliseconds(10);
  o.max_delay = milliseconds(1000);
  o.jitter = 0.5;
  o.qps = 0;  // the per-key part alone
  o.clock = &clock;
  o.seed = 7;
  WorkQueue q(o);
  int64_t expected = 10;
  for (int n = 0; n < 12; ++n) {
    const int64_t d = q.When("a").count();
    EXPECT_GE(d, std::min<int64_t>(expected, 1000)) << n;
    EXPECT_LE(d, 1000) << n;
    if (expected < 1000) {
      EXPECT_LT(d, expected * 3 / 2 + 1) << n;
    }
    expected *= 2;
  }
  EXPECT_EQ(q.NumRequeues("a"), 12);
  EXPECT_EQ(q.When("b").count() < 16, true) << "each key has its own backoff";
  q.Forget("a");
  EXPECT_EQ(q.NumRequeues("a"), 0);
  EXPECT_LT(q.When("a").count(), 16);
}

TEST(WorkQueue, AQueueWideBucketSpreadsTheRetriesOfManyKeys) {
  FakeClock clock;
  WorkQueueOptions o;
  o.base_delay = milliseconds(1);
  o.jitter = 0;
  o.qps = 10;
  o.burst = 5;
  o.clock = &clock;
  WorkQueue q(o);
  std::vector<int64_t> d;
  for (int i = 0; i < 10; ++i) d.push_back(q.When("k" + std::to_string(i)).count());
  for (int i = 0; i < 5; ++i) EXPECT_LE(d[i], 1) << i;  // the burst
  EXPECT_GE(d[5], 100);                                 // then 10 per second
  EXPECT_GE(d[9], 500);
}

TEST(WorkQueue, AddAfterWaitsForTheClock) {
  FakeClock clock;
  WorkQueueOptions o;
  o.clock = &clock;
  WorkQueue q(o);
  q.AddAfter("later", milliseconds(5000));
  q.AddAfter("later", milliseconds(9000));  // the earlier time stays
  EXPECT_EQ(q.Waiting(), 1u);
  std::atomic<bool> got{false};
  std::thread worker([&] {
    auto k = q.Get();
    got = k.has_value() && *k == "later";
  });
  while (clock.waiters() == 0) std::this_thread::sleep_for(milliseconds(1));
  clock.Advance(milliseconds(4000));
  std::this_thread::sleep_for(milliseconds(50));
  EXPECT_FALSE(got.load());
  clock.Advance(milliseconds(1000));
  worker.join();
  EXPECT_TRUE(got.load());
  EXPECT_EQ(q.Waiting(), 0u);
}

TEST(WorkQueue, ShutDownHandsOutWhatIsLeftThenEndsGet) {
  WorkQueue q;
  q.Add("a");
  q.ShutDown();
  q.Add("b");  // ignored
  EXPECT_EQ(q.Get(), "a");
  EXPECT_EQ(q.Get(), std::nullopt);
  WorkQueue idle;
  std::thread t([&] { EXPECT_EQ(idle.Get(), std::nullopt); });
  std::this_thread::sleep_for(milliseconds(20));
  idle.ShutDown();
  t.join();
}

}  // namespace
}  // namespace gpunode::kube
