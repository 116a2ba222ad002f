#include "src/bench/cublaslt.h"

#include <dlfcn.h>

#include <cstdlib>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace gpunode::bench {
namespace {

// cuBLASLt's ABI (cublasLt.h, CUDA 11-13): opaque handles, int enums.
using cublasStatus_t = int;
using cublasLtHandle_t = struct cublasLtContext*;
using cublasLtMatmulDesc_t = void*;
using cublasLtMatrixLayout_t = void*;
using cublasLtMatmulPreference_t = void*;
struct cublasLtMatmulAlgo_t {
  uint64_t data[8];
};
struct cublasLtMatmulHeuristicResult_t {
  cublasLtMatmulAlgo_t algo;
  size_t workspaceSize;
  cublasStatus_t state;
  float wavesCount;
  int reserved[4];
};
constexpr int kComputeType32F = 68;  // CUBLAS_COMPUTE_32F
constexpr int kCudaR32F = 0, kCudaR16F = 2, kCudaR16BF = 14;
constexpr int kDescTransA = 3, kDescTransB = 4;  // CUBLASLT_MATMUL_DESC_TRANSA/B
constexpr int kPrefMaxWorkspace = 1;            // CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES
constexpr int kOpN = 0, kOpT = 1;
constexpr int kMaxCandidates = 8;

#define GPUNODE_CUBLASLT_FUNCTIONS(X)                                                             \
  X(cublasStatus_t, cublasLtCreate, (cublasLtHandle_t*))                                          \
  X(cublasStatus_t, cublasLtDestroy, (cublasLtHandle_t))                                          \
  X(size_t, cublasLtGetVersion, (void))                                                           \
  X(cublasStatus_t, cublasLtMatmulDescCreate, (cublasLtMatmulDesc_t*, int, int))                  \
  X(cublasStatus_t, cublasLtMatmulDescDestroy, (cublasLtMatmulDesc_t))                            \
  X(cublasStatus_t, cublasLtMatmulDescSetAttribute, (cublasLtMatmulDesc_t, int, const void*, size_t)) \
  X(cublasStatus_t, cublasLtMatrixLayoutCreate, (cublasLtMatrixLayout_t*, int, uint64_t, uint64_t, int64_t)) \
  X(cublasStatus_t, cublasLtMatrixLayoutDestroy, (cublasLtMatrixLayout_t))                        \
  X(cublasStatus_t, cublasLtMatmulPreferenceCreate, (cublasLtMatmulPreference_t*))                \
  X(cublasStatus_t, cublasLtMatmulPreferenceDestroy, (cublasLtMatmulPreference_t))                \
  X(cublasStatus_t, cublasLtMatmulPreferenceSetAttribute,                                         \
    (cublasLtMatmulPreference_t, int, const void*, size_t))                                       \
  X(cublasStatus_t, cublasLtMatmulAlgoGetHeuristic,                                               \
    (cublasLtHandle_t, cublasLtMatmulDesc_t, cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,      \
     cublasLtMatrixLayout_t, cublasLtMatrixLayout_t, cublasLtMatmulPreference_t, int,             \
     cublasLtMatmulHeuristicResult_t*, int*))                                                     \
  X(cublasStatus_t, cublasLtMatmul,                                                               \
    (cublasLtHandle_t, cublasLtMatmulDesc_t, const void*, const void*, cublasLtMatrixLayout_t,    \
     const void*, cublasLtMatrixLayout_t, const void*, const void*, cublasLtMatrixLayout_t,       \
     void*, cublasLtMatrixLayout_t, const cublasLtMatmulAlgo_t*, void*, size_t, CUstream))

int CudaType(GemmDtype d) {
  switch (d) {
    case GemmDtype::kBf16: return kCudaR16BF;
    case GemmDtype::kFp16: return kCudaR16F;
    case GemmDtype::kFp32: return kCudaR32F;
  }
  return kCudaR32F;
}

Status LtCheck(cublasStatus_t s, absl::string_view op) {
  if (s == 0) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(op, ": cublasStatus ", s));
}

}  // namespace

struct CublasLt::Impl {
#define GPUNODE_CUBLASLT_PTR(ret, name, params) ret(*name) params = nullptr;
  GPUNODE_CUBLASLT_FUNCTIONS(GPUNODE_CUBLASLT_PTR)
#undef GPUNODE_CUBLASLT_PTR
  cublasLtHandle_t handle = nullptr;
  // The last shape's descriptors and algorithm.
  struct Plan {
    GemmDtype in, out;
    int m = 0, n = 0, k = 0;
    size_t workspace = 0;
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
    std::vector<cublasLtMatmulHeuristicResult_t> candidates;  // the heuristic's ranking
    int chosen = 0;
  };
  std::optional<Plan> plan;
  void FreePlan() {
    if (!plan) return;
    if (plan->desc) cublasLtMatmulDescDestroy(plan->desc);
    for (auto l : {plan->a, plan->b, plan->d})
      if (l) cublasLtMatrixLayoutDestroy(l);
    plan.reset();
  }
};

std::vector<std::string> CublasLtCandidates() {
  std::vector<std::string> out;
  if (const char* env = std::getenv("GPUNODE_CUBLASLT_LIBRARY"); env && *env) out.emplace_back(env);
  const char* names[] = {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so.11", "libcublasLt.so"};
  for (const char* dir : {"", "/usr/local/cuda/lib64/", "/usr/local/cuda/targets/x86_64-linux/lib/"}) {
    for (const char* n : names) out.push_back(absl::StrCat(dir, n));
  }
  return out;
}

StatusOr<std::unique_ptr<CublasLt>> CublasLt::Open() {
  std::vector<std::string> tried;
  for (const std::string& path : CublasLtCandidates()) {
    dlerror();
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) {
      tried.push_back(path);
      continue;
    }
    auto impl = std::make_unique<Impl>();
    bool complete = true;
#define GPUNODE_CUBLASLT_RESOLVE(ret, name, params)                              \
  impl->name = reinterpret_cast<decltype(impl->name)>(dlsym(h, #name));          \
  complete = complete && impl->name != nullptr;
    GPUNODE_CUBLASLT_FUNCTIONS(GPUNODE_CUBLASLT_RESOLVE)
#undef GPUNODE_CUBLASLT_RESOLVE
    if (!complete) {
      tried.push_back(absl::StrCat(path, " (incomplete)"));
      continue;  // stays mapped: harmless
    }
    if (cublasStatus_t s = impl->cublasLtCreate(&impl->handle); s != 0) {
      tried.push_back(absl::StrCat(path, " (cublasLtCreate: status ", s, ")"));
      continue;
    }
    std::unique_ptr<CublasLt> lt(new CublasLt());
    lt->impl_ = std::move(impl);
    lt->path_ = path;
    return lt;
  }
  return absl::NotFoundError(absl::StrCat("no cuBLASLt library could be loaded (tried ",
                                          absl::StrJoin(tried, ", "), ")"));
}

CublasLt::~CublasLt() {
  if (!impl_) return;
  impl_->FreePlan();
  if (impl_->handle) impl_->cublasLtDestroy(impl_->handle);
}

int CublasLt::candidates() const {
  return impl_->plan ? static_cast<int>(impl_->plan->candidates.size()) : 0;
}

void CublasLt::Choose(int i) {
  if (impl_->plan && i >= 0 && i < static_cast<int>(impl_->plan->candidates.size())) impl_->plan->chosen = i;
}

std::string CublasLt::version() const {
  size_t v = impl_->cublasLtGetVersion();  // major*10000 + minor*100 + patch
  return absl::StrCat(v / 10000, ".", (v / 100) % 100, ".", v % 100);
}

Status CublasLt::Matmul(GemmDtype in, GemmDtype out, int m, int n, int k, CUdeviceptr a,
                        CUdeviceptr b, CUdeviceptr d, CUdeviceptr workspace, size_t workspace_bytes,
                        CUstream stream) {
  Impl& I = *impl_;
  if (!I.plan || I.plan->in != in || I.plan->out != out || I.plan->m != m || I.plan->n != n ||
      I.plan->k != k || I.plan->workspace != workspace_bytes) {
    I.FreePlan();
    Impl::Plan p;
    p.in = in, p.out = out, p.m = m, p.n = n, p.k = k, p.workspace = workspace_bytes;
    I.plan = p;  // FreePlan releases whatever was created if a step below fails
    Impl::Plan& q = *I.plan;
    GPUNODE_RETURN_IF_ERROR(LtCheck(I.cublasLtMatmulDescCreate(&q.desc, kComputeType32F, kCudaR32F),
                                    "cublasLtMatmulDescCreate"));
    int ta = kOpT, tb = kOpN;
    GPUNODE_RETURN_IF_ERROR(LtCheck(I.cublasLtMatmulDescSetAttribute(q.desc, kDescTransA, &ta, sizeof ta),
                                    "cublasLtMatmulDescSetAttribute(TRANSA)"));
    GPUNODE_RETURN_IF_ERROR(LtCheck(I.cublasLtMatmulDescSetAttribute(q.desc, kDescTransB, &tb, sizeof tb),
                                    "cublasLtMatmulDescSetAttribute(TRANSB)"));
    GPUNODE_RETURN_IF_ERROR(LtCheck(I.cublasLtMatrixLayoutCreate(&q.a, CudaType(in), k, m, k), "cublasLtMatrixLayoutCreate(A)"));
    GPUNODE_RETURN_IF_ERROR(LtCheck(I.cublasLtMatrixLayoutCreate(&q.b, CudaType(in), k, n, k), "cublasLtMatrixLayoutCreate(B)"));
    GPUNODE_RETURN_IF_ERROR(LtCheck(I.cublasLtMatrixLayoutCreate(&q.d, CudaType(out), m, n, m), "cublasLtMatrixLayoutCreate(D)"));
    cublasLtMatmulPreference_t pref = nullptr;
    GPUNODE_RETURN_IF_ERROR(LtCheck(I.cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate"));
    uint64_t ws = workspace_bytes;
    I.cublasLtMatmulPreferenceSetAttribute(pref, kPrefMaxWorkspace, &ws, sizeof ws);
    std::vector<cublasLtMatmulHeuristicResult_t> results(kMaxCandidates);
    int found = 0;
    cublasStatus_t s = I.cublasLtMatmulAlgoGetHeuristic(I.handle, q.desc, q.a, q.b, q.d, q.d, pref,
                                                        kMaxCandidates, results.data(), &found);
    I.cublasLtMatmulPreferenceDestroy(pref);
    if (s != 0 || found == 0) {
      I.FreePlan();
      return absl::UnimplementedError(absl::StrCat("cublasLtMatmulAlgoGetHeuristic: no algorithm for ",
                                                   GemmDtypeName(in), " ", m, "x", n, "x", k,
                                                   " (status ", s, ")"));
    }
    results.resize(found);
    q.candidates = std::move(results);
  }
  const float alpha = 1.0f, beta = 0.0f;
  Impl::Plan& q = *I.plan;
  return LtCheck(I.cublasLtMatmul(I.handle, q.desc, &alpha, reinterpret_cast<const void*>(a), q.a,
                                  reinterpret_cast<const void*>(b), q.b, &beta,
                                  reinterpret_cast<const void*>(d), q.d, reinterpret_cast<void*>(d),
                                  q.d, &q.candidates[q.chosen].algo, reinterpret_cast<void*>(workspace), workspace_bytes,
                                  stream),
                 "cublasLtMatmul");
}

}  // namespace gpunode::bench
