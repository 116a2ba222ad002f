// absl::Mutex as the lock of a std::condition_variable_any, for timed waits: this abseil
// (20220623) times its own Mutex and CondVar waits on the wall clock, so a clock step would
// stretch or cut them; the standard wait uses the steady clock. The caller holds the mutex:
//   absl::MutexLock lock(&mu_);
//   HeldMutex held(mu_);
//   cv_.wait_for(held, std::chrono::seconds(1));   // std::condition_variable_any
#ifndef GPUNODE_BASE_HELD_MUTEX_H_
#define GPUNODE_BASE_HELD_MUTEX_H_

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace gpunode {

class HeldMutex {
 public:
  explicit HeldMutex(absl::Mutex& mu) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) : mu_(mu) {}
  void lock() ABSL_NO_THREAD_SAFETY_ANALYSIS { mu_.Lock(); }
  void unlock() ABSL_NO_THREAD_SAFETY_ANALYSIS { mu_.Unlock(); }

 private:
  absl::Mutex& mu_;
};

}  // namespace gpunode

#endif  // GPUNODE_BASE_HELD_MUTEX_H_
