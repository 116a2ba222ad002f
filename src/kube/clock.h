// Time for the controller machinery of src/kube (work queue delays, leader election's retry and
// expiry, the reflector's backoff): the project's one Clock (src/base/clock.h), whose
// condition-variable WaitUntil these use, so tests move time by hand with FakeClock::Advance.
#ifndef GPUNODE_KUBE_CLOCK_H_
#define GPUNODE_KUBE_CLOCK_H_

#include "src/base/clock.h"

namespace gpunode::kube {

using ::gpunode::Clock;
using ::gpunode::FakeClock;
using ::gpunode::RealClock;
using ::gpunode::SystemClock;

}  // namespace gpunode::kube

#endif  // GPUNODE_KUBE_CLOCK_H_
