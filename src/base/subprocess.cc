#include "src/base/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/str_cat.h"

extern char** environ;

namespace gpunode {
namespace {

using Steady = std::chrono::steady_clock;

// What failed in the child before exec: a literal naming the step (the same address in the
// parent: fork copies the image) and errno, written to a close-on-exec pipe.
struct ChildError {
  const char* step;
  int err;
};

[[noreturn]] void ChildFail(int fd, const char* step, int err) {
  ChildError e{step, err};
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

constexpr int kSameAsOut = -2;  // err_fd: stderr to where stdout goes

// In the child, between fork and exec: async-signal-safe calls only. `in_fd`/`out_fd`/`err_fd`
// -1: keep ours.
[[noreturn]] void ExecChild(const SubprocessOptions& o, char* const* argv, char* const* envp, int in_fd, int out_fd,
                            int err_fd, int report_fd) {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) ::sigaction(sig, &dfl, nullptr);  // EINVAL for the few others
  }
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  if (o.new_session) {
    if (::setsid() < 0) ChildFail(report_fd, "setsid", errno);
  } else if (::setpgid(0, 0) != 0) {
    ChildFail(report_fd, "setpgid", errno);
  }
  if (o.in_child) {
    const char* step = "prepare the child";
    if (const int e = o.in_child(&step); e != 0) ChildFail(report_fd, step, e);
  }
  if ((in_fd >= 0 && ::dup2(in_fd, 0) < 0) || (out_fd >= 0 && ::dup2(out_fd, 1) < 0) ||
      (err_fd >= 0 && ::dup2(err_fd, 2) < 0) || (err_fd == kSameAsOut && ::dup2(1, 2) < 0)) {
    ChildFail(report_fd, "redirect stdio", errno);
  }
  CloseFrom(3, report_fd);
  ::execve(o.program.empty() ? argv[0] : o.program.c_str(), argv, envp);
  ChildFail(report_fd, "exec", errno);
}

// The parts of a start both entry points share: argv/envp as C arrays, the report pipe, fork.
class Start {
 public:
  explicit Start(const SubprocessOptions& o) : o_(o) {
    for (const std::string& a : o.argv) argv_.push_back(const_cast<char*>(a.c_str()));
    argv_.push_back(nullptr);
    if (o.env) {
      for (const std::string& e : *o.env) envp_.push_back(const_cast<char*>(e.c_str()));
      envp_.push_back(nullptr);
    }
  }
  // Forks; the child execs with these descriptors (closed here afterwards). Returns the pid once
  // the child has exec'd, or what failed.
  StatusOr<pid_t> Fork(int in_fd, int out_fd, int err_fd) {
    int report[2];
    if (::pipe2(report, O_CLOEXEC) != 0) {
      const int e = errno;
      CloseAll(in_fd, out_fd, err_fd);
      return ErrnoToStatus(e, "pipe for", o_.argv[0]);
    }
    const pid_t pid = ::fork();
    if (pid == 0) ExecChild(o_, argv_.data(), o_.env ? envp_.data() : environ, in_fd, out_fd, err_fd, report[1]);
    const int fork_errno = errno;
    ::close(report[1]);
    CloseAll(in_fd, out_fd, err_fd);
    if (pid < 0) {
      ::close(report[0]);
      return ErrnoToStatus(fork_errno, "fork for", o_.argv[0]);
    }
    if (!o_.new_session) ::setpgid(pid, pid);  // both sides set it: no window before exec
    ChildError ce{nullptr, 0};
    ssize_t got;
    do {
      got = ::read(report[0], &ce, sizeof ce);
    } while (got < 0 && errno == EINTR);
    ::close(report[0]);
    if (got == static_cast<ssize_t>(sizeof ce)) {
      while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
      }
      return ErrnoToStatus(ce.err, ce.step, o_.program.empty() ? o_.argv[0] : o_.program);
    }
    return pid;
  }

 private:
  static void CloseAll(int a, int b, int c) {
    for (int fd : {a, b, c}) {
      if (fd >= 0) ::close(fd);
    }
  }

  const SubprocessOptions& o_;
  std::vector<char*> argv_, envp_;
};

StatusOr<int> OpenDevNull(int flags) {
  const int fd = ::open("/dev/null", flags | O_CLOEXEC);
  if (fd < 0) return ErrnoToStatus(errno, "open", "/dev/null");
  return fd;
}

// Reads the child's pipes, enforces the deadline and the stop, reaps it.
class Reader {
 public:
  Reader(const SubprocessOptions& o, pid_t pid, int out_fd, int err_fd) : o_(o), pid_(pid) {
    fds_[0] = {out_fd, POLLIN, 0};
    fds_[1] = {err_fd, POLLIN, 0};
    open_ = (out_fd >= 0) + (err_fd >= 0);
  }

  SubprocessResult Run() {
    const auto deadline = o_.timeout.count() > 0 ? Steady::now() + o_.timeout : Steady::time_point::max();
    std::optional<Steady::time_point> stop_reading;
    while (true) {
      if (!killed_ && !reaped_ && (Steady::now() >= deadline || o_.stop.stop_requested())) {
        r_.stopped = o_.stop.stop_requested();
        r_.timed_out = !r_.stopped;
        ::kill(-pid_, SIGKILL);  // its group: what it started too
        ::kill(pid_, SIGKILL);
        killed_ = true;
      }
      if (!reaped_ && Reap(WNOHANG)) stop_reading = Steady::now() + o_.output_grace;
      if (reaped_ && open_ == 0) break;
      int wait_ms = 50;
      if (reaped_) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*stop_reading - Steady::now());
        wait_ms = static_cast<int>(std::clamp<int64_t>(left.count(), 0, 10));
      }
      const int n = ::poll(fds_, 2, wait_ms);
      if (n < 0 && errno != EINTR) break;
      for (int i = 0; i < 2 && n > 0; ++i) ReadOne(i);
      // Exited: what is already in the pipes is read; more only within the grace.
      if (reaped_ && n <= 0 && Steady::now() >= *stop_reading) break;
    }
    for (pollfd& p : fds_) {
      if (p.fd >= 0) ::close(p.fd);
    }
    if (!reaped_) Reap(0);
    if (!killed_ && WIFEXITED(status_)) r_.exit_code = WEXITSTATUS(status_);
    if (WIFSIGNALED(status_)) r_.term_signal = WTERMSIG(status_);
    return std::move(r_);
  }

 private:
  bool Reap(int flags) {
    pid_t w;
    while ((w = ::waitpid(pid_, &status_, flags)) < 0 && errno == EINTR) {
    }
    reaped_ = w == pid_;
    return reaped_;
  }

  void ReadOne(int i) {
    pollfd& p = fds_[i];
    if (p.fd < 0 || (p.revents & (POLLIN | POLLHUP | POLLERR)) == 0) return;
    char buf[4096];
    const ssize_t got = ::read(p.fd, buf, sizeof buf);
    if (got > 0) {
      std::string& sink = i == 0 ? r_.out : r_.err;
      bool& truncated = i == 0 ? r_.out_truncated : r_.err_truncated;
      const size_t keep = std::min(static_cast<size_t>(got), o_.max_output - std::min(o_.max_output, sink.size()));
      sink.append(buf, keep);
      if (keep < static_cast<size_t>(got)) truncated = true;
    } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
      ::close(p.fd);
      p.fd = -1;
      --open_;
    }
  }

  const SubprocessOptions& o_;
  const pid_t pid_;
  pollfd fds_[2];
  int open_ = 0;
  bool killed_ = false, reaped_ = false;
  int status_ = 0;
  SubprocessResult r_;
};

}  // namespace

StatusOr<SubprocessResult> RunSubprocess(const SubprocessOptions& o) {
  if (o.argv.empty() || o.argv[0].empty()) return absl::InvalidArgumentError("run: no program");
  if (o.input.size() > 65536) {
    return absl::InvalidArgumentError(absl::StrCat("run ", o.argv[0], ": input of ", o.input.size(),
                                                   " bytes (at most 64 KiB)"));
  }
  int in_fd = -1;
  if (o.input.empty()) {
    GPUNODE_ASSIGN_OR_RETURN(in_fd, OpenDevNull(O_RDONLY));
  } else {
    // Written before the child runs: it fits the pipe's buffer, and no SIGPIPE can reach us when
    // the program exits without reading it.
    int in[2];
    if (::pipe2(in, O_CLOEXEC) != 0) return ErrnoToStatus(errno, "pipe for", o.argv[0]);
    ::fcntl(in[1], F_SETPIPE_SZ, 65536);
    ssize_t ignored = ::write(in[1], o.input.data(), o.input.size());
    (void)ignored;
    ::close(in[1]);
    in_fd = in[0];
  }
  int out[2] = {-1, -1}, err[2] = {-1, -1};
  if (!o.inherit_output) {
    if (::pipe2(out, O_CLOEXEC) != 0 || (!o.merge_output && ::pipe2(err, O_CLOEXEC) != 0)) {
      const int e = errno;
      for (int fd : {in_fd, out[0], out[1], err[0], err[1]}) {
        if (fd >= 0) ::close(fd);
      }
      return ErrnoToStatus(e, "pipe for", o.argv[0]);
    }
  }
  Start start(o);
  // The child's ends are closed in the parent by Fork; ours stay (on error: closed too).
  auto pid = start.Fork(in_fd, out[1], o.inherit_output ? -1 : o.merge_output ? kSameAsOut : err[1]);
  if (!pid.ok()) {
    for (int fd : {out[0], err[0]}) {
      if (fd >= 0) ::close(fd);
    }
    return pid.status();
  }
  return Reader(o, *pid, out[0], err[0]).Run();
}

StatusOr<pid_t> SpawnSubprocess(const SubprocessOptions& o, int output_fd) {
  if (o.argv.empty() || o.argv[0].empty()) return absl::InvalidArgumentError("run: no program");
  GPUNODE_ASSIGN_OR_RETURN(const int in_fd, OpenDevNull(O_RDONLY));
  int out_fd = output_fd;
  int own_null = -1;
  if (out_fd < 0) {
    auto null = OpenDevNull(O_WRONLY);
    if (!null.ok()) {
      ::close(in_fd);
      return null.status();
    }
    out_fd = own_null = *null;
  }
  Start start(o);
  // `output_fd` is the caller's: dup'd by the child, closed here only when it is our /dev/null.
  const int dup_out = ::fcntl(out_fd, F_DUPFD_CLOEXEC, 3);
  if (dup_out < 0) {
    const int e = errno;
    ::close(in_fd);
    if (own_null >= 0) ::close(own_null);
    return ErrnoToStatus(e, "dup", "the output descriptor");
  }
  if (own_null >= 0) ::close(own_null);
  return start.Fork(in_fd, dup_out, kSameAsOut);
}

}  // namespace gpunode
