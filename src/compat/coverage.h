// What the compat data set covers: per family (CUDA toolkits, driver branches, GPUs, PyTorch
// wheels, each image family, ...) the number of entries and the range, for `gpunode compat data`
// and for the "known family, release not in the data set (data covers A–B)" answer of an image
// whose tag the data set does not list. Pure functions over CompatData.
#ifndef GPUNODE_COMPAT_COVERAGE_H_
#define GPUNODE_COMPAT_COVERAGE_H_

#include <cstddef>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "absl/strings/string_view.h"
#include "src/compat/dataset.h"

namespace gpunode::compat {

struct FamilyCoverage {
  std::string name;    // "CUDA toolkits", "NGC PyTorch", "vLLM"
  std::string family;  // images.families[].family for image families, else empty
  std::string section; // data set section the entries come from ("toolkits", "images.releases")
  std::string unit;    // what is counted: "releases", "branches", "models", ...
  size_t count = 0;
  std::string first;   // lowest entry ("23.01", "11.0.1", "v0.8.5"); empty when count is 0
  std::string last;    // highest entry
  std::string note;    // e.g. "CUDA read from the tag" for tag-derived families
  bool from_tag = false;  // the tag itself carries the CUDA version (nvidia/cuda, pytorch/pytorch)
};

struct DataCoverage {
  std::string origin;   // CompatData::origin
  std::string updated;  // CompatData::updated (or metadata date), may be empty
  size_t sources = 0;   // entries of the sources: map
  std::vector<FamilyCoverage> families;
};

DataCoverage Coverage(const CompatData& data);
// Coverage of one image family (the tags the data set maps to a CUDA version).
FamilyCoverage ImageFamilyCoverage(const CompatData& data, const ImageFamily& family);
// "23.01–25.10, 34 releases" / "no releases in the data set".
std::string CoverageSummary(const FamilyCoverage& c);
// Sorts version-like tags ("v0.8.5", "25.08", "3.3.7") by their numbers; others by text.
std::vector<std::string> SortTags(std::vector<std::string> tags);

// {apiVersion: gpunode/v1, kind: CompatDataCoverage, ...}
nlohmann::ordered_json ToJson(const DataCoverage& coverage);
std::string RenderText(const DataCoverage& coverage);

}  // namespace gpunode::compat

#endif  // GPUNODE_COMPAT_COVERAGE_H_
