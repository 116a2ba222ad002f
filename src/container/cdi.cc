#include "src/container/cdi.h"
#include "src/container/capabilities.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <set>

#include "src/base/json.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "src/container/ldcache.h"

namespace gpunode::container {
namespace {

// Driver user-space libraries, by SONAME prefix (libnvidia-container's per-capability lists,
// shared/reference/container-cdi.md §2.5). An ldcache entry matching one of these locates a driver
// library folder; every "lib*.so.<version>" of those folders is then mounted.
// The driver files gpunode looks for: every library and binary of NVIDIA_DRIVER_CAPABILITIES's
// groups (capabilities.h), so the shim can give a container the groups it asks for.
constexpr const char* kBinaryDirs[] = {"/usr/bin", "/usr/sbin", "/usr/local/bin", "/usr/local/sbin",
                                       "/usr/local/nvidia/bin", "/bin", "/sbin"};
// Searched only when the linker cache names no driver library.
constexpr const char* kFallbackLibraryDirs[] = {"/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib/aarch64-linux-gnu",
                                                "/lib64", "/usr/lib"};
constexpr const char* kControlNodes[] = {"/dev/nvidia-modeset", "/dev/nvidia-uvm-tools", "/dev/nvidia-uvm",
                                         "/dev/nvidiactl"};

const std::vector<std::string> kReadOnlyOptions = {"ro", "nosuid", "nodev", "rbind", "rprivate"};
const std::vector<std::string> kIpcOptions = {"nosuid", "nodev", "rbind", "rprivate", "noexec"};

std::string JoinRoot(const std::string& root, absl::string_view path) {
  if (root == "/" || root.empty()) return std::string(path);
  return absl::StrCat(absl::StripSuffix(root, "/"), path);
}

std::string Dirname(absl::string_view path) {
  size_t slash = path.rfind('/');
  if (slash == absl::string_view::npos || slash == 0) return "/";
  return std::string(path.substr(0, slash));
}

std::string Basename(absl::string_view path) {
  size_t slash = path.rfind('/');
  return std::string(slash == absl::string_view::npos ? path : path.substr(slash + 1));
}

// Follows the symlinks of `path` inside the driver root (HostFs's in-root walk: an absolute link
// target starts at the driver root) to the final file, which must exist.
StatusOr<std::string> ResolveInRoot(const HostFs& driver, const std::string& path) {
  GPUNODE_ASSIGN_OR_RETURN(std::string real, driver.RealPath(path));
  GPUNODE_RETURN_IF_ERROR(driver.Stat(real).status());
  return real;
}

bool IsDriverLibrary(absl::string_view soname) {
  for (const CapabilityFiles& group : DriverCapabilityTable()) {
    if (group.capability == absl::string_view("display")) continue;  // Xorg modules are not looked up
    for (const char* lib : group.libraries) {
      if (IsFileOfLibrary(soname, lib)) return true;
    }
  }
  return false;
}

std::optional<HostDeviceNode> StatNode(const HostFs& fs, const std::string& path) {
  auto st = fs.Stat(path);
  if (!st.ok()) return std::nullopt;
  HostDeviceNode n;
  n.path = path;
  n.char_device = st->type == FileType::kCharDevice;
  n.major = st->dev_major;
  n.minor = st->dev_minor;
  return n;
}

// Numbered entries "<prefix><N>" of a directory.
std::map<unsigned, std::string> NumberedEntries(const HostFs& fs, const std::string& dir, absl::string_view prefix) {
  std::map<unsigned, std::string> out;
  auto entries = fs.ListDir(dir);
  if (!entries.ok()) return out;
  for (const std::string& e : *entries) {
    unsigned n = 0;
    if (absl::StartsWith(e, prefix) && absl::SimpleAtoi(absl::string_view(e).substr(prefix.size()), &n) &&
        absl::ascii_isdigit(static_cast<unsigned char>(e.back()))) {
      out[n] = absl::StrCat(dir, "/", e);
    }
  }
  return out;
}

// `dev_root`: where the node lives on the host ("/" = at its own path; else a hostPath below it).
cdi::DeviceNode ToSpecNode(const HostDeviceNode& n, const std::string& dev_root) {
  cdi::DeviceNode d;
  d.path = n.path;
  if (dev_root != "/") d.host_path = JoinRoot(dev_root, n.path);
  if (n.char_device) {
    d.major = n.major;
    d.minor = n.minor;
  }
  return d;
}

// Appends the nodes of `from` not yet in `to` (by path).
void MergeNodes(const std::vector<cdi::DeviceNode>& from, std::vector<cdi::DeviceNode>* to) {
  for (const cdi::DeviceNode& n : from) {
    bool seen = std::any_of(to->begin(), to->end(), [&](const cdi::DeviceNode& m) { return m.path == n.path; });
    if (!seen) to->push_back(n);
  }
}

// --- DiscoverDriverFiles, step by step ---

// Checks an absolute --driver-root / --dev-root (`flag`) that must exist unless it is "/".
Status CheckRoot(const HostFs& fs, const std::string& root, absl::string_view flag, bool must_exist) {
  if (root.front() != '/') {
    return absl::InvalidArgumentError(absl::StrCat(flag, " \"", root, "\": not an absolute path"));
  }
  if (must_exist) {
    auto st = fs.Stat(root);
    if (!st.ok()) return Annotate(st.status(), flag);
  }
  return absl::OkStatus();
}

// The control, GPU and capability nodes of `dev`'s /dev, added to `f`.
void ReadDeviceNodes(const HostFs& dev, DriverFiles& f) {
  for (const char* path : kControlNodes) {
    if (auto n = StatNode(dev, path)) f.control_nodes.push_back(*n);
  }
  for (const auto& [minor, path] : NumberedEntries(dev, "/dev", "nvidia")) {
    if (auto n = StatNode(dev, path)) f.gpu_nodes[minor] = *n;
  }
  for (const auto& [minor, path] : NumberedEntries(dev, "/dev/nvidia-caps", "nvidia-cap")) {
    if (auto n = StatNode(dev, path)) f.cap_nodes[minor] = *n;
  }
}

// The MIG capability minors: "gpu0/gi2/access 3" lines.
void ReadMigMinors(const HostFs& fs, DriverFiles& f) {
  auto text = fs.ReadFile("/proc/driver/nvidia-caps/mig-minors");
  if (!text.ok()) return;
  for (absl::string_view line : absl::StrSplit(*text, '\n', absl::SkipWhitespace())) {
    std::vector<absl::string_view> parts = absl::StrSplit(line, ' ', absl::SkipWhitespace());
    unsigned minor = 0;
    if (parts.size() == 2 && absl::SimpleAtoi(parts[1], &minor)) f.mig_minors[std::string(parts[0])] = minor;
  }
}

// A driver library of the linker cache, and the file it resolves to inside the driver root.
struct ResolvedLibrary {
  LdCacheEntry entry;
  std::string file;
};

// The 64-bit ELF driver libraries of the driver root's linker cache that resolve to a file.
std::vector<ResolvedLibrary> DriverLibrariesInCache(const HostFs& fs, const HostFs& driver,
                                                    const std::string& cache_path, DriverFiles& f) {
  std::vector<LdCacheEntry> entries;
  if (auto cache = ReadLdCache(fs, cache_path); cache.ok()) {
    for (LdCacheEntry& e : cache->entries) {
      if (e.IsElf() && e.Is64Bit() && IsDriverLibrary(e.name)) entries.push_back(std::move(e));
    }
  } else {
    f.warnings.push_back(std::string(cache.status().message()));
  }
  std::vector<ResolvedLibrary> resolved;
  for (const LdCacheEntry& e : entries) {
    auto file = ResolveInRoot(driver, e.path);
    if (file.ok()) resolved.push_back({e, *file});
  }
  return resolved;
}

// The running driver's version, else the suffix of libcuda.so.<version>.
Status FindDriverVersion(const node::NodeInventory& inv, const std::vector<ResolvedLibrary>& resolved,
                         const std::string& cache_path, DriverFiles& f) {
  f.version = RunningDriverVersion(inv);
  if (f.version.empty()) {
    for (const ResolvedLibrary& r : resolved) {
      std::string base = Basename(r.file);
      if (absl::StartsWith(base, "libcuda.so.") && std::count(base.begin(), base.end(), '.') >= 3) {
        f.version = base.substr(std::string("libcuda.so.").size());
        break;
      }
    }
  }
  if (f.version.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "no NVIDIA driver: its version is unknown (NVML and /proc/driver/nvidia/version unavailable) and ",
        cache_path, " names no libcuda.so"));
  }
  return absl::OkStatus();
}

// Every regular "lib*.so.<version>" of the folders (and their vdpau/) of the cache's driver
// libraries of that version; the usual library folders when the cache names none.
std::set<std::string> ListDriverLibraries(const HostFs& fs, const std::string& root,
                                          const std::vector<ResolvedLibrary>& resolved,
                                          const std::string& cache_path, DriverFiles& f) {
  const std::string suffix = ".so." + f.version;
  std::set<std::string> dirs;
  for (const ResolvedLibrary& r : resolved) {
    if (absl::EndsWith(r.file, suffix)) dirs.insert(Dirname(r.file));
  }
  if (dirs.empty()) {
    f.warnings.push_back(absl::StrCat("no driver library of version ", f.version, " in ", cache_path,
                                      "; searching the usual library folders"));
    for (const char* d : kFallbackLibraryDirs) dirs.insert(d);
  }
  std::set<std::string> libraries;
  for (const std::string& dir : dirs) {
    for (const std::string& sub : {dir, dir + "/vdpau"}) {
      auto names = fs.ListDir(JoinRoot(root, sub));
      if (!names.ok()) continue;
      for (const std::string& name : *names) {
        if (!absl::StartsWith(name, "lib") || !absl::EndsWith(name, suffix)) continue;
        if (!IsValidUtf8(name)) {  // a spec is a JSON document: it cannot name this file
          f.warnings.push_back(absl::StrCat("skipped a file in ", sub, " whose name is not UTF-8"));
          continue;
        }
        auto st = fs.Stat(JoinRoot(root, sub + "/" + name));
        if (st.ok() && st->type == FileType::kRegular) libraries.insert(sub + "/" + name);
      }
    }
  }
  return libraries;
}

// Symlinks: SONAME links the host has (libcuda.so.1 -> libcuda.so.<version>), and the
// development link libcuda.so -> libcuda.so.1.
std::vector<std::pair<std::string, std::string>> LibraryLinks(
    const std::vector<ResolvedLibrary>& resolved, const std::set<std::string>& libraries) {
  std::set<std::pair<std::string, std::string>> links;
  for (const ResolvedLibrary& r : resolved) {
    if (r.file != r.entry.path && libraries.count(r.file) && Dirname(r.file) == Dirname(r.entry.path)) {
      links.emplace(Basename(r.file), r.entry.path);
    }
    if (r.entry.name == "libcuda.so.1" && libraries.count(r.file)) {
      links.emplace("libcuda.so.1", Dirname(r.file) + "/libcuda.so");
    }
  }
  return {links.begin(), links.end()};
}

// Libraries: driver folders from the linker cache; the version they are matched to; the links.
Status FindLibraries(const HostFs& fs, const HostFs& driver, const node::NodeInventory& inv,
                     DriverFiles& f) {
  const std::string& root = f.driver_root;
  const std::string cache_path = JoinRoot(root, "/etc/ld.so.cache");
  const std::vector<ResolvedLibrary> resolved = DriverLibrariesInCache(fs, driver, cache_path, f);
  GPUNODE_RETURN_IF_ERROR(FindDriverVersion(inv, resolved, cache_path, f));
  const std::set<std::string> libraries = ListDriverLibraries(fs, root, resolved, cache_path, f);
  f.libraries.assign(libraries.begin(), libraries.end());
  if (f.libraries.empty()) {
    f.warnings.push_back(absl::StrCat("no driver library lib*", ".so." + f.version,
                                      " found under driver root ", root));
  }
  f.links = LibraryLinks(resolved, libraries);
  return absl::OkStatus();
}

// Binaries: the first ELF file in the search order. A script (e.g. a /usr/bin/nvidia-smi that
// execs /usr/local/nvidia/bin/nvidia-smi, as some images install) is only taken when no ELF
// binary of that name exists: mounted alone it would exec a file the container does not have.
void FindBinaries(const HostFs& fs, const HostFs& driver, DriverFiles& f) {
  const std::string& root = f.driver_root;
  std::vector<const char*> binaries;  // nvidia-ctk's set: the utility and compute programs
  for (const CapabilityFiles& group : DriverCapabilityTable()) {
    if (group.capability != absl::string_view("ngx")) binaries.insert(binaries.end(), group.binaries.begin(), group.binaries.end());
  }
  for (const char* name : binaries) {
    std::string script;
    bool found = false;
    for (const char* dir : kBinaryDirs) {
      std::string path = absl::StrCat(dir, "/", name);
      auto file = ResolveInRoot(driver, path);
      if (!file.ok()) continue;
      auto st = fs.Stat(JoinRoot(root, *file));
      if (!st.ok() || st->type != FileType::kRegular) continue;
      auto magic = fs.ReadPrefix(JoinRoot(root, *file), 4);
      if (magic.ok() && *magic == "\x7f" "ELF") {
        f.binaries.push_back(path);
        found = true;
        break;
      }
      if (script.empty()) script = path;
    }
    if (!found && !script.empty()) {
      f.binaries.push_back(script);
      f.warnings.push_back(absl::StrCat(script, " is not an ELF binary (a wrapper script?); mounted as it is"));
    }
  }
}

// GSP firmware: nvidia/<version>/gsp*.bin in the kernel's firmware search path (as the kernel
// and nvidia-ctk look): the custom path of firmware_class first (a driver container or a
// vendor image puts it elsewhere, e.g. /usr/local/nvidia/firmware), then /lib/firmware/updates
// and /lib/firmware, each with the kernel release and without. A file name found twice is
// mounted from the first folder.
void FindFirmware(const HostFs& fs, DriverFiles& f) {
  std::vector<std::string> fw_search;
  if (auto custom = fs.ReadLine("/sys/module/firmware_class/parameters/path"); custom.ok()) {
    std::string p(absl::StripAsciiWhitespace(*custom));
    if (!p.empty() && p.front() == '/') fw_search.push_back(p);
  }
  std::string release;
  if (auto r = fs.ReadLine("/proc/sys/kernel/osrelease"); r.ok()) release = std::string(absl::StripAsciiWhitespace(*r));
  for (const char* base : {"/lib/firmware/updates", "/lib/firmware"}) {
    if (!release.empty()) fw_search.push_back(absl::StrCat(base, "/", release));
    fw_search.push_back(base);
  }
  std::set<std::string> fw_names;
  for (const std::string& base : fw_search) {
    const std::string fw_dir = absl::StrCat(absl::StripSuffix(base, "/"), "/nvidia/", f.version);
    auto names = fs.ListDir(JoinRoot(f.driver_root, fw_dir));
    if (!names.ok()) continue;
    std::sort(names->begin(), names->end());
    for (const std::string& name : *names) {
      if (!IsValidUtf8(name) || !absl::StartsWith(name, "gsp") || !absl::EndsWith(name, ".bin")) continue;
      if (fw_names.insert(name).second) f.firmware.push_back(fw_dir + "/" + name);
    }
  }
}

// IPC: persistenced and fabric-manager sockets, the MPS pipe directory.
void FindIpc(const HostFs& fs, DriverFiles& f) {
  const std::string& root = f.driver_root;
  for (const char* name : {"/nvidia-persistenced/socket", "/nvidia-fabricmanager/socket"}) {
    for (const char* run : {"/run", "/var/run"}) {
      std::string path = absl::StrCat(run, name);
      if (fs.Exists(JoinRoot(root, path))) {
        f.ipc.push_back(path);
        break;
      }
    }
  }
  if (auto st = fs.Stat(JoinRoot(root, "/tmp/nvidia-mps")); st.ok() && st->type == FileType::kDirectory) {
    f.ipc.push_back("/tmp/nvidia-mps");
  }
}

// --- BuildSpec, step by step ---

Status CheckBuildOptions(const BuildOptions& options) {
  for (const std::string& h : options.disabled_hooks) {
    if (h != "create-symlinks" && h != "update-ldcache" && h != "enable-cuda-compat") {
      return absl::InvalidArgumentError(absl::StrCat(
          "--disable-hook \"", h, "\": not one of create-symlinks, enable-cuda-compat, update-ldcache, all"));
    }
  }
  const bool any_hook = options.disabled_hooks.size() < 3;
  if (any_hook && (options.hook_path.empty() || options.hook_path.front() != '/')) {
    return absl::InvalidArgumentError(absl::StrCat("hook path \"", options.hook_path, "\": not an absolute path"));
  }
  return absl::OkStatus();
}

// A GPU the spec describes.
struct SpecGpu {
  unsigned index;
  std::string uuid;
  std::optional<unsigned> minor;
  const gpu::GpuInfo* info;  // null: known from /proc/driver/nvidia only
};

// The GPUs: NVML's view, else /proc/driver/nvidia (no MIG information then).
std::vector<SpecGpu> ListSpecGpus(const node::NodeInventory& inv, std::vector<std::string>& warnings) {
  std::vector<SpecGpu> gpus;
  if (!inv.driver.gpus.empty()) {
    for (const gpu::GpuInfo& g : inv.driver.gpus) {
      std::optional<unsigned> minor = g.minor_number;
      if (!minor) {
        for (const node::ProcGpu& p : inv.kernel.gpus) {
          if (p.bus_id == g.pci_bus_id) minor = p.minor;
        }
      }
      gpus.push_back({g.index, g.uuid, minor, &g});
    }
    return gpus;
  }
  if (!inv.kernel.gpus.empty()) {
    warnings.push_back(absl::StrCat("NVML gave no GPUs (", inv.driver.status.message(),
                                    "): using /proc/driver/nvidia/gpus, without MIG devices"));
  }
  unsigned index = 0;
  for (const node::ProcGpu& p : inv.kernel.gpus) gpus.push_back({index++, p.uuid, p.minor, nullptr});
  return gpus;
}

// Adds the devices of the spec, named as options.names says.
class DeviceAdder {
 public:
  DeviceAdder(const DriverFiles& files, const BuildOptions& options, BuildResult& result)
      : files_(files), options_(options), result_(result) {}

  // The device (or, with MIG, the MIG devices) of one GPU.
  void AddGpu(const SpecGpu& g) {
    const std::string what = absl::StrCat("GPU ", g.index, g.uuid.empty() ? "" : " (" + g.uuid + ")");
    if (!g.minor) {
      result_.warnings.push_back(what + ": its device minor number is unknown; left out");
      return;
    }
    auto node = files_.gpu_nodes.find(*g.minor);
    if (node == files_.gpu_nodes.end()) {
      result_.warnings.push_back(absl::StrCat(what, ": /dev/nvidia", *g.minor, " is missing; left out"));
      return;
    }
    const bool mig = g.info != nullptr && g.info->mig_enabled.value_or(false);
    if (!mig) {
      cdi::ContainerEdits edits;
      edits.device_nodes.push_back(ToSpecNode(node->second, files_.dev_root));
      Add(absl::StrCat(g.index), g.uuid, edits);
      return;
    }
    if (g.info->mig_devices.empty()) {
      result_.warnings.push_back(what + ": MIG mode is enabled but it has no MIG device; left out");
    }
    for (const gpu::MigDevice& m : g.info->mig_devices) AddMig(g, node->second, m);
  }

 private:
  // A MIG device: the parent GPU's node and its GPU and compute instances' capability nodes.
  void AddMig(const SpecGpu& g, const HostDeviceNode& gpu_node, const gpu::MigDevice& m) {
    const std::string name = absl::StrCat(g.index, ":", m.index);
    cdi::ContainerEdits edits;
    edits.device_nodes.push_back(ToSpecNode(gpu_node, files_.dev_root));
    if (!m.gpu_instance_id || !m.compute_instance_id) {
      result_.warnings.push_back(absl::StrCat("MIG device ", name, ": instance ids unknown; left out"));
      return;
    }
    for (const std::string& cap :
         {absl::StrCat("gpu", *g.minor, "/gi", *m.gpu_instance_id, "/access"),
          absl::StrCat("gpu", *g.minor, "/gi", *m.gpu_instance_id, "/ci", *m.compute_instance_id, "/access")}) {
      auto minor = files_.mig_minors.find(cap);
      auto cap_node = minor == files_.mig_minors.end() ? files_.cap_nodes.end() : files_.cap_nodes.find(minor->second);
      if (cap_node == files_.cap_nodes.end()) {
        result_.warnings.push_back(absl::StrCat("MIG device ", name, ": no /dev/nvidia-caps node for ", cap,
                                                " (proc/driver/nvidia-caps/mig-minors); left out"));
        return;
      }
      edits.device_nodes.push_back(ToSpecNode(cap_node->second, files_.dev_root));
    }
    Add(name, m.uuid, edits);
  }

  void Add(const std::string& index_name, const std::string& uuid, const cdi::ContainerEdits& edits) {
    std::vector<cdi::Device>& devices = result_.spec.devices;
    if (options_.names != NameStrategy::kUuid) devices.push_back({index_name, {}, edits});
    if (options_.names != NameStrategy::kIndex) {
      if (uuid.empty()) {
        result_.warnings.push_back(absl::StrCat("device ", index_name, " has no UUID: named by index only"));
        if (options_.names == NameStrategy::kUuid) devices.push_back({index_name, {}, edits});
      } else {
        devices.push_back({uuid, {}, edits});
      }
    }
  }

  const DriverFiles& files_;
  const BuildOptions& options_;
  BuildResult& result_;
};

// Spec-level edits, shared by every device: control nodes, the hooks, the mounts.
// `forward_compat`: every GPU of the node can use CUDA forward compatibility (a datacenter GPU).
void AddSharedEdits(const DriverFiles& files, const BuildOptions& options, bool forward_compat,
                    BuildResult& result) {
  cdi::ContainerEdits& e = result.spec.edits;
  e.env.push_back("NVIDIA_VISIBLE_DEVICES=void");
  for (const HostDeviceNode& n : files.control_nodes) e.device_nodes.push_back(ToSpecNode(n, files.dev_root));
  const std::string argv0 = Basename(options.hook_path);
  if (!files.links.empty() && !options.disabled_hooks.count("create-symlinks")) {
    cdi::Hook h{"createContainer", options.hook_path, {argv0, "cdi", "hook", "create-symlinks"}, {}, {}};
    for (const auto& [target, link] : files.links) {
      h.args.push_back("--link");
      h.args.push_back(absl::StrCat(target, "::", link));
    }
    e.hooks.push_back(std::move(h));
  }
  // nvidia-ctk's enable-cuda-compat, between the links and the ld cache as in its specs
  // (pkg/nvcdi/driver-nvml.go). Left out on a node with a GPU that is not datacenter-branded:
  // compat libraries there fail with CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE (804), so the host
  // driver's libcuda stays first (NVIDIA's spec adds the hook on every node).
  if (forward_compat && !files.version.empty() && !files.libraries.empty() &&
      !options.disabled_hooks.count("enable-cuda-compat") && !options.disabled_hooks.count("update-ldcache")) {
    e.hooks.push_back(cdi::Hook{"createContainer", options.hook_path,
                                {argv0, "cdi", "hook", "enable-cuda-compat", "--host-driver-version=" + files.version},
                                {},
                                {}});
  }
  if (!files.libraries.empty() && !options.disabled_hooks.count("update-ldcache")) {
    cdi::Hook h{"createContainer", options.hook_path, {argv0, "cdi", "hook", "update-ldcache"}, {}, {}};
    std::set<std::string> folders;
    for (const std::string& lib : files.libraries) folders.insert(Dirname(lib));
    for (const std::string& dir : folders) {
      h.args.push_back("--folder");
      h.args.push_back(dir);
    }
    e.hooks.push_back(std::move(h));
  }
  auto mount = [&](const std::string& path, const std::vector<std::string>& opts) {
    e.mounts.push_back({JoinRoot(files.driver_root, path), path, opts, ""});
  };
  for (const std::string& p : files.libraries) mount(p, kReadOnlyOptions);
  for (const std::string& p : files.binaries) mount(p, kReadOnlyOptions);
  for (const std::string& p : files.firmware) mount(p, kReadOnlyOptions);
  for (const std::string& p : files.ipc) mount(p, kIpcOptions);
  if (files.libraries.empty()) {
    result.warnings.push_back("no driver library found: containers get the device nodes only");
  }
}

}  // namespace

std::string RunningDriverVersion(const node::NodeInventory& inv) {
  if (inv.driver.driver_version) return inv.driver.driver_version->ToString();
  if (inv.kernel.version) return inv.kernel.version->ToString();
  return "";
}

StatusOr<DriverFiles> DiscoverDriverFiles(const HostFs& fs, const node::NodeInventory& inv, const DiscoverOptions& options) {
  DriverFiles f;
  f.driver_root = options.driver_root.empty() ? "/" : options.driver_root;
  GPUNODE_RETURN_IF_ERROR(CheckRoot(fs, f.driver_root, "--driver-root", f.driver_root != "/"));
  GPUNODE_ASSIGN_OR_RETURN(const HostFs driver, fs.Sub(f.driver_root));  // symlinks resolve inside it

  // Device nodes: from <dev root>/dev (default: the driver root's, as nvidia-ctk).
  f.dev_root = options.dev_root.empty() ? f.driver_root : options.dev_root;
  GPUNODE_RETURN_IF_ERROR(
      CheckRoot(fs, f.dev_root, "--dev-root", f.dev_root != "/" && f.dev_root != f.driver_root));
  GPUNODE_ASSIGN_OR_RETURN(const HostFs dev, fs.Sub(f.dev_root));
  ReadDeviceNodes(dev, f);
  if (options.dev_root.empty() && f.dev_root != "/" && f.control_nodes.empty() && f.gpu_nodes.empty()) {
    // A driver root without its own /dev (a driver installed in a folder, nodes made by the host's
    // module loading): the host's /dev, said once.
    f.warnings.push_back(absl::StrCat("no device nodes in ", f.dev_root, "/dev: using the host's /dev (--dev-root /)"));
    f.dev_root = "/";
    ReadDeviceNodes(fs, f);
  }
  ReadMigMinors(fs, f);
  if (f.mig_minors.empty() && f.dev_root != "/") {
    // None in the host's /proc (the kernel's, where a real driver keeps them): the dev root's own,
    // where a simulated node's root keeps them beside its device nodes (the chart's test nodes).
    ReadMigMinors(dev, f);
  }

  GPUNODE_RETURN_IF_ERROR(FindLibraries(fs, driver, inv, f));
  FindBinaries(fs, driver, f);
  FindFirmware(fs, f);
  FindIpc(fs, f);
  return f;
}

StatusOr<NameStrategy> ParseNameStrategy(absl::string_view text) {
  if (text == "index") return NameStrategy::kIndex;
  if (text == "uuid") return NameStrategy::kUuid;
  if (text == "both") return NameStrategy::kBoth;
  return absl::InvalidArgumentError(
      absl::StrCat("--device-name-strategy \"", text, "\": not one of index, uuid, both"));
}

StatusOr<BuildResult> BuildSpec(const node::NodeInventory& inv, const DriverFiles& files, const BuildOptions& options) {
  GPUNODE_RETURN_IF_ERROR(CheckBuildOptions(options));
  BuildResult result;
  cdi::Spec& spec = result.spec;
  spec.kind = kNvidiaKind;
  const std::vector<SpecGpu> gpus = ListSpecGpus(inv, result.warnings);
  DeviceAdder adder(files, options, result);
  for (const SpecGpu& g : gpus) adder.AddGpu(g);
  if (spec.devices.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "no GPU to describe: ", gpus.empty() ? "no GPU found (NVML and /proc/driver/nvidia/gpus)" : "",
        absl::StrJoin(result.warnings, "; ")));
  }
  if (options.all_device) {
    cdi::ContainerEdits all;
    for (const cdi::Device& d : spec.devices) MergeNodes(d.edits.device_nodes, &all.device_nodes);
    spec.devices.push_back({"all", {}, all});
  }
  // NVML's brands of datacenter GPUs (nvmlBrandType_t): 2 Tesla, 14 NVIDIA (H100, H200, A100, L40S).
  bool forward_compat = !inv.driver.gpus.empty();
  for (const gpu::GpuInfo& g : inv.driver.gpus) forward_compat &= g.brand && (*g.brand == 2 || *g.brand == 14);
  AddSharedEdits(files, options, forward_compat, result);

  spec.cdi_version = cdi::MinimumVersion(spec).version;
  if (Status s = cdi::ValidateSpec(spec, "generated spec"); !s.ok()) {
    return absl::InternalError(s.message());
  }
  return result;
}

}  // namespace gpunode::container
