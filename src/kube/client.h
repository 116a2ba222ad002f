// A small Kubernetes API client: what the node services and the chart's uninstall hook need (get,
// list, merge-patch and delete of objects, by path), over HTTPS with cpp-httplib and OpenSSL.
//
// There is no maintained C++ Kubernetes client in Debian; this is the minimum, written by hand
// (docs/ARCHITECTURE.md): connection settings from a kubeconfig file or from inside a pod (the
// service-account token, its CA and namespace), requests by path, and errors that name the request,
// the HTTP status and the API server's own message (a 403 says which verb on which resource the
// service account lacks).
#ifndef GPUNODE_KUBE_CLIENT_H_
#define GPUNODE_KUBE_CLIENT_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "nlohmann/json.hpp"
#include "src/base/status.h"

namespace gpunode::kube {

// Where the API server is and who we are.
struct Connection {
  std::string scheme = "https";  // https or http
  std::string host;              // name or address (IPv6 without brackets)
  int port = 443;
  std::string ca_pem;            // trusted CA certificates (PEM); empty = the system's
  bool insecure_skip_verify = false;
  std::string token;             // bearer token
  std::string token_file;        // re-read when it changes (bound tokens rotate)
  std::string client_cert_pem;   // client certificate authentication
  std::string client_key_pem;
  std::string ns;                // default namespace (in a pod: the service account's)
  std::string source;            // "in-cluster", "kubeconfig /path (context ctx)": for messages
};

// From a kubeconfig file: the current context (or `context`), its cluster and user. Supported:
// server, certificate-authority(-data), insecure-skip-tls-verify, token, tokenFile,
// client-certificate(-data), client-key(-data); relative paths are relative to the file. An exec or
// auth-provider user is refused with a message saying so.
StatusOr<Connection> LoadKubeconfig(const std::string& path, const std::string& context = "");

// Inside a pod: KUBERNETES_SERVICE_HOST/PORT and the files of the service account (dir defaults to
// /var/run/secrets/kubernetes.io/serviceaccount).
StatusOr<Connection> InClusterConnection(const std::string& dir = "");

// The usual order: an explicit kubeconfig, else $KUBECONFIG, else in-cluster, else ~/.kube/config.
StatusOr<Connection> ResolveConnection(const std::string& kubeconfig = "");

// "https://host:port" -> scheme, host, port.
Status ParseServer(const std::string& server, Connection* c);

class Client {
 public:
  explicit Client(Connection c);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Path like "/api/v1/nodes/n1". Errors: NotFound (404), PermissionDenied (401/403),
  // Aborted (409 conflict), FailedPrecondition (422 invalid), Unavailable (connection, 5xx,
  // 429), DeadlineExceeded (timeout); each message names the verb, the path and the server's reason.
  StatusOr<nlohmann::json> Get(const std::string& path);
  // JSON merge patch (RFC 7386): null removes a key.
  StatusOr<nlohmann::json> MergePatch(const std::string& path, const nlohmann::json& patch);
  StatusOr<nlohmann::json> Post(const std::string& path, const nlohmann::json& body);
  // A body like {"propagationPolicy": "Foreground"}; 404 is NotFound (the caller decides).
  StatusOr<nlohmann::json> Delete(const std::string& path, const nlohmann::json& body = nullptr);
  // Strategic merge patch (built-in kinds: lists such as Node conditions merge by their key).
  StatusOr<nlohmann::json> StrategicPatch(const std::string& path, const nlohmann::json& patch);
  // Replace (the object's metadata.resourceVersion makes a stale write a 409 → Aborted).
  StatusOr<nlohmann::json> Put(const std::string& path, const nlohmann::json& body);

  // A watch: GET path?watch=1&resourceVersion=RV&allowWatchBookmarks=true&timeoutSeconds=N (`path`
  // may carry its own query). `on_event(type, object)` gets ADDED/MODIFIED/DELETED/BOOKMARK/ERROR
  // in order; returning false ends the watch. Returns OK when the server or `on_event` ended it,
  // Aborted (410 Gone) when RV is too old (list again), Unavailable when the connection broke.
  // `stop` is checked between chunks. Uses its own connection.
  Status Watch(const std::string& path, const std::string& resource_version, int timeout_seconds,
               const std::function<bool(const std::string& type, const nlohmann::json& object)>& on_event,
               const std::atomic<bool>* stop = nullptr);

  const Connection& connection() const { return c_; }
  void set_timeout(std::chrono::milliseconds t) { timeout_ = t; }

 private:
  StatusOr<nlohmann::json> Call(const char* verb, const std::string& path, const std::string& body,
                                const char* content_type);
  std::string BearerToken() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Connection c_;
  std::chrono::milliseconds timeout_{10000};
  absl::Mutex mu_;  // one request at a time on the connection
  struct Impl;
  std::unique_ptr<Impl> impl_ ABSL_PT_GUARDED_BY(mu_);  // the connection and the token cache
};

// Percent-encodes a path segment or a query value.
std::string UrlEscape(const std::string& s);

}  // namespace gpunode::kube

#endif  // GPUNODE_KUBE_CLIENT_H_
