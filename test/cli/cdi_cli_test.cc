// End-to-end tests of `gpunode cdi` (the real binary, simulated nodes): generate, list, validate
// and the hooks, with their exit codes and messages as a user sees them.
#include <sys/stat.h>
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
using ::testing::Not;

class CdiCliTest : public ::gpunode::testing::TempDirTest {
};

TEST_F(CdiCliTest, GenerateToStdoutPrintsAYamlSpecForTheSimulatedNode) {
  Result r = RunGpunode("--simulate dgx-h200 cdi generate --output -");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("---\ncdiVersion: \"0.5.0\"\nkind: \"nvidia.com/gpu\"\n"));
  EXPECT_THAT(r.out, HasSubstr("name: \"all\""));
  EXPECT_THAT(r.out, HasSubstr("/bin/gpunode\""));  // the hooks call this executable by default
}

TEST_F(CdiCliTest, GenerateWritesAFileThatListAndValidateAccept) {
  Result r = RunGpunode("--simulate a100-mig cdi generate --output " + Path("cdi/nvidia.yaml"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("wrote " + Path("cdi/nvidia.yaml") + ": 7 devices, driver 550.127.05"));
  struct stat st;
  ASSERT_EQ(::stat(Path("cdi/nvidia.yaml").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);

  Result list = RunGpunode("cdi list " + Path("cdi/nvidia.yaml"));
  ASSERT_EQ(list.exit_code, 0) << list.out;
  EXPECT_EQ(list.out.substr(0, 36), "nvidia.com/gpu=0:0\nnvidia.com/gpu=MI");
  EXPECT_THAT(list.out, HasSubstr("\nnvidia.com/gpu=all\n"));

  Result json = RunGpunode("-o json cdi list " + Path("cdi/nvidia.yaml"));
  ASSERT_EQ(json.exit_code, 0) << json.out;
  auto doc = nlohmann::json::parse(json.out, nullptr, false);
  EXPECT_EQ(doc["kind"], "CdiDeviceList");
  EXPECT_EQ(doc["devices"].size(), 7u);

  Result valid = RunGpunode("cdi validate " + Path("cdi/nvidia.yaml"));
  EXPECT_EQ(valid.exit_code, 0) << valid.out;
  EXPECT_THAT(valid.out, HasSubstr("valid (cdiVersion 0.5.0, kind nvidia.com/gpu, 7 devices)"));
}

TEST_F(CdiCliTest, AJsonOutputFileGetsJsonAndTheIndexStrategyOnlyIndexNames) {
  Result r = RunGpunode("--simulate pcie-l40s-4 cdi generate --device-name-strategy index --output " +
                        Path("nvidia.json"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  auto doc = nlohmann::json::parse(Read("nvidia.json"), nullptr, false);
  ASSERT_FALSE(doc.is_discarded());
  EXPECT_EQ(doc["devices"].size(), 5u);
  EXPECT_EQ(doc["devices"][0]["name"], "0");
  EXPECT_EQ(RunGpunode("cdi validate " + Path("nvidia.json")).exit_code, 0);
}

TEST_F(CdiCliTest, ValidateRejectsAnUnknownFieldWithExit3AndThePath) {
  std::ofstream(Path("bad.yaml")) << "cdiVersion: \"0.5.0\"\nkind: nvidia.com/gpu\n"
                                     "devices:\n  - name: \"0\"\n    containerEdits:\n"
                                     "      deviceNodes:\n        - path: /dev/nvidia0\n          hostpath: /x\n";
  Result r = RunGpunode("cdi validate " + Path("bad.yaml"));
  EXPECT_EQ(r.exit_code, 3) << r.out;
  EXPECT_THAT(r.out, HasSubstr("bad.yaml:8: devices[0].containerEdits.deviceNodes[0]: unknown key \"hostpath\""));
}

TEST_F(CdiCliTest, ValidateListsEveryProblemOfAnInvalidSpec) {
  std::ofstream(Path("bad.yaml")) << "cdiVersion: \"0.3.0\"\nkind: nvidia.com/gpu\n"
                                     "devices:\n  - name: \"0\"\n    containerEdits: {env: [A=1]}\n"
                                     "  - name: \"bad name\"\n    containerEdits:\n"
                                     "      hooks: [{hookName: preStart, path: /bin/true}]\n";
  Result r = RunGpunode("cdi validate " + Path("bad.yaml"));
  EXPECT_EQ(r.exit_code, 3) << r.out;
  EXPECT_THAT(r.out, HasSubstr("invalid CDI spec (3 problems)"));
  EXPECT_THAT(r.out, HasSubstr("cdiVersion: 0.3.0 is too low"));
  EXPECT_THAT(r.out, HasSubstr("devices[1].name: device name \"bad name\""));
  EXPECT_THAT(r.out, HasSubstr("hookName: \"preStart\""));
}

TEST_F(CdiCliTest, BadFlagsAndMissingFilesExitWith3) {
  EXPECT_EQ(RunGpunode("--simulate t4-cloud cdi generate --device-name-strategy name --output -").exit_code, 3);
  EXPECT_EQ(RunGpunode("--simulate t4-cloud cdi generate --format toml --output -").exit_code, 3);
  Result r = RunGpunode("cdi list " + Path("missing.yaml"));
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_THAT(r.out, HasSubstr("missing.yaml"));
  // A format name where a file is expected: refused with the two ways to say it (no file "json").
  Result fmt = RunGpunode("--simulate t4-cloud cdi generate --output json");
  EXPECT_EQ(fmt.exit_code, 3);
  EXPECT_THAT(fmt.out, HasSubstr("use --format json --output -"));
  EXPECT_FALSE(fs::exists("json"));
}

TEST_F(CdiCliTest, AnUnwritableOutputFailsAndKeepsTheOldDirectoryEntry) {
  fs::create_directories(dir_ / "taken/x");
  Result r = RunGpunode("--simulate t4-cloud cdi generate --output " + Path("taken"));
  EXPECT_EQ(r.exit_code, 3) << r.out;
  EXPECT_THAT(r.out, HasSubstr("write " + Path("taken") + ": not a regular file"));
  EXPECT_TRUE(fs::is_directory(dir_ / "taken/x"));
  EXPECT_THAT(r.out, Not(HasSubstr("wrote")));
}

// Issue 11, row 1: with /var/run -> /run in the host root (every Debian/Ubuntu host), the spec
// lands in the host root's /run/cdi, never in this machine's /run.
TEST_F(CdiCliTest, TheDefaultSpecFollowsVarRunInsideTheHostRoot) {
  Result root = RunGpunode("sim hostroot t4-cloud " + Path("host"));
  ASSERT_EQ(root.exit_code, 0) << root.out;
  fs::remove_all(dir_ / "host/var/run");
  fs::create_directories(dir_ / "host/run");
  fs::create_symlink("/run", dir_ / "host/var/run");
  const bool had_own = fs::exists("/run/cdi/nvidia.yaml");
  const std::string profile = std::string(GPUNODE_SOURCE_DIR) + "/data/profiles/t4-cloud.yaml";
  Result r = RunGpunode("--host-root " + Path("host") + " --nvml-library " + std::string(GPUNODE_BIN_DIR) +
                            "/libgpunode-simnvml.so cdi generate",
                        {{"GPUNODE_SIM_PROFILE", profile}});
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("wrote " + Path("host/run/cdi/nvidia.yaml")));
  EXPECT_TRUE(fs::exists(dir_ / "host/run/cdi/nvidia.yaml"));
  EXPECT_TRUE(fs::is_symlink(dir_ / "host/var/run"));
  if (!had_own) {
    EXPECT_FALSE(fs::exists("/run/cdi/nvidia.yaml"));
  }
}

TEST_F(CdiCliTest, TheCreateSymlinksHookReadsTheOciStateOnStdin) {
  fs::create_directories(dir_ / "bundle/rootfs");
  std::ofstream(Path("bundle/config.json")) << R"({"root": {"path": "rootfs"}})";
  std::ofstream(Path("state.json")) << R"({"bundle": ")" << Path("bundle") << "\"}";
  Result r = RunGpunode("cdi hook create-symlinks --link libcuda.so.1::/usr/lib64/libcuda.so < " + Path("state.json"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(fs::read_symlink(dir_ / "bundle/rootfs/usr/lib64/libcuda.so"), "libcuda.so.1");
  EXPECT_EQ(RunGpunode("cdi hook create-symlinks --link a::/b < /dev/null").exit_code, 3);
}

}  // namespace
