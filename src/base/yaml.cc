#include "src/base/yaml.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "yaml-cpp/depthguard.h"

namespace gpunode {

StatusOr<YAML::Node> LoadYaml(absl::string_view text, absl::string_view source, int max_depth) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::DeepRecursion& e) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": YAML nested too deeply (line ", e.mark.line + 1,
                                                   ", column ", e.mark.column + 1, "; refused)"));
  } catch (const YAML::Exception& e) {
    if (e.mark.is_null()) return absl::InvalidArgumentError(absl::StrCat(source, ": not valid YAML: ", e.msg));
    return absl::InvalidArgumentError(absl::StrCat(source, ": line ", e.mark.line + 1, ", column ",
                                                   e.mark.column + 1, ": not valid YAML: ", e.msg));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": not valid YAML: ", e.what()));
  }
  // Iterative walk: depth and expanded size (aliases share nodes; a walk visits them each time).
  std::vector<std::pair<YAML::Node, int>> stack;
  stack.emplace_back(root, 0);
  size_t visited = 0;
  while (!stack.empty()) {
    auto [node, depth] = std::move(stack.back());
    stack.pop_back();
    if (++visited > kMaxYamlNodes) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": YAML expands to more than ", kMaxYamlNodes, " nodes (aliases?; refused)"));
    }
    if (!node.IsSequence() && !node.IsMap()) continue;
    if (depth + 1 > max_depth) {
      return absl::InvalidArgumentError(absl::StrCat(source, ": YAML nested deeper than ", max_depth,
                                                     " levels (line ", node.Mark().line + 1, "; refused)"));
    }
    if (node.IsSequence()) {
      for (const YAML::Node& child : node) stack.emplace_back(child, depth + 1);
    } else {
      for (const auto& kv : node) {
        stack.emplace_back(kv.first, depth + 1);
        stack.emplace_back(kv.second, depth + 1);
      }
    }
  }
  return root;
}

}  // namespace gpunode
