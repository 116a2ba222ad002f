#include "src/base/host_fs.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/strings/ascii.h"

namespace gpunode {

StatusOr<HostFs> HostFs::Open(std::string root) {
  if (root.empty()) root.push_back('/');  // (not `= "/"`: GCC 12 -Wrestrict false positive)
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

std::string HostFs::Resolve(absl::string_view host_path) const {
  if (root_ == "/") return std::string(host_path);
  if (host_path.empty() || host_path.front() != '/') return absl::StrCat(root_, "/", host_path);
  return absl::StrCat(root_, host_path);
}

StatusOr<std::string> HostFs::ReadFile(absl::string_view host_path, size_t max_bytes) const {
  std::string path = Resolve(host_path);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoToStatus(errno, "read", host_path);
  std::string out;
  char buf[8192];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return ErrnoToStatus(err, "read", host_path);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > max_bytes) {
      ::close(fd);
      return absl::ResourceExhaustedError(
          absl::StrCat("read ", host_path, ": larger than ", max_bytes, " bytes"));
    }
  }
  ::close(fd);
  return out;
}

StatusOr<std::string> HostFs::ReadPrefix(absl::string_view host_path, size_t max_bytes) const {
  std::string path = Resolve(host_path);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoToStatus(errno, "read", host_path);
  std::string out(max_bytes, '\0');
  size_t got = 0;
  while (got < max_bytes) {
    ssize_t n = ::read(fd, out.data() + got, max_bytes - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      return ErrnoToStatus(err, "read", host_path);
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
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
  return ::lstat(Resolve(host_path).c_str(), &st) == 0;
}

StatusOr<FileInfo> HostFs::Stat(absl::string_view host_path) const {
  struct stat st;
  if (::lstat(Resolve(host_path).c_str(), &st) != 0) return ErrnoToStatus(errno, "stat", host_path);
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
  std::string path = Resolve(host_path);
  DIR* dir = ::opendir(path.c_str());
  if (dir == nullptr) return ErrnoToStatus(errno, "list", host_path);
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
  std::string path = Resolve(host_path);
  char buf[4096];
  ssize_t n = ::readlink(path.c_str(), buf, sizeof buf - 1);
  if (n < 0) return ErrnoToStatus(errno, "readlink", host_path);
  return std::string(buf, static_cast<size_t>(n));
}

}  // namespace gpunode
