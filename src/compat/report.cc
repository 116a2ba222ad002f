#include "src/compat/report.h"

#include <cstdio>

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
  // Where the image's facts came from (issue 32): its own config, or the data set alone.
  nlohmann::ordered_json image_config = {
      {"source", w.config_source.empty() ? nlohmann::ordered_json("data set") : nlohmann::ordered_json(w.config_source)},
      {"digest", w.image_digest.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(w.image_digest)},
      {"env", w.image_env},
      {"requirements", w.requirements},
      {"disableRequire", w.disable_require},
      {"tried", w.sources_tried}};
  if (!w.input.empty() && w.family != "--cuda" && w.family.rfind("pip", 0) != 0) workload["imageConfig"] = image_config;
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
  if (!w.config_source.empty()) {
    absl::StrAppend(&out, "          answered by: ", w.config_source, "\n");
  } else if (!w.sources_tried.empty()) {
    absl::StrAppend(&out, "          answered by: the data set (the image's config was not found: ",
                    absl::StrJoin(w.sources_tried, "; "), ")\n");
  }
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
