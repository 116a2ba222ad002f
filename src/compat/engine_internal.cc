#include "src/compat/engine_internal.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace gpunode::compat::internal {

// Severity order used to pick the verdict: incompatible > unknown > caveats > compatible.
int Rank(Verdict v) {
  switch (v) {
    case Verdict::kCompatible:
      return 0;
    case Verdict::kCompatibleWithCaveats:
      return 1;
    case Verdict::kUnknown:
      return 2;
    case Verdict::kIncompatible:
      return 3;
  }
  return 2;
}

std::string MajorMinor(const Version& v) { return v.Truncate(2).ToString(); }

ToolkitInfo LookupToolkit(const CompatData& d, const Version& cuda) {
  ToolkitInfo info;
  std::vector<const Toolkit*> rows = d.ToolkitsOfMinor(cuda);
  if (rows.empty()) return info;
  info.known = true;
  if (cuda.parts().size() >= 3) {
    std::vector<const Toolkit*> exact;
    for (const Toolkit* t : rows) {
      // A two-component row ("10.1") covers every patch of that minor.
      if (t->cuda.parts().size() <= 2 || t->cuda.Truncate(3) == cuda.Truncate(3)) {
        exact.push_back(t);
      }
    }
    if (!exact.empty()) {
      rows = exact;
    } else {
      info.note = absl::StrCat("CUDA ", cuda.ToString(), " has no row in NVIDIA's Table 3; the ",
                               MajorMinor(cuda),
                               " release with the newest driver is used (derived)");
      const Toolkit* newest = nullptr;
      for (const Toolkit* t : rows) {
        if (t->driver && (!newest || *t->driver > *newest->driver)) newest = t;
      }
      if (newest) rows = {newest};
    }
  }
  for (const Toolkit* t : rows) {
    info.releases.push_back(t->release);
    if (t->paired_branch) info.paired_branch = t->paired_branch;
    if (!t->driver) {
      if (info.provenance.source.empty()) info.provenance = t->provenance;
      continue;
    }
    if (!info.min_driver || *t->driver < *info.min_driver) {
      info.min_driver = t->driver;
      info.provenance = t->provenance;
    }
    if (!info.latest_driver || *t->driver > *info.latest_driver) info.latest_driver = t->driver;
  }
  std::reverse(info.releases.begin(), info.releases.end());  // data lists newest first
  if (!info.note.empty()) info.provenance.confidence = Confidence::kDerived;
  return info;
}

// The highest CUDA `branch` runs natively, from the branch table (exact branch, else the nearest
// older branch as a lower bound).
std::optional<Version> BranchMaxCuda(const CompatData& d, int branch, bool* exact) {
  *exact = false;
  if (const DriverBranch* b = d.FindBranch(branch); b && b->max_cuda) {
    *exact = true;
    return b->max_cuda;
  }
  const DriverBranch* best = nullptr;
  for (const DriverBranch& b : d.branches) {
    if (b.branch < branch && b.max_cuda && (!best || b.branch > best->branch)) best = &b;
  }
  if (best) return best->max_cuda;
  return std::nullopt;
}

// Highest CUDA major.minor whose toolkit driver `driver` satisfies.
std::optional<Version> BestFullCuda(const CompatData& d, const Version& driver,
                                    std::optional<int> max_major) {
  std::optional<Version> best;
  for (const Toolkit& t : d.toolkits) {
    bool ok = (t.driver && driver >= *t.driver) ||
              (!t.driver && t.paired_branch && static_cast<int>(driver.major()) >= *t.paired_branch);
    if (!ok) continue;
    if (max_major && static_cast<int>(t.cuda.major()) > *max_major) continue;
    Version mm = t.cuda.Truncate(2);
    if (!best || mm > *best) best = mm;
  }
  return best;
}

// Highest CUDA major whose minor-version floor `driver` satisfies.
std::optional<int> BestMinorCompatMajor(const CompatData& d, const Version& driver,
                                        std::optional<int> max_major) {
  std::optional<int> best;
  for (const MinorCompat& m : d.minor_compat) {
    if (!m.floor || driver < *m.floor) continue;
    if (max_major && m.cuda_major > *max_major) continue;
    if (!best || m.cuda_major > *best) best = m.cuda_major;
  }
  return best;
}

FcCheck CheckForwardCompat(const CompatData& d, const Version& cuda, int branch) {
  FcCheck fc;
  const FcPackage* pkg = d.FindFcPackage(cuda);
  if (!pkg) {
    fc.why_not = absl::StrCat("NVIDIA's forward-compatibility matrix has no package for CUDA ",
                              MajorMinor(cuda));
    return fc;
  }
  fc.package = pkg->package;
  int col = d.FcColumn(branch);
  if (col < 0) {
    fc.why_not = absl::StrCat("R", branch,
                              " is not a target of NVIDIA's forward-compatibility matrix (branches "
                              "not listed are end of life or new-feature branches)");
    return fc;
  }
  switch (pkg->support[static_cast<size_t>(col)]) {
    case FcCell::kSupported:
      fc.available = true;
      break;
    case FcCell::kPaired:
      fc.paired = true;
      fc.why_not = absl::StrCat("R", branch, " is the branch ", pkg->package,
                                " is built from: the package is not needed");
      break;
    case FcCell::kUnsupported:
      fc.why_not = absl::StrCat(pkg->package, " is not supported on R", branch,
                                " (older compat packages do not run on newer drivers)");
      break;
  }
  if (const DriverBranch* b = d.FindBranch(branch); b && b->type == "NFB") {
    fc.nfb_warning = absl::StrCat("R", branch,
                                  " is a New Feature Branch; NVIDIA's forward-compatibility page "
                                  "says NFBs are not supported targets although its matrix lists "
                                  "R",
                                  branch, ": prefer an LTSB or production branch");
  }
  return fc;
}

bool FcEligible(const CompatData& d, const GpuRef& g) {
  const auto& seg = d.forward_compat.eligible_segments;
  return std::find(seg.begin(), seg.end(), g.segment) != seg.end();
}

std::string GpuLabel(const GpuRef& g) {
  std::string s = g.name.empty() ? "the GPU" : g.name;
  if (g.cc) absl::StrAppend(&s, " (", g.arch.empty() ? "" : g.arch + ", ", "cc ", g.cc->ToString(), ")");
  return s;
}

// Whether a torch arch list has code that runs on `cc`: SASS of the same major and a minor not
// above the GPU's, or PTX not newer than the GPU.
bool ArchListCovers(const TorchArchList& l, const Version& cc) {
  for (const Version& s : l.sass) {
    if (s.major() == cc.major() && s.minor() <= cc.minor()) return true;
  }
  if (l.sass_min && l.sass_max) {
    if (cc >= *l.sass_min && cc.major() <= l.sass_max->major()) return true;
  }
  for (const Version& p : l.ptx) {
    if (p <= cc) return true;
  }
  return false;
}

std::string DescribeArchList(const TorchArchList& l) {
  std::string s;
  auto sm = [](const Version& v) { return absl::StrCat("sm_", v.major(), v.minor()); };
  if (l.sass_min && l.sass_max) {
    s = absl::StrCat(sm(*l.sass_min), " ... ", sm(*l.sass_max));
  } else {
    std::vector<std::string> parts;
    for (const Version& v : l.sass) parts.push_back(sm(v));
    s = absl::StrJoin(parts, " ");
  }
  if (l.ptx.empty()) {
    absl::StrAppend(&s, " and no PTX");
  } else {
    std::vector<std::string> parts;
    for (const Version& v : l.ptx) parts.push_back(absl::StrCat("compute_", v.major(), v.minor()));
    absl::StrAppend(&s, " + PTX ", absl::StrJoin(parts, " "));
  }
  return s;
}

bool TorchVersionMatches(const std::vector<Version>& list, const Version& torch) {
  for (const Version& v : list) {
    if (v.parts().size() <= 2) {
      if (v.major() == torch.major() && v.minor() == torch.minor()) return true;
    } else if (v == torch) {
      return true;
    }
  }
  return false;
}

}  // namespace gpunode::compat::internal
