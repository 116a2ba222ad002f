// `gpunode oci-runtime`, the real binary, with a recording stand-in for runc (a shell script that
// writes its arguments and the bundle's config.json as it received them). The real runc runs the
// shim in test/e2e/oci_shim_test.sh.
#include <sys/stat.h>
#include <unistd.h>

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
    // NVIDIA's config file is looked for below XDG_CONFIG_HOME: this test's, not the machine's.
    ::setenv("XDG_CONFIG_HOME", Path("xdg").c_str(), 1);
    for (const char* v : {"NVIDIA_CTK_CONFIG_FILE_PATH", "GPUNODE_ACCEPT_ENVVAR_WHEN_UNPRIVILEGED",
                          "GPUNODE_ACCEPT_VOLUME_MOUNTS", "GPUNODE_OCI_LOG"}) {
      ::unsetenv(v);
    }
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

  void TearDown() override {
    ::unsetenv("XDG_CONFIG_HOME");
    TempDirTest::TearDown();
  }

  // A container of uid 1000 whose bounding set has CAP_SYS_ADMIN when `privileged` (whose
  // NVIDIA_VISIBLE_DEVICES the shim then believes), else the engines' default capabilities.
  static nlohmann::json Config(const std::string& visible, bool privileged) {
    nlohmann::json caps = {"CAP_CHOWN", "CAP_KILL", "CAP_NET_BIND_SERVICE"};
    if (privileged) caps.push_back("CAP_SYS_ADMIN");
    nlohmann::json c = {{"ociVersion", "1.0.2"},
                        {"process",
                         {{"user", {{"uid", 1000}, {"gid", 1000}}},
                          {"args", {"sh"}},
                          {"env", {"PATH=/bin"}},
                          {"capabilities", {{"bounding", caps}, {"effective", caps}}}}},
                        {"root", {{"path", "rootfs"}}}};
    if (!visible.empty()) c["process"]["env"].push_back("NVIDIA_VISIBLE_DEVICES=" + visible);
    return c;
  }
  void WriteConfig(const std::string& visible, bool privileged = true) {
    std::ofstream(Path("bundle/config.json")) << Config(visible, privileged).dump();
  }
  void WriteConfigJson(const nlohmann::json& c) { std::ofstream(Path("bundle/config.json")) << c.dump(); }

  void WriteToolkitConfig(const std::string& text) {
    fs::create_directories(Path("xdg/nvidia-container-runtime"));
    std::ofstream(Path("xdg/nvidia-container-runtime/config.toml")) << text;
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
  nlohmann::json c = Config("0", /*privileged=*/true);
  c["annotations"] = {{"gpunode.io/injected-devices", "nvidia.com/gpu=0"}};
  WriteConfigJson(c);
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

// Docker's --gpus: an unprivileged container, Docker's hook and the variable Docker appended. The
// hook says the request is the engine user's: it is used, and the hook removed.
TEST_F(OciRuntimeCliTest, DockersGpusHookIsRemovedWhenTheShimIsTheRuntime) {
  WriteConfig("1", /*privileged=*/false);
  nlohmann::json c = nlohmann::json::parse(Read("bundle/config.json"));
  // As moby writes it: its env is dockerd's environment.
  c["hooks"]["prestart"] = {{{"path", "/usr/bin/nvidia-container-runtime-hook"},
                             {"args", {"nvidia-container-runtime-hook", "prestart"}},
                             {"env", {"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}}}};
  std::ofstream(Path("bundle/config.json")) << c.dump();
  auto r = RunGpunode("oci-runtime --debug-log " + Path("debug.log") + " --runtime-path " + fake_runc_ + " --spec-dir " +
                      Path("cdi") + " --no-generate create --bundle " + Path("bundle") + " ctr");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  nlohmann::json seen = ConfigSeenByRunc();
  EXPECT_TRUE(seen["hooks"]["prestart"].empty()) << seen["hooks"].dump();
  ASSERT_EQ(seen["linux"]["devices"].size(), 1u);
  EXPECT_EQ(seen["linux"]["devices"][0]["path"], "/dev/nvidia1");
  EXPECT_THAT(Read("debug.log"), HasSubstr("NVIDIA_VISIBLE_DEVICES=1 (docker run --gpus) -> injected nvidia.com/gpu=1"));
  EXPECT_THAT(Read("debug.log"), HasSubstr("removed nvidia-container-runtime-hook"));
}

// As Docker's hook with runc as the runtime it injects itself (test/e2e/docker_gpus_test.sh does it
// in real containers); here what it decides before touching any container.
TEST_F(OciRuntimeCliTest, AsNvidiaContainerRuntimeHookItActsOnlyOnARequest) {
  fs::create_symlink(fs::path(GPUNODE_BIN_DIR) / "gpunode", Path("nvidia-container-runtime-hook"));
  const std::string hook = "GPUNODE_OCI_LOG=" + Path("hook.log") + " GPUNODE_CDI_SPEC_DIRS=" + Path("cdi") + " " +
                           Path("nvidia-container-runtime-hook");
  auto bad = RunShell("echo '{\"id\":\"0123456789abcdef\",\"bundle\":\"/x\"}' | " + hook + " prestart");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_THAT(bad.out, HasSubstr("nvidia-container-runtime-hook (gpunode): error: OCI state on stdin: no integer \"pid\""));

  std::ofstream(Path("state.json")) << nlohmann::json{{"id", "c1"}, {"pid", ::getpid()}, {"bundle", Path("bundle")}}.dump();
  WriteConfig("");  // no NVIDIA_VISIBLE_DEVICES: nothing to do
  auto none = RunShell(hook + " prestart < " + Path("state.json"));
  EXPECT_EQ(none.exit_code, 0) << none.out;
  EXPECT_THAT(Read("hook.log"), HasSubstr("no GPU requested (hook: nothing to do)"));

  WriteConfig("7");  // privileged, a GPU the spec does not have: refused before any container work
  auto unknown = RunShell(hook + " prestart < " + Path("state.json"));
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_THAT(unknown.out, HasSubstr("nvidia.com/gpu=7"));

  auto post = RunShell("echo '{}' | " + hook + " poststop");
  EXPECT_EQ(post.exit_code, 0) << post.out;
  auto version = RunShell(Path("nvidia-container-runtime-hook") + " --version");
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_THAT(version.out, HasSubstr("answering as nvidia-container-runtime-hook"));
  auto help = RunShell(Path("nvidia-container-runtime-hook") + " --help");
  EXPECT_THAT(help.out, HasSubstr("With runc as the runtime, this hook gives them"));
}

TEST_F(OciRuntimeCliTest, HelpTeachesAndTheCommandIsListed) {
  auto help = RunGpunode("oci-runtime --help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_THAT(help.out, HasSubstr("NVIDIA_VISIBLE_DEVICES=all"));
  EXPECT_THAT(help.out, HasSubstr("--runtime-path"));
  // The three channels, the two settings with their defaults, NVIDIA's config file.
  EXPECT_THAT(help.out, HasSubstr("cdi.k8s.io/*"));
  EXPECT_THAT(help.out, HasSubstr("/var/run/nvidia-container-devices/<id>"));
  EXPECT_THAT(help.out, HasSubstr("privileged (CAP_SYS_ADMIN)"));
  EXPECT_THAT(help.out, HasSubstr("--accept-envvar-when-unprivileged=BOOL  accept-nvidia-visible-devices-envvar-when-unprivileged"));
  EXPECT_THAT(help.out, HasSubstr("(GPUNODE_ACCEPT_ENVVAR_WHEN_UNPRIVILEGED; default false)"));
  EXPECT_THAT(help.out, HasSubstr("--accept-volume-mounts=BOOL  accept-nvidia-visible-devices-as-volume-mounts"));
  EXPECT_THAT(help.out, HasSubstr("(GPUNODE_ACCEPT_VOLUME_MOUNTS; default true)"));
  EXPECT_THAT(help.out, HasSubstr("${XDG_CONFIG_HOME:-/etc}/nvidia-container-runtime/config.toml"));
  auto top = RunGpunode("--help");
  EXPECT_EQ(top.exit_code, 0);
  EXPECT_THAT(top.out, HasSubstr("oci-runtime"));
}


// --- which requests are believed (security finding: a pod gets only the GPUs it was allocated) ---

// An image's ENV NVIDIA_VISIBLE_DEVICES=all, run unprivileged as uid 1000: no GPU, the container
// starts, and the runtime's log says why at warning level with the setting that would change it.
TEST_F(OciRuntimeCliTest, AnUnprivilegedContainersEnvAllIsIgnoredWithAWarningInRuncsLog) {
  WriteConfig("all", /*privileged=*/false);
  const std::string before = Read("bundle/config.json");
  auto r = RunGpunode(Shim("--log " + Path("log.json") + " --log-format json create --bundle " + Path("bundle") + " c"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_TRUE(fs::exists(Path("runc-args")));
  EXPECT_EQ(Read("bundle/config.json"), before);
  nlohmann::json line = nlohmann::json::parse(Read("log.json"));
  EXPECT_EQ(line["level"], "warning");
  const std::string msg = line["msg"].get<std::string>();
  EXPECT_THAT(msg, HasSubstr("ignored NVIDIA_VISIBLE_DEVICES=all: the container is unprivileged"));
  EXPECT_THAT(msg, HasSubstr("set accept-nvidia-visible-devices-envvar-when-unprivileged = true in " +
                             Path("xdg/nvidia-container-runtime/config.toml")));
  EXPECT_THAT(msg, HasSubstr("--accept-envvar-when-unprivileged=true, GPUNODE_ACCEPT_ENVVAR_WHEN_UNPRIVILEGED=true"));

  // runc's text format, and the debug log.
  auto t = RunGpunode(Shim("--debug-log " + Path("debug.log") + " --log " + Path("log.txt") + " create --bundle " +
                           Path("bundle") + " c"));
  ASSERT_EQ(t.exit_code, 0) << t.out;
  EXPECT_THAT(Read("log.txt"), ::testing::StartsWith("time=\""));
  EXPECT_THAT(Read("log.txt"), HasSubstr("level=warning msg=\"gpunode oci-runtime: "));
  EXPECT_THAT(Read("debug.log"), HasSubstr(" warning ["));
}

// A pod given GPU 1 by the device plugin (cdi-annotations strategy) that appends
// NVIDIA_VISIBLE_DEVICES=all to its own env gets GPU 1 only.
TEST_F(OciRuntimeCliTest, APodsEnvAllBesideThePluginsAnnotationGetsOnlyTheAllocatedGpu) {
  nlohmann::json c = Config("all", /*privileged=*/false);
  c["annotations"] = {{"cdi.k8s.io/gpunode-plugin_GPU-1", "nvidia.com/gpu=1"}};
  WriteConfigJson(c);
  auto r = RunGpunode(Shim("--debug-log " + Path("debug.log") + " create --bundle " + Path("bundle") + " c"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  nlohmann::json seen = ConfigSeenByRunc();
  ASSERT_EQ(seen["linux"]["devices"].size(), 1u);
  EXPECT_EQ(seen["linux"]["devices"][0]["path"], "/dev/nvidia1");
  EXPECT_THAT(Read("debug.log"), HasSubstr("ignored NVIDIA_VISIBLE_DEVICES=all: the CDI annotation"));
}

// NVIDIA_VISIBLE_DEVICES=example.com/nic=nic0 would pull another vendor's device and its host
// mounts into the container: refused before runc runs, even in a privileged container.
TEST_F(OciRuntimeCliTest, EnvNamingAnotherVendorsDeviceIsRefused) {
  std::ofstream(Path("cdi/nic.yaml")) << "cdiVersion: \"0.5.0\"\nkind: \"example.com/nic\"\ndevices:\n"
                                         "  - name: \"nic0\"\n    containerEdits:\n      mounts:\n"
                                         "        - hostPath: \"/etc\"\n          containerPath: \"/host-etc\"\n";
  WriteConfig("example.com/nic=nic0", /*privileged=*/true);
  auto r = RunGpunode(Shim("--log " + Path("log.json") + " --log-format json create --bundle " + Path("bundle") + " c"));
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_FALSE(fs::exists(Path("runc-args")));
  EXPECT_THAT(r.out, HasSubstr("NVIDIA_VISIBLE_DEVICES=example.com/nic=nic0: \"example.com/nic=nic0\" is a device "
                               "of kind example.com/nic; this channel names only nvidia.com/gpu devices"));
  EXPECT_EQ(nlohmann::json::parse(Read("log.json"))["level"], "error");
}

// What the device plugin's volume-mounts strategy gives a container: the marker in the variable
// and a /dev/null mount per GPU. The container gets exactly GPU 1, unprivileged.
TEST_F(OciRuntimeCliTest, AVolumeMountRequestGetsExactlyThatGpu) {
  nlohmann::json c = Config("/var/run/nvidia-container-devices", /*privileged=*/false);
  c["mounts"] = {{{"destination", "/var/run/nvidia-container-devices/1"}, {"type", "bind"}, {"source", "/dev/null"},
                  {"options", {"rbind", "ro"}}}};
  WriteConfigJson(c);
  auto r = RunGpunode(Shim("--debug-log " + Path("debug.log") + " create --bundle " + Path("bundle") + " c"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  nlohmann::json seen = ConfigSeenByRunc();
  ASSERT_EQ(seen["linux"]["devices"].size(), 1u);
  EXPECT_EQ(seen["linux"]["devices"][0]["path"], "/dev/nvidia1");
  EXPECT_EQ(seen["annotations"]["gpunode.io/injected-devices"], "nvidia.com/gpu=1");

  // The setting off (flag): ignored with a warning naming it; the container starts without a GPU.
  WriteConfigJson(c);
  auto off = RunGpunode(Shim("--accept-volume-mounts=false --debug-log " + Path("debug.log") + " create --bundle " +
                             Path("bundle") + " c"));
  ASSERT_EQ(off.exit_code, 0) << off.out;
  EXPECT_FALSE(ConfigSeenByRunc().contains("linux"));
  EXPECT_THAT(Read("debug.log"),
              HasSubstr("ignored volume mounts /var/run/nvidia-container-devices/{1}: "
                        "accept-nvidia-visible-devices-as-volume-mounts is false (--accept-volume-mounts)"));
}

// NVIDIA's config file, then the shim's environment, then its flags.
TEST_F(OciRuntimeCliTest, TheSettingsComeFromNvidiasConfigFileTheEnvironmentAndFlags) {
  WriteToolkitConfig("disable-require = false\naccept-nvidia-visible-devices-envvar-when-unprivileged = true\n"
                     "[nvidia-container-runtime]\nmode = \"cdi\"\n");
  WriteConfig("0", /*privileged=*/false);
  auto file = RunGpunode(Shim("--debug-log " + Path("debug.log") + " create --bundle " + Path("bundle") + " c"));
  ASSERT_EQ(file.exit_code, 0) << file.out;
  EXPECT_EQ(ConfigSeenByRunc()["linux"]["devices"][0]["path"], "/dev/nvidia0");
  EXPECT_THAT(Read("debug.log"), HasSubstr("accept-nvidia-visible-devices-envvar-when-unprivileged = true, " +
                                           Path("xdg/nvidia-container-runtime/config.toml")));

  WriteConfig("0", /*privileged=*/false);
  auto env = RunGpunode(Shim("create --bundle " + Path("bundle") + " c"),
                        {{"GPUNODE_ACCEPT_ENVVAR_WHEN_UNPRIVILEGED", "false"}});
  ASSERT_EQ(env.exit_code, 0) << env.out;
  EXPECT_FALSE(ConfigSeenByRunc().contains("linux"));

  WriteConfig("0", /*privileged=*/false);
  auto flag = RunGpunode(Shim("--accept-envvar-when-unprivileged=True create --bundle " + Path("bundle") + " c"),
                         {{"GPUNODE_ACCEPT_ENVVAR_WHEN_UNPRIVILEGED", "false"}});
  ASSERT_EQ(flag.exit_code, 0) << flag.out;
  EXPECT_EQ(ConfigSeenByRunc()["linux"]["devices"][0]["path"], "/dev/nvidia0");

  // NVIDIA_CTK_CONFIG_FILE_PATH names another file, as for NVIDIA's runtime.
  std::ofstream(Path("other.toml")) << "accept-nvidia-visible-devices-envvar-when-unprivileged = false\n";
  WriteConfig("0", /*privileged=*/false);
  auto other = RunGpunode(Shim("create --bundle " + Path("bundle") + " c"), {{"NVIDIA_CTK_CONFIG_FILE_PATH", Path("other.toml")}});
  ASSERT_EQ(other.exit_code, 0) << other.out;
  EXPECT_FALSE(ConfigSeenByRunc().contains("linux"));
}

TEST_F(OciRuntimeCliTest, AMalformedSettingStopsTheContainerNamingFileAndKey) {
  WriteToolkitConfig("\naccept-nvidia-visible-devices-as-volume-mounts = \"yes\"\n");
  WriteConfig("0");
  auto r = RunGpunode(Shim("--log " + Path("log.json") + " --log-format json create --bundle " + Path("bundle") + " c"));
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_FALSE(fs::exists(Path("runc-args")));
  EXPECT_THAT(r.out, HasSubstr(Path("xdg/nvidia-container-runtime/config.toml") +
                               ":2: accept-nvidia-visible-devices-as-volume-mounts: expected a boolean"));
  EXPECT_EQ(nlohmann::json::parse(Read("log.json"))["level"], "error");
  // Other commands do not read it: a container can still be deleted.
  auto del = RunGpunode(Shim("delete c"));
  EXPECT_EQ(del.exit_code, 0) << del.out;
  EXPECT_EQ(Read("runc-args"), "delete c\n");

  WriteToolkitConfig("accept-nvidia-visible-devices-as-volume-mounts = [\n");
  auto syntax = RunGpunode(Shim("create --bundle " + Path("bundle") + " c"));
  EXPECT_EQ(syntax.exit_code, 1) << syntax.out;
  EXPECT_THAT(syntax.out, HasSubstr("parse " + Path("xdg/nvidia-container-runtime/config.toml") + ": line"));

  WriteToolkitConfig("");
  auto bad_env = RunGpunode(Shim("create --bundle " + Path("bundle") + " c"), {{"GPUNODE_ACCEPT_VOLUME_MOUNTS", "yes"}});
  EXPECT_EQ(bad_env.exit_code, 1) << bad_env.out;
  EXPECT_THAT(bad_env.out, HasSubstr("GPUNODE_ACCEPT_VOLUME_MOUNTS=\"yes\": not a boolean"));

  auto bad_flag = RunGpunode(Shim("--accept-volume-mounts=maybe create --bundle " + Path("bundle") + " c"));
  EXPECT_EQ(bad_flag.exit_code, 3) << bad_flag.out;
  EXPECT_THAT(bad_flag.out, HasSubstr("--accept-volume-mounts=maybe: not a boolean"));
  auto bare = RunGpunode(Shim("--accept-envvar-when-unprivileged create --bundle " + Path("bundle") + " c"));
  EXPECT_EQ(bare.exit_code, 3) << bare.out;
  EXPECT_THAT(bare.out, HasSubstr("--accept-envvar-when-unprivileged=true or"));
}

}  // namespace
}  // namespace gpunode
