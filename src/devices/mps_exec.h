// How MpsManager (mps.h) starts the driver's nvidia-cuda-mps-control: fork, then in the child only
// async-signal-safe calls until execve: every signal at its default and none blocked, optionally a
// session of its own, a private mount namespace with the MPS shm folder over /dev/shm, a chroot
// into the host root, stdio, no other descriptor. A step that fails in the child comes back as an
// error naming it (a close-on-exec pipe carries the step and errno).
#ifndef GPUNODE_DEVICES_MPS_EXEC_H_
#define GPUNODE_DEVICES_MPS_EXEC_H_

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "src/base/status.h"

namespace gpunode::devices {

struct MpsExecSpec {
  std::string program;                // path as seen after the chroot (if any)
  std::vector<std::string> argv;
  std::vector<std::string> env;
  std::string chroot_dir;             // our path of the new root; "" = none
  std::string bind_shm_from;          // our paths; "" = no private mount namespace
  std::string bind_shm_to;
};

namespace mps_exec {

struct ExecResult {
  int exit_code = -1;  // -1: killed by a signal
  std::string output;  // stdout and stderr together
};

// Runs `spec` with `input` (a command line: small) on stdin; waits until it exits or `timeout`
// passes (then kills it). Its own children may keep the output pipe open: reading stops when the
// direct child has exited.
StatusOr<ExecResult> RunProgram(const MpsExecSpec& spec, const std::string& input, std::chrono::milliseconds timeout);

// Starts `spec` as a long-running child in a session of its own (the control daemon in the
// foreground) with stdin from /dev/null and stdout and stderr to `output_fd`. Returns its pid:
// ours, from the fork, never read from a file a client could write.
StatusOr<pid_t> SpawnProgram(const MpsExecSpec& spec, int output_fd);

}  // namespace mps_exec
}  // namespace gpunode::devices

#endif  // GPUNODE_DEVICES_MPS_EXEC_H_
