// NodeInventory: one immutable snapshot of the GPU stack of a node, layer by layer (DESIGN.md).
// Probes (src/node/probe*.cc) build it from HostFs and the NVML/libcuda loaders; every service
// (doctor, compat, labels, exporter, ...) reads only this, never the host directly.
#ifndef GPUNODE_NODE_INVENTORY_H_
#define GPUNODE_NODE_INVENTORY_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "src/base/status.h"
#include "src/base/version.h"
#include "src/gpu/cuda.h"
#include "src/gpu/gpu.h"

namespace gpunode::node {

struct PcieLink {
  unsigned gen = 0;    // 1..6, from "32.0 GT/s PCIe"
  unsigned width = 0;  // lanes
};

// Layer 0: an NVIDIA PCI function from sysfs.
struct PciDevice {
  std::string bus_id;  // "0000:18:00.0"
  uint16_t vendor = 0;
  uint16_t device = 0;
  uint32_t class_code = 0;  // 0x030200 3D controller, 0x030000 VGA, 0x040300 audio, 0x068000 NVSwitch
  uint16_t subsystem_vendor = 0;
  uint16_t subsystem_device = 0;
  std::optional<int> numa_node;  // empty when sysfs says -1
  std::optional<PcieLink> link_current;
  std::optional<PcieLink> link_max;
  std::string driver;  // bound kernel driver ("nvidia", "vfio-pci", "nouveau"), empty if none
  std::string pcie_root;  // its PCIe root complex in sysfs ("pci0000:17"), empty when unknown
  bool IsGpu() const { return (class_code >> 8) == 0x0300 || (class_code >> 8) == 0x0302; }
};

struct HardwareLayer {
  Status status;                  // reading sysfs failed
  std::vector<PciDevice> gpus;    // NVIDIA display/3D controllers
  std::vector<PciDevice> others;  // other NVIDIA functions (audio, NVSwitch, bridges)
  int numa_nodes = 0;
};

enum class ModuleFlavor { kUnknown, kOpen, kProprietary };

struct ProcGpu {  // /proc/driver/nvidia/gpus/<bus>/information
  std::string bus_id;
  std::string model;
  std::string uuid;
  std::optional<unsigned> minor;
  bool excluded = false;
};

struct DeviceNode {
  std::string path;  // "/dev/nvidia0"
  bool present = false;
  bool char_device = false;
  uint32_t major = 0;
  uint32_t minor = 0;
};

// Layer 1.
struct KernelDriverLayer {
  Status status;
  bool proc_present = false;           // /proc/driver/nvidia exists
  std::optional<Version> version;      // from /proc/driver/nvidia/version (or /sys/module/nvidia/version)
  ModuleFlavor flavor = ModuleFlavor::kUnknown;
  std::string version_line;            // "NVRM version: ..."
  bool nvidia_loaded = false;          // /proc/modules
  bool nvidia_uvm_loaded = false;
  bool nvidia_modeset_loaded = false;
  bool nouveau_loaded = false;
  std::vector<ProcGpu> gpus;
  std::vector<DeviceNode> device_nodes;  // /dev/nvidiactl, /dev/nvidia-uvm, /dev/nvidiaN ...
  std::string kernel_release;
};

// Layer 2.
struct UserDriverLayer {
  Status status;                      // NVML load / init failure (distinct codes and messages)
  std::string nvml_library;           // what was dlopen'ed
  std::string nvml_library_file;      // the file behind it ("...libnvidia-ml.so.535.183.01")
  std::string nvidia_smi;             // host path of nvidia-smi, empty when not installed
  std::optional<Version> driver_version;
  std::optional<Version> nvml_version;
  std::optional<Version> cuda_version;  // highest CUDA the driver supports (nvmlSystemGetCudaDriverVersion)
  std::optional<unsigned> device_count;
  std::vector<gpu::GpuInfo> gpus;
  std::vector<gpu::GpuFailure> gpu_failures;
  // Pairwise nvmlDeviceGetTopologyCommonAncestor levels, row-major over `gpus` (0 on the diagonal).
  std::vector<int> topology;
  gpu::CudaDriverInfo cuda;
};

// Layer 3.
struct ToolchainLayer {
  std::optional<Version> cuda_toolkit;  // /usr/local/cuda/version.json (or version.txt)
  std::string cuda_toolkit_path;
  std::optional<Version> nvcc;          // cuda_nvcc entry of version.json
};

struct ContainerRuntime {
  std::string name;           // "docker", "containerd", "crio", "podman"
  std::string config_path;    // host path of the config file we read ("" if none)
  bool installed = false;     // binary or config present
  bool nvidia_runtime = false;  // a runtime named nvidia (or pointing at an nvidia runtime) is configured
  bool default_nvidia = false;  // ... and it is the default
  bool cdi_enabled = false;
  // Docker: `nvidia-container-runtime-hook` in the usual PATH (Docker offers --gpus only then), and
  // whether it is gpunode (then --gpus needs gpunode's shim as the runtime) or NVIDIA's own hook.
  std::string gpus_hook;      // host path, "" when none
  bool gpus_hook_gpunode = false;
  // containerd: the nvidia runtime table's runtime_type and options.BinaryName ("" when absent).
  // With runtime_type io.containerd.runc.v2 and no BinaryName it is plain runc (no GPU injected).
  std::string nvidia_runtime_type;
  std::string nvidia_binary_name;
  Status config_error;        // unreadable / unparseable config
};

struct CdiSpec {
  std::string path;
  std::string kind;                        // "nvidia.com/gpu"
  std::optional<Version> driver_version;   // version found in the spec's library paths (libcuda.so.X)
  std::vector<std::string> device_nodes;   // host paths of the device nodes it names (hostPath, else path)
  // The major:minor the spec gives a node (by host path), when it gives them. Engines keep the
  // spec's numbers over the host's, so numbers that changed (nvidia-uvm's major is dynamic) matter.
  std::map<std::string, std::pair<uint32_t, uint32_t>> node_numbers;
  Status error;
};

// Layer 5.
struct ContainerLayer {
  std::vector<ContainerRuntime> runtimes;
  std::vector<CdiSpec> cdi_specs;
};

// Layer 6.
struct OrchestratorLayer {
  bool kubelet_present = false;          // /var/lib/kubelet exists
  bool kubelet_socket = false;           // device-plugins/kubelet.sock
  bool pod_resources_socket = false;     // pod-resources/kubelet.sock
  std::vector<std::string> plugin_sockets;  // other sockets in device-plugins/
  // DRA drivers registered through the kubelet's plugin registry (plugins_registry/<driver>-reg.sock,
  // or <driver>-<pod uid>-reg.sock with rolling updates): "gpu.nvidia.com".
  std::vector<std::string> dra_drivers;
};

struct ProbeTimings {
  double nvml_load_ms = 0;
  double nvml_init_ms = 0;
  double nvml_query_ms = 0;
  double cuda_init_ms = 0;
  double files_ms = 0;
  double non_cuda_ms = 0;  // files + NVML, the path that runs beside cuInit
  double total_ms = 0;
};

struct NodeInventory {
  std::string hostname;
  std::string host_root;
  std::optional<std::string> simulated_profile;  // set under --simulate
  HardwareLayer hardware;
  KernelDriverLayer kernel;
  UserDriverLayer driver;
  ToolchainLayer toolchain;
  ContainerLayer containers;
  OrchestratorLayer orchestrator;
  ProbeTimings timings;
};

}  // namespace gpunode::node

#endif  // GPUNODE_NODE_INVENTORY_H_
