#include "src/base/host_fs.h"
#include "src/base/unique_fd.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/file.h>
#include <sys/syscall.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cerrno>
#include <deque>
#include <functional>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace gpunode {
namespace {

constexpr int kMaxLinks = 40;  // as the kernel's ELOOP limit
constexpr char kTempPrefix[] = ".gpunode-tmp.";

std::string DirOf(const std::string& host_path) {
  const size_t slash = host_path.rfind('/');
  if (slash == std::string::npos || slash == 0) return "/";
  return host_path.substr(0, slash);
}

std::string BaseOf(const std::string& host_path) {
  const size_t slash = host_path.rfind('/');
  return slash == std::string::npos ? host_path : host_path.substr(slash + 1);
}

FileIdentity IdentityOf(const struct stat& st) {
  FileIdentity id;
  id.exists = true;
  id.dev = st.st_dev;
  id.ino = st.st_ino;
  id.size = static_cast<uint64_t>(st.st_size);
  id.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  id.ctime_ns = static_cast<int64_t>(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec;
  return id;
}

Status WriteAll(int fd, absl::string_view data, absl::string_view what) {
  size_t off = 0;
  while (off < data.size()) {
    const ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoToStatus(errno, "write", what);
    }
    off += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

std::string RandomSuffix() {
  unsigned char bytes[6];
  if (::getrandom(bytes, sizeof bytes, 0) != static_cast<ssize_t>(sizeof bytes)) {
    const auto t = static_cast<uint64_t>(::getpid()) * 2654435761u ^ static_cast<uint64_t>(::time(nullptr));
    for (size_t i = 0; i < sizeof bytes; ++i) bytes[i] = static_cast<unsigned char>(t >> (i * 8));
  }
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char b : bytes) {
    out.push_back(kHex[b >> 4]);
    out.push_back(kHex[b & 15]);
  }
  return out;
}

using Fd = UniqueFd;

}  // namespace

FileLock& FileLock::operator=(FileLock&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    what_ = std::move(o.what_);
    o.fd_ = -1;
  }
  return *this;
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the last descriptor releases the flock
}

StatusOr<HostFs> HostFs::Open(std::string root) {
  if (root.empty()) root.push_back('/');  // (not `= "/"`: GCC 12 -Wrestrict false positive)
  if (root.front() != '/') {  // every path we hand out is absolute
    char cwd[PATH_MAX];
    if (::getcwd(cwd, sizeof cwd) == nullptr) return ErrnoToStatus(errno, "--host-root: getcwd for", root);
    root = absl::StrCat(cwd, "/", root);
  }
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  struct stat st;
  if (::stat(root.c_str(), &st) != 0) {
    return Annotate(ErrnoToStatus(errno, "open host root", root), "--host-root");
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("--host-root: ", root, " is not a directory"));
  }
  return HostFs(std::move(root));
}

StatusOr<HostFs> HostFs::Sub(absl::string_view host_dir) const {
  GPUNODE_ASSIGN_OR_RETURN(std::string dir, RealPath(host_dir));
  const std::string local = Local(dir);
  struct stat st;
  if (::stat(local.c_str(), &st) != 0) return ErrnoToStatus(errno, "open", host_dir);
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(host_dir, ": not a directory"));
  }
  return HostFs(local == "/" ? std::string("/") : local);
}

std::string HostFs::Local(absl::string_view resolved) const {
  if (root_ == "/") return std::string(resolved);
  if (resolved.empty() || resolved == "/") return root_;
  return absl::StrCat(root_, resolved);
}

StatusOr<std::string> HostFs::RealPath(absl::string_view host_path, bool follow_last, bool strict) const {
  std::vector<std::string> done;  // resolved components below the root
  std::deque<std::string> todo;   // components still to walk
  // Under the machine's own root a relative path is relative to the working directory, as for the
  // kernel (a file the user names: `--output x.json`). Below a host root every path is absolute.
  if (root_ == "/" && !absl::StartsWith(host_path, "/")) {
    char cwd[PATH_MAX];
    if (::getcwd(cwd, sizeof cwd) == nullptr) return ErrnoToStatus(errno, "getcwd for", host_path);
    for (absl::string_view p : absl::StrSplit(cwd, '/', absl::SkipEmpty())) todo.emplace_back(p);
  }
  for (absl::string_view p : absl::StrSplit(host_path, '/', absl::SkipEmpty())) todo.emplace_back(p);
  std::string prefix = root_ == "/" ? "" : root_;  // Local() of `done`, kept in step with it
  auto rebuild = [&] {
    prefix = root_ == "/" ? "" : root_;
    for (const std::string& c : done) absl::StrAppend(&prefix, "/", c);
  };
  int links = 0;
  while (!todo.empty()) {
    std::string c = std::move(todo.front());
    todo.pop_front();
    if (c == ".") continue;
    if (c == "..") {
      if (done.empty()) {
        if (strict && root_ != "/") {
          return absl::FailedPreconditionError(absl::StrCat(
              host_path, ": a symbolic link on the way points outside the host root ", root_,
              " (refused; nothing written)"));
        }
        continue;  // ".." at the root stays there, as the kernel does at "/"
      }
      done.pop_back();
      rebuild();
      continue;
    }
    const std::string candidate = absl::StrCat(prefix, "/", c);
    struct stat st;
    if (::lstat(candidate.c_str(), &st) != 0 || !S_ISLNK(st.st_mode) || (todo.empty() && !follow_last)) {
      done.push_back(std::move(c));
      prefix = candidate;
      continue;
    }
    if (++links > kMaxLinks) {
      return absl::FailedPreconditionError(
          absl::StrCat("resolve ", host_path, ": too many levels of symbolic links"));
    }
    char buf[4096];
    const ssize_t n = ::readlink(candidate.c_str(), buf, sizeof buf - 1);
    if (n < 0) return ErrnoToStatus(errno, "readlink", absl::StrCat("/", absl::StrJoin(done, "/"), "/", c));
    const absl::string_view target(buf, static_cast<size_t>(n));
    if (absl::StartsWith(target, "/")) {
      done.clear();
      rebuild();
    }
    std::vector<std::string> parts = absl::StrSplit(target, '/', absl::SkipEmpty());
    todo.insert(todo.begin(), parts.begin(), parts.end());
  }
  return absl::StrCat("/", absl::StrJoin(done, "/"));
}

StatusOr<std::string> HostFs::LocalPath(absl::string_view host_path, bool follow_last, bool strict) const {
  GPUNODE_ASSIGN_OR_RETURN(std::string real, RealPath(host_path, follow_last, strict));
  return Local(real);
}

namespace {
std::atomic<bool> no_openat2{false};  // set once the kernel (or seccomp) refused openat2
}  // namespace

void host_fs_internal::SetOpenat2(bool enabled) { no_openat2.store(!enabled); }

int HostFs::OpenBelowRoot(absl::string_view host_path, int flags) const {
  flags |= O_CLOEXEC;
  if (root_ == "/") return ::open(std::string(host_path).c_str(), flags);
  if (!no_openat2.load(std::memory_order_relaxed)) {
    Fd root(::open(root_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (root.get() < 0) return -1;
    absl::string_view rel = host_path;
    while (absl::ConsumePrefix(&rel, "/")) {
    }
    struct open_how how = {};
    how.flags = static_cast<uint64_t>(flags);
    how.resolve = RESOLVE_IN_ROOT;
    const std::string rel_path = rel.empty() ? std::string(".") : std::string(rel);
    const int fd = static_cast<int>(::syscall(SYS_openat2, root.get(), rel_path.c_str(), &how, sizeof how));
    if (fd >= 0) return fd;
    // ENOSYS: no openat2 (or a seccomp profile refusing it: some answer EPERM); EXDEV: a /proc
    // magic link on the way, which RESOLVE_IN_ROOT never follows; EAGAIN: a rename raced the lookup.
    const int err = errno;
    if (err == ENOSYS || err == EPERM) no_openat2.store(true, std::memory_order_relaxed);
    if (err != ENOSYS && err != EPERM && err != EXDEV && err != EAGAIN) return -1;
  }
  auto real = RealPath(host_path, /*follow_last=*/(flags & O_NOFOLLOW) == 0);
  // Resolution fails only on a link loop: the lexical path then fails the open with ELOOP-like
  // errors of its own, and never leaves the root through our join.
  const std::string path = Local(real.ok() ? *real : (absl::StartsWith(host_path, "/") ? std::string(host_path)
                                                                                      : absl::StrCat("/", host_path)));
  return ::open(path.c_str(), flags);
}

std::string HostFs::Resolve(absl::string_view host_path) const {
  if (root_ == "/") return std::string(host_path);
  std::string path = absl::StartsWith(host_path, "/") ? std::string(host_path) : absl::StrCat("/", host_path);
  auto real = RealPath(path);
  // Resolution fails only on a link loop: the lexical path then fails the open with ELOOP-like
  // errors of its own, and never leaves the root through our join.
  return Local(real.ok() ? *real : path);
}

namespace {
// Reads `fd` to its end into *out, refusing more than `max_bytes` (errors name `host_path`).
Status ReadToEnd(int fd, absl::string_view host_path, size_t max_bytes, std::string* out) {
  char buf[65536];
  while (true) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoToStatus(errno, "read", host_path);
    }
    if (n == 0) return absl::OkStatus();
    out->append(buf, static_cast<size_t>(n));
    if (out->size() > max_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat("read ", host_path, ": larger than ", max_bytes, " bytes"));
    }
  }
}
}  // namespace

StatusOr<std::string> HostFs::ReadFile(absl::string_view host_path, size_t max_bytes) const {
  const Fd fd(OpenBelowRoot(host_path, O_RDONLY));
  if (fd.get() < 0) return ErrnoToStatus(errno, "read", host_path);
  std::string out;
  GPUNODE_RETURN_IF_ERROR(ReadToEnd(fd.get(), host_path, max_bytes, &out));
  return out;
}

StatusOr<HostFs::Versioned> HostFs::ReadVersioned(absl::string_view host_path, size_t max_bytes) const {
  Versioned v;
  Fd fd(OpenBelowRoot(host_path, O_RDONLY));
  if (fd.get() < 0) {
    if (errno == ENOENT) return v;
    return ErrnoToStatus(errno, "read", host_path);
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return ErrnoToStatus(errno, "stat", host_path);
  if (!S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(host_path, ": not a regular file"));
  }
  v.identity = IdentityOf(st);
  v.mode = st.st_mode & 07777;
  GPUNODE_RETURN_IF_ERROR(ReadToEnd(fd.get(), host_path, max_bytes, &v.text));
  v.identity.content_hash = std::hash<std::string>()(v.text);
  return v;
}

StatusOr<std::string> HostFs::ReadPrefix(absl::string_view host_path, size_t max_bytes) const {
  const Fd fd(OpenBelowRoot(host_path, O_RDONLY));
  if (fd.get() < 0) return ErrnoToStatus(errno, "read", host_path);
  std::string out(max_bytes, '\0');
  size_t got = 0;
  while (got < max_bytes) {
    const ssize_t n = ::read(fd.get(), out.data() + got, max_bytes - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoToStatus(errno, "read", host_path);
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  out.resize(got);
  return out;
}

StatusOr<std::string> HostFs::ReadLine(absl::string_view host_path) const {
  GPUNODE_ASSIGN_OR_RETURN(std::string text, ReadFile(host_path, 64 << 10));
  size_t nl = text.find('\n');
  if (nl != std::string::npos) text.resize(nl);
  return std::string(absl::StripAsciiWhitespace(text));
}

bool HostFs::Exists(absl::string_view host_path) const {
  struct stat st;
  if (root_ == "/") return ::lstat(std::string(host_path).c_str(), &st) == 0;
  return Fd(OpenBelowRoot(host_path, O_PATH | O_NOFOLLOW)).get() >= 0;
}

StatusOr<FileInfo> HostFs::Stat(absl::string_view host_path) const {
  struct stat st;
  if (root_ == "/") {
    if (::lstat(std::string(host_path).c_str(), &st) != 0) return ErrnoToStatus(errno, "stat", host_path);
  } else {
    const Fd fd(OpenBelowRoot(host_path, O_PATH | O_NOFOLLOW));
    if (fd.get() < 0 || ::fstatat(fd.get(), "", &st, AT_EMPTY_PATH) != 0) {
      return ErrnoToStatus(errno, "stat", host_path);
    }
  }
  FileInfo info;
  if (S_ISREG(st.st_mode)) info.type = FileType::kRegular;
  else if (S_ISDIR(st.st_mode)) info.type = FileType::kDirectory;
  else if (S_ISCHR(st.st_mode)) info.type = FileType::kCharDevice;
  else if (S_ISBLK(st.st_mode)) info.type = FileType::kBlockDevice;
  else if (S_ISLNK(st.st_mode)) info.type = FileType::kSymlink;
  else if (S_ISSOCK(st.st_mode)) info.type = FileType::kSocket;
  else if (S_ISFIFO(st.st_mode)) info.type = FileType::kFifo;
  info.size = static_cast<uint64_t>(st.st_size);
  info.mode = st.st_mode & 07777;
  info.dev_major = major(st.st_rdev);
  info.dev_minor = minor(st.st_rdev);
  info.mtime_sec = st.st_mtim.tv_sec;
  return info;
}

StatusOr<std::vector<std::string>> HostFs::ListDir(absl::string_view host_path) const {
  const int fd = OpenBelowRoot(host_path, O_RDONLY | O_DIRECTORY);
  DIR* dir = fd < 0 ? nullptr : ::fdopendir(fd);
  if (dir == nullptr) {
    const int err = errno;
    if (fd >= 0) ::close(fd);
    return ErrnoToStatus(err, "list", host_path);
  }
  std::vector<std::string> names;
  while (struct dirent* e = ::readdir(dir)) {
    absl::string_view name = e->d_name;
    if (name == "." || name == "..") continue;
    names.emplace_back(name);
  }
  ::closedir(dir);
  std::sort(names.begin(), names.end());
  return names;
}

StatusOr<std::string> HostFs::ReadLink(absl::string_view host_path) const {
  char buf[4096];
  ssize_t n;
  if (root_ == "/") {
    n = ::readlink(std::string(host_path).c_str(), buf, sizeof buf - 1);
  } else {
    const Fd fd(OpenBelowRoot(host_path, O_PATH | O_NOFOLLOW));
    n = fd.get() < 0 ? -1 : ::readlinkat(fd.get(), "", buf, sizeof buf - 1);
  }
  if (n < 0) return ErrnoToStatus(errno, "readlink", host_path);
  return std::string(buf, static_cast<size_t>(n));
}

Status HostFs::MakeDirs(absl::string_view host_dir, uint32_t mode) const {
  GPUNODE_ASSIGN_OR_RETURN(std::string dir, RealPath(host_dir, /*follow_last=*/true, /*strict=*/true));
  std::string prefix;
  for (absl::string_view c : absl::StrSplit(dir, '/', absl::SkipEmpty())) {
    absl::StrAppend(&prefix, "/", c);
    const std::string local = Local(prefix);
    struct stat st;
    if (::lstat(local.c_str(), &st) == 0) {
      if (S_ISDIR(st.st_mode)) continue;
      return absl::FailedPreconditionError(absl::StrCat("create directory ", prefix, ": not a directory"));
    }
    if (::mkdir(local.c_str(), mode) != 0 && errno != EEXIST) {
      return ErrnoToStatus(errno, "create directory", prefix);
    }
  }
  return absl::OkStatus();
}

StatusOr<FileLock> HostFs::Lock(absl::string_view host_path) const {
  GPUNODE_ASSIGN_OR_RETURN(std::string target, RealPath(host_path, /*follow_last=*/true, /*strict=*/true));
  const std::string dir = DirOf(target);
  GPUNODE_RETURN_IF_ERROR(MakeDirs(dir));
  const int fd = ::open(Local(dir).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoToStatus(errno, "open directory", dir);
  while (::flock(fd, LOCK_EX) != 0) {
    if (errno == EINTR) continue;
    const int err = errno;
    ::close(fd);
    return ErrnoToStatus(err, "lock", dir);
  }
  return FileLock(fd, dir);
}

StatusOr<std::string> HostFs::WriteFileAtomically(absl::string_view host_path, absl::string_view content,
                                                  const WriteOptions& options) const {
  GPUNODE_ASSIGN_OR_RETURN(const std::string target,
                           RealPath(host_path, /*follow_last=*/true, /*strict=*/true));
  const std::string dir = DirOf(target);
  const std::string name = BaseOf(target);
  if (name.empty()) return absl::InvalidArgumentError(absl::StrCat("write ", host_path, ": not a file path"));
  FileLock own;
  if (options.held == nullptr) {
    GPUNODE_ASSIGN_OR_RETURN(own, Lock(host_path));
  }
  GPUNODE_RETURN_IF_ERROR(MakeDirs(dir));
  Fd dfd(::open(Local(dir).c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (dfd.get() < 0) return ErrnoToStatus(errno, "open directory", dir);
  struct stat old;
  const bool exists = ::fstatat(dfd.get(), name.c_str(), &old, AT_SYMLINK_NOFOLLOW) == 0;
  if (!exists && errno != ENOENT) return ErrnoToStatus(errno, "stat", target);
  if (exists && !S_ISREG(old.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "write ", target, ": not a regular file", S_ISLNK(old.st_mode) ? " (a symbolic link appeared)" : "",
        "; nothing written"));
  }
  // Where the temp file lives: not in a drop-in directory ("*.d"), whose loader may read every
  // file in it (CRI-O does), but in its parent when that is on the same filesystem.
  Fd sfd_owned;
  int sfd = dfd.get();
  std::string staging = dir;
  const std::string dir_name = BaseOf(dir);
  if (dir != "/" && absl::EndsWith(dir_name, ".d")) {
    const std::string parent = DirOf(dir);
    const int p = ::open(Local(parent).c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat ps, ds;
    if (p >= 0 && ::fstat(p, &ps) == 0 && ::fstat(dfd.get(), &ds) == 0 && ps.st_dev == ds.st_dev) {
      sfd_owned.reset(p);
      sfd = p;
      staging = parent;
    } else if (p >= 0) {
      ::close(p);
    }
  }
  const std::string temp_stem =
      absl::StrCat(kTempPrefix, staging != dir ? absl::StrCat(dir_name, ".") : std::string(), name, ".");
  // Stale temp files of an earlier write of this file that was killed (we hold the lock).
  if (int cfd = ::dup(sfd); cfd >= 0) {
    if (DIR* d = ::fdopendir(cfd)) {
      std::vector<std::string> stale;
      while (struct dirent* e = ::readdir(d)) {
        if (absl::StartsWith(e->d_name, temp_stem)) stale.emplace_back(e->d_name);
      }
      ::closedir(d);
      for (const std::string& s : stale) ::unlinkat(sfd, s.c_str(), 0);
    } else {
      ::close(cfd);
    }
  }
  std::string temp;
  Fd fd;
  for (int attempt = 0; attempt < 16 && fd.get() < 0; ++attempt) {
    temp = temp_stem + RandomSuffix();
    fd.reset(::openat(sfd, temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (fd.get() < 0 && errno != EEXIST) return ErrnoToStatus(errno, "create a temporary file in", staging);
  }
  if (fd.get() < 0) return absl::AlreadyExistsError(absl::StrCat("create a temporary file in ", staging));
  const std::string temp_host = absl::StrCat(staging == "/" ? "" : staging, "/", temp);
  auto fail = [&](Status s) {
    ::unlinkat(sfd, temp.c_str(), 0);
    return s;
  };
  if (Status s = WriteAll(fd.get(), content, temp_host); !s.ok()) return fail(s);
  const mode_t mode = exists && options.keep_mode ? (old.st_mode & 07777) : options.mode;
  if (::fchmod(fd.get(), mode) != 0) return fail(ErrnoToStatus(errno, "chmod", temp_host));
  if (exists && options.keep_mode && (old.st_uid != ::geteuid() || old.st_gid != ::getegid())) {
    // Keeps the owner where we may (root); a non-root writer keeps its own, as any editor does.
    (void)::fchown(fd.get(), old.st_uid, old.st_gid);
  }
  if (options.test_hook) {
    if (Status s = options.test_hook("temp-written"); !s.ok()) return fail(s);
  }
  if (options.durable && ::fsync(fd.get()) != 0) return fail(ErrnoToStatus(errno, "fsync", temp_host));
  if (::close(fd.release()) != 0) return fail(ErrnoToStatus(errno, "close", temp_host));
  if (options.expect) {
    FileIdentity current;
    Fd now(::openat(dfd.get(), name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    struct stat st;
    if (now.get() >= 0 && ::fstat(now.get(), &st) == 0) {
      current = IdentityOf(st);
      std::string text;
      char buf[65536];
      ssize_t n;
      while ((n = ::read(now.get(), buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(n));
      current.content_hash = std::hash<std::string>()(text);
    }
    if (!(current == *options.expect)) {
      return fail(absl::AbortedError(absl::StrCat(
          target, " was changed by another program while gpunode edited it; nothing written")));
    }
  }
  if (options.test_hook) {
    if (Status s = options.test_hook("before-rename"); !s.ok()) return fail(s);
  }
  if (::renameat(sfd, temp.c_str(), dfd.get(), name.c_str()) != 0) {
    return fail(ErrnoToStatus(errno, absl::StrCat("rename ", temp_host, " to"), target));
  }
  if (options.durable) {
    ::fsync(dfd.get());
    if (sfd != dfd.get()) ::fsync(sfd);
  }
  return target;
}

Status HostFs::RemoveFile(absl::string_view host_path) const {
  GPUNODE_ASSIGN_OR_RETURN(std::string real, RealPath(host_path, /*follow_last=*/false, /*strict=*/true));
  if (::unlink(Local(real).c_str()) != 0 && errno != ENOENT) return ErrnoToStatus(errno, "remove", host_path);
  return absl::OkStatus();
}

Status HostFs::Symlink(absl::string_view target, absl::string_view host_path) const {
  GPUNODE_ASSIGN_OR_RETURN(std::string real, RealPath(host_path, /*follow_last=*/false, /*strict=*/true));
  const std::string local = Local(real);
  struct stat st;
  if (::lstat(local.c_str(), &st) == 0 && !S_ISLNK(st.st_mode)) {
    return absl::AlreadyExistsError(absl::StrCat(host_path, ": exists and is not a symlink; left alone"));
  }
  const size_t slash = real.rfind('/');
  GPUNODE_RETURN_IF_ERROR(MakeDirs(slash == 0 ? "/" : real.substr(0, slash)));
  const std::string tmp = absl::StrCat(local, ".gpunode-tmp.", ::getpid());
  ::unlink(tmp.c_str());
  if (::symlink(std::string(target).c_str(), tmp.c_str()) != 0) return ErrnoToStatus(errno, "create symlink", host_path);
  if (::rename(tmp.c_str(), local.c_str()) != 0) {
    Status err = ErrnoToStatus(errno, "create symlink", host_path);
    ::unlink(tmp.c_str());
    return err;
  }
  return absl::OkStatus();
}

}  // namespace gpunode
