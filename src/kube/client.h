// A small Kubernetes API client: what the node services, the chart's uninstall hook and
// `gpunode fleet` need (get, list, watch, patch, put, post and delete of objects, by path), over
// HTTPS with cpp-httplib and OpenSSL.
//
// There is no maintained C++ Kubernetes client in Debian; this is the minimum, written by hand
// (docs/ARCHITECTURE.md): connection settings from a kubeconfig file or from inside a pod (the
// service-account token, its CA and namespace), requests by path, and errors that name the request,
// the HTTP status and the API server's own message (a 403 says which verb on which resource the
// service account lacks). The API server is not trusted (docs/ARCHITECTURE.md): answers are bounded
// in size, time and line length, every field is read with its type checked (json_fields.h), and
// TLS trusts the cluster's CA alone when one is given.
#ifndef GPUNODE_KUBE_CLIENT_H_
#define GPUNODE_KUBE_CLIENT_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>

#include "nlohmann/json.hpp"
#include "src/base/status.h"

namespace gpunode::kube {

// Where the API server is and who we are.
struct Connection {
  std::string scheme = "https";  // https or http
  std::string host;              // name or address (IPv6 without brackets)
  int port = 443;
  std::string ca_pem;            // the CA certificates trusted, alone (PEM); empty = the system's
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

// Limits and manners of one client. The defaults suit the node agent, which makes a handful of
// calls at start (read its Node, labels, a condition, an Event, the watch) and a few a minute
// after: a burst of 10 covers the start without waiting, and 2 requests/s on average caps what a
// bug or a retry loop on every node of a 1 000-node cluster can send at 2 000/s. Commands that
// work cluster-wide (`gpunode fleet`, `gpunode k8s uninstall`) raise them as kubectl does (50/100).
struct ClientOptions {
  // Each call's overall deadline: waiting for the rate limit and a connection, connect, TLS,
  // request, the whole answer, and the waits of its retries. A server that trickles the answer
  // is cut off here (cpp-httplib's own timeouts are per read).
  std::chrono::milliseconds timeout{10000};
  // Connect and TLS handshake of a new connection (within the deadline).
  std::chrono::milliseconds connect_timeout{5000};
  // The largest answer read (after decompression); larger is ResourceExhausted naming the cap.
  size_t max_body_bytes = size_t{64} << 20;
  // The longest line of a watch (one event); longer ends the watch with ResourceExhausted.
  size_t max_watch_line_bytes = size_t{16} << 20;
  // Client-side rate limit, a token bucket (client-go's is 5/10); qps <= 0: none.
  double qps = 2;
  int burst = 10;
  // 429 Too Many Requests and 503 with Retry-After: wait that long (at most max_retry_after, never
  // past the deadline) and send again, at most max_retries times. GET, PUT, PATCH and DELETE;
  // POST only on 429 (the API server's priority and fairness refused it before any handler ran).
  int max_retries = 3;
  std::chrono::milliseconds max_retry_after{10000};
  // Calls in flight at once, each on its own kept-alive connection (watches have their own).
  int max_connections = 4;
};

// One call's own deadline and stop.
struct CallOptions {
  std::chrono::milliseconds timeout{0};  // 0: ClientOptions::timeout
  std::stop_token stop;                  // request_stop() ends the call at once: Cancelled
  // This call's cap on the answer, below the client's (0: ClientOptions::max_body_bytes): a reader
  // of one small object sharing the agent's client (the exporter's pod GETs) bounds it tighter.
  size_t max_body_bytes = 0;
};

// What the API server said about a refused request: the HTTP code and its Status object's
// `reason` and `details.retryAfterSeconds` (or the Retry-After header). Carried as a payload of the
// Status the client returns, so callers can tell a 409 Conflict (a stale resourceVersion: read
// again) from AlreadyExists, or Expired/Gone (410: list again) from other errors.
struct ApiError {
  int http_code = 0;
  std::string reason;            // "Conflict", "AlreadyExists", "Expired", "Gone", "TooManyRequests", ...
  int retry_after_seconds = -1;  // -1: none given
};
std::optional<ApiError> ApiErrorOf(const Status& status);
// The Kubernetes reason of a refused request, "" when the status did not come from the API server.
std::string ReasonOf(const Status& status);

// A paginated list (GET with limit/continue) read page by page and item by item.
struct ListOptions {
  int limit = 500;                // items per page (0: the server's choice: everything at once)
  // "0": served from the API server's watch cache, cheap for it and possibly a little stale; API
  // servers before 1.33 then ignore `limit` and answer in one page, which must fit the body cap.
  // "": a consistent read (from etcd, or the cache where it can serve one).
  std::string resource_version;
  int max_pages = 10000;
  CallOptions call;  // for each page
};
struct ListResult {
  std::string resource_version;  // of the first page
  int pages = 0;
  size_t items = 0;
};

class Client {
 public:
  explicit Client(Connection c, ClientOptions options = {});
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Path like "/api/v1/nodes/n1". Errors: NotFound (404), PermissionDenied (403),
  // Unauthenticated (401), Aborted (409: Conflict or AlreadyExists, ReasonOf tells),
  // FailedPrecondition (400/422 invalid), Unavailable (connection, 5xx, 429), DeadlineExceeded
  // (the call's deadline, 408/504), ResourceExhausted (an answer over the body cap), Cancelled
  // (stopped); each message names the verb, the path and the server's message. Safe to call from
  // several threads at once.
  StatusOr<nlohmann::json> Get(const std::string& path, const CallOptions& options = {});
  // JSON merge patch (RFC 7386): null removes a key.
  StatusOr<nlohmann::json> MergePatch(const std::string& path, const nlohmann::json& patch,
                                      const CallOptions& options = {});
  StatusOr<nlohmann::json> Post(const std::string& path, const nlohmann::json& body, const CallOptions& options = {});
  // A body like {"propagationPolicy": "Foreground"}; 404 is NotFound (the caller decides).
  StatusOr<nlohmann::json> Delete(const std::string& path, const nlohmann::json& body = nullptr,
                                  const CallOptions& options = {});
  // Strategic merge patch (built-in kinds: lists such as Node conditions merge by their key).
  StatusOr<nlohmann::json> StrategicPatch(const std::string& path, const nlohmann::json& patch,
                                          const CallOptions& options = {});
  // Server-side apply (PATCH application/apply-patch+yaml; JSON is YAML): the API server merges
  // `apply_config` (apiVersion, kind, metadata.name and the fields this manager wants) into the
  // object and records `field_manager` as the owner of those fields; a field this manager applied
  // before and leaves out now is removed unless another manager owns it too. A field another
  // manager owns with a different value is 409 Conflict (reason "Conflict", the message names the
  // manager) unless `force` takes it over. Fields of the object may be applied on a subresource
  // path (".../status").
  StatusOr<nlohmann::json> Apply(const std::string& path, const nlohmann::json& apply_config,
                                 const std::string& field_manager, bool force, const CallOptions& options = {});
  // JSON patch (RFC 6902): a list of operations, e.g. a "test" of metadata.resourceVersion first
  // for optimistic concurrency (a failed test is 422 Invalid or 409 Conflict).
  StatusOr<nlohmann::json> JsonPatch(const std::string& path, const nlohmann::json& operations,
                                     const CallOptions& options = {});
  // Replace (the object's metadata.resourceVersion makes a stale write a 409 Conflict → Aborted).
  StatusOr<nlohmann::json> Put(const std::string& path, const nlohmann::json& body, const CallOptions& options = {});

  // GET `path` (which may carry its own query) page by page: limit, resourceVersion on the first
  // page, continue after; `on_item` gets each item as it is read (a page is never one document),
  // and an error from it ends the list. A continue token the server repeats is an error (Internal)
  // instead of a loop; an expired one is 410 (ReasonOf "Expired": list again).
  StatusOr<ListResult> List(const std::string& path, const ListOptions& options,
                            const std::function<Status(nlohmann::json& item)>& on_item);

  // A watch: GET path?watch=1&resourceVersion=RV&allowWatchBookmarks=true&timeoutSeconds=N (`path`
  // may carry its own query). `on_event(type, object)` gets ADDED/MODIFIED/DELETED/BOOKMARK in
  // order; returning false ends the watch. Returns OK when the server, `on_event` or a stop ended
  // it, Aborted (410 Gone/Expired) when RV is too old (list again), Unavailable when the connection
  // broke or an event is malformed (each field's type is checked), ResourceExhausted for a line over
  // max_watch_line_bytes. A stop ends it at once, even with no event coming. Uses a connection of
  // its own; ends at the latest timeout_seconds + 30 s after it started.
  struct WatchOptions {
    std::string resource_version;
    int timeout_seconds = 300;
    bool bookmarks = true;  // allowWatchBookmarks=true: BOOKMARK events advance the resourceVersion
    std::stop_token stop;
    const std::atomic<bool>* stop_flag = nullptr;  // polled every 50 ms
  };
  using WatchHandler = std::function<bool(const std::string& type, const nlohmann::json& object)>;
  Status Watch(const std::string& path, const WatchOptions& options, const WatchHandler& on_event);
  Status Watch(const std::string& path, const std::string& resource_version, int timeout_seconds,
               const WatchHandler& on_event, const std::atomic<bool>* stop = nullptr);

  // Ends every call and watch in flight at once and refuses new ones (Cancelled): a process that
  // is stopping (SIGTERM) does not wait for the API server.
  void Stop();

  const Connection& connection() const { return c_; }
  const ClientOptions& options() const { return options_; }
  // The default deadline of each call (ClientOptions::timeout). Before the first call.
  void set_timeout(std::chrono::milliseconds t) { options_.timeout = t; }

 private:
  struct Impl;
  StatusOr<nlohmann::json> Call(const char* verb, const std::string& path, const std::string& body,
                                const char* content_type, const CallOptions& options);
  StatusOr<std::string> CallRaw(const char* verb, const std::string& path, const std::string& body,
                                const char* content_type, const CallOptions& options);
  std::string BearerToken();

  Connection c_;
  ClientOptions options_;
  std::unique_ptr<Impl> impl_;
};

// Percent-encodes a path segment or a query value.
std::string UrlEscape(const std::string& s);

}  // namespace gpunode::kube

#endif  // GPUNODE_KUBE_CLIENT_H_
