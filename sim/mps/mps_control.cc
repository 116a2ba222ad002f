// gpunode-sim-mps-control: the simulated driver's `nvidia-cuda-mps-control`, the CUDA MPS control
// daemon and its client, as it behaves at its boundary (the part of the simulated driver that
// `gpunode sim hostroot` installs as usr/bin/nvidia-cuda-mps-control, like libgpunode-simnvml.so
// stands for libnvidia-ml.so.1). There is no GPU behind it: no MPS server is ever spawned.
//
//   nvidia-cuda-mps-control -d   daemon in the background: the parent returns 0 once the daemon
//                                 serves its control pipe (1 with a message when it cannot)
//   nvidia-cuda-mps-control -f   the same daemon in the foreground
//   nvidia-cuda-mps-control      client: each line of stdin is a command sent to the daemon of
//                                 $CUDA_MPS_PIPE_DIRECTORY; its answer is printed on stdout
//
// Files, as the real daemon has them: $CUDA_MPS_PIPE_DIRECTORY (default /tmp/nvidia-mps) holds
// the `control` FIFO and nvidia-cuda-mps-control.pid; $CUDA_MPS_LOG_DIRECTORY (default
// /var/log/nvidia-mps) holds control.log, where every command and every setting is recorded
// ("[2026-01-02 03:04:05.678 Control 4242] Cmd:set_default_active_thread_percentage 50"), so tests
// can assert what a manager configured.
//
// Commands: get_server_list (empty: no server runs here), get_default_active_thread_percentage,
// set_default_active_thread_percentage N (0 < N <= 100), set_default_device_pinned_mem_limit DEV
// LIMIT and get_default_device_pinned_mem_limit DEV (DEV: an ordinal of the daemon's
// CUDA_VISIBLE_DEVICES, or one of its UUIDs; LIMIT: digits then M or G), quit. Anything else is an
// error. A client whose command fails exits 1 (and prints the daemon's message); a client that
// finds no daemon answering its pipe prints so and exits 1 at once.
//
// The wire between client and daemon is the sim's own: the client makes a reply FIFO in the pipe
// directory, writes one line "<reply fifo>\t<command>\n" (shorter than PIPE_BUF, so atomic) to
// `control`, and reads "<0|1>\n<answer>" from its reply FIFO. Self-contained (libc and libstdc++
// only) and linked statically, so it also runs chrooted into a generated host root.
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace {

volatile sig_atomic_t g_stop = 0;  // set by SIGTERM/SIGINT in the daemon

std::string EnvOr(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : fallback;
}

std::string PipeDir() { return EnvOr("CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps"); }
std::string LogDir() { return EnvOr("CUDA_MPS_LOG_DIRECTORY", "/var/log/nvidia-mps"); }
std::string ControlPath() { return PipeDir() + "/control"; }
std::string PidPath() { return PipeDir() + "/nvidia-cuda-mps-control.pid"; }

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

bool WriteAll(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

int MakeDirs(const std::string& path) {
  std::string cur;
  for (const std::string& part : Split(path, '/')) {
    cur += "/" + part;
    if (::mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST) return -1;
  }
  return 0;
}

// True when some process holds `control` open for reading (a live daemon).
bool ControlHasReader() {
  int fd = ::open(ControlPath().c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return false;  // ENXIO: no reader; ENOENT: no pipe
  ::close(fd);
  return true;
}

// ---------------------------------------------------------------------------------------------
// The daemon.

class Daemon {
 public:
  int Run(int ready_fd) {
    pid_ = ::getpid();
    devices_ = Split(EnvOr("CUDA_VISIBLE_DEVICES", ""), ',');
    auto fail = [&](const std::string& what) {
      const std::string msg = what + ": " + std::strerror(errno) + "\n";
      if (ready_fd >= 0) {
        WriteAll(ready_fd, msg);
      } else {
        std::fputs(msg.c_str(), stderr);
      }
      return 1;
    };
    if (MakeDirs(PipeDir()) != 0) return fail("create pipe directory " + PipeDir());
    if (MakeDirs(LogDir()) != 0) return fail("create log directory " + LogDir());
    if (ControlHasReader()) {
      errno = EEXIST;
      return fail("An instance of this daemon is already running with pipe directory " + PipeDir());
    }
    ::unlink(ControlPath().c_str());  // a stale pipe of a daemon that died
    if (::mkfifo(ControlPath().c_str(), 0666) != 0) return fail("mkfifo " + ControlPath());
    // Read-write, so the daemon never sees end of file when a client closes.
    control_ = ::open(ControlPath().c_str(), O_RDWR | O_CLOEXEC);
    if (control_ < 0) return fail("open " + ControlPath());
    log_ = std::fopen((LogDir() + "/control.log").c_str(), "ae");
    if (log_ == nullptr) return fail("open " + LogDir() + "/control.log");
    {
      FILE* pid = std::fopen(PidPath().c_str(), "we");
      if (pid == nullptr) return fail("write " + PidPath());
      std::fprintf(pid, "%d\n", static_cast<int>(pid_));
      std::fclose(pid);
    }
    Log("Starting control daemon using socket " + ControlPath());
    Log("To connect CUDA applications to this daemon, set env CUDA_MPS_PIPE_DIRECTORY=" + PipeDir());
    Log("CUDA_VISIBLE_DEVICES=" + EnvOr("CUDA_VISIBLE_DEVICES", "") + " (" + std::to_string(devices_.size()) +
        " device(s))");
    if (ready_fd >= 0) {
      ::close(ready_fd);  // nothing written: started
    }
    Loop();
    Log("Exit");
    Cleanup();
    return 0;
  }

 private:
  void Log(const std::string& msg) {
    timeval tv{};
    ::gettimeofday(&tv, nullptr);
    tm t{};
    ::localtime_r(&tv.tv_sec, &t);
    char stamp[64];
    std::strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", &t);
    std::fprintf(log_, "[%s.%03d Control %d] %s\n", stamp, static_cast<int>(tv.tv_usec / 1000),
                 static_cast<int>(pid_), msg.c_str());
    std::fflush(log_);
  }

  void Cleanup() {
    ::unlink(ControlPath().c_str());
    ::unlink(PidPath().c_str());
    if (control_ >= 0) ::close(control_);
    if (log_ != nullptr) std::fclose(log_);
  }

  void Loop() {
    std::string buffer;
    char chunk[4096];
    while (!g_stop) {
      pollfd p{control_, POLLIN, 0};
      int r = ::poll(&p, 1, 500);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) continue;
      ssize_t n = ::read(control_, chunk, sizeof chunk);
      if (n <= 0) continue;
      buffer.append(chunk, static_cast<size_t>(n));
      size_t nl;
      while ((nl = buffer.find('\n')) != std::string::npos) {
        const std::string line = buffer.substr(0, nl);
        buffer.erase(0, nl + 1);
        const size_t tab = line.find('\t');
        if (tab == std::string::npos) continue;
        const std::string reply_path = line.substr(0, tab);
        const std::string command = Trim(line.substr(tab + 1));
        Log("NEW UI");
        Log("Cmd:" + command);
        bool quit = false;
        std::string answer;
        const bool ok = Execute(command, &answer, &quit);
        if (!answer.empty()) Log(answer);
        Reply(reply_path, ok, answer);
        Log("UI closed");
        if (quit) return;
      }
    }
    Log("Received signal; shutting down");
  }

  // The ordinal of DEV (an ordinal or a UUID of CUDA_VISIBLE_DEVICES); -1 when unknown.
  int DeviceOrdinal(const std::string& dev) const {
    if (!dev.empty() && dev.find_first_not_of("0123456789") == std::string::npos) {
      const long v = std::strtol(dev.c_str(), nullptr, 10);
      const long count = devices_.empty() ? 1 : static_cast<long>(devices_.size());
      return v < count ? static_cast<int>(v) : -1;
    }
    for (size_t i = 0; i < devices_.size(); ++i) {
      if (devices_[i] == dev) return static_cast<int>(i);
    }
    return -1;
  }

  static bool ValidLimit(const std::string& v) {
    if (v.size() < 2) return false;
    const char unit = v.back();
    if (unit != 'M' && unit != 'G') return false;
    return v.substr(0, v.size() - 1).find_first_not_of("0123456789") == std::string::npos;
  }

  bool Execute(const std::string& command, std::string* answer, bool* quit) {
    const std::vector<std::string> w = Split(command, ' ');
    if (w.empty()) {
      *answer = "Empty command";
      return false;
    }
    const std::string& verb = w[0];
    if (verb == "quit" && w.size() == 1) {
      *quit = true;
      return true;
    }
    if (verb == "get_server_list" && w.size() == 1) return true;  // no servers
    if (verb == "get_default_active_thread_percentage" && w.size() == 1) {
      *answer = Percent(thread_percentage_);
      return true;
    }
    if (verb == "set_default_active_thread_percentage" && w.size() == 2) {
      char* end = nullptr;
      const double v = std::strtod(w[1].c_str(), &end);
      if (end == w[1].c_str() || *end != '\0' || !(v > 0) || v > 100) {
        *answer = "Invalid active thread percentage " + w[1];
        return false;
      }
      thread_percentage_ = v;
      *answer = Percent(v);
      Log("Set default active thread percentage to " + Percent(v));
      return true;
    }
    if (verb == "set_default_device_pinned_mem_limit" && w.size() == 3) {
      const int ordinal = DeviceOrdinal(w[1]);
      if (ordinal < 0) {
        *answer = "Invalid device " + w[1];
        return false;
      }
      if (!ValidLimit(w[2])) {
        *answer = "Invalid memory limit " + w[2];
        return false;
      }
      pinned_[ordinal] = w[2];
      Log("Set default pinned device memory limit of device " + std::to_string(ordinal) + " (" + w[1] +
          ") to " + w[2]);
      return true;
    }
    if (verb == "get_default_device_pinned_mem_limit" && w.size() == 2) {
      const int ordinal = DeviceOrdinal(w[1]);
      if (ordinal < 0) {
        *answer = "Invalid device " + w[1];
        return false;
      }
      auto it = pinned_.find(ordinal);
      *answer = it == pinned_.end() ? "0M" : it->second;
      return true;
    }
    *answer = "Unrecognized command: " + command;
    return false;
  }

  static std::string Percent(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f", v);
    return buf;
  }

  void Reply(const std::string& path, bool ok, const std::string& answer) {
    // The client opened its FIFO for reading before it sent the command; if it is gone, drop it.
    int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return;
    const int flags = ::fcntl(fd, F_GETFL);
    ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    WriteAll(fd, std::string(ok ? "0\n" : "1\n") + answer + (answer.empty() ? "" : "\n"));
    ::close(fd);
  }

  pid_t pid_ = 0;
  int control_ = -1;
  FILE* log_ = nullptr;
  std::vector<std::string> devices_;
  double thread_percentage_ = 100.0;
  std::map<int, std::string> pinned_;
};

void OnSignal(int) { g_stop = 1; }

void InstallSignals() {
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
}

int RunForeground() {
  InstallSignals();
  Daemon d;
  return d.Run(-1);
}

// -d: the parent waits until the daemon serves its pipe (or says why it cannot), then exits.
int RunBackground() {
  int ready[2];
  if (::pipe2(ready, O_CLOEXEC) != 0) {
    std::perror("pipe");
    return 1;
  }
  const pid_t child = ::fork();
  if (child < 0) {
    std::perror("fork");
    return 1;
  }
  if (child == 0) {
    ::close(ready[0]);
    ::setsid();
    if (::fork() > 0) _exit(0);  // the daemon is not a session leader: it never gets a terminal
    int null = ::open("/dev/null", O_RDWR);
    if (null >= 0) {
      ::dup2(null, 0);
      ::dup2(null, 1);
      ::dup2(null, 2);
      if (null > 2) ::close(null);
    }
    if (::chdir("/") != 0) {
      // stays where it was started; harmless
    }
    InstallSignals();
    Daemon d;
    _exit(d.Run(ready[1]));
  }
  ::close(ready[1]);
  int status = 0;
  ::waitpid(child, &status, 0);
  std::string msg;
  char buf[512];
  ssize_t n;
  while ((n = ::read(ready[0], buf, sizeof buf)) > 0) msg.append(buf, static_cast<size_t>(n));
  ::close(ready[0]);
  if (!msg.empty()) {
    std::fputs(msg.c_str(), stderr);
    return 1;
  }
  return 0;
}

// ---------------------------------------------------------------------------------------------
// The client.

// Sends one command; prints the answer. Returns 0 on success, 1 on a failed command or no daemon.
int SendCommand(const std::string& command, int timeout_ms) {
  int control = ::open(ControlPath().c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  if (control < 0) {
    std::printf("Cannot find MPS control daemon process (%s: %s)\n", ControlPath().c_str(), std::strerror(errno));
    std::fflush(stdout);
    return 1;
  }
  static int seq = 0;
  const std::string reply = PipeDir() + "/.client." + std::to_string(::getpid()) + "." + std::to_string(++seq);
  ::unlink(reply.c_str());
  if (::mkfifo(reply.c_str(), 0600) != 0) {
    std::printf("Cannot create %s: %s\n", reply.c_str(), std::strerror(errno));
    ::close(control);
    return 1;
  }
  int in = ::open(reply.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  const std::string line = reply + "\t" + command + "\n";
  const bool sent = in >= 0 && line.size() < PIPE_BUF && WriteAll(control, line);
  ::close(control);
  std::string out;
  bool done = false;
  if (sent) {
    timeval start{};
    ::gettimeofday(&start, nullptr);
    char buf[4096];
    while (!done) {
      timeval now{};
      ::gettimeofday(&now, nullptr);
      const long elapsed = (now.tv_sec - start.tv_sec) * 1000 + (now.tv_usec - start.tv_usec) / 1000;
      if (elapsed >= timeout_ms) break;
      pollfd p{in, POLLIN, 0};
      int r = ::poll(&p, 1, static_cast<int>(timeout_ms - elapsed));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) continue;
      ssize_t n = ::read(in, buf, sizeof buf);
      if (n > 0) {
        out.append(buf, static_cast<size_t>(n));
      } else if (n == 0) {
        done = true;  // the daemon wrote its answer and closed
      }
    }
  }
  if (in >= 0) ::close(in);
  ::unlink(reply.c_str());
  if (!done) {
    std::printf("No answer from the MPS control daemon at %s\n", ControlPath().c_str());
    std::fflush(stdout);
    return 1;
  }
  const size_t nl = out.find('\n');
  const std::string status = out.substr(0, nl);
  const std::string answer = nl == std::string::npos ? "" : out.substr(nl + 1);
  std::fputs(answer.c_str(), stdout);
  std::fflush(stdout);
  return status == "0" ? 0 : 1;
}

int RunClient() {
  ::signal(SIGPIPE, SIG_IGN);
  int rc = 0;
  std::string line;
  while (std::getline(std::cin, line)) {
    line = Trim(line);
    if (line.empty()) continue;
    if (SendCommand(line, 30000) != 0) rc = 1;
    if (line == "quit") break;
  }
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 1) return RunClient();
  const std::string arg = argv[1];
  if (argc == 2 && arg == "-d") return RunBackground();
  if (argc == 2 && arg == "-f") return RunForeground();
  if (argc == 2 && (arg == "-h" || arg == "--help")) {
    std::printf("usage: nvidia-cuda-mps-control [-d | -f]  (gpunode's simulated MPS control daemon)\n");
    return 0;
  }
  std::fprintf(stderr, "nvidia-cuda-mps-control: unknown option %s\nusage: nvidia-cuda-mps-control [-d | -f]\n",
               arg.c_str());
  return 1;
}
