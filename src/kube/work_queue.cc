#include "src/kube/work_queue.h"

#include <algorithm>
#include <cmath>

namespace gpunode::kube {

WorkQueue::WorkQueue(WorkQueueOptions options)
    : o_(options), clock_(options.clock != nullptr ? *options.clock : SystemClock()),
      tokens_(std::max(1, options.burst)), last_(clock_.Now()),
      rng_(options.seed != 0 ? options.seed : std::random_device{}()) {}

WorkQueue::~WorkQueue() { ShutDown(); }

void WorkQueue::AddLocked(const std::string& key) {
  if (shutting_down_ || dirty_.count(key)) return;
  dirty_.insert(key);
  if (processing_.count(key)) return;  // queued again by Done
  queue_.push_back(key);
  cv_.notify_one();
}

void WorkQueue::Add(const std::string& key) {
  std::lock_guard<std::mutex> l(mu_);
  AddLocked(key);
}

void WorkQueue::AddAfter(const std::string& key, std::chrono::milliseconds delay) {
  std::lock_guard<std::mutex> l(mu_);
  if (shutting_down_) return;
  if (delay.count() <= 0) return AddLocked(key);
  const Clock::TimePoint at = clock_.Now() + delay;
  auto it = delayed_.find(key);
  if (it != delayed_.end()) {
    if (it->second <= at) return;  // already due sooner
    auto range = delayed_by_time_.equal_range(it->second);
    for (auto j = range.first; j != range.second; ++j) {
      if (j->second == key) {
        delayed_by_time_.erase(j);
        break;
      }
    }
  }
  delayed_[key] = at;
  delayed_by_time_.emplace(at, key);
  cv_.notify_all();  // a worker waiting for a later key wakes earlier
}

std::chrono::milliseconds WorkQueue::When(const std::string& key) {
  std::lock_guard<std::mutex> l(mu_);
  const int n = failures_[key]++;
  // Per key: base * 2^n, capped, with jitter.
  double d = static_cast<double>(o_.base_delay.count()) * std::pow(2.0, std::min(n, 62));
  d = std::min(d, static_cast<double>(o_.max_delay.count()));
  if (o_.jitter > 0) d *= 1.0 + std::uniform_real_distribution<double>(0, o_.jitter)(rng_);
  d = std::min(d, static_cast<double>(o_.max_delay.count()));
  // Queue-wide: the token bucket's wait (the bucket may go into debt: each add reserves a slot).
  double bucket_ms = 0;
  if (o_.qps > 0) {
    const Clock::TimePoint now = clock_.Now();
    const double elapsed = std::chrono::duration<double>(now - last_).count();
    last_ = now;
    tokens_ = std::min<double>(std::max(1, o_.burst), tokens_ + elapsed * o_.qps);
    tokens_ -= 1;
    if (tokens_ < 0) bucket_ms = -tokens_ / o_.qps * 1000.0;
  }
  return std::chrono::milliseconds(static_cast<int64_t>(std::ceil(std::max(d, bucket_ms))));
}

void WorkQueue::AddRateLimited(const std::string& key) { AddAfter(key, When(key)); }

void WorkQueue::Forget(const std::string& key) {
  std::lock_guard<std::mutex> l(mu_);
  failures_.erase(key);
}

int WorkQueue::NumRequeues(const std::string& key) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = failures_.find(key);
  return it == failures_.end() ? 0 : it->second;
}

std::optional<Clock::TimePoint> WorkQueue::PromoteLocked() {
  const Clock::TimePoint now = clock_.Now();
  while (!delayed_by_time_.empty() && delayed_by_time_.begin()->first <= now) {
    const std::string key = delayed_by_time_.begin()->second;
    delayed_by_time_.erase(delayed_by_time_.begin());
    delayed_.erase(key);
    AddLocked(key);
  }
  if (delayed_by_time_.empty()) return std::nullopt;
  return delayed_by_time_.begin()->first;
}

std::optional<std::string> WorkQueue::Get() {
  std::unique_lock<std::mutex> l(mu_);
  for (;;) {
    const std::optional<Clock::TimePoint> next = PromoteLocked();
    if (!queue_.empty()) break;
    if (shutting_down_) return std::nullopt;
    if (next) {
      clock_.WaitUntil(cv_, l, *next);
    } else {
      cv_.wait(l);
    }
  }
  std::string key = std::move(queue_.front());
  queue_.pop_front();
  processing_.insert(key);
  dirty_.erase(key);
  return key;
}

void WorkQueue::Done(const std::string& key) {
  std::lock_guard<std::mutex> l(mu_);
  processing_.erase(key);
  if (dirty_.count(key)) {
    queue_.push_back(key);
    cv_.notify_one();
  }
}

void WorkQueue::ShutDown() {
  std::lock_guard<std::mutex> l(mu_);
  shutting_down_ = true;
  delayed_.clear();
  delayed_by_time_.clear();
  cv_.notify_all();
}

bool WorkQueue::ShuttingDown() {
  std::lock_guard<std::mutex> l(mu_);
  return shutting_down_;
}

size_t WorkQueue::Len() {
  std::lock_guard<std::mutex> l(mu_);
  return queue_.size();
}

size_t WorkQueue::Waiting() {
  std::lock_guard<std::mutex> l(mu_);
  return delayed_.size();
}

}  // namespace gpunode::kube
