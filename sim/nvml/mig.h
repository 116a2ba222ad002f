// The simulated driver's MIG state: GPU instances (GI) and compute instances (CI) per GPU, the
// GI/CI profiles each product offers, and how the layout is kept across processes.
//
// Model (A100/H100/H200, NVIDIA's MIG user guide): a GPU has 8 memory slices and 7 compute
// slices. A GI profile takes `mem_slices` memory slices at one of its fixed start positions
// (1g: 0-6; 1g with two memory slices and 2g: even starts; 3g: 0 or 4; 4g: 0; 7g: 0 taking all 8);
// two GIs may not share a memory slice. The GI id follows the placement as on the real driver
// (7g -> 0; 4g/3g at 0 -> 1, 3g at 4 -> 2; 2-slice GIs at 0,2,4,6 -> 3..6; 1-slice GIs -> 7 + start).
// Inside a GI of s compute slices, CIs of 1, 2, 3, 4 or 7 slices (never more than s, and 3 only
// when s is 3 or 7) take contiguous compute slices.
//
// Where the layout lives: in the process (SimState) and, when the profile is a file, in one
// comment line at the end of that file (`# gpunode-simnvml-mig-state: {json}`), written after every
// change. Comments are invisible to every profile reader, and the simulator's live reload picks
// the line up in other processes that simulate the same file, so they see the new MIG devices
// within GPUNODE_SIM_RELOAD_MS. A profile whose text has no such line is seeded from its own
// `mig:` section. Built-in profiles loaded by name keep the layout in the process only.
#ifndef GPUNODE_SIM_NVML_MIG_H_
#define GPUNODE_SIM_NVML_MIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "sim/support/profile.h"
#include "src/gpu/nvml_abi.h"

namespace gpunode::sim {

// One GI profile of a product (what nvidia-smi mig -lgip lists).
struct GiProfileSpec {
  unsigned profile = 0;     // NVML_GPU_INSTANCE_PROFILE_*
  unsigned id = 0;          // info.id: 19, 20, 15, 14, 9, 5, 0
  std::string name;         // "1g.18gb", "1g.18gb+me"
  unsigned slices = 0;      // compute slices
  unsigned mem_slices = 0;  // memory slices (the placement size)
  uint64_t memory_mib = 0;
  unsigned multiprocessors = 0;
  unsigned copy_engines = 0, decoders = 0, encoders = 0, jpegs = 0, ofas = 0;
  unsigned instance_count = 0;  // on an empty GPU
  std::vector<unsigned> starts;
};

// The GI profiles `gpu` offers (empty when it is not MIG-capable): a table per known product
// (A100 40/80 GB, H100 80 GB, H200 141 GB) and, for other MIG-capable profiles, one derived from
// the GPU's memory and SM count.
std::vector<GiProfileSpec> GiProfilesFor(const Gpu& gpu);

struct SimCi {
  unsigned id = 0;
  unsigned profile = 0;  // NVML_COMPUTE_INSTANCE_PROFILE_*
  unsigned slices = 1;
  unsigned start = 0;
  std::string uuid;
  unsigned multiprocessors = 0;
  uint64_t serial = 0;  // identity of the live object behind a handle
};

struct SimGi {
  unsigned id = 0;
  unsigned profile = 0;  // NVML_GPU_INSTANCE_PROFILE_*
  unsigned start = 0;
  unsigned size = 0;     // memory slices
  std::vector<SimCi> cis;
  uint64_t serial = 0;
};

struct MigRuntime {
  bool current = false;
  bool pending = false;
  std::vector<SimGi> gis;  // sorted by id
};

}  // namespace gpunode::sim

// The opaque GI/CI handles of the ABI. They stay valid (as addresses) for the process; NVML calls
// on one whose object was destroyed answer NVML_ERROR_INVALID_ARGUMENT.
struct nvmlGpuInstance_st {
  unsigned gpu = 0;
  uint64_t serial = 0;
};
struct nvmlComputeInstance_st {
  unsigned gpu = 0;
  uint64_t gi_serial = 0;
  uint64_t serial = 0;
};

#endif  // GPUNODE_SIM_NVML_MIG_H_
