// The small things a drop-in CLI needs (issue #14), on the real binary: -q/--quiet, `cdi list -`
// and `cdi validate -` read stdin, podman's "nothing to configure" hint, and --simulate leaving no
// temporary directory behind.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "test/testing/run_gpunode.h"
#include "test/testing/temp_dir_test.h"

namespace {

namespace fs = std::filesystem;
using ::gpunode::testing::Result;
using ::gpunode::testing::RunGpunode;
using ::gpunode::testing::RunShell;
using ::testing::HasSubstr;
using ::testing::Not;

class CliDropInTest : public ::gpunode::testing::TempDirTest {
 protected:
  static std::string Bin() { return std::string(GPUNODE_BIN_DIR) + "/gpunode"; }
};

TEST_F(CliDropInTest, QuietCdiGenerateWritesTheSpecAndPrintsNothing) {
  Result loud = RunGpunode("--simulate dgx-h200 cdi generate --output " + Path("loud.yaml"));
  ASSERT_EQ(loud.exit_code, 0) << loud.out;
  EXPECT_THAT(loud.out, HasSubstr("wrote " + Path("loud.yaml")));
  Result quiet = RunGpunode("--simulate dgx-h200 cdi generate -q --output " + Path("quiet.yaml"));
  ASSERT_EQ(quiet.exit_code, 0) << quiet.out;
  EXPECT_EQ(quiet.out, "");
  EXPECT_THAT(Read("quiet.yaml"), HasSubstr("nvidia.com/gpu"));
  // Errors still speak.
  std::ofstream(Path("a-file")) << "not a folder";
  Result failed = RunGpunode("--simulate dgx-h200 cdi generate --quiet --output " + Path("a-file/x.yaml"));
  EXPECT_NE(failed.exit_code, 0);
  EXPECT_THAT(failed.out, HasSubstr("error:"));
}

TEST_F(CliDropInTest, QuietSimAndRuntimeCommandsPrintNothingOnSuccess) {
  Result root = RunGpunode("sim hostroot -q dgx-h200 " + Path("root"));
  ASSERT_EQ(root.exit_code, 0) << root.out;
  EXPECT_EQ(root.out, "");
  EXPECT_TRUE(fs::exists(Path("root/proc/driver/nvidia/version")));

  Result capture = RunGpunode("--simulate t4-cloud sim capture --quiet --output " + Path("t4.yaml"));
  ASSERT_EQ(capture.exit_code, 0) << capture.out;
  EXPECT_EQ(capture.out, "");
  EXPECT_THAT(Read("t4.yaml"), HasSubstr("gpus:"));

  const std::string configure = "runtime configure --runtime containerd --config " + Path("config.toml");
  Result r = RunGpunode(configure + " -q");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out, "");
  EXPECT_THAT(Read("config.toml"), HasSubstr("runtimes.nvidia"));
  Result again = RunGpunode(configure + " -q");
  EXPECT_EQ(again.exit_code, 0) << again.out;
  EXPECT_EQ(again.out, "");
  // --dry-run's diff is the output asked for: -q keeps it.
  Result dry = RunGpunode("runtime configure --runtime docker --dry-run -q --config " + Path("daemon.json"));
  EXPECT_EQ(dry.exit_code, 0) << dry.out;
  EXPECT_THAT(dry.out, HasSubstr("+++ "));

  Result help = RunGpunode("cdi generate --help");
  EXPECT_THAT(help.out, HasSubstr("-q,--quiet"));
}

TEST_F(CliDropInTest, CdiListAndValidateReadTheSpecFromStdin) {
  const std::string gen = Bin() + " --simulate dgx-h200 cdi generate --output - 2>/dev/null | ";
  Result list = RunShell(gen + Bin() + " cdi list -");
  ASSERT_EQ(list.exit_code, 0) << list.out;
  EXPECT_THAT(list.out, HasSubstr("nvidia.com/gpu=all\n"));
  EXPECT_THAT(list.out, HasSubstr("nvidia.com/gpu=7\n"));
  Result json = RunShell(gen + Bin() + " -o json cdi list -");
  EXPECT_THAT(json.out, HasSubstr("\"file\": \"<stdin>\""));

  Result valid = RunShell(gen + Bin() + " cdi validate -");
  EXPECT_EQ(valid.exit_code, 0) << valid.out;
  EXPECT_THAT(valid.out, HasSubstr("<stdin>: valid (cdiVersion"));
  Result invalid = RunShell("echo 'cdiVersion: 0.6.0' | " + Bin() + " cdi validate -");
  EXPECT_EQ(invalid.exit_code, 3) << invalid.out;
  EXPECT_THAT(invalid.out, HasSubstr("<stdin>"));
  Result empty = RunShell(Bin() + " cdi list - </dev/null");
  EXPECT_EQ(empty.exit_code, 3) << empty.out;
}

TEST_F(CliDropInTest, RuntimeConfigurePodmanSaysItUsesCdiDirectly) {
  Result r = RunGpunode("--host-root " + dir_.string() + " runtime configure --runtime podman");
  EXPECT_EQ(r.exit_code, 3) << r.out;  // not a runtime to configure (RuntimeCliTest.BadFlags)
  EXPECT_THAT(r.out, HasSubstr("podman needs no runtime configuration: it uses CDI directly"));
  EXPECT_THAT(r.out, HasSubstr("podman run --device nvidia.com/gpu=all"));
  EXPECT_TRUE(fs::is_empty(dir_));  // nothing written, no backup
  EXPECT_THAT(RunGpunode("runtime configure --help").out, HasSubstr("podman"));
}

// Each --simulate run generates a host root in a temporary directory; none may outlive the run, on
// success or on error. TMPDIR is private to the test, so other tests' runs do not count.
TEST_F(CliDropInTest, SimulateLeavesNoTemporaryDirectoryBehind) {
  const std::string env = "TMPDIR=" + dir_.string() + " ";
  std::ofstream(Path("a-file")) << "not a folder";  // an error path: the spec cannot be written below it
  for (const std::string& args :
       {std::string("--simulate dgx-h200 doctor"), std::string("--simulate dgx-h200 -o json labels --print"),
        std::string("--simulate broken-fallen-gpu doctor"), std::string("--simulate a100-mig cdi generate --output -"),
        std::string("--simulate dgx-h200 cdi generate --output ") + Path("a-file/spec.yaml"),
        std::string("--simulate no-such-profile doctor"), std::string("--simulate dgx-h200 exporter --once"),
        std::string("--simulate dgx-h200 plugin --print"), std::string("--simulate t4-cloud sim capture")}) {
    Result r = RunShell(env + Bin() + " " + args + " >/dev/null");
    std::vector<std::string> left;
    for (const auto& e : fs::directory_iterator(dir_)) {
      if (e.path().filename() != "a-file") left.push_back(e.path().filename().string());
    }
    EXPECT_TRUE(left.empty()) << "gpunode " << args << " (exit " << r.exit_code << ") left " << left.front();
  }
}

// A run that was killed cannot remove its host root; the next --simulate run removes those whose
// lock no process holds, and leaves those of live runs and folders that are not host roots.
TEST_F(CliDropInTest, SimulateRemovesTheHostRootsOfKilledRuns) {
  fs::create_directories(Path("gpunode-sim-dead01/root/dev"));
  std::ofstream(Path("gpunode-sim-dead01/.lock")) << "";
  fs::create_directories(Path("gpunode-sim-live01"));
  std::ofstream(Path("gpunode-sim-live01/.lock")) << "";
  const int held = ::open(Path("gpunode-sim-live01/.lock").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(held, 0);
  ASSERT_EQ(::flock(held, LOCK_EX), 0);
  fs::create_directories(Path("gpunode-sim-nolock"));
  Result r = RunShell("TMPDIR=" + dir_.string() + " " + Bin() + " --simulate dgx-h200 doctor");
  EXPECT_FALSE(fs::exists(Path("gpunode-sim-dead01"))) << r.out;
  EXPECT_TRUE(fs::exists(Path("gpunode-sim-live01")));
  EXPECT_TRUE(fs::exists(Path("gpunode-sim-nolock")));
  ::close(held);
}

// A simulated node has DMI (sys/class/dmi/id), so nothing warns that the machine type is unknown.
TEST_F(CliDropInTest, SimulatedNodesHaveDmiAndNoDmiWarning) {
  for (const std::string& args : {std::string("--simulate dgx-h200 doctor"),
                                  std::string("--simulate dgx-h200 labels --print"),
                                  std::string("--simulate pcie-l40s-4 labels --print")}) {
    Result r = RunGpunode(args);
    EXPECT_THAT(r.out, Not(HasSubstr("dmi"))) << args;
    EXPECT_THAT(r.out, Not(HasSubstr("warning: machine type"))) << args;
  }
  Result labels = RunGpunode("--simulate dgx-h200 labels --print");
  EXPECT_THAT(labels.out, HasSubstr("nvidia.com/gpu.machine=gpunode-simulated-node\n"));
}

// `gpunode --simulate PROFILE oci-runtime` (and GPUNODE_SIMULATE, which the shim installed as
// nvidia-container-runtime sees): the spec generated in memory is the simulated node's, with its
// files below the generated host root (still there when the runtime runs) and the device nodes
// numbered as the simulated driver's.
TEST_F(CliDropInTest, OciRuntimeOnASimulatedNodeGivesTheContainerTheSimulatedGpus) {
  const std::string runc = Path("fake-runc");
  std::ofstream(runc) << "#!/bin/sh\n"
                         "for a; do case \"$prev\" in --bundle) cp \"$a/config.json\" "
                      << Path("seen.json") << ";; esac; prev=$a; done\n";
  fs::permissions(runc, fs::perms::owner_all);
  fs::create_directories(Path("bundle"));
  fs::create_directories(Path("no-specs"));
  fs::create_directories(Path("tmp"));
  // Privileged (CAP_SYS_ADMIN in the bounding set): the shim believes NVIDIA_VISIBLE_DEVICES only
  // there (docs/security.md).
  std::ofstream(Path("bundle/config.json"))
      << R"({"ociVersion":"1.0.2","process":{"args":["sh"],"env":["PATH=/bin","NVIDIA_VISIBLE_DEVICES=1"],)"
         R"("capabilities":{"bounding":["CAP_SYS_ADMIN"]}},"root":{"path":"rootfs"}})";
  const std::string shim = " oci-runtime --runtime-path " + runc + " --spec-dir " + Path("no-specs") +
                           " create --bundle " + Path("bundle") + " ctr1";
  Result r = RunShell("TMPDIR=" + Path("tmp") + " " + Bin() + " --simulate dgx-h200" + shim);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  nlohmann::json seen = nlohmann::json::parse(Read("seen.json"));
  bool gpu1 = false;
  for (const auto& d : seen["linux"]["devices"]) {
    if (d["path"] == "/dev/nvidia1") gpu1 = d["major"] == 195 && d["minor"] == 1 && d["type"] == "c";
    EXPECT_NE(d["path"], "/dev/nvidia0");
  }
  EXPECT_TRUE(gpu1) << seen["linux"]["devices"].dump();
  std::string libcuda;
  for (const auto& m : seen["mounts"]) {
    if (m["destination"].get<std::string>().find("libcuda.so") != std::string::npos) libcuda = m["source"];
  }
  EXPECT_TRUE(fs::is_regular_file(libcuda)) << libcuda;  // the simulated libcuda, still there for runc
  EXPECT_THAT(seen["mounts"].dump(), HasSubstr(Path("tmp") + "/gpunode-sim-"));

  // The same through the environment; the first run's host root (its process gone) is removed.
  std::ofstream(Path("bundle/config.json"))
      << R"({"ociVersion":"1.0.2","process":{"args":["sh"],"env":["PATH=/bin","NVIDIA_VISIBLE_DEVICES=all"],)"
         R"("capabilities":{"bounding":["CAP_SYS_ADMIN"]}},"root":{"path":"rootfs"}})";
  Result env = RunShell("TMPDIR=" + Path("tmp") + " GPUNODE_SIMULATE=t4-cloud " + Bin() + shim);
  ASSERT_EQ(env.exit_code, 0) << env.out;
  EXPECT_THAT(Read("seen.json"), HasSubstr("\"/dev/nvidia0\""));
  Result after = RunShell("TMPDIR=" + Path("tmp") + " " + Bin() + " --simulate t4-cloud doctor");
  EXPECT_TRUE(fs::is_empty(Path("tmp"))) << after.out;
}

}  // namespace
