// How MpsManager (mps.h) starts the driver's nvidia-cuda-mps-control, on src/base/subprocess.h
// (every signal at its default and none blocked, a process group or session of its own, stdio, no
// other descriptor) with MPS's own steps in the child: a private mount namespace with the MPS shm
// folder over /dev/shm, a chroot into the host root. A step that fails in the child comes back as
// an error naming it.
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
