// The diagnosis catalogue's table (catalogue.h says what an entry is). One entry per wording,
// grouped by id, in the order the checks of checks.cc run; docs/doctor.md lists the ids in this
// order too (test/doctor/catalogue_test.cc).
#include "src/doctor/catalogue.h"

#include <algorithm>
#include <stdexcept>

namespace gpunode::doctor {
namespace {

constexpr CheckStatus kWarn = CheckStatus::kWarn;
constexpr CheckStatus kFail = CheckStatus::kFail;
constexpr Layer kHardware = Layer::kHardware;
constexpr Layer kKernel = Layer::kKernelDriver;
constexpr Layer kUser = Layer::kUserDriver;
constexpr Layer kToolchain = Layer::kToolchain;
constexpr Layer kRuntime = Layer::kContainerRuntime;
constexpr Layer kKubelet = Layer::kOrchestrator;

std::vector<Advice> MakeCatalogue() {
  return {
      // ---- hardware ----
      {.id = "hardware.sysfs-unreadable", .status = kFail, .layers = {kHardware},
       .symptom = "/sys not mounted in the container",
       .summary = "cannot read the PCI bus from sysfs",
       .diagnosis = "Without sysfs gpunode cannot see the hardware. In a container, the host's /sys must be "
                    "mounted (read-only is enough) and --host-root pointed at it.",
       .action = "Mount the host's /sys under the host root (e.g. -v /sys:/host/sys:ro) and run again."},
      {.id = "hardware.no-gpu", .status = kFail, .layers = {kHardware},
       .symptom = "no NVIDIA GPU enumerated on PCI",
       .summary = "no NVIDIA GPU on the PCI bus",
       .diagnosis = "The machine has no NVIDIA GPU, or the GPU is not enumerated: not seated, no power, disabled "
                    "in the BIOS/hypervisor, or not passed through to this VM.",
       .action = "Check `lspci -d 10de:` on the host; on a VM, check that the GPU is attached; on bare metal, "
                 "reseat and check the BIOS (Above 4G decoding, PCIe slot enabled)."},
      {.id = "hardware.other-driver", .status = kWarn, .layers = {kHardware, kKernel},
       .symptom = "GPU bound to vfio-pci / nouveau",
       .summary = "{gpu} is bound to {driver}",
       .diagnosis = "The GPU is bound to another driver (often vfio-pci for passthrough to VMs); this host "
                    "cannot use it.",
       .action = "Blacklist the other driver and reload nvidia."},
      {.id = "hardware.other-driver", .variant = "nouveau", .status = kWarn, .layers = {kHardware, kKernel},
       .summary = "{gpu} is bound to {driver}",
       .diagnosis = "The open-source nouveau driver holds the GPU, so nvidia cannot bind it.",
       .action = "Blacklist the other driver and reload nvidia."},
      {.id = "hardware.other-driver", .variant = "vfio-pci", .status = kWarn, .layers = {kHardware, kKernel},
       .summary = "{gpu} is bound to {driver}",
       .diagnosis = "The GPU is bound to another driver (often vfio-pci for passthrough to VMs); this host "
                    "cannot use it.",
       .action = "If the GPU should serve this host, unbind it from vfio-pci (driverctl unset-override {bus}) "
                 "and load nvidia."},
      {.id = "hardware.pcie-degraded", .status = kWarn, .layers = {kHardware},
       .symptom = "link trained below its width (e.g. Gen3 x8 on a Gen5 x16 GPU)",
       .summary = "{gpu} PCIe link is degraded",
       .diagnosis = "A link trained below its width is a seating, riser, cable or slot problem (or a BIOS "
                    "bifurcation setting). Host<->device copies run at a fraction of their speed.",
       .action = "Reseat the GPU or riser, check the slot's bifurcation setting in the BIOS, then measure with "
                 "`gpunode bench --tests pcie`."},
      // Without NVML only sysfs tells the link, and the bench cannot run.
      {.id = "hardware.pcie-degraded", .variant = "sysfs", .status = kWarn, .layers = {kHardware},
       .summary = "{gpu} PCIe link is degraded",
       .diagnosis = "A link trained below its width is a seating, riser, cable or slot problem.",
       .action = "Reseat the GPU or riser and check the slot's bifurcation setting in the BIOS."},
      {.id = "hardware.pcie-slot-limited", .status = kWarn, .layers = {kHardware},
       .symptom = "slot caps the generation below the GPU's",
       .summary = "{gpu} sits in a slower PCIe slot",
       .diagnosis = "The slot, riser or platform limits the link generation below what the GPU supports.",
       .action = "Move the GPU to a slot of its generation or check the BIOS PCIe speed setting."},
      {.id = "hardware.row-remap-failure", .status = kFail, .layers = {kHardware},
       .symptom = "HBM row remapping failed (RMA)",
       .summary = "{gpu} ran out of spare memory rows (row-remap failure)",
       .diagnosis = "The GPU could not remap a failing HBM row: its memory can corrupt data. NVIDIA treats this "
                    "as a field-replaceable failure.",
       .action = "Drain the node, take the GPU out of service and open an RMA with the vendor."},
      {.id = "hardware.row-remap-pending", .status = kWarn, .layers = {kHardware},
       .symptom = "remap waits for a GPU reset",
       .summary = "{gpu} has a row remap pending",
       .diagnosis = "A memory row was marked for remapping; it takes effect at the next GPU reset.",
       .action = "Drain the GPU and reset it (nvidia-smi -r -i {index}) or reboot."},
      {.id = "hardware.retired-pages-pending", .status = kWarn, .layers = {kHardware},
       .symptom = "page retirement waits for a reset",
       .summary = "{gpu} has retired memory pages pending",
       .diagnosis = "Pages with ECC errors are retired at the next driver load.",
       .action = "Drain the GPU and reset it or reboot."},
      {.id = "hardware.ecc-uncorrected", .status = kFail, .layers = {kHardware},
       .symptom = "uncorrectable ECC errors since driver load",
       .summary = "{gpu} reported uncorrectable ECC errors since the driver loaded",
       .diagnosis = "Uncorrectable ECC errors kill the running CUDA contexts (XID 48/94/95) and point at "
                    "failing memory.",
       .action = "Drain the GPU, reset it, and run `gpunode bench --tests memtest`; if errors recur, RMA."},
      {.id = "hardware.ecc-uncorrected-history", .status = kWarn, .layers = {kHardware},
       .symptom = "uncorrectable ECC errors in the lifetime counters",
       .summary = "{gpu} has uncorrectable ECC errors in its lifetime record",
       .diagnosis = "The GPU has had uncorrectable memory errors in the past.",
       .action = "Watch DCGM_FI_DEV_ECC_DBE_AGG_TOTAL and remapped rows; run `gpunode bench --tests memtest`."},
      {.id = "hardware.hot", .status = kWarn, .layers = {kHardware},
       .symptom = "GPU at or above 85 C",
       .summary = "{gpu} is hot",
       .diagnosis = "Sustained high temperature throttles clocks and shortens the GPU's life.",
       .action = "Check airflow, fans and the data-centre inlet temperature."},

      // ---- kernel driver ----
      {.id = "kernel.nouveau-loaded", .status = kFail, .layers = {kKernel},
       .symptom = "nouveau holds the GPU",
       .summary = "the nouveau driver is loaded",
       .diagnosis = "nouveau claims NVIDIA GPUs first, so the nvidia module cannot drive them.",
       .action = "Blacklist nouveau (echo 'blacklist nouveau' > /etc/modprobe.d/blacklist-nouveau.conf; "
                 "update-initramfs -u) and reboot."},
      {.id = "kernel.module-not-loaded", .status = kFail, .layers = {kKernel},
       .symptom = "\"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver\"",
       .summary = "the nvidia kernel module is not loaded",
       .diagnosis = "Without the kernel module nothing above it works (nvidia-smi: \"couldn't communicate with "
                    "the NVIDIA driver\"). Usual causes: driver not installed, a kernel update without a rebuilt "
                    "DKMS module, Secure Boot rejecting an unsigned module, or nouveau holding the GPU.",
       .action = "Run `modprobe nvidia` and read `dmesg | grep -i nvidia`; if the module is missing for this "
                 "kernel ({kernel}), reinstall the driver or its DKMS/precompiled module."},
      {.id = "kernel.version-unreadable", .status = kWarn, .layers = {kKernel},
       .symptom = "truncated `/proc/driver/nvidia/version`",
       .summary = "cannot read the kernel module's version",
       .diagnosis = "The driver's proc file is missing or truncated.",
       .action = "Check that /proc is the host's (in a container: mount it) and that the module loaded cleanly."},
      {.id = "kernel.uvm-missing", .status = kWarn, .layers = {kKernel},
       .symptom = "`/dev/nvidia-uvm` missing while cuInit was not tried or worked",
       .summary = "device node /dev/nvidia-uvm missing",
       .diagnosis = "nvidia_uvm is not loaded or its node was not created; CUDA programs fail at cuInit.",
       .action = "Run `nvidia-modprobe -u -c=0` (or `modprobe nvidia-uvm`)."},
      {.id = "kernel.uvm-missing-cuinit-failed", .status = kFail, .layers = {kKernel},
       .symptom = "`/dev/nvidia-uvm` missing and cuInit failing",
       .summary = "cuInit fails: device node /dev/nvidia-uvm is missing",
       .diagnosis = "CUDA opens /dev/nvidia-uvm at cuInit; without it every CUDA program fails "
                    "(CUDA_ERROR_UNKNOWN or no device), while NVML and nvidia-smi still work.",
       .action = "Run `nvidia-modprobe -u -c=0` (or `modprobe nvidia-uvm`), add nvidia-uvm to "
                 "/etc/modules-load.d, then run `gpunode doctor` again."},
      {.id = "kernel.device-nodes-missing", .status = kFail, .layers = {kKernel},
       .symptom = "`/dev/nvidiactl` (or another of the driver's device nodes) missing",
       .summary = "device node{plural_s} {nodes} missing",
       .diagnosis = "The module is loaded but its device nodes were not created (no udev rule or nvidia-modprobe), "
                    "or, in a container, they were not passed in.",
       .action = "Run `nvidia-modprobe -c=0 -u` on the host; in a container, request the GPU through the device "
                 "plugin or CDI so the nodes are mounted."},
      {.id = "kernel.uvm-not-loaded", .status = kWarn, .layers = {kKernel},
       .symptom = "nvidia_uvm not loaded: CUDA fails at cuInit",
       .summary = "nvidia_uvm is not loaded",
       .diagnosis = "CUDA needs nvidia_uvm; the first CUDA program loads it only if nvidia-modprobe is setuid.",
       .action = "Run `modprobe nvidia-uvm`, and add it to /etc/modules-load.d."},
      {.id = "kernel.gpu-nodes-missing", .status = kFail, .layers = {kKernel},
       .symptom = "`/dev/nvidiaN` missing",
       .summary = "no /dev/nvidiaN device nodes",
       .diagnosis = "The per-GPU device nodes were not created or not passed into this container.",
       .action = "Run `nvidia-modprobe -c=0` for each GPU, or request GPUs through the device plugin/CDI."},
      {.id = "kernel.gpu-excluded", .status = kWarn, .layers = {kKernel},
       .symptom = "GPU excluded by the driver",
       .summary = "{gpu} is excluded by the driver",
       .diagnosis = "The driver excluded the GPU (NVreg_ExcludedGpus, or a failed GPU at load).",
       .action = "Check the nvidia module parameters and dmesg for this GPU."},
      {.id = "kernel.needs-open-module", .status = kFail, .layers = {kKernel, kHardware},
       .symptom = "Blackwell / Grace Hopper on the proprietary module",
       .summary = "{model} requires the open kernel modules",
       .diagnosis = "Grace Hopper and Blackwell GPUs are supported only by the open GPU kernel modules.",
       .action = "Install the open flavor of the same driver (e.g. nvidia-driver-<branch>-open, or the .run "
                 "installer with --kernel-module-type=open) and reboot."},
      {.id = "kernel.needs-proprietary-module", .status = kFail, .layers = {kKernel, kHardware},
       .symptom = "Maxwell/Pascal/Volta on the open module",
       .summary = "{model} is not supported by the open kernel modules",
       .diagnosis = "The open modules need GSP firmware, which only Turing and newer GPUs have; Maxwell, Pascal "
                    "and Volta need the proprietary flavor.",
       .action = "Install the proprietary flavor of the driver and reboot."},

      // ---- user-space driver: NVML ----
      {.id = "driver.nvml-missing", .status = kFail, .layers = {kUser},
       .symptom = "NVML / user-space driver not installed or not mounted",
       .summary = "NVML (libnvidia-ml.so.1) is not installed",
       .diagnosis = "The driver's user-space libraries are missing (nvidia-smi would be missing too), or, in a "
                    "container, were not mounted in by the container runtime.",
       .action = "Install the NVIDIA driver (kernel module and user-space libraries of the same version)."},
      {.id = "driver.nvml-missing", .variant = "kernel-known", .status = kFail, .layers = {kUser},
       .summary = "NVML (libnvidia-ml.so.1) is not installed",
       .diagnosis = "The driver's user-space libraries are missing (nvidia-smi would be missing too), or, in a "
                    "container, were not mounted in by the container runtime.",
       .action = "Install the user-space driver matching the kernel module {kernel} (e.g. libnvidia-compute-{major}) "
                 "or, in a container, request the GPU through CDI/the NVIDIA runtime so the libraries are mounted."},
      {.id = "driver.not-loaded", .status = kFail, .layers = {kUser, kKernel},
       .symptom = "NVML_ERROR_DRIVER_NOT_LOADED",
       .summary = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver",
       .diagnosis = "The user-space libraries are installed but the kernel module is not loaded (see the kernel "
                    "driver check).",
       .action = "Fix the kernel driver layer first: load the nvidia module for this kernel."},
      // nvmlInit refused (NVML_ERROR_LIB_RM_VERSION_MISMATCH).
      {.id = "driver.version-mismatch", .variant = "nvml-init", .status = kFail, .layers = {kUser, kKernel},
       .symptom = "\"Failed to initialize NVML: Driver/library version mismatch\" (or kernel ≠ NVML version)",
       .summary = "Failed to initialize NVML: Driver/library version mismatch",
       .diagnosis = "The user-space driver was upgraded (often by unattended upgrades) while the old kernel "
                    "module is still loaded.",
       .action = "Reboot the node (or drain it, stop GPU processes and reload the modules: rmmod nvidia_uvm "
                 "nvidia_drm nvidia_modeset nvidia; modprobe nvidia). If the mismatch stays, reinstall one driver "
                 "version for both."},
      // nvmlInit succeeded but NVML's version is not the kernel module's.
      {.id = "driver.version-mismatch", .status = kFail, .layers = {kUser, kKernel},
       .summary = "kernel module and user-space driver versions differ",
       .diagnosis = "The user-space driver was upgraded while the old kernel module is still loaded.",
       .action = "Reboot the node (or reload the nvidia modules) so both are the same version."},
      {.id = "driver.no-permission", .status = kFail, .layers = {kUser, kKernel},
       .symptom = "NVML_ERROR_NO_PERMISSION",
       .summary = "NVML: insufficient permissions",
       .diagnosis = "This user (or container) cannot open the GPU device nodes.",
       .action = "Run as root or a member of the group owning /dev/nvidia*; in Kubernetes request nvidia.com/gpu "
                 "(or run the agent privileged)."},
      {.id = "driver.nvml-init-failed", .status = kFail, .layers = {kUser},
       .symptom = "any other nvmlInit failure",
       .summary = "NVML failed to initialise",
       .diagnosis = "NVML could not initialise for a reason other than the common ones.",
       .action = "Read `dmesg | grep -i -e nvrm -e xid` and run nvidia-smi for the driver's own message."},
      {.id = "driver.no-devices", .status = kFail, .layers = {kUser, kHardware},
       .symptom = "\"No devices were found\"",
       .summary = "No devices were found",
       .diagnosis = "The driver loaded but initialised no GPU: unsupported GPU for this driver branch, GPUs "
                    "excluded, or a failed GPU initialisation (see dmesg for RmInitAdapter).",
       .action = "Read `dmesg | grep -i -e NVRM -e RmInitAdapter`; check that this driver branch supports the GPU."},
      {.id = "driver.fewer-gpus", .status = kFail, .layers = {kUser, kHardware},
       .symptom = "NVML sees fewer GPUs than the PCI bus",
       .summary = "NVML sees {count} of the {pci} GPUs on the PCI bus",
       .diagnosis = "A GPU failed to initialise in the driver or fell off the bus, or is bound to another driver.",
       .action = "Compare `lspci -d 10de:` with nvidia-smi -L, read dmesg for XID 79 / RmInitAdapter failures, "
                 "then reset or reseat the missing GPU."},
      {.id = "driver.gpu-lost", .status = kFail, .layers = {kUser, kHardware},
       .symptom = "GPU has fallen off the bus (NVML_ERROR_GPU_IS_LOST, XID 79)",
       .summary = "{gpu} has fallen off the bus (GPU is lost)",
       .diagnosis = "The GPU stopped responding on PCIe (XID 79): power, thermal, or hardware failure.",
       .action = "Drain the node and reboot it; if the GPU falls off again, reseat it and check power cables, "
                 "then RMA."},
      {.id = "driver.gpu-unreadable", .status = kFail, .layers = {kUser},
       .symptom = "a GPU NVML counts but cannot open",
       .summary = "{gpu} cannot be opened",
       .diagnosis = "NVML could not open this GPU.",
       .action = "Run `nvidia-smi -i {index} -q` and read dmesg for this GPU."},
      {.id = "driver.persistence-off", .status = kWarn, .layers = {kUser},
       .symptom = "persistence mode off",
       .summary = "{gpu} has persistence mode off",
       .diagnosis = "Without persistence the driver tears the GPU down when the last client exits, so every start "
                    "pays GPU initialisation (seconds on large GPUs) and settings are lost.",
       .action = "Enable the nvidia-persistenced service (systemctl enable --now nvidia-persistenced), or run "
                 "`nvidia-smi -pm 1`."},
      {.id = "driver.ecc-pending", .status = kWarn, .layers = {kUser},
       .symptom = "ECC mode change waits for a reset",
       .summary = "{gpu} has an ECC mode change pending",
       .diagnosis = "An ECC mode change takes effect at the next GPU reset.",
       .action = "Reset the GPU or reboot."},
      {.id = "driver.mig-pending", .status = kWarn, .layers = {kUser},
       .symptom = "MIG mode change waits for a reset",
       .summary = "{gpu} has a MIG mode change pending",
       .diagnosis = "A MIG mode change takes effect at the next GPU reset.",
       .action = "Drain the GPU and reset it (nvidia-smi -r)."},
      {.id = "driver.mig-no-instances", .status = kWarn, .layers = {kUser},
       .symptom = "MIG enabled, no instances",
       .summary = "{gpu} has MIG enabled but no MIG instances",
       .diagnosis = "With MIG on, CUDA sees only MIG devices; with none created the GPU is unusable.",
       .action = "Create instances (nvidia-smi mig -cgi <profiles> -C) or disable MIG (nvidia-smi -mig 0)."},
      {.id = "driver.memory-used-no-process", .status = kWarn, .layers = {kUser},
       .symptom = "memory used with no processes",
       .summary = "{gpu} has memory in use but no processes",
       .diagnosis = "A process in another PID namespace (a container) holds the GPU, or a killed process left a "
                    "zombie context.",
       .action = "Find the holder with `fuser -v /dev/nvidia*` on the host; if none, reset the GPU."},

      // ---- user-space driver: libcuda ----
      {.id = "cuda.insufficient-driver", .status = kFail, .layers = {kUser},
       .symptom = "CUDA \"driver version is insufficient\" (35)",
       .summary = "CUDA driver version is insufficient for CUDA runtime version",
       .diagnosis = "The libcuda in use is older than the CUDA runtime expects, or does not match the kernel module.",
       .action = "Run `gpunode compat check` for the image; upgrade the driver or use an image built for an "
                 "older CUDA."},
      {.id = "cuda.system-driver-mismatch", .status = kFail, .layers = {kUser, kKernel},
       .symptom = "CUDA error 803 (compat libcuda vs kernel module)",
       .summary = "CUDA: system has unsupported display driver / cuda driver combination (803)",
       .diagnosis = "A forward-compatibility libcuda (cuda-compat) or a stray libcuda of another version is loaded "
                    "against this kernel module.",
       .action = "Remove the cuda-compat directory from LD_LIBRARY_PATH / ld.so.conf, or use a compat package that "
                 "supports this driver branch."},
      {.id = "cuda.no-device", .status = kFail, .layers = {kUser},
       .symptom = "cuInit finds no device though NVML does",
       .summary = "CUDA sees no device although NVML does",
       .diagnosis = "CUDA_VISIBLE_DEVICES hides the GPUs, /dev/nvidia-uvm is missing, or all GPUs are in MIG mode "
                    "without instances.",
       .action = "Check CUDA_VISIBLE_DEVICES and /dev/nvidia-uvm."},
      {.id = "cuda.libcuda-missing", .status = kFail, .layers = {kUser},
       .symptom = "libcuda missing",
       .summary = "libcuda.so.1 is not installed",
       .diagnosis = "CUDA applications need the driver's libcuda; NVML alone is not enough.",
       .action = "Install the driver's compute libraries (libnvidia-compute-<branch>)."},
      {.id = "cuda.init-failed", .status = kFail, .layers = {kUser},
       .symptom = "cuInit failing",
       .summary = "cuInit failed",
       .diagnosis = "The CUDA driver could not initialise.",
       .action = "Read dmesg for NVRM/Xid messages and run `gpunode bench` after fixing the driver."},
      {.id = "cuda.compat-libcuda", .status = kWarn, .layers = {kUser},
       .symptom = "a forward-compat libcuda is on the library path",
       .summary = "libcuda reports another CUDA version than the driver",
       .diagnosis = "A forward-compatibility libcuda (cuda-compat) is on the library path.",
       .action = "Intended for forward compatibility on datacenter GPUs; otherwise remove it from the library path."},
      {.id = "driver.nvidia-smi-missing", .status = kWarn, .layers = {kUser},
       .symptom = "nvidia-smi not installed",
       .summary = "nvidia-smi: command not found",
       .diagnosis = "The driver's utilities package is not installed (the libraries are).",
       .action = "Install the driver's utilities package."},
      {.id = "driver.nvidia-smi-missing", .variant = "driver-known", .status = kWarn, .layers = {kUser},
       .summary = "nvidia-smi: command not found",
       .diagnosis = "The driver's utilities package is not installed (the libraries are).",
       .action = "Install nvidia-utils-{major} (or the matching driver utilities package)."},

      // ---- toolchain ----
      {.id = "toolchain.newer-than-driver", .status = kWarn, .layers = {kToolchain, kUser},
       .symptom = "toolkit newer than the driver supports (within / across majors)",
       .summary = "CUDA toolkit {toolkit} is newer than the driver supports ({max})",
       .diagnosis = "Programs built with it run through minor-version compatibility: no PTX JIT of its newer PTX "
                    "(CUDA_ERROR_UNSUPPORTED_PTX_VERSION), and features of the newer driver are missing.",
       .action = "Run `gpunode compat driver-for --cuda {toolkit_minor}` and upgrade the driver, or install a "
                 "toolkit <= {max}."},
      {.id = "toolchain.newer-than-driver", .variant = "newer-major", .status = kFail,
       .layers = {kToolchain, kUser},
       .summary = "CUDA toolkit {toolkit} is newer than the driver supports ({max})",
       .diagnosis = "Programs built with a newer CUDA major version fail with \"CUDA driver version is "
                    "insufficient\".",
       .action = "Run `gpunode compat driver-for --cuda {toolkit_minor}` and upgrade the driver, or install a "
                 "toolkit <= {max}."},

      // ---- container runtime ----
      {.id = "runtime.config-unreadable", .status = kWarn, .layers = {kRuntime},
       .symptom = "malformed runtime config",
       .summary = "{runtime}'s configuration cannot be read",
       .diagnosis = "The runtime's configuration file is unreadable or malformed.",
       .action = "Fix {config} (then `gpunode runtime configure --runtime {runtime}`)."},
      {.id = "runtime.cdi-unreadable", .status = kWarn, .layers = {kRuntime},
       .symptom = "malformed CDI spec",
       .summary = "CDI spec {spec} cannot be read",
       .diagnosis = "Container runtimes skip malformed CDI specs.",
       .action = "Regenerate it: gpunode cdi generate (or nvidia-ctk cdi generate)."},
      {.id = "runtime.cdi-stale", .status = kFail, .layers = {kRuntime, kUser},
       .symptom = "CDI spec generated for another driver version",
       .summary = "CDI spec {spec} was generated for driver {spec_driver}",
       .diagnosis = "The driver was upgraded after the spec was generated: containers get mounts of libraries "
                    "that no longer exist and fail to start.",
       .action = "Regenerate the spec: gpunode cdi generate --output {spec} (or nvidia-ctk cdi generate)."},
      {.id = "runtime.cdi-missing-node", .status = kFail, .layers = {kRuntime, kKernel},
       .symptom = "CDI spec names device nodes (`/dev/nvidia3`, `/dev/nvidia-uvm`…) the host does not have",
       .summary = "CDI spec {spec} names device nodes the host does not have: {nodes}",
       .diagnosis = "A GPU fell off the bus or the spec was made on another node: containers that ask for these "
                    "devices fail with \"failed to stat CDI host device\".",
       .action = "Find out why the node is gone (kernel layer above), then regenerate: gpunode cdi generate "
                 "--output {spec}."},
      {.id = "runtime.cdi-stale-node", .status = kFail, .layers = {kRuntime, kKernel},
       .symptom = "CDI spec gives a device node other major:minor numbers than the host (e.g. nvidia-uvm after a "
                  "driver reload)",
       .summary = "CDI spec {spec} gives device nodes other numbers than the host: {nodes}",
       .diagnosis = "Engines create the container's node with the spec's numbers: after a driver reload "
                    "(nvidia-uvm's major is assigned at load time) containers get a node that points at nothing, "
                    "and CUDA fails without a clear error.",
       .action = "Regenerate the spec: gpunode cdi generate --output {spec}."},
      {.id = "runtime.cdi-incomplete", .status = kWarn, .layers = {kRuntime},
       .symptom = "the host has GPU device nodes the CDI spec leaves out (`=all` gives fewer GPUs)",
       .summary = "CDI spec {spec} leaves out GPUs the host has: {nodes}",
       .diagnosis = "The spec was generated while a GPU was missing or before one was added: nvidia.com/gpu=all "
                    "gives containers fewer GPUs than the node has.",
       .action = "Regenerate the spec: gpunode cdi generate --output {spec}."},
      {.id = "runtime.docker-no-gpus-hook", .status = kWarn, .layers = {kRuntime},
       .symptom = "Docker has the nvidia runtime but no `nvidia-container-runtime-hook` in its PATH, so "
                  "`docker run --gpus` is not offered",
       .summary = "`docker run --gpus` is not offered: no nvidia-container-runtime-hook in Docker's PATH",
       .diagnosis = "Docker registers its GPU device driver only when it finds that program: without it `--gpus` "
                    "fails with \"could not select device driver \"\" with capabilities: [[gpu]]\".",
       .action = "Run `gpunode runtime configure --runtime docker` (it links the hook to gpunode), then restart "
                 "Docker."},
      {.id = "runtime.docker-gpus-not-default", .status = kWarn, .layers = {kRuntime},
       .symptom = "the hook is gpunode, nvidia is not Docker's default runtime and the kernel is older than "
                  "5.12: `--gpus` containers fail unless run with `--runtime nvidia`",
       .summary = "`docker run --gpus` fails unless the container also says --runtime nvidia (kernel {kernel})",
       .diagnosis = "With runc as the runtime, gpunode's hook injects the GPUs into the created container itself; "
                    "it attaches the driver files with open_tree, move_mount and mount_setattr, which Linux adds "
                    "in 5.12. On this kernel only gpunode's OCI shim can give the GPUs, and the hook refuses.",
       .action = "Run `gpunode runtime configure --runtime docker --set-as-default`, then restart Docker (or run "
                 "GPU containers with --runtime nvidia, or upgrade the kernel to 5.12 or later)."},
      {.id = "runtime.containerd-nvidia-is-runc", .status = kFail, .layers = {kRuntime},
       .symptom = "containerd's `nvidia` runtime is `io.containerd.runc.v2` without `options.BinaryName`",
       .summary = "containerd's nvidia runtime is plain runc: it injects no GPU",
       .diagnosis = "A runtime table named nvidia only names runc's shim; without options.BinaryName the shim "
                    "runs runc itself, so pods of the nvidia RuntimeClass start without the GPU's device nodes "
                    "and libraries (CDI-annotated devices still work).",
       .action = "Run `gpunode runtime configure --runtime containerd` (it sets options.BinaryName in {config}), "
                 "then restart containerd."},
      {.id = "runtime.no-nvidia-runtime", .status = kWarn, .layers = {kRuntime},
       .symptom = "runtime without the NVIDIA runtime or a CDI spec",
       .summary = "containers cannot get the GPU: no NVIDIA runtime and no CDI spec",
       .diagnosis = "Without the NVIDIA runtime or CDI, `--gpus all` and GPU pods start without the device nodes "
                    "and driver libraries (\"could not select device driver\").",
       .action = "Run `gpunode cdi generate` and `gpunode runtime configure --runtime <docker|containerd|crio>` "
                 "(or nvidia-ctk runtime configure), then restart the runtime."},

      // ---- kubelet ----
      {.id = "kubelet.no-socket", .status = kWarn, .layers = {kKubelet},
       .symptom = "kubelet not running / other root dir",
       .summary = "the kubelet's device-plugin socket is missing",
       .diagnosis = "The kubelet is not running, or runs with another root directory.",
       .action = "Check `systemctl status kubelet` and its --root-dir."},
      {.id = "kubelet.no-gpu-plugin", .status = kWarn, .layers = {kKubelet},
       .symptom = "no device plugin or DRA driver registered",
       .summary = "no device plugin or GPU DRA driver is registered: nvidia.com/gpu will not be allocatable",
       .diagnosis = "No GPU device plugin and no GPU DRA driver runs on this node, so the scheduler sees no GPUs.",
       .action = "Deploy the gpunode agent DaemonSet (or run `gpunode plugin`, or `gpunode dra-plugin` for DRA)."},
  };
}

// The text with each {name} replaced by its value. Values are copied as they are (a value's own
// braces are not placeholders).
std::string Fill(std::string_view id, std::string_view text, const std::vector<FindingArg>& args) {
  std::string out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t open = text.find('{', pos);
    if (open == std::string_view::npos) break;
    size_t close = text.find('}', open);
    if (close == std::string_view::npos) break;
    out.append(text.substr(pos, open - pos));
    std::string_view name = text.substr(open + 1, close - open - 1);
    auto it = std::find_if(args.begin(), args.end(), [&](const FindingArg& a) { return a.name == name; });
    if (it == args.end()) {
      throw std::logic_error(absl::StrCat("doctor finding ", std::string(id), ": no value for {", std::string(name),
                                          "}"));
    }
    out.append(it->value);
    pos = close + 1;
  }
  out.append(text.substr(pos));
  return out;
}

}  // namespace

const std::vector<Advice>& Catalogue() {
  static const std::vector<Advice>* const catalogue = new std::vector<Advice>(MakeCatalogue());
  return *catalogue;
}

const Advice* FindAdvice(std::string_view id, std::string_view variant) {
  for (const Advice& a : Catalogue()) {
    if (a.id == id && a.variant == variant) return &a;
  }
  return nullptr;
}

Finding MakeFinding(std::string_view id, FindingFacts facts) {
  const Advice* a = FindAdvice(id, facts.variant);
  if (a == nullptr) {
    throw std::logic_error(absl::StrCat("doctor finding ", std::string(id), " (variant \"",
                                        std::string(facts.variant), "\") is not in the catalogue"));
  }
  return Finding{std::string(a->id),
                 a->status,
                 Fill(id, a->summary, facts.args),
                 std::move(facts.observed),
                 std::move(facts.expected),
                 Fill(id, a->diagnosis, facts.args),
                 Fill(id, a->action, facts.args),
                 a->layers};
}

}  // namespace gpunode::doctor
