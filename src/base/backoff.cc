#include "src/base/backoff.h"

namespace gpunode {

Backoff::Backoff(BackoffPolicy policy, uint64_t seed)
    : policy_(policy),
      current_(policy.initial),
      rng_(seed != 0 ? seed : std::random_device{}()) {
  if (policy_.multiplier < 1.0) policy_.multiplier = 1.0;
  if (policy_.jitter < 0.0) policy_.jitter = 0.0;
}

std::chrono::milliseconds Backoff::Next() {
  std::chrono::milliseconds pause = current_;
  if (policy_.jitter > 0.0 && pause.count() > 0) {
    std::uniform_real_distribution<double> extra(0.0, policy_.jitter);
    pause += std::chrono::milliseconds(static_cast<int64_t>(static_cast<double>(pause.count()) * extra(rng_)));
  }
  const double grown = static_cast<double>(current_.count()) * policy_.multiplier;
  // As the loops it replaced: the first pause is `initial` even above `max`, the next ones at most `max`.
  current_ = grown >= static_cast<double>(policy_.max.count()) ? policy_.max
                                                               : std::chrono::milliseconds(static_cast<int64_t>(grown));
  return pause;
}

}  // namespace gpunode
