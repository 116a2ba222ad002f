// The compatibility data set (data/compat.yaml): NVIDIA's CUDA / driver / GPU / framework rules
// as typed, validated data. The rules engine (engine.h) only reads this; it never parses text.
//
// Contract of the loaders: a file that is not valid YAML, has an unknown key, misses a required
// key, holds a malformed version or cites an unknown source id is rejected with InvalidArgument;
// the message names the file, the line and the key path ("toolkits[3].driver"). No exception
// escapes (yaml-cpp's are caught here).
#ifndef GPUNODE_COMPAT_DATASET_H_
#define GPUNODE_COMPAT_DATASET_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/string_view.h"
#include "src/base/status.h"
#include "src/base/version.h"

namespace gpunode::compat {

// How much a fact can be trusted (see the header of data/compat.yaml).
enum class Confidence { kOfficial, kDerived, kThirdParty, kUnconfirmed };
absl::string_view ConfidenceName(Confidence c);

// Where a fact comes from. `source` is the raw field: source ids separated by "; ", each
// optionally followed by " - detail".
struct Provenance {
  std::string source;
  Confidence confidence = Confidence::kOfficial;
  std::string note;

  friend bool operator==(const Provenance&, const Provenance&) = default;
};

// A CUDA toolkit release and the driver it ships with (Table 3, "toolkit driver").
struct Toolkit {
  Version cuda;                      // "12.4.1"; "10.1" covers 10.1.x; "13.4" a whole minor
  std::string release;               // "12.4 Update 1"
  std::optional<Version> driver;     // absent where the row was not captured
  std::optional<int> paired_branch;  // set where only the branch is known (13.4 -> 615)
  Provenance provenance;

  friend bool operator==(const Toolkit&, const Toolkit&) = default;
};

// Minor-version compatibility of one CUDA major; `floor` absent = none (10.x).
struct MinorCompat {
  int cuda_major = 0;
  std::optional<Version> floor;
  std::optional<int> min_branch;
  Provenance provenance;

  friend bool operator==(const MinorCompat&, const MinorCompat&) = default;
};

struct DriverBranch {
  int branch = 0;
  std::optional<Version> max_cuda;  // highest CUDA this branch runs natively
  std::optional<int> max_cuda_major;
  std::string type;  // "LTSB", "PB", "NFB", ... or empty
  std::string eol;
  Provenance provenance;

  friend bool operator==(const DriverBranch&, const DriverBranch&) = default;
};

enum class FcCell { kSupported, kUnsupported, kPaired };

struct FcPackage {
  std::string package;         // "cuda-compat-12-4"
  Version cuda;                // 12.4
  std::vector<FcCell> support; // one cell per ForwardCompat::columns

  friend bool operator==(const FcPackage&, const FcPackage&) = default;
};

struct ForwardCompat {
  std::vector<std::string> eligible_segments;  // "datacenter", "embedded"
  std::vector<int> columns;                    // driver branches
  std::vector<FcPackage> packages;
  Provenance provenance;

  friend bool operator==(const ForwardCompat&, const ForwardCompat&) = default;
};

// An architecture generation for a set of compute capabilities.
struct Architecture {
  std::string name;
  std::vector<Version> cc;
  Version first_cuda;
  std::optional<int> last_cuda_major;  // absent = still supported
  std::optional<int> first_branch;     // lowest driver branch that drives it, if known
  std::optional<int> last_branch;      // last driver branch that drives it, if it ended
  Provenance provenance;

  friend bool operator==(const Architecture&, const Architecture&) = default;
};

struct GpuModel {
  std::string name;     // "H100 SXM5 80GB"
  std::string arch;     // "Hopper"
  Version cc;           // 9.0
  std::string segment;  // datacenter | workstation | consumer | embedded
  std::vector<uint16_t> pci_ids;
  std::vector<std::string> aliases;
  Provenance provenance;

  friend bool operator==(const GpuModel&, const GpuModel&) = default;
};

struct TorchRelease {
  Version torch;  // minor release, "2.5"
  std::vector<std::string> wheels;  // "cu118", ...
  std::string pypi_default;
  Provenance provenance;

  friend bool operator==(const TorchRelease&, const TorchRelease&) = default;
};

// The GPU targets of one torch wheel variant.
struct TorchArchList {
  std::vector<Version> torch;  // "2.6.0" (exact) or "2.12" (any 2.12.x)
  std::string wheel;           // "cu126"
  std::optional<Version> sass_min, sass_max;  // sass_range
  std::vector<Version> sass;
  std::vector<Version> ptx;
  Provenance provenance;

  friend bool operator==(const TorchArchList&, const TorchArchList&) = default;
};

struct TorchGpuFloor {
  std::vector<Version> cc;
  Version min_torch;
  Version min_cuda;
  Provenance provenance;

  friend bool operator==(const TorchGpuFloor&, const TorchGpuFloor&) = default;
};

struct TensorflowBuild {
  std::vector<Version> tf;
  Version cuda;
  std::string cudnn;
  Provenance provenance;

  friend bool operator==(const TensorflowBuild&, const TensorflowBuild&) = default;
};

struct JaxBuild {
  std::string extra;  // "cuda12"
  Version cuda;
  Version min_cc;
  Provenance provenance;

  friend bool operator==(const JaxBuild&, const JaxBuild&) = default;
};

struct VllmImage {
  std::string tag;
  Version cuda;
  Provenance provenance;

  friend bool operator==(const VllmImage&, const VllmImage&) = default;
};

struct ImageFamily {
  std::string family;                     // "nvidia/cuda"
  std::vector<std::string> repositories;  // "docker.io/nvidia/cuda", "nvcr.io/nvidia/cuda"
  // cuda | pytorch | ngc-month | triton-month | vllm | tensorflow | ngc-table | tag-table | sglang
  std::string parser;
  bool ships_cuda_compat = false;
  std::string label;  // coverage name, "NGC PyTorch"; the family name when absent
  Provenance provenance;

  friend bool operator==(const ImageFamily&, const ImageFamily&) = default;
};

// One release of an image family read from `images.releases` (parsers ngc-table, tag-table,
// sglang): the tags (an NGC month "25.08", or a version tag "3.3.7" / "v0.5.3") and the CUDA the
// image was built with.
struct ImageRelease {
  std::string family;             // an images.families[].family
  std::string variant;            // NGC tag variant ("py3", "tf2-py3"); empty = any
  std::vector<std::string> tags;  // "25.08" or "3.3.7"
  Version cuda;
  std::string min_driver;         // what the release notes state ("R580"), free text, optional
  std::vector<std::string> forward_compat;  // data-center branches the notes list, optional
  Provenance provenance;

  friend bool operator==(const ImageRelease&, const ImageRelease&) = default;
};

// A monthly NGC tag -> CUDA mapping (nvcr.io/nvidia/pytorch, nvcr.io/nvidia/tritonserver).
struct MonthCuda {
  std::string variant;  // "py3", "vllm-python-py3", "trtllm-python-py3"
  std::vector<std::string> tags;  // "24.05"
  Version cuda;
  Provenance provenance;

  friend bool operator==(const MonthCuda&, const MonthCuda&) = default;
};

struct CompatData {
  std::string origin;  // "built-in data set" or the file path
  std::string updated;  // top-level `updated:` (when the facts were last collected), may be empty
  std::map<std::string, std::string> sources;
  std::vector<Toolkit> toolkits;
  std::vector<MinorCompat> minor_compat;
  std::vector<DriverBranch> branches;
  ForwardCompat forward_compat;
  std::vector<Architecture> architectures;
  std::vector<GpuModel> gpus;
  std::vector<TorchRelease> torch_releases;
  std::vector<TorchArchList> torch_arch_lists;
  std::vector<TorchGpuFloor> torch_gpu_floors;
  std::vector<TensorflowBuild> tensorflow;
  std::vector<JaxBuild> jax;
  std::optional<Version> vllm_min_cc;
  std::string vllm_min_cc_source;
  std::vector<VllmImage> vllm_images;
  std::vector<ImageFamily> image_families;
  std::vector<MonthCuda> ngc_pytorch;
  std::vector<MonthCuda> tritonserver;
  std::vector<ImageRelease> image_releases;

  // Every field, in full (Version compares numerically: "12.4" == "12.4.0"); the test that the
  // built-in tables and the YAML agree also compares the texts (test/compat/builtin_test.cc).
  friend bool operator==(const CompatData&, const CompatData&) = default;

  // Lookups (nullptr / empty when absent).
  const DriverBranch* FindBranch(int branch) const;
  const MinorCompat* FindMinorCompat(int cuda_major) const;
  const Architecture* FindArchitecture(const Version& cc) const;
  // Toolkit rows of the minor release of `cuda` (12.4.1 -> every 12.4.x row).
  std::vector<const Toolkit*> ToolkitsOfMinor(const Version& cuda) const;
  const FcPackage* FindFcPackage(const Version& cuda) const;  // by major.minor
  // Index of `branch` in forward_compat.columns, or -1.
  int FcColumn(int branch) const;
  const ImageFamily* FindFamily(absl::string_view family) const;
  // Releases of one family, in file order.
  std::vector<const ImageRelease*> ReleasesOf(absl::string_view family) const;
  // Source ids cited by a `source` field, in order, without duplicates.
  static std::vector<std::string> SourceIds(absl::string_view source_field);
};

// Parts of the data set a command loads from the built-in tables (LoadBuiltin); the YAML loaders
// always read everything. `origin` and `updated` come with any part.
enum class Sections : unsigned {
  kSources = 1,      // sources (the text of each source id, for reports)
  kCudaTables = 2,   // toolkits, minor_compat, branches, forward_compat
  kHardware = 4,     // architectures, gpus (the GPU catalogue)
  kFrameworks = 8,   // torch_*, tensorflow, jax, vllm_*
  kImages = 16,      // image_families, ngc_pytorch, tritonserver, image_releases
  kAll = 31,
};
constexpr Sections operator|(Sections a, Sections b) {
  return static_cast<Sections>(static_cast<unsigned>(a) | static_cast<unsigned>(b));
}
constexpr bool Has(Sections set, Sections part) {
  return (static_cast<unsigned>(set) & static_cast<unsigned>(part)) != 0;
}

// Parses and validates a data set. `origin` names it in errors (a path or "built-in data set").
StatusOr<CompatData> ParseCompatData(absl::string_view yaml_text, absl::string_view origin);
// The data set compiled into the binary: data/compat.yaml, parsed and checked by ParseCompatData
// at build time (src/compat/gen/compat_gen.cc) and compiled in as static tables
// (builtin_tables.h); loading copies the asked-for parts out of them, in microseconds, and never
// fails for a binary that built. `sections`: what the command reads (Check() with a workload of
// a bare CUDA version and no GPU needs only kCudaTables; with kSources also its report's sources).
StatusOr<CompatData> LoadBuiltin(Sections sections = Sections::kAll);

// The highest CUDA version the driver branch of `driver` runs natively (its branch's max_cuda),
// for when NVML cannot say (nvmlSystemGetCudaDriverVersion needs libcuda, which the long-running
// services keep out of their memory). nullopt for a branch the data set does not know.
std::optional<Version> MaxCudaOfDriver(const CompatData& data, const Version& driver);
// A data set file (--data FILE).
StatusOr<CompatData> LoadFile(const std::string& path);

}  // namespace gpunode::compat

#endif  // GPUNODE_COMPAT_DATASET_H_
