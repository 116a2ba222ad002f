// WriteHostRoot: the fixture host-root generator (see profile.h for the contract).
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "sim/support/profile.h"
#include "sim/support/str.h"
#include "src/container/ldcache.h"
#include "src/base/version.h"

namespace gpunode::sim {
namespace {

namespace fs = std::filesystem;

class TreeWriter {
 public:
  explicit TreeWriter(std::string dir) : dir_(std::move(dir)) {}

  // `rel` is a host path ("/proc/modules" or "proc/modules"); ".." and empty components are
  // rejected so nothing lands outside the root.
  StatusOr<std::string> Resolve(std::string_view rel) const {
    std::string out = dir_;
    bool any = false;
    for (absl::string_view piece :
         absl::StrSplit(absl::string_view(rel.data(), rel.size()), '/', absl::SkipEmpty())) {
      std::string_view part(piece.data(), piece.size());
      if (part == "..") {
        return absl::InvalidArgumentError(str::Cat("host path ", rel, ": escapes the host root"));
      }
      if (part == ".") continue;
      str::Append(&out, "/", part);
      any = true;
    }
    if (!any) return absl::InvalidArgumentError(str::Cat("host path \"", rel, "\": empty"));
    return out;
  }

  Status MakeDirs(const std::string& path) {
    std::error_code ec;
    fs::create_directories(path, ec);
    if (ec) return ErrnoToStatus(ec.value(), "mkdir", path);
    return absl::OkStatus();
  }

  Status Dir(std::string_view rel) {
    GPUNODE_ASSIGN_OR_RETURN(std::string path, Resolve(rel));
    return MakeDirs(path);
  }

  Status File(std::string_view rel, std::string_view content) {
    GPUNODE_ASSIGN_OR_RETURN(std::string path, Resolve(rel));
    GPUNODE_RETURN_IF_ERROR(MakeDirs(fs::path(path).parent_path().string()));
    std::error_code ec;
    if (fs::is_symlink(path, ec)) fs::remove(path, ec);
    FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr) return ErrnoToStatus(errno, "write", path);
    size_t n = content.empty() ? 0 : std::fwrite(content.data(), 1, content.size(), f);
    int err = errno;
    if (std::fclose(f) != 0 || n != content.size())
      return ErrnoToStatus(err ? err : EIO, "write", path);
    return absl::OkStatus();
  }

  Status Mode(std::string_view rel, unsigned mode) {
    GPUNODE_ASSIGN_OR_RETURN(std::string path, Resolve(rel));
    std::error_code ec;
    fs::permissions(path, fs::perms(mode), ec);
    if (ec) return ErrnoToStatus(ec.value(), "chmod", path);
    return absl::OkStatus();
  }

  // A copy of the program `source` at `rel`, mode 0755 (replacing what is there).
  Status Executable(std::string_view rel, const std::string& source) {
    GPUNODE_ASSIGN_OR_RETURN(std::string path, Resolve(rel));
    GPUNODE_RETURN_IF_ERROR(MakeDirs(fs::path(path).parent_path().string()));
    std::error_code ec;
    fs::remove(path, ec);
    fs::copy_file(source, path, fs::copy_options::overwrite_existing, ec);
    if (ec) return ErrnoToStatus(ec.value(), str::Cat("copy ", source, " to"), path);
    fs::permissions(path, fs::perms(0755), ec);
    if (ec) return ErrnoToStatus(ec.value(), "chmod", path);
    return absl::OkStatus();
  }

  // A relative symlink at `rel` pointing to `target` (may dangle).
  Status Link(std::string_view rel, const std::string& target) {
    GPUNODE_ASSIGN_OR_RETURN(std::string path, Resolve(rel));
    GPUNODE_RETURN_IF_ERROR(MakeDirs(fs::path(path).parent_path().string()));
    std::error_code ec;
    fs::remove_all(path, ec);
    fs::create_symlink(target, path, ec);
    if (ec) return ErrnoToStatus(ec.value(), "symlink", path);
    return absl::OkStatus();
  }

 private:
  std::string dir_;
};

// The simulated NVML library itself: $GPUNODE_SIM_LIBRARY, else libgpunode-simnvml.so beside the
// running program (the build tree), else in ../lib/gpunode (installed layout). "" when none.
std::string FindSimNvmlLibrary() {
  if (const char* lib = std::getenv("GPUNODE_SIM_LIBRARY"); lib != nullptr && *lib != '\0') {
    return ::access(lib, R_OK) == 0 ? std::string(lib) : std::string();
  }
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  for (const fs::path& candidate : {exe.parent_path() / "libgpunode-simnvml.so",
                                    exe.parent_path() / ".." / "lib" / "gpunode" / "libgpunode-simnvml.so"}) {
    if (::access(candidate.c_str(), R_OK) == 0) return candidate.string();
  }
  return "";
}

// Little-endian fields of an ELF64 image.
void PutLe(std::string& out, size_t at, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out[at + i] = static_cast<char>((value >> (8 * i)) & 0xff);
}
uint64_t GetLe(const std::string& in, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(in[at + i]);
  return v;
}

// A stand-in for a driver library: a minimal ELF64 x86-64 shared object whose only content is a
// dynamic section naming its SONAME, with the section headers that ELF readers use to find it
// (readelf -d, ldconfig, nvidia-ctk's SONAME symlink discovery). It has no loadable segment, so
// dlopen refuses it ("no loadable segments") rather than run anything.
std::string StubSharedObject(const std::string& soname) {
  constexpr size_t kEhdr = 64, kPhdr = 56, kShdr = 64, kDyn = 16;
  auto align8 = [](size_t n) { return (n + 7) & ~size_t{7}; };
  const std::string dynstr = str::Cat(std::string(1, '\0'), soname, std::string(1, '\0'));
  const std::string shstrtab = std::string("\0.dynstr\0.dynamic\0.shstrtab\0", 28);
  const size_t dynstr_off = kEhdr + kPhdr;
  const size_t dyn_off = align8(dynstr_off + dynstr.size());
  const size_t dyn_size = 4 * kDyn;  // DT_SONAME, DT_STRTAB, DT_STRSZ, DT_NULL
  const size_t shstr_off = dyn_off + dyn_size;
  const size_t sh_off = align8(shstr_off + shstrtab.size());
  std::string out(sh_off + 4 * kShdr, '\0');
  // ELF header: 64-bit, little-endian, version 1, ET_DYN, EM_X86_64.
  out.replace(0, 7, std::string("\x7f" "ELF\x02\x01\x01", 7));
  PutLe(out, 16, 3, 2);
  PutLe(out, 18, 62, 2);
  PutLe(out, 20, 1, 4);
  PutLe(out, 32, kEhdr, 8);     // e_phoff
  PutLe(out, 40, sh_off, 8);    // e_shoff
  PutLe(out, 52, kEhdr, 2);     // e_ehsize
  PutLe(out, 54, kPhdr, 2);     // e_phentsize
  PutLe(out, 56, 1, 2);         // e_phnum
  PutLe(out, 58, kShdr, 2);     // e_shentsize
  PutLe(out, 60, 4, 2);         // e_shnum
  PutLe(out, 62, 3, 2);         // e_shstrndx
  // PT_DYNAMIC (addresses equal file offsets).
  PutLe(out, kEhdr + 0, 2, 4);
  PutLe(out, kEhdr + 4, 4, 4);  // PF_R
  PutLe(out, kEhdr + 8, dyn_off, 8);
  PutLe(out, kEhdr + 16, dyn_off, 8);
  PutLe(out, kEhdr + 24, dyn_off, 8);
  PutLe(out, kEhdr + 32, dyn_size, 8);
  PutLe(out, kEhdr + 40, dyn_size, 8);
  PutLe(out, kEhdr + 48, 8, 8);
  out.replace(dynstr_off, dynstr.size(), dynstr);
  const uint64_t dyn[4][2] = {{14, 1}, {5, dynstr_off}, {10, dynstr.size()}, {0, 0}};
  for (size_t i = 0; i < 4; ++i) {
    PutLe(out, dyn_off + i * kDyn, dyn[i][0], 8);
    PutLe(out, dyn_off + i * kDyn + 8, dyn[i][1], 8);
  }
  out.replace(shstr_off, shstrtab.size(), shstrtab);
  // Section headers: null, .dynstr, .dynamic (linked to .dynstr), .shstrtab.
  struct Sh {
    uint32_t name, type;
    uint64_t flags, addr, off, size;
    uint32_t link;
    uint64_t align, entsize;
  };
  const Sh sections[4] = {{0, 0, 0, 0, 0, 0, 0, 0, 0},
                          {1, 3, 2, dynstr_off, dynstr_off, dynstr.size(), 0, 1, 0},
                          {9, 6, 3, dyn_off, dyn_off, dyn_size, 1, 8, kDyn},
                          {18, 3, 0, 0, shstr_off, shstrtab.size(), 0, 1, 0}};
  for (size_t i = 0; i < 4; ++i) {
    const size_t at = sh_off + i * kShdr;
    const Sh& s = sections[i];
    PutLe(out, at + 0, s.name, 4);
    PutLe(out, at + 4, s.type, 4);
    PutLe(out, at + 8, s.flags, 8);
    PutLe(out, at + 16, s.addr, 8);
    PutLe(out, at + 24, s.off, 8);
    PutLe(out, at + 32, s.size, 8);
    PutLe(out, at + 40, s.link, 4);
    PutLe(out, at + 48, s.align, 8);
    PutLe(out, at + 56, s.entsize, 8);
  }
  return out;
}

// `image` (an ELF64 little-endian shared object) with its DT_SONAME string replaced by `soname`,
// in place in the string table; an error when the image is not one or the new name is longer.
StatusOr<std::string> WithSoname(std::string image, const std::string& soname) {
  auto bad = [](std::string_view why) { return absl::InvalidArgumentError(str::Cat("ELF image: ", why)); };
  if (image.size() < 64 || image.compare(0, 6, std::string("\x7f" "ELF\x02\x01", 6)) != 0) {
    return bad("not a 64-bit little-endian ELF file");
  }
  const uint64_t phoff = GetLe(image, 32, 8), phentsize = GetLe(image, 54, 2), phnum = GetLe(image, 56, 2);
  if (phentsize < 56 || phoff + phnum * phentsize > image.size()) return bad("program headers out of range");
  uint64_t dyn_off = 0, dyn_size = 0;
  std::vector<std::pair<uint64_t, uint64_t>> loads;  // (vaddr, offset) of PT_LOAD
  std::vector<uint64_t> load_sizes;
  for (uint64_t i = 0; i < phnum; ++i) {
    const size_t at = phoff + i * phentsize;
    const uint64_t type = GetLe(image, at, 4);
    if (type == 2) {
      dyn_off = GetLe(image, at + 8, 8);
      dyn_size = GetLe(image, at + 32, 8);
    } else if (type == 1) {
      loads.emplace_back(GetLe(image, at + 16, 8), GetLe(image, at + 8, 8));
      load_sizes.push_back(GetLe(image, at + 32, 8));
    }
  }
  if (dyn_size == 0 || dyn_off + dyn_size > image.size()) return bad("no dynamic section");
  uint64_t strtab = 0, soname_at = 0;
  bool has_soname = false;
  for (uint64_t at = dyn_off; at + 16 <= dyn_off + dyn_size; at += 16) {
    const uint64_t tag = GetLe(image, at, 8), value = GetLe(image, at + 8, 8);
    if (tag == 0) break;
    if (tag == 5) strtab = value;
    if (tag == 14) {
      soname_at = value;
      has_soname = true;
    }
  }
  if (!has_soname || strtab == 0) return bad("no DT_SONAME");
  uint64_t file_strtab = 0;
  bool mapped = false;
  for (size_t i = 0; i < loads.size(); ++i) {
    if (strtab >= loads[i].first && strtab < loads[i].first + load_sizes[i]) {
      file_strtab = strtab - loads[i].first + loads[i].second;
      mapped = true;
      break;
    }
  }
  if (!mapped) return bad("string table outside the loaded segments");
  const uint64_t at = file_strtab + soname_at;
  if (at >= image.size()) return bad("SONAME out of range");
  const size_t old_len = image.find('\0', at);
  if (old_len == std::string::npos || old_len - at < soname.size()) return bad("new SONAME is longer");
  image.replace(at, soname.size(), soname);
  image[at + soname.size()] = '\0';
  return image;
}

// A program of the simulated driver (gpunode-sim-mps-control, gpunode-sim-nvidia-smi), looked for
// where the simulated NVML library is: beside $GPUNODE_SIM_LIBRARY, else beside the running program
// (the build tree), else in ../lib/gpunode (installed layout). "" when it is in none of them.
std::string FindSimProgram(const char* name) {
  std::vector<std::string> dirs;
  if (const char* lib = std::getenv("GPUNODE_SIM_LIBRARY"); lib != nullptr && *lib != '\0') {
    dirs.push_back(fs::path(lib).parent_path().string());
  }
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    dirs.push_back(exe.parent_path().string());
    dirs.push_back((exe.parent_path() / ".." / "lib" / "gpunode").string());
  }
  for (const std::string& d : dirs) {
    const fs::path candidate = fs::path(d.empty() ? "." : d) / name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
  }
  return "";
}

std::string LinkSpeed(unsigned gen) {
  switch (gen) {
    case 1:
      return "2.5 GT/s PCIe";
    case 2:
      return "5.0 GT/s PCIe";
    case 3:
      return "8.0 GT/s PCIe";
    case 4:
      return "16.0 GT/s PCIe";
    case 5:
      return "32.0 GT/s PCIe";
    case 6:
      return "64.0 GT/s PCIe";
    default:
      return "Unknown";
  }
}

std::string KernelVersionFile(const KernelModule& m) {
  if (m.flavor == ModuleFlavor::kOpen) {
    return str::Cat("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  ", m.version,
                    "  Release Build  (dvs-builder@U16-I3-B03-4-3)  Thu Sep 25 19:44:05 UTC 2025\n"
                    "GCC version:  gcc version 13.3.0 (Ubuntu 13.3.0-6ubuntu2~24.04) \n");
  }
  return str::Cat("NVRM version: NVIDIA UNIX x86_64 Kernel Module  ", m.version,
                  "  Sun May 12 19:39:15 UTC 2024\n"
                  "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14) \n");
}

std::string InformationFile(const Gpu& g, const KernelModule& m, unsigned irq) {
  std::string s = str::Cat("Model: \t\t ", g.name, "\n", "IRQ:   \t\t ", irq, "\n", "GPU UUID: \t ",
                           g.uuid, "\n", "Video BIOS: \t ", g.vbios, "\n", "Bus Type: \t PCIe\n",
                           "DMA Size: \t 52 bits\n", "DMA Mask: \t 0xfffffffffffff\n",
                           "Bus Location: \t ", g.bus_id, "\n", "Device Minor: \t ", g.minor, "\n");
  if (m.flavor == ModuleFlavor::kOpen) str::Append(&s, "GPU Firmware: \t ", m.version, "\n");
  str::Append(&s, "GPU Excluded:\t No\n");
  return s;
}

std::string ModulesFile(const NodeProfile& p) {
  std::string s;
  if (p.host.module.loaded) {
    const char* taint = p.host.module.flavor == ModuleFlavor::kOpen ? "(OE)" : "(PO)";
    str::Append(&s, "nvidia_uvm 2076672 0 - Live 0x0000000000000000 ", taint, "\n");
    str::Append(&s, "nvidia_drm 135168 0 - Live 0x0000000000000000 ", taint, "\n");
    str::Append(&s, "nvidia_modeset 1638400 1 nvidia_drm, Live 0x0000000000000000 ", taint, "\n");
    str::Append(&s, "nvidia 104071168 3 nvidia_uvm,nvidia_modeset, Live 0x0000000000000000 ", taint,
                "\n");
  }
  if (p.host.nouveau_loaded) {
    str::Append(&s, "nouveau 3096576 0 - Live 0x0000000000000000\n");
    str::Append(&s, "drm_ttm_helper 16384 1 nouveau, Live 0x0000000000000000\n");
  }
  str::Append(&s,
              "overlay 212992 12 - Live 0x0000000000000000\n"
              "br_netfilter 32768 0 - Live 0x0000000000000000\n"
              "nvme 61440 2 - Live 0x0000000000000000\n"
              "nvme_core 217088 3 nvme, Live 0x0000000000000000\n"
              "ext4 1105920 1 - Live 0x0000000000000000\n");
  return s;
}

std::string Hex(unsigned v, int digits) { return absl::StrFormat("0x%0*x\n", digits, v); }

// One PCI function under sys/devices, linked from sys/bus/pci/devices (as on a real host).
Status WritePciFunction(TreeWriter& w, const std::string& bus_id, unsigned vendor, unsigned device,
                        unsigned class_code, unsigned subsys_vendor, unsigned subsys_device,
                        int numa_node, const std::string& driver, const PcieLink* link) {
  unsigned d = 0, b = 0, dev = 0, f = 0;
  ParseBusId(bus_id, &d, &b, &dev, &f);
  const std::string rel_dir = absl::StrFormat("sys/devices/pci%04x:%02x/%s", d, b, bus_id);
  GPUNODE_RETURN_IF_ERROR(w.File(rel_dir + "/vendor", Hex(vendor, 4)));
  GPUNODE_RETURN_IF_ERROR(w.File(rel_dir + "/device", Hex(device, 4)));
  GPUNODE_RETURN_IF_ERROR(w.File(rel_dir + "/class", Hex(class_code, 6)));
  GPUNODE_RETURN_IF_ERROR(w.File(rel_dir + "/subsystem_vendor", Hex(subsys_vendor, 4)));
  GPUNODE_RETURN_IF_ERROR(w.File(rel_dir + "/subsystem_device", Hex(subsys_device, 4)));
  GPUNODE_RETURN_IF_ERROR(w.File(rel_dir + "/numa_node", str::Cat(numa_node, "\n")));
  // The first 256 bytes of the configuration space (what sysfs shows an unprivileged reader): a
  // type-0 header with the IDs and class above and no capability list, i.e. a bare-metal function
  // without the vGPU capability (GFD's and `gpunode labels`' vGPU detection read it); and the BAR
  // table (`resource`, 13 lines of start end flags) that go-nvlib's PCI walk reads.
  std::string config(256, '\0');
  auto put16 = [&config](size_t at, unsigned v) {
    config[at] = static_cast<char>(v & 0xff);
    config[at + 1] = static_cast<char>((v >> 8) & 0xff);
  };
  put16(0x00, vendor);
  put16(0x02, device);
  config[0x09] = static_cast<char>(class_code & 0xff);
  config[0x0a] = static_cast<char>((class_code >> 8) & 0xff);
  config[0x0b] = static_cast<char>((class_code >> 16) & 0xff);
  put16(0x2c, subsys_vendor);
  put16(0x2e, subsys_device);
  GPUNODE_RETURN_IF_ERROR(w.File(rel_dir + "/config", config));
  std::string resource;
  for (int i = 0; i < 13; ++i) resource += "0x0000000000000000 0x0000000000000000 0x0000000000000000\n";
  GPUNODE_RETURN_IF_ERROR(w.File(rel_dir + "/resource", resource));
  if (link != nullptr) {
    GPUNODE_RETURN_IF_ERROR(w.File(rel_dir + "/current_link_speed", LinkSpeed(link->gen) + "\n"));
    GPUNODE_RETURN_IF_ERROR(w.File(rel_dir + "/current_link_width", str::Cat(link->width, "\n")));
    GPUNODE_RETURN_IF_ERROR(
        w.File(rel_dir + "/max_link_speed", LinkSpeed(link->gpu_max_gen) + "\n"));
    GPUNODE_RETURN_IF_ERROR(w.File(rel_dir + "/max_link_width", str::Cat(link->max_width, "\n")));
  }
  if (!driver.empty()) {
    // From sys/devices/pciDDDD:BB/<bus_id>: ../../../ is sys/.
    GPUNODE_RETURN_IF_ERROR(w.Link(rel_dir + "/driver", "../../../bus/pci/drivers/" + driver));
    GPUNODE_RETURN_IF_ERROR(w.Link(str::Cat("sys/bus/pci/drivers/", driver, "/", bus_id),
                                   str::Cat("../../../../", rel_dir.substr(4))));
  }
  return w.Link("sys/bus/pci/devices/" + bus_id, "../../../" + rel_dir.substr(4));
}

std::string CudaVersionJson(const CudaToolkit& tk) {
  nlohmann::ordered_json j;
  j["cuda"] = {{"name", "CUDA SDK"}, {"version", tk.version}};
  j["cuda_cudart"] = {{"name", "CUDA Runtime (cudart)"}, {"version", tk.nvcc_version}};
  j["cuda_nvcc"] = {{"name", "CUDA NVCC"}, {"version", tk.nvcc_version}};
  j["cuda_nvrtc"] = {{"name", "CUDA NVRTC"}, {"version", tk.nvcc_version}};
  return j.dump(3) + "\n";
}

std::string XidText(uint64_t xid) {
  switch (xid) {
    case 13:
      return "Graphics SM Warp Exception on (GPC 0, TPC 0, SM 0): Illegal Instruction Encoding";
    case 31:
      return "Ch 00000008, intr 10000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ "
             "0x7f1a_00000000. Fault is of type FAULT_PDE ACCESS_TYPE_READ";
    case 43:
      return "Ch 00000010";
    case 48:
      return "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer "
             "at partition 0, subpartition 0.";
    case 63:
      return "Row Remapper: New row marked for remapping, reset gpu to activate.";
    case 64:
      return "Row Remapper: Failed to remap row, reset gpu to activate.";
    case 74:
      return "NVLink: fatal error detected on link 3";
    case 79:
      return "GPU has fallen off the bus.";
    case 94:
      return "Contained: SM (0x1). RST: No, D-RST: No";
    case 95:
      return "Uncontained: FBHUB. RST: Yes, D-RST: No";
    case 119:
      return "Timeout after 6s of waiting for RPC response from GPU0 GSP! Expected function 76 "
             "(GSP_RM_CONTROL).";
    default:
      return "Ch 00000000";
  }
}

// The kernel log: the module's load line and one NVRM line per XID event of the profile.
std::string KernelLog(const NodeProfile& p) {
  std::string s;
  const std::string prefix = str::Cat("Nov 30 08:00:00 ", p.host.hostname, " kernel: ");
  if (p.host.module.loaded) {
    str::Append(&s, prefix, "[    4.183245] nvidia: loading out-of-tree module taints kernel.\n");
    str::Append(
        &s, prefix, "[    4.297611] ",
        KernelVersionFile(p.host.module).substr(0, KernelVersionFile(p.host.module).find('\n')),
        "\n");
  }
  double t = 8123.456789;
  for (const Gpu& g : p.gpus) {
    for (const Event& e : g.events) {
      if (e.type != EventType::kXid) continue;
      std::string pci = g.bus_id.substr(0, g.bus_id.size() - 2);  // "0000:3a:00"
      str::Append(&s, prefix, absl::StrFormat("[%12.6f] ", t), "NVRM: Xid (PCI:", pci,
                  "): ", e.data, ", pid='<unknown>', name=<unknown>, ", XidText(e.data), "\n");
      t += 0.000412;
    }
  }
  return s;
}

// The driver's user-space libraries, their SONAME symlinks, and an etc/ld.so.cache (new format)
// that lists them, plus a few other entries a real cache has (libc, a 32-bit libcuda) so that
// readers must filter. Each library is a stub ELF object that names its SONAME (StubSharedObject),
// except libnvidia-ml.so.<version>: that is the simulated NVML library itself when it is found
// (FindSimNvmlLibrary), its SONAME set to libnvidia-ml.so.1, so programs that load NVML from the
// driver root as NVIDIA's tools do (nvidia-ctk cdi generate) talk to the simulated node.
Status WriteDriverLibraries(TreeWriter& w, const std::string& version) {
  const std::string dir = "/usr/lib/x86_64-linux-gnu";
  struct Lib {
    const char* name;
    std::string soname;  // empty: the versioned file name itself
  };
  const std::vector<Lib> libs = {
      {"libcuda.so", "libcuda.so.1"},
      {"libcudadebugger.so", "libcudadebugger.so.1"},
      {"libnvidia-ml.so", "libnvidia-ml.so.1"},
      {"libnvidia-ptxjitcompiler.so", "libnvidia-ptxjitcompiler.so.1"},
      {"libnvidia-nvvm.so", "libnvidia-nvvm.so.4"},
      {"libnvidia-gpucomp.so", ""},
      {"libnvidia-allocator.so", "libnvidia-allocator.so.1"},
      {"libnvidia-cfg.so", "libnvidia-cfg.so.1"},
      {"libnvidia-opencl.so", "libnvidia-opencl.so.1"},
      {"libnvidia-encode.so", "libnvidia-encode.so.1"},
      {"libnvcuvid.so", "libnvcuvid.so.1"},
  };
  constexpr int32_t kX8664Libc6 = container::kLdFlagX8664Lib64 | container::kLdFlagElfLibc6;
  std::vector<container::LdCacheEntry> entries;
  for (const Lib& lib : libs) {
    const std::string file = str::Cat(lib.name, ".", version);
    std::string soname = lib.soname.empty() ? file : lib.soname;
    std::string image = StubSharedObject(soname);
    if (std::string_view(lib.name) == "libnvidia-ml.so") {
      if (std::string nvml = FindSimNvmlLibrary(); !nvml.empty()) {
        // One sized read: the sanitized build's library is ~37 MB, and a character-by-character
        // copy (istreambuf_iterator) of it took ~4 s of CPU per --simulate run under ASan.
        std::ifstream in(nvml, std::ios::binary | std::ios::ate);
        std::string bytes;
        if (const std::streamoff size = in ? std::streamoff(in.tellg()) : -1; size > 0) {
          bytes.resize(static_cast<size_t>(size));
          in.seekg(0);
          in.read(bytes.data(), size);
        } else {
          in.setstate(std::ios::failbit);
        }
        // A library that cannot be read or renamed keeps the stub: NVML then fails to load there.
        if (auto renamed = WithSoname(std::move(bytes), soname); in && renamed.ok()) image = std::move(*renamed);
      }
    }
    GPUNODE_RETURN_IF_ERROR(w.File(str::Cat(dir, "/", file), image));
    if (soname != file) GPUNODE_RETURN_IF_ERROR(w.Link(str::Cat(dir, "/", soname), file));
    entries.push_back({soname, kX8664Libc6, str::Cat(dir, "/", soname), 0});
  }
  const std::string vdpau = str::Cat("libvdpau_nvidia.so.", version);
  GPUNODE_RETURN_IF_ERROR(w.File(str::Cat(dir, "/vdpau/", vdpau), StubSharedObject(vdpau)));
  entries.push_back({"libc.so.6", kX8664Libc6, dir + "/libc.so.6", 0});
  entries.push_back({"libcuda.so.1", container::kLdFlagElfLibc6, "/usr/lib/i386-linux-gnu/libcuda.so.1", 0});
  return w.File("etc/ld.so.cache", container::EncodeLdCache(entries));
}

}  // namespace

Status WriteHostRoot(const NodeProfile& p, const std::string& dir) {
  if (dir.empty()) return absl::InvalidArgumentError("host root: empty directory name");
  TreeWriter w(dir);
  // Validate every user-named path before writing anything.
  for (const auto& [path, content] : p.host.files)
    GPUNODE_RETURN_IF_ERROR(w.Resolve(path).status());
  for (const auto& path : p.host.empty_files) GPUNODE_RETURN_IF_ERROR(w.Resolve(path).status());

  GPUNODE_RETURN_IF_ERROR(w.File("etc/hostname", p.host.hostname + "\n"));
  GPUNODE_RETURN_IF_ERROR(w.File("proc/sys/kernel/osrelease", p.host.kernel_release + "\n"));
  GPUNODE_RETURN_IF_ERROR(w.File("proc/modules", ModulesFile(p)));
  GPUNODE_RETURN_IF_ERROR(w.File("var/log/kern.log", KernelLog(p)));
  GPUNODE_RETURN_IF_ERROR(w.Dir("sys/bus/pci/drivers"));
  GPUNODE_RETURN_IF_ERROR(w.Dir("dev"));

  const KernelModule& m = p.host.module;
  std::string gpu_driver;
  if (m.loaded) {
    gpu_driver = "nvidia";
    GPUNODE_RETURN_IF_ERROR(w.File("proc/driver/nvidia/version", KernelVersionFile(m)));
    GPUNODE_RETURN_IF_ERROR(w.File("sys/module/nvidia/version", m.version + "\n"));
    GPUNODE_RETURN_IF_ERROR(w.File("sys/module/nvidia/initstate", "live\n"));
    GPUNODE_RETURN_IF_ERROR(w.File("sys/module/nvidia_uvm/initstate", "live\n"));
    GPUNODE_RETURN_IF_ERROR(w.Dir("sys/bus/pci/drivers/nvidia"));
    GPUNODE_RETURN_IF_ERROR(w.Dir("proc/driver/nvidia/gpus"));
    unsigned irq = 598;
    for (const Gpu& g : p.gpus) {
      if (!g.on_pci_bus) continue;
      GPUNODE_RETURN_IF_ERROR(w.File(str::Cat("proc/driver/nvidia/gpus/", g.bus_id, "/information"),
                                     InformationFile(g, m, irq++)));
    }
    for (const Gpu& g : p.gpus) {
      GPUNODE_RETURN_IF_ERROR(w.File(str::Cat("dev/nvidia", g.minor), ""));
    }
    for (const char* node :
         {"dev/nvidiactl", "dev/nvidia-uvm", "dev/nvidia-uvm-tools", "dev/nvidia-modeset"}) {
      GPUNODE_RETURN_IF_ERROR(w.File(node, ""));
    }
    // MIG capabilities: /dev/nvidia-caps/nvidia-cap<N> and the driver's table of N
    // (proc/driver/nvidia-caps/mig-minors: "config 1", "gpu0/gi2/access 3", "gpu0/gi2/ci0/access 4").
    unsigned cap = 1;
    bool any_mig = false;
    std::string mig_minors;
    std::set<std::string> named;
    auto add_cap = [&](const std::string& name) -> Status {
      if (!named.insert(name).second) return absl::OkStatus();
      str::Append(&mig_minors, name, " ", cap, "\n");
      return w.File(str::Cat("dev/nvidia-caps/nvidia-cap", cap++), "");
    };
    for (const Gpu& g : p.gpus) {
      if (!g.mig.enabled) continue;
      if (!any_mig) {
        any_mig = true;
        GPUNODE_RETURN_IF_ERROR(add_cap("config"));   // nvidia-cap1
        GPUNODE_RETURN_IF_ERROR(add_cap("monitor"));  // nvidia-cap2
      }
      for (const MigDevice& d : g.mig.devices) {
        // One capability for the GPU instance and one for the compute instance.
        const std::string gi = str::Cat("gpu", g.minor, "/gi", d.gpu_instance_id);
        GPUNODE_RETURN_IF_ERROR(add_cap(gi + "/access"));
        GPUNODE_RETURN_IF_ERROR(add_cap(str::Cat(gi, "/ci", d.compute_instance_id, "/access")));
      }
    }
    if (any_mig) GPUNODE_RETURN_IF_ERROR(w.File("proc/driver/nvidia-caps/mig-minors", mig_minors));
    // The GSP firmware that comes with the module.
    for (const char* fw : {"gsp_ga10x.bin", "gsp_tu10x.bin"}) {
      GPUNODE_RETURN_IF_ERROR(w.File(str::Cat("lib/firmware/nvidia/", m.version, "/", fw), "simulated firmware\n"));
    }
  } else if (p.host.nouveau_loaded) {
    gpu_driver = "nouveau";
  }
  if (p.host.nouveau_loaded) {
    GPUNODE_RETURN_IF_ERROR(w.File("sys/module/nouveau/initstate", "live\n"));
    GPUNODE_RETURN_IF_ERROR(w.Dir("sys/bus/pci/drivers/nouveau"));
  }

  // PCI functions: the GPUs, the profile's other functions, and two ordinary non-NVIDIA
  // devices so that readers must filter by vendor.
  std::set<std::string> used;
  for (const Gpu& g : p.gpus) {
    if (!g.on_pci_bus) continue;
    used.insert(g.bus_id);
    GPUNODE_RETURN_IF_ERROR(WritePciFunction(w, g.bus_id, 0x10de, g.device_id, 0x030200,
                                             g.subsystem_id & 0xffff, g.subsystem_id >> 16,
                                             g.numa_node, gpu_driver, &g.pcie));
  }
  for (const PciFunction& f : p.host.pci_devices) {
    used.insert(f.bus_id);
    std::string driver = f.driver;
    if (driver == "nvidia" && !m.loaded) driver.clear();
    GPUNODE_RETURN_IF_ERROR(WritePciFunction(w, f.bus_id, f.vendor, f.device, f.class_code,
                                             f.vendor, 0, f.numa_node, driver, nullptr));
  }
  if (!used.count("0000:00:00.0")) {  // Intel host bridge
    GPUNODE_RETURN_IF_ERROR(WritePciFunction(w, "0000:00:00.0", 0x8086, 0x09a2, 0x060000, 0x8086,
                                             0x0000, p.host.numa_nodes > 1 ? 0 : -1, "", nullptr));
  }
  if (!used.count("0000:01:00.0")) {  // Intel E810 Ethernet
    GPUNODE_RETURN_IF_ERROR(WritePciFunction(w, "0000:01:00.0", 0x8086, 0x1592, 0x020000, 0x8086,
                                             0x0002, p.host.numa_nodes > 1 ? 0 : -1, "ice",
                                             nullptr));
  }

  // NUMA nodes.
  const int cpus_per_node = 56;
  for (int n = 0; n < p.host.numa_nodes; ++n) {
    GPUNODE_RETURN_IF_ERROR(
        w.File(str::Cat("sys/devices/system/node/node", n, "/cpulist"),
               str::Cat(n * cpus_per_node, "-", (n + 1) * cpus_per_node - 1, "\n")));
  }
  const std::string online =
      p.host.numa_nodes > 1 ? str::Cat("0-", p.host.numa_nodes - 1, "\n") : "0\n";
  GPUNODE_RETURN_IF_ERROR(w.File("sys/devices/system/node/online", online));
  GPUNODE_RETURN_IF_ERROR(w.File("sys/devices/system/node/possible", online));

  if (p.host.cuda_toolkit) {
    const CudaToolkit& tk = *p.host.cuda_toolkit;
    auto v = Version::Parse(tk.version);
    const std::string versioned =
        v.ok() ? str::Cat("cuda-", v->major(), ".", v->minor()) : "cuda-" + tk.version;
    GPUNODE_RETURN_IF_ERROR(
        w.File(str::Cat("usr/local/", versioned, "/version.json"), CudaVersionJson(tk)));
    GPUNODE_RETURN_IF_ERROR(w.Link("usr/local/cuda", versioned));
  }

  // The driver's utilities come with its user-space libraries (a stand-in that starts like an ELF
  // file, as `cdi generate` checks, and runs nowhere).
  if (p.host.nvidia_utils && !p.driver.version.empty()) {
    // The simulated nvidia-smi (sim/smi) is a real program: copied in when it was built, else a
    // stub that only looks like one.
    if (std::string smi = FindSimProgram("gpunode-sim-nvidia-smi"); !smi.empty()) {
      GPUNODE_RETURN_IF_ERROR(w.Executable("usr/bin/nvidia-smi", smi));
    } else {
      GPUNODE_RETURN_IF_ERROR(w.File("usr/bin/nvidia-smi", std::string("\x7f" "ELF (gpunode simulated nvidia-smi)\n")));
      GPUNODE_RETURN_IF_ERROR(w.Mode("usr/bin/nvidia-smi", 0755));  // executable, as the driver installs it
    }
    // The simulated MPS control daemon is a real program (sim/mps): copied in when it was built.
    if (std::string mps = FindSimProgram("gpunode-sim-mps-control"); !mps.empty()) {
      GPUNODE_RETURN_IF_ERROR(w.Executable("usr/bin/nvidia-cuda-mps-control", mps));
    }
  }
  if (!p.driver.version.empty()) GPUNODE_RETURN_IF_ERROR(WriteDriverLibraries(w, p.driver.version));
  // DMI, which every real machine has (GFD's nvidia.com/gpu.machine reads product_name); a profile's
  // own host.files entry replaces it.
  GPUNODE_RETURN_IF_ERROR(w.File("sys/class/dmi/id/sys_vendor", "gpunode\n"));
  GPUNODE_RETURN_IF_ERROR(w.File("sys/class/dmi/id/product_name", "gpunode simulated node\n"));
  for (const auto& [path, content] : p.host.files) GPUNODE_RETURN_IF_ERROR(w.File(path, content));
  for (const auto& path : p.host.empty_files) GPUNODE_RETURN_IF_ERROR(w.File(path, ""));
  return absl::OkStatus();
}

}  // namespace gpunode::sim
