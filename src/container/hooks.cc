#include "src/container/hooks.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "src/base/host_fs.h"
#include "src/base/json.h"
#include "src/base/subprocess.h"


namespace gpunode::container {
namespace {

namespace fs = std::filesystem;

bool HasDotDot(absl::string_view path) {
  for (absl::string_view p : absl::StrSplit(path, '/')) {
    if (p == "..") return true;
  }
  return false;
}

// Files in a container's rootfs live as long as the container: no fsync.
WriteOptions ThrowAway() {
  WriteOptions o;
  o.durable = false;
  return o;
}

}  // namespace

StatusOr<std::string> ContainerRootFromState(absl::string_view state_json) {
  auto parsed_state = ParseJson(state_json, "OCI state on stdin");
  if (!parsed_state.ok()) return parsed_state.status();
  const nlohmann::json& state = *parsed_state;
  if (!state.is_object() || !state.contains("bundle") || !state["bundle"].is_string()) {
    return absl::InvalidArgumentError("OCI state on stdin: not a JSON object with a \"bundle\" string");
  }
  const std::string bundle = state["bundle"].get<std::string>();
  const std::string config_path = bundle + "/config.json";
  GPUNODE_ASSIGN_OR_RETURN(HostFs::Versioned text, HostFs::Local().ReadVersioned(config_path));
  if (!text.identity.exists) return absl::NotFoundError(absl::StrCat("read ", config_path, ": no such file"));
  GPUNODE_ASSIGN_OR_RETURN(nlohmann::json config, ParseJson(text.text, config_path));
  if (!config.is_object() || !config.contains("root") || !config["root"].is_object() ||
      !config["root"].contains("path") || !config["root"]["path"].is_string()) {
    return absl::InvalidArgumentError(absl::StrCat(config_path, ": no root.path"));
  }
  std::string root = config["root"]["path"].get<std::string>();
  if (root.empty()) return absl::InvalidArgumentError(absl::StrCat(config_path, ": empty root.path"));
  return absl::StartsWith(root, "/") ? root : bundle + "/" + root;
}

Status CreateSymlinks(const std::string& rootfs, const std::vector<std::string>& links) {
  GPUNODE_ASSIGN_OR_RETURN(HostFs root, HostFs::Open(rootfs));
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
    // The folder as the container sees it (through its own symlinks), never outside the root:
    // the same in-root walk as HostFs does for --host-root (runc's securejoin).
    const size_t slash = link.rfind('/');
    const std::string dir_in_root = slash == 0 ? "/" : link.substr(0, slash);
    GPUNODE_RETURN_IF_ERROR(root.MakeDirs(dir_in_root));
    GPUNODE_ASSIGN_OR_RETURN(std::string dir, root.LocalPath(dir_in_root));
    const fs::path path = fs::path(dir) / link.substr(slash + 1);
    std::error_code ec;
    if (fs::symlink_status(path, ec).type() != fs::file_type::not_found) continue;  // already there
    fs::create_symlink(target, path, ec);
    if (ec) return ErrnoToStatus(ec.value(), "symlink", path.string());
  }
  return absl::OkStatus();
}

Status UpdateLdCache(const std::string& rootfs, const std::vector<std::string>& folders, const std::string& ldconfig) {
  // Each path as the container sees it (through its own symlinks), never outside the root.
  GPUNODE_ASSIGN_OR_RETURN(HostFs root, HostFs::Open(rootfs));
  GPUNODE_RETURN_IF_ERROR(root.MakeDirs("/etc/ld.so.conf.d"));
  if (!root.Exists("/etc/ld.so.conf")) {
    GPUNODE_RETURN_IF_ERROR(
        root.WriteFileAtomically("/etc/ld.so.conf", "include /etc/ld.so.conf.d/*.conf\n", ThrowAway()).status());
  }
  std::string conf = "# Written by `gpunode cdi hook update-ldcache`: the folders of the GPU driver's libraries.\n";
  for (const std::string& f : folders) {
    if (f.empty() || f.front() != '/' || f.find('\n') != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("--folder \"", f, "\": not an absolute path"));
    }
    absl::StrAppend(&conf, f, "\n");
  }
  GPUNODE_RETURN_IF_ERROR(
      root.WriteFileAtomically("/etc/ld.so.conf.d/00-gpunode-cdi.conf", conf, ThrowAway()).status());

  // src/base/subprocess.h: signals reset and a group of its own; its output is the hook's (runc logs it).
  SubprocessOptions o;
  o.argv = {ldconfig, "-r", rootfs, "-f", "/etc/ld.so.conf", "-C", "/etc/ld.so.cache"};
  o.inherit_output = true;
  GPUNODE_ASSIGN_OR_RETURN(SubprocessResult r, RunSubprocess(o));
  if (r.exit_code != 0) {
    return absl::InternalError(absl::StrCat(ldconfig, " -r ", rootfs, " failed (",
                                            r.exit_code >= 0 ? absl::StrCat("exit ", r.exit_code) : std::string("killed"),
                                            ")"));
  }
  return absl::OkStatus();
}

StatusOr<bool> EnableCudaCompat(const std::string& rootfs, const std::string& host_driver_version,
                                const std::string& compat_dir) {
  auto major_of = [](absl::string_view v) -> std::optional<uint64_t> {
    const size_t n = v.find_first_not_of("0123456789");
    const absl::string_view digits = v.substr(0, n);
    uint64_t m = 0;
    if (digits.empty() || digits.size() > 9 || !absl::SimpleAtoi(digits, &m)) return std::nullopt;
    return m;
  };
  const std::optional<uint64_t> host_major = major_of(host_driver_version);
  if (!host_major) {
    return absl::InvalidArgumentError(
        absl::StrCat("--host-driver-version \"", host_driver_version, "\": not a driver version"));
  }
  if (compat_dir.empty() || compat_dir.front() != '/' || compat_dir.find('\n') != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("--cuda-compat-container-root \"", compat_dir, "\": not an absolute path"));
  }
  GPUNODE_ASSIGN_OR_RETURN(HostFs root, HostFs::Open(rootfs));
  if (!root.Exists(compat_dir)) return false;
  auto entries = root.ListDir(compat_dir);
  if (!entries.ok()) return false;
  std::vector<std::string> libs;  // libcuda.so.*.* as NVIDIA's glob
  for (const std::string& e : *entries) {
    if (absl::StartsWith(e, "libcuda.so.") && e.find('.', strlen("libcuda.so.")) != std::string::npos) libs.push_back(e);
  }
  if (libs.size() != 1) return false;
  const std::optional<uint64_t> compat_major = major_of(absl::string_view(libs[0]).substr(strlen("libcuda.so.")));
  if (!compat_major || *compat_major <= *host_major) return false;
  GPUNODE_RETURN_IF_ERROR(root.MakeDirs("/etc/ld.so.conf.d"));
  if (!root.Exists("/etc/ld.so.conf")) {
    GPUNODE_RETURN_IF_ERROR(
        root.WriteFileAtomically("/etc/ld.so.conf", "include /etc/ld.so.conf.d/*.conf\n", ThrowAway()).status());
  }
  GPUNODE_RETURN_IF_ERROR(root.WriteFileAtomically("/etc/ld.so.conf.d/00-compat-gpunode.conf",
                                                   absl::StrCat(compat_dir, "\n"), ThrowAway())
                              .status());
  return true;
}

}  // namespace gpunode::container
