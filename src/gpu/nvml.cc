#include "src/gpu/nvml.h"

#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace gpunode::gpu {
namespace {

constexpr absl::string_view kNvmlPayload = "gpunode.dev/nvml-return";

// The need column of GPUNODE_NVML_API.
#define GPUNODE_NVML_NEED_required true
#define GPUNODE_NVML_NEED_optional false

absl::StatusCode CodeFor(nvmlReturn_t ret) {
  switch (ret) {
    case NVML_SUCCESS:
      return absl::StatusCode::kOk;
    case NVML_ERROR_NOT_SUPPORTED:
    case NVML_ERROR_FUNCTION_NOT_FOUND:
    case NVML_ERROR_VGPU_ECC_NOT_SUPPORTED:
    case NVML_ERROR_FREQ_NOT_SUPPORTED:
    case NVML_ERROR_DEPRECATED:
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH:
      return absl::StatusCode::kUnimplemented;
    case NVML_ERROR_NO_PERMISSION:
      return absl::StatusCode::kPermissionDenied;
    case NVML_ERROR_UNINITIALIZED:
    case NVML_ERROR_ALREADY_INITIALIZED:
    case NVML_ERROR_DRIVER_NOT_LOADED:
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH:
    case NVML_ERROR_RESET_REQUIRED:
    case NVML_ERROR_INSUFFICIENT_POWER:
    case NVML_ERROR_IN_USE:
    case NVML_ERROR_INVALID_STATE:
      return absl::StatusCode::kFailedPrecondition;
    case NVML_ERROR_GPU_IS_LOST:
    case NVML_ERROR_NOT_READY:
      return absl::StatusCode::kUnavailable;
    case NVML_ERROR_NOT_FOUND:
    case NVML_ERROR_LIBRARY_NOT_FOUND:
    case NVML_ERROR_GPU_NOT_FOUND:
    case NVML_ERROR_NO_DATA:
      return absl::StatusCode::kNotFound;
    case NVML_ERROR_INVALID_ARGUMENT:
      return absl::StatusCode::kInvalidArgument;
    case NVML_ERROR_INSUFFICIENT_SIZE:
      return absl::StatusCode::kOutOfRange;
    case NVML_ERROR_TIMEOUT:
      return absl::StatusCode::kDeadlineExceeded;
    case NVML_ERROR_MEMORY:
    case NVML_ERROR_INSUFFICIENT_RESOURCES:
      return absl::StatusCode::kResourceExhausted;
    case NVML_ERROR_CORRUPTED_INFOROM:
      return absl::StatusCode::kDataLoss;
    case NVML_ERROR_IRQ_ISSUE:
    case NVML_ERROR_OPERATING_SYSTEM:
      return absl::StatusCode::kInternal;
    default:
      return absl::StatusCode::kUnknown;
  }
}

double MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

std::string TrimBuffer(const char* buf, size_t size) {
  return std::string(buf, strnlen(buf, size));
}

}  // namespace

absl::string_view NvmlReturnName(nvmlReturn_t ret) {
  switch (ret) {
#define GPUNODE_NVML_CASE(x) case x: return #x;
    GPUNODE_NVML_CASE(NVML_SUCCESS)
    GPUNODE_NVML_CASE(NVML_ERROR_UNINITIALIZED)
    GPUNODE_NVML_CASE(NVML_ERROR_INVALID_ARGUMENT)
    GPUNODE_NVML_CASE(NVML_ERROR_NOT_SUPPORTED)
    GPUNODE_NVML_CASE(NVML_ERROR_NO_PERMISSION)
    GPUNODE_NVML_CASE(NVML_ERROR_ALREADY_INITIALIZED)
    GPUNODE_NVML_CASE(NVML_ERROR_NOT_FOUND)
    GPUNODE_NVML_CASE(NVML_ERROR_INSUFFICIENT_SIZE)
    GPUNODE_NVML_CASE(NVML_ERROR_INSUFFICIENT_POWER)
    GPUNODE_NVML_CASE(NVML_ERROR_DRIVER_NOT_LOADED)
    GPUNODE_NVML_CASE(NVML_ERROR_TIMEOUT)
    GPUNODE_NVML_CASE(NVML_ERROR_IRQ_ISSUE)
    GPUNODE_NVML_CASE(NVML_ERROR_LIBRARY_NOT_FOUND)
    GPUNODE_NVML_CASE(NVML_ERROR_FUNCTION_NOT_FOUND)
    GPUNODE_NVML_CASE(NVML_ERROR_CORRUPTED_INFOROM)
    GPUNODE_NVML_CASE(NVML_ERROR_GPU_IS_LOST)
    GPUNODE_NVML_CASE(NVML_ERROR_RESET_REQUIRED)
    GPUNODE_NVML_CASE(NVML_ERROR_OPERATING_SYSTEM)
    GPUNODE_NVML_CASE(NVML_ERROR_LIB_RM_VERSION_MISMATCH)
    GPUNODE_NVML_CASE(NVML_ERROR_IN_USE)
    GPUNODE_NVML_CASE(NVML_ERROR_MEMORY)
    GPUNODE_NVML_CASE(NVML_ERROR_NO_DATA)
    GPUNODE_NVML_CASE(NVML_ERROR_VGPU_ECC_NOT_SUPPORTED)
    GPUNODE_NVML_CASE(NVML_ERROR_INSUFFICIENT_RESOURCES)
    GPUNODE_NVML_CASE(NVML_ERROR_FREQ_NOT_SUPPORTED)
    GPUNODE_NVML_CASE(NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
    GPUNODE_NVML_CASE(NVML_ERROR_DEPRECATED)
    GPUNODE_NVML_CASE(NVML_ERROR_NOT_READY)
    GPUNODE_NVML_CASE(NVML_ERROR_GPU_NOT_FOUND)
    GPUNODE_NVML_CASE(NVML_ERROR_INVALID_STATE)
    GPUNODE_NVML_CASE(NVML_ERROR_UNKNOWN)
#undef GPUNODE_NVML_CASE
  }
  return "NVML_ERROR_UNRECOGNIZED";
}

bool NvmlIsUnsupported(nvmlReturn_t ret) {
  return CodeFor(ret) == absl::StatusCode::kUnimplemented;
}

Status NvmlReturnToStatus(nvmlReturn_t ret, absl::string_view op, const char* nvml_text) {
  if (ret == NVML_SUCCESS) return absl::OkStatus();
  std::string msg = absl::StrCat(op, ": ");
  if (nvml_text != nullptr && *nvml_text != '\0') {
    absl::StrAppend(&msg, nvml_text, " (", NvmlReturnName(ret), ")");
  } else {
    absl::StrAppend(&msg, NvmlReturnName(ret), " (", static_cast<int>(ret), ")");
  }
  Status status(CodeFor(ret), msg);
  status.SetPayload(kNvmlPayload, absl::Cord(std::to_string(static_cast<int>(ret))));
  return status;
}

std::optional<nvmlReturn_t> NvmlReturnOf(const Status& status) {
  auto payload = status.GetPayload(kNvmlPayload);
  if (!payload) return std::nullopt;
  int value = 0;
  if (!absl::SimpleAtoi(std::string(*payload), &value)) return std::nullopt;
  return static_cast<nvmlReturn_t>(value);
}

std::string LoadedLibraryFile(const std::string& name) {
  void* handle = dlopen(name.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (handle == nullptr) return "";
  struct link_map* map = nullptr;
  std::string file;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr) {
    char resolved[PATH_MAX];
    file = realpath(map->l_name, resolved) != nullptr ? resolved : map->l_name;
  }
  dlclose(handle);  // drops only the reference RTLD_NOLOAD took
  return file;
}

StatusOr<std::unique_ptr<NvmlLibrary>> NvmlLibrary::Open(const std::string& path) {
  auto start = std::chrono::steady_clock::now();
  std::unique_ptr<NvmlLibrary> lib(new NvmlLibrary());
  lib->path_ = path;
  dlerror();
  lib->handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib->handle_ == nullptr) {
    const char* err = dlerror();
    Status status = absl::NotFoundError(
        absl::StrCat("load ", path, ": ", err ? err : "unknown dlopen error"));
    status.SetPayload(kNvmlPayload,
                      absl::Cord(std::to_string(static_cast<int>(NVML_ERROR_LIBRARY_NOT_FOUND))));
    return status;
  }
  // Bind every entry of the list, newest name first, then its fallbacks.
#define GPUNODE_NVML_RESOLVE(need, ret, name, params, fallbacks)                                   \
  {                                                                                                \
    const char* bound = nullptr;                                                                   \
    void* sym = DlSymbol(lib->handle_, #name, {GPUNODE_ABI_NAMES(fallbacks)}, &bound);             \
    if (sym == nullptr && GPUNODE_NVML_NEED_##need) {                                              \
      return absl::UnimplementedError(                                                             \
          absl::StrCat("load ", path, ": symbol " #name " is missing; this NVML is too old"));     \
    }                                                                                              \
    if (sym != nullptr && std::strcmp(bound, #name) != 0) lib->fallbacks_.emplace_back(#name, bound); \
    lib->name.Bind(sym);                                                                           \
  }
  GPUNODE_NVML_API(GPUNODE_NVML_RESOLVE)
#undef GPUNODE_NVML_RESOLVE
  lib->load_ms_ = MsSince(start);

  auto init_start = std::chrono::steady_clock::now();
  nvmlReturn_t ret = lib->nvmlInit_v2();
  lib->init_ms_ = MsSince(init_start);
  if (ret != NVML_SUCCESS) return lib->Check(ret, "nvmlInit_v2");
  lib->initialized_ = true;
  return lib;
}

NvmlLibrary::~NvmlLibrary() {
  if (initialized_) nvmlShutdown();
}

Status NvmlLibrary::Check(nvmlReturn_t ret, absl::string_view op) const {
  if (ret == NVML_SUCCESS) return absl::OkStatus();
  return NvmlReturnToStatus(ret, op, nvmlErrorString(ret));
}

StatusOr<Version> NvmlLibrary::DriverVersion() const {
  char buf[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE] = {};
  GPUNODE_RETURN_IF_ERROR(
      Check(nvmlSystemGetDriverVersion(buf, sizeof buf), "nvmlSystemGetDriverVersion"));
  return Version::Parse(TrimBuffer(buf, sizeof buf), "NVML driver version");
}

StatusOr<Version> NvmlLibrary::NvmlVersion() const {
  char buf[NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE] = {};
  GPUNODE_RETURN_IF_ERROR(
      Check(nvmlSystemGetNVMLVersion(buf, sizeof buf), "nvmlSystemGetNVMLVersion"));
  return Version::Parse(TrimBuffer(buf, sizeof buf), "NVML version");
}

StatusOr<Version> NvmlLibrary::CudaDriverVersion() const {
  int v = 0;
  GPUNODE_RETURN_IF_ERROR(
      Check(nvmlSystemGetCudaDriverVersion_v2(&v), "nvmlSystemGetCudaDriverVersion_v2"));
  return Version::FromCudaInt(v);
}

StatusOr<unsigned> NvmlLibrary::DeviceCount() const {
  unsigned count = 0;
  GPUNODE_RETURN_IF_ERROR(Check(nvmlDeviceGetCount_v2(&count), "nvmlDeviceGetCount_v2"));
  return count;
}

StatusOr<nvmlDevice_t> NvmlLibrary::DeviceHandle(unsigned index) const {
  nvmlDevice_t dev = nullptr;
  GPUNODE_RETURN_IF_ERROR(Check(nvmlDeviceGetHandleByIndex_v2(index, &dev),
                                absl::StrCat("nvmlDeviceGetHandleByIndex_v2(", index, ")")));
  return dev;
}

// ---- MIG --------------------------------------------------------------------------------------

StatusOr<NvmlLibrary::MigMode> NvmlLibrary::GetMigMode(nvmlDevice_t device) const {
  MigMode mode;
  GPUNODE_RETURN_IF_ERROR(
      Check(nvmlDeviceGetMigMode(device, &mode.current, &mode.pending), "nvmlDeviceGetMigMode"));
  return mode;
}

StatusOr<nvmlReturn_t> NvmlLibrary::SetMigMode(nvmlDevice_t device, unsigned mode) const {
  nvmlReturn_t activation = NVML_SUCCESS;
  GPUNODE_RETURN_IF_ERROR(Check(nvmlDeviceSetMigMode(device, mode, &activation),
                                absl::StrCat("nvmlDeviceSetMigMode(", mode, ")")));
  return activation;
}

StatusOr<nvmlGpuInstanceProfileInfo_v2_t> NvmlLibrary::GpuInstanceProfileInfo(
    nvmlDevice_t device, unsigned profile) const {
  nvmlGpuInstanceProfileInfo_v2_t info{};
  if (nvmlDeviceGetGpuInstanceProfileInfoV.bound()) {  // else a driver with the v1 form only
    info.version = nvmlGpuInstanceProfileInfo_v2;
    GPUNODE_RETURN_IF_ERROR(
        Check(nvmlDeviceGetGpuInstanceProfileInfoV(device, profile, &info),
              absl::StrCat("nvmlDeviceGetGpuInstanceProfileInfoV(profile ", profile, ")")));
    info.name[sizeof(info.name) - 1] = '\0';
    return info;
  }
  nvmlGpuInstanceProfileInfo_t v1{};
  GPUNODE_RETURN_IF_ERROR(
      Check(nvmlDeviceGetGpuInstanceProfileInfo(device, profile, &v1),
            absl::StrCat("nvmlDeviceGetGpuInstanceProfileInfo(profile ", profile, ")")));
  info.id = v1.id;
  info.isP2pSupported = v1.isP2pSupported;
  info.sliceCount = v1.sliceCount;
  info.instanceCount = v1.instanceCount;
  info.multiprocessorCount = v1.multiprocessorCount;
  info.copyEngineCount = v1.copyEngineCount;
  info.decoderCount = v1.decoderCount;
  info.encoderCount = v1.encoderCount;
  info.jpegCount = v1.jpegCount;
  info.ofaCount = v1.ofaCount;
  info.memorySizeMB = v1.memorySizeMB;
  return info;
}

StatusOr<std::vector<nvmlGpuInstancePlacement_t>> NvmlLibrary::GpuInstancePossiblePlacements(
    nvmlDevice_t device, unsigned profile_id) const {
  const std::string op =
      absl::StrCat("nvmlDeviceGetGpuInstancePossiblePlacements_v2(profile id ", profile_id, ")");
  unsigned count = 0;
  GPUNODE_RETURN_IF_ERROR(
      Check(nvmlDeviceGetGpuInstancePossiblePlacements_v2(device, profile_id, nullptr, &count), op));
  std::vector<nvmlGpuInstancePlacement_t> out(count);
  if (count == 0) return out;
  GPUNODE_RETURN_IF_ERROR(Check(
      nvmlDeviceGetGpuInstancePossiblePlacements_v2(device, profile_id, out.data(), &count), op));
  out.resize(count);
  return out;
}

StatusOr<nvmlGpuInstance_t> NvmlLibrary::CreateGpuInstance(
    nvmlDevice_t device, unsigned profile_id,
    const std::optional<nvmlGpuInstancePlacement_t>& placement) const {
  nvmlGpuInstance_t gi = nullptr;
  if (placement) {
      GPUNODE_RETURN_IF_ERROR(
        Check(nvmlDeviceCreateGpuInstanceWithPlacement(device, profile_id, &*placement, &gi),
              absl::StrCat("nvmlDeviceCreateGpuInstanceWithPlacement(profile id ", profile_id,
                           ", start ", placement->start, ", size ", placement->size, ")")));
    return gi;
  }
  GPUNODE_RETURN_IF_ERROR(
      Check(nvmlDeviceCreateGpuInstance(device, profile_id, &gi),
            absl::StrCat("nvmlDeviceCreateGpuInstance(profile id ", profile_id, ")")));
  return gi;
}

Status NvmlLibrary::DestroyGpuInstance(nvmlGpuInstance_t gi) const {
  return Check(nvmlGpuInstanceDestroy(gi), "nvmlGpuInstanceDestroy");
}

StatusOr<std::vector<nvmlGpuInstance_t>> NvmlLibrary::GpuInstances(nvmlDevice_t device,
                                                                   unsigned profile_id) const {
  // NVML has no "how many" query here: the array must hold the profile's instanceCount; 8 GIs is
  // the most any GPU has (8 memory slices).
  std::vector<nvmlGpuInstance_t> out(8, nullptr);
  unsigned count = static_cast<unsigned>(out.size());
  GPUNODE_RETURN_IF_ERROR(
      Check(nvmlDeviceGetGpuInstances(device, profile_id, out.data(), &count),
            absl::StrCat("nvmlDeviceGetGpuInstances(profile id ", profile_id, ")")));
  out.resize(std::min<size_t>(count, out.size()));
  return out;
}

StatusOr<nvmlGpuInstanceInfo_t> NvmlLibrary::GpuInstanceInfo(nvmlGpuInstance_t gi) const {
  nvmlGpuInstanceInfo_t info{};
  GPUNODE_RETURN_IF_ERROR(Check(nvmlGpuInstanceGetInfo(gi, &info), "nvmlGpuInstanceGetInfo"));
  return info;
}

StatusOr<nvmlComputeInstanceProfileInfo_v2_t> NvmlLibrary::ComputeInstanceProfileInfo(
    nvmlGpuInstance_t gi, unsigned profile, unsigned eng_profile) const {
  nvmlComputeInstanceProfileInfo_v2_t info{};
  if (nvmlGpuInstanceGetComputeInstanceProfileInfoV.bound()) {  // else v1 only
    info.version = nvmlComputeInstanceProfileInfo_v2;
    GPUNODE_RETURN_IF_ERROR(
        Check(nvmlGpuInstanceGetComputeInstanceProfileInfoV(gi, profile, eng_profile, &info),
              absl::StrCat("nvmlGpuInstanceGetComputeInstanceProfileInfoV(profile ", profile, ")")));
    info.name[sizeof(info.name) - 1] = '\0';
    return info;
  }
  nvmlComputeInstanceProfileInfo_t v1{};
  GPUNODE_RETURN_IF_ERROR(
      Check(nvmlGpuInstanceGetComputeInstanceProfileInfo(gi, profile, eng_profile, &v1),
            absl::StrCat("nvmlGpuInstanceGetComputeInstanceProfileInfo(profile ", profile, ")")));
  info.id = v1.id;
  info.sliceCount = v1.sliceCount;
  info.instanceCount = v1.instanceCount;
  info.multiprocessorCount = v1.multiprocessorCount;
  info.sharedCopyEngineCount = v1.sharedCopyEngineCount;
  info.sharedDecoderCount = v1.sharedDecoderCount;
  info.sharedEncoderCount = v1.sharedEncoderCount;
  info.sharedJpegCount = v1.sharedJpegCount;
  info.sharedOfaCount = v1.sharedOfaCount;
  return info;
}

StatusOr<nvmlComputeInstance_t> NvmlLibrary::CreateComputeInstance(nvmlGpuInstance_t gi,
                                                                   unsigned profile_id) const {
  nvmlComputeInstance_t ci = nullptr;
  GPUNODE_RETURN_IF_ERROR(
      Check(nvmlGpuInstanceCreateComputeInstance(gi, profile_id, &ci),
            absl::StrCat("nvmlGpuInstanceCreateComputeInstance(profile id ", profile_id, ")")));
  return ci;
}

Status NvmlLibrary::DestroyComputeInstance(nvmlComputeInstance_t ci) const {
  return Check(nvmlComputeInstanceDestroy(ci), "nvmlComputeInstanceDestroy");
}

StatusOr<std::vector<nvmlComputeInstance_t>> NvmlLibrary::ComputeInstances(
    nvmlGpuInstance_t gi, unsigned profile_id) const {
  std::vector<nvmlComputeInstance_t> out(8, nullptr);  // at most 8 compute slices per GI
  unsigned count = static_cast<unsigned>(out.size());
  GPUNODE_RETURN_IF_ERROR(
      Check(nvmlGpuInstanceGetComputeInstances(gi, profile_id, out.data(), &count),
            absl::StrCat("nvmlGpuInstanceGetComputeInstances(profile id ", profile_id, ")")));
  out.resize(std::min<size_t>(count, out.size()));
  return out;
}

StatusOr<nvmlComputeInstanceInfo_t> NvmlLibrary::ComputeInstanceInfo(
    nvmlComputeInstance_t ci) const {
  nvmlComputeInstanceInfo_t info{};
  GPUNODE_RETURN_IF_ERROR(
      Check(nvmlComputeInstanceGetInfo_v2(ci, &info), "nvmlComputeInstanceGetInfo_v2"));
  return info;
}

StatusOr<std::vector<nvmlProcessInfo_t>> NvmlLibrary::ComputeProcesses(nvmlDevice_t device) const {
  const char* op = "nvmlDeviceGetComputeRunningProcesses_v3";
  for (int attempt = 0; attempt < 3; ++attempt) {
    unsigned count = 0;
    nvmlReturn_t ret = nvmlDeviceGetComputeRunningProcesses_v3(device, &count, nullptr);
    if (ret == NVML_SUCCESS) return std::vector<nvmlProcessInfo_t>{};
    if (ret != NVML_ERROR_INSUFFICIENT_SIZE) return Check(ret, op);
    std::vector<nvmlProcessInfo_t> out(count + 4);  // room for processes starting meanwhile
    unsigned n = static_cast<unsigned>(out.size());
    ret = nvmlDeviceGetComputeRunningProcesses_v3(device, &n, out.data());
    if (ret == NVML_SUCCESS) {
      out.resize(n);
      return out;
    }
    if (ret != NVML_ERROR_INSUFFICIENT_SIZE) return Check(ret, op);
  }
  return Check(NVML_ERROR_INSUFFICIENT_SIZE, op);
}

}  // namespace gpunode::gpu
