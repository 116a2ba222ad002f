// Applying a mig-parted config through NVML: what the GPU Operator's mig-manager does when the
// node label nvidia.com/mig.config changes, in-process. The agent calls ApplyMigConfig with the
// label's value; `gpunode mig apply` is its command-line front end.
//
// Safety:
//   * never on a real GPU unless ApplyOptions::allow_real (the simulated NVML library,
//     libgpunode-simnvml.so, is the only one changed by default); a dry run only reads;
//   * never on a node where a GPU that would change runs compute processes (the plan refuses);
//   * idempotent: a layout already in place plans no step and changes nothing;
//   * stops at the first failing NVML call; the report says what was done until then.
#ifndef GPUNODE_MIG_APPLY_H_
#define GPUNODE_MIG_APPLY_H_

#include <string>
#include <vector>

#include "src/base/status.h"
#include "src/gpu/nvml.h"
#include "src/mig/config.h"
#include "src/mig/plan.h"

namespace gpunode::mig {

// Reads every GPU's MIG mode, offered profiles and placements, GPU/compute instances and compute
// processes. A GPU without MIG support reads as mig_capable = false; per-GPU read failures other
// than "not supported" fail the whole read (naming the GPU and the call).
StatusOr<std::vector<GpuMigState>> ReadMigState(const gpu::NvmlLibrary& nvml);

// Whether `nvml` is gpunode's simulated NVML (the library file is libgpunode-simnvml.so).
bool IsSimulatedNvml(const gpu::NvmlLibrary& nvml);

struct ApplyOptions {
  bool dry_run = false;     // plan only
  bool allow_real = false;  // permit changes on a real (not simulated) NVML
};

struct StepResult {
  Step step;
  Status status;       // OK, or the NVML error that stopped the apply
  std::string detail;  // "GPU instance 7", "pending: NVML_ERROR_IN_USE"
};

struct MigReport {
  std::string config;
  bool dry_run = false;
  bool simulated = false;
  MigPlan plan;                    // the planned steps (before any was run)
  std::vector<StepResult> done;    // what ran, in order (the last one failed if !status.ok())
  Status status;                   // OK when the node now has the layout
  bool changed = false;            // some NVML call changed the node
  std::vector<GpuMigState> before;
  std::vector<GpuMigState> after;  // read again after the changes (== before for a dry run)
};

// Applies config `name` of `file`. Returns an error, changing nothing, when the node cannot be read,
// the config is unknown or cannot be planned (see PlanMigConfig), or the NVML is real and
// `allow_real` is off (kPermissionDenied). Otherwise returns the report; a failure during the
// changes is report.status (the report keeps what was done before it).
StatusOr<MigReport> ApplyMigConfig(const gpu::NvmlLibrary& nvml, const MigConfigFile& file,
                                   const std::string& name, const ApplyOptions& options);

}  // namespace gpunode::mig

#endif  // GPUNODE_MIG_APPLY_H_
