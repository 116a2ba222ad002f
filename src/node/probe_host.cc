// Probes of the file-based layers: 0 hardware (sysfs), 1 kernel driver (procfs, /dev),
// 3 toolchain, 5 container runtimes and CDI specs, 6 kubelet. All reads go through HostFs.
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "src/base/json.h"
#include "src/base/yaml.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "nlohmann/json.hpp"
#include "src/node/probe.h"
#include "src/node/text_parsers.h"
#include "yaml-cpp/yaml.h"

namespace gpunode::node {
namespace {

constexpr uint16_t kNvidiaVendor = 0x10de;

std::optional<uint32_t> ReadHex(const HostFs& fs, const std::string& path) {
  auto text = fs.ReadLine(path);
  if (!text.ok()) return std::nullopt;
  return ParseHex(*text);
}

std::optional<PcieLink> ReadLink(const HostFs& fs, const std::string& dir, absl::string_view which) {
  auto speed = fs.ReadLine(absl::StrCat(dir, "/", which, "_link_speed"));
  auto width = fs.ReadLine(absl::StrCat(dir, "/", which, "_link_width"));
  if (!speed.ok() || !width.ok()) return std::nullopt;
  auto gen = PcieGenFromSpeed(*speed);
  unsigned w = 0;
  if (!gen || !absl::SimpleAtoi(*width, &w)) return std::nullopt;
  return PcieLink{*gen, w};
}

// The PCIe root complex above a function ("pci0000:17"), found as Kubernetes' deviceattribute
// package finds it: /sys/bus/pci/devices/<bus id> links to /sys/devices/pciDDDD:BB/.../<bus id>;
// "" when the link says otherwise (a VMD domain, a VM's bus).
std::string PcieRoot(const HostFs& fs, const std::string& bus_id) {
  auto link = fs.ReadLink("/sys/bus/pci/devices/" + bus_id);
  if (!link.ok()) return "";
  std::filesystem::path target(*link);
  if (target.is_relative()) target = std::filesystem::path("/sys/bus/pci/devices") / target;
  const std::string path = target.lexically_normal().string();
  constexpr absl::string_view kDevices = "/sys/devices/";
  if (!absl::StartsWith(path, kDevices) || !absl::EndsWith(path, "/" + bus_id)) return "";
  const std::string root = path.substr(kDevices.size(), path.find('/', kDevices.size()) - kDevices.size());
  // "pci" + domain (4 hex digits) + ":" + bus (2 hex digits).
  if (root.size() != 10 || !absl::StartsWith(root, "pci") || root[7] != ':') return "";
  for (size_t i = 3; i < root.size(); ++i) {
    if (i != 7 && !absl::ascii_isxdigit(static_cast<unsigned char>(root[i]))) return "";
  }
  return absl::AsciiStrToLower(root);
}

}  // namespace

HardwareLayer ProbeHardware(const HostFs& fs) {
  HardwareLayer hw;
  auto entries = fs.ListDir("/sys/bus/pci/devices");
  if (!entries.ok()) {
    hw.status = entries.status();
    return hw;
  }
  for (const std::string& bus_id : *entries) {
    std::string dir = absl::StrCat("/sys/bus/pci/devices/", bus_id);
    auto vendor = ReadHex(fs, dir + "/vendor");
    if (!vendor || *vendor != kNvidiaVendor) continue;
    PciDevice d;
    d.bus_id = absl::AsciiStrToLower(bus_id);
    d.vendor = kNvidiaVendor;
    d.device = static_cast<uint16_t>(ReadHex(fs, dir + "/device").value_or(0));
    d.class_code = ReadHex(fs, dir + "/class").value_or(0);
    d.subsystem_vendor = static_cast<uint16_t>(ReadHex(fs, dir + "/subsystem_vendor").value_or(0));
    d.subsystem_device = static_cast<uint16_t>(ReadHex(fs, dir + "/subsystem_device").value_or(0));
    if (auto numa = fs.ReadLine(dir + "/numa_node"); numa.ok()) {
      int n = -1;
      if (absl::SimpleAtoi(*numa, &n) && n >= 0) d.numa_node = n;
    }
    d.link_current = ReadLink(fs, dir, "current");
    d.link_max = ReadLink(fs, dir, "max");
    if (auto link = fs.ReadLink(dir + "/driver"); link.ok()) {
      absl::string_view target = *link;
      size_t slash = target.rfind('/');
      d.driver = std::string(slash == absl::string_view::npos ? target : target.substr(slash + 1));
    }
    d.pcie_root = PcieRoot(fs, bus_id);
    (d.IsGpu() ? hw.gpus : hw.others).push_back(std::move(d));
  }
  if (auto nodes = fs.ListDir("/sys/devices/system/node"); nodes.ok()) {
    for (const std::string& n : *nodes) {
      int id = 0;
      if (absl::StartsWith(n, "node") && absl::SimpleAtoi(n.substr(4), &id)) ++hw.numa_nodes;
    }
  }
  return hw;
}

KernelDriverLayer ProbeKernelDriver(const HostFs& fs) {
  KernelDriverLayer k;
  if (auto release = fs.ReadLine("/proc/sys/kernel/osrelease"); release.ok()) k.kernel_release = *release;

  if (auto modules = fs.ReadFile("/proc/modules"); modules.ok()) {
    for (const std::string& name : ParseProcModules(*modules)) {
      if (name == "nvidia") k.nvidia_loaded = true;
      if (name == "nvidia_uvm") k.nvidia_uvm_loaded = true;
      if (name == "nvidia_modeset") k.nvidia_modeset_loaded = true;
      if (name == "nouveau") k.nouveau_loaded = true;
    }
  }

  k.proc_present = fs.Exists("/proc/driver/nvidia");
  if (auto text = fs.ReadFile("/proc/driver/nvidia/version"); text.ok()) {
    auto parsed = ParseNvrmVersion(*text);
    if (parsed.ok()) {
      k.version = parsed->version;
      k.flavor = parsed->flavor;
      k.version_line = parsed->line;
    } else {
      k.status = parsed.status();
    }
  } else if (k.proc_present) {
    k.status = text.status();
  }
  if (!k.version) {
    if (auto v = fs.ReadLine("/sys/module/nvidia/version"); v.ok()) {
      if (auto parsed = Version::Parse(*v, "/sys/module/nvidia/version"); parsed.ok()) k.version = *parsed;
    }
  }

  if (auto gpus = fs.ListDir("/proc/driver/nvidia/gpus"); gpus.ok()) {
    for (const std::string& bus : *gpus) {
      auto info = fs.ReadFile(absl::StrCat("/proc/driver/nvidia/gpus/", bus, "/information"));
      ProcGpu g = info.ok() ? ParseProcGpuInformation(*info) : ProcGpu{};
      g.bus_id = absl::AsciiStrToLower(bus);
      k.gpus.push_back(std::move(g));
    }
  }

  std::vector<std::string> nodes = {"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools",
                                    "/dev/nvidia-modeset"};
  if (auto dev = fs.ListDir("/dev"); dev.ok()) {
    for (const std::string& name : *dev) {
      unsigned n = 0;
      if (absl::StartsWith(name, "nvidia") && absl::SimpleAtoi(name.substr(6), &n)) {
        nodes.push_back("/dev/" + name);
      }
    }
  }
  for (const std::string& path : nodes) {
    DeviceNode node;
    node.path = path;
    if (auto st = fs.Stat(path); st.ok()) {
      node.present = true;
      node.char_device = st->type == FileType::kCharDevice;
      node.major = st->dev_major;
      node.minor = st->dev_minor;
    }
    k.device_nodes.push_back(std::move(node));
  }
  return k;
}

ToolchainLayer ProbeToolchain(const HostFs& fs) {
  ToolchainLayer t;
  if (auto text = fs.ReadFile("/usr/local/cuda/version.json"); text.ok()) {
    auto parsed = ParseJson(*text, "/usr/local/cuda/version.json");
    const nlohmann::json doc = parsed.ok() ? *std::move(parsed) : nlohmann::json();
    if (doc.is_object()) {
      auto version_of = [&](const char* key) -> std::optional<Version> {
        auto it = doc.find(key);
        if (it == doc.end() || !it->is_object() || !it->contains("version") ||
            !(*it)["version"].is_string()) {
          return std::nullopt;
        }
        auto v = Version::Parse((*it)["version"].get<std::string>(), key);
        return v.ok() ? std::optional<Version>(*v) : std::nullopt;
      };
      t.cuda_toolkit = version_of("cuda");
      t.nvcc = version_of("cuda_nvcc");
      t.cuda_toolkit_path = "/usr/local/cuda";
    }
  } else if (auto header = fs.ReadPrefix("/usr/local/cuda/include/cuda.h", 64 << 10); header.ok()) {
    // Toolkits without version.json (some images and pip/conda layouts): cuda.h's
    // "#define CUDA_VERSION 13000" gives major.minor.
    if (auto v = CudaVersionFromHeader(*header)) {
      t.cuda_toolkit = *v;
      t.cuda_toolkit_path = "/usr/local/cuda";
      if (fs.Exists("/usr/local/cuda/bin/nvcc")) t.nvcc = *v;
    }
  } else if (auto txt = fs.ReadLine("/usr/local/cuda/version.txt"); txt.ok()) {
    // CUDA <= 11.0: "CUDA Version 10.2.89"
    absl::string_view s = *txt;
    if (absl::ConsumePrefix(&s, "CUDA Version ")) {
      if (auto v = Version::Parse(absl::StripAsciiWhitespace(s), "version.txt"); v.ok()) {
        t.cuda_toolkit = *v;
        t.cuda_toolkit_path = "/usr/local/cuda";
      }
    }
  }
  return t;
}

std::string FindHostProgram(const HostFs& fs, absl::string_view name) {
  for (const char* dir : {"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"}) {
    const std::string p = absl::StrCat(dir, "/", name);
    if (fs.Stat(p).ok()) return p;
  }
  return "";
}

namespace {

// Concatenation of a config file and its drop-in directory, for the textual checks below.
std::string ReadConfigWithDropIns(const HostFs& fs, const std::string& file, const std::string& dir,
                                  Status* error, bool* found) {
  std::string all;
  if (auto text = fs.ReadFile(file); text.ok()) {
    *found = true;
    all = *text;
  } else if (!absl::IsNotFound(text.status())) {
    *error = text.status();
  }
  if (auto entries = fs.ListDir(dir); entries.ok()) {
    for (const std::string& e : *entries) {
      if (!absl::EndsWith(e, ".toml") && !absl::EndsWith(e, ".conf")) continue;
      if (auto text = fs.ReadFile(absl::StrCat(dir, "/", e)); text.ok()) {
        *found = true;
        absl::StrAppend(&all, "\n", *text);
      }
    }
  }
  return all;
}

bool AnyExists(const HostFs& fs, std::initializer_list<const char*> paths) {
  for (const char* p : paths) {
    if (fs.Exists(p)) return true;
  }
  return false;
}

// Docker's --gpus hook: the first `nvidia-container-runtime-hook` of the usual PATH, and whether
// it resolves to gpunode (a link to gpunode, or to a link named nvidia-container-runtime that is).
void ProbeGpusHook(const HostFs& fs, ContainerRuntime* rt) {
  rt->gpus_hook = FindHostProgram(fs, "nvidia-container-runtime-hook");
  if (rt->gpus_hook.empty()) return;
  auto st = fs.Stat(rt->gpus_hook);
  auto real = fs.RealPath(rt->gpus_hook);
  if (st.ok() && st->type == FileType::kSymlink && real.ok()) {
    rt->gpus_hook_gpunode = absl::StrContains(real->substr(real->rfind('/') + 1), "gpunode");
  }
}

ContainerRuntime ProbeDocker(const HostFs& fs) {
  ContainerRuntime rt;
  rt.name = "docker";
  rt.installed = AnyExists(fs, {"/usr/bin/dockerd", "/usr/sbin/dockerd", "/etc/docker"});
  ProbeGpusHook(fs, &rt);
  auto text = fs.ReadFile("/etc/docker/daemon.json");
  if (!text.ok()) {
    if (!absl::IsNotFound(text.status())) rt.config_error = text.status();
    return rt;
  }
  rt.installed = true;
  rt.config_path = "/etc/docker/daemon.json";
  auto parsed = ParseJson(*text, "parse /etc/docker/daemon.json");
  if (!parsed.ok()) {
    rt.config_error = parsed.status();
    return rt;
  }
  const nlohmann::json doc = *std::move(parsed);
  if (!doc.is_object()) {
    rt.config_error = absl::InvalidArgumentError("parse /etc/docker/daemon.json: not a JSON object");
    return rt;
  }
  if (auto it = doc.find("runtimes"); it != doc.end() && it->is_object()) {
    for (auto& [name, value] : it->items()) {
      std::string path = value.is_object() && value.contains("path") && value["path"].is_string()
                             ? value["path"].get<std::string>() : "";
      if (name == "nvidia" || absl::StrContains(path, "nvidia-container-runtime") ||
          absl::StrContains(path, "gpunode")) {
        rt.nvidia_runtime = true;
      }
    }
  }
  if (auto it = doc.find("default-runtime"); it != doc.end() && it->is_string()) {
    rt.default_nvidia = it->get<std::string>() == "nvidia";
  }
  if (auto it = doc.find("features"); it != doc.end() && it->is_object()) {
    rt.cdi_enabled = it->value("cdi", false);
  }
  return rt;
}

ContainerRuntime ProbeContainerd(const HostFs& fs) {
  ContainerRuntime rt;
  rt.name = "containerd";
  bool found = false;
  std::string text = ReadConfigWithDropIns(fs, "/etc/containerd/config.toml", "/etc/containerd/conf.d",
                                           &rt.config_error, &found);
  rt.installed = found || AnyExists(fs, {"/usr/bin/containerd", "/usr/local/bin/containerd"});
  if (!found) return rt;
  rt.config_path = "/etc/containerd/config.toml";
  // Textual checks (the config may be several files concatenated, which a TOML parser refuses
  // for a table defined twice): a runtime table named nvidia with its runtime_type and
  // options.BinaryName, the default runtime name, enable_cdi.
  enum class In { kOther, kNvidia, kNvidiaOptions } in = In::kOther;
  auto quoted_value = [](absl::string_view l) {
    size_t a = l.find('"');
    size_t b = a == absl::string_view::npos ? a : l.find('"', a + 1);
    return b == absl::string_view::npos ? std::string() : std::string(l.substr(a + 1, b - a - 1));
  };
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (absl::StartsWith(line, "#")) continue;
    if (absl::StartsWith(line, "[")) {
      in = In::kOther;
      if (absl::EndsWith(line, "runtimes.nvidia]") || absl::EndsWith(line, "runtimes.\"nvidia\"]")) {
        rt.nvidia_runtime = true;
        in = In::kNvidia;
      } else if (absl::EndsWith(line, "runtimes.nvidia.options]") ||
                 absl::EndsWith(line, "runtimes.\"nvidia\".options]")) {
        rt.nvidia_runtime = true;
        in = In::kNvidiaOptions;
      }
      continue;
    }
    if (in == In::kNvidia && absl::StartsWith(line, "runtime_type")) {
      rt.nvidia_runtime_type = quoted_value(line);
    }
    if ((in == In::kNvidiaOptions && absl::StartsWith(line, "BinaryName")) ||
        (in == In::kNvidia && absl::StartsWith(line, "options.BinaryName"))) {
      rt.nvidia_binary_name = quoted_value(line);
    }
    if (in == In::kNvidia && absl::StartsWith(line, "options") && absl::StrContains(line, "BinaryName")) {
      rt.nvidia_binary_name = quoted_value(line.substr(line.find("BinaryName")));
    }
    if (absl::StartsWith(line, "default_runtime_name") && absl::StrContains(line, "\"nvidia\"")) {
      rt.default_nvidia = true;
    }
    if (absl::StartsWith(line, "enable_cdi") && absl::StrContains(line, "true")) rt.cdi_enabled = true;
  }
  return rt;
}

ContainerRuntime ProbeCrio(const HostFs& fs) {
  ContainerRuntime rt;
  rt.name = "crio";
  bool found = false;
  std::string text =
      ReadConfigWithDropIns(fs, "/etc/crio/crio.conf", "/etc/crio/crio.conf.d", &rt.config_error, &found);
  rt.installed = found || AnyExists(fs, {"/usr/bin/crio", "/usr/local/bin/crio"});
  if (!found) return rt;
  rt.config_path = "/etc/crio/crio.conf";
  rt.cdi_enabled = true;  // CRI-O reads CDI specs from /etc/cdi and /var/run/cdi by default
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (absl::StartsWith(line, "[crio.runtime.runtimes.nvidia]")) rt.nvidia_runtime = true;
    if (absl::StartsWith(line, "default_runtime") && absl::StrContains(line, "\"nvidia\"")) {
      rt.default_nvidia = true;
    }
  }
  return rt;
}

CdiSpec ReadCdiSpec(const HostFs& fs, const std::string& path) {
  CdiSpec spec;
  spec.path = path;
  auto text = fs.ReadFile(path);
  if (!text.ok()) {
    spec.error = text.status();
    return spec;
  }
  auto loaded = LoadYaml(*text, path);
  if (!loaded.ok()) {
    spec.error = loaded.status();
    return spec;
  }
  try {
    YAML::Node doc = *loaded;
    if (doc["kind"] && doc["kind"].IsScalar()) spec.kind = doc["kind"].as<std::string>();
    std::vector<YAML::Node> edits;
    if (doc["containerEdits"]) edits.push_back(doc["containerEdits"]);
    if (doc["devices"] && doc["devices"].IsSequence()) {
      for (const auto& d : doc["devices"]) {
        if (d["containerEdits"]) edits.push_back(d["containerEdits"]);
      }
    }
    for (const YAML::Node& e : edits) {
      if (e["deviceNodes"] && e["deviceNodes"].IsSequence()) {
        for (const auto& n : e["deviceNodes"]) {
          // The node on the host: hostPath when given, else path.
          std::string host;
          if (n["hostPath"] && n["hostPath"].IsScalar() && !n["hostPath"].as<std::string>().empty()) {
            host = n["hostPath"].as<std::string>();
          } else if (n["path"] && n["path"].IsScalar()) {
            host = n["path"].as<std::string>();
          }
          if (host.empty()) continue;
          spec.device_nodes.push_back(host);
          if (n["major"] && n["minor"] && n["major"].IsScalar() && n["minor"].IsScalar()) {
            spec.node_numbers[host] = {n["major"].as<uint32_t>(), n["minor"].as<uint32_t>()};
          }
        }
      }
      if (e["mounts"] && e["mounts"].IsSequence() && !spec.driver_version) {
        for (const auto& m : e["mounts"]) {
          if (!m["hostPath"] || !m["hostPath"].IsScalar()) continue;
          if (auto v = DriverVersionFromLibraryPath(m["hostPath"].as<std::string>())) {
            spec.driver_version = *v;
            break;
          }
        }
      }
    }
  } catch (const YAML::Exception& e) {
    spec.error = absl::InvalidArgumentError(absl::StrCat("parse ", path, ": ", e.what()));
  }
  return spec;
}

}  // namespace

ContainerLayer ProbeContainers(const HostFs& fs) {
  ContainerLayer c;
  c.runtimes.push_back(ProbeDocker(fs));
  c.runtimes.push_back(ProbeContainerd(fs));
  c.runtimes.push_back(ProbeCrio(fs));
  ContainerRuntime podman;
  podman.name = "podman";
  podman.installed = AnyExists(fs, {"/usr/bin/podman", "/usr/local/bin/podman"});
  podman.cdi_enabled = podman.installed;  // podman reads CDI specs natively
  c.runtimes.push_back(podman);
  for (const char* dir : {"/etc/cdi", "/var/run/cdi"}) {
    auto entries = fs.ListDir(dir);
    if (!entries.ok()) continue;
    for (const std::string& e : *entries) {
      if (!absl::EndsWith(e, ".yaml") && !absl::EndsWith(e, ".yml") && !absl::EndsWith(e, ".json")) continue;
      c.cdi_specs.push_back(ReadCdiSpec(fs, absl::StrCat(dir, "/", e)));
    }
  }
  return c;
}

OrchestratorLayer ProbeOrchestrator(const HostFs& fs) {
  OrchestratorLayer o;
  o.kubelet_present = fs.Exists("/var/lib/kubelet");
  if (!o.kubelet_present) return o;
  o.kubelet_socket = fs.Exists("/var/lib/kubelet/device-plugins/kubelet.sock");
  o.pod_resources_socket = fs.Exists("/var/lib/kubelet/pod-resources/kubelet.sock");
  if (auto entries = fs.ListDir("/var/lib/kubelet/device-plugins"); entries.ok()) {
    for (const std::string& e : *entries) {
      if (e != "kubelet.sock" && absl::EndsWith(e, ".sock")) o.plugin_sockets.push_back(e);
    }
  }
  // The plugin registry holds CSI drivers' sockets too; a DRA driver for GPUs is named by its
  // driver name, NVIDIA's gpu.nvidia.com (gpunode's default) or another *.nvidia.com one.
  if (auto entries = fs.ListDir("/var/lib/kubelet/plugins_registry"); entries.ok()) {
    for (const std::string& e : *entries) {
      if (!absl::EndsWith(e, "-reg.sock") || e.front() == '.') continue;
      std::string driver = e.substr(0, e.size() - 9);
      // <driver>-<pod uid>-reg.sock: a UID is 36 characters with dashes
      if (driver.size() > 37 && driver[driver.size() - 37] == '-' && driver[driver.size() - 28] == '-') {
        driver = driver.substr(0, driver.size() - 37);
      }
      if (absl::EndsWith(driver, ".nvidia.com") || driver == "gpu.nvidia.com") o.dra_drivers.push_back(driver);
    }
  }
  return o;
}

}  // namespace gpunode::node
