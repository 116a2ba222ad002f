#include "src/base/host_fs.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"

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
  ASSERT_TRUE(fs.ok()) << fs.status();
  EXPECT_EQ(fs->Resolve("/proc/x"), root_.string() + "/proc/x");
  auto text = fs->ReadFile("/proc/driver/nvidia/version");
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "NVRM version: test\nsecond line\n");
  EXPECT_EQ(*fs->ReadLine("/sys/bus/pci/devices/0000:18:00.0/vendor"), "0x10de");
}

TEST_F(HostFsTest, SystemRootResolvesToTheSamePath) {
  auto fs = HostFs::Open("/");
  ASSERT_TRUE(fs.ok());
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
  ASSERT_TRUE(entries.ok());
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

}  // namespace
}  // namespace gpunode
