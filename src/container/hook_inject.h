// gpunode as `nvidia-container-runtime-hook prestart`: GPU injection into a container that runc
// has already created, for hosts where Docker's default runtime is runc (docs/docker.md, "runc as
// Docker's default runtime").
//
// The shim (src/cli/oci_runtime_cmd.cc) edits config.json before runc reads it. The hook runs
// later, when runc has built the container's mount namespace and cgroup but not yet pivoted into
// the root filesystem, so it makes the same edits from outside, as libnvidia-container's
// `nvidia-container-cli configure --pid=PID ROOTFS` does (src/nvc_mount.c, src/nvc_ldcache.c,
// src/nvcgo/internal/cgroup of NVIDIA/libnvidia-container):
//  1. the plan (this file): the shim's injection is run on a copy of config.json, and what it
//     would have added (device nodes, mounts, createContainer hooks, cgroup allow rules) is the
//     plan, so the hook and the shim never disagree on what a request means;
//  2. the mount namespace (hook_inject_mount.cc): every host source opened before entering the
//     container (a detached bind mount made with open_tree(2)), then unshare(CLONE_FS) and setns
//     into /proc/PID/ns/mnt; device nodes made with mknod under ROOTFS/dev, driver files attached
//     (move_mount) onto files created in ROOTFS, read-only, nosuid, nodev; every path inside ROOTFS
//     resolved with openat2(RESOLVE_IN_ROOT), so the image's symlinks never lead out of it; then
//     the spec's hooks (symlinks, ld cache) run there with the OCI state on stdin;
//  3. the device cgroup (hook_inject_cgroup.cc): cgroup v1 writes "c MAJ:MIN rwm" to
//     devices.allow; cgroup v2 replaces each BPF_PROG_TYPE_CGROUP_DEVICE program attached to the
//     container's cgroup with one that has our allow rules in front of its instructions
//     (hook_inject_bpf.cc).
#ifndef GPUNODE_CONTAINER_HOOK_INJECT_H_
#define GPUNODE_CONTAINER_HOOK_INJECT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "src/base/status.h"

namespace gpunode::container {

// The OCI state a runtime gives a hook on stdin, as far as the hook needs it.
struct HookState {
  std::string id;
  int pid = 0;
  std::string bundle;  // absolute
};
inline constexpr size_t kMaxHookStateBytes = 1 << 20;
// InvalidArgument naming the field when the JSON is not an object with a string id, a positive
// pid (the container's init) and an absolute bundle path without "..".
StatusOr<HookState> ParseHookState(absl::string_view json);

// root.path of a bundle's config: relative to the bundle unless absolute. InvalidArgument when
// missing, empty or with "..".
StatusOr<std::string> BundleRootPath(const nlohmann::ordered_json& config, const std::string& bundle);

struct PlannedDeviceNode {
  std::string path;  // in the container, absolute
  char type = 'c';   // 'c' or 'b'
  int64_t major = 0;
  int64_t minor = 0;
  uint32_t mode = 0666;  // permission bits
  std::optional<uint32_t> uid, gid;
};
struct PlannedMount {
  std::string source;       // host path, absolute
  std::string destination;  // in the container, absolute
  bool recursive = false;   // rbind
  bool read_only = false;   // "ro" among the options; nosuid and nodev are always set
  bool noexec = false;
};
struct PlannedHook {
  std::string stage;  // "createContainer", "createRuntime", "prestart", "startContainer"
  std::string path;
  std::vector<std::string> args;
  std::vector<std::string> env;
};
struct DeviceRule {
  char type = 'c';  // 'c' or 'b'
  int64_t major = 0;
  int64_t minor = 0;  // -1: every minor ('*')
  std::string access = "rwm";
};
struct InjectionPlan {
  std::vector<PlannedDeviceNode> devices;
  std::vector<PlannedMount> mounts;
  std::vector<PlannedHook> hooks;
  std::vector<DeviceRule> rules;
  std::vector<std::string> env;  // entries the shim would add; a started process's env cannot change
  bool Empty() const { return devices.empty() && mounts.empty() && hooks.empty() && rules.empty(); }
};

// What `after` (the shim's injection applied to `before`) adds: linux.devices entries whose path
// is new or changed, mounts whose destination is new or changed, hooks not in `before` (except
// Docker's nvidia-container-runtime-hook), allow rules of linux.resources.devices not in `before`,
// env entries not in `before`. InvalidArgument when an added entry is malformed (a relative path,
// "..", a type other than c/b, numbers out of range).
StatusOr<InjectionPlan> PlanFromConfigs(const nlohmann::ordered_json& before, const nlohmann::ordered_json& after);

// "c 195:0 rwm" (devices.allow); '*' for a minor of -1.
std::string CgroupV1Rule(const DeviceRule& rule);

// /proc/PID/cgroup: where the devices controller of a process is.
struct ProcCgroup {
  std::optional<std::string> devices_v1;  // the path of the v1 "devices" hierarchy's line
  std::optional<std::string> unified;     // the path of the "0::" line
};
// InvalidArgument for a malformed line or a path with "..".
StatusOr<ProcCgroup> ParseProcCgroup(absl::string_view text);

// A mount point from /proc/self/mountinfo: the first of filesystem type `fstype` (and, for
// "cgroup", whose super options name `option`), with the root it shows of that filesystem.
struct MountPoint {
  std::string root;         // field 4
  std::string mount_point;  // field 5
};
StatusOr<MountPoint> FindMount(absl::string_view mountinfo, absl::string_view fstype, absl::string_view option = "");
// The directory of cgroup `path` under a mount (the mount's root is cut off the front).
StatusOr<std::string> CgroupDirectory(const MountPoint& mount, const std::string& path);

// BPF_PROG_TYPE_CGROUP_DEVICE programs (hook_inject_bpf.cc). One instruction, as in linux/bpf.h.
struct BpfInsn {
  uint8_t code = 0;
  uint8_t regs = 0;  // dst in the low nibble, src in the high one
  int16_t off = 0;
  int32_t imm = 0;
};
// Allow blocks for `rules` (each: type, major and, unless -1, minor compared; access when not
// "rwm"), each ending in `r0 = 1; exit`, preceded by the loads of the context into r2..r5 (type,
// access, major, minor: runc's and crun's register use), followed by `old` unchanged: a device no
// rule names falls through to the old program, which reloads the registers from r1 itself.
// InvalidArgument for a rule with another type, a number above UINT32_MAX, an unknown access
// letter, or an old program that cannot be loaded again (a map or function reference, a register
// above r10, a jump out of the program).
StatusOr<std::vector<BpfInsn>> PrependDeviceRules(const std::vector<DeviceRule>& rules,
                                                  const std::vector<BpfInsn>& old);
// Replaces every BPF_CGROUP_DEVICE program attached to cgroup directory `dir` with its
// PrependDeviceRules() version: the new one attached (with the cgroup's attach flags), then the old
// one detached, so no access is allowed in between that neither allows. No program attached: the
// cgroup restricts no device, nothing to do.
Status AllowDevicesCgroupV2(const std::string& dir, const std::vector<DeviceRule>& rules);

// Step 3: allows `rules` in the device cgroup of process `pid` (v1 when the process has a devices
// line, else v2). `proc` is /proc (tests point it elsewhere for the parsing).
Status AllowDevicesInCgroup(int pid, const std::vector<DeviceRule>& rules, const std::string& proc = "/proc");

// Step 2: the device nodes, mounts and hooks of `plan` made in the mount namespace of `pid`,
// inside `rootfs` (a path in that namespace). `state_json` is given to the hooks on stdin.
// The calling thread stays in that namespace (and its working directory is the container's root):
// call it last, in a process that exits afterwards. A container in a user namespace of its own is
// refused (FailedPrecondition): the runtime shim serves it.
Status ApplyInContainer(int pid, const std::string& rootfs, const InjectionPlan& plan, const std::string& state_json);

}  // namespace gpunode::container

#endif  // GPUNODE_CONTAINER_HOOK_INJECT_H_
