// Runs the real gpunode binary (build/bin/gpunode) for end-to-end tests: exit code and output
// (stdout and stderr together), as a user sees them.
#ifndef GPUNODE_TEST_TESTING_RUN_GPUNODE_H_
#define GPUNODE_TEST_TESTING_RUN_GPUNODE_H_

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace gpunode::testing {

struct Result {
  int exit_code = -1;
  std::string out;  // stdout and stderr together
};

// Runs `command` through the shell; stdout and stderr together.
inline Result RunShell(const std::string& command) {
  const std::string cmd = command + " 2>&1";
  Result r;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// `args` is appended to the binary's path and run through the shell.
inline Result RunGpunode(const std::string& args) {
  return RunShell(std::string(GPUNODE_BIN_DIR) + "/gpunode " + args);
}

// The same with environment variables set for the binary only (`env K=V ... gpunode args`).
inline Result RunGpunode(const std::string& args,
                         const std::vector<std::pair<std::string, std::string>>& env) {
  std::string prefix = "env";
  for (const auto& [k, v] : env) prefix += " '" + k + "=" + v + "'";
  return RunShell(prefix + " " + std::string(GPUNODE_BIN_DIR) + "/gpunode " + args);
}

}  // namespace gpunode::testing

#endif  // GPUNODE_TEST_TESTING_RUN_GPUNODE_H_
