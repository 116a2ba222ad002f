#include "src/container/capabilities.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace gpunode::container {
namespace {

absl::string_view Basename(absl::string_view path) {
  size_t slash = path.rfind('/');
  return slash == absl::string_view::npos ? path : path.substr(slash + 1);
}

}  // namespace

bool IsFileOfLibrary(absl::string_view base, absl::string_view soname) {
  return absl::StartsWith(base, soname) && (base.size() == soname.size() || base[soname.size()] == '.');
}

const std::vector<CapabilityFiles>& DriverCapabilityTable() {
  static const std::vector<CapabilityFiles> kTable = {
      {"utility",
       {"libnvidia-ml.so", "libnvidia-cfg.so", "libnvidia-nscq.so"},
       {"nvidia-smi", "nvidia-debugdump", "nvidia-persistenced"},
       {"/nvidia-persistenced/socket"}},
      {"compute",
       {"libcuda.so", "libcudadebugger.so", "libnvidia-opencl.so", "libnvidia-gpucomp.so", "libnvidia-ptxjitcompiler.so",
        "libnvidia-fatbinaryloader.so", "libnvidia-allocator.so", "libnvidia-compiler.so", "libnvidia-pkcs11.so",
        "libnvidia-pkcs11-openssl3.so", "libnvidia-nvvm.so", "libnvidia-tileiras.so"},
       {"nvidia-cuda-mps-control", "nvidia-cuda-mps-server"},
       {"/nvidia-fabricmanager/socket", "/tmp/nvidia-mps"}},
      {"video", {"libvdpau_nvidia.so", "libnvidia-encode.so", "libnvidia-opticalflow.so", "libnvcuvid.so"}, {}, {}},
      {"graphics",
       {"libnvidia-eglcore.so", "libnvidia-glcore.so", "libnvidia-tls.so", "libnvidia-glsi.so", "libnvidia-fbc.so",
        "libnvidia-ifr.so", "libnvidia-rtcore.so", "libnvoptix.so", "libGLX_nvidia.so", "libEGL_nvidia.so",
        "libGLESv2_nvidia.so", "libGLESv1_CM_nvidia.so", "libnvidia-glvkspirv.so", "libnvidia-cbl.so"},
       {},
       {}},
      {"display", {"libglxserver_nvidia.so", "nvidia_drv.so"}, {}, {}},
      {"ngx", {"libnvidia-ngx.so"}, {"nvidia-ngx-updater"}, {}},
      {"compat32", {}, {}, {}},  // 32-bit libraries: gpunode's specs carry none
  };
  return kTable;
}

StatusOr<std::set<std::string>> ParseDriverCapabilities(absl::string_view value) {
  std::set<std::string> caps;
  value = absl::StripAsciiWhitespace(value);
  if (value.empty()) return std::set<std::string>{"utility", "compute"};
  for (absl::string_view c : absl::StrSplit(value, ',', absl::SkipWhitespace())) {
    c = absl::StripAsciiWhitespace(c);
    if (c == "all") {
      for (const CapabilityFiles& f : DriverCapabilityTable()) caps.insert(f.capability);
      continue;
    }
    bool known = false;
    for (const CapabilityFiles& f : DriverCapabilityTable()) known |= c == f.capability;
    if (!known) {
      std::vector<std::string> names;
      for (const CapabilityFiles& f : DriverCapabilityTable()) names.push_back(f.capability);
      return absl::InvalidArgumentError(absl::StrCat("NVIDIA_DRIVER_CAPABILITIES: unknown driver capability \"", c,
                                                     "\" (known: ", absl::StrJoin(names, ", "), ", all)"));
    }
    caps.insert(std::string(c));
  }
  return caps;
}

std::string CapabilityOfFile(absl::string_view path) {
  const absl::string_view base = Basename(path);
  for (const CapabilityFiles& f : DriverCapabilityTable()) {
    for (const char* lib : f.libraries) {
      if (IsFileOfLibrary(base, lib)) return f.capability;
    }
    for (const char* bin : f.binaries) {
      if (base == bin) return f.capability;
    }
    for (const char* p : f.paths) {
      if (absl::StrContains(path, p)) return f.capability;
    }
  }
  return "";
}

cdi::ContainerEdits FilterByCapabilities(const cdi::ContainerEdits& edits, const std::set<std::string>& caps) {
  auto wanted = [&](absl::string_view path) {
    const std::string c = CapabilityOfFile(path);
    return c.empty() || caps.count(c) > 0;
  };
  cdi::ContainerEdits out = edits;
  out.mounts.clear();
  for (const cdi::Mount& m : edits.mounts) {
    if (wanted(m.container_path)) out.mounts.push_back(m);
  }
  for (cdi::Hook& h : out.hooks) {
    // create-symlinks: "--link TARGET::LINK" pairs; a link to a file left out is left out too.
    std::vector<std::string> args;
    for (size_t i = 0; i < h.args.size(); ++i) {
      if (h.args[i] == "--link" && i + 1 < h.args.size()) {
        const std::string& pair = h.args[i + 1];
        const absl::string_view target = absl::string_view(pair).substr(0, pair.find("::"));
        if (!wanted(target)) {
          ++i;
          continue;
        }
      }
      args.push_back(h.args[i]);
    }
    h.args = std::move(args);
  }
  return out;
}

}  // namespace gpunode::container
