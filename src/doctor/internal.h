// The per-layer checks behind RunDoctor (src/doctor/checks.cc), exposed for unit tests.
#ifndef GPUNODE_DOCTOR_INTERNAL_H_
#define GPUNODE_DOCTOR_INTERNAL_H_

#include "src/doctor/doctor.h"

namespace gpunode::doctor {

CheckResult CheckHardware(const NodeInventory& inv);
CheckResult CheckKernelDriver(const NodeInventory& inv);
CheckResult CheckUserDriver(const NodeInventory& inv);
CheckResult CheckToolchain(const NodeInventory& inv);
CheckResult CheckContainers(const NodeInventory& inv);
CheckResult CheckOrchestrator(const NodeInventory& inv);

}  // namespace gpunode::doctor

#endif  // GPUNODE_DOCTOR_INTERNAL_H_
