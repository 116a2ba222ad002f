// The part of libcuda's C ABI (the CUDA driver API) that gpunode uses, declared by us so that
// building needs no CUDA toolkit: the types and the one list of entry points, with the driver's
// ABI (cuda.h, CUDA 12/13). The loader is src/gpu/cuda.h; the simulated library (sim/) implements
// the core set of the list. nvml_abi.h includes this file.
#ifndef GPUNODE_GPU_CUDA_ABI_H_
#define GPUNODE_GPU_CUDA_ABI_H_

#include "src/gpu/abi_list.h"  // the full set of the list also needs size_t (<cstddef>)

#ifdef __cplusplus
extern "C" {
#endif

typedef int CUresult;  // an int enum in cuda.h
#define GPUNODE_CUDA_SUCCESS 0
#define GPUNODE_CUDA_ERROR_OUT_OF_MEMORY 2
#define GPUNODE_CUDA_ERROR_NOT_INITIALIZED 3
#define GPUNODE_CUDA_ERROR_INSUFFICIENT_DRIVER 35
#define GPUNODE_CUDA_ERROR_NO_DEVICE 100
#define GPUNODE_CUDA_ERROR_ECC_UNCORRECTABLE 214
#define GPUNODE_CUDA_ERROR_INVALID_PTX 218
#define GPUNODE_CUDA_ERROR_UNSUPPORTED_PTX_VERSION 222
// "named symbol not found" (cuda.h: e.g. driver function names): what CudaLibrary's wrapper of an
// entry point the library lacks answers.
#define GPUNODE_CUDA_ERROR_NOT_FOUND 500
#define GPUNODE_CUDA_ERROR_ILLEGAL_ADDRESS 700
#define GPUNODE_CUDA_ERROR_SYSTEM_DRIVER_MISMATCH 803
#define GPUNODE_CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE 804
#define GPUNODE_CUDA_ERROR_UNKNOWN 999

typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st* CUcontext;
typedef struct CUmod_st* CUmodule;
typedef struct CUfunc_st* CUfunction;
typedef struct CUstream_st* CUstream;
typedef struct CUevent_st* CUevent;
typedef int CUjit_option;

// A CUtensorMap (cuda.h, CUDA 12.0+): 128 opaque bytes, 64-byte aligned; the Hopper GEMM of bench
// takes two by value as kernel parameters.
typedef struct CUtensorMap_st {
  alignas(64) unsigned long long opaque[16];
} CUtensorMap;

// Every libcuda entry point gpunode resolves: E(X, need, return, name, params, fallbacks), columns
// as in abi_list.h. The name is the ABI symbol the driver exports (cuda.h maps cuMemAlloc ->
// cuMemAlloc_v2 etc.). need says which set the entry belongs to and whether it must resolve:
//   required, optional:  the core set, what every command that loads libcuda calls (doctor's
//                        probe: version, cuInit, device count, error texts); the simulated library
//                        implements exactly this set.
//   full, full_optional: the rest of the driver API, for `gpunode bench` (CudaLibrary opened with
//                        CudaApi::kFull). The optional ones are newer than the oldest driver bench
//                        runs on: cuTensorMapEncodeTiled (CUDA 12.0, R525) drives the Hopper GEMM.
#define GPUNODE_CUDA_API_(E, X)                                                                   \
  E(X, required, CUresult, cuInit, (unsigned int flags), ())                                      \
  E(X, required, CUresult, cuDriverGetVersion, (int* driverVersion), ())                          \
  E(X, required, CUresult, cuDeviceGetCount, (int* count), ())                                    \
  E(X, optional, CUresult, cuGetErrorName, (CUresult error, const char** pStr), ())               \
  E(X, optional, CUresult, cuGetErrorString, (CUresult error, const char** pStr), ())             \
  E(X, full, CUresult, cuDeviceGet, (CUdevice * device, int ordinal), ())                         \
  E(X, full, CUresult, cuDeviceGetName, (char* name, int len, CUdevice dev), ())                  \
  E(X, full, CUresult, cuDeviceGetPCIBusId, (char* bus_id, int len, CUdevice dev), ())            \
  E(X, full, CUresult, cuDeviceGetAttribute, (int* value, int attrib, CUdevice dev), ())          \
  E(X, full, CUresult, cuDevicePrimaryCtxRetain, (CUcontext * ctx, CUdevice dev), ())             \
  E(X, full, CUresult, cuDevicePrimaryCtxRelease_v2, (CUdevice dev), ())                          \
  E(X, full, CUresult, cuCtxSetCurrent, (CUcontext ctx), ())                                      \
  E(X, full, CUresult, cuCtxSynchronize, (void), ())                                              \
  E(X, full, CUresult, cuCtxEnablePeerAccess, (CUcontext peer, unsigned flags), ())               \
  E(X, full, CUresult, cuDeviceCanAccessPeer, (int* can, CUdevice dev, CUdevice peer), ())        \
  E(X, full, CUresult, cuMemGetInfo_v2, (size_t * free_bytes, size_t * total_bytes), ())          \
  E(X, full, CUresult, cuMemAlloc_v2, (CUdeviceptr * ptr, size_t bytes), ())                      \
  E(X, full, CUresult, cuMemFree_v2, (CUdeviceptr ptr), ())                                       \
  E(X, full, CUresult, cuMemHostAlloc, (void** ptr, size_t bytes, unsigned flags), ())            \
  E(X, full, CUresult, cuMemFreeHost, (void* ptr), ())                                            \
  E(X, full, CUresult, cuMemcpyHtoD_v2, (CUdeviceptr dst, const void* src, size_t bytes), ())     \
  E(X, full, CUresult, cuMemcpyDtoH_v2, (void* dst, CUdeviceptr src, size_t bytes), ())           \
  E(X, full, CUresult, cuMemcpyHtoDAsync_v2,                                                      \
    (CUdeviceptr dst, const void* src, size_t bytes, CUstream s), ())                             \
  E(X, full, CUresult, cuMemcpyDtoHAsync_v2,                                                      \
    (void* dst, CUdeviceptr src, size_t bytes, CUstream s), ())                                   \
  E(X, full, CUresult, cuMemcpyDtoDAsync_v2,                                                      \
    (CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream s), ())                             \
  E(X, full, CUresult, cuMemcpyPeerAsync,                                                         \
    (CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src, CUcontext src_ctx, size_t bytes,        \
     CUstream s), ())                                                                             \
  E(X, full, CUresult, cuMemsetD8_v2, (CUdeviceptr dst, unsigned char value, size_t count), ())   \
  E(X, full, CUresult, cuModuleLoadDataEx,                                                        \
    (CUmodule * module, const void* image, unsigned num_options, CUjit_option* options,           \
     void** values), ())                                                                          \
  E(X, full, CUresult, cuModuleUnload, (CUmodule module), ())                                     \
  E(X, full, CUresult, cuModuleGetFunction, (CUfunction * fn, CUmodule module, const char* name), \
    ())                                                                                           \
  E(X, full, CUresult, cuLaunchKernel,                                                            \
    (CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,  \
     unsigned shared_bytes, CUstream s, void** params, void** extra), ())                         \
  E(X, full, CUresult, cuStreamCreate, (CUstream * stream, unsigned flags), ())                   \
  E(X, full, CUresult, cuStreamDestroy_v2, (CUstream stream), ())                                 \
  E(X, full, CUresult, cuStreamSynchronize, (CUstream stream), ())                                \
  E(X, full, CUresult, cuEventCreate, (CUevent * event, unsigned flags), ())                      \
  E(X, full, CUresult, cuEventDestroy_v2, (CUevent event), ())                                    \
  E(X, full, CUresult, cuEventRecord, (CUevent event, CUstream stream), ())                       \
  E(X, full, CUresult, cuEventSynchronize, (CUevent event), ())                                   \
  E(X, full, CUresult, cuEventElapsedTime_v2, (float* ms, CUevent start, CUevent end),            \
    (cuEventElapsedTime))                                                                         \
  E(X, full, CUresult, cuFuncSetAttribute, (CUfunction f, int attrib, int value), ())             \
  E(X, full_optional, CUresult, cuTensorMapEncodeTiled,                                           \
    (CUtensorMap * map, int data_type, unsigned rank, void* address,                              \
     const unsigned long long* dims, const unsigned long long* strides, const unsigned* box,      \
     const unsigned* element_strides, int interleave, int swizzle, int l2_promotion,              \
     int oob_fill), ())

// The views of the list. X(need, return, name, params, fallbacks): the loader (src/gpu/cuda.h).
#define GPUNODE_CUDA_API(X) GPUNODE_CUDA_API_(GPUNODE_ABI_ALL, X)
// X(return, name, params) for each entry of the core set: what the simulator implements and its
// tests resolve.
#define GPUNODE_CUDA_FUNCTIONS(X) GPUNODE_CUDA_API_(GPUNODE_CUDA_CORE_DECL_, X)
#define GPUNODE_CUDA_CORE_DECL_(X, need, ret, name, params, fallbacks) \
  GPUNODE_CUDA_IN_CORE_##need(X(ret, name, params))
#define GPUNODE_CUDA_IN_CORE_required(decl) decl
#define GPUNODE_CUDA_IN_CORE_optional(decl) decl
#define GPUNODE_CUDA_IN_CORE_full(decl)
#define GPUNODE_CUDA_IN_CORE_full_optional(decl)

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // GPUNODE_GPU_CUDA_ABI_H_
