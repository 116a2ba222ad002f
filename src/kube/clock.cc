#include "src/kube/clock.h"

#include <vector>

namespace gpunode::kube {

Clock& SystemClock() {
  static RealClock clock;
  return clock;
}

Clock::TimePoint FakeClock::Now() const {
  std::lock_guard<std::mutex> l(mu_);
  return now_;
}

void FakeClock::WaitUntil(std::condition_variable_any& cv, std::unique_lock<std::mutex>& lock, TimePoint deadline) {
  // The caller holds its mutex from here until cv.wait releases it, and Advance takes that mutex
  // before notifying: a wake-up between our look at the time and the wait cannot be lost.
  const Waiter w{&cv, lock.mutex()};
  std::multiset<Waiter>::iterator it;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (now_ >= deadline) return;
    it = waiters_.insert(w);
  }
  cv.wait(lock);
  std::lock_guard<std::mutex> l(mu_);
  waiters_.erase(it);
}

void FakeClock::Advance(std::chrono::milliseconds d) {
  std::vector<Waiter> wake;
  {
    std::lock_guard<std::mutex> l(mu_);
    now_ += d;
    wake.assign(waiters_.begin(), waiters_.end());
  }
  for (const Waiter& w : wake) {
    std::lock_guard<std::mutex> l(*w.mu);
    w.cv->notify_all();
  }
}

int FakeClock::waiters() const {
  std::lock_guard<std::mutex> l(mu_);
  return static_cast<int>(waiters_.size());
}

}  // namespace gpunode::kube
