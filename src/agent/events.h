// Node Events sent from a thread of their own (kube::CreateNodeEvent), so that a slow or hung API
// server never holds the caller: the agent's signal loop posts one for every reload of its config
// and must still answer SIGTERM at once. At most 16 wait; more are dropped (logged).
#ifndef GPUNODE_AGENT_EVENTS_H_
#define GPUNODE_AGENT_EVENTS_H_

#include <chrono>
#include <condition_variable>
#include <deque>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "src/kube/client.h"
#include "src/lifecycle/log.h"

namespace gpunode::agent {

using lifecycle::Log;

class EventPoster {
 public:
  // `timeout` bounds each request (a client of its own).
  EventPoster(kube::Connection conn, std::string node, Log& log,
              std::chrono::milliseconds timeout = std::chrono::seconds(3));
  // Waits for the request in flight (bounded by the timeout); what is still queued is dropped (call
  // Idle first to give it a chance).
  ~EventPoster();
  EventPoster(const EventPoster&) = delete;
  EventPoster& operator=(const EventPoster&) = delete;

  // type: "Normal" or "Warning"; reason: CamelCase.
  void Post(const std::string& type, const std::string& reason, const std::string& message);
  // Waits until the queue is empty and no request is in flight, or `timeout` (steady clock).
  bool Idle(std::chrono::milliseconds timeout);

 private:
  struct Event {
    std::string type, reason, message;
  };
  void Loop();

  kube::Connection conn_;
  std::string node_;
  Log& log_;
  std::chrono::milliseconds timeout_;
  absl::Mutex mu_;
  std::condition_variable_any changed_;  // with HeldMutex (src/base/held_mutex.h)
  std::deque<Event> queue_ ABSL_GUARDED_BY(mu_);
  bool busy_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace gpunode::agent

#endif  // GPUNODE_AGENT_EVENTS_H_
