// The NVML loader: dlopen("libnvidia-ml.so.1") at run time (never linked), one list of the
// symbols we use (GPUNODE_NVML_API in nvml_abi.h: required/optional, versioned fallbacks), one
// generated wrapper per symbol that is safe to call whether or not the driver exports it, and the
// one reviewed mapping from nvmlReturn_t to our Status codes (NvmlReturnToStatus).
#ifndef GPUNODE_GPU_NVML_H_
#define GPUNODE_GPU_NVML_H_

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "src/base/status.h"
#include "src/base/version.h"
#include "src/gpu/dl_entry.h"
#include "src/gpu/nvml_abi.h"

namespace gpunode::gpu {

// Maps an NVML return code to a Status: "<op>: <NVML's text> (NVML_ERROR_X)". The raw code is
// kept as a payload (NvmlReturnOf) so callers can tell, say, a driver/library mismatch from a
// driver that is not loaded. NVML_SUCCESS maps to OK. The codes:
//   NOT_SUPPORTED, FUNCTION_NOT_FOUND, ...      -> kUnimplemented (callers make that "absent")
//   NO_PERMISSION                               -> kPermissionDenied
//   UNINITIALIZED, DRIVER_NOT_LOADED,
//   LIB_RM_VERSION_MISMATCH, RESET_REQUIRED ... -> kFailedPrecondition
//   GPU_IS_LOST, NOT_READY                      -> kUnavailable
//   NOT_FOUND, LIBRARY_NOT_FOUND, GPU_NOT_FOUND -> kNotFound
//   TIMEOUT                                     -> kDeadlineExceeded
Status NvmlReturnToStatus(nvmlReturn_t ret, absl::string_view op, const char* nvml_text = nullptr);
// The NVML code carried by a Status made by NvmlReturnToStatus.
std::optional<nvmlReturn_t> NvmlReturnOf(const Status& status);
// "NVML_ERROR_GPU_IS_LOST".
absl::string_view NvmlReturnName(nvmlReturn_t ret);
// True for codes that mean "this GPU or driver cannot answer this query" rather than a failure.
bool NvmlIsUnsupported(nvmlReturn_t ret);

// The file behind an already loaded library (`name` as given to dlopen), symlinks resolved:
// "libnvidia-ml.so.1" -> "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.535.183.01". Empty when the
// library is not loaded. Its name carries the user-space driver's version even when nvmlInit
// fails (a driver/library mismatch).
std::string LoadedLibraryFile(const std::string& name);

class NvmlLibrary {
 public:
  // dlopen()s `path` (a soname searched the usual way, or a file path), resolves the symbols and
  // calls nvmlInit_v2. Errors: library missing -> kNotFound with NVML_ERROR_LIBRARY_NOT_FOUND;
  // a required symbol missing -> kUnimplemented; nvmlInit_v2 failing -> its mapped code.
  static StatusOr<std::unique_ptr<NvmlLibrary>> Open(const std::string& path);
  ~NvmlLibrary();  // nvmlShutdown(); the library stays mapped (NVML does not like dlclose).

  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;

  // ---- The entry points: one member per entry of GPUNODE_NVML_API, generated from the list, named
  // and called like the NVML function: `lib.nvmlDeviceGetTemperature(dev, NVML_TEMPERATURE_GPU,
  // &t)`. A required entry always calls through (Open checked it); an optional one the driver
  // lacks answers NVML_ERROR_FUNCTION_NOT_FOUND, which NvmlIsUnsupported and NvmlReturnToStatus
  // treat as "not supported" (kUnimplemented), so callers need no null checks. nvmlErrorString
  // would answer kMissingErrorString. `lib.nvmlX.bound()` tells whether the entry resolved, for
  // the rare caller that must choose before calling.
  template <typename Fn>
  using Entry = DlEntry<Fn, NvmlLibrary>;
#define GPUNODE_NVML_ENTRY(need, ret, name, params, fallbacks) Entry<ret(*) params> name;
  GPUNODE_NVML_API(GPUNODE_NVML_ENTRY)
#undef GPUNODE_NVML_ENTRY

  // What an entry the library lacks answers (used by Entry).
  static constexpr const char* kMissingErrorString = "unknown error (this NVML has no nvmlErrorString)";
  static nvmlReturn_t MissingResult(nvmlReturn_t*) { return NVML_ERROR_FUNCTION_NOT_FOUND; }
  static const char* MissingResult(const char**) { return kMissingErrorString; }

  // The bound name of each entry that used a fallback ("nvmlDeviceGetPciInfo_v3" -> "..._v2").
  const std::vector<std::pair<std::string, std::string>>& fallbacks() const { return fallbacks_; }
  const std::string& path() const { return path_; }
  double load_ms() const { return load_ms_; }
  double init_ms() const { return init_ms_; }

  // Calls that every command needs.
  StatusOr<Version> DriverVersion() const;
  StatusOr<Version> NvmlVersion() const;
  StatusOr<Version> CudaDriverVersion() const;  // the highest CUDA the driver supports
  StatusOr<unsigned> DeviceCount() const;
  StatusOr<nvmlDevice_t> DeviceHandle(unsigned index) const;

  // Status for `ret` of `op`, with NVML's own text.
  Status Check(nvmlReturn_t ret, absl::string_view op) const;

  // ---- MIG (src/mig). Every entry point is optional: a driver without it answers kUnimplemented
  // carrying NVML_ERROR_FUNCTION_NOT_FOUND. Errors name the call and its arguments.
  struct MigMode {
    unsigned current = NVML_DEVICE_MIG_DISABLE;
    unsigned pending = NVML_DEVICE_MIG_DISABLE;
  };
  StatusOr<MigMode> GetMigMode(nvmlDevice_t device) const;
  // nvmlDeviceSetMigMode. OK means the driver took the request; the returned activation status
  // says whether it is active now (NVML_SUCCESS) or only pending (e.g. NVML_ERROR_IN_USE while a
  // process holds the GPU, NVML_ERROR_RESET_REQUIRED where a GPU reset is needed).
  StatusOr<nvmlReturn_t> SetMigMode(nvmlDevice_t device, unsigned mode) const;
  // GI profile `profile` (NVML_GPU_INSTANCE_PROFILE_*): the _v2 form (with its name, "MIG
  // 1g.18gb") where the driver has it, else the v1 form with an empty name. A profile the GPU
  // does not offer is kUnimplemented (NOT_SUPPORTED) or kInvalidArgument, as NVML says.
  StatusOr<nvmlGpuInstanceProfileInfo_v2_t> GpuInstanceProfileInfo(nvmlDevice_t device,
                                                                   unsigned profile) const;
  // Where GIs of `profile_id` (info.id) can start on this GPU, free or not.
  StatusOr<std::vector<nvmlGpuInstancePlacement_t>> GpuInstancePossiblePlacements(
      nvmlDevice_t device, unsigned profile_id) const;
  // Creates a GI of `profile_id`, at `placement` when given (else where the driver chooses).
  StatusOr<nvmlGpuInstance_t> CreateGpuInstance(
      nvmlDevice_t device, unsigned profile_id,
      const std::optional<nvmlGpuInstancePlacement_t>& placement) const;
  Status DestroyGpuInstance(nvmlGpuInstance_t gi) const;
  // The GIs of `profile_id` that exist now.
  StatusOr<std::vector<nvmlGpuInstance_t>> GpuInstances(nvmlDevice_t device,
                                                        unsigned profile_id) const;
  StatusOr<nvmlGpuInstanceInfo_t> GpuInstanceInfo(nvmlGpuInstance_t gi) const;
  // CI profile `profile` (NVML_COMPUTE_INSTANCE_PROFILE_*) inside `gi`; _v2 with fallback to v1.
  StatusOr<nvmlComputeInstanceProfileInfo_v2_t> ComputeInstanceProfileInfo(
      nvmlGpuInstance_t gi, unsigned profile, unsigned eng_profile) const;
  StatusOr<nvmlComputeInstance_t> CreateComputeInstance(nvmlGpuInstance_t gi,
                                                        unsigned profile_id) const;
  Status DestroyComputeInstance(nvmlComputeInstance_t ci) const;
  StatusOr<std::vector<nvmlComputeInstance_t>> ComputeInstances(nvmlGpuInstance_t gi,
                                                                unsigned profile_id) const;
  StatusOr<nvmlComputeInstanceInfo_t> ComputeInstanceInfo(nvmlComputeInstance_t ci) const;
  // The compute processes on `device` (a GPU or a MIG device).
  StatusOr<std::vector<nvmlProcessInfo_t>> ComputeProcesses(nvmlDevice_t device) const;

 private:
  NvmlLibrary() = default;
  void* handle_ = nullptr;
  bool initialized_ = false;
  std::string path_;
  std::vector<std::pair<std::string, std::string>> fallbacks_;
  double load_ms_ = 0;
  double init_ms_ = 0;
};

}  // namespace gpunode::gpu

#endif  // GPUNODE_GPU_NVML_H_
