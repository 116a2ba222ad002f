// `gpunode runtime configure`: adds an `nvidia` runtime to Docker's daemon.json, containerd's
// config.toml or a CRI-O drop-in, as `nvidia-ctk runtime configure` does, keeping every other byte
// of a TOML file (comments, unknown keys, order) and every other key of a JSON file.
//
// The editors are pure (text in, text out). TOML is edited surgically: only the lines of the keys
// we own are inserted or replaced; toml++ parses the text before and after, and the result must
// equal the old document plus our keys, or nothing is written.
#ifndef GPUNODE_CONTAINER_RUNTIME_CONFIG_H_
#define GPUNODE_CONTAINER_RUNTIME_CONFIG_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "src/base/status.h"

namespace gpunode::container {

enum class RuntimeKind { kDocker, kContainerd, kCrio };

StatusOr<RuntimeKind> ParseRuntimeKind(absl::string_view name);
std::string RuntimeKindName(RuntimeKind kind);

// Default config files (host paths). CRI-O gets a drop-in, as nvidia-ctk writes it.
inline constexpr char kDockerConfigPath[] = "/etc/docker/daemon.json";
inline constexpr char kContainerdConfigPath[] = "/etc/containerd/config.toml";
inline constexpr char kCrioDropInPath[] = "/etc/crio/crio.conf.d/99-nvidia.toml";
std::string DefaultConfigPath(RuntimeKind kind);
// nvidia-ctk's defaults: `nvidia-container-runtime` (PATH lookup) for Docker,
// `/usr/bin/nvidia-container-runtime` for containerd and CRI-O (they need an absolute path).
std::string DefaultRuntimePath(RuntimeKind kind);

struct RuntimeConfigOptions {
  RuntimeKind kind = RuntimeKind::kDocker;
  std::string runtime_name = "nvidia";
  std::string runtime_path;  // empty: DefaultRuntimePath(kind)
  bool set_as_default = false;
  bool enable_cdi = false;
};

struct EditResult {
  std::string text;                   // == the input when nothing had to change
  std::vector<std::string> warnings;  // e.g. "--cdi is ignored for CRI-O"
};

// Each editor names `source_name` (the file) in its errors; a parse error gives line and column.
StatusOr<EditResult> EditDockerConfig(absl::string_view text, const RuntimeConfigOptions& options,
                                      absl::string_view source_name);
StatusOr<EditResult> EditContainerdConfig(absl::string_view text,
                                          const RuntimeConfigOptions& options,
                                          absl::string_view source_name);
StatusOr<EditResult> EditCrioConfig(absl::string_view text, const RuntimeConfigOptions& options,
                                    absl::string_view source_name);
// Dispatches on options.kind.
StatusOr<EditResult> EditRuntimeConfig(absl::string_view text, const RuntimeConfigOptions& options,
                                       absl::string_view source_name);

// containerd's config version: the `version` key; absent in a non-empty file -> 1; empty -> 2.
StatusOr<int> ContainerdConfigVersion(absl::string_view text, absl::string_view source_name);

// A unified diff (3 lines of context) from `old_text` to `new_text`; "" when equal.
std::string UnifiedDiff(absl::string_view old_text, absl::string_view new_text,
                        absl::string_view old_name, absl::string_view new_name);

struct ApplyResult {
  std::string path;         // the file edited (after following a symlink)
  bool changed = false;     // false: already configured
  bool created = false;     // the file did not exist
  std::string backup_path;  // "<path>.gpunode.bak" when an existing file was replaced
  std::string diff;
  std::vector<std::string> warnings;
};

// Reads `path` (missing = empty), edits it and, unless `dry_run` or nothing changed, writes it:
// backup of the old file to `<path>.gpunode.bak`, new text to a temp file in the same directory,
// original mode and owner, fsync, rename, fsync of the directory. Parent directories of a missing
// file are created. On any error the original file is untouched.
StatusOr<ApplyResult> ApplyRuntimeConfig(const std::string& path,
                                         const RuntimeConfigOptions& options, bool dry_run);

}  // namespace gpunode::container

#endif  // GPUNODE_CONTAINER_RUNTIME_CONFIG_H_
