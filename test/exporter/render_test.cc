// The Prometheus text renderer over hand-written snapshots, and promtool's lint of gpunode's own
// metrics (skipped when promtool is not installed: `apt-get install prometheus`).
#include "src/exporter/render.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/status_matchers.h"

namespace gpunode::exporter {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

GpuSample Gpu(unsigned index, std::string uuid, std::string model = "NVIDIA H200") {
  GpuSample g;
  g.index = index;
  g.uuid = std::move(uuid);
  g.pci_bus_id = "00000000:1" + std::to_string(index) + ":00.0";
  g.device = "nvidia" + std::to_string(index);
  g.model_name = std::move(model);
  return g;
}

NodeSnapshot TwoGpus() {
  NodeSnapshot s;
  s.hostname = "node-1";
  s.driver_version = "580.95.05";
  s.timestamp_seconds = 1767225600.25;
  s.collection_duration_seconds = 0.0125;
  GpuSample a = Gpu(0, "GPU-aaaa");
  a.set(FieldId::kGpuTemp, 31);
  a.set(FieldId::kPowerUsage, 74.5);
  a.set(FieldId::kTotalEnergyConsumption, 183920331);
  GpuSample b = Gpu(1, "GPU-bbbb");
  b.set(FieldId::kGpuTemp, 32);
  s.gpus = {a, b};
  return s;
}

std::vector<Counter> Select(const std::string& csv) {
  auto parsed = ParseCounters(csv);
  EXPECT_OK(parsed) << parsed.status();
  return parsed.ok() ? *parsed : std::vector<Counter>{};
}

TEST(EscapeTest, LabelValuesEscapeBackslashQuoteAndNewline) {
  EXPECT_EQ(EscapeLabelValue("plain"), "plain");
  EXPECT_EQ(EscapeLabelValue("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
  EXPECT_EQ(EscapeLabelValue(""), "");
  EXPECT_EQ(EscapeLabelValue("tab\tstays"), "tab\tstays");
}

TEST(EscapeTest, HelpEscapesBackslashAndNewlineButNotQuotes) {
  EXPECT_EQ(EscapeHelp("a\\b\"c\nd"), "a\\\\b\"c\\nd");
}

TEST(FormatTest, DcgmValuesAreIntegersOrSixDecimals) {
  EXPECT_EQ(FormatDcgmValue(1980, false), "1980");
  EXPECT_EQ(FormatDcgmValue(183920331, false), "183920331");
  EXPECT_EQ(FormatDcgmValue(74.5, true), "74.500000");
  EXPECT_EQ(FormatDcgmValue(0.381124, true), "0.381124");
  EXPECT_EQ(FormatDcgmValue(std::nan(""), true), "NaN");
  EXPECT_EQ(FormatDcgmValue(HUGE_VAL, false), "+Inf");
  EXPECT_EQ(FormatDcgmValue(-HUGE_VAL, true), "-Inf");
}

TEST(FormatTest, OwnValuesUseTheShortestRoundTrip) {
  EXPECT_EQ(FormatValue(0.0125), "0.0125");
  EXPECT_EQ(FormatValue(1767225600.25), "1767225600.25");
  EXPECT_EQ(FormatValue(0), "0");
}

TEST(RenderTest, WritesHelpTypeAndOneLinePerGpuWithDcgmExportersLabels) {
  const std::string text =
      RenderMetrics(TwoGpus(), Select("DCGM_FI_DEV_GPU_TEMP, gauge, GPU temperature (in C).\n"));
  EXPECT_THAT(
      text,
      HasSubstr("# HELP DCGM_FI_DEV_GPU_TEMP GPU temperature (in C).\n"
                "# TYPE DCGM_FI_DEV_GPU_TEMP gauge\n"
                "DCGM_FI_DEV_GPU_TEMP{gpu=\"0\",UUID=\"GPU-aaaa\",pci_bus_id=\"00000000:10:00.0\","
                "device=\"nvidia0\",modelName=\"NVIDIA H200\",Hostname=\"node-1\"} 31\n"
                "DCGM_FI_DEV_GPU_TEMP{gpu=\"1\",UUID=\"GPU-bbbb\",pci_bus_id=\"00000000:11:00.0\","
                "device=\"nvidia1\",modelName=\"NVIDIA H200\",Hostname=\"node-1\"} 32\n"));
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n');
}

TEST(RenderTest, TheDriverVersionLabelComesOnlyFromALabelRow) {
  NodeSnapshot s = TwoGpus();
  EXPECT_THAT(RenderMetrics(s, Select("DCGM_FI_DEV_GPU_TEMP, gauge, t\n")),
              Not(HasSubstr("DCGM_FI_DRIVER_VERSION")));
  const std::string text = RenderMetrics(
      s, Select("DCGM_FI_DEV_GPU_TEMP, gauge, t\nDCGM_FI_DRIVER_VERSION, label, Driver Version\n"));
  EXPECT_THAT(text, HasSubstr(",Hostname=\"node-1\",DCGM_FI_DRIVER_VERSION=\"580.95.05\"} 31\n"));
  EXPECT_THAT(text, Not(HasSubstr("# HELP DCGM_FI_DRIVER_VERSION")));
}

TEST(RenderTest, EscapesLabelValuesAndHelp) {
  NodeSnapshot s = TwoGpus();
  s.gpus.resize(1);
  s.gpus[0].model_name = "Odd \"GPU\" \\ name\nline2";
  s.hostname = "host\"x";
  const std::string text = RenderMetrics(s, Select("DCGM_FI_DEV_GPU_TEMP, gauge, back\\slash\n"));
  EXPECT_THAT(text, HasSubstr("# HELP DCGM_FI_DEV_GPU_TEMP back\\\\slash\n"));
  EXPECT_THAT(
      text,
      HasSubstr("modelName=\"Odd \\\"GPU\\\" \\\\ name\\nline2\",Hostname=\"host\\\"x\"} 31\n"));
}

TEST(RenderTest, LeavesOutFieldsNoGpuHasAndGpusWithoutTheField) {
  const std::string text = RenderMetrics(TwoGpus(), DefaultCounters());
  EXPECT_THAT(text, Not(HasSubstr("DCGM_FI_DEV_MEMORY_TEMP")));
  EXPECT_THAT(text, Not(HasSubstr("DCGM_FI_PROF_")));
  EXPECT_THAT(text, HasSubstr("DCGM_FI_DEV_POWER_USAGE{gpu=\"0\""));
  EXPECT_THAT(text, Not(HasSubstr("DCGM_FI_DEV_POWER_USAGE{gpu=\"1\"")));
  EXPECT_THAT(text, HasSubstr("} 74.500000\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter\n"));
}

TEST(RenderTest, FamiliesComeInDcgmFieldIdOrderWhateverTheCsvOrder) {
  const std::string text = RenderMetrics(
      TwoGpus(),
      Select("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION, counter, e\nDCGM_FI_DEV_GPU_TEMP, gauge, t\n"
             "DCGM_FI_DEV_POWER_USAGE, gauge, p\n"));
  const size_t temp = text.find("# HELP DCGM_FI_DEV_GPU_TEMP");
  const size_t power = text.find("# HELP DCGM_FI_DEV_POWER_USAGE");
  const size_t energy = text.find("# HELP DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION");
  ASSERT_NE(energy, std::string::npos);
  EXPECT_LT(temp, power);
  EXPECT_LT(power, energy);
  EXPECT_LT(energy, text.find("# HELP gpunode_gpu_health"));
}

TEST(RenderTest, TheHostnameLabelCanBeRenamedOrLeftOut) {
  RenderOptions lower;
  lower.hostname_label = "hostname";
  EXPECT_THAT(RenderMetrics(TwoGpus(), Select("DCGM_FI_DEV_GPU_TEMP, gauge, t\n"), lower),
              HasSubstr("modelName=\"NVIDIA H200\",hostname=\"node-1\"} 31\n"));
  RenderOptions none;
  none.hostname_label = "";
  const std::string text =
      RenderMetrics(TwoGpus(), Select("DCGM_FI_DEV_GPU_TEMP, gauge, t\n"), none);
  EXPECT_THAT(text, HasSubstr("modelName=\"NVIDIA H200\"} 31\n"));
  EXPECT_THAT(text, Not(HasSubstr("ostname")));
}

TEST(RenderTest, AFailedGpuHasNoDcgmSeriesAndHealthZero) {
  NodeSnapshot s = TwoGpus();
  s.gpus[1].healthy = false;
  s.collection_errors_total["gpu"] = 3;
  s.collection_errors_total["DCGM_FI_DEV_POWER_USAGE"] = 1;
  const std::string text = RenderMetrics(s, DefaultCounters());
  EXPECT_THAT(text, Not(HasSubstr("DCGM_FI_DEV_GPU_TEMP{gpu=\"1\"")));
  EXPECT_THAT(text, HasSubstr("DCGM_FI_DEV_GPU_TEMP{gpu=\"0\""));
  EXPECT_THAT(
      text,
      HasSubstr("gpunode_gpu_health{gpu=\"0\",UUID=\"GPU-aaaa\",pci_bus_id=\"00000000:10:00.0\","
                "device=\"nvidia0\",Hostname=\"node-1\"} 1\n"
                "gpunode_gpu_health{gpu=\"1\",UUID=\"GPU-bbbb\",pci_bus_id=\"00000000:11:00.0\","
                "device=\"nvidia1\",Hostname=\"node-1\"} 0\n"));
  EXPECT_THAT(text,
              HasSubstr("# TYPE gpunode_collection_errors_total counter\n"
                        "gpunode_collection_errors_total{field=\"DCGM_FI_DEV_POWER_USAGE\"} 1\n"
                        "gpunode_collection_errors_total{field=\"gpu\"} 3\n"));
}

TEST(RenderTest, SelfMetricsWithoutErrorsLeaveTheErrorFamilyOut) {
  RenderOptions options;
  options.version = "1.2.3";
  const std::string text = RenderSelfMetrics(TwoGpus(), options);
  EXPECT_THAT(text, Not(HasSubstr("gpunode_collection_errors_total")));
  EXPECT_THAT(text, HasSubstr("# TYPE gpunode_collection_duration_seconds gauge\n"
                              "gpunode_collection_duration_seconds 0.0125\n"));
  EXPECT_THAT(text, HasSubstr("gpunode_last_collection_timestamp_seconds 1767225600.25\n"));
  EXPECT_THAT(text, HasSubstr("gpunode_build_info{version=\"1.2.3\"} 1\n"));
}

// Runs `promtool check metrics` on `text`; returns its exit status and output.
std::pair<int, std::string> Promtool(const std::string& text) {
  const fs::path dir =
      fs::temp_directory_path() / ("gpunode-promtool-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "in.prom", std::ios::binary) << text;
  const std::string cmd = "promtool check metrics < '" + (dir / "in.prom").string() + "' > '" +
                          (dir / "out.txt").string() + "' 2>&1";
  const int rc = std::system(cmd.c_str());
  std::ifstream in(dir / "out.txt");
  std::stringstream out;
  out << in.rdbuf();
  fs::remove_all(dir);
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, out.str()};
}

bool HavePromtool() { return std::system("command -v promtool > /dev/null 2>&1") == 0; }

TEST(PromtoolTest, GpunodesOwnMetricsAreLintClean) {
  if (!HavePromtool()) GTEST_SKIP() << "promtool not installed (apt-get install prometheus)";
  NodeSnapshot s = TwoGpus();
  s.gpus[1].healthy = false;
  s.collection_errors_total["gpu"] = 3;
  s.collection_errors_total["DCGM_FI_DEV_POWER_USAGE"] = 1;
  auto [rc, out] = Promtool(RenderSelfMetrics(s));
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(out, "") << out;
}

TEST(PromtoolTest, TheDcgmFamiliesDrawOnlyTheLintWarningsDcgmExporterDrawsToo) {
  if (!HavePromtool()) GTEST_SKIP() << "promtool not installed (apt-get install prometheus)";
  NodeSnapshot s = TwoGpus();
  s.gpus[0].set(FieldId::kPcieReplayCounter, 0);
  auto [rc, out] = Promtool(RenderMetrics(s, DefaultCounters()));
  // Parsed fine (a parse error would be reported as such); the findings are the known lint ones:
  // counters without _total, `counter` in a name, and the camelCase label modelName.
  EXPECT_THAT(out, Not(HasSubstr("error while linting")));
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    EXPECT_TRUE(line.find("counter metrics should have \"_total\" suffix") != std::string::npos ||
                line.find("metric name should not include type 'counter'") != std::string::npos ||
                line.find("label names should be written in 'snake_case' not 'camelCase'") !=
                    std::string::npos)
        << line;
    EXPECT_THAT(line, HasSubstr("DCGM_FI_")) << line;
  }
  EXPECT_NE(rc, 0);
}

}  // namespace
}  // namespace gpunode::exporter
