// gpunode as NVIDIA's `nvidia-ctk` (NVIDIA Container Toolkit v1.18 command lines; docs/nvidia-ctk.md).
#ifndef GPUNODE_CLI_CTK_CMD_H_
#define GPUNODE_CLI_CTK_CMD_H_

#include <optional>
#include <string>
#include <vector>

namespace CLI {
class App;
}  // namespace CLI

namespace gpunode::cli {

// What an nvidia-ctk command line comes to.
struct CtkOutcome {
  // >= 0: handled here (help, version, a "does not apply" line, a command gpunode runs itself),
  // this is the exit code. -1: run gpunode with `gpunode_args` (gpunode's own command line).
  int exit_code = -1;
  std::vector<std::string> gpunode_args;
};

// `args`: the arguments after the program name (`nvidia-ctk ARGS`, `gpunode ctk ARGS`).
CtkOutcome RunNvidiaCtk(const std::vector<std::string>& args);

// Where `args` (after the program name) is `[gpunode global flags] ctk ARGS...`: the arguments for
// RunNvidiaCtk (the global flags first), else nothing.
std::optional<std::vector<std::string>> CtkArguments(const std::vector<std::string>& args);

// `gpunode ctk` in gpunode's own command tree (help, completion).
void AddCtkHelp(CLI::App& app);

}  // namespace gpunode::cli

#endif  // GPUNODE_CLI_CTK_CMD_H_
