// The metric catalogue and the counters-CSV parser (dcgm-exporter's -f file format).
#include "src/exporter/counters.h"

#include <set>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/exporter/catalogue.h"
#include "test/testing/status_matchers.h"

namespace gpunode::exporter {
namespace {

using ::testing::HasSubstr;

TEST(CatalogueTest, EveryFieldIsFoundByItsExactName) {
  for (const FieldInfo& f : Catalogue()) {
    ASSERT_EQ(FindField(f.name), &f) << f.name;
    EXPECT_EQ(&Field(f.id), &f);
    EXPECT_FALSE(f.help.empty()) << f.name;
    EXPECT_FALSE(f.nvml_source.empty()) << f.name;
  }
  EXPECT_EQ(FindField("DCGM_FI_DEV_GPU_TEMP")->dcgm_field_id, 150);
  EXPECT_EQ(FindField("dcgm_fi_dev_gpu_temp"), nullptr);
  EXPECT_EQ(FindField("DCGM_FI_DEV_NOPE"), nullptr);
}

TEST(CatalogueTest, KeepsDcgmExportersTypesHelpAndUnits) {
  EXPECT_EQ(Field(FieldId::kTotalEnergyConsumption).type, MetricType::kCounter);
  EXPECT_EQ(Field(FieldId::kTotalEnergyConsumption).help,
            "Total energy consumption since boot (in mJ).");
  EXPECT_EQ(Field(FieldId::kNvlinkBandwidthTotal).type,
            MetricType::kCounter);  // a rate, typed counter upstream
  EXPECT_EQ(Field(FieldId::kRowRemapFailure).type, MetricType::kGauge);
  EXPECT_EQ(Field(FieldId::kDriverVersion).type, MetricType::kLabel);
  EXPECT_EQ(Field(FieldId::kPowerUsage).unit, "W");
  EXPECT_TRUE(Field(FieldId::kPowerUsage).is_double);
  EXPECT_FALSE(Field(FieldId::kTotalEnergyConsumption).is_double);
  EXPECT_TRUE(Field(FieldId::kProfGrEngineActive).is_double);
  EXPECT_EQ(Field(FieldId::kProfPcieTxBytes).type, MetricType::kGauge);
}

TEST(CatalogueTest, MetricTypesRoundTrip) {
  for (MetricType t : {MetricType::kGauge, MetricType::kCounter, MetricType::kLabel}) {
    EXPECT_EQ(ParseMetricType(MetricTypeName(t)), t);
  }
  EXPECT_EQ(ParseMetricType("Gauge"), std::nullopt);
  EXPECT_EQ(ParseMetricType("histogram"), std::nullopt);
}

TEST(CountersTest, TheDefaultSetIsDcgmExportersDefaultCountersCsv) {
  const std::vector<Counter>& counters = DefaultCounters();
  ASSERT_EQ(counters.size(), 26u);
  int dev = 0, prof = 0, labels = 0;
  std::set<std::string_view> names;
  for (const Counter& c : counters) {
    names.insert(c.field->name);
    if (c.type == MetricType::kLabel) {
      ++labels;
    } else if (c.field->name.starts_with("DCGM_FI_DEV_")) {
      ++dev;
    } else if (c.field->name.starts_with("DCGM_FI_PROF_")) {
      ++prof;
    }
    // The CSV and the catalogue agree on type and HELP.
    EXPECT_EQ(c.type, c.field->type) << c.field->name;
    EXPECT_EQ(c.help, c.field->help) << c.field->name;
  }
  EXPECT_EQ(dev, 20);
  EXPECT_EQ(prof, 5);
  EXPECT_EQ(labels, 1);
  for (const FieldInfo& f : Catalogue())
    EXPECT_EQ(names.count(f.name) == 1, f.default_enabled) << f.name;
  EXPECT_EQ(counters.front().field->id, FieldId::kSmClock);
  EXPECT_EQ(counters.back().field->id, FieldId::kProfPcieRxBytes);
}

TEST(CountersTest, ParsesCommentsBlankLinesSpacesTabsAndCrlf) {
  auto parsed = ParseCounters(
      "# DCGM FIELD, Prometheus metric type, help message\r\n"
      "\r\n"
      "   \n"
      "DCGM_FI_DEV_GPU_TEMP ,\tgauge , GPU temperature (in C).\r\n"
      "  # indented comment, with, commas\n"
      "DCGM_FI_DEV_POWER_USAGE, counter, My own help: (watts) \\ \"quoted\"\n"
      "DCGM_FI_DRIVER_VERSION, label, Driver Version\n"
      "DCGM_FI_DEV_FB_USED, gauge,\n");
  ASSERT_OK(parsed) << parsed.status();
  ASSERT_EQ(parsed->size(), 4u);
  EXPECT_EQ((*parsed)[0].field->id, FieldId::kGpuTemp);
  EXPECT_EQ((*parsed)[0].type, MetricType::kGauge);
  EXPECT_EQ((*parsed)[0].help, "GPU temperature (in C).");
  // The CSV's type and help win over the catalogue's (dcgm-exporter renders the CSV's).
  EXPECT_EQ((*parsed)[1].type, MetricType::kCounter);
  EXPECT_EQ((*parsed)[1].help, "My own help: (watts) \\ \"quoted\"");
  EXPECT_EQ((*parsed)[2].type, MetricType::kLabel);
  EXPECT_EQ((*parsed)[3].help, "");
}

TEST(CountersTest, AnEmptyFileSelectsNothing) {
  auto parsed = ParseCounters("# nothing\n\n");
  ASSERT_OK(parsed);
  EXPECT_TRUE(parsed->empty());
  EXPECT_TRUE(ParseCounters("")->empty());
}

struct BadCase {
  std::string name;
  std::string csv;
  std::string message;
};

class CountersRejectTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(CountersRejectTest, IsInvalidArgumentNamingTheLineAndTheProblem) {
  const BadCase& c = GetParam();
  auto parsed = ParseCounters("# header\n\n" + c.csv + "\n", "my.csv");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(parsed.status().message(), c.message);
}

INSTANTIATE_TEST_SUITE_P(
    BadInput, CountersRejectTest,
    ::testing::Values(
        BadCase{"OneComma", "DCGM_FI_DEV_GPU_TEMP, gauge",
                "my.csv line 3: expected 3 comma-separated fields (DCGM field, Prometheus type, "
                "help), got 2 in "
                "'DCGM_FI_DEV_GPU_TEMP, gauge'"},
        BadCase{"NoComma", "DCGM_FI_DEV_GPU_TEMP",
                "my.csv line 3: expected 3 comma-separated fields (DCGM field, Prometheus type, "
                "help), got 1 in "
                "'DCGM_FI_DEV_GPU_TEMP'"},
        BadCase{"ThreeCommas", "DCGM_FI_DEV_GPU_TEMP, gauge, GPU temperature, in C.",
                "my.csv line 3: expected 3 comma-separated fields (DCGM field, Prometheus type, "
                "help), got 4 in "
                "'DCGM_FI_DEV_GPU_TEMP, gauge, GPU temperature, in C.'"},
        BadCase{"UnknownField", "DCGM_FI_DEV_NOPE, gauge, nope",
                "my.csv line 3: unknown field 'DCGM_FI_DEV_NOPE'"},
        BadCase{"CommentedUpstreamField", "DCGM_FI_DEV_POWER_VIOLATION, counter, Throttling",
                "my.csv line 3: unknown field 'DCGM_FI_DEV_POWER_VIOLATION'"},
        BadCase{"ExporterField",
                "DCGM_EXP_XID_ERRORS_COUNT, counter, reported XIDs during last window",
                "my.csv line 3: exporter-computed field 'DCGM_EXP_XID_ERRORS_COUNT' is not "
                "supported yet"},
        BadCase{"EmptyField", " , gauge, help", "my.csv line 3: empty field name"},
        BadCase{"UnknownType", "DCGM_FI_DEV_GPU_TEMP, histogram, GPU temperature (in C).",
                "my.csv line 3: unknown type 'histogram' for DCGM_FI_DEV_GPU_TEMP (want gauge, "
                "counter or label)"},
        BadCase{"UpperCaseType", "DCGM_FI_DEV_GPU_TEMP, Gauge, GPU temperature (in C).",
                "my.csv line 3: unknown type 'Gauge' for DCGM_FI_DEV_GPU_TEMP (want gauge, counter "
                "or label)"},
        BadCase{"NumberAsLabel", "DCGM_FI_DEV_GPU_TEMP, label, GPU temperature (in C).",
                "my.csv line 3: DCGM_FI_DEV_GPU_TEMP is a number and cannot be a label"},
        BadCase{"LabelAsNumber", "DCGM_FI_DRIVER_VERSION, gauge, Driver Version",
                "my.csv line 3: DCGM_FI_DRIVER_VERSION is a string and can only be a label"},
        BadCase{"Duplicate",
                "DCGM_FI_DEV_GPU_TEMP, gauge, a\n# comment\nDCGM_FI_DEV_GPU_TEMP, gauge, b",
                "my.csv line 5: DCGM_FI_DEV_GPU_TEMP is already listed on line 3"}),
    [](const ::testing::TestParamInfo<BadCase>& param_info) { return param_info.param.name; });

}  // namespace
}  // namespace gpunode::exporter
