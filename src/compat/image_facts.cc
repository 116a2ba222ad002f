#include "src/compat/image_facts.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "src/base/go_bool.h"

namespace gpunode::compat {

namespace {

// The variables read, for -o json and the sentence saying where the CUDA came from.
constexpr absl::string_view kFactVariables[] = {
    "CUDA_VERSION", "NVIDIA_DISABLE_REQUIRE", "NVIDIA_PYTORCH_VERSION", "PYTORCH_VERSION",
    "CUDA_DRIVER_VERSION", "NVIDIA_TRITON_SERVER_VERSION", "NVIDIA_TENSORFLOW_VERSION",
    "TENSORFLOW_VERSION", "JAX_VERSION", "NVIDIA_BUILD_ID"};

bool IsFactVariable(absl::string_view key) {
  return absl::StartsWith(key, "NVIDIA_REQUIRE_") ||
         std::find(std::begin(kFactVariables), std::end(kFactVariables), key) != std::end(kFactVariables);
}

// "2.8.0a0+34c6371d24" -> 2.8.0; "2.5.1" -> 2.5.1.
std::optional<Version> LeadingVersion(absl::string_view text) {
  size_t n = 0;
  while (n < text.size() && (absl::ascii_isdigit(static_cast<unsigned char>(text[n])) || text[n] == '.')) ++n;
  while (n > 0 && text[n - 1] == '.') --n;
  auto v = Version::Parse(text.substr(0, n));
  if (!v.ok()) return std::nullopt;
  return *v;
}

}  // namespace

ImageCudaFacts ReadImageCudaFacts(const std::vector<std::string>& env,
                                  const std::map<std::string, std::string>& labels,
                                  std::vector<std::string>* problems) {
  ImageCudaFacts f;
  for (const std::string& e : env) {
    size_t eq = e.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    std::string key = e.substr(0, eq);
    if (IsFactVariable(key)) f.env[key] = e.substr(eq + 1);
  }
  auto get = [&](absl::string_view k) -> const std::string* {
    auto it = f.env.find(std::string(k));
    return it == f.env.end() ? nullptr : &it->second;
  };
  if (const std::string* v = get("CUDA_VERSION")) {
    auto parsed = Version::Parse(*v);
    if (parsed.ok() && parsed->parts().size() >= 2) {
      f.cuda = *parsed;
    } else if (problems) {
      problems->push_back(absl::StrCat("CUDA_VERSION=\"", *v, "\" is not a CUDA version"));
    }
  }
  // What requirement.h's RequirementsFromEnv reads, as the shim does: NVIDIA_REQUIRE_*, and
  // CUDA_VERSION for the legacy rule (cuda>=X.Y when NVIDIA_REQUIRE_CUDA is absent).
  for (const auto& [k, v] : f.env) {
    if (absl::StartsWith(k, "NVIDIA_REQUIRE_") || k == "CUDA_VERSION") f.requirements.push_back(absl::StrCat(k, "=", v));
  }
  if (const std::string* v = get("NVIDIA_DISABLE_REQUIRE")) {
    // NVIDIA's toolkit: strconv.ParseBool, a value that does not parse counts as false.
    auto b = ParseGoBool("NVIDIA_DISABLE_REQUIRE", *v);
    f.disable_require = b.ok() && *b;
  }
  if (const std::string* v = get("PYTORCH_VERSION")) {
    f.framework = "pytorch";
    f.framework_version = LeadingVersion(*v);
  }
  if (const std::string* v = get("NVIDIA_PYTORCH_VERSION")) {
    f.framework = "pytorch";
    f.ngc_release = *v;
  }
  if (const std::string* v = get("CUDA_DRIVER_VERSION")) {
    if (auto d = LeadingVersion(*v)) f.cuda_driver_version = d;
  }
  (void)labels;  // no label of the published images carries a CUDA fact yet; kept for callers
  return f;
}

StatusOr<WorkloadSpec> WorkloadFromImageConfig(const CompatData& data, absl::string_view ref,
                                               const ImageCudaFacts& facts,
                                               absl::string_view config_source) {
  GPUNODE_ASSIGN_OR_RETURN(WorkloadSpec spec, WorkloadFromImage(data, ref));
  spec.config_source = std::string(config_source);
  spec.requirements = facts.requirements;
  spec.image_env = facts.env;
  spec.disable_require = facts.disable_require;
  if (!facts.framework.empty() && spec.framework.empty()) spec.framework = facts.framework;
  if (facts.framework_version && !spec.framework_version) spec.framework_version = facts.framework_version;
  // Images built on NVIDIA's CUDA images carry cuda-compat-X-Y; the same Dockerfiles write the
  // brand=tesla driver groups of NVIDIA_REQUIRE_CUDA (nvidia/container-images/cuda, base/Dockerfile).
  for (const std::string& r : facts.requirements) {
    if (absl::StartsWith(r, "NVIDIA_REQUIRE_CUDA=") && absl::StrContains(r, "brand=")) spec.ships_cuda_compat = true;
  }
  if (!facts.cuda) {
    if (!spec.cuda) {
      spec.derived_from = absl::StrCat("the image's config (", config_source, ") sets no CUDA_VERSION, and ",
                                       spec.derived_from);
    }
    return spec;
  }
  Version cuda = facts.cuda->parts().size() > 3 ? facts.cuda->Truncate(3) : *facts.cuda;
  std::string disagreement;
  if (spec.cuda && spec.cuda->Truncate(2) != cuda.Truncate(2)) {
    disagreement = absl::StrCat("; the data set says ", spec.cuda->ToString(), " for this tag, the image wins");
  }
  spec.cuda = cuda;
  spec.needed.clear();
  spec.derived_from = absl::StrCat("CUDA_VERSION=", facts.env.at("CUDA_VERSION"), " in the image's config (",
                                   config_source, ")", disagreement);
  spec.confidence = Confidence::kOfficial;
  return spec;
}

}  // namespace gpunode::compat
