// compat_load_bench: the built-in compat data set loaded in-process — the generated tables
// (LoadBuiltin, whole and the CUDA tables `gpunode labels` loads) against the YAML loader on the
// same data/compat.yaml (ParseCompatData, what every load cost before issue 32). Median and p99 of
// N loads each, in microseconds.
//   compat_load_bench [N]   (default 200)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "src/compat/dataset.h"

namespace {

void Time(const char* what, int n, const std::function<bool()>& load) {
  std::vector<double> us;
  if (!load()) {
    std::fprintf(stderr, "compat_load_bench: %s failed\n", what);
    std::exit(1);
  }
  for (int i = 0; i < n; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    load();
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(us.begin(), us.end());
  const double p99 = us[std::min(us.size() - 1, static_cast<size_t>(0.99 * (us.size() - 1) + 0.5))];
  std::printf("%-44s median %9.1f us  p99 %9.1f us  (n=%d)\n", what, us[us.size() / 2], p99, n);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace gpunode::compat;
  const int n = argc > 1 ? std::atoi(argv[1]) : 200;
  std::ifstream in(std::string(GPUNODE_SOURCE_DIR) + "/data/compat.yaml", std::ios::binary);
  std::ostringstream yaml;
  yaml << in.rdbuf();
  Time("LoadBuiltin() (tables, all sections)", n, [] { return LoadBuiltin().ok(); });
  Time("LoadBuiltin(kCudaTables) (what labels loads)", n,
       [] { return LoadBuiltin(Sections::kCudaTables).ok(); });
  Time("ParseCompatData(data/compat.yaml) (YAML)", std::max(1, n / 10),
       [&] { return ParseCompatData(yaml.str(), "data/compat.yaml").ok(); });
  return 0;
}
