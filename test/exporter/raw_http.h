// Raw HTTP/1.1 over loopback TCP, for what an HTTP client library will not do: trickle a request a
// byte at a time, send a body with a request, read a HEAD answer byte for byte, pick the source
// address (127.0.0.2 is another client as far as the server can tell).
#ifndef GPUNODE_TEST_EXPORTER_RAW_HTTP_H_
#define GPUNODE_TEST_EXPORTER_RAW_HTTP_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <map>
#include <string>
#include <string_view>

namespace gpunode::testing {

// A connected socket to 127.0.0.1:port, from `source` when given; -1 on failure.
inline int ConnectLoopback(int port, const std::string& source = "") {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (!source.empty()) {
    sockaddr_in from{};
    from.sin_family = AF_INET;
    ::inet_pton(AF_INET, source.c_str(), &from.sin_addr);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof from) != 0) {
      ::close(fd);
      return -1;
    }
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

inline bool SendAll(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

struct ReadResult {
  std::string data;
  bool closed = false;  // the peer closed (EOF or reset) before the limit
  std::chrono::milliseconds took{0};
};

// Reads until the peer closes or `limit` passes.
inline ReadResult ReadUntilClosed(int fd, std::chrono::milliseconds limit) {
  ReadResult r;
  const auto start = std::chrono::steady_clock::now();
  const auto end = start + limit;
  char buf[16384];
  for (;;) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= end) break;
    pollfd p{fd, POLLIN, 0};
    const int wait = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(end - now).count()) + 1;
    if (::poll(&p, 1, wait) <= 0) continue;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) {
      r.closed = true;
      break;
    }
    r.data.append(buf, static_cast<size_t>(n));
  }
  r.took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  return r;
}

struct RawResponse {
  int status = 0;  // 0: no status line
  std::map<std::string, std::string> headers;  // names in lower case
  std::string body;
  bool closed = false;
  std::chrono::milliseconds took{0};
  std::string header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? "" : it->second;
  }
};

inline RawResponse ParseResponse(const ReadResult& read) {
  RawResponse r;
  r.closed = read.closed;
  r.took = read.took;
  const std::string& d = read.data;
  const size_t end = d.find("\r\n\r\n");
  if (d.rfind("HTTP/1.", 0) != 0 || end == std::string::npos) return r;
  r.status = std::atoi(d.c_str() + 9);
  size_t line = d.find("\r\n") + 2;
  while (line < end) {
    const size_t next = d.find("\r\n", line);
    const std::string h = d.substr(line, next - line);
    const size_t colon = h.find(':');
    if (colon != std::string::npos) {
      std::string name = h.substr(0, colon);
      std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
      size_t v = colon + 1;
      while (v < h.size() && h[v] == ' ') ++v;
      r.headers[name] = h.substr(v);
    }
    line = next + 2;
  }
  r.body = d.substr(end + 4);
  return r;
}

// Sends `request` as is and reads the answer until the server closes (or `limit`).
inline RawResponse RawRequest(int port, const std::string& request,
                              std::chrono::milliseconds limit = std::chrono::milliseconds(3000),
                              const std::string& source = "") {
  const auto start = std::chrono::steady_clock::now();
  const int fd = ConnectLoopback(port, source);
  if (fd < 0) return {};
  SendAll(fd, request);
  RawResponse r = ParseResponse(ReadUntilClosed(fd, limit));
  r.took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  ::close(fd);
  return r;
}

}  // namespace gpunode::testing

#endif  // GPUNODE_TEST_EXPORTER_RAW_HTTP_H_
