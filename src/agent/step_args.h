// The one-shot steps' command lines (`cdi.args`, `runtime.args` and their `globalArgs`). The agent
// runs them as `gpunode <globalArgs> <args>` with its own privileges (root, the host mounted), and
// its config is a ConfigMap that the agent reloads while it runs: a free command line there would
// make "edit the ConfigMap" the same as "root on every GPU node" (`[sim, hostroot, ...]`, or
// `--nvml-library X.so`, which loads any library). So only two commands are accepted, each with
// the flags the chart renders (deploy/helm/gpunode/templates/configmap-agent.yaml) and
// docs/agent.md documents:
//
//   cdi:      cdi generate       --output F  --hook-path F  --driver-root D  --device-name-strategy S
//                                --disable-hook H (repeatable)
//   runtime:  runtime configure  --runtime R  --config F  --set-as-default  --cdi
//   globalArgs (either):         --host-root D  --nvml-library F  --cuda-library F
//
// A flag's value is never a flag ("-..."); paths are absolute; `--flag=value` reads as
// `--flag value`. Some values choose code that runs as root, or where root writes: every
// globalArgs flag (libraries, the root they are read from), --hook-path (the program container
// runtimes run for every GPU container), --driver-root (the driver libraries put into containers),
// --output and --config (the files written). Those are fixed while the agent runs: a reload that
// changes one is refused (CheckReloadable) and the change takes effect when the pod restarts.
#ifndef GPUNODE_AGENT_STEP_ARGS_H_
#define GPUNODE_AGENT_STEP_ARGS_H_

#include <optional>
#include <string>
#include <vector>

namespace gpunode::agent {

// What is wrong with one step's command line: which list ("args" or "globalArgs"), which item
// (its index; the list's size when something is missing at its end) and why.
struct StepArgsProblem {
  std::string list;
  size_t index = 0;
  std::string message;
};

// `step` is "cdi" or "runtime". nullopt when the command line is one of the accepted ones.
std::optional<StepArgsProblem> CheckStepArgs(const std::string& step, const std::vector<std::string>& args,
                                             const std::vector<std::string>& global_args);

// One value that is fixed while the agent runs: {"args", "--hook-path", "/usr/bin/gpunode"} or
// {"globalArgs", "--nvml-library", ""} (not given).
struct FixedValue {
  std::string list, flag, value;
  bool operator==(const FixedValue&) const = default;
};
// Every fixed flag of the step, in one order, with its value. For a command line CheckStepArgs
// refuses, the whole lists (flag "the command line").
std::vector<FixedValue> FixedStepValues(const std::string& step, const std::vector<std::string>& args,
                                        const std::vector<std::string>& global_args);

}  // namespace gpunode::agent

#endif  // GPUNODE_AGENT_STEP_ARGS_H_
