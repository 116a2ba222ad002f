// The rules engine's shared helpers (internal to src/compat): data-set lookups and the phrases
// that both Check() (engine.cc) and DriverFor() (driver_for.cc) use. Not part of the API.
#ifndef GPUNODE_COMPAT_ENGINE_INTERNAL_H_
#define GPUNODE_COMPAT_ENGINE_INTERNAL_H_

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "src/base/version.h"
#include "src/compat/dataset.h"
#include "src/compat/gpu_catalog.h"
#include "src/compat/report.h"

namespace gpunode::compat::internal {

// Fix costs: lower is cheaper / more complete.
constexpr int kCostDriver = 1;
constexpr int kCostForwardCompat = 2;
constexpr int kCostImage = 3;
constexpr int kCostGpu = 4;

// Severity order used to pick the verdict: incompatible > unknown > caveats > compatible.
int Rank(Verdict v);

// "12.4" of 12.4.1.
std::string MajorMinor(const Version& v);

// What the data set says about one CUDA release (all rows of its minor, or the exact patch).
struct ToolkitInfo {
  bool known = false;
  std::optional<Version> min_driver;     // lowest toolkit driver
  std::optional<Version> latest_driver;  // highest (latest update of the minor)
  std::optional<int> paired_branch;
  std::vector<std::string> releases;
  Provenance provenance;
  std::string note;  // e.g. "12.3.2 has no Table 3 row"
};

ToolkitInfo LookupToolkit(const CompatData& d, const Version& cuda);

// The highest CUDA `branch` runs natively, from the branch table (exact branch, else the nearest
// older branch as a lower bound).
std::optional<Version> BranchMaxCuda(const CompatData& d, int branch, bool* exact);

// Highest CUDA major.minor whose toolkit driver `driver` satisfies.
std::optional<Version> BestFullCuda(const CompatData& d, const Version& driver,
                                    std::optional<int> max_major);

// Highest CUDA major whose minor-version floor `driver` satisfies.
std::optional<int> BestMinorCompatMajor(const CompatData& d, const Version& driver,
                                        std::optional<int> max_major);

struct FcCheck {
  bool available = false;
  bool paired = false;      // the branch is the package's own branch
  std::string package;      // empty: no package for this CUDA in the matrix
  std::string why_not;
  std::string nfb_warning;  // the branch is a New Feature Branch
};

FcCheck CheckForwardCompat(const CompatData& d, const Version& cuda, int branch);

bool FcEligible(const CompatData& d, const GpuRef& g);

std::string GpuLabel(const GpuRef& g);

// Rule image-requires (image_requires.cc): the image's NVIDIA_REQUIRE_* against the target, as the
// OCI shim evaluates them at container start (requirement.h). `ran` is false when the rule does
// not apply (no requirements, NVIDIA_DISABLE_REQUIRE, no driver).
struct ImageRequiresOutcome {
  bool ran = false;
  Verdict severity = Verdict::kCompatible;
  std::string sentence;
  std::vector<Fix> fixes;
  std::vector<std::string> notes;
};
ImageRequiresOutcome JudgeImageRequires(const CompatData& d, const WorkloadSpec& w, const NodeTarget& t);

// Whether a torch arch list has code that runs on `cc`: SASS of the same major and a minor not
// above the GPU's, or PTX not newer than the GPU.
bool ArchListCovers(const TorchArchList& l, const Version& cc);

std::string DescribeArchList(const TorchArchList& l);

bool TorchVersionMatches(const std::vector<Version>& list, const Version& torch);

// Data-set source ids, each once, in first-seen order, resolved to their text at the end.
class SourceIdList {
 public:
  // `field` is a data-set source field, which may name several ids.
  void Add(const std::string& field) {
    for (const std::string& id : CompatData::SourceIds(field)) {
      if (std::find(ids_.begin(), ids_.end(), id) == ids_.end()) ids_.push_back(id);
    }
  }
  std::vector<SourceRef> Resolve(const CompatData& d) const {
    std::vector<SourceRef> out;
    for (const std::string& id : ids_) {
      auto it = d.sources.find(id);
      out.push_back({id, it == d.sources.end() ? std::string() : it->second});
    }
    return out;
  }

 private:
  std::vector<std::string> ids_;
};

}  // namespace gpunode::compat::internal

#endif  // GPUNODE_COMPAT_ENGINE_INTERNAL_H_
