#include "src/compat/engine.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/compat/engine_internal.h"

namespace gpunode::compat {

namespace {

using namespace internal;  // NOLINT(build/namespaces): the engine's own helpers

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
      ImageRequires();
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
    ImageRequires();
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

  // Rule image-requires (image_requires.cc): the image's NVIDIA_REQUIRE_*, as the shim checks them.
  void ImageRequires() {
    ImageRequiresOutcome o = JudgeImageRequires(d_, w(), r_.target);
    if (!o.ran) return;
    Add(o.severity, "image-requires", kLayerWorkload, o.sentence, "", Confidence::kOfficial);
    for (Fix& f : o.fixes) AddFix(o.severity, f.kind, f.cost, f.action);
    for (std::string& n : o.notes) r_.notes.push_back(std::move(n));
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

  // What the user-space driver rules know about the workload's CUDA release, and the phrases
  // their sentences share.
  struct ToolkitView {
    ToolkitInfo tk;
    const MinorCompat* mc = nullptr;
    FcCheck fc;
    std::string cuda_text;    // "12.4"
    std::string release;      // "CUDA 12.4 GA"
    std::string bmax;         // the branch's max CUDA; "?" when unknown
    std::string driver_text;  // "driver 535.104.05 (R535, CUDA <= 12.2)"
  };

  // What the target's GPUs allow: they block driver upgrades and forward compatibility.
  struct GpuLimits {
    std::optional<int> arch_max_major;  // highest CUDA major every GPU's architecture allows
    std::optional<int> arch_last_branch;
    std::string arch_last_name;
    bool all_fc_eligible = false;
    std::vector<std::string> not_eligible;
  };

  // The outcome when the driver is below the toolkit driver.
  struct BelowToolkit {
    Verdict severity = Verdict::kIncompatible;
    bool via_fc = false;
    std::optional<Version> minimum;  // lowest driver that runs it at all
  };

  // Rules paired-driver, minor-version-compat, forward-compat, minimum-driver.
  void UserDriverVsToolkit() {
    const ToolkitView v = ViewToolkit();
    if (JudgeAtOrAboveToolkit(v)) return;
    const GpuLimits lim = LimitsOfGpus();
    const BelowToolkit below = JudgeBelowToolkit(v, lim);
    AddUpgradeDriverFix(v, lim, below);
    AddForwardCompatFix(v, lim, below);
    AddChangeImageFix(lim, below.severity);
  }

  // Looks up the toolkit, minor-version and forward-compat data of cuda_ and records the facts.
  ToolkitView ViewToolkit() {
    ToolkitView v;
    v.tk = LookupToolkit(d_, cuda_);
    v.mc = d_.FindMinorCompat(static_cast<int>(cuda_.major()));
    r_.facts.toolkit_driver = v.tk.min_driver;
    r_.facts.toolkit_driver_latest = v.tk.latest_driver;
    r_.facts.toolkit_paired_branch = v.tk.paired_branch;
    if (v.mc) r_.facts.minor_compat_floor = v.mc->floor;
    if (!v.tk.note.empty()) r_.notes.push_back(v.tk.note);
    v.fc = CheckForwardCompat(d_, cuda_, branch_);
    if (!v.fc.package.empty()) r_.facts.forward_compat_package = v.fc.package;
    v.cuda_text = cuda_.ToString();
    v.release = v.tk.releases.empty() ? absl::StrCat("CUDA ", v.cuda_text)
                                      : absl::StrCat("CUDA ", v.tk.releases.front());
    v.bmax = r_.facts.branch_max_cuda ? r_.facts.branch_max_cuda->ToString() : std::string("?");
    v.driver_text =
        absl::StrCat("driver ", driver_.ToString(), " (R", branch_, ", CUDA <= ", v.bmax, ")");
    return v;
  }

  // Rules paired-driver / paired-branch / branch-max-cuda / unknown-toolkit: the cases decided
  // without minor-version or forward compatibility. Returns whether one of them decided.
  bool JudgeAtOrAboveToolkit(const ToolkitView& v) {
    const ToolkitInfo& tk = v.tk;
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
            absl::StrCat("R", branch_, " is the branch of the toolkit driver of ", v.release, " (",
                         tk.min_driver->ToString(), "): full compatibility on R", branch_,
                         " releases from ", tk.min_driver->ToString(),
                         " (give the full version, e.g. --driver ", tk.min_driver->ToString(),
                         ", to check one release)"),
            tk.provenance.source, tk.provenance.confidence);
        return true;
      }
      std::string need = tk.min_driver ? absl::StrCat(">= ", tk.min_driver->ToString())
                                       : absl::StrCat("branch R", *tk.paired_branch, "+");
      Add(Verdict::kCompatible, tk.min_driver ? "paired-driver" : "paired-branch",
          kLayerUserDriver,
          absl::StrCat(v.driver_text, " is at or above the toolkit driver of ", v.release, " (",
                       need, "): full compatibility"),
          tk.provenance.source, tk.provenance.confidence);
      return true;
    }
    if (!tk.known && r_.facts.branch_max_cuda && exact_branch() &&
        *r_.facts.branch_max_cuda >= cuda_.Truncate(2)) {
      const DriverBranch* b = d_.FindBranch(branch_);
      Add(Verdict::kCompatible, "branch-max-cuda", kLayerUserDriver,
          absl::StrCat(v.driver_text, " supports CUDA up to ", v.bmax, ", which covers CUDA ",
                       v.cuda_text, " (not itself in the data set)"),
          b->provenance.source, b->provenance.confidence);
      return true;
    }
    if (!tk.known && !v.mc) {
      Add(Verdict::kUnknown, "unknown-toolkit", kLayerUserDriver,
          absl::StrCat("CUDA ", v.cuda_text,
                       " is not in the data set (neither the release nor CUDA ", cuda_.major(),
                       ".x)"),
          "", Confidence::kUnconfirmed);
      r_.needed.push_back(absl::StrCat("a data set that lists CUDA ", v.cuda_text,
                                       " and its driver (--data FILE)"));
      return true;
    }
    return false;
  }

  // Which GPUs block driver upgrades or forward compatibility.
  GpuLimits LimitsOfGpus() const {
    GpuLimits lim;
    for (const GpuRef& g : r_.target.gpus) {
      if (const Architecture* a = ArchOf(g)) {
        if (a->last_cuda_major &&
            (!lim.arch_max_major || *a->last_cuda_major < *lim.arch_max_major)) {
          lim.arch_max_major = a->last_cuda_major;
        }
        if (a->last_branch && (!lim.arch_last_branch || *a->last_branch < *lim.arch_last_branch)) {
          lim.arch_last_branch = a->last_branch;
          lim.arch_last_name = a->name;
        }
      }
    }
    lim.all_fc_eligible = !r_.target.gpus.empty();
    for (const GpuRef& g : r_.target.gpus) {
      if (!FcEligible(d_, g)) {
        lim.all_fc_eligible = false;
        lim.not_eligible.push_back(absl::StrCat(GpuLabel(g), " is ",
                                                g.segment.empty()
                                                    ? "not known to be a datacenter GPU"
                                                    : "a " + g.segment + " GPU"));
      }
    }
    return lim;
  }

  // Below the toolkit driver: minor-version compatibility, else forward compatibility, else
  // incompatible.
  BelowToolkit JudgeBelowToolkit(const ToolkitView& v, const GpuLimits& lim) {
    BelowToolkit below;
    if (v.mc && v.mc->floor && driver_ >= *v.mc->floor) {
      below.severity = Verdict::kCompatibleWithCaveats;
      AddMinorVersionCompat(v);
      return below;
    }
    below.minimum = v.mc && v.mc->floor ? v.mc->floor : v.tk.min_driver;
    if (w().ships_cuda_compat && v.fc.available && lim.all_fc_eligible) {
      below.severity = Verdict::kCompatibleWithCaveats;
      below.via_fc = true;
      AddForwardCompat(v, below.minimum);
    } else {
      below.severity = Verdict::kIncompatible;
      AddMinimumDriver(v, lim, below.minimum);
    }
    return below;
  }

  // Rule minor-version-compat (the driver is at or above the floor of the CUDA major).
  void AddMinorVersionCompat(const ToolkitView& v) {
    const MinorCompat& mc = *v.mc;
    std::string below = v.tk.min_driver
                            ? absl::StrCat("below the toolkit driver of ", v.release, " (",
                                           v.tk.min_driver->ToString(), ")")
                            : absl::StrCat("without a known toolkit driver for CUDA ",
                                           v.cuda_text);
    Add(Verdict::kCompatibleWithCaveats, "minor-version-compat", kLayerUserDriver,
        absl::StrCat(v.driver_text, " is ", below, " but at or above ", mc.floor->ToString(),
                     ", the minor-version compatibility floor of CUDA ", mc.cuda_major,
                     ".x: it runs with minor-version compatibility"),
        mc.provenance.source, mc.provenance.confidence);
    r_.caveats.push_back(absl::StrCat(
        "minor-version compatibility has a limited feature set: CUDA features that need a "
        "driver newer than R",
        branch_, " (CUDA ", v.bmax, ") are unavailable"));
    r_.caveats.push_back(absl::StrCat(
        "no PTX JIT of newer PTX: PTX produced by CUDA ", MajorMinor(cuda_),
        " (embedded in binaries or generated at run time) cannot be compiled by this driver and "
        "fails with CUDA_ERROR_UNSUPPORTED_PTX_VERSION (222); only code compiled to SASS for "
        "the GPU runs"));
    sources_.push_back("ERR222");
  }

  // Rule forward-compat (the image carries the compat package and every GPU may use it).
  void AddForwardCompat(const ToolkitView& v, const std::optional<Version>& minimum) {
    Add(Verdict::kCompatibleWithCaveats, "forward-compat", kLayerUserDriver,
        absl::StrCat(v.driver_text, " is below ", minimum ? minimum->ToString() : "the minimum",
                     " needed by CUDA ", v.cuda_text, ", but the image carries ", v.fc.package,
                     " and NVIDIA's forward-compatibility matrix supports it on R", branch_,
                     " for datacenter GPUs"),
        d_.forward_compat.provenance.source, d_.forward_compat.provenance.confidence);
    r_.caveats.push_back(absl::StrCat(
        "runs only through the image's forward-compatibility libraries (", v.fc.package,
        "): they must be the ones loaded (the NVIDIA Container Toolkit does this for images "
        "that set NV_CUDA_COMPAT_PACKAGE; otherwise put /usr/local/cuda/compat on "
        "LD_LIBRARY_PATH)"));
    r_.caveats.push_back(
        "forward compatibility does not cover OpenGL/Vulkan interop; a mismatch between the "
        "kernel-mode driver and the compat libraries reports CUDA_ERROR_SYSTEM_DRIVER_MISMATCH "
        "(803)");
    if (!v.fc.nfb_warning.empty()) r_.caveats.push_back(v.fc.nfb_warning);
  }

  // Rule minimum-driver (incompatible).
  void AddMinimumDriver(const ToolkitView& v, const GpuLimits& lim,
                        const std::optional<Version>& minimum) {
    const MinorCompat* mc = v.mc;
    std::string why;
    if (mc && mc->floor) {
      why = absl::StrCat("the minor-version compatibility floor of CUDA ", mc->cuda_major, ".x");
    } else if (v.tk.min_driver) {
      why = absl::StrCat("its toolkit driver; CUDA ", cuda_.major(),
                         ".x has no minor-version compatibility");
    }
    std::string sentence =
        absl::StrCat("CUDA ", v.cuda_text, " needs driver >= ",
                     minimum ? minimum->ToString() : std::string("(unknown)"),
                     why.empty() ? "" : " (" + why + ")", "; this is ", v.driver_text);
    int needed_branch = minimum ? static_cast<int>(minimum->major()) : 0;
    if (lim.arch_last_branch && needed_branch > *lim.arch_last_branch) {
      absl::StrAppend(&sentence, ", and R", *lim.arch_last_branch, " is the last branch for ",
                      lim.arch_last_name, ", so no driver upgrade makes this GPU run CUDA ",
                      cuda_.major(), ".x");
    }
    const Provenance& p = mc && mc->floor ? mc->provenance : v.tk.provenance;
    Add(Verdict::kIncompatible, "minimum-driver", kLayerUserDriver, sentence, p.source,
        p.confidence);
  }

  // Fix upgrade-driver, unless the GPUs' last branch is below the one the CUDA release needs.
  void AddUpgradeDriverFix(const ToolkitView& v, const GpuLimits& lim, const BelowToolkit& below) {
    std::optional<Version> target = v.tk.latest_driver;
    int target_branch = target ? static_cast<int>(target->major())
                               : (v.tk.paired_branch ? *v.tk.paired_branch : 0);
    bool driver_blocked = lim.arch_last_branch && target_branch > *lim.arch_last_branch;
    if (target_branch > 0 && !driver_blocked) {
      std::string to = target ? absl::StrCat(">= ", target->ToString(), " (R", target_branch, "+)")
                              : absl::StrCat("branch R", target_branch, "+");
      std::string action = absl::StrCat("upgrade the driver to ", to,
                                        " for full compatibility with CUDA ", v.cuda_text);
      const std::optional<Version>& minimum = below.minimum;
      if (below.severity == Verdict::kIncompatible && minimum && minimum != target &&
          !(lim.arch_last_branch && static_cast<int>(minimum->major()) > *lim.arch_last_branch)) {
        absl::StrAppend(&action, "; >= ", minimum->ToString(),
                        " is the minimum (minor-version compatibility)");
      }
      AddFix(below.severity, "upgrade-driver", kCostDriver, action);
    } else if (driver_blocked) {
      r_.notes.push_back(absl::StrCat("a driver upgrade cannot help: CUDA ", v.cuda_text,
                                      " needs R", target_branch, "+, and R",
                                      *lim.arch_last_branch, " is the last branch for ",
                                      lim.arch_last_name));
    }
  }

  // Fix forward-compat when the matrix allows it and the image does not already use it; else
  // a note saying why not.
  void AddForwardCompatFix(const ToolkitView& v, const GpuLimits& lim, const BelowToolkit& below) {
    const FcCheck& fc = v.fc;
    if (!below.via_fc && fc.available) {
      if (r_.target.gpus.empty()) {
        AddFix(below.severity, "forward-compat", kCostForwardCompat,
               absl::StrCat("use forward compatibility: ", fc.package, " on R", branch_,
                            " (a supported branch in NVIDIA's forward-compatibility matrix); "
                            "datacenter GPUs only"));
      } else if (lim.all_fc_eligible) {
        AddFix(below.severity, "forward-compat", kCostForwardCompat,
               absl::StrCat("use forward compatibility: install ", fc.package,
                            " (in the image, or on the host) on this datacenter GPU; branch R",
                            branch_,
                            " is a supported target in NVIDIA's forward-compatibility matrix"));
      } else {
        r_.notes.push_back(absl::StrCat(
            "forward compatibility is not possible: ", absl::StrJoin(lim.not_eligible, "; "),
            " (compat libraries there fail with CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE, 804)"));
      }
      if (!fc.nfb_warning.empty() && !below.via_fc) r_.notes.push_back(fc.nfb_warning);
    } else if (!fc.available && !fc.package.empty() && !fc.paired) {
      r_.notes.push_back(absl::StrCat("forward compatibility is not possible: ", fc.why_not));
    }
  }

  // Fix change-image: the newest CUDA this driver runs with full (or minor-version) compatibility.
  void AddChangeImageFix(const GpuLimits& lim, Verdict severity) {
    std::optional<Version> best_full = BestFullCuda(d_, driver_, lim.arch_max_major);
    std::optional<int> best_mc = BestMinorCompatMajor(d_, driver_, lim.arch_max_major);
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
    SourceIdList ids;
    ids.Add(r_.decision.source);
    for (const Finding& f : r_.findings) {
      if (f.severity != Verdict::kCompatible) ids.Add(f.source);
    }
    if (verdict != Verdict::kCompatible) {
      for (const std::string& s : sources_) ids.Add(s);
    }
    ids.Add(r_.workload.source);
    r_.sources = ids.Resolve(d_);
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

}  // namespace gpunode::compat
