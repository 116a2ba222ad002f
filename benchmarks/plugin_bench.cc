// plugin_bench: speed and footprint of `gpunode plugin` on a simulated node, through real gRPC from
// a kubelet stand-in (test/testing/kubelet_emulator.h), the way the kubelet calls it.
//
//   plugin_bench --gpunode build/bin/gpunode [--profile data/profiles/dgx-h200.yaml] [--runs 2000]
//
// Measures: process start -> registered; Allocate and GetPreferredAllocation round trips
// (median, p99); XID 79 in the profile -> Unhealthy in ListAndWatch (10 times, each on another
// GPU, recovery quiet period 300 ms between); resident memory while registered and idle. Prints
// a JSON document.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "nlohmann/json.hpp"
#include "test/testing/kubelet_emulator.h"

namespace fs = std::filesystem;
using namespace std::chrono;

namespace {

nlohmann::json Summary(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  auto at = [&](double q) { return v[std::min(v.size() - 1, static_cast<size_t>(q * (v.size() - 1) + 0.5))]; };
  return {{"median_ms", at(0.5)}, {"p99_ms", at(0.99)}, {"max_ms", v.back()}, {"runs", v.size()}};
}

std::string ReadFile(const std::string& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

long StatusKb(pid_t pid, const std::string& key) {
  std::istringstream in(ReadFile("/proc/" + std::to_string(pid) + "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) == 0) return std::atol(line.c_str() + key.size() + 1);
  }
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string gpunode, profile = std::string(GPUNODE_SOURCE_DIR) + "/data/profiles/dgx-h200.yaml";
  int runs = 2000;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--gpunode" && i + 1 < argc) gpunode = argv[++i];
    else if (a == "--profile" && i + 1 < argc) profile = argv[++i];
    else if (a == "--runs" && i + 1 < argc) runs = std::atoi(argv[++i]);
    else {
      std::cerr << "usage: plugin_bench --gpunode PATH [--profile FILE] [--runs N]\n";
      return 3;
    }
  }
  if (gpunode.empty()) gpunode = std::string(GPUNODE_BIN_DIR) + "/gpunode";
  const fs::path dir = fs::temp_directory_path() / ("gpn-bench-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "dp");
  const std::string prof = (dir / "profile.yaml").string();
  std::string text = ReadFile(profile);
  std::ofstream(prof) << text;

  gpunode::testing::KubeletEmulator k((dir / "dp").string());
  if (!k.Start()) return 2;
  const auto t0 = steady_clock::now();
  pid_t pid = ::fork();
  if (pid == 0) {
    ::setenv("GPUNODE_SIM_RELOAD_MS", "0", 1);
    const std::string kdir = (dir / "dp").string();
    std::freopen((dir / "plugin.log").c_str(), "w", stderr);
    ::execl(gpunode.c_str(), gpunode.c_str(), "--simulate", prof.c_str(), "plugin", "--kubelet-dir", kdir.c_str(),
            "--health-recovery", "300ms", nullptr);
    ::_exit(127);
  }
  nlohmann::json out;
  out["profile"] = profile;
  const std::string res = "nvidia.com/gpu";
  if (!k.WaitFor(res, [](const auto& r) { return r.devices_size() > 0; }, seconds(30))) {
    std::cerr << "the plugin did not register:\n" << ReadFile((dir / "plugin.log").string());
    ::kill(pid, SIGTERM);
    return 1;
  }
  out["start_to_registered_ms"] = duration_cast<microseconds>(k.last_registration() - t0).count() / 1000.0;
  std::vector<std::string> ids;
  const v1beta1::ListAndWatchResponse first = k.Lists(res).back();
  for (const auto& d : first.devices()) ids.push_back(d.id());

  std::vector<double> alloc, pref;
  for (int i = 0; i < runs; ++i) {
    v1beta1::AllocateResponse resp;
    auto s = steady_clock::now();
    if (!k.Allocate(res, {ids[i % ids.size()]}, &resp).ok()) return 1;
    alloc.push_back(duration_cast<nanoseconds>(steady_clock::now() - s).count() / 1e6);
    std::vector<std::string> got;
    s = steady_clock::now();
    if (!k.Preferred(res, ids, {ids[i % ids.size()]}, static_cast<int>(ids.size() / 2), &got).ok()) return 1;
    pref.push_back(duration_cast<nanoseconds>(steady_clock::now() - s).count() / 1e6);
  }
  out["allocate"] = Summary(alloc);
  out["preferred_allocation"] = Summary(pref);
  out["preferred_allocation"]["size"] = ids.size() / 2;

  std::this_thread::sleep_for(seconds(2));
  out["idle"] = {{"VmRSS_kB", StatusKb(pid, "VmRSS")}, {"RssAnon_kB", StatusKb(pid, "RssAnon")},
                 {"RssFile_kB", StatusKb(pid, "RssFile")}, {"Threads", StatusKb(pid, "Threads")}};

  // XID 79 on GPU (i % n): time until the kubelet sees it Unhealthy, then wait for recovery.
  std::vector<double> xid;
  for (int i = 0; i < 10; ++i) {
    const unsigned gpu = static_cast<unsigned>(i) % ids.size();
    const std::string key = "minor: " + std::to_string(gpu) + ",";
    const size_t at = text.find(key);
    if (at == std::string::npos) break;
    // Each edit adds one more event to that GPU's list (events are delivered once each).
    const std::string ev = "{type: xid, xid: 79}";
    const size_t list = text.find("events: [", at);
    const size_t eol = text.find('\n', at);
    if (list != std::string::npos && list < eol) {
      text.insert(list + 9, ev + ", ");
    } else {
      text.insert(at + key.size(), " events: [" + ev + "],");
    }
    const std::string tmp = prof + ".tmp";
    std::ofstream(tmp) << text;
    const auto s = steady_clock::now();
    fs::rename(tmp, prof);
    const std::string id = ids[gpu];
    auto is = [&](const char* h) {
      return [&, h](const v1beta1::ListAndWatchResponse& r) {
        for (const auto& d : r.devices()) {
          if (d.id() == id) return d.health() == h;
        }
        return false;
      };
    };
    if (!k.WaitFor(res, is("Unhealthy"), seconds(5))) break;
    xid.push_back(duration_cast<microseconds>(steady_clock::now() - s).count() / 1000.0);
    if (!k.WaitFor(res, is("Healthy"), seconds(5))) break;
  }
  if (!xid.empty()) out["xid_to_unhealthy"] = Summary(xid);

  ::kill(pid, SIGTERM);
  int status = 0;
  ::waitpid(pid, &status, 0);
  out["exit"] = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  k.Stop();
  fs::remove_all(dir);
  std::cout << out.dump(2) << std::endl;
  return 0;
}
