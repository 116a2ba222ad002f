#include "src/cli/common.h"

#include "src/base/json.h"
#include "src/base/terminal.h"
#include "src/base/yaml_emitter.h"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include <cstdio>
#include <filesystem>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "sim/support/profile.h"
#include "yaml-cpp/yaml.h"

namespace gpunode::cli {
namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

std::string ExecutableDir() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  std::string path(buf, static_cast<size_t>(n));
  return path.substr(0, path.rfind('/'));
}

// The simulated NVML library: $GPUNODE_SIM_LIBRARY, else beside the binary (build tree), else
// ../lib/gpunode/ (installed layout).
StatusOr<std::string> FindSimLibrary() {
  if (std::string env = Env("GPUNODE_SIM_LIBRARY"); !env.empty()) {
    if (::access(env.c_str(), R_OK) != 0) {
      return absl::NotFoundError(absl::StrCat("GPUNODE_SIM_LIBRARY=", env, ": no such file"));
    }
    return env;
  }
  std::string dir = ExecutableDir();
  for (const std::string& candidate :
       {dir + "/libgpunode-simnvml.so", dir + "/../lib/gpunode/libgpunode-simnvml.so"}) {
    if (::access(candidate.c_str(), R_OK) == 0) return candidate;
  }
  return absl::NotFoundError(absl::StrCat(
      "the simulated NVML library libgpunode-simnvml.so is not beside ", dir,
      "/gpunode nor in ../lib/gpunode; set GPUNODE_SIM_LIBRARY to its path"));
}

// Simulated host roots are <tmp>/gpunode-sim-XXXXXX, each with a file .lock that its run holds
// locked (flock) while it lives, and its children too (the OCI runtime the shim execs). A run that
// was killed (SIGKILL, or a signal no command handles, such as Ctrl-C during `doctor`) cannot remove
// its own: the next --simulate run removes those whose lock nobody holds. (An flock works across
// PID namespaces, where a pid would not.)
void RemoveStaleSimulationDirs(const std::filesystem::path& tmp) {
  std::error_code ec;
  std::filesystem::directory_iterator it(tmp, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    if (it->path().filename().string().rfind("gpunode-sim-", 0) != 0) continue;
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid()) continue;
    const int fd = ::open((it->path() / ".lock").c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) continue;  // no lock: not a host root of this kind (or one still being made)
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) {
      std::error_code removed;
      std::filesystem::remove_all(it->path(), removed);
    }
    ::close(fd);
  }
}

}  // namespace

NodeSession::~NodeSession() {
  if (!temp_dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(temp_dir_, ec);
  }
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

StatusOr<std::unique_ptr<NodeSession>> NodeSession::Open(const GlobalOptions& options) {
  std::unique_ptr<NodeSession> s(new NodeSession());
  std::string simulate = options.simulate.empty() ? Env("GPUNODE_SIMULATE") : options.simulate;
  if (!simulate.empty()) {
    if (options.host_root != "/") {
      return absl::InvalidArgumentError(
          "--simulate and --host-root cannot be combined: a simulated node brings its own host root");
    }
    GPUNODE_ASSIGN_OR_RETURN(sim::ProfileSource source, sim::ResolveProfile(simulate));
    GPUNODE_ASSIGN_OR_RETURN(sim::NodeProfile profile,
                             sim::ParseProfile(source.text, source.file_path.empty()
                                                                ? source.name + " (built-in)"
                                                                : source.file_path));
    GPUNODE_ASSIGN_OR_RETURN(std::string library, FindSimLibrary());
    std::error_code tmp_error;
    std::filesystem::path tmp = std::filesystem::temp_directory_path(tmp_error);
    if (tmp_error) tmp = "/tmp";  // $TMPDIR names no folder: mkdtemp below says so if /tmp fails too
    RemoveStaleSimulationDirs(tmp);
    std::string tmpl = (tmp / "gpunode-sim-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) {
      return ErrnoToStatus(errno, "create temporary directory", tmpl);
    }
    s->temp_dir_ = tmpl;
    // Locked before it is named .lock, so no other run ever sees this folder's lock free.
    s->lock_fd_ = ::open((tmpl + "/.lock.new").c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (s->lock_fd_ < 0 || ::flock(s->lock_fd_, LOCK_EX) != 0 ||
        ::rename((tmpl + "/.lock.new").c_str(), (tmpl + "/.lock").c_str()) != 0) {
      return ErrnoToStatus(errno, "lock", tmpl);
    }
    std::string profile_path = source.file_path;
    if (profile_path.empty()) {
      // A built-in profile: the simulated library reads it from a file like any other.
      profile_path = tmpl + "/profile.yaml";
      WriteOptions w;
      w.durable = false;  // a throw-away copy in our temporary folder
      GPUNODE_RETURN_IF_ERROR(HostFs::Local().WriteFileAtomically(profile_path, source.text, w).status());
    } else {
      profile_path = std::filesystem::absolute(profile_path).string();
    }
    std::string root = tmpl + "/root";
    GPUNODE_RETURN_IF_ERROR(Annotate(sim::WriteHostRoot(profile, root), "simulate " + source.name));
    ::setenv("GPUNODE_SIM_PROFILE", profile_path.c_str(), 1);
    GPUNODE_ASSIGN_OR_RETURN(HostFs fs, HostFs::Open(root));
    s->fs_.emplace(std::move(fs));
    s->probe_options_.nvml_library = library;
    s->probe_options_.cuda_library = library;
    s->simulated_ = source.name;
    return s;
  }
  GPUNODE_ASSIGN_OR_RETURN(HostFs fs, HostFs::Open(options.host_root));
  s->fs_.emplace(std::move(fs));
  std::string nvml = options.nvml_library.empty() ? Env("GPUNODE_NVML_LIBRARY") : options.nvml_library;
  std::string cuda = options.cuda_library.empty() ? Env("GPUNODE_CUDA_LIBRARY") : options.cuda_library;
  if (!nvml.empty()) s->probe_options_.nvml_library = nvml;

  if (!cuda.empty()) s->probe_options_.cuda_library = cuda;
  return s;
}

void NodeSession::KeepAcrossExec() const {
  if (lock_fd_ >= 0) ::fcntl(lock_fd_, F_SETFD, 0);
}

StatusOr<node::NodeInventory> NodeSession::Inventory() const {
  GPUNODE_ASSIGN_OR_RETURN(node::NodeInventory inv, node::ProbeNode(*fs_, probe_options_));
  inv.simulated_profile = simulated_;
  return inv;
}

StatusOr<node::NodeInventory> NodeSession::InventoryWithNvml() const {
  GPUNODE_ASSIGN_OR_RETURN(node::NodeInventory inv, Inventory());
  if (!inv.driver.status.ok()) {
    return Status(inv.driver.status.code(),
                  absl::StrCat("NVML: ", inv.driver.status.message(), " (run `gpunode doctor`)"));
  }
  return inv;
}

StatusOr<OutputFormat> ParseOutputFormat(const std::string& text, bool allow_yaml) {
  if (text == "table" || text == "text" || text.empty()) return OutputFormat::kTable;
  if (text == "json") return OutputFormat::kJson;
  if (text == "yaml" && allow_yaml) return OutputFormat::kYaml;
  return absl::InvalidArgumentError(absl::StrCat("-o/--output \"", text, "\" is not one of table, json",
                                                 allow_yaml ? ", yaml" : ""));
}

bool UseColor(const GlobalOptions& options) {
  if (options.color == "always") return true;
  if (options.color == "never") return false;
  if (!Env("NO_COLOR").empty() || Env("TERM") == "dumb") return false;
  return ::isatty(STDOUT_FILENO) == 1;
}

std::string ToYaml(const nlohmann::ordered_json& doc) {
  return JsonToYaml(doc) + "\n";
}

void PrintDocument(const nlohmann::ordered_json& doc, OutputFormat format) {
  if (format == OutputFormat::kYaml) {
    std::cout << ToYaml(doc);
  } else {
    std::cout << DumpJson(doc, 2) << "\n";
  }
}

void PrintError(const std::string& message) {
  bool color = ::isatty(STDERR_FILENO) == 1 && Env("NO_COLOR").empty();
  // Messages carry foreign text (an API server's message, a file's contents): escapes shown.
  std::cerr << (color ? "\033[31merror:\033[0m " : "error: ") << TerminalSafeText(message, false) << "\n";
}

void PrintError(const Status& status) { PrintError(std::string(status.message())); }

CLI::Option* AddKubeconfigOption(CLI::App* cmd, std::string* kubeconfig) {
  return cmd->add_option("--kubeconfig", *kubeconfig,
                         "kubeconfig file (default: $KUBECONFIG, else the pod's service account, else ~/.kube/config)");
}

}  // namespace gpunode::cli
