// The cgroup v2 device controller for the hook (hook_inject.h, step 3): BPF_PROG_TYPE_CGROUP_DEVICE
// programs, built and swapped with raw bpf(2) calls.
//
// The layout of the allow blocks follows runc's device filter (libcontainer/cgroups/devices,
// originally crun's ebpf.c) and libnvidia-container's nvcgo (src/nvcgo/internal/cgroup/ebpf.go),
// which prepends the same kind of blocks to the instructions of the program runc attached:
//   r2 = *(u16 *)(r1 + 0)   device type (BPF_DEVCG_DEV_*)
//   r3 = *(u32 *)(r1 + 0); w3 >>= 16   access (BPF_DEVCG_ACC_*)
//   r4 = *(u32 *)(r1 + 4)   major
//   r5 = *(u32 *)(r1 + 8)   minor
//   per rule: if r2 != type goto next; [w6 = w3; w6 &= access; if r6 != r3 goto next;]
//             if r4 != major goto next; [if r5 != minor goto next;] w0 = 1; exit
//   the old program, whose own first instructions load r2..r5 again from r1.
// r1 (the context) is never written, so the old program runs as it did. Unlike nvcgo, which
// detaches the old program before attaching the new one (a moment with no device filter at all),
// the new one is attached first: while both are attached an access needs both to allow it.
#include <fcntl.h>
#include <linux/bpf.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "src/container/hook_inject.h"
#include "src/base/unique_fd.h"

namespace gpunode::container {
namespace {

static_assert(sizeof(BpfInsn) == sizeof(bpf_insn), "BpfInsn mirrors struct bpf_insn");

BpfInsn Insn(uint8_t code, uint8_t dst, uint8_t src, int16_t off, int32_t imm) {
  BpfInsn i;
  i.code = code;
  i.regs = static_cast<uint8_t>((dst & 0x0f) | ((src & 0x0f) << 4));
  i.off = off;
  i.imm = imm;
  return i;
}

constexpr uint8_t kR0 = 0, kR1 = 1, kR2 = 2, kR3 = 3, kR4 = 4, kR5 = 5, kR6 = 6;
constexpr uint8_t kJumpNext = 0xff;  // placeholder offset, patched when the block's end is known

using Fd = UniqueFd;

long Bpf(int cmd, bpf_attr& attr) { return ::syscall(SYS_bpf, cmd, &attr, sizeof attr); }

uint64_t Ptr(const void* p) { return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p)); }

// "what: strerror", with the code ErrnoToStatus gives that errno.
Status BpfError(const std::string& what, int err) {
  return Status(ErrnoToStatus(err, "", "").code(), absl::StrCat(what, ": ", std::strerror(err)));
}

// The instructions of a loaded program, as the kernel keeps them (xlated).
StatusOr<std::vector<BpfInsn>> ProgramInstructions(int prog_fd, uint32_t id) {
  bpf_prog_info info{};
  bpf_attr attr{};
  attr.info.bpf_fd = static_cast<uint32_t>(prog_fd);
  attr.info.info_len = sizeof info;
  attr.info.info = Ptr(&info);
  if (Bpf(BPF_OBJ_GET_INFO_BY_FD, attr) != 0) return BpfError(absl::StrCat("read BPF program ", id), errno);
  const uint32_t len = info.xlated_prog_len;
  if (len == 0 || len % sizeof(bpf_insn) != 0 || len > 1000000 * sizeof(bpf_insn)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "BPF program ", id, " attached to the container's cgroup shows no instructions (", len,
        " bytes); without them our rules cannot be put in front of it"));
  }
  std::vector<BpfInsn> insns(len / sizeof(bpf_insn));
  info = bpf_prog_info{};
  info.xlated_prog_len = len;
  info.xlated_prog_insns = Ptr(insns.data());
  attr = bpf_attr{};
  attr.info.bpf_fd = static_cast<uint32_t>(prog_fd);
  attr.info.info_len = sizeof info;
  attr.info.info = Ptr(&info);
  if (Bpf(BPF_OBJ_GET_INFO_BY_FD, attr) != 0) return BpfError(absl::StrCat("read BPF program ", id), errno);
  if (info.xlated_prog_len != len) {
    return absl::AbortedError(absl::StrCat("BPF program ", id, " changed while it was read"));
  }
  return insns;
}

StatusOr<Fd> LoadDeviceProgram(const std::vector<BpfInsn>& insns) {
  static char log[64 * 1024];
  log[0] = '\0';
  const char license[] = "Apache";  // runc's and nvcgo's; no GPL-only helper is called
  bpf_attr attr{};
  attr.prog_type = BPF_PROG_TYPE_CGROUP_DEVICE;
  attr.insn_cnt = static_cast<uint32_t>(insns.size());
  attr.insns = Ptr(insns.data());
  attr.license = Ptr(license);
  attr.log_level = 1;
  attr.log_buf = Ptr(log);
  attr.log_size = sizeof log;
  long fd = Bpf(BPF_PROG_LOAD, attr);
  if (fd < 0 && errno == ENOSPC) {  // the verifier's log did not fit: load again without it
    attr.log_level = 0;
    attr.log_buf = 0;
    attr.log_size = 0;
    fd = Bpf(BPF_PROG_LOAD, attr);
  }
  if (fd < 0) {
    const int err = errno;
    std::string verifier(log);
    if (verifier.size() > 2000) verifier = verifier.substr(verifier.size() - 2000);
    return absl::InternalError(absl::StrCat("load the new device filter (", insns.size(), " instructions): ",
                                            std::strerror(err), verifier.empty() ? "" : "; verifier: ", verifier));
  }
  return Fd(static_cast<int>(fd));
}

}  // namespace

StatusOr<std::vector<BpfInsn>> PrependDeviceRules(const std::vector<DeviceRule>& rules,
                                                  const std::vector<BpfInsn>& old) {
  // The old program: every instruction must mean the same when loaded again at another offset.
  for (size_t pc = 0; pc < old.size(); ++pc) {
    const BpfInsn& i = old[pc];
    const uint8_t cls = BPF_CLASS(i.code);
    if ((i.regs & 0x0f) > 10 || (i.regs >> 4) > 10) {
      return absl::InvalidArgumentError(absl::StrCat("the attached device filter uses register ", (i.regs & 0x0f) > 10 ? (i.regs & 0x0f) : (i.regs >> 4),
                                                     " at instruction ", pc, " (constant blinding?); it cannot be loaded again"));
    }
    if (i.code == (BPF_LD | BPF_IMM | BPF_DW)) {
      if ((i.regs >> 4) != 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "the attached device filter refers to a map or an object at instruction ", pc, "; it cannot be loaded again"));
      }
      ++pc;  // the second half of the 64-bit constant
      continue;
    }
    if ((cls == BPF_JMP || cls == BPF_JMP32) && BPF_OP(i.code) == BPF_CALL) {
      return absl::InvalidArgumentError(
          absl::StrCat("the attached device filter calls a function at instruction ", pc, "; it cannot be loaded again"));
    }
    if ((cls == BPF_JMP || cls == BPF_JMP32) && BPF_OP(i.code) != BPF_EXIT) {
      const int64_t target = static_cast<int64_t>(pc) + 1 + i.off;
      if (target < 0 || target >= static_cast<int64_t>(old.size())) {
        return absl::InvalidArgumentError(absl::StrCat("the attached device filter jumps out of itself at instruction ", pc));
      }
    }
  }
  if (old.empty()) return absl::InvalidArgumentError("the attached device filter has no instructions");

  std::vector<BpfInsn> out = {
      Insn(BPF_LDX | BPF_MEM | BPF_H, kR2, kR1, 0, 0),
      Insn(BPF_LDX | BPF_MEM | BPF_W, kR3, kR1, 0, 0),
      Insn(BPF_ALU | BPF_RSH | BPF_K, kR3, 0, 0, 16),
      Insn(BPF_LDX | BPF_MEM | BPF_W, kR4, kR1, 4, 0),
      Insn(BPF_LDX | BPF_MEM | BPF_W, kR5, kR1, 8, 0),
  };
  for (const DeviceRule& r : rules) {
    int32_t type = 0;
    if (r.type == 'c') {
      type = BPF_DEVCG_DEV_CHAR;
    } else if (r.type == 'b') {
      type = BPF_DEVCG_DEV_BLOCK;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("device rule type '", std::string(1, r.type), "': not c or b"));
    }
    constexpr int64_t kMax = std::numeric_limits<int32_t>::max();  // JNE's immediate is a signed 32-bit
    if (r.major < 0 || r.major > kMax || r.minor < -1 || r.minor > kMax) {
      return absl::InvalidArgumentError(absl::StrCat("device rule ", r.major, ":", r.minor, ": number out of range"));
    }
    int32_t access = 0;
    for (char c : r.access) {
      switch (c) {
        case 'r': access |= BPF_DEVCG_ACC_READ; break;
        case 'w': access |= BPF_DEVCG_ACC_WRITE; break;
        case 'm': access |= BPF_DEVCG_ACC_MKNOD; break;
        default:
          return absl::InvalidArgumentError(absl::StrCat("device rule access \"", r.access, "\": only r, w and m"));
      }
    }
    if (access == 0) continue;  // allows nothing
    const size_t start = out.size();
    out.push_back(Insn(BPF_JMP | BPF_JNE | BPF_K, kR2, 0, kJumpNext, type));
    if (access != (BPF_DEVCG_ACC_READ | BPF_DEVCG_ACC_WRITE | BPF_DEVCG_ACC_MKNOD)) {
      out.push_back(Insn(BPF_ALU | BPF_MOV | BPF_X, kR6, kR3, 0, 0));
      out.push_back(Insn(BPF_ALU | BPF_AND | BPF_K, kR6, 0, 0, access));
      out.push_back(Insn(BPF_JMP | BPF_JNE | BPF_X, kR6, kR3, kJumpNext, 0));
    }
    out.push_back(Insn(BPF_JMP | BPF_JNE | BPF_K, kR4, 0, kJumpNext, static_cast<int32_t>(r.major)));
    if (r.minor >= 0) out.push_back(Insn(BPF_JMP | BPF_JNE | BPF_K, kR5, 0, kJumpNext, static_cast<int32_t>(r.minor)));
    out.push_back(Insn(BPF_ALU | BPF_MOV | BPF_K, kR0, 0, 0, 1));
    out.push_back(Insn(BPF_JMP | BPF_EXIT, 0, 0, 0, 0));
    const size_t next = out.size();
    for (size_t pc = start; pc < next; ++pc) {
      if (out[pc].off == kJumpNext && BPF_CLASS(out[pc].code) == BPF_JMP && BPF_OP(out[pc].code) == BPF_JNE) {
        out[pc].off = static_cast<int16_t>(next - pc - 1);
      }
    }
  }
  out.insert(out.end(), old.begin(), old.end());
  return out;
}

Status AllowDevicesCgroupV2(const std::string& dir, const std::vector<DeviceRule>& rules) {
  Fd cgroup(::open(dir.c_str(), O_DIRECTORY | O_RDONLY | O_CLOEXEC));
  if (cgroup.get() < 0) return ErrnoToStatus(errno, "open the container's cgroup", dir);

  // The programs attached to this cgroup itself (not inherited ones), and the cgroup's flags.
  std::vector<uint32_t> ids(64);
  uint32_t attach_flags = 0;
  for (int attempt = 0;; ++attempt) {
    bpf_attr attr{};
    attr.query.target_fd = static_cast<uint32_t>(cgroup.get());
    attr.query.attach_type = BPF_CGROUP_DEVICE;
    attr.query.prog_ids = Ptr(ids.data());
    attr.query.prog_cnt = static_cast<uint32_t>(ids.size());
    if (Bpf(BPF_PROG_QUERY, attr) == 0) {
      ids.resize(attr.query.prog_cnt);
      attach_flags = attr.query.attach_flags;
      break;
    }
    if (errno != ENOSPC || attempt >= 3) {
      return BpfError(absl::StrCat("list the device filters of ", dir, " (BPF_PROG_QUERY)"), errno);
    }
    ids.resize(attr.query.prog_cnt + 16);
  }
  if (ids.empty()) return absl::OkStatus();  // no filter: every device is allowed already

  // BPF_PROG_LOAD counts against RLIMIT_MEMLOCK on kernels before 5.11; the limit is ours only.
  rlimit unlimited{RLIM_INFINITY, RLIM_INFINITY};
  (void)::setrlimit(RLIMIT_MEMLOCK, &unlimited);

  for (uint32_t id : ids) {
    bpf_attr attr{};
    attr.prog_id = id;
    const long raw = Bpf(BPF_PROG_GET_FD_BY_ID, attr);
    if (raw < 0) return BpfError(absl::StrCat("open device filter ", id, " of ", dir), errno);
    Fd old(static_cast<int>(raw));
    GPUNODE_ASSIGN_OR_RETURN(std::vector<BpfInsn> insns, ProgramInstructions(old.get(), id));
    auto merged = PrependDeviceRules(rules, insns);
    if (!merged.ok()) return Annotate(merged.status(), absl::StrCat("device filter ", id, " of ", dir));
    GPUNODE_ASSIGN_OR_RETURN(Fd fresh, LoadDeviceProgram(*merged));
    attr = bpf_attr{};
    attr.target_fd = static_cast<uint32_t>(cgroup.get());
    attr.attach_bpf_fd = static_cast<uint32_t>(fresh.get());
    attr.attach_type = BPF_CGROUP_DEVICE;
    attr.attach_flags = attach_flags;  // ALLOW_MULTI: added beside the old; else: replaces it
    if (Bpf(BPF_PROG_ATTACH, attr) != 0) {
      return BpfError(absl::StrCat("attach the new device filter to ", dir, " (flags ", attach_flags, ")"), errno);
    }
    if (attach_flags & BPF_F_ALLOW_MULTI) {
      attr = bpf_attr{};
      attr.target_fd = static_cast<uint32_t>(cgroup.get());
      attr.attach_bpf_fd = static_cast<uint32_t>(old.get());
      attr.attach_type = BPF_CGROUP_DEVICE;
      if (Bpf(BPF_PROG_DETACH, attr) != 0) {
        return BpfError(absl::StrCat("detach the old device filter ", id, " from ", dir), errno);
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace gpunode::container
