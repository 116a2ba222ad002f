// Stand-alone commands over the agent's components: `gpunode plugin` and `gpunode exporter` run
// their component in the agent's harness (fail-fast), so the signal, stop and logging plumbing is
// the agent's one copy.
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "src/agent/components.h"
#include "src/agent/node_context.h"
#include "src/cli/common.h"
#include "src/lifecycle/harness.h"

namespace gpunode::cli {

int RunComponentCommand(const GlobalOptions& global, NodeSession& session, const agent::AgentConfig& config,
                        const std::string& component, const std::string& hostname,
                        std::unique_ptr<kube::Client> kube) {
  // Signals are taken here by sigwait: blocked before any thread starts (threads inherit the mask).
  // SIGUSR1 is the harness telling of a failure (on_failure below), so the wait needs no timeout.
  sigset_t signals;
  sigemptyset(&signals);
  for (int s : {SIGTERM, SIGINT, SIGHUP, SIGUSR1}) sigaddset(&signals, s);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  lifecycle::Log log(config.log_format == "json" ? lifecycle::Log::Format::kJson : lifecycle::Log::Format::kText);
  log.set_program("gpunode " + component);
  agent::NodeContextOptions o;
  o.fs = session.fs();
  o.probe = session.probe_options();
  o.node_name = hostname;
  o.gate_pending = false;  // no validator in a stand-alone command
  o.kube = std::move(kube);
  o.self_args = {SelfPath(), "--host-root", session.fs().root()};
  if (!global.nvml_library.empty()) o.self_args.insert(o.self_args.end(), {"--nvml-library", global.nvml_library});
  agent::NodeContext ctx(std::move(o));
  lifecycle::HarnessOptions ho;
  ho.fail_fast = true;
  ho.on_failure = [] { ::kill(::getpid(), SIGUSR1); };
  lifecycle::Harness harness(ctx.clock(), log, ho);
  if (component == "plugin") {
    harness.Add(agent::MakePlugin(ctx, config, log));
  } else if (component == "dra") {
    harness.Add(agent::MakeDra(ctx, config, log));
  } else {
    harness.Add(agent::MakeExporter(ctx, config, log, nullptr, nullptr));
  }
  harness.Start();
  while (harness.failure().ok()) {
    const int sig = sigwaitinfo(&signals, nullptr);
    if (sig == SIGTERM || sig == SIGINT) {
      log.Info(component, absl::StrCat("received ", strsignal(sig), ": stopping"));
      break;
    }
    if (sig == SIGHUP) {
      log.Info(component, "SIGHUP: reloading the configuration and the devices");
      harness.Restart(component);
    }
    if (!harness.failure().ok()) break;
  }
  const std::vector<std::string> stuck = harness.Stop();
  int code = kExitOk;
  if (Status st = harness.failure(); !st.ok()) {
    PrintError(st);
    code = kExitFailed;
  } else {
    log.Info(component, stuck.empty() ? "stopped" : "stopped, leaving its run behind (still stopping)");
  }
  if (!stuck.empty()) {
    // The component's thread is still inside its run: leave without unwinding what it uses.
    std::cout.flush();
    std::cerr.flush();
    std::_Exit(code);
  }
  return code;
}

}  // namespace gpunode::cli
