// Process-wide state of the simulated NVML/libcuda library (libgpunode-simnvml.so).
//
// The profile comes from the file (or built-in profile name) in the environment variable
// GPUNODE_SIM_PROFILE, read when NVML's reference count goes from 0 to 1 (and by cuInit /
// cuDriverGetVersion when NVML is not initialised). While loaded, the file is re-read when its
// mtime, size or inode changes, checked at most every GPUNODE_SIM_RELOAD_MS milliseconds
// (default 50) on API calls, so a test or a demo can edit a running node. A re-read that fails
// to parse keeps the previous profile (and says so on stderr).
//
// Every entry point takes SimState::mu for its whole duration, except nvmlEventSetWait_v2, which
// drops it while sleeping.
#ifndef GPUNODE_SIM_NVML_SIM_STATE_H_
#define GPUNODE_SIM_NVML_SIM_STATE_H_

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "sim/nvml/mig.h"
#include "sim/support/profile.h"
#include "src/gpu/nvml_abi.h"

// The opaque handle types of the ABI, defined here. Handles live for the life of the process
// (their addresses stay valid across nvmlShutdown and profile reloads).
struct nvmlDevice_st {
  unsigned gpu;
  int mig;  // -1: the full GPU; else the slot of nvmlDeviceGetMigDeviceHandleByIndex
};

struct nvmlEventSet_st {
  struct Registration {
    unsigned gpu = 0;
    unsigned long long mask = 0;
    size_t delivered = 0;  // events of this GPU already consumed by this set
    bool lost_reported = false;
  };
  std::vector<Registration> regs;
};

// A GPM sample buffer (nvmlGpmSampleAlloc .. nvmlGpmSampleFree). nvmlGpmSampleGet records the
// GPU, an order number and the profile's GPM metric values at that moment; nvmlGpmMetricsGet
// answers from the newer sample of the pair.
struct nvmlGpmSample_st {
  bool filled = false;
  unsigned gpu = 0;
  uint64_t sequence = 0;  // 1, 2, ... in the order nvmlGpmSampleGet filled samples
  std::map<unsigned, double> metrics;
};

namespace gpunode::sim {

class SimState {
 public:
  static SimState& Get();  // never destroyed

  std::mutex mu;

  // All of the below require `mu`.

  // Reads the profile named by GPUNODE_SIM_PROFILE afresh. Failure: NVML_ERROR_LIBRARY_NOT_FOUND
  // (with one message on stderr per process).
  nvmlReturn_t Load();
  bool loaded() const { return profile_ != nullptr; }
  // Re-reads the profile file if it changed (rate-limited unless `force`).
  void MaybeReload(bool force = false);
  // An inotify descriptor that becomes readable when the profile file's folder changes (the file
  // rewritten or renamed over), made on first use; -1 for a built-in profile or without inotify.
  // nvmlEventSetWait_v2 sleeps on it, as the real driver sleeps in the kernel: an event written to
  // the profile is seen at once, and an idle waiter costs no CPU. change_generation counts the
  // wake-ups consumed, so that a second waiter knows to look again.
  int ChangeFd();
  uint64_t change_generation = 0;
  const NodeProfile& profile() const { return *profile_; }

  nvmlDevice_t Handle(unsigned gpu, int mig);
  bool ValidHandle(nvmlDevice_t device) const { return handle_set_.count(device) > 0; }

  // MIG (sim/nvml/mig.cc, sim/nvml/mig.h). The GI/CI layout of each GPU, seeded on every (re)load
  // from the state line of the profile text (or the in-process copy for built-ins), else from the
  // profile's `mig:` section.
  std::vector<MigRuntime>& mig() { return mig_; }
  // The profile, writable: the MIG calls rewrite gpus[i].mig (mode and MIG devices) from mig().
  NodeProfile& mutable_profile() { return *profile_; }
  // After a MIG change: rewrites gpus[gpu].mig from mig()[gpu] and saves the layout (see mig.h).
  void CommitMig(unsigned gpu);
  uint64_t NextMigSerial() { return ++mig_serial_; }
  nvmlGpuInstance_t GiHandle(unsigned gpu, uint64_t serial);
  nvmlComputeInstance_t CiHandle(unsigned gpu, uint64_t gi_serial, uint64_t serial);
  bool ValidGiHandle(nvmlGpuInstance_t h) const { return gi_handle_set_.count(h) > 0; }
  bool ValidCiHandle(nvmlComputeInstance_t h) const { return ci_handle_set_.count(h) > 0; }

  // Compute mode and time slice per GPU (sim/nvml/compute.cc), kept like the MIG layout: in one
  // comment line of the profile file (`# gpunode-simnvml-compute-state: {"<uuid>": {"computeMode":
  // 3, "timeslice": 2}}`, GPUs at DEFAULT/0 left out), seeded on every (re)load, written after
  // every change, so that other processes simulating the same file (the simulated nvidia-smi, an
  // agent) see it within GPUNODE_SIM_RELOAD_MS; built-in profiles keep it in the process only.
  struct ComputeState {
    unsigned mode = 0;       // nvmlComputeMode_t
    unsigned timeslice = 0;  // 0..3
  };
  std::vector<ComputeState>& compute() { return compute_; }
  void SaveComputeState();

  int nvml_refcount = 0;
  bool cuda_initialized = false;
  std::set<nvmlEventSet_t> event_sets;
  std::set<nvmlGpmSample_t> gpm_samples;
  uint64_t gpm_sequence = 0;

 private:
  SimState() = default;
  void Warn(const std::string& message);

  std::unique_ptr<NodeProfile> profile_;
  std::string file_path_;  // empty for built-in profiles (no reload)
  struct FileSignature {
    int64_t mtime_ns = -1;
    int64_t size = -1;
    uint64_t inode = 0;
    bool operator==(const FileSignature&) const = default;
  };
  FileSignature signature_;
  std::chrono::steady_clock::time_point last_check_;
  std::chrono::milliseconds reload_interval_{50};
  int change_fd_ = -2;  // -2: not made yet
  std::deque<nvmlDevice_st> handles_;
  std::map<std::pair<unsigned, int>, nvmlDevice_t> handle_index_;
  std::set<nvmlDevice_t> handle_set_;
  std::set<std::string> warned_;

  // Replaces the line that starts with `marker` at the end of the profile file by marker + state
  // (other lines, other markers' included, are kept). `what` names it in warnings.
  void WriteStateLine(const char* marker, const std::string& state, const char* what);
  // The state after the last line starting with `marker` in `text` ("" when none).
  static std::string StateLine(const std::string& text, const char* marker);

  // Compute mode and time slice (compute.cc).
  void SeedCompute(const std::string& text);
  std::vector<ComputeState> compute_;
  std::map<std::string, std::string> compute_memory_;  // built-in profile name -> state JSON

  // MIG (mig.cc).
  void SeedMig(const std::string& text);
  void SaveMigState();
  std::vector<MigRuntime> mig_;
  uint64_t mig_serial_ = 0;
  std::string profile_ref_;                        // GPUNODE_SIM_PROFILE as given
  std::map<std::string, std::string> mig_memory_;  // built-in profile name -> state JSON
  std::map<uint64_t, std::unique_ptr<nvmlGpuInstance_st>> gi_handles_;
  std::map<uint64_t, std::unique_ptr<nvmlComputeInstance_st>> ci_handles_;
  std::set<nvmlGpuInstance_t> gi_handle_set_;
  std::set<nvmlComputeInstance_t> ci_handle_set_;
};

}  // namespace gpunode::sim

#endif  // GPUNODE_SIM_NVML_SIM_STATE_H_
