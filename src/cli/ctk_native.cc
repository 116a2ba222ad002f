// What gpunode-as-nvidia-ctk runs itself, having no gpunode command of the same shape: `cdi list`
// over spec folders, `system create-device-nodes`, `system create-dev-char-symlinks`, `config`.
// Behaviour as nvidia-ctk v1.18.2's (cmd/nvidia-ctk/system/, internal/system/nvdevices,
// internal/system/nvmodules, cmd/nvidia-ctk/config/ of NVIDIA/nvidia-container-toolkit).
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "src/base/subprocess.h"
#include "src/cli/common.h"
#include "src/cli/ctk_internal.h"
#include "src/container/cdi_spec.h"
#include "src/container/oci_request.h"

namespace gpunode::cli::ctk {
namespace {

constexpr size_t kMaxSpecBytes = 4 << 20;

StatusOr<HostFs> Host(const Call& call) { return HostFs::Open(call.host_root); }

std::string JoinPath(const std::string& a, const std::string& b) {
  if (a.empty() || a == "/") return b.front() == '/' ? b : "/" + b;
  return (a.back() == '/' ? a.substr(0, a.size() - 1) : a) + (b.front() == '/' ? b : "/" + b);
}

// The major of a character device in /proc/devices ("195 nvidia-frontend"), or -1.
int CtkCharMajor(const std::string& devices, const std::string& name) {
  bool chars = false;
  for (absl::string_view line : absl::StrSplit(devices, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (absl::StartsWith(line, "Character devices:")) {
      chars = true;
      continue;
    }
    if (line.empty() || absl::StartsWith(line, "Block devices:")) {
      chars = false;
      continue;
    }
    std::vector<absl::string_view> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    int major = 0;
    if (chars && f.size() == 2 && f[1] == name && absl::SimpleAtoi(f[0], &major)) return major;
  }
  return -1;
}

}  // namespace

int CdiList(const Call& call, const std::vector<std::string>& spec_dirs) {
  auto format = ParseOutputFormat(call.output_format);
  auto host = Host(call);
  if (!format.ok() || !host.ok()) {
    PrintError(!format.ok() ? format.status() : host.status());
    return kExitUsage;
  }
  std::vector<std::string> names, files;
  int broken = 0;
  for (const std::string& dir : spec_dirs) {
    auto entries = host->ListDir(dir);
    if (!entries.ok()) continue;  // a missing folder has no specs (as nvidia-ctk)
    for (const std::string& e : *entries) {
      if (!absl::EndsWith(e, ".yaml") && !absl::EndsWith(e, ".yml") && !absl::EndsWith(e, ".json")) continue;
      const std::string path = JoinPath(dir, e);
      auto text = host->ReadFile(path, kMaxSpecBytes);
      auto spec = text.ok() ? cdi::ParseSpec(*text, host->Resolve(path))
                            : StatusOr<cdi::Spec>(text.status());
      if (!spec.ok()) {
        std::cerr << "warning: " << spec.status().message() << " (left out)\n";
        ++broken;
        continue;
      }
      files.push_back(host->Resolve(path));
      for (std::string& n : cdi::QualifiedNames(*spec)) names.push_back(std::move(n));
    }
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  if (*format != OutputFormat::kTable) {
    PrintDocument({{"apiVersion", "gpunode/v1"},
                   {"kind", "CdiDeviceList"},
                   {"files", files},
                   {"devices", names}},
                  *format);
  } else {
    if (!call.quiet) std::cerr << "Found " << names.size() << " CDI devices\n";
    for (const std::string& n : names) std::cout << n << "\n";
  }
  return broken > 0 ? kExitFailed : kExitOk;
}

int CreateDeviceNodes(const Call& call, const std::string& root, const std::string& dev_root, bool control,
                      bool load_modules, bool dry_run) {
  auto host = Host(call);
  if (!host.ok()) {
    PrintError(host.status());
    return kExitUsage;
  }
  auto say = [&](const std::string& line) {
    if (!call.quiet) std::cout << line << "\n";
  };
  if (load_modules) {
    auto local_root = host->LocalPath(root, true, true);
    if (!local_root.ok()) {
      PrintError(local_root.status());
      return kExitUsage;
    }
    for (const char* module : {"nvidia", "nvidia-uvm", "nvidia-modeset"}) {
      SubprocessOptions run;
      if (*local_root == "/") {
        run.argv = {"/sbin/modprobe", module};
      } else {
        run.argv = {"chroot", *local_root, "/sbin/modprobe", module};
        run.program = "/usr/sbin/chroot";
      }
      run.merge_output = true;
      run.timeout = std::chrono::seconds(60);
      const std::string line = absl::StrJoin(run.argv, " ");
      if (dry_run) {
        say("would run " + line);
        continue;
      }
      auto done = RunSubprocess(run);
      if (!done.ok() || done->exit_code != 0) {
        PrintError(absl::StrCat("loading the NVIDIA kernel modules: ", line, ": ",
                                !done.ok() ? std::string(done.status().message())
                                           : absl::StrCat("exit ", done->exit_code, ": ",
                                                          absl::StripAsciiWhitespace(done->out))));
        return kExitFailed;
      }
      say("ran " + line);
    }
  }
  if (!control) return kExitOk;
  auto devices = host->ReadFile("/proc/devices");
  const std::string text = devices.ok() ? *devices : "";
  int nv = CtkCharMajor(text, "nvidia-frontend");
  if (nv < 0) nv = CtkCharMajor(text, "nvidia");
  const int uvm = CtkCharMajor(text, "nvidia-uvm");
  if (nv < 0 || uvm < 0) {
    PrintError(absl::StrCat("no ", nv < 0 ? "nvidia-frontend" : "nvidia-uvm", " major in ", host->Resolve("/proc/devices"),
                            ": are the NVIDIA kernel modules loaded? (--load-kernel-modules loads them)"));
    return kExitFailed;
  }
  const std::vector<std::pair<std::string, std::pair<int, int>>> nodes = {
      {"nvidiactl", {nv, 255}}, {"nvidia-modeset", {nv, 254}}, {"nvidia-uvm", {uvm, 0}}, {"nvidia-uvm-tools", {uvm, 1}}};
  const std::string dev = JoinPath(dev_root, "/dev");
  if (!dry_run) {
    if (Status st = host->MakeDirs(dev); !st.ok()) {
      PrintError(st);
      return kExitFailed;
    }
  }
  for (const auto& [name, number] : nodes) {
    const std::string host_path = JoinPath(dev, name);
    const std::string shown = absl::StrCat(host->Resolve(host_path), " (", number.first, ":", number.second, ")");
    if (host->Exists(host_path) || host->Stat(host_path).ok()) {
      say("exists " + shown);  // as nvidia-ctk: an existing node is left as it is
      continue;
    }
    if (dry_run) {
      say("would create " + shown);
      continue;
    }
    auto local = host->LocalPath(host_path, /*follow_last=*/false);
    if (!local.ok()) {
      PrintError(local.status());
      return kExitFailed;
    }
    if (::mknod(local->c_str(), S_IFCHR | 0666, makedev(number.first, number.second)) != 0 ||
        ::chmod(local->c_str(), 0666) != 0) {
      const int err = errno;
      PrintError(absl::StrCat("cannot create the character device ", shown, ": ", std::strerror(err),
                              err == EPERM ? " (mknod needs root or CAP_MKNOD)" : ""));
      return kExitFailed;
    }
    say("created " + shown);
  }
  return kExitOk;
}

int CreateDevCharSymlinks(const Call& call, const std::string& driver_root, const std::string& dev_char_path,
                          bool dry_run) {
  auto host = Host(call);
  if (!host.ok()) {
    PrintError(host.status());
    return kExitUsage;
  }
  const std::string dev = JoinPath(driver_root, "/dev");
  std::vector<std::string> candidates;
  if (auto entries = host->ListDir(dev); entries.ok()) {
    for (const std::string& e : *entries) {
      if (absl::StartsWith(e, "nvidia") && e != "nvidia-caps") candidates.push_back(JoinPath(dev, e));
    }
  } else {
    PrintError(entries.status());
    return kExitUsage;
  }
  if (auto caps = host->ListDir(JoinPath(dev, "/nvidia-caps")); caps.ok()) {
    for (const std::string& e : *caps) candidates.push_back(JoinPath(dev, "/nvidia-caps/" + e));
  }
  int made = 0;
  for (const std::string& node : candidates) {
    auto info = host->Stat(node);
    if (!info.ok() || info->type != FileType::kCharDevice) continue;
    const std::string link = JoinPath(dev_char_path, absl::StrCat(info->dev_major, ":", info->dev_minor));
    if (dry_run) {
      if (!call.quiet) std::cout << "would link " << host->Resolve(link) << " -> " << node << "\n";
      continue;
    }
    if (Status st = host->Symlink(node, link); !st.ok()) {
      PrintError(st);
      return kExitFailed;
    }
    ++made;
    if (!call.quiet) std::cout << "linked " << host->Resolve(link) << " -> " << node << "\n";
  }
  if (made == 0 && !dry_run && !call.quiet) {
    std::cerr << "warning: no NVIDIA character device in " << host->Resolve(dev) << ": no link made\n";
  }
  return kExitOk;
}

namespace {

struct ConfigKey {
  const char* key;
  bool gpunode_default;
};
constexpr ConfigKey kKeys[] = {{container::kAcceptEnvvarUnprivilegedKey, false},
                               {container::kAcceptVolumeMountsKey, true}};

// Sets a top-level `key = value` in TOML text: the key's line before the first table (a commented
// one, as NVIDIA's default file has, is uncommented), else a new line before the first table.
std::string SetTopLevelKey(const std::string& text, const std::string& key, const std::string& value) {
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  size_t first_table = lines.size();
  for (size_t i = 0; i < lines.size(); ++i) {
    if (absl::StartsWith(absl::StripLeadingAsciiWhitespace(lines[i]), "[")) {
      first_table = i;
      break;
    }
  }
  auto matches = [&](const std::string& line, bool commented) {
    absl::string_view l = absl::StripLeadingAsciiWhitespace(line);
    if (commented) {
      if (!absl::ConsumePrefix(&l, "#")) return false;
      l = absl::StripLeadingAsciiWhitespace(l);
    }
    if (!absl::ConsumePrefix(&l, key)) return false;
    l = absl::StripLeadingAsciiWhitespace(l);
    return absl::StartsWith(l, "=");
  };
  const std::string line = key + " = " + value;
  for (bool commented : {false, true}) {
    for (size_t i = 0; i < first_table; ++i) {
      if (matches(lines[i], commented)) {
        lines[i] = line;
        return absl::StrJoin(lines, "\n") + "\n";
      }
    }
  }
  lines.insert(lines.begin() + static_cast<long>(first_table), line);
  return absl::StrJoin(lines, "\n") + "\n";
}

}  // namespace

StatusOr<Plan> ConfigPlan(const Call& call, bool default_only) {
  Plan plan;
  std::string output = call.Value("output");
  if (!output.empty() && output.front() == '/' && call.host_root != "/") {  // a host file, as the others
    auto host = Host(call);
    if (!host.ok()) return host.status();
    output = host->Resolve(output);
  }
  if (default_only) {
    std::string text =
        "# The keys of NVIDIA's config.toml that gpunode's OCI runtime (nvidia-container-runtime) reads, with\n"
        "# gpunode's defaults; it reads no other key (docs/nvidia-ctk.md).\n";
    for (const ConfigKey& k : kKeys) absl::StrAppend(&text, k.key, " = ", k.gpunode_default ? "true" : "false", "\n");
    plan.native_description = "gpunode itself: its defaults of the two keys, to " + (output.empty() ? "stdout" : output);
    plan.native = [text, output] {
      if (output.empty()) {
        std::cout << text;
        return kExitOk;
      }
      auto w = HostFs::Local().WriteFileAtomically(output, text);
      if (!w.ok()) PrintError(w.status());
      return w.ok() ? kExitOk : kExitFailed;
    };
    return plan;
  }
  std::string file = call.Value("config-file");
  if (file.empty() && call.globals.count("config")) file = call.globals.at("config").back();
  if (file.empty()) {
    const char* a = std::getenv("NVIDIA_CTK_CONFIG_FILE_PATH");
    const char* b = std::getenv("XDG_CONFIG_HOME");
    file = container::NvidiaToolkitConfigPath(a ? a : "", b ? b : "");
  }
  std::vector<std::pair<std::string, std::string>> edits;
  for (const std::string& set : call.Values("set")) {
    const size_t eq = set.find('=');
    const std::string key = set.substr(0, eq);
    const std::string value = eq == std::string::npos ? "true" : set.substr(eq + 1);
    bool ours = false;
    for (const ConfigKey& k : kKeys) ours = ours || key == k.key;
    if (ours) {
      GPUNODE_ASSIGN_OR_RETURN(bool b, ParseGoBool("--set " + key, value));
      edits.emplace_back(key, b ? "true" : "false");
    } else if (key == "nvidia-container-runtime.mode" && (value == "cdi" || value == "auto")) {
      plan.notes.push_back(DoesNotApply(call.path, "--set " + set, "gpunode's OCI runtime always injects devices through CDI"));
    } else if (key == "nvidia-container-cli.no-cgroups") {
      plan.notes.push_back(DoesNotApply(
          call.path, "--set " + set,
          "gpunode has no nvidia-container-cli: its OCI runtime adds the devices as CDI edits and the low-level runtime "
          "(runc, crun) sets the device cgroup, or leaves it when rootless"));
    } else {
      return absl::FailedPreconditionError(DoesNotApply(
          call.path, "--set " + set,
          absl::StrCat("gpunode reads only ", kKeys[0].key, " and ", kKeys[1].key,
                       " from NVIDIA's config file; the other keys are for NVIDIA's nvidia-container-cli, runtime and "
                       "hook, which gpunode replaces")));
    }
  }
  GPUNODE_ASSIGN_OR_RETURN(bool in_place, call.Bool("in-place"));
  if (in_place && !output.empty()) {
    return absl::InvalidArgumentError("nvidia-ctk config: --in-place and --output name two files; give one");
  }
  auto host = Host(call);
  if (!host.ok()) return host.status();
  const std::string shown = host->Resolve(file);
  plan.native_description = absl::StrCat("gpunode itself: ", edits.empty() ? "show" : "set", " the keys gpunode reads in ",
                                         shown, in_place ? " (in place)" : output.empty() ? " (to stdout)" : " to " + output);
  plan.native = [host = *host, file, shown, edits, in_place, output] {
    auto current = host.ReadFile(file);
    if (!current.ok() && !absl::IsNotFound(current.status())) {
      PrintError(current.status());
      return kExitFailed;
    }
    std::string text = current.ok() ? *current : "";
    for (const auto& [key, value] : edits) text = SetTopLevelKey(text, key, value);
    container::RequestPolicy policy;
    if (Status st = container::ApplyNvidiaToolkitConfig(text, shown, policy); !st.ok()) {
      PrintError(st);
      return kExitUsage;
    }
    if (edits.empty() && !in_place && output.empty()) {  // show what gpunode reads
      std::cout << "# " << shown << (current.ok() ? "" : " (missing: gpunode's defaults)") << "\n"
                << kKeys[0].key << " = " << (policy.accept_envvar_when_unprivileged ? "true" : "false") << "\n"
                << kKeys[1].key << " = " << (policy.accept_volume_mounts ? "true" : "false") << "\n";
      return kExitOk;
    }
    if (edits.empty() && in_place) return kExitOk;  // nothing gpunode reads changed
    if (!in_place && output.empty()) {
      std::cout << text;
      return kExitOk;
    }
    auto w = in_place ? host.WriteFileAtomically(file, text) : HostFs::Local().WriteFileAtomically(output, text);
    if (!w.ok()) {
      PrintError(w.status());
      return kExitFailed;
    }
    return kExitOk;
  };
  return plan;
}

}  // namespace gpunode::cli::ctk
