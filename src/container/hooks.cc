#include "src/container/hooks.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"

extern char** environ;

namespace gpunode::container {
namespace {

namespace fs = std::filesystem;

bool HasDotDot(absl::string_view path) {
  for (absl::string_view p : absl::StrSplit(path, '/')) {
    if (p == "..") return true;
  }
  return false;
}

Status WriteText(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("write ", path.string(), ": failed"));
  return absl::OkStatus();
}

}  // namespace

StatusOr<std::string> ContainerRootFromState(absl::string_view state_json) {
  auto state = nlohmann::json::parse(std::string(state_json), nullptr, /*allow_exceptions=*/false);
  if (!state.is_object() || !state.contains("bundle") || !state["bundle"].is_string()) {
    return absl::InvalidArgumentError("OCI state on stdin: not a JSON object with a \"bundle\" string");
  }
  const std::string bundle = state["bundle"].get<std::string>();
  const std::string config_path = bundle + "/config.json";
  std::ifstream in(config_path);
  if (!in) return ErrnoToStatus(errno, "read", config_path);
  std::stringstream text;
  text << in.rdbuf();
  auto config = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (!config.is_object() || !config.contains("root") || !config["root"].is_object() ||
      !config["root"].contains("path") || !config["root"]["path"].is_string()) {
    return absl::InvalidArgumentError(absl::StrCat(config_path, ": no root.path"));
  }
  std::string root = config["root"]["path"].get<std::string>();
  if (root.empty()) return absl::InvalidArgumentError(absl::StrCat(config_path, ": empty root.path"));
  return absl::StartsWith(root, "/") ? root : bundle + "/" + root;
}

Status CreateSymlinks(const std::string& rootfs, const std::vector<std::string>& links) {
  for (const std::string& spec : links) {
    size_t sep = spec.find("::");
    if (sep == std::string::npos || sep == 0 || sep + 2 >= spec.size()) {
      return absl::InvalidArgumentError(absl::StrCat("--link \"", spec, "\": not TARGET::LINK"));
    }
    const std::string target = spec.substr(0, sep);
    const std::string link = spec.substr(sep + 2);
    if (link.front() != '/' || HasDotDot(link)) {
      return absl::InvalidArgumentError(absl::StrCat("--link \"", spec, "\": the link must be absolute, without .."));
    }
    const fs::path path = fs::path(rootfs) / link.substr(1);
    std::error_code ec;
    if (fs::symlink_status(path, ec).type() != fs::file_type::not_found) continue;  // already there
    fs::create_directories(path.parent_path(), ec);
    if (ec) return ErrnoToStatus(ec.value(), "create directory", path.parent_path().string());
    fs::create_symlink(target, path, ec);
    if (ec) return ErrnoToStatus(ec.value(), "symlink", path.string());
  }
  return absl::OkStatus();
}

Status UpdateLdCache(const std::string& rootfs, const std::vector<std::string>& folders, const std::string& ldconfig) {
  std::error_code ec;
  const fs::path etc = fs::path(rootfs) / "etc";
  fs::create_directories(etc / "ld.so.conf.d", ec);
  if (ec) return ErrnoToStatus(ec.value(), "create directory", (etc / "ld.so.conf.d").string());
  if (!fs::exists(etc / "ld.so.conf", ec)) {
    GPUNODE_RETURN_IF_ERROR(WriteText(etc / "ld.so.conf", "include /etc/ld.so.conf.d/*.conf\n"));
  }
  std::string conf = "# Written by `gpunode cdi hook update-ldcache`: the folders of the GPU driver's libraries.\n";
  for (const std::string& f : folders) {
    if (f.empty() || f.front() != '/' || f.find('\n') != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("--folder \"", f, "\": not an absolute path"));
    }
    absl::StrAppend(&conf, f, "\n");
  }
  GPUNODE_RETURN_IF_ERROR(WriteText(etc / "ld.so.conf.d" / "00-gpunode-cdi.conf", conf));

  std::vector<std::string> args = {ldconfig, "-r", rootfs, "-f", "/etc/ld.so.conf", "-C", "/etc/ld.so.cache"};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  int rc = ::posix_spawn(&pid, ldconfig.c_str(), nullptr, nullptr, argv.data(), environ);
  if (rc != 0) return ErrnoToStatus(rc, "run", ldconfig);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return ErrnoToStatus(errno, "wait for", ldconfig);
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::InternalError(absl::StrCat(ldconfig, " -r ", rootfs, " failed (",
                                            WIFEXITED(status) ? absl::StrCat("exit ", WEXITSTATUS(status))
                                                              : std::string("killed"),
                                            ")"));
  }
  return absl::OkStatus();
}

}  // namespace gpunode::container
