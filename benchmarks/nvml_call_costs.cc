// Times every NVML query gpunode's gpu::GpuInfo reader makes, on GPU 0 (or --gpu N), through the same
// loader (src/gpu/nvml.h): the first call (NVML attaches the device lazily) and the median of 50.
// Usage: nvml_call_costs [--gpu N] [--library libnvidia-ml.so.1]
// Also times gpu::ReadGpu() as a whole and the phases doctor pays (load+init, handle, gpu::ReadGpu).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "src/gpu/gpu_reader.h"
#include "src/gpu/nvml.h"

namespace {

using Clock = std::chrono::steady_clock;

double Us(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

struct Row {
  std::string name;
  double first_us;
  double median_us;
  int ret;
};

Row Time(const std::string& name, const std::function<int()>& call) {
  auto t0 = Clock::now();
  int ret = call();
  double first = Us(t0, Clock::now());
  std::vector<double> v;
  for (int i = 0; i < 50; ++i) {
    auto a = Clock::now();
    call();
    v.push_back(Us(a, Clock::now()));
  }
  std::sort(v.begin(), v.end());
  return Row{name, first, v[v.size() / 2], ret};
}

}  // namespace

int main(int argc, char** argv) {
  unsigned gpu = 0;
  std::string library = "libnvidia-ml.so.1";
  for (int i = 1; i + 1 < argc; ++i) {
    if (!std::strcmp(argv[i], "--gpu")) gpu = static_cast<unsigned>(std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "--library")) library = argv[++i];
  }
  auto t0 = Clock::now();
  auto lib = gpunode::gpu::NvmlLibrary::Open(library);
  auto t1 = Clock::now();
  if (!lib.ok()) {
    std::fprintf(stderr, "%s\n", std::string(lib.status().message()).c_str());
    return 1;
  }
  const gpunode::gpu::NvmlLibrary& f = **lib;  // the generated wrappers
  nvmlDevice_t dev = nullptr;
  auto h0 = Clock::now();
  nvmlReturn_t hret = f.nvmlDeviceGetHandleByIndex_v2(gpu, &dev);
  auto h1 = Clock::now();
  std::printf("nvmlInit_v2 (with dlopen): %.0f us; first nvmlDeviceGetHandleByIndex_v2: %.0f us (ret %d)\n",
              Us(t0, t1), Us(h0, h1), hret);
  if (hret != NVML_SUCCESS) return 1;

  char buf[128];
  unsigned u = 0, a = 0, b = 0, c = 0;
  unsigned long long ull = 0;
  nvmlEnableState_t st{}, st2{};
  nvmlPciInfo_t pci{};
  nvmlMemory_v2_t mem{};
  nvmlUtilization_t util{};
  int ma = 0, mi = 0;
  std::vector<Row> rows;
  rows.push_back(Time("nvmlDeviceGetName", [&] { return int(f.nvmlDeviceGetName(dev, buf, sizeof buf)); }));
  rows.push_back(Time("nvmlDeviceGetUUID", [&] { return int(f.nvmlDeviceGetUUID(dev, buf, sizeof buf)); }));
  rows.push_back(Time("nvmlDeviceGetPciInfo_v3", [&] { return int(f.nvmlDeviceGetPciInfo_v3(dev, &pci)); }));
  rows.push_back(Time("nvmlDeviceGetMinorNumber", [&] { return int(f.nvmlDeviceGetMinorNumber(dev, &u)); }));
  rows.push_back(Time("nvmlDeviceGetVbiosVersion", [&] { return int(f.nvmlDeviceGetVbiosVersion(dev, buf, 32)); }));
  rows.push_back(Time("nvmlDeviceGetMemoryInfo_v2", [&] {
    mem.version = nvmlMemory_v2;
    return int(f.nvmlDeviceGetMemoryInfo_v2(dev, &mem));
  }));
  rows.push_back(Time("nvmlDeviceGetPersistenceMode", [&] { return int(f.nvmlDeviceGetPersistenceMode(dev, &st)); }));
  rows.push_back(Time("nvmlDeviceGetEccMode", [&] { return int(f.nvmlDeviceGetEccMode(dev, &st, &st2)); }));
  rows.push_back(Time("nvmlDeviceGetTotalEccErrors", [&] {
    return int(f.nvmlDeviceGetTotalEccErrors(dev, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_AGGREGATE_ECC, &ull));
  }));
  rows.push_back(Time("nvmlDeviceGetRetiredPagesPendingStatus",
                      [&] { return int(f.nvmlDeviceGetRetiredPagesPendingStatus(dev, &st)); }));
  rows.push_back(Time("nvmlDeviceGetRemappedRows", [&] { return int(f.nvmlDeviceGetRemappedRows(dev, &a, &b, &c, &u)); }));
  rows.push_back(Time("nvmlDeviceGetCurrPcieLinkGeneration",
                      [&] { return int(f.nvmlDeviceGetCurrPcieLinkGeneration(dev, &u)); }));
  rows.push_back(Time("nvmlDeviceGetMaxPcieLinkGeneration", [&] { return int(f.nvmlDeviceGetMaxPcieLinkGeneration(dev, &u)); }));
  rows.push_back(Time("nvmlDeviceGetGpuMaxPcieLinkGeneration",
                      [&] { return int(f.nvmlDeviceGetGpuMaxPcieLinkGeneration(dev, &u)); }));
  rows.push_back(Time("nvmlDeviceGetCurrPcieLinkWidth", [&] { return int(f.nvmlDeviceGetCurrPcieLinkWidth(dev, &u)); }));
  rows.push_back(Time("nvmlDeviceGetMaxPcieLinkWidth", [&] { return int(f.nvmlDeviceGetMaxPcieLinkWidth(dev, &u)); }));
  rows.push_back(Time("nvmlDeviceGetTemperature", [&] { return int(f.nvmlDeviceGetTemperature(dev, NVML_TEMPERATURE_GPU, &u)); }));
  rows.push_back(Time("nvmlDeviceGetPowerUsage", [&] { return int(f.nvmlDeviceGetPowerUsage(dev, &u)); }));
  rows.push_back(Time("nvmlDeviceGetPowerManagementLimit",
                      [&] { return int(f.nvmlDeviceGetPowerManagementLimit(dev, &u)); }));
  rows.push_back(Time("nvmlDeviceGetEnforcedPowerLimit", [&] { return int(f.nvmlDeviceGetEnforcedPowerLimit(dev, &u)); }));
  rows.push_back(Time("nvmlDeviceGetClockInfo(SM)", [&] { return int(f.nvmlDeviceGetClockInfo(dev, NVML_CLOCK_SM, &u)); }));
  rows.push_back(Time("nvmlDeviceGetUtilizationRates", [&] { return int(f.nvmlDeviceGetUtilizationRates(dev, &util)); }));
  rows.push_back(Time("nvmlDeviceGetCudaComputeCapability",
                      [&] { return int(f.nvmlDeviceGetCudaComputeCapability(dev, &ma, &mi)); }));
  rows.push_back(Time("nvmlDeviceGetComputeRunningProcesses_v3(count)", [&] {
    unsigned n = 0;
    return int(f.nvmlDeviceGetComputeRunningProcesses_v3(dev, &n, nullptr));
  }));
  rows.push_back(Time("nvmlDeviceGetMigMode", [&] { return int(f.nvmlDeviceGetMigMode(dev, &a, &b)); }));
  rows.push_back(Time("nvmlDeviceGetMaxMigDeviceCount", [&] { return int(f.nvmlDeviceGetMaxMigDeviceCount(dev, &u)); }));
  rows.push_back(Time("nvmlDeviceGetNvLinkState(0)", [&] { return int(f.nvmlDeviceGetNvLinkState(dev, 0, &st)); }));
  rows.push_back(Time("nvmlSystemGetDriverVersion", [&] { return int(f.nvmlSystemGetDriverVersion(buf, 80)); }));
  rows.push_back(Time("ReadGpu (all of the above, gpunode's reader)", [&] {
    return (*lib)->nvmlDeviceGetCount_v2.bound() && gpunode::gpu::ReadGpu(**lib, gpu).ok() ? 0 : 1;
  }));
  std::printf("%-48s %10s %10s %4s\n", "call", "first us", "median us", "ret");
  for (const Row& r : rows) std::printf("%-48s %10.1f %10.1f %4d\n", r.name.c_str(), r.first_us, r.median_us, r.ret);
  return 0;
}
