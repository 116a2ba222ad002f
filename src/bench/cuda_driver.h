// The CUDA driver API as `gpunode bench` uses it: libcuda.so.1 dlopen'ed at run time (never
// linked; building needs no CUDA header), one X-macro table of the entry points we call, and one
// CUresult -> Status map. Types are declared here with the driver's ABI (cuda.h, CUDA 12/13).
#ifndef GPUNODE_BENCH_CUDA_DRIVER_H_
#define GPUNODE_BENCH_CUDA_DRIVER_H_

#include <cstddef>
#include <memory>
#include <string>

#include "absl/strings/string_view.h"
#include "src/base/status.h"
#include "src/gpu/nvml_abi.h"  // CUresult

namespace gpunode::bench {

using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
using CUstream = struct CUstream_st*;
using CUevent = struct CUevent_st*;
using CUjit_option = int;

inline constexpr int kCuDevAttrMultiprocessorCount = 16;
inline constexpr int kCuDevAttrComputeCapabilityMajor = 75;
inline constexpr int kCuDevAttrComputeCapabilityMinor = 76;
inline constexpr int kCuJitErrorLogBuffer = 5;
inline constexpr int kCuJitErrorLogBufferSizeBytes = 6;
inline constexpr unsigned kCuStreamNonBlocking = 1;
inline constexpr unsigned kCuMemHostAllocPortable = 1;
inline constexpr CUresult kCuErrorPeerAccessAlreadyEnabled = 704;
inline constexpr int kCuFuncAttributeMaxDynamicSharedSizeBytes = 8;

// A CUtensorMap (cuda.h, CUDA 12.0+): 128 opaque bytes, 64-byte aligned; the Hopper GEMM takes two
// by value as kernel parameters.
struct alignas(64) CUtensorMap {
  unsigned long long opaque[16];
};
inline constexpr int kCuTensorMapDataTypeFloat16 = 6;
inline constexpr int kCuTensorMapDataTypeBfloat16 = 9;
inline constexpr int kCuTensorMapInterleaveNone = 0;
inline constexpr int kCuTensorMapSwizzle128B = 3;
inline constexpr int kCuTensorMapL2Promotion256B = 3;
inline constexpr int kCuTensorMapOobFillNone = 0;

// Entry points, as X(return, symbol, params). The symbol is the ABI name the driver exports
// (cuda.h maps cuMemAlloc -> cuMemAlloc_v2 etc.); each field of CudaDriver::Functions carries it.
#define GPUNODE_BENCH_CUDA_FUNCTIONS(X)                                                          \
  X(CUresult, cuInit, (unsigned flags))                                                          \
  X(CUresult, cuGetErrorName, (CUresult error, const char** str))                                \
  X(CUresult, cuGetErrorString, (CUresult error, const char** str))                              \
  X(CUresult, cuDriverGetVersion, (int* version))                                                \
  X(CUresult, cuDeviceGetCount, (int* count))                                                    \
  X(CUresult, cuDeviceGet, (CUdevice * device, int ordinal))                                     \
  X(CUresult, cuDeviceGetName, (char* name, int len, CUdevice dev))                              \
  X(CUresult, cuDeviceGetPCIBusId, (char* bus_id, int len, CUdevice dev))                        \
  X(CUresult, cuDeviceGetAttribute, (int* value, int attrib, CUdevice dev))                      \
  X(CUresult, cuDevicePrimaryCtxRetain, (CUcontext * ctx, CUdevice dev))                         \
  X(CUresult, cuDevicePrimaryCtxRelease_v2, (CUdevice dev))                                      \
  X(CUresult, cuCtxSetCurrent, (CUcontext ctx))                                                  \
  X(CUresult, cuCtxSynchronize, (void))                                                          \
  X(CUresult, cuCtxEnablePeerAccess, (CUcontext peer, unsigned flags))                           \
  X(CUresult, cuDeviceCanAccessPeer, (int* can, CUdevice dev, CUdevice peer))                    \
  X(CUresult, cuMemGetInfo_v2, (size_t * free_bytes, size_t * total_bytes))                      \
  X(CUresult, cuMemAlloc_v2, (CUdeviceptr * ptr, size_t bytes))                                  \
  X(CUresult, cuMemFree_v2, (CUdeviceptr ptr))                                                   \
  X(CUresult, cuMemHostAlloc, (void** ptr, size_t bytes, unsigned flags))                        \
  X(CUresult, cuMemFreeHost, (void* ptr))                                                        \
  X(CUresult, cuMemcpyHtoD_v2, (CUdeviceptr dst, const void* src, size_t bytes))                 \
  X(CUresult, cuMemcpyDtoH_v2, (void* dst, CUdeviceptr src, size_t bytes))                       \
  X(CUresult, cuMemcpyHtoDAsync_v2, (CUdeviceptr dst, const void* src, size_t bytes, CUstream s)) \
  X(CUresult, cuMemcpyDtoHAsync_v2, (void* dst, CUdeviceptr src, size_t bytes, CUstream s))      \
  X(CUresult, cuMemcpyDtoDAsync_v2, (CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream s)) \
  X(CUresult, cuMemcpyPeerAsync,                                                                 \
    (CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src, CUcontext src_ctx, size_t bytes,       \
     CUstream s))                                                                                \
  X(CUresult, cuMemsetD8_v2, (CUdeviceptr dst, unsigned char value, size_t count))               \
  X(CUresult, cuModuleLoadDataEx,                                                                \
    (CUmodule * module, const void* image, unsigned num_options, CUjit_option* options,          \
     void** values))                                                                             \
  X(CUresult, cuModuleUnload, (CUmodule module))                                                 \
  X(CUresult, cuModuleGetFunction, (CUfunction * fn, CUmodule module, const char* name))         \
  X(CUresult, cuLaunchKernel,                                                                    \
    (CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, \
     unsigned shared_bytes, CUstream s, void** params, void** extra))                            \
  X(CUresult, cuStreamCreate, (CUstream * stream, unsigned flags))                               \
  X(CUresult, cuStreamDestroy_v2, (CUstream stream))                                             \
  X(CUresult, cuStreamSynchronize, (CUstream stream))                                            \
  X(CUresult, cuEventCreate, (CUevent * event, unsigned flags))                                  \
  X(CUresult, cuEventDestroy_v2, (CUevent event))                                                \
  X(CUresult, cuEventRecord, (CUevent event, CUstream stream))                                   \
  X(CUresult, cuEventSynchronize, (CUevent event))                                               \
  X(CUresult, cuEventElapsedTime, (float* ms, CUevent start, CUevent end))                       \
  X(CUresult, cuFuncSetAttribute, (CUfunction f, int attrib, int value))

// Entry points that only newer drivers export (nullptr when absent): the TMA tensor maps of the
// Hopper GEMM need a CUDA 12.0+ driver (R525); without them bench uses the portable kernel.
#define GPUNODE_BENCH_CUDA_OPTIONAL_FUNCTIONS(X)                                                  \
  X(CUresult, cuTensorMapEncodeTiled,                                                            \
    (CUtensorMap * map, int data_type, unsigned rank, void* address, const unsigned long long* dims, \
     const unsigned long long* strides, const unsigned* box, const unsigned* element_strides,     \
     int interleave, int swizzle, int l2_promotion, int oob_fill))

// A loaded CUDA driver. Thread-compatible; the process keeps the library mapped (unloading libcuda
// after cuInit is unsafe).
class CudaDriver {
 public:
  struct Functions {
#define GPUNODE_BENCH_CUDA_FN_PTR(ret, name, params) ret(*name) params = nullptr;
    GPUNODE_BENCH_CUDA_FUNCTIONS(GPUNODE_BENCH_CUDA_FN_PTR)
    GPUNODE_BENCH_CUDA_OPTIONAL_FUNCTIONS(GPUNODE_BENCH_CUDA_FN_PTR)
#undef GPUNODE_BENCH_CUDA_FN_PTR
  };

  // dlopen()s `path`, resolves every entry (cuEventElapsedTime prefers _v2; the optional ones may
  // stay null) and runs cuInit(0).
  // Errors: library missing -> kNotFound "load <path>: <dlerror>"; an entry missing -> kUnimplemented
  // naming it (e.g. the simulated library, which has only the calls doctor makes); cuInit failing
  // -> its mapped code.
  static StatusOr<std::unique_ptr<CudaDriver>> Open(const std::string& path);

  const Functions& fn() const { return fn_; }
  const std::string& path() const { return path_; }
  int version() const { return version_; }  // cuDriverGetVersion, e.g. 13000

  // OK for CUDA_SUCCESS, else "<op>: CUDA_ERROR_X (n): text" with a code as in src/gpu/cuda.cc.
  Status Check(CUresult r, absl::string_view op) const;

 private:
  CudaDriver() = default;
  Functions fn_;
  std::string path_;
  int version_ = 0;
};

}  // namespace gpunode::bench

// `GPUNODE_CU(driver, call(args))` -> returns the mapped Status from the enclosing function when
// the call fails; the call text names the operation.
#define GPUNODE_CU(drv, name, ...) \
  GPUNODE_RETURN_IF_ERROR((drv).Check((drv).fn().name(__VA_ARGS__), #name))

#endif  // GPUNODE_BENCH_CUDA_DRIVER_H_
