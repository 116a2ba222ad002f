#include "src/image/http_get.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"


namespace gpunode::image {
namespace {

using std::chrono::milliseconds;

constexpr size_t kMaxErrorBody = 64u << 10;

bool IsIpLiteral(const std::string& host) {
  in6_addr a6;
  in_addr a4;
  return inet_pton(AF_INET, host.c_str(), &a4) == 1 || inet_pton(AF_INET6, host.c_str(), &a6) == 1;
}

std::string Seconds(milliseconds ms) {
  if (ms.count() % 1000 == 0) return absl::StrCat(ms.count() / 1000, " s");
  return absl::StrCat(ms.count(), " ms");
}

std::string OpenSslErrors() {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out.empty() ? "unknown TLS error" : out;
}

// ---- name lookup with a deadline ----

struct Lookup {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  int rc = 0;
  addrinfo* result = nullptr;
  ~Lookup() {
    if (result != nullptr) freeaddrinfo(result);
  }
};

// getaddrinfo(3) cannot be interrupted: it runs on a detached thread that owns a share of the
// result, and the caller stops waiting at `until`.
StatusOr<std::shared_ptr<Lookup>> Resolve(const Url& url, SteadyClock::time_point until,
                                          SteadyClock::time_point deadline, milliseconds timeout) {
  auto lookup = std::make_shared<Lookup>();
  std::string host = url.host;
  std::string port = std::to_string(url.port);
  std::thread([lookup, host, port] {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    const int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &res);
    std::lock_guard<std::mutex> l(lookup->mu);
    lookup->rc = rc;
    lookup->result = res;
    lookup->done = true;
    lookup->cv.notify_all();
  }).detach();
  std::unique_lock<std::mutex> l(lookup->mu);
  if (!lookup->cv.wait_until(l, until, [&] { return lookup->done; })) {
    if (SteadyClock::now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat(url.String(), ": looking up ", url.host, ": the lookup's deadline passed"));
    }
    return absl::UnavailableError(
        absl::StrCat(url.String(), ": no network: looking up ", url.host, " took longer than ", Seconds(timeout)));
  }
  if (lookup->rc != 0) {
    return absl::UnavailableError(absl::StrCat(url.String(), ": no network: cannot resolve ", url.host, ": ",
                                               gai_strerror(lookup->rc)));
  }
  return lookup;
}

// ---- one connection ----

class Connection {
 public:
  Connection(const Url& url, const HttpOptions& o) : url_(url), o_(o) {}
  ~Connection() {
    if (ssl_ != nullptr) SSL_free(ssl_);
    if (ctx_ != nullptr) SSL_CTX_free(ctx_);
    if (fd_ >= 0) ::close(fd_);
  }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  Status Open();
  Status WriteAll(absl::string_view data);
  // Reads some bytes into `out` (appending); false at the end of the stream.
  StatusOr<bool> ReadSome(std::string& out);

 private:
  // Waits for `events` on the socket until the read timeout or the deadline.
  Status Wait(short events, const char* what);
  Status Fail(const char* what, const std::string& why) const {
    return absl::UnavailableError(absl::StrCat(url_.String(), ": ", what, ": ", why));
  }
  Status StartTls();

  const Url& url_;
  const HttpOptions& o_;
  int fd_ = -1;
  SSL_CTX* ctx_ = nullptr;
  SSL* ssl_ = nullptr;
};

Status Connection::Wait(short events, const char* what) {
  const auto now = SteadyClock::now();
  if (now >= o_.deadline) {
    return absl::DeadlineExceededError(absl::StrCat(url_.String(), ": ", what, ": the lookup's deadline passed"));
  }
  const auto left = std::chrono::duration_cast<milliseconds>(o_.deadline - now) + milliseconds(1);
  const milliseconds wait = std::min(left, o_.read_timeout);
  pollfd p{fd_, events, 0};
  int rc;
  do {
    rc = ::poll(&p, 1, static_cast<int>(wait.count()));
  } while (rc < 0 && errno == EINTR);
  if (rc < 0) return Fail(what, std::strerror(errno));
  if (rc == 0) {
    if (SteadyClock::now() >= o_.deadline) {
      return absl::DeadlineExceededError(absl::StrCat(url_.String(), ": ", what, ": the lookup's deadline passed"));
    }
    return absl::DeadlineExceededError(
        absl::StrCat(url_.String(), ": ", what, ": nothing received for ", Seconds(o_.read_timeout)));
  }
  return absl::OkStatus();
}

Status Connection::Open() {
  const auto connect_until = std::min(o_.deadline, SteadyClock::now() + o_.connect_timeout);
  GPUNODE_ASSIGN_OR_RETURN(std::shared_ptr<Lookup> lookup, Resolve(url_, connect_until, o_.deadline, o_.connect_timeout));
  std::string last = "no address";
  for (addrinfo* ai = lookup->result; ai != nullptr; ai = ai->ai_next) {
    const int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      last = std::strerror(errno);
      continue;
    }
    int rc = ::connect(fd, ai->ai_addr, ai->ai_addrlen);
    if (rc < 0 && errno == EINPROGRESS) {
      const auto now = SteadyClock::now();
      const auto left = connect_until > now ? std::chrono::duration_cast<milliseconds>(connect_until - now) : milliseconds(0);
      pollfd p{fd, POLLOUT, 0};
      int prc;
      do {
        prc = ::poll(&p, 1, static_cast<int>(left.count()));
      } while (prc < 0 && errno == EINTR);
      if (prc == 0) {
        ::close(fd);
        if (SteadyClock::now() >= o_.deadline) {
          return absl::DeadlineExceededError(absl::StrCat(url_.String(), ": connecting to ", url_.Authority(),
                                                          ": the lookup's deadline passed"));
        }
        last = absl::StrCat("no answer within ", Seconds(o_.connect_timeout));
        if (SteadyClock::now() >= connect_until) break;
        continue;
      }
      int err = 0;
      socklen_t len = sizeof err;
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      rc = err == 0 ? 0 : -1;
      errno = err;
    }
    if (rc != 0) {
      last = std::strerror(errno);
      ::close(fd);
      continue;
    }
    fd_ = fd;
    break;
  }
  if (fd_ < 0) {
    return absl::UnavailableError(
        absl::StrCat(url_.String(), ": no network: cannot connect to ", url_.Authority(), ": ", last));
  }
  const int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (url_.scheme == "https") return StartTls();
  return absl::OkStatus();
}

Status Connection::StartTls() {
  ERR_clear_error();
  ctx_ = SSL_CTX_new(TLS_client_method());
  if (ctx_ == nullptr) return Fail("TLS", OpenSslErrors());
  SSL_CTX_set_min_proto_version(ctx_, TLS1_2_VERSION);
  // The system's CAs ($SSL_CERT_FILE / $SSL_CERT_DIR when set), plus the CA file given.
  SSL_CTX_set_default_verify_paths(ctx_);
  if (!o_.ca_file.empty() && SSL_CTX_load_verify_locations(ctx_, o_.ca_file.c_str(), nullptr) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("registry CA file ", o_.ca_file, ": cannot be read as PEM: ", OpenSslErrors()));
  }
  SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER, nullptr);
  ssl_ = SSL_new(ctx_);
  if (ssl_ == nullptr) return Fail("TLS", OpenSslErrors());
  if (IsIpLiteral(url_.host)) {
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl_), url_.host.c_str());
  } else {
    SSL_set_tlsext_host_name(ssl_, url_.host.c_str());
    SSL_set1_host(ssl_, url_.host.c_str());
  }
  SSL_set_fd(ssl_, fd_);
  for (;;) {
    ERR_clear_error();
    const int rc = SSL_connect(ssl_);
    if (rc == 1) return absl::OkStatus();
    const int err = SSL_get_error(ssl_, rc);
    if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
      GPUNODE_RETURN_IF_ERROR(Wait(err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, "TLS handshake"));
      continue;
    }
    const long verify = SSL_get_verify_result(ssl_);
    if (verify != X509_V_OK) {
      return Fail("TLS handshake", absl::StrCat("the server's certificate is not trusted: ",
                                                X509_verify_cert_error_string(verify),
                                                " (give its CA with --registry-ca FILE)"));
    }
    return Fail("TLS handshake", err == SSL_ERROR_SYSCALL && ERR_peek_error() == 0
                                     ? std::string("the connection was closed (not a TLS server?)")
                                     : OpenSslErrors());
  }
}

Status Connection::WriteAll(absl::string_view data) {
  size_t done = 0;
  while (done < data.size()) {
    if (ssl_ != nullptr) {
      ERR_clear_error();
      const int n = SSL_write(ssl_, data.data() + done, static_cast<int>(data.size() - done));
      if (n > 0) {
        done += static_cast<size_t>(n);
        continue;
      }
      const int err = SSL_get_error(ssl_, n);
      if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
        GPUNODE_RETURN_IF_ERROR(Wait(err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, "sending the request"));
        continue;
      }
      return Fail("sending the request", OpenSslErrors());
    }
    const ssize_t n = ::send(fd_, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n > 0) {
      done += static_cast<size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      GPUNODE_RETURN_IF_ERROR(Wait(POLLOUT, "sending the request"));
    } else if (n < 0 && errno != EINTR) {
      return Fail("sending the request", std::strerror(errno));
    }
  }
  return absl::OkStatus();
}

StatusOr<bool> Connection::ReadSome(std::string& out) {
  char buf[16384];
  for (;;) {
    if (ssl_ != nullptr) {
      ERR_clear_error();
      const int n = SSL_read(ssl_, buf, sizeof buf);
      if (n > 0) {
        out.append(buf, static_cast<size_t>(n));
        return true;
      }
      const int err = SSL_get_error(ssl_, n);
      if (err == SSL_ERROR_ZERO_RETURN) return false;
      if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
        GPUNODE_RETURN_IF_ERROR(Wait(err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, "reading the answer"));
        continue;
      }
      // A peer that closes without close_notify: the end of the stream (framing is checked by
      // the caller: Content-Length and chunked bodies must be complete).
      if (err == SSL_ERROR_SYSCALL || (err == SSL_ERROR_SSL && ERR_GET_REASON(ERR_peek_error()) ==
                                                                     SSL_R_UNEXPECTED_EOF_WHILE_READING)) {
        return false;
      }
      return Fail("reading the answer", OpenSslErrors());
    }
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n > 0) {
      out.append(buf, static_cast<size_t>(n));
      return true;
    }
    if (n == 0) return false;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      GPUNODE_RETURN_IF_ERROR(Wait(POLLIN, "reading the answer"));
    } else if (errno != EINTR) {
      return Fail("reading the answer", std::strerror(errno));
    }
  }
}

// ---- the response ----

Status Malformed(const Url& url, const std::string& why) {
  return absl::DataLossError(absl::StrCat(url.String(), ": malformed HTTP answer: ", why));
}

Status TooLarge(const Url& url, size_t limit) {
  return absl::ResourceExhaustedError(
      absl::StrCat(url.String(), ": the answer is larger than the ", limit, " bytes gpunode reads"));
}

// Parses the status line and headers of `head` (without the blank line).
Status ParseHead(const Url& url, absl::string_view head, HttpResponse& r) {
  std::vector<absl::string_view> lines = absl::StrSplit(head, "\r\n");
  if (lines.empty() || !absl::StartsWith(lines[0], "HTTP/1.")) return Malformed(url, "no HTTP/1.x status line");
  std::vector<absl::string_view> parts = absl::StrSplit(lines[0], absl::MaxSplits(' ', 2));
  if (parts.size() < 2 || parts[1].size() != 3 || !absl::SimpleAtoi(parts[1], &r.status) || r.status < 100) {
    return Malformed(url, "bad status line");
  }
  if (lines.size() - 1 > kMaxHeaderLines) {
    return absl::ResourceExhaustedError(
        absl::StrCat(url.String(), ": more than ", kMaxHeaderLines, " header lines"));
  }
  r.headers.clear();
  for (size_t i = 1; i < lines.size(); ++i) {
    const size_t colon = lines[i].find(':');
    if (colon == absl::string_view::npos || colon == 0) return Malformed(url, "a header line without a name");
    r.headers.emplace_back(absl::AsciiStrToLower(lines[i].substr(0, colon)),
                           std::string(absl::StripAsciiWhitespace(lines[i].substr(colon + 1))));
  }
  return absl::OkStatus();
}

// Decodes a chunked body from `in`, reading more from `conn` as needed.
Status ReadChunked(const Url& url, Connection& conn, std::string& in, size_t limit, bool truncate,
                   std::string& body) {
  size_t pos = 0;
  auto need = [&](size_t n) -> Status {
    while (in.size() - pos < n) {
      GPUNODE_ASSIGN_OR_RETURN(bool more, conn.ReadSome(in));
      if (!more) return Malformed(url, "the chunked body ends early");
    }
    return absl::OkStatus();
  };
  auto line = [&]() -> StatusOr<std::string> {
    for (;;) {
      const size_t eol = in.find("\r\n", pos);
      if (eol != std::string::npos) {
        std::string l = in.substr(pos, eol - pos);
        pos = eol + 2;
        return l;
      }
      if (in.size() - pos > 4096) return Malformed(url, "a chunk header line longer than 4096 bytes");
      GPUNODE_ASSIGN_OR_RETURN(bool more, conn.ReadSome(in));
      if (!more) return Malformed(url, "the chunked body ends early");
    }
  };
  for (;;) {
    GPUNODE_ASSIGN_OR_RETURN(std::string size_line, line());
    absl::string_view hex = size_line;
    if (const size_t semi = hex.find(';'); semi != absl::string_view::npos) hex = hex.substr(0, semi);
    hex = absl::StripAsciiWhitespace(hex);
    size_t size = 0;
    const auto [end, ec] = std::from_chars(hex.data(), hex.data() + hex.size(), size, 16);
    if (hex.empty() || ec != std::errc() || end != hex.data() + hex.size()) {
      return Malformed(url, "a bad chunk size");
    }
    if (size == 0) break;
    if (size > limit || body.size() + size > limit) {
      if (!truncate) return TooLarge(url, limit);
      return absl::OkStatus();  // an error answer: what we have is enough
    }
    GPUNODE_RETURN_IF_ERROR(need(size + 2));
    body.append(in, pos, size);
    pos += size + 2;
    if (pos > (1u << 20)) {  // keep the buffer small
      in.erase(0, pos);
      pos = 0;
    }
  }
  // Trailers, up to the blank line (bounded by the header limit).
  size_t trailer_bytes = 0;
  for (;;) {
    GPUNODE_ASSIGN_OR_RETURN(std::string l, line());
    if (l.empty()) return absl::OkStatus();
    trailer_bytes += l.size();
    if (trailer_bytes > kMaxHeaderBytes) return Malformed(url, "trailers larger than the header limit");
  }
}

}  // namespace

std::string Url::Authority() const {
  std::string h = host.find(':') != std::string::npos ? absl::StrCat("[", host, "]") : host;
  const bool default_port = (scheme == "https" && port == 443) || (scheme == "http" && port == 80);
  return default_port ? h : absl::StrCat(h, ":", port);
}

StatusOr<Url> ParseUrl(absl::string_view text) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("URL \"", text.substr(0, 200), "\": ", why));
  };
  Url u;
  absl::string_view rest = text;
  if (absl::ConsumePrefix(&rest, "https://")) {
    u.scheme = "https";
    u.port = 443;
  } else if (absl::ConsumePrefix(&rest, "http://")) {
    u.scheme = "http";
    u.port = 80;
  } else {
    return bad("not an http:// or https:// URL");
  }
  const size_t slash = rest.find_first_of("/?#");
  absl::string_view authority = rest.substr(0, slash);
  absl::string_view target = slash == absl::string_view::npos ? "/" : rest.substr(slash);
  if (const size_t hash = target.find('#'); hash != absl::string_view::npos) target = target.substr(0, hash);
  u.target = absl::StartsWith(target, "?") ? absl::StrCat("/", target) : std::string(target);
  if (authority.find('@') != absl::string_view::npos) return bad("user information in a URL is not accepted");
  absl::string_view host = authority, port;
  if (absl::StartsWith(authority, "[")) {
    const size_t close = authority.find(']');
    if (close == absl::string_view::npos) return bad("unclosed [");
    host = authority.substr(1, close - 1);
    absl::string_view after = authority.substr(close + 1);
    if (!after.empty() && !absl::ConsumePrefix(&after, ":")) return bad("junk after ]");
    port = after;
  } else if (const size_t colon = authority.rfind(':'); colon != absl::string_view::npos) {
    host = authority.substr(0, colon);
    port = authority.substr(colon + 1);
  }
  if (host.empty()) return bad("no host");
  for (char c : host) {
    if (!(absl::ascii_isalnum(c) || c == '.' || c == '-' || c == '_' || c == ':')) return bad("bad host");
  }
  if (!port.empty() && (!absl::SimpleAtoi(port, &u.port) || u.port <= 0 || u.port > 65535)) return bad("bad port");
  for (char c : u.target) {
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) return bad("a space or control character in the path");
  }
  u.host = absl::AsciiStrToLower(host);
  return u;
}

StatusOr<Url> ResolveUrl(const Url& base, absl::string_view location) {
  if (absl::StartsWithIgnoreCase(location, "http://") || absl::StartsWithIgnoreCase(location, "https://")) {
    return ParseUrl(location);
  }
  if (absl::StartsWith(location, "//")) return ParseUrl(absl::StrCat(base.scheme, ":", location));
  if (location.empty()) return absl::InvalidArgumentError("an empty Location");
  Url u = base;
  if (absl::StartsWith(location, "/")) {
    u.target = std::string(location);
  } else {
    std::string dir = base.target.substr(0, base.target.find('?'));
    dir = dir.substr(0, dir.rfind('/') + 1);
    u.target = absl::StrCat(dir, location);
  }
  return ParseUrl(u.String());  // checks the characters of the new path
}

std::string HttpResponse::Header(absl::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (absl::EqualsIgnoreCase(k, name)) return v;
  }
  return "";
}

std::vector<std::string> HttpResponse::Headers(absl::string_view name) const {
  std::vector<std::string> out;
  for (const auto& [k, v] : headers) {
    if (absl::EqualsIgnoreCase(k, name)) out.push_back(v);
  }
  return out;
}

StatusOr<HttpResponse> HttpRequest(const Url& url, const HttpOptions& o) {
  Connection conn(url, o);
  GPUNODE_RETURN_IF_ERROR(conn.Open());
  std::string req = absl::StrCat(o.method, " ", url.target, " HTTP/1.1\r\nHost: ", url.Authority(),
                                 "\r\nUser-Agent: gpunode/" GPUNODE_VERSION,
                                 "\r\nAccept-Encoding: identity\r\nConnection: close\r\n");
  for (const auto& [k, v] : o.headers) {
    if (k.find_first_of("\r\n:") != std::string::npos || v.find_first_of("\r\n") != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(url.String(), ": a header with a line break: ", k));
    }
    absl::StrAppend(&req, k, ": ", v, "\r\n");
  }
  if (o.method != "GET") absl::StrAppend(&req, "Content-Length: ", o.body.size(), "\r\n");
  req += "\r\n";
  if (o.method != "GET") req += o.body;
  GPUNODE_RETURN_IF_ERROR(conn.WriteAll(req));

  HttpResponse r;
  std::string in;
  size_t head_end;
  for (;;) {  // the head; 1xx answers are skipped
    for (;;) {
      head_end = in.find("\r\n\r\n");
      if (head_end != std::string::npos) break;
      if (in.size() > kMaxHeaderBytes) {
        return absl::ResourceExhaustedError(
            absl::StrCat(url.String(), ": the answer's headers are larger than ", kMaxHeaderBytes, " bytes"));
      }
      GPUNODE_ASSIGN_OR_RETURN(bool more, conn.ReadSome(in));
      if (!more) {
        return absl::UnavailableError(absl::StrCat(url.String(), ": the server closed the connection ",
                                                   in.empty() ? "without an answer" : "in the middle of the headers"));
      }
    }
    if (head_end > kMaxHeaderBytes) {
      return absl::ResourceExhaustedError(
          absl::StrCat(url.String(), ": the answer's headers are larger than ", kMaxHeaderBytes, " bytes"));
    }
    GPUNODE_RETURN_IF_ERROR(ParseHead(url, absl::string_view(in).substr(0, head_end), r));
    in.erase(0, head_end + 4);
    if (r.status >= 200) break;
  }
  const bool truncate = r.status >= 300;
  const size_t limit = truncate ? std::min(o.max_body, kMaxErrorBody) : o.max_body;
  if (o.method == "HEAD" || r.status == 204 || r.status == 304) return r;
  if (absl::EqualsIgnoreCase(r.Header("transfer-encoding"), "chunked")) {
    GPUNODE_RETURN_IF_ERROR(ReadChunked(url, conn, in, limit, truncate, r.body));
    return r;
  }
  if (!r.Header("transfer-encoding").empty() && !absl::EqualsIgnoreCase(r.Header("transfer-encoding"), "identity")) {
    return Malformed(url, absl::StrCat("unsupported Transfer-Encoding \"", r.Header("transfer-encoding"), "\""));
  }
  std::optional<size_t> length;
  if (const std::string cl = r.Header("content-length"); !cl.empty()) {
    size_t n = 0;
    if (!absl::SimpleAtoi(cl, &n)) return Malformed(url, "a bad Content-Length");
    length = n;
    if (n > limit && !truncate) return TooLarge(url, limit);
  }
  const size_t want = length ? std::min(*length, limit) : limit;
  while (in.size() < want || (!length && in.size() <= limit)) {
    GPUNODE_ASSIGN_OR_RETURN(bool more, conn.ReadSome(in));
    if (!more) break;
  }
  if (length && in.size() < want) {
    return absl::UnavailableError(absl::StrCat(url.String(), ": the connection ended after ", in.size(), " of ",
                                               *length, " bytes"));
  }
  if (in.size() > limit) {
    if (!truncate) return TooLarge(url, limit);
    in.resize(limit);
  }
  if (length && in.size() > *length) in.resize(*length);
  r.body = std::move(in);
  return r;
}

}  // namespace gpunode::image
