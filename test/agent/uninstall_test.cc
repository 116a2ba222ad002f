// The uninstall's DaemonSet watch reconnects with the backoff of src/base/backoff.h on the
// Uninstaller's clock: with a FakeClock, a failed read is tried again exactly when the clock
// passes the pause (0.5 s, 1 s, 2 s...), never because real time passed.
#include <algorithm>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "src/agent/uninstall.h"
#include "src/base/clock.h"
#include "test/testing/free_port.h"

namespace gpunode::agent {
namespace {

using namespace std::chrono_literals;

class Lines {
 public:
  void Add(const std::string& line) {
    std::lock_guard<std::mutex> l(mu_);
    lines_.push_back(line);
  }
  int Count(const std::string& what) {
    std::lock_guard<std::mutex> l(mu_);
    return static_cast<int>(std::count_if(lines_.begin(), lines_.end(),
                                          [&](const std::string& s) { return s.find(what) != std::string::npos; }));
  }
  // Real time: the watcher runs on its own thread.
  bool WaitFor(const std::string& what, int n) {
    for (int i = 0; i < 500 && Count(what) < n; ++i) std::this_thread::sleep_for(10ms);
    return Count(what) >= n;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> lines_;
};

TEST(UninstallWatchTest, AFailedReadIsTriedAgainWhenTheFakeClockPassesTheBackoff) {
  kube::Connection api;  // nothing listens there: every read fails at once
  api.scheme = "http";
  api.host = "127.0.0.1";
  api.port = gpunode::testing::FreePort();
  FakeClock clock;
  Lines lines;
  Log log(Log::Format::kText, [&lines](const std::string& line) { lines.Add(line); });
  Harness harness(clock, log);
  UninstallOptions o;
  o.daemonset = "gpunode/gpunode";
  o.clock = &clock;
  Uninstaller uninstaller(api, o, harness, log);
  std::unique_ptr<Component> watcher = uninstaller.MakeWatcher();
  std::jthread run([&](std::stop_token stop) { (void)watcher->Run(stop); });

  ASSERT_TRUE(lines.WaitFor("; again in 500 ms", 1));
  ASSERT_TRUE(clock.AwaitWaiters(1, 5s));
  std::this_thread::sleep_for(300ms);  // real time passes: no second read
  EXPECT_EQ(lines.Count("; again in"), 1);
  clock.Advance(499ms);
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(lines.Count("; again in"), 1);
  clock.Advance(1ms);
  ASSERT_TRUE(lines.WaitFor("; again in 1000 ms", 1));
  ASSERT_TRUE(clock.AwaitWaiters(1, 5s));
  clock.Advance(1000ms);
  ASSERT_TRUE(lines.WaitFor("; again in 2000 ms", 1));
  EXPECT_EQ(lines.Count("; again in"), 3);
  EXPECT_FALSE(uninstaller.done());
  run.request_stop();  // ends its wait on the fake clock at once
  run.join();
}

}  // namespace
}  // namespace gpunode::agent
