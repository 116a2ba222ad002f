#include "src/devices/mps_exec.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace gpunode::devices::mps_exec {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using ExecSpec = MpsExecSpec;

// What failed in the child before exec: step and errno, written to a close-on-exec pipe.
struct ChildError {
  int step;
  int err;
};
enum ChildStep { kStepUnshare = 1, kStepPrivate, kStepBind, kStepChroot, kStepChdir, kStepDup, kStepExec };

const char* StepName(int step) {
  switch (step) {
    case kStepUnshare: return "unshare(CLONE_NEWNS) for the private /dev/shm";
    case kStepPrivate: return "make the mounts of the new namespace private";
    case kStepBind: return "bind-mount the MPS shm folder over /dev/shm";
    case kStepChroot: return "chroot into the host root";
    case kStepChdir: return "chdir / in the host root";
    case kStepDup: return "redirect stdio";
    case kStepExec: return "exec";
  }
  return "start";
}

[[noreturn]] void ChildFail(int fd, int step) {
  ChildError e{step, errno};
  ssize_t ignored = ::write(fd, &e, sizeof e);
  (void)ignored;
  _exit(127);
}

void CloseFrom(int first, int keep) {
  // close_range(2) where the kernel has it (5.9+), a loop otherwise.
#ifdef SYS_close_range
  if (keep > first) ::syscall(SYS_close_range, first, keep - 1, 0);
  if (::syscall(SYS_close_range, std::max(first, keep + 1), ~0U, 0) == 0) return;
#endif
  rlimit rl{};
  int max = ::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY ? static_cast<int>(rl.rlim_cur)
                                                                                  : 65536;
  max = std::min(max, 65536);
  for (int fd = first; fd < max; ++fd) {
    if (fd != keep) ::close(fd);
  }
}

// In the child, before exec (async-signal-safe calls only): every signal at its default and none
// blocked (the agent blocks SIGTERM, SIGINT and SIGHUP to take them with sigwait, and a blocked or
// ignored signal survives exec), the private /dev/shm, the chroot, stdio, no other descriptor.
// `new_session`: a session (and process group) of its own, as `-d` would give the daemon.
[[noreturn]] void ExecInChild(const ExecSpec& spec, char* const* argv, char* const* envp, int in_fd, int out_fd,
                              int report_fd, bool new_session) {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) ::sigaction(sig, &dfl, nullptr);  // EINVAL for the few others
  }
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  if (new_session) ::setsid();
  if (!spec.bind_shm_from.empty()) {
    if (::unshare(CLONE_NEWNS) != 0) ChildFail(report_fd, kStepUnshare);
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) ChildFail(report_fd, kStepPrivate);
    if (::mount(spec.bind_shm_from.c_str(), spec.bind_shm_to.c_str(), nullptr, MS_BIND, nullptr) != 0) {
      ChildFail(report_fd, kStepBind);
    }
  }
  if (!spec.chroot_dir.empty()) {
    if (::chroot(spec.chroot_dir.c_str()) != 0) ChildFail(report_fd, kStepChroot);
    if (::chdir("/") != 0) ChildFail(report_fd, kStepChdir);
  }
  if (::dup2(in_fd, 0) < 0 || ::dup2(out_fd, 1) < 0 || ::dup2(out_fd, 2) < 0) ChildFail(report_fd, kStepDup);
  CloseFrom(3, report_fd);
  ::execve(spec.program.c_str(), argv, envp);
  ChildFail(report_fd, kStepExec);
}

// The child's report after fork: nothing (end of file at exec) or one ChildError. Closes `fd`.
std::optional<ChildError> ReadChildReport(int fd) {
  ChildError ce{0, 0};
  ssize_t got;
  do {
    got = ::read(fd, &ce, sizeof ce);
  } while (got < 0 && errno == EINTR);
  ::close(fd);
  if (got == static_cast<ssize_t>(sizeof ce)) return ce;
  return std::nullopt;
}

std::string Describe(const ExecSpec& spec) {
  return absl::StrCat(spec.program, " ", absl::StrJoin(spec.argv.begin() + 1, spec.argv.end(), " "));
}

}  // namespace

// Runs `spec` with `input` on stdin; waits until it exits or `timeout` passes (then kills it).
// Its own children may keep the output pipe open: reading stops when the direct child has exited.
StatusOr<ExecResult> RunProgram(const ExecSpec& spec, const std::string& input, milliseconds timeout) {
  const std::string what = Describe(spec);
  std::vector<char*> argv, envp;
  for (const std::string& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const std::string& e : spec.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  int in[2], out[2], err[2];
  // Every descriptor is close-on-exec: another thread's fork+exec cannot inherit them.
  if (::pipe2(in, O_CLOEXEC) != 0) return ErrnoToStatus(errno, "pipe for", what);
  if (::pipe2(out, O_CLOEXEC) != 0) {
    const int e = errno;
    ::close(in[0]), ::close(in[1]);
    return ErrnoToStatus(e, "pipe for", what);
  }
  if (::pipe2(err, O_CLOEXEC) != 0) {
    const int e = errno;
    ::close(in[0]), ::close(in[1]), ::close(out[0]), ::close(out[1]);
    return ErrnoToStatus(e, "pipe for", what);
  }
  // Small inputs only (a command line): written before the fork, it fits the pipe's buffer and no
  // SIGPIPE can reach us when the program exits without reading it.
  if (!input.empty()) {
    ssize_t ignored = ::write(in[1], input.data(), std::min<size_t>(input.size(), 4096));
    (void)ignored;
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int e = errno;
    for (int fd : {in[0], in[1], out[0], out[1], err[0], err[1]}) ::close(fd);
    return ErrnoToStatus(e, "fork for", what);
  }
  if (pid == 0) ExecInChild(spec, argv.data(), envp.data(), in[0], out[1], err[1], /*new_session=*/false);
  ::close(in[0]);
  ::close(in[1]);
  ::close(out[1]);
  ::close(err[1]);
  if (std::optional<ChildError> ce = ReadChildReport(err[0])) {
    ::close(out[0]);
    ::waitpid(pid, nullptr, 0);
    return ErrnoToStatus(ce->err, StepName(ce->step), ce->step == kStepExec ? spec.program : what);
  }
  ExecResult result;
  const auto deadline = Clock::now() + timeout;
  bool exited = false, eof = false;
  int status = 0;
  char buf[4096];
  while (true) {
    if (!exited && ::waitpid(pid, &status, WNOHANG) == pid) exited = true;
    bool more = false;
    if (!eof) {
      pollfd p{out[0], POLLIN, 0};
      if (::poll(&p, 1, exited ? 0 : 20) > 0) {
        const ssize_t n = ::read(out[0], buf, sizeof buf);
        if (n > 0) {
          if (result.output.size() < (1 << 20)) result.output.append(buf, static_cast<size_t>(n));
          more = true;
        } else if (n == 0) {
          eof = true;
        }
      }
    } else if (!exited) {
      ::usleep(5000);
    }
    // Done when it exited and nothing more is waiting (a daemon it forked may hold the pipe).
    if (exited && !more) break;
    if (!exited && Clock::now() >= deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
      ::close(out[0]);
      return absl::DeadlineExceededError(absl::StrCat(what, ": no answer within ",
                                                      std::chrono::duration_cast<milliseconds>(timeout).count(),
                                                      " ms (killed)"));
    }
  }
  ::close(out[0]);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

// Starts `spec` as a long-running child (the control daemon in the foreground) with stdin from
// /dev/null and stdout and stderr appended to `output_fd`. Returns its pid: ours, from the fork,
// never read from a file a client could write.
StatusOr<pid_t> SpawnProgram(const ExecSpec& spec, int output_fd) {
  const std::string what = Describe(spec);
  std::vector<char*> argv, envp;
  for (const std::string& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const std::string& e : spec.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null < 0) return ErrnoToStatus(errno, "open", "/dev/null");
  int err[2];
  if (::pipe2(err, O_CLOEXEC) != 0) {
    const int e = errno;
    ::close(null);
    return ErrnoToStatus(e, "pipe for", what);
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int e = errno;
    for (int fd : {null, err[0], err[1]}) ::close(fd);
    return ErrnoToStatus(e, "fork for", what);
  }
  if (pid == 0) ExecInChild(spec, argv.data(), envp.data(), null, output_fd, err[1], /*new_session=*/true);
  ::close(null);
  ::close(err[1]);
  if (std::optional<ChildError> ce = ReadChildReport(err[0])) {
    ::waitpid(pid, nullptr, 0);
    return ErrnoToStatus(ce->err, StepName(ce->step), ce->step == kStepExec ? spec.program : what);
  }
  return pid;
}

}  // namespace gpunode::devices::mps_exec
