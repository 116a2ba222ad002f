// fleet_bench: how long `gpunode fleet` takes to answer for a recorded fleet (default the 200-node
// fixture). In-process: parse the NodeList text + Analyze + render (JSON document, table and HTML
// page), per run. End to end: `gpunode fleet --from FILE -o json > /dev/null` as a child process
// (fork + exec + dynamic loading + the same work). Prints median, p99 and max of each in ms; the
// target (issue 13) is < 200 ms for 200 nodes. Results: benchmarks/results/fleet-*.md.
//
//   fleet_bench [--fixture FILE] [--gpunode BIN] [--runs N]
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "src/base/json.h"
#include "src/fleet/fleet.h"
#include "src/fleet/render.h"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

struct Stats {
  double median, p99, max;
};

Stats Summarise(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  const size_t p99 = std::min(n - 1, static_cast<size_t>(0.99 * static_cast<double>(n) + 0.5));
  return {n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2, v[p99], v.back()};
}

}  // namespace

int main(int argc, char** argv) {
  std::string fixture = std::string(GPUNODE_SOURCE_DIR) + "/test/fixtures/fleet/nodes-200.json";
  std::string bin = std::string(GPUNODE_BIN_DIR) + "/gpunode";
  int runs = 100;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--fixture")) fixture = argv[i + 1];
    else if (!std::strcmp(argv[i], "--gpunode")) bin = argv[i + 1];
    else if (!std::strcmp(argv[i], "--runs")) runs = std::max(1, std::atoi(argv[i + 1]));
  }
  std::ifstream in(fixture);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  if (text.empty()) {
    std::fprintf(stderr, "fleet_bench: cannot read %s\n", fixture.c_str());
    return 2;
  }

  // In-process.
  std::vector<double> total, parse, analyse, render;
  size_t out_bytes = 0;
  int nodes = 0;
  for (int r = 0; r < runs + 3; ++r) {
    const auto t0 = Clock::now();
    auto list = gpunode::fleet::ParseNodeListText(text, "bench");
    if (!list.ok()) {
      std::fprintf(stderr, "fleet_bench: %s\n", std::string(list.status().message()).c_str());
      return 2;
    }
    const auto t1 = Clock::now();
    gpunode::fleet::FleetReport report = gpunode::fleet::Analyze(std::move(*list), "bench");
    const auto t2 = Clock::now();
    const std::string json = gpunode::DumpJson(gpunode::fleet::ToJson(report), 2);
    const std::string table = gpunode::fleet::RenderText(report, true, false);
    const std::string html = gpunode::fleet::RenderHtml(report);
    const auto t3 = Clock::now();
    out_bytes = json.size() + table.size() + html.size();
    nodes = report.summary.nodes;
    if (r < 3) continue;  // warm-up
    parse.push_back(Ms(t1 - t0));
    analyse.push_back(Ms(t2 - t1));
    render.push_back(Ms(t3 - t2));
    total.push_back(Ms(t3 - t0));
  }

  // End to end.
  std::vector<double> e2e;
  int last_rc = -1;
  for (int r = 0; r < runs + 2; ++r) {
    std::vector<std::string> args = {bin, "fleet", "--from", fixture, "-o", "json"};
    std::vector<char*> cargv;
    for (std::string& a : args) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    const auto t0 = Clock::now();
    pid_t pid = 0;
    if (posix_spawn(&pid, bin.c_str(), &fa, nullptr, cargv.data(), environ) != 0) {
      std::fprintf(stderr, "fleet_bench: cannot run %s\n", bin.c_str());
      return 2;
    }
    int status = 0;
    waitpid(pid, &status, 0);
    const auto t1 = Clock::now();
    posix_spawn_file_actions_destroy(&fa);
    last_rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    if (last_rc != 0 && last_rc != 1) {
      std::fprintf(stderr, "fleet_bench: %s exited %d\n", bin.c_str(), last_rc);
      return 2;
    }
    if (r >= 2) e2e.push_back(Ms(t1 - t0));
  }

  auto line = [](const char* what, const std::vector<double>& v) {
    const Stats s = Summarise(v);
    std::printf("%-34s median %8.2f ms   p99 %8.2f ms   max %8.2f ms\n", what, s.median, s.p99, s.max);
  };
  std::printf("fleet_bench: %s (%zu bytes, %d nodes), %d runs each\n", fixture.c_str(), text.size(), nodes, runs);
  line("in-process parse", parse);
  line("in-process analyse", analyse);
  line("in-process render json+table+html", render);
  line("in-process total", total);
  line("end to end (fleet --from -o json)", e2e);
  std::printf("output %zu bytes per run; gpunode exit code %d\n", out_bytes, last_rc);
  const Stats s = Summarise(e2e);
  std::printf("target < 200 ms end to end: %s\n", s.p99 < 200 ? "met (p99)" : "NOT met");
  return 0;
}
