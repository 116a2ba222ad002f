// The libcuda loader: dlopen("libcuda.so.1") at run time (never linked), one list of the driver
// API entry points we use (GPUNODE_CUDA_API in cuda_abi.h: a core set for every command, the full
// set for bench, required/optional, fallbacks), one generated wrapper per entry point that is
// safe to call whether or not the driver exports it, and the one CUresult -> Status map
// (CudaResultToStatus). Doctor's probe (ProbeCuda) and bench (src/bench/cuda_driver.h) both load
// through CudaLibrary. Loading libcuda is the caller's decision: some commands must never load it
// (src/cli/libcuda_guard.h); nothing here loads it on its own.
#ifndef GPUNODE_GPU_CUDA_H_
#define GPUNODE_GPU_CUDA_H_

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "src/base/status.h"
#include "src/base/version.h"
#include "src/gpu/cuda_abi.h"
#include "src/gpu/dl_entry.h"

namespace gpunode::gpu {

// Maps a CUresult to a Status: "<op>: CUDA_ERROR_X (n): <text>" (`name` and `text` as
// cuGetErrorName/cuGetErrorString give them; "CUDA_ERROR" when unknown). CUDA_SUCCESS -> OK.
//   NO_DEVICE                                          -> kNotFound
//   OUT_OF_MEMORY                                      -> kResourceExhausted
//   NOT_INITIALIZED, INSUFFICIENT_DRIVER, SYSTEM_DRIVER_MISMATCH,
//   COMPAT_NOT_SUPPORTED_ON_DEVICE, INVALID_PTX, UNSUPPORTED_PTX_VERSION -> kFailedPrecondition
//   ECC_UNCORRECTABLE, ILLEGAL_ADDRESS, UNKNOWN        -> kDataLoss
//   anything else                                      -> kUnknown
Status CudaResultToStatus(CUresult r, absl::string_view op, const char* name = nullptr,
                          const char* text = nullptr);

// Which entries of GPUNODE_CUDA_API must resolve for Open to succeed.
enum class CudaApi {
  kCore,  // cuInit, cuDriverGetVersion, cuDeviceGetCount (doctor's probe; the simulator has these)
  kFull,  // and the driver API bench uses
};

// A loaded libcuda. Thread-compatible. The library stays mapped for the life of the process
// (unloading libcuda after cuInit is unsafe); Open does not call cuInit.
class CudaLibrary {
 public:
  // dlopen()s `path` and binds every entry of the list (newest name first, then its fallbacks).
  // Errors: library missing -> kNotFound "load <path>: <dlerror>"; an entry that `api` requires
  // missing -> kUnimplemented "load <path>: symbol <name> is missing".
  static StatusOr<std::unique_ptr<CudaLibrary>> Open(const std::string& path, CudaApi api);

  CudaLibrary(const CudaLibrary&) = delete;
  CudaLibrary& operator=(const CudaLibrary&) = delete;
  ~CudaLibrary() = default;  // the library stays loaded

  // ---- The entry points: one member per entry of GPUNODE_CUDA_API, generated from the list, named
  // and called like the driver function: `lib.cuDeviceGetCount(&n)`. An entry the library lacks
  // (an optional one, or one of the full set after a kCore Open) answers CUDA_ERROR_NOT_FOUND (500).
  // `lib.cuX.bound()` tells whether the entry resolved, for a caller that must choose in advance.
  template <typename Fn>
  using Entry = DlEntry<Fn, CudaLibrary>;
#define GPUNODE_CUDA_ENTRY(need, ret, name, params, fallbacks) Entry<ret(*) params> name;
  GPUNODE_CUDA_API(GPUNODE_CUDA_ENTRY)
#undef GPUNODE_CUDA_ENTRY
  static CUresult MissingResult(CUresult*) { return GPUNODE_CUDA_ERROR_NOT_FOUND; }

  const std::string& path() const { return path_; }
  // The bound name of each entry that used a fallback ("cuEventElapsedTime_v2" -> "cuEventElapsedTime").
  const std::vector<std::pair<std::string, std::string>>& fallbacks() const { return fallbacks_; }

  // OK for CUDA_SUCCESS, else CudaResultToStatus with the driver's name and text of `r`.
  Status Check(CUresult r, absl::string_view op) const;

 protected:
  CudaLibrary() = default;
  // Open's work, into this object (for wrappers such as bench::CudaDriver).
  Status Load(const std::string& path, CudaApi api);

 private:
  std::string path_;
  std::vector<std::pair<std::string, std::string>> fallbacks_;
};

struct CudaDriverInfo {
  bool probed = true;               // false: the command did not load libcuda (node::ProbeOptions.load_cuda)
  Status status;                    // load, cuInit or cuDeviceGetCount failure
  std::string library;              // what was dlopen'ed
  std::optional<Version> version;   // cuDriverGetVersion
  std::optional<int> device_count;  // cuDeviceGetCount after cuInit
  int init_result = 0;              // raw CUresult of cuInit
};

// Loads `path` (CudaApi::kCore), reads the driver's CUDA version and, when `init` is set, runs
// cuInit(0) and counts devices. Never fails as a whole: problems land in the result's `status`,
// with the CUresult name ("cuInit: CUDA_ERROR_NO_DEVICE (100): no CUDA-capable device is
// detected"); a library without the core entry points is kUnimplemented.
CudaDriverInfo ProbeCuda(const std::string& path, bool init, double* init_ms);

}  // namespace gpunode::gpu

#endif  // GPUNODE_GPU_CUDA_H_
