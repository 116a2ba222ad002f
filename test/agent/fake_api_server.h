// An API server stand-in for the agent's tests: a real cpp-httplib server on 127.0.0.1 holding one
// Node and one DaemonSet, with what the agent asks of them: GET, merge patch (labels, annotations)
// and strategic patch of status.conditions on the Node, watches of both (chunked JSON lines from a
// resourceVersion, as the API server streams them), Event creation, and the DaemonSet's GET. Tests
// change the objects (labels, a deletionTimestamp) and watchers get MODIFIED events.
//
// Faults: `hang_label_writes` makes a merge patch that sets a label wait (until cleared, the test
// ends, or 30 s): an API server that is slow to write, so the labels component is stuck in a
// request. `forbid_daemonset_watch` answers the DaemonSet watch 403 (RBAC without `watch`).
#ifndef GPUNODE_TEST_AGENT_FAKE_API_SERVER_H_
#define GPUNODE_TEST_AGENT_FAKE_API_SERVER_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "httplib.h"
#include "nlohmann/json.hpp"

namespace gpunode::testing {

class FakeApiServer {
 public:
  using json = nlohmann::json;

  explicit FakeApiServer(std::string node, std::string ds_namespace = "gpunode", std::string ds_name = "gpunode")
      : node_name_(std::move(node)), ds_ns_(std::move(ds_namespace)), ds_name_(std::move(ds_name)) {
    node_ = {{"apiVersion", "v1"},
             {"kind", "Node"},
             {"metadata", {{"name", node_name_}, {"uid", "node-uid-1"}, {"labels", json::object()},
                           {"annotations", json::object()}}},
             {"status", {{"conditions", json::array()}}}};
    ds_ = {{"apiVersion", "apps/v1"},
           {"kind", "DaemonSet"},
           {"metadata", {{"name", ds_name_}, {"namespace", ds_ns_}, {"uid", "ds-uid-1"}}}};
    Bump(&node_, nullptr);
    Bump(&ds_, nullptr);
    const std::string node_path = "/api/v1/nodes/" + node_name_;
    const std::string ds_path = "/apis/apps/v1/namespaces/" + ds_ns_ + "/daemonsets";
    server_.Get(node_path, [this](const httplib::Request&, httplib::Response& res) { Reply(res, Copy(node_)); });
    server_.Patch(node_path, [this](const httplib::Request& req, httplib::Response& res) { PatchNode(req, res); });
    server_.Patch(node_path + "/status",
                  [this](const httplib::Request& req, httplib::Response& res) { PatchStatus(req, res); });
    server_.Get("/api/v1/nodes", [this](const httplib::Request& req, httplib::Response& res) {
      if (req.has_param("watch")) return Watch(req, res, &node_events_);
      res.status = 400;
    });
    server_.Get(ds_path + "/" + ds_name_, [this](const httplib::Request&, httplib::Response& res) {
      std::lock_guard<std::mutex> l(mu_);
      if (ds_.is_null()) return NotFound(res, "daemonsets.apps \"" + ds_name_ + "\" not found");
      Reply(res, ds_);
    });
    server_.Get(ds_path, [this](const httplib::Request& req, httplib::Response& res) {
      if (forbid_daemonset_watch) {
        res.status = 403;
        Reply(res, {{"kind", "Status"}, {"code", 403}, {"message", "daemonsets.apps is forbidden: cannot watch"}}, 403);
        return;
      }
      if (req.has_param("watch")) return Watch(req, res, &ds_events_);
      res.status = 400;
    });
    server_.Post("/api/v1/namespaces/default/events", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard<std::mutex> l(mu_);
      events_.push_back(json::parse(req.body, nullptr, false));
      Reply(res, events_.back(), 201);
    });
    server_.set_logger([this](const httplib::Request& req, const httplib::Response&) {
      std::lock_guard<std::mutex> l(mu_);
      requests_.push_back(req.method + " " + req.path);
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }

  ~FakeApiServer() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stopping_ = true;
    }
    hang_label_writes = false;
    cv_.notify_all();
    server_.stop();
    thread_.join();
  }

  int port() const { return port_; }

  // A kubeconfig for the agent (--kubeconfig or kubernetes.kubeconfig).
  void WriteKubeconfig(const std::string& path) const {
    std::ofstream(path) << "apiVersion: v1\nkind: Config\ncurrent-context: t\nclusters:\n- name: c\n"
                        << "  cluster: {server: \"http://127.0.0.1:" << port_ << "\"}\ncontexts:\n- name: t\n"
                        << "  context: {cluster: c, user: u}\nusers:\n- name: u\n  user: {token: agent-test}\n";
  }

  void SetLabel(const std::string& k, const std::string& v) { ChangeNode([&](json& n) { n["metadata"]["labels"][k] = v; }); }
  void SetAnnotation(const std::string& k, const std::string& v) {
    ChangeNode([&](json& n) { n["metadata"]["annotations"][k] = v; });
  }
  std::map<std::string, std::string> Labels() {
    std::lock_guard<std::mutex> l(mu_);
    return node_["metadata"]["labels"].get<std::map<std::string, std::string>>();
  }
  json Node() { return Copy(node_); }

  // The DaemonSet gets a deletionTimestamp (what a foreground delete does first).
  void MarkDaemonSetDeleting() {
    std::lock_guard<std::mutex> l(mu_);
    ds_["metadata"]["deletionTimestamp"] = "2026-12-01T13:00:00Z";
    Bump(&ds_, &ds_events_);
  }

  std::vector<json> Events() {
    std::lock_guard<std::mutex> l(mu_);
    return events_;
  }
  std::vector<std::string> Requests() {
    std::lock_guard<std::mutex> l(mu_);
    return requests_;
  }
  // Label writes waiting now (hang_label_writes).
  int hung() const { return hung_.load(); }

  std::atomic<bool> hang_label_writes{false};
  std::atomic<bool> forbid_daemonset_watch{false};

 private:
  struct Event {
    int64_t rv;
    json object;
  };

  json Copy(const json& j) {
    std::lock_guard<std::mutex> l(mu_);
    return j;
  }

  // A new resourceVersion for `obj`, and a MODIFIED event for its watchers. mu_ held.
  void Bump(json* obj, std::vector<Event>* events) {
    ++rv_;
    (*obj)["metadata"]["resourceVersion"] = std::to_string(rv_);
    if (events != nullptr) events->push_back({rv_, *obj});
    cv_.notify_all();
  }

  template <typename F>
  void ChangeNode(F f) {
    std::lock_guard<std::mutex> l(mu_);
    f(node_);
    Bump(&node_, &node_events_);
  }

  static void Reply(httplib::Response& res, const json& body, int status = 200) {
    res.status = status;
    res.set_content(body.dump(), "application/json");
  }
  static void NotFound(httplib::Response& res, const std::string& msg) {
    Reply(res, {{"kind", "Status"}, {"code", 404}, {"reason", "NotFound"}, {"message", msg}}, 404);
  }

  void PatchNode(const httplib::Request& req, httplib::Response& res) {
    json patch = json::parse(req.body, nullptr, false);
    bool sets_label = false;
    if (patch.is_object() && patch.contains("metadata") && patch["metadata"].contains("labels")) {
      for (const auto& [k, v] : patch["metadata"]["labels"].items()) sets_label = sets_label || v.is_string();
    }
    if (sets_label && hang_label_writes) {
      ++hung_;
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait_for(l, std::chrono::seconds(30), [this] { return stopping_ || !hang_label_writes; });
      --hung_;
      if (stopping_) return;
    }
    std::lock_guard<std::mutex> l(mu_);
    node_.merge_patch(patch);
    Bump(&node_, &node_events_);
    Reply(res, node_);
  }

  void PatchStatus(const httplib::Request& req, httplib::Response& res) {
    json patch = json::parse(req.body, nullptr, false);
    std::lock_guard<std::mutex> l(mu_);
    for (const json& c : patch["status"].value("conditions", json::array())) {
      json& conds = node_["status"]["conditions"];
      bool found = false;
      for (json& have : conds) {
        if (have.value("type", "") == c.value("type", "")) {
          have = c;
          found = true;
        }
      }
      if (!found) conds.push_back(c);
    }
    Bump(&node_, &node_events_);
    Reply(res, node_);
  }

  // Streams the events after the request's resourceVersion, one JSON line each, until
  // timeoutSeconds, the client goes or the server stops.
  void Watch(const httplib::Request& req, httplib::Response& res, std::vector<Event>* events) {
    auto next = std::make_shared<int64_t>(req.has_param("resourceVersion") ? std::stoll(req.get_param_value("resourceVersion")) : 0);
    const int timeout = req.has_param("timeoutSeconds") ? std::stoi(req.get_param_value("timeoutSeconds")) : 300;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout);
    res.set_chunked_content_provider("application/json", [this, events, next, deadline](size_t, httplib::DataSink& sink) {
      std::string out;
      {
        std::unique_lock<std::mutex> l(mu_);
        auto has_new = [&] { return stopping_ || (!events->empty() && events->back().rv > *next); };
        cv_.wait_for(l, std::chrono::milliseconds(100), has_new);
        if (stopping_ || std::chrono::steady_clock::now() >= deadline) {
          l.unlock();
          sink.done();
          return true;
        }
        for (const Event& e : *events) {
          if (e.rv <= *next) continue;
          out += json{{"type", "MODIFIED"}, {"object", e.object}}.dump() + "\n";
          *next = e.rv;
        }
      }
      if (!out.empty() && !sink.write(out.data(), out.size())) return false;
      return sink.is_writable();
    });
  }

  std::string node_name_, ds_ns_, ds_name_;
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  int64_t rv_ = 0;
  json node_, ds_;
  std::vector<Event> node_events_, ds_events_;
  std::vector<json> events_;
  std::vector<std::string> requests_;
  std::atomic<int> hung_{0};
};

}  // namespace gpunode::testing

#endif  // GPUNODE_TEST_AGENT_FAKE_API_SERVER_H_
