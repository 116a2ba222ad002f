// The device cgroup part of the hook's injection (hook_inject.h, step 3): which cgroup, and the
// cgroup v1 devices.allow writes. The v2 programs are hook_inject_bpf.cc's.
//
// As libnvidia-container's nvcgo (src/nvcgo/internal/cgroup/v1.go, v2.go): the controller's
// mount from the mount table, the process's cgroup path from /proc/PID/cgroup, the mount's root cut
// off the front of that path.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "src/base/host_fs.h"
#include "src/container/hook_inject.h"

namespace gpunode::container {
namespace {

bool HasDotDot(absl::string_view path) {
  for (absl::string_view p : absl::StrSplit(path, '/')) {
    if (p == "..") return true;
  }
  return false;
}

// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string Unescape(absl::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '3' && s[i + 2] >= '0' &&
        s[i + 2] <= '7' && s[i + 3] >= '0' && s[i + 3] <= '7') {
      out.push_back(static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0')));
      i += 3;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

StatusOr<std::string> ReadSmall(const std::string& path) {
  return HostFs::Local().ReadFile(path, 1 << 20);
}

}  // namespace

std::string CgroupV1Rule(const DeviceRule& rule) {
  return absl::StrCat(std::string(1, rule.type), " ", rule.major, ":", rule.minor < 0 ? std::string("*") : absl::StrCat(rule.minor),
                      " ", rule.access);
}

StatusOr<ProcCgroup> ParseProcCgroup(absl::string_view text) {
  ProcCgroup out;
  int lines = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    if (++lines > 256) return absl::InvalidArgumentError("/proc/PID/cgroup: over 256 lines");
    std::vector<absl::string_view> parts = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (parts.size() != 3 || parts[2].empty() || parts[2][0] != '/') {
      return absl::InvalidArgumentError(absl::StrCat("/proc/PID/cgroup: malformed line \"", line, "\""));
    }
    if (HasDotDot(parts[2])) {
      return absl::InvalidArgumentError(absl::StrCat("/proc/PID/cgroup: path with \"..\": \"", line, "\""));
    }
    if (parts[0] == "0" && parts[1].empty()) {
      out.unified = std::string(parts[2]);
      continue;
    }
    for (absl::string_view c : absl::StrSplit(parts[1], ',')) {
      if (c == "devices") out.devices_v1 = std::string(parts[2]);
    }
  }
  return out;
}

StatusOr<MountPoint> FindMount(absl::string_view mountinfo, absl::string_view fstype, absl::string_view option) {
  for (absl::string_view line : absl::StrSplit(mountinfo, '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> f = absl::StrSplit(line, ' ');
    // id parent major:minor root mount-point options [optional...] - fstype source super-options
    size_t dash = 0;
    for (size_t i = 6; i < f.size(); ++i) {
      if (f[i] == "-") {
        dash = i;
        break;
      }
    }
    if (f.size() < 7 || dash == 0 || dash + 3 >= f.size()) continue;  // fstype, source, super options
    if (f[dash + 1] != fstype) continue;
    if (!option.empty()) {
      bool found = false;
      for (absl::string_view o : absl::StrSplit(f[dash + 3], ',')) found = found || o == option;
      if (!found) continue;
    }
    MountPoint m{Unescape(f[3]), Unescape(f[4])};
    if (HasDotDot(m.root)) continue;
    return m;
  }
  return absl::NotFoundError(absl::StrCat("no ", fstype, option.empty() ? "" : absl::StrCat(" (", option, ")"),
                                          " file system in the mount table"));
}

StatusOr<std::string> CgroupDirectory(const MountPoint& mount, const std::string& path) {
  std::string rel = path;
  if (mount.root != "/") {
    if (!absl::StartsWith(path, mount.root) || (path.size() > mount.root.size() && path[mount.root.size()] != '/')) {
      return absl::FailedPreconditionError(absl::StrCat("cgroup ", path, " is not below the mounted root ", mount.root,
                                                        " (at ", mount.mount_point, ")"));
    }
    rel = path.substr(mount.root.size());
  }
  return mount.mount_point + (rel == "/" ? "" : rel);
}

Status AllowDevicesInCgroup(int pid, const std::vector<DeviceRule>& rules, const std::string& proc) {
  if (rules.empty()) return absl::OkStatus();
  GPUNODE_ASSIGN_OR_RETURN(std::string cgroup_text, ReadSmall(absl::StrCat(proc, "/", pid, "/cgroup")));
  GPUNODE_ASSIGN_OR_RETURN(ProcCgroup cgroup, ParseProcCgroup(cgroup_text));
  GPUNODE_ASSIGN_OR_RETURN(std::string mountinfo, HostFs::Local().ReadFile(absl::StrCat(proc, "/self/mountinfo"), 8 << 20));
  if (cgroup.devices_v1) {
    GPUNODE_ASSIGN_OR_RETURN(MountPoint mount, FindMount(mountinfo, "cgroup", "devices"));
    GPUNODE_ASSIGN_OR_RETURN(std::string dir, CgroupDirectory(mount, *cgroup.devices_v1));
    const std::string allow = dir + "/devices.allow";
    for (const DeviceRule& r : rules) {
      const int fd = ::open(allow.c_str(), O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
      if (fd < 0) return ErrnoToStatus(errno, "open", allow);
      const std::string line = CgroupV1Rule(r);
      const ssize_t n = ::write(fd, line.data(), line.size());
      const int err = errno;
      ::close(fd);
      if (n != static_cast<ssize_t>(line.size())) return ErrnoToStatus(err, absl::StrCat("write \"", line, "\" to"), allow);
    }
    return absl::OkStatus();
  }
  if (cgroup.unified) {
    GPUNODE_ASSIGN_OR_RETURN(MountPoint mount, FindMount(mountinfo, "cgroup2"));
    GPUNODE_ASSIGN_OR_RETURN(std::string dir, CgroupDirectory(mount, *cgroup.unified));
    return AllowDevicesCgroupV2(dir, rules);
  }
  return absl::FailedPreconditionError(absl::StrCat("process ", pid, " is in no devices cgroup (v1) and no cgroup v2"));
}

}  // namespace gpunode::container
