// The NVML loader: dlopen("libnvidia-ml.so.1") at run time (never linked), one table of the
// symbols we use (GPUNODE_NVML_FUNCTIONS in nvml_abi.h) with versioned fallbacks, and the one
// reviewed mapping from nvmlReturn_t to our Status codes (NvmlReturnToStatus).
#ifndef GPUNODE_GPU_NVML_H_
#define GPUNODE_GPU_NVML_H_

#include <memory>
#include <optional>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "src/base/status.h"
#include "src/base/version.h"
#include "src/gpu/nvml_abi.h"

namespace gpunode {

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
  struct Functions {
#define GPUNODE_NVML_FN_PTR(ret, name, params) ret(*name) params = nullptr;
    GPUNODE_NVML_FUNCTIONS(GPUNODE_NVML_FN_PTR)
#undef GPUNODE_NVML_FN_PTR
  };

  // dlopen()s `path` (a soname searched the usual way, or a file path), resolves the symbols and
  // calls nvmlInit_v2. Errors: library missing -> kNotFound with NVML_ERROR_LIBRARY_NOT_FOUND;
  // a required symbol missing -> kUnimplemented; nvmlInit_v2 failing -> its mapped code.
  static StatusOr<std::unique_ptr<NvmlLibrary>> Open(const std::string& path);
  ~NvmlLibrary();  // nvmlShutdown(); the library stays mapped (NVML does not like dlclose).

  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;

  const Functions& fn() const { return fn_; }
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

 private:
  NvmlLibrary() = default;
  void* handle_ = nullptr;
  bool initialized_ = false;
  Functions fn_;
  std::string path_;
  std::vector<std::pair<std::string, std::string>> fallbacks_;
  double load_ms_ = 0;
  double init_ms_ = 0;
};

}  // namespace gpunode

#endif  // GPUNODE_GPU_NVML_H_
