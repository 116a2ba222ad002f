#include "src/compat/engine.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace gpunode::compat {

absl::string_view VerdictName(Verdict v) {
  switch (v) {
    case Verdict::kCompatible:
      return "compatible";
    case Verdict::kCompatibleWithCaveats:
      return "compatible-with-caveats";
    case Verdict::kIncompatible:
      return "incompatible";
    case Verdict::kUnknown:
      return "unknown";
  }
  return "unknown";
}

int VerdictExitCode(Verdict v) {
  switch (v) {
    case Verdict::kCompatible:
    case Verdict::kCompatibleWithCaveats:
      return 0;
    case Verdict::kIncompatible:
      return 1;
    case Verdict::kUnknown:
      return 2;
  }
  return 2;
}

namespace {

constexpr int kCostDriver = 1;
constexpr int kCostForwardCompat = 2;
constexpr int kCostImage = 3;
constexpr int kCostGpu = 4;

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

struct FcCheck {
  bool available = false;
  bool paired = false;      // the branch is the package's own branch
  std::string package;      // empty: no package for this CUDA in the matrix
  std::string why_not;
  std::string nfb_warning;  // the branch is a New Feature Branch
};

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

class Checker {
 public:
  Checker(const CompatData& d, const WorkloadSpec& w, const NodeTarget& t) : d_(d) {
    r_.workload = w;
    r_.target = t;
    r_.data_origin = d.origin;
  }

  CompatReport Run() {
    const WorkloadSpec& w = r_.workload;
    if (!w.cuda) {
      Add(Verdict::kUnknown, "workload-not-mapped", kLayerWorkload,
          absl::StrCat("cannot tell which CUDA version ", w.input,
                       " was built with: ", w.derived_from),
          w.source, w.confidence);
      r_.needed = w.needed;
      return Finish();
    }
    if (!r_.target.driver) {
      Add(Verdict::kUnknown, "driver-unknown", kLayerUserDriver,
          "no driver version to check against", "", Confidence::kOfficial);
      r_.needed.push_back("the driver version: pass --driver VERSION (e.g. 535.104.05)");
      return Finish();
    }
    cuda_ = *w.cuda;
    driver_ = *r_.target.driver;
    branch_ = static_cast<int>(driver_.major());
    r_.facts.workload_cuda = cuda_;
    r_.facts.driver = driver_;
    r_.facts.branch = branch_;
    bool exact = false;
    r_.facts.branch_max_cuda = BranchMaxCuda(d_, branch_, &exact);
    if (r_.facts.branch_max_cuda && !exact) {
      r_.notes.push_back(absl::StrCat("branch R", branch_,
                                      " is not in the data set; it supports at least CUDA ",
                                      r_.facts.branch_max_cuda->ToString()));
    }
    if (r_.target.gpus.empty()) {
      r_.notes.push_back(
          "no GPU given: architecture and forward-compatibility rules were not evaluated "
          "(pass --gpu NAME)");
    }
    for (const GpuRef& g : r_.target.gpus) {
      if (!g.cc) {
        r_.notes.push_back(absl::StrCat(GpuLabel(g),
                                        ": compute capability unknown, architecture rules skipped"));
      } else if (!d_.FindArchitecture(*g.cc)) {
        r_.notes.push_back(absl::StrCat(GpuLabel(g), ": compute capability ", g.cc->ToString(),
                                        " is not in the data set, architecture rules skipped"));
      }
    }
    KernelDriverVsGpu();
    UserDriverVsToolkit();
    ToolkitVsArchitecture();
    FrameworkVsGpu();
    return Finish();
  }

 private:
  const Architecture* ArchOf(const GpuRef& g) const {
    return g.cc ? d_.FindArchitecture(*g.cc) : nullptr;
  }

  void Add(Verdict severity, std::string rule, absl::string_view layer, std::string sentence,
           std::string source, Confidence confidence, std::string gpu = "") {
    Finding f;
    f.severity = severity;
    f.rule = std::move(rule);
    f.layer = std::string(layer);
    f.sentence = std::move(sentence);
    f.source = std::move(source);
    f.confidence = confidence;
    f.gpu = std::move(gpu);
    r_.findings.push_back(std::move(f));
  }

  void AddFix(Verdict for_severity, std::string kind, int cost, std::string action) {
    fixes_.push_back({for_severity, Fix{std::move(kind), cost, std::move(action)}});
  }

  // Rule driver-drops-arch / driver-predates-arch: can this branch drive the GPU at all?
  void KernelDriverVsGpu() {
    for (const GpuRef& g : r_.target.gpus) {
      const Architecture* a = ArchOf(g);
      if (!a) continue;
      if (a->last_branch && branch_ > *a->last_branch) {
        Add(Verdict::kIncompatible, "driver-drops-arch", kLayerKernelDriver,
            absl::StrCat("driver branch R", branch_, " does not support ", a->name, " GPUs: R",
                         *a->last_branch, " was the last branch for ", a->name, " (",
                         GpuLabel(g), ")"),
            a->provenance.source, a->provenance.confidence, g.name);
        AddFix(Verdict::kIncompatible, "change-driver", kCostDriver,
               absl::StrCat("install a driver from branch R", *a->last_branch, " (the last for ",
                            a->name, ") with an image its CUDA supports"));
        AddFix(Verdict::kIncompatible, "change-gpu", kCostGpu,
               absl::StrCat("move the workload to a GPU that R", branch_, " supports"));
      } else if (a->first_branch && branch_ < *a->first_branch) {
        Add(Verdict::kIncompatible, "driver-predates-arch", kLayerKernelDriver,
            absl::StrCat(a->name, " GPUs need driver branch R", *a->first_branch,
                         " or newer; R", branch_, " does not know ", GpuLabel(g)),
            a->provenance.source, a->provenance.confidence, g.name);
        AddFix(Verdict::kIncompatible, "upgrade-driver", kCostDriver,
               absl::StrCat("upgrade the driver to branch R", *a->first_branch, " or newer"));
      }
    }
  }

  // Rules paired-driver, minor-version-compat, forward-compat, minimum-driver.
  void UserDriverVsToolkit() {
    ToolkitInfo tk = LookupToolkit(d_, cuda_);
    const MinorCompat* mc = d_.FindMinorCompat(static_cast<int>(cuda_.major()));
    r_.facts.toolkit_driver = tk.min_driver;
    r_.facts.toolkit_driver_latest = tk.latest_driver;
    r_.facts.toolkit_paired_branch = tk.paired_branch;
    if (mc) r_.facts.minor_compat_floor = mc->floor;
    if (!tk.note.empty()) r_.notes.push_back(tk.note);
    FcCheck fc = CheckForwardCompat(d_, cuda_, branch_);
    if (!fc.package.empty()) r_.facts.forward_compat_package = fc.package;
    std::string cuda_text = cuda_.ToString();
    std::string release = tk.releases.empty() ? absl::StrCat("CUDA ", cuda_text)
                                              : absl::StrCat("CUDA ", tk.releases.front());
    const std::string bmax =
        r_.facts.branch_max_cuda ? r_.facts.branch_max_cuda->ToString() : std::string("?");
    const std::string driver_text =
        absl::StrCat("driver ", driver_.ToString(), " (R", branch_, ", CUDA <= ", bmax, ")");

    // A bare branch (`--driver 550`) stands for that branch's releases: it is judged as the
    // branch, not as version 550.0 (which no driver is). R550 is the toolkit driver's branch for
    // CUDA 12.4 (550.54.14): full compatibility on its production releases from that one.
    const bool bare_branch = driver_.parts().size() == 1;
    const bool branch_ok = bare_branch && tk.min_driver && static_cast<int>(tk.min_driver->major()) <= branch_;
    bool paired_ok = (tk.min_driver && driver_ >= *tk.min_driver) || branch_ok ||
                     (!tk.min_driver && tk.paired_branch && branch_ >= *tk.paired_branch);
    if (tk.known && paired_ok) {
      if (branch_ok && static_cast<int>(tk.min_driver->major()) == branch_) {
        Add(Verdict::kCompatible, "paired-branch", kLayerUserDriver,
            absl::StrCat("R", branch_, " is the branch of the toolkit driver of ", release, " (",
                         tk.min_driver->ToString(), "): full compatibility on R", branch_,
                         " releases from ", tk.min_driver->ToString(),
                         " (give the full version, e.g. --driver ", tk.min_driver->ToString(),
                         ", to check one release)"),
            tk.provenance.source, tk.provenance.confidence);
        return;
      }
      std::string need = tk.min_driver ? absl::StrCat(">= ", tk.min_driver->ToString())
                                       : absl::StrCat("branch R", *tk.paired_branch, "+");
      Add(Verdict::kCompatible, tk.min_driver ? "paired-driver" : "paired-branch",
          kLayerUserDriver,
          absl::StrCat(driver_text, " is at or above the toolkit driver of ", release, " (", need,
                       "): full compatibility"),
          tk.provenance.source, tk.provenance.confidence);
      return;
    }
    if (!tk.known && r_.facts.branch_max_cuda && exact_branch() &&
        *r_.facts.branch_max_cuda >= cuda_.Truncate(2)) {
      const DriverBranch* b = d_.FindBranch(branch_);
      Add(Verdict::kCompatible, "branch-max-cuda", kLayerUserDriver,
          absl::StrCat(driver_text, " supports CUDA up to ", bmax, ", which covers CUDA ",
                       cuda_text, " (not itself in the data set)"),
          b->provenance.source, b->provenance.confidence);
      return;
    }
    if (!tk.known && !mc) {
      Add(Verdict::kUnknown, "unknown-toolkit", kLayerUserDriver,
          absl::StrCat("CUDA ", cuda_text, " is not in the data set (neither the release nor CUDA ",
                       cuda_.major(), ".x)"),
          "", Confidence::kUnconfirmed);
      r_.needed.push_back(absl::StrCat("a data set that lists CUDA ", cuda_text,
                                       " and its driver (--data FILE)"));
      return;
    }

    // Which GPUs block driver upgrades or forward compatibility.
    std::optional<int> arch_max_major;  // highest CUDA major every GPU's architecture allows
    std::optional<int> arch_last_branch;
    std::string arch_last_name;
    for (const GpuRef& g : r_.target.gpus) {
      if (const Architecture* a = ArchOf(g)) {
        if (a->last_cuda_major && (!arch_max_major || *a->last_cuda_major < *arch_max_major)) {
          arch_max_major = a->last_cuda_major;
        }
        if (a->last_branch && (!arch_last_branch || *a->last_branch < *arch_last_branch)) {
          arch_last_branch = a->last_branch;
          arch_last_name = a->name;
        }
      }
    }
    bool all_fc_eligible = !r_.target.gpus.empty();
    std::vector<std::string> not_eligible;
    for (const GpuRef& g : r_.target.gpus) {
      if (!FcEligible(d_, g)) {
        all_fc_eligible = false;
        not_eligible.push_back(absl::StrCat(GpuLabel(g), " is ",
                                            g.segment.empty() ? "not known to be a datacenter GPU"
                                                              : "a " + g.segment + " GPU"));
      }
    }

    Verdict severity;
    bool via_fc = false;
    std::optional<Version> minimum;  // lowest driver that runs it at all
    if (mc && mc->floor && driver_ >= *mc->floor) {
      severity = Verdict::kCompatibleWithCaveats;
      std::string below = tk.min_driver ? absl::StrCat("below the toolkit driver of ", release,
                                                       " (", tk.min_driver->ToString(), ")")
                                        : absl::StrCat("without a known toolkit driver for CUDA ",
                                                       cuda_text);
      Add(severity, "minor-version-compat", kLayerUserDriver,
          absl::StrCat(driver_text, " is ", below, " but at or above ", mc->floor->ToString(),
                       ", the minor-version compatibility floor of CUDA ", mc->cuda_major,
                       ".x: it runs with minor-version compatibility"),
          mc->provenance.source, mc->provenance.confidence);
      r_.caveats.push_back(absl::StrCat(
          "minor-version compatibility has a limited feature set: CUDA features that need a "
          "driver newer than R",
          branch_, " (CUDA ", bmax, ") are unavailable"));
      r_.caveats.push_back(absl::StrCat(
          "no PTX JIT of newer PTX: PTX produced by CUDA ", MajorMinor(cuda_),
          " (embedded in binaries or generated at run time) cannot be compiled by this driver and "
          "fails with CUDA_ERROR_UNSUPPORTED_PTX_VERSION (222); only code compiled to SASS for "
          "the GPU runs"));
      sources_.push_back("ERR222");
    } else {
      minimum = mc && mc->floor ? mc->floor : tk.min_driver;
      if (w().ships_cuda_compat && fc.available && all_fc_eligible) {
        severity = Verdict::kCompatibleWithCaveats;
        via_fc = true;
        Add(severity, "forward-compat", kLayerUserDriver,
            absl::StrCat(driver_text, " is below ", minimum ? minimum->ToString() : "the minimum",
                         " needed by CUDA ", cuda_text, ", but the image carries ", fc.package,
                         " and NVIDIA's forward-compatibility matrix supports it on R", branch_,
                         " for datacenter GPUs"),
            d_.forward_compat.provenance.source, d_.forward_compat.provenance.confidence);
        r_.caveats.push_back(absl::StrCat(
            "runs only through the image's forward-compatibility libraries (", fc.package,
            "): they must be the ones loaded (the NVIDIA Container Toolkit does this for images "
            "that set NV_CUDA_COMPAT_PACKAGE; otherwise put /usr/local/cuda/compat on "
            "LD_LIBRARY_PATH)"));
        r_.caveats.push_back(
            "forward compatibility does not cover OpenGL/Vulkan interop; a mismatch between the "
            "kernel-mode driver and the compat libraries reports CUDA_ERROR_SYSTEM_DRIVER_MISMATCH "
            "(803)");
        if (!fc.nfb_warning.empty()) r_.caveats.push_back(fc.nfb_warning);
      } else {
        severity = Verdict::kIncompatible;
        std::string why;
        if (mc && mc->floor) {
          why = absl::StrCat("the minor-version compatibility floor of CUDA ", mc->cuda_major,
                             ".x");
        } else if (tk.min_driver) {
          why = absl::StrCat("its toolkit driver; CUDA ", cuda_.major(),
                             ".x has no minor-version compatibility");
        }
        std::string sentence =
            absl::StrCat("CUDA ", cuda_text, " needs driver >= ",
                         minimum ? minimum->ToString() : std::string("(unknown)"),
                         why.empty() ? "" : " (" + why + ")", "; this is ", driver_text);
        int needed_branch = minimum ? static_cast<int>(minimum->major()) : 0;
        if (arch_last_branch && needed_branch > *arch_last_branch) {
          absl::StrAppend(&sentence, ", and R", *arch_last_branch, " is the last branch for ",
                          arch_last_name, ", so no driver upgrade makes this GPU run CUDA ",
                          cuda_.major(), ".x");
        }
        const Provenance& p = mc && mc->floor ? mc->provenance : tk.provenance;
        Add(severity, "minimum-driver", kLayerUserDriver, sentence, p.source, p.confidence);
      }
    }

    // Fixes.
    std::optional<Version> target = tk.latest_driver;
    int target_branch = target ? static_cast<int>(target->major())
                               : (tk.paired_branch ? *tk.paired_branch : 0);
    bool driver_blocked = arch_last_branch && target_branch > *arch_last_branch;
    if (target_branch > 0 && !driver_blocked) {
      std::string to = target ? absl::StrCat(">= ", target->ToString(), " (R", target_branch, "+)")
                              : absl::StrCat("branch R", target_branch, "+");
      std::string action = absl::StrCat("upgrade the driver to ", to,
                                        " for full compatibility with CUDA ", cuda_text);
      if (severity == Verdict::kIncompatible && minimum && minimum != target &&
          !(arch_last_branch && static_cast<int>(minimum->major()) > *arch_last_branch)) {
        absl::StrAppend(&action, "; >= ", minimum->ToString(),
                        " is the minimum (minor-version compatibility)");
      }
      AddFix(severity, "upgrade-driver", kCostDriver, action);
    } else if (driver_blocked) {
      r_.notes.push_back(absl::StrCat("a driver upgrade cannot help: CUDA ", cuda_text,
                                      " needs R", target_branch, "+, and R", *arch_last_branch,
                                      " is the last branch for ", arch_last_name));
    }
    if (!via_fc && fc.available) {
      if (r_.target.gpus.empty()) {
        AddFix(severity, "forward-compat", kCostForwardCompat,
               absl::StrCat("use forward compatibility: ", fc.package, " on R", branch_,
                            " (a supported branch in NVIDIA's forward-compatibility matrix); "
                            "datacenter GPUs only"));
      } else if (all_fc_eligible) {
        AddFix(severity, "forward-compat", kCostForwardCompat,
               absl::StrCat("use forward compatibility: install ", fc.package,
                            " (in the image, or on the host) on this datacenter GPU; branch R",
                            branch_,
                            " is a supported target in NVIDIA's forward-compatibility matrix"));
      } else {
        r_.notes.push_back(absl::StrCat(
            "forward compatibility is not possible: ", absl::StrJoin(not_eligible, "; "),
            " (compat libraries there fail with CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE, 804)"));
      }
      if (!fc.nfb_warning.empty() && !via_fc) r_.notes.push_back(fc.nfb_warning);
    } else if (!fc.available && !fc.package.empty() && !fc.paired) {
      r_.notes.push_back(absl::StrCat("forward compatibility is not possible: ", fc.why_not));
    }
    std::optional<Version> best_full = BestFullCuda(d_, driver_, arch_max_major);
    std::optional<int> best_mc = BestMinorCompatMajor(d_, driver_, arch_max_major);
    if (best_full) {
      std::string action = absl::StrCat("choose an image built for CUDA <= ", best_full->ToString(),
                                        " (full compatibility with driver ", driver_.ToString(),
                                        ")");
      if (severity == Verdict::kIncompatible && best_mc &&
          *best_mc >= static_cast<int>(best_full->major())) {
        absl::StrAppend(&action, ", or another CUDA ", *best_mc,
                        ".x image through minor-version compatibility");
      }
      AddFix(severity, "change-image", kCostImage, action);
    }
  }

  // Rules toolkit-drops-arch / toolkit-predates-arch.
  void ToolkitVsArchitecture() {
    for (const GpuRef& g : r_.target.gpus) {
      const Architecture* a = ArchOf(g);
      if (!a) continue;
      if (a->last_cuda_major && static_cast<int>(cuda_.major()) > *a->last_cuda_major) {
        Add(Verdict::kIncompatible, "toolkit-drops-arch", kLayerArchitecture,
            absl::StrCat("CUDA ", cuda_.major(), " dropped ", a->name, " (", GpuLabel(g),
                         "): the last toolkit for ", a->name, " is CUDA ", *a->last_cuda_major,
                         ".x"),
            a->provenance.source, a->provenance.confidence, g.name);
        AddFix(Verdict::kIncompatible, "change-image", kCostImage,
               absl::StrCat("use an image built with CUDA ", *a->last_cuda_major,
                            ".x (the last toolkit for ", a->name, ")"));
        AddFix(Verdict::kIncompatible, "change-gpu", kCostGpu,
               absl::StrCat("run CUDA ", cuda_.major(),
                            ".x workloads on a GPU architecture it still supports"));
      } else if (cuda_.Truncate(2) < a->first_cuda) {
        Add(Verdict::kCompatibleWithCaveats, "toolkit-predates-arch", kLayerArchitecture,
            absl::StrCat("CUDA ", cuda_.ToString(), " predates ", a->name, " (first toolkit ",
                         a->first_cuda.ToString(), "): it has no native code for ", GpuLabel(g),
                         " and runs only if the binaries embed PTX that the driver can "
                         "JIT-compile"),
            a->provenance.source, a->provenance.confidence, g.name);
        r_.caveats.push_back(absl::StrCat("code without PTX fails on ", g.name,
                                          " with 'no kernel image is available for execution on "
                                          "the device'"));
        AddFix(Verdict::kCompatibleWithCaveats, "change-image", kCostImage,
               absl::StrCat("use an image built with CUDA >= ", a->first_cuda.ToString(),
                            ", which has native code for ", a->name));
      }
    }
  }

  // Rules framework-arch-list, framework-gpu-floor, framework-min-cc.
  void FrameworkVsGpu() {
    const WorkloadSpec& wk = w();
    if (wk.framework == "pytorch" && wk.framework_version && !wk.wheel.empty()) {
      const Version& tv = *wk.framework_version;
      for (const TorchRelease& rel : d_.torch_releases) {
        if (rel.torch.major() == tv.major() && rel.torch.minor() == tv.minor() &&
            std::find(rel.wheels.begin(), rel.wheels.end(), wk.wheel) == rel.wheels.end()) {
          r_.notes.push_back(absl::StrCat("PyTorch ", MajorMinor(tv), " wheels were published for ",
                                          absl::StrJoin(rel.wheels, ", "), "; +", wk.wheel,
                                          " is not one of them"));
        }
      }
      for (const GpuRef& g : r_.target.gpus) {
        if (!g.cc) continue;
        const TorchArchList* list = nullptr;
        for (const TorchArchList& l : d_.torch_arch_lists) {
          if (l.wheel == wk.wheel && TorchVersionMatches(l.torch, tv)) list = &l;
        }
        std::string what = absl::StrCat("PyTorch ", tv.ToString(), "+", wk.wheel);
        if (list) {
          if (ArchListCovers(*list, *g.cc)) {
            Add(Verdict::kCompatible, "framework-arch-list", kLayerFramework,
                absl::StrCat(what, " ships code for ", DescribeArchList(*list), ", which runs on ",
                             GpuLabel(g)),
                list->provenance.source, list->provenance.confidence, g.name);
          } else {
            Add(Verdict::kIncompatible, "framework-arch-list", kLayerFramework,
                absl::StrCat(what, " ships kernels for ", DescribeArchList(*list), ": ",
                             GpuLabel(g),
                             " gets 'no kernel image is available for execution on the device'"),
                list->provenance.source, list->provenance.confidence, g.name);
            TorchFix(*g.cc);
          }
          continue;
        }
        for (const TorchGpuFloor& f : d_.torch_gpu_floors) {
          if (std::find(f.cc.begin(), f.cc.end(), *g.cc) == f.cc.end()) continue;
          if (tv < f.min_torch || cuda_.Truncate(2) < f.min_cuda) {
            Add(Verdict::kIncompatible, "framework-gpu-floor", kLayerFramework,
                absl::StrCat(GpuLabel(g), " needs PyTorch >= ", f.min_torch.ToString(),
                             " built with CUDA >= ", f.min_cuda.ToString(), "; ", what,
                             " has no kernels for it ('no kernel image is available for "
                             "execution on the device')"),
                f.provenance.source, f.provenance.confidence, g.name);
            TorchFix(*g.cc);
          } else {
            Add(Verdict::kCompatible, "framework-gpu-floor", kLayerFramework,
                absl::StrCat(what, " meets the PyTorch floor for ", GpuLabel(g), " (torch >= ",
                             f.min_torch.ToString(), ", CUDA >= ", f.min_cuda.ToString(), ")"),
                f.provenance.source, f.provenance.confidence, g.name);
          }
        }
      }
    }
    std::optional<Version> min_cc;
    std::string min_cc_source;
    Confidence min_cc_conf = Confidence::kOfficial;
    if (wk.framework == "jax") {
      for (const JaxBuild& j : d_.jax) {
        if (j.extra == wk.flavor) {
          min_cc = j.min_cc;
          min_cc_source = j.provenance.source;
          min_cc_conf = j.provenance.confidence;
        }
      }
    } else if (wk.framework == "vllm" && d_.vllm_min_cc) {
      min_cc = d_.vllm_min_cc;
      min_cc_source = d_.vllm_min_cc_source;
    }
    if (min_cc) {
      for (const GpuRef& g : r_.target.gpus) {
        if (!g.cc || *g.cc >= *min_cc) continue;
        Add(Verdict::kIncompatible, "framework-min-cc", kLayerFramework,
            absl::StrCat(wk.framework, " needs compute capability ", min_cc->ToString(),
                         " or newer; ", GpuLabel(g), " is older"),
            min_cc_source, min_cc_conf, g.name);
        AddFix(Verdict::kIncompatible, "change-gpu", kCostGpu,
               absl::StrCat("run ", wk.framework, " on a GPU with compute capability >= ",
                            min_cc->ToString()));
      }
    }
  }

  void TorchFix(const Version& cc) {
    const TorchArchList* best = nullptr;
    for (const TorchArchList& l : d_.torch_arch_lists) {
      if (!ArchListCovers(l, cc)) continue;
      if (!best || l.torch.back() > best->torch.back()) best = &l;
    }
    for (const TorchGpuFloor& f : d_.torch_gpu_floors) {
      if (std::find(f.cc.begin(), f.cc.end(), cc) == f.cc.end()) continue;
      AddFix(Verdict::kIncompatible, "change-image", kCostImage,
             absl::StrCat("use PyTorch >= ", f.min_torch.ToString(), " built with CUDA >= ",
                          f.min_cuda.ToString(), " (e.g. a +cu", f.min_cuda.major(),
                          f.min_cuda.minor(), " wheel or image)"));
      return;
    }
    if (best) {
      AddFix(Verdict::kIncompatible, "change-image", kCostImage,
             absl::StrCat("use a PyTorch build with code for cc ", cc.ToString(), ", e.g. torch ",
                          best->torch.back().ToString(), "+", best->wheel));
    }
  }

  const WorkloadSpec& w() const { return r_.workload; }
  bool exact_branch() const { return d_.FindBranch(branch_) != nullptr; }

  CompatReport Finish() {
    Verdict verdict = Verdict::kCompatible;
    for (const Finding& f : r_.findings) {
      if (Rank(f.severity) > Rank(verdict)) verdict = f.severity;
    }
    r_.verdict = verdict;
    // Caveats qualify a "compatible-with-caveats"; under a failure they are noise.
    if (verdict != Verdict::kCompatibleWithCaveats) r_.caveats.clear();
    for (const Finding& f : r_.findings) {
      if (f.severity == verdict) {
        r_.decision = f;
        break;
      }
    }
    // Fixes of the findings that set the verdict (a fix for a caveat does not cure a failure).
    std::set<std::string> seen;
    for (const auto& [severity, fix] : fixes_) {
      if (verdict == Verdict::kCompatible || severity != verdict) continue;
      if (!seen.insert(fix.action).second) continue;
      r_.fixes.push_back(fix);
    }
    std::stable_sort(r_.fixes.begin(), r_.fixes.end(),
                     [](const Fix& a, const Fix& b) { return a.cost < b.cost; });
    // Sources of the decision, caveats and failures, and of the workload mapping.
    std::vector<std::string> ids;
    auto add_ids = [&](const std::string& field) {
      for (const std::string& id : CompatData::SourceIds(field)) {
        if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
      }
    };
    add_ids(r_.decision.source);
    for (const Finding& f : r_.findings) {
      if (f.severity != Verdict::kCompatible) add_ids(f.source);
    }
    if (verdict != Verdict::kCompatible) {
      for (const std::string& s : sources_) add_ids(s);
    }
    add_ids(r_.workload.source);
    for (const std::string& id : ids) {
      auto it = d_.sources.find(id);
      r_.sources.push_back({id, it == d_.sources.end() ? std::string() : it->second});
    }
    return std::move(r_);
  }

  const CompatData& d_;
  CompatReport r_;
  Version cuda_;
  Version driver_;
  int branch_ = 0;
  std::vector<std::pair<Verdict, Fix>> fixes_;
  std::vector<std::string> sources_;
};

}  // namespace

CompatReport Check(const CompatData& data, const WorkloadSpec& workload, const NodeTarget& target) {
  return Checker(data, workload, target).Run();
}

DriverForReport DriverFor(const CompatData& data, const Version& cuda,
                          const std::vector<GpuRef>& gpus) {
  DriverForReport r;
  r.cuda = cuda;
  r.gpus = gpus;
  r.data_origin = data.origin;
  ToolkitInfo tk = LookupToolkit(data, cuda);
  const MinorCompat* mc = data.FindMinorCompat(static_cast<int>(cuda.major()));
  r.known = tk.known || mc != nullptr;
  r.releases = tk.releases;
  r.toolkit_driver = tk.min_driver;
  r.toolkit_driver_latest = tk.latest_driver;
  r.paired_branch = tk.paired_branch;
  if (!tk.note.empty()) r.notes.push_back(tk.note);
  std::vector<std::string> ids;
  auto add_ids = [&](const std::string& field) {
    for (const std::string& id : CompatData::SourceIds(field)) {
      if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
    }
  };
  add_ids(tk.provenance.source);
  if (mc) {
    r.minor_compat_floor = mc->floor;
    add_ids(mc->provenance.source);
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
  Version mm = cuda.Truncate(2);
  for (const DriverBranch& b : data.branches) {
    bool covers = (b.max_cuda && *b.max_cuda >= mm) ||
                  (!b.max_cuda && b.max_cuda_major &&
                   *b.max_cuda_major >= static_cast<int>(cuda.major()) &&
                   !r.branches.empty());
    if (covers) r.branches.push_back(b.branch);
  }
  if (const FcPackage* pkg = data.FindFcPackage(cuda)) {
    for (size_t i = 0; i < pkg->support.size(); ++i) {
      if (pkg->support[i] != FcCell::kSupported) continue;
      int col = data.forward_compat.columns[i];
      std::string s = absl::StrCat(pkg->package, " on R", col);
      if (const DriverBranch* b = data.FindBranch(col); b && b->type == "NFB") {
        absl::StrAppend(&s, " (New Feature Branch: not a recommended target)");
      }
      r.forward_compat.push_back(s);
    }
    add_ids(data.forward_compat.provenance.source);
  }
  // The lowest branch that runs this CUDA at all, and the one for full compatibility.
  int full_branch = tk.min_driver ? static_cast<int>(tk.min_driver->major())
                                  : (tk.paired_branch ? *tk.paired_branch : 0);
  int any_branch = mc && mc->floor ? static_cast<int>(mc->floor->major()) : full_branch;
  for (const GpuRef& g : gpus) {
    const Architecture* a = g.cc ? data.FindArchitecture(*g.cc) : nullptr;
    if (!a) {
      r.warnings.push_back(absl::StrCat(GpuLabel(g),
                                        ": architecture not in the data set, not checked"));
      continue;
    }
    bool toolkit_ok = true;
    if (a->last_cuda_major && static_cast<int>(cuda.major()) > *a->last_cuda_major) {
      toolkit_ok = false;
      r.warnings.push_back(absl::StrCat("CUDA ", cuda.ToString(), " does not support ", a->name,
                                        " (", GpuLabel(g), "): the last toolkit for ", a->name,
                                        " is CUDA ", *a->last_cuda_major, ".x"));
      add_ids(a->provenance.source);
    } else if (mm < a->first_cuda) {
      r.warnings.push_back(absl::StrCat("CUDA ", cuda.ToString(), " predates ", a->name, " (",
                                        GpuLabel(g), "; first toolkit ",
                                        a->first_cuda.ToString(),
                                        "): no native code, PTX JIT only"));
      add_ids(a->provenance.source);
    }
    if (a->last_branch && any_branch > *a->last_branch) {
      r.warnings.push_back(absl::StrCat("no driver that runs CUDA ", cuda.ToString(), " supports ",
                                        a->name, " (", GpuLabel(g), "): it needs R", any_branch,
                                        "+, and R", *a->last_branch, " is the last branch for ",
                                        a->name));
      add_ids(a->provenance.source);
    } else if (a->last_branch && full_branch > *a->last_branch && toolkit_ok) {
      r.warnings.push_back(absl::StrCat(
          "full compatibility needs R", full_branch, "+, which does not support ", a->name, " (",
          GpuLabel(g), "); R", *a->last_branch, " runs it through minor-version compatibility"));
      add_ids(a->provenance.source);
    }
    if (a->first_branch && *a->first_branch > any_branch) {
      r.warnings.push_back(absl::StrCat(a->name, " GPUs (", GpuLabel(g), ") need branch R",
                                        *a->first_branch, "+ whatever the CUDA version"));
      add_ids(a->provenance.source);
    }
    if (!r.forward_compat.empty() && !FcEligible(data, g)) {
      r.warnings.push_back(absl::StrCat(
          "forward compatibility is not available on ", GpuLabel(g), " (",
          g.segment.empty() ? "not known to be a datacenter GPU" : g.segment + " GPU",
          "; CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE, 804)"));
    }
  }
  for (const std::string& id : ids) {
    auto it = data.sources.find(id);
    r.sources.push_back({id, it == data.sources.end() ? std::string() : it->second});
  }
  return r;
}

// ---------------------------------------------------------------------------------------------
// Rendering.

namespace {

nlohmann::ordered_json OptJson(const std::optional<Version>& v) {
  return v ? nlohmann::ordered_json(v->ToString()) : nlohmann::ordered_json(nullptr);
}

nlohmann::ordered_json GpuJson(const GpuRef& g) {
  nlohmann::ordered_json j = {{"name", g.name},
                      {"architecture", g.arch.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(g.arch)},
                      {"computeCapability", OptJson(g.cc)},
                      {"segment", g.segment.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(g.segment)},
                      {"inDataSet", g.in_data_set}};
  if (g.pci_device_id) {
    char buf[8];
    snprintf(buf, sizeof(buf), "0x%04x", *g.pci_device_id);
    j["pciDeviceId"] = buf;
  } else {
    j["pciDeviceId"] = nullptr;
  }
  return j;
}

nlohmann::ordered_json SourcesJson(const std::vector<SourceRef>& sources) {
  nlohmann::ordered_json a = nlohmann::ordered_json::array();
  for (const SourceRef& s : sources) a.push_back({{"id", s.id}, {"text", s.text}});
  return a;
}

nlohmann::ordered_json FindingJson(const Finding& f) {
  return {{"rule", f.rule},
          {"result", std::string(VerdictName(f.severity))},
          {"layer", f.layer},
          {"text", f.sentence},
          {"source", f.source},
          {"confidence", std::string(ConfidenceName(f.confidence))},
          {"gpu", f.gpu.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(f.gpu)}};
}

const char* VerdictColor(Verdict v) {
  switch (v) {
    case Verdict::kCompatible:
      return "\033[32m";
    case Verdict::kCompatibleWithCaveats:
      return "\033[33m";
    case Verdict::kIncompatible:
      return "\033[31m";
    case Verdict::kUnknown:
      return "\033[35m";
  }
  return "";
}

std::string GpuLine(const GpuRef& g) {
  std::string s = g.name.empty() ? std::string("(unnamed GPU)") : g.name;
  std::vector<std::string> parts;
  if (!g.arch.empty()) parts.push_back(g.arch);
  if (g.cc) parts.push_back("cc " + g.cc->ToString());
  if (!g.segment.empty()) parts.push_back(g.segment);
  if (g.pci_device_id) {
    char buf[8];
    snprintf(buf, sizeof(buf), "0x%04x", *g.pci_device_id);
    parts.push_back(std::string("pci ") + buf);
  }
  if (!parts.empty()) absl::StrAppend(&s, " (", absl::StrJoin(parts, ", "), ")");
  return s;
}

}  // namespace

nlohmann::ordered_json ToJson(const CompatReport& r) {
  const WorkloadSpec& w = r.workload;
  nlohmann::ordered_json workload = {
      {"input", w.input},
      {"family", w.family.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(w.family)},
      {"cuda", OptJson(w.cuda)},
      {"framework", w.framework.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(w.framework)},
      {"frameworkVersion", OptJson(w.framework_version)},
      {"wheel", w.wheel.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(w.wheel)},
      {"cudnn", w.cudnn.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(w.cudnn)},
      {"flavor", w.flavor.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(w.flavor)},
      {"os", w.os.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(w.os)},
      {"derivedFrom", w.derived_from},
      {"confidence", std::string(ConfidenceName(w.confidence))},
      {"shipsCudaCompat", w.ships_cuda_compat}};
  nlohmann::ordered_json gpus = nlohmann::ordered_json::array();
  for (const GpuRef& g : r.target.gpus) gpus.push_back(GpuJson(g));
  nlohmann::ordered_json fixes = nlohmann::ordered_json::array();
  for (const Fix& f : r.fixes) fixes.push_back({{"cost", f.cost}, {"kind", f.kind}, {"action", f.action}});
  nlohmann::ordered_json findings = nlohmann::ordered_json::array();
  for (const Finding& f : r.findings) findings.push_back(FindingJson(f));
  const CompatFacts& fa = r.facts;
  nlohmann::ordered_json facts = {
      {"driver", OptJson(fa.driver)},
      {"driverBranch", fa.branch ? nlohmann::ordered_json(*fa.branch) : nlohmann::ordered_json(nullptr)},
      {"branchMaxCuda", OptJson(fa.branch_max_cuda)},
      {"workloadCuda", OptJson(fa.workload_cuda)},
      {"toolkitDriver", OptJson(fa.toolkit_driver)},
      {"toolkitDriverLatest", OptJson(fa.toolkit_driver_latest)},
      {"toolkitPairedBranch",
       fa.toolkit_paired_branch ? nlohmann::ordered_json(*fa.toolkit_paired_branch) : nlohmann::ordered_json(nullptr)},
      {"minorCompatFloor", OptJson(fa.minor_compat_floor)},
      {"forwardCompatPackage", fa.forward_compat_package.empty()
                                   ? nlohmann::ordered_json(nullptr)
                                   : nlohmann::ordered_json(fa.forward_compat_package)}};
  return {{"apiVersion", "gpunode/v1"},
          {"kind", "CompatReport"},
          {"verdict", std::string(VerdictName(r.verdict))},
          {"workload", workload},
          {"target",
           {{"origin", r.target.origin},
            {"driver", OptJson(r.target.driver)},
            {"gpus", gpus}}},
          {"rule",
           {{"id", r.decision.rule},
            {"text", r.decision.sentence},
            {"layer", r.decision.layer},
            {"source", r.decision.source},
            {"confidence", std::string(ConfidenceName(r.decision.confidence))}}},
          {"layer", r.decision.layer},
          {"caveats", r.caveats},
          {"fixes", fixes},
          {"needed", r.needed},
          {"notes", r.notes},
          {"facts", facts},
          {"findings", findings},
          {"sources", SourcesJson(r.sources)},
          {"dataSet", r.data_origin}};
}

nlohmann::ordered_json ToJson(const DriverForReport& r) {
  nlohmann::ordered_json gpus = nlohmann::ordered_json::array();
  for (const GpuRef& g : r.gpus) gpus.push_back(GpuJson(g));
  return {{"apiVersion", "gpunode/v1"},
          {"kind", "DriverRequirement"},
          {"cuda", r.cuda.ToString()},
          {"known", r.known},
          {"releases", r.releases},
          {"fullCompatibility",
           {{"minimumDriver", OptJson(r.toolkit_driver)},
            {"latestUpdateDriver", OptJson(r.toolkit_driver_latest)},
            {"pairedBranch", r.paired_branch ? nlohmann::ordered_json(*r.paired_branch) : nlohmann::ordered_json(nullptr)}}},
          {"minorVersionCompatibility", {{"minimumDriver", OptJson(r.minor_compat_floor)}}},
          {"branches", r.branches},
          {"forwardCompatibility", r.forward_compat},
          {"gpus", gpus},
          {"warnings", r.warnings},
          {"notes", r.notes},
          {"sources", SourcesJson(r.sources)},
          {"dataSet", r.data_origin}};
}

std::string RenderText(const CompatReport& r, bool color) {
  const char* reset = color ? "\033[0m" : "";
  const char* bold = color ? "\033[1m" : "";
  std::string out;
  absl::StrAppend(&out, bold, "verdict: ", reset, color ? VerdictColor(r.verdict) : "",
                  VerdictName(r.verdict), reset, "\n");
  const WorkloadSpec& w = r.workload;
  absl::StrAppend(&out, "workload: ", w.input, "\n");
  if (!w.derived_from.empty()) absl::StrAppend(&out, "          ", w.derived_from, "\n");
  std::string target = r.target.origin;
  if (r.target.driver) absl::StrAppend(&target, ": driver ", r.target.driver->ToString());
  if (r.facts.branch) {
    absl::StrAppend(&target, " (R", *r.facts.branch);
    if (r.facts.branch_max_cuda) {
      absl::StrAppend(&target, ", CUDA <= ", r.facts.branch_max_cuda->ToString());
    }
    absl::StrAppend(&target, ")");
  }
  absl::StrAppend(&out, "target: ", target, "\n");
  for (const GpuRef& g : r.target.gpus) absl::StrAppend(&out, "  gpu: ", GpuLine(g), "\n");
  if (!r.decision.rule.empty()) {
    absl::StrAppend(&out, "rule: ", r.decision.rule, " [", r.decision.layer, "]\n  ",
                    r.decision.sentence, "\n");
  }
  if (!r.caveats.empty()) {
    absl::StrAppend(&out, "caveats:\n");
    for (const std::string& c : r.caveats) absl::StrAppend(&out, "  - ", c, "\n");
  }
  if (!r.fixes.empty()) {
    absl::StrAppend(&out, "fixes (cheapest first):\n");
    int i = 1;
    for (const Fix& f : r.fixes) absl::StrAppend(&out, "  ", i++, ". ", f.action, "\n");
  }
  if (!r.needed.empty()) {
    absl::StrAppend(&out, "to decide, gpunode needs:\n");
    for (const std::string& n : r.needed) absl::StrAppend(&out, "  - ", n, "\n");
  }
  if (!r.notes.empty()) {
    absl::StrAppend(&out, "notes:\n");
    for (const std::string& n : r.notes) absl::StrAppend(&out, "  - ", n, "\n");
  }
  const CompatFacts& fa = r.facts;
  if (fa.toolkit_driver || fa.minor_compat_floor || fa.toolkit_paired_branch) {
    absl::StrAppend(&out, "facts:");
    if (fa.toolkit_driver) {
      absl::StrAppend(&out, " toolkit driver >= ", fa.toolkit_driver->ToString());
      if (fa.toolkit_driver_latest && *fa.toolkit_driver_latest != *fa.toolkit_driver) {
        absl::StrAppend(&out, " (latest update >= ", fa.toolkit_driver_latest->ToString(), ")");
      }
      absl::StrAppend(&out, ";");
    } else if (fa.toolkit_paired_branch) {
      absl::StrAppend(&out, " toolkit branch R", *fa.toolkit_paired_branch, "+;");
    }
    if (fa.minor_compat_floor) {
      absl::StrAppend(&out, " minor-version floor >= ", fa.minor_compat_floor->ToString(), ";");
    }
    out.back() = '\n';
  }
  if (!r.sources.empty()) {
    absl::StrAppend(&out, "sources:\n");
    for (const SourceRef& s : r.sources) absl::StrAppend(&out, "  [", s.id, "] ", s.text, "\n");
  }
  return out;
}

std::string RenderText(const DriverForReport& r, bool color) {
  const char* reset = color ? "\033[0m" : "";
  const char* bold = color ? "\033[1m" : "";
  std::string out;
  absl::StrAppend(&out, bold, "CUDA ", r.cuda.ToString(), reset);
  if (!r.releases.empty()) absl::StrAppend(&out, " (", absl::StrJoin(r.releases, ", "), ")");
  absl::StrAppend(&out, "\n");
  if (r.toolkit_driver) {
    absl::StrAppend(&out, "  full compatibility:    driver >= ", r.toolkit_driver->ToString());
    if (r.toolkit_driver_latest && *r.toolkit_driver_latest != *r.toolkit_driver) {
      absl::StrAppend(&out, " (>= ", r.toolkit_driver_latest->ToString(),
                      " for the latest update)");
    }
    absl::StrAppend(&out, "\n");
  } else if (r.paired_branch) {
    absl::StrAppend(&out, "  full compatibility:    driver branch R", *r.paired_branch,
                    "+ (exact driver not captured)\n");
  }
  if (r.minor_compat_floor) {
    absl::StrAppend(&out, "  minor-version compat:  driver >= ", r.minor_compat_floor->ToString(),
                    " (limited features; no PTX JIT of newer PTX)\n");
  } else if (r.known) {
    absl::StrAppend(&out, "  minor-version compat:  none for CUDA ", r.cuda.major(), ".x\n");
  }
  if (!r.branches.empty()) {
    std::vector<std::string> b;
    for (int x : r.branches) b.push_back(absl::StrCat("R", x));
    absl::StrAppend(&out, "  branches (native):     ", absl::StrJoin(b, ", "), "\n");
  }
  if (!r.forward_compat.empty()) {
    absl::StrAppend(&out, "  forward compatibility: ", absl::StrJoin(r.forward_compat, "; "),
                    " (datacenter GPUs)\n");
  }
  for (const GpuRef& g : r.gpus) absl::StrAppend(&out, "  gpu: ", GpuLine(g), "\n");
  if (!r.warnings.empty()) {
    absl::StrAppend(&out, color ? "\033[33m" : "", "warnings:", reset, "\n");
    for (const std::string& w : r.warnings) absl::StrAppend(&out, "  - ", w, "\n");
  }
  if (!r.notes.empty()) {
    absl::StrAppend(&out, "notes:\n");
    for (const std::string& n : r.notes) absl::StrAppend(&out, "  - ", n, "\n");
  }
  if (!r.sources.empty()) {
    absl::StrAppend(&out, "sources:\n");
    for (const SourceRef& s : r.sources) absl::StrAppend(&out, "  [", s.id, "] ", s.text, "\n");
  }
  return out;
}

}  // namespace gpunode::compat
