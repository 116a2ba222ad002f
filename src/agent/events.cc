#include "src/agent/events.h"

#include <pthread.h>

#include "absl/strings/str_cat.h"
#include "src/base/held_mutex.h"
#include "src/kube/node.h"

namespace gpunode::agent {

EventPoster::EventPoster(kube::Connection conn, std::string node, Log& log, std::chrono::milliseconds timeout)
    : conn_(std::move(conn)), node_(std::move(node)), log_(log), timeout_(timeout) {
  thread_ = std::thread([this] { Loop(); });
}

EventPoster::~EventPoster() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    changed_.notify_all();
  }
  thread_.join();
}

void EventPoster::Post(const std::string& type, const std::string& reason, const std::string& message) {
  absl::MutexLock lock(&mu_);
  if (queue_.size() >= 16) {
    log_.Warn("agent", absl::StrCat("Event ", reason, " dropped: 16 are waiting for the API server"));
    return;
  }
  queue_.push_back({type, reason, message});
  changed_.notify_all();
}

bool EventPoster::Idle(std::chrono::milliseconds timeout) {
  absl::MutexLock lock(&mu_);
  HeldMutex held(mu_);
  return changed_.wait_for(held, timeout, [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return queue_.empty() && !busy_; });
}

void EventPoster::Loop() {
  ::pthread_setname_np(::pthread_self(), "gn:events");
  kube::Client client(conn_);
  client.set_timeout(timeout_);
  while (true) {
    Event e;
    {
      absl::MutexLock lock(&mu_);
      HeldMutex held(mu_);
      changed_.wait(held, [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return stop_ || !queue_.empty(); });
      if (stop_) return;  // what is left is dropped: the process is stopping
      e = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
    }
    Status st = kube::CreateNodeEvent(client, node_, e.type, e.reason, e.message);
    if (!st.ok()) log_.Warn("agent", absl::StrCat("Event ", e.reason, " not created: ", st.message()));
    absl::MutexLock lock(&mu_);
    busy_ = false;
    changed_.notify_all();
  }
}

}  // namespace gpunode::agent
