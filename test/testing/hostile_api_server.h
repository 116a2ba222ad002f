// An in-process Kubernetes API server stand-in on 127.0.0.1 (HTTP, or HTTPS with a chosen
// certificate) for the kube and fleet tests: a real cpp-httplib server that a real kube::Client
// talks to over a real socket. It plays a well-behaved API server (objects stored by path: GET,
// merge/strategic PATCH, PUT with resourceVersion conflicts, POST with generateName, DELETE) and,
// per route, a hostile or broken one: wrong-typed JSON, a huge body, an endless watch line, an
// answer trickled one byte every N ms, a watch that ends at once, 409 with a chosen reason, 410,
// 429/503 with Retry-After, a slow answer.
//
//   HostileApiServer api;
//   api.PutObject("/api/v1/nodes/n1", {{"metadata", {{"name", "n1"}}}});
//   api.On("GET", "/api/v1/nodes", {HostileApiServer::ApiStatus(429, "TooManyRequests", "slow down", 1),
//                                   HostileApiServer::Json(200, list)});  // the last answer repeats
//   kube::Connection c; kube::ParseServer(api.url(), &c);
#ifndef GPUNODE_TEST_TESTING_HOSTILE_API_SERVER_H_
#define GPUNODE_TEST_TESTING_HOSTILE_API_SERVER_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "httplib.h"
#include "nlohmann/json.hpp"

namespace gpunode::testing {

class HostileApiServer {
 public:
  // One answer to one request. `stopping` is set when the server goes away: long answers end then.
  using Responder = std::function<void(const httplib::Request&, httplib::Response&, const std::atomic<bool>& stopping)>;

  struct Tls {
    std::string cert_file;
    std::string key_file;
  };

  HostileApiServer() : server_(std::make_unique<httplib::Server>()) { Start(); }
  explicit HostileApiServer(const Tls& tls)
      : server_(std::make_unique<httplib::SSLServer>(tls.cert_file.c_str(), tls.key_file.c_str())), tls_(true) {
    Start();
  }
  ~HostileApiServer() {
    stopping_ = true;
    server_->stop();
    if (thread_.joinable()) thread_.join();
  }
  HostileApiServer(const HostileApiServer&) = delete;
  HostileApiServer& operator=(const HostileApiServer&) = delete;

  int port() const { return port_; }
  std::string url() const { return std::string(tls_ ? "https" : "http") + "://127.0.0.1:" + std::to_string(port_); }
  bool valid() const { return server_->is_valid(); }

  // Answers to METHOD on `path` (the path without its query), in order; the last one repeats.
  void On(const std::string& method, const std::string& path, std::vector<Responder> answers) {
    std::lock_guard<std::mutex> l(mu_);
    routes_[method + " " + path] = Route{std::move(answers), 0};
  }

  // The well-behaved part: an object at `path` (its metadata.resourceVersion is kept by the store).
  void PutObject(const std::string& path, nlohmann::json object) {
    std::lock_guard<std::mutex> l(mu_);
    object["metadata"]["resourceVersion"] = std::to_string(++version_);
    objects_[path] = std::move(object);
  }
  nlohmann::json Object(const std::string& path) {
    std::lock_guard<std::mutex> l(mu_);
    auto it = objects_.find(path);
    return it == objects_.end() ? nlohmann::json() : it->second;
  }

  // Every request seen, as "METHOD target" ("GET /api/v1/nodes?limit=500").
  std::vector<std::string> Requests() {
    std::lock_guard<std::mutex> l(mu_);
    return requests_;
  }
  // Requests whose "METHOD target" starts with `prefix` ("GET /api/v1/nodes?watch").
  int Count(const std::string& prefix) {
    std::lock_guard<std::mutex> l(mu_);
    int n = 0;
    for (const std::string& r : requests_) n += r.rfind(prefix, 0) == 0;
    return n;
  }
  std::vector<httplib::Headers> RequestHeaders() {
    std::lock_guard<std::mutex> l(mu_);
    return headers_;
  }

  // ---- canned answers ----

  static Responder Json(int status, nlohmann::json body, httplib::Headers headers = {}) {
    const std::string text = body.dump();
    return [=](const httplib::Request&, httplib::Response& res, const std::atomic<bool>&) {
      res.status = status;
      for (const auto& [k, v] : headers) res.set_header(k.c_str(), v);
      res.set_content(text, "application/json");
    };
  }
  static Responder Text(int status, std::string body, std::string content_type = "application/json") {
    return [=](const httplib::Request&, httplib::Response& res, const std::atomic<bool>&) {
      res.status = status;
      res.set_content(body, content_type.c_str());
    };
  }
  // A Kubernetes Status object: {"kind":"Status","code":409,"reason":"AlreadyExists",...};
  // retry_after >= 0 adds the Retry-After header and details.retryAfterSeconds.
  static Responder ApiStatus(int code, const std::string& reason, const std::string& message, int retry_after = -1) {
    nlohmann::json body = {{"kind", "Status"}, {"apiVersion", "v1"}, {"status", "Failure"},
                           {"message", message}, {"reason", reason},  {"code", code}};
    httplib::Headers headers;
    if (retry_after >= 0) {
      body["details"]["retryAfterSeconds"] = retry_after;
      headers.emplace("Retry-After", std::to_string(retry_after));
    }
    return Json(code, body, headers);
  }
  // `bytes` of a JSON-looking body, chunked (no Content-Length) or announced by Content-Length.
  static Responder HugeBody(size_t bytes, bool content_length = false) {
    return [=](const httplib::Request&, httplib::Response& res, const std::atomic<bool>& stopping) {
      auto chunk = std::make_shared<std::string>(std::string("{\"kind\":\"NodeList\",\"items\":[\"") + std::string((1 << 20) - 30, 'x'));
      auto provide = [=, &stopping](size_t offset, size_t length, httplib::DataSink& sink) {
        (void)length;
        if (stopping || offset >= bytes) return false;
        const size_t n = std::min(chunk->size(), bytes - offset);
        return sink.write(chunk->data(), n);
      };
      if (content_length) {
        res.set_content_provider(bytes, "application/json", provide);
      } else {
        res.set_chunked_content_provider("application/json", [=](size_t offset, httplib::DataSink& sink) {
          if (offset >= bytes) {
            sink.done();
            return true;
          }
          return provide(offset, 0, sink);
        });
      }
    };
  }
  // A watch answer whose first line never ends: `bytes` without a newline, in HTTP chunks of
  // `chunk` bytes (each reaches the client's receiver on its own), then the end of the answer.
  static Responder EndlessLine(size_t bytes, size_t chunk = 4096) {
    return [=](const httplib::Request&, httplib::Response& res, const std::atomic<bool>& stopping) {
      res.set_chunked_content_provider("application/json", [=, &stopping](size_t offset, httplib::DataSink& sink) {
        static const std::string kChunk(1 << 16, 'x');
        if (stopping || offset >= bytes) {
          sink.done();
          return true;
        }
        return sink.write(kChunk.data(), std::min({chunk, kChunk.size(), bytes - offset}));
      });
    };
  }
  // 200 with `lines` as a watch stream (each followed by a newline), written `chunk` bytes at a
  // time; then the answer ends, or with `hold_open` stays open (no more bytes) until the client
  // goes or the server stops.
  static Responder WatchEvents(std::vector<std::string> lines, bool hold_open = false, size_t chunk = 1 << 16) {
    std::string all;
    for (const std::string& l : lines) all += l + "\n";
    return [=](const httplib::Request&, httplib::Response& res, const std::atomic<bool>& stopping) {
      res.set_chunked_content_provider("application/json", [=, &stopping](size_t offset, httplib::DataSink& sink) {
        if (offset < all.size()) return sink.write(all.data() + offset, std::min(chunk, all.size() - offset));
        while (hold_open && !stopping && sink.is_writable()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
        sink.done();
        return true;
      });
    };
  }
  static Responder WatchEndsAtOnce() { return WatchEvents({}); }
  // 200, then `text` one byte every `every`, for at most `at_most` (then the answer ends).
  static Responder Trickle(std::string text, std::chrono::milliseconds every, std::chrono::milliseconds at_most) {
    return [=](const httplib::Request&, httplib::Response& res, const std::atomic<bool>& stopping) {
      res.set_chunked_content_provider("application/json", [=, &stopping](size_t, httplib::DataSink& sink) {
        const auto end = std::chrono::steady_clock::now() + at_most;
        for (size_t i = 0; !stopping && std::chrono::steady_clock::now() < end; ++i) {
          if (!sink.write(&text[i % text.size()], 1)) return false;
          std::this_thread::sleep_for(every);
        }
        sink.done();
        return true;
      });
    };
  }
  // `then`, after a pause of `delay` (a slow server).
  static Responder Slow(std::chrono::milliseconds delay, Responder then) {
    return [=](const httplib::Request& req, httplib::Response& res, const std::atomic<bool>& stopping) {
      const auto end = std::chrono::steady_clock::now() + delay;
      while (!stopping && std::chrono::steady_clock::now() < end) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      then(req, res, stopping);
    };
  }

 private:
  struct Route {
    std::vector<Responder> answers;
    size_t next = 0;
  };

  void Start() {
    server_->set_pre_routing_handler([this](const httplib::Request& req, httplib::Response&) {
      std::lock_guard<std::mutex> l(mu_);
      requests_.push_back(req.method + " " + req.target);
      headers_.push_back(req.headers);
      return httplib::Server::HandlerResponse::Unhandled;
    });
    auto handle = [this](const httplib::Request& req, httplib::Response& res) { Serve(req, res); };
    server_->Get(".*", handle);
    server_->Post(".*", handle);
    server_->Put(".*", handle);
    server_->Patch(".*", handle);
    server_->Delete(".*", handle);
    port_ = server_->bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_->listen_after_bind(); });
    while (!server_->is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }

  void Serve(const httplib::Request& req, httplib::Response& res) {
    Responder answer;
    {
      std::lock_guard<std::mutex> l(mu_);
      auto it = routes_.find(req.method + " " + req.path);
      if (it != routes_.end() && !it->second.answers.empty()) {
        Route& r = it->second;
        answer = r.answers[std::min(r.next, r.answers.size() - 1)];
        ++r.next;
      }
    }
    if (answer) return answer(req, res, stopping_);
    ServeObject(req, res);
  }

  static void Reply(httplib::Response& res, int status, const nlohmann::json& body) {
    res.status = status;
    res.set_content(body.dump(), "application/json");
  }
  static nlohmann::json StatusBody(int code, const std::string& reason, const std::string& message) {
    return {{"kind", "Status"}, {"apiVersion", "v1"}, {"status", "Failure"}, {"message", message}, {"reason", reason}, {"code", code}};
  }

  // A strategic merge patch of the few shapes gpunode sends: lists of objects with a "type"
  // (Node conditions) merge by it; everything else as a JSON merge patch.
  static void StrategicMerge(nlohmann::json& target, const nlohmann::json& patch) {
    if (!patch.is_object() || !target.is_object()) {
      target = patch;
      return;
    }
    for (const auto& [k, v] : patch.items()) {
      if (v.is_null()) {
        target.erase(k);
      } else if (v.is_array() && target.contains(k) && target[k].is_array()) {
        for (const auto& item : v) {
          bool merged = false;
          for (auto& have : target[k]) {
            if (item.is_object() && have.is_object() && item.contains("type") && have.value("type", nlohmann::json()) == item["type"]) {
              have = item;
              merged = true;
            }
          }
          if (!merged) target[k].push_back(item);
        }
      } else if (v.is_object()) {
        if (!target.contains(k) || !target[k].is_object()) target[k] = nlohmann::json::object();
        StrategicMerge(target[k], v);
      } else {
        target[k] = v;
      }
    }
  }

  void ServeObject(const httplib::Request& req, httplib::Response& res) {
    std::lock_guard<std::mutex> l(mu_);
    std::string path = req.path;
    const bool status_sub = path.size() > 7 && path.compare(path.size() - 7, 7, "/status") == 0;
    if (status_sub && !objects_.count(path)) path.resize(path.size() - 7);
    auto it = objects_.find(path);
    if (req.method == "POST") {
      auto body = nlohmann::json::parse(req.body, nullptr, false);
      if (!body.is_object()) return Reply(res, 400, StatusBody(400, "BadRequest", "not JSON"));
      std::string name = body["metadata"].value("name", "");
      if (name.empty()) name = body["metadata"].value("generateName", "obj-") + std::to_string(++generated_);
      const std::string at = path + "/" + name;
      if (objects_.count(at)) return Reply(res, 409, StatusBody(409, "AlreadyExists", name + " already exists"));
      body["metadata"]["name"] = name;
      body["metadata"]["resourceVersion"] = std::to_string(++version_);
      objects_[at] = body;
      return Reply(res, 201, body);
    }
    if (it == objects_.end()) return Reply(res, 404, StatusBody(404, "NotFound", path + " not found"));
    nlohmann::json& obj = it->second;
    if (req.method == "GET") return Reply(res, 200, obj);
    if (req.method == "DELETE") {
      objects_.erase(it);
      return Reply(res, 200, {{"kind", "Status"}, {"status", "Success"}});
    }
    auto body = nlohmann::json::parse(req.body, nullptr, false);
    if (body.is_discarded()) return Reply(res, 400, StatusBody(400, "BadRequest", "not JSON"));
    if (req.method == "PUT") {
      const std::string want = body.contains("metadata") && body["metadata"].is_object()
                                   ? body["metadata"].value("resourceVersion", "")
                                   : "";
      if (!want.empty() && want != obj["metadata"].value("resourceVersion", "")) {
        return Reply(res, 409, StatusBody(409, "Conflict", "the object has been modified; please apply your changes to the latest version and try again"));
      }
      obj = body;
    } else if (req.get_header_value("Content-Type") == "application/strategic-merge-patch+json") {
      StrategicMerge(obj, body);
    } else {
      obj.merge_patch(body);
    }
    obj["metadata"]["resourceVersion"] = std::to_string(++version_);
    Reply(res, 200, obj);
  }

  std::unique_ptr<httplib::Server> server_;
  bool tls_ = false;
  int port_ = 0;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  std::mutex mu_;
  std::map<std::string, Route> routes_;
  std::map<std::string, nlohmann::json> objects_;
  std::vector<std::string> requests_;
  std::vector<httplib::Headers> headers_;
  int64_t version_ = 100;
  int generated_ = 0;
};

}  // namespace gpunode::testing

#endif  // GPUNODE_TEST_TESTING_HOSTILE_API_SERVER_H_
