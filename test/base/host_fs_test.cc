#include "src/base/host_fs.h"

#include <climits>
#include <sstream>
#include <algorithm>
#include <sys/wait.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/status_matchers.h"

namespace gpunode {
namespace {

class HostFsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::filesystem::temp_directory_path() /
            ("gpunode-hostfs-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(root_ / "proc/driver/nvidia");
    std::ofstream(root_ / "proc/driver/nvidia/version") << "NVRM version: test\nsecond line\n";
    std::filesystem::create_directories(root_ / "sys/bus/pci/devices/0000:18:00.0");
    std::ofstream(root_ / "sys/bus/pci/devices/0000:18:00.0/vendor") << "0x10de\n";
    std::filesystem::create_symlink("../../../bus/pci/drivers/nvidia",
                                    root_ / "sys/bus/pci/devices/0000:18:00.0/driver");
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  std::filesystem::path root_;
};

TEST_F(HostFsTest, ResolvesHostPathsBelowTheRoot) {
  auto fs = HostFs::Open(root_.string());
  ASSERT_OK(fs) << fs.status();
  EXPECT_EQ(fs->Resolve("/proc/x"), root_.string() + "/proc/x");
  auto text = fs->ReadFile("/proc/driver/nvidia/version");
  ASSERT_OK(text) << text.status();
  EXPECT_EQ(*text, "NVRM version: test\nsecond line\n");
  EXPECT_EQ(*fs->ReadLine("/sys/bus/pci/devices/0000:18:00.0/vendor"), "0x10de");
}

TEST_F(HostFsTest, SystemRootResolvesToTheSamePath) {
  auto fs = HostFs::Open("/");
  ASSERT_OK(fs);
  EXPECT_TRUE(fs->is_system_root());
  EXPECT_EQ(fs->Resolve("/proc/x"), "/proc/x");
}

TEST_F(HostFsTest, MissingFilesAreNotFoundAndNameTheHostPath) {
  auto fs = HostFs::Open(root_.string());
  auto text = fs->ReadFile("/proc/driver/nvidia/gpus/x/information");
  EXPECT_EQ(text.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(text.status().message().find("read /proc/driver/nvidia/gpus/x/information"), absl::string_view::npos)
      << text.status();
}

TEST_F(HostFsTest, ListsDirectoriesSortedAndReadsLinks) {
  auto fs = HostFs::Open(root_.string());
  auto entries = fs->ListDir("/sys/bus/pci/devices/0000:18:00.0");
  ASSERT_OK(entries);
  EXPECT_EQ(*entries, (std::vector<std::string>{"driver", "vendor"}));
  EXPECT_EQ(*fs->ReadLink("/sys/bus/pci/devices/0000:18:00.0/driver"), "../../../bus/pci/drivers/nvidia");
  EXPECT_EQ(fs->Stat("/sys/bus/pci/devices/0000:18:00.0/driver")->type, FileType::kSymlink);
}

TEST_F(HostFsTest, RefusesARootThatDoesNotExistOrIsAFile) {
  auto missing = HostFs::Open((root_ / "nope").string());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("--host-root"), absl::string_view::npos);
  auto file = HostFs::Open((root_ / "proc/driver/nvidia/version").string());
  EXPECT_EQ(file.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(HostFsTest, RefusesFilesLargerThanTheLimit) {
  auto fs = HostFs::Open(root_.string());
  auto text = fs->ReadFile("/proc/driver/nvidia/version", 4);
  EXPECT_EQ(text.status().code(), absl::StatusCode::kResourceExhausted);
}

std::string ReadAll(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> Entries(const std::filesystem::path& dir) {
  std::vector<std::string> out;
  for (auto& e : std::filesystem::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

// Issue 11, row 1: /var/run -> /run (every Debian/Ubuntu host) is followed inside the root, for
// reads and writes: the spec lands in <root>/run, never in this machine's /run.
TEST_F(HostFsTest, AbsoluteSymlinksAreFollowedInsideTheRoot) {
  std::filesystem::create_directories(root_ / "var");
  std::filesystem::create_directories(root_ / "run/cdi");
  std::filesystem::create_symlink("/run", root_ / "var/run");
  std::ofstream(root_ / "run/cdi/old.yaml") << "old";
  auto fs = HostFs::Open(root_.string());
  ASSERT_OK(fs);
  EXPECT_EQ(*fs->RealPath("/var/run/cdi/nvidia.yaml"), "/run/cdi/nvidia.yaml");
  EXPECT_EQ(fs->Resolve("/var/run/cdi/old.yaml"), (root_ / "run/cdi/old.yaml").string());
  EXPECT_EQ(*fs->ReadFile("/var/run/cdi/old.yaml"), "old");
  auto written = fs->WriteFileAtomically("/var/run/cdi/nvidia.yaml", "spec");
  ASSERT_OK(written) << written.status();
  EXPECT_EQ(*written, "/run/cdi/nvidia.yaml");
  EXPECT_EQ(ReadAll(root_ / "run/cdi/nvidia.yaml"), "spec");
  EXPECT_FALSE(std::filesystem::exists("/run/cdi/nvidia.yaml") &&
               ReadAll("/run/cdi/nvidia.yaml") == "spec");
  // ".." stops at the root for reads; a write through a link that climbs out is refused.
  std::filesystem::create_symlink("../../../../../../../../etc", root_ / "run/up");
  EXPECT_EQ(*fs->RealPath("/run/up/hostname"), "/etc/hostname");
  auto refused = fs->WriteFileAtomically("/run/up/x", "x");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused.status().message()), ::testing::HasSubstr("outside the host root"));
  EXPECT_FALSE(std::filesystem::exists(root_ / "etc/x"));
}

TEST_F(HostFsTest, SymlinkMakesOrReplacesALinkNeverAFileAndStaysInside) {
  auto fs = HostFs::Open(root_.string());
  ASSERT_OK(fs);
  ASSERT_OK(fs->Symlink("/usr/bin/gpunode", "/usr/bin/nvidia-container-runtime-hook"));
  EXPECT_EQ(std::filesystem::read_symlink(root_ / "usr/bin/nvidia-container-runtime-hook"), "/usr/bin/gpunode");
  ASSERT_OK(fs->Symlink("/opt/gpunode", "/usr/bin/nvidia-container-runtime-hook")) << "a link is replaced";
  EXPECT_EQ(std::filesystem::read_symlink(root_ / "usr/bin/nvidia-container-runtime-hook"), "/opt/gpunode");
  std::ofstream(root_ / "usr/bin/real-hook") << "ELF";
  auto kept = fs->Symlink("/usr/bin/gpunode", "/usr/bin/real-hook");
  EXPECT_EQ(kept.code(), absl::StatusCode::kAlreadyExists) << kept;
  EXPECT_EQ(ReadAll(root_ / "usr/bin/real-hook"), "ELF") << "a program is never replaced";
  std::filesystem::create_symlink("../../../../../../../../tmp", root_ / "usr/up");
  auto out = fs->Symlink("/x", "/usr/up/escape");
  EXPECT_EQ(out.code(), absl::StatusCode::kFailedPrecondition) << out;
  for (const auto& e : std::filesystem::directory_iterator(root_ / "usr/bin")) {
    EXPECT_EQ(e.path().filename().string().find(".gpunode-tmp"), std::string::npos) << e.path();
  }
}

// Reads resolve in one openat2(RESOLVE_IN_ROOT) call where the kernel has it, and by the walk of
// RealPath where it has not: both give the same answers on a root full of links that try to leave.
TEST_F(HostFsTest, ReadsAnswerTheSameWithAndWithoutOpenat2) {
  std::filesystem::create_directories(root_ / "var");
  std::filesystem::create_directories(root_ / "run/cdi");
  std::filesystem::create_directories(root_ / "etc");
  std::filesystem::create_symlink("/run", root_ / "var/run");
  std::ofstream(root_ / "run/cdi/spec.yaml") << "inside";
  std::ofstream(root_ / "etc/hostname") << "root's own";
  std::filesystem::create_symlink("../../../../../../../../etc", root_ / "run/up");  // ".." stops at the root
  std::filesystem::create_symlink("/etc/hostname", root_ / "run/abs");              // restarts at the root
  std::filesystem::create_symlink("/nowhere", root_ / "run/dangling");
  std::filesystem::create_symlink("/loop2", root_ / "loop1");
  std::filesystem::create_symlink("/loop1", root_ / "loop2");
  auto fs = HostFs::Open(root_.string());
  ASSERT_OK(fs);
  auto answers = [&] {
    std::vector<std::string> out;
    auto text = [](const auto& s) { return s.ok() ? std::string(*s) : std::string(s.status().message()); };
    out.push_back(text(fs->ReadFile("/var/run/cdi/spec.yaml")));
    out.push_back(text(fs->ReadFile("/run/up/hostname")));
    out.push_back(text(fs->ReadFile("/var/run/abs")));
    out.push_back(text(fs->ReadFile("/run/dangling")));
    // (the kernel says ELOOP, the walk ENOENT of the lexical path: both refuse)
    out.push_back(fs->ReadFile("/loop1/x").ok() ? "read" : "refused");
    out.push_back(text(fs->ReadLink("/var/run/abs")));
    out.push_back(text(fs->ReadLink("/run/dangling")));
    out.push_back(fs->Exists("/run/dangling") ? "exists" : "absent");
    out.push_back(fs->Exists("/run/up/passwd") ? "exists" : "absent");
    out.push_back(fs->Exists("/var/run/up/hostname") ? "exists" : "absent");
    auto st = fs->Stat("/var/run/abs");
    out.push_back(st.ok() && st->type == FileType::kSymlink ? "link" : "not a link");
    st = fs->Stat("/var/run/up");
    out.push_back(st.ok() && st->type == FileType::kSymlink ? "link" : "not a link");
    auto dir = fs->ListDir("/var/run/up");
    out.push_back(dir.ok() ? absl::StrJoin(*dir, ",") : std::string(dir.status().message()));
    out.push_back(text(fs->ReadPrefix("/var/run/cdi/spec.yaml", 3)));
    return out;
  };
  const std::vector<std::string> with = answers();
  host_fs_internal::SetOpenat2(false);
  const std::vector<std::string> without = answers();
  host_fs_internal::SetOpenat2(true);
  EXPECT_EQ(with, without);
  EXPECT_EQ(with[0], "inside");
  EXPECT_EQ(with[1], "root's own") << "never this machine's /etc/hostname";
  EXPECT_EQ(with[2], "root's own");
  EXPECT_THAT(with[3], ::testing::HasSubstr("read /run/dangling"));
  EXPECT_EQ(with[4], "refused");
  EXPECT_EQ(with[5], "/etc/hostname");
  EXPECT_EQ(with[7], "exists");
  EXPECT_EQ(with[8], "absent");
  EXPECT_EQ(with[9], "exists");
  EXPECT_EQ(with[12], "hostname");
  EXPECT_EQ(with[13], "ins");
}

TEST_F(HostFsTest, LinkLoopsAreAnErrorNotAHang) {
  std::filesystem::create_symlink("/b", root_ / "a");
  std::filesystem::create_symlink("/a", root_ / "b");
  auto fs = HostFs::Open(root_.string());
  EXPECT_EQ(fs->RealPath("/a/x").status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(fs->ReadFile("/a/x").ok());
  EXPECT_FALSE(fs->WriteFileAtomically("/a/x", "x").ok());
}

// A symlinked file is written where it points; the link stays a link; mode and owner are kept.
TEST_F(HostFsTest, WriteKeepsTheLinkModeAndOwner) {
  std::filesystem::create_directories(root_ / "etc/docker");
  std::ofstream(root_ / "etc/docker/real.json") << "{}";
  ASSERT_EQ(::chmod((root_ / "etc/docker/real.json").c_str(), 0640), 0);
  if (::geteuid() == 0) {
    ASSERT_EQ(::chown((root_ / "etc/docker/real.json").c_str(), 1234, 5678), 0);
  }
  std::filesystem::create_symlink("/etc/docker/real.json", root_ / "etc/docker/daemon.json");
  auto fs = HostFs::Open(root_.string());
  auto written = fs->WriteFileAtomically("/etc/docker/daemon.json", "{\"a\": 1}");
  ASSERT_OK(written) << written.status();
  EXPECT_EQ(*written, "/etc/docker/real.json");
  EXPECT_TRUE(std::filesystem::is_symlink(root_ / "etc/docker/daemon.json"));
  EXPECT_EQ(ReadAll(root_ / "etc/docker/real.json"), "{\"a\": 1}");
  struct stat st;
  ASSERT_EQ(::stat((root_ / "etc/docker/real.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0640u);
  if (::geteuid() == 0) {
    EXPECT_EQ(st.st_uid, 1234u);
    EXPECT_EQ(st.st_gid, 5678u);
  }
  EXPECT_EQ(Entries(root_ / "etc/docker"), (std::vector<std::string>{"daemon.json", "real.json"}));
}

TEST_F(HostFsTest, AFailedWriteLeavesTheOldFileAndNoTemporary) {
  std::filesystem::create_directories(root_ / "etc");
  std::ofstream(root_ / "etc/a.yaml") << "old\n";
  auto fs = HostFs::Open(root_.string());
  for (const char* step : {"temp-written", "before-rename"}) {
    WriteOptions o;
    o.test_hook = [step](absl::string_view at) {
      return at == step ? absl::InternalError("injected") : absl::OkStatus();
    };
    auto r = fs->WriteFileAtomically("/etc/a.yaml", "new\n", o);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInternal) << step;
    EXPECT_EQ(ReadAll(root_ / "etc/a.yaml"), "old\n");
    EXPECT_EQ(Entries(root_ / "etc"), (std::vector<std::string>{"a.yaml"})) << step;
  }
  // A target that cannot be replaced (a directory) fails the same way.
  std::filesystem::create_directories(root_ / "etc/taken/x");
  EXPECT_EQ(fs->WriteFileAtomically("/etc/taken", "new").status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(std::filesystem::is_directory(root_ / "etc/taken/x"));
}

// Issue 11, row 4 (kill -9 during a write): in a bounded loop, a child rewrites a drop-in while
// the parent kills it at random moments. The file is always the old or the new text with its
// mode, the drop-in folder never holds anything else, and the next write removes stale temps.
TEST_F(HostFsTest, KillDuringWriteLeavesOldOrNewAndNothingInTheDropInFolder) {
  const auto d = root_ / "etc/crio/crio.conf.d";
  std::filesystem::create_directories(d);
  const std::string old_text(64 << 10, 'o');
  const std::string new_text(64 << 10, 'n');
  std::ofstream(d / "99-nvidia.toml") << old_text;
  ASSERT_EQ(::chmod((d / "99-nvidia.toml").c_str(), 0600), 0);
  auto fs = HostFs::Open(root_.string());
  ASSERT_OK(fs);
  for (int round = 0; round < 40; ++round) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      for (int i = 0;; ++i) {
        (void)fs->WriteFileAtomically("/etc/crio/crio.conf.d/99-nvidia.toml", i % 2 ? old_text : new_text);
      }
    }
    ::usleep(static_cast<useconds_t>(200 + (round * 997) % 3000));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    const std::string now = ReadAll(d / "99-nvidia.toml");
    ASSERT_TRUE(now == old_text || now == new_text) << "round " << round << ": " << now.size() << " bytes";
    struct stat st;
    ASSERT_EQ(::stat((d / "99-nvidia.toml").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0600u);
    ASSERT_EQ(Entries(d), (std::vector<std::string>{"99-nvidia.toml"})) << "round " << round;
  }
  ASSERT_OK(fs->WriteFileAtomically("/etc/crio/crio.conf.d/99-nvidia.toml", "final"));
  EXPECT_EQ(Entries(root_ / "etc/crio"), (std::vector<std::string>{"crio.conf.d"}));
}

TEST_F(HostFsTest, SubAndMakeDirsStayInsideTheRoot) {
  std::filesystem::create_directories(root_ / "run/nvidia/driver/usr/lib");
  std::filesystem::create_symlink("/run/nvidia/driver", root_ / "driver");
  auto fs = HostFs::Open(root_.string());
  auto sub = fs->Sub("/driver");
  ASSERT_OK(sub) << sub.status();
  EXPECT_EQ(sub->root(), (root_ / "run/nvidia/driver").string());
  std::filesystem::create_symlink("/usr/lib", root_ / "run/nvidia/driver/lib");
  EXPECT_EQ(*sub->RealPath("/lib/libcuda.so.1"), "/usr/lib/libcuda.so.1");
  ASSERT_OK(fs->MakeDirs("/var/lib/gpunode/backups"));
  EXPECT_TRUE(std::filesystem::is_directory(root_ / "var/lib/gpunode/backups"));
}

// A file the user names (`--output x.json`) is relative to the working directory, as for the
// kernel: HostFs::Local() resolves it there, not at "/".
TEST_F(HostFsTest, LocalRelativePathsAreRelativeToTheWorkingDirectory) {
  char old_cwd[PATH_MAX];
  ASSERT_NE(::getcwd(old_cwd, sizeof old_cwd), nullptr);
  ASSERT_EQ(::chdir(root_.c_str()), 0);
  auto written = HostFs::Local().WriteFileAtomically("out/rel.json", "{}");
  ASSERT_EQ(::chdir(old_cwd), 0);
  ASSERT_OK(written) << written.status();
  EXPECT_EQ(*written, (std::filesystem::canonical(root_) / "out/rel.json").string());
  EXPECT_EQ(ReadAll(root_ / "out/rel.json"), "{}");
}

}  // namespace
}  // namespace gpunode
