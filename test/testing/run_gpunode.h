// Runs the real gpunode binary (build/bin/gpunode) for end-to-end tests: exit code and output
// (stdout and stderr together), as a user sees them.
#ifndef GPUNODE_TEST_TESTING_RUN_GPUNODE_H_
#define GPUNODE_TEST_TESTING_RUN_GPUNODE_H_

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <map>
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


// Starts build/bin/gpunode with `args` in the background, stdout and stderr into `log`, with the
// environment of this process plus `env` (which replaces variables of the same name); the pid.
// Everything the child needs is made before fork(): a test process has threads (API server
// stand-ins, kubelet emulators), so until it execs the child may only call async-signal-safe
// functions — a malloc there (setenv, a std::string) can wait forever on a lock another thread held
// at the fork (seen under ASan: one agent start in four hung before exec).
inline pid_t SpawnGpunode(const std::vector<std::string>& args, const std::string& log,
                          const std::map<std::string, std::string>& env = {}) {
  const std::string bin = std::string(GPUNODE_BIN_DIR) + "/gpunode";
  std::vector<std::string> own;
  for (const auto& [k, v] : env) own.push_back(k + "=" + v);
  std::vector<const char*> envp;
  for (char** e = ::environ; *e != nullptr; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq == nullptr || !env.count(std::string(*e, static_cast<size_t>(eq - *e)))) envp.push_back(*e);
  }
  for (const std::string& kv : own) envp.push_back(kv.c_str());
  envp.push_back(nullptr);
  std::vector<const char*> argv = {bin.c_str()};
  for (const std::string& a : args) argv.push_back(a.c_str());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::execve(bin.c_str(), const_cast<char* const*>(argv.data()), const_cast<char* const*>(envp.data()));
    ::_exit(127);
  }
  return pid;
}

}  // namespace gpunode::testing

#endif  // GPUNODE_TEST_TESTING_RUN_GPUNODE_H_
