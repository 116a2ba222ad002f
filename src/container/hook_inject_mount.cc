// The mount-namespace part of the hook's injection (hook_inject.h, step 2).
//
// libnvidia-container does the same from `nvidia-container-cli configure` (src/nvc_mount.c:
// enter the container's mount namespace, mknod the device nodes, bind-mount each driver file onto
// a file it creates in the rootfs, remount it read-only, nosuid, nodev; src/nvc_ldcache.c: run
// ldconfig for the rootfs). Ours differs in how it reaches the files:
//  - the host sources are opened before entering the container, as detached bind mounts
//    (open_tree(OPEN_TREE_CLONE)) made read-only, nosuid and nodev (mount_setattr) while they are
//    still ours; in the container they are attached with move_mount. A bind mount from an O_PATH
//    descriptor (mount("/proc/self/fd/N")) is refused by the kernel once the caller is in another
//    mount namespace (the source must be in the caller's: __do_loopback's check_mnt), a detached
//    tree is not.
//  - every path in the rootfs is resolved with openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS)
//    from a descriptor of the rootfs: the image's symlinks, absolute or with "..", stay inside it.
//    The last component is never followed: a symlink there is replaced by the file or node.
#include <fcntl.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "src/base/subprocess.h"
#include "src/container/hook_inject.h"
#include "src/base/unique_fd.h"

namespace gpunode::container {
namespace {

using Fd = UniqueFd;

int OpenTree(const std::string& path, bool recursive) {
  unsigned flags = OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | (recursive ? AT_RECURSIVE : 0);
  return static_cast<int>(::syscall(SYS_open_tree, AT_FDCWD, path.c_str(), flags));
}

int MountSetattr(int fd, bool recursive, uint64_t set) {
  mount_attr attr{};
  attr.attr_set = set;
  return static_cast<int>(::syscall(SYS_mount_setattr, fd, "", AT_EMPTY_PATH | (recursive ? AT_RECURSIVE : 0),
                                    &attr, sizeof attr));
}

int MoveMount(int from_fd, int to_fd) {
  return static_cast<int>(
      ::syscall(SYS_move_mount, from_fd, "", to_fd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH));
}

// `path` (absolute, in the container) resolved inside the root `root_fd`.
int OpenInRoot(int root_fd, const std::string& path, uint64_t flags) {
  open_how how{};
  how.flags = flags | O_CLOEXEC;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  const std::string rel = path.empty() || path == "/" ? "." : path.substr(path.find_first_not_of('/'));
  return static_cast<int>(::syscall(SYS_openat2, root_fd, rel.c_str(), &how, sizeof how));
}

// The folder `dir` of the container (created as needed, mode 0755), as a descriptor.
StatusOr<Fd> MakeDirsInRoot(int root_fd, const std::string& dir) {
  std::string prefix;
  Fd current(OpenInRoot(root_fd, "/", O_PATH | O_DIRECTORY));
  if (current.get() < 0) return ErrnoToStatus(errno, "open the container's root", "(in its mount namespace)");
  for (absl::string_view part : absl::StrSplit(dir, '/', absl::SkipEmpty())) {
    if (part == "." || part == "..") {
      return absl::InvalidArgumentError(absl::StrCat("container path ", dir, ": \".\" or \"..\""));
    }
    absl::StrAppend(&prefix, "/", part);
    Fd next(OpenInRoot(root_fd, prefix, O_PATH | O_DIRECTORY));
    if (next.get() < 0 && errno == ENOENT) {
      const std::string name(part);
      if (::mkdirat(current.get(), name.c_str(), 0755) != 0 && errno != EEXIST) {
        return ErrnoToStatus(errno, "mkdir in the container", prefix);
      }
      next = Fd(OpenInRoot(root_fd, prefix, O_PATH | O_DIRECTORY));
    }
    if (next.get() < 0) {
      const int err = errno;
      struct stat st {};
      const std::string name(part);
      if (err == ENOENT && ::fstatat(current.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode)) {
        return absl::FailedPreconditionError(absl::StrCat(
            prefix, " in the container is a symlink to a folder the container does not have"));
      }
      return ErrnoToStatus(err, "open folder in the container", prefix);
    }
    current = std::move(next);
  }
  return current;
}

struct Entry {
  Fd parent;
  std::string name;
};

StatusOr<Entry> ParentOf(int root_fd, const std::string& path) {
  const size_t slash = path.rfind('/');
  if (path.empty() || path[0] != '/' || slash + 1 >= path.size()) {
    return absl::InvalidArgumentError(absl::StrCat("container path \"", path, "\": not an absolute file path"));
  }
  Entry e;
  e.name = path.substr(slash + 1);
  if (e.name == "." || e.name == "..") {
    return absl::InvalidArgumentError(absl::StrCat("container path ", path, ": \".\" or \"..\""));
  }
  GPUNODE_ASSIGN_OR_RETURN(e.parent, MakeDirsInRoot(root_fd, path.substr(0, slash)));
  return e;
}

// A symlink of the image where we put a file or node goes (it is never followed).
Status RemoveSymlink(const Entry& e, const std::string& path) {
  struct stat st {};
  if (::fstatat(e.parent.get(), e.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode)) {
    if (::unlinkat(e.parent.get(), e.name.c_str(), 0) != 0) return ErrnoToStatus(errno, "remove symlink", path);
  }
  return absl::OkStatus();
}

Status MakeDeviceNode(int root_fd, const PlannedDeviceNode& d) {
  GPUNODE_ASSIGN_OR_RETURN(Entry e, ParentOf(root_fd, d.path));
  GPUNODE_RETURN_IF_ERROR(RemoveSymlink(e, d.path));
  const mode_t kind = d.type == 'b' ? S_IFBLK : S_IFCHR;
  const dev_t dev = makedev(static_cast<unsigned>(d.major), static_cast<unsigned>(d.minor));
  if (::mknodat(e.parent.get(), e.name.c_str(), kind | (d.mode & 07777), dev) != 0) {
    if (errno != EEXIST) return ErrnoToStatus(errno, "mknod", d.path);
    struct stat st {};
    if (::fstatat(e.parent.get(), e.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || (st.st_mode & S_IFMT) != kind ||
        st.st_rdev != dev) {
      return absl::FailedPreconditionError(absl::StrCat(d.path, " exists in the container and is not device ",
                                                        d.major, ":", d.minor));
    }
  }
  if (::fchmodat(e.parent.get(), e.name.c_str(), d.mode & 07777, 0) != 0) {
    return ErrnoToStatus(errno, "chmod", d.path);
  }
  if (d.uid || d.gid) {
    if (::fchownat(e.parent.get(), e.name.c_str(), d.uid ? *d.uid : static_cast<uid_t>(-1),
                   d.gid ? *d.gid : static_cast<gid_t>(-1), AT_SYMLINK_NOFOLLOW) != 0) {
      return ErrnoToStatus(errno, "chown", d.path);
    }
  }
  return absl::OkStatus();
}

// The mount point in the container: a folder or an empty file, as the source is.
StatusOr<Fd> MountTarget(int root_fd, const std::string& path, bool directory) {
  GPUNODE_ASSIGN_OR_RETURN(Entry e, ParentOf(root_fd, path));
  GPUNODE_RETURN_IF_ERROR(RemoveSymlink(e, path));
  struct stat existing {};
  if (::fstatat(e.parent.get(), e.name.c_str(), &existing, AT_SYMLINK_NOFOLLOW) != 0) {  // not there yet
    if (directory) {
      if (::mkdirat(e.parent.get(), e.name.c_str(), 0755) != 0 && errno != EEXIST) return ErrnoToStatus(errno, "mkdir", path);
    } else {
      const int fd = ::openat(e.parent.get(), e.name.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0644);
      if (fd < 0 && errno != EEXIST) return ErrnoToStatus(errno, "create mount point", path);
      if (fd >= 0) ::close(fd);
    }
  }
  Fd target(::openat(e.parent.get(), e.name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
  if (target.get() < 0) return ErrnoToStatus(errno, "open mount point", path);
  struct stat st {};
  if (::fstat(target.get(), &st) != 0) return ErrnoToStatus(errno, "stat mount point", path);
  if (S_ISDIR(st.st_mode) != directory) {
    return absl::FailedPreconditionError(absl::StrCat(path, " exists in the container and is ",
                                                      directory ? "not a folder" : "a folder",
                                                      "; the driver's ", directory ? "folder" : "file", " cannot go there"));
  }
  return target;
}

constexpr char kOldKernel[] =
    "this kernel has no open_tree/move_mount/mount_setattr (Linux 5.12): the hook cannot attach the driver's files to "
    "a created container; make gpunode's shim Docker's runtime (gpunode runtime configure --runtime docker "
    "--set-as-default, then restart Docker) or run the container with --runtime nvidia";

struct OpenedMount {
  const PlannedMount* plan;
  Fd tree;
  bool directory = false;
};

Status RunHook(const PlannedHook& h, const std::string& state_json) {
  SubprocessOptions o;
  o.program = h.path;
  o.argv = h.args.empty() ? std::vector<std::string>{h.path} : h.args;
  o.env = h.env;
  o.input = state_json;
  o.inherit_output = true;
  o.timeout = std::chrono::seconds(60);
  GPUNODE_ASSIGN_OR_RETURN(SubprocessResult r, RunSubprocess(o));
  if (r.exit_code != 0) {
    return absl::InternalError(absl::StrCat("the spec's ", h.stage, " hook `", absl::StrJoin(o.argv, " "), "` failed (",
                                            r.timed_out ? std::string("timed out after 60 s")
                                            : r.exit_code >= 0 ? absl::StrCat("exit ", r.exit_code)
                                                               : absl::StrCat("signal ", r.term_signal),
                                            ")"));
  }
  return absl::OkStatus();
}

}  // namespace

Status ApplyInContainer(int pid, const std::string& rootfs, const InjectionPlan& plan, const std::string& state_json) {
  const std::string ns_path = absl::StrCat("/proc/", pid, "/ns/mnt");
  Fd ns(::open(ns_path.c_str(), O_RDONLY | O_CLOEXEC));
  if (ns.get() < 0) return ErrnoToStatus(errno, "open the container's mount namespace", ns_path);
  struct stat ours {}, theirs {};
  const std::string user_ns = absl::StrCat("/proc/", pid, "/ns/user");
  if (::stat("/proc/self/ns/user", &ours) != 0 || ::stat(user_ns.c_str(), &theirs) != 0) {
    return ErrnoToStatus(errno, "stat user namespace", user_ns);
  }
  if (ours.st_ino != theirs.st_ino || ours.st_dev != theirs.st_dev) {
    return absl::FailedPreconditionError(
        "the container has a user namespace of its own; nvidia-container-runtime-hook does not inject into "
        "such containers: run it with gpunode's runtime (--runtime nvidia)");
  }

  // Every host source, before entering the container.
  std::vector<OpenedMount> mounts;
  for (const PlannedMount& m : plan.mounts) {
    OpenedMount o;
    o.plan = &m;
    o.tree = Fd(OpenTree(m.source, m.recursive));
    if (o.tree.get() < 0 && errno == ENOSYS) {
      return absl::FailedPreconditionError(std::string(kOldKernel));
    }
    if (o.tree.get() < 0) return ErrnoToStatus(errno, "open_tree (the driver's file)", m.source);
    struct stat st {};
    if (::fstat(o.tree.get(), &st) != 0) return ErrnoToStatus(errno, "stat", m.source);
    o.directory = S_ISDIR(st.st_mode);
    const uint64_t attrs = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (m.read_only ? MOUNT_ATTR_RDONLY : 0) |
                           (m.noexec ? MOUNT_ATTR_NOEXEC : 0);
    if (MountSetattr(o.tree.get(), m.recursive, attrs) != 0) {
      if (errno == ENOSYS) return absl::FailedPreconditionError(std::string(kOldKernel));
      return ErrnoToStatus(errno, "mount_setattr", m.source);
    }
    mounts.push_back(std::move(o));
  }

  // This thread alone enters the container's mount namespace (umask and cwd are ours after this).
  if (::unshare(CLONE_FS) != 0) return ErrnoToStatus(errno, "unshare(CLONE_FS) before setns into", ns_path);
  if (::setns(ns.get(), CLONE_NEWNS) != 0) return ErrnoToStatus(errno, "setns into", ns_path);
  ::umask(0);
  Fd root(::open(rootfs.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (root.get() < 0) return ErrnoToStatus(errno, "open the container's root (in its mount namespace)", rootfs);

  for (const PlannedDeviceNode& d : plan.devices) GPUNODE_RETURN_IF_ERROR(MakeDeviceNode(root.get(), d));
  for (OpenedMount& m : mounts) {
    GPUNODE_ASSIGN_OR_RETURN(Fd target, MountTarget(root.get(), m.plan->destination, m.directory));
    if (MoveMount(m.tree.get(), target.get()) != 0) {
      return ErrnoToStatus(errno, absl::StrCat("attach ", m.plan->source, " at"), m.plan->destination);
    }
  }
  ::umask(022);
  for (const PlannedHook& h : plan.hooks) GPUNODE_RETURN_IF_ERROR(RunHook(h, state_json));
  return absl::OkStatus();
}

}  // namespace gpunode::container
