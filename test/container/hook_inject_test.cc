// The pure parts of the hook's injection into a created container (src/container/hook_inject.h):
// the OCI state, the plan from the shim's edits, the cgroup files, and the device filter program
// (checked by running it in a small interpreter of the instructions it uses, and, where this
// machine lets root load BPF programs into a cgroup v2 hierarchy, by the kernel itself).
#include "src/container/hook_inject.h"

#include <fcntl.h>
#include <linux/bpf.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sched.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/container/oci_inject.h"
#include "test/testing/status_matchers.h"

namespace gpunode::container {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

TEST(HookStateTest, ReadsIdPidAndBundle) {
  auto s = ParseHookState(R"({"ociVersion":"1.0.2","id":"abc","status":"created","pid":4242,"bundle":"/run/b/abc"})");
  ASSERT_OK(s.status());
  EXPECT_EQ(s->id, "abc");
  EXPECT_EQ(s->pid, 4242);
  EXPECT_EQ(s->bundle, "/run/b/abc");
}

TEST(HookStateTest, RefusesWhatIsNotAContainersState) {
  EXPECT_THAT(ParseHookState("[]").status().message(), HasSubstr("not a JSON object"));
  EXPECT_THAT(ParseHookState(R"({"bundle":"/b"})").status().message(), HasSubstr("no integer \"pid\""));
  EXPECT_THAT(ParseHookState(R"({"pid":1,"bundle":"/b"})").status().message(), HasSubstr("pid 1"));
  EXPECT_THAT(ParseHookState(R"({"pid":-5,"bundle":"/b"})").status().message(), HasSubstr("pid -5"));
  EXPECT_THAT(ParseHookState(R"({"pid":9999999999,"bundle":"/b"})").status().message(), HasSubstr("pid"));
  EXPECT_THAT(ParseHookState(R"({"pid":7})").status().message(), HasSubstr("no \"bundle\""));
  EXPECT_THAT(ParseHookState(R"({"pid":7,"bundle":"rel/b"})").status().message(), HasSubstr("not an absolute path"));
  EXPECT_THAT(ParseHookState(R"({"pid":7,"bundle":"/a/../etc"})").status().message(), HasSubstr("without .."));
  EXPECT_FALSE(ParseHookState("{\"pid\":7,").ok());
  std::string deep(100, '[');
  EXPECT_FALSE(ParseHookState(deep).ok()) << "nesting is bounded";
  EXPECT_THAT(ParseHookState(std::string(kMaxHookStateBytes + 1, ' ')).status().message(), HasSubstr("over"));
}

TEST(HookStateTest, RootPathIsRelativeToTheBundle) {
  EXPECT_EQ(*BundleRootPath(Json::parse(R"({"root":{"path":"rootfs"}})"), "/b"), "/b/rootfs");
  EXPECT_EQ(*BundleRootPath(Json::parse(R"({"root":{"path":"/var/lib/x/merged"}})"), "/b"), "/var/lib/x/merged");
  EXPECT_FALSE(BundleRootPath(Json::parse(R"({"root":{"path":"../x"}})"), "/b").ok());
  EXPECT_FALSE(BundleRootPath(Json::parse(R"({"root":{}})"), "/b").ok());
  EXPECT_FALSE(BundleRootPath(Json::parse(R"({})"), "/b").ok());
}

// The plan is what the shim's edits add: here the real InjectDevices on a small spec.
TEST(HookPlanTest, IsWhatTheShimsEditsAdd) {
  cdi::Spec spec;
  spec.cdi_version = "0.6.0";
  spec.kind = "nvidia.com/gpu";
  cdi::Device d0;
  d0.name = "0";
  d0.edits.device_nodes.push_back({.path = "/dev/nvidia0", .type = "c", .major = 195, .minor = 0, .file_mode = 0666});
  spec.devices.push_back(d0);
  cdi::Device d1 = d0;
  d1.name = "1";
  d1.edits.device_nodes[0].path = "/dev/nvidia1";
  d1.edits.device_nodes[0].minor = 1;
  spec.devices.push_back(d1);
  spec.edits.device_nodes.push_back({.path = "/dev/nvidiactl", .type = "c", .major = 195, .minor = 255, .file_mode = 0666});
  spec.edits.mounts.push_back({.host_path = "/usr/lib/x86_64-linux-gnu/libcuda.so.580.95.05",
                               .container_path = "/usr/lib/x86_64-linux-gnu/libcuda.so.580.95.05",
                               .options = {"ro", "nosuid", "nodev", "bind"}});
  spec.edits.hooks.push_back({.hook_name = "createContainer", .path = "/usr/bin/gpunode",
                              .args = {"gpunode", "cdi", "hook", "update-ldcache", "--folder", "/usr/lib/x86_64-linux-gnu"}});
  SpecRegistry registry;
  registry.Add(spec, "test");

  const Json before = Json::parse(R"({
    "process": {"env": ["PATH=/bin", "NVIDIA_VISIBLE_DEVICES=1"]},
    "root": {"path": "rootfs"},
    "mounts": [{"destination": "/proc", "type": "proc", "source": "proc"}],
    "hooks": {"prestart": [{"path": "/usr/bin/nvidia-container-runtime-hook", "args": ["nvidia-container-runtime-hook", "prestart"]}]},
    "linux": {"devices": [], "resources": {"devices": [{"allow": false, "access": "rwm"}]}}
  })");
  Json after = before;
  DeviceRequest request;
  request.devices = {"nvidia.com/gpu=1"};
  request.channel = RequestChannel::kEnvironment;
  ASSERT_OK(InjectDevices(after, registry, request, "nvidia.com/gpu").status());
  RemoveLegacyNvidiaHooks(after);

  auto plan = PlanFromConfigs(before, after);
  ASSERT_OK(plan.status());
  ASSERT_EQ(plan->devices.size(), 2u);
  EXPECT_EQ(plan->devices[0].path, "/dev/nvidiactl");
  EXPECT_EQ(plan->devices[1].path, "/dev/nvidia1");
  EXPECT_EQ(plan->devices[1].major, 195);
  EXPECT_EQ(plan->devices[1].minor, 1);
  EXPECT_EQ(plan->devices[1].mode, 0666u);
  ASSERT_EQ(plan->mounts.size(), 1u);
  EXPECT_EQ(plan->mounts[0].destination, "/usr/lib/x86_64-linux-gnu/libcuda.so.580.95.05");
  EXPECT_TRUE(plan->mounts[0].read_only);
  EXPECT_FALSE(plan->mounts[0].recursive);
  ASSERT_EQ(plan->hooks.size(), 1u) << "Docker's own hook is not in the plan; the spec's is";
  EXPECT_EQ(plan->hooks[0].stage, "createContainer");
  EXPECT_THAT(plan->hooks[0].args, ElementsAre("gpunode", "cdi", "hook", "update-ldcache", "--folder",
                                               "/usr/lib/x86_64-linux-gnu"));
  ASSERT_EQ(plan->rules.size(), 2u);
  EXPECT_EQ(CgroupV1Rule(plan->rules[0]), "c 195:255 rwm");
  EXPECT_EQ(CgroupV1Rule(plan->rules[1]), "c 195:1 rwm");

  // A second pass adds nothing.
  auto again = PlanFromConfigs(after, after);
  ASSERT_OK(again.status());
  EXPECT_TRUE(again->Empty());
}

TEST(HookPlanTest, RefusesMalformedAdditions) {
  const Json before = Json::parse(R"({"linux": {}})");
  auto plan = [&](const char* after) { return PlanFromConfigs(before, Json::parse(after)).status(); };
  EXPECT_THAT(plan(R"({"linux":{"devices":[{"path":"dev/x","type":"c","major":1,"minor":1}]}})").message(),
              HasSubstr("not absolute"));
  EXPECT_THAT(plan(R"({"linux":{"devices":[{"path":"/dev/../etc/x","type":"c","major":1,"minor":1}]}})").message(),
              HasSubstr("without .."));
  EXPECT_THAT(plan(R"({"linux":{"devices":[{"path":"/dev/x","type":"p","major":1,"minor":1}]}})").message(),
              HasSubstr("type \"p\""));
  EXPECT_THAT(plan(R"({"linux":{"devices":[{"path":"/dev/x","type":"c","major":-1,"minor":1}]}})").message(),
              HasSubstr("out of range"));
  EXPECT_THAT(plan(R"({"mounts":[{"source":"/a","destination":"/x/../../etc","options":["bind"]}]})").message(),
              HasSubstr("without .."));
  EXPECT_THAT(plan(R"({"mounts":[{"source":"tmpfs","destination":"/x","type":"tmpfs"}]})").message(),
              HasSubstr("absolute"));
  EXPECT_THAT(plan(R"({"mounts":[{"source":"/a","destination":"/x","type":"overlay"}]})").message(),
              HasSubstr("bind mounts only"));
  EXPECT_THAT(plan(R"({"hooks":{"createContainer":[{"path":"gpunode"}]}})").message(), HasSubstr("not absolute"));
  EXPECT_THAT(plan(R"({"linux":{"resources":{"devices":[{"allow":true,"type":"c","major":1,"access":"rwx"}]}}})").message(),
              HasSubstr("access \"rwx\""));
}

TEST(HookCgroupTest, ProcCgroupV1AndV2) {
  auto v1 = ParseProcCgroup("12:pids:/docker/abc\n4:devices:/docker/abc\n1:name=systemd:/docker/abc\n0::/docker/abc\n");
  ASSERT_OK(v1.status());
  EXPECT_EQ(v1->devices_v1.value_or(""), "/docker/abc");
  EXPECT_EQ(v1->unified.value_or(""), "/docker/abc");
  auto v2 = ParseProcCgroup("0::/system.slice/docker-abc.scope\n");
  ASSERT_OK(v2.status());
  EXPECT_FALSE(v2->devices_v1.has_value());
  EXPECT_EQ(v2->unified.value_or(""), "/system.slice/docker-abc.scope");
  auto joined = ParseProcCgroup("3:cpu,devices:/x\n");
  ASSERT_OK(joined.status());
  EXPECT_EQ(joined->devices_v1.value_or(""), "/x");
  EXPECT_THAT(ParseProcCgroup("4:devices:/docker/../../x\n").status().message(), HasSubstr(".."));
  EXPECT_THAT(ParseProcCgroup("garbage\n").status().message(), HasSubstr("malformed"));
}

TEST(HookCgroupTest, MountsAndDirectories) {
  const std::string mountinfo =
      "25 1 0:22 / /sys rw - sysfs sysfs rw\n"
      "30 25 0:26 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"
      "31 25 0:27 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n"
      "35 25 0:31 /kubepods /sys/fs/cgroup/devices rw shared:5 - cgroup cgroup rw,devices\n"
      "36 25 0:32 / /mnt/with\\040space rw - cgroup2 none rw\n";
  auto dev = FindMount(mountinfo, "cgroup", "devices");
  ASSERT_OK(dev.status());
  EXPECT_EQ(dev->root, "/kubepods");
  EXPECT_EQ(dev->mount_point, "/sys/fs/cgroup/devices");
  EXPECT_EQ(*CgroupDirectory(*dev, "/kubepods/pod1/c1"), "/sys/fs/cgroup/devices/pod1/c1");
  EXPECT_THAT(CgroupDirectory(*dev, "/kubepodsX/c1").status().message(), HasSubstr("not below"));
  auto unified = FindMount(mountinfo, "cgroup2");
  ASSERT_OK(unified.status());
  EXPECT_EQ(*CgroupDirectory(*unified, "/system.slice/docker-abc.scope"),
            "/sys/fs/cgroup/unified/system.slice/docker-abc.scope");
  EXPECT_EQ(*CgroupDirectory(*unified, "/"), "/sys/fs/cgroup/unified");
  EXPECT_EQ(FindMount(mountinfo, "cgroup", "memory").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(FindMount(mountinfo.substr(mountinfo.find("36 ")), "cgroup2")->mount_point, "/mnt/with space");
  // A line cut short after the "-" (no source or super options) is skipped (the fuzzer's find).
  EXPECT_FALSE(FindMount("40 25 0:40 / /x rw - cgroup2 none\n41 25 0:41 / /y rw - cgroup2\n", "cgroup2").ok());
  EXPECT_FALSE(FindMount("40 25 0:40 / /x rw - cgroup cgroup\n", "cgroup", "devices").ok());
}

TEST(HookCgroupTest, V1Rules) {
  EXPECT_EQ(CgroupV1Rule({.type = 'c', .major = 195, .minor = 7, .access = "rwm"}), "c 195:7 rwm");
  EXPECT_EQ(CgroupV1Rule({.type = 'c', .major = 511, .minor = -1, .access = "rw"}), "c 511:* rw");
}

// Runs a device filter the way the kernel would for the instructions PrependDeviceRules and
// runc-like programs use; returns r0, or -1 for an instruction it does not know.
int64_t RunFilter(const std::vector<BpfInsn>& prog, uint32_t type, uint32_t access, uint32_t major, uint32_t minor) {
  const uint32_t ctx[3] = {type | (access << 16), major, minor};
  uint64_t r[11] = {};
  for (size_t pc = 0, steps = 0; pc < prog.size() && steps < 10000; ++pc, ++steps) {
    const BpfInsn& i = prog[pc];
    const int dst = i.regs & 0x0f, src = i.regs >> 4;
    const uint8_t cls = BPF_CLASS(i.code);
    if (cls == BPF_LDX) {
      if (src != 1) return -1;
      if (i.off < 0 || i.off > 8) return -1;
      const auto* bytes = reinterpret_cast<const uint8_t*>(ctx);
      if (BPF_SIZE(i.code) == BPF_W) {
        uint32_t v = 0;
        std::memcpy(&v, bytes + i.off, sizeof v);
        r[dst] = v;
      } else if (BPF_SIZE(i.code) == BPF_H) {
        uint16_t v = 0;
        std::memcpy(&v, bytes + i.off, sizeof v);
        r[dst] = v;
      } else {
        return -1;
      }
    } else if (cls == BPF_ALU) {
      const uint32_t v = BPF_SRC(i.code) == BPF_K ? static_cast<uint32_t>(i.imm) : static_cast<uint32_t>(r[src]);
      uint32_t d = static_cast<uint32_t>(r[dst]);
      switch (BPF_OP(i.code)) {
        case BPF_MOV: d = v; break;
        case BPF_AND: d &= v; break;
        case BPF_RSH: d >>= v; break;
        default: return -1;
      }
      r[dst] = d;
    } else if (cls == BPF_JMP) {
      if (BPF_OP(i.code) == BPF_EXIT) return static_cast<int64_t>(r[0]);
      const uint64_t v = BPF_SRC(i.code) == BPF_K ? static_cast<uint64_t>(static_cast<int64_t>(i.imm)) : r[src];
      bool take = false;
      switch (BPF_OP(i.code)) {
        case BPF_JNE: take = r[dst] != v; break;
        case BPF_JEQ: take = r[dst] == v; break;
        case BPF_JA: take = true; break;
        default: return -1;
      }
      if (take) pc = static_cast<size_t>(static_cast<int64_t>(pc) + i.off);
    } else {
      return -1;
    }
  }
  return -1;
}

BpfInsn I(uint8_t code, uint8_t dst, uint8_t src, int16_t off, int32_t imm) {
  return BpfInsn{code, static_cast<uint8_t>(dst | (src << 4)), off, imm};
}

// What runc attaches for a container with /dev/null (c 1:3 rwm) allowed, in its shape: the loads,
// one block, then deny.
std::vector<BpfInsn> RuncLikeProgram() {
  return {
      I(BPF_LDX | BPF_MEM | BPF_H, 2, 1, 0, 0), I(BPF_LDX | BPF_MEM | BPF_W, 3, 1, 0, 0),
      I(BPF_ALU | BPF_RSH | BPF_K, 3, 0, 0, 16), I(BPF_LDX | BPF_MEM | BPF_W, 4, 1, 4, 0),
      I(BPF_LDX | BPF_MEM | BPF_W, 5, 1, 8, 0),
      I(BPF_JMP | BPF_JNE | BPF_K, 2, 0, 4, BPF_DEVCG_DEV_CHAR), I(BPF_JMP | BPF_JNE | BPF_K, 4, 0, 3, 1),
      I(BPF_JMP | BPF_JNE | BPF_K, 5, 0, 2, 3), I(BPF_ALU | BPF_MOV | BPF_K, 0, 0, 0, 1), I(BPF_JMP | BPF_EXIT, 0, 0, 0, 0),
      I(BPF_ALU | BPF_MOV | BPF_K, 0, 0, 0, 0), I(BPF_JMP | BPF_EXIT, 0, 0, 0, 0),
  };
}

constexpr uint32_t kChar = BPF_DEVCG_DEV_CHAR, kBlock = BPF_DEVCG_DEV_BLOCK;
constexpr uint32_t kRead = BPF_DEVCG_ACC_READ, kWrite = BPF_DEVCG_ACC_WRITE, kMknod = BPF_DEVCG_ACC_MKNOD;

TEST(HookBpfTest, OurRulesAllowTheirDevicesAndTheOldProgramDecidesTheRest) {
  const std::vector<BpfInsn> old = RuncLikeProgram();
  ASSERT_EQ(RunFilter(old, kChar, kRead, 1, 3), 1);
  ASSERT_EQ(RunFilter(old, kChar, kRead, 195, 0), 0);
  auto merged = PrependDeviceRules({{.type = 'c', .major = 195, .minor = 0, .access = "rwm"},
                                    {.type = 'c', .major = 511, .minor = -1, .access = "rw"}},
                                   old);
  ASSERT_OK(merged.status());
  // The old program's instructions follow ours unchanged.
  ASSERT_GE(merged->size(), old.size());
  EXPECT_EQ(std::memcmp(merged->data() + (merged->size() - old.size()), old.data(), old.size() * sizeof(BpfInsn)), 0);
  const auto& p = *merged;
  EXPECT_EQ(RunFilter(p, kChar, kRead | kWrite, 195, 0), 1) << "the requested GPU";
  EXPECT_EQ(RunFilter(p, kChar, kMknod, 195, 0), 1);
  EXPECT_EQ(RunFilter(p, kChar, kRead, 195, 1), 0) << "another GPU: the old program denies it";
  EXPECT_EQ(RunFilter(p, kBlock, kRead, 195, 0), 0) << "a block device with the same numbers";
  EXPECT_EQ(RunFilter(p, kChar, kRead, 1, 3), 1) << "what runc allowed stays allowed";
  EXPECT_EQ(RunFilter(p, kChar, kRead, 1, 5), 0);
  EXPECT_EQ(RunFilter(p, kChar, kRead | kWrite, 511, 42), 1) << "a wildcard minor";
  EXPECT_EQ(RunFilter(p, kChar, kMknod, 511, 42), 0) << "rw does not allow mknod";
}

TEST(HookBpfTest, RefusesWhatCannotBeLoadedAgain) {
  std::vector<BpfInsn> with_map = RuncLikeProgram();
  with_map.insert(with_map.begin(), {I(BPF_LD | BPF_IMM | BPF_DW, 1, BPF_PSEUDO_MAP_FD, 0, 7), I(0, 0, 0, 0, 0)});
  EXPECT_THAT(PrependDeviceRules({}, with_map).status().message(), HasSubstr("map"));
  std::vector<BpfInsn> with_call = RuncLikeProgram();
  with_call.insert(with_call.begin(), I(BPF_JMP | BPF_CALL, 0, 0, 0, 14));
  EXPECT_THAT(PrependDeviceRules({}, with_call).status().message(), HasSubstr("calls a function"));
  std::vector<BpfInsn> blinded = RuncLikeProgram();
  blinded[0] = I(BPF_ALU | BPF_MOV | BPF_K, 11, 0, 0, 5);
  EXPECT_THAT(PrependDeviceRules({}, blinded).status().message(), HasSubstr("register 11"));
  std::vector<BpfInsn> escaping = RuncLikeProgram();
  escaping[5].off = 100;
  EXPECT_THAT(PrependDeviceRules({}, escaping).status().message(), HasSubstr("jumps out"));
  EXPECT_FALSE(PrependDeviceRules({{.type = 'x', .major = 1, .minor = 1}}, RuncLikeProgram()).ok());
  EXPECT_FALSE(PrependDeviceRules({{.type = 'c', .major = 1LL << 32, .minor = 1}}, RuncLikeProgram()).ok());
  EXPECT_FALSE(PrependDeviceRules({{.type = 'c', .major = 1, .minor = 1, .access = "x"}}, RuncLikeProgram()).ok());
  EXPECT_FALSE(PrependDeviceRules({}, {}).ok());
}

// The kernel's own answer: a cgroup v2 directory with a runc-like filter attached, a child process
// in it opening /dev/null (1:3, allowed by the old filter) and /dev/zero (1:5, denied) before and
// after AllowDevicesCgroupV2 allows 1:5. Needs root and a cgroup2 mount (hybrid or unified).
class HookCgroupV2Test : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root";
    std::ifstream in("/proc/self/mountinfo");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto m = FindMount(text, "cgroup2");
    if (!m.ok()) GTEST_SKIP() << "no cgroup2 mount";
    dir_ = m->mount_point + "/gpunode-hook-test-" + std::to_string(::getpid());
    std::error_code ec;
    if (!fs::create_directory(dir_, ec)) GTEST_SKIP() << "cannot create " << dir_ << ": " << ec.message();
  }
  void TearDown() override {
    if (!dir_.empty()) ::rmdir(dir_.c_str());
  }
  // open(path) by a child process in the cgroup: 0 or the errno.
  int OpenInCgroup(const char* path) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      const std::string procs = dir_ + "/cgroup.procs";
      const int fd = ::open(procs.c_str(), O_WRONLY);
      if (fd < 0 || ::write(fd, "0", 1) != 1) ::_exit(200);
      ::close(fd);
      const int dev = ::open(path, O_RDONLY);
      ::_exit(dev >= 0 ? 0 : errno);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 201;
  }
  std::string dir_;
};

// Loads RuncLikeProgram() and attaches it to `dir` with `flags`; false (with the reason in
// *why) when this machine does not let us.
bool AttachRuncLike(const std::string& dir, uint32_t flags, std::string* why) {
  std::vector<BpfInsn> old = RuncLikeProgram();
  static char log[16384];
  bpf_attr attr{};
  attr.prog_type = BPF_PROG_TYPE_CGROUP_DEVICE;
  attr.insn_cnt = static_cast<uint32_t>(old.size());
  attr.insns = reinterpret_cast<uintptr_t>(old.data());
  const char license[] = "Apache";
  attr.license = reinterpret_cast<uintptr_t>(license);
  attr.log_level = 1;
  attr.log_buf = reinterpret_cast<uintptr_t>(log);
  attr.log_size = sizeof log;
  const long prog = ::syscall(SYS_bpf, BPF_PROG_LOAD, &attr, sizeof attr);
  if (prog < 0) {
    *why = std::string("BPF_PROG_LOAD: ") + std::strerror(errno) + " " + log;
    return false;
  }
  const int cg = ::open(dir.c_str(), O_DIRECTORY | O_RDONLY);
  attr = bpf_attr{};
  attr.target_fd = static_cast<uint32_t>(cg);
  attr.attach_bpf_fd = static_cast<uint32_t>(prog);
  attr.attach_type = BPF_CGROUP_DEVICE;
  attr.attach_flags = flags;
  const long rc = ::syscall(SYS_bpf, BPF_PROG_ATTACH, &attr, sizeof attr);
  if (rc != 0) *why = std::string("BPF_PROG_ATTACH: ") + std::strerror(errno);
  ::close(static_cast<int>(prog));
  ::close(cg);
  return rc == 0;
}

uint32_t AttachedPrograms(const std::string& dir) {
  uint32_t ids[8] = {};
  const int cg = ::open(dir.c_str(), O_DIRECTORY | O_RDONLY);
  bpf_attr attr{};
  attr.query.target_fd = static_cast<uint32_t>(cg);
  attr.query.attach_type = BPF_CGROUP_DEVICE;
  attr.query.prog_ids = reinterpret_cast<uintptr_t>(ids);
  attr.query.prog_cnt = 8;
  const long rc = ::syscall(SYS_bpf, BPF_PROG_QUERY, &attr, sizeof attr);
  ::close(cg);
  return rc == 0 ? attr.query.prog_cnt : 999;
}

TEST_F(HookCgroupV2Test, TheKernelRunsTheMergedFilter) {
  std::string why;
  if (!AttachRuncLike(dir_, BPF_F_ALLOW_MULTI, &why)) GTEST_SKIP() << why;  // as runc attaches
  EXPECT_EQ(OpenInCgroup("/dev/null"), 0);
  EXPECT_EQ(OpenInCgroup("/dev/zero"), EPERM) << "runc's filter denies 1:5";
  ASSERT_OK(AllowDevicesCgroupV2(dir_, {{.type = 'c', .major = 1, .minor = 5, .access = "rwm"}}));
  EXPECT_EQ(OpenInCgroup("/dev/zero"), 0) << "allowed by our rule";
  EXPECT_EQ(OpenInCgroup("/dev/null"), 0) << "still allowed by the old program's rule";
  EXPECT_EQ(OpenInCgroup("/dev/full"), EPERM) << "1:7 is named by neither";
  // A second pass replaces the (one) program again; the cgroup still has exactly one.
  ASSERT_OK(AllowDevicesCgroupV2(dir_, {{.type = 'c', .major = 1, .minor = 7, .access = "r"}}));
  EXPECT_EQ(OpenInCgroup("/dev/full"), 0);
  EXPECT_EQ(AttachedPrograms(dir_), 1u) << "the old program was detached";
}

// systemd and runc may both attach a filter (ALLOW_MULTI: every one must allow): each is replaced.
TEST_F(HookCgroupV2Test, EveryAttachedFilterGetsTheRules) {
  std::string why;
  if (!AttachRuncLike(dir_, BPF_F_ALLOW_MULTI, &why) || !AttachRuncLike(dir_, BPF_F_ALLOW_MULTI, &why)) GTEST_SKIP() << why;
  ASSERT_EQ(AttachedPrograms(dir_), 2u);
  EXPECT_EQ(OpenInCgroup("/dev/zero"), EPERM);
  ASSERT_OK(AllowDevicesCgroupV2(dir_, {{.type = 'c', .major = 1, .minor = 5, .access = "rwm"}}));
  EXPECT_EQ(OpenInCgroup("/dev/zero"), 0);
  EXPECT_EQ(OpenInCgroup("/dev/full"), EPERM);
  EXPECT_EQ(AttachedPrograms(dir_), 2u);
}

// A filter attached without ALLOW_MULTI (one program per cgroup): attaching with the same flags
// replaces it.
TEST_F(HookCgroupV2Test, ASingleFilterIsReplaced) {
  std::string why;
  if (!AttachRuncLike(dir_, 0, &why)) GTEST_SKIP() << why;
  EXPECT_EQ(OpenInCgroup("/dev/zero"), EPERM);
  ASSERT_OK(AllowDevicesCgroupV2(dir_, {{.type = 'c', .major = 1, .minor = 5, .access = "rwm"}}));
  EXPECT_EQ(OpenInCgroup("/dev/zero"), 0);
  EXPECT_EQ(OpenInCgroup("/dev/full"), EPERM);
  EXPECT_EQ(AttachedPrograms(dir_), 1u);
}

TEST_F(HookCgroupV2Test, NoFilterMeansNothingToDo) {
  EXPECT_OK(AllowDevicesCgroupV2(dir_, {{.type = 'c', .major = 1, .minor = 5, .access = "rwm"}}));
  EXPECT_EQ(OpenInCgroup("/dev/zero"), 0);
}

// The mount-namespace work on a root whose symlinks point out of it: a child process in a mount
// namespace of its own (so nothing it mounts outlives it) applies a plan to a temporary root and
// checks where everything landed.
TEST(HookMountTest, EverythingLandsInsideTheRoot) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (mknod, mounts, setns)";
  const fs::path tmp = fs::temp_directory_path() / ("gpunode-hook-mount-" + std::to_string(::getpid()));
  fs::remove_all(tmp);
  const fs::path root = tmp / "rootfs";
  fs::create_directories(root / "usr");
  fs::create_directories(root / "dev");
  fs::create_directories(tmp / "host");
  { std::ofstream(tmp / "host" / "libcuda.so.580") << "driver"; }
  { std::ofstream(tmp / "victim") << "host file"; }
  // The image's tricks: a folder that is an absolute symlink climbing out, a node path that is a
  // symlink to a host file.
  fs::create_directory_symlink("/../../../escape", root / "usr" / "lib64");
  fs::create_directories(root / "escape");  // where the link leads when resolved in the root
  fs::create_directory_symlink("/../../nowhere", root / "usr" / "dangling");
  fs::create_symlink("/../../../victim", root / "dev" / "nvidia0");

  InjectionPlan plan;
  plan.devices.push_back({.path = "/dev/nvidia0", .type = 'c', .major = 1, .minor = 3, .mode = 0666});
  plan.devices.push_back({.path = "/dev/nvidia-caps/nvidia-cap1", .type = 'c', .major = 1, .minor = 5, .mode = 0400});
  plan.mounts.push_back({.source = (tmp / "host" / "libcuda.so.580").string(),
                         .destination = "/usr/lib64/libcuda.so.580", .read_only = true});
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (::unshare(CLONE_NEWNS) != 0 || ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) ::_exit(100);
    Status st = ApplyInContainer(::getpid(), root.string(), plan, "{}");
    if (!st.ok()) {
      fprintf(stderr, "ApplyInContainer: %s\n", std::string(st.message()).c_str());
      ::_exit(101);
    }
    struct stat sb {};
    if (::lstat((root / "dev" / "nvidia0").c_str(), &sb) != 0 || !S_ISCHR(sb.st_mode) || sb.st_rdev != makedev(1, 3) ||
        (sb.st_mode & 07777) != 0666) ::_exit(102);
    if (::lstat((root / "dev" / "nvidia-caps" / "nvidia-cap1").c_str(), &sb) != 0 || (sb.st_mode & 07777) != 0400) ::_exit(103);
    std::ifstream in(root / "escape" / "libcuda.so.580");
    std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (content != "driver") ::_exit(104);
    const int w = ::open((root / "escape" / "libcuda.so.580").c_str(), O_WRONLY);
    if (w >= 0 || errno != EROFS) ::_exit(105);
    if (fs::exists(tmp / "escape") || fs::exists("/escape")) ::_exit(106);
    if (::lstat((tmp / "victim").c_str(), &sb) != 0 || !S_ISREG(sb.st_mode)) ::_exit(107);
    // A folder symlink to nothing (in the root) is refused, not created outside it.
    InjectionPlan dangling;
    dangling.devices.push_back({.path = "/usr/dangling/x", .type = 'c', .major = 1, .minor = 3});
    st = ApplyInContainer(::getpid(), root.string(), dangling, "{}");
    if (st.ok() || st.message().find("symlink to a folder the container does not have") == absl::string_view::npos) ::_exit(108);
    if (fs::exists(tmp / "nowhere") || fs::exists("/nowhere")) ::_exit(109);
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  // 101: ApplyInContainer failed; 102/103: nodes; 104/105: the mount (content, read-only);
  // 106: something was created outside the root; 107: the host file behind the symlink changed;
  // 108/109: the dangling folder link.
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_FALSE(fs::exists(tmp / "escape"));
  std::ifstream victim(tmp / "victim");
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(victim)), std::istreambuf_iterator<char>()), "host file");
  fs::remove_all(tmp);
}

TEST(HookMountTest, RefusesAFolderWhereAFileGoes) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (mounts, setns)";
  const fs::path tmp = fs::temp_directory_path() / ("gpunode-hook-dir-" + std::to_string(::getpid()));
  fs::remove_all(tmp);
  fs::create_directories(tmp / "rootfs" / "usr" / "lib" / "libcuda.so.1");
  { std::ofstream(tmp / "libcuda.so.1") << "driver"; }
  InjectionPlan plan;
  plan.mounts.push_back({.source = (tmp / "libcuda.so.1").string(), .destination = "/usr/lib/libcuda.so.1"});
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (::unshare(CLONE_NEWNS) != 0 || ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) ::_exit(100);
    Status st = ApplyInContainer(::getpid(), (tmp / "rootfs").string(), plan, "{}");
    ::_exit(!st.ok() && st.message().find("is a folder") != absl::string_view::npos ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  fs::remove_all(tmp);
}

}  // namespace
}  // namespace gpunode::container
