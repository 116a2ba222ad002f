// NVIDIA's container requirement language: the NVIDIA_REQUIRE_* variables of CUDA images
// ("cuda>=12.8 brand=tesla,driver>=535,driver<536 ..."), read and evaluated as
// libnvidia-container does it for `nvidia-container-cli configure --require` (src/cli/dsl.c,
// src/cli/configure.c) and as nvidia-container-toolkit collects them
// (internal/config/image/cuda_image.go: GetRequirements, HasDisableRequire, IsLegacy). One parser,
// used by `compat` (rule image-requires) and by the OCI shim (which refuses to start a container
// whose requirement the node fails). Pure: no I/O.
//
// The language, from dsl.c:
//  - a requirement is OR groups separated by spaces; a group is AND terms separated by commas;
//    empty groups and terms (doubled separators) are skipped;
//  - a term is KEY OP VALUE with KEY one of cuda, driver, arch, brand (case-insensitive) and OP
//    one of = != < <= > >=; any other key, operator, or an empty value is an error ("invalid
//    expression"), and so is a version value that is not digits and dots, or brand with < >;
//  - versions compare component by component as numbers, missing components counting as 0
//    ("12" = "12.0"); brands compare case-insensitively (= and != only);
//  - cuda: the CUDA version the driver supports (cuDriverGetVersion); driver: the kernel module's
//    version (NVRM); arch: the device's compute capability ("9.0"); brand: NVML's brand in
//    libnvidia-container's words (BrandName). A fact that is unknown makes its term hold, as
//    configure.c's check_* functions do (no device visible: arch and brand hold);
//  - every requirement (every NVIDIA_REQUIRE_* variable) must hold, for every device given to the
//    container (configure.c evaluates per visible device, and once without device when there is
//    none).
// From cuda_image.go: every NVIDIA_REQUIRE_* variable but NVIDIA_REQUIRE_JETPACK* is a
// requirement; an image with CUDA_VERSION and no (or an empty) NVIDIA_REQUIRE_CUDA is "legacy" and
// requires cuda>=MAJOR.MINOR of CUDA_VERSION; NVIDIA_DISABLE_REQUIRE, read with Go's
// strconv.ParseBool, turns all of it off when true (a malformed value is false, as there).
//
// CUDA forward compatibility: libnvidia-container does not raise the `cuda` fact when the image
// carries /usr/local/cuda/compat libraries (it only mounts them, src/cli/compat_mode.c); CUDA
// images admit forward compatibility through their own `brand=...,driver>=R,driver<R+1` groups.
// So does this evaluator.
#ifndef GPUNODE_COMPAT_REQUIREMENT_H_
#define GPUNODE_COMPAT_REQUIREMENT_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "src/base/status.h"

namespace gpunode::compat {

enum class ReqKey { kCuda, kDriver, kArch, kBrand };
enum class ReqOp { kEqual, kNotEqual, kLess, kLessEqual, kGreater, kGreaterEqual };

struct ReqTerm {
  ReqKey key = ReqKey::kCuda;
  ReqOp op = ReqOp::kEqual;
  std::string value;  // as written ("12.8", "tesla")
  std::string text;   // the term as written ("cuda>=12.8")
};

struct ReqGroup {
  std::vector<ReqTerm> terms;  // all must hold
  std::string text;            // "brand=tesla,driver>=535,driver<536"
};

struct Requirement {
  std::string name;  // the variable: "NVIDIA_REQUIRE_CUDA", or "CUDA_VERSION (legacy image)"
  std::string text;  // its value
  std::vector<ReqGroup> groups;  // one must hold; none (empty value): the requirement holds
};

// Bounds: a value longer than this, or more groups/terms, is refused (an image is untrusted).
inline constexpr size_t kMaxRequirementLength = 64 * 1024;
inline constexpr size_t kMaxRequirementTerms = 4096;

// Parses one requirement. InvalidArgument naming the variable and the bad term.
StatusOr<Requirement> ParseRequirement(absl::string_view name, absl::string_view text);

// The requirements of a container or image environment ("NAME=value" entries; a later entry of
// the same name wins, as in Go's map): NVIDIA_REQUIRE_* in name order, then the legacy rule.
struct ImageRequirements {
  std::vector<Requirement> requirements;
  bool disabled = false;      // NVIDIA_DISABLE_REQUIRE is true: nothing is checked
  std::string disable_value;  // NVIDIA_DISABLE_REQUIRE as set ("" when unset)
  bool legacy = false;        // the cuda>= requirement came from CUDA_VERSION
};
StatusOr<ImageRequirements> RequirementsFromEnv(const std::vector<std::string>& env);

// dsl_compare_version's order for digit-and-dot strings: -1, 0, 1; nullopt when either is not
// digits and dots (or is empty).
std::optional<int> CompareDotted(absl::string_view a, absl::string_view b);

// NVML's nvmlBrandType_t value in the words CUDA images use in brand= terms (lower case):
// 1 quadro, 2 tesla, 3 nvs, 4 grid, 5 geforce, 6 titan, 7 vapps, 8 vpc, 9 vcs, 10 vws,
// 11 cloudgaming, 12 quadrortx, 13 nvidiartx, 14 nvidia, 15 geforcertx, 16 titanrtx, else unknown.
std::string BrandName(unsigned nvml_brand);

// What a requirement is evaluated against.
struct ReqDevice {
  std::string label;  // "GPU 0 (NVIDIA H200)"
  std::string brand;  // BrandName(); empty: unknown, brand terms hold
  std::string arch;   // compute capability "9.0"; empty: unknown, arch terms hold
};
struct ReqFacts {
  std::string driver;  // "550.127.05"; empty: unknown
  std::string cuda;    // "12.4"; empty: unknown
  std::vector<ReqDevice> devices;  // the container's GPUs; empty: evaluated once without device
};

// Why one OR group failed: its first failing term (evaluation stops there, as dsl.c's).
struct GroupFailure {
  std::string group;     // the group as written
  std::string term;      // the failing term as written
  std::string sentence;  // "cuda>=13.0 needs a driver that runs CUDA 13.0; this node's runs 12.4"
  bool brand_matched = false;  // the group's brand term (if any) held: it failed on versions
};

struct RequirementFailure {
  std::string requirement;  // variable name
  std::string device;       // the device it failed for ("" when evaluated without device)
  std::vector<GroupFailure> groups;  // every group, in order
  // The failure in a person's words: the first group (NVIDIA's message names that one) and the
  // groups that failed only on versions, with how many more.
  std::string Summary(size_t max_groups = 4) const;
};

struct RequirementOutcome {
  bool satisfied = true;
  std::vector<RequirementFailure> failures;
  // For each satisfied requirement, the group that held (first device's): "NVIDIA_REQUIRE_CUDA:
  // brand=tesla,driver>=535,driver<536".
  std::vector<std::string> held_by;
  // "unsatisfied condition: cuda>=13.0 (NVIDIA_REQUIRE_CUDA): ..." for each failure, joined.
  std::string Message() const;
};

RequirementOutcome EvaluateRequirements(const std::vector<Requirement>& requirements,
                                        const ReqFacts& facts);

}  // namespace gpunode::compat

#endif  // GPUNODE_COMPAT_REQUIREMENT_H_
