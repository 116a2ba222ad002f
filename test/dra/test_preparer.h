// A ClaimPreparer for the tests of src/dra: answers from a table (claim UID -> devices or an
// error), as a driver would after reading each claim's allocation from the API server; records
// every call and how many ran at once; can be made to hold a call until released.
#ifndef GPUNODE_TEST_DRA_TEST_PREPARER_H_
#define GPUNODE_TEST_DRA_TEST_PREPARER_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "src/dra/claim_preparer.h"

namespace gpunode::dra {

class TestPreparer final : public ClaimPreparer {
 public:
  // Claims not in the table get no entry in the answer (the service must notice).
  std::map<std::string, StatusOr<std::vector<PreparedDevice>>> prepare_table;
  std::map<std::string, Status> unprepare_table;
  Status whole_call = absl::OkStatus();  // non-OK: the call itself fails

  StatusOr<PrepareResults> Prepare(const std::vector<ClaimRef>& claims) override {
    Enter(claims, "prepare");
    if (!whole_call.ok()) return Leave(whole_call);
    PrepareResults out;
    for (const auto& c : claims) {
      auto it = prepare_table.find(c.uid);
      if (it != prepare_table.end()) out.emplace(c.uid, it->second);
    }
    return Leave(out);
  }

  StatusOr<UnprepareResults> Unprepare(const std::vector<ClaimRef>& claims) override {
    Enter(claims, "unprepare");
    if (!whole_call.ok()) return Leave(whole_call);
    UnprepareResults out;
    for (const auto& c : claims) {
      auto it = unprepare_table.find(c.uid);
      out.emplace(c.uid, it == unprepare_table.end() ? absl::OkStatus() : it->second);
    }
    return Leave(out);
  }

  // Calls wait in Enter until Release().
  void Hold() {
    std::lock_guard<std::mutex> l(mu_);
    held_ = true;
  }
  void Release() {
    std::lock_guard<std::mutex> l(mu_);
    held_ = false;
    cv_.notify_all();
  }
  bool WaitForCalls(size_t n, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> l(mu_);
    return cv_.wait_for(l, timeout, [&] { return calls_.size() >= n; });
  }
  std::vector<std::pair<std::string, std::vector<ClaimRef>>> calls() const {
    std::lock_guard<std::mutex> l(mu_);
    return calls_;
  }
  int max_concurrent() const { return max_concurrent_; }

 private:
  void Enter(const std::vector<ClaimRef>& claims, const std::string& what) {
    const int now = ++concurrent_;
    int seen = max_concurrent_;
    while (now > seen && !max_concurrent_.compare_exchange_weak(seen, now)) {
    }
    std::unique_lock<std::mutex> l(mu_);
    calls_.emplace_back(what, claims);
    cv_.notify_all();
    cv_.wait(l, [&] { return !held_; });
  }
  template <class T>
  T Leave(T value) {
    --concurrent_;
    return value;
  }

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool held_ = false;
  std::vector<std::pair<std::string, std::vector<ClaimRef>>> calls_;
  std::atomic<int> concurrent_{0};
  std::atomic<int> max_concurrent_{0};
};

inline PreparedDevice Gpu(const std::string& pool, int index, std::vector<std::string> requests = {}) {
  PreparedDevice d;
  d.request_names = std::move(requests);
  d.pool_name = pool;
  d.device_name = "gpu-" + std::to_string(index);
  d.cdi_device_ids = {"k8s.gpu.nvidia.com/device=gpu-" + std::to_string(index)};
  return d;
}

}  // namespace gpunode::dra

#endif  // GPUNODE_TEST_DRA_TEST_PREPARER_H_
