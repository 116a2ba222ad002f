// gpunode doctor: checks over a node::NodeInventory, one per layer of the GPU stack, the baseline card,
// and the diagnosis catalogue (every finding has a stable id, a diagnosis and a first action).
// Pure: it reads only the inventory, so every check is unit-tested with hand-made inventories.
#ifndef GPUNODE_DOCTOR_DOCTOR_H_
#define GPUNODE_DOCTOR_DOCTOR_H_

#include <optional>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "src/node/inventory.h"

namespace gpunode::doctor {

enum class CheckStatus { kOk = 0, kSkip = 1, kWarn = 2, kFail = 3 };  // ordered by severity
enum class Layer { kHardware, kKernelDriver, kUserDriver, kToolchain, kContainerRuntime, kOrchestrator };

absl::string_view StatusName(CheckStatus s);  // "ok", "skip", "warn", "fail"
absl::string_view LayerId(Layer l);           // "hardware", "kernel-driver", "user-space-driver", ...
absl::string_view LayerTitle(Layer l);        // "hardware", "kernel driver", "user-space driver", ...

// One diagnosis from the catalogue (docs/doctor.md lists them all).
struct Finding {
  std::string id;        // stable, e.g. "driver.version-mismatch"
  CheckStatus status = CheckStatus::kWarn;
  std::string summary;   // one line
  std::string observed;
  std::string expected;
  std::string diagnosis;  // why this happens
  std::string action;     // what to do first
  std::vector<Layer> layers;  // the layers that disagree (the first is where the check lives)
};

struct CheckResult {
  Layer layer = Layer::kHardware;
  CheckStatus status = CheckStatus::kOk;  // worst finding, or ok / skip
  std::string observed;
  std::string expected;
  std::vector<Finding> findings;
};

// One row of the card per GPU NVML counts, the ones it cannot open included (state lost or
// unreadable: their bus id, model and UUID come from sysfs and /proc when those tell them).
struct GpuCard {
  unsigned index = 0;
  // "ok" (NVML read it), "lost" (NVML_ERROR_GPU_IS_LOST), "unreadable" (NVML counts it but cannot
  // open it for another reason), "unknown" (NVML did not answer at all: the row is the PCI bus's).
  std::string state = "ok";
  std::string error;       // NVML's words when the state is not ok ("GPU is lost"), else ""
  std::string nvml_error;  // "NVML_ERROR_GPU_IS_LOST", "" when none
  std::string model, uuid, bus_id;
  std::optional<uint64_t> memory_total_mib, memory_used_mib;
  std::optional<bool> persistence, ecc, mig;
  std::optional<unsigned> pcie_gen, pcie_gen_max, pcie_width, pcie_width_max;
  std::optional<int> numa_node;
  std::optional<unsigned> temperature_c;
  std::optional<double> power_limit_w;
  std::string compute_capability;
  std::string vbios;
};

struct BaselineCard {
  std::string hostname;
  std::string kernel_release;
  std::string driver_version;
  std::string cuda_version;  // highest CUDA the driver supports
  std::string module_flavor;  // "open", "proprietary", ""
  std::string nvcc;
  std::vector<std::string> container_runtimes;
  int numa_nodes = 0;
  std::vector<GpuCard> gpus;
};

struct DoctorReport {
  std::vector<CheckResult> checks;  // one per Layer, in order
  BaselineCard card;
  CheckStatus overall = CheckStatus::kOk;
  std::optional<Finding> first;     // what to do first: the worst finding of the lowest layer
  node::ProbeTimings timings;
  std::string host_root;
  std::optional<std::string> simulated;
};

DoctorReport RunDoctor(const node::NodeInventory& inv);

// 0 all ok/skip, 1 any warn, 2 any fail.
int ExitCode(const DoctorReport& report);

// apiVersion gpunode/v1, kind DoctorReport (schema in docs/doctor.md).
nlohmann::ordered_json ToJson(const DoctorReport& report);
std::string RenderText(const DoctorReport& report, bool color);

}  // namespace gpunode::doctor

#endif  // GPUNODE_DOCTOR_DOCTOR_H_
