// The exporter's HTTP(S) endpoint: /metrics, /health, / (status page). Serves what a PageSource
// answers (page_source.h: the live Exporter's rendered pages, or the files the agent published);
// never touches NVML. Basic auth, TLS (with optional client certificates) and extra headers come
// from the web config file.
//
// Built to face a whole node (any pod can connect): an event loop (Boost.Beast on asio; a thread
// per core, at most 4; a strand per connection) owns every connection, so idle or slow clients
// cost a socket and a timer, not a thread. Each connection has one deadline for the whole request
// (TLS handshake, request line, headers), limits on its size, and bcrypt checks run on the
// authenticator's own small pool. One request per connection.
#ifndef GPUNODE_EXPORTER_HTTP_SERVER_H_
#define GPUNODE_EXPORTER_HTTP_SERVER_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "src/base/status.h"
#include "src/exporter/exporter.h"
#include "src/exporter/page_source.h"
#include "src/exporter/web_config.h"


namespace gpunode::exporter {

struct ListenAddress {
  std::string host;  // "0.0.0.0", "::", "127.0.0.1", a name
  int port = 0;      // 0: any free port
};
// ":9400" (all IPv4 and IPv6 addresses), "0.0.0.0:9400", "127.0.0.1:0", "[::]:9400",
// "[::1]:9400", "localhost:9400". A missing or invalid port is InvalidArgument.
StatusOr<ListenAddress> ParseListenAddress(std::string_view text);

// An answer from ServerOptions::routes.
struct RouteResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

struct ServerOptions {
  std::string listen = ":9400";
  // Paths served before the page source's (/healthz, /readyz of the agent): nullopt passes the
  // path on. Called on the event loop: must be quick and must not block.
  std::function<std::optional<RouteResponse>(std::string_view path)> routes;
  std::optional<WebConfig> web;
  // From accept to the last header byte (TLS handshake included): a client that has not sent its
  // whole request by then is disconnected, however it trickles bytes.
  std::chrono::milliseconds request_timeout{5000};
  std::chrono::milliseconds write_timeout{10000};  // to send the whole response
  size_t max_header_bytes = 8192;                  // request line + headers; more: 431
  // Connections open at once; one more is closed as soon as it is accepted. Capped below the
  // process's open-file limit.
  int max_connections = 4096;
  int backlog = 1024;  // listen(2) queue: a burst of scrapers must not overflow it
  // Threads running the event loop (each connection is on a strand: its steps never overlap);
  // 0: one per core, at most 4. Connections are not tied to threads, so this only spreads a burst
  // of simultaneous scrapes over the cores.
  int loop_threads = 0;
  AuthLimits auth;     // bcrypt pool and limits (basic auth)
  // Wrong credentials (and checks refused by the limits) are answered this late (± 50 %, at
  // random): a client retrying in a loop makes one attempt per delay instead of thousands a second
  // that every other client would queue behind. Requests without credentials are answered at once.
  std::chrono::milliseconds auth_failure_delay{1000};
};

class MetricsServer {
 public:
  // Binds the port now: "address already in use", a bad certificate or key, etc. are errors here.
  static StatusOr<std::unique_ptr<MetricsServer>> Create(Exporter& exporter, ServerOptions options);
  // Without an exporter: only `options.routes` answer (404 otherwise).
  static StatusOr<std::unique_ptr<MetricsServer>> Create(Exporter* exporter, ServerOptions options);
  // /metrics, /health and / from `source` (which must outlive the server): the published files.
  static StatusOr<std::unique_ptr<MetricsServer>> Create(PageSource& source, ServerOptions options);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  int port() const { return port_; }
  bool tls() const { return options_.web && options_.web->tls.has_value(); }
  // Serves until Stop() (from another thread or a signal handler thread).
  void Serve();
  void Stop();
  // Connections open now (accepted and not yet closed).
  int connections() const;
  // The basic-auth checker; nullptr without basic_auth_users.
  const BasicAuthenticator* authenticator() const;

  struct Impl;

 private:
  MetricsServer(PageSource* source, std::unique_ptr<PageSource> owned, ServerOptions options);
  static StatusOr<std::unique_ptr<MetricsServer>> Listen(std::unique_ptr<MetricsServer> s);

  ServerOptions options_;
  std::unique_ptr<PageSource> owned_source_;  // the live exporter's adapter
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

}  // namespace gpunode::exporter

#endif  // GPUNODE_EXPORTER_HTTP_SERVER_H_
