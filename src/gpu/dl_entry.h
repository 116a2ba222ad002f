// One entry point of a dlopen()ed library, safe to call whether or not the library exports it.
// The loaders (NvmlLibrary in nvml.h, CudaLibrary in cuda.h) declare one DlEntry member per entry
// of their X-macro list, named like the C function and called like it:
//   lib.nvmlDeviceGetTemperature(dev, NVML_TEMPERATURE_GPU, &t)
// The parameter types are the C declaration's (deduced from the list), so arguments convert as in
// a direct call. An entry the library lacks answers its owner's "not found" result
// (Owner::MissingResult: NVML_ERROR_FUNCTION_NOT_FOUND for NVML, CUDA_ERROR_NOT_FOUND for libcuda)
// instead of calling through a null pointer. Only the owning loader binds the pointer.
#ifndef GPUNODE_GPU_DL_ENTRY_H_
#define GPUNODE_GPU_DL_ENTRY_H_

#include <dlfcn.h>

#include <initializer_list>

namespace gpunode::gpu {

template <typename Fn, typename Owner>
class DlEntry;

template <typename R, typename... Args, typename Owner>
class DlEntry<R (*)(Args...), Owner> {
 public:
  R operator()(Args... args) const {
    if (fn_ == nullptr) return Owner::MissingResult(static_cast<R*>(nullptr));
    return fn_(args...);
  }
  // Whether the library exports the entry (under its name or a fallback name). Only for callers
  // that must choose before calling; the others just call and read the "not found" result.
  bool bound() const { return fn_ != nullptr; }

 private:
  friend Owner;
  void Bind(void* symbol) { fn_ = reinterpret_cast<R (*)(Args...)>(symbol); }

  R (*fn_)(Args...) = nullptr;
};

// dlsym(handle, name), else the first of `fallbacks` that `handle` exports. Sets *bound to the name
// that resolved (`name` itself, the same pointer, when it did); nullptr when none did.
inline void* DlSymbol(void* handle, const char* name, std::initializer_list<const char*> fallbacks,
                      const char** bound) {
  *bound = nullptr;
  if (void* sym = dlsym(handle, name)) {
    *bound = name;
    return sym;
  }
  for (const char* alt : fallbacks) {
    if (void* sym = dlsym(handle, alt)) {
      *bound = alt;
      return sym;
    }
  }
  return nullptr;
}

}  // namespace gpunode::gpu

#endif  // GPUNODE_GPU_DL_ENTRY_H_
