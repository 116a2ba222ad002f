#include "src/base/clock.h"

#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace gpunode {

Clock& SystemClock() {
  static RealClock clock;
  return clock;
}

bool RealClock::WaitUntil(TimePoint deadline, std::stop_token stop) {
  // A plain sleep that a stop ends: std::condition_variable_any is the one wait that takes a
  // stop_token, and its local mutex guards nothing.
  std::mutex m;
  std::condition_variable_any cv;
  std::unique_lock<std::mutex> lock(m);
  cv.wait_until(lock, stop, deadline, [] { return false; });
  return !stop.stop_requested();
}

Clock::TimePoint FakeClock::Now() const {
  absl::MutexLock lock(&mu_);
  return now_;
}

bool FakeClock::WaitUntil(TimePoint deadline, std::stop_token stop) {
  // The Await below is looked at again whenever mu_ is released; a stop is requested without
  // mu_, so its callback takes mu_ once. Declared before `lock`: it is never destroyed (which
  // waits for a running callback) while this thread holds mu_.
  std::stop_callback wake(stop, [this] { absl::MutexLock touch(&mu_); });
  absl::MutexLock lock(&mu_);
  ++waiters_;
  auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop.stop_requested() || now_ >= deadline; };
  mu_.Await(absl::Condition(&done));
  --waiters_;
  return !stop.stop_requested();
}

void FakeClock::WaitUntil(std::condition_variable_any& cv, std::unique_lock<std::mutex>& lock, TimePoint deadline) {
  // The caller holds its mutex from here until cv.wait releases it, and Advance takes that mutex
  // before notifying: a wake-up between our look at the time and the wait cannot be lost.
  std::multiset<CvWaiter>::iterator it;
  {
    absl::MutexLock l(&mu_);
    if (now_ >= deadline) return;
    it = cv_waiters_.insert(CvWaiter{&cv, lock.mutex()});
  }
  cv.wait(lock);
  absl::MutexLock l(&mu_);
  cv_waiters_.erase(it);
}

void FakeClock::Advance(std::chrono::milliseconds d) {
  std::vector<CvWaiter> wake;
  {
    absl::MutexLock lock(&mu_);
    now_ += d;
    wake.assign(cv_waiters_.begin(), cv_waiters_.end());
  }
  for (const CvWaiter& w : wake) {
    std::lock_guard<std::mutex> l(*w.mu);
    w.cv->notify_all();
  }
}

bool FakeClock::AwaitWaiters(int n, std::chrono::milliseconds timeout) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (waiters() < n) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    // Real time: the loop under test runs on its own thread; its clock is this fake one.
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

int FakeClock::waiters() const {
  absl::MutexLock lock(&mu_);
  return waiters_ + static_cast<int>(cv_waiters_.size());
}

}  // namespace gpunode
