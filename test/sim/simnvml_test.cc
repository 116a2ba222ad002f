// libgpunode-simnvml.so, loaded like the real libnvidia-ml.so.1 (dlopen RTLD_NOW|RTLD_LOCAL, every
// symbol resolved by name), answers with NVML's and libcuda's semantics from a node profile.
#include <dlfcn.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "src/gpu/nvml_abi.h"
#include "test/sim/sim_nvml_fixture.h"

namespace gpunode::sim {
namespace {

using Api = SimApi;
const Api& Lib() { return SimLib(); }
using SimNvmlTest = SimNvmlFixture;

// Two H200s; `extra` is appended to GPU 0.
std::string TwoGpuProfile(const std::string& gpu0_extra = "", int temperature = 40) {
  return R"(apiVersion: gpunode/v1
kind: NodeProfile
name: live
driver: {version: "580.95.05", cuda_version: "13.0"}
gpu_defaults: {name: NVIDIA H200, device_id: 0x2335, memory: {total_mib: 143771}, pcie: {gen: 5, width: 16}, compute_capability: "9.0"}
gpus:
  - {bus_id: "0000:18:00.0", temperature_c: )" +
         std::to_string(temperature) + gpu0_extra + R"(}
  - {bus_id: "0000:2a:00.0"}
)";
}

TEST_F(SimNvmlTest, EveryAbiFunctionResolvesByName) {
  EXPECT_TRUE(Lib().missing.empty());
  // Nothing else leaks out of the library.
  void* h = dlopen(testing::SimLibrary().c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(dlsym(h, "_ZN7gpunode3sim12ParseProfileESt17basic_string_viewIcSt11char_traitsIcEES4_"),
            nullptr);
  dlclose(h);
}

TEST_F(SimNvmlTest, CallsBeforeInitAreUninitialized) {
  unsigned count = 0;
  EXPECT_EQ(nvml().nvmlDeviceGetCount_v2(&count), NVML_ERROR_UNINITIALIZED);
  EXPECT_EQ(nvml().nvmlShutdown(), NVML_ERROR_UNINITIALIZED);
  char buf[80];
  EXPECT_EQ(nvml().nvmlSystemGetDriverVersion(buf, sizeof buf), NVML_ERROR_UNINITIALIZED);
}

TEST_F(SimNvmlTest, InitWithoutAProfileFailsWithoutCrashing) {
  unsetenv("GPUNODE_SIM_PROFILE");
  EXPECT_EQ(nvml().nvmlInit_v2(), NVML_ERROR_LIBRARY_NOT_FOUND);
  UseFile("gpus: [oops");
  EXPECT_EQ(nvml().nvmlInit_v2(), NVML_ERROR_LIBRARY_NOT_FOUND);
  setenv("GPUNODE_SIM_PROFILE", "/nonexistent/profile.yaml", 1);
  EXPECT_EQ(nvml().nvmlInit_v2(), NVML_ERROR_LIBRARY_NOT_FOUND);
}

TEST_F(SimNvmlTest, InitIsReferenceCounted) {
  UseBuiltin("t4-cloud");
  ASSERT_EQ(nvml().nvmlInit_v2(), NVML_SUCCESS);
  ASSERT_EQ(nvml().nvmlInit_v2(), NVML_SUCCESS);
  unsigned count = 0;
  EXPECT_EQ(nvml().nvmlShutdown(), NVML_SUCCESS);
  EXPECT_EQ(nvml().nvmlDeviceGetCount_v2(&count), NVML_SUCCESS);
  EXPECT_EQ(count, 1u);
  EXPECT_EQ(nvml().nvmlShutdown(), NVML_SUCCESS);
  EXPECT_EQ(nvml().nvmlDeviceGetCount_v2(&count), NVML_ERROR_UNINITIALIZED);
}

TEST_F(SimNvmlTest, ErrorStringsAreNvmls) {
  EXPECT_STREQ(nvml().nvmlErrorString(NVML_ERROR_LIB_RM_VERSION_MISMATCH),
               "Driver/library version mismatch");
  EXPECT_STREQ(nvml().nvmlErrorString(NVML_ERROR_GPU_IS_LOST), "GPU is lost");
  EXPECT_STREQ(nvml().nvmlErrorString(NVML_ERROR_DRIVER_NOT_LOADED), "Driver Not Loaded");
  EXPECT_STREQ(nvml().nvmlErrorString(NVML_ERROR_NO_PERMISSION), "Insufficient Permissions");
  EXPECT_STREQ(nvml().nvmlErrorString(static_cast<nvmlReturn_t>(12345)), "Unknown Error");
  const char* s = nullptr;
  EXPECT_EQ(nvml().cuGetErrorName(100, &s), 0);
  EXPECT_STREQ(s, "CUDA_ERROR_NO_DEVICE");
  EXPECT_EQ(nvml().cuGetErrorString(803, &s), 0);
  EXPECT_STREQ(s, "system has unsupported display driver / cuda driver combination");
  EXPECT_EQ(nvml().cuGetErrorName(4242, &s), 1);
  EXPECT_EQ(s, nullptr);
}

TEST_F(SimNvmlTest, DgxH200AnswersLikeTheRealNode) {
  UseBuiltin("dgx-h200");
  ASSERT_EQ(nvml().nvmlInit_v2(), NVML_SUCCESS);
  unsigned count = 0;
  ASSERT_EQ(nvml().nvmlDeviceGetCount_v2(&count), NVML_SUCCESS);
  EXPECT_EQ(count, 8u);
  char buf[96];
  ASSERT_EQ(nvml().nvmlSystemGetDriverVersion(buf, sizeof buf), NVML_SUCCESS);
  EXPECT_STREQ(buf, "580.95.05");
  ASSERT_EQ(nvml().nvmlSystemGetNVMLVersion(buf, sizeof buf), NVML_SUCCESS);
  EXPECT_STREQ(buf, "13.580.95.05");
  int cuda = 0;
  ASSERT_EQ(nvml().nvmlSystemGetCudaDriverVersion_v2(&cuda), NVML_SUCCESS);
  EXPECT_EQ(cuda, 13000);

  nvmlDevice_t d0 = Device(0), d4 = Device(4), d3 = Device(3);
  ASSERT_EQ(nvml().nvmlDeviceGetName(d0, buf, sizeof buf), NVML_SUCCESS);
  EXPECT_STREQ(buf, "NVIDIA H200");
  ASSERT_EQ(nvml().nvmlDeviceGetUUID(d0, buf, sizeof buf), NVML_SUCCESS);
  EXPECT_EQ(std::string(buf).substr(0, 4), "GPU-");
  nvmlPciInfo_t pci;
  ASSERT_EQ(nvml().nvmlDeviceGetPciInfo_v3(d0, &pci), NVML_SUCCESS);
  EXPECT_STREQ(pci.busId, "00000000:18:00.0");
  EXPECT_STREQ(pci.busIdLegacy, "0000:18:00.0");
  EXPECT_EQ(pci.pciDeviceId, 0x233510DEu);
  EXPECT_EQ(pci.bus, 0x18u);
  unsigned v = 0;
  ASSERT_EQ(nvml().nvmlDeviceGetIndex(d4, &v), NVML_SUCCESS);
  EXPECT_EQ(v, 4u);
  ASSERT_EQ(nvml().nvmlDeviceGetMinorNumber(d4, &v), NVML_SUCCESS);
  EXPECT_EQ(v, 4u);
  ASSERT_EQ(nvml().nvmlDeviceGetCurrPcieLinkGeneration(d0, &v), NVML_SUCCESS);
  EXPECT_EQ(v, 5u);
  ASSERT_EQ(nvml().nvmlDeviceGetCurrPcieLinkWidth(d0, &v), NVML_SUCCESS);
  EXPECT_EQ(v, 16u);
  ASSERT_EQ(nvml().nvmlDeviceGetPowerManagementLimit(d0, &v), NVML_SUCCESS);
  EXPECT_EQ(v, 700000u);
  nvmlEnableState_t cur, pend;
  ASSERT_EQ(nvml().nvmlDeviceGetEccMode(d0, &cur, &pend), NVML_SUCCESS);
  EXPECT_EQ(cur, NVML_FEATURE_ENABLED);
  ASSERT_EQ(nvml().nvmlDeviceGetPersistenceMode(d0, &cur), NVML_SUCCESS);
  EXPECT_EQ(cur, NVML_FEATURE_ENABLED);
  EXPECT_EQ(nvml().nvmlDeviceGetRetiredPagesPendingStatus(d0, &cur), NVML_ERROR_NOT_SUPPORTED);
  int major = 0, minor = 0;
  ASSERT_EQ(nvml().nvmlDeviceGetCudaComputeCapability(d0, &major, &minor), NVML_SUCCESS);
  EXPECT_EQ(major * 10 + minor, 90);

  nvmlGpuTopologyLevel_t level;
  ASSERT_EQ(nvml().nvmlDeviceGetTopologyCommonAncestor(d0, d3, &level), NVML_SUCCESS);
  EXPECT_EQ(level, NVML_TOPOLOGY_NODE);
  ASSERT_EQ(nvml().nvmlDeviceGetTopologyCommonAncestor(d0, d4, &level), NVML_SUCCESS);
  EXPECT_EQ(level, NVML_TOPOLOGY_SYSTEM);

  ASSERT_EQ(nvml().nvmlDeviceGetNvLinkState(d0, 17, &cur), NVML_SUCCESS);
  EXPECT_EQ(cur, NVML_FEATURE_ENABLED);
  EXPECT_EQ(nvml().nvmlDeviceGetNvLinkState(d0, 18, &cur), NVML_ERROR_INVALID_ARGUMENT);
  ASSERT_EQ(nvml().nvmlDeviceGetNvLinkRemotePciInfo_v2(d0, 0, &pci), NVML_SUCCESS);
  EXPECT_STREQ(pci.busId, "00000000:05:00.0");
  EXPECT_EQ(pci.pciDeviceId, 0x22A310DEu);  // an NVSwitch

  unsigned mode = 0, pending = 0;
  ASSERT_EQ(nvml().nvmlDeviceGetMigMode(d0, &mode, &pending), NVML_SUCCESS);
  EXPECT_EQ(mode, unsigned{NVML_DEVICE_MIG_DISABLE});
  nvmlDevice_t mig = nullptr;
  EXPECT_EQ(nvml().nvmlDeviceGetMigDeviceHandleByIndex(d0, 0, &mig), NVML_ERROR_NOT_FOUND);
}

TEST_F(SimNvmlTest, BadArgumentsAndShortBuffersAreRejected) {
  UseBuiltin("dgx-h200");
  ASSERT_EQ(nvml().nvmlInit_v2(), NVML_SUCCESS);
  nvmlDevice_t d = nullptr;
  EXPECT_EQ(nvml().nvmlDeviceGetHandleByIndex_v2(8, &d), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(nvml().nvmlDeviceGetHandleByIndex_v2(0, nullptr), NVML_ERROR_INVALID_ARGUMENT);
  d = Device(0);
  char small[5];
  EXPECT_EQ(nvml().nvmlDeviceGetName(d, small, sizeof small), NVML_ERROR_INSUFFICIENT_SIZE);
  EXPECT_EQ(nvml().nvmlDeviceGetUUID(d, small, sizeof small), NVML_ERROR_INSUFFICIENT_SIZE);
  EXPECT_EQ(nvml().nvmlSystemGetDriverVersion(small, sizeof small), NVML_ERROR_INSUFFICIENT_SIZE);
  char exact[12];  // "NVIDIA H200" + NUL
  EXPECT_EQ(nvml().nvmlDeviceGetName(d, exact, sizeof exact), NVML_SUCCESS);
  EXPECT_EQ(nvml().nvmlDeviceGetName(d, nullptr, 96), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(nvml().nvmlDeviceGetTemperature(d, NVML_TEMPERATURE_GPU, nullptr),
            NVML_ERROR_INVALID_ARGUMENT);
  unsigned t = 0;
  int bogus = 0;
  EXPECT_EQ(nvml().nvmlDeviceGetTemperature(reinterpret_cast<nvmlDevice_t>(&bogus),
                                            NVML_TEMPERATURE_GPU, &t),
            NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(nvml().nvmlDeviceGetClockInfo(d, static_cast<nvmlClockType_t>(9), &t),
            NVML_ERROR_INVALID_ARGUMENT);
}

TEST_F(SimNvmlTest, MemoryInfoV2ChecksTheStructVersion) {
  UseBuiltin("dgx-h200");
  ASSERT_EQ(nvml().nvmlInit_v2(), NVML_SUCCESS);
  nvmlDevice_t d = Device(0);
  nvmlMemory_v2_t m2{};
  m2.version = 1;
  EXPECT_EQ(nvml().nvmlDeviceGetMemoryInfo_v2(d, &m2), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
  m2.version = nvmlMemory_v2;
  ASSERT_EQ(nvml().nvmlDeviceGetMemoryInfo_v2(d, &m2), NVML_SUCCESS);
  EXPECT_EQ(m2.total, 143771ull << 20);
  EXPECT_EQ(m2.reserved, 568ull << 20);
  EXPECT_EQ(m2.free + m2.used + m2.reserved, m2.total);
  nvmlMemory_t m1{};
  ASSERT_EQ(nvml().nvmlDeviceGetMemoryInfo(d, &m1), NVML_SUCCESS);
  EXPECT_EQ(m1.used, m2.used + m2.reserved);
}

TEST_F(SimNvmlTest, GpusWithoutNvLinkSayNotSupported) {
  UseBuiltin("pcie-l40s-4");
  ASSERT_EQ(nvml().nvmlInit_v2(), NVML_SUCCESS);
  nvmlEnableState_t s;
  EXPECT_EQ(nvml().nvmlDeviceGetNvLinkState(Device(0), 0, &s), NVML_ERROR_NOT_SUPPORTED);
  unsigned n = 0;
  EXPECT_EQ(nvml().nvmlDeviceGetMaxMigDeviceCount(Device(0), &n), NVML_ERROR_NOT_SUPPORTED);
  nvmlGpuTopologyLevel_t level;
  ASSERT_EQ(nvml().nvmlDeviceGetTopologyCommonAncestor(Device(0), Device(1), &level), NVML_SUCCESS);
  EXPECT_EQ(level, NVML_TOPOLOGY_SINGLE);
}

TEST_F(SimNvmlTest, VersionMismatchFailsInitAndCuInit) {
  UseBuiltin("broken-mismatch");
  EXPECT_EQ(nvml().nvmlInit_v2(), NVML_ERROR_LIB_RM_VERSION_MISMATCH);
  unsigned count = 0;
  EXPECT_EQ(nvml().nvmlDeviceGetCount_v2(&count), NVML_ERROR_UNINITIALIZED);
  EXPECT_EQ(nvml().cuInit(0), 803);
  int v = 0;
  EXPECT_EQ(nvml().cuDriverGetVersion(&v), 0);
  EXPECT_EQ(v, 12020);
}

TEST_F(SimNvmlTest, MissingKernelModuleMeansDriverNotLoaded) {
  UseBuiltin("broken-no-driver");
  EXPECT_EQ(nvml().nvmlInit_v2(), NVML_ERROR_DRIVER_NOT_LOADED);
  EXPECT_EQ(nvml().cuInit(0), 100);
  int n = 0;
  EXPECT_EQ(nvml().cuDeviceGetCount(&n), 3);  // cuInit did not succeed
}

TEST_F(SimNvmlTest, InitErrorComesFromTheProfile) {
  UseFile(TwoGpuProfile().replace(
      TwoGpuProfile().find("cuda_version: \"13.0\""), 20,
      "cuda_version: \"13.0\", init_error: NO_PERMISSION, cuda_init_error: 35"));
  EXPECT_EQ(nvml().nvmlInit_v2(), NVML_ERROR_NO_PERMISSION);
  EXPECT_EQ(nvml().cuInit(0), 35);
}

TEST_F(SimNvmlTest, LostGpuIsCountedButItsHandleSaysGpuIsLost) {
  UseBuiltin("broken-fallen-gpu");
  ASSERT_EQ(nvml().nvmlInit_v2(), NVML_SUCCESS);
  unsigned count = 0;
  ASSERT_EQ(nvml().nvmlDeviceGetCount_v2(&count), NVML_SUCCESS);
  EXPECT_EQ(count, 4u);
  nvmlDevice_t d = nullptr;
  EXPECT_EQ(nvml().nvmlDeviceGetHandleByIndex_v2(2, &d), NVML_ERROR_GPU_IS_LOST);
  char buf[96];
  EXPECT_EQ(nvml().nvmlDeviceGetName(d, buf, sizeof buf), NVML_ERROR_GPU_IS_LOST);
  unsigned t = 0;
  EXPECT_EQ(nvml().nvmlDeviceGetTemperature(d, NVML_TEMPERATURE_GPU, &t), NVML_ERROR_GPU_IS_LOST);
  EXPECT_EQ(nvml().nvmlDeviceGetTemperature(Device(3), NVML_TEMPERATURE_GPU, &t), NVML_SUCCESS);
  ASSERT_EQ(nvml().cuInit(0), 0);
  int n = 0;
  ASSERT_EQ(nvml().cuDeviceGetCount(&n), 0);
  EXPECT_EQ(n, 3);
  ASSERT_EQ(nvml().cuDriverGetVersion(&n), 0);
  EXPECT_EQ(n, 12040);
}

TEST_F(SimNvmlTest, MigHandlesAnswerForTheirInstance) {
  UseBuiltin("a100-mig");
  ASSERT_EQ(nvml().nvmlInit_v2(), NVML_SUCCESS);
  nvmlDevice_t gpu = Device(0);
  unsigned mode = 0, pending = 0, max = 0;
  ASSERT_EQ(nvml().nvmlDeviceGetMigMode(gpu, &mode, &pending), NVML_SUCCESS);
  EXPECT_EQ(mode, unsigned{NVML_DEVICE_MIG_ENABLE});
  ASSERT_EQ(nvml().nvmlDeviceGetMaxMigDeviceCount(gpu, &max), NVML_SUCCESS);
  EXPECT_EQ(max, 7u);
  nvmlDevice_t mig = nullptr;
  EXPECT_EQ(nvml().nvmlDeviceGetMigDeviceHandleByIndex(gpu, 3, &mig), NVML_ERROR_NOT_FOUND);
  EXPECT_EQ(nvml().nvmlDeviceGetMigDeviceHandleByIndex(gpu, 7, &mig), NVML_ERROR_INVALID_ARGUMENT);
  ASSERT_EQ(nvml().nvmlDeviceGetMigDeviceHandleByIndex(gpu, 0, &mig), NVML_SUCCESS);
  char buf[96];
  ASSERT_EQ(nvml().nvmlDeviceGetUUID(mig, buf, sizeof buf), NVML_SUCCESS);
  EXPECT_EQ(std::string(buf).substr(0, 4), "MIG-");
  ASSERT_EQ(nvml().nvmlDeviceGetName(mig, buf, sizeof buf), NVML_SUCCESS);
  EXPECT_STREQ(buf, "NVIDIA A100-SXM4-80GB MIG 3g.40gb");
  nvmlMemory_t m{};
  ASSERT_EQ(nvml().nvmlDeviceGetMemoryInfo(mig, &m), NVML_SUCCESS);
  EXPECT_EQ(m.total, 40192ull << 20);
  EXPECT_EQ(m.used, 12288ull << 20);
  unsigned id = 99;
  ASSERT_EQ(nvml().nvmlDeviceGetGpuInstanceId(mig, &id), NVML_SUCCESS);
  EXPECT_EQ(id, 2u);
  ASSERT_EQ(nvml().nvmlDeviceGetComputeInstanceId(mig, &id), NVML_SUCCESS);
  EXPECT_EQ(id, 0u);
  EXPECT_EQ(nvml().nvmlDeviceGetGpuInstanceId(gpu, &id), NVML_ERROR_NOT_SUPPORTED);
  nvmlDeviceAttributes_t a{};
  ASSERT_EQ(nvml().nvmlDeviceGetAttributes_v2(mig, &a), NVML_SUCCESS);
  EXPECT_EQ(a.gpuInstanceSliceCount, 3u);
  EXPECT_EQ(a.multiprocessorCount, 42u);
  EXPECT_EQ(a.memorySizeMB, 40192u);
  EXPECT_EQ(nvml().nvmlDeviceGetMigMode(mig, &mode, &pending), NVML_ERROR_INVALID_ARGUMENT);
  unsigned t = 0;
  EXPECT_EQ(nvml().nvmlDeviceGetTemperature(mig, NVML_TEMPERATURE_GPU, &t),
            NVML_ERROR_NOT_SUPPORTED);
  // Processes: a short array reports the size needed.
  unsigned n = 0;
  EXPECT_EQ(nvml().nvmlDeviceGetComputeRunningProcesses_v3(gpu, &n, nullptr),
            NVML_ERROR_INSUFFICIENT_SIZE);
  EXPECT_EQ(n, 1u);
  nvmlProcessInfo_t infos[1];
  ASSERT_EQ(nvml().nvmlDeviceGetComputeRunningProcesses_v3(gpu, &n, infos), NVML_SUCCESS);
  EXPECT_EQ(infos[0].pid, 48213u);
  EXPECT_EQ(infos[0].gpuInstanceId, 2u);
  nvmlDevice_t mig2 = nullptr;
  ASSERT_EQ(nvml().nvmlDeviceGetMigDeviceHandleByIndex(gpu, 1, &mig2), NVML_SUCCESS);
  n = 1;
  ASSERT_EQ(nvml().nvmlDeviceGetComputeRunningProcesses_v3(mig2, &n, infos), NVML_SUCCESS);
  EXPECT_EQ(n, 0u);
  // nvml.h: utilization, encoder and decoder utilization are not supported on a MIG-enabled GPU.
  nvmlUtilization_t u{};
  EXPECT_EQ(nvml().nvmlDeviceGetUtilizationRates(gpu, &u), NVML_ERROR_NOT_SUPPORTED);
  unsigned util = 0, period = 0;
  EXPECT_EQ(nvml().nvmlDeviceGetEncoderUtilization(gpu, &util, &period), NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(nvml().nvmlDeviceGetDecoderUtilization(gpu, &util, &period), NVML_ERROR_NOT_SUPPORTED);
  nvmlMemory_v2_t m2{};
  m2.version = nvmlMemory_v2;
  ASSERT_EQ(nvml().nvmlDeviceGetMemoryInfo_v2(mig2, &m2), NVML_SUCCESS);
  EXPECT_EQ(m2.total, 19968ull << 20);
  EXPECT_EQ(m2.free, 19968ull << 20);
}

TEST_F(SimNvmlTest, LiveEditsAreSeenByARunningProcess) {
  UseFile(TwoGpuProfile("", 40));
  ASSERT_EQ(nvml().nvmlInit_v2(), NVML_SUCCESS);
  nvmlDevice_t d = Device(0);
  unsigned t = 0;
  ASSERT_EQ(nvml().nvmlDeviceGetTemperature(d, NVML_TEMPERATURE_GPU, &t), NVML_SUCCESS);
  EXPECT_EQ(t, 40u);
  UseFile(TwoGpuProfile("", 91));
  ASSERT_EQ(nvml().nvmlDeviceGetTemperature(d, NVML_TEMPERATURE_GPU, &t), NVML_SUCCESS);
  EXPECT_EQ(t, 91u);
  UseFile("not: [valid");  // a broken edit keeps the last good profile
  ASSERT_EQ(nvml().nvmlDeviceGetTemperature(d, NVML_TEMPERATURE_GPU, &t), NVML_SUCCESS);
  EXPECT_EQ(t, 91u);
  UseFile(TwoGpuProfile(", lost: true", 91));
  EXPECT_EQ(nvml().nvmlDeviceGetTemperature(d, NVML_TEMPERATURE_GPU, &t), NVML_ERROR_GPU_IS_LOST);
  unsigned count = 0;
  ASSERT_EQ(nvml().nvmlDeviceGetCount_v2(&count), NVML_SUCCESS);
  EXPECT_EQ(count, 2u);
}

TEST_F(SimNvmlTest, EventsAreDeliveredOnceAndThenTheWaitTimesOut) {
  UseFile(TwoGpuProfile(", events: [{type: xid, xid: 79}, {type: pstate}, {type: xid, xid: 48}]"));
  ASSERT_EQ(nvml().nvmlInit_v2(), NVML_SUCCESS);
  nvmlDevice_t d = Device(0);
  unsigned long long supported = 0;
  ASSERT_EQ(nvml().nvmlDeviceGetSupportedEventTypes(d, &supported), NVML_SUCCESS);
  EXPECT_TRUE(supported & nvmlEventTypeXidCriticalError);
  nvmlEventSet_t set = nullptr;
  ASSERT_EQ(nvml().nvmlEventSetCreate(&set), NVML_SUCCESS);
  EXPECT_EQ(nvml().nvmlDeviceRegisterEvents(d, 1ull << 40, set), NVML_ERROR_NOT_SUPPORTED);
  ASSERT_EQ(nvml().nvmlDeviceRegisterEvents(d, nvmlEventTypeXidCriticalError, set), NVML_SUCCESS);
  nvmlEventData_t e{};
  ASSERT_EQ(nvml().nvmlEventSetWait_v2(set, &e, 0), NVML_SUCCESS);
  EXPECT_EQ(e.eventType, static_cast<unsigned long long>(nvmlEventTypeXidCriticalError));
  EXPECT_EQ(e.eventData, 79u);
  EXPECT_EQ(e.device, d);
  ASSERT_EQ(nvml().nvmlEventSetWait_v2(set, &e, 0),
            NVML_SUCCESS);  // the pstate event is not registered
  EXPECT_EQ(e.eventData, 48u);
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(nvml().nvmlEventSetWait_v2(set, &e, 30), NVML_ERROR_TIMEOUT);
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(29));

  // An event appended by a live edit is delivered then; a GPU falling off the bus once.
  UseFile(
      TwoGpuProfile(", events: [{type: xid, xid: 79}, {type: pstate}, {type: xid, xid: 48}, {type: "
                    "xid, xid: 13}]"));
  ASSERT_EQ(nvml().nvmlEventSetWait_v2(set, &e, 100), NVML_SUCCESS);
  EXPECT_EQ(e.eventData, 13u);
  UseFile(
      TwoGpuProfile(", lost: true, events: [{type: xid, xid: 79}, {type: pstate}, {type: xid, xid: "
                    "48}, {type: xid, xid: 13}]"));
  EXPECT_EQ(nvml().nvmlEventSetWait_v2(set, &e, 100), NVML_ERROR_GPU_IS_LOST);
  EXPECT_EQ(nvml().nvmlEventSetWait_v2(set, &e, 0), NVML_ERROR_TIMEOUT);
  EXPECT_EQ(nvml().nvmlEventSetFree(set), NVML_SUCCESS);
  EXPECT_EQ(nvml().nvmlEventSetWait_v2(set, &e, 0), NVML_ERROR_INVALID_ARGUMENT);
}

TEST_F(SimNvmlTest, UnsupportedFieldsSayNotSupported) {
  UseFile(TwoGpuProfile(", unsupported: [temperature, power_usage, energy]"));
  ASSERT_EQ(nvml().nvmlInit_v2(), NVML_SUCCESS);
  nvmlDevice_t d = Device(0);
  unsigned v = 0;
  unsigned long long e = 0;
  EXPECT_EQ(nvml().nvmlDeviceGetTemperature(d, NVML_TEMPERATURE_GPU, &v), NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(nvml().nvmlDeviceGetPowerUsage(d, &v), NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(nvml().nvmlDeviceGetTotalEnergyConsumption(d, &e), NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(nvml().nvmlDeviceGetTemperature(Device(1), NVML_TEMPERATURE_GPU, &v), NVML_SUCCESS);
}

TEST_F(SimNvmlTest, CuDeviceGetCountNeedsCuInit) {
  UseBuiltin("broken-no-driver");
  EXPECT_EQ(nvml().cuInit(0), 100);
  int n = 0;
  EXPECT_EQ(nvml().cuDeviceGetCount(&n), 3);
  UseBuiltin("dgx-h200");
  EXPECT_EQ(nvml().cuInit(1), 1);
  ASSERT_EQ(nvml().cuInit(0), 0);
  ASSERT_EQ(nvml().cuDeviceGetCount(&n), 0);
  EXPECT_EQ(n, 8);
}

}  // namespace
}  // namespace gpunode::sim
