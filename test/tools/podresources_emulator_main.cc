// podresources_emulator: a stand-in for the kubelet's pod-resources API v1 on machines without a
// kubelet, for end-to-end runs of the exporter's pod attribution. Prints one JSON object per line.
//
//   podresources_emulator --socket PATH --pods FILE
//
// FILE is a JSON array of containers:
//   [{"namespace":"ml","pod":"train-0","container":"main","resource":"nvidia.com/gpu",
//     "devices":["GPU-..."]}, ...]
// It is re-read whenever its modification time or size changes (so a test can edit it); a file
// that does not parse keeps the previous answer. Runs until SIGTERM or SIGINT.
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>

#include "nlohmann/json.hpp"
#include "test/testing/podresources_emulator.h"

namespace {

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop = true; }

struct FileStamp {
  bool exists = false;
  long long mtime_ns = 0;
  long long size = 0;
  bool operator==(const FileStamp& o) const { return exists == o.exists && mtime_ns == o.mtime_ns && size == o.size; }
};

FileStamp Stamp(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {};
  return {true, static_cast<long long>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec,
          static_cast<long long>(st.st_size)};
}

// The response described by `path`, or an error message.
bool Load(const std::string& path, v1::ListPodResourcesResponse* out, std::string* error) {
  std::ifstream in(path);
  if (!in) {
    *error = "cannot open " + path;
    return false;
  }
  std::stringstream text;
  text << in.rdbuf();
  v1::ListPodResourcesResponse resp;
  try {
    const nlohmann::json j = nlohmann::json::parse(text.str());
    if (!j.is_array()) {
      *error = path + ": want a JSON array of containers";
      return false;
    }
    for (const auto& e : j) {
      std::vector<std::string> devices = e.value("devices", std::vector<std::string>{});
      gpunode::testing::PodResourcesEmulator::AddContainer(
          &resp, e.value("namespace", std::string("default")), e.at("pod").get<std::string>(),
          e.value("container", std::string("main")), e.value("resource", std::string("nvidia.com/gpu")), devices);
    }
  } catch (const nlohmann::json::exception& ex) {
    *error = path + ": " + ex.what();
    return false;
  }
  *out = std::move(resp);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::string socket, pods;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--socket") socket = next();
    else if (a == "--pods") pods = next();
    else {
      std::cerr << "usage: podresources_emulator --socket PATH --pods FILE\n";
      return 3;
    }
  }
  if (socket.empty() || pods.empty()) {
    std::cerr << "podresources_emulator: --socket and --pods are required\n";
    return 3;
  }
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGINT, OnSignal);

  gpunode::testing::PodResourcesEmulator emulator(socket);
  FileStamp loaded;
  auto reload = [&] {
    const FileStamp now = Stamp(pods);
    if (now == loaded) return;
    loaded = now;
    v1::ListPodResourcesResponse resp;
    std::string error;
    if (Load(pods, &resp, &error)) {
      const int n = resp.pod_resources_size();
      emulator.SetResponse(std::move(resp));
      std::cout << nlohmann::json{{"event", "loaded"}, {"pods", n}}.dump() << std::endl;
    } else {
      std::cout << nlohmann::json{{"event", "load-error"}, {"error", error}}.dump() << std::endl;
    }
  };
  reload();
  if (!emulator.Start()) {
    std::cerr << "podresources_emulator: cannot serve " << socket << "\n";
    return 2;
  }
  std::cout << nlohmann::json{{"event", "serving"}, {"socket", socket}}.dump() << std::endl;
  while (!g_stop) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    reload();
  }
  emulator.Stop();
  std::cout << nlohmann::json{{"event", "stopped"}, {"list_calls", emulator.list_calls()}}.dump() << std::endl;
  return 0;
}
