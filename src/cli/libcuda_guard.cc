#include "src/cli/libcuda_guard.h"

#include <dlfcn.h>

#include <atomic>
#include <cstring>

namespace gpunode::cli {
namespace {
std::atomic<bool> g_keep_libcuda_out{false};
}  // namespace

void KeepLibcudaOut() { g_keep_libcuda_out.store(true, std::memory_order_relaxed); }
bool LibcudaKeptOut() { return g_keep_libcuda_out.load(std::memory_order_relaxed); }

}  // namespace gpunode::cli

// The executable's dlopen: see libcuda_guard.h. RTLD_NEXT is the C library's (or a sanitizer
// runtime's interceptor, which then calls the C library's).
extern "C" __attribute__((visibility("default"))) void* dlopen(const char* file, int mode) {
  using Dlopen = void* (*)(const char*, int);
  static const Dlopen next = reinterpret_cast<Dlopen>(dlsym(RTLD_NEXT, "dlopen"));
  if (file != nullptr && gpunode::cli::LibcudaKeptOut()) {
    const char* slash = std::strrchr(file, '/');
    const char* base = slash != nullptr ? slash + 1 : file;
    if (std::strncmp(base, "libcuda.so", 10) == 0) {
      // Fail as a missing library does, with a dlerror() text that says why.
      return next("/dev/null/libcuda.so.1 (kept out of gpunode's long-running commands)", mode);
    }
  }
  return next(file, mode);
}
