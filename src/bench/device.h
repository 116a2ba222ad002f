// One CUDA device for the bench runner (runner.cc): its primary context, stream, timing events
// and the embedded PTX modules, with device memory owned by that context. Internal to src/bench.
#ifndef GPUNODE_BENCH_DEVICE_H_
#define GPUNODE_BENCH_DEVICE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "src/base/status.h"
#include "src/bench/bench.h"
#include "src/bench/cuda_driver.h"

namespace gpunode::bench {

inline constexpr double kGiB = 1024.0 * 1024 * 1024;
inline constexpr size_t kMiB = 1024 * 1024;

// Device memory owned by one context; freed with that context current.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const CudaDriver* drv, CUdeviceptr p) : drv_(drv), p_(p) {}
  DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    Reset();
    drv_ = o.drv_, p_ = o.p_;
    o.p_ = 0;
    return *this;
  }
  ~DeviceBuffer() { Reset(); }
  void Reset() {
    if (p_ != 0 && drv_ != nullptr) drv_->cuMemFree_v2(p_);
    p_ = 0;
  }
  CUdeviceptr get() const { return p_; }

 private:
  const CudaDriver* drv_ = nullptr;
  CUdeviceptr p_ = 0;
};

// The embedded PTX modules (bench.h's EmbeddedPtx*); an empty optional when not built in.
struct PtxModules {
  std::optional<std::string_view> compute_80, compute_75, sm90a;
};

class Device {
 public:
  // Loads the module that ChoosePtx(compute capability, `ptx_choice`) names, which must load; on
  // compute capability 9.0 with compute_80 chosen, also the Hopper GEMM (`ptx.sm90a`) when given,
  // and when it cannot be (no tensor-map entry point, JIT error) the reason is kept and the
  // portable kernel is used.
  static StatusOr<std::unique_ptr<Device>> Open(const CudaDriver& drv, int ordinal, const PtxModules& ptx,
                                                absl::string_view ptx_choice);
  ~Device();

  // The PTX the portable kernels came from.
  PtxTarget ptx_target() const { return ptx_target_; }

  // The Hopper GEMM's module, or why it is not there (empty note when the GPU is not Hopper).
  bool sm90() const { return sm90_module_ != nullptr; }
  const std::string& sm90_note() const { return sm90_note_; }

  Status MakeCurrent() const { return drv_.Check(drv_.cuCtxSetCurrent(ctx_), "cuCtxSetCurrent"); }

  StatusOr<DeviceBuffer> Alloc(size_t bytes) const;

  // A kernel of the portable module, or of the Hopper one for names ending in "_sm90".
  StatusOr<CUfunction> Function(const char* name);

  // Launches `name` with the given kernel arguments (pointers to each argument value) and
  // `shared_bytes` of dynamic shared memory.
  Status Launch(const char* name, unsigned grid_x, unsigned grid_y, unsigned block,
                std::initializer_list<void*> args, unsigned shared_bytes = 0);

  Status Sync() const { return drv_.Check(drv_.cuStreamSynchronize(stream_), "cuStreamSynchronize"); }

  // Fills `n` elements at `p` with uniform values in [-1, 1) of `dtype` (0 fp32, 1 fp16, 2 bf16).
  Status Fill(CUdeviceptr p, unsigned long long n, int dtype, unsigned seed) {
    unsigned grid = static_cast<unsigned>(sms_) * 8;
    return Launch("gpunode_fill_uniform", grid, 1, 256, {&p, &n, &dtype, &seed});
  }

  struct Timed {
    int64_t iterations = 0;
    double seconds = 0;
  };
  // Runs `op` twice to warm up, then in chunks of ~100 ms timed with CUDA events until `duration`
  // seconds of GPU time are measured or a stop is requested (at least one chunk).
  StatusOr<Timed> TimeLoop(double duration, const std::function<Status()>& op);

  const CudaDriver& drv() const { return drv_; }
  CUcontext ctx() const { return ctx_; }
  CUdevice dev() const { return dev_; }
  CUstream stream() const { return stream_; }
  CUevent start_event() const { return start_; }
  CUevent stop_event() const { return stop_; }
  int sms() const { return sms_; }
  std::string cc() const { return absl::StrCat(cc_major_, ".", cc_minor_); }
  int cc_major() const { return cc_major_; }
  int cc_minor() const { return cc_minor_; }

 private:
  explicit Device(const CudaDriver& drv) : drv_(drv) {}

  void LoadSm90(std::optional<std::string_view> ptx);

  const CudaDriver& drv_;
  CUdevice dev_ = 0;
  CUcontext ctx_ = nullptr;
  bool retained_ = false;
  CUstream stream_ = nullptr;
  CUevent start_ = nullptr, stop_ = nullptr;
  PtxTarget ptx_target_ = PtxTarget::kCompute80;
  CUmodule module_ = nullptr;
  CUmodule sm90_module_ = nullptr;
  std::string sm90_note_;
  std::map<std::string, CUfunction> functions_;
  int sms_ = 0, cc_major_ = 0, cc_minor_ = 0;
};

}  // namespace gpunode::bench

#endif  // GPUNODE_BENCH_DEVICE_H_
