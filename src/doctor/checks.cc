// The checks of gpunode doctor, one function per layer, each made of named steps. A step decides
// whether a finding of the catalogue (catalogue.cc: its words, status and layers) applies and gives
// what it observed; a layer with no findings is ok, a layer that does not exist on this node is skip.
#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "src/doctor/catalogue.h"
#include "src/doctor/doctor.h"
#include "src/doctor/internal.h"
#include "src/gpu/nvml.h"
#include "src/node/text_parsers.h"
#include "src/node/unreadable_gpus.h"

namespace gpunode::doctor {
namespace {

constexpr uint64_t kMiB = 1024ull * 1024;

std::string V(const std::optional<Version>& v) { return v ? v->ToString() : "unknown"; }

// The user-space driver's version from the name of the NVML library file, when NVML cannot say.
std::optional<std::string> LibraryVersion(const node::UserDriverLayer& d) {
  if (d.driver_version) return d.driver_version->ToString();
  if (auto v = node::DriverVersionFromLibraryPath(d.nvml_library_file)) return v->ToString();
  return std::nullopt;
}

bool IsPreTuring(const gpu::GpuInfo& g) { return g.cc_major && (*g.cc_major * 10 + g.cc_minor.value_or(0)) < 75; }
// Grace Hopper and Blackwell (and newer) support only the open kernel modules.
bool RequiresOpenModules(const gpu::GpuInfo& g) {
  if (g.cc_major && *g.cc_major >= 10) return true;
  return absl::StrContains(g.name, "GH200") || absl::StrContains(g.name, "GB200");
}

// /dev/nvidiaN, one per GPU (not nvidiactl, nvidia-uvm, ...).
bool IsPerGpuNode(const std::string& path) {
  return path.size() > 11 && path.compare(0, 11, "/dev/nvidia") == 0 &&
         std::isdigit(static_cast<unsigned char>(path[11]));
}

// "GPU 0 (0000:18:00.0)": how findings name a GPU NVML read.
std::string Who(const gpu::GpuInfo& g) { return absl::StrCat("GPU ", g.index, " (", g.pci_bus_id, ")"); }

void Add(CheckResult& c, std::string_view id, FindingFacts facts) {
  c.findings.push_back(MakeFinding(id, std::move(facts)));
}

// ---- hardware ----

// A GPU bound to another driver than nvidia (vfio-pci for passthrough, nouveau).
void CheckBoundDrivers(const node::HardwareLayer& hw, CheckResult& c) {
  for (const node::PciDevice& d : hw.gpus) {
    if (d.driver.empty() || d.driver == "nvidia") continue;
    Add(c, "hardware.other-driver",
        {.variant = d.driver == "nouveau" || d.driver == "vfio-pci" ? std::string_view(d.driver) : "",
         .observed = absl::StrCat(d.bus_id, " driver: ", d.driver),
         .expected = "bound to nvidia",
         .args = {{"gpu", absl::StrCat("GPU ", d.bus_id)}, {"driver", d.driver}, {"bus", d.bus_id}}});
  }
}

// Link state: NVML's view when available (current vs max of GPU and slot), else sysfs.
void CheckPcieLinks(const node::NodeInventory& inv, CheckResult& c) {
  for (const gpu::GpuInfo& g : inv.driver.gpus) {
    if (g.pcie_width_current && g.pcie_width_max && *g.pcie_width_current < *g.pcie_width_max) {
      std::string gen = g.pcie_gen_current && g.pcie_gen_max
                            ? absl::StrCat("Gen", *g.pcie_gen_current, " x", *g.pcie_width_current, " (capable of Gen",
                                           g.pcie_gen_gpu_max.value_or(*g.pcie_gen_max), " x", *g.pcie_width_max, ")")
                            : absl::StrCat("x", *g.pcie_width_current, " (capable of x", *g.pcie_width_max, ")");
      Add(c, "hardware.pcie-degraded",
          {.observed = absl::StrCat("link ", gen), .expected = absl::StrCat("x", *g.pcie_width_max),
           .args = {{"gpu", Who(g)}}});
    } else if (g.pcie_gen_max && g.pcie_gen_gpu_max && *g.pcie_gen_max < *g.pcie_gen_gpu_max) {
      Add(c, "hardware.pcie-slot-limited",
          {.observed = absl::StrCat("slot allows Gen", *g.pcie_gen_max, ", GPU supports Gen", *g.pcie_gen_gpu_max),
           .expected = absl::StrCat("Gen", *g.pcie_gen_gpu_max),
           .args = {{"gpu", Who(g)}}});
    }
  }
  if (!inv.driver.gpus.empty()) return;
  for (const node::PciDevice& d : inv.hardware.gpus) {
    if (d.link_current && d.link_max && d.link_current->width < d.link_max->width) {
      Add(c, "hardware.pcie-degraded",
          {.variant = "sysfs",
           .observed = absl::StrCat("Gen", d.link_current->gen, " x", d.link_current->width),
           .expected = absl::StrCat("Gen", d.link_max->gen, " x", d.link_max->width),
           .args = {{"gpu", absl::StrCat("GPU ", d.bus_id)}}});
    }
  }
}

// Memory health (ECC, retired pages, row remapping) and temperature of one GPU.
void CheckGpuHealth(const gpu::GpuInfo& g, CheckResult& c) {
  const std::string who = Who(g);
  if (g.remapped_rows && g.remapped_rows->failure) {
    Add(c, "hardware.row-remap-failure",
        {.observed = absl::StrCat(g.remapped_rows->uncorrectable, " uncorrectable rows remapped, failure flag set"),
         .expected = "no remap failure",
         .args = {{"gpu", who}}});
  } else if (g.remapped_rows && g.remapped_rows->pending) {
    Add(c, "hardware.row-remap-pending",
        {.observed = "remap pending", .expected = "no pending remap", .args = {{"gpu", who}, {"index", g.index}}});
  }
  if (g.retired_pages_pending.value_or(false)) {
    Add(c, "hardware.retired-pages-pending",
        {.observed = "page retirement pending", .expected = "no pending retirement", .args = {{"gpu", who}}});
  }
  if (g.ecc_uncorrected_volatile.value_or(0) > 0) {
    Add(c, "hardware.ecc-uncorrected",
        {.observed = absl::StrCat(*g.ecc_uncorrected_volatile, " uncorrectable (volatile)"), .expected = "0",
         .args = {{"gpu", who}}});
  } else if (g.ecc_uncorrected_aggregate.value_or(0) > 0) {
    Add(c, "hardware.ecc-uncorrected-history",
        {.observed = absl::StrCat(*g.ecc_uncorrected_aggregate, " uncorrectable (aggregate)"), .expected = "0",
         .args = {{"gpu", who}}});
  }
  if (g.temperature_c && *g.temperature_c >= 85) {
    Add(c, "hardware.hot",
        {.observed = absl::StrCat(*g.temperature_c, " C"), .expected = "below 85 C", .args = {{"gpu", who}}});
  }
}

// ---- kernel driver ----

// The driver's device nodes: control nodes (nvidiactl, nvidia-uvm) and one /dev/nvidiaN per GPU.
void CheckDeviceNodes(const node::NodeInventory& inv, CheckResult& c) {
  const node::KernelDriverLayer& k = inv.kernel;
  int gpu_nodes = 0;
  std::vector<std::string> missing;
  for (const node::DeviceNode& n : k.device_nodes) {
    if (IsPerGpuNode(n.path)) {
      ++gpu_nodes;
    } else if (!n.present && n.path != "/dev/nvidia-modeset" && n.path != "/dev/nvidia-uvm-tools") {
      missing.push_back(n.path);
    }
  }
  absl::StrAppend(&c.observed, ", ", gpu_nodes, " /dev/nvidiaN");
  if (!missing.empty()) {
    bool uvm_only = missing.size() == 1 && missing[0] == "/dev/nvidia-uvm";
    const gpu::CudaDriverInfo& cu = inv.driver.cuda;
    bool cuinit_failed = cu.probed && !cu.status.ok() && cu.init_result != 0;
    Add(c, !uvm_only ? "kernel.device-nodes-missing" : cuinit_failed ? "kernel.uvm-missing-cuinit-failed" : "kernel.uvm-missing",
        {.observed = absl::StrCat("missing: ", absl::StrJoin(missing, ", ")),
         .expected = "/dev/nvidiactl and /dev/nvidia-uvm present",
         .args = {{"plural_s", missing.size() == 1 ? "" : "s"}, {"nodes", absl::StrJoin(missing, ", ")}}});
  } else if (!k.nvidia_uvm_loaded && k.nvidia_loaded) {
    Add(c, "kernel.uvm-not-loaded",
        {.observed = "nvidia_uvm absent from /proc/modules", .expected = "nvidia_uvm loaded"});
  }
  if (!inv.hardware.gpus.empty() && gpu_nodes == 0 && missing.empty()) {
    Add(c, "kernel.gpu-nodes-missing",
        {.observed = "0 /dev/nvidiaN", .expected = absl::StrCat(inv.hardware.gpus.size(), " /dev/nvidiaN")});
  }
}

// Excluded GPUs, and the module's flavor (open / proprietary) against the GPUs it drives.
void CheckModuleAndGpus(const node::NodeInventory& inv, CheckResult& c) {
  const node::KernelDriverLayer& k = inv.kernel;
  for (const node::ProcGpu& g : k.gpus) {
    if (g.excluded) {
      Add(c, "kernel.gpu-excluded",
          {.observed = "GPU Excluded: Yes", .expected = "No", .args = {{"gpu", absl::StrCat("GPU ", g.bus_id)}}});
    }
  }
  for (const gpu::GpuInfo& g : inv.driver.gpus) {
    if (k.flavor == node::ModuleFlavor::kProprietary && RequiresOpenModules(g)) {
      Add(c, "kernel.needs-open-module",
          {.observed = "proprietary nvidia module", .expected = "open nvidia module (nvidia-open)",
           .args = {{"model", g.name}}});
      break;
    }
    if (k.flavor == node::ModuleFlavor::kOpen && IsPreTuring(g)) {
      Add(c, "kernel.needs-proprietary-module",
          {.observed = "open nvidia module", .expected = "proprietary nvidia module", .args = {{"model", g.name}}});
      break;
    }
  }
}

// ---- user-space driver ----

// nvmlInit failed: what its return code means.
void DiagnoseNvmlInit(const node::NodeInventory& inv, CheckResult& c) {
  const node::UserDriverLayer& d = inv.driver;
  const node::KernelDriverLayer& k = inv.kernel;
  auto code = gpu::NvmlReturnOf(d.status).value_or(NVML_ERROR_UNKNOWN);
  std::string observed = std::string(d.status.message());
  switch (code) {
    case NVML_ERROR_LIBRARY_NOT_FOUND:
      if (k.version) {
        Add(c, "driver.nvml-missing",
            {.variant = "kernel-known", .observed = observed, .expected = "libnvidia-ml.so.1 loadable",
             .args = {{"kernel", k.version->ToString()}, {"major", k.version->major()}}});
      } else {
        Add(c, "driver.nvml-missing", {.observed = observed, .expected = "libnvidia-ml.so.1 loadable"});
      }
      break;
    case NVML_ERROR_DRIVER_NOT_LOADED:
      Add(c, "driver.not-loaded", {.observed = observed, .expected = "the kernel module answering NVML"});
      break;
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH:
      Add(c, "driver.version-mismatch",
          {.variant = "nvml-init",
           .observed = absl::StrCat("kernel module ", V(k.version), ", user-space library ",
                                    LibraryVersion(d).value_or("of another version"),
                                    d.nvml_library_file.empty() ? "" : " (" + d.nvml_library_file + ")"),
           .expected = "kernel module and user-space libraries of the same version"});
      break;
    case NVML_ERROR_NO_PERMISSION:
      Add(c, "driver.no-permission",
          {.observed = observed, .expected = "read/write access to /dev/nvidiactl and /dev/nvidiaN"});
      break;
    default:
      Add(c, "driver.nvml-init-failed", {.observed = observed, .expected = "nvmlInit_v2 succeeds"});
  }
}

// NVML against the kernel module: the same version, every GPU on the bus counted and opened.
void CheckNvmlSeesGpus(const node::NodeInventory& inv, CheckResult& c) {
  const node::UserDriverLayer& d = inv.driver;
  const node::KernelDriverLayer& k = inv.kernel;
  unsigned count = d.device_count.value_or(0);
  if (k.version && d.driver_version && *k.version != *d.driver_version) {
    Add(c, "driver.version-mismatch",
        {.observed = absl::StrCat("kernel module ", k.version->ToString(), ", NVML ", d.driver_version->ToString()),
         .expected = "the same version"});
  }
  size_t pci = inv.hardware.gpus.size();
  if (count == 0 && pci > 0) {
    Add(c, "driver.no-devices",
        {.observed = absl::StrCat("NVML sees 0 GPUs, the PCI bus has ", pci), .expected = absl::StrCat(pci, " GPUs")});
  } else if (count < pci) {
    Add(c, "driver.fewer-gpus",
        {.observed = absl::StrCat(count, " GPUs in NVML, ", pci, " on PCI"), .expected = absl::StrCat(pci, " GPUs"),
         .args = {{"count", count}, {"pci", pci}}});
  }
  const std::map<unsigned, node::BusGpu> on_bus = node::UnreadableGpusOnBus(inv);
  for (const gpu::GpuFailure& f : d.gpu_failures) {
    auto code = gpu::NvmlReturnOf(f.status).value_or(NVML_ERROR_UNKNOWN);
    // "GPU 2 (0000:3a:00.0)": the bus id from sysfs, as nvidia-smi names a GPU it cannot open.
    std::string gpu = absl::StrCat("GPU ", f.index);
    if (auto it = on_bus.find(f.index); it != on_bus.end()) absl::StrAppend(&gpu, " (", it->second.pci_bus_id, ")");
    Add(c, code == NVML_ERROR_GPU_IS_LOST ? "driver.gpu-lost" : "driver.gpu-unreadable",
        {.observed = std::string(f.status.message()), .expected = "the GPU answering NVML",
         .args = {{"gpu", gpu}, {"index", f.index}}});
  }
}

// Per-GPU driver state: persistence, pending mode changes, MIG without instances, leaked memory.
void CheckGpuState(const gpu::GpuInfo& g, CheckResult& c) {
  const std::string who = Who(g);
  auto on_off = [](bool b) { return b ? "on" : "off"; };
  if (g.persistence_mode && !*g.persistence_mode) {
    Add(c, "driver.persistence-off",
        {.observed = "persistence mode disabled", .expected = "enabled", .args = {{"gpu", who}}});
  }
  if (g.ecc_enabled && g.ecc_pending && *g.ecc_enabled != *g.ecc_pending) {
    Add(c, "driver.ecc-pending",
        {.observed = absl::StrCat("ECC ", on_off(*g.ecc_enabled), ", pending ", on_off(*g.ecc_pending)),
         .expected = "current == pending", .args = {{"gpu", who}}});
  }
  if (g.mig_enabled && g.mig_pending && *g.mig_enabled != *g.mig_pending) {
    Add(c, "driver.mig-pending",
        {.observed = absl::StrCat("MIG ", on_off(*g.mig_enabled), ", pending ", on_off(*g.mig_pending)),
         .expected = "current == pending", .args = {{"gpu", who}}});
  }
  if (g.mig_enabled.value_or(false) && g.mig_devices.empty()) {
    Add(c, "driver.mig-no-instances",
        {.observed = "MIG on, 0 instances", .expected = "at least one GPU instance with a compute instance",
         .args = {{"gpu", who}}});
  }
  if (g.memory_used_bytes && g.memory_total_bytes && g.compute_processes && g.compute_processes->empty()) {
    uint64_t threshold = std::max<uint64_t>(1024 * kMiB, *g.memory_total_bytes / 50);
    if (*g.memory_used_bytes > threshold) {
      Add(c, "driver.memory-used-no-process",
          {.observed = absl::StrCat(*g.memory_used_bytes / kMiB, " MiB used, 0 compute processes"),
           .expected = "memory freed when no process runs",
           .args = {{"gpu", who}}});
    }
  }
}

// libcuda: the view a CUDA application gets.
void CheckLibcuda(const node::UserDriverLayer& d, CheckResult& c) {
  const gpu::CudaDriverInfo& cu = d.cuda;
  unsigned count = d.device_count.value_or(0);
  if (!cu.probed) return;  // not loaded by this command (plugin, labels, exporter): nothing to judge
  if (cu.status.ok()) {
    absl::StrAppend(&c.observed, "; libcuda ", V(cu.version));
    if (cu.device_count) absl::StrAppend(&c.observed, ", cuInit ok (", *cu.device_count, " devices)");
    if (cu.version && d.cuda_version && *cu.version != *d.cuda_version) {
      Add(c, "cuda.compat-libcuda",
          {.observed =
               absl::StrCat("libcuda CUDA ", cu.version->ToString(), ", driver CUDA ", d.cuda_version->ToString()),
           .expected = "the same"});
    }
    return;
  }
  std::string observed = std::string(cu.status.message());
  switch (cu.init_result) {
    case GPUNODE_CUDA_ERROR_INSUFFICIENT_DRIVER:
      Add(c, "cuda.insufficient-driver", {.observed = observed, .expected = "cuInit succeeds"});
      break;
    case GPUNODE_CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
      Add(c, "cuda.system-driver-mismatch", {.observed = observed, .expected = "libcuda matching the kernel module"});
      break;
    case GPUNODE_CUDA_ERROR_NO_DEVICE:
      if (count > 0) {
        Add(c, "cuda.no-device", {.observed = observed, .expected = absl::StrCat(count, " CUDA devices")});
      }
      break;
    default:
      if (absl::IsNotFound(cu.status) && cu.init_result == 0) {
        Add(c, "cuda.libcuda-missing", {.observed = observed, .expected = "libcuda.so.1 loadable"});
      } else {
        Add(c, "cuda.init-failed", {.observed = observed, .expected = "cuInit succeeds"});
      }
  }
}

// ---- container runtime ----

// One CDI spec for nvidia.com/gpu against the driver and the host's device nodes.
void CheckCdiSpec(const node::NodeInventory& inv, const node::CdiSpec& spec, const std::optional<Version>& driver,
                  CheckResult& c) {
  if (driver && spec.driver_version && *spec.driver_version != *driver) {
    Add(c, "runtime.cdi-stale",
        {.observed = absl::StrCat("spec mounts driver ", spec.driver_version->ToString(), " libraries, driver is ",
                                  driver->ToString()),
         .expected = absl::StrCat("a spec for driver ", driver->ToString()),
         .args = {{"spec", spec.path}, {"spec_driver", spec.driver_version->ToString()}}});
  }
  // Device nodes: the spec's against the host's. A node the spec names and the host lacks makes
  // every container that asks for it fail ("failed to stat CDI host device"); a GPU node the
  // host has and the spec lacks is a GPU that `nvidia.com/gpu=all` silently leaves out.
  std::vector<std::string> gone, unlisted, renumbered;
  std::set<std::string> named(spec.device_nodes.begin(), spec.device_nodes.end());
  for (const node::DeviceNode& n : inv.kernel.device_nodes) {
    if (auto it = spec.node_numbers.find(n.path);
        n.present && n.char_device && it != spec.node_numbers.end() &&
        (it->second.first != n.major || it->second.second != n.minor)) {
      renumbered.push_back(absl::StrCat(n.path, " (spec ", it->second.first, ":", it->second.second, ", host ",
                                        n.major, ":", n.minor, ")"));
    }
    if (!n.present && named.count(n.path)) gone.push_back(n.path);
    if (n.present && IsPerGpuNode(n.path) && !named.count(n.path)) unlisted.push_back(n.path);
  }
  for (const std::string& p : named) {
    const bool known = std::any_of(inv.kernel.device_nodes.begin(), inv.kernel.device_nodes.end(),
                                   [&](const node::DeviceNode& n) { return n.path == p; });
    if (!known && IsPerGpuNode(p)) gone.push_back(p);  // /dev/nvidiaN the host does not have at all
  }
  if (!gone.empty()) {
    Add(c, "runtime.cdi-missing-node",
        {.observed = absl::StrCat(gone.size(), " device node(s) of the spec missing under /dev"),
         .expected = "every device node of the spec present on the host",
         .args = {{"spec", spec.path}, {"nodes", absl::StrJoin(gone, ", ")}}});
  }
  if (!renumbered.empty()) {
    Add(c, "runtime.cdi-stale-node",
        {.observed = absl::StrJoin(renumbered, ", "), .expected = "the host's major:minor for every node",
         .args = {{"spec", spec.path}, {"nodes", absl::StrJoin(renumbered, ", ")}}});
  }
  if (!unlisted.empty()) {
    Add(c, "runtime.cdi-incomplete",
        {.observed = absl::StrCat(unlisted.size(), " GPU device node(s) not in the spec"),
         .expected = "one device per GPU of the node",
         .args = {{"spec", spec.path}, {"nodes", absl::StrJoin(unlisted, ", ")}}});
  }
}

// "6.1.0-18-amd64" -> {6, 1}; nullopt when it does not start with MAJOR.MINOR.
std::optional<std::pair<int, int>> KernelMajorMinor(const std::string& release) {
  std::vector<std::string> parts = absl::StrSplit(release, absl::MaxSplits('.', 2));
  int major = 0, minor = 0;
  if (parts.size() < 2) return std::nullopt;
  const std::string minor_digits = parts[1].substr(0, parts[1].find_first_not_of("0123456789"));
  if (!absl::SimpleAtoi(parts[0], &major) || !absl::SimpleAtoi(minor_digits, &minor)) return std::nullopt;
  return std::make_pair(major, minor);
}

// Docker's --gpus: offered only with nvidia-container-runtime-hook in its PATH. With gpunode's shim
// as the runtime the shim injects; with runc, gpunode's hook injects into the created container
// (src/container/hook_inject.h), which needs open_tree, move_mount and mount_setattr (Linux 5.12)
// and openat2 (5.6): on an older kernel only the shim can, so nvidia must be the default runtime.
void CheckDockerGpus(const node::NodeInventory& inv, CheckResult& c) {
  for (const node::ContainerRuntime& rt : inv.containers.runtimes) {
    if (rt.name != "docker" || !rt.installed || !rt.nvidia_runtime) continue;
    if (rt.gpus_hook.empty()) {
      Add(c, "runtime.docker-no-gpus-hook",
          {.observed = "no nvidia-container-runtime-hook in /usr/local/sbin ... /bin",
           .expected = "nvidia-container-runtime-hook (a link to gpunode)"});
    } else if (rt.gpus_hook_gpunode && !rt.default_nvidia) {
      const auto kernel = KernelMajorMinor(inv.kernel.kernel_release);
      if (!kernel || *kernel >= std::make_pair(5, 12)) continue;  // the hook injects with runc
      Add(c, "runtime.docker-gpus-not-default",
          {.observed = absl::StrCat(rt.gpus_hook, " is gpunode; Docker's default runtime is not nvidia; kernel ",
                                    inv.kernel.kernel_release),
           .expected = "nvidia as Docker's default-runtime, or Linux 5.12 or later",
           .args = {{"kernel", inv.kernel.kernel_release}}});
    }
  }
}

// containerd: a runtime named nvidia whose runtime_type is runc's shim and whose options name no
// BinaryName runs plain runc — pods of that runtime class get no GPU (the seeds' own example config
// did this). Returns whether that is the case (then it does not count as an NVIDIA runtime).
bool CheckContainerdNvidiaRuntime(const node::NodeInventory& inv, CheckResult& c) {
  for (const node::ContainerRuntime& rt : inv.containers.runtimes) {
    if (rt.name != "containerd" || !rt.installed || !rt.nvidia_runtime) continue;
    bool runc_shim = rt.nvidia_runtime_type.empty() || rt.nvidia_runtime_type == "io.containerd.runc.v2" ||
                     rt.nvidia_runtime_type == "io.containerd.runc.v1";
    if (!runc_shim || !rt.nvidia_binary_name.empty()) continue;
    Add(c, "runtime.containerd-nvidia-is-runc",
        {.observed = absl::StrCat("runtimes.nvidia in ", rt.config_path, ": runtime_type \"",
                                  rt.nvidia_runtime_type.empty() ? "(default)" : rt.nvidia_runtime_type,
                                  "\", no options.BinaryName"),
         .expected = "options.BinaryName naming the NVIDIA runtime (gpunode or nvidia-container-runtime)",
         .args = {{"config", rt.config_path}}});
    return true;
  }
  return false;
}

}  // namespace

CheckResult CheckHardware(const node::NodeInventory& inv) {
  CheckResult c;
  c.layer = Layer::kHardware;
  const node::HardwareLayer& hw = inv.hardware;
  c.expected = "NVIDIA GPUs on the PCI bus, each link at its maximum width";
  if (!hw.status.ok()) {
    Add(c, "hardware.sysfs-unreadable",
        {.observed = std::string(hw.status.message()), .expected = "/sys/bus/pci/devices readable"});
    c.observed = "sysfs unreadable";
    return c;
  }
  if (hw.gpus.empty()) {
    Add(c, "hardware.no-gpu",
        {.observed = "0 NVIDIA display/3D controllers under /sys/bus/pci/devices",
         .expected = "at least one NVIDIA GPU (vendor 0x10de, class 0x03xx)"});
    c.observed = "no NVIDIA GPU";
    return c;
  }
  std::map<uint16_t, int> models;
  for (const node::PciDevice& d : hw.gpus) models[d.device]++;
  std::vector<std::string> parts;
  for (auto& [dev, n] : models) parts.push_back(absl::StrFormat("%dx 10de:%04x", n, dev));
  c.observed = absl::StrCat(hw.gpus.size(), " NVIDIA GPU", hw.gpus.size() == 1 ? "" : "s", " on the PCI bus (",
                            absl::StrJoin(parts, ", "), ")");
  if (!hw.others.empty()) absl::StrAppend(&c.observed, ", ", hw.others.size(), " other NVIDIA functions");

  CheckBoundDrivers(hw, c);
  CheckPcieLinks(inv, c);
  for (const gpu::GpuInfo& g : inv.driver.gpus) CheckGpuHealth(g, c);
  return c;
}

CheckResult CheckKernelDriver(const node::NodeInventory& inv) {
  CheckResult c;
  c.layer = Layer::kKernelDriver;
  const node::KernelDriverLayer& k = inv.kernel;
  c.expected = "nvidia kernel module loaded, its device nodes present, nouveau not loaded";
  if (k.nouveau_loaded) {
    Add(c, "kernel.nouveau-loaded", {.observed = "nouveau in /proc/modules", .expected = "nouveau blacklisted"});
  }
  bool loaded = k.proc_present || k.nvidia_loaded;
  if (!loaded && inv.hardware.gpus.empty() && !k.nouveau_loaded) {
    c.status = CheckStatus::kSkip;  // nothing for a driver to drive (the hardware check fails)
    c.observed = "nvidia kernel module not loaded (no NVIDIA GPU to drive)";
    return c;
  }
  if (!loaded) {
    c.observed = "nvidia kernel module not loaded";
    if (!inv.hardware.gpus.empty()) {
      Add(c, "kernel.module-not-loaded",
          {.observed = "no /proc/driver/nvidia, nvidia not in /proc/modules",
           .expected = absl::StrCat("nvidia loaded for the ", inv.hardware.gpus.size(), " GPU(s) on the PCI bus"),
           .args = {{"kernel", k.kernel_release.empty() ? std::string("uname -r") : k.kernel_release}}});
    }
    return c;
  }
  std::string flavor = k.flavor == node::ModuleFlavor::kOpen          ? "open"
                       : k.flavor == node::ModuleFlavor::kProprietary ? "proprietary"
                                                                      : "";
  c.observed = absl::StrCat("nvidia ", V(k.version), flavor.empty() ? "" : " (" + flavor + ")");
  if (!k.status.ok()) {
    Add(c, "kernel.version-unreadable",
        {.observed = std::string(k.status.message()), .expected = "a readable /proc/driver/nvidia/version"});
  }
  CheckDeviceNodes(inv, c);
  CheckModuleAndGpus(inv, c);
  return c;
}

CheckResult CheckUserDriver(const node::NodeInventory& inv) {
  CheckResult c;
  c.layer = Layer::kUserDriver;
  const node::UserDriverLayer& d = inv.driver;
  const node::KernelDriverLayer& k = inv.kernel;
  c.expected = "NVML initialises, its version equals the kernel module's, it sees every GPU; cuInit succeeds";
  if (!d.status.ok() && inv.hardware.gpus.empty() && !k.proc_present && !k.nvidia_loaded) {
    c.status = CheckStatus::kSkip;  // no GPU and no driver: the hardware check says it all
    c.observed = absl::StrCat("no NVIDIA driver (", d.status.message(), ")");
    return c;
  }
  if (!d.status.ok()) {
    c.observed = "NVML unusable";
    DiagnoseNvmlInit(inv, c);
    return c;
  }
  c.observed = absl::StrCat("NVML ", V(d.driver_version), ", CUDA ", V(d.cuda_version), ", ", d.gpus.size(), "/",
                            d.device_count.value_or(0), " GPUs answering");
  CheckNvmlSeesGpus(inv, c);
  for (const gpu::GpuInfo& g : d.gpus) CheckGpuState(g, c);
  CheckLibcuda(d, c);
  if (d.nvidia_smi.empty()) {
    if (d.driver_version) {
      Add(c, "driver.nvidia-smi-missing",
          {.variant = "driver-known",
           .observed = "no nvidia-smi under /usr/bin, /usr/sbin, /usr/local/nvidia/bin, /usr/local/bin",
           .expected = "nvidia-smi installed with the driver",
           .args = {{"major", d.driver_version->major()}}});
    } else {
      Add(c, "driver.nvidia-smi-missing",
          {.observed = "no nvidia-smi under /usr/bin, /usr/sbin, /usr/local/nvidia/bin, /usr/local/bin",
           .expected = "nvidia-smi installed with the driver"});
    }
  }
  return c;
}

CheckResult CheckToolchain(const node::NodeInventory& inv) {
  CheckResult c;
  c.layer = Layer::kToolchain;
  const node::ToolchainLayer& t = inv.toolchain;
  if (!t.cuda_toolkit) {
    c.status = CheckStatus::kSkip;
    c.observed = "no CUDA toolkit in /usr/local/cuda (images bring their own)";
    return c;
  }
  c.observed = absl::StrCat("CUDA toolkit ", t.cuda_toolkit->ToString(), " in ", t.cuda_toolkit_path,
                            t.nvcc ? ", nvcc " + t.nvcc->ToString() : "");
  const auto& max = inv.driver.cuda_version;
  c.expected = max ? absl::StrCat("toolkit <= CUDA ", max->ToString(), " (what the driver supports)") : "";
  if (max && t.cuda_toolkit->Truncate(2) > *max) {
    bool same_major = t.cuda_toolkit->major() == max->major();
    Add(c, "toolchain.newer-than-driver",
        {.variant = same_major ? "" : "newer-major",
         .observed = absl::StrCat("toolkit ", t.cuda_toolkit->ToString(), ", driver CUDA ", max->ToString()),
         .expected = absl::StrCat("toolkit <= ", max->ToString()),
         .args = {{"toolkit", t.cuda_toolkit->ToString()},
                  {"max", max->ToString()},
                  {"toolkit_minor", t.cuda_toolkit->Truncate(2).ToString()}}});
  }
  return c;
}

CheckResult CheckContainers(const node::NodeInventory& inv) {
  CheckResult c;
  c.layer = Layer::kContainerRuntime;
  std::vector<std::string> installed;
  bool any_cdi_runtime = false;
  for (const node::ContainerRuntime& rt : inv.containers.runtimes) {
    if (!rt.installed) continue;
    std::string desc = rt.name;
    if (rt.nvidia_runtime) desc += " (nvidia runtime" + std::string(rt.default_nvidia ? ", default" : "") + ")";
    else if (rt.cdi_enabled) desc += " (CDI)";
    installed.push_back(desc);
    if (!rt.config_error.ok()) {
      Add(c, "runtime.config-unreadable",
          {.observed = std::string(rt.config_error.message()), .expected = "a valid configuration",
           .args = {{"runtime", rt.name},
                    {"config", rt.config_path.empty() ? rt.name + "'s config" : rt.config_path}}});
    }
    if (rt.cdi_enabled) any_cdi_runtime = true;
  }
  if (installed.empty()) {
    c.status = CheckStatus::kSkip;
    c.observed = "no container runtime installed";
    return c;
  }
  c.observed = absl::StrJoin(installed, ", ");
  c.expected = "an NVIDIA runtime or CDI spec for the GPUs, matching the driver";
  bool have_spec = false;
  std::optional<Version> driver = inv.driver.driver_version ? inv.driver.driver_version : inv.kernel.version;
  for (const node::CdiSpec& spec : inv.containers.cdi_specs) {
    if (!spec.error.ok()) {
      Add(c, "runtime.cdi-unreadable",
          {.observed = std::string(spec.error.message()), .expected = "a valid CDI spec",
           .args = {{"spec", spec.path}}});
      continue;
    }
    if (spec.kind != "nvidia.com/gpu") continue;
    have_spec = true;
    absl::StrAppend(&c.observed, "; CDI ", spec.path);
    CheckCdiSpec(inv, spec, driver, c);
  }
  CheckDockerGpus(inv, c);
  bool plain_runc_nvidia = CheckContainerdNvidiaRuntime(inv, c);
  bool any_nvidia = std::any_of(inv.containers.runtimes.begin(), inv.containers.runtimes.end(),
                                [](const node::ContainerRuntime& rt) { return rt.installed && rt.nvidia_runtime; });
  if (plain_runc_nvidia) any_nvidia = false;
  if (!any_nvidia && !(have_spec && any_cdi_runtime)) {
    Add(c, "runtime.no-nvidia-runtime",
        {.observed = c.observed,
         .expected = "an nvidia runtime in the runtime's config, or a CDI spec for nvidia.com/gpu"});
  }
  return c;
}

CheckResult CheckOrchestrator(const node::NodeInventory& inv) {
  CheckResult c;
  c.layer = Layer::kOrchestrator;
  const node::OrchestratorLayer& o = inv.orchestrator;
  if (!o.kubelet_present) {
    c.status = CheckStatus::kSkip;
    c.observed = "not a Kubernetes node (no /var/lib/kubelet)";
    return c;
  }
  c.expected = "kubelet's device-plugin socket and a registered nvidia.com/gpu plugin or GPU DRA driver";
  // Which path serves the GPUs: the device plugin (nvidia.com/gpu counts), DRA (ResourceClaims), both.
  const char* path = !o.plugin_sockets.empty() && !o.dra_drivers.empty() ? "; GPUs served by the device plugin and DRA"
                     : !o.dra_drivers.empty()                            ? "; GPUs served by DRA"
                     : !o.plugin_sockets.empty()                         ? "; GPUs served by the device plugin"
                                                                         : "";
  c.observed = absl::StrCat("kubelet dir present", o.kubelet_socket ? ", kubelet.sock" : "",
                            o.pod_resources_socket ? ", pod-resources" : "",
                            o.plugin_sockets.empty() ? "" : ", plugins: " + absl::StrJoin(o.plugin_sockets, ", "),
                            o.dra_drivers.empty() ? "" : ", DRA drivers: " + absl::StrJoin(o.dra_drivers, ", "), path);
  if (!o.kubelet_socket) {
    Add(c, "kubelet.no-socket",
        {.observed = "no /var/lib/kubelet/device-plugins/kubelet.sock", .expected = "kubelet.sock present"});
  } else if (o.plugin_sockets.empty() && o.dra_drivers.empty() && !inv.hardware.gpus.empty()) {
    Add(c, "kubelet.no-gpu-plugin",
        {.observed = "kubelet.sock present, no plugin sockets, no GPU DRA driver registered",
         .expected = "a device plugin socket (e.g. nvidia-gpu.sock) or a DRA driver (gpu.nvidia.com-reg.sock)"});
  }
  return c;
}

}  // namespace gpunode::doctor
