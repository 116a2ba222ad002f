// HostFs: the one seam through which gpunode touches the host's files, reads and writes (proc,
// sys, dev, etc, driver files, runtime configs, the CDI spec, the labels file). Every path is a
// host path ("/proc/driver/nvidia/version") and is resolved *inside* the root given by
// --host-root (default "/"), so the same code works on the host, in a container with the host
// mounted at /host, and against fixture trees in tests.
//
// Confinement: below a root other than "/", a path is walked component by component and every
// symbolic link on the way is followed as the host would follow it: an absolute target starts
// again at the root (`/var/run -> /run` under root /host is /host/run), and ".." stops at the
// root. Nothing a host-root tree contains can make a read or a write land outside the root (what
// runc's securejoin does for a container's rootfs; the OCI hooks use the same walk). Writes are
// stricter than reads: a link whose ".." would climb above the root is refused, not clamped.
//
// Writes: WriteFileAtomically is the only way gpunode replaces a file it does not own exclusively
// (runtime configs, CDI specs, the labels file, a bundle's config.json): temp file, fsync, rename,
// fsync of the directory; mode and owner kept; a symlinked file is written where it points and
// the link stays a link; the temp file lives where no runtime's drop-in loader reads it (the
// parent of a "*.d" directory) and stale temp files of ours are removed on the next write.
// Lock() serialises gpunode's writers of one file (flock on its directory); WriteOptions.expect
// detects a writer that is not gpunode between read and rename.
//
// Paths the user names explicitly (sockets, output files, --config) are not host paths: they go
// through HostFs::Local(), the root "/", which follows links as the kernel does and takes a
// relative path as relative to the working directory.
#ifndef GPUNODE_BASE_HOST_FS_H_
#define GPUNODE_BASE_HOST_FS_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
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

// What identifies one version of a file: a rename over it or an in-place write changes it.
struct FileIdentity {
  uint64_t dev = 0;
  uint64_t ino = 0;
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  int64_t ctime_ns = 0;
  bool exists = false;
  // Hash of the content when it was read (ReadVersioned): file times are coarse (a jiffy), so
  // an in-place rewrite of the same size can keep every field above.
  uint64_t content_hash = 0;
  bool operator==(const FileIdentity&) const = default;
};

// An exclusive lock held until destroyed (or moved from). See HostFs::Lock.
class FileLock {
 public:
  FileLock() = default;
  explicit FileLock(int fd, std::string what) : fd_(fd), what_(std::move(what)) {}
  FileLock(FileLock&& o) noexcept : fd_(o.fd_), what_(std::move(o.what_)) { o.fd_ = -1; }
  FileLock& operator=(FileLock&& o) noexcept;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  ~FileLock();
  bool held() const { return fd_ >= 0; }
  const std::string& what() const { return what_; }  // the host path of the locked directory

 private:
  int fd_ = -1;
  std::string what_;
};

struct WriteOptions {
  // Permission bits of a new file. An existing file keeps its own mode and owner unless
  // keep_mode is false.
  uint32_t mode = 0644;
  bool keep_mode = true;
  // fsync the data and the directory (off only for throw-away files such as a bundle's config).
  bool durable = true;
  // When set, the write fails with ABORTED (file untouched) if the file is no longer this version
  // just before the rename: somebody else wrote it since it was read.
  std::optional<FileIdentity> expect;
  // The caller already holds Lock() of this file (otherwise WriteFileAtomically takes it).
  const FileLock* held = nullptr;
  // Tests only: called at the named steps ("temp-written", "before-rename"); a non-OK status
  // aborts the write there (fault injection), leaving the target untouched.
  std::function<Status(absl::string_view step)> test_hook;
};

namespace host_fs_internal {
// Tests only: false makes every HostFs resolve paths with its own walk, as on a kernel (or under a
// seccomp profile) without openat2(2).
void SetOpenat2(bool enabled);
}  // namespace host_fs_internal

class HostFs {
 public:
  // Opens a root; fails with NotFound / FailedPrecondition when it is missing or not a directory.
  static StatusOr<HostFs> Open(std::string root);
  // The machine's own root "/": for paths the user names (output files, --config, a bundle).
  static HostFs Local() { return HostFs("/"); }
  // A HostFs whose root is `host_dir` of this one (e.g. a driver root /run/nvidia/driver).
  StatusOr<HostFs> Sub(absl::string_view host_dir) const;

  const std::string& root() const { return root_; }
  bool is_system_root() const { return root_ == "/"; }

  // Host path -> path in our own filesystem, every symlink on the way resolved inside the root
  // (the last one too). "/proc/x" under root "/host" is "/host/proc/x"; with /host/var/run ->
  // /run, "/var/run/cdi" is "/host/run/cdi". Under the root "/" this is the path itself.
  std::string Resolve(absl::string_view host_path) const;
  // The host path a path names after following its links inside the root ("/var/run/x" ->
  // "/run/x"); with !follow_last a final symlink is kept. `strict`: a ".." that would climb above
  // the root is FAILED_PRECONDITION ("... points outside the host root") instead of stopping there.
  StatusOr<std::string> RealPath(absl::string_view host_path, bool follow_last = true,
                                 bool strict = false) const;
  // RealPath, as a path in our own filesystem (Resolve with the choices of RealPath).
  StatusOr<std::string> LocalPath(absl::string_view host_path, bool follow_last = true,
                                  bool strict = false) const;

  // Reads a whole file, at most `max_bytes` (procfs and sysfs files report size 0, so we read
  // until EOF). Errors name the host path: "read /proc/driver/nvidia/version: No such file...".
  StatusOr<std::string> ReadFile(absl::string_view host_path, size_t max_bytes = 4 << 20) const;
  // At most the first `max_bytes` of a file (for large headers whose first lines we need).
  StatusOr<std::string> ReadPrefix(absl::string_view host_path, size_t max_bytes) const;
  // First line of a file without the newline and surrounding blanks (sysfs attributes).
  StatusOr<std::string> ReadLine(absl::string_view host_path) const;
  // A file and the version read (identity.exists == false and "" for a missing file), for a
  // read-modify-write with WriteOptions.expect.
  struct Versioned {
    std::string text;
    FileIdentity identity;
    uint32_t mode = 0;
  };
  StatusOr<Versioned> ReadVersioned(absl::string_view host_path, size_t max_bytes = 16 << 20) const;

  bool Exists(absl::string_view host_path) const;
  // lstat() of the resolved parent + last component: a symlink is reported as kSymlink.
  StatusOr<FileInfo> Stat(absl::string_view host_path) const;
  // Sorted entry names, without "." and "..".
  StatusOr<std::vector<std::string>> ListDir(absl::string_view host_path) const;
  StatusOr<std::string> ReadLink(absl::string_view host_path) const;

  // Creates a directory and its missing parents (mode 0755), each inside the root.
  Status MakeDirs(absl::string_view host_dir, uint32_t mode = 0755) const;
  // Exclusive lock for writers of `host_path` (flock on its resolved directory, created if
  // missing). Blocks until it is free.
  StatusOr<FileLock> Lock(absl::string_view host_path) const;
  // Replaces `host_path` atomically (see the header comment). Returns the host path written (the
  // link's target when `host_path` is a symlink). On any error the old file is untouched and no
  // temp file is left.
  StatusOr<std::string> WriteFileAtomically(absl::string_view host_path, absl::string_view content,
                                            const WriteOptions& options = {}) const;
  // Makes `host_path` a symlink to `target` (atomically: a temp link renamed over it), inside the
  // root; its folder is created. An existing regular file is never replaced (AlreadyExists).
  Status Symlink(absl::string_view target, absl::string_view host_path) const;
  // Removes a file (not a directory); a missing file is OK.
  Status RemoveFile(absl::string_view host_path) const;

 private:
  explicit HostFs(std::string root) : root_(std::move(root)) {}
  std::string Local(absl::string_view resolved_host_path) const;
  // Opens `host_path` below the root with `flags` (O_PATH, O_NOFOLLOW, O_DIRECTORY, ...). Below a
  // host root the kernel resolves it in one openat2(2) call with RESOLVE_IN_ROOT — the rules of
  // RealPath: ".." and absolute links stay inside the root — instead of one lstat per component
  // (a sysfs path has ~9: 1800 system calls for one `labels` run). Where the kernel cannot (before
  // 5.6, a seccomp profile without openat2, a /proc magic link on the way, a racing rename) it
  // walks with RealPath as before. -1 and errno on failure.
  int OpenBelowRoot(absl::string_view host_path, int flags) const;
  std::string root_;
};

}  // namespace gpunode

#endif  // GPUNODE_BASE_HOST_FS_H_
