// End-to-end tests of `gpunode runtime configure` (the real binary): files under a host root or
// named by --config, idempotence, dry-run, and refused inputs with exit code 3.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "test/testing/run_gpunode.h"
#include "test/testing/temp_dir_test.h"

namespace {

namespace fs = std::filesystem;
using ::gpunode::testing::Result;
using ::gpunode::testing::RunGpunode;
using ::testing::HasSubstr;

class RuntimeCliTest : public ::gpunode::testing::TempDirTest {
 protected:
  static std::string Fixture(const std::string& name) {
    return std::string(GPUNODE_SOURCE_DIR) + "/test/fixtures/runtime/" + name;
  }
};

TEST_F(RuntimeCliTest, ContainerdUnderHostRootThenAlreadyConfigured) {
  fs::create_directories(dir_ / "etc/containerd");
  fs::copy_file(Fixture("containerd-v2.toml"), dir_ / "etc/containerd/config.toml");
  Result r = RunGpunode("--host-root " + dir_.string() +
                        " runtime configure --runtime containerd --set-as-default --cdi");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("updated " + Path("etc/containerd/config.toml")));
  EXPECT_THAT(r.out, HasSubstr("(backup: " + Path("var/lib/gpunode/backups/etc/containerd/config.toml.")));
  std::string text = Read("etc/containerd/config.toml");
  EXPECT_THAT(text, HasSubstr("[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.nvidia]"));
  EXPECT_THAT(text, HasSubstr("enable_cdi = true"));
  EXPECT_THAT(text, HasSubstr("# systemd cgroups: required by kubelet's cgroupDriver=systemd"));

  Result again = RunGpunode("--host-root " + dir_.string() +
                            " runtime configure --runtime containerd --set-as-default --cdi");
  EXPECT_EQ(again.exit_code, 0) << again.out;
  EXPECT_THAT(again.out, HasSubstr("already configured"));
  EXPECT_EQ(Read("etc/containerd/config.toml"), text);
}

TEST_F(RuntimeCliTest, DockerDryRunPrintsDiffAndWritesNothing) {
  fs::copy_file(Fixture("daemon-runtimes.json"), Path("daemon.json"));
  std::string before = Read("daemon.json");
  Result r = RunGpunode("runtime configure --runtime docker --dry-run --cdi --config " +
                        Path("daemon.json"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("--- " + Path("daemon.json")));
  EXPECT_THAT(r.out, HasSubstr("+    \"nvidia\": {"));
  EXPECT_THAT(r.out, HasSubstr("+    \"cdi\": true"));
  EXPECT_EQ(Read("daemon.json"), before);
  EXPECT_FALSE(fs::exists(Path("daemon.json.gpunode.bak")));
}

TEST_F(RuntimeCliTest, CrioDropInCreatedAndJsonOutput) {
  Result r = RunGpunode("-o json --host-root " + dir_.string() +
                        " runtime configure --runtime crio --runtime-path /usr/bin/gpunode-shim");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["kind"], "RuntimeConfigureResult");
  EXPECT_EQ(doc["created"], true);
  EXPECT_EQ(doc["config"], Path("etc/crio/crio.conf.d/99-nvidia.toml"));
  EXPECT_THAT(Read("etc/crio/crio.conf.d/99-nvidia.toml"),
              HasSubstr("runtime_path = \"/usr/bin/gpunode-shim\""));
}

TEST_F(RuntimeCliTest, MalformedConfigExit3Untouched) {
  fs::copy_file(Fixture("containerd-malformed.toml"), Path("config.toml"));
  std::string before = Read("config.toml");
  Result r = RunGpunode("runtime configure --runtime containerd --config " + Path("config.toml"));
  EXPECT_EQ(r.exit_code, 3) << r.out;
  EXPECT_THAT(r.out, HasSubstr("parse " + Path("config.toml") + ": line 2"));
  EXPECT_EQ(Read("config.toml"), before);
}

TEST_F(RuntimeCliTest, UnwritableTargetExit3Untouched) {
  // A backup folder that cannot be made (a file holds its name) stops the write, for root too.
  fs::copy_file(Fixture("daemon-runtimes.json"), Path("daemon.json"));
  std::ofstream(Path("backups")) << "a file";
  std::string before = Read("daemon.json");
  Result r = RunGpunode("runtime configure --runtime docker --backup-dir " + Path("backups") + " --config " +
                        Path("daemon.json"));
  EXPECT_EQ(r.exit_code, 3) << r.out;
  EXPECT_THAT(r.out, HasSubstr("not a directory"));
  EXPECT_EQ(Read("daemon.json"), before);
}

// Issue 11, rows 2-3: a link that climbs out of the host root is refused with exit 3 and nothing
// is written; a link to an absolute path inside the root is edited there, the link kept.
TEST_F(RuntimeCliTest, SymlinksAreFollowedInsideTheHostRootOnly) {
  fs::create_directories(dir_ / "etc/docker");
  fs::create_directories(dir_ / "srv");
  std::ofstream(dir_ / "srv/daemon.json") << "{\"debug\": true}\n";
  fs::create_symlink("/srv/daemon.json", dir_ / "etc/docker/daemon.json");
  Result r = RunGpunode("--host-root " + dir_.string() + " runtime configure --runtime docker");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("updated " + Path("srv/daemon.json")));
  EXPECT_THAT(Read("srv/daemon.json"), HasSubstr("\"nvidia\""));
  EXPECT_TRUE(fs::is_symlink(dir_ / "etc/docker/daemon.json"));

  fs::remove(dir_ / "etc/docker/daemon.json");
  fs::create_symlink("../../../../../../../../../../etc/passwd", dir_ / "etc/docker/daemon.json");
  Result refused = RunGpunode("--host-root " + dir_.string() + " runtime configure --runtime docker");
  EXPECT_EQ(refused.exit_code, 3) << refused.out;
  EXPECT_THAT(refused.out, HasSubstr("points outside the host root"));
  EXPECT_TRUE(fs::is_symlink(dir_ / "etc/docker/daemon.json"));
}

TEST_F(RuntimeCliTest, RestorePutsBackTheFileBeforeTheLastChange) {
  fs::create_directories(dir_ / "etc/docker");
  std::ofstream(dir_ / "etc/docker/daemon.json") << "{\"debug\": true}\n";
  const std::string base = "--host-root " + dir_.string() + " runtime configure --runtime docker";
  ASSERT_EQ(RunGpunode(base + " --set-as-default").exit_code, 0);
  Result r = RunGpunode(base + " --restore");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("restored " + Path("etc/docker/daemon.json") + " from " +
                               Path("var/lib/gpunode/backups/etc/docker/daemon.json.")));
  EXPECT_EQ(Read("etc/docker/daemon.json"), "{\"debug\": true}\n");
  Result none = RunGpunode("--host-root " + dir_.string() + " runtime configure --runtime crio --restore");
  EXPECT_EQ(none.exit_code, 3) << none.out;
  EXPECT_THAT(none.out, HasSubstr("no backup of /etc/crio/crio.conf.d/99-nvidia.toml"));
}

TEST_F(RuntimeCliTest, BadFlags) {
  EXPECT_EQ(RunGpunode("runtime configure --runtime podman").exit_code, 3);
  Result r = RunGpunode("runtime configure --runtime containerd --runtime-path relative --config " +
                        Path("c.toml"));
  EXPECT_EQ(r.exit_code, 3) << r.out;
  EXPECT_THAT(r.out, HasSubstr("absolute path"));
}

}  // namespace
