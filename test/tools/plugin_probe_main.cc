// plugin_probe: asks a device plugin the same questions the kubelet asks, the same way (real gRPC
// through a kubelet stand-in, test/testing/kubelet_emulator.h), and prints every answer as one
// JSON document, so that two plugins on the same node can be compared answer by answer
// (test/peers/plugin_test.sh runs it against NVIDIA's device plugin and against gpunode's).
//
//   plugin_probe --dir DIR [--timeout-s 30] [--settle-ms 1500]
//
// Serves DIR/kubelet.sock; waits for the first registration, then until no new resource has
// registered for --settle-ms (a plugin registers one resource per MIG profile or shared
// resource). For each resource, in resource-name order, it records:
//   options    GetDevicePluginOptions as the plugin answered at registration
//   devices    the latest ListAndWatch list: id, health, NUMA nodes; sorted by id
//   preferred  GetPreferredAllocation for a fixed set of requests (sizes 1, 2, 4, 8 and all of
//              the devices; 2 with the last device as must-include; 2 from the even-indexed
//              devices only), each with the devices chosen or the gRPC error
//   allocate   Allocate of the first 1, 2 and all devices (ids sorted), the response as
//              protobuf JSON or the gRPC error
// Exit status: 0 answered, 1 nothing registered in time, 2 cannot serve, 3 usage.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "google/protobuf/util/json_util.h"
#include "nlohmann/json.hpp"
#include "test/testing/kubelet_emulator.h"

using namespace std::chrono;
using nlohmann::json;

namespace {

json ToJson(const google::protobuf::Message& m) {
  std::string out;
  google::protobuf::util::JsonPrintOptions opts;
  opts.preserve_proto_field_names = true;
  auto st = google::protobuf::util::MessageToJsonString(m, &out, opts);
  if (!st.ok()) return json{{"json_error", std::string(st.message())}};
  return json::parse(out);
}

json Error(const grpc::Status& st) {
  return json{{"code", static_cast<int>(st.error_code())}, {"message", st.error_message()}};
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir;
  int timeout_s = 30, settle_ms = 1500;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--dir") dir = next();
    else if (a == "--timeout-s") timeout_s = std::atoi(next().c_str());
    else if (a == "--settle-ms") settle_ms = std::atoi(next().c_str());
    else {
      std::cerr << "usage: plugin_probe --dir DIR [--timeout-s S] [--settle-ms MS]\n";
      return 3;
    }
  }
  if (dir.empty()) {
    std::cerr << "plugin_probe: --dir is required\n";
    return 3;
  }
  gpunode::testing::KubeletEmulator k(dir);
  if (!k.Start()) {
    std::cerr << "plugin_probe: cannot serve " << k.socket() << "\n";
    return 2;
  }
  if (!k.WaitForRegistrations(1, seconds(timeout_s))) {
    std::cerr << "plugin_probe: no plugin registered at " << k.socket() << " within " << timeout_s << " s\n";
    return 1;
  }
  // Registration settles: one resource after the other, then quiet.
  size_t seen = 0;
  auto quiet_since = steady_clock::now();
  while (steady_clock::now() - quiet_since < milliseconds(settle_ms)) {
    size_t n = k.Resources().size();
    if (n != seen) {
      seen = n;
      quiet_since = steady_clock::now();
    }
    std::this_thread::sleep_for(milliseconds(50));
  }
  json out = json::object();
  out["registrations"] = k.registrations();
  json resources = json::object();
  for (const std::string& res : k.Resources()) {
    json r;
    r["options"] = ToJson(k.Options(res));
    if (!k.WaitFor(res, [](const auto&) { return true; }, seconds(5))) {
      r["devices_error"] = "no ListAndWatch answer in 5 s";
      resources[res] = r;
      continue;
    }
    // The latest list once it has been stable for a moment (health checks may start late).
    std::this_thread::sleep_for(milliseconds(200));
    auto list = k.Lists(res).back();
    // Sorted by id, so that two plugins listing the same devices in another order get the same
    // requests below.
    std::sort(list.mutable_devices()->begin(), list.mutable_devices()->end(),
              [](const auto& a, const auto& b) { return a.id() < b.id(); });
    std::vector<std::string> ids;
    json devs = json::array();
    for (const auto& d : list.devices()) {
      json j = {{"id", d.id()}, {"health", d.health()}};
      json numa = json::array();
      for (const auto& n : d.topology().nodes()) numa.push_back(n.id());
      j["numa"] = numa;
      devs.push_back(j);
      ids.push_back(d.id());
    }
    r["devices"] = devs;
    const int n = static_cast<int>(ids.size());

    json preferred = json::array();
    auto ask = [&](const std::vector<std::string>& available, const std::vector<std::string>& must, int size,
                   const std::string& what) {
      std::vector<std::string> got;
      grpc::Status st = k.Preferred(res, available, must, size, &got);
      json j = {{"request", what}, {"size", size}};
      if (st.ok()) j["devices"] = got;
      else j["error"] = Error(st);
      preferred.push_back(j);
    };
    if (list.devices_size() > 0 && r["options"].value("get_preferred_allocation_available", false)) {
      std::set<int> sizes;
      for (int s : {1, 2, 4, 8, n}) {
        if (s <= n) sizes.insert(s);
      }
      for (int s : sizes) ask(ids, {}, s, "all available, size " + std::to_string(s));
      if (n >= 2) ask(ids, {ids.back()}, 2, "all available, must include the last, size 2");
      if (n >= 4) {
        std::vector<std::string> even;
        for (int i = 0; i < n; i += 2) even.push_back(ids[i]);
        ask(even, {}, 2, "even-indexed available, size 2");
      }
    }
    r["preferred"] = preferred;

    json allocate = json::array();
    std::set<int> sizes;
    for (int s : {1, 2, n}) {
      if (s >= 1 && s <= n) sizes.insert(s);
    }
    for (int s : sizes) {
      std::vector<std::string> want(ids.begin(), ids.begin() + s);
      v1beta1::AllocateResponse resp;
      grpc::Status st = k.Allocate(res, want, &resp);
      json j = {{"ids", want}};
      if (st.ok()) j["response"] = ToJson(resp);
      else j["error"] = Error(st);
      allocate.push_back(j);
    }
    r["allocate"] = allocate;
    resources[res] = r;
  }
  out["resources"] = resources;
  std::cout << out.dump(1) << std::endl;
  k.Stop();
  return 0;
}
