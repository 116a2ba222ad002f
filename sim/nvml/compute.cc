// The simulated driver's compute mode and compute time slice per GPU: NVML's
// nvmlDeviceGetComputeMode / nvmlDeviceSetComputeMode, and the simulator's own
// gpunodeSimDeviceGetTimeslice / gpunodeSimDeviceSetTimeslice (NVML has no public time-slice call;
// the simulated nvidia-smi, sim/smi, sets it through these, as the real one sets it through the
// driver). Kept across processes in the profile file's state line (sim_state.h, ComputeState).
//
// Error codes, as NVML documents them for the compute mode: UNINITIALIZED before nvmlInit_v2;
// INVALID_ARGUMENT for a bad handle, a null pointer or a mode/slice out of range; NOT_SUPPORTED
// for a MIG device handle, for EXCLUSIVE_THREAD (its support was removed) and for a GPU whose
// `unsupported:` list names `compute_mode` (the time slice: `timeslice`, or a GPU in MIG mode);
// GPU_IS_LOST for a lost GPU. The simulator does not require root for the setters (the real
// driver answers NO_PERMISSION to others).
#include <cstring>
#include <mutex>
#include <string>

#include "nlohmann/json.hpp"
#include "sim/nvml/nvml_abi_more.h"
#include "sim/nvml/sim_state.h"
#include "sim/support/profile.h"
#include "sim/support/str.h"
#include "src/base/json.h"

#define GPUNODE_SIM_DECLARE_COMPUTE(ret, name, params) \
  extern "C" __attribute__((visibility("default"))) ret name params;
GPUNODE_SIM_COMPUTE_FUNCTIONS(GPUNODE_SIM_DECLARE_COMPUTE)
GPUNODE_SIM_PRIVATE_FUNCTIONS(GPUNODE_SIM_DECLARE_COMPUTE)
#undef GPUNODE_SIM_DECLARE_COMPUTE

namespace gpunode::sim {
namespace {

constexpr char kComputeMarker[] = "# gpunode-simnvml-compute-state: ";

// One call: the lock, initialisation, a fresh look at the file (a setter must not write back a
// state another process changed a moment ago), the GPU of a full-GPU handle.
class ComputeCall {
 public:
  explicit ComputeCall(bool force_reload) : state_(SimState::Get()), lock_(state_.mu) {
    if (state_.nvml_refcount == 0 || !state_.loaded()) {
      rc_ = NVML_ERROR_UNINITIALIZED;
    } else {
      state_.MaybeReload(force_reload);
    }
  }
  SimState& state() { return state_; }

  // `field`: the name in the GPU's unsupported list that makes the call NOT_SUPPORTED.
  nvmlReturn_t Gpu(nvmlDevice_t device, const char* field, unsigned* gpu) {
    if (rc_ != NVML_SUCCESS) return rc_;
    if (device == nullptr || !state_.ValidHandle(device)) return NVML_ERROR_INVALID_ARGUMENT;
    const NodeProfile& p = state_.profile();
    if (device->gpu >= p.gpus.size() || p.gpus[device->gpu].lost) return NVML_ERROR_GPU_IS_LOST;
    if (device->mig >= 0) return NVML_ERROR_NOT_SUPPORTED;
    if (p.gpus[device->gpu].Unsupported(field)) return NVML_ERROR_NOT_SUPPORTED;
    if (device->gpu >= state_.compute().size()) return NVML_ERROR_GPU_IS_LOST;
    *gpu = device->gpu;
    return NVML_SUCCESS;
  }

 private:
  SimState& state_;
  std::lock_guard<std::mutex> lock_;
  nvmlReturn_t rc_ = NVML_SUCCESS;
};

}  // namespace

void SimState::SeedCompute(const std::string& text) {
  const NodeProfile& p = *profile_;
  compute_.assign(p.gpus.size(), ComputeState{});
  std::string state;
  if (!file_path_.empty()) {
    state = StateLine(text, kComputeMarker);
  } else if (auto it = compute_memory_.find(profile_ref_); it != compute_memory_.end()) {
    state = it->second;
  }
  if (state.empty()) return;
  auto doc = ParseJson(state, "compute state line");
  if (!doc.ok() || !doc->is_object()) {
    Warn(str::Cat("ignoring the compute state of ", profile_ref_, ": not a JSON object"));
    return;
  }
  for (size_t i = 0; i < p.gpus.size(); ++i) {
    auto it = doc->find(p.gpus[i].uuid);
    if (it == doc->end() || !it->is_object()) continue;
    auto number = [&](const char* key, unsigned max) -> unsigned {
      auto v = it->find(key);
      if (v == it->end() || !v->is_number_unsigned()) return 0;
      const uint64_t n = v->get<uint64_t>();
      return n <= max ? static_cast<unsigned>(n) : 0;
    };
    compute_[i].mode = number("computeMode", NVML_COMPUTEMODE_COUNT - 1);
    compute_[i].timeslice = number("timeslice", 3);
  }
}

void SimState::SaveComputeState() {
  nlohmann::json doc = nlohmann::json::object();
  for (size_t i = 0; i < compute_.size() && i < profile_->gpus.size(); ++i) {
    if (compute_[i].mode == 0 && compute_[i].timeslice == 0) continue;
    doc[profile_->gpus[i].uuid] = {{"computeMode", compute_[i].mode}, {"timeslice", compute_[i].timeslice}};
  }
  const std::string state = DumpJson(doc);
  if (file_path_.empty()) {
    compute_memory_[profile_ref_] = state;
    return;
  }
  WriteStateLine(kComputeMarker, state, "the compute modes and time slices");
}

}  // namespace gpunode::sim

using gpunode::sim::ComputeCall;

nvmlReturn_t nvmlDeviceGetComputeMode(nvmlDevice_t device, nvmlComputeMode_t* mode) {
  ComputeCall c(false);
  unsigned gpu = 0;
  if (auto rc = c.Gpu(device, "compute_mode", &gpu)) return rc;
  if (mode == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *mode = static_cast<nvmlComputeMode_t>(c.state().compute()[gpu].mode);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceSetComputeMode(nvmlDevice_t device, nvmlComputeMode_t mode) {
  ComputeCall c(true);
  unsigned gpu = 0;
  if (auto rc = c.Gpu(device, "compute_mode", &gpu)) return rc;
  if (static_cast<unsigned>(mode) >= NVML_COMPUTEMODE_COUNT) return NVML_ERROR_INVALID_ARGUMENT;
  if (mode == NVML_COMPUTEMODE_EXCLUSIVE_THREAD) return NVML_ERROR_NOT_SUPPORTED;
  auto& state = c.state().compute()[gpu];
  if (state.mode == static_cast<unsigned>(mode)) return NVML_SUCCESS;
  state.mode = static_cast<unsigned>(mode);
  c.state().SaveComputeState();
  return NVML_SUCCESS;
}

nvmlReturn_t gpunodeSimDeviceGetTimeslice(nvmlDevice_t device, unsigned int* timeslice) {
  ComputeCall c(false);
  unsigned gpu = 0;
  if (auto rc = c.Gpu(device, "timeslice", &gpu)) return rc;
  if (c.state().profile().gpus[gpu].mig.enabled) return NVML_ERROR_NOT_SUPPORTED;
  if (timeslice == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *timeslice = c.state().compute()[gpu].timeslice;
  return NVML_SUCCESS;
}

nvmlReturn_t gpunodeSimDeviceSetTimeslice(nvmlDevice_t device, unsigned int timeslice) {
  ComputeCall c(true);
  unsigned gpu = 0;
  if (auto rc = c.Gpu(device, "timeslice", &gpu)) return rc;
  if (c.state().profile().gpus[gpu].mig.enabled) return NVML_ERROR_NOT_SUPPORTED;
  if (timeslice > 3) return NVML_ERROR_INVALID_ARGUMENT;
  auto& state = c.state().compute()[gpu];
  if (state.timeslice == timeslice) return NVML_SUCCESS;
  state.timeslice = timeslice;
  c.state().SaveComputeState();
  return NVML_SUCCESS;
}
