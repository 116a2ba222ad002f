// Lease-based leader election on coordination.k8s.io/v1 Leases, with client-go's rules (our own
// code): a candidate takes the Lease when it has none, when it holds it already, or when the
// holder has not renewed it within leaseDurationSeconds *as observed here* (the local monotonic
// time at which this candidate last saw the Lease's record change, so clocks of different machines
// never compare); it retries every retry_period with jitter (x 1.2) while another leads; the
// leader renews every retry_period and gives up when no renewal succeeded for renew_deadline.
// Writes carry the read resourceVersion: of two candidates writing at once one gets 409 Conflict
// and tries again later. leaseTransitions counts changes of holder; a stopped leader releases the
// Lease (holder "", leaseDurationSeconds 1) so another takes over at once.
//
// Timing rule (checked): lease_duration > renew_deadline > 1.2 * retry_period > 0. A leader that
// cannot renew stops leading (renew_deadline) before another may take over (lease_duration).
#ifndef GPUNODE_KUBE_LEADER_ELECTION_H_
#define GPUNODE_KUBE_LEADER_ELECTION_H_

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>

#include "nlohmann/json.hpp"
#include "src/base/status.h"
#include "src/kube/client.h"
#include "src/kube/clock.h"

namespace gpunode::kube {

struct LeaderElectionConfig {
  std::string ns;        // the Lease's namespace
  std::string name;      // and name
  std::string identity;  // this candidate (pod name, host name + uid)
  std::chrono::milliseconds lease_duration{15000};
  std::chrono::milliseconds renew_deadline{10000};
  std::chrono::milliseconds retry_period{2000};
  bool release_on_stop = true;
  // Called on a thread of its own when this candidate starts leading; its stop token is
  // requested when leading ends (lost or stopped). Run waits for it to return.
  std::function<void(std::stop_token)> on_started_leading;
  // After leading ended (and on_started_leading returned).
  std::function<void()> on_stopped_leading;
  // Whenever the observed holder changes (also to this candidate).
  std::function<void(const std::string& identity)> on_new_leader;
  Clock* clock = nullptr;  // nullptr: SystemClock()
  std::function<void(const std::string&)> log;
};

// The timing rule and the names; InvalidArgument saying which rule is broken.
Status ValidateLeaderElection(const LeaderElectionConfig& config);

class LeaderElector {
 public:
  static constexpr double kJitterFactor = 1.2;

  static StatusOr<std::unique_ptr<LeaderElector>> Create(Client& client, LeaderElectionConfig config);

  // Tries to acquire until it does or `stop`; then leads, renewing, until renewing fails for
  // renew_deadline or `stop` (then releases). Returns when leading ended (on_stopped_leading has
  // run) or, never having led, when stopped. Run again to stand again.
  void Run(std::stop_token stop);

  bool IsLeader() const;
  // The holder last observed ("" when none).
  std::string Leader() const;
  // One attempt (what Run does each retry period); true when this candidate holds the Lease after it.
  bool TryAcquireOrRenew();

 private:
  LeaderElector(Client& client, LeaderElectionConfig config);
  std::string LeasePath() const;
  std::string CollectionPath() const;
  // Sleeps `d` on the clock; false when stopped.
  bool Sleep(std::stop_token stop, std::chrono::milliseconds d);
  void Observe(const nlohmann::json& spec);
  void Release();
  void Log(const std::string& m) const;

  Client& client_;
  LeaderElectionConfig c_;
  Clock& clock_;
  mutable std::mutex mu_;
  nlohmann::json observed_spec_;      // the Lease's spec as last seen
  Clock::TimePoint observed_time_{};  // when it was last seen to change (local clock)
  bool leader_ = false;
  std::string holder_;
  uint64_t rng_state_;
};

}  // namespace gpunode::kube

#endif  // GPUNODE_KUBE_LEADER_ELECTION_H_
