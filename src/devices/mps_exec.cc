#include "src/devices/mps_exec.h"

#include <sched.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/base/subprocess.h"

namespace gpunode::devices::mps_exec {
namespace {

using std::chrono::milliseconds;
using ExecSpec = MpsExecSpec;

std::string Describe(const ExecSpec& spec) {
  return absl::StrCat(spec.program, " ", absl::StrJoin(spec.argv.begin() + 1, spec.argv.end(), " "));
}

// The process as src/base/subprocess.h starts it (signals reset, a group or session of its own,
// stdio, no other descriptor), plus MPS's steps in the child before exec: the private /dev/shm
// (a mount namespace of its own, the MPS shm folder bound over /dev/shm) and the chroot into the
// host root. Async-signal-safe calls only; a failed step comes back named.
SubprocessOptions OptionsFor(const ExecSpec& spec) {
  SubprocessOptions o;
  o.program = spec.program;
  o.argv = spec.argv;
  o.env = spec.env;
  if (spec.bind_shm_from.empty() && spec.chroot_dir.empty()) return o;
  o.in_child = [&spec](const char** step) -> int {
    if (!spec.bind_shm_from.empty()) {
      *step = "unshare(CLONE_NEWNS) for the private /dev/shm";
      if (::unshare(CLONE_NEWNS) != 0) return errno;
      *step = "make the mounts of the new namespace private";
      if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return errno;
      *step = "bind-mount the MPS shm folder over /dev/shm";
      if (::mount(spec.bind_shm_from.c_str(), spec.bind_shm_to.c_str(), nullptr, MS_BIND, nullptr) != 0) return errno;
    }
    if (!spec.chroot_dir.empty()) {
      *step = "chroot into the host root";
      if (::chroot(spec.chroot_dir.c_str()) != 0) return errno;
      *step = "chdir / in the host root";
      if (::chdir("/") != 0) return errno;
    }
    return 0;
  };
  return o;
}

}  // namespace

StatusOr<ExecResult> RunProgram(const ExecSpec& spec, const std::string& input, milliseconds timeout) {
  SubprocessOptions o = OptionsFor(spec);
  o.input = input.substr(0, 4096);  // a command line
  o.merge_output = true;
  o.timeout = timeout;
  o.max_output = 1 << 20;
  o.output_grace = milliseconds(0);  // its own children (a daemon it started) may hold the pipe
  GPUNODE_ASSIGN_OR_RETURN(SubprocessResult r, RunSubprocess(o));
  if (r.timed_out) {
    return absl::DeadlineExceededError(absl::StrCat(Describe(spec), ": no answer within ",
                                                    std::chrono::duration_cast<milliseconds>(timeout).count(),
                                                    " ms (killed)"));
  }
  return ExecResult{r.exit_code, std::move(r.out)};
}

StatusOr<pid_t> SpawnProgram(const ExecSpec& spec, int output_fd) {
  SubprocessOptions o = OptionsFor(spec);
  o.new_session = true;  // as `-d` would give the daemon
  return SpawnSubprocess(o, output_fd);
}

}  // namespace gpunode::devices::mps_exec
