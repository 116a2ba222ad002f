// Preprocessor helpers for the lists of dlopen'ed entry points: GPUNODE_NVML_API_ (nvml_abi.h) and
// GPUNODE_CUDA_API_ (cuda_abi.h). Each list is written once, as
//   #define GPUNODE_<LIB>_API_(E, X)  E(X, need, return, name, params, fallbacks) ...
// so that one list can be read through several views: E is the view (one of the GPUNODE_ABI_*
// adapters below), X the user's macro it calls. The columns:
//   need       whether the loader fails without the entry (required) or binds it when present
//              (optional); the libcuda list has two sets, see cuda_abi.h.
//   return, name, params
//              the C declaration: `return name params`.
//   fallbacks  a parenthesised, possibly empty list of older exported names with the same ABI,
//              tried in order when `name` is absent: (nvmlDeviceGetPciInfo_v2). At most 3.
// Plain preprocessor (C++20's __VA_OPT__), no declarations: the ABI headers include it anywhere.
#ifndef GPUNODE_GPU_ABI_LIST_H_
#define GPUNODE_GPU_ABI_LIST_H_

// Views. X(need, return, name, params, fallbacks): every column.
#define GPUNODE_ABI_ALL(X, ...) X(__VA_ARGS__)
// X(return, name, params): the declaration only.
#define GPUNODE_ABI_DECL(X, need, ret, name, params, fallbacks) X(ret, name, params)
// X(return, fallback, params) for each fallback name of each entry.
#define GPUNODE_ABI_FALLBACK_DECLS(X, need, ret, name, params, fallbacks) \
  GPUNODE_ABI_EACH(GPUNODE_ABI_FALLBACK_DECL_, (X, ret, params), fallbacks)
#define GPUNODE_ABI_FALLBACK_DECL_(ctx, fallback) GPUNODE_ABI_FALLBACK_DECL_I_(GPUNODE_ABI_UNPAREN ctx, fallback)
#define GPUNODE_ABI_FALLBACK_DECL_I_(...) GPUNODE_ABI_FALLBACK_DECL_II_(__VA_ARGS__)
#define GPUNODE_ABI_FALLBACK_DECL_II_(X, ret, params, fallback) X(ret, fallback, params)

// (a, b) -> "a", "b", (the fallback names as an initializer list; empty for ()).
#define GPUNODE_ABI_NAMES(fallbacks) GPUNODE_ABI_EACH(GPUNODE_ABI_NAME_, , fallbacks)
#define GPUNODE_ABI_NAME_(ctx, name) #name,

// GPUNODE_ABI_EACH(m, ctx, (a, b)) -> m(ctx, a) m(ctx, b); nothing for ().
#define GPUNODE_ABI_UNPAREN(...) __VA_ARGS__
#define GPUNODE_ABI_EACH(m, ctx, list) GPUNODE_ABI_EACH_I_(m, ctx, GPUNODE_ABI_UNPAREN list)
#define GPUNODE_ABI_EACH_I_(m, ctx, ...) GPUNODE_ABI_EACH_II_(m, ctx, __VA_ARGS__)
#define GPUNODE_ABI_EACH_II_(m, ctx, ...) \
  __VA_OPT__(GPUNODE_ABI_EACH_N_(__VA_ARGS__, 3, 2, 1, )(m, ctx, __VA_ARGS__))
#define GPUNODE_ABI_EACH_N_(a1, a2, a3, n, ...) GPUNODE_ABI_EACH_##n##_
#define GPUNODE_ABI_EACH_1_(m, ctx, a1) m(ctx, a1)
#define GPUNODE_ABI_EACH_2_(m, ctx, a1, a2) m(ctx, a1) m(ctx, a2)
#define GPUNODE_ABI_EACH_3_(m, ctx, a1, a2, a3) m(ctx, a1) m(ctx, a2) m(ctx, a3)

#endif  // GPUNODE_GPU_ABI_LIST_H_
