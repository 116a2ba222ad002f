#include "src/kube/reflector.h"

#include <algorithm>
#include <condition_variable>
#include <random>

#include "absl/strings/str_cat.h"
#include "src/kube/json_fields.h"

namespace gpunode::kube {
namespace {

// resourceVersion of an object (event or item); "" when absent.
StatusOr<std::string> VersionOf(const nlohmann::json& object, const std::string& what) {
  GPUNODE_ASSIGN_OR_RETURN(Fields root, Fields::Root(object, what));
  GPUNODE_ASSIGN_OR_RETURN(Fields meta, root.Object("metadata"));
  return meta.String("resourceVersion");
}

}  // namespace

StatusOr<std::string> ObjectKey(const nlohmann::json& object) {
  GPUNODE_ASSIGN_OR_RETURN(Fields root, Fields::Root(object, "object"));
  GPUNODE_ASSIGN_OR_RETURN(Fields meta, root.Object("metadata"));
  GPUNODE_ASSIGN_OR_RETURN(std::string name, meta.String("name"));
  GPUNODE_ASSIGN_OR_RETURN(std::string ns, meta.String("namespace"));
  if (name.empty()) return meta.Error("an object without a name");
  return ns.empty() ? name : absl::StrCat(ns, "/", name);
}

Reflector::Reflector(Client& client, ReflectorSink& sink, ReflectorOptions options)
    : client_(client), sink_(sink), o_(std::move(options)),
      clock_(o_.clock != nullptr ? *o_.clock : SystemClock()),
      backoff_(std::max(o_.backoff, std::chrono::milliseconds(1))), rng_state_(std::random_device{}()) {}

Reflector::Stats Reflector::stats() const {
  std::lock_guard<std::mutex> l(mu_);
  return stats_;
}

std::string Reflector::resource_version() const {
  std::lock_guard<std::mutex> l(mu_);
  return rv_;
}

void Reflector::Log(const std::string& m) const {
  if (o_.log) o_.log(m);
}

std::chrono::milliseconds Reflector::NextBackoff() {
  const auto b = backoff_;
  backoff_ = std::min(backoff_ * 2, std::max(o_.max_backoff, o_.backoff));
  std::mt19937_64 rng(rng_state_++);
  return std::chrono::milliseconds(std::uniform_int_distribution<int64_t>(b.count(), 2 * b.count() - 1)(rng));
}

bool Reflector::Pause(std::stop_token stop, std::chrono::milliseconds d) {
  return clock_.WaitFor(d, std::move(stop));
}

bool Reflector::List(std::stop_token stop) {
  ListOptions lo;
  lo.limit = o_.page_size;
  lo.resource_version = consistent_list_ ? "" : o_.list_resource_version;
  lo.call.stop = stop;
  sink_.BeginReplace();
  auto listed = client_.List(o_.path, lo, [&](nlohmann::json& item) -> Status {
    sink_.ReplaceItem(item);
    return absl::OkStatus();
  });
  if (!listed.ok()) {
    sink_.EndReplace(false, "");
    if (stop.stop_requested()) return false;
    auto api = ApiErrorOf(listed.status());
    // A continue token that expired (410): the snapshot is gone; read from etcd next time.
    consistent_list_ = api && api->http_code == 410;
    std::lock_guard<std::mutex> l(mu_);
    ++stats_.list_failures;
    Log(absl::StrCat("list ", o_.path, ": ", listed.status().message()));
    return false;
  }
  consistent_list_ = false;
  sink_.EndReplace(true, listed->resource_version);
  std::lock_guard<std::mutex> l(mu_);
  rv_ = listed->resource_version;
  ++stats_.lists;
  return true;
}

Status Reflector::WatchOnce(std::stop_token stop, bool* progressed) {
  Client::WatchOptions wo;
  {
    std::lock_guard<std::mutex> l(mu_);
    wo.resource_version = rv_;
    ++stats_.watches;
  }
  std::mt19937_64 rng(rng_state_++);
  const int t = std::max(1, o_.watch_timeout_seconds);
  wo.timeout_seconds = t > 1 ? std::uniform_int_distribution<int>(t, 2 * t - 1)(rng) : 1;
  wo.bookmarks = o_.bookmarks;
  wo.stop = stop;
  Status bad_event;
  Status st = client_.Watch(o_.path, wo, [&](const std::string& type, const nlohmann::json& object) {
    auto v = VersionOf(object, absl::StrCat("WATCH ", o_.path, " (", type, " event)"));
    if (!v.ok()) {
      bad_event = absl::UnavailableError(v.status().message());
      return false;
    }
    if (type == "BOOKMARK") {
      std::lock_guard<std::mutex> l(mu_);
      if (!v->empty()) rv_ = *v;
      ++stats_.bookmarks;
      return true;
    }
    if (type != "ADDED" && type != "MODIFIED" && type != "DELETED") return true;  // unknown: skipped
    sink_.Apply(type, object);
    *progressed = true;
    std::lock_guard<std::mutex> l(mu_);
    if (!v->empty()) rv_ = *v;
    ++stats_.events;
    return true;
  });
  return bad_event.ok() ? st : bad_event;
}

Status Reflector::Run(std::stop_token stop) {
  bool need_list = true;
  while (!stop.stop_requested()) {
    if (need_list) {
      if (!List(stop)) {
        if (!Pause(stop, NextBackoff())) break;
        continue;
      }
      need_list = false;
      backoff_ = std::max(o_.backoff, std::chrono::milliseconds(1));
    }
    bool progressed = false;
    const Clock::TimePoint started = clock_.Now();
    const auto real_start = std::chrono::steady_clock::now();
    Status st = WatchOnce(stop, &progressed);
    if (stop.stop_requested()) break;
    auto api = ApiErrorOf(st);
    if (absl::IsAborted(st) || (api && api->http_code == 410)) {  // 410 Gone/Expired: list again
      std::lock_guard<std::mutex> l(mu_);
      ++stats_.expired;
      need_list = true;
      Log(absl::StrCat(st.message(), ": listing ", o_.path, " again"));
      continue;
    }
    if (progressed) backoff_ = std::max(o_.backoff, std::chrono::milliseconds(1));
    // A watch that lasted (the server's timeout): watch again at once. One that ended within a
    // second, or failed: pause first, so a server that ends every watch is not asked in a loop.
    const bool short_lived = std::chrono::steady_clock::now() - real_start < std::chrono::seconds(1) &&
                             clock_.Now() - started < std::chrono::seconds(1);
    if (st.ok() && !short_lived) continue;
    if (!st.ok()) Log(absl::StrCat(st.message(), "; watching again"));
    if (!Pause(stop, NextBackoff())) break;
  }
  return absl::OkStatus();
}

}  // namespace gpunode::kube
