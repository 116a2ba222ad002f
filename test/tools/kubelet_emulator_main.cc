// kubelet_emulator: a stand-in for the kubelet's device manager on machines without a kubelet
// (the GPU machine), for proofs and benchmarks of `gpunode plugin`. Prints one JSON object per line.
//
//   kubelet_emulator --dir DIR [--timeout-s 30] [--allocate N] [--preferred N] [--restart]
//
// Serves DIR/kubelet.sock, waits for the plugin to register, prints its device list, calls
// GetPreferredAllocation and Allocate for N devices, then (with --restart) restarts like a kubelet
// (deleting every socket in DIR) and measures how long the plugin takes to register again.
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string>

#include "nlohmann/json.hpp"
#include "test/testing/kubelet_emulator.h"

using namespace std::chrono;

int main(int argc, char** argv) {
  std::string dir;
  int timeout_s = 30, allocate = 0, preferred = 0;
  bool restart = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--dir") dir = next();
    else if (a == "--timeout-s") timeout_s = std::atoi(next().c_str());
    else if (a == "--allocate") allocate = std::atoi(next().c_str());
    else if (a == "--preferred") preferred = std::atoi(next().c_str());
    else if (a == "--restart") restart = true;
    else {
      std::cerr << "usage: kubelet_emulator --dir DIR [--timeout-s S] [--allocate N] [--preferred N] [--restart]\n";
      return 3;
    }
  }
  if (dir.empty()) {
    std::cerr << "kubelet_emulator: --dir is required\n";
    return 3;
  }
  gpunode::testing::KubeletEmulator k(dir);
  const auto start = steady_clock::now();
  if (!k.Start()) {
    std::cerr << "kubelet_emulator: cannot serve " << k.socket() << "\n";
    return 2;
  }
  auto ms = [](auto d) { return duration_cast<microseconds>(d).count() / 1000.0; };
  if (!k.WaitForRegistrations(1, seconds(timeout_s))) {
    std::cout << nlohmann::json{{"event", "timeout"}, {"waited_s", timeout_s}}.dump() << std::endl;
    return 1;
  }
  std::cout << nlohmann::json{{"event", "registered"}, {"after_ms", ms(k.last_registration() - start)}}.dump()
            << std::endl;
  const std::string res = "nvidia.com/gpu";
  if (!k.WaitFor(res, [](const auto& r) { return r.devices_size() > 0; }, seconds(5))) {
    std::cout << nlohmann::json{{"event", "no-list"}}.dump() << std::endl;
    return 1;
  }
  auto list = k.Lists(res).back();
  nlohmann::json devs = nlohmann::json::array();
  std::vector<std::string> ids;
  for (const auto& d : list.devices()) {
    nlohmann::json j = {{"id", d.id()}, {"health", d.health()}};
    if (d.topology().nodes_size() > 0) j["numa"] = d.topology().nodes(0).id();
    devs.push_back(j);
    ids.push_back(d.id());
  }
  std::cout << nlohmann::json{{"event", "list"}, {"resource", res}, {"devices", devs}}.dump() << std::endl;
  if (preferred > 0) {
    std::vector<std::string> got;
    const auto t = steady_clock::now();
    grpc::Status st = k.Preferred(res, ids, {}, preferred, &got);
    std::cout << nlohmann::json{{"event", "preferred"}, {"size", preferred}, {"ok", st.ok()},
                                {"error", st.error_message()}, {"devices", got}, {"ms", ms(steady_clock::now() - t)}}
                     .dump()
              << std::endl;
  }
  if (allocate > 0) {
    std::vector<std::string> want(ids.begin(), ids.begin() + std::min<size_t>(allocate, ids.size()));
    v1beta1::AllocateResponse resp;
    const auto t = steady_clock::now();
    grpc::Status st = k.Allocate(res, want, &resp);
    nlohmann::json envs = nlohmann::json::object();
    if (st.ok() && resp.container_responses_size() > 0) {
      for (const auto& [key, value] : resp.container_responses(0).envs()) envs[key] = value;
    }
    std::cout << nlohmann::json{{"event", "allocate"}, {"ids", want}, {"ok", st.ok()}, {"error", st.error_message()},
                                {"envs", envs}, {"ms", ms(steady_clock::now() - t)}}
                     .dump()
              << std::endl;
  }
  if (restart) {
    const auto t = steady_clock::now();
    k.Restart();
    const bool again = k.WaitForRegistrations(2, seconds(10));
    std::cout << nlohmann::json{{"event", "kubelet-restart"}, {"re_registered", again},
                                {"after_ms", again ? ms(k.last_registration() - t) : -1.0}}
                     .dump()
              << std::endl;
    if (!again) return 1;
  }
  return 0;
}
