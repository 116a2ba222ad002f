// exporter_load: a small HTTP load program for exporter benchmarks (no dependencies, so it runs on
// the GPU machine as is). N scraper threads each GET a path in a loop for D seconds, one request
// per connection (as a Prometheus scrape on a fresh connection), and the latency of every request
// (connect -> last byte) is recorded. Prints one JSON object:
//   {"requests", "errors", "non_200", "concurrency", "seconds", "rps", "bytes_per_response",
//    "latency_ms": {"p50","p90","p99","max","mean"}}
// Usage: exporter_load --port 9400 [--host 127.0.0.1] [--path /metrics] [--concurrency 50]
//                      [--seconds 10] [--rate R]   (R > 0: each scraper paces itself to R req/s)
//                      [--gzip 1]  (Accept-Encoding: gzip, as Prometheus sends)
//                      [--stagger 1]  (with --rate: scrapers spread over the period, not in step)
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Options {
  std::string host = "127.0.0.1";
  int port = 9400;
  std::string path = "/metrics";
  int concurrency = 50;
  double seconds = 10;
  double rate = 0;
  bool gzip = false;  // send Accept-Encoding: gzip, as Prometheus does
  bool stagger = false;  // with --rate: scraper i starts i/N of a period late (independent scrapers)
};

struct Result {
  bool ok = false;
  int status = 0;
  size_t body = 0;
};

Result Get(const Options& o, const sockaddr_in& addr) {
  Result r;
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return r;
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return r;
  }
  const std::string req = "GET " + o.path + " HTTP/1.1\r\nHost: " + o.host +
                          "\r\nUser-Agent: exporter_load\r\nAccept: text/plain\r\n" +
                          (o.gzip ? "Accept-Encoding: gzip\r\n" : "") + "Connection: close\r\n\r\n";
  if (::send(fd, req.data(), req.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(req.size())) {
    ::close(fd);
    return r;
  }
  std::string resp;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0) {
      ::close(fd);
      return r;
    }
    if (n == 0) break;
    resp.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  if (resp.compare(0, 9, "HTTP/1.1 ") != 0 && resp.compare(0, 9, "HTTP/1.0 ") != 0) return r;
  r.status = std::atoi(resp.c_str() + 9);
  const size_t hdr_end = resp.find("\r\n\r\n");
  if (hdr_end == std::string::npos) return r;
  r.body = resp.size() - hdr_end - 4;
  r.ok = true;
  return r;
}

double Percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const size_t i = std::min(sorted.size() - 1, static_cast<size_t>(p * static_cast<double>(sorted.size() - 1) + 0.5));
  return sorted[i];
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--host") o.host = v;
    else if (k == "--port") o.port = std::atoi(v.c_str());
    else if (k == "--path") o.path = v;
    else if (k == "--concurrency") o.concurrency = std::max(1, std::atoi(v.c_str()));
    else if (k == "--seconds") o.seconds = std::atof(v.c_str());
    else if (k == "--rate") o.rate = std::atof(v.c_str());
    else if (k == "--gzip") o.gzip = v == "1" || v == "true";
    else if (k == "--stagger") o.stagger = v == "1" || v == "true";
    else {
      std::fprintf(stderr, "exporter_load: unknown option %s\n", k.c_str());
      return 3;
    }
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(o.port));
  if (::inet_pton(AF_INET, o.host.c_str(), &addr.sin_addr) != 1) {
    std::fprintf(stderr, "exporter_load: --host must be an IPv4 address\n");
    return 3;
  }
  using Clock = std::chrono::steady_clock;
  std::mutex mu;
  std::vector<double> latencies;
  std::atomic<long> errors{0}, non200{0};
  std::atomic<size_t> body_bytes{0};
  const auto start = Clock::now();
  const auto end = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.seconds));
  std::vector<std::thread> threads;
  for (int t = 0; t < o.concurrency; ++t) {
    threads.emplace_back([&, t] {
      std::vector<double> mine;
      auto next = Clock::now();
      if (o.rate > 0 && o.stagger) {
        next += std::chrono::duration_cast<Clock::duration>(
            std::chrono::duration<double>(static_cast<double>(t) / o.concurrency / o.rate));
        std::this_thread::sleep_until(next);
      }
      while (Clock::now() < end) {
        const auto t0 = Clock::now();
        const Result r = Get(o, addr);
        const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        if (!r.ok) {
          ++errors;
        } else {
          if (r.status != 200) ++non200;
          body_bytes = r.body;
          mine.push_back(ms);
        }
        if (o.rate > 0) {
          next += std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(1.0 / o.rate));
          std::this_thread::sleep_until(next);
        }
      }
      std::lock_guard<std::mutex> lock(mu);
      latencies.insert(latencies.end(), mine.begin(), mine.end());
    });
  }
  for (auto& t : threads) t.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  std::sort(latencies.begin(), latencies.end());
  double sum = 0;
  for (double l : latencies) sum += l;
  std::printf(
      "{\"requests\": %zu, \"errors\": %ld, \"non_200\": %ld, \"concurrency\": %d, \"seconds\": %.3f, "
      "\"rps\": %.1f, \"bytes_per_response\": %zu, \"latency_ms\": {\"p50\": %.3f, \"p90\": %.3f, "
      "\"p99\": %.3f, \"max\": %.3f, \"mean\": %.3f}}\n",
      latencies.size(), errors.load(), non200.load(), o.concurrency, elapsed,
      static_cast<double>(latencies.size()) / elapsed, body_bytes.load(), Percentile(latencies, 0.50),
      Percentile(latencies, 0.90), Percentile(latencies, 0.99), latencies.empty() ? 0 : latencies.back(),
      latencies.empty() ? 0 : sum / static_cast<double>(latencies.size()));
  return latencies.empty() ? 1 : 0;
}
