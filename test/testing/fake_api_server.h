// The one Kubernetes API server stand-in of the kube, fleet and agent tests: a real cpp-httplib
// server on 127.0.0.1 (HTTP, or HTTPS with a chosen certificate) that a real kube::Client talks to
// over a real socket. It stands for a foreign system, so it is fine to fake; it is not a copy of
// the API server, only what gpunode's requests need, with the same wire behaviour:
//
//   - objects stored by path, one resourceVersion counter: GET, POST (generateName), PUT
//     (a stale resourceVersion is 409 Conflict), DELETE; a patch that carries a resourceVersion
//     other than the object's is 409 Conflict too;
//   - PATCH as merge patch, strategic merge patch (lists of objects merge by "type"), JSON patch
//     (RFC 6902) and server-side apply with field managers for metadata.labels (managedFields in
//     FieldsV1; a label another manager owns with another value is 409 Conflict unless forced; a
//     label the manager stops applying is removed when nobody else owns it; an Update takes the
//     labels it changes from every other manager, as the API server does; an apply to a missing
//     namespaced object creates it); ".../status" reaches the object;
//   - collections (the parent path of objects, or one named by ServeCollection): lists with
//     limit/continue and the resourceVersion,
//     and watches streamed as chunked JSON lines from a resourceVersion (ADDED/MODIFIED/DELETED,
//     BOOKMARK when asked; with sendInitialEvents the current objects, then the initial-events-end
//     BOOKMARK, as client-go's streaming list expects), fieldSelector on string fields (a=b, a!=b,
//     comma-joined); Compact() makes older versions 410
//     (an ERROR event with code 410, as the API server sends);
//   - per route, injected answers that come first (On): 409/410/429 with Retry-After, a hostile
//     or broken server — wrong-typed JSON, a huge body, an endless watch line, an answer trickled
//     one byte every N ms, a watch that ends at once, a slow answer. A null Responder in the list
//     means "the store answers", so {ApiStatus(429, ...), nullptr} is one 429 then normal service.
//
//   FakeApiServer api;
//   api.PutObject("/api/v1/nodes/n1", {{"metadata", {{"name", "n1"}}}});
//   api.On("GET", "/api/v1/nodes", {FakeApiServer::ApiStatus(429, "TooManyRequests", "slow down", 1), nullptr});
//   kube::Connection c; kube::ParseServer(api.url(), &c);
#ifndef GPUNODE_TEST_TESTING_FAKE_API_SERVER_H_
#define GPUNODE_TEST_TESTING_FAKE_API_SERVER_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "httplib.h"
#include "nlohmann/json.hpp"
#include "test/testing/fake_api_responders.h"
#include "test/testing/fake_field_managers.h"

namespace gpunode::testing {

class FakeApiServer : public FakeApiResponders {
 public:
  using json = nlohmann::json;

  struct Tls {
    std::string cert_file;
    std::string key_file;
  };

  FakeApiServer() : server_(std::make_unique<httplib::Server>()) { Start(); }
  explicit FakeApiServer(const Tls& tls)
      : server_(std::make_unique<httplib::SSLServer>(tls.cert_file.c_str(), tls.key_file.c_str())), tls_(true) {
    Start();
  }
  ~FakeApiServer() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stopping_ = true;
    }
    stopping_atomic_ = true;
    hang_label_writes = false;
    cv_.notify_all();
    server_->stop();
    if (thread_.joinable()) thread_.join();
  }
  FakeApiServer(const FakeApiServer&) = delete;
  FakeApiServer& operator=(const FakeApiServer&) = delete;

  int port() const { return port_; }
  std::string url() const { return std::string(tls_ ? "https" : "http") + "://127.0.0.1:" + std::to_string(port_); }
  bool valid() const { return server_->is_valid(); }

  // A kubeconfig naming this server (for the gpunode binary: --kubeconfig).
  void WriteKubeconfig(const std::string& path) const {
    std::ofstream(path) << "apiVersion: v1\nkind: Config\ncurrent-context: t\nclusters:\n- name: c\n"
                        << "  cluster: {server: \"" << url() << "\"" << (tls_ ? ", insecure-skip-tls-verify: true" : "")
                        << "}\n"
                        << "contexts:\n- name: t\n  context: {cluster: c, user: u}\nusers:\n- name: u\n"
                        << "  user: {token: fake-api-test}\n";
  }

  // Answers to METHOD on `path` (the path without its query), in order; the last one repeats.
  void On(const std::string& method, const std::string& path, std::vector<Responder> answers) {
    std::lock_guard<std::mutex> l(mu_);
    routes_[method + " " + path] = Route{std::move(answers), 0};
  }

  // ---- the store, as tests see it ----

  // Creates or replaces the object at `path` (ADDED or MODIFIED for watchers of its collection).
  void PutObject(const std::string& path, json object) {
    std::lock_guard<std::mutex> l(mu_);
    const bool existed = objects_.count(path) > 0;
    if (!object.is_object()) object = json::object();
    if (!object.contains("metadata") || !object["metadata"].is_object()) object["metadata"] = json::object();
    objects_[path] = std::move(object);
    Bump(path, existed ? "MODIFIED" : "ADDED");
  }
  json Object(const std::string& path) {
    std::lock_guard<std::mutex> l(mu_);
    auto it = objects_.find(path);
    return it == objects_.end() ? json() : it->second;
  }
  // Changes an object as another writer would (an Update by `manager`), MODIFIED for watchers.
  void Change(const std::string& path, const std::function<void(json&)>& f, const std::string& manager = "test") {
    std::lock_guard<std::mutex> l(mu_);
    auto it = objects_.find(path);
    if (it == objects_.end()) return;
    const json before = it->second;
    f(it->second);
    FieldManagers::Update(before, it->second, manager);
    Bump(path, "MODIFIED");
  }
  void DeleteObject(const std::string& path) {
    std::lock_guard<std::mutex> l(mu_);
    auto it = objects_.find(path);
    if (it == objects_.end()) return;
    json last = it->second;
    objects_.erase(it);
    last["metadata"]["resourceVersion"] = std::to_string(++version_);
    Record(Collection(path), "DELETED", last);
  }
  // Objects of a collection (POSTed Events: Collection("/api/v1/namespaces/default/events")).
  std::vector<json> Items(const std::string& collection) {
    std::lock_guard<std::mutex> l(mu_);
    std::vector<json> out;
    for (const auto& [p, o] : objects_) {
      if (Collection(p) == collection) out.push_back(o);
    }
    return out;
  }
  // Forgets the events up to now: a watch from an older resourceVersion is answered 410.
  void Compact() {
    std::lock_guard<std::mutex> l(mu_);
    compacted_ = version_;
    events_.clear();
  }
  // A BOOKMARK for the watchers of `collection` that asked for them.
  void Bookmark(const std::string& collection) {
    std::lock_guard<std::mutex> l(mu_);
    Record(collection, "BOOKMARK", {{"metadata", {{"resourceVersion", std::to_string(version_)}}}});
  }
  // Ends every watch open now (as an API server restart does).
  void EndWatches() {
    std::lock_guard<std::mutex> l(mu_);
    ++watch_generation_;
    cv_.notify_all();
  }
  int64_t resource_version() {
    std::lock_guard<std::mutex> l(mu_);
    return version_;
  }
  // Changes what a create, update or patch stores (and answers), as an API server drops the fields
  // of a feature it has off (a ResourceSlice's device taints without DRADeviceTaints).
  void FilterWrites(std::function<void(const std::string& path, json& object)> filter) {
    std::lock_guard<std::mutex> l(mu_);
    write_filter_ = std::move(filter);
  }
  // A resource this server serves: listing `collection` while it holds no object is an empty list,
  // not 404 (which says the API server does not know the resource, e.g. a resource.k8s.io version
  // it lacks).
  void ServeCollection(const std::string& collection) {
    std::lock_guard<std::mutex> l(mu_);
    served_.insert(collection);
  }

  // ---- Nodes and DaemonSets, the objects the agent asks for ----

  static std::string NodePath(const std::string& node) { return "/api/v1/nodes/" + node; }
  static std::string DaemonSetPath(const std::string& ns, const std::string& name) {
    return "/apis/apps/v1/namespaces/" + ns + "/daemonsets/" + name;
  }
  static constexpr char kEvents[] = "/api/v1/namespaces/default/events";
  void AddNode(const std::string& node, const std::string& uid = "node-uid-1") {
    PutObject(NodePath(node), {{"apiVersion", "v1"}, {"kind", "Node"},
                               {"metadata", {{"name", node}, {"uid", uid}, {"labels", json::object()},
                                             {"annotations", json::object()}}},
                               {"status", {{"conditions", json::array()}}}});
  }
  void AddDaemonSet(const std::string& ns, const std::string& name) {
    PutObject(DaemonSetPath(ns, name), {{"apiVersion", "apps/v1"}, {"kind", "DaemonSet"},
                                        {"metadata", {{"name", name}, {"namespace", ns}, {"uid", "ds-uid-1"}}}});
  }
  // As `manager` would by merge patch ("gpunode": as an earlier agent did).
  void SetLabel(const std::string& node, const std::string& k, const std::string& v, const std::string& manager = "test") {
    Change(NodePath(node), [&](json& n) { n["metadata"]["labels"][k] = v; }, manager);
  }
  void SetAnnotation(const std::string& node, const std::string& k, const std::string& v,
                     const std::string& manager = "test") {
    Change(NodePath(node), [&](json& n) { n["metadata"]["annotations"][k] = v; }, manager);
  }
  std::map<std::string, std::string> Labels(const std::string& node) {
    json n = Object(NodePath(node));
    std::map<std::string, std::string> out;
    if (n.is_object() && n["metadata"].contains("labels") && n["metadata"]["labels"].is_object()) {
      for (const auto& [k, v] : n["metadata"]["labels"].items()) {
        if (v.is_string()) out[k] = v.get<std::string>();
      }
    }
    return out;
  }
  // A deletionTimestamp (what a foreground delete does first).
  void MarkDeleting(const std::string& path) {
    Change(path, [](json& o) { o["metadata"]["deletionTimestamp"] = "2026-12-01T13:00:00Z"; });
  }

  // ---- what was asked ----

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

  // A write that sets a label (merge patch or apply) waits while this is true (until cleared or
  // the server stops): an API server slow to write.
  std::atomic<bool> hang_label_writes{false};
  // Writes waiting now.
  int hung() const { return hung_.load(); }

 private:
  struct Route {
    std::vector<Responder> answers;
    size_t next = 0;
  };
  struct Event {
    int64_t rv;
    std::string collection;
    std::string type;
    json object;
  };

  static std::string Collection(const std::string& path) {
    const size_t slash = path.rfind('/');
    return slash == std::string::npos ? "" : path.substr(0, slash);
  }

  // A new resourceVersion for the object at `path` and an event for its watchers. mu_ held.
  void Bump(const std::string& path, const std::string& type) {
    json& o = objects_[path];
    o["metadata"]["resourceVersion"] = std::to_string(++version_);
    Record(Collection(path), type, o);
  }
  void Record(const std::string& collection, const std::string& type, const json& object) {
    events_.push_back({version_, collection, type, object});
    cv_.notify_all();
  }

  void Start() {
    server_->set_tcp_nodelay(true);  // as Go's servers: no Nagle delay between headers and body
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
    bool routed = false;
    {
      std::lock_guard<std::mutex> l(mu_);
      auto it = routes_.find(req.method + " " + req.path);
      if (it != routes_.end() && !it->second.answers.empty()) {
        Route& r = it->second;
        answer = r.answers[std::min(r.next, r.answers.size() - 1)];
        ++r.next;
        routed = true;
      }
    }
    if (routed && answer) return answer(req, res, stopping_atomic_);
    if (req.method == "GET" && req.has_param("watch")) return Watch(req, res);
    if (req.method == "PATCH" && SetsLabel(req) && hang_label_writes) HangWhileAsked();
    ServeObject(req, res);
  }

  static bool SetsLabel(const httplib::Request& req) {
    json body = json::parse(req.body, nullptr, false);
    if (!body.is_object() || !body.contains("metadata") || !body["metadata"].is_object()) return false;
    const json& labels = body["metadata"].value("labels", json());
    if (!labels.is_object()) return false;
    for (const auto& [k, v] : labels.items()) {
      if (v.is_string()) return true;
    }
    return false;
  }
  void HangWhileAsked() {
    ++hung_;
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait_for(l, std::chrono::seconds(30), [this] { return stopping_ || !hang_label_writes; });
    --hung_;
  }

  static void Reply(httplib::Response& res, int status, const json& body) {
    res.status = status;
    res.set_content(body.dump(), "application/json");
  }

  static std::string ManagerOf(const httplib::Request& req) {
    if (req.has_param("fieldManager")) return req.get_param_value("fieldManager");
    const std::string ua = req.get_header_value("User-Agent");
    const std::string m = ua.substr(0, ua.find('/'));
    return m.empty() ? "unknown" : m;
  }

  // The object at a path or its "/status".
  std::map<std::string, json>::iterator Find(std::string path, bool* status_sub) {
    *status_sub = false;
    auto it = objects_.find(path);
    if (it != objects_.end()) return it;
    if (path.size() > 7 && path.compare(path.size() - 7, 7, "/status") == 0) {
      *status_sub = true;
      path.resize(path.size() - 7);
      return objects_.find(path);
    }
    return objects_.end();
  }

  static bool NameMatches(const httplib::Request& req, const json& o) {
    return NameMatches(req.get_param_value("fieldSelector"), o);
  }
  // A fieldSelector as the API server applies it: comma-separated `path=value`, `path==value` or
  // `path!=value` terms on the object's string fields (metadata.name, spec.nodeName, spec.driver...);
  // a missing field is "".
  static bool NameMatches(const std::string& selector, const json& o) {
    size_t pos = 0;
    while (pos <= selector.size()) {
      size_t end = selector.find(',', pos);
      if (end == std::string::npos) end = selector.size();
      const std::string term = selector.substr(pos, end - pos);
      pos = end + 1;
      const size_t eq = term.find('=');
      if (term.empty() || eq == std::string::npos || eq == 0) continue;
      const bool negate = term[eq - 1] == '!';
      const std::string path = term.substr(0, negate ? eq - 1 : eq);
      const std::string want = term.substr(term.compare(eq, 2, "==") == 0 ? eq + 2 : eq + 1);
      const json* at = &o;
      size_t from = 0;
      while (at != nullptr && from <= path.size()) {
        size_t dot = path.find('.', from);
        if (dot == std::string::npos) dot = path.size();
        const std::string key = path.substr(from, dot - from);
        at = at->is_object() && at->contains(key) ? &(*at)[key] : nullptr;
        from = dot + 1;
      }
      const std::string got = at != nullptr && at->is_string() ? at->get<std::string>() : "";
      if ((got == want) == negate) return false;
    }
    return true;
  }
  // The kind of a collection's objects, for the bookmark that ends a watch's initial events.
  static std::string KindOf(const std::string& collection) {
    static const std::map<std::string, std::string> kinds = {
        {"nodes", "Node"}, {"pods", "Pod"}, {"events", "Event"}, {"daemonsets", "DaemonSet"},
        {"leases", "Lease"}, {"resourceslices", "ResourceSlice"}, {"resourceclaims", "ResourceClaim"},
        {"deviceclasses", "DeviceClass"}};
    const std::string plural = collection.substr(collection.rfind('/') + 1);
    auto it = kinds.find(plural);
    return it != kinds.end() ? it->second : plural;
  }
  // "/apis/resource.k8s.io/v1/resourceslices" -> "resource.k8s.io/v1"; "/api/v1/nodes" -> "v1".
  static std::string ApiVersionOf(const std::string& collection) {
    if (collection.rfind("/api/", 0) == 0) return collection.substr(5, collection.find('/', 5) - 5);
    if (collection.rfind("/apis/", 0) != 0) return "v1";
    const size_t group_end = collection.find('/', 6);
    const size_t version_end = collection.find('/', group_end + 1);
    return collection.substr(6, version_end - 6);
  }

  void List(const httplib::Request& req, httplib::Response& res, const std::string& collection) {
    std::vector<const json*> items;
    for (const auto& [p, o] : objects_) {
      if (Collection(p) == collection && NameMatches(req, o)) items.push_back(&o);
    }
    size_t from = 0;
    if (req.has_param("continue")) from = std::stoul(req.get_param_value("continue"));
    const size_t limit = req.has_param("limit") ? std::stoul(req.get_param_value("limit")) : 0;
    const size_t to = limit > 0 ? std::min(items.size(), from + limit) : items.size();
    json list = {{"kind", "List"}, {"apiVersion", "v1"},
                 {"metadata", {{"resourceVersion", std::to_string(version_)}}}, {"items", json::array()}};
    for (size_t i = from; i < to; ++i) list["items"].push_back(*items[i]);
    if (to < items.size()) list["metadata"]["continue"] = std::to_string(to);
    Reply(res, 200, list);
  }

  void ServeObject(const httplib::Request& req, httplib::Response& res) {
    std::lock_guard<std::mutex> l(mu_);
    bool status_sub = false;
    auto it = Find(req.path, &status_sub);
    if (req.method == "POST") return Create(req, res);
    const bool apply = req.method == "PATCH" && req.get_header_value("Content-Type") == "application/apply-patch+yaml";
    // An apply creates a missing namespaced object (ConfigMaps, DaemonSets), as the API server does.
    const bool created = it == objects_.end() && apply && !status_sub && req.path.find("/namespaces/") != std::string::npos;
    if (created) it = objects_.emplace(req.path, NewObject(req.path, req.body)).first;
    if (it == objects_.end()) {
      if (req.method == "GET" && IsCollection(req.path)) return List(req, res, req.path);
      return Reply(res, 404, StatusBody(404, "NotFound", req.path + " not found"));
    }
    json& obj = it->second;
    const std::string path = it->first;
    if (req.method == "GET") return Reply(res, 200, obj);
    if (req.method == "DELETE") {
      json last = obj;
      objects_.erase(it);
      last["metadata"]["resourceVersion"] = std::to_string(++version_);
      Record(Collection(path), "DELETED", last);
      return Reply(res, 200, {{"kind", "Status"}, {"status", "Success"}});
    }
    auto body = json::parse(req.body, nullptr, false);
    if (body.is_discarded()) {
      if (created) objects_.erase(it);
      return Reply(res, 400, StatusBody(400, "BadRequest", "not JSON"));
    }
    const std::string have_rv = obj["metadata"].value("resourceVersion", "");
    const std::string type = req.get_header_value("Content-Type");
    json next = obj;
    if (req.method == "PUT") {
      next = body;
    } else if (type == "application/apply-patch+yaml") {
      std::string conflict;
      if (!FieldManagers::Apply(next, body, ManagerOf(req), req.get_param_value("force") == "true",
                                status_sub ? "status" : "", &conflict)) {
        return Reply(res, 409, StatusBody(409, "Conflict", conflict));
      }
    } else if (type == "application/json-patch+json") {
      try {
        next = obj.patch(body);
      } catch (const std::exception& e) {
        return Reply(res, 422, StatusBody(422, "Invalid", std::string("the JSON patch failed: ") + e.what()));
      }
    } else if (type == "application/strategic-merge-patch+json") {
      StrategicMerge(next, body);
    } else {
      next.merge_patch(body);
    }
    if (!next.is_object() || !next.contains("metadata") || !next["metadata"].is_object()) {
      return Reply(res, 422, StatusBody(422, "Invalid", "the object lost its metadata"));
    }
    const std::string want_rv = next["metadata"].value("resourceVersion", "");
    if (!want_rv.empty() && want_rv != have_rv) {
      return Reply(res, 409, StatusBody(409, "Conflict", "Operation cannot be fulfilled: the object has been modified; "
                                                         "please apply your changes to the latest version and try again"));
    }
    if (type != "application/apply-patch+yaml") FieldManagers::Update(obj, next, ManagerOf(req));
    if (write_filter_) write_filter_(path, next);
    obj = std::move(next);
    Bump(path, created ? "ADDED" : "MODIFIED");
    Reply(res, created ? 201 : 200, obj);
  }

  // What server-side apply of a missing object starts from: its name (and namespace) from the
  // path, its apiVersion and kind from the applied configuration.
  static json NewObject(const std::string& path, const std::string& body) {
    json o = {{"metadata", {{"name", path.substr(path.rfind('/') + 1)}}}};
    const size_t ns = path.find("/namespaces/");
    if (ns != std::string::npos) {
      const size_t from = ns + 12, to = path.find('/', from);
      o["metadata"]["namespace"] = path.substr(from, to == std::string::npos ? std::string::npos : to - from);
    }
    const json config = json::parse(body, nullptr, false);
    for (const char* k : {"apiVersion", "kind"}) {
      if (config.is_object() && config.contains(k) && config[k].is_string()) o[k] = config[k];
    }
    return o;
  }

  bool IsCollection(const std::string& path) const {
    for (const auto& [p, o] : objects_) {
      if (Collection(p) == path) return true;
    }
    for (const Event& e : events_) {
      if (e.collection == path) return true;
    }
    return path == "/api/v1/nodes" || served_.count(path) > 0;
  }

  void Create(const httplib::Request& req, httplib::Response& res) {
    auto body = json::parse(req.body, nullptr, false);
    if (!body.is_object()) return Reply(res, 400, StatusBody(400, "BadRequest", "not JSON"));
    if (!body.contains("metadata") || !body["metadata"].is_object()) body["metadata"] = json::object();
    std::string name = body["metadata"].value("name", "");
    if (name.empty()) name = body["metadata"].value("generateName", "obj-") + std::to_string(++generated_);
    const std::string at = req.path + "/" + name;
    if (objects_.count(at)) return Reply(res, 409, StatusBody(409, "AlreadyExists", name + " already exists"));
    body["metadata"]["name"] = name;
    if (write_filter_) write_filter_(at, body);
    objects_[at] = body;
    Bump(at, "ADDED");
    Reply(res, 201, objects_[at]);
  }

  // Streams the collection's events after the request's resourceVersion ("" or "0": the current
  // objects as ADDED first), one JSON line each, until timeoutSeconds, EndWatches, the client goes
  // or the server stops. A resourceVersion older than Compact() is an ERROR event with code 410.
  void Watch(const httplib::Request& req, httplib::Response& res) {
    const std::string collection = req.path;
    const std::string rv = req.has_param("resourceVersion") ? req.get_param_value("resourceVersion") : "";
    const bool bookmarks = req.get_param_value("allowWatchBookmarks") == "true";
    const int timeout = req.has_param("timeoutSeconds") ? std::stoi(req.get_param_value("timeoutSeconds")) : 300;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout);
    auto next = std::make_shared<int64_t>(0);
    auto pending = std::make_shared<std::string>();
    int generation = 0;
    {
      std::lock_guard<std::mutex> l(mu_);
      generation = watch_generation_;
      // client-go's streaming list (WatchListClient): the current objects as ADDED, then a
      // BOOKMARK annotated k8s.io/initial-events-end, whatever resourceVersion was given.
      const bool initial_events = req.get_param_value("sendInitialEvents") == "true";
      if (rv.empty() || rv == "0" || initial_events) {
        for (const auto& [p, o] : objects_) {
          if (Collection(p) == collection && NameMatches(req, o)) *pending += json{{"type", "ADDED"}, {"object", o}}.dump() + "\n";
        }
        *next = version_;
        if (initial_events) {
          const json mark = {{"kind", KindOf(collection)}, {"apiVersion", ApiVersionOf(collection)},
                             {"metadata", {{"resourceVersion", std::to_string(version_)},
                                           {"annotations", {{"k8s.io/initial-events-end", "true"}}}}}};
          *pending += json{{"type", "BOOKMARK"}, {"object", mark}}.dump() + "\n";
        }
      } else {
        *next = std::stoll(rv);
        if (*next < compacted_) {
          *pending = json{{"type", "ERROR"}, {"object", StatusBody(410, "Expired", "too old resource version: " + rv)}}.dump() + "\n";
          *next = -1;
        }
      }
    }
    const std::string selector = req.get_param_value("fieldSelector");
    // Never gzip a watch (cpp-httplib compresses application/json when the client accepts gzip, as
    // Go clients do, and its compressor holds the events back): the API server does not either.
    res.set_chunked_content_provider("application/json; charset=utf-8", [this, selector, collection, bookmarks, deadline, next, pending,
                                                          generation](size_t, httplib::DataSink& sink) {
      std::string out;
      out.swap(*pending);
      bool end = *next < 0;
      if (!end) {
        std::unique_lock<std::mutex> l(mu_);
        auto ready = [&] {
          return stopping_ || watch_generation_ != generation || (!events_.empty() && events_.back().rv > *next);
        };
        if (out.empty()) cv_.wait_for(l, std::chrono::milliseconds(100), ready);
        end = stopping_ || watch_generation_ != generation || std::chrono::steady_clock::now() >= deadline;
        for (const Event& e : events_) {
          if (e.rv <= *next || e.collection != collection) continue;
          if (e.type == "BOOKMARK" ? bookmarks : NameMatches(selector, e.object)) {
            out += json{{"type", e.type}, {"object", e.object}}.dump() + "\n";
          }
          *next = std::max(*next, e.rv);
        }
      }
      if (!out.empty() && !sink.write(out.data(), out.size())) return false;
      if (end) {
        sink.done();
        return true;
      }
      return sink.is_writable();
    });
  }

  std::unique_ptr<httplib::Server> server_;
  bool tls_ = false;
  int port_ = 0;
  std::thread thread_;
  std::atomic<bool> stopping_atomic_{false};
  std::atomic<int> hung_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  int watch_generation_ = 0;
  std::map<std::string, Route> routes_;
  std::map<std::string, json> objects_;
  std::set<std::string> served_;
  std::function<void(const std::string&, json&)> write_filter_;
  std::vector<Event> events_;
  int64_t compacted_ = 0;
  std::vector<std::string> requests_;
  std::vector<httplib::Headers> headers_;
  int64_t version_ = 100;
  int generated_ = 0;
};

}  // namespace gpunode::testing

#endif  // GPUNODE_TEST_TESTING_FAKE_API_SERVER_H_
