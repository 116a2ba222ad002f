// The exporter's HTTP(S) endpoint (cpp-httplib): /metrics, /health, / (status page). Serves what
// the Exporter has rendered; never touches NVML. Basic auth, TLS (with optional client
// certificates) and extra headers come from the web config file.
#ifndef GPUNODE_EXPORTER_HTTP_SERVER_H_
#define GPUNODE_EXPORTER_HTTP_SERVER_H_

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "src/base/status.h"
#include "src/exporter/exporter.h"
#include "src/exporter/web_config.h"

namespace httplib {
class Server;
}

namespace gpunode::exporter {

struct ListenAddress {
  std::string host;  // "0.0.0.0", "::", "127.0.0.1", a name
  int port = 0;      // 0: any free port
};
// ":9400" (all IPv4 and IPv6 addresses), "0.0.0.0:9400", "127.0.0.1:0", "[::]:9400",
// "[::1]:9400", "localhost:9400". A missing or invalid port is InvalidArgument.
StatusOr<ListenAddress> ParseListenAddress(std::string_view text);

struct ServerOptions {
  std::string listen = ":9400";
  std::optional<WebConfig> web;
  int threads = 8;  // worker threads; each request holds one only while it is served
};

class MetricsServer {
 public:
  // Binds the port now: "address already in use", a bad certificate or key, etc. are errors here.
  static StatusOr<std::unique_ptr<MetricsServer>> Create(Exporter& exporter, ServerOptions options);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  int port() const { return port_; }
  bool tls() const { return options_.web && options_.web->tls.has_value(); }
  // Serves until Stop() (from another thread or a signal handler thread).
  void Serve();
  void Stop();

 private:
  MetricsServer(Exporter& exporter, ServerOptions options);
  void Routes();

  Exporter& exporter_;
  ServerOptions options_;
  std::unique_ptr<httplib::Server> server_;
  std::unique_ptr<BasicAuthenticator> auth_;
  int port_ = 0;
};

}  // namespace gpunode::exporter

#endif  // GPUNODE_EXPORTER_HTTP_SERVER_H_
