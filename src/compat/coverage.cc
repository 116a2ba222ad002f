#include "src/compat/coverage.h"

#include <algorithm>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "src/base/version.h"

namespace gpunode::compat {
namespace {

// The numeric key of a tag: "v0.8.5" -> 0.8.5, "25.08-py3" -> 25.8, "3.3.7" -> 3.3.7.
std::optional<Version> TagKey(absl::string_view tag) {
  absl::string_view t = tag;
  absl::ConsumePrefix(&t, "v");
  size_t end = 0;
  while (end < t.size() && (absl::ascii_isdigit(static_cast<unsigned char>(t[end])) || t[end] == '.')) {
    ++end;
  }
  t = t.substr(0, end);
  while (!t.empty() && t.back() == '.') t.remove_suffix(1);
  if (t.empty()) return std::nullopt;
  auto v = Version::Parse(t);
  if (!v.ok()) return std::nullopt;
  return *v;
}

FamilyCoverage FromTags(std::string name, std::string section, std::string unit,
                        std::vector<std::string> tags) {
  FamilyCoverage c;
  c.name = std::move(name);
  c.section = std::move(section);
  c.unit = std::move(unit);
  std::vector<std::string> sorted = SortTags(std::move(tags));
  c.count = sorted.size();
  if (!sorted.empty()) {
    c.first = sorted.front();
    c.last = sorted.back();
  }
  return c;
}

template <typename T, typename Fn>
std::vector<std::string> Collect(const std::vector<T>& rows, Fn fn) {
  std::vector<std::string> out;
  for (const T& r : rows) fn(r, out);
  return out;
}

}  // namespace

std::vector<std::string> SortTags(std::vector<std::string> tags) {
  std::sort(tags.begin(), tags.end());
  tags.erase(std::unique(tags.begin(), tags.end()), tags.end());
  std::stable_sort(tags.begin(), tags.end(), [](const std::string& a, const std::string& b) {
    std::optional<Version> ka = TagKey(a), kb = TagKey(b);
    if (ka && kb && *ka != *kb) return *ka < *kb;
    if (ka.has_value() != kb.has_value()) return ka.has_value();
    return false;
  });
  return tags;
}

FamilyCoverage ImageFamilyCoverage(const CompatData& data, const ImageFamily& family) {
  std::vector<std::string> tags;
  std::string section = "images.releases";
  std::string note;
  const std::string& p = family.parser;
  if (p == "ngc-month") {
    section = "images.ngc_pytorch";
    for (const MonthCuda& m : data.ngc_pytorch) tags.insert(tags.end(), m.tags.begin(), m.tags.end());
  } else if (p == "triton-month") {
    section = "images.tritonserver";
    for (const MonthCuda& m : data.tritonserver) tags.insert(tags.end(), m.tags.begin(), m.tags.end());
  } else if (p == "vllm") {
    section = "frameworks.vllm.images";
    for (const VllmImage& v : data.vllm_images) tags.push_back(v.tag);
  } else if (p == "cuda" || p == "pytorch") {
    section = "";
    note = "CUDA read from the tag itself";
  } else if (p == "tensorflow") {
    section = "frameworks.tensorflow";
    note = "CUDA from TensorFlow's tested build configurations";
  } else if (p == "sglang") {
    note = "CUDA read from the tag suffix -cuXYZ; tags without it from the data set";
  }
  for (const ImageRelease* r : data.ReleasesOf(family.family)) {
    tags.insert(tags.end(), r->tags.begin(), r->tags.end());
  }
  FamilyCoverage c = FromTags(family.label.empty() ? family.family : family.label, section,
                              "releases", std::move(tags));
  c.family = family.family;
  c.note = note;
  c.from_tag = p == "cuda" || p == "pytorch" || p == "sglang";
  return c;
}

std::string CoverageSummary(const FamilyCoverage& c) {
  if (c.count == 0 && c.from_tag) return "every tag that names its CUDA version";
  if (c.count == 0) return absl::StrCat("no ", c.unit, " in the data set");
  if (c.count == 1) return absl::StrCat(c.first, ", 1 ", absl::StripSuffix(c.unit, "s"));
  return absl::StrCat(c.first, "\u2013", c.last, ", ", c.count, " ", c.unit);
}

DataCoverage Coverage(const CompatData& data) {
  DataCoverage out;
  out.origin = data.origin;
  out.updated = data.updated;
  out.sources = data.sources.size();
  out.families.push_back(FromTags(
      "CUDA toolkits", "toolkits", "releases",
      Collect(data.toolkits, [](const Toolkit& t, auto& v) { v.push_back(t.cuda.ToString()); })));
  {
    FamilyCoverage c = FromTags("Driver branches", "driver_branches", "branches",
                                Collect(data.branches, [](const DriverBranch& b, auto& v) {
                                  v.push_back(absl::StrCat(b.branch));
                                }));
    if (c.count) {
      c.first = absl::StrCat("R", c.first);
      c.last = absl::StrCat("R", c.last);
    }
    out.families.push_back(std::move(c));
  }
  out.families.push_back(FromTags(
      "Forward-compat packages", "forward_compat.packages", "packages",
      Collect(data.forward_compat.packages,
              [](const FcPackage& p, auto& v) { v.push_back(p.cuda.ToString()); })));
  {
    FamilyCoverage c;
    c.name = "GPU models";
    c.section = "gpus";
    c.unit = "models";
    c.count = data.gpus.size();
    if (!data.gpus.empty()) {
      c.first = data.gpus.front().name;
      c.last = data.gpus.back().name;
    }
    c.note = "in architecture order";
    out.families.push_back(std::move(c));
  }
  out.families.push_back(FromTags(
      "PyTorch wheels", "frameworks.pytorch.releases", "releases",
      Collect(data.torch_releases,
              [](const TorchRelease& t, auto& v) { v.push_back(t.torch.ToString()); })));
  out.families.push_back(FromTags("TensorFlow builds", "frameworks.tensorflow", "releases",
                                  Collect(data.tensorflow, [](const TensorflowBuild& t, auto& v) {
                                    for (const Version& x : t.tf) v.push_back(x.ToString());
                                  })));
  out.families.push_back(FromTags(
      "JAX wheels", "frameworks.jax", "extras",
      Collect(data.jax, [](const JaxBuild& j, auto& v) { v.push_back(j.extra); })));
  for (const ImageFamily& f : data.image_families) {
    out.families.push_back(ImageFamilyCoverage(data, f));
  }
  return out;
}

nlohmann::ordered_json ToJson(const DataCoverage& coverage) {
  nlohmann::ordered_json families = nlohmann::ordered_json::array();
  for (const FamilyCoverage& c : coverage.families) {
    nlohmann::ordered_json f = {
        {"name", c.name},
        {"family", c.family.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(c.family)},
        {"section", c.section.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(c.section)},
        {"unit", c.unit},
        {"count", c.count},
        {"first", c.first.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(c.first)},
        {"last", c.last.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(c.last)},
        {"summary", CoverageSummary(c)},
        {"cudaFromTag", c.from_tag},
    };
    if (!c.note.empty()) f["note"] = c.note;
    families.push_back(std::move(f));
  }
  return {
      {"apiVersion", "gpunode/v1"},
      {"kind", "CompatDataCoverage"},
      {"dataSet", coverage.origin},
      {"updated", coverage.updated.empty() ? nlohmann::ordered_json(nullptr)
                                           : nlohmann::ordered_json(coverage.updated)},
      {"sources", coverage.sources},
      {"families", std::move(families)},
  };
}

std::string RenderText(const DataCoverage& coverage) {
  std::string out = absl::StrCat("Data set: ", coverage.origin, "\n");
  absl::StrAppend(&out, "Updated:  ", coverage.updated.empty() ? "(not stated)" : coverage.updated,
                  "\n");
  absl::StrAppend(&out, "Sources:  ", coverage.sources, "\n\n");
  size_t width = 6;
  for (const FamilyCoverage& c : coverage.families) width = std::max(width, c.name.size());
  absl::StrAppend(&out, absl::StrFormat("%-*s  %s\n", static_cast<int>(width), "FAMILY", "COVERAGE"));
  for (const FamilyCoverage& c : coverage.families) {
    std::string line = CoverageSummary(c);
    if (!c.note.empty()) absl::StrAppend(&line, " (", c.note, ")");
    absl::StrAppend(&out, absl::StrFormat("%-*s  %s\n", static_cast<int>(width), c.name, line));
  }
  return out;
}

}  // namespace gpunode::compat
