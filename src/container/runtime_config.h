// `gpunode runtime configure`: adds an `nvidia` runtime to Docker's daemon.json, containerd's
// config.toml or a CRI-O drop-in, as `nvidia-ctk runtime configure` does, keeping every other byte
// of a TOML file (comments, unknown keys, order) and every other key of a JSON file.
//
// The editors are pure (text in, text out). TOML is edited surgically: only the lines of the keys
// we own are inserted or replaced; toml++ parses the text before and after, and the result must
// equal the old document plus our keys, or nothing is written.
#ifndef GPUNODE_CONTAINER_RUNTIME_CONFIG_H_
#define GPUNODE_CONTAINER_RUNTIME_CONFIG_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "src/base/host_fs.h"
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

// Where `runtime configure` keeps the file as it was before each change (a host path): outside
// every drop-in directory, so no runtime ever loads a backup. One file per change:
// <dir>/<path of the config>.<UTC time>, or "<...>.absent" when the config did not exist.
inline constexpr char kBackupDir[] = "/var/lib/gpunode/backups";

struct ApplyOptions {
  bool dry_run = false;
  // Local path of the backup folder (default: kBackupDir under --host-root, resolved by the caller).
  std::string backup_dir;
  // Tests only: passed to HostFs::WriteFileAtomically (fault injection, concurrent writers).
  std::function<Status(absl::string_view step)> test_hook;
};

struct ApplyResult {
  std::string path;         // the host path edited (a symlink's target inside the root)
  bool changed = false;     // false: already configured
  bool created = false;     // the file did not exist
  std::string backup_path;  // local path of the backup of this change
  int attempts = 1;         // 2 when another program changed the file during the first
  std::string diff;
  std::vector<std::string> warnings;
};

// Reads `host_path` in `fs` (missing = empty), edits it and, unless dry-run or nothing changed,
// writes it with HostFs::WriteFileAtomically under HostFs::Lock: one gpunode writer per file at
// a time, so concurrent runs compose. A file changed by another program between read and rename
// is read and edited again once; a second change is ABORTED. A symlink is edited where it points
// inside the root; one that climbs out of the root is FAILED_PRECONDITION. The old file is backed
// up first (see kBackupDir); a "<path>.gpunode.bak" left beside the file by gpunode < 0.2 is moved
// there. On any error the original file is untouched.
StatusOr<ApplyResult> ApplyRuntimeConfig(const HostFs& fs, const std::string& host_path,
                                         const RuntimeConfigOptions& options, const ApplyOptions& apply);

struct BackupEntry {
  std::string path;  // local path of the backup file
  std::string time;  // "20261201T081500.123456Z"
  bool absent = false;  // the config did not exist before that change
};
// Backups of `host_path`, oldest first.
StatusOr<std::vector<BackupEntry>> ListBackups(const HostFs& fs, const std::string& host_path,
                                               const std::string& backup_dir);

struct RestoreResult {
  std::string path;        // the host path restored
  BackupEntry restored;    // the backup put back
  std::string backup_path; // the state just before the restore, itself backed up
  bool removed = false;    // the backup said the file did not exist: it was removed
};
// Puts back the newest backup of `host_path` (itself backed up first, so a restore can be undone
// by another). NOT_FOUND when there is none.
StatusOr<RestoreResult> RestoreRuntimeConfig(const HostFs& fs, const std::string& host_path,
                                             const std::string& backup_dir);

// Docker offers `--gpus` only when `nvidia-container-runtime-hook` is in its PATH: links
// /usr/bin/nvidia-container-runtime-hook (under the host root) to the runtime Docker is given
// (`runtime_path`, default nvidia-container-runtime looked up in the host's PATH), so gpunode answers
// under that name too. An existing program of that name that is not a link (NVIDIA's own hook) is
// left alone; an existing link to something else is backed up first, as the configs are:
// <backup_dir>/usr/bin/nvidia-container-runtime-hook.<UTC time>, a link with the old target.
// Returns what was done, in words for the user; an error when the backup or the link failed.
StatusOr<std::string> InstallDockerGpusHook(const HostFs& host, const std::string& runtime_path, bool dry_run,
                                            const std::string& backup_dir);

}  // namespace gpunode::container

#endif  // GPUNODE_CONTAINER_RUNTIME_CONFIG_H_
