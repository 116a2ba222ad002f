// Rule image-requires: the image's own NVIDIA_REQUIRE_* variables, evaluated against the target
// exactly as the OCI shim evaluates them at container start (requirement.h, after
// libnvidia-container's configure.c), so `compat check` and the container agree.
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/compat/engine_internal.h"
#include "src/compat/requirement.h"

namespace gpunode::compat::internal {
namespace {

// The brand NVML would report, when the target does not say (--gpu NAME): from the segment, as
// current drivers brand their lines. Empty when unknown (brand terms then hold, as in the shim).
std::string BrandOf(const GpuRef& g) {
  if (!g.brand.empty()) return g.brand;
  if (g.segment == "datacenter") return "nvidia";
  if (g.segment == "consumer") return "geforce";
  if (g.segment == "workstation") return "nvidiartx";
  return "";
}

// The first `cuda>=X` (or `cuda>X`) term of a requirement's groups.
std::optional<Version> CudaFloor(const Requirement& r) {
  for (const ReqGroup& g : r.groups) {
    for (const ReqTerm& t : g.terms) {
      if (t.key == ReqKey::kCuda && (t.op == ReqOp::kGreaterEqual || t.op == ReqOp::kGreater)) {
        auto v = Version::Parse(t.value, "cuda");
        if (v.ok()) return *v;
      }
    }
  }
  return std::nullopt;
}

// The branches B of `driver>=B` terms in groups that failed only on versions (their brand held):
// the driver branches the image admits on this GPU.
std::set<int> AdmittedBranches(const RequirementFailure& f, const Requirement& r) {
  std::set<int> out;
  for (const GroupFailure& gf : f.groups) {
    if (!gf.brand_matched) continue;
    for (const ReqGroup& g : r.groups) {
      if (g.text != gf.group) continue;
      bool has_brand = false;
      for (const ReqTerm& t : g.terms) has_brand |= t.key == ReqKey::kBrand;
      if (!has_brand) continue;
      for (const ReqTerm& t : g.terms) {
        if (t.key == ReqKey::kDriver && t.op == ReqOp::kGreaterEqual) {
          auto v = Version::Parse(t.value, "driver");
          if (v.ok()) out.insert(static_cast<int>(v->major()));
        }
      }
    }
  }
  return out;
}

}  // namespace

ImageRequiresOutcome JudgeImageRequires(const CompatData& d, const WorkloadSpec& w, const NodeTarget& t) {
  ImageRequiresOutcome out;
  if (w.requirements.empty() || w.disable_require || !t.driver) return out;
  out.ran = true;
  auto reqs = RequirementsFromEnv(w.requirements);
  if (!reqs.ok()) {
    out.severity = Verdict::kIncompatible;
    out.sentence = absl::StrCat("the image's requirement does not parse, so NVIDIA's hook and gpunode's OCI shim "
                                "refuse to start it: ",
                                reqs.status().message());
    out.fixes.push_back({"change-image", kCostImage, "fix the image's NVIDIA_REQUIRE_* value"});
    return out;
  }
  ReqFacts facts;
  facts.driver = t.driver->ToString();
  if (t.cuda_driver) {
    facts.cuda = MajorMinor(*t.cuda_driver);
  } else {
    bool exact = false;
    auto max = BranchMaxCuda(d, static_cast<int>(t.driver->major()), &exact);
    if (max && exact) {
      facts.cuda = MajorMinor(*max);
      out.notes.push_back(absl::StrCat("image-requires: the driver's CUDA version (", facts.cuda,
                                       ") is the data set's for branch R", t.driver->major(),
                                       "; on a node it is read from NVML"));
    }
  }
  for (const GpuRef& g : t.gpus) {
    ReqDevice dev;
    dev.label = GpuLabel(g);
    dev.brand = BrandOf(g);
    if (g.brand.empty() && !dev.brand.empty()) {
      out.notes.push_back(absl::StrCat("image-requires: ", dev.label, " taken as brand ", dev.brand, " (a ",
                                       g.segment, " GPU; NVML gives the brand on a node)"));
    }
    if (g.cc) dev.arch = MajorMinor(*g.cc);
    facts.devices.push_back(std::move(dev));
  }
  const RequirementOutcome o = EvaluateRequirements(reqs->requirements, facts);
  std::vector<std::string> names;
  for (const Requirement& r : reqs->requirements) names.push_back(r.name);
  if (o.satisfied) {
    out.severity = Verdict::kCompatible;
    out.sentence = absl::StrCat("the image's ", absl::StrJoin(names, ", "), " hold",
                                names.size() == 1 ? "s" : "", " on driver ", facts.driver,
                                facts.cuda.empty() ? "" : " (CUDA " + facts.cuda + ")");
    if (!o.held_by.empty()) absl::StrAppend(&out.sentence, ": ", absl::StrJoin(o.held_by, "; "));
    for (const std::string& h : o.held_by) {
      if (h.find("driver>=") != std::string::npos && h.find("cuda>=") == std::string::npos) {
        absl::StrAppend(&out.sentence,
                        " (a driver branch the image admits below its CUDA version: it runs through "
                        "forward compatibility, with the CUDA compat libraries the image carries)");
        break;
      }
    }
    return out;
  }
  out.severity = Verdict::kIncompatible;
  out.sentence = absl::StrCat("the container would not start: NVIDIA's hook and gpunode's OCI shim refuse it with ",
                              o.Message());
  // Cheapest fixes: the driver the requirement's cuda>= term needs, a branch the image admits on
  // this GPU, or turning the check off (with its risk).
  std::set<int> admitted;
  std::optional<Version> cuda_floor;
  for (const RequirementFailure& f : o.failures) {
    for (const Requirement& r : reqs->requirements) {
      if (r.name != f.requirement) continue;
      if (!cuda_floor) cuda_floor = CudaFloor(r);
      for (int b : AdmittedBranches(f, r)) admitted.insert(b);
    }
  }
  if (cuda_floor) {
    ToolkitInfo tk = LookupToolkit(d, *cuda_floor);
    out.fixes.push_back({"upgrade-driver", kCostDriver,
                         tk.min_driver ? absl::StrCat("upgrade the driver to >= ", tk.min_driver->ToString(), " (R",
                                                      tk.min_driver->major(), "+), which runs CUDA ",
                                                      MajorMinor(*cuda_floor))
                                       : absl::StrCat("upgrade to a driver that runs CUDA ", MajorMinor(*cuda_floor))});
  }
  admitted.erase(static_cast<int>(t.driver->major()));
  if (!admitted.empty()) {
    std::vector<std::string> rs;
    for (int b : admitted) rs.push_back(absl::StrCat("R", b));
    out.fixes.push_back({"change-driver", kCostForwardCompat,
                         absl::StrCat("or install a driver of branch ", absl::StrJoin(rs, ", "),
                                      ": the image admits these on this GPU's brand (forward compatibility through "
                                      "its CUDA compat libraries, datacenter GPUs)")});
  }
  out.fixes.push_back({"disable-require", kCostGpu + 1,
                       "set NVIDIA_DISABLE_REQUIRE=true in the container's environment to skip the check: it then "
                       "starts, and its CUDA calls fail (CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, or 804 when compat "
                       "libraries meet a GPU that does not support them) unless the driver runs the image's CUDA"});
  return out;
}

}  // namespace gpunode::compat::internal
