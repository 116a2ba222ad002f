// Loading YAML from inputs we do not control (CDI specs, the device-plugin config, the exporter's
// web config, node profiles) without a way to crash gpunode: yaml-cpp's exceptions become a
// Status naming the source, line and column; nesting deeper than kMaxYamlDepth and documents
// that expand (through aliases) to more than kMaxYamlNodes nodes are refused before any of our
// recursive code walks them.
#ifndef GPUNODE_BASE_YAML_H_
#define GPUNODE_BASE_YAML_H_

#include <cstddef>

#include "absl/strings/string_view.h"
#include "src/base/status.h"
#include "yaml-cpp/yaml.h"

namespace gpunode {

inline constexpr int kMaxYamlDepth = 128;
inline constexpr size_t kMaxYamlNodes = 2'000'000;

StatusOr<YAML::Node> LoadYaml(absl::string_view text, absl::string_view source, int max_depth = kMaxYamlDepth);

}  // namespace gpunode

#endif  // GPUNODE_BASE_YAML_H_
