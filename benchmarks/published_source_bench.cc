// published_source_bench: what one /metrics answer costs its page source, without the network:
//   BM_LiveSource   ExporterPageSource::Metrics() over a real Exporter (simulated dgx-h200): a
//                   reference to the page rendered once per sampling pass;
//   BM_FileSource   FilePageSource::Metrics() over the files a PagePublisher wrote from that
//                   exporter: two stat(2) calls (the heartbeat and the page), a lock and the same
//                   reference while nothing changed;
//   BM_FileSourceChanged  the same when the page file was replaced before each call (the read
//                   and decode a scrape pays once per sampling pass).
// GPUNODE_SIM_LIBRARY names the simulated NVML (build/bin/libgpunode-simnvml.so).
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "benchmark/benchmark.h"
#include "sim/support/profile.h"
#include "src/exporter/exporter.h"
#include "src/exporter/page_source.h"
#include "src/exporter/publish.h"
#include "src/exporter/published.h"

namespace gpunode::exporter {
namespace {

namespace fs = std::filesystem;

struct Setup {
  fs::path dir;
  std::unique_ptr<gpu::NvmlLibrary> nvml;
  std::unique_ptr<Exporter> exporter;
  std::unique_ptr<ExporterPageSource> live;
  std::unique_ptr<PagePublisher> publisher;

  Setup() {
    dir = fs::temp_directory_path() / ("gpn-published-bench-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    auto profile = sim::ResolveProfile("dgx-h200");
    if (!profile.ok()) Die(profile.status());
    std::ofstream(dir / "profile.yaml") << profile->text;
    ::setenv("GPUNODE_SIM_PROFILE", (dir / "profile.yaml").c_str(), 1);
    const char* lib = std::getenv("GPUNODE_SIM_LIBRARY");
    auto n = gpu::NvmlLibrary::Open(lib != nullptr ? lib : "libgpunode-simnvml.so");
    if (!n.ok()) Die(n.status());
    nvml = *std::move(n);
    ExporterOptions o;
    o.interval = std::chrono::hours(1);
    o.hostname = "dgx-h200-01";
    exporter = std::make_unique<Exporter>(*nvml, std::move(o));
    exporter->Start();
    live = std::make_unique<ExporterPageSource>(*exporter);
    auto d = PublishDir::Open((dir / "published").string());
    if (!d.ok()) Die(d.status());
    publisher = std::make_unique<PagePublisher>(*live, *std::move(d));
    if (Status s = publisher->Start(); !s.ok()) Die(s);
  }
  ~Setup() {
    publisher.reset();
    exporter.reset();
    fs::remove_all(dir);
  }
  static void Die(const Status& s) {
    std::cerr << "published_source_bench: " << s << "\n";
    std::exit(2);
  }
};

Setup& Shared() {
  static Setup* s = new Setup();
  return *s;
}

void BM_LiveSource(benchmark::State& state) {
  ExporterPageSource& live = *Shared().live;
  for (auto _ : state) benchmark::DoNotOptimize(live.Metrics());
}
BENCHMARK(BM_LiveSource);

void BM_FileSource(benchmark::State& state) {
  PublishedDir dir((Shared().dir / "published").string());
  FilePageSource files(dir);
  if (files.Metrics().status != 200) state.SkipWithError("nothing published");
  for (auto _ : state) benchmark::DoNotOptimize(files.Metrics());
  state.counters["reads"] = static_cast<double>(dir.reads());
}
BENCHMARK(BM_FileSource);

void BM_FileSourceChanged(benchmark::State& state) {
  const std::string published = (Shared().dir / "published").string();
  PublishedDir dir(published);
  FilePageSource files(dir);
  auto d = PublishDir::Open(published);
  const Page page = Shared().live->Metrics();
  const std::string encoded = EncodePublished(UnixMillis(), 0, 200, *page.body, *page.gzip);
  for (auto _ : state) {
    state.PauseTiming();
    if (!d->Write("metrics", encoded).ok()) state.SkipWithError("write failed");
    state.ResumeTiming();
    benchmark::DoNotOptimize(files.Metrics());
  }
  state.counters["page_bytes"] = static_cast<double>(page.body->size());
}
BENCHMARK(BM_FileSourceChanged);

}  // namespace
}  // namespace gpunode::exporter

BENCHMARK_MAIN();
