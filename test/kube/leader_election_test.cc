// Lease-based leader election against the API server stand-in: the timing rules, acquire only
// when the holder's lease expired as observed here (a FakeClock), leaseTransitions, 409 on a
// simultaneous write, release on stop, callbacks.
#include "src/kube/leader_election.h"

#include <atomic>
#include <thread>

#include "gtest/gtest.h"
#include "test/testing/fake_api_server.h"
#include "test/testing/status_matchers.h"

namespace gpunode::kube {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::FakeApiServer;

constexpr char kLease[] = "/apis/coordination.k8s.io/v1/namespaces/ns/leases/ctl";

LeaderElectionConfig Config(const std::string& id, Clock* clock = nullptr) {
  LeaderElectionConfig c;
  c.ns = "ns";
  c.name = "ctl";
  c.identity = id;
  c.clock = clock;
  return c;
}

TEST(LeaderElection, TimingRulesAreChecked) {
  EXPECT_OK(ValidateLeaderElection(Config("a")));
  auto c = Config("a");
  c.renew_deadline = seconds(15);
  EXPECT_NE(ValidateLeaderElection(c).message().find("lease_duration (15000 ms) must be greater than renew_deadline"),
            std::string::npos);
  c = Config("a");
  c.retry_period = seconds(9);
  EXPECT_NE(ValidateLeaderElection(c).message().find("must be greater than 1.2 x retry_period"), std::string::npos);
  c = Config("");
  EXPECT_FALSE(ValidateLeaderElection(c).ok());
}

class LeaderElectionTest : public ::testing::Test {
 protected:
  LeaderElectionTest() {
    EXPECT_OK(ParseServer(api_.url(), &conn_));
    ClientOptions o;
    o.qps = 0;
    a_client_ = std::make_unique<Client>(conn_, o);
    b_client_ = std::make_unique<Client>(conn_, o);
  }
  nlohmann::json Spec() { return api_.Object(kLease)["spec"]; }

  FakeApiServer api_;
  Connection conn_;
  std::unique_ptr<Client> a_client_, b_client_;
  FakeClock clock_;
};

TEST_F(LeaderElectionTest, OneHoldsTheLeaseAndAnotherTakesItOnlyAfterItExpiredAsObservedHere) {
  auto a = LeaderElector::Create(*a_client_, Config("a", &clock_));
  auto b = LeaderElector::Create(*b_client_, Config("b", &clock_));
  ASSERT_OK(a);
  ASSERT_OK(b);
  EXPECT_TRUE((*a)->TryAcquireOrRenew()) << "no Lease: a creates it";
  EXPECT_EQ(Spec()["holderIdentity"], "a");
  EXPECT_EQ(Spec()["leaseTransitions"], 0);
  EXPECT_EQ(Spec()["leaseDurationSeconds"], 15);
  EXPECT_FALSE((*b)->TryAcquireOrRenew()) << "a's lease is fresh";
  EXPECT_EQ((*b)->Leader(), "a");
  clock_.Advance(seconds(10));
  EXPECT_TRUE((*a)->TryAcquireOrRenew()) << "a renews";
  clock_.Advance(seconds(10));
  EXPECT_FALSE((*b)->TryAcquireOrRenew()) << "b saw the renewal 10 s ago (its own clock), not 20";
  clock_.Advance(seconds(16));  // a stopped renewing: 16 s > 15 s since b last saw a change
  EXPECT_TRUE((*b)->TryAcquireOrRenew());
  EXPECT_EQ(Spec()["holderIdentity"], "b");
  EXPECT_EQ(Spec()["leaseTransitions"], 1);
  EXPECT_FALSE((*a)->TryAcquireOrRenew()) << "a sees b's fresh lease";
  EXPECT_FALSE((*a)->IsLeader());
  EXPECT_TRUE((*b)->IsLeader());
}

TEST_F(LeaderElectionTest, ASimultaneousWriteIs409AndThatAttemptFails) {
  auto a = LeaderElector::Create(*a_client_, Config("a", &clock_));
  ASSERT_OK(a);
  ASSERT_TRUE((*a)->TryAcquireOrRenew());
  api_.On("PUT", kLease, {FakeApiServer::ApiStatus(409, "Conflict", "the object has been modified"), nullptr});
  EXPECT_FALSE((*a)->TryAcquireOrRenew());
  EXPECT_TRUE((*a)->TryAcquireOrRenew()) << "the next attempt reads the Lease again";
  // A stale resourceVersion is refused by the store itself, too.
  nlohmann::json stale = api_.Object(kLease);
  api_.Change(kLease, [](nlohmann::json& l) { l["spec"]["renewTime"] = "2026-12-01T13:00:00.000000Z"; });
  Connection c = conn_;
  Client raw(c);
  auto put = raw.Put(kLease, stale);
  ASSERT_FALSE(put.ok());
  EXPECT_EQ(ReasonOf(put.status()), "Conflict");
}

TEST_F(LeaderElectionTest, RunLeadsUntilStoppedThenReleasesAndTheOtherTakesOverAtOnce) {
  auto config = [&](const std::string& id, std::atomic<int>* started, std::atomic<int>* stopped) {
    LeaderElectionConfig c = Config(id);
    // A lease long enough that a loaded 2-core ASan run never loses it by a late renewal (CI failed
    // once with 2 s / 1 s): what is tested is that a release hands over well before it expires.
    c.lease_duration = seconds(8);
    c.renew_deadline = milliseconds(5000);
    c.retry_period = milliseconds(100);
    c.on_started_leading = [started](std::stop_token stop) {
      ++*started;
      while (!stop.stop_requested()) std::this_thread::sleep_for(milliseconds(5));
    };
    c.on_stopped_leading = [stopped] { ++*stopped; };
    return c;
  };
  std::atomic<int> a_started{0}, a_stopped{0}, b_started{0}, b_stopped{0};
  auto a = LeaderElector::Create(*a_client_, config("a", &a_started, &a_stopped));
  auto b = LeaderElector::Create(*b_client_, config("b", &b_started, &b_stopped));
  ASSERT_OK(a);
  ASSERT_OK(b);
  std::jthread ta([&](std::stop_token s) { (*a)->Run(s); });
  while (!(*a)->IsLeader()) std::this_thread::sleep_for(milliseconds(5));
  std::jthread tb([&](std::stop_token s) { (*b)->Run(s); });
  std::this_thread::sleep_for(milliseconds(800));
  EXPECT_TRUE((*a)->IsLeader());
  EXPECT_FALSE((*b)->IsLeader()) << "exactly one leads";
  EXPECT_EQ(b_started.load(), 0);
  const auto t0 = std::chrono::steady_clock::now();
  ta.request_stop();
  ta.join();
  EXPECT_EQ(a_stopped.load(), 1);
  EXPECT_NE(Spec()["holderIdentity"], "a") << "released";
  while (!(*b)->IsLeader()) std::this_thread::sleep_for(milliseconds(5));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, milliseconds(4000)) << "released: b need not wait the 8 s lease";
  // IsLeader() turns true before on_started_leading runs on its thread: wait for the call (bounded).
  for (int i = 0; i < 400 && b_started.load() == 0; ++i) std::this_thread::sleep_for(milliseconds(5));
  EXPECT_EQ(b_started.load(), 1);
  EXPECT_EQ(Spec()["leaseTransitions"], 1);
  tb.request_stop();
  tb.join();
  EXPECT_EQ(Spec()["holderIdentity"], "");
}

TEST_F(LeaderElectionTest, ALeaderThatCannotRenewStopsLeadingWithinTheRenewDeadline) {
  LeaderElectionConfig c = Config("a");
  c.lease_duration = seconds(2);
  c.renew_deadline = milliseconds(600);
  c.retry_period = milliseconds(100);
  std::atomic<bool> lost{false};
  c.on_stopped_leading = [&] { lost = true; };
  auto a = LeaderElector::Create(*a_client_, c);
  ASSERT_OK(a);
  std::jthread t([&](std::stop_token s) { (*a)->Run(s); });
  while (!(*a)->IsLeader()) std::this_thread::sleep_for(milliseconds(5));
  api_.On("GET", kLease, {FakeApiServer::ApiStatus(500, "InternalError", "etcd is away")});
  const auto t0 = std::chrono::steady_clock::now();
  while (!lost && std::chrono::steady_clock::now() - t0 < seconds(5)) std::this_thread::sleep_for(milliseconds(10));
  EXPECT_TRUE(lost.load());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, milliseconds(1500)) << "renew_deadline is 600 ms, lease 2 s";
  t.join();
}

}  // namespace
}  // namespace gpunode::kube
