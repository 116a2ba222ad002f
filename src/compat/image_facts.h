// What an image's own config says about the CUDA it needs (issue 32): its env (CUDA_VERSION,
// NVIDIA_REQUIRE_*, NVIDIA_DISABLE_REQUIRE, NGC's NVIDIA_PYTORCH_VERSION / PYTORCH_VERSION /
// CUDA_DRIVER_VERSION...) and labels, read by src/image from wherever the image is. Pure: the
// caller passes the env and labels; this file turns them into the WorkloadSpec the engine checks,
// over the data set's answer for the same reference when it has one (the image's own facts win,
// a disagreement is noted).
#ifndef GPUNODE_COMPAT_IMAGE_FACTS_H_
#define GPUNODE_COMPAT_IMAGE_FACTS_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "src/base/status.h"
#include "src/compat/dataset.h"
#include "src/compat/image_ref.h"

namespace gpunode::compat {

// The CUDA facts of one image, as read from its config.
struct ImageCudaFacts {
  std::optional<Version> cuda;            // CUDA_VERSION ("12.8.1"; NGC's "12.9.1.010" kept whole)
  std::vector<std::string> requirements;  // "NVIDIA_REQUIRE_CUDA=cuda>=12.8 ...", "CUDA_VERSION=12.8.1" by name
  bool disable_require = false;           // NVIDIA_DISABLE_REQUIRE, Go's strconv.ParseBool
  std::string framework;                  // "pytorch" when NGC/PyTorch variables say so
  std::optional<Version> framework_version;  // PYTORCH_VERSION / NVIDIA_PYTORCH_VERSION's torch
  std::string ngc_release;                // NVIDIA_PYTORCH_VERSION etc. ("25.08")
  std::optional<Version> cuda_driver_version;  // NGC's CUDA_DRIVER_VERSION (the toolkit's driver)
  std::map<std::string, std::string> env;  // the variables above as found, for -o json
};

// Reads the facts from "KEY=VALUE" env entries (the last one of a key wins) and labels. A
// malformed CUDA_VERSION is not an error: it is left out and named in `problems`.
ImageCudaFacts ReadImageCudaFacts(const std::vector<std::string>& env,
                                  const std::map<std::string, std::string>& labels,
                                  std::vector<std::string>* problems = nullptr);

// The workload of `--image REF` once its config was read from `config_source`
// ("image config (containerd, k8s.io)", "registry nvcr.io"): the data set's WorkloadSpec for the
// reference (family, framework, tag facts) with the image's own facts over it. Errors only for a
// reference that does not parse.
StatusOr<WorkloadSpec> WorkloadFromImageConfig(const CompatData& data, absl::string_view ref,
                                               const ImageCudaFacts& facts,
                                               absl::string_view config_source);

}  // namespace gpunode::compat

#endif  // GPUNODE_COMPAT_IMAGE_FACTS_H_
