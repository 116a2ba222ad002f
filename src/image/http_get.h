// A small HTTP/1.1 client for the registry lookups of src/image: one request per connection, and
// every byte it waits for bounded by ONE deadline that the server cannot extend.
//
// Why not cpp-httplib (which src/kube wraps in src/kube/transport.h): its timeouts are per read,
// so a server that trickles a byte every few seconds holds a request forever unless another
// thread aborts the socket, and it keeps every header line a server sends (no limit on their
// number). A registry is named by a tenant's image reference, so it may be hostile: here every
// wait is a poll(2) bounded by the lookup's deadline, the headers by kMaxHeaderBytes, the body
// by the caller's limit, and name resolution runs on its own thread that the caller stops
// waiting for at the deadline.
#ifndef GPUNODE_IMAGE_HTTP_GET_H_
#define GPUNODE_IMAGE_HTTP_GET_H_

#include <chrono>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "src/base/status.h"

namespace gpunode::image {

using SteadyClock = std::chrono::steady_clock;

// All the header lines of a response together are at most this long (Go's net/http: 1 MiB; a
// registry's are well under 4 KiB).
inline constexpr size_t kMaxHeaderBytes = 64u << 10;
inline constexpr size_t kMaxHeaderLines = 256;

// An absolute http(s) URL.
struct Url {
  std::string scheme;  // "http" | "https"
  std::string host;    // a name, an IPv4 address or an IPv6 address without brackets
  int port = 0;
  std::string target;  // path and query, "/v2/"
  // "host:port" (brackets for IPv6), the port only when not the scheme's default.
  std::string Authority() const;
  std::string String() const { return scheme + "://" + Authority() + target; }
};
// InvalidArgument naming the text when it is not an absolute http(s) URL.
StatusOr<Url> ParseUrl(absl::string_view text);
// A Location header against the URL it came from (absolute, "//host/p", "/p" or "p").
StatusOr<Url> ResolveUrl(const Url& base, absl::string_view location);

struct HttpOptions {
  SteadyClock::time_point deadline;                  // the whole request, connect to last byte
  std::chrono::milliseconds connect_timeout{5000};   // each connect and the name lookup
  std::chrono::milliseconds read_timeout{10000};     // no byte for this long ends it
  size_t max_body = 4u << 20;  // a 2xx body larger than this is ResourceExhausted
  // Extra CA certificates (PEM file) trusted besides the system's; empty: the system's alone
  // (OpenSSL's default paths, so $SSL_CERT_FILE and $SSL_CERT_DIR are honoured).
  std::string ca_file;
  std::string method = "GET";
  std::string body;  // sent with Content-Length when the method is not GET
  std::vector<std::pair<std::string, std::string>> headers;
};

struct HttpResponse {
  int status = 0;
  std::vector<std::pair<std::string, std::string>> headers;  // names in lower case
  std::string body;  // for status >= 300 only the first 64 KiB are kept
  // The first value of a header (name case-insensitive), "" when absent.
  std::string Header(absl::string_view name) const;
  std::vector<std::string> Headers(absl::string_view name) const;
};

// One request. Errors: Unavailable (name lookup, connect, TLS, a connection cut short),
// DeadlineExceeded (the deadline or the read timeout), ResourceExhausted (too large), DataLoss
// (a malformed response); each message names the URL.
StatusOr<HttpResponse> HttpRequest(const Url& url, const HttpOptions& options);

}  // namespace gpunode::image

#endif  // GPUNODE_IMAGE_HTTP_GET_H_
