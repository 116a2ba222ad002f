// `gpunode oci-runtime`, the real binary, with a recording stand-in for runc (a shell script that
// writes its arguments and the bundle's config.json as it received them). The real runc runs the
// shim in test/e2e/oci_shim_test.sh.
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "test/testing/run_gpunode.h"
#include "test/testing/temp_dir_test.h"

namespace gpunode {
namespace {

namespace fs = std::filesystem;
using ::gpunode::testing::RunGpunode;
using ::gpunode::testing::RunShell;
using ::testing::HasSubstr;

class OciRuntimeCliTest : public gpunode::testing::TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    fake_runc_ = Path("fake-runc");
    std::ofstream(fake_runc_) << "#!/bin/sh\n"
                                 "echo \"$@\" > " << Path("runc-args") << "\n"
                                 "for a; do case \"$prev\" in --bundle|-b) cp \"$a/config.json\" "
                              << Path("runc-config.json") << ";; esac; prev=$a; done\n"
                                 "exit 0\n";
    fs::permissions(fake_runc_, fs::perms::owner_all);
    fs::create_directories(Path("bundle"));
    fs::create_directories(Path("cdi"));
    // GPU 0 and 1 backed by /dev/null and /dev/zero, so the shim can stat them on any machine.
    std::ofstream(Path("cdi/nvidia.yaml")) << R"(cdiVersion: "0.5.0"
kind: "nvidia.com/gpu"
devices:
  - name: "0"
    containerEdits:
      deviceNodes:
        - path: "/dev/nvidia0"
          hostPath: "/dev/null"
  - name: "1"
    containerEdits:
      deviceNodes:
        - path: "/dev/nvidia1"
          hostPath: "/dev/zero"
containerEdits:
  env:
    - "NVIDIA_VISIBLE_DEVICES=void"
  mounts:
    - hostPath: "/etc/hostname"
      containerPath: "/usr/lib/libcuda.so.1"
      options: ["ro", "nosuid", "nodev", "bind"]
)";
  }

  void WriteConfig(const std::string& visible) {
    nlohmann::json c = {{"ociVersion", "1.0.2"},
                        {"process", {{"args", {"sh"}}, {"env", {"PATH=/bin"}}}},
                        {"root", {{"path", "rootfs"}}}};
    if (!visible.empty()) c["process"]["env"].push_back("NVIDIA_VISIBLE_DEVICES=" + visible);
    std::ofstream(Path("bundle/config.json")) << c.dump();
  }

  std::string Shim(const std::string& runtime_args) {
    return "oci-runtime --runtime-path " + fake_runc_ + " --spec-dir " + Path("cdi") + " --no-generate " +
           runtime_args;
  }

  nlohmann::json ConfigSeenByRunc() { return nlohmann::json::parse(Read("runc-config.json")); }

  std::string fake_runc_;
};

TEST_F(OciRuntimeCliTest, CreateWithGpuOneInjectsItsNodeThenRunsRuncWithTheSameArguments) {
  WriteConfig("1");
  const std::string args = "--root /run/test --log " + Path("log.json") + " --log-format json create --bundle " +
                           Path("bundle") + " --pid-file " + Path("pid") + " ctr1";
  auto r = RunGpunode(Shim(args));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(Read("runc-args"), args + "\n");
  nlohmann::json c = ConfigSeenByRunc();
  ASSERT_EQ(c["linux"]["devices"].size(), 1u);
  EXPECT_EQ(c["linux"]["devices"][0]["path"], "/dev/nvidia1");
  EXPECT_EQ(c["linux"]["devices"][0]["major"], 1);  // /dev/zero
  EXPECT_EQ(c["linux"]["devices"][0]["minor"], 5);
  EXPECT_EQ(c["linux"]["resources"]["devices"][0]["access"], "rwm");
  EXPECT_EQ(c["mounts"][0]["destination"], "/usr/lib/libcuda.so.1");
  EXPECT_EQ(c["annotations"]["gpunode.io/injected-devices"], "nvidia.com/gpu=1");
  // Written back in place, with its mode.
  EXPECT_EQ(Read("bundle/config.json"), Read("runc-config.json"));
}

TEST_F(OciRuntimeCliTest, OtherCommandsAndContainersWithoutGpusPassStraightThrough) {
  WriteConfig("");
  const std::string before = Read("bundle/config.json");
  auto r = RunGpunode(Shim("create --bundle " + Path("bundle") + " plain"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(Read("bundle/config.json"), before);

  WriteConfig("void");
  const std::string void_before = Read("bundle/config.json");
  ASSERT_EQ(RunGpunode(Shim("create -b " + Path("bundle") + " v")).exit_code, 0);
  EXPECT_EQ(Read("bundle/config.json"), void_before);

  WriteConfig("all");
  const std::string all_before = Read("bundle/config.json");
  ASSERT_EQ(RunGpunode(Shim("--root /x state ctr1")).exit_code, 0);
  EXPECT_EQ(Read("runc-args"), "--root /x state ctr1\n");
  ASSERT_EQ(RunGpunode(Shim("-- delete --force ctr1")).exit_code, 0);
  EXPECT_EQ(Read("runc-args"), "delete --force ctr1\n");
  EXPECT_EQ(Read("bundle/config.json"), all_before);
}

TEST_F(OciRuntimeCliTest, TheBundleDefaultsToTheWorkingDirectoryAndRunCountsAsCreate) {
  WriteConfig("0");
  auto r = RunShell("cd " + Path("bundle") + " && " + std::string(GPUNODE_BIN_DIR) + "/gpunode " + Shim("run ctr1"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  nlohmann::json c = nlohmann::json::parse(Read("bundle/config.json"));
  EXPECT_EQ(c["linux"]["devices"][0]["path"], "/dev/nvidia0");
}

TEST_F(OciRuntimeCliTest, AnUnknownGpuFailsBeforeRuncWithTheReasonInRuncsLog) {
  WriteConfig("7");
  const std::string before = Read("bundle/config.json");
  auto r = RunGpunode(Shim("--log " + Path("log.json") + " --log-format json create --bundle " + Path("bundle") +
                           " c"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.out, HasSubstr("unresolvable CDI device nvidia.com/gpu=7"));
  EXPECT_THAT(r.out, HasSubstr("offer 0, 1"));
  EXPECT_FALSE(fs::exists(Path("runc-args")));
  EXPECT_EQ(Read("bundle/config.json"), before);
  nlohmann::json line = nlohmann::json::parse(Read("log.json"));
  EXPECT_EQ(line["level"], "error");
  EXPECT_THAT(line["msg"].get<std::string>(), HasSubstr("nvidia.com/gpu=7"));
}

// Issue 11, row 6: a config.json nested 100 000 levels deep is refused with the reason in runc's
// log (exit 1), not a SIGSEGV with an empty log.
TEST_F(OciRuntimeCliTest, ADeeplyNestedConfigIsRefusedWithTheReasonInRuncsLog) {
  std::ofstream(Path("bundle/config.json"))
      << "{\"process\": {\"env\": [\"NVIDIA_VISIBLE_DEVICES=0\"]}, \"x\": " << std::string(100000, '[')
      << std::string(100000, ']') << "}";
  auto r = RunGpunode(Shim("--log " + Path("log.json") + " --log-format json create --bundle " + Path("bundle") +
                           " c"));
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_FALSE(fs::exists(Path("runc-args")));
  nlohmann::json line = nlohmann::json::parse(Read("log.json"));
  EXPECT_THAT(line["msg"].get<std::string>(), HasSubstr("nested deeper than 128 levels"));
}

// Issue 11, row 7: another vendor's spec with a byte that is not UTF-8 does not stop GPU
// containers: that spec is skipped (and named if a device cannot be resolved), ours is used.
TEST_F(OciRuntimeCliTest, ASpecThatIsNotUtf8DoesNotStopGpuContainers) {
  std::ofstream(Path("cdi/other-vendor.yaml")) << "cdiVersion: \"0.5.0\"\nkind: \"vendor.com/x\"\n"
                                                  "devices:\n  - name: \"a\"\n    containerEdits:\n"
                                                  "      env: [\"NAME=caf\xe9\"]\n";
  WriteConfig("1");
  auto r = RunGpunode(Shim("create --bundle " + Path("bundle") + " c"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(ConfigSeenByRunc()["linux"]["devices"][0]["path"], "/dev/nvidia1");
  ::gpunode::testing::Result v = RunGpunode("cdi validate " + Path("cdi/other-vendor.yaml"));
  EXPECT_EQ(v.exit_code, 3) << v.out;
  EXPECT_THAT(v.out, HasSubstr("other-vendor.yaml:6: devices[0].containerEdits.env[0]: expected a string in UTF-8"));
}

// Issue 11, row 10: an image whose config.json already carries the injected-devices annotation
// still gets the GPU it asks for.
TEST_F(OciRuntimeCliTest, ThePreexistingAnnotationIsOnlyAHint) {
  nlohmann::json c = {{"ociVersion", "1.0.2"},
                      {"process", {{"args", {"sh"}}, {"env", {"PATH=/bin", "NVIDIA_VISIBLE_DEVICES=0"}}}},
                      {"annotations", {{"gpunode.io/injected-devices", "nvidia.com/gpu=0"}}},
                      {"root", {{"path", "rootfs"}}}};
  std::ofstream(Path("bundle/config.json")) << c.dump();
  auto r = RunGpunode(Shim("create --bundle " + Path("bundle") + " c"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  nlohmann::json seen = ConfigSeenByRunc();
  ASSERT_EQ(seen["linux"]["devices"].size(), 1u);
  EXPECT_EQ(seen["linux"]["devices"][0]["path"], "/dev/nvidia0");
  // Run twice on one bundle: the second pass adds nothing.
  ASSERT_EQ(RunGpunode(Shim("create --bundle " + Path("bundle") + " c")).exit_code, 0);
  EXPECT_EQ(ConfigSeenByRunc(), seen);
}

TEST_F(OciRuntimeCliTest, AMissingRuntimeOrOneThatIsGpunodeItselfIsRefused) {
  WriteConfig("0");
  auto missing = RunGpunode("oci-runtime --runtime-path /nonexistent/runc state x");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.out, HasSubstr("\"/nonexistent/runc\" is not an executable file"));

  auto self = RunGpunode("oci-runtime --runtime-path " + std::string(GPUNODE_BIN_DIR) + "/gpunode state x");
  EXPECT_EQ(self.exit_code, 1);
  EXPECT_THAT(self.out, HasSubstr("is gpunode itself"));

  auto no_value = RunGpunode("oci-runtime --runtime-path");
  EXPECT_EQ(no_value.exit_code, 3);
}

TEST_F(OciRuntimeCliTest, InstalledAsNvidiaContainerRuntimeItTakesItsSettingsFromTheEnvironment) {
  WriteConfig("0,1");
  fs::create_symlink(fs::path(GPUNODE_BIN_DIR) / "gpunode", Path("nvidia-container-runtime"));
  auto r = RunShell("GPUNODE_RUNTIME_PATH=" + fake_runc_ + " GPUNODE_CDI_SPEC_DIRS=" +
                      Path("cdi") + " GPUNODE_OCI_LOG=" + Path("debug.log") + " " + Path("nvidia-container-runtime") +
                      " create --bundle " + Path("bundle") + " ctr");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  nlohmann::json c = ConfigSeenByRunc();
  ASSERT_EQ(c["linux"]["devices"].size(), 2u);
  EXPECT_THAT(Read("debug.log"), HasSubstr("injected nvidia.com/gpu=0, nvidia.com/gpu=1"));
}

TEST_F(OciRuntimeCliTest, DockersGpusHookIsRemovedWhenTheShimIsTheRuntime) {
  WriteConfig("1");
  nlohmann::json c = nlohmann::json::parse(Read("bundle/config.json"));
  c["hooks"]["prestart"] = {{{"path", "/usr/bin/nvidia-container-runtime-hook"}, {"args", {"nvidia-container-runtime-hook", "prestart"}}}};
  std::ofstream(Path("bundle/config.json")) << c.dump();
  auto r = RunGpunode("oci-runtime --debug-log " + Path("debug.log") + " --runtime-path " + fake_runc_ + " --spec-dir " +
                      Path("cdi") + " --no-generate create --bundle " + Path("bundle") + " ctr");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  nlohmann::json seen = ConfigSeenByRunc();
  EXPECT_TRUE(seen["hooks"]["prestart"].empty()) << seen["hooks"].dump();
  EXPECT_THAT(Read("debug.log"), HasSubstr("removed nvidia-container-runtime-hook"));
}

TEST_F(OciRuntimeCliTest, AsNvidiaContainerRuntimeHookItStopsTheContainerWithTheFix) {
  fs::create_symlink(fs::path(GPUNODE_BIN_DIR) / "gpunode", Path("nvidia-container-runtime-hook"));
  auto pre = RunShell("echo '{\"id\":\"0123456789abcdef\",\"bundle\":\"/x\"}' | " + Path("nvidia-container-runtime-hook") + " prestart");
  EXPECT_EQ(pre.exit_code, 1);
  EXPECT_THAT(pre.out, HasSubstr("container 0123456789ab asks for GPUs"));
  EXPECT_THAT(pre.out, HasSubstr("gpunode runtime configure --runtime docker --set-as-default"));
  auto post = RunShell("echo '{}' | " + Path("nvidia-container-runtime-hook") + " poststop");
  EXPECT_EQ(post.exit_code, 0) << post.out;
  auto version = RunShell(Path("nvidia-container-runtime-hook") + " --version");
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_THAT(version.out, HasSubstr("answering as nvidia-container-runtime-hook"));
}

TEST_F(OciRuntimeCliTest, HelpTeachesAndTheCommandIsListed) {
  auto help = RunGpunode("oci-runtime --help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_THAT(help.out, HasSubstr("NVIDIA_VISIBLE_DEVICES=all"));
  EXPECT_THAT(help.out, HasSubstr("--runtime-path"));
  auto top = RunGpunode("--help");
  EXPECT_EQ(top.exit_code, 0);
  EXPECT_THAT(top.out, HasSubstr("oci-runtime"));
}

}  // namespace
}  // namespace gpunode
