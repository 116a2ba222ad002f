// What one collection pass read: per-GPU samples of the catalogue's fields and the node's
// collection state. The sampler thread (to come) calls CollectSnapshot every interval and
// publishes the result in a SnapshotStore; the HTTP handler renders SnapshotStore::Latest() and
// never calls NVML.
#ifndef GPUNODE_EXPORTER_SAMPLE_H_
#define GPUNODE_EXPORTER_SAMPLE_H_

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "src/base/status.h"
#include "src/exporter/catalogue.h"
#include "src/exporter/mig_sample.h"
#include "src/gpu/gpu.h"
#include "src/gpu/nvml.h"
#include "src/node/unreadable_gpus.h"

namespace gpunode::exporter {

struct GpuSample {
  // Identity labels, dcgm-exporter's spelling and values.
  unsigned index = 0;  // gpu="0" (NVML index = DCGM gpu id)
  std::string uuid;    // UUID="GPU-..." (empty when the GPU could not be read and was never seen)
  std::string
      pci_bus_id;      // pci_bus_id="00000000:18:00.0" (NVML/DCGM form: 8-digit domain, upper case)
  std::string device;  // device="nvidia0" (nvidia<gpu id>)
  // NVIDIA's DRA device name "gpu-<minor>" (pod attribution of DRA claims; no label); "" when
  // the minor number is unknown.
  std::string dra_device;
  std::optional<unsigned> minor;  // /dev/nvidia<minor>: NVIDIA's DRA names of its MIG devices
  std::string model_name;  // modelName="NVIDIA H200"
  std::optional<double> memory_total_mib;  // for the status page (not a default dcgm field)
  // MIG mode is on: the GPU's series are its GPU instances' (mig_sample.h), in GPU instance id
  // order; a GPU in MIG mode without instances keeps its own series (as dcgm-exporter's `-d f`).
  bool mig_enabled = false;
  std::vector<MigInstanceSample> mig_instances;

  // false when the GPU as a whole could not be read (lost, no permission...): no field values then.
  bool healthy = true;
  Status status;  // why not healthy

  // Field values in the catalogue's units; empty = not supported / not produced / failed.
  std::array<std::optional<double>, kFieldCount> values{};
  // Fields whose query failed for a reason other than "not supported".
  std::map<FieldId, Status> errors;
  // XIDs seen by the event watcher since the exporter started: code -> count (rendered as
  // gpunode_xid_errors_total{xid}); `last_xid` feeds DCGM_FI_DEV_XID_ERRORS (0 = none yet).
  std::map<unsigned long long, uint64_t> xid_counts;
  std::optional<unsigned long long> last_xid;

  const std::optional<double>& value(FieldId id) const { return values[static_cast<size_t>(id)]; }
  void set(FieldId id, double v) { values[static_cast<size_t>(id)] = v; }
};

struct NodeSnapshot {
  std::string hostname;                    // Hostname label (NODE_NAME or gethostname)
  std::string driver_version;              // DCGM_FI_DRIVER_VERSION label; empty when unknown
  std::string cuda_driver_version;         // "13.0": the CUDA the driver supports (status page)
  double timestamp_seconds = 0;            // Unix time the collection finished
  double collection_duration_seconds = 0;  // how long the pass took
  Status status;                           // the pass as a whole (e.g. nvmlDeviceGetCount failed)
  std::vector<GpuSample> gpus;             // by NVML index, failed GPUs included (healthy = false)
  // Cumulative over the exporter's life: error label ("DCGM_FI_DEV_POWER_USAGE", "gpu",
  // "device_count", "driver_version") -> count. Rendered as gpunode_collection_errors_total{field}.
  std::map<std::string, uint64_t> collection_errors_total;
};

// Copies gpu::GpuInfo (from gpu::ReadGpu) into a sample: identity and every field gpu::ReadGpu produces; the
// query errors gpu::ReadGpu kept are attached to the fields they concern.
GpuSample SampleFromGpuInfo(const gpu::GpuInfo& info);

// One GPU: gpu::ReadGpu (live metrics on) plus nvmlDeviceGetTotalEnergyConsumption, and for a GPU in
// MIG mode its GPU instances (ReadMigInstances). Never fails: a GPU
// that cannot be read comes back with healthy = false, its status, and its identity from
// `previous` when given (a lost GPU cannot tell its UUID any more).
// `read_energy` = false leaves the energy counter to a slower pass (the exporter's slow sampler).
GpuSample SampleGpu(const gpu::NvmlLibrary& nvml, unsigned index, const GpuSample* previous = nullptr,
                    bool read_energy = true);

// nvmlDeviceGetTotalEnergyConsumption into `sample` (value, or an error unless unsupported).
void ReadEnergy(const gpu::NvmlLibrary& nvml, nvmlDevice_t device, GpuSample& sample);

// GPUs NVML counts but cannot open (lost...) answer nothing, not even their identity. Those
// without one from an earlier pass get it from the bus: `bus` are the driver's GPUs as sysfs and
// /proc tell them (node::NvidiaGpusOnBus, read at start), matched to NVML indices by
// node::MatchUnreadableGpus. Fills pci_bus_id (NVML's form), and UUID and modelName where empty.
void IdentifyUnreadableGpus(NodeSnapshot& snapshot, const std::vector<node::BusGpu>& bus);

// NVML's form of a bus id, as dcgm-exporter labels it: "0000:18:00.0" -> "00000000:18:00.0".
std::string DcgmBusId(const std::string& bus_id);

struct CollectOptions {
  std::string hostname;
  std::vector<node::BusGpu> bus_gpus;  // see IdentifyUnreadableGpus; empty: identities from NVML only
};
// One pass over every GPU NVML counts (SampleGpu plus the fast extra fields of nvml_extras.h;
// fields that need two passes, NVLink bandwidth and the GPM ratios, are not in a one-shot pass). `previous` (the last snapshot, or nullptr) carries the
// error totals and the identities of GPUs that have since failed. One failing GPU leaves the
// others intact. Timestamp and duration come from the system clock.
NodeSnapshot CollectSnapshot(const gpu::NvmlLibrary& nvml, const CollectOptions& options,
                             const NodeSnapshot* previous = nullptr);

// The hand-over between the sampler thread and scrapes: Publish swaps in a new snapshot, Latest
// returns the current one (nullptr before the first pass) without copying it.
class SnapshotStore {
 public:
  void Publish(NodeSnapshot snapshot);
  std::shared_ptr<const NodeSnapshot> Latest() const;

 private:
  mutable absl::Mutex mu_;
  std::shared_ptr<const NodeSnapshot> latest_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gpunode::exporter

#endif  // GPUNODE_EXPORTER_SAMPLE_H_
