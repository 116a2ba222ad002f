// exporter_hostile: `gpunode exporter` under hostile clients, all at once, on loopback.
//
// Starts `gpunode [--simulate PROFILE] exporter -c 1000 --listen 127.0.0.1:PORT
// --web-config-file web.yml` with basic auth (a bcrypt hash of cost --cost made here with
// libcrypt's crypt_gensalt_rn("$2b$") + crypt_r, as htpasswd -B does), waits for an authorised
// /metrics, then for --duration seconds runs together:
//   * --slowloris connections, each sending one more byte of a request that never ends every
//     --slow-period-ms (reconnecting as soon as the server cuts it);
//   * --wrong clients in closed loops, each request with a wrong password for the configured user
//     (--wrong-mode distinct: a new password every time, so no verdict can be remembered; same:
//     one wrong password per client);
//   * --scrapers authorised scrapers, each --scrape-rate times a second (staggered), with
//     Accept-Encoding: gzip and a 10 s timeout (Prometheus' default scrape timeout);
// (the hostile clients arrive spread over the first second, then stay) and samples the exporter's VmRSS and open file descriptors (/proc/PID/status, /proc/PID/fd)
// every second. Prints one JSON document (stdout, and --out FILE): authorised scrape latency
// p50/p90/p99/max and failures, what the hostile clients got, RSS and fds at the start (first
// sample after --warmup seconds of load), max and end, and idle before/after the load.
// --check: exit 1 unless authorised p99 < --p99-ms, no authorised failure, RSS and fds end
// within a margin of their start, and fds back to idle after the load (the ctest form).
//
//   build/bin/exporter_hostile --gpunode build/bin/gpunode --simulate dgx-h200 --duration 300
//       --out benchmarks/results/exporter-hostile-sim-dgx-h200-devbox-2026-12-01.json
#include <arpa/inet.h>
#include <crypt.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "test/testing/free_port.h"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

struct Options {
  std::string gpunode;
  std::string simulate = "dgx-h200";
  double duration = 20;
  double warmup = 5;
  int slowloris = 64;
  int slow_period_ms = 4000;
  int wrong = 150;
  std::string wrong_mode = "distinct";
  int scrapers = 4;
  double scrape_rate = 5;
  int cost = 10;
  std::string out;
  bool check = false;
  double p99_ms = 50;
  double rss_margin = 0.10;  // end may exceed start by 10 % (+ 1 MiB)
  int fd_margin = 32;        // end may exceed start by this many descriptors
};

std::string Base64(const std::string& in) {
  static const char* k = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const unsigned v = (static_cast<unsigned char>(in[i]) << 16) | (static_cast<unsigned char>(in[i + 1]) << 8) |
                       static_cast<unsigned char>(in[i + 2]);
    out += {k[v >> 18], k[(v >> 12) & 63], k[(v >> 6) & 63], k[v & 63]};
  }
  if (i + 1 == in.size()) {
    const unsigned v = static_cast<unsigned char>(in[i]) << 16;
    out += {k[v >> 18], k[(v >> 12) & 63], '=', '='};
  } else if (i + 2 == in.size()) {
    const unsigned v = (static_cast<unsigned char>(in[i]) << 16) | (static_cast<unsigned char>(in[i + 1]) << 8);
    out += {k[v >> 18], k[(v >> 12) & 63], k[(v >> 6) & 63], '='};
  }
  return out;
}

int Connect(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  timeval tv{10, 0};  // Prometheus' default scrape timeout
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
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

// One request on a fresh connection, read to the server's close. Status 0: no answer (refused,
// reset, 10 s timeout).
// `connect_ms`: time to connect (the kernel's accept queue), the rest is the server's.
int Exchange(int port, const std::string& request, size_t* body = nullptr, double* connect_ms = nullptr) {
  const auto t0 = std::chrono::steady_clock::now();
  const int fd = Connect(port);
  if (connect_ms != nullptr) *connect_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (fd < 0) return 0;
  if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(request.size())) {
    ::close(fd);
    return 0;
  }
  std::string resp;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0) {
      ::close(fd);
      return 0;
    }
    if (n == 0) break;
    resp.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  if (resp.compare(0, 7, "HTTP/1.") != 0) return 0;
  const size_t end = resp.find("\r\n\r\n");
  if (body != nullptr && end != std::string::npos) *body = resp.size() - end - 4;
  return std::atoi(resp.c_str() + 9);
}

std::string Request(const std::string& user, const std::string& password) {
  return "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: exporter_hostile\r\nAccept: text/plain\r\n"
         "Accept-Encoding: gzip\r\nAuthorization: Basic " + Base64(user + ":" + password) +
         "\r\nConnection: close\r\n\r\n";
}

long StatusKib(pid_t pid, const char* key) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  const std::string want = std::string(key) + ":";
  while (std::getline(in, line)) {
    if (line.rfind(want, 0) == 0) return std::atol(line.c_str() + want.size());
  }
  return -1;
}

int OpenFds(pid_t pid) {
  DIR* d = ::opendir(("/proc/" + std::to_string(pid) + "/fd").c_str());
  if (d == nullptr) return -1;
  int n = 0;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  ::closedir(d);
  return n;
}

long CpuTicks(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = s.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(s.substr(close + 2));
  std::string f;
  long ticks = 0;
  for (int i = 0; i < 15 && rest >> f; ++i) {
    if (i >= 11) ticks += std::atol(f.c_str());  // utime stime cutime cstime
  }
  return ticks;
}

double Percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const size_t i = std::min(sorted.size() - 1, static_cast<size_t>(p * static_cast<double>(sorted.size() - 1) + 0.5));
  return sorted[i];
}

std::string Quote(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    o += c;
  }
  return o + "\"";
}

struct Sample {
  double t;
  long rss_kib;
  int fds;
};

}  // namespace

int main(int argc, char** argv) {
  Options o;
  std::string invocation;
  for (int i = 0; i < argc; ++i) invocation += (i ? " " : "") + std::string(argv[i]);
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (k == "--check") {
      o.check = true;
      continue;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "exporter_hostile: %s needs a value\n", k.c_str());
      return 3;
    }
    const std::string v = argv[++i];
    if (k == "--gpunode") o.gpunode = v;
    else if (k == "--simulate") o.simulate = v;
    else if (k == "--duration") o.duration = std::atof(v.c_str());
    else if (k == "--warmup") o.warmup = std::atof(v.c_str());
    else if (k == "--slowloris") o.slowloris = std::atoi(v.c_str());
    else if (k == "--slow-period-ms") o.slow_period_ms = std::max(1, std::atoi(v.c_str()));
    else if (k == "--wrong") o.wrong = std::atoi(v.c_str());
    else if (k == "--wrong-mode") o.wrong_mode = v;
    else if (k == "--scrapers") o.scrapers = std::max(1, std::atoi(v.c_str()));
    else if (k == "--scrape-rate") o.scrape_rate = std::atof(v.c_str());
    else if (k == "--cost") o.cost = std::atoi(v.c_str());
    else if (k == "--out") o.out = v;
    else if (k == "--p99-ms") o.p99_ms = std::atof(v.c_str());
    else if (k == "--rss-margin") o.rss_margin = std::atof(v.c_str());
    else if (k == "--fd-margin") o.fd_margin = std::atoi(v.c_str());
    else {
      std::fprintf(stderr, "exporter_hostile: unknown option %s\n", k.c_str());
      return 3;
    }
  }
  if (o.gpunode.empty() || (o.wrong_mode != "distinct" && o.wrong_mode != "same")) {
    std::fprintf(stderr, "usage: exporter_hostile --gpunode PATH [--simulate dgx-h200] [--duration 20] [--check] ...\n");
    return 3;
  }
  ::signal(SIGPIPE, SIG_IGN);

  // The web config: one user with a bcrypt hash of a random password.
  std::mt19937_64 rng(std::random_device{}());
  const std::string password = "pw-" + std::to_string(rng());
  char salt[CRYPT_GENSALT_OUTPUT_SIZE];
  if (crypt_gensalt_rn("$2b$", static_cast<unsigned long>(o.cost), nullptr, 0, salt, sizeof salt) == nullptr) {
    std::fprintf(stderr, "exporter_hostile: crypt_gensalt_rn: %s\n", std::strerror(errno));
    return 2;
  }
  crypt_data* cd = new crypt_data();
  const std::string hash = crypt_r(password.c_str(), salt, cd);
  delete cd;
  char dir_template[] = "/tmp/gpn-hostile-XXXXXX";
  const std::string dir = ::mkdtemp(dir_template);
  std::ofstream(dir + "/web.yml") << "basic_auth_users:\n  prometheus: " << hash << "\n";

  const int port = gpunode::testing::FreePort();
  std::vector<std::string> args = {o.gpunode};
  if (!o.simulate.empty()) args.insert(args.end(), {"--simulate", o.simulate});
  args.insert(args.end(), {"exporter", "-c", "1000", "--listen", "127.0.0.1:" + std::to_string(port),
                           "--web-config-file", dir + "/web.yml"});
  std::string command;
  for (const auto& a : args) command += (command.empty() ? "" : " ") + a;
  std::vector<char*> argv_c;
  for (auto& a : args) argv_c.push_back(a.data());
  argv_c.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, (dir + "/exporter.log").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  pid_t pid = 0;
  if (posix_spawn(&pid, args[0].c_str(), &fa, nullptr, argv_c.data(), environ) != 0) {
    std::fprintf(stderr, "exporter_hostile: cannot start %s\n", args[0].c_str());
    return 2;
  }
  posix_spawn_file_actions_destroy(&fa);
  auto stop_exporter = [&] {
    ::kill(pid, SIGTERM);
    for (int i = 0; i < 100; ++i) {
      if (::waitpid(pid, nullptr, WNOHANG) == pid) return;
      std::this_thread::sleep_for(50ms);
    }
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  };
  const std::string good = Request("prometheus", password);
  size_t bytes = 0;
  bool ready = false;
  for (auto end = Clock::now() + 60s; Clock::now() < end;) {
    if (Exchange(port, good, &bytes) == 200) {
      ready = true;
      break;
    }
    if (::waitpid(pid, nullptr, WNOHANG) == pid) break;
    std::this_thread::sleep_for(100ms);
  }
  if (!ready) {
    std::ifstream log(dir + "/exporter.log");
    std::fprintf(stderr, "exporter_hostile: the exporter did not answer an authorised /metrics; its log:\n%s\n",
                 std::string((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>()).c_str());
    stop_exporter();
    return 2;
  }
  std::this_thread::sleep_for(1s);
  const long rss_idle_before = StatusKib(pid, "VmRSS");
  const int fds_idle_before = OpenFds(pid);

  std::atomic<bool> stop{false};
  const auto t0 = Clock::now();
  const auto end = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.duration));
  std::deque<std::thread> threads;  // (not a vector: GCC 12 -O2 warns falsely in its reallocation)

  // Samples.
  std::vector<Sample> samples;
  threads.emplace_back([&] {
    for (auto next = t0; !stop; next += 1s) {
      std::this_thread::sleep_until(next);
      samples.push_back({std::chrono::duration<double>(Clock::now() - t0).count(), StatusKib(pid, "VmRSS"), OpenFds(pid)});
    }
  });
  const long cpu0 = CpuTicks(pid);

  // Slowloris: one thread, every connection one byte per period; reconnect when cut.
  std::atomic<long> slow_cuts{0}, slow_connects{0}, slow_bytes{0};
  threads.emplace_back([&] {
    const std::string req = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + std::string(1 << 20, 'a');
    struct Conn {
      int fd = -1;
      size_t sent = 0;
      Clock::time_point next;
    };
    std::vector<Conn> conns(static_cast<size_t>(o.slowloris));
    const auto period = std::chrono::milliseconds(o.slow_period_ms);
    for (size_t i = 0; i < conns.size(); ++i) {
      conns[i].next = Clock::now() + period * static_cast<long>(i) / static_cast<long>(std::max<size_t>(1, conns.size()));
    }
    // Connections open over the first second too; cut ones reconnect at once.
    std::vector<Clock::time_point> open_at(conns.size());
    for (size_t i = 0; i < conns.size(); ++i) {
      open_at[i] = t0 + std::chrono::microseconds(1000000L * static_cast<long>(i) / static_cast<long>(std::max<size_t>(1, conns.size())));
    }
    while (!stop) {
      const auto now = Clock::now();
      std::vector<pollfd> pfds;
      for (size_t ci = 0; ci < conns.size(); ++ci) {
        Conn& c = conns[ci];
        if (c.fd < 0 && now < open_at[ci]) {
          pfds.push_back({-1, 0, 0});
          continue;
        }
        if (c.fd < 0) {
          c.fd = Connect(port);
          c.sent = 0;
          ++slow_connects;
          c.next = now;
        }
        if (c.fd >= 0 && now >= c.next) {
          if (::send(c.fd, &req[c.sent % req.size()], 1, MSG_NOSIGNAL | MSG_DONTWAIT) == 1) {
            ++c.sent;
            ++slow_bytes;
          }
          c.next = now + period;
        }
        pfds.push_back({c.fd, POLLIN, 0});
      }
      ::poll(pfds.data(), pfds.size(), 50);
      for (size_t i = 0; i < conns.size(); ++i) {
        if (pfds[i].fd >= 0 && (pfds[i].revents & (POLLIN | POLLHUP | POLLERR))) {
          char buf[4096];
          const ssize_t n = ::recv(conns[i].fd, buf, sizeof buf, MSG_DONTWAIT);
          if (n <= 0) {  // cut by the server: reconnect at once
            ::close(conns[i].fd);
            conns[i].fd = -1;
            ++slow_cuts;
          }
        }
      }
    }
    for (Conn& c : conns) {
      if (c.fd >= 0) ::close(c.fd);
    }
  });

  // Wrong passwords, closed loops.
  std::mutex mu;
  std::map<int, long> wrong_status;
  for (int i = 0; i < o.wrong; ++i) {
    threads.emplace_back([&, i] {
      std::map<int, long> mine;
      const std::string same = Request("prometheus", "wrong-" + std::to_string(i));
      // Clients arrive over the first second, not all in the same microsecond.
      std::this_thread::sleep_until(t0 + std::chrono::microseconds(1000000L * i / std::max(1, o.wrong)));
      for (long n = 0; !stop; ++n) {
        const int st = Exchange(port, o.wrong_mode == "same" ? same
                                                             : Request("prometheus", "wrong-" + std::to_string(i) + "-" + std::to_string(n)));
        ++mine[st];
        if (st == 0) std::this_thread::sleep_for(10ms);  // refused: do not spin
      }
      std::lock_guard<std::mutex> lock(mu);
      for (auto [k, v] : mine) wrong_status[k] += v;
    });
  }

  // Authorised scrapers, paced and staggered.
  std::vector<double> latencies, connect_latencies;
  std::vector<std::pair<double, double>> slowest;  // (ms, started at s)
  std::vector<std::string> failures;
  std::atomic<long> auth_failures{0};
  for (int s = 0; s < o.scrapers; ++s) {
    threads.emplace_back([&, s] {
      const auto period = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(1.0 / o.scrape_rate));
      auto next = t0 + period * s / o.scrapers;
      std::vector<double> mine, mine_connect;
      while (Clock::now() < end) {
        std::this_thread::sleep_until(next);
        next += period;
        const auto a = Clock::now();
        double connect_ms = 0;
        const int st = Exchange(port, good, nullptr, &connect_ms);
        const double ms = std::chrono::duration<double, std::milli>(Clock::now() - a).count();
        mine.push_back(ms);
        mine_connect.push_back(connect_ms);
        {
          std::lock_guard<std::mutex> lock(mu);
          slowest.emplace_back(ms, std::chrono::duration<double>(a - t0).count());
          std::sort(slowest.rbegin(), slowest.rend());
          if (slowest.size() > 8) slowest.pop_back();
        }
        if (st != 200) {
          ++auth_failures;
          std::lock_guard<std::mutex> lock(mu);
          if (failures.size() < 20) {
            failures.push_back("t=" + std::to_string(std::chrono::duration<double>(a - t0).count()) + "s status " +
                               std::to_string(st) + " after " + std::to_string(ms) + " ms");
          }
        }
      }
      std::lock_guard<std::mutex> lock(mu);
      latencies.insert(latencies.end(), mine.begin(), mine.end());
      connect_latencies.insert(connect_latencies.end(), mine_connect.begin(), mine_connect.end());
    });
  }

  std::this_thread::sleep_until(end);
  stop = true;
  for (auto& t : threads) t.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
  const long cpu1 = CpuTicks(pid);
  std::this_thread::sleep_for(1500ms);  // lingering closes finish
  const long rss_idle_after = StatusKib(pid, "VmRSS");
  const int fds_idle_after = OpenFds(pid);
  const long hwm = StatusKib(pid, "VmHWM");
  const long threads_n = StatusKib(pid, "Threads");
  stop_exporter();

  std::sort(latencies.begin(), latencies.end());
  std::sort(connect_latencies.begin(), connect_latencies.end());
  // RSS and fds: the first sample at or after the warm-up, the max, the last.
  Sample first{0, -1, -1}, last{0, -1, -1};
  long rss_max = 0;
  int fds_max = 0;
  for (const Sample& x : samples) {
    if (x.t + 1e-3 < o.warmup || x.t > o.duration - 0.5) continue;  // warm-up, or the load had stopped
    if (first.rss_kib < 0) first = x;
    last = x;
    rss_max = std::max(rss_max, x.rss_kib);
    fds_max = std::max(fds_max, x.fds);
  }
  const double p99 = Percentile(latencies, 0.99);
  std::vector<std::string> problems;
  if (latencies.empty()) problems.push_back("no authorised scrape was made");
  if (p99 >= o.p99_ms) problems.push_back("authorised p99 " + std::to_string(p99) + " ms >= " + std::to_string(o.p99_ms));
  if (auth_failures > 0) problems.push_back(std::to_string(auth_failures.load()) + " authorised scrapes failed");
  if (first.rss_kib > 0 &&
      static_cast<double>(last.rss_kib) > static_cast<double>(first.rss_kib) * (1 + o.rss_margin) + 1024) {
    problems.push_back("RSS grew from " + std::to_string(first.rss_kib) + " to " + std::to_string(last.rss_kib) + " KiB");
  }
  if (first.fds > 0 && last.fds > first.fds + o.fd_margin) {
    problems.push_back("fds grew from " + std::to_string(first.fds) + " to " + std::to_string(last.fds));
  }
  if (fds_idle_after > fds_idle_before + 2) {
    problems.push_back("fds after the load " + std::to_string(fds_idle_after) + " > before " + std::to_string(fds_idle_before));
  }

  std::ostringstream j;
  j.setf(std::ios::fixed);
  j.precision(3);
  long wrong_total = 0;
  for (auto [k, v] : wrong_status) wrong_total += v;
  j << "{\n  \"benchmark\": \"exporter_hostile\",\n  \"invocation\": " << Quote(invocation)
    << ",\n  \"exporter_command\": " << Quote(command) << ",\n"
    << "  \"options\": {\"duration_s\": " << o.duration << ", \"warmup_s\": " << o.warmup << ", \"slowloris\": " << o.slowloris
    << ", \"slow_period_ms\": " << o.slow_period_ms << ", \"wrong_password_clients\": " << o.wrong
    << ", \"wrong_mode\": " << Quote(o.wrong_mode) << ", \"authorised_scrapers\": " << o.scrapers
    << ", \"scrape_rate_per_scraper\": " << o.scrape_rate << ", \"bcrypt_cost\": " << o.cost
    << ", \"cpus\": " << std::thread::hardware_concurrency() << "},\n"
    << "  \"seconds\": " << elapsed << ",\n"
    << "  \"bytes_per_scrape\": " << bytes << ",\n"
    << "  \"authorised\": {\"scrapes\": " << latencies.size() << ", \"failures\": " << auth_failures.load()
    << ", \"latency_ms\": {\"p50\": " << Percentile(latencies, 0.5) << ", \"p90\": " << Percentile(latencies, 0.9)
    << ", \"p99\": " << p99 << ", \"max\": " << (latencies.empty() ? 0 : latencies.back())
    << "}, \"connect_ms\": {\"p50\": " << Percentile(connect_latencies, 0.5) << ", \"p99\": " << Percentile(connect_latencies, 0.99)
    << ", \"max\": " << (connect_latencies.empty() ? 0 : connect_latencies.back()) << "}, \"slowest_ms_at_s\": [";
  for (size_t i = 0; i < slowest.size(); ++i) j << (i ? ", " : "") << "[" << slowest[i].first << ", " << slowest[i].second << "]";
  j << "], \"first_failures\": [";
  for (size_t i = 0; i < failures.size(); ++i) j << (i ? ", " : "") << Quote(failures[i]);
  j << "]},\n  \"wrong_password\": {\"requests\": " << wrong_total << ", \"per_second\": " << wrong_total / elapsed
    << ", \"by_status\": {";
  bool firstk = true;
  for (auto [k, v] : wrong_status) {
    j << (firstk ? "" : ", ") << "\"" << (k == 0 ? std::string("no_answer") : std::to_string(k)) << "\": " << v;
    firstk = false;
  }
  j << "}},\n  \"slowloris\": {\"connects\": " << slow_connects.load() << ", \"cut_by_server\": " << slow_cuts.load()
    << ", \"bytes_sent\": " << slow_bytes.load() << "},\n"
    << "  \"exporter\": {\"cpu_percent_of_one_core\": "
    << 100.0 * static_cast<double>(cpu1 - cpu0) / static_cast<double>(::sysconf(_SC_CLK_TCK)) / elapsed
    << ", \"threads\": " << threads_n << ", \"rss_kib\": {\"idle_before\": " << rss_idle_before << ", \"start\": " << first.rss_kib
    << ", \"max\": " << rss_max << ", \"end\": " << last.rss_kib << ", \"idle_after\": " << rss_idle_after
    << ", \"peak_vmhwm\": " << hwm << "}, \"fds\": {\"idle_before\": " << fds_idle_before << ", \"start\": " << first.fds
    << ", \"max\": " << fds_max << ", \"end\": " << last.fds << ", \"idle_after\": " << fds_idle_after << "}},\n"
    << "  \"samples\": [";
  for (size_t i = 0; i < samples.size(); ++i) {
    j << (i ? ", " : "") << "[" << samples[i].t << ", " << samples[i].rss_kib << ", " << samples[i].fds << "]";
  }
  j << "],\n  \"problems\": [";
  for (size_t i = 0; i < problems.size(); ++i) j << (i ? ", " : "") << Quote(problems[i]);
  j << "]\n}\n";
  std::fputs(j.str().c_str(), stdout);
  std::fflush(stdout);
  if (!o.out.empty()) std::ofstream(o.out) << j.str();
  std::system(("rm -rf " + dir).c_str());
  if (o.check && !problems.empty()) {
    for (const auto& p : problems) std::fprintf(stderr, "exporter_hostile: FAIL: %s\n", p.c_str());
    return 1;
  }
  return 0;
}
