// The Kubernetes client's plumbing below client.h (internal to src/kube): connections that another
// thread can abort at any moment, the CA as a private file, the deadline/stop watchdog, the
// token bucket and the pool of connections.
//
// Why a connection of our own around cpp-httplib's: httplib's timeouts are per read, so a server
// that trickles one byte every few seconds holds a request forever, and `ClientImpl::stop()` waits
// on a mutex that the requesting thread holds during the TCP connect and the TLS handshake. A
// `Conn` keeps its own duplicate of the socket it is using (taken through httplib's socket-options
// hook, the one place that sees every new socket), so `Cancel()` from any thread is a
// `shutdown(2)` of that socket: whatever the request is blocked in (connect, handshake, headers,
// body) returns at once. The duplicate is ours until the request ends, so the number is never
// reused under us.
#ifndef GPUNODE_KUBE_TRANSPORT_H_
#define GPUNODE_KUBE_TRANSPORT_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include <openssl/evp.h>
#include <openssl/x509.h>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "httplib.h"
#include "src/base/status.h"
#include "src/kube/client.h"

namespace gpunode::kube::internal {

using SteadyClock = std::chrono::steady_clock;

// The cluster's CA certificates as a file only we can read, so that cpp-httplib loads exactly
// them: given a CA store instead of a file, its load_certs() also calls
// SSL_CTX_set_default_verify_paths(), which adds the system's CAs (and whatever SSL_CERT_FILE /
// SSL_CERT_DIR name) to the same store. First choice: a memfd read through /proc/self/fd/N
// (nothing on disk, works with a read-only root file system); else a temp file of mode 0600 in
// $TMPDIR or /tmp. Gone with the object.
class PrivateCaFile {
 public:
  enum class Kind { kAuto, kMemfd, kTempFile };
  // `pem` must hold at least one PEM certificate (checked: InvalidArgument otherwise).
  static StatusOr<std::unique_ptr<PrivateCaFile>> Create(const std::string& pem, const std::string& source,
                                                         Kind kind = Kind::kAuto);
  ~PrivateCaFile();
  PrivateCaFile(const PrivateCaFile&) = delete;
  PrivateCaFile& operator=(const PrivateCaFile&) = delete;

  const std::string& path() const { return path_; }
  bool memfd() const { return fd_ >= 0; }

 private:
  PrivateCaFile() = default;
  int fd_ = -1;          // the memfd
  std::string path_;     // /proc/self/fd/N or the temp file
  bool unlink_ = false;  // a temp file of ours
};

// What every connection of a client shares: where, and how TLS is set up.
struct Endpoint {
  Connection c;
  std::unique_ptr<PrivateCaFile> ca;  // null: the system's CAs (no CA given)
  X509* cert = nullptr;               // client certificate and key (owned here)
  EVP_PKEY* key = nullptr;
  Status init_error;
  ~Endpoint();
};
StatusOr<std::shared_ptr<Endpoint>> MakeEndpoint(const Connection& c);

// One HTTP(S) connection used by one call at a time, abortable from any thread.
class Conn {
 public:
  explicit Conn(std::shared_ptr<Endpoint> endpoint);
  ~Conn();
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;

  httplib::ClientImpl& http() { return *http_; }
  // The verification result of the last TLS handshake (X509_V_OK when none failed).
  long VerifyResult() const;

  // Before a request: clears an earlier cancel and takes our duplicate of the open socket (a
  // kept-alive one); a socket opened during the request is taken by the hook. Returns whether a
  // kept-alive socket was open.
  bool Arm();
  // After the request: drops the duplicate; closes the connection when it was cancelled.
  void Disarm();
  // Any thread: shuts the socket down; a socket opened later in this request is shut at once.
  void Cancel();
  bool cancelled() const;

  struct CancelState;

 private:
  std::shared_ptr<Endpoint> endpoint_;
  std::shared_ptr<CancelState> state_;
  std::unique_ptr<httplib::ClientImpl> http_;
  std::function<int()> open_fd_;  // the kept-alive socket, -1 when none
};

// A call's deadline and stop, and its current connection. The call's own stop token, the
// client's Stop() and the watchdog (deadline, a legacy std::atomic<bool> flag) all end here:
// `Stop(reason)` records why and cancels the connection in use.
class CallContext {
 public:
  enum class Why { kNone, kStopped, kDeadline };
  CallContext(SteadyClock::time_point deadline, std::stop_token call_stop, std::stop_token client_stop);
  ~CallContext();

  SteadyClock::time_point deadline() const { return deadline_; }
  std::chrono::milliseconds Remaining() const;
  bool stopped() const { return source_.stop_requested(); }
  Why why() const { return why_.load(); }
  // Ends the call: records the first reason and cancels the connection in use.
  void Stop(Why why);
  // Sleeps until `until` (bounded by the deadline); false when the call was stopped meanwhile.
  bool SleepUntil(SteadyClock::time_point until);
  std::stop_token token() const { return source_.get_token(); }

  // The connection the call is using (nullptr: none); a stop cancels it.
  void Use(Conn* conn);

 private:
  SteadyClock::time_point deadline_;
  std::stop_source source_;
  std::atomic<Why> why_{Why::kNone};
  absl::Mutex mu_;
  Conn* conn_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::optional<std::stop_callback<std::function<void()>>> on_call_stop_, on_client_stop_, on_stop_;
};

// One thread per client that stops calls at their deadline and polls legacy stop flags (every
// 50 ms, only while one is registered).
class Watchdog {
 public:
  Watchdog() = default;
  ~Watchdog();
  uint64_t Add(CallContext* call, const std::atomic<bool>* flag);
  // After Remove returns, the watchdog no longer touches `call`.
  void Remove(uint64_t id);

 private:
  void Loop();
  struct Entry {
    CallContext* call;
    const std::atomic<bool>* flag;
  };
  absl::Mutex mu_;
  std::condition_variable_any cv_;  // steady-clock waits on mu_ (src/base/held_mutex.h)
  std::map<uint64_t, Entry> entries_ ABSL_GUARDED_BY(mu_);
  uint64_t next_ ABSL_GUARDED_BY(mu_) = 1;
  bool quit_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_ ABSL_GUARDED_BY(mu_);
};

// The client-side rate limit: a token bucket of `burst` tokens refilled at `qps` per second.
class RateLimiter {
 public:
  RateLimiter(double qps, int burst);
  // Takes a token, sleeping as long as needed; DeadlineExceeded (naming the limit) when the wait
  // would end past the call's deadline, Cancelled when the call is stopped while waiting.
  Status Take(CallContext& call, const std::string& what);

 private:
  absl::Mutex mu_;
  const double qps_;
  const double burst_;
  double tokens_ ABSL_GUARDED_BY(mu_);
  SteadyClock::time_point last_ ABSL_GUARDED_BY(mu_);
};

// At most `max` connections, each lent to one call at a time; kept-alive ones are reused.
class Pool {
 public:
  Pool(std::shared_ptr<Endpoint> endpoint, int max);
  ~Pool();
  // Waits for a free connection (within the call's deadline).
  StatusOr<std::unique_ptr<Conn>> Acquire(CallContext& call, const std::string& what);
  // `reuse`: false drops the connection (a broken or cancelled one).
  void Release(std::unique_ptr<Conn> conn, bool reuse);

 private:
  std::shared_ptr<Endpoint> endpoint_;
  const int max_;
  absl::Mutex mu_;
  std::condition_variable_any cv_;  // steady-clock waits on mu_ (src/base/held_mutex.h)
  std::vector<std::unique_ptr<Conn>> idle_ ABSL_GUARDED_BY(mu_);
  int lent_ ABSL_GUARDED_BY(mu_) = 0;
};

// "GET /x: stopped" / "...: no complete answer within 10 s (the call's deadline)" for a call that
// ended early, else OK.
Status EndedEarly(const CallContext& call, const std::string& what, std::chrono::milliseconds timeout);

}  // namespace gpunode::kube::internal

#endif  // GPUNODE_KUBE_TRANSPORT_H_
