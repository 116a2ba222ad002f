// -o/--output is the output format everywhere (#14): commands that print no report refuse it with
// exit 3 and say where the format or file goes; file flags refuse a format name with a hint.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/run_gpunode.h"

namespace {

using ::gpunode::testing::RunGpunode;
using ::testing::HasSubstr;

TEST(OutputFlagCliTest, CommandsWithoutAReportRefuseAFormat) {
  struct Case {
    const char* args;
    const char* hint;
  };
  for (const Case& c : {Case{"--simulate dgx-h200 cdi generate -o json --output -", "--format yaml|json"},
                        Case{"-o yaml --simulate dgx-h200 sim hostroot dgx-h200 /tmp/gpunode-never-written",
                             "writes a host root folder"},
                        Case{"--simulate dgx-h200 -o json sim capture", "its file is --output FILE"},
                        Case{"-o json k8s uninstall --daemonset gpunode/gpunode", "pre-delete hook"}}) {
    auto r = RunGpunode(c.args);
    EXPECT_EQ(r.exit_code, 3) << c.args << "\n" << r.out;
    EXPECT_THAT(r.out, HasSubstr("prints no report to format")) << c.args;
    EXPECT_THAT(r.out, HasSubstr(c.hint)) << c.args;
  }
}

TEST(OutputFlagCliTest, CommandsWithAReportStillTakeIt) {
  for (const char* args : {"--simulate dgx-h200 -o json doctor", "-o json sim list",
                           "--simulate dgx-h200 doctor -o yaml"}) {
    auto r = RunGpunode(args);
    EXPECT_LE(r.exit_code, 1) << args << "\n" << r.out;
    EXPECT_THAT(r.out, HasSubstr("apiVersion")) << args;
  }
  // No -o at all: cdi generate's own --output FILE is untouched by the check.
  auto spec = RunGpunode("--simulate dgx-h200 cdi generate --output -");
  EXPECT_EQ(spec.exit_code, 0) << spec.out;
  EXPECT_THAT(spec.out, HasSubstr("cdiVersion"));
}

TEST(OutputFlagCliTest, FileFlagsRefuseAFormatName) {
  auto cdi = RunGpunode("--simulate dgx-h200 cdi generate --output json");
  EXPECT_EQ(cdi.exit_code, 3) << cdi.out;
  EXPECT_THAT(cdi.out, HasSubstr("--format json"));
  auto cap = RunGpunode("--simulate dgx-h200 sim capture --output yaml");
  EXPECT_EQ(cap.exit_code, 3) << cap.out;
  EXPECT_THAT(cap.out, HasSubstr("--output ./yaml"));
}

}  // namespace

namespace {

// Run as NVIDIA's program names (the image's links), gpunode is that component (#14).
TEST(ProgramNameCliTest, NvidiaNamesAreTheirComponents) {
  const std::string dir = ::testing::TempDir() + "gpunode-names";
  ASSERT_EQ(std::system(("mkdir -p " + dir).c_str()), 0);
  struct Case {
    const char* name;
    const char* help_line;
  };
  for (const Case& c : {Case{"nvidia-device-plugin", "device plugin for nvidia.com/gpu"},
                        Case{"gpu-feature-discovery", "gpunode labels"},
                        Case{"dcgm-exporter", "Prometheus"}}) {
    const std::string link = dir + "/" + c.name;
    std::remove(link.c_str());
    ASSERT_EQ(::symlink((std::string(GPUNODE_BIN_DIR) + "/gpunode").c_str(), link.c_str()), 0) << link;
    auto r = ::gpunode::testing::RunShell(link + " --help");
    EXPECT_EQ(r.exit_code, 0) << c.name << "\n" << r.out;
    EXPECT_THAT(r.out, ::testing::HasSubstr(c.help_line)) << c.name;
  }
  auto exporter = ::gpunode::testing::RunShell("env GPUNODE_SIMULATE=dgx-h200 " + dir + "/dcgm-exporter --once");
  EXPECT_EQ(exporter.exit_code, 0) << exporter.out;
  EXPECT_THAT(exporter.out, ::testing::HasSubstr("DCGM_FI_DEV_GPU_UTIL"));
}

}  // namespace

namespace {

// The top level's examples and exit codes are its own: a command's --help does not end with them
// (#14: `runtime --help` did).
TEST(HelpFooterCliTest, CommandsDoNotRepeatTheTopLevelExamples) {
  const std::string top_only = "measure each GPU against its model's ceilings";
  auto top = ::gpunode::testing::RunGpunode("--help");
  EXPECT_THAT(top.out, ::testing::HasSubstr(top_only));
  for (const char* cmd : {"runtime", "runtime configure", "cdi", "sim", "mig", "k8s"}) {
    auto r = ::gpunode::testing::RunGpunode(std::string(cmd) + " --help");
    EXPECT_EQ(r.exit_code, 0) << cmd;
    EXPECT_THAT(r.out, ::testing::Not(::testing::HasSubstr(top_only))) << cmd;
  }
}

}  // namespace
