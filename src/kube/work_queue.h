// A controller's work queue with client-go's semantics (our own code), keyed by strings
// ("namespace/name", or a Node's name):
//
//   - A key is in the queue at most once (the dirty set): adding it again before a worker takes
//     it changes nothing.
//   - A key a worker is processing (Get .. Done) is never handed to a second worker. Added again
//     meanwhile, it is processed again after Done: no event is lost, no key is worked on twice at
//     once.
//   - AddAfter(key, d) puts it in after d (on the Clock); AddRateLimited after the key's own
//     backoff: base * 2^failures with jitter, at most max_delay, and never faster than the
//     queue-wide token bucket allows (qps/burst: a thousand failing keys do not retry in one
//     burst). Forget(key) after a success resets its backoff.
//   - ShutDown: Get returns nothing once the queue is empty; adds are ignored.
//
//   WorkQueue q;
//   worker: while (auto key = q.Get()) { Status st = Sync(*key);
//             st.ok() ? q.Forget(*key) : q.AddRateLimited(*key); q.Done(*key); }
#ifndef GPUNODE_KUBE_WORK_QUEUE_H_
#define GPUNODE_KUBE_WORK_QUEUE_H_

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>

#include "src/kube/clock.h"

namespace gpunode::kube {

struct WorkQueueOptions {
  // Per key: base * 2^(failures), the n-th retry; with jitter the delay is drawn from
  // [d, d * (1 + jitter)), and never more than max_delay.
  std::chrono::milliseconds base_delay{5};
  std::chrono::milliseconds max_delay{std::chrono::seconds(300)};
  double jitter = 0.1;
  // Queue-wide: rate-limited adds are spread by a token bucket (client-go: 10/s, burst 100);
  // qps <= 0: none.
  double qps = 10;
  int burst = 100;
  Clock* clock = nullptr;  // nullptr: SystemClock()
  uint64_t seed = 0;       // 0: random
};

class WorkQueue {
 public:
  explicit WorkQueue(WorkQueueOptions options = {});
  ~WorkQueue();
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  void Add(const std::string& key);
  void AddAfter(const std::string& key, std::chrono::milliseconds delay);
  // AddAfter(key, When(key)).
  void AddRateLimited(const std::string& key);
  // The delay the next AddRateLimited of `key` waits (counts a failure).
  std::chrono::milliseconds When(const std::string& key);
  void Forget(const std::string& key);
  int NumRequeues(const std::string& key);

  // Blocks until a key is ready (nullopt: shut down and nothing left). The key is then being
  // processed until Done(key).
  std::optional<std::string> Get();
  void Done(const std::string& key);

  void ShutDown();
  bool ShuttingDown();
  // Keys waiting to be taken (not those being processed nor those waiting for their delay).
  size_t Len();
  // Keys waiting for their delay.
  size_t Waiting();

 private:
  void AddLocked(const std::string& key);
  // Moves the delayed keys whose time has come into the queue; returns the next one's time.
  std::optional<Clock::TimePoint> PromoteLocked();

  WorkQueueOptions o_;
  Clock& clock_;
  std::mutex mu_;
  std::condition_variable_any cv_;
  std::deque<std::string> queue_;
  std::set<std::string> dirty_, processing_;
  std::map<std::string, Clock::TimePoint> delayed_;           // key -> ready at (the earliest asked)
  std::multimap<Clock::TimePoint, std::string> delayed_by_time_;
  bool shutting_down_ = false;
  // Rate limiting.
  std::map<std::string, int> failures_;
  double tokens_;
  Clock::TimePoint last_;
  std::mt19937_64 rng_;
};

}  // namespace gpunode::kube

#endif  // GPUNODE_KUBE_WORK_QUEUE_H_
