// HostFs: the one seam through which gpunode reads the host's state (proc, sys, dev, etc, driver
// files, runtime configs). Every path is a host path ("/proc/driver/nvidia/version") and is
// resolved below the root given by --host-root (default "/"), so the same code works on the host,
// in a container with the host mounted at /host, and against fixture trees in tests.
// Paths the user names explicitly (sockets, output files, --config) do not go through HostFs.
#ifndef GPUNODE_BASE_HOST_FS_H_
#define GPUNODE_BASE_HOST_FS_H_

#include <cstdint>
#include <optional>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "src/base/status.h"

namespace gpunode {

enum class FileType { kRegular, kDirectory, kCharDevice, kBlockDevice, kSymlink, kSocket, kFifo, kOther };

struct FileInfo {
  FileType type = FileType::kOther;
  uint64_t size = 0;
  uint32_t mode = 0;       // permission bits
  uint32_t dev_major = 0;  // for device nodes
  uint32_t dev_minor = 0;
  int64_t mtime_sec = 0;
};

class HostFs {
 public:
  // Opens a root; fails with NotFound / FailedPrecondition when it is missing or not a directory.
  static StatusOr<HostFs> Open(std::string root);

  const std::string& root() const { return root_; }
  bool is_system_root() const { return root_ == "/"; }

  // Host path -> path in our own filesystem. "/proc/x" under root "/host" is "/host/proc/x".
  std::string Resolve(absl::string_view host_path) const;

  // Reads a whole file, at most `max_bytes` (procfs and sysfs files report size 0, so we read
  // until EOF). Errors name the host path: "read /proc/driver/nvidia/version: No such file...".
  StatusOr<std::string> ReadFile(absl::string_view host_path, size_t max_bytes = 4 << 20) const;
  // At most the first `max_bytes` of a file (for large headers whose first lines we need).
  StatusOr<std::string> ReadPrefix(absl::string_view host_path, size_t max_bytes) const;
  // First line of a file without the newline and surrounding blanks (sysfs attributes).
  StatusOr<std::string> ReadLine(absl::string_view host_path) const;

  bool Exists(absl::string_view host_path) const;
  // lstat(): a symlink is reported as kSymlink.
  StatusOr<FileInfo> Stat(absl::string_view host_path) const;
  // Sorted entry names, without "." and "..".
  StatusOr<std::vector<std::string>> ListDir(absl::string_view host_path) const;
  StatusOr<std::string> ReadLink(absl::string_view host_path) const;

 private:
  explicit HostFs(std::string root) : root_(std::move(root)) {}
  std::string root_;
};

}  // namespace gpunode

#endif  // GPUNODE_BASE_HOST_FS_H_
