// What a workload needs, read from what people pass: an image reference
// ("pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime"), a pip requirement ("torch==2.5.1+cu124"),
// or a bare CUDA version. The result is a WorkloadSpec: the CUDA version the workload was built
// with (when it can be known), the framework, and a sentence saying how that was derived.
//
// Contract: syntax errors (not an image reference, malformed version) are InvalidArgument naming
// the input. A well-formed reference we cannot map (unknown repository, NGC month not in the data
// set, digest without tag) is NOT an error: the spec comes back with `cuda` empty and `needed`
// saying what would let us decide; the engine turns that into the verdict "unknown".
#ifndef GPUNODE_COMPAT_IMAGE_REF_H_
#define GPUNODE_COMPAT_IMAGE_REF_H_

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/string_view.h"
#include "src/base/status.h"
#include "src/base/version.h"
#include "src/compat/dataset.h"

namespace gpunode::compat {

// A parsed container image reference: [registry/]repository[:tag][@digest].
struct ImageRef {
  std::string registry;    // "docker.io" when omitted
  std::string repository;  // "library/ubuntu", "nvidia/cuda"
  std::string tag;         // empty when absent
  std::string digest;      // "sha256:<64 hex>", empty when absent
  bool tag_defaulted = false;  // no tag and no digest: "latest" is implied
  // registry/repository, e.g. "docker.io/pytorch/pytorch".
  std::string Name() const { return registry + "/" + repository; }
};

// Parses the syntax of a reference (Docker's grammar, lower-case repository components).
StatusOr<ImageRef> ParseImageRef(absl::string_view text);

struct WorkloadSpec {
  std::string input;   // what the user passed, as given
  std::string family;  // "nvidia/cuda", "pytorch/pytorch", "pip torch", "--cuda", ... or "" if unknown
  std::optional<Version> cuda;  // the CUDA the workload was built with
  std::string framework;        // "pytorch", "tensorflow", "jax", "tritonserver", "vllm" or ""
  std::optional<Version> framework_version;
  std::string wheel;    // torch wheel variant, "cu124"
  std::string cudnn;    // "9", "8", "unversioned" or ""
  std::string flavor;   // base | runtime | devel | vllm-python-py3 | ...
  std::string os;       // ubuntu22.04, ...
  std::string derived_from;  // how `cuda` was obtained, one sentence
  std::string source;        // data set source ids when the mapping came from the data set
  Confidence confidence = Confidence::kOfficial;
  bool ships_cuda_compat = false;  // the image carries the cuda-compat package
  std::vector<std::string> needed;  // when cuda is empty: what would let us decide
  // Read from the image's own config (src/image) when it could be: where it was read, e.g.
  // "image config (containerd, k8s.io)" or "registry nvcr.io"; empty when the data set answered.
  std::string config_source;
  // The image's NVIDIA_REQUIRE_* variables as "NAME=value", in name order (requirement.h parses
  // them), and whether NVIDIA_DISABLE_REQUIRE is set to a true value.
  std::vector<std::string> requirements;
  bool disable_require = false;
  // The CUDA facts the image's config carries (CUDA_VERSION, NVIDIA_REQUIRE_*, NGC's variables),
  // for -o json; and the sources tried before the one that answered (or all, when none did).
  std::map<std::string, std::string> image_env;
  std::string image_digest;
  std::vector<std::string> sources_tried;
};

// --image REF. Uses the data set's image families and month tables.
StatusOr<WorkloadSpec> WorkloadFromImage(const CompatData& data, absl::string_view ref);
// --cuda X.Y[.Z] ("12.x" and other malformed text are InvalidArgument).
StatusOr<WorkloadSpec> WorkloadFromCuda(absl::string_view text);
// A pip requirement: "torch==2.5.1+cu124", "torch 2.5.1+cu124", "2.5.1+cu124" (for --torch),
// "tensorflow==2.15.0", "jax[cuda12]".
StatusOr<WorkloadSpec> WorkloadFromPip(const CompatData& data, absl::string_view spec);

// "cu124" -> 12.4, "cu118" -> 11.8, "cu130" -> 13.0; InvalidArgument otherwise.
StatusOr<Version> CudaFromWheelTag(absl::string_view wheel);

}  // namespace gpunode::compat

#endif  // GPUNODE_COMPAT_IMAGE_REF_H_
