#include "src/kube/leader_election.h"

#include <condition_variable>
#include <ctime>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "src/base/terminal.h"
#include "src/kube/json_fields.h"

namespace gpunode::kube {
namespace {

// A MicroTime: "2026-12-01T13:00:00.123456Z" (wall clock: for people and other clients; expiry
// is judged on the local monotonic clock).
std::string NowMicroTime() {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  std::tm tm{};
  gmtime_r(&ts.tv_sec, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  return absl::StrFormat("%s.%06dZ", buf, static_cast<int>(ts.tv_nsec / 1000));
}

struct LeaseRecord {
  std::string holder;
  int64_t duration_seconds = 0;
  std::string acquire_time;
  int64_t transitions = 0;
  std::string resource_version;
  nlohmann::json spec;
};

StatusOr<LeaseRecord> ReadLease(const nlohmann::json& lease, const std::string& what) {
  GPUNODE_ASSIGN_OR_RETURN(Fields root, Fields::Root(lease, what));
  GPUNODE_ASSIGN_OR_RETURN(Fields meta, root.Object("metadata"));
  GPUNODE_ASSIGN_OR_RETURN(Fields spec, root.Object("spec"));
  LeaseRecord r;
  GPUNODE_ASSIGN_OR_RETURN(r.resource_version, meta.String("resourceVersion"));
  GPUNODE_ASSIGN_OR_RETURN(r.holder, spec.String("holderIdentity"));
  GPUNODE_ASSIGN_OR_RETURN(auto d, spec.Int("leaseDurationSeconds"));
  GPUNODE_ASSIGN_OR_RETURN(auto t, spec.Int("leaseTransitions"));
  GPUNODE_ASSIGN_OR_RETURN(r.acquire_time, spec.String("acquireTime"));
  r.duration_seconds = d.value_or(0);
  r.transitions = t.value_or(0);
  r.spec = spec.present() ? spec.json() : nlohmann::json::object();
  return r;
}

}  // namespace

Status ValidateLeaderElection(const LeaderElectionConfig& c) {
  if (c.ns.empty() || c.name.empty()) return absl::InvalidArgumentError("leader election: the Lease needs a namespace and a name");
  if (c.identity.empty()) return absl::InvalidArgumentError("leader election: the candidate needs an identity");
  if (c.retry_period.count() <= 0) return absl::InvalidArgumentError("leader election: retry_period must be > 0");
  if (!(c.lease_duration > c.renew_deadline)) {
    return absl::InvalidArgumentError(absl::StrCat("leader election: lease_duration (", c.lease_duration.count(),
                                                   " ms) must be greater than renew_deadline (", c.renew_deadline.count(),
                                                   " ms)"));
  }
  if (!(static_cast<double>(c.renew_deadline.count()) > LeaderElector::kJitterFactor * c.retry_period.count())) {
    return absl::InvalidArgumentError(absl::StrCat("leader election: renew_deadline (", c.renew_deadline.count(),
                                                   " ms) must be greater than 1.2 x retry_period (",
                                                   c.retry_period.count(), " ms)"));
  }
  if (c.lease_duration < std::chrono::seconds(1)) {
    return absl::InvalidArgumentError("leader election: lease_duration must be at least 1 s (the Lease counts seconds)");
  }
  return absl::OkStatus();
}

StatusOr<std::unique_ptr<LeaderElector>> LeaderElector::Create(Client& client, LeaderElectionConfig config) {
  GPUNODE_RETURN_IF_ERROR(ValidateLeaderElection(config));
  return std::unique_ptr<LeaderElector>(new LeaderElector(client, std::move(config)));
}

LeaderElector::LeaderElector(Client& client, LeaderElectionConfig config)
    : client_(client), c_(std::move(config)), clock_(c_.clock != nullptr ? *c_.clock : SystemClock()),
      rng_state_(std::random_device{}()) {}

std::string LeaderElector::CollectionPath() const {
  return absl::StrCat("/apis/coordination.k8s.io/v1/namespaces/", UrlEscape(c_.ns), "/leases");
}
std::string LeaderElector::LeasePath() const { return absl::StrCat(CollectionPath(), "/", UrlEscape(c_.name)); }

void LeaderElector::Log(const std::string& m) const {
  if (c_.log) c_.log(m);
}

bool LeaderElector::IsLeader() const {
  std::lock_guard<std::mutex> l(mu_);
  return leader_;
}

std::string LeaderElector::Leader() const {
  std::lock_guard<std::mutex> l(mu_);
  return holder_;
}

void LeaderElector::Observe(const nlohmann::json& spec) {
  std::string holder;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (spec != observed_spec_) {
      observed_spec_ = spec;
      observed_time_ = clock_.Now();
    }
    const std::string now = spec.contains("holderIdentity") && spec["holderIdentity"].is_string()
                                ? spec["holderIdentity"].get<std::string>()
                                : "";
    if (now == holder_) return;
    holder_ = holder = now;
  }
  if (c_.on_new_leader) c_.on_new_leader(holder);
}

bool LeaderElector::TryAcquireOrRenew() {
  const std::string what = absl::StrCat("Lease ", c_.ns, "/", c_.name);
  CallOptions call;
  call.timeout = c_.renew_deadline;
  const int64_t duration = std::chrono::duration_cast<std::chrono::seconds>(c_.lease_duration).count();
  auto got = client_.Get(LeasePath(), call);
  if (!got.ok() && absl::IsNotFound(got.status())) {
    const std::string now = NowMicroTime();
    nlohmann::json spec = {{"holderIdentity", c_.identity}, {"leaseDurationSeconds", duration},
                           {"acquireTime", now}, {"renewTime", now}, {"leaseTransitions", 0}};
    nlohmann::json lease = {{"apiVersion", "coordination.k8s.io/v1"}, {"kind", "Lease"},
                            {"metadata", {{"name", c_.name}, {"namespace", c_.ns}}}, {"spec", spec}};
    auto made = client_.Post(CollectionPath(), lease, call);
    if (!made.ok()) {
      Log(absl::StrCat("create ", what, ": ", made.status().message()));
      return false;
    }
    Observe(spec);
    std::lock_guard<std::mutex> l(mu_);
    leader_ = true;
    return true;
  }
  if (!got.ok()) {
    Log(absl::StrCat("read ", what, ": ", got.status().message()));
    return false;
  }
  auto record = ReadLease(*got, what);
  if (!record.ok()) {
    Log(std::string(record.status().message()));
    return false;
  }
  Observe(record->spec);
  {
    std::lock_guard<std::mutex> l(mu_);
    const auto expires = observed_time_ + std::chrono::seconds(record->duration_seconds);
    if (!record->holder.empty() && record->holder != c_.identity && expires > clock_.Now()) {
      leader_ = false;
      return false;  // another holds it and has renewed within its lease, as seen from here
    }
  }
  const bool mine = record->holder == c_.identity;
  const std::string now = NowMicroTime();
  nlohmann::json spec = {{"holderIdentity", c_.identity},
                         {"leaseDurationSeconds", duration},
                         {"acquireTime", mine && !record->acquire_time.empty() ? record->acquire_time : now},
                         {"renewTime", now},
                         {"leaseTransitions", mine ? record->transitions : record->transitions + 1}};
  nlohmann::json lease = *got;
  lease["spec"] = spec;  // the read resourceVersion stays: a write in between is 409 Conflict
  auto put = client_.Put(LeasePath(), lease, call);
  if (!put.ok()) {
    Log(absl::StrCat(mine ? "renew " : "acquire ", what, ": ", put.status().message()));
    return false;
  }
  Observe(spec);
  std::lock_guard<std::mutex> l(mu_);
  leader_ = true;
  return true;
}

bool LeaderElector::Sleep(std::stop_token stop, std::chrono::milliseconds d) {
  return clock_.WaitFor(d, std::move(stop));
}

void LeaderElector::Release() {
  const std::string what = absl::StrCat("Lease ", c_.ns, "/", c_.name);
  CallOptions call;
  call.timeout = c_.renew_deadline;
  auto got = client_.Get(LeasePath(), call);
  if (!got.ok()) return Log(absl::StrCat("release ", what, ": ", got.status().message()));
  auto record = ReadLease(*got, what);
  if (!record.ok() || record->holder != c_.identity) return;
  const std::string now = NowMicroTime();
  nlohmann::json lease = *got;
  lease["spec"] = {{"holderIdentity", ""},   {"leaseDurationSeconds", 1}, {"acquireTime", now},
                   {"renewTime", now},       {"leaseTransitions", record->transitions}};
  auto put = client_.Put(LeasePath(), lease, call);
  if (!put.ok()) return Log(absl::StrCat("release ", what, ": ", put.status().message()));
  Observe(lease["spec"]);
}

void LeaderElector::Run(std::stop_token stop) {
  // Acquire: try, then every retry_period with jitter [p, 2.2p).
  while (!TryAcquireOrRenew()) {
    std::mt19937_64 rng(rng_state_++);
    const double f = std::uniform_real_distribution<double>(0, kJitterFactor)(rng);
    const auto wait = c_.retry_period + std::chrono::milliseconds(static_cast<int64_t>(f * c_.retry_period.count()));
    if (!Sleep(stop, wait)) return;
  }
  Log(absl::StrCat(c_.identity, " leads Lease ", c_.ns, "/", c_.name));
  std::stop_source leading;
  std::thread work;
  if (c_.on_started_leading) work = std::thread([this, t = leading.get_token()] { c_.on_started_leading(t); });
  // Renew every retry_period; leading ends when no renewal succeeded for renew_deadline.
  Clock::TimePoint last_renew = clock_.Now();
  while (Sleep(stop, c_.retry_period)) {
    if (TryAcquireOrRenew()) {
      last_renew = clock_.Now();
      continue;
    }
    if (clock_.Now() - last_renew >= c_.renew_deadline) {
      Log(absl::StrCat(c_.identity, ": no renewal of Lease ", c_.ns, "/", c_.name, " for ",
                       c_.renew_deadline.count(), " ms: leading ends"));
      break;
    }
  }
  {
    std::lock_guard<std::mutex> l(mu_);
    leader_ = false;
  }
  leading.request_stop();
  if (work.joinable()) work.join();
  if (stop.stop_requested() && c_.release_on_stop) Release();
  if (c_.on_stopped_leading) c_.on_stopped_leading();
}

}  // namespace gpunode::kube
