#include "src/kube/transport.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include <openssl/err.h>
#include <openssl/pem.h>

#include "absl/strings/str_cat.h"
#include "src/base/held_mutex.h"

namespace gpunode::kube::internal {
namespace {

struct BioDeleter {
  void operator()(BIO* b) const { BIO_free(b); }
};

std::string OpenSslError() {
  unsigned long e = ERR_get_error();
  if (e == 0) return "no PEM data";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  ERR_clear_error();
  return buf;
}

int CountPemCertificates(const std::string& pem) {
  std::unique_ptr<BIO, BioDeleter> b(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  int n = 0;
  while (X509* x = PEM_read_bio_X509(b.get(), nullptr, nullptr, nullptr)) {
    ++n;
    X509_free(x);
  }
  ERR_clear_error();  // the loop ends on "no start line"
  return n;
}

bool WriteAll(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

// ---- PrivateCaFile ----

StatusOr<std::unique_ptr<PrivateCaFile>> PrivateCaFile::Create(const std::string& pem, const std::string& source,
                                                               Kind kind) {
  if (CountPemCertificates(pem) == 0) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": the CA data holds no PEM certificate"));
  }
  std::unique_ptr<PrivateCaFile> f(new PrivateCaFile());
  if (kind != Kind::kTempFile) {
    const int fd = ::memfd_create("gpunode-kube-ca", MFD_CLOEXEC);
    if (fd >= 0 && WriteAll(fd, pem)) {
      const std::string path = absl::StrCat("/proc/self/fd/", fd);
      // /proc may be missing (a chroot, a minimal container): then the temp file.
      if (const int probe = ::open(path.c_str(), O_RDONLY | O_CLOEXEC); probe >= 0) {
        ::close(probe);
        f->fd_ = fd;
        f->path_ = path;
        return f;
      }
    }
    if (fd >= 0) ::close(fd);
    if (kind == Kind::kMemfd) {
      return absl::UnavailableError(absl::StrCat(source, ": cannot keep the CA in a memfd: ", std::strerror(errno)));
    }
  }
  const char* tmp = std::getenv("TMPDIR");
  std::string path = absl::StrCat(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", "/gpunode-kube-ca.XXXXXX");
  const int fd = ::mkstemp(path.data());  // mode 0600
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrCat(source, ": cannot write the CA to a private file ", path, ": ", std::strerror(errno)));
  }
  const bool ok = ::fchmod(fd, 0600) == 0 && WriteAll(fd, pem);
  ::close(fd);
  if (!ok) {
    ::unlink(path.c_str());
    return absl::UnavailableError(absl::StrCat(source, ": cannot write the CA to ", path));
  }
  f->path_ = path;
  f->unlink_ = true;
  return f;
}

PrivateCaFile::~PrivateCaFile() {
  if (fd_ >= 0) ::close(fd_);
  if (unlink_) ::unlink(path_.c_str());
}

// ---- Endpoint ----

Endpoint::~Endpoint() {
  if (cert != nullptr) X509_free(cert);
  if (key != nullptr) EVP_PKEY_free(key);
}

StatusOr<std::shared_ptr<Endpoint>> MakeEndpoint(const Connection& c) {
  auto e = std::make_shared<Endpoint>();
  e->c = c;
  if (c.scheme != "https") return e;
  if (!c.client_cert_pem.empty()) {
    std::unique_ptr<BIO, BioDeleter> b(
        BIO_new_mem_buf(c.client_cert_pem.data(), static_cast<int>(c.client_cert_pem.size())));
    e->cert = PEM_read_bio_X509(b.get(), nullptr, nullptr, nullptr);
    std::unique_ptr<BIO, BioDeleter> k(
        BIO_new_mem_buf(c.client_key_pem.data(), static_cast<int>(c.client_key_pem.size())));
    e->key = PEM_read_bio_PrivateKey(k.get(), nullptr, nullptr, nullptr);
    if (e->cert == nullptr || e->key == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(c.source, ": the client certificate or key is not PEM: ", OpenSslError()));
    }
  }
  if (!c.ca_pem.empty()) {
    GPUNODE_ASSIGN_OR_RETURN(e->ca, PrivateCaFile::Create(c.ca_pem, c.source));
  }
  return e;
}

// ---- Conn ----

struct Conn::CancelState {
  absl::Mutex mu;
  int dup_fd ABSL_GUARDED_BY(mu) = -1;  // our duplicate of the socket in use
  bool cancelled ABSL_GUARDED_BY(mu) = false;

  // httplib's socket-options hook: every new socket of this connection, before its connect.
  void OnSocket(int fd) {
    absl::MutexLock l(&mu);
    if (dup_fd >= 0) ::close(dup_fd);
    dup_fd = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (cancelled) ::shutdown(fd, SHUT_RDWR);
  }
};

namespace {

// cpp-httplib's clients with access to the socket they keep open between requests.
template <class Base>
class Abortable final : public Base {
 public:
  template <class... Args>
  explicit Abortable(const std::shared_ptr<Conn::CancelState>& state, Args&&... args)
      : Base(std::forward<Args>(args)...) {
    std::weak_ptr<Conn::CancelState> weak = state;
    this->set_socket_options([weak](socket_t fd) {
      if (auto s = weak.lock()) s->OnSocket(fd);
    });
  }
  // Only between requests (no request in flight on this connection).
  int OpenFd() const { return this->socket_.is_open() ? static_cast<int>(this->socket_.sock) : -1; }
};

}  // namespace

Conn::Conn(std::shared_ptr<Endpoint> endpoint)
    : endpoint_(std::move(endpoint)), state_(std::make_shared<CancelState>()) {
  const Connection& c = endpoint_->c;
  if (c.scheme == "http") {
    auto http = std::make_unique<Abortable<httplib::ClientImpl>>(state_, c.host, c.port);
    auto* raw = http.get();
    open_fd_ = [raw] { return raw->OpenFd(); };
    http_ = std::move(http);
  } else {
    std::unique_ptr<Abortable<httplib::SSLClient>> ssl =
        endpoint_->cert != nullptr
            ? std::make_unique<Abortable<httplib::SSLClient>>(state_, c.host, c.port, endpoint_->cert, endpoint_->key)
            : std::make_unique<Abortable<httplib::SSLClient>>(state_, c.host, c.port);
    // The cluster's CA alone, as a file (PrivateCaFile says why not a store); none: the system's.
    if (endpoint_->ca) ssl->set_ca_cert_path(endpoint_->ca->path());
    ssl->enable_server_certificate_verification(!c.insecure_skip_verify);
    auto* raw = ssl.get();
    open_fd_ = [raw] { return raw->OpenFd(); };
    http_ = std::move(ssl);
  }
  http_->set_keep_alive(true);
  // A request's headers and body go out in separate writes: without TCP_NODELAY, Nagle holds the
  // body until the server ACKs the headers, which a delayed ACK makes ~40 ms (client-go's
  // net.Dialer has it on, as Go does by default).
  http_->set_tcp_nodelay(true);
}

Conn::~Conn() {
  http_.reset();
  absl::MutexLock l(&state_->mu);
  if (state_->dup_fd >= 0) ::close(state_->dup_fd);
  state_->dup_fd = -1;
}

long Conn::VerifyResult() const {
  if (auto* ssl = dynamic_cast<httplib::SSLClient*>(http_.get())) return ssl->get_openssl_verify_result();
  return 0;
}

bool Conn::Arm() {
  const int fd = open_fd_();
  absl::MutexLock l(&state_->mu);
  state_->cancelled = false;
  if (state_->dup_fd >= 0) ::close(state_->dup_fd);
  state_->dup_fd = fd >= 0 ? ::fcntl(fd, F_DUPFD_CLOEXEC, 0) : -1;
  return fd >= 0;
}

void Conn::Disarm() {
  bool cancelled;
  {
    absl::MutexLock l(&state_->mu);
    if (state_->dup_fd >= 0) ::close(state_->dup_fd);
    state_->dup_fd = -1;
    cancelled = state_->cancelled;
  }
  if (cancelled) http_->stop();  // nothing in flight now: closes the socket
}

void Conn::Cancel() {
  absl::MutexLock l(&state_->mu);
  state_->cancelled = true;
  if (state_->dup_fd >= 0) ::shutdown(state_->dup_fd, SHUT_RDWR);
}

bool Conn::cancelled() const {
  absl::MutexLock l(&state_->mu);
  return state_->cancelled;
}

// ---- CallContext ----

CallContext::CallContext(SteadyClock::time_point deadline, std::stop_token call_stop, std::stop_token client_stop)
    : deadline_(deadline) {
  on_stop_.emplace(source_.get_token(), std::function<void()>([this] {
                     absl::MutexLock l(&mu_);
                     if (conn_ != nullptr) conn_->Cancel();
                   }));
  on_call_stop_.emplace(std::move(call_stop), std::function<void()>([this] { Stop(Why::kStopped); }));
  on_client_stop_.emplace(std::move(client_stop), std::function<void()>([this] { Stop(Why::kStopped); }));
}

CallContext::~CallContext() {
  on_call_stop_.reset();
  on_client_stop_.reset();
  on_stop_.reset();
}

std::chrono::milliseconds CallContext::Remaining() const {
  return std::max(std::chrono::milliseconds(0),
                  std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - SteadyClock::now()));
}

void CallContext::Stop(Why why) {
  Why none = Why::kNone;
  why_.compare_exchange_strong(none, why);
  source_.request_stop();
}

bool CallContext::SleepUntil(SteadyClock::time_point until) {
  std::mutex m;
  std::condition_variable_any cv;
  std::unique_lock<std::mutex> l(m);
  cv.wait_until(l, source_.get_token(), std::min(until, deadline_), [] { return false; });
  return !stopped();
}

void CallContext::Use(Conn* conn) {
  absl::MutexLock l(&mu_);
  conn_ = conn;
  if (conn_ != nullptr && stopped()) conn_->Cancel();
}

Status EndedEarly(const CallContext& call, const std::string& what, std::chrono::milliseconds timeout) {
  switch (call.why()) {
    case CallContext::Why::kNone:
      return absl::OkStatus();
    case CallContext::Why::kStopped:
      return absl::CancelledError(absl::StrCat(what, ": stopped"));
    case CallContext::Why::kDeadline:
      return absl::DeadlineExceededError(absl::StrCat(what, ": no complete answer within ", timeout.count(),
                                                      " ms (the call's deadline)"));
  }
  return absl::OkStatus();
}

// ---- Watchdog ----

Watchdog::~Watchdog() {
  std::thread thread;
  {
    absl::MutexLock l(&mu_);
    quit_ = true;
    thread = std::move(thread_);
  }
  cv_.notify_all();
  if (thread.joinable()) thread.join();
}

uint64_t Watchdog::Add(CallContext* call, const std::atomic<bool>* flag) {
  absl::MutexLock l(&mu_);
  if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
  const uint64_t id = next_++;
  entries_[id] = Entry{call, flag};
  cv_.notify_all();
  return id;
}

void Watchdog::Remove(uint64_t id) {
  absl::MutexLock l(&mu_);
  entries_.erase(id);
}

void Watchdog::Loop() {
  absl::MutexLock l(&mu_);
  HeldMutex held(mu_);
  while (!quit_) {
    const auto now = SteadyClock::now();
    auto wake = now + std::chrono::hours(1);
    for (auto& [id, e] : entries_) {
      if (e.call->stopped()) continue;  // fired, or stopped otherwise: nothing left to do
      if (e.flag != nullptr && e.flag->load()) {
        e.call->Stop(CallContext::Why::kStopped);
        continue;
      }
      if (now >= e.call->deadline()) {
        e.call->Stop(CallContext::Why::kDeadline);
        continue;
      }
      wake = std::min(wake, e.call->deadline());
      if (e.flag != nullptr) wake = std::min(wake, now + std::chrono::milliseconds(50));
    }
    cv_.wait_until(held, wake);
  }
}

// ---- RateLimiter ----

RateLimiter::RateLimiter(double qps, int burst)
    : qps_(qps), burst_(std::max(1, burst)), tokens_(std::max(1, burst)), last_(SteadyClock::now()) {}

Status RateLimiter::Take(CallContext& call, const std::string& what) {
  if (qps_ <= 0) return absl::OkStatus();
  SteadyClock::time_point ready;
  {
    absl::MutexLock l(&mu_);
    const auto now = SteadyClock::now();
    tokens_ = std::min(burst_, tokens_ + std::chrono::duration<double>(now - last_).count() * qps_);
    last_ = now;
    if (tokens_ >= 1) {
      tokens_ -= 1;
      return absl::OkStatus();
    }
    ready = now + std::chrono::duration_cast<SteadyClock::duration>(std::chrono::duration<double>((1 - tokens_) / qps_));
    if (ready > call.deadline()) {
      return absl::DeadlineExceededError(absl::StrCat(
          what, ": the client's rate limit (", qps_, " requests/s, burst ", burst_, ") would delay it past its deadline"));
    }
    tokens_ -= 1;  // reserved: the next caller waits behind this one
  }
  if (!call.SleepUntil(ready)) {
    absl::MutexLock l(&mu_);
    tokens_ += 1;  // not used
    return absl::CancelledError(absl::StrCat(what, ": stopped"));
  }
  return absl::OkStatus();
}

// ---- Pool ----

Pool::Pool(std::shared_ptr<Endpoint> endpoint, int max) : endpoint_(std::move(endpoint)), max_(std::max(1, max)) {}

Pool::~Pool() = default;

StatusOr<std::unique_ptr<Conn>> Pool::Acquire(CallContext& call, const std::string& what) {
  absl::ReleasableMutexLock l(&mu_);
  bool got;
  {
    HeldMutex held(mu_);
    got = cv_.wait_until(held, call.token(), call.deadline(),
                         [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return !idle_.empty() || lent_ < max_; });
  }
  if (!got) {
    if (call.stopped()) return absl::CancelledError(absl::StrCat(what, ": stopped"));
    return absl::DeadlineExceededError(
        absl::StrCat(what, ": all ", max_, " connections stayed busy until the call's deadline"));
  }
  ++lent_;
  if (!idle_.empty()) {
    std::unique_ptr<Conn> c = std::move(idle_.back());
    idle_.pop_back();
    return c;
  }
  l.Release();
  return std::make_unique<Conn>(endpoint_);
}

void Pool::Release(std::unique_ptr<Conn> conn, bool reuse) {
  {
    absl::MutexLock l(&mu_);
    --lent_;
    if (reuse && conn != nullptr) idle_.push_back(std::move(conn));
  }
  cv_.notify_one();
  // A dropped connection closes here, outside the lock.
}

}  // namespace gpunode::kube::internal
