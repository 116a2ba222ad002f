// The Prometheus exporter-toolkit web configuration file (`--web-config-file`), the format
// dcgm-exporter and every Prometheus exporter read:
//   tls_server_config: {cert_file, key_file, client_auth_type, client_ca_file, min_version,
//                       max_version}
//   http_server_config: {http2, headers: {Name: value}}
//   basic_auth_users: {user: <bcrypt hash>}
// Unknown keys are errors (the toolkit parses strictly); settings gpunode does not implement
// (cipher_suites, curve_preferences, client_allowed_sans, inline cert/key, rate_limit) are errors
// naming the key rather than being ignored, so a security setting never silently does nothing.
#ifndef GPUNODE_EXPORTER_WEB_CONFIG_H_
#define GPUNODE_EXPORTER_WEB_CONFIG_H_

#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_set>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "src/base/status.h"

namespace gpunode::exporter {

struct WebConfig {
  struct Tls {
    std::string cert_file;
    std::string key_file;
    std::string client_ca_file;
    // NoClientCert | RequestClientCert | RequireAnyClientCert | VerifyClientCertIfGiven |
    // RequireAndVerifyClientCert (Go's names, as the toolkit).
    std::string client_auth_type = "NoClientCert";
    std::string min_version = "TLS12";  // TLS10 | TLS11 | TLS12 | TLS13
    std::string max_version = "TLS13";
  };
  std::optional<Tls> tls;
  std::map<std::string, std::string> basic_auth_users;  // user -> bcrypt hash ($2a$/$2b$/$2y$)
  std::map<std::string, std::string> headers;           // added to every response
};

// `source` names the file in errors. Paths in the file are taken relative to `base_dir` when not
// absolute (the toolkit resolves them against the config file's directory).
StatusOr<WebConfig> ParseWebConfig(std::string_view yaml, std::string_view source,
                                   std::string_view base_dir = "");
// Reads and parses the file; a missing or unreadable file is an error naming it. The TLS files it
// names must be readable too.
StatusOr<WebConfig> LoadWebConfig(const std::string& path);

// true when `password` matches the crypt(3) `hash` (bcrypt through libcrypt), compared in constant
// time over the full length. bcrypt reads a C string and only its first 72 bytes, so a password
// that contains NUL or is longer than 72 bytes is rejected before bcrypt ("s3cret\0garbage" must not
// pass for "s3cret").
bool CheckPassword(const std::string& password, const std::string& hash);
inline constexpr size_t kMaxPasswordBytes = 72;

// Limits of the bcrypt work a client can cause (basic auth).
struct AuthLimits {
  int threads = 2;                    // bcrypt workers (never the server's event loop)
  // The workers' nice value (Linux: per thread): bcrypt takes the CPU the server's event loop
  // leaves, so a flood of password checks cannot slow the answers to everyone else.
  int worker_nice = 10;
  size_t max_pending = 64;            // bcrypt checks queued or running, all clients together
  size_t max_pending_per_source = 2;  // ... per client address
  size_t negative_cache_entries = 4096;                  // recent wrong (user, password) pairs
  std::chrono::seconds negative_cache_ttl{600};
  // A check still queued this long after it was asked for is dropped (the request has timed out).
  std::chrono::milliseconds max_queue_wait{5000};
};

// HTTP basic authentication against basic_auth_users, built so that wrong passwords cannot starve
// right ones:
//  * bcrypt (tens of milliseconds by design) runs on a small pool of its own threads, never on
//    the caller's; at most `max_pending` checks wait or run, at most `max_pending_per_source` from
//    one client address, so a flood of distinct wrong passwords from one address cannot fill the
//    pool for everyone (beyond the limits: kBusy, at once);
//  * verdicts are remembered by a keyed hash (HMAC-SHA256 under a random per-process key) of
//    (user, password): a password that matched before is accepted with a constant-time compare of
//    that hash, a wrong pair seen in the last `negative_cache_ttl` is rejected without bcrypt;
//  * an unknown user costs the same bcrypt as a known one (no user enumeration by timing).
class BasicAuthenticator {
 public:
  enum class Verdict { kAllowed, kDenied, kBusy, kPending };
  // Called once with kAllowed, kDenied or kBusy, from a bcrypt worker thread.
  using Done = std::function<void(Verdict)>;

  explicit BasicAuthenticator(std::map<std::string, std::string> users, AuthLimits limits = {});
  // Stops the workers; checks still queued are dropped (their callbacks destroyed, not called).
  ~BasicAuthenticator();
  BasicAuthenticator(const BasicAuthenticator&) = delete;
  BasicAuthenticator& operator=(const BasicAuthenticator&) = delete;

  bool enabled() const { return !users_.empty(); }
  // `authorization` is the request's Authorization header ("Basic dXNlcjpwYXNz"); `source` the
  // client's address. Answers at once (kAllowed, kDenied, kBusy) when the header, the limits or a
  // remembered verdict decide; otherwise queues a bcrypt check, returns kPending and calls `done`.
  Verdict Check(std::string_view authorization, std::string_view source, Done done);
  // The same, waiting for the bcrypt check on the calling thread's behalf (tests, tools).
  bool Allow(std::string_view authorization, std::string_view source = "local");

  struct Stats {
    uint64_t bcrypt_runs = 0;     // checks that ran bcrypt
    uint64_t cached_allowed = 0;  // answered from a remembered right password
    uint64_t cached_denied = 0;   // answered from a remembered wrong pair
    uint64_t busy = 0;            // refused by the limits
    uint64_t dropped = 0;         // queued past max_queue_wait
  };
  Stats stats() const;

 private:
  using Digest = std::array<unsigned char, 32>;
  struct Job {
    std::string user;
    std::string password;
    std::string hash;
    Digest digest;
    std::string source;
    std::chrono::steady_clock::time_point queued;
    Done done;
  };
  Digest Key(std::string_view user, std::string_view password) const;
  void Work();
  void ForgetExpiredLocked(std::chrono::steady_clock::time_point now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::map<std::string, std::string> users_;
  const AuthLimits limits_;
  unsigned char key_[32];
  // The workers Await a job (or stopping_): a change made with mu_ held wakes them.
  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<Job> queue_ ABSL_GUARDED_BY(mu_);
  size_t pending_ ABSL_GUARDED_BY(mu_) = 0;                        // queued + running
  std::map<std::string, size_t> per_source_ ABSL_GUARDED_BY(mu_);  // pending by source
  // user -> keyed hash of the password that matched
  std::map<std::string, Digest> allowed_ ABSL_GUARDED_BY(mu_);
  std::unordered_set<std::string> denied_ ABSL_GUARDED_BY(mu_);  // keyed hashes of wrong pairs (as strings)
  std::deque<std::pair<std::string, std::chrono::steady_clock::time_point>> denied_order_ ABSL_GUARDED_BY(mu_);
  Stats stats_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> workers_;
};

}  // namespace gpunode::exporter

#endif  // GPUNODE_EXPORTER_WEB_CONFIG_H_
