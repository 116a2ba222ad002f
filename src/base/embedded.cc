#include "src/base/embedded.h"

namespace gpunode {

std::optional<std::string_view> FindEmbedded(std::string_view group, std::string_view name) {
  for (const EmbeddedFile& f : EmbeddedFiles()) {
    if (f.group == group && f.name == name) return f.data;
  }
  return std::nullopt;
}

}  // namespace gpunode
