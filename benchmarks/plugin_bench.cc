// plugin_bench: speed and footprint of `gpunode plugin` on a simulated node, through real gRPC from
// a kubelet stand-in (test/testing/kubelet_emulator.h), the way the kubelet calls it.
//
//   plugin_bench --gpunode build/bin/gpunode [--profile data/profiles/dgx-h200.yaml] [--runs 2000]
//                [--idle-s 2] [--starts 5] [--kubelet-dir DIR]
//                [--nvidia-plugin PATH --sim-libdir DIR]   (NVIDIA's plugin instead of gpunode's)
//                [--host-root ROOT --sim-libdir DIR]       (gpunode on ROOT, not --simulate)
//
// Measures: process start -> registered (--starts times, median); Allocate and GetPreferredAllocation round trips
// (median, p99); XID 79 in the profile -> Unhealthy in ListAndWatch (up to 10 times, each on
// another GPU; gpunode recovers a GPU after a 300 ms quiet period, NVIDIA's plugin never does, so
// with it each XID goes to a GPU not hit before); resident memory and CPU time over --idle-s
// seconds of registered idleness. Prints a JSON document.
//
// With --nvidia-plugin, PATH (NVIDIA's nvidia-device-plugin, test/peers/build.sh) runs on the same
// simulated node through the simulated NVML: DIR holds libnvidia-ml.so.1 -> libgpunode-simnvml.so.
// With --host-root, gpunode reads the node from ROOT (written by `gpunode sim hostroot`) with the
// same simulated NVML, instead of --simulate (which writes a host root at every start).
// NVIDIA's socket folder is fixed (/var/lib/kubelet/device-plugins), so run that inside
// test/peers/plugin_ns.sh with --kubelet-dir /var/lib/kubelet/device-plugins
// (benchmarks/peers_bench.py does).
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

// utime + stime of `pid`, in clock ticks (/proc/PID/stat fields 14 and 15).
double CpuTicks(pid_t pid) {
  const std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream in(stat.substr(close + 2));
  std::string field;
  double utime = 0, stime = 0;
  for (int i = 3; i <= 15 && in >> field; ++i) {
    if (i == 14) utime = std::atof(field.c_str());
    if (i == 15) stime = std::atof(field.c_str());
  }
  return utime + stime;
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
  std::string nvidia_plugin, sim_libdir, kubelet_dir, host_root;
  int runs = 2000, idle_s = 2, starts = 5;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--gpunode" && i + 1 < argc) gpunode = argv[++i];
    else if (a == "--profile" && i + 1 < argc) profile = argv[++i];
    else if (a == "--runs" && i + 1 < argc) runs = std::atoi(argv[++i]);
    else if (a == "--idle-s" && i + 1 < argc) idle_s = std::atoi(argv[++i]);
    else if (a == "--starts" && i + 1 < argc) starts = std::max(1, std::atoi(argv[++i]));
    else if (a == "--kubelet-dir" && i + 1 < argc) kubelet_dir = argv[++i];
    else if (a == "--nvidia-plugin" && i + 1 < argc) nvidia_plugin = argv[++i];
    else if (a == "--sim-libdir" && i + 1 < argc) sim_libdir = argv[++i];
    else if (a == "--host-root" && i + 1 < argc) host_root = argv[++i];
    else {
      std::cerr << "usage: plugin_bench --gpunode PATH [--profile FILE] [--runs N] [--idle-s S] [--starts N] [--kubelet-dir DIR]\n"
                   "                    [--nvidia-plugin PATH --sim-libdir DIR] [--host-root ROOT --sim-libdir DIR]\n";
      return 3;
    }
  }
  const bool nvidia = !nvidia_plugin.empty();
  if ((nvidia || !host_root.empty()) && sim_libdir.empty()) {
    std::cerr << "plugin_bench: --nvidia-plugin and --host-root need --sim-libdir (a folder with libnvidia-ml.so.1)\n";
    return 3;
  }
  if (gpunode.empty()) gpunode = std::string(GPUNODE_BIN_DIR) + "/gpunode";
  const fs::path dir = fs::temp_directory_path() / ("gpn-bench-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "dp");
  const std::string kdir = kubelet_dir.empty() ? (dir / "dp").string() : kubelet_dir;
  const std::string prof = (dir / "profile.yaml").string();
  std::string text = ReadFile(profile);
  std::ofstream(prof) << text;

  // One plugin process: fork + exec with the environment for the chosen plugin.
  auto launch = [&]() -> pid_t {
    pid_t child = ::fork();
    if (child != 0) return child;
    ::setenv("GPUNODE_SIM_RELOAD_MS", "0", 1);
    std::freopen((dir / "plugin.log").c_str(), "w", stderr);
    std::freopen((dir / "plugin.out").c_str(), "w", stdout);
    if (nvidia) {
      ::setenv("GPUNODE_SIM_PROFILE", prof.c_str(), 1);
      // The simulated NVML first; its own libraries wherever the caller found them.
      const char* inherited = std::getenv("LD_LIBRARY_PATH");
      const std::string path = inherited != nullptr && *inherited != '\0' ? sim_libdir + ":" + inherited : sim_libdir;
      ::setenv("LD_LIBRARY_PATH", path.c_str(), 1);
      const std::string socket = "--kubelet-socket=" + kdir + "/kubelet.sock";
      ::execl(nvidia_plugin.c_str(), nvidia_plugin.c_str(), socket.c_str(), nullptr);
    } else if (!host_root.empty()) {
      // The node's files from ROOT (as NVIDIA's plugin reads them), NVML from the simulated library.
      const std::string lib = fs::canonical(fs::path(sim_libdir) / "libnvidia-ml.so.1").string();
      ::setenv("GPUNODE_SIM_PROFILE", prof.c_str(), 1);
      ::setenv("GPUNODE_NVML_LIBRARY", lib.c_str(), 1);
      ::setenv("GPUNODE_CUDA_LIBRARY", lib.c_str(), 1);
      ::execl(gpunode.c_str(), gpunode.c_str(), "--host-root", host_root.c_str(), "plugin", "--kubelet-dir",
              kdir.c_str(), "--health-recovery", "300ms", nullptr);
    } else {
      ::execl(gpunode.c_str(), gpunode.c_str(), "--simulate", prof.c_str(), "plugin", "--kubelet-dir", kdir.c_str(),
              "--health-recovery", "300ms", nullptr);
    }
    ::_exit(127);
  };
  auto stop = [](pid_t child) {
    ::kill(child, SIGTERM);
    int status = 0;
    ::waitpid(child, &status, 0);
    return status;
  };
  nlohmann::json out;
  out["plugin"] = nvidia ? "nvidia-device-plugin" : "gpunode";
  out["profile"] = profile;
  const std::string res = "nvidia.com/gpu";
  // Process start -> registered, `starts` times (a fresh kubelet stand-in each time); the last
  // process stays for the rest.
  std::vector<double> starts_ms;
  std::unique_ptr<gpunode::testing::KubeletEmulator> kp;
  pid_t pid = -1;
  for (int n = 0; n < starts; ++n) {
    if (pid > 0) stop(pid);
    kp = std::make_unique<gpunode::testing::KubeletEmulator>(kdir);
    if (!kp->Start()) return 2;
    const auto t0 = steady_clock::now();
    pid = launch();
    if (!kp->WaitFor(res, [](const auto& r) { return r.devices_size() > 0; }, seconds(30))) {
      std::cerr << "the plugin did not register:\n" << ReadFile((dir / "plugin.log").string());
      ::kill(pid, SIGTERM);
      return 1;
    }
    starts_ms.push_back(duration_cast<microseconds>(kp->last_registration() - t0).count() / 1000.0);
  }
  gpunode::testing::KubeletEmulator& k = *kp;
  out["start_to_registered"] = Summary(starts_ms);
  out["start_to_registered_ms"] = out["start_to_registered"]["median_ms"];
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

  // Idle: registered, nothing asked; CPU time (user + system) over the window.
  const double ticks0 = CpuTicks(pid);
  const auto w0 = steady_clock::now();
  std::this_thread::sleep_for(seconds(idle_s));
  const double window_s = duration_cast<microseconds>(steady_clock::now() - w0).count() / 1e6;
  const double cpu_s = (CpuTicks(pid) - ticks0) / static_cast<double>(::sysconf(_SC_CLK_TCK));
  out["idle"] = {{"VmRSS_kB", StatusKb(pid, "VmRSS")}, {"RssAnon_kB", StatusKb(pid, "RssAnon")},
                 {"RssFile_kB", StatusKb(pid, "RssFile")}, {"Threads", StatusKb(pid, "Threads")},
                 {"window_s", window_s}, {"cpu_s", cpu_s}, {"cpu_percent", 100.0 * cpu_s / window_s}};

  // XID 79 on GPU i: time until the kubelet sees it Unhealthy, then (gpunode) wait for recovery.
  std::vector<double> xid;
  const int xids = nvidia ? std::min<int>(10, static_cast<int>(ids.size())) : 10;
  for (int i = 0; i < xids; ++i) {
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
    // The GPU's UUID from its profile line (the plugins list devices in their own order).
    const size_t bol = text.rfind('\n', at) + 1;
    const size_t u = text.find("uuid: ", bol);
    if (u == std::string::npos || u > eol) break;
    const size_t u_end = text.find_first_of(",} ", u + 6);
    const std::string id = text.substr(u + 6, u_end - (u + 6));
    auto is = [&](const char* h) {
      return [&, h](const v1beta1::ListAndWatchResponse& r) {
        for (const auto& d : r.devices()) {
          if (d.id() == id) return d.health() == h;
        }
        return false;
      };
    };
    if (!k.WaitFor(res, is("Unhealthy"), seconds(10))) {
      out["xid_error"] = "GPU " + std::to_string(gpu) + " not Unhealthy within 10 s of XID 79";
      break;
    }
    xid.push_back(duration_cast<microseconds>(steady_clock::now() - s).count() / 1000.0);
    if (!nvidia && !k.WaitFor(res, is("Healthy"), seconds(5))) break;
  }
  if (!xid.empty()) out["xid_to_unhealthy"] = Summary(xid);

  const int status = stop(pid);
  out["exit"] = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  k.Stop();
  fs::remove_all(dir);
  std::cout << out.dump(2) << std::endl;
  return 0;
}
