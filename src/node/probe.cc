#include "src/node/probe.h"

#include <chrono>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "src/gpu/cuda.h"
#include "src/gpu/gpu_reader.h"
#include "src/gpu/nvml.h"

namespace gpunode::node {
namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Returns the open library so that the caller decides when nvmlShutdown runs: while cuInit is
// in progress on the other thread, nvmlShutdown waits for it (measured: ~170 ms on an H200).
std::unique_ptr<gpu::NvmlLibrary> ProbeNvml(const ProbeOptions& options, UserDriverLayer& layer,
                                       ProbeTimings& timings) {
  layer.nvml_library = options.nvml_library;
  auto nvml = gpu::NvmlLibrary::Open(options.nvml_library);
  layer.nvml_library_file = gpu::LoadedLibraryFile(options.nvml_library);
  if (!nvml.ok()) {
    layer.status = nvml.status();
    return nullptr;
  }
  gpu::NvmlLibrary& lib = **nvml;
  timings.nvml_load_ms = lib.load_ms();
  timings.nvml_init_ms = lib.init_ms();
  auto start = Clock::now();
  if (auto v = lib.DriverVersion(); v.ok()) layer.driver_version = *v;
  if (auto v = lib.NvmlVersion(); v.ok()) layer.nvml_version = *v;
  if (auto v = lib.CudaDriverVersion(); v.ok()) layer.cuda_version = *v;
  auto count = lib.DeviceCount();
  if (!count.ok()) {
    layer.status = count.status();
    timings.nvml_query_ms = MsSince(start);
    return std::move(*nvml);
  }
  layer.device_count = *count;
  // Serially: NVML sets each device up lazily on its first calls (~20-25 ms per H200,
  // benchmarks/results/nvml-call-costs-h200-2026-11-30.txt) and serialises that setup, so one
  // thread per GPU was measured to save only ~1 ms on 2 GPUs (doctor-nocuda-*-h200x2-*.json).
  gpu::GpuReadOptions read_options;
  read_options.live_metrics = options.live_metrics;
  std::vector<StatusOr<gpu::GpuInfo>> results;
  for (unsigned i = 0; i < *count; ++i) results.push_back(gpu::ReadGpu(lib, i, read_options));
  std::vector<nvmlDevice_t> handles;
  for (unsigned i = 0; i < *count; ++i) {
    StatusOr<gpu::GpuInfo>& gpu = results[i];
    if (gpu.ok()) {
      layer.gpus.push_back(std::move(*gpu));
      if (auto h = lib.DeviceHandle(i); h.ok()) handles.push_back(*h);
    } else {
      layer.gpu_failures.push_back(gpu::GpuFailure{i, gpu.status()});
    }
  }
  if (options.query_topology && handles.size() == layer.gpus.size() && handles.size() > 1) {
    size_t n = handles.size();
    layer.topology.assign(n * n, 0);
    for (size_t a = 0; a < n; ++a) {
      for (size_t b = a + 1; b < n; ++b) {
        nvmlGpuTopologyLevel_t level = NVML_TOPOLOGY_SYSTEM;
        if (lib.nvmlDeviceGetTopologyCommonAncestor(handles[a], handles[b], &level) == NVML_SUCCESS) {
          layer.topology[a * n + b] = layer.topology[b * n + a] = static_cast<int>(level);
        } else {
          layer.topology.clear();
          a = n;
          break;
        }
      }
    }
  }
  timings.nvml_query_ms = MsSince(start);
  return std::move(*nvml);
}

}  // namespace

StatusOr<NodeInventory> ProbeNode(const HostFs& fs, const ProbeOptions& options) {
  auto start = Clock::now();
  NodeInventory inv;
  inv.host_root = fs.root();

  // cuInit is by far the slowest step (it creates the driver's state for every GPU), so it runs
  // on its own thread while NVML and the files are read.
  gpu::CudaDriverInfo cuda;
  double cuda_init_ms = 0;
  std::thread cuda_thread;
  if (options.load_cuda) {
    cuda_thread = std::thread([&] { cuda = gpu::ProbeCuda(options.cuda_library, options.init_cuda, &cuda_init_ms); });
  } else {
    cuda.probed = false;
    cuda.library = options.cuda_library;
  }

  auto files_start = Clock::now();
  if (auto name = fs.ReadLine("/etc/hostname"); name.ok() && !name->empty()) {
    inv.hostname = *name;
  } else if (auto n = fs.ReadLine("/proc/sys/kernel/hostname"); n.ok()) {
    inv.hostname = *n;
  }
  inv.hardware = ProbeHardware(fs);
  inv.kernel = ProbeKernelDriver(fs);
  inv.toolchain = ProbeToolchain(fs);
  inv.containers = ProbeContainers(fs);
  inv.orchestrator = ProbeOrchestrator(fs);
  for (const char* path : {"/usr/bin/nvidia-smi", "/usr/sbin/nvidia-smi", "/usr/local/nvidia/bin/nvidia-smi",
                           "/usr/local/bin/nvidia-smi"}) {
    if (fs.Exists(path)) {
      inv.driver.nvidia_smi = path;
      break;
    }
  }
  inv.timings.files_ms = MsSince(files_start);

  std::unique_ptr<gpu::NvmlLibrary> nvml = ProbeNvml(options, inv.driver, inv.timings);
  inv.timings.non_cuda_ms = MsSince(start);

  if (cuda_thread.joinable()) cuda_thread.join();
  nvml.reset();  // nvmlShutdown, after cuInit has finished
  inv.driver.cuda = std::move(cuda);
  inv.timings.cuda_init_ms = cuda_init_ms;
  inv.timings.total_ms = MsSince(start);
  return inv;
}

}  // namespace gpunode::node
