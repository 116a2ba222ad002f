// The one exponential backoff of the project: a pause that starts at `initial`, is multiplied by
// `multiplier` after each failure up to `max`, and goes back to `initial` on Reset() (a success, or
// a run that stayed up long enough). With `jitter` j > 0 each pause is drawn uniformly from
// [d, d * (1 + j)) — client-go's wait.Jitter — so a thousand agents that failed together do not
// retry together. Not thread-safe: one per retry loop. The waiting itself is the loop's, on a
// Clock (src/base/clock.h), so tests advance a FakeClock instead of sleeping:
//
//   Backoff backoff({.initial = 1s, .max = 30s, .jitter = 1.0});
//   while (!Try()) { if (!clock.WaitFor(backoff.Next(), stop)) return; }
#ifndef GPUNODE_BASE_BACKOFF_H_
#define GPUNODE_BASE_BACKOFF_H_

#include <chrono>
#include <cstdint>
#include <random>

namespace gpunode {

struct BackoffPolicy {
  std::chrono::milliseconds initial{1000};
  std::chrono::milliseconds max{60000};
  double multiplier = 2.0;
  double jitter = 0.0;  // 0: exact pauses; 1.0: each pause drawn from [d, 2d)
};

class Backoff {
 public:
  // `seed` 0: a random seed (tests pass one for repeatable draws).
  explicit Backoff(BackoffPolicy policy = {}, uint64_t seed = 0);

  // The pause to take now (jittered), and grows the next one.
  std::chrono::milliseconds Next();
  // The base of the next pause, without jitter (for "retrying in N s" and for tests).
  std::chrono::milliseconds current() const { return current_; }
  // Whether the base pause has reached `max`.
  bool at_max() const { return current_ >= policy_.max; }
  void Reset() { current_ = policy_.initial; }
  const BackoffPolicy& policy() const { return policy_; }

 private:
  BackoffPolicy policy_;
  std::chrono::milliseconds current_;
  std::mt19937_64 rng_;
};

}  // namespace gpunode

#endif  // GPUNODE_BASE_BACKOFF_H_
