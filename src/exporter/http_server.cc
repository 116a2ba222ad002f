#include "src/exporter/http_server.h"

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "httplib.h"
#include "src/exporter/status_page.h"

namespace gpunode::exporter {
namespace {

std::string OpenSslError() {
  const unsigned long e = ERR_get_error();
  if (e == 0) return "unknown OpenSSL error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  ERR_clear_error();
  return buf;
}

int TlsVersion(const std::string& v) {
  if (v == "TLS10") return TLS1_VERSION;
  if (v == "TLS11") return TLS1_1_VERSION;
  if (v == "TLS12") return TLS1_2_VERSION;
  return TLS1_3_VERSION;
}

// Accepts any client certificate (RequestClientCert / RequireAnyClientCert verify nothing).
int AcceptAny(int, X509_STORE_CTX*) { return 1; }

}  // namespace

StatusOr<ListenAddress> ParseListenAddress(std::string_view text) {
  auto bad = [&](std::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("listen address \"", std::string(text), "\": ",
                                                   std::string(why),
                                                   " (want :9400, 0.0.0.0:9400, [::]:9400 or host:port)"));
  };
  ListenAddress a;
  std::string_view host, port;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return bad("an IPv6 address needs the form [addr]:port");
    }
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    const size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) return bad("no port");
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (host.find(':') != std::string_view::npos) return bad("put an IPv6 address in brackets");
  }
  int p = 0;
  if (!absl::SimpleAtoi(absl::string_view(port.data(), port.size()), &p) || p < 0 || p > 65535) {
    return bad("the port is not a number from 0 to 65535");
  }
  a.host = host.empty() ? "::" : std::string(host);  // empty: every address, IPv4 and IPv6
  a.port = p;
  return a;
}

MetricsServer::MetricsServer(Exporter& exporter, ServerOptions options)
    : exporter_(exporter), options_(std::move(options)) {}

MetricsServer::~MetricsServer() { Stop(); }

StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Create(Exporter& exporter, ServerOptions options) {
  GPUNODE_ASSIGN_OR_RETURN(ListenAddress addr, ParseListenAddress(options.listen));
  std::unique_ptr<MetricsServer> s(new MetricsServer(exporter, std::move(options)));
  const WebConfig* web = s->options_.web ? &*s->options_.web : nullptr;
  if (web != nullptr && web->tls) {
    const WebConfig::Tls tls = *web->tls;
    std::string error;
    auto server = std::make_unique<httplib::SSLServer>([&tls, &error](SSL_CTX& ctx) {
      SSL_CTX_set_options(&ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_SESSION_RESUMPTION_ON_RENEGOTIATION);
      SSL_CTX_set_min_proto_version(&ctx, TlsVersion(tls.min_version));
      SSL_CTX_set_max_proto_version(&ctx, TlsVersion(tls.max_version));
      if (SSL_CTX_use_certificate_chain_file(&ctx, tls.cert_file.c_str()) != 1) {
        error = absl::StrCat("certificate ", tls.cert_file, ": ", OpenSslError());
        return false;
      }
      if (SSL_CTX_use_PrivateKey_file(&ctx, tls.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
        error = absl::StrCat("key ", tls.key_file, ": ", OpenSslError());
        return false;
      }
      if (SSL_CTX_check_private_key(&ctx) != 1) {
        error = absl::StrCat("key ", tls.key_file, " does not match certificate ", tls.cert_file);
        return false;
      }
      if (!tls.client_ca_file.empty()) {
        if (SSL_CTX_load_verify_locations(&ctx, tls.client_ca_file.c_str(), nullptr) != 1) {
          error = absl::StrCat("client CA ", tls.client_ca_file, ": ", OpenSslError());
          return false;
        }
        SSL_CTX_set_client_CA_list(&ctx, SSL_load_client_CA_file(tls.client_ca_file.c_str()));
      }
      const std::string& a = tls.client_auth_type;
      if (a == "RequestClientCert") {
        SSL_CTX_set_verify(&ctx, SSL_VERIFY_PEER, AcceptAny);
      } else if (a == "RequireAnyClientCert") {
        SSL_CTX_set_verify(&ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, AcceptAny);
      } else if (a == "VerifyClientCertIfGiven") {
        SSL_CTX_set_verify(&ctx, SSL_VERIFY_PEER, nullptr);
      } else if (a == "RequireAndVerifyClientCert") {
        SSL_CTX_set_verify(&ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
      } else {
        SSL_CTX_set_verify(&ctx, SSL_VERIFY_NONE, nullptr);
      }
      return true;
    });
    if (!server->is_valid()) {
      return absl::InvalidArgumentError(absl::StrCat("TLS setup failed: ", error));
    }
    s->server_ = std::move(server);
  } else {
    s->server_ = std::make_unique<httplib::Server>();
  }
  if (web != nullptr) s->auth_ = std::make_unique<BasicAuthenticator>(web->basic_auth_users);
  const int threads = std::max(1, s->options_.threads);
  s->server_->new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  // One request per connection: a worker is never parked on an idle keep-alive connection (a
  // scraper reconnects every 15-30 s anyway), and slow clients time out after 5 s.
  s->server_->set_keep_alive_max_count(1);
  s->server_->set_read_timeout(5, 0);
  s->server_->set_write_timeout(10, 0);
  s->server_->set_tcp_nodelay(true);
  // Debian's cpp-httplib listens with a backlog of 5: a burst of scrapers overflows it and the
  // kernel drops SYNs (a 1 s + retransmit stall). Remember the listening socket (httplib's default
  // options, SO_REUSEADDR, then ours) and raise its backlog after bind.
  auto listen_fd = std::make_shared<int>(-1);
  s->server_->set_socket_options([listen_fd](socket_t sock) {
    httplib::default_socket_options(sock);
    *listen_fd = sock;
  });
  s->Routes();

  errno = 0;
  if (addr.port == 0) {
    const int port = s->server_->bind_to_any_port(addr.host);
    if (port < 0) {
      return absl::UnavailableError(absl::StrCat("cannot listen on ", s->options_.listen, ": ",
                                                 errno != 0 ? std::strerror(errno) : "bind failed"));
    }
    s->port_ = port;
  } else {
    if (!s->server_->bind_to_port(addr.host, addr.port)) {
      const int e = errno;
      return absl::UnavailableError(absl::StrCat(
          "cannot listen on ", s->options_.listen, ": ",
          e == EADDRINUSE ? "address already in use (another exporter on this port? use --listen)"
                          : (e != 0 ? std::strerror(e) : "bind failed")));
    }
    s->port_ = addr.port;
  }
  if (*listen_fd >= 0) ::listen(*listen_fd, 1024);  // Linux: a second listen() updates the backlog
  return s;
}

void MetricsServer::Routes() {
  httplib::Server& srv = *server_;
  srv.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (auth_ && auth_->enabled() && !auth_->Allow(req.get_header_value("Authorization"))) {
      res.status = 401;
      res.set_header("WWW-Authenticate", "Basic realm=\"gpunode\"");
      res.set_content("Unauthorized\n", "text/plain; charset=utf-8");
      return httplib::Server::HandlerResponse::Handled;
    }
    if (req.method == "GET" && req.path == "/metrics") {
      // The hot path, served here (no route matching): the page rendered once per snapshot, and
      // its gzip made then too when the scraper accepts gzip (Prometheus does).
      Exporter::RenderedPage page = exporter_.Page();
      if (!page.text) {
        res.status = 503;
        res.set_content("no collection has finished yet\n", "text/plain; charset=utf-8");
        return httplib::Server::HandlerResponse::Handled;
      }
      const std::string accept = req.get_header_value("Accept-Encoding");
      if (page.gzip && accept.find("gzip") != std::string::npos) {
        // cpp-httplib would gzip the body again for a client that accepts it: the request (not
        // const in the server; handlers see it as const) loses that header, the response says it
        // is gzip already.
        const_cast<httplib::Request&>(req).headers.erase("Accept-Encoding");
        res.set_content(*page.gzip, std::string(kPrometheusTextContentType));
        res.set_header("Content-Encoding", "gzip");
      } else {
        res.set_content(*page.text, std::string(kPrometheusTextContentType));
      }
      res.set_header("Vary", "Accept-Encoding");
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  srv.set_post_routing_handler([this](const httplib::Request&, httplib::Response& res) {
    res.set_header("X-Content-Type-Options", "nosniff");
    if (options_.web) {
      for (const auto& [name, value] : options_.web->headers) res.set_header(name, value);
    }
  });
  srv.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    const Exporter::HealthState h = exporter_.Health();
    res.status = h.ok ? 200 : 503;
    res.set_content(h.reason + "\n", "text/plain; charset=utf-8");
  });
  srv.Get("/", [this](const httplib::Request&, httplib::Response& res) {
    const Exporter::HealthState h = exporter_.Health();
    std::shared_ptr<const NodeSnapshot> snap = exporter_.Latest();
    std::shared_ptr<const PodMapping> pods = exporter_.Pods();
    StatusPageOptions o;
    o.healthy = h.ok;
    o.health = h.reason;
    o.pods = pods.get();
    const double interval_s = std::chrono::duration<double>(exporter_.options().interval).count();
    o.refresh_seconds = static_cast<int>(std::clamp(interval_s, 2.0, 60.0));
    res.set_content(RenderStatusPage(snap.get(), o), "text/html; charset=utf-8");
  });
}

void MetricsServer::Serve() { server_->listen_after_bind(); }

void MetricsServer::Stop() {
  if (server_) server_->stop();
}

}  // namespace gpunode::exporter
