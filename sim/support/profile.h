// Node profiles: the description of a simulated GPU node (its hardware, kernel module, driver
// libraries and a few host files), read from YAML or JSON (docs/profiles.md is the schema).
//
// A profile drives two fakes, both at the real boundary of the hardware:
//   * WriteHostRoot() writes the files a real host has (procfs, sysfs, /dev, CUDA toolkit,
//     runtime configs) under a directory, for gpunode --host-root;
//   * libgpunode-simnvml.so (sim/nvml) answers NVML's and libcuda's C ABI from it.
//
// Parsing is strict: an unknown key, a wrong type, a bad enum value or a missing required field is
// an InvalidArgument error naming the origin and the path of the bad key, e.g.
//   profile dgx.yaml: gpus[3].pcie.gen: expected an integer 1-6, got "x"
// Malformed input never crashes and never throws.
#ifndef GPUNODE_SIM_SUPPORT_PROFILE_H_
#define GPUNODE_SIM_SUPPORT_PROFILE_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "src/base/status.h"
#include "src/gpu/nvml_abi.h"

namespace gpunode::sim {

inline constexpr std::string_view kProfileApiVersion = "gpunode/v1";
inline constexpr std::string_view kProfileKind = "NodeProfile";

enum class ModuleFlavor { kOpen, kProprietary };

struct KernelModule {
  bool loaded = true;
  ModuleFlavor flavor = ModuleFlavor::kOpen;
  std::string version;  // "580.95.05"; defaults to driver.version
};

struct CudaToolkit {
  std::string version;       // "12.4.1" (version.json "cuda")
  std::string nvcc_version;  // "12.4.131" (version.json "cuda_nvcc"); defaults from version
};

// A PCI function that is not a GPU: an NVSwitch, another NVIDIA function, a NIC, a host bridge.
struct PciFunction {
  std::string bus_id;  // sysfs form, lower case: "0000:05:00.0"
  uint16_t vendor = 0x10de;
  uint16_t device = 0;
  uint32_t class_code = 0;  // 0x068000 (bridge, NVSwitch), 0x020000 (Ethernet), ...
  int numa_node = -1;
  std::string driver;  // bound driver name, empty when unbound
  std::string name;    // free text, e.g. "NVSwitch"
};

struct Host {
  std::string hostname = "gpunode-sim";
  std::string kernel_release = "6.8.0-85-generic";
  int numa_nodes = 1;
  KernelModule module;
  bool nouveau_loaded = false;
  bool nvidia_utils = true;  // the driver's utilities (usr/bin/nvidia-smi) are installed
  std::optional<CudaToolkit> cuda_toolkit;
  std::vector<PciFunction> pci_devices;      // besides the GPUs
  std::map<std::string, std::string> files;  // absolute host path -> content, written verbatim
  std::vector<std::string> empty_files;      // absolute host paths (sockets as plain files)
};

struct Driver {
  std::string version;       // user-space NVML/libcuda version, "580.95.05" (required)
  std::string nvml_version;  // "13.580.95.05"; defaults to <cuda major>.<version>
  std::string cuda_version;  // "13.0" (required)
  // What nvmlInit_v2 returns. Unset: derived (module not loaded -> DRIVER_NOT_LOADED,
  // module version != driver version -> LIB_RM_VERSION_MISMATCH, else SUCCESS).
  std::optional<nvmlReturn_t> init_error;
  // What cuInit returns (0, 3, 35, 100, 803, ...). Unset: derived like init_error
  // (no module or no usable GPU -> 100, version mismatch -> 803).
  std::optional<int> cuda_init_error;
};

struct EccCounters {
  bool enabled = true;
  bool pending = true;  // pending mode after reboot; defaults to `enabled`
  uint64_t corrected_volatile = 0;
  uint64_t uncorrected_volatile = 0;
  uint64_t corrected_aggregate = 0;
  uint64_t uncorrected_aggregate = 0;
};

struct RemappedRows {
  unsigned correctable = 0;
  unsigned uncorrectable = 0;
  bool pending = false;
  bool failure = false;
};

struct PcieLink {
  unsigned gen = 4;
  unsigned width = 16;
  unsigned max_gen = 4;  // max of GPU and slot (nvmlDeviceGetMaxPcieLinkGeneration)
  unsigned max_width = 16;
  unsigned gpu_max_gen = 4;  // what the GPU itself can do (nvmlDeviceGetGpuMaxPcieLinkGeneration)
};

struct MigDevice {
  std::string profile;  // "3g.40gb"
  std::string uuid;     // "MIG-..."; generated when absent
  unsigned gpu_instance_id = 0;
  unsigned compute_instance_id = 0;
  unsigned slices = 1;          // gpuInstanceSliceCount
  unsigned compute_slices = 1;  // computeInstanceSliceCount; defaults to slices
  uint64_t memory_mib = 0;
  unsigned multiprocessors = 0;
};

struct Mig {
  bool enabled = false;
  bool pending = false;      // defaults to `enabled`
  unsigned max_devices = 0;  // 0: the GPU is not MIG-capable (MIG calls say NOT_SUPPORTED)
  std::vector<MigDevice> devices;
};

struct NvLink {
  unsigned link = 0;
  bool active = true;
  std::string remote_bus_id;  // sysfs form; a GPU or an entry of host.pci_devices
};

struct Process {
  unsigned pid = 0;
  uint64_t used_mib = 0;
  std::optional<unsigned> gpu_instance_id;
  std::optional<unsigned> compute_instance_id;
};

enum class EventType { kXid, kSingleBitEcc, kDoubleBitEcc, kPState, kClock };

struct Event {
  EventType type = EventType::kXid;
  uint64_t data = 0;  // the XID for kXid
  std::optional<unsigned> gpu_instance_id;
  std::optional<unsigned> compute_instance_id;
};

// Cumulative NVLink data counters of all links (NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX/RX, KiB).
struct NvLinkThroughput {
  uint64_t tx_kib = 0;
  uint64_t rx_kib = 0;
};

// GPU Performance Monitoring (Hopper and newer): whether nvmlGpmQueryDeviceSupport says yes, and
// the value nvmlGpmMetricsGet gives for each metric the profile names (nvmlGpmMetricId_t ->
// value as NVML gives it: percent 0-100, or MiB/s). Metrics not named are NOT_SUPPORTED.
struct Gpm {
  bool supported = true;
  std::map<unsigned, double> metrics;
};

// Field names accepted in `unsupported:`; each makes the NVML calls of that field return
// NVML_ERROR_NOT_SUPPORTED on that GPU.
const std::vector<std::string_view>& UnsupportedFieldNames();

struct Gpu {
  std::string name;           // "NVIDIA H200" (required)
  std::string uuid;           // "GPU-..."; generated when absent
  std::string bus_id;         // sysfs form, lower case: "0000:18:00.0" (required)
  uint16_t device_id = 0;     // PCI device id, 0x2335 (required)
  uint32_t subsystem_id = 0;  // NVML form: (subsystem device << 16) | subsystem vendor
  unsigned minor = 0;         // defaults to the index
  std::string vbios = "96.00.00.00.01";
  uint64_t memory_total_mib = 0;  // required
  uint64_t memory_used_mib = 0;
  uint64_t memory_reserved_mib = 0;
  bool persistence = true;
  EccCounters ecc;
  bool retired_pages_pending = false;
  RemappedRows remapped_rows;
  PcieLink pcie;
  int numa_node = 0;        // -1: no NUMA affinity
  std::string pcie_switch;  // GPUs behind the same switch are NVML_TOPOLOGY_SINGLE apart
  int cc_major = 0;         // compute_capability "9.0" (required)
  int cc_minor = 0;
  unsigned multiprocessors = 0;
  unsigned temperature_c = 35;
  double power_usage_w = 70;
  double power_limit_w = 700;
  double power_enforced_limit_w = 700;  // defaults to power_limit_w
  uint64_t energy_mj = 0;
  unsigned clock_sm_mhz = 1980;
  unsigned clock_mem_mhz = 2619;
  unsigned clock_graphics_mhz = 1980;  // defaults to clock_sm_mhz
  unsigned clock_video_mhz = 1710;
  unsigned utilization_gpu = 0;
  unsigned utilization_memory = 0;
  // Optional queries: absent = NVML_ERROR_NOT_SUPPORTED, as on boards without them.
  std::optional<unsigned> memory_temp_c;      // field NVML_FI_DEV_MEMORY_TEMP
  std::optional<unsigned> pcie_replay_count;  // nvmlDeviceGetPcieReplayCounter
  std::optional<unsigned> encoder_util;       // nvmlDeviceGetEncoderUtilization, %
  std::optional<unsigned> decoder_util;       // nvmlDeviceGetDecoderUtilization, %
  std::optional<NvLinkThroughput> nvlink_throughput_kib;
  std::optional<Gpm> gpm;
  Mig mig;
  std::vector<NvLink> nvlinks;
  std::vector<Process> processes;
  bool lost = false;
  std::vector<Event> events;
  std::set<std::string> unsupported;
  bool on_pci_bus = true;  // false: NVML sees it but sysfs does not (misconfigured passthrough)

  bool Unsupported(std::string_view field) const {
    return unsupported.count(std::string(field)) > 0;
  }
};

// Explicit topology: `topology: [{a: 0, b: 1, level: NVLINK|SINGLE|...}]` overrides the
// switch/NUMA derivation for those pairs.
struct TopologyOverride {
  unsigned a = 0;
  unsigned b = 0;
  nvmlGpuTopologyLevel_t level = NVML_TOPOLOGY_SYSTEM;
};

struct NodeProfile {
  std::string name;
  std::string description;
  Host host;
  Driver driver;
  std::vector<Gpu> gpus;
  std::vector<TopologyOverride> topology;

  // nvmlInit_v2's result (explicit or derived, see Driver::init_error).
  nvmlReturn_t EffectiveInitError() const;
  // cuInit's result (explicit or derived, see Driver::cuda_init_error).
  int EffectiveCudaInitError() const;
  // NVML's topology answer for two GPU indexes (both < gpus.size()).
  nvmlGpuTopologyLevel_t CommonAncestor(unsigned a, unsigned b) const;
  // The GPU at sysfs bus id `bus_id`, or nullptr.
  const Gpu* FindGpuByBusId(std::string_view bus_id) const;
};

// Names of the built-in profiles (data/profiles/*.yaml, compiled in), sorted.
std::vector<std::string> BuiltinProfileNames();

struct ProfileSource {
  std::string name;       // "dgx-h200", or the file name without extension
  std::string file_path;  // empty for built-ins
  std::string text;
};

// `ref` is a built-in name ("dgx-h200", "dgx-h200.yaml") or the path of a YAML/JSON file.
// NotFound lists the built-in names.
StatusOr<ProfileSource> ResolveProfile(std::string_view ref);

// Parses and validates a profile. `origin` names the input in errors ("dgx.yaml").
StatusOr<NodeProfile> ParseProfile(std::string_view text, std::string_view origin);

// Reads a profile file (ResolveProfile + ParseProfile for a path).
StatusOr<NodeProfile> LoadProfileFile(const std::string& path);

// Writes the fixture host root of `profile` under `dir` (created when missing): procfs, sysfs,
// /dev entries as plain empty files (and proc/driver/nvidia-caps/mig-minors for MIG), the driver's
// user-space libraries as small plain files with their SONAME links under
// usr/lib/x86_64-linux-gnu plus an etc/ld.so.cache listing them, the GSP firmware folder
// lib/firmware/nvidia/<module version>/, the CUDA toolkit's version.json, host.files and
// host.empty_files. Works as non-root; existing files are overwritten. Paths that would escape
// `dir` are rejected with InvalidArgument.
Status WriteHostRoot(const NodeProfile& profile, const std::string& dir);

// Text helpers shared with the simulated NVML library.
std::string NvmlBusId(std::string_view sysfs_bus_id);        // "00000000:18:00.0" (upper case)
std::string NvmlLegacyBusId(std::string_view sysfs_bus_id);  // "0000:18:00.0" (upper case)
// Parses "0000:18:00.0" (any case; 4 or 8 domain digits) into its parts.
bool ParseBusId(std::string_view bus_id, unsigned* domain, unsigned* bus, unsigned* device,
                unsigned* function);
// NVML's name of a return code: "DRIVER_NOT_LOADED" for NVML_ERROR_DRIVER_NOT_LOADED, "SUCCESS".
std::optional<nvmlReturn_t> NvmlReturnFromName(std::string_view name);

}  // namespace gpunode::sim

#endif  // GPUNODE_SIM_SUPPORT_PROFILE_H_
