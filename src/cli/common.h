// Shared plumbing of the subcommands: global options, opening the node (real or simulated),
// output formats and exit codes. src/cli is the only code that prints to the terminal.
#ifndef GPUNODE_CLI_COMMON_H_
#define GPUNODE_CLI_COMMON_H_

#include <memory>
#include <optional>
#include <string>

#include "CLI/CLI.hpp"
#include "nlohmann/json.hpp"
#include "src/base/go_bool.h"  // ParseGoBool
#include "src/agent/config.h"
#include "src/base/host_fs.h"
#include "src/base/status.h"
#include "src/bench/report.h"
#include "src/container/cdi.h"
#include "src/kube/client.h"
#include "src/node/inventory.h"
#include "src/node/probe.h"

namespace gpunode::cli {

// Exit codes shared by all commands (doctor and compat add 1 and 2 for their verdicts).
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 2;  // the operation failed (I/O, a server, a conflicting writer)
inline constexpr int kExitUsage = 3;   // bad flags, malformed input, unusable or refused files

enum class OutputFormat { kTable, kJson, kYaml };

// The help of -q/--quiet, the same on every command that has it (cdi generate, sim hostroot,
// sim capture, runtime configure): success notes go, errors and warnings stay.
inline constexpr char kQuietHelp[] = "Print nothing on success (errors and warnings still go to stderr)";

struct GlobalOptions {
  std::string host_root = "/";
  std::string simulate;     // profile name or file; also GPUNODE_SIMULATE
  std::string output = "table";
  std::string color = "auto";  // auto | always | never
  std::string nvml_library;    // override; also GPUNODE_NVML_LIBRARY
  std::string cuda_library;    // override; also GPUNODE_CUDA_LIBRARY
};

// The node a command works on, opened once: the host (through --host-root) or, under
// --simulate, a generated host root plus the simulated NVML library. Owns the temporary
// simulation directory and removes it on destruction.
class NodeSession {
 public:
  ~NodeSession();
  NodeSession(const NodeSession&) = delete;
  NodeSession& operator=(const NodeSession&) = delete;

  static StatusOr<std::unique_ptr<NodeSession>> Open(const GlobalOptions& options);

  const HostFs& fs() const { return *fs_; }
  const node::ProbeOptions& probe_options() const { return probe_options_; }
  node::ProbeOptions& probe_options() { return probe_options_; }
  // Name of the simulated profile, if simulating.
  const std::optional<std::string>& simulated() const { return simulated_; }
  // Runs every probe.
  StatusOr<node::NodeInventory> Inventory() const;
  // The inventory of a service's --print: an error too when NVML does not work ("NVML: ... (run
  // `gpunode doctor`)"), as the service would have no devices to show.
  StatusOr<node::NodeInventory> InventoryWithNvml() const;
  // A simulated node's host root stays locked in a program this process execs (the OCI shim's
  // runtime mounts from it); the first --simulate run after that program ends removes it.
  void KeepAcrossExec() const;

 private:
  NodeSession() = default;
  std::optional<HostFs> fs_;
  node::ProbeOptions probe_options_;
  std::optional<std::string> simulated_;
  std::string temp_dir_;  // removed on destruction
  int lock_fd_ = -1;      // temp_dir_/.lock, flock'ed while the session (or a process it execs) lives
};

StatusOr<OutputFormat> ParseOutputFormat(const std::string& text, bool allow_yaml = true);
// A file flag (`--output FILE`) given "table", "json" or "yaml": almost always meant as -o FORMAT,
// so the commands refuse it with a hint (a file of that name: ./json).
inline bool IsOutputFormatName(const std::string& value) {
  return value == "table" || value == "json" || value == "yaml";
}
bool UseColor(const GlobalOptions& options);

// Prints a JSON document as JSON (2-space indent) or YAML on stdout.
void PrintDocument(const nlohmann::ordered_json& doc, OutputFormat format);
// The YAML text of a JSON document (keys in document order, strings quoted).
std::string ToYaml(const nlohmann::ordered_json& doc);
// "error: <message>" on stderr, in red on a TTY.
void PrintError(const Status& status);
void PrintError(const std::string& message);

// Registers subcommands. Each returns the exit code through `*exit_code` when it runs.
void AddDoctorCommand(CLI::App& app, GlobalOptions& global, int* exit_code);
void AddCompatCommand(CLI::App& app, GlobalOptions& global, int* exit_code);
void AddSimCommand(CLI::App& app, GlobalOptions& global, int* exit_code);
void AddBenchCommand(CLI::App& app, GlobalOptions& global, int* exit_code);
void AddCdiCommand(CLI::App& app, GlobalOptions& global, int* exit_code);
void AddRuntimeCommand(CLI::App& app, GlobalOptions& global, int* exit_code);
void AddLabelsCommand(CLI::App& app, GlobalOptions& global, int* exit_code);
void AddPluginCommand(CLI::App& app, GlobalOptions& global, int* exit_code);
void AddExporterCommand(CLI::App& app, GlobalOptions& global, int* exit_code);
void AddK8sCommand(CLI::App& app, GlobalOptions& global, int* exit_code);
void AddMigCommand(CLI::App& app, GlobalOptions& global, int* exit_code);
void AddAgentCommand(CLI::App& app, GlobalOptions& global, int* exit_code);

// Runs one of the agent's components ("plugin" or "exporter", configured by `config`) as a
// stand-alone command: the agent's harness in fail-fast mode (the first failure is printed and
// exits 2, as NVIDIA's binaries do), SIGTERM/SIGINT stop (exit 0), SIGHUP restarts the component
// with its configuration and devices read again; log lines "TIME gpunode <component>: ...".
// `kube`: the Kubernetes API for a component that needs it ("dra"; "exporter" for pod labels and
// UID), else nullptr.
int RunComponentCommand(const GlobalOptions& global, NodeSession& session, const agent::AgentConfig& config,
                        const std::string& component, const std::string& hostname,
                        std::unique_ptr<kube::Client> kube = nullptr);
void AddDraPluginCommand(CLI::App& app, GlobalOptions& global, int* exit_code);
void AddFleetCommand(CLI::App& app, GlobalOptions& global, int* exit_code);
// `gpunode image config REF` (image_cmd.cc): an image's config from its registry.
void AddImageCommand(CLI::App& app, GlobalOptions& global, int* exit_code);

// Runs `options` on the session's GPUs (fresh probe without cuInit; Ctrl-C stops cleanly), with
// progress lines on stderr when `progress`. Shared by `bench` and `doctor --with-bench`. Fails
// when nothing can run (simulated node, no kernels, no libcuda, no GPU, bad --gpus index).
StatusOr<bench::BenchReport> RunBenchOnSession(const NodeSession& session,
                                               const bench::BenchOptions& options, bool progress);

// The spec `gpunode cdi generate` writes, for the session's node (NVML and files; no cuInit).
// Shared with `gpunode oci-runtime`, which builds one in memory when no spec file offers the GPUs.
struct GeneratedSpec {
  container::DriverFiles files;
  container::BuildResult built;
  std::string host_root;  // the root of the node the spec is for (a simulated node's host root too)
  std::shared_ptr<NodeSession> session;  // keeps a simulated node's host root alive
};
StatusOr<GeneratedSpec> GenerateHostSpec(const GlobalOptions& global, const std::string& driver_root,
                                         const std::string& dev_root,
                                         const container::BuildOptions& build);
// The absolute path of this executable (/proc/self/exe).
std::string SelfPath();

// `gpunode oci-runtime ARGS...` (and the binary called as nvidia-container-runtime): parsed by
// hand, since everything after our own flags belongs to the real runtime. Returns only on error
// (otherwise it execs the runtime).
int RunOciRuntime(const std::vector<std::string>& args);
// --kubeconfig, the same for every command that talks to the Kubernetes API.
CLI::Option* AddKubeconfigOption(CLI::App* cmd, std::string* kubeconfig);
// ParseGoBool (Go's strconv.ParseBool for NVIDIA's flags and variables) is in src/base/go_bool.h.
// gpunode as `nvidia-container-runtime-hook` (Docker's --gpus; oci_runtime_cmd.cc).
int RunLegacyHook(const std::vector<std::string>& args);
void AddOciRuntimeHelp(CLI::App& app);
// `gpunode completion bash|zsh|fish` and `gpunode man`, generated from `app`'s command tree at run
// time (completion_cmd.cc); registered last, so they see every command.
void AddCompletionCommands(CLI::App& app, int* exit_code);

}  // namespace gpunode::cli

#endif  // GPUNODE_CLI_COMMON_H_
