// The MIG layout of a node's GPUs as NVML reports it, and the pure planner that turns a current
// layout plus a mig-parted config into ordered NVML steps. No NVML here: the applier
// (src/mig/apply.h) reads the state and runs the steps.
#ifndef GPUNODE_MIG_PLAN_H_
#define GPUNODE_MIG_PLAN_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "src/base/status.h"
#include "src/mig/config.h"

namespace gpunode::mig {

// A GPU instance profile the GPU offers (nvmlDeviceGetGpuInstanceProfileInfoV + placements).
struct GiProfile {
  unsigned profile = 0;  // NVML_GPU_INSTANCE_PROFILE_*
  unsigned id = 0;       // info.id, what the create/list calls take
  std::string name;      // "1g.18gb", "1g.18gb+me"
  unsigned slices = 0;   // compute slices
  unsigned instance_count = 0;
  uint64_t memory_mib = 0;
  unsigned multiprocessors = 0;
  unsigned placement_size = 0;   // memory slices
  std::vector<unsigned> starts;  // possible placements; empty: not known (MIG off)
};

struct CiState {
  unsigned id = 0;
  unsigned profile = 0;  // NVML_COMPUTE_INSTANCE_PROFILE_* (== its id)
  unsigned slices = 0;
  std::string name;  // "1g.18gb" or "1c.3g.71gb"
};

struct GiState {
  unsigned id = 0;
  unsigned profile = 0;     // NVML_GPU_INSTANCE_PROFILE_*
  unsigned profile_id = 0;  // info.id
  std::string name;         // "3g.71gb"
  unsigned start = 0, size = 0;
  std::vector<CiState> cis;
};

struct GpuMigState {
  unsigned index = 0;
  std::string uuid;
  std::string name;     // "NVIDIA H200"
  uint32_t pci_id = 0;  // (device << 16) | vendor, 0x233510DE: what device-filter matches
  bool mig_capable = false;
  bool mig_current = false;
  bool mig_pending = false;
  std::vector<GiProfile> profiles;
  std::vector<GiState> gis;
  std::vector<unsigned> process_pids;  // compute processes on the GPU or its MIG devices
  std::string process_error;           // set when the process list could not be read
};

// mig-parted's view of a GPU: MIG device name -> count ("1g.18gb": 7).
std::vector<std::pair<std::string, unsigned>> DeviceCounts(const GpuMigState& gpu);

enum class StepKind { kDestroyCi, kDestroyGi, kDisableMig, kEnableMig, kCreateGi, kCreateCi };
std::string StepKindName(StepKind kind);  // "destroy-ci", ...

struct Step {
  StepKind kind = StepKind::kEnableMig;
  unsigned gpu = 0;
  // Destroy: the existing instance. Create CI: the GI (an existing id, or -1 for `new_gi`).
  int gi_id = -1;
  int ci_id = -1;
  int new_gi = -1;  // kCreateGi: its number in the plan; kCreateCi: the planned GI it goes in
  std::string name;  // the profile ("1g.18gb", "1c.3g.71gb")
  unsigned gi_profile = 0;     // kCreateGi: NVML_GPU_INSTANCE_PROFILE_*
  unsigned gi_profile_id = 0;  // kCreateGi: info.id
  std::optional<unsigned> start;  // kCreateGi: the placement (size = placement_size)
  unsigned size = 0;
  unsigned ci_profile = 0;  // kCreateCi: NVML_COMPUTE_INSTANCE_PROFILE_*

  // "GPU 0: create GPU instance 1g.18gb at slice 6".
  std::string Describe() const;
};

struct GpuPlan {
  unsigned gpu = 0;
  bool selected = false;  // some entry of the config selects this GPU
  int entry = -1;         // which one
  bool changes = false;
  std::vector<std::pair<std::string, unsigned>> wanted;  // device counts ("1g.18gb": 7)
  bool want_mig = false;
};

struct MigPlan {
  std::string config;
  std::vector<GpuPlan> gpus;
  std::vector<Step> steps;
  bool empty() const { return steps.empty(); }
};

// Plans config `name` of `file` over `gpus`. Errors (kInvalidArgument / kFailedPrecondition, the
// message says why and names the GPU): no such config (lists the names); a GPU selected by two
// entries; an entry naming a GPU index the node lacks; MIG on a GPU that is not MIG-capable; a
// device name the GPU does not offer (lists those it does); a layout that does not fit (the
// slices it needs vs. 8, or no placement); changes on a GPU with compute processes (pids listed)
// or whose processes could not be read. GPUs no entry selects are left as they are, as
// mig-parted does. GPU instances that already match the wanted layout are kept; the rest is
// destroyed and created anew.
StatusOr<MigPlan> PlanMigConfig(const std::vector<GpuMigState>& gpus, const MigConfigFile& file,
                                const std::string& name);

}  // namespace gpunode::mig

#endif  // GPUNODE_MIG_PLAN_H_
