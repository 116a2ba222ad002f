// The Kubernetes keys both sides of gpunode agree on, spelled once: the Node labels the node side
// writes (GFD's names under nvidia.com/ and gpunode's under gpunode.io/; docs/labels.md) and the
// cluster side reads (gpunode fleet, the driver-upgrade controller to come), the labels the agent
// reads to switch components and MIG layouts, the Node condition the validator sets, and the GPU
// resource. Shared (docs/ARCHITECTURE.md): node-side and cluster-side folders both include it.
// src/kube spells its own (the managed-labels annotation, the prefixes) until it switches to these.
#ifndef GPUNODE_BASE_WELL_KNOWN_H_
#define GPUNODE_BASE_WELL_KNOWN_H_

namespace gpunode::wellknown {

// The prefixes of every label gpunode may set or remove.
inline constexpr char kNvidiaPrefix[] = "nvidia.com/";
inline constexpr char kGpunodePrefix[] = "gpunode.io/";

// GFD's labels (what the node side writes; the cluster side reads them).
inline constexpr char kLabelGpuPresent[] = "nvidia.com/gpu.present";
inline constexpr char kLabelGpuCount[] = "nvidia.com/gpu.count";
inline constexpr char kLabelGpuProduct[] = "nvidia.com/gpu.product";
inline constexpr char kLabelGpuFamily[] = "nvidia.com/gpu.family";
inline constexpr char kLabelGpuMemory[] = "nvidia.com/gpu.memory";
inline constexpr char kLabelComputeMajor[] = "nvidia.com/gpu.compute.major";
inline constexpr char kLabelComputeMinor[] = "nvidia.com/gpu.compute.minor";
inline constexpr char kLabelGpuReplicas[] = "nvidia.com/gpu.replicas";
inline constexpr char kLabelSharingStrategy[] = "nvidia.com/gpu.sharing-strategy";
inline constexpr char kLabelMigStrategy[] = "nvidia.com/mig.strategy";
// cuda.driver-version.* is the driver's version; cuda.runtime-version.* is the highest CUDA
// version that driver supports (what nvidia-smi prints as "CUDA Version").
inline constexpr char kLabelDriverVersion[] = "nvidia.com/cuda.driver-version.full";
inline constexpr char kLabelDriverMajor[] = "nvidia.com/cuda.driver.major";
inline constexpr char kLabelCudaMax[] = "nvidia.com/cuda.runtime-version.full";

// gpunode's own labels.
inline constexpr char kLabelBranch[] = "gpunode.io/driver.branch";
inline constexpr char kLabelKernelModule[] = "gpunode.io/driver.kernel-module";
inline constexpr char kLabelDoctorStatus[] = "gpunode.io/doctor.status";
inline constexpr char kLabelDoctorFirst[] = "gpunode.io/doctor.first-finding";
inline constexpr char kLabelHealthy[] = "gpunode.io/gpu.healthy-count";
inline constexpr char kLabelUnhealthy[] = "gpunode.io/gpu.unhealthy-count";
inline constexpr char kLabelAgentVersion[] = "gpunode.io/agent.version";
// The DRA driver that serves the node's GPUs as ResourceClaims (the agent's dra component is on):
// its GPUs are not counted in allocatable nvidia.com/gpu.
inline constexpr char kLabelDraDriver[] = "gpunode.io/dra.driver";
// The DRA driver name of NVIDIA's GPUs (NVIDIA's DRA driver and gpunode's dra component by
// default): the driver of the ResourceSlices gpunode fleet counts and of the claims the exporter
// attributes, when a node does not name another in gpunode.io/dra.driver.
inline constexpr char kDraGpuDriver[] = "gpu.nvidia.com";

// What the agent reads on its Node (set by an administrator or the GPU Operator's tooling).
inline constexpr char kDeployLabelPrefix[] = "nvidia.com/gpu.deploy.";  // + component: "false" switches it off
inline constexpr char kLabelDevicePluginConfig[] = "nvidia.com/device-plugin.config";
inline constexpr char kLabelMigConfig[] = "nvidia.com/mig.config";
inline constexpr char kLabelMigConfigState[] = "nvidia.com/mig.config.state";  // written back by the agent

// node-feature-discovery's label for a node with an NVIDIA PCI device (vendor 10de).
inline constexpr char kLabelNfdNvidiaPci[] = "feature.node.kubernetes.io/pci-10de.present";

// The driver-upgrade controller's keys (src/upgrade; NVIDIA's names where the GPU Operator has one,
// so its dashboards and alerts keep working; docs/driver-upgrades.md).
inline constexpr char kLabelDriverOwner[] = "nvidia.com/gpu-operator.driver.owner";  // NVIDIADriver name
inline constexpr char kLabelUpgradeState[] = "nvidia.com/gpu-driver-upgrade-state";
inline constexpr char kLabelUpgradeSkip[] = "nvidia.com/gpu-driver-upgrade.skip";      // "true": left alone
inline constexpr char kLabelDrainSkip[] = "nvidia.com/gpu-driver-upgrade-drain.skip";  // on a pod: not drained
inline constexpr char kConditionGpuDriverUpgrade[] = "GpuDriverUpgrade";
// gpunode's own keys of the upgrade that `gpunode fleet` reads too (src/upgrade/planner.h spells
// them as kAnnoReason, kLabelRollback and kAnnoPaused until it switches to these).
inline constexpr char kAnnoUpgradeReason[] = "gpunode.io/driver-upgrade.reason";  // Node: why failed/waiting
inline constexpr char kLabelUpgradeRollback[] = "gpunode.io/driver-upgrade.rollback";  // Node: "true" rolled back
inline constexpr char kAnnoUpgradePaused[] = "gpunode.io/driver-upgrade.paused";  // NVIDIADriver: "true"
// The validator's pass message ends with this and the driver's version: the upgrade's gate.
inline constexpr char kValidatedOnDriver[] = " on driver ";

// The extended resource of a full GPU.
inline constexpr char kResourceGpu[] = "nvidia.com/gpu";

// The Node condition the agent's validator sets (and its Event's reason when it passes).
inline constexpr char kConditionGpuStackReady[] = "GpuStackReady";

}  // namespace gpunode::wellknown

#endif  // GPUNODE_BASE_WELL_KNOWN_H_
