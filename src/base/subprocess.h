// The one way gpunode starts another program (the agent's child steps, MPS's control program, the
// CDI hook's ldconfig). fork, then in the child only async-signal-safe calls until execve:
//  - every signal at its default and none blocked: a long-running gpunode blocks SIGTERM, SIGINT
//    and SIGHUP to take them with sigwait, and a blocked or ignored signal survives exec (a child
//    that inherited the mask would never see the kubelet's SIGTERM);
//  - a process group of its own (or, with new_session, a session), so that a deadline or a stop
//    kills what it started too;
//  - stdin from `input` or /dev/null; stdout and stderr into pipes (or inherited); no other
//    descriptor;
//  - optional steps of the caller's (MPS: a private mount namespace, a chroot) that report the
//    step and errno back through a close-on-exec pipe, as does exec itself, so a child that could
//    not start is an error naming what failed, never exit code 127 to guess from.
// Output is captured up to a byte cap per stream (the rest is read and dropped, so the child never
// blocks on a full pipe). A child that daemonizes — or anything it started that keeps the pipes
// open — does not hold the caller: once the direct child has exited, output is read for
// `output_grace` at most.
#ifndef GPUNODE_BASE_SUBPROCESS_H_
#define GPUNODE_BASE_SUBPROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "src/base/status.h"

namespace gpunode {

struct SubprocessOptions {
  std::vector<std::string> argv;                 // argv[0]: the program's path unless `program` is set
  std::string program;                           // the path to exec (no PATH lookup); "": argv[0]
  std::optional<std::vector<std::string>> env;   // nullopt: this process's environment
  std::string input;                             // on stdin (at most 64 KiB); empty: /dev/null
  bool merge_output = false;                     // stderr into `out`
  bool inherit_output = false;                   // stdout and stderr are ours (nothing captured)
  // 0: none. At the deadline, or when `stop` is requested, the child's process group is killed.
  std::chrono::milliseconds timeout{0};
  std::stop_token stop;
  size_t max_output = 16u << 20;                 // bytes kept per stream
  std::chrono::milliseconds output_grace{200};   // reading after the direct child exited
  bool new_session = false;                      // setsid() instead of a process group of its own
  // Runs in the child after the signal reset and the new group, before stdio and exec:
  // async-signal-safe calls only (no allocation, no locks). Returns 0, or an errno with `*step`
  // set to a literal naming what failed.
  std::function<int(const char** step)> in_child;
};

struct SubprocessResult {
  int exit_code = -1;   // -1: ended by a signal (term_signal) or killed by us
  int term_signal = 0;
  bool timed_out = false;  // killed at the deadline
  bool stopped = false;    // killed because `stop` was requested
  std::string out, err;
  bool out_truncated = false, err_truncated = false;
};

// Runs the program to its end (or its deadline, or a stop). Errors: the program could not be
// started (pipe, fork, a step of in_child, exec), named; everything after the start — exit code,
// signal, deadline — is in the result.
StatusOr<SubprocessResult> RunSubprocess(const SubprocessOptions& options);

// Starts a long-running program with stdin from /dev/null and stdout and stderr appended to
// `output_fd` (-1: /dev/null); timeout, stop and capture do not apply. Returns its pid: ours, from
// the fork (a daemon that forks again is found by the caller through its own means, never by a
// pid a file says). Reap it with waitpid; signal its group with kill(-pid, ...).
StatusOr<pid_t> SpawnSubprocess(const SubprocessOptions& options, int output_fd);

}  // namespace gpunode

#endif  // GPUNODE_BASE_SUBPROCESS_H_
