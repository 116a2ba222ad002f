// Time for the controller machinery of src/kube (work queue delays, leader election's retry and
// expiry, the reflector's backoff): one small interface so tests move time by hand.
//
// A seam of its own, not src/agent's Clock: a cluster-side controller must not link the agent.
// When src/base grows the project-wide Clock, this becomes an alias of it (same two calls).
#ifndef GPUNODE_KUBE_CLOCK_H_
#define GPUNODE_KUBE_CLOCK_H_

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>

namespace gpunode::kube {

class Clock {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  virtual ~Clock() = default;
  virtual TimePoint Now() const = 0;
  // Waits on `cv` (its mutex held through `lock`) until it is notified or this clock reaches
  // `deadline`; spurious wake-ups are possible, so callers loop on their condition.
  virtual void WaitUntil(std::condition_variable_any& cv, std::unique_lock<std::mutex>& lock, TimePoint deadline) = 0;
};

// The steady clock.
class RealClock final : public Clock {
 public:
  TimePoint Now() const override { return std::chrono::steady_clock::now(); }
  void WaitUntil(std::condition_variable_any& cv, std::unique_lock<std::mutex>& lock, TimePoint deadline) override {
    cv.wait_until(lock, deadline);
  }
};
// The process's one RealClock (stateless).
Clock& SystemClock();

// Time moves only by Advance, which wakes every wait whose deadline it passes.
class FakeClock final : public Clock {
 public:
  TimePoint Now() const override;
  void WaitUntil(std::condition_variable_any& cv, std::unique_lock<std::mutex>& lock, TimePoint deadline) override;
  void Advance(std::chrono::milliseconds d);
  // Threads inside WaitUntil now (a test waits for a worker to be asleep before advancing).
  int waiters() const;

 private:
  struct Waiter {
    std::condition_variable_any* cv;
    std::mutex* mu;
    bool operator<(const Waiter& o) const { return cv < o.cv || (cv == o.cv && mu < o.mu); }
  };
  mutable std::mutex mu_;
  TimePoint now_{std::chrono::hours(1)};
  std::multiset<Waiter> waiters_;
};

}  // namespace gpunode::kube

#endif  // GPUNODE_KUBE_CLOCK_H_
