// gpunode sim: the simulated nodes (list the built-in profiles, write a fixture host root).
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <filesystem>
#include <iostream>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "sim/support/profile.h"
#include "src/cli/common.h"
#include "src/node/capture.h"

namespace gpunode::cli {
namespace {

int RunList(const GlobalOptions& global) {
  auto format = ParseOutputFormat(global.output);
  if (!format.ok()) {
    PrintError(format.status());
    return kExitUsage;
  }
  nlohmann::json items = nlohmann::json::array();
  std::string table;
  for (const std::string& name : sim::BuiltinProfileNames()) {
    auto source = sim::ResolveProfile(name);
    if (!source.ok()) continue;
    auto profile = sim::ParseProfile(source->text, name + " (built-in)");
    if (!profile.ok()) {
      PrintError(profile.status());
      return kExitUsage;
    }
    items.push_back({{"name", name}, {"description", profile->description}, {"gpus", profile->gpus.size()}});
    table += absl::StrFormat("  %-22s %2d GPU%s  %s\n", name, profile->gpus.size(),
                             profile->gpus.size() == 1 ? " " : "s", profile->description);
  }
  if (*format == OutputFormat::kTable) {
    std::cout << "Built-in simulated nodes (use with --simulate NAME, or give a profile file):\n" << table;
  } else {
    PrintDocument({{"apiVersion", "gpunode/v1"}, {"kind", "ProfileList"}, {"items", items}}, *format);
  }
  return kExitOk;
}

// Device numbers of the NVIDIA driver's nodes when the host root's proc/devices does not name them:
// 195 is the driver's fixed major (nvidia<N> = 195:N, nvidiactl 195:255, nvidia-modeset 195:254);
// nvidia-uvm and nvidia-caps get dynamic majors on a real host, any fixed pair will do (the same
// numbers as test/e2e/lib.sh).
constexpr unsigned kNvidiaMajor = 195;
constexpr unsigned kUvmMajor = 510;
constexpr unsigned kCapsMajor = 511;

// The major of the character device NAME in DIR/proc/devices, or `fallback`.
unsigned CharMajor(const std::string& dir, const std::string& name, unsigned fallback) {
  std::ifstream in(dir + "/proc/devices");
  std::string line;
  bool chars = false;
  while (std::getline(in, line)) {
    if (line.rfind("Character devices:", 0) == 0) {
      chars = true;
      continue;
    }
    if (line.empty() || line.rfind("Block devices:", 0) == 0) {
      chars = false;
      continue;
    }
    if (!chars) continue;
    std::istringstream fields(line);
    unsigned major = 0;
    std::string dev;
    if (fields >> major >> dev && dev == name) return major;
  }
  return fallback;
}

// Replaces the plain files `gpunode sim hostroot` writes for DIR/dev/nvidia* by real character
// devices (mode 0666), so a container runtime can create them in containers (device specs, CDI):
// nvidia<N> = <nvidia>:N, nvidiactl <nvidia>:255, nvidia-modeset <nvidia>:254, nvidia-uvm and
// nvidia-uvm-tools <uvm>:0 and :1, nvidia-caps/nvidia-cap<N> <caps>:N. The majors come from
// DIR/proc/devices; when it has none, one is written naming the numbers used.
Status MakeDeviceNodes(const std::string& dir) {
  namespace fs = std::filesystem;
  const std::string devices = dir + "/proc/devices";
  if (!fs::exists(devices)) {
    const std::string text = absl::StrFormat(
        "Character devices:\n  1 mem\n%3d nvidia-frontend\n%3d nvidia-uvm\n%3d nvidia-caps\n\nBlock devices:\n  7 loop\n",
        kNvidiaMajor, kUvmMajor, kCapsMajor);
    GPUNODE_RETURN_IF_ERROR(HostFs::Local().WriteFileAtomically(devices, text).status());
  }
  const unsigned nv = CharMajor(dir, "nvidia-frontend", CharMajor(dir, "nvidia", kNvidiaMajor));
  const unsigned uvm = CharMajor(dir, "nvidia-uvm", kUvmMajor);
  const unsigned caps = CharMajor(dir, "nvidia-caps", kCapsMajor);
  auto number = [](const std::string& name, const std::string& prefix) -> int {
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) return -1;
    int n = 0;
    for (size_t i = prefix.size(); i < name.size(); ++i) {
      if (name[i] < '0' || name[i] > '9' || n > 1 << 20) return -1;
      n = n * 10 + (name[i] - '0');
    }
    return n;
  };
  auto make = [](const std::string& path, unsigned maj, unsigned min) -> Status {
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0 && S_ISCHR(st.st_mode) && major(st.st_rdev) == maj &&
        minor(st.st_rdev) == min) {
      ::chmod(path.c_str(), 0666);
      return absl::OkStatus();
    }
    ::unlink(path.c_str());
    if (::mknod(path.c_str(), S_IFCHR | 0666, makedev(maj, min)) != 0) {
      const int err = errno;
      std::string msg = absl::StrFormat("cannot create the character device %s (%u:%u): %s", path, maj, min,
                                        std::strerror(err));
      if (err == EPERM) {
        msg += "; --device-nodes needs CAP_MKNOD (run as root; in a container add the MKNOD capability "
               "or run it privileged), or leave the flag out for plain files";
      }
      return absl::PermissionDeniedError(msg);
    }
    ::chmod(path.c_str(), 0666);  // mknod's mode is masked by the umask
    return absl::OkStatus();
  };
  std::vector<std::pair<std::string, std::pair<unsigned, unsigned>>> nodes;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir + "/dev", ec)) {
    const std::string name = e.path().filename().string();
    if (int n = number(name, "nvidia"); n >= 0) nodes.push_back({e.path().string(), {nv, unsigned(n)}});
    if (name == "nvidiactl") nodes.push_back({e.path().string(), {nv, 255}});
    if (name == "nvidia-modeset") nodes.push_back({e.path().string(), {nv, 254}});
    if (name == "nvidia-uvm") nodes.push_back({e.path().string(), {uvm, 0}});
    if (name == "nvidia-uvm-tools") nodes.push_back({e.path().string(), {uvm, 1}});
  }
  if (ec) return absl::NotFoundError("cannot list " + dir + "/dev: " + ec.message());
  for (const auto& e : fs::directory_iterator(dir + "/dev/nvidia-caps", ec)) {
    if (int n = number(e.path().filename().string(), "nvidia-cap"); n >= 0) {
      nodes.push_back({e.path().string(), {caps, unsigned(n)}});
    }
  }
  for (const auto& [path, mm] : nodes) GPUNODE_RETURN_IF_ERROR(make(path, mm.first, mm.second));
  return absl::OkStatus();
}

int RunHostRoot(const std::string& ref, const std::string& dir, bool device_nodes, const std::string& profile_file,
                bool quiet) {
  auto source = sim::ResolveProfile(ref);
  if (!source.ok()) {
    PrintError(source.status());
    return kExitUsage;
  }
  auto profile = sim::ParseProfile(source->text, source->file_path.empty() ? source->name : source->file_path);
  if (!profile.ok()) {
    PrintError(profile.status());
    return kExitUsage;
  }
  if (device_nodes) {
    // A host root written before with --device-nodes: its device nodes are character devices of a
    // driver this host may not have, which cannot be rewritten as files. Remove them first.
    std::error_code ec;
    for (auto it = std::filesystem::recursive_directory_iterator(dir + "/dev", ec);
         !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
      if (it->is_character_file(ec)) std::filesystem::remove(it->path(), ec);
    }
  }
  if (Status st = sim::WriteHostRoot(*profile, dir); !st.ok()) {
    PrintError(st);
    return kExitUsage;
  }
  if (!profile_file.empty()) {
    WriteOptions w;
    w.keep_mode = false;
    if (auto written = HostFs::Local().WriteFileAtomically(profile_file, source->text, w); !written.ok()) {
      PrintError(written.status());
      return kExitUsage;
    }
  }
  if (device_nodes) {
    if (Status st = MakeDeviceNodes(dir); !st.ok()) {
      PrintError(st);
      return 2;
    }
  }
  if (quiet) return kExitOk;
  std::cout << "wrote the host root of " << source->name << " to " << dir
            << (device_nodes ? " (device nodes as character devices)" : "") << "\n";
  return kExitOk;
}

struct CaptureOptions {
  std::string name;
  std::string description;
  std::string output;
  bool quiet = false;
};

int RunCapture(const GlobalOptions& global, const CaptureOptions& opts) {
  if (IsOutputFormatName(opts.output)) {
    // --output names the profile's file; a format name there is almost always meant as -o.
    PrintError("--output \"" + opts.output + "\" names the file to write; a profile is always YAML (stdout: --output -; " +
               "a file of that name: --output ./" + opts.output + ")");
    return kExitUsage;
  }
  auto session = NodeSession::Open(global);
  if (!session.ok()) {
    PrintError(session.status());
    return kExitUsage;
  }
  auto inv = (*session)->Inventory();
  if (!inv.ok()) {
    PrintError(inv.status());
    return kExitUsage;
  }
  std::string name = opts.name.empty() ? (inv->hostname.empty() ? "captured" : inv->hostname) : opts.name;
  std::string description = opts.description.empty()
                                ? "captured by gpunode sim capture from " + (inv->hostname.empty() ? "a node" : inv->hostname)
                                : opts.description;
  std::string text = "# Generated by `gpunode sim capture`: what this node's NVML, /proc and /sys reported.\n" +
                     ToYaml(node::CaptureProfile(*inv, name, description));
  // The capture must be a valid profile: parse it back before handing it out.
  if (auto parsed = sim::ParseProfile(text, "captured profile"); !parsed.ok()) {
    PrintError("the captured profile does not validate (a gpunode bug): " + std::string(parsed.status().message()));
    return 2;
  }
  if (opts.output.empty() || opts.output == "-") {
    std::cout << text;
    return kExitOk;
  }
  WriteOptions w;
  w.keep_mode = false;
  if (auto written = HostFs::Local().WriteFileAtomically(opts.output, text, w); !written.ok()) {
    PrintError(written.status());
    return kExitUsage;
  }
  if (!opts.quiet) std::cerr << "wrote " << opts.output << "\n";
  return kExitOk;
}

}  // namespace

void AddSimCommand(CLI::App& app, GlobalOptions& global, int* exit_code) {
  CLI::App* cmd = app.add_subcommand("sim", "Simulated GPU nodes: list the built-in profiles, write host roots");
  cmd->require_subcommand(1);
  cmd->footer(
      "Any command runs against a simulated node with --simulate PROFILE, e.g.\n"
      "  gpunode --simulate broken-fallen-gpu doctor\n"
      "Profiles are documented in docs/profiles.md.");
  CLI::App* list = cmd->add_subcommand("list", "List the built-in node profiles");
  list->callback([&global, exit_code] { *exit_code = RunList(global); });
  auto ref = std::make_shared<std::string>();
  auto dir = std::make_shared<std::string>();
  CLI::App* root = cmd->add_subcommand(
      "hostroot", "Write the fixture host root of a profile (proc, sys, dev as plain files) for --host-root");
  root->add_option("PROFILE", *ref, "Built-in profile name or profile file")->required();
  root->add_option("DIR", *dir, "Directory to write (created)")->required();
  auto device_nodes = std::make_shared<bool>(false);
  root->add_flag("--device-nodes", *device_nodes,
                 "Make dev/nvidia* real character devices (mode 0666: nvidia<N> 195:N, nvidiactl 195:255, ...) "
                 "so containers can be given them; needs CAP_MKNOD");
  auto profile_file = std::make_shared<std::string>();
  root->add_option("--profile-file", *profile_file,
                   "Also write the profile itself to this file: the simulated NVML reads it (set "
                   "GPUNODE_SIM_PROFILE to it) and follows edits to it live, e.g. a GPU made `lost: true`");
  auto quiet = std::make_shared<bool>(false);
  root->add_flag("-q,--quiet", *quiet, kQuietHelp);
  root->callback([ref, dir, device_nodes, profile_file, quiet, exit_code] {
    *exit_code = RunHostRoot(*ref, *dir, *device_nodes, *profile_file, *quiet);
  });
  auto capture = std::make_shared<CaptureOptions>();
  CLI::App* cap = cmd->add_subcommand(
      "capture", "Write a node profile of this node (NVML, /proc, /sys), to replay it with --simulate FILE");
  cap->add_option("--name", capture->name, "Profile name (default: the hostname)");
  cap->add_option("--description", capture->description, "Profile description");
  cap->add_option("--output,-f", capture->output, "File to write atomically (default: stdout)");
  cap->add_flag("-q,--quiet", capture->quiet, kQuietHelp);
  cap->callback([&global, capture, exit_code] { *exit_code = RunCapture(global, *capture); });
}

}  // namespace gpunode::cli
