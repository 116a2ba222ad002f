// What client.cc and watch.cc share (internal to src/kube): the client's state and the mapping
// of the API server's answers to Status.
#ifndef GPUNODE_KUBE_CLIENT_INTERNAL_H_
#define GPUNODE_KUBE_CLIENT_INTERNAL_H_

#include <sys/stat.h>

#include <memory>
#include <mutex>
#include <stop_token>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "httplib.h"
#include "src/base/status.h"
#include "src/kube/client.h"
#include "src/kube/transport.h"

namespace gpunode::kube {

struct Client::Impl {
  std::shared_ptr<internal::Endpoint> endpoint;
  Status init_error;
  std::unique_ptr<internal::RateLimiter> limiter;
  std::unique_ptr<internal::Pool> pool;
  internal::Watchdog watchdog;
  std::stop_source stop;  // Client::Stop()
  absl::Mutex token_mu;
  std::string token_cache ABSL_GUARDED_BY(token_mu);
  struct timespec token_mtime ABSL_GUARDED_BY(token_mu) {};

  static httplib::Headers BaseHeaders(Client& client);
  // "https://host:port" for messages.
  std::string Server() const;
};

// `status` with the API server's code, reason and Retry-After as its payload (ApiErrorOf).
Status WithApiError(Status status, const ApiError& e);

namespace internal {

// A call registered with the watchdog for as long as it lives.
class WatchdogEntry {
 public:
  WatchdogEntry(Watchdog& w, CallContext* call, const std::atomic<bool>* flag) : w_(w), id_(w.Add(call, flag)) {}
  ~WatchdogEntry() { w_.Remove(id_); }
  WatchdogEntry(const WatchdogEntry&) = delete;
  WatchdogEntry& operator=(const WatchdogEntry&) = delete;

 private:
  Watchdog& w_;
  uint64_t id_;
};

// "64 MiB", "16 KiB", "1000 bytes".
std::string Bytes(size_t n);

// The API server's Status answer: Retry-After (header, else details.retryAfterSeconds), reason,
// and the message (made terminal-safe, at most 2000 bytes; the body's start when it has none).
ApiError ReadApiError(int http_code, const httplib::Headers& headers, const std::string& body, std::string* message);
// "<what>: HTTP <code>: <message>" with the Status code of the HTTP code and the ApiError payload.
// `watch`: 410 is Aborted ("list again"), as a watch's ERROR event with code 410.
Status ErrorFromAnswer(const std::string& what, int http_code, const httplib::Headers& headers,
                       const std::string& body, const std::string& source, bool watch);
// No HTTP answer: connection refused, TLS verification (naming the CA's source), timeouts.
Status TransportError(const std::string& what, const std::string& server, httplib::Error error, long verify_result,
                      const std::string& source);

}  // namespace internal
}  // namespace gpunode::kube

#endif  // GPUNODE_KUBE_CLIENT_INTERNAL_H_
