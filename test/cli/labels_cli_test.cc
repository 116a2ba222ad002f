// End-to-end tests of `gpunode labels` (the real binary, simulated nodes): the golden label set of
// the simulated dgx-h200, the features file, the configuration's precedence (flag, environment,
// config file), errors and their exit codes, and the relabelling loop (a GPU that falls off the
// bus and one that disappears between rounds, SIGTERM removing the file).
//
// Golden file: test/fixtures/labels/dgx-h200.txt is the exact stdout of
//   gpunode --simulate dgx-h200 labels --print --no-timestamp
// After an intended change, regenerate it with
//   GPUNODE_UPDATE_GOLDEN=1 build/bin/cli_tests --gtest_filter='*Golden*'
// and review the diff (docs/labels.md shows the same set).
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <regex>
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
using ::gpunode::testing::RunShell;
using ::testing::HasSubstr;
using ::testing::Not;

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string Bin() { return std::string(GPUNODE_BIN_DIR) + "/gpunode"; }

// Runs gpunode with `args`, its stdout into `file`; the result's output is stderr alone.
Result RunToFile(const std::string& args, const std::string& file) {
  return RunShell("{ " + Bin() + " " + args + " > " + file + "; }");
}

class LabelsCliTest : public ::gpunode::testing::TempDirTest {
 protected:
  void Write(const std::string& name, const std::string& text) {
    std::ofstream(Path(name)) << text;
  }
};

TEST_F(LabelsCliTest, TheSimulatedDgxH200PrintsTheGoldenLabelSet) {
  Result r = RunToFile("--simulate dgx-h200 labels --print --no-timestamp", Path("out.txt"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const std::string out = Read("out.txt");
  const fs::path golden = fs::path(GPUNODE_SOURCE_DIR) / "test/fixtures/labels/dgx-h200.txt";
  if (std::getenv("GPUNODE_UPDATE_GOLDEN") != nullptr) {
    fs::create_directories(golden.parent_path());
    std::ofstream(golden, std::ios::binary) << out;
  }
  EXPECT_EQ(out, ReadFile(golden)) << "regenerate: see the comment at the top of this file";
}

TEST_F(LabelsCliTest, EveryLineIsAValidLabelAndTheTimestampIsNow) {
  Result r = RunToFile("--simulate dgx-h200 labels --print", Path("out.txt"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const std::string out = Read("out.txt");
  std::istringstream lines(out);
  std::string line;
  const std::regex valid(
      R"(^[a-z0-9.-]+/[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?=([A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?)?$)");
  int n = 0;
  while (std::getline(lines, line)) {
    EXPECT_TRUE(std::regex_match(line, valid)) << line;
    ++n;
  }
  EXPECT_GT(n, 30);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(out, m, std::regex(R"(nvidia\.com/gfd\.timestamp=([0-9]{10})\n)")))
      << out;
  EXPECT_NEAR(std::stoll(m[1]), static_cast<long long>(std::time(nullptr)), 60);
}

TEST_F(LabelsCliTest, PrintAsJsonIsANodeLabelsDocument) {
  Result r =
      RunToFile("--simulate a100-mig -o json labels --print --no-timestamp --mig-strategy mixed",
                Path("out.json"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  auto doc = nlohmann::json::parse(Read("out.json"), nullptr, false);
  ASSERT_FALSE(doc.is_discarded()) << Read("out.json");
  EXPECT_EQ(doc["apiVersion"], "gpunode/v1");
  EXPECT_EQ(doc["kind"], "NodeLabels");
  EXPECT_EQ(doc["metadata"]["simulated"], "a100-mig");
  EXPECT_EQ(doc["labels"]["nvidia.com/mig.strategy"], "mixed");
  EXPECT_EQ(doc["labels"]["nvidia.com/mig-2g.20gb.count"], "2");
  EXPECT_TRUE(doc["warnings"].is_array());

  Result yaml = RunGpunode("--simulate a100-mig labels --print --no-timestamp -o yaml");
  ASSERT_EQ(yaml.exit_code, 0) << yaml.out;
  EXPECT_THAT(yaml.out, HasSubstr("kind: \"NodeLabels\""));
  EXPECT_THAT(yaml.out, HasSubstr("  nvidia.com/gpu.product: \"NVIDIA-A100-SXM4-80GB\"\n"));
}

TEST_F(LabelsCliTest, OneshotWritesTheFeaturesFileAtomicallyWithMode0644) {
  Result r = RunGpunode("--simulate dgx-h200 labels --oneshot --no-timestamp --output " +
                        Path("features.d/gpunode"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("wrote " + Path("features.d/gpunode") + ": "));
  struct stat st;
  ASSERT_EQ(::stat(Path("features.d/gpunode").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  const fs::path golden = fs::path(GPUNODE_SOURCE_DIR) / "test/fixtures/labels/dgx-h200.txt";
  EXPECT_EQ(Read("features.d/gpunode"), ReadFile(golden));
  // Nothing but the file is left in the directory (no temporary files).
  EXPECT_EQ(std::distance(fs::directory_iterator(Path("features.d")), fs::directory_iterator()), 1);
}

TEST_F(LabelsCliTest, TheEnvironmentAsGfdReadsIt) {
  Result r = RunShell("GFD_ONESHOT=true GFD_NO_TIMESTAMP=1 GFD_OUTPUT_FILE=" + Path("env-out") +
                      " GFD_MIG_STRATEGY=mixed " + Bin() + " --simulate a100-mig labels");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const std::string out = Read("env-out");
  EXPECT_THAT(out, HasSubstr("nvidia.com/mig.strategy=mixed\n"));
  EXPECT_THAT(out, Not(HasSubstr("gfd.timestamp")));
}

TEST_F(LabelsCliTest, FlagsBeatTheEnvironmentWhichBeatsTheConfigFile) {
  Write("config.yaml",
        "version: v1\n"
        "flags:\n"
        "  migStrategy: mixed\n"
        "  gfd:\n"
        "    noTimestamp: true\n"
        "sharing:\n"
        "  timeSlicing:\n"
        "    resources:\n"
        "    - name: nvidia.com/gpu\n"
        "      replicas: 4\n");
  Result file =
      RunGpunode("--simulate a100-mig labels --print --config-file " + Path("config.yaml"));
  ASSERT_EQ(file.exit_code, 0) << file.out;
  EXPECT_THAT(file.out, HasSubstr("nvidia.com/mig.strategy=mixed\n"));
  EXPECT_THAT(file.out,
              HasSubstr("nvidia.com/mig-3g.40gb.product=NVIDIA-A100-SXM4-80GB-MIG-3g.40gb\n"));
  EXPECT_THAT(file.out, Not(HasSubstr("gfd.timestamp")));

  Result env = RunShell("GFD_MIG_STRATEGY=single GFD_CONFIG_FILE=" + Path("config.yaml") + " " +
                        Bin() + " --simulate a100-mig labels --print");
  ASSERT_EQ(env.exit_code, 0) << env.out;
  EXPECT_THAT(env.out, HasSubstr("nvidia.com/mig.strategy=single\n"));

  Result flag = RunShell("GFD_MIG_STRATEGY=single " + Bin() +
                         " --simulate a100-mig labels --print --config-file " +
                         Path("config.yaml") + " --mig-strategy none");
  ASSERT_EQ(flag.exit_code, 0) << flag.out;
  EXPECT_THAT(flag.out, Not(HasSubstr("mig.strategy")));
}

TEST_F(LabelsCliTest, ATimeSlicingConfigMakesTheGpusShared) {
  Write("config.yaml",
        "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      "
        "replicas: 10\n");
  Result r = RunGpunode("--simulate dgx-h200 labels --print --no-timestamp --config-file " +
                        Path("config.yaml"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("nvidia.com/gpu.product=NVIDIA-H200-SHARED\n"));
  EXPECT_THAT(r.out, HasSubstr("nvidia.com/gpu.replicas=10\n"));
  EXPECT_THAT(r.out, HasSubstr("nvidia.com/gpu.sharing-strategy=time-slicing\n"));
}

TEST_F(LabelsCliTest, BadInputIsAClearErrorWithExitCode3) {
  Write("bad.yaml", "version: v2\n");
  Write("plainfile", "x");
  struct Case {
    std::string args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"labels --print --config-file " + Path("missing.yaml"), "read " + Path("missing.yaml")},
      {"labels --print --config-file " + Path("bad.yaml"), Path("bad.yaml")},
      {"labels --print --mig-strategy sometimes", "--mig-strategy"},
      {"labels --oneshot --output " + Path("x") + " --sleep-interval 0s", "--sleep-interval"},
      {"labels --output " + Path("plainfile/labels") + " --oneshot", Path("plainfile")},
      {"-o json labels --output " + Path("x"), "applies to --print"},
      {"labels --print --output " + Path("x"), "cannot be combined"},
      {"labels --oneshot",
       "--output FILE"},  // a simulated node's labels never go to the host's NFD dir
  };
  for (const Case& c : cases) {
    Result r = RunGpunode("--simulate dgx-h200 " + c.args);
    EXPECT_EQ(r.exit_code, 3) << c.args << "\n" << r.out;
    EXPECT_THAT(r.out, HasSubstr("error: ")) << c.args;
    EXPECT_THAT(r.out, HasSubstr(c.message)) << c.args << "\n" << r.out;
  }
  Result env = RunShell("GFD_ONESHOT=maybe " + Bin() + " --simulate dgx-h200 labels --print");
  EXPECT_EQ(env.exit_code, 3) << env.out;
  EXPECT_THAT(env.out, HasSubstr("GFD_ONESHOT=\"maybe\""));
  EXPECT_FALSE(fs::exists(Path("x")));
}

// The loop: relabels every second; a GPU that falls off the bus, then one that vanishes from NVML,
// change the labels and nothing else; SIGTERM removes the file and exits 0.
TEST_F(LabelsCliTest, TheLoopSurvivesGpusThatDisappearAndRemovesTheFileOnSigterm) {
  fs::copy_file(fs::path(GPUNODE_SOURCE_DIR) / "data/profiles/dgx-h200.yaml", Path("node.yaml"));
  const std::string f = Path("features.d/gpunode");
  const std::string script = "wait_for() { i=0; while ! grep -q \"$1\" " + f +
                             " 2>/dev/null; do i=$((i+1)); "
                             "[ $i -gt 200 ] && { echo \"TIMEOUT $1\"; return 1; }; sleep 0.1; "
                             "done; echo \"SEEN $1\"; }\n" +
                             Bin() + " --simulate " + Path("node.yaml") +
                             " labels --sleep-interval 1s --output " + f +
                             " &\n"
                             "pid=$!\n"
                             "wait_for 'gpunode.io/gpu.healthy-count=8'\n"
                             // GPU 3 falls off the bus: NVML answers GPU_IS_LOST for it.
                             "sed -i 's/minor: 3,/minor: 3, lost: true,/' " +
                             Path("node.yaml") +
                             "\n"
                             "wait_for 'gpunode.io/gpu.healthy-count=7'\n"
                             "wait_for 'gpunode.io/doctor.first-finding=driver.gpu-lost'\n"
                             // GPU 7 vanishes from NVML altogether (still on the PCI bus).
                             "sed -i '/minor: 7,/d' " +
                             Path("node.yaml") +
                             "\n"
                             "wait_for 'nvidia.com/gpu.count=6'\n"
                             "wait_for 'gpunode.io/gpu.unhealthy-count=2'\n"
                             "kill -0 $pid && echo ALIVE\n"
                             "kill -TERM $pid; wait $pid; echo \"EXIT $?\"\n"
                             "[ -e " +
                             f + " ] && echo LEFT-BEHIND || echo REMOVED\n";
  Write("loop.sh", script);
  Result r = RunShell("bash " + Path("loop.sh"));
  EXPECT_THAT(r.out, Not(HasSubstr("TIMEOUT"))) << r.out;
  EXPECT_THAT(r.out, HasSubstr("SEEN nvidia.com/gpu.count=6")) << r.out;
  EXPECT_THAT(r.out, HasSubstr("ALIVE")) << r.out;
  EXPECT_THAT(r.out, HasSubstr("EXIT 0")) << r.out;
  EXPECT_THAT(r.out, HasSubstr("REMOVED")) << r.out;
  EXPECT_THAT(r.out, HasSubstr("received Terminated")) << r.out;
}

// An infinite interval labels once and waits: SIGHUP relabels (and rereads the config), SIGINT
// removes the file.
TEST_F(LabelsCliTest, AnInfiniteIntervalRelabelsOnSighupAndCleansUpOnSigint) {
  fs::copy_file(fs::path(GPUNODE_SOURCE_DIR) / "data/profiles/dgx-h200.yaml", Path("node.yaml"));
  const std::string f = Path("out/labels");
  const std::string script = "wait_for() { i=0; while ! grep -q \"$1\" " + f +
                             " 2>/dev/null; do i=$((i+1)); "
                             "[ $i -gt 200 ] && { echo \"TIMEOUT $1\"; return 1; }; sleep 0.1; "
                             "done; echo \"SEEN $1\"; }\n" +
                             Bin() + " --simulate " + Path("node.yaml") +
                             " labels --sleep-interval infinite --no-timestamp --output " + f +
                             " &\n"
                             "pid=$!\n"
                             "wait_for 'nvidia.com/gpu.count=8'\n"
                             "sed -i '/minor: 7,/d' " +
                             Path("node.yaml") +
                             "\n"
                             "sleep 0.3; grep -q 'nvidia.com/gpu.count=8' " +
                             f +
                             " && echo STILL-8\n"
                             "kill -HUP $pid\n"
                             "wait_for 'nvidia.com/gpu.count=7'\n"
                             "kill -INT $pid; wait $pid; echo \"EXIT $?\"\n"
                             "[ -e " +
                             f + " ] && echo LEFT-BEHIND || echo REMOVED\n";
  Write("loop.sh", script);
  Result r = RunShell("bash " + Path("loop.sh"));
  EXPECT_THAT(r.out, Not(HasSubstr("TIMEOUT"))) << r.out;
  EXPECT_THAT(r.out, HasSubstr("STILL-8")) << r.out;  // nothing relabels without a signal
  EXPECT_THAT(r.out, HasSubstr("SIGHUP: configuration reloaded")) << r.out;
  EXPECT_THAT(r.out, HasSubstr("SEEN nvidia.com/gpu.count=7")) << r.out;
  EXPECT_THAT(r.out, HasSubstr("EXIT 0")) << r.out;
  EXPECT_THAT(r.out, HasSubstr("REMOVED")) << r.out;
}

TEST_F(LabelsCliTest, HelpListsTheFlagsAndTheirEnvironmentVariables) {
  Result r = RunGpunode("labels --help");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  for (const char* s :
       {"--print", "--output", "--oneshot", "--sleep-interval", "--no-timestamp", "--config-file",
        "--mig-strategy", "GFD_SLEEP_INTERVAL", "docs/labels.md"}) {
    EXPECT_THAT(r.out, HasSubstr(s)) << s;
  }
}

}  // namespace
