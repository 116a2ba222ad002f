// dra_kubelet: a stand-in for the kubelet's DRA manager and the scheduler's allocation on machines
// without Kubernetes (the GPU machine), for proofs and benchmarks of `gpunode dra-plugin`. Serves an
// API server stand-in (test/testing/fake_api_server.h: the Node, the ResourceSlices the plugin
// publishes, ResourceClaims) and the kubelet's plugin registry; prints one JSON object per line.
//
//   dra_kubelet --dir DIR --node NAME [--device NAME] [--timeout-s 60] [--bench N] [--hold-file F] [--config JSON]
//
// Writes DIR/kubeconfig (for `gpunode dra-plugin --kubeconfig`), watches DIR/reg for the plugin's
// registration, prints the ResourceSlices it published, allocates --device (default: the first
// device) to a ResourceClaim as the scheduler would, calls NodePrepareResources and prints the
// answer with its latency (first, with --bench N, it prepares and unprepares N one-device claims
// of that device and prints p50/p99); --config JSON gives that claim NVIDIA's opaque parameters
// (a GpuConfig: its sharing); with --hold-file waits until that file exists (the caller ran its
// container, looked at the GPU) before NodeUnprepareResources.
//
//   dra_kubelet --socket SOCKET --claims FILE
//
// The benchmark beside a real kubelet (test/peers/dra_test.sh): the plugin at SOCKET (its node
// service, registered with that kubelet) prepares and unprepares, one after the other, each claim of
// FILE ("<uid> <namespace> <name>" per line: ResourceClaims the caller allocated in the real API
// server as the scheduler would); prints p50/p99 of each call.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "nlohmann/json.hpp"
#include "test/testing/fake_api_server.h"
#include "test/testing/kubelet_dra_emulator.h"

using namespace std::chrono;
using json = nlohmann::json;

namespace {

constexpr char kDriver[] = "gpu.nvidia.com";
constexpr char kSlices[] = "/apis/resource.k8s.io/v1/resourceslices";

std::string Uid(int i) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "6f1c2a3b-0000-4000-8000-%012d", i);
  return buf;
}

json Claim(const std::string& name, const std::string& uid, const std::string& node, const std::string& device,
           const json& parameters = nullptr) {
  json config = json::array();
  if (!parameters.is_null()) {
    config.push_back({{"source", "FromClaim"}, {"requests", json::array({"gpu"})},
                      {"opaque", {{"driver", kDriver}, {"parameters", parameters}}}});
  }
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "ResourceClaim"},
          {"metadata", {{"name", name}, {"namespace", "default"}, {"uid", uid}}},
          {"spec", {{"devices", {{"requests", json::array({{{"name", "gpu"}, {"exactly", {{"deviceClassName", kDriver}}}}})}}}}},
          {"status",
           {{"allocation",
             {{"devices",
               {{"results", json::array({{{"request", "gpu"}, {"driver", kDriver}, {"pool", node}, {"device", device}}})},
                {"config", config}}}}}}}};
}

void Print(const json& j) { std::cout << j.dump() << std::endl; }

double Ms(steady_clock::duration d) { return duration<double, std::milli>(d).count(); }

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5))];
}

json Summary(const std::vector<double>& v) {
  return {{"p50", Percentile(v, 0.5)}, {"p99", Percentile(v, 0.99)}, {"max", Percentile(v, 1.0)}};
}

// --socket mode (see the header comment).
int BenchSocket(const std::string& socket, const std::string& claims_file) {
  std::vector<gpunode::testing::DraClaim> claims;
  std::ifstream in(claims_file);
  std::string uid, ns, name;
  while (in >> uid >> ns >> name) claims.push_back({uid, ns, name, {"gpu"}});
  if (claims.empty()) {
    Print({{"event", "error"}, {"error", "no claim in " + claims_file}});
    return 3;
  }
  gpunode::testing::KubeletDraEmulator kubelet(std::filesystem::path(socket).parent_path().string());
  if (!kubelet.Connect(kDriver, socket)) {
    Print({{"event", "error"}, {"error", "no node service answers at " + socket}});
    return 2;
  }
  std::vector<double> prep, unprep;
  for (const auto& c : claims) {
    std::map<std::string, gpunode::testing::DraClaimResult> a;
    auto t0 = steady_clock::now();
    grpc::Status st = kubelet.Prepare(kDriver, {c}, &a);
    prep.push_back(Ms(steady_clock::now() - t0));
    if (!st.ok() || !a[c.uid].error.empty() || a[c.uid].devices.empty()) {
      Print({{"event", "error"}, {"error", "prepare " + c.name + ": " + st.error_message() + a[c.uid].error}});
      return 1;
    }
    std::map<std::string, std::string> e;
    t0 = steady_clock::now();
    st = kubelet.Unprepare(kDriver, {c}, &e);
    unprep.push_back(Ms(steady_clock::now() - t0));
    if (!st.ok() || !e[c.uid].empty()) {
      Print({{"event", "error"}, {"error", "unprepare " + c.name + ": " + st.error_message() + e[c.uid]}});
      return 1;
    }
  }
  Print({{"event", "bench"}, {"n", claims.size()}, {"prepare_ms", Summary(prep)}, {"unprepare_ms", Summary(unprep)}});
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir, node, device, hold_file, socket, claims_file, config;
  int timeout_s = 60, bench = 0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--dir") dir = next();
    else if (a == "--node") node = next();
    else if (a == "--device") device = next();
    else if (a == "--timeout-s") timeout_s = std::atoi(next().c_str());
    else if (a == "--bench") bench = std::atoi(next().c_str());
    else if (a == "--hold-file") hold_file = next();
    else if (a == "--socket") socket = next();
    else if (a == "--config") config = next();
    else if (a == "--claims") claims_file = next();
    else {
      std::cerr << "usage: dra_kubelet --dir DIR --node NAME [--device NAME] [--timeout-s S] [--bench N] [--hold-file F] [--config JSON]\n"
                   "       dra_kubelet --socket SOCKET --claims FILE\n";
      return 3;
    }
  }
  if (!socket.empty()) return BenchSocket(socket, claims_file);
  if (dir.empty() || node.empty()) {
    std::cerr << "dra_kubelet: --dir and --node are required\n";
    return 3;
  }
  const seconds timeout(timeout_s);
  gpunode::testing::FakeApiServer api;
  api.AddNode(node);
  api.ServeCollection(kSlices);
  std::filesystem::create_directories(dir + "/reg");
  api.WriteKubeconfig(dir + "/kubeconfig");
  gpunode::testing::KubeletDraEmulator kubelet(dir + "/reg");
  if (!kubelet.Start()) {
    std::cerr << "dra_kubelet: cannot watch " << dir << "/reg\n";
    return 2;
  }
  Print({{"event", "ready"}, {"kubeconfig", dir + "/kubeconfig"}, {"registry", dir + "/reg"}});
  const auto started = steady_clock::now();
  if (!kubelet.WaitForRegistrations(1, timeout)) {
    Print({{"event", "error"}, {"error", "no plugin registered"}, {"errors", kubelet.errors()}});
    return 2;
  }
  Print({{"event", "registered"}, {"ms", Ms(steady_clock::now() - started)}});
  std::vector<json> slices;
  while (steady_clock::now() - started < timeout) {
    slices = api.Items(kSlices);
    if (!slices.empty()) break;
    std::this_thread::sleep_for(milliseconds(20));
  }
  if (slices.empty()) {
    Print({{"event", "error"}, {"error", "no ResourceSlice published"}});
    return 2;
  }
  Print({{"event", "slices"}, {"ms", Ms(steady_clock::now() - started)}, {"items", slices}});
  if (device.empty()) {
    const json& devices = slices[0]["spec"]["devices"];
    if (devices.empty()) {
      Print({{"event", "error"}, {"error", "the slice has no device"}});
      return 2;
    }
    device = devices[0].value("name", "");
  }
  if (bench > 0) {
    std::vector<double> prep, unprep;
    for (int i = 1; i <= bench; ++i) {
      const std::string name = "bench-" + std::to_string(i);
      api.PutObject("/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/" + name, Claim(name, Uid(i), node, device));
      std::map<std::string, gpunode::testing::DraClaimResult> a;
      auto t0 = steady_clock::now();
      grpc::Status s = kubelet.Prepare(kDriver, {{Uid(i), "default", name, {"gpu"}}}, &a);
      prep.push_back(Ms(steady_clock::now() - t0));
      if (!s.ok() || a[Uid(i)].error != "") {
        Print({{"event", "error"}, {"error", "bench prepare " + name + ": " + s.error_message() + a[Uid(i)].error}});
        return 1;
      }
      std::map<std::string, std::string> e;
      t0 = steady_clock::now();
      s = kubelet.Unprepare(kDriver, {{Uid(i), "default", name, {"gpu"}}}, &e);
      unprep.push_back(Ms(steady_clock::now() - t0));
      if (!s.ok() || e[Uid(i)] != "") {
        Print({{"event", "error"}, {"error", "bench unprepare " + name + ": " + s.error_message() + e[Uid(i)]}});
        return 1;
      }
    }
    Print({{"event", "bench"}, {"n", bench}, {"prepare_ms", Summary(prep)}, {"unprepare_ms", Summary(unprep)}});
  }
  json parameters = nullptr;
  if (!config.empty()) {
    parameters = json::parse(config, nullptr, false);
    if (parameters.is_discarded() || !parameters.is_object()) {
      Print({{"event", "error"}, {"error", "--config: not a JSON object: " + config}});
      return 3;
    }
  }
  api.PutObject("/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/proof",
                Claim("proof", Uid(0), node, device, parameters));
  std::map<std::string, gpunode::testing::DraClaimResult> answers;
  auto t0 = steady_clock::now();
  grpc::Status st = kubelet.Prepare(kDriver, {{Uid(0), "default", "proof", {"gpu"}}}, &answers);
  const double prepare_ms = Ms(steady_clock::now() - t0);
  json out = json::array();
  for (const auto& [uid, r] : answers) {
    json devs = json::array();
    for (const auto& d : r.devices) devs.push_back({{"device", d.device_name}, {"pool", d.pool_name}, {"cdiDeviceIDs", d.cdi_device_ids}});
    out.push_back({{"uid", uid}, {"devices", devs}, {"error", r.error}});
  }
  Print({{"event", "prepared"}, {"ok", st.ok()}, {"grpc", st.error_message()}, {"ms", prepare_ms}, {"claims", out}});
  if (!st.ok() || answers[Uid(0)].error != "" || answers[Uid(0)].devices.empty()) return 1;

  if (!hold_file.empty()) {
    while (!std::filesystem::exists(hold_file) && steady_clock::now() - started < timeout * 10) {
      std::this_thread::sleep_for(milliseconds(50));
    }
  }
  std::map<std::string, std::string> errors;
  t0 = steady_clock::now();
  st = kubelet.Unprepare(kDriver, {{Uid(0), "default", "proof", {"gpu"}}}, &errors);
  Print({{"event", "unprepared"}, {"ok", st.ok()}, {"grpc", st.error_message()}, {"ms", Ms(steady_clock::now() - t0)},
         {"error", errors[Uid(0)]}});
  kubelet.Stop();
  return st.ok() && errors[Uid(0)].empty() ? 0 : 1;
}
