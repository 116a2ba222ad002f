// The checks of gpunode doctor, one function per layer. Each appends findings from the
// catalogue; a layer with no findings is ok, a layer that does not exist on this node is skip.
#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
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
std::optional<std::string> LibraryVersion(const UserDriverLayer& d) {
  if (d.driver_version) return d.driver_version->ToString();
  if (auto v = DriverVersionFromLibraryPath(d.nvml_library_file)) return v->ToString();
  return std::nullopt;
}

bool IsPreTuring(const GpuInfo& g) { return g.cc_major && (*g.cc_major * 10 + g.cc_minor.value_or(0)) < 75; }
// Grace Hopper and Blackwell (and newer) support only the open kernel modules.
bool RequiresOpenModules(const GpuInfo& g) {
  if (g.cc_major && *g.cc_major >= 10) return true;
  return absl::StrContains(g.name, "GH200") || absl::StrContains(g.name, "GB200");
}

Finding Make(std::string id, CheckStatus status, std::string summary, std::string observed,
             std::string expected, std::string diagnosis, std::string action, std::vector<Layer> layers) {
  return Finding{std::move(id), status, std::move(summary), std::move(observed), std::move(expected),
                 std::move(diagnosis), std::move(action), std::move(layers)};
}

}  // namespace

CheckResult CheckHardware(const NodeInventory& inv) {
  CheckResult c;
  c.layer = Layer::kHardware;
  const HardwareLayer& hw = inv.hardware;
  c.expected = "NVIDIA GPUs on the PCI bus, each link at its maximum width";
  if (!hw.status.ok()) {
    c.findings.push_back(Make("hardware.sysfs-unreadable", CheckStatus::kFail,
                              "cannot read the PCI bus from sysfs", std::string(hw.status.message()),
                              "/sys/bus/pci/devices readable",
                              "Without sysfs gpunode cannot see the hardware. In a container, the host's /sys "
                              "must be mounted (read-only is enough) and --host-root pointed at it.",
                              "Mount the host's /sys under the host root (e.g. -v /sys:/host/sys:ro) and run again.",
                              {Layer::kHardware}));
    c.observed = "sysfs unreadable";
    return c;
  }
  if (hw.gpus.empty()) {
    c.findings.push_back(Make("hardware.no-gpu", CheckStatus::kFail, "no NVIDIA GPU on the PCI bus",
                              "0 NVIDIA display/3D controllers under /sys/bus/pci/devices",
                              "at least one NVIDIA GPU (vendor 0x10de, class 0x03xx)",
                              "The machine has no NVIDIA GPU, or the GPU is not enumerated: not seated, no power, "
                              "disabled in the BIOS/hypervisor, or not passed through to this VM.",
                              "Check `lspci -d 10de:` on the host; on a VM, check that the GPU is attached; on "
                              "bare metal, reseat and check the BIOS (Above 4G decoding, PCIe slot enabled).",
                              {Layer::kHardware}));
    c.observed = "no NVIDIA GPU";
    return c;
  }
  std::map<uint16_t, int> models;
  for (const PciDevice& d : hw.gpus) models[d.device]++;
  std::vector<std::string> parts;
  for (auto& [dev, n] : models) parts.push_back(absl::StrFormat("%dx 10de:%04x", n, dev));
  c.observed = absl::StrCat(hw.gpus.size(), " NVIDIA GPU", hw.gpus.size() == 1 ? "" : "s", " on the PCI bus (",
                            absl::StrJoin(parts, ", "), ")");
  if (!hw.others.empty()) absl::StrAppend(&c.observed, ", ", hw.others.size(), " other NVIDIA functions");

  for (const PciDevice& d : hw.gpus) {
    if (!d.driver.empty() && d.driver != "nvidia") {
      c.findings.push_back(Make(
          "hardware.other-driver", CheckStatus::kWarn, absl::StrCat("GPU ", d.bus_id, " is bound to ", d.driver),
          absl::StrCat(d.bus_id, " driver: ", d.driver), "bound to nvidia",
          d.driver == "nouveau" ? "The open-source nouveau driver holds the GPU, so nvidia cannot bind it."
                                : "The GPU is bound to another driver (often vfio-pci for passthrough to VMs); "
                                  "this host cannot use it.",
          d.driver == "vfio-pci" ? "If the GPU should serve this host, unbind it from vfio-pci (driverctl unset-override " + d.bus_id + ") and load nvidia."
                                 : "Blacklist the other driver and reload nvidia.",
          {Layer::kHardware, Layer::kKernelDriver}));
    }
  }

  // Link state: NVML's view when available (current vs max of GPU and slot), else sysfs.
  for (const GpuInfo& g : inv.driver.gpus) {
    if (g.pcie_width_current && g.pcie_width_max && *g.pcie_width_current < *g.pcie_width_max) {
      std::string gen = g.pcie_gen_current && g.pcie_gen_max
                            ? absl::StrCat("Gen", *g.pcie_gen_current, " x", *g.pcie_width_current, " (capable of Gen",
                                           g.pcie_gen_gpu_max.value_or(*g.pcie_gen_max), " x", *g.pcie_width_max, ")")
                            : absl::StrCat("x", *g.pcie_width_current, " (capable of x", *g.pcie_width_max, ")");
      c.findings.push_back(Make(
          "hardware.pcie-degraded", CheckStatus::kWarn,
          absl::StrCat("GPU ", g.index, " (", g.pci_bus_id, ") PCIe link is degraded"),
          absl::StrCat("link ", gen), absl::StrCat("x", *g.pcie_width_max),
          "A link trained below its width is a seating, riser, cable or slot problem (or a BIOS bifurcation "
          "setting). Host<->device copies run at a fraction of their speed.",
          "Reseat the GPU or riser, check the slot's bifurcation setting in the BIOS, then measure with "
          "`gpunode bench --tests pcie`.",
          {Layer::kHardware}));
    } else if (g.pcie_gen_max && g.pcie_gen_gpu_max && *g.pcie_gen_max < *g.pcie_gen_gpu_max) {
      c.findings.push_back(Make(
          "hardware.pcie-slot-limited", CheckStatus::kWarn,
          absl::StrCat("GPU ", g.index, " (", g.pci_bus_id, ") sits in a slower PCIe slot"),
          absl::StrCat("slot allows Gen", *g.pcie_gen_max, ", GPU supports Gen", *g.pcie_gen_gpu_max),
          absl::StrCat("Gen", *g.pcie_gen_gpu_max),
          "The slot, riser or platform limits the link generation below what the GPU supports.",
          "Move the GPU to a slot of its generation or check the BIOS PCIe speed setting.", {Layer::kHardware}));
    }
  }
  if (inv.driver.gpus.empty()) {
    for (const PciDevice& d : hw.gpus) {
      if (d.link_current && d.link_max && d.link_current->width < d.link_max->width) {
        c.findings.push_back(Make(
            "hardware.pcie-degraded", CheckStatus::kWarn, absl::StrCat("GPU ", d.bus_id, " PCIe link is degraded"),
            absl::StrCat("Gen", d.link_current->gen, " x", d.link_current->width),
            absl::StrCat("Gen", d.link_max->gen, " x", d.link_max->width),
            "A link trained below its width is a seating, riser, cable or slot problem.",
            "Reseat the GPU or riser and check the slot's bifurcation setting in the BIOS.", {Layer::kHardware}));
      }
    }
  }

  // Memory health: ECC, retired pages, row remapping; temperature.
  for (const GpuInfo& g : inv.driver.gpus) {
    std::string who = absl::StrCat("GPU ", g.index, " (", g.pci_bus_id, ")");
    if (g.remapped_rows && g.remapped_rows->failure) {
      c.findings.push_back(Make("hardware.row-remap-failure", CheckStatus::kFail,
                                who + " ran out of spare memory rows (row-remap failure)",
                                absl::StrCat(g.remapped_rows->uncorrectable, " uncorrectable rows remapped, failure flag set"),
                                "no remap failure",
                                "The GPU could not remap a failing HBM row: its memory can corrupt data. NVIDIA "
                                "treats this as a field-replaceable failure.",
                                "Drain the node, take the GPU out of service and open an RMA with the vendor.",
                                {Layer::kHardware}));
    } else if (g.remapped_rows && g.remapped_rows->pending) {
      c.findings.push_back(Make("hardware.row-remap-pending", CheckStatus::kWarn,
                                who + " has a row remap pending", "remap pending", "no pending remap",
                                "A memory row was marked for remapping; it takes effect at the next GPU reset.",
                                "Drain the GPU and reset it (nvidia-smi -r -i " + std::to_string(g.index) + ") or reboot.",
                                {Layer::kHardware}));
    }
    if (g.retired_pages_pending.value_or(false)) {
      c.findings.push_back(Make("hardware.retired-pages-pending", CheckStatus::kWarn,
                                who + " has retired memory pages pending", "page retirement pending",
                                "no pending retirement",
                                "Pages with ECC errors are retired at the next driver load.",
                                "Drain the GPU and reset it or reboot.", {Layer::kHardware}));
    }
    if (g.ecc_uncorrected_volatile.value_or(0) > 0) {
      c.findings.push_back(Make("hardware.ecc-uncorrected", CheckStatus::kFail,
                                who + " reported uncorrectable ECC errors since the driver loaded",
                                absl::StrCat(*g.ecc_uncorrected_volatile, " uncorrectable (volatile)"), "0",
                                "Uncorrectable ECC errors kill the running CUDA contexts (XID 48/94/95) and point "
                                "at failing memory.",
                                "Drain the GPU, reset it, and run `gpunode bench --tests memtest`; if errors recur, RMA.",
                                {Layer::kHardware}));
    } else if (g.ecc_uncorrected_aggregate.value_or(0) > 0) {
      c.findings.push_back(Make("hardware.ecc-uncorrected-history", CheckStatus::kWarn,
                                who + " has uncorrectable ECC errors in its lifetime record",
                                absl::StrCat(*g.ecc_uncorrected_aggregate, " uncorrectable (aggregate)"), "0",
                                "The GPU has had uncorrectable memory errors in the past.",
                                "Watch DCGM_FI_DEV_ECC_DBE_AGG_TOTAL and remapped rows; run `gpunode bench --tests memtest`.",
                                {Layer::kHardware}));
    }
    if (g.temperature_c && *g.temperature_c >= 85) {
      c.findings.push_back(Make("hardware.hot", CheckStatus::kWarn, absl::StrCat(who, " is hot"),
                                absl::StrCat(*g.temperature_c, " C"), "below 85 C",
                                "Sustained high temperature throttles clocks and shortens the GPU's life.",
                                "Check airflow, fans and the data-centre inlet temperature.", {Layer::kHardware}));
    }
  }
  return c;
}

CheckResult CheckKernelDriver(const NodeInventory& inv) {
  CheckResult c;
  c.layer = Layer::kKernelDriver;
  const KernelDriverLayer& k = inv.kernel;
  c.expected = "nvidia kernel module loaded, its device nodes present, nouveau not loaded";
  if (k.nouveau_loaded) {
    c.findings.push_back(Make("kernel.nouveau-loaded", CheckStatus::kFail, "the nouveau driver is loaded",
                              "nouveau in /proc/modules", "nouveau blacklisted",
                              "nouveau claims NVIDIA GPUs first, so the nvidia module cannot drive them.",
                              "Blacklist nouveau (echo 'blacklist nouveau' > /etc/modprobe.d/blacklist-nouveau.conf; "
                              "update-initramfs -u) and reboot.",
                              {Layer::kKernelDriver}));
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
      c.findings.push_back(Make(
          "kernel.module-not-loaded", CheckStatus::kFail, "the nvidia kernel module is not loaded",
          "no /proc/driver/nvidia, nvidia not in /proc/modules",
          absl::StrCat("nvidia loaded for the ", inv.hardware.gpus.size(), " GPU(s) on the PCI bus"),
          "Without the kernel module nothing above it works (nvidia-smi: \"couldn't communicate with the NVIDIA "
          "driver\"). Usual causes: driver not installed, a kernel update without a rebuilt DKMS module, Secure "
          "Boot rejecting an unsigned module, or nouveau holding the GPU.",
          "Run `modprobe nvidia` and read `dmesg | grep -i nvidia`; if the module is missing for this kernel "
          "(" + (k.kernel_release.empty() ? std::string("uname -r") : k.kernel_release) +
              "), reinstall the driver or its DKMS/precompiled module.",
          {Layer::kKernelDriver}));
    }
    return c;
  }
  std::string flavor = k.flavor == ModuleFlavor::kOpen ? "open" : k.flavor == ModuleFlavor::kProprietary ? "proprietary" : "";
  c.observed = absl::StrCat("nvidia ", V(k.version), flavor.empty() ? "" : " (" + flavor + ")");
  if (!k.status.ok()) {
    c.findings.push_back(Make("kernel.version-unreadable", CheckStatus::kWarn,
                              "cannot read the kernel module's version", std::string(k.status.message()),
                              "a readable /proc/driver/nvidia/version",
                              "The driver's proc file is missing or truncated.",
                              "Check that /proc is the host's (in a container: mount it) and that the module loaded cleanly.",
                              {Layer::kKernelDriver}));
  }
  int gpu_nodes = 0;
  std::vector<std::string> missing;
  for (const DeviceNode& n : k.device_nodes) {
    bool per_gpu = n.path.size() > 11 && n.path.compare(0, 11, "/dev/nvidia") == 0 &&
                   std::isdigit(static_cast<unsigned char>(n.path[11]));
    if (per_gpu) {
      ++gpu_nodes;
    } else if (!n.present && n.path != "/dev/nvidia-modeset" && n.path != "/dev/nvidia-uvm-tools") {
      missing.push_back(n.path);
    }
  }
  absl::StrAppend(&c.observed, ", ", gpu_nodes, " /dev/nvidiaN");
  if (!missing.empty()) {
    bool uvm_only = missing.size() == 1 && missing[0] == "/dev/nvidia-uvm";
    c.findings.push_back(Make(
        uvm_only ? "kernel.uvm-missing" : "kernel.device-nodes-missing", uvm_only ? CheckStatus::kWarn : CheckStatus::kFail,
        absl::StrCat("device node", missing.size() == 1 ? " " : "s ", absl::StrJoin(missing, ", "), " missing"),
        absl::StrCat("missing: ", absl::StrJoin(missing, ", ")), "/dev/nvidiactl and /dev/nvidia-uvm present",
        uvm_only ? "nvidia_uvm is not loaded or its node was not created; CUDA programs fail at cuInit."
                 : "The module is loaded but its device nodes were not created (no udev rule or nvidia-modprobe), "
                   "or, in a container, they were not passed in.",
        uvm_only ? "Run `nvidia-modprobe -u -c=0` (or `modprobe nvidia-uvm`)."
                 : "Run `nvidia-modprobe -c=0 -u` on the host; in a container, request the GPU through the "
                   "device plugin or CDI so the nodes are mounted.",
        {Layer::kKernelDriver}));
  } else if (!k.nvidia_uvm_loaded && k.nvidia_loaded) {
    c.findings.push_back(Make("kernel.uvm-not-loaded", CheckStatus::kWarn, "nvidia_uvm is not loaded",
                              "nvidia_uvm absent from /proc/modules", "nvidia_uvm loaded",
                              "CUDA needs nvidia_uvm; the first CUDA program loads it only if nvidia-modprobe is setuid.",
                              "Run `modprobe nvidia-uvm`, and add it to /etc/modules-load.d.", {Layer::kKernelDriver}));
  }
  if (!inv.hardware.gpus.empty() && gpu_nodes == 0 && missing.empty()) {
    c.findings.push_back(Make("kernel.gpu-nodes-missing", CheckStatus::kFail, "no /dev/nvidiaN device nodes",
                              "0 /dev/nvidiaN", absl::StrCat(inv.hardware.gpus.size(), " /dev/nvidiaN"),
                              "The per-GPU device nodes were not created or not passed into this container.",
                              "Run `nvidia-modprobe -c=0` for each GPU, or request GPUs through the device plugin/CDI.",
                              {Layer::kKernelDriver}));
  }
  for (const ProcGpu& g : k.gpus) {
    if (g.excluded) {
      c.findings.push_back(Make("kernel.gpu-excluded", CheckStatus::kWarn,
                                absl::StrCat("GPU ", g.bus_id, " is excluded by the driver"), "GPU Excluded: Yes",
                                "No", "The driver excluded the GPU (NVreg_ExcludedGpus, or a failed GPU at load).",
                                "Check the nvidia module parameters and dmesg for this GPU.", {Layer::kKernelDriver}));
    }
  }
  // Module flavor against the GPUs it drives.
  for (const GpuInfo& g : inv.driver.gpus) {
    if (k.flavor == ModuleFlavor::kProprietary && RequiresOpenModules(g)) {
      c.findings.push_back(Make("kernel.needs-open-module", CheckStatus::kFail,
                                absl::StrCat(g.name, " requires the open kernel modules"),
                                "proprietary nvidia module", "open nvidia module (nvidia-open)",
                                "Grace Hopper and Blackwell GPUs are supported only by the open GPU kernel modules.",
                                "Install the open flavor of the same driver (e.g. nvidia-driver-<branch>-open, or "
                                "the .run installer with --kernel-module-type=open) and reboot.",
                                {Layer::kKernelDriver, Layer::kHardware}));
      break;
    }
    if (k.flavor == ModuleFlavor::kOpen && IsPreTuring(g)) {
      c.findings.push_back(Make("kernel.needs-proprietary-module", CheckStatus::kFail,
                                absl::StrCat(g.name, " is not supported by the open kernel modules"),
                                "open nvidia module", "proprietary nvidia module",
                                "The open modules need GSP firmware, which only Turing and newer GPUs have; "
                                "Maxwell, Pascal and Volta need the proprietary flavor.",
                                "Install the proprietary flavor of the driver and reboot.",
                                {Layer::kKernelDriver, Layer::kHardware}));
      break;
    }
  }
  return c;
}

CheckResult CheckUserDriver(const NodeInventory& inv) {
  CheckResult c;
  c.layer = Layer::kUserDriver;
  const UserDriverLayer& d = inv.driver;
  const KernelDriverLayer& k = inv.kernel;
  c.expected = "NVML initialises, its version equals the kernel module's, it sees every GPU; cuInit succeeds";
  if (!d.status.ok() && inv.hardware.gpus.empty() && !k.proc_present && !k.nvidia_loaded) {
    c.status = CheckStatus::kSkip;  // no GPU and no driver: the hardware check says it all
    c.observed = absl::StrCat("no NVIDIA driver (", d.status.message(), ")");
    return c;
  }
  if (!d.status.ok()) {
    auto code = NvmlReturnOf(d.status).value_or(NVML_ERROR_UNKNOWN);
    std::string observed = std::string(d.status.message());
    c.observed = "NVML unusable";
    switch (code) {
      case NVML_ERROR_LIBRARY_NOT_FOUND:
        c.findings.push_back(Make(
            "driver.nvml-missing", CheckStatus::kFail, "NVML (libnvidia-ml.so.1) is not installed",
            observed, "libnvidia-ml.so.1 loadable",
            "The driver's user-space libraries are missing (nvidia-smi would be missing too), or, in a "
            "container, were not mounted in by the container runtime.",
            k.version ? absl::StrCat("Install the user-space driver matching the kernel module ", k.version->ToString(),
                                     " (e.g. libnvidia-compute-", k.version->major(), ") or, in a container, "
                                     "request the GPU through CDI/the NVIDIA runtime so the libraries are mounted.")
                      : "Install the NVIDIA driver (kernel module and user-space libraries of the same version).",
            {Layer::kUserDriver}));
        break;
      case NVML_ERROR_DRIVER_NOT_LOADED:
        c.findings.push_back(Make(
            "driver.not-loaded", CheckStatus::kFail,
            "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver", observed,
            "the kernel module answering NVML",
            "The user-space libraries are installed but the kernel module is not loaded (see the kernel driver check).",
            "Fix the kernel driver layer first: load the nvidia module for this kernel.",
            {Layer::kUserDriver, Layer::kKernelDriver}));
        break;
      case NVML_ERROR_LIB_RM_VERSION_MISMATCH:
        c.findings.push_back(Make(
            "driver.version-mismatch", CheckStatus::kFail, "Failed to initialize NVML: Driver/library version mismatch",
            absl::StrCat("kernel module ", V(k.version), ", user-space library ",
                         LibraryVersion(d).value_or("of another version"),
                         d.nvml_library_file.empty() ? "" : " (" + d.nvml_library_file + ")"),
            "kernel module and user-space libraries of the same version",
            "The user-space driver was upgraded (often by unattended upgrades) while the old kernel module is still loaded.",
            "Reboot the node (or drain it, stop GPU processes and reload the modules: rmmod nvidia_uvm nvidia_drm "
            "nvidia_modeset nvidia; modprobe nvidia). If the mismatch stays, reinstall one driver version for both.",
            {Layer::kUserDriver, Layer::kKernelDriver}));
        break;
      case NVML_ERROR_NO_PERMISSION:
        c.findings.push_back(Make(
            "driver.no-permission", CheckStatus::kFail, "NVML: insufficient permissions", observed,
            "read/write access to /dev/nvidiactl and /dev/nvidiaN",
            "This user (or container) cannot open the GPU device nodes.",
            "Run as root or a member of the group owning /dev/nvidia*; in Kubernetes request nvidia.com/gpu "
            "(or run the agent privileged).",
            {Layer::kUserDriver, Layer::kKernelDriver}));
        break;
      default:
        c.findings.push_back(Make("driver.nvml-init-failed", CheckStatus::kFail, "NVML failed to initialise",
                                  observed, "nvmlInit_v2 succeeds",
                                  "NVML could not initialise for a reason other than the common ones.",
                                  "Read `dmesg | grep -i -e nvrm -e xid` and run nvidia-smi for the driver's own message.",
                                  {Layer::kUserDriver}));
    }
    return c;
  }

  unsigned count = d.device_count.value_or(0);
  c.observed = absl::StrCat("NVML ", V(d.driver_version), ", CUDA ", V(d.cuda_version), ", ", d.gpus.size(), "/",
                            count, " GPUs answering");
  if (k.version && d.driver_version && *k.version != *d.driver_version) {
    c.findings.push_back(Make("driver.version-mismatch", CheckStatus::kFail,
                              "kernel module and user-space driver versions differ",
                              absl::StrCat("kernel module ", k.version->ToString(), ", NVML ", d.driver_version->ToString()),
                              "the same version",
                              "The user-space driver was upgraded while the old kernel module is still loaded.",
                              "Reboot the node (or reload the nvidia modules) so both are the same version.",
                              {Layer::kUserDriver, Layer::kKernelDriver}));
  }
  size_t pci = inv.hardware.gpus.size();
  if (count == 0 && pci > 0) {
    c.findings.push_back(Make("driver.no-devices", CheckStatus::kFail, "No devices were found",
                              absl::StrCat("NVML sees 0 GPUs, the PCI bus has ", pci), absl::StrCat(pci, " GPUs"),
                              "The driver loaded but initialised no GPU: unsupported GPU for this driver branch, "
                              "GPUs excluded, or a failed GPU initialisation (see dmesg for RmInitAdapter).",
                              "Read `dmesg | grep -i -e NVRM -e RmInitAdapter`; check that this driver branch supports the GPU.",
                              {Layer::kUserDriver, Layer::kHardware}));
  } else if (count < pci) {
    c.findings.push_back(Make("driver.fewer-gpus", CheckStatus::kFail,
                              absl::StrCat("NVML sees ", count, " of the ", pci, " GPUs on the PCI bus"),
                              absl::StrCat(count, " GPUs in NVML, ", pci, " on PCI"), absl::StrCat(pci, " GPUs"),
                              "A GPU failed to initialise in the driver or fell off the bus, or is bound to another driver.",
                              "Compare `lspci -d 10de:` with nvidia-smi -L, read dmesg for XID 79 / RmInitAdapter "
                              "failures, then reset or reseat the missing GPU.",
                              {Layer::kUserDriver, Layer::kHardware}));
  }
  const std::map<unsigned, BusGpu> on_bus = UnreadableGpusOnBus(inv);
  for (const GpuFailure& f : d.gpu_failures) {
    auto code = NvmlReturnOf(f.status).value_or(NVML_ERROR_UNKNOWN);
    // "GPU 2 (0000:3a:00.0)": the bus id from sysfs, as nvidia-smi names a GPU it cannot open.
    std::string gpu = absl::StrCat("GPU ", f.index);
    if (auto it = on_bus.find(f.index); it != on_bus.end()) absl::StrAppend(&gpu, " (", it->second.pci_bus_id, ")");
    if (code == NVML_ERROR_GPU_IS_LOST) {
      c.findings.push_back(Make("driver.gpu-lost", CheckStatus::kFail,
                                absl::StrCat(gpu, " has fallen off the bus (GPU is lost)"),
                                std::string(f.status.message()), "the GPU answering NVML",
                                "The GPU stopped responding on PCIe (XID 79): power, thermal, or hardware failure.",
                                "Drain the node and reboot it; if the GPU falls off again, reseat it and check "
                                "power cables, then RMA.",
                                {Layer::kUserDriver, Layer::kHardware}));
    } else {
      c.findings.push_back(Make("driver.gpu-unreadable", CheckStatus::kFail,
                                absl::StrCat(gpu, " cannot be opened"), std::string(f.status.message()),
                                "the GPU answering NVML", "NVML could not open this GPU.",
                                "Run `nvidia-smi -i " + std::to_string(f.index) + " -q` and read dmesg for this GPU.",
                                {Layer::kUserDriver}));
    }
  }
  // Per-GPU driver state.
  for (const GpuInfo& g : d.gpus) {
    std::string who = absl::StrCat("GPU ", g.index, " (", g.pci_bus_id, ")");
    if (g.persistence_mode && !*g.persistence_mode) {
      c.findings.push_back(Make("driver.persistence-off", CheckStatus::kWarn, who + " has persistence mode off",
                                "persistence mode disabled", "enabled",
                                "Without persistence the driver tears the GPU down when the last client exits, so "
                                "every start pays GPU initialisation (seconds on large GPUs) and settings are lost.",
                                "Enable the nvidia-persistenced service (systemctl enable --now nvidia-persistenced), "
                                "or run `nvidia-smi -pm 1`.",
                                {Layer::kUserDriver}));
    }
    if (g.ecc_enabled && g.ecc_pending && *g.ecc_enabled != *g.ecc_pending) {
      c.findings.push_back(Make("driver.ecc-pending", CheckStatus::kWarn, who + " has an ECC mode change pending",
                                absl::StrCat("ECC ", *g.ecc_enabled ? "on" : "off", ", pending ", *g.ecc_pending ? "on" : "off"),
                                "current == pending", "An ECC mode change takes effect at the next GPU reset.",
                                "Reset the GPU or reboot.", {Layer::kUserDriver}));
    }
    if (g.mig_enabled && g.mig_pending && *g.mig_enabled != *g.mig_pending) {
      c.findings.push_back(Make("driver.mig-pending", CheckStatus::kWarn, who + " has a MIG mode change pending",
                                absl::StrCat("MIG ", *g.mig_enabled ? "on" : "off", ", pending ", *g.mig_pending ? "on" : "off"),
                                "current == pending", "A MIG mode change takes effect at the next GPU reset.",
                                "Drain the GPU and reset it (nvidia-smi -r).", {Layer::kUserDriver}));
    }
    if (g.mig_enabled.value_or(false) && g.mig_devices.empty()) {
      c.findings.push_back(Make("driver.mig-no-instances", CheckStatus::kWarn,
                                who + " has MIG enabled but no MIG instances", "MIG on, 0 instances",
                                "at least one GPU instance with a compute instance",
                                "With MIG on, CUDA sees only MIG devices; with none created the GPU is unusable.",
                                "Create instances (nvidia-smi mig -cgi <profiles> -C) or disable MIG (nvidia-smi -mig 0).",
                                {Layer::kUserDriver}));
    }
    if (g.memory_used_bytes && g.memory_total_bytes && g.compute_processes && g.compute_processes->empty()) {
      uint64_t threshold = std::max<uint64_t>(1024 * kMiB, *g.memory_total_bytes / 50);
      if (*g.memory_used_bytes > threshold) {
        c.findings.push_back(Make("driver.memory-used-no-process", CheckStatus::kWarn,
                                  who + " has memory in use but no processes",
                                  absl::StrCat(*g.memory_used_bytes / kMiB, " MiB used, 0 compute processes"),
                                  "memory freed when no process runs",
                                  "A process in another PID namespace (a container) holds the GPU, or a killed "
                                  "process left a zombie context.",
                                  "Find the holder with `fuser -v /dev/nvidia*` on the host; if none, reset the GPU.",
                                  {Layer::kUserDriver}));
      }
    }
  }
  // libcuda: the view a CUDA application gets.
  const CudaDriverInfo& cu = d.cuda;
  if (!cu.probed) {
    // not loaded by this command (plugin, labels, exporter): nothing to judge
  } else if (!cu.status.ok()) {
    switch (cu.init_result) {
      case GPUNODE_CUDA_ERROR_INSUFFICIENT_DRIVER:
        c.findings.push_back(Make("cuda.insufficient-driver", CheckStatus::kFail,
                                  "CUDA driver version is insufficient for CUDA runtime version",
                                  std::string(cu.status.message()), "cuInit succeeds",
                                  "The libcuda in use is older than the CUDA runtime expects, or does not match the kernel module.",
                                  "Run `gpunode compat check` for the image; upgrade the driver or use an image built for "
                                  "an older CUDA.",
                                  {Layer::kUserDriver}));
        break;
      case GPUNODE_CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
        c.findings.push_back(Make("cuda.system-driver-mismatch", CheckStatus::kFail,
                                  "CUDA: system has unsupported display driver / cuda driver combination (803)",
                                  std::string(cu.status.message()), "libcuda matching the kernel module",
                                  "A forward-compatibility libcuda (cuda-compat) or a stray libcuda of another version "
                                  "is loaded against this kernel module.",
                                  "Remove the cuda-compat directory from LD_LIBRARY_PATH / ld.so.conf, or use a "
                                  "compat package that supports this driver branch.",
                                  {Layer::kUserDriver, Layer::kKernelDriver}));
        break;
      case GPUNODE_CUDA_ERROR_NO_DEVICE:
        if (count > 0) {
          c.findings.push_back(Make("cuda.no-device", CheckStatus::kFail, "CUDA sees no device although NVML does",
                                    std::string(cu.status.message()), absl::StrCat(count, " CUDA devices"),
                                    "CUDA_VISIBLE_DEVICES hides the GPUs, /dev/nvidia-uvm is missing, or all GPUs are "
                                    "in MIG mode without instances.",
                                    "Check CUDA_VISIBLE_DEVICES and /dev/nvidia-uvm.", {Layer::kUserDriver}));
        }
        break;
      default:
        if (absl::IsNotFound(cu.status) && cu.init_result == 0) {
          c.findings.push_back(Make("cuda.libcuda-missing", CheckStatus::kFail, "libcuda.so.1 is not installed",
                                    std::string(cu.status.message()), "libcuda.so.1 loadable",
                                    "CUDA applications need the driver's libcuda; NVML alone is not enough.",
                                    "Install the driver's compute libraries (libnvidia-compute-<branch>).",
                                    {Layer::kUserDriver}));
        } else {
          c.findings.push_back(Make("cuda.init-failed", CheckStatus::kFail, "cuInit failed",
                                    std::string(cu.status.message()), "cuInit succeeds",
                                    "The CUDA driver could not initialise.",
                                    "Read dmesg for NVRM/Xid messages and run `gpunode bench` after fixing the driver.",
                                    {Layer::kUserDriver}));
        }
    }
  } else {
    absl::StrAppend(&c.observed, "; libcuda ", V(cu.version));
    if (cu.device_count) absl::StrAppend(&c.observed, ", cuInit ok (", *cu.device_count, " devices)");
    if (cu.version && d.cuda_version && *cu.version != *d.cuda_version) {
      c.findings.push_back(Make("cuda.compat-libcuda", CheckStatus::kWarn,
                                "libcuda reports another CUDA version than the driver",
                                absl::StrCat("libcuda CUDA ", cu.version->ToString(), ", driver CUDA ", d.cuda_version->ToString()),
                                "the same", "A forward-compatibility libcuda (cuda-compat) is on the library path.",
                                "Intended for forward compatibility on datacenter GPUs; otherwise remove it from the library path.",
                                {Layer::kUserDriver}));
    }
  }
  if (d.status.ok() && d.nvidia_smi.empty()) {
    c.findings.push_back(Make("driver.nvidia-smi-missing", CheckStatus::kWarn, "nvidia-smi: command not found",
                              "no nvidia-smi under /usr/bin, /usr/sbin, /usr/local/nvidia/bin, /usr/local/bin",
                              "nvidia-smi installed with the driver",
                              "The driver's utilities package is not installed (the libraries are).",
                              d.driver_version ? absl::StrCat("Install nvidia-utils-", d.driver_version->major(),
                                                              " (or the matching driver utilities package).")
                                               : "Install the driver's utilities package.",
                              {Layer::kUserDriver}));
  }
  return c;
}

CheckResult CheckToolchain(const NodeInventory& inv) {
  CheckResult c;
  c.layer = Layer::kToolchain;
  const ToolchainLayer& t = inv.toolchain;
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
    c.findings.push_back(Make(
        "toolchain.newer-than-driver", same_major ? CheckStatus::kWarn : CheckStatus::kFail,
        absl::StrCat("CUDA toolkit ", t.cuda_toolkit->ToString(), " is newer than the driver supports (", max->ToString(), ")"),
        absl::StrCat("toolkit ", t.cuda_toolkit->ToString(), ", driver CUDA ", max->ToString()),
        absl::StrCat("toolkit <= ", max->ToString()),
        same_major ? "Programs built with it run through minor-version compatibility: no PTX JIT of its newer PTX "
                     "(CUDA_ERROR_UNSUPPORTED_PTX_VERSION), and features of the newer driver are missing."
                   : "Programs built with a newer CUDA major version fail with \"CUDA driver version is insufficient\".",
        absl::StrCat("Run `gpunode compat driver-for --cuda ", t.cuda_toolkit->Truncate(2).ToString(),
                     "` and upgrade the driver, or install a toolkit <= ", max->ToString(), "."),
        {Layer::kToolchain, Layer::kUserDriver}));
  }
  return c;
}

CheckResult CheckContainers(const NodeInventory& inv) {
  CheckResult c;
  c.layer = Layer::kContainerRuntime;
  std::vector<std::string> installed;
  bool any_cdi_runtime = false;
  for (const ContainerRuntime& rt : inv.containers.runtimes) {
    if (!rt.installed) continue;
    std::string desc = rt.name;
    if (rt.nvidia_runtime) desc += " (nvidia runtime" + std::string(rt.default_nvidia ? ", default" : "") + ")";
    else if (rt.cdi_enabled) desc += " (CDI)";
    installed.push_back(desc);
    if (!rt.config_error.ok()) {
      c.findings.push_back(Make("runtime.config-unreadable", CheckStatus::kWarn,
                                absl::StrCat(rt.name, "'s configuration cannot be read"),
                                std::string(rt.config_error.message()), "a valid configuration",
                                "The runtime's configuration file is unreadable or malformed.",
                                absl::StrCat("Fix ", rt.config_path.empty() ? rt.name + "'s config" : rt.config_path,
                                             " (then `gpunode runtime configure --runtime ", rt.name, "`)."),
                                {Layer::kContainerRuntime}));
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
  for (const CdiSpec& spec : inv.containers.cdi_specs) {
    if (!spec.error.ok()) {
      c.findings.push_back(Make("runtime.cdi-unreadable", CheckStatus::kWarn,
                                absl::StrCat("CDI spec ", spec.path, " cannot be read"), std::string(spec.error.message()),
                                "a valid CDI spec", "Container runtimes skip malformed CDI specs.",
                                "Regenerate it: gpunode cdi generate (or nvidia-ctk cdi generate).", {Layer::kContainerRuntime}));
      continue;
    }
    if (spec.kind != "nvidia.com/gpu") continue;
    have_spec = true;
    absl::StrAppend(&c.observed, "; CDI ", spec.path);
    if (driver && spec.driver_version && *spec.driver_version != *driver) {
      c.findings.push_back(Make("runtime.cdi-stale", CheckStatus::kFail,
                                absl::StrCat("CDI spec ", spec.path, " was generated for driver ",
                                             spec.driver_version->ToString()),
                                absl::StrCat("spec mounts driver ", spec.driver_version->ToString(), " libraries, driver is ",
                                             driver->ToString()),
                                absl::StrCat("a spec for driver ", driver->ToString()),
                                "The driver was upgraded after the spec was generated: containers get mounts of "
                                "libraries that no longer exist and fail to start.",
                                "Regenerate the spec: gpunode cdi generate --output " + spec.path +
                                    " (or nvidia-ctk cdi generate).",
                                {Layer::kContainerRuntime, Layer::kUserDriver}));
    }
    // Device nodes: the spec's against the host's. A node the spec names and the host lacks makes
    // every container that asks for it fail ("failed to stat CDI host device"); a GPU node the
    // host has and the spec lacks is a GPU that `nvidia.com/gpu=all` silently leaves out.
    std::vector<std::string> gone, unlisted, renumbered;
    std::set<std::string> named(spec.device_nodes.begin(), spec.device_nodes.end());
    for (const DeviceNode& n : inv.kernel.device_nodes) {
      if (auto it = spec.node_numbers.find(n.path);
          n.present && n.char_device && it != spec.node_numbers.end() &&
          (it->second.first != n.major || it->second.second != n.minor)) {
        renumbered.push_back(absl::StrCat(n.path, " (spec ", it->second.first, ":", it->second.second, ", host ",
                                          n.major, ":", n.minor, ")"));
      }
      const bool per_gpu = n.path.size() > 11 && n.path.compare(0, 11, "/dev/nvidia") == 0 &&
                           std::isdigit(static_cast<unsigned char>(n.path[11]));
      if (!n.present && named.count(n.path)) gone.push_back(n.path);
      if (n.present && per_gpu && !named.count(n.path)) unlisted.push_back(n.path);
    }
    for (const std::string& p : named) {
      const bool known = std::any_of(inv.kernel.device_nodes.begin(), inv.kernel.device_nodes.end(),
                                     [&](const DeviceNode& n) { return n.path == p; });
      const bool per_gpu = p.size() > 11 && p.compare(0, 11, "/dev/nvidia") == 0 &&
                           std::isdigit(static_cast<unsigned char>(p[11]));
      if (!known && per_gpu) gone.push_back(p);  // /dev/nvidiaN the host does not have at all
    }
    if (!gone.empty()) {
      c.findings.push_back(Make("runtime.cdi-missing-node", CheckStatus::kFail,
                                absl::StrCat("CDI spec ", spec.path, " names device nodes the host does not have: ",
                                             absl::StrJoin(gone, ", ")),
                                absl::StrCat(gone.size(), " device node(s) of the spec missing under /dev"),
                                "every device node of the spec present on the host",
                                "A GPU fell off the bus or the spec was made on another node: containers that ask "
                                "for these devices fail with \"failed to stat CDI host device\".",
                                "Find out why the node is gone (kernel layer above), then regenerate: gpunode cdi "
                                "generate --output " + spec.path + ".",
                                {Layer::kContainerRuntime, Layer::kKernelDriver}));
    }
    if (!renumbered.empty()) {
      c.findings.push_back(Make("runtime.cdi-stale-node", CheckStatus::kFail,
                                absl::StrCat("CDI spec ", spec.path, " gives device nodes other numbers than the host: ",
                                             absl::StrJoin(renumbered, ", ")),
                                absl::StrJoin(renumbered, ", "), "the host's major:minor for every node",
                                "Engines create the container's node with the spec's numbers: after a driver reload "
                                "(nvidia-uvm's major is assigned at load time) containers get a node that points at "
                                "nothing, and CUDA fails without a clear error.",
                                "Regenerate the spec: gpunode cdi generate --output " + spec.path + ".",
                                {Layer::kContainerRuntime, Layer::kKernelDriver}));
    }
    if (!unlisted.empty()) {
      c.findings.push_back(Make("runtime.cdi-incomplete", CheckStatus::kWarn,
                                absl::StrCat("CDI spec ", spec.path, " leaves out GPUs the host has: ",
                                             absl::StrJoin(unlisted, ", ")),
                                absl::StrCat(unlisted.size(), " GPU device node(s) not in the spec"),
                                "one device per GPU of the node",
                                "The spec was generated while a GPU was missing or before one was added: "
                                "nvidia.com/gpu=all gives containers fewer GPUs than the node has.",
                                "Regenerate the spec: gpunode cdi generate --output " + spec.path + ".",
                                {Layer::kContainerRuntime}));
    }
  }
  // Docker's --gpus: offered only with nvidia-container-runtime-hook in its PATH; gpunode's hook
  // needs gpunode's shim as the container's runtime.
  for (const ContainerRuntime& rt : inv.containers.runtimes) {
    if (rt.name != "docker" || !rt.installed || !rt.nvidia_runtime) continue;
    if (rt.gpus_hook.empty()) {
      c.findings.push_back(Make("runtime.docker-no-gpus-hook", CheckStatus::kWarn,
                                "`docker run --gpus` is not offered: no nvidia-container-runtime-hook in Docker's PATH",
                                "no nvidia-container-runtime-hook in /usr/local/sbin ... /bin",
                                "nvidia-container-runtime-hook (a link to gpunode)",
                                "Docker registers its GPU device driver only when it finds that program: without it "
                                "`--gpus` fails with \"could not select device driver \"\" with capabilities: [[gpu]]\".",
                                "Run `gpunode runtime configure --runtime docker --set-as-default` (it links the hook to "
                                "gpunode), then restart Docker.",
                                {Layer::kContainerRuntime}));
    } else if (rt.gpus_hook_gpunode && !rt.default_nvidia) {
      c.findings.push_back(Make("runtime.docker-gpus-not-default", CheckStatus::kWarn,
                                "`docker run --gpus` fails unless the container also says --runtime nvidia",
                                absl::StrCat(rt.gpus_hook, " is gpunode; Docker's default runtime is not nvidia"),
                                "nvidia as Docker's default-runtime",
                                "gpunode's hook leaves the GPUs to gpunode's OCI shim; with runc as the runtime the "
                                "hook stops the container with a message instead.",
                                "Run `gpunode runtime configure --runtime docker --set-as-default`, then restart Docker "
                                "(or run GPU containers with --runtime nvidia).",
                                {Layer::kContainerRuntime}));
    }
  }
  bool any_nvidia = std::any_of(inv.containers.runtimes.begin(), inv.containers.runtimes.end(),
                                [](const ContainerRuntime& rt) { return rt.installed && rt.nvidia_runtime; });
  if (!any_nvidia && !(have_spec && any_cdi_runtime)) {
    c.findings.push_back(Make("runtime.no-nvidia-runtime", CheckStatus::kWarn,
                              "containers cannot get the GPU: no NVIDIA runtime and no CDI spec",
                              c.observed, "an nvidia runtime in the runtime's config, or a CDI spec for nvidia.com/gpu",
                              "Without the NVIDIA runtime or CDI, `--gpus all` and GPU pods start without the "
                              "device nodes and driver libraries (\"could not select device driver\").",
                              "Run `gpunode cdi generate` and `gpunode runtime configure --runtime <docker|containerd|crio>` "
                              "(or nvidia-ctk runtime configure), then restart the runtime.",
                              {Layer::kContainerRuntime}));
  }
  return c;
}

CheckResult CheckOrchestrator(const NodeInventory& inv) {
  CheckResult c;
  c.layer = Layer::kOrchestrator;
  const OrchestratorLayer& o = inv.orchestrator;
  if (!o.kubelet_present) {
    c.status = CheckStatus::kSkip;
    c.observed = "not a Kubernetes node (no /var/lib/kubelet)";
    return c;
  }
  c.expected = "kubelet's device-plugin socket and a registered nvidia.com/gpu plugin";
  c.observed = absl::StrCat("kubelet dir present", o.kubelet_socket ? ", kubelet.sock" : "",
                            o.pod_resources_socket ? ", pod-resources" : "",
                            o.plugin_sockets.empty() ? "" : ", plugins: " + absl::StrJoin(o.plugin_sockets, ", "));
  if (!o.kubelet_socket) {
    c.findings.push_back(Make("kubelet.no-socket", CheckStatus::kWarn, "the kubelet's device-plugin socket is missing",
                              "no /var/lib/kubelet/device-plugins/kubelet.sock", "kubelet.sock present",
                              "The kubelet is not running, or runs with another root directory.",
                              "Check `systemctl status kubelet` and its --root-dir.", {Layer::kOrchestrator}));
  } else if (o.plugin_sockets.empty() && !inv.hardware.gpus.empty()) {
    c.findings.push_back(Make("kubelet.no-gpu-plugin", CheckStatus::kWarn,
                              "no device plugin is registered: nvidia.com/gpu will not be allocatable",
                              "kubelet.sock present, no plugin sockets", "a device plugin socket (e.g. nvidia-gpu.sock)",
                              "No GPU device plugin runs on this node, so the scheduler sees no GPUs.",
                              "Deploy the gpunode agent DaemonSet (or run `gpunode plugin`).", {Layer::kOrchestrator}));
  }
  return c;
}

}  // namespace gpunode::doctor
