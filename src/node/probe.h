// Probes of layers 0-6. ProbeNode reads the host through HostFs and the NVML/libcuda loaders and
// returns one NodeInventory. A failing layer is recorded in that layer's `status`; ProbeNode
// itself fails only when the host root cannot be used at all.
#ifndef GPUNODE_NODE_PROBE_H_
#define GPUNODE_NODE_PROBE_H_

#include <string>

#include "src/base/host_fs.h"
#include "absl/strings/string_view.h"
#include "src/node/inventory.h"

namespace gpunode::node {

struct ProbeOptions {
  std::string nvml_library = "libnvidia-ml.so.1";
  std::string cuda_library = "libcuda.so.1";
  // Whether libcuda is loaded at all. The long-running services (plugin, labels, exporter) leave it
  // out: the driver's CUDA version comes from NVML, and libcuda costs several MiB of RSS and, after
  // cuInit, a thread and ~14 MiB of driver state per process. Only the CUDA layer's checks need it.
  bool load_cuda = true;
  bool init_cuda = true;       // cuInit + cuDeviceGetCount (the slowest step, ~0.1-0.5 s)
  bool query_topology = true;  // pairwise common-ancestor levels
  bool live_metrics = true;       // power draw, clocks, utilization (see gpu::GpuReadOptions)
};

StatusOr<NodeInventory> ProbeNode(const HostFs& fs, const ProbeOptions& options);

// The host path of a program in the usual PATH (/usr/local/sbin ... /bin) under the host root,
// "" when none; a symlink counts, dangling or not.
std::string FindHostProgram(const HostFs& fs, absl::string_view name);

// Individual layers, for tests and for commands that need only one.
HardwareLayer ProbeHardware(const HostFs& fs);
KernelDriverLayer ProbeKernelDriver(const HostFs& fs);
ToolchainLayer ProbeToolchain(const HostFs& fs);
ContainerLayer ProbeContainers(const HostFs& fs);
OrchestratorLayer ProbeOrchestrator(const HostFs& fs);

}  // namespace gpunode::node

#endif  // GPUNODE_NODE_PROBE_H_
