// The compatibility report: what the rules engine (engine.h) returns for `gpunode compat check`
// and `gpunode compat driver-for`, and its renderers (report.cc): the JSON documents and the human
// text. The engine decides; this file only says how a decision reads.
#ifndef GPUNODE_COMPAT_REPORT_H_
#define GPUNODE_COMPAT_REPORT_H_

#include <optional>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "absl/strings/string_view.h"
#include "src/base/version.h"
#include "src/compat/dataset.h"
#include "src/compat/gpu_catalog.h"
#include "src/compat/image_ref.h"

namespace gpunode::compat {

enum class Verdict { kCompatible, kCompatibleWithCaveats, kIncompatible, kUnknown };
// Exactly "compatible", "compatible-with-caveats", "incompatible", "unknown".
absl::string_view VerdictName(Verdict v);
// The CLI's exit code for a verdict: 0, 0, 1, 2.
int VerdictExitCode(Verdict v);

// Where the workload would run.
struct NodeTarget {
  std::optional<Version> driver;  // e.g. 535.104.05, or just 535
  std::vector<GpuRef> gpus;       // empty: architecture rules are not evaluated
  // The CUDA version the driver reports (cuDriverGetVersion, nvmlSystemGetCudaDriverVersion):
  // what NVIDIA_REQUIRE_* `cuda>=` terms compare against; absent: derived from the driver.
  std::optional<Version> cuda_driver;
  std::string origin;  // "this node", "simulated node dgx-h200", "--driver/--gpu"
};

// Layers named in reports.
inline constexpr absl::string_view kLayerKernelDriver = "kernel driver";
inline constexpr absl::string_view kLayerUserDriver = "user-space driver";
inline constexpr absl::string_view kLayerArchitecture = "GPU architecture";
inline constexpr absl::string_view kLayerFramework = "framework";
inline constexpr absl::string_view kLayerWorkload = "workload";

// The outcome of one rule.
struct Finding {
  Verdict severity = Verdict::kCompatible;
  std::string rule;      // "minor-version-compat"
  std::string layer;     // kLayer*
  std::string sentence;  // the human explanation
  std::string source;    // raw data-set source field
  Confidence confidence = Confidence::kOfficial;
  std::string gpu;       // the GPU it is about, if any
};

struct Fix {
  std::string kind;  // upgrade-driver | change-driver | forward-compat | change-image | change-gpu
  int cost = 0;      // lower is cheaper / more complete; fixes are sorted by it
  std::string action;
};

// The facts the decision used.
struct CompatFacts {
  std::optional<Version> driver;
  std::optional<int> branch;
  std::optional<Version> branch_max_cuda;
  std::optional<Version> workload_cuda;
  std::optional<Version> toolkit_driver;         // lowest toolkit driver of that CUDA release
  std::optional<Version> toolkit_driver_latest;  // highest (latest update) of that minor
  std::optional<int> toolkit_paired_branch;      // when only the branch is known
  std::optional<Version> minor_compat_floor;
  std::string forward_compat_package;  // "cuda-compat-12-4" when the matrix has one
};

struct SourceRef {
  std::string id;
  std::string text;
};

struct CompatReport {
  Verdict verdict = Verdict::kUnknown;
  WorkloadSpec workload;
  NodeTarget target;
  Finding decision;  // the deciding rule
  std::vector<std::string> caveats;
  std::vector<Fix> fixes;  // sorted by cost
  std::vector<std::string> needed;  // for unknown: what would let us decide
  std::vector<std::string> notes;
  std::vector<Finding> findings;  // every rule evaluated, in order
  CompatFacts facts;
  std::vector<SourceRef> sources;  // of the decision, caveats and failures
  std::string data_origin;
};

// `gpunode compat driver-for --cuda X.Y [--gpu NAME]`.
struct DriverForReport {
  Version cuda;
  bool known = false;  // the data set knows this CUDA release or at least its major
  std::vector<std::string> releases;           // "12.4 GA", "12.4 Update 1"
  std::optional<Version> toolkit_driver;       // minimum for full compatibility
  std::optional<Version> toolkit_driver_latest;
  std::optional<int> paired_branch;
  std::optional<Version> minor_compat_floor;   // absent: no minor-version compatibility
  std::vector<int> branches;                   // branches whose max CUDA covers it
  std::vector<std::string> forward_compat;     // "cuda-compat-12-4 on R535"
  std::vector<GpuRef> gpus;
  std::vector<std::string> warnings;
  std::vector<std::string> notes;
  std::vector<SourceRef> sources;
  std::string data_origin;
};

// JSON documents: {apiVersion: gpunode/v1, kind: CompatReport | DriverRequirement, ...}.
nlohmann::ordered_json ToJson(const CompatReport& report);
nlohmann::ordered_json ToJson(const DriverForReport& report);
// Human text; `color` adds ANSI colors to the verdict.
std::string RenderText(const CompatReport& report, bool color);
std::string RenderText(const DriverForReport& report, bool color);

}  // namespace gpunode::compat

#endif  // GPUNODE_COMPAT_REPORT_H_
