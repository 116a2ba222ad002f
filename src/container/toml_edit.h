// The surgical TOML editor behind EditContainerdConfig / EditCrioConfig (runtime_config.h):
// only the lines of the keys we own are inserted or replaced, every other byte of the file stays;
// toml++ parses the text before and after, and the result must equal the old document plus our
// keys, or the edit fails. Internal to src/container.
#ifndef GPUNODE_CONTAINER_TOML_EDIT_H_
#define GPUNODE_CONTAINER_TOML_EDIT_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "src/base/status.h"

// toml++ is used header-only, without exceptions: parse() returns a parse_result. Every file that
// includes toml++ must agree on this, so they include it through this header.
#define TOML_EXCEPTIONS 0
#include <toml++/toml.h>

namespace gpunode::container::toml_edit {

// A dotted key, one component per element: {"plugins", "io.containerd.grpc.v1.cri"}.
using Path = std::vector<std::string>;

inline std::string Sv(std::string_view s) { return std::string(s); }

// TOML values: a one-key table {"v": value} stands for any value (copyable and comparable).
toml::table Wrap(const toml::node& node);
template <typename T>
toml::table WrapValue(T v) {
  toml::table t;
  t.insert("v", std::move(v));
  return t;
}

// Parses `text`; errors name `source_name` with line and column.
StatusOr<toml::table> ParseToml(absl::string_view text, absl::string_view source_name);

// The node at `path`, or null.
const toml::node* Find(const toml::table& root, const Path& path);

// Set `path` to `value` (wrapped).
struct SetOp {
  Path path;
  toml::table value;
};

// Applies `ops` to the TOML text surgically and verifies the result with toml++: the edited text
// must parse to `old_tree` with the ops applied. Ops already satisfied are skipped.
StatusOr<std::string> ApplyTomlOps(absl::string_view text, const toml::table& old_tree,
                                   const std::vector<SetOp>& ops, absl::string_view source_name);

}  // namespace gpunode::container::toml_edit

#endif  // GPUNODE_CONTAINER_TOML_EDIT_H_
