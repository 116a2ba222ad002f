// DriverFor(): `gpunode compat driver-for --cuda X.Y [--gpu NAME]`, the driver a CUDA release
// needs, over the same data-set lookups as Check() (engine_internal.h).
#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/compat/engine.h"
#include "src/compat/engine_internal.h"

namespace gpunode::compat {

using namespace internal;  // NOLINT(build/namespaces)

namespace {

// The toolkit and minor-version facts of DriverFor, with their notes.
void DescribeToolkit(const Version& cuda, const ToolkitInfo& tk, const MinorCompat* mc,
                     DriverForReport& r, SourceIdList& ids) {
  r.known = tk.known || mc != nullptr;
  r.releases = tk.releases;
  r.toolkit_driver = tk.min_driver;
  r.toolkit_driver_latest = tk.latest_driver;
  r.paired_branch = tk.paired_branch;
  if (!tk.note.empty()) r.notes.push_back(tk.note);
  ids.Add(tk.provenance.source);
  if (mc) {
    r.minor_compat_floor = mc->floor;
    ids.Add(mc->provenance.source);
    if (!mc->floor) {
      r.notes.push_back(absl::StrCat("CUDA ", mc->cuda_major,
                                     ".x has no minor-version compatibility: every minor needs its "
                                     "own toolkit driver"));
    }
  }
  if (!r.known) {
    r.notes.push_back(absl::StrCat("CUDA ", cuda.ToString(),
                                   " is not in the data set; pass a --data file that lists it"));
  }
  if (tk.known && !tk.min_driver && !tk.paired_branch) {
    r.notes.push_back(absl::StrCat("the driver paired with CUDA ", cuda.ToString(),
                                   " was not captured (unconfirmed)"));
  }
}

// The branches whose max CUDA covers `cuda`. A branch known only by its max CUDA major counts
// once a branch with an exact max CUDA covered it.
std::vector<int> CoveringBranches(const CompatData& data, const Version& cuda) {
  std::vector<int> branches;
  Version mm = cuda.Truncate(2);
  for (const DriverBranch& b : data.branches) {
    bool covers = (b.max_cuda && *b.max_cuda >= mm) ||
                  (!b.max_cuda && b.max_cuda_major &&
                   *b.max_cuda_major >= static_cast<int>(cuda.major()) &&
                   !branches.empty());
    if (covers) branches.push_back(b.branch);
  }
  return branches;
}

// "cuda-compat-12-4 on R535" for each branch the forward-compatibility matrix supports.
void DescribeForwardCompat(const CompatData& data, const Version& cuda, DriverForReport& r,
                           SourceIdList& ids) {
  const FcPackage* pkg = data.FindFcPackage(cuda);
  if (!pkg) return;
  for (size_t i = 0; i < pkg->support.size(); ++i) {
    if (pkg->support[i] != FcCell::kSupported) continue;
    int col = data.forward_compat.columns[i];
    std::string s = absl::StrCat(pkg->package, " on R", col);
    if (const DriverBranch* b = data.FindBranch(col); b && b->type == "NFB") {
      absl::StrAppend(&s, " (New Feature Branch: not a recommended target)");
    }
    r.forward_compat.push_back(s);
  }
  ids.Add(data.forward_compat.provenance.source);
}

// The warnings about one GPU: its architecture against the CUDA release and the branches that
// run it (`any_branch` at all, `full_branch` with full compatibility).
void WarnAboutGpu(const CompatData& data, const Version& cuda, const GpuRef& g, int full_branch,
                  int any_branch, DriverForReport& r, SourceIdList& ids) {
  const Architecture* a = g.cc ? data.FindArchitecture(*g.cc) : nullptr;
  if (!a) {
    r.warnings.push_back(absl::StrCat(GpuLabel(g),
                                      ": architecture not in the data set, not checked"));
    return;
  }
  bool toolkit_ok = true;
  if (a->last_cuda_major && static_cast<int>(cuda.major()) > *a->last_cuda_major) {
    toolkit_ok = false;
    r.warnings.push_back(absl::StrCat("CUDA ", cuda.ToString(), " does not support ", a->name,
                                      " (", GpuLabel(g), "): the last toolkit for ", a->name,
                                      " is CUDA ", *a->last_cuda_major, ".x"));
    ids.Add(a->provenance.source);
  } else if (cuda.Truncate(2) < a->first_cuda) {
    r.warnings.push_back(absl::StrCat("CUDA ", cuda.ToString(), " predates ", a->name, " (",
                                      GpuLabel(g), "; first toolkit ", a->first_cuda.ToString(),
                                      "): no native code, PTX JIT only"));
    ids.Add(a->provenance.source);
  }
  if (a->last_branch && any_branch > *a->last_branch) {
    r.warnings.push_back(absl::StrCat("no driver that runs CUDA ", cuda.ToString(), " supports ",
                                      a->name, " (", GpuLabel(g), "): it needs R", any_branch,
                                      "+, and R", *a->last_branch, " is the last branch for ",
                                      a->name));
    ids.Add(a->provenance.source);
  } else if (a->last_branch && full_branch > *a->last_branch && toolkit_ok) {
    r.warnings.push_back(absl::StrCat(
        "full compatibility needs R", full_branch, "+, which does not support ", a->name, " (",
        GpuLabel(g), "); R", *a->last_branch, " runs it through minor-version compatibility"));
    ids.Add(a->provenance.source);
  }
  if (a->first_branch && *a->first_branch > any_branch) {
    r.warnings.push_back(absl::StrCat(a->name, " GPUs (", GpuLabel(g), ") need branch R",
                                      *a->first_branch, "+ whatever the CUDA version"));
    ids.Add(a->provenance.source);
  }
  if (!r.forward_compat.empty() && !FcEligible(data, g)) {
    r.warnings.push_back(absl::StrCat(
        "forward compatibility is not available on ", GpuLabel(g), " (",
        g.segment.empty() ? "not known to be a datacenter GPU" : g.segment + " GPU",
        "; CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE, 804)"));
  }
}

}  // namespace

DriverForReport DriverFor(const CompatData& data, const Version& cuda,
                          const std::vector<GpuRef>& gpus) {
  DriverForReport r;
  r.cuda = cuda;
  r.gpus = gpus;
  r.data_origin = data.origin;
  SourceIdList ids;
  ToolkitInfo tk = LookupToolkit(data, cuda);
  const MinorCompat* mc = data.FindMinorCompat(static_cast<int>(cuda.major()));
  DescribeToolkit(cuda, tk, mc, r, ids);
  r.branches = CoveringBranches(data, cuda);
  DescribeForwardCompat(data, cuda, r, ids);
  // The lowest branch that runs this CUDA at all, and the one for full compatibility.
  int full_branch = tk.min_driver ? static_cast<int>(tk.min_driver->major())
                                  : (tk.paired_branch ? *tk.paired_branch : 0);
  int any_branch = mc && mc->floor ? static_cast<int>(mc->floor->major()) : full_branch;
  for (const GpuRef& g : gpus) WarnAboutGpu(data, cuda, g, full_branch, any_branch, r, ids);
  r.sources = ids.Resolve(data);
  return r;
}

}  // namespace gpunode::compat

