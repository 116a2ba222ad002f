// Doctor checks over hand-made inventories: one test per diagnosis of the catalogue.
#include <algorithm>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/doctor/doctor.h"
#include "src/doctor/internal.h"
#include "src/gpu/nvml.h"

namespace gpunode::doctor {
namespace {

constexpr uint64_t kGiB = 1024ull * 1024 * 1024;

// A healthy 2-GPU node: every layer that exists is ok.
node::NodeInventory HealthyNode() {
  node::NodeInventory inv;
  inv.hostname = "node-a";
  inv.host_root = "/";
  for (int i = 0; i < 2; ++i) {
    node::PciDevice d;
    d.bus_id = i == 0 ? "0000:18:00.0" : "0000:2a:00.0";
    d.vendor = 0x10de;
    d.device = 0x2335;
    d.class_code = 0x030200;
    d.numa_node = 0;
    d.driver = "nvidia";
    d.link_current = node::PcieLink{5, 16};
    d.link_max = node::PcieLink{5, 16};
    inv.hardware.gpus.push_back(d);
  }
  inv.hardware.numa_nodes = 1;
  inv.kernel.proc_present = true;
  inv.kernel.nvidia_loaded = inv.kernel.nvidia_uvm_loaded = true;
  inv.kernel.version = *Version::Parse("580.95.05");
  inv.kernel.flavor = node::ModuleFlavor::kOpen;
  for (const char* p : {"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset",
                        "/dev/nvidia0", "/dev/nvidia1"}) {
    inv.kernel.device_nodes.push_back(node::DeviceNode{p, true, true, 195, 0});
  }
  inv.driver.driver_version = *Version::Parse("580.95.05");
  inv.driver.cuda_version = *Version::Parse("13.0");
  inv.driver.device_count = 2;
  inv.driver.nvidia_smi = "/usr/bin/nvidia-smi";
  for (unsigned i = 0; i < 2; ++i) {
    gpu::GpuInfo g;
    g.index = i;
    g.name = "NVIDIA H200";
    g.uuid = "GPU-" + std::to_string(i);
    g.pci_bus_id = inv.hardware.gpus[i].bus_id;
    g.memory_total_bytes = 141 * kGiB;
    g.memory_used_bytes = 0;
    g.persistence_mode = true;
    g.ecc_enabled = g.ecc_pending = true;
    g.ecc_uncorrected_volatile = g.ecc_uncorrected_aggregate = 0;
    g.remapped_rows = gpu::RemappedRows{};
    g.pcie_gen_current = g.pcie_gen_max = g.pcie_gen_gpu_max = 5;
    g.pcie_width_current = g.pcie_width_max = 16;
    g.cc_major = 9;
    g.cc_minor = 0;
    g.mig_enabled = g.mig_pending = false;
    g.compute_processes.emplace();
    g.temperature_c = 35;
    inv.driver.gpus.push_back(g);
  }
  inv.driver.cuda.version = *Version::Parse("13.0");
  inv.driver.cuda.device_count = 2;
  return inv;
}

std::vector<std::string> Ids(const DoctorReport& r) {
  std::vector<std::string> ids;
  for (const CheckResult& c : r.checks) {
    for (const Finding& f : c.findings) ids.push_back(f.id);
  }
  return ids;
}

TEST(DoctorTest, AHealthyNodePassesWithAbsentLayersSkipped) {
  DoctorReport r = RunDoctor(HealthyNode());
  EXPECT_THAT(Ids(r), ::testing::IsEmpty());
  EXPECT_EQ(r.overall, CheckStatus::kOk);
  EXPECT_EQ(ExitCode(r), 0);
  ASSERT_EQ(r.checks.size(), 6u);
  EXPECT_EQ(r.checks[3].status, CheckStatus::kSkip);  // toolchain
  EXPECT_EQ(r.checks[4].status, CheckStatus::kSkip);  // container runtime
  EXPECT_EQ(r.checks[5].status, CheckStatus::kSkip);  // kubelet
  EXPECT_FALSE(r.first.has_value());
}

TEST(DoctorTest, NoGpuOnThePciBusFailsTheHardwareLayer) {
  node::NodeInventory inv = HealthyNode();
  inv.hardware.gpus.clear();
  DoctorReport r = RunDoctor(inv);
  EXPECT_THAT(Ids(r), ::testing::Contains("hardware.no-gpu"));
  EXPECT_EQ(ExitCode(r), 2);
}

TEST(DoctorTest, AMachineWithoutGpuOrDriverFailsOnlyTheHardwareLayer) {
  node::NodeInventory inv = HealthyNode();
  inv.hardware.gpus.clear();
  inv.kernel = node::KernelDriverLayer{};
  inv.driver = node::UserDriverLayer{};
  inv.driver.status = gpu::NvmlReturnToStatus(NVML_ERROR_LIBRARY_NOT_FOUND, "load libnvidia-ml.so.1");
  DoctorReport r = RunDoctor(inv);
  EXPECT_THAT(Ids(r), ::testing::ElementsAre("hardware.no-gpu"));
  EXPECT_EQ(r.checks[1].status, CheckStatus::kSkip);
  EXPECT_EQ(r.checks[2].status, CheckStatus::kSkip);
}

TEST(DoctorTest, DriverLibraryMismatchNamesBothLayersAndComesFirst) {
  node::NodeInventory inv = HealthyNode();
  inv.kernel.version = *Version::Parse("550.127.05");
  inv.driver = node::UserDriverLayer{};
  inv.driver.status = gpu::NvmlReturnToStatus(NVML_ERROR_LIB_RM_VERSION_MISMATCH, "nvmlInit_v2",
                                         "Driver/library version mismatch");
  DoctorReport r = RunDoctor(inv);
  ASSERT_TRUE(r.first.has_value());
  EXPECT_EQ(r.first->id, "driver.version-mismatch");
  EXPECT_THAT(r.first->layers, ::testing::ElementsAre(Layer::kUserDriver, Layer::kKernelDriver));
  EXPECT_NE(r.first->observed.find("550.127.05"), std::string::npos);
  EXPECT_EQ(ExitCode(r), 2);
}

TEST(DoctorTest, AMismatchNamesTheUserSpaceVersionFromTheLibraryFile) {
  node::NodeInventory inv = HealthyNode();
  inv.kernel.version = *Version::Parse("550.127.05");
  inv.driver = node::UserDriverLayer{};
  inv.driver.nvml_library_file = "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.535.183.01";
  inv.driver.status = gpu::NvmlReturnToStatus(NVML_ERROR_LIB_RM_VERSION_MISMATCH, "nvmlInit_v2");
  DoctorReport r = RunDoctor(inv);
  EXPECT_NE(r.first->observed.find("user-space library 535.183.01"), std::string::npos) << r.first->observed;
}

TEST(DoctorTest, KernelAndNvmlVersionsThatDifferAreAMismatchEvenWhenNvmlInitialises) {
  node::NodeInventory inv = HealthyNode();
  inv.kernel.version = *Version::Parse("580.82.07");
  EXPECT_THAT(Ids(RunDoctor(inv)), ::testing::Contains("driver.version-mismatch"));
}

TEST(DoctorTest, EachNvmlInitFailureHasItsOwnDiagnosis) {
  struct Case { nvmlReturn_t ret; const char* id; };
  for (Case c : {Case{NVML_ERROR_LIBRARY_NOT_FOUND, "driver.nvml-missing"},
                 Case{NVML_ERROR_DRIVER_NOT_LOADED, "driver.not-loaded"},
                 Case{NVML_ERROR_LIB_RM_VERSION_MISMATCH, "driver.version-mismatch"},
                 Case{NVML_ERROR_NO_PERMISSION, "driver.no-permission"},
                 Case{NVML_ERROR_UNKNOWN, "driver.nvml-init-failed"}}) {
    node::NodeInventory inv = HealthyNode();
    inv.driver = node::UserDriverLayer{};
    inv.driver.status = gpu::NvmlReturnToStatus(c.ret, "nvmlInit_v2");
    EXPECT_THAT(Ids(RunDoctor(inv)), ::testing::Contains(c.id)) << gpu::NvmlReturnName(c.ret);
  }
}

TEST(DoctorTest, ModuleNotLoadedIsAKernelFailureThatComesBeforeNvmlsComplaint) {
  node::NodeInventory inv = HealthyNode();
  inv.kernel = node::KernelDriverLayer{};
  inv.driver = node::UserDriverLayer{};
  inv.driver.status = gpu::NvmlReturnToStatus(NVML_ERROR_DRIVER_NOT_LOADED, "nvmlInit_v2");
  DoctorReport r = RunDoctor(inv);
  EXPECT_EQ(r.first->id, "kernel.module-not-loaded");
  EXPECT_THAT(Ids(r), ::testing::Contains("driver.not-loaded"));
}

TEST(DoctorTest, NouveauLoadedFails) {
  node::NodeInventory inv = HealthyNode();
  inv.kernel.nouveau_loaded = true;
  EXPECT_THAT(Ids(RunDoctor(inv)), ::testing::Contains("kernel.nouveau-loaded"));
}

TEST(DoctorTest, FewerGpusInNvmlThanOnThePciBusFails) {
  node::NodeInventory inv = HealthyNode();
  inv.driver.device_count = 1;
  inv.driver.gpus.pop_back();
  EXPECT_THAT(Ids(RunDoctor(inv)), ::testing::Contains("driver.fewer-gpus"));
}

TEST(DoctorTest, NoDevicesFoundWhenNvmlSeesNone) {
  node::NodeInventory inv = HealthyNode();
  inv.driver.device_count = 0;
  inv.driver.gpus.clear();
  EXPECT_THAT(Ids(RunDoctor(inv)), ::testing::Contains("driver.no-devices"));
}

TEST(DoctorTest, ALostGpuIsDiagnosedAsFallenOffTheBus) {
  node::NodeInventory inv = HealthyNode();
  inv.driver.gpus.pop_back();
  inv.driver.gpu_failures.push_back(
      gpu::GpuFailure{1, gpu::NvmlReturnToStatus(NVML_ERROR_GPU_IS_LOST, "nvmlDeviceGetHandleByIndex_v2(1)")});
  EXPECT_THAT(Ids(RunDoctor(inv)), ::testing::Contains("driver.gpu-lost"));
}

// Issue #14, "a lost GPU disappears": the card and the JSON lacked the lost GPU entirely.
// NVML tells nothing of it, so its bus id comes from sysfs and its model and UUID from /proc.
node::NodeInventory NodeWithGpu0Lost() {
  node::NodeInventory inv = HealthyNode();
  inv.driver.gpus.erase(inv.driver.gpus.begin());
  inv.driver.gpu_failures.push_back(
      gpu::GpuFailure{0, gpu::NvmlReturnToStatus(NVML_ERROR_GPU_IS_LOST, "nvmlDeviceGetHandleByIndex_v2(0)", "GPU is lost")});
  node::ProcGpu proc;
  proc.bus_id = "0000:18:00.0";
  proc.model = "NVIDIA H200";
  proc.uuid = "GPU-lost-0";
  inv.kernel.gpus.push_back(proc);
  return inv;
}

TEST(DoctorTest, ALostGpuKeepsItsRowOnTheCardWithItsBusIdStateAndNvmlError) {
  DoctorReport r = RunDoctor(NodeWithGpu0Lost());
  ASSERT_EQ(r.card.gpus.size(), 2u);
  const GpuCard& lost = r.card.gpus[0];
  EXPECT_EQ(lost.index, 0u);
  EXPECT_EQ(lost.state, "lost");
  EXPECT_EQ(lost.bus_id, "0000:18:00.0");
  EXPECT_EQ(lost.uuid, "GPU-lost-0");
  EXPECT_EQ(lost.model, "NVIDIA H200");
  EXPECT_EQ(lost.error, "GPU is lost");
  EXPECT_EQ(lost.nvml_error, "NVML_ERROR_GPU_IS_LOST");
  EXPECT_EQ(r.card.gpus[1].state, "ok");
  EXPECT_EQ(r.card.gpus[1].bus_id, "0000:2a:00.0");
  // The finding names the GPU as nvidia-smi does: by its bus id.
  ASSERT_TRUE(r.first.has_value());
  EXPECT_EQ(r.first->id, "driver.gpu-lost");
  EXPECT_THAT(r.first->summary, ::testing::HasSubstr("GPU 0 (0000:18:00.0) has fallen off the bus"));

  const std::string text = RenderText(r, false);
  EXPECT_THAT(text, ::testing::ContainsRegex("\n  0 +NVIDIA H200 +0000:18:00.0 +lost \\(NVML: GPU is lost\\) +GPU-lost-0\n"))
      << text;
}

TEST(DoctorTest, TheJsonCardListsALostGpuWithItsStateAndCountsIt) {
  nlohmann::json doc = ToJson(RunDoctor(NodeWithGpu0Lost()));
  const nlohmann::json& node = doc["baseline"]["node"];
  EXPECT_EQ(node["gpuCount"], 2);
  EXPECT_EQ(node["readableGpuCount"], 1);
  EXPECT_EQ(node["lostGpuCount"], 1);
  ASSERT_EQ(doc["baseline"]["gpus"].size(), 2u);
  const nlohmann::json& lost = doc["baseline"]["gpus"][0];
  EXPECT_EQ(lost["index"], 0);
  EXPECT_EQ(lost["state"], "lost");
  EXPECT_EQ(lost["pciBusId"], "0000:18:00.0");
  EXPECT_EQ(lost["uuid"], "GPU-lost-0");
  EXPECT_EQ(lost["error"], "GPU is lost");
  EXPECT_EQ(lost["nvmlError"], "NVML_ERROR_GPU_IS_LOST");
  EXPECT_TRUE(lost["memoryTotalMiB"].is_null());
  const nlohmann::json& ok = doc["baseline"]["gpus"][1];
  EXPECT_EQ(ok["state"], "ok");
  EXPECT_TRUE(ok["error"].is_null());
  EXPECT_TRUE(ok["nvmlError"].is_null());
}

TEST(DoctorTest, ALostGpuWhoseBusIdCannotBeToldKeepsItsRowWithoutOne) {
  // A second GPU on the bus that NVML does not count: which one is GPU 0 would be a guess.
  node::NodeInventory inv = NodeWithGpu0Lost();
  node::PciDevice extra = inv.hardware.gpus[0];
  extra.bus_id = "0000:9a:00.0";
  inv.hardware.gpus.push_back(extra);
  DoctorReport r = RunDoctor(inv);
  ASSERT_EQ(r.card.gpus.size(), 2u);
  EXPECT_EQ(r.card.gpus[0].state, "lost");
  EXPECT_EQ(r.card.gpus[0].bus_id, "");
  EXPECT_THAT(RenderText(r, false), ::testing::ContainsRegex("\n  0 +- +- +lost \\(NVML: GPU is lost\\) +-\n"));
}

TEST(DoctorTest, AGpuNvmlCannotOpenForAnotherReasonIsUnreadable) {
  node::NodeInventory inv = HealthyNode();
  inv.driver.gpus.pop_back();
  inv.driver.gpu_failures.push_back(
      gpu::GpuFailure{1, gpu::NvmlReturnToStatus(NVML_ERROR_NO_PERMISSION, "nvmlDeviceGetHandleByIndex_v2(1)",
                                       "Insufficient Permissions")});
  DoctorReport r = RunDoctor(inv);
  ASSERT_EQ(r.card.gpus.size(), 2u);
  EXPECT_EQ(r.card.gpus[1].state, "unreadable");
  EXPECT_EQ(r.card.gpus[1].bus_id, "0000:2a:00.0");
  EXPECT_EQ(r.card.gpus[1].error, "Insufficient Permissions");
  nlohmann::json doc = ToJson(r);
  EXPECT_EQ(doc["baseline"]["node"]["lostGpuCount"], 0);
  EXPECT_EQ(doc["baseline"]["node"]["readableGpuCount"], 1);
}

TEST(DoctorTest, ANarrowerLinkIsDegradedButALowerIdleGenerationIsNot) {
  node::NodeInventory inv = HealthyNode();
  inv.driver.gpus[0].pcie_gen_current = 1;  // idle power saving
  EXPECT_THAT(Ids(RunDoctor(inv)), ::testing::IsEmpty());
  inv.driver.gpus[1].pcie_gen_current = 3;
  inv.driver.gpus[1].pcie_width_current = 8;
  DoctorReport r = RunDoctor(inv);
  EXPECT_THAT(Ids(r), ::testing::ElementsAre("hardware.pcie-degraded"));
  EXPECT_NE(r.first->observed.find("Gen3 x8"), std::string::npos) << r.first->observed;
}

TEST(DoctorTest, PersistenceOffWarns) {
  node::NodeInventory inv = HealthyNode();
  inv.driver.gpus[0].persistence_mode = false;
  DoctorReport r = RunDoctor(inv);
  EXPECT_THAT(Ids(r), ::testing::ElementsAre("driver.persistence-off"));
  EXPECT_EQ(ExitCode(r), 1);
}

TEST(DoctorTest, RowRemapFailureAndUncorrectableEccFail) {
  node::NodeInventory inv = HealthyNode();
  inv.driver.gpus[0].remapped_rows = gpu::RemappedRows{0, 3, false, true};
  inv.driver.gpus[1].ecc_uncorrected_volatile = 2;
  EXPECT_THAT(Ids(RunDoctor(inv)),
              ::testing::UnorderedElementsAre("hardware.row-remap-failure", "hardware.ecc-uncorrected"));
}

TEST(DoctorTest, RetiredPagesAndRemapsPendingWarn) {
  node::NodeInventory inv = HealthyNode();
  inv.driver.gpus[0].retired_pages_pending = true;
  inv.driver.gpus[1].remapped_rows = gpu::RemappedRows{1, 0, true, false};
  EXPECT_THAT(Ids(RunDoctor(inv)),
              ::testing::UnorderedElementsAre("hardware.retired-pages-pending", "hardware.row-remap-pending"));
}

TEST(DoctorTest, MemoryUsedWithNoProcessesWarns) {
  node::NodeInventory inv = HealthyNode();
  inv.driver.gpus[0].memory_used_bytes = 20 * kGiB;
  EXPECT_THAT(Ids(RunDoctor(inv)), ::testing::ElementsAre("driver.memory-used-no-process"));
  inv.driver.gpus[0].compute_processes->push_back(gpu::GpuProcess{1234, 20 * kGiB});
  EXPECT_THAT(Ids(RunDoctor(inv)), ::testing::IsEmpty());
}

TEST(DoctorTest, MigWithoutInstancesWarns) {
  node::NodeInventory inv = HealthyNode();
  inv.driver.gpus[0].mig_enabled = inv.driver.gpus[0].mig_pending = true;
  EXPECT_THAT(Ids(RunDoctor(inv)), ::testing::ElementsAre("driver.mig-no-instances"));
}

TEST(DoctorTest, ProprietaryModuleOnAGpuThatNeedsOpenFails) {
  node::NodeInventory inv = HealthyNode();
  inv.kernel.flavor = node::ModuleFlavor::kProprietary;
  for (gpu::GpuInfo& g : inv.driver.gpus) {
    g.name = "NVIDIA B200";
    g.cc_major = 10;
  }
  EXPECT_THAT(Ids(RunDoctor(inv)), ::testing::Contains("kernel.needs-open-module"));
}

TEST(DoctorTest, OpenModuleOnAVoltaFails) {
  node::NodeInventory inv = HealthyNode();
  for (gpu::GpuInfo& g : inv.driver.gpus) {
    g.name = "Tesla V100-SXM2-32GB";
    g.cc_major = 7;
    g.cc_minor = 0;
  }
  EXPECT_THAT(Ids(RunDoctor(inv)), ::testing::Contains("kernel.needs-proprietary-module"));
}

TEST(DoctorTest, CudaDriverInsufficientFails) {
  node::NodeInventory inv = HealthyNode();
  inv.driver.cuda.status = absl::FailedPreconditionError("cuInit: CUDA_ERROR_INSUFFICIENT_DRIVER (35)");
  inv.driver.cuda.init_result = GPUNODE_CUDA_ERROR_INSUFFICIENT_DRIVER;
  EXPECT_THAT(Ids(RunDoctor(inv)), ::testing::Contains("cuda.insufficient-driver"));
}

TEST(DoctorTest, NvidiaSmiMissingWarns) {
  node::NodeInventory inv = HealthyNode();
  inv.driver.nvidia_smi.clear();
  EXPECT_THAT(Ids(RunDoctor(inv)), ::testing::ElementsAre("driver.nvidia-smi-missing"));
}

TEST(DoctorTest, ARuntimeWithoutNvidiaRuntimeOrCdiWarns) {
  node::NodeInventory inv = HealthyNode();
  node::ContainerRuntime rt;
  rt.name = "containerd";
  rt.installed = true;
  rt.config_path = "/etc/containerd/config.toml";
  inv.containers.runtimes.push_back(rt);
  EXPECT_THAT(Ids(RunDoctor(inv)), ::testing::ElementsAre("runtime.no-nvidia-runtime"));
  inv.containers.runtimes[0].nvidia_runtime = true;
  inv.containers.runtimes[0].nvidia_runtime_type = "io.containerd.runc.v2";
  inv.containers.runtimes[0].nvidia_binary_name = "/usr/bin/nvidia-container-runtime";
  EXPECT_THAT(Ids(RunDoctor(inv)), ::testing::IsEmpty());
}

// The seeds' example config: a runtime table named nvidia that only names runc's shim is plain
// runc — a failure with the fix, and it does not count as an NVIDIA runtime.
TEST(DoctorTest, AContainerdNvidiaRuntimeWithoutBinaryNameIsPlainRunc) {
  node::NodeInventory inv = HealthyNode();
  node::ContainerRuntime rt;
  rt.name = "containerd";
  rt.installed = rt.nvidia_runtime = true;
  rt.nvidia_runtime_type = "io.containerd.runc.v2";
  rt.config_path = "/etc/containerd/config.toml";
  inv.containers.runtimes.push_back(rt);
  DoctorReport r = RunDoctor(inv);
  EXPECT_THAT(Ids(r), ::testing::ElementsAre("runtime.containerd-nvidia-is-runc", "runtime.no-nvidia-runtime"));
  EXPECT_THAT(r.first->action, ::testing::HasSubstr("gpunode runtime configure --runtime containerd"));
  EXPECT_THAT(r.first->action, ::testing::HasSubstr("/etc/containerd/config.toml"));
}

// /dev/nvidia-uvm missing is a warning while CUDA works (or was not tried) and the failure it is
// when cuInit fails.
TEST(DoctorTest, AMissingUvmNodeIsAFailureWhenCuInitFails) {
  node::NodeInventory inv = HealthyNode();
  for (node::DeviceNode& n : inv.kernel.device_nodes) {
    if (n.path == "/dev/nvidia-uvm") n.present = false;
  }
  EXPECT_THAT(Ids(RunDoctor(inv)), ::testing::ElementsAre("kernel.uvm-missing"));
  inv.driver.cuda.probed = true;
  inv.driver.cuda.init_result = 999;  // CUDA_ERROR_UNKNOWN
  inv.driver.cuda.status = absl::UnknownError("cuInit: CUDA_ERROR_UNKNOWN");
  DoctorReport r = RunDoctor(inv);
  EXPECT_THAT(Ids(r), ::testing::ElementsAre("kernel.uvm-missing-cuinit-failed", "cuda.init-failed"));
  EXPECT_EQ(r.overall, CheckStatus::kFail);
}

TEST(DoctorTest, DockerGpusNeedsTheHookAndOnOldKernelsGpunodesShimAsTheDefaultRuntime) {
  node::NodeInventory inv = HealthyNode();
  node::ContainerRuntime docker;
  docker.name = "docker";
  docker.installed = docker.nvidia_runtime = true;
  docker.config_path = "/etc/docker/daemon.json";
  inv.containers.runtimes.push_back(docker);
  EXPECT_THAT(Ids(RunDoctor(inv)), ::testing::ElementsAre("runtime.docker-no-gpus-hook"));
  inv.containers.runtimes[0].gpus_hook = "/usr/bin/nvidia-container-runtime-hook";
  inv.containers.runtimes[0].gpus_hook_gpunode = true;
  // runc as Docker's default: gpunode's hook injects (it needs Linux 5.12's mount calls).
  inv.kernel.kernel_release = "6.1.0-18-amd64";
  EXPECT_THAT(Ids(RunDoctor(inv)), ::testing::IsEmpty()) << "runc default with the hook is supported";
  inv.kernel.kernel_release = "5.12.0";
  EXPECT_THAT(Ids(RunDoctor(inv)), ::testing::IsEmpty());
  inv.kernel.kernel_release = "5.10.0-28-amd64";
  DoctorReport r = RunDoctor(inv);
  ASSERT_THAT(Ids(r), ::testing::ElementsAre("runtime.docker-gpus-not-default"));
  EXPECT_NE(r.first->action.find("--set-as-default"), std::string::npos) << r.first->action;
  EXPECT_NE(r.first->summary.find("5.10.0-28-amd64"), std::string::npos) << r.first->summary;
  inv.containers.runtimes[0].default_nvidia = true;
  EXPECT_THAT(Ids(RunDoctor(inv)), ::testing::IsEmpty());
  // NVIDIA's own hook does its work with runc: no default runtime needed.
  inv.containers.runtimes[0].default_nvidia = false;
  inv.containers.runtimes[0].gpus_hook_gpunode = false;
  EXPECT_THAT(Ids(RunDoctor(inv)), ::testing::IsEmpty());
}

TEST(DoctorTest, ACdiSpecOlderThanTheDriverFails) {
  node::NodeInventory inv = HealthyNode();
  node::ContainerRuntime podman;
  podman.name = "podman";
  podman.installed = podman.cdi_enabled = true;
  inv.containers.runtimes.push_back(podman);
  node::CdiSpec spec;
  spec.path = "/etc/cdi/nvidia.yaml";
  spec.kind = "nvidia.com/gpu";
  spec.driver_version = *Version::Parse("570.86.15");
  for (const node::DeviceNode& n : inv.kernel.device_nodes) {
    if (n.present) spec.device_nodes.push_back(n.path);
  }
  inv.containers.cdi_specs.push_back(spec);
  DoctorReport r = RunDoctor(inv);
  EXPECT_THAT(Ids(r), ::testing::ElementsAre("runtime.cdi-stale"));
  EXPECT_EQ(r.first->layers[1], Layer::kUserDriver);
}

TEST(DoctorTest, ACdiSpecNamingAMissingNodeFailsAndOneMissingAGpuWarns) {
  node::NodeInventory inv = HealthyNode();
  node::ContainerRuntime podman;
  podman.name = "podman";
  podman.installed = podman.cdi_enabled = true;
  inv.containers.runtimes.push_back(podman);
  node::CdiSpec spec;
  spec.path = "/var/run/cdi/nvidia.yaml";
  spec.kind = "nvidia.com/gpu";
  std::string a_gpu_node;
  for (const node::DeviceNode& n : inv.kernel.device_nodes) {
    if (!n.present) continue;
    if (a_gpu_node.empty() && n.path.size() > 11 && std::isdigit(static_cast<unsigned char>(n.path[11]))) {
      a_gpu_node = n.path;  // left out of the spec: a GPU `=all` would not give
      continue;
    }
    spec.device_nodes.push_back(n.path);
  }
  ASSERT_FALSE(a_gpu_node.empty());
  spec.device_nodes.push_back("/dev/nvidia9");  // a GPU the host does not have
  inv.containers.cdi_specs.push_back(spec);
  DoctorReport r = RunDoctor(inv);
  EXPECT_THAT(Ids(r), ::testing::UnorderedElementsAre("runtime.cdi-missing-node", "runtime.cdi-incomplete"));
  EXPECT_EQ(r.first->id, "runtime.cdi-missing-node");
  EXPECT_THAT(r.first->summary, ::testing::HasSubstr("/dev/nvidia9"));
  EXPECT_THAT(r.first->action, ::testing::HasSubstr("gpunode cdi generate --output /var/run/cdi/nvidia.yaml"));
}

TEST(DoctorTest, ACdiSpecWithOtherNodeNumbersThanTheHostFails) {
  node::NodeInventory inv = HealthyNode();
  node::ContainerRuntime podman;
  podman.name = "podman";
  podman.installed = podman.cdi_enabled = true;
  inv.containers.runtimes.push_back(podman);
  node::CdiSpec spec;
  spec.path = "/var/run/cdi/nvidia.yaml";
  spec.kind = "nvidia.com/gpu";
  for (node::DeviceNode& n : inv.kernel.device_nodes) {
    if (!n.present) continue;
    n.char_device = true;
    if (n.path == "/dev/nvidia-uvm") n.major = 509;  // reloaded: a new dynamic major
    spec.device_nodes.push_back(n.path);
    spec.node_numbers[n.path] = {n.path == "/dev/nvidia-uvm" ? 510u : n.major, n.minor};
  }
  inv.containers.cdi_specs.push_back(spec);
  DoctorReport r = RunDoctor(inv);
  EXPECT_THAT(Ids(r), ::testing::ElementsAre("runtime.cdi-stale-node"));
  EXPECT_THAT(r.first->summary, ::testing::HasSubstr("/dev/nvidia-uvm (spec 510:0, host 509:0)"));
}

TEST(DoctorTest, AToolkitNewerThanTheDriverWarnsWithinAMajorAndFailsAcrossMajors) {
  node::NodeInventory inv = HealthyNode();
  inv.driver.cuda_version = inv.driver.cuda.version = *Version::Parse("12.2");
  inv.toolchain.cuda_toolkit = *Version::Parse("12.4.1");
  DoctorReport r = RunDoctor(inv);
  EXPECT_THAT(Ids(r), ::testing::ElementsAre("toolchain.newer-than-driver"));
  EXPECT_EQ(r.checks[3].status, CheckStatus::kWarn);
  inv.toolchain.cuda_toolkit = *Version::Parse("13.0.2");
  EXPECT_EQ(RunDoctor(inv).checks[3].status, CheckStatus::kFail);
}

TEST(DoctorTest, AKubeletWithoutAGpuPluginWarns) {
  node::NodeInventory inv = HealthyNode();
  inv.orchestrator.kubelet_present = inv.orchestrator.kubelet_socket = true;
  EXPECT_THAT(Ids(RunDoctor(inv)), ::testing::ElementsAre("kubelet.no-gpu-plugin"));
  inv.orchestrator.plugin_sockets.push_back("nvidia-gpu.sock");
  EXPECT_THAT(Ids(RunDoctor(inv)), ::testing::IsEmpty());
  EXPECT_THAT(RunDoctor(inv).checks.back().observed, ::testing::HasSubstr("GPUs served by the device plugin"));
  // A node that serves its GPUs through DRA only.
  inv.orchestrator.plugin_sockets.clear();
  inv.orchestrator.dra_drivers.push_back("gpu.nvidia.com");
  EXPECT_THAT(Ids(RunDoctor(inv)), ::testing::IsEmpty());
  EXPECT_THAT(RunDoctor(inv).checks.back().observed, ::testing::HasSubstr("DRA drivers: gpu.nvidia.com; GPUs served by DRA"));
}

TEST(DoctorTest, JsonReportIsVersionedAndCarriesTheBaselineCard) {
  nlohmann::json doc = ToJson(RunDoctor(HealthyNode()));
  EXPECT_EQ(doc["apiVersion"], "gpunode/v1");
  EXPECT_EQ(doc["kind"], "DoctorReport");
  EXPECT_EQ(doc["summary"]["status"], "ok");
  EXPECT_EQ(doc["checks"].size(), 6u);
  EXPECT_EQ(doc["baseline"]["gpus"].size(), 2u);
  EXPECT_EQ(doc["baseline"]["gpus"][0]["model"], "NVIDIA H200");
  EXPECT_EQ(doc["baseline"]["gpus"][0]["pcie"]["widthMax"], 16);
  EXPECT_EQ(doc["baseline"]["gpus"][0]["numaNode"], 0);
}

TEST(DoctorTest, TextReportShowsEveryLayerAndNoColorWhenAskedNot) {
  std::string text = RenderText(RunDoctor(HealthyNode()), false);
  for (const char* layer : {"hardware", "kernel driver", "user-space driver", "toolchain", "container runtime",
                            "kubelet", "Baseline card", "NVIDIA H200"}) {
    EXPECT_NE(text.find(layer), std::string::npos) << layer;
  }
  EXPECT_EQ(text.find("\033["), std::string::npos);
}

}  // namespace
}  // namespace gpunode::doctor
