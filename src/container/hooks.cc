#include "src/container/hooks.h"

#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <deque>
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

// The path in our view of `path`, an absolute path as the container will see it, inside `rootfs`.
// The hooks run before pivot_root, where an image's absolute symlink (/usr/lib/x86_64-linux-gnu ->
// /etc) would point into the host: so every symlink on the way is followed as the container would
// follow it, with `rootfs` as "/", and ".." stops at `rootfs` (what runc's securejoin does). The
// result never leaves `rootfs`; its existing components are not symlinks, except the last one when
// !follow_last. Missing components are kept as they are.
StatusOr<fs::path> ResolveInRootfs(const std::string& rootfs, absl::string_view path, bool follow_last) {
  std::vector<std::string> done;  // components below rootfs, resolved
  std::deque<std::string> todo;   // components still to walk
  for (absl::string_view p : absl::StrSplit(path, '/', absl::SkipEmpty())) todo.emplace_back(p);
  auto joined = [&] {
    fs::path p(rootfs);
    for (const std::string& c : done) p /= c;
    return p;
  };
  int links = 0;
  while (!todo.empty()) {
    std::string c = std::move(todo.front());
    todo.pop_front();
    if (c == ".") continue;
    if (c == "..") {
      if (!done.empty()) done.pop_back();
      continue;
    }
    const fs::path candidate = joined() / c;
    struct stat st;
    if (::lstat(candidate.c_str(), &st) != 0 || !S_ISLNK(st.st_mode) || (todo.empty() && !follow_last)) {
      done.push_back(std::move(c));
      continue;
    }
    if (++links > 255) {
      return absl::FailedPreconditionError(
          absl::StrCat("resolve ", path, " in ", rootfs, ": too many levels of symbolic links"));
    }
    std::error_code ec;
    const std::string target = fs::read_symlink(candidate, ec).string();
    if (ec) return ErrnoToStatus(ec.value(), "readlink", candidate.string());
    if (absl::StartsWith(target, "/")) done.clear();
    std::vector<std::string> parts = absl::StrSplit(target, '/', absl::SkipEmpty());
    todo.insert(todo.begin(), parts.begin(), parts.end());
  }
  return joined();
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
    if (link.front() != '/' || link.back() == '/' || HasDotDot(link)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--link \"", spec, "\": the link must be an absolute file path, without .."));
    }
    // The folder as the container sees it (through its own symlinks), never outside the root.
    const size_t slash = link.rfind('/');
    GPUNODE_ASSIGN_OR_RETURN(fs::path dir, ResolveInRootfs(rootfs, link.substr(0, slash), true));
    const fs::path path = dir / link.substr(slash + 1);
    std::error_code ec;
    if (fs::symlink_status(path, ec).type() != fs::file_type::not_found) continue;  // already there
    fs::create_directories(dir, ec);
    if (ec) return ErrnoToStatus(ec.value(), "create directory", dir.string());
    fs::create_symlink(target, path, ec);
    if (ec) return ErrnoToStatus(ec.value(), "symlink", path.string());
  }
  return absl::OkStatus();
}

Status UpdateLdCache(const std::string& rootfs, const std::vector<std::string>& folders, const std::string& ldconfig) {
  // Each path as the container sees it (through its own symlinks), never outside the root.
  std::error_code ec;
  GPUNODE_ASSIGN_OR_RETURN(fs::path conf_d, ResolveInRootfs(rootfs, "/etc/ld.so.conf.d", true));
  fs::create_directories(conf_d, ec);
  if (ec) return ErrnoToStatus(ec.value(), "create directory", conf_d.string());
  GPUNODE_ASSIGN_OR_RETURN(fs::path main_conf, ResolveInRootfs(rootfs, "/etc/ld.so.conf", true));
  if (!fs::exists(main_conf, ec)) {
    GPUNODE_RETURN_IF_ERROR(WriteText(main_conf, "include /etc/ld.so.conf.d/*.conf\n"));
  }
  GPUNODE_ASSIGN_OR_RETURN(fs::path our_conf,
                           ResolveInRootfs(rootfs, "/etc/ld.so.conf.d/00-gpunode-cdi.conf", true));
  std::string conf = "# Written by `gpunode cdi hook update-ldcache`: the folders of the GPU driver's libraries.\n";
  for (const std::string& f : folders) {
    if (f.empty() || f.front() != '/' || f.find('\n') != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("--folder \"", f, "\": not an absolute path"));
    }
    absl::StrAppend(&conf, f, "\n");
  }
  GPUNODE_RETURN_IF_ERROR(WriteText(our_conf, conf));

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
