// client-go's informer model, our own code: a Reflector lists a collection (from the watch cache,
// resourceVersion=0, page by page through Client::List) and then watches it from the list's
// resourceVersion, handing every object to a sink (a Store, store.h). A watch that ends is
// started again from the last resourceVersion seen (BOOKMARK events advance it without an object
// change); one the server answers 410 Gone/Expired (HTTP 410 or an ERROR event with code 410) is
// followed by a new list. Failures pause with jittered exponential backoff (0.8 s .. 30 s, as
// client-go), on the Clock. Run() returns only when stopped.
//
// What an object may cost is bounded by the client (ClientOptions::max_body_bytes per page,
// max_watch_line_bytes per event); what the sink keeps is the caller's projection, not the JSON.
#ifndef GPUNODE_KUBE_REFLECTOR_H_
#define GPUNODE_KUBE_REFLECTOR_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <stop_token>
#include <string>

#include "nlohmann/json.hpp"
#include "src/base/status.h"
#include "src/kube/client.h"
#include "src/kube/clock.h"

namespace gpunode::kube {

// Where a Reflector delivers, on its own thread, in order.
class ReflectorSink {
 public:
  virtual ~ReflectorSink() = default;
  // A list begins: the objects that follow (ReplaceItem), once EndReplace(true) comes, are the
  // whole collection. EndReplace(false): the list failed; forget what it delivered.
  virtual void BeginReplace() = 0;
  virtual void ReplaceItem(const nlohmann::json& object) = 0;
  virtual void EndReplace(bool complete, const std::string& resource_version) = 0;
  // A watch event: "ADDED", "MODIFIED" or "DELETED".
  virtual void Apply(const std::string& type, const nlohmann::json& object) = 0;
};

// "namespace/name", or "name" for a cluster-scoped object; InvalidArgument naming the field when
// the metadata is malformed or has no name.
StatusOr<std::string> ObjectKey(const nlohmann::json& object);

struct ReflectorOptions {
  std::string path;                          // the collection: "/api/v1/nodes" (may carry ?labelSelector=...)
  int page_size = 500;                       // ListOptions::limit
  std::string list_resource_version = "0";   // "0": the watch cache; "": a consistent read
  int watch_timeout_seconds = 300;           // each watch asks for a timeout drawn from [t, 2t)
  bool bookmarks = true;                     // allowWatchBookmarks: the server advances our RV while idle
  std::chrono::milliseconds backoff{800};    // after a failure: [b, 2b), b doubling up to max_backoff
  std::chrono::milliseconds max_backoff{30000};
  Clock* clock = nullptr;                    // nullptr: SystemClock()
  std::function<void(const std::string&)> log;  // relists, failures
};

class Reflector {
 public:
  struct Stats {
    int lists = 0;          // lists completed
    int list_failures = 0;
    int watches = 0;        // watch requests made
    int expired = 0;        // 410s that made us list again
    int events = 0;         // watch events delivered (bookmarks not counted)
    int bookmarks = 0;
  };

  Reflector(Client& client, ReflectorSink& sink, ReflectorOptions options);
  // Lists and watches until `stop`; returns OK then.
  Status Run(std::stop_token stop);
  Stats stats() const;
  // The last resourceVersion seen (a list's, an event's or a bookmark's).
  std::string resource_version() const;

 private:
  // Lists; true when the sink has the whole collection.
  bool List(std::stop_token stop);
  // Watches from rv_ until the watch ends; returns its status.
  Status WatchOnce(std::stop_token stop, bool* progressed);
  // Sleeps the next backoff; false when stopped meanwhile.
  bool Pause(std::stop_token stop, std::chrono::milliseconds d);
  std::chrono::milliseconds NextBackoff();
  void Log(const std::string& m) const;

  Client& client_;
  ReflectorSink& sink_;
  ReflectorOptions o_;
  Clock& clock_;
  std::chrono::milliseconds backoff_;
  bool consistent_list_ = false;  // a continue token expired: the next list reads from etcd
  mutable std::mutex mu_;
  std::string rv_;
  Stats stats_;
  uint64_t rng_state_;
};

}  // namespace gpunode::kube

#endif  // GPUNODE_KUBE_REFLECTOR_H_
