// Issue 11, row 12: reading a daemon.json (or any JSON we do not control) with 100 000 keys in one
// object. nlohmann's ordered_json searches the keys already inserted for every new key (quadratic:
// ~20 s for 100 000); gpunode's ParseOrderedJson indexes them while it builds the object.
// Run (release build): build-rel/bin/json_parse_bench --benchmark_repetitions=5
//   --benchmark_report_aggregates_only=true
#include <string>

#include "benchmark/benchmark.h"
#include "nlohmann/json.hpp"
#include "src/base/json.h"

namespace {

std::string ManyKeys(int n) {
  std::string text = "{";
  for (int i = 0; i < n; ++i) {
    if (i) text += ",";
    text += "\"key" + std::to_string(i) + "\": " + std::to_string(i);
  }
  return text + ", \"runtimes\": {}}";
}

void BM_GpunodeParseOrderedJson(benchmark::State& state) {
  const std::string text = ManyKeys(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    auto doc = gpunode::ParseOrderedJson(text, "daemon.json");
    benchmark::DoNotOptimize(doc);
    if (!doc.ok()) state.SkipWithError("parse failed");
  }
  state.SetComplexityN(state.range(0));
}
BENCHMARK(BM_GpunodeParseOrderedJson)->Arg(10000)->Arg(30000)->Arg(100000)->Unit(benchmark::kMillisecond)
    ->Complexity();

// The peer: what gpunode did before (and what any nlohmann::ordered_json user gets).
void BM_NlohmannOrderedJsonParse(benchmark::State& state) {
  const std::string text = ManyKeys(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    auto doc = nlohmann::ordered_json::parse(text);
    benchmark::DoNotOptimize(doc);
  }
  state.SetComplexityN(state.range(0));
}
BENCHMARK(BM_NlohmannOrderedJsonParse)->Arg(10000)->Arg(30000)->Arg(100000)->Unit(benchmark::kMillisecond)
    ->Iterations(1)->Complexity();

// Plain (sorted) objects, for scale: what a std::map-backed document costs.
void BM_GpunodeParseJson(benchmark::State& state) {
  const std::string text = ManyKeys(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    auto doc = gpunode::ParseJson(text, "daemon.json");
    benchmark::DoNotOptimize(doc);
  }
}
BENCHMARK(BM_GpunodeParseJson)->Arg(100000)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
