// dcgm-exporter's counters CSV (`-f /etc/dcgm-exporter/default-counters.csv`): which fields to
// export, with which Prometheus type and HELP text. Format, one row per line:
//   # a comment (also blank lines)
//   DCGM_FI_DEV_GPU_TEMP, gauge, GPU temperature (in C).
// Fields are trimmed of spaces and tabs. The parser is strict: a row without exactly two commas,
// a field gpunode does not know, an unknown type, a field listed twice, or a `label` row for a
// numeric field (or a number row for a label field) is InvalidArgument naming the line.
// Quoted CSV fields are not supported (dcgm-exporter's files have none).
#ifndef GPUNODE_EXPORTER_COUNTERS_H_
#define GPUNODE_EXPORTER_COUNTERS_H_

#include <string>
#include <string_view>
#include <vector>

#include "src/base/status.h"
#include "src/exporter/catalogue.h"

namespace gpunode::exporter {

// One selected field: the type and HELP the CSV gives (dcgm-exporter renders those, not its
// own defaults).
struct Counter {
  const FieldInfo* field = nullptr;
  MetricType type = MetricType::kGauge;
  std::string help;
};

// Rows in file order. `source` names the input in errors ("default-counters.csv line 7: ...").
StatusOr<std::vector<Counter>> ParseCounters(std::string_view csv,
                                             std::string_view source = "counters");

// dcgm-exporter's etc/default-counters.csv (enabled rows and HELP texts verbatim; 20 DCGM_FI_DEV_*
// fields, 5 DCGM_FI_PROF_* fields and the DCGM_FI_DRIVER_VERSION label).
std::string_view DefaultCountersCsv();
// ParseCounters(DefaultCountersCsv()).
const std::vector<Counter>& DefaultCounters();

}  // namespace gpunode::exporter

#endif  // GPUNODE_EXPORTER_COUNTERS_H_
