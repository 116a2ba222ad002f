// The per-layer checks behind RunDoctor (src/doctor/checks.cc), exposed for unit tests.
#ifndef GPUNODE_DOCTOR_INTERNAL_H_
#define GPUNODE_DOCTOR_INTERNAL_H_

#include "src/doctor/doctor.h"

namespace gpunode::doctor {

CheckResult CheckHardware(const node::NodeInventory& inv);
CheckResult CheckKernelDriver(const node::NodeInventory& inv);
CheckResult CheckUserDriver(const node::NodeInventory& inv);
CheckResult CheckToolchain(const node::NodeInventory& inv);
CheckResult CheckContainers(const node::NodeInventory& inv);
CheckResult CheckOrchestrator(const node::NodeInventory& inv);

}  // namespace gpunode::doctor

#endif  // GPUNODE_DOCTOR_INTERNAL_H_
