// The generated entry-point wrappers of the NVML and libcuda loaders: an entry point the library
// lacks answers NVML_ERROR_FUNCTION_NOT_FOUND / CUDA_ERROR_NOT_FOUND instead of being a null
// pointer, fallback names bind, required entries are enforced. Against test/gpu/minimal_nvml.cc (a
// library with only the required NVML entry points) and the simulated library (every entry point).
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/support/profile.h"
#include "src/gpu/cuda.h"
#include "src/gpu/event_pump.h"
#include "src/gpu/gpu_reader.h"
#include "src/gpu/nvml.h"
#include "test/testing/sim_library.h"
#include "test/testing/status_matchers.h"

namespace gpunode {
namespace {

using ::gpunode::testing::SimLibrary;
using ::testing::HasSubstr;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;

TEST(NvmlWrappersTest, AnOldDriverBindsFallbacksAndAbsentEntriesAnswerFunctionNotFound) {
  auto lib = gpu::NvmlLibrary::Open(GPUNODE_TEST_MINIMAL_NVML);
  ASSERT_OK(lib);
  const gpu::NvmlLibrary& nvml = **lib;
  EXPECT_THAT(nvml.fallbacks(),
              UnorderedElementsAre(Pair("nvmlInit_v2", "nvmlInit"),
                                   Pair("nvmlDeviceGetCount_v2", "nvmlDeviceGetCount"),
                                   Pair("nvmlDeviceGetCurrentClocksEventReasons",
                                        "nvmlDeviceGetCurrentClocksThrottleReasons")));
  auto count = nvml.DeviceCount();  // through the fallback nvmlDeviceGetCount
  ASSERT_OK(count);
  EXPECT_EQ(*count, 1u);
  auto dev = nvml.DeviceHandle(0);
  ASSERT_OK(dev);

  unsigned long long reasons = 0;
  EXPECT_EQ(nvml.nvmlDeviceGetCurrentClocksEventReasons(*dev, &reasons), NVML_SUCCESS);
  EXPECT_EQ(reasons, 0x4u);

  EXPECT_FALSE(nvml.nvmlDeviceGetTemperature.bound());
  unsigned temp = 7;
  EXPECT_EQ(nvml.nvmlDeviceGetTemperature(*dev, NVML_TEMPERATURE_GPU, &temp),
            NVML_ERROR_FUNCTION_NOT_FOUND);
  EXPECT_EQ(temp, 7u);  // untouched
  EXPECT_TRUE(gpu::NvmlIsUnsupported(nvml.nvmlDeviceGetFieldValues(*dev, 0, nullptr)));
  nvmlGpmSample_t sample = nullptr;
  EXPECT_EQ(nvml.nvmlGpmSampleAlloc(&sample), NVML_ERROR_FUNCTION_NOT_FOUND);

  auto version = nvml.NvmlVersion();
  EXPECT_EQ(version.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(gpu::NvmlReturnOf(version.status()), NVML_ERROR_FUNCTION_NOT_FOUND);
  auto mig = nvml.GetMigMode(*dev);
  EXPECT_EQ(mig.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(gpu::NvmlReturnOf(mig.status()), NVML_ERROR_FUNCTION_NOT_FOUND);
  auto gi = nvml.GpuInstanceProfileInfo(*dev, NVML_GPU_INSTANCE_PROFILE_1_SLICE);  // neither V nor v1
  EXPECT_EQ(gpu::NvmlReturnOf(gi.status()), NVML_ERROR_FUNCTION_NOT_FOUND);
  EXPECT_EQ(gpu::NvmlReturnOf(nvml.ComputeProcesses(*dev).status()), NVML_ERROR_FUNCTION_NOT_FOUND);
  auto driver = nvml.DriverVersion();
  ASSERT_OK(driver);
  EXPECT_EQ(driver->ToString(), "450.80.02");
}

TEST(NvmlWrappersTest, ReadGpuOnAnOldDriverLeavesEveryFieldAbsentWithoutErrors) {
  auto lib = gpu::NvmlLibrary::Open(GPUNODE_TEST_MINIMAL_NVML);
  ASSERT_OK(lib);
  auto gpu = gpu::ReadGpu(**lib, 0, gpu::GpuReadOptions{.live_metrics = true});
  ASSERT_OK(gpu);
  EXPECT_TRUE(gpu->name.empty());
  EXPECT_FALSE(gpu->temperature_c);
  EXPECT_FALSE(gpu->memory_total_bytes);
  EXPECT_FALSE(gpu->compute_processes);
  EXPECT_FALSE(gpu->mig_enabled);
  EXPECT_TRUE(gpu->nvlinks.empty());
  EXPECT_TRUE(gpu->field_errors.empty());

  gpu::NvmlEventPump pump(**lib);  // no nvmlEventSetCreate: nothing to watch, no crash
  EXPECT_EQ(pump.Start({{0u, "GPU-0"}}), 0u);
}

TEST(NvmlWrappersTest, AMissingRequiredEntryPointFailsOpenNamingIt) {
  auto lib = gpu::NvmlLibrary::Open(GPUNODE_TEST_TOO_OLD_NVML);
  ASSERT_FALSE(lib.ok());
  EXPECT_EQ(lib.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(lib.status().message()),
              HasSubstr("symbol nvmlSystemGetDriverVersion is missing; this NVML is too old"));
}

class SimProfile {
 public:
  SimProfile() {
    dir_ = std::filesystem::temp_directory_path() / ("gpunode-wrappers-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    auto source = sim::ResolveProfile("dgx-h200");
    EXPECT_OK(source);
    const std::string path = (dir_ / "profile.yaml").string();
    std::ofstream(path) << source->text;
    ::setenv("GPUNODE_SIM_PROFILE", path.c_str(), 1);
  }
  ~SimProfile() { std::filesystem::remove_all(dir_); }

 private:
  std::filesystem::path dir_;
};

TEST(NvmlWrappersTest, TheSimulatedLibraryBindsEveryEntryUnderItsOwnName) {
  SimProfile profile;
  auto lib = gpu::NvmlLibrary::Open(SimLibrary());
  ASSERT_OK(lib);
  EXPECT_TRUE((*lib)->fallbacks().empty());
  std::vector<std::string> unbound;
#define GPUNODE_TEST_BOUND(need, ret, name, params, fallbacks) \
  if (!(*lib)->name.bound()) unbound.push_back(#name);
  GPUNODE_NVML_API(GPUNODE_TEST_BOUND)
#undef GPUNODE_TEST_BOUND
  EXPECT_THAT(unbound, ::testing::IsEmpty());
}

TEST(CudaWrappersTest, TheCoreSetLoadsWhereTheFullDriverApiIsMissing) {
  auto core = gpu::CudaLibrary::Open(SimLibrary(), gpu::CudaApi::kCore);
  ASSERT_OK(core);
  EXPECT_TRUE((*core)->cuDriverGetVersion.bound());
  EXPECT_FALSE((*core)->cuDeviceGet.bound());
  CUdevice dev = -1;
  EXPECT_EQ((*core)->cuDeviceGet(&dev, 0), GPUNODE_CUDA_ERROR_NOT_FOUND);
  EXPECT_EQ(dev, -1);
  EXPECT_FALSE((*core)->cuTensorMapEncodeTiled.bound());

  auto full = gpu::CudaLibrary::Open(SimLibrary(), gpu::CudaApi::kFull);
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(full.status().message()), HasSubstr("symbol cuDeviceGet is missing"));

  auto none = gpu::CudaLibrary::Open("/nonexistent/libcuda.so.1", gpu::CudaApi::kCore);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);

  gpu::CudaDriverInfo info = gpu::ProbeCuda(GPUNODE_TEST_MINIMAL_NVML, /*init=*/true, nullptr);
  EXPECT_EQ(info.status.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(info.status.message()),
              HasSubstr("symbol cuInit is missing; not a CUDA driver library"));
}

TEST(CudaWrappersTest, OneMapForEveryCUresult) {
  EXPECT_OK(gpu::CudaResultToStatus(GPUNODE_CUDA_SUCCESS, "cuInit"));
  Status s = gpu::CudaResultToStatus(GPUNODE_CUDA_ERROR_NO_DEVICE, "cuInit", "CUDA_ERROR_NO_DEVICE",
                                "no CUDA-capable device is detected");
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "cuInit: CUDA_ERROR_NO_DEVICE (100): no CUDA-capable device is detected");
  EXPECT_EQ(gpu::CudaResultToStatus(GPUNODE_CUDA_ERROR_OUT_OF_MEMORY, "op").code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(gpu::CudaResultToStatus(GPUNODE_CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, "op").code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(gpu::CudaResultToStatus(GPUNODE_CUDA_ERROR_ILLEGAL_ADDRESS, "op").code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(gpu::CudaResultToStatus(GPUNODE_CUDA_ERROR_NOT_FOUND, "op").message(), "op: CUDA_ERROR (500)");
}

}  // namespace
}  // namespace gpunode
