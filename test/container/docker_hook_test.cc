// `runtime configure --runtime docker` links /usr/bin/nvidia-container-runtime-hook (the name
// Docker looks for to offer --gpus) to gpunode: a link of that name to something else is backed up
// first, where the configs' backups go, as a link with the same target. A fixture host root.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/container/runtime_config.h"
#include "test/testing/status_matchers.h"
#include "test/testing/temp_dir_test.h"

namespace gpunode::container {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class DockerGpusHookTest : public gpunode::testing::TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    fs::create_directories(Path("host/usr/bin"));
    Executable("host/usr/bin/nvidia-container-runtime");  // gpunode's shim, installed
    Executable("host/usr/bin/nvidia-container-toolkit");  // NVIDIA's hook
    auto host = HostFs::Open(Path("host"));
    ASSERT_OK(host);
    host_.emplace(*host);
  }

  void Executable(const std::string& name) {
    std::ofstream(Path(name)) << "#!/bin/sh\n";
    fs::permissions(Path(name), fs::perms::owner_all);
  }

  // The backups of the hook link: <backup dir>/usr/bin/nvidia-container-runtime-hook.<time>.
  std::vector<fs::path> Backups() {
    std::vector<fs::path> out;
    if (!fs::exists(Path("backups/usr/bin"))) return out;
    for (const auto& e : fs::directory_iterator(Path("backups/usr/bin"))) out.push_back(e.path());
    return out;
  }

  StatusOr<std::string> Install(bool dry_run = false, const std::string& backup_dir = "") {
    return InstallDockerGpusHook(*host_, "/usr/bin/nvidia-container-runtime", dry_run,
                                 backup_dir.empty() ? Path("backups") : backup_dir);
  }

  const std::string hook_ = "host/usr/bin/nvidia-container-runtime-hook";
  std::optional<HostFs> host_;
};

TEST_F(DockerGpusHookTest, AForeignLinkIsBackedUpBeforeItIsReplaced) {
  fs::create_symlink("nvidia-container-toolkit", Path(hook_));  // as NVIDIA's packages link it

  auto dry = Install(/*dry_run=*/true);
  ASSERT_OK(dry) << dry.status();
  EXPECT_THAT(*dry, HasSubstr("would link /usr/bin/nvidia-container-runtime-hook -> /usr/bin/nvidia-container-runtime"));
  EXPECT_THAT(*dry, HasSubstr("the link there now (-> nvidia-container-toolkit) would be backed up"));
  EXPECT_EQ(fs::read_symlink(Path(hook_)), "nvidia-container-toolkit");
  EXPECT_TRUE(Backups().empty());

  auto r = Install();
  ASSERT_OK(r) << r.status();
  EXPECT_EQ(fs::read_symlink(Path(hook_)), "/usr/bin/nvidia-container-runtime");
  const std::vector<fs::path> backups = Backups();
  ASSERT_EQ(backups.size(), 1u);
  EXPECT_THAT(backups[0].filename().string(), ::testing::MatchesRegex(
                                                  R"(nvidia-container-runtime-hook\.[0-9]{8}T[0-9]{6}\.[0-9]{6}Z)"));
  ASSERT_TRUE(fs::is_symlink(backups[0]));
  EXPECT_EQ(fs::read_symlink(backups[0]), "nvidia-container-toolkit");
  EXPECT_THAT(*r, HasSubstr("the link that was there (-> nvidia-container-toolkit) is backed up as " +
                            backups[0].string()));
  EXPECT_THAT(*r, HasSubstr("to put it back: ln -sfn nvidia-container-toolkit " + Path(hook_)));

  // Again: gpunode's own link is not backed up a second time.
  auto again = Install();
  ASSERT_OK(again);
  EXPECT_THAT(*again, HasSubstr("already answers for gpunode"));
  EXPECT_EQ(Backups().size(), 1u);
}

TEST_F(DockerGpusHookTest, ADanglingLinkIsBackedUpToo) {
  fs::create_symlink("/opt/nvidia/toolkit/nvidia-container-runtime-hook", Path(hook_));
  auto r = Install();
  ASSERT_OK(r) << r.status();
  EXPECT_EQ(fs::read_symlink(Path(hook_)), "/usr/bin/nvidia-container-runtime");
  ASSERT_EQ(Backups().size(), 1u);
  EXPECT_EQ(fs::read_symlink(Backups()[0]), "/opt/nvidia/toolkit/nvidia-container-runtime-hook");
}

TEST_F(DockerGpusHookTest, WithoutAPlaceForTheBackupTheLinkStays) {
  fs::create_symlink("nvidia-container-toolkit", Path(hook_));
  // The backup folder cannot be made (a file is in the way): nothing is replaced.
  std::ofstream(Path("not-a-dir")) << "x";
  auto r = Install(false, Path("not-a-dir"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(fs::read_symlink(Path(hook_)), "nvidia-container-toolkit");
}

TEST_F(DockerGpusHookTest, NoLinkOrAProgramOfThatNameNeedNoBackup) {
  auto fresh = Install();
  ASSERT_OK(fresh) << fresh.status();
  EXPECT_THAT(*fresh, HasSubstr("linked "));
  EXPECT_THAT(*fresh, ::testing::Not(HasSubstr("backed up")));
  EXPECT_TRUE(Backups().empty());

  fs::remove(Path(hook_));
  Executable(hook_);  // NVIDIA's hook as a program: left alone, as before
  auto program = Install();
  ASSERT_OK(program);
  EXPECT_THAT(*program, HasSubstr("is another program"));
  EXPECT_FALSE(fs::is_symlink(Path(hook_)));
  EXPECT_TRUE(Backups().empty());
}

}  // namespace
}  // namespace gpunode::container
