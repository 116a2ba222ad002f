// Time, injectable: the one clock of the project (steady time and a wait that a stop_token ends).
// Loops that wait — a restart backoff, a reconnect, a re-check — take a Clock& (SystemClock() by
// default), so tests move time with FakeClock::Advance instead of sleeping. RealClock is the
// steady clock. Retry pauses come from Backoff (src/base/backoff.h).
#ifndef GPUNODE_BASE_CLOCK_H_
#define GPUNODE_BASE_CLOCK_H_

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <stop_token>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace gpunode {

class Clock {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  virtual ~Clock() = default;
  virtual TimePoint Now() const = 0;
  // Returns true at `deadline`, false as soon as `stop` is requested.
  virtual bool WaitUntil(TimePoint deadline, std::stop_token stop) = 0;
  bool WaitFor(std::chrono::milliseconds d, std::stop_token stop) { return WaitUntil(Now() + d, std::move(stop)); }
  // For code that waits on its own condition variable (src/kube's work queue, leader election):
  // waits on `cv` (its mutex held through `lock`) until notified or this clock reaches `deadline`;
  // spurious wake-ups are possible, so callers loop on their condition.
  virtual void WaitUntil(std::condition_variable_any& cv, std::unique_lock<std::mutex>& lock, TimePoint deadline) = 0;
};

class RealClock final : public Clock {
 public:
  TimePoint Now() const override { return std::chrono::steady_clock::now(); }
  bool WaitUntil(TimePoint deadline, std::stop_token stop) override;
  void WaitUntil(std::condition_variable_any& cv, std::unique_lock<std::mutex>& lock, TimePoint deadline) override {
    cv.wait_until(lock, deadline);
  }
};

// The process's RealClock: the default of every Clock& option.
Clock& SystemClock();

// Time moves only by Advance. WaitUntil returns when Advance passes the deadline (the
// condition-variable form: Advance notifies every such waiter, under its mutex).
class FakeClock final : public Clock {
 public:
  TimePoint Now() const override;
  bool WaitUntil(TimePoint deadline, std::stop_token stop) override;
  void WaitUntil(std::condition_variable_any& cv, std::unique_lock<std::mutex>& lock, TimePoint deadline) override;
  void Advance(std::chrono::milliseconds d);
  // Number of threads inside WaitUntil now, either form (tests wait for the loop to be asleep).
  int waiters() const;
  // Waits (real time, at most `timeout`) until at least `n` threads are inside WaitUntil: a test
  // advances time only once the loop under test is waiting. false at the timeout.
  bool AwaitWaiters(int n, std::chrono::milliseconds timeout) const;

 private:
  mutable absl::Mutex mu_;
  TimePoint now_ ABSL_GUARDED_BY(mu_){std::chrono::hours(1)};
  int waiters_ ABSL_GUARDED_BY(mu_) = 0;
  struct CvWaiter {
    std::condition_variable_any* cv;
    std::mutex* mu;
    bool operator<(const CvWaiter& o) const { return cv < o.cv || (cv == o.cv && mu < o.mu); }
  };
  std::multiset<CvWaiter> cv_waiters_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gpunode

#endif  // GPUNODE_BASE_CLOCK_H_
