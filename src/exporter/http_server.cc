#include "src/exporter/http_server.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/resource.h>

#include <algorithm>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cerrno>
#include <cstring>
#include <random>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "src/exporter/render.h"

namespace gpunode::exporter {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using boost::system::error_code;

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

// The web config's TLS settings on an OpenSSL context (what the toolkit does with Go's tls.Config).
Status ConfigureTls(SSL_CTX& ctx, const WebConfig::Tls& tls) {
  SSL_CTX_set_options(&ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_SESSION_RESUMPTION_ON_RENEGOTIATION);
  SSL_CTX_set_min_proto_version(&ctx, TlsVersion(tls.min_version));
  SSL_CTX_set_max_proto_version(&ctx, TlsVersion(tls.max_version));
  auto fail = [](std::string what) { return absl::InvalidArgumentError(absl::StrCat("TLS setup failed: ", what)); };
  if (SSL_CTX_use_certificate_chain_file(&ctx, tls.cert_file.c_str()) != 1) {
    return fail(absl::StrCat("certificate ", tls.cert_file, ": ", OpenSslError()));
  }
  if (SSL_CTX_use_PrivateKey_file(&ctx, tls.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    return fail(absl::StrCat("key ", tls.key_file, ": ", OpenSslError()));
  }
  if (SSL_CTX_check_private_key(&ctx) != 1) {
    return fail(absl::StrCat("key ", tls.key_file, " does not match certificate ", tls.cert_file));
  }
  if (!tls.client_ca_file.empty()) {
    if (SSL_CTX_load_verify_locations(&ctx, tls.client_ca_file.c_str(), nullptr) != 1) {
      return fail(absl::StrCat("client CA ", tls.client_ca_file, ": ", OpenSslError()));
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
  return absl::OkStatus();
}

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

struct MetricsServer::Impl {
  Impl(PageSource* s, const ServerOptions& o) : source(s), options(o) {}
  void Accept();
  void StartSession(tcp::socket socket);

  PageSource* source;  // nullptr: only options.routes (the agent's health port)
  const ServerOptions& options;  // MetricsServer's, which outlives this
  int max_connections = 0;
  std::atomic<int> connections{0};
  // Declared before the io_context: connections still open when it is destroyed hold SSL objects
  // made from this context and decrement `connections`.
  std::optional<asio::ssl::context> ssl;
  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> work{io.get_executor()};
  tcp::acceptor acceptor{io};
  asio::steady_timer accept_retry{io};
  // Destroyed first: its workers stop before the io_context they post verdicts to goes away.
  std::unique_ptr<BasicAuthenticator> auth;
};

namespace {

constexpr std::string_view kTextPlain = "text/plain; charset=utf-8";
constexpr size_t kMaxLingerBytes = 64 * 1024;
constexpr auto kLinger = std::chrono::seconds(1);

std::shared_ptr<const std::string> Text(std::string s) { return std::make_shared<const std::string>(std::move(s)); }

// One connection: [TLS handshake,] request line and headers under one deadline, the answer, close.
// Every step is an asynchronous operation on the server's event loop; the object lives as long as
// one of them holds it.
template <class Stream>
class Session : public std::enable_shared_from_this<Session<Stream>> {
 public:
  template <class... Args>
  Session(MetricsServer::Impl& srv, std::string source, Args&&... args)
      : srv_(srv), source_(std::move(source)), stream_(std::forward<Args>(args)...),
        buffer_(srv.options.max_header_bytes + 4096) {
    ++srv_.connections;
  }
  ~Session() { --srv_.connections; }

  void Start() {
    tcp().expires_after(srv_.options.request_timeout);  // the whole request, whatever it trickles
    if constexpr (kTls) {
      stream_.async_handshake(asio::ssl::stream_base::server,
                              [self = this->shared_from_this()](error_code ec) {
                                if (ec) return self->Close();
                                self->ReadHeader();
                              });
    } else {
      ReadHeader();
    }
  }

 private:
  static constexpr bool kTls = !std::is_same_v<Stream, beast::tcp_stream>;
  using Verdict = BasicAuthenticator::Verdict;
  struct Header {
    http::field field;
    std::string_view value;
  };

  beast::tcp_stream& tcp() { return beast::get_lowest_layer(stream_); }

  void ReadHeader() {
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(srv_.options.max_header_bytes));
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = this->shared_from_this()](error_code ec, size_t) { self->OnHeader(ec); });
  }

  void OnHeader(error_code ec) {
    if (ec == http::error::header_limit || ec == http::error::buffer_overflow) {
      return Respond(http::status::request_header_fields_too_large, kTextPlain,
                     Text("request headers too large\n"), /*linger=*/true);
    }
    if (ec == http::error::end_of_stream || ec == http::error::partial_message) return Close();
    if (ec && ec.category() == http::make_error_code(http::error::bad_method).category()) {
      return Respond(http::status::bad_request, kTextPlain, Text("bad request\n"), true);
    }
    if (ec) return Close();  // the deadline (beast::error::timeout), a reset, a failed read
    const auto& req = parser_->get();
    head_ = req.method() == http::verb::head;
    if (req.method() != http::verb::get && !head_) {
      // Answered at once, body or not (we never read one); the connection lingers so that a body
      // still arriving does not reset it before the client reads the answer.
      return Respond(http::status::method_not_allowed, kTextPlain, Text("method not allowed\n"), true,
                     {{http::field::allow, "GET, HEAD"}});
    }
    if (parser_->chunked() || parser_->content_length().value_or(0) > 0) {
      return Respond(http::status::payload_too_large, kTextPlain, Text("a GET or HEAD request has no body\n"), true);
    }
    const std::string_view target(req.target().data(), req.target().size());
    path_ = std::string(target.substr(0, target.find('?')));
    const auto accept = req[http::field::accept_encoding];
    accept_gzip_ = std::string_view(accept.data(), accept.size()).find("gzip") != std::string_view::npos;
    if (srv_.auth && srv_.auth->enabled()) {
      const auto authorization = req[http::field::authorization];
      auto ex = stream_.get_executor();
      const Verdict v = srv_.auth->Check(std::string_view(authorization.data(), authorization.size()), source_,
                                         [self = this->shared_from_this(), ex](Verdict r) {
                                           asio::post(ex, [self, r] { self->OnAuth(r); });
                                         });
      if (v != Verdict::kPending) OnAuth(v);
      return;  // kPending: the bcrypt pool calls back on the event loop
    }
    Route();
  }

  void OnAuth(Verdict v) {
    if (v == Verdict::kAllowed) return Route();
    if (srv_.options.auth_failure_delay.count() > 0 && !parser_->get()[http::field::authorization].empty() &&
        !delayed_) {
      delayed_ = true;
      delay_.emplace(stream_.get_executor());
      // Between 0.5 and 1.5 times the delay: clients refused together must not come back
      // together (a fixed delay lines a looping flood up into one burst a second).
      thread_local std::minstd_rand jitter(std::random_device{}());
      const auto d = srv_.options.auth_failure_delay;
      delay_->expires_after(d / 2 + std::chrono::milliseconds(jitter() % (d.count() + 1)));
      delay_->async_wait([self = this->shared_from_this(), v](error_code) { self->OnAuth(v); });
      return;
    }
    if (v == Verdict::kBusy) {
      return Respond(http::status::too_many_requests, kTextPlain, Text("too many password checks, retry later\n"),
                     false, {{http::field::retry_after, "1"}});
    }
    Respond(http::status::unauthorized, kTextPlain, Text("Unauthorized\n"), false,
            {{http::field::www_authenticate, "Basic realm=\"gpunode\""}});
  }

  void Route() {
    if (srv_.options.routes) {
      if (std::optional<RouteResponse> r = srv_.options.routes(path_)) {
        return Respond(static_cast<http::status>(r->status), r->content_type, Text(std::move(r->body)), false);
      }
    }
    if (srv_.source == nullptr) {
      return Respond(http::status::not_found, kTextPlain, Text("404 page not found\n"), false);
    }
    PageSource& source = *srv_.source;
    if (path_ == "/metrics") {
      // The hot path: a reference to the page rendered once per snapshot (and its gzip, made then
      // too: Prometheus asks for gzip), not a copy.
      Page page = source.Metrics();
      if (page.status != 200) return Respond(page);
      if (page.gzip && accept_gzip_) {
        return Respond(http::status::ok, page.content_type, page.gzip, false,
                       {{http::field::content_encoding, "gzip"}, {http::field::vary, "Accept-Encoding"}});
      }
      return Respond(http::status::ok, page.content_type, page.body, false, {{http::field::vary, "Accept-Encoding"}});
    }
    if (path_ == "/health") return Respond(source.Health());
    if (path_ == "/") return Respond(source.StatusPage());
    Respond(http::status::not_found, kTextPlain, Text("404 page not found\n"), false);
  }

  void Respond(const Page& page) {
    Respond(static_cast<http::status>(page.status), page.content_type, page.body ? page.body : Text(""), false);
  }

  // HEAD gets the same header (Content-Length of the GET's body) and no body.
  void Respond(http::status status, std::string_view content_type, std::shared_ptr<const std::string> body,
               bool linger, std::initializer_list<Header> headers = {}) {
    linger_ = linger;
    body_ = std::move(body);
    res_.result(status);
    res_.version(11);
    res_.set(http::field::content_type, beast::string_view(content_type.data(), content_type.size()));
    for (const Header& h : headers) res_.set(h.field, beast::string_view(h.value.data(), h.value.size()));
    res_.set("X-Content-Type-Options", "nosniff");
    if (srv_.options.web) {
      for (const auto& [name, value] : srv_.options.web->headers) res_.set(name, value);
    }
    res_.set(http::field::connection, "close");  // one request per connection
    res_.content_length(body_->size());
    res_.body() = head_ ? http::span_body<const char>::value_type() :
                          http::span_body<const char>::value_type(body_->data(), body_->size());
    tcp().expires_after(srv_.options.write_timeout);
    http::async_write(stream_, res_, [self = this->shared_from_this()](error_code ec, size_t) {
      if (ec) return self->Close();
      self->Finish();
    });
  }

  void Finish() {
    if constexpr (kTls) {
      tcp().expires_after(kLinger);  // close_notify both ways, briefly
      stream_.async_shutdown([self = this->shared_from_this()](error_code) { self->Close(); });
    } else {
      error_code ignored;
      tcp().socket().shutdown(tcp::socket::shutdown_send, ignored);
      if (!linger_ && buffer_.size() == 0) return Close();
      // Unread request bytes (a body we refused): read and drop them for a moment, so that closing
      // does not send a reset that destroys the answer before the client has read it.
      tcp().expires_after(kLinger);
      Drain();
    }
  }

  void Drain() {
    buffer_.consume(buffer_.size());
    tcp().async_read_some(buffer_.prepare(4096), [self = this->shared_from_this()](error_code ec, size_t n) {
      self->drained_ += n;
      if (ec || self->drained_ > kMaxLingerBytes) return self->Close();
      self->Drain();
    });
  }

  void Close() {
    error_code ignored;
    tcp().socket().close(ignored);
  }

  MetricsServer::Impl& srv_;
  const std::string source_;
  Stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::empty_body>> parser_;
  http::response<http::span_body<const char>> res_;
  std::shared_ptr<const std::string> body_;
  std::string path_;
  bool head_ = false;
  bool accept_gzip_ = false;
  bool linger_ = false;
  bool delayed_ = false;
  std::optional<asio::steady_timer> delay_;  // wrong credentials: the answer waits
  size_t drained_ = 0;
};

}  // namespace

void MetricsServer::Impl::Accept() {
  // Each connection gets a strand of its own: its handlers never run at once on two loop threads.
  acceptor.async_accept(asio::make_strand(io), [this](error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted) return;  // closed: stopping
    if (ec == asio::error::connection_aborted) return Accept();
    if (ec) {
      // Out of file descriptors or memory (EMFILE, ENFILE, ENOBUFS): try again shortly instead of
      // spinning on an error the next accept repeats.
      accept_retry.expires_after(std::chrono::milliseconds(50));
      accept_retry.async_wait([this](error_code e) {
        if (!e) Accept();
      });
      return;
    }
    if (connections.load() >= max_connections) {
      error_code ignored;
      socket.close(ignored);  // over the limit: closed at once, nothing read
    } else {
      StartSession(std::move(socket));
    }
    Accept();
  });
}

void MetricsServer::Impl::StartSession(tcp::socket socket) {
  error_code ec;
  socket.set_option(tcp::no_delay(true), ec);
  std::string source = "unknown";
  const tcp::endpoint peer = socket.remote_endpoint(ec);
  if (!ec) {
    asio::ip::address a = peer.address();
    if (a.is_v6() && a.to_v6().is_v4_mapped()) a = asio::ip::make_address_v4(asio::ip::v4_mapped, a.to_v6());
    source = a.to_string();
  }
  // Started on the connection's strand, like every later step.
  const auto ex = socket.get_executor();
  if (ssl) {
    auto session =
        std::make_shared<Session<beast::ssl_stream<beast::tcp_stream>>>(*this, std::move(source), std::move(socket), *ssl);
    asio::dispatch(ex, [session] { session->Start(); });
  } else {
    auto session = std::make_shared<Session<beast::tcp_stream>>(*this, std::move(source), std::move(socket));
    asio::dispatch(ex, [session] { session->Start(); });
  }
}

MetricsServer::MetricsServer(PageSource* source, std::unique_ptr<PageSource> owned, ServerOptions options)
    : options_(std::move(options)), owned_source_(std::move(owned)),
      impl_(std::make_unique<Impl>(source, options_)) {}

MetricsServer::~MetricsServer() { Stop(); }

StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Create(Exporter& exporter, ServerOptions options) {
  return Create(&exporter, std::move(options));
}

StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Create(Exporter* exporter, ServerOptions options) {
  std::unique_ptr<PageSource> owned;
  if (exporter != nullptr) owned = std::make_unique<ExporterPageSource>(*exporter);
  PageSource* source = owned.get();
  return Listen(std::unique_ptr<MetricsServer>(new MetricsServer(source, std::move(owned), std::move(options))));
}

StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Create(PageSource& source, ServerOptions options) {
  return Listen(std::unique_ptr<MetricsServer>(new MetricsServer(&source, nullptr, std::move(options))));
}

StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Listen(std::unique_ptr<MetricsServer> s) {
  GPUNODE_ASSIGN_OR_RETURN(ListenAddress addr, ParseListenAddress(s->options_.listen));
  Impl& impl = *s->impl_;
  const WebConfig* web = s->options_.web ? &*s->options_.web : nullptr;
  if (web != nullptr && web->tls) {
    impl.ssl.emplace(asio::ssl::context::tls_server);
    GPUNODE_RETURN_IF_ERROR(ConfigureTls(*impl.ssl->native_handle(), *web->tls));
  }
  if (web != nullptr && !web->basic_auth_users.empty()) {
    impl.auth = std::make_unique<BasicAuthenticator>(web->basic_auth_users, s->options_.auth);
  }
  // Never more connections than file descriptors (the rest of the process keeps 64).
  impl.max_connections = std::max(1, s->options_.max_connections);
  if (rlimit nofile{}; ::getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur != RLIM_INFINITY) {
    impl.max_connections =
        static_cast<int>(std::max<rlim_t>(1, std::min<rlim_t>(impl.max_connections, nofile.rlim_cur > 128 ? nofile.rlim_cur - 64 : nofile.rlim_cur / 2)));
  }

  const auto cannot = [&](const error_code& ec) {
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ", s->options_.listen, ": ",
        ec == asio::error::address_in_use ? "address already in use (another exporter on this port? use --listen)"
                                          : ec.message()));
  };
  error_code ec;
  tcp::endpoint endpoint;
  const asio::ip::address ip = asio::ip::make_address(addr.host, ec);
  if (!ec) {
    endpoint = tcp::endpoint(ip, static_cast<unsigned short>(addr.port));
  } else {
    tcp::resolver resolver(impl.io);
    auto results = resolver.resolve(addr.host, std::to_string(addr.port), tcp::resolver::passive, ec);
    if (ec || results.empty()) return cannot(ec ? ec : asio::error::host_not_found);
    endpoint = results.begin()->endpoint();
  }
  impl.acceptor.open(endpoint.protocol(), ec);
  if (ec) return cannot(ec);
  // "::" (":9400"): IPv4 and IPv6 on one socket.
  if (endpoint.address().is_v6()) impl.acceptor.set_option(asio::ip::v6_only(false), ec);
  impl.acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  impl.acceptor.bind(endpoint, ec);
  if (ec) return cannot(ec);
  impl.acceptor.listen(std::max(1, s->options_.backlog), ec);
  if (ec) return cannot(ec);
  s->port_ = impl.acceptor.local_endpoint(ec).port();
  impl.Accept();
  return s;
}

void MetricsServer::Serve() {
  int n = options_.loop_threads;
  if (n <= 0) n = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 4u));
  std::vector<std::thread> more;
  for (int i = 1; i < n; ++i) more.emplace_back([this] { impl_->io.run(); });
  impl_->io.run();
  for (std::thread& t : more) t.join();
}

void MetricsServer::Stop() { impl_->io.stop(); }

int MetricsServer::connections() const { return impl_->connections.load(); }

const BasicAuthenticator* MetricsServer::authenticator() const { return impl_->auth.get(); }

}  // namespace gpunode::exporter
