// A thread-safe cache of one collection, fed by a Reflector (reflector.h), keyed by
// "namespace/name" (or "name"), holding only the caller's projection of each object: a function
// that turns the object's JSON into a small struct, so a store of 1 000 Nodes keeps 1 000 small
// structs, not 1 000 documents. Event handlers (add, update, delete) are called on the
// reflector's thread, in order, after the store changed and without its lock held. A relist
// (after 410 Gone) replaces the contents and reports the difference: adds, updates (every object
// still there, as client-go's informers do), deletes.
//
//   struct NodeInfo { std::string driver; bool ready; };
//   Informer<NodeInfo> nodes(client, {.path = "/api/v1/nodes"}, {.project = ReadNodeInfo});
//   nodes.Start();
//   if (!nodes.store().WaitForSync(std::chrono::seconds(30))) ...
//   std::optional<NodeInfo> n = nodes.store().Get("node-1");
#ifndef GPUNODE_KUBE_STORE_H_
#define GPUNODE_KUBE_STORE_H_

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "src/base/status.h"
#include "src/kube/reflector.h"

namespace gpunode::kube {

template <typename T>
class Store final : public ReflectorSink {
 public:
  // The object -> what the store keeps. An error skips the object (logged): one malformed object
  // does not stop the others.
  using Projection = std::function<StatusOr<T>(const nlohmann::json& object)>;
  struct Handlers {
    std::function<void(const std::string& key, const T& now)> on_add;
    std::function<void(const std::string& key, const T& before, const T& now)> on_update;
    std::function<void(const std::string& key, const T& last)> on_delete;
  };
  struct Options {
    Projection project;
    Handlers handlers;
    // The bytes one kept value holds (for bytes()); nullptr: sizeof(T).
    std::function<size_t(const T&)> size_of;
    std::function<void(const std::string&)> log;
  };

  explicit Store(Options options) : o_(std::move(options)) {}

  std::optional<T> Get(const std::string& key) const {
    std::lock_guard<std::mutex> l(mu_);
    auto it = items_.find(key);
    if (it == items_.end()) return std::nullopt;
    return it->second;
  }
  std::vector<std::string> Keys() const {
    std::lock_guard<std::mutex> l(mu_);
    std::vector<std::string> keys;
    keys.reserve(items_.size());
    for (const auto& [k, v] : items_) keys.push_back(k);
    return keys;
  }
  std::vector<std::pair<std::string, T>> List() const {
    std::lock_guard<std::mutex> l(mu_);
    return {items_.begin(), items_.end()};
  }
  size_t size() const {
    std::lock_guard<std::mutex> l(mu_);
    return items_.size();
  }
  // What the kept values and their keys hold, by size_of (an estimate of the store's memory).
  size_t bytes() const {
    std::lock_guard<std::mutex> l(mu_);
    return bytes_;
  }
  // Objects whose projection failed since the start.
  size_t skipped() const {
    std::lock_guard<std::mutex> l(mu_);
    return skipped_;
  }
  // The first list is complete.
  bool HasSynced() const {
    std::lock_guard<std::mutex> l(mu_);
    return synced_;
  }
  // Waits until HasSynced, the timeout passes (false) or `stop` (false).
  bool WaitForSync(std::chrono::milliseconds timeout, std::stop_token stop = {}) const {
    std::stop_callback wake(stop, [this] {
      std::lock_guard<std::mutex> g(mu_);
      cv_.notify_all();
    });
    std::unique_lock<std::mutex> l(mu_);
    return cv_.wait_for(l, timeout, [&] { return synced_ || stop.stop_requested(); }) && synced_;
  }

  // ---- ReflectorSink ----
  void BeginReplace() override { pending_.clear(); }
  void ReplaceItem(const nlohmann::json& object) override {
    auto kv = Project(object);
    if (kv) pending_.insert_or_assign(std::move(kv->first), std::move(kv->second));
  }
  void EndReplace(bool complete, const std::string&) override {
    if (!complete) {
      std::map<std::string, T>().swap(pending_);
      return;
    }
    std::map<std::string, T> before;
    {
      std::lock_guard<std::mutex> l(mu_);
      before.swap(items_);
      items_.swap(pending_);
      bytes_ = 0;
      for (const auto& [k, v] : items_) bytes_ += Size(k, v);
      synced_ = true;
      cv_.notify_all();
    }
    std::map<std::string, T>().swap(pending_);
    // Tell the handlers what changed, from a copy of the new contents (a handler may read the store).
    for (const auto& [k, v] : List()) {
      auto it = before.find(k);
      if (it == before.end()) {
        if (o_.handlers.on_add) o_.handlers.on_add(k, v);
      } else {
        if (o_.handlers.on_update) o_.handlers.on_update(k, it->second, v);
        before.erase(it);
      }
    }
    for (const auto& [k, v] : before) {
      if (o_.handlers.on_delete) o_.handlers.on_delete(k, v);
    }
  }
  void Apply(const std::string& type, const nlohmann::json& object) override {
    if (type == "DELETED") {
      auto key = ObjectKey(object);
      if (!key.ok()) return Skip(key.status());
      std::optional<T> last;
      {
        std::lock_guard<std::mutex> l(mu_);
        auto it = items_.find(*key);
        if (it == items_.end()) return;
        bytes_ -= Size(it->first, it->second);
        last = std::move(it->second);
        items_.erase(it);
      }
      if (o_.handlers.on_delete) o_.handlers.on_delete(*key, *last);
      return;
    }
    auto kv = Project(object);
    if (!kv) return;
    std::optional<T> before;
    {
      std::lock_guard<std::mutex> l(mu_);
      auto it = items_.find(kv->first);
      if (it != items_.end()) {
        bytes_ -= Size(it->first, it->second);
        before = std::move(it->second);
        it->second = kv->second;
      } else {
        items_.emplace(kv->first, kv->second);
      }
      bytes_ += Size(kv->first, kv->second);
    }
    if (before) {
      if (o_.handlers.on_update) o_.handlers.on_update(kv->first, *before, kv->second);
    } else if (o_.handlers.on_add) {
      o_.handlers.on_add(kv->first, kv->second);
    }
  }

 private:
  std::optional<std::pair<std::string, T>> Project(const nlohmann::json& object) {
    auto key = ObjectKey(object);
    if (!key.ok()) {
      Skip(key.status());
      return std::nullopt;
    }
    StatusOr<T> value = o_.project(object);
    if (!value.ok()) {
      Skip(value.status());
      return std::nullopt;
    }
    return std::make_pair(*std::move(key), *std::move(value));
  }
  void Skip(const Status& st) {
    {
      std::lock_guard<std::mutex> l(mu_);
      ++skipped_;
    }
    if (o_.log) o_.log(absl::StrCat("skipped an object: ", st.message()));
  }
  size_t Size(const std::string& k, const T& v) const {
    return sizeof(std::pair<const std::string, T>) + k.capacity() + (o_.size_of ? o_.size_of(v) : 0);
  }

  Options o_;
  mutable std::mutex mu_;
  mutable std::condition_variable_any cv_;
  std::map<std::string, T> items_;
  size_t bytes_ = 0;
  size_t skipped_ = 0;
  bool synced_ = false;
  std::map<std::string, T> pending_;  // the reflector's thread only
};

// A Store fed by a Reflector on a thread of its own.
template <typename T>
class Informer {
 public:
  Informer(Client& client, ReflectorOptions reflector, typename Store<T>::Options store)
      : store_(std::move(store)), reflector_(client, store_, std::move(reflector)) {}
  ~Informer() { Stop(); }
  Informer(const Informer&) = delete;
  Informer& operator=(const Informer&) = delete;

  void Start() {
    thread_ = std::jthread([this](std::stop_token stop) { (void)reflector_.Run(stop); });
  }
  // Ends the list or watch in flight at once and joins the thread.
  void Stop() {
    if (thread_.joinable()) {
      thread_.request_stop();
      thread_.join();
    }
  }
  Store<T>& store() { return store_; }
  const Reflector& reflector() const { return reflector_; }

 private:
  Store<T> store_;
  Reflector reflector_;
  std::jthread thread_;
};

}  // namespace gpunode::kube

#endif  // GPUNODE_KUBE_STORE_H_
