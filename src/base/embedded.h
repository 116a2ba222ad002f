// Data files compiled into the binary (data/compat.yaml, data/profiles/*.yaml, ...), so that the
// single gpunode binary carries its data set and built-in simulated nodes.
#ifndef GPUNODE_BASE_EMBEDDED_H_
#define GPUNODE_BASE_EMBEDDED_H_

#include <optional>
#include <string_view>
#include <vector>

namespace gpunode {

struct EmbeddedFile {
  std::string_view group;  // "compat", "profiles", ...
  std::string_view name;   // file name, e.g. "dgx-h200.yaml"
  std::string_view data;
};

// All embedded files (defined in the generated embedded_data.cc).
const std::vector<EmbeddedFile>& EmbeddedFiles();

// The file `name` of `group`, if embedded.
std::optional<std::string_view> FindEmbedded(std::string_view group, std::string_view name);

}  // namespace gpunode

#endif  // GPUNODE_BASE_EMBEDDED_H_
