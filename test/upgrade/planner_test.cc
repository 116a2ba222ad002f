// The upgrade of one pool as a pure function (src/upgrade/planner.h). A small world stands for
// the cluster: it carries each pass's actions out the way the API server, the DaemonSet controller
// and the node's agent would (labels, cordon, evictions, a new driver pod with the DaemonSet's
// template, the validation condition), so a test walks an upgrade from start to end.
#include "src/upgrade/planner.h"

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "src/base/well_known.h"
#include "src/upgrade/nvidia_driver.h"

namespace gpunode::upgrade {
namespace {

using std::chrono::seconds;
namespace wk = ::gpunode::wellknown;

struct World {
  DriverSpec driver;
  std::vector<NodeFacts> nodes;
  std::map<std::string, DriverPod> pods;
  std::map<std::string, std::vector<WorkloadPod>> workloads;
  std::string target_hash = "new", old_hash = "old", previous_hash = "old", previous_version = "570.0.1";
  ControllerPolicy policy;
  std::chrono::system_clock::time_point now = std::chrono::system_clock::from_time_t(1'800'000'000);
  bool agent_validates = true;     // the node's agent passes the new driver
  bool pods_become_ready = true;
  std::vector<std::pair<std::string, std::string>> evicted;
  std::set<std::pair<std::string, std::string>> pdb_blocked;  // evictions refused
  int max_unavailable_seen = 0;
  PoolPlan last;

  World(int n, const std::string& version = "580.95.05") {
    driver.name = "pool";
    driver.image = "driver";
    driver.repository = "nvcr.io/nvidia";
    driver.version = version;
    for (int i = 0; i < n; ++i) {
      NodeFacts f;
      f.node.name = absl::StrCat("node-", i);
      f.node.ready = {true, "True", "", ""};
      f.node.gpu_stack = {true, "True", "AllChecksPassed", "checks passed (gpunode doctor) on driver 570.0.1"};
      f.labels[wk::kLabelDriverVersion] = "570.0.1";
      f.labels[wk::kLabelDriverOwner] = "pool";
      nodes.push_back(f);
      pods[f.node.name] = DriverPod{"gpunode", "drv-" + f.node.name, f.node.name, "pool", old_hash, "570.0.1", true};
    }
  }
  NodeFacts& Node(const std::string& name) {
    for (NodeFacts& n : nodes) {
      if (n.node.name == name) return n;
    }
    ADD_FAILURE() << "no node " << name;
    return nodes[0];
  }
  State StateOf(const std::string& name) { return Node(name).state; }

  // One controller pass, then the world reacts; the clock moves by `step`.
  void Pass(seconds step = seconds(5)) {
    PoolInput in;
    in.driver = &driver;
    in.target_hash = target_hash;
    in.previous_hash = previous_hash;
    in.previous_version = previous_version;
    in.now = now;
    for (const NodeFacts& n : nodes) in.nodes.push_back(&n);
    in.pods = pods;
    in.workloads = workloads;
    last = PlanPool(in, policy);
    for (const NodeAction& a : last.actions) {
      NodeFacts& n = Node(a.node);
      if (a.list_workloads) workloads[a.node];  // the controller lists the node's pods
      if (a.new_state) {
        n.state = *a.new_state;
        n.labels[wk::kLabelUpgradeState] = StateName(*a.new_state);
      }
      for (const auto& [k, v] : a.annotations) v ? (void)(n.annotations[k] = *v) : (void)n.annotations.erase(k);
      for (const auto& [k, v] : a.labels) v ? (void)(n.labels[k] = *v) : (void)n.labels.erase(k);
      if (a.unschedulable) n.node.unschedulable = *a.unschedulable;
      for (const auto& e : a.evict) {
        if (pdb_blocked.count(e)) continue;
        evicted.push_back(e);
        auto& list = workloads[a.node];
        list.erase(std::remove_if(list.begin(), list.end(), [&](const WorkloadPod& p) { return p.ns == e.first && p.name == e.second; }),
                   list.end());
      }
      if (a.delete_pod) pods.erase(a.node);
      if (a.condition) {
        n.annotations["test/condition"] = a.condition->status + "/" + a.condition->reason;
      }
    }
    int unavailable = 0;
    for (const NodeFacts& n : nodes) unavailable += (InProgress(n.state) || n.node.unschedulable) ? 1 : 0;
    max_unavailable_seen = std::max(max_unavailable_seen, unavailable);
    now += step;
    // The DaemonSet controller puts a pod with the template the node should run; the agent validates.
    for (NodeFacts& n : nodes) {
      if (pods.count(n.node.name)) continue;
      const bool rollback = n.labels.count(kLabelRollback) > 0;
      DriverPod p{"gpunode", "drv2-" + n.node.name, n.node.name, "pool",
                  rollback ? previous_hash : target_hash, rollback ? previous_version : driver.version, pods_become_ready};
      pods[n.node.name] = p;
      if (pods_become_ready && (agent_validates || rollback)) {
        n.labels[wk::kLabelDriverVersion] = p.version;
        n.node.gpu_stack = {true, "True", "AllChecksPassed", "checks passed (gpunode doctor) on driver " + p.version};
      } else if (pods_become_ready) {
        n.node.gpu_stack = {true, "False", "DriverVersionMismatch", "kernel module 580.95.05, NVML 570.0.1"};
      }
    }
  }
  void RunUntilQuiet(int max_passes = 200, seconds step = seconds(5)) {
    for (int i = 0; i < max_passes; ++i) {
      Pass(step);
      if (last.actions.empty() && last.progress.in_progress == 0) return;
    }
  }
};

TEST(PlannerTest, OneNodeWalksEveryStateAndIsUncordonedValidatedAtTheNewDriver) {
  World w(1);
  std::vector<State> seen;
  for (int i = 0; i < 20 && w.StateOf("node-0") != State::kDone; ++i) {
    w.Pass();
    if (seen.empty() || seen.back() != w.StateOf("node-0")) seen.push_back(w.StateOf("node-0"));
  }
  const std::vector<State> expected = {State::kRequired,   State::kCordon,     State::kWaitForJobs,
                                       State::kPodDeletion, State::kPodRestart, State::kValidation,
                                       State::kUncordon,   State::kDone};
  EXPECT_EQ(seen, expected);
  const NodeFacts& n = w.Node("node-0");
  EXPECT_FALSE(n.node.unschedulable);
  EXPECT_EQ(n.labels.at(wk::kLabelDriverVersion), "580.95.05");
  EXPECT_EQ(n.annotations.count(kAnnoCordoned), 0u);
  EXPECT_EQ(n.annotations.at("test/condition"), "True/UpgradeDone");
  EXPECT_EQ(w.pods.at("node-0").hash, "new");
}

TEST(PlannerTest, GpuPodsAreEvictedAndOtherPodsStayWithoutDrain) {
  World w(1);
  WorkloadPod gpu{"team", "train-0", {}, false, false, false, false, true, true, false, false};
  WorkloadPod web{"team", "web-0", {}, false, false, false, false, true, false, false, false};
  WorkloadPod ds{"kube-system", "agent", {}, false, false, true, false, true, true, false, false};
  w.workloads["node-0"] = {gpu, web, ds};
  w.RunUntilQuiet();
  EXPECT_EQ(w.StateOf("node-0"), State::kDone);
  ASSERT_EQ(w.evicted.size(), 1u);
  EXPECT_EQ(w.evicted[0].second, "train-0");
}

TEST(PlannerTest, MaxUnavailableHoldsAtEveryPassAndNodesAlreadyDownGoFirst) {
  World w(8);
  w.driver.upgrade_policy = UpgradePolicy{};
  w.driver.upgrade_policy->max_parallel_upgrades = 0;  // no limit: maxUnavailable decides
  w.driver.upgrade_policy->max_unavailable = {25, true};  // 2 of 8
  w.Node("node-5").node.ready = {true, "False", "", ""};  // already unavailable
  w.Pass();
  w.Pass();  // required -> cordon
  std::set<std::string> first;
  for (const NodeFacts& n : w.nodes) {
    if (InProgress(n.state)) first.insert(n.node.name);
  }
  EXPECT_TRUE(first.count("node-5")) << "the NotReady node goes first (it costs no capacity)";
  EXPECT_EQ(first.size(), 2u);
  w.RunUntilQuiet();
  for (const NodeFacts& n : w.nodes) EXPECT_EQ(n.state, State::kDone) << n.node.name;
  EXPECT_LE(w.max_unavailable_seen, 2);
}

TEST(PlannerTest, MaxParallelUpgradesLimitsNodesUnderWay) {
  World w(6);
  w.driver.upgrade_policy = UpgradePolicy{};
  w.driver.upgrade_policy->max_parallel_upgrades = 1;
  w.driver.upgrade_policy->max_unavailable = {100, true};
  for (int i = 0; i < 200; ++i) {
    w.Pass();
    int under_way = 0;
    for (const NodeFacts& n : w.nodes) under_way += InProgress(n.state) ? 1 : 0;
    ASSERT_LE(under_way, 1);
    if (w.last.actions.empty()) break;
  }
  for (const NodeFacts& n : w.nodes) EXPECT_EQ(n.state, State::kDone);
}

TEST(PlannerTest, ANodeCordonedBySomeoneElseIsSkippedReportedAndNeverUncordoned) {
  World w(2);
  w.driver.upgrade_policy = UpgradePolicy{};
  w.driver.upgrade_policy->max_unavailable = {2, false};  // the cordoned node counts against the limit
  w.Node("node-1").node.unschedulable = true;  // an administrator's cordon
  w.RunUntilQuiet();
  EXPECT_EQ(w.StateOf("node-0"), State::kDone);
  EXPECT_EQ(w.StateOf("node-1"), State::kRequired);
  EXPECT_TRUE(w.Node("node-1").node.unschedulable);
  ASSERT_FALSE(w.last.progress.skipped.empty());
  EXPECT_TRUE(absl::StrContains(w.last.progress.skipped[0], "cordoned by someone else"));
}

TEST(PlannerTest, AFailedValidationFailsTheNodeAtItsDeadlineKeepsItCordonedAndHaltsThePool) {
  World w(3);
  w.agent_validates = false;
  w.policy.deadlines.validation = seconds(60);
  w.RunUntilQuiet(100, seconds(10));
  EXPECT_EQ(w.StateOf("node-0"), State::kFailed);
  const NodeFacts& n = w.Node("node-0");
  EXPECT_TRUE(n.node.unschedulable);
  EXPECT_EQ(n.annotations.at("test/condition"), "False/ValidationFailed");
  EXPECT_TRUE(absl::StrContains(n.annotations.at(kAnnoReason), "DriverVersionMismatch")) << n.annotations.at(kAnnoReason);
  EXPECT_EQ(w.StateOf("node-1"), State::kRequired);
  EXPECT_EQ(w.StateOf("node-2"), State::kRequired);
  EXPECT_TRUE(absl::StrContains(w.last.progress.halted, "node-0"));
}

TEST(PlannerTest, WithContinueTheOtherNodesGoOnAfterAFailure) {
  World w(3);
  w.agent_validates = false;
  w.policy.halt_on_failure = false;
  w.policy.deadlines.validation = seconds(30);
  // A failed node stays cordoned and counts against maxUnavailable: room for all three.
  w.driver.upgrade_policy = UpgradePolicy{};
  w.driver.upgrade_policy->max_unavailable = {100, true};
  w.RunUntilQuiet(300, seconds(10));
  for (const NodeFacts& n : w.nodes) EXPECT_EQ(n.state, State::kFailed) << n.node.name;
}

TEST(PlannerTest, RollbackOnFailureMovesTheNodeToThePreviousDaemonSetAndUncordonsIt) {
  World w(1);
  w.agent_validates = false;
  w.policy.rollback_on_failure = true;
  w.policy.deadlines.validation = seconds(30);
  w.RunUntilQuiet(100, seconds(10));
  const NodeFacts& n = w.Node("node-0");
  EXPECT_EQ(n.state, State::kDone);
  EXPECT_EQ(n.labels.at(kLabelRollback), "true");
  EXPECT_EQ(n.labels.at(wk::kLabelDriverVersion), "570.0.1");
  EXPECT_FALSE(n.node.unschedulable);
  EXPECT_EQ(n.annotations.at("test/condition"), "False/RolledBack");
  EXPECT_EQ(w.pods.at("node-0").hash, "old");
}

TEST(PlannerTest, ARolledBackNodeStaysThereUntilThePoolGetsANewTargetThenGoesToIt) {
  World w(1);
  w.agent_validates = false;
  w.policy.rollback_on_failure = true;
  w.policy.deadlines.validation = seconds(30);
  w.RunUntilQuiet(100, seconds(10));
  ASSERT_EQ(w.Node("node-0").labels.at(kLabelRollback), "true");
  w.RunUntilQuiet(20);  // nothing moves: it stays on the previous version
  EXPECT_EQ(w.pods.at("node-0").hash, "old");
  EXPECT_EQ(w.StateOf("node-0"), State::kDone);
  // A fixed driver: the broken template becomes the previous one, the fixed one the target.
  w.agent_validates = true;
  w.previous_hash = w.target_hash;
  w.previous_version = w.driver.version;
  w.target_hash = "fixed";
  w.driver.version = "580.105.08";
  w.RunUntilQuiet();
  EXPECT_EQ(w.StateOf("node-0"), State::kDone);
  EXPECT_EQ(w.pods.at("node-0").hash, "fixed");
  EXPECT_EQ(w.Node("node-0").labels.count(kLabelRollback), 0u);
  EXPECT_EQ(w.Node("node-0").labels.at(wk::kLabelDriverVersion), "580.105.08");
}

TEST(PlannerTest, APodDisruptionBudgetKeepsTheNodeWaitingThenFailsItWithThePodsNamed) {
  World w(1);
  WorkloadPod gpu{"team", "train-0", {}, false, false, false, false, true, true, false, false};
  w.workloads["node-0"] = {gpu};
  w.pdb_blocked.insert({"team", "train-0"});
  bool waited = false;
  for (int i = 0; i < 100 && w.StateOf("node-0") != State::kFailed; ++i) {
    w.Pass(seconds(10));
    for (const auto& [node, why] : w.last.progress.waiting) waited = waited || absl::StrContains(why, "evicting GPU pods");
  }
  EXPECT_TRUE(waited);
  EXPECT_EQ(w.StateOf("node-0"), State::kFailed);
  EXPECT_TRUE(absl::StrContains(w.Node("node-0").annotations.at(kAnnoReason), "team/train-0"));
}

TEST(PlannerTest, ACrashLoopingDriverPodFailsAtOnceNotAtTheDeadline) {
  World w(1);
  w.pods_become_ready = false;
  for (int i = 0; i < 8; ++i) w.Pass();
  ASSERT_EQ(w.StateOf("node-0"), State::kPodRestart);
  w.pods["node-0"].waiting_reason = "CrashLoopBackOff";
  w.pods["node-0"].restarts = 3;
  w.Pass();
  EXPECT_EQ(w.StateOf("node-0"), State::kFailed);
  EXPECT_TRUE(absl::StrContains(w.Node("node-0").annotations.at(kAnnoReason), "CrashLoopBackOff"));
}

TEST(PlannerTest, PausedOrAutoUpgradeOffStartsNothingButNodesUnderWayFinish) {
  World w(2);
  w.Pass();
  w.Pass();  // node-0 cordon-required
  ASSERT_TRUE(InProgress(w.StateOf("node-0")));
  w.driver.upgrade_policy = UpgradePolicy{};
  w.driver.upgrade_policy->auto_upgrade = false;
  w.RunUntilQuiet();
  EXPECT_EQ(w.StateOf("node-0"), State::kDone);
  EXPECT_EQ(w.StateOf("node-1"), State::kRequired);
  EXPECT_EQ(w.last.progress.halted, "upgradePolicy.autoUpgrade is false");
}

TEST(PlannerTest, ARestartedControllerContinuesFromTheLabels) {
  World w(1);
  for (int i = 0; i < 4; ++i) w.Pass();
  const State mid = w.StateOf("node-0");
  ASSERT_TRUE(InProgress(mid));
  // A new controller knows only what the Node says: the world is the same objects, planned afresh.
  World again = w;
  again.RunUntilQuiet();
  EXPECT_EQ(again.StateOf("node-0"), State::kDone);
}

TEST(PlannerTest, AStateWithoutItsTimeGetsOneAndAnUnknownLabelIsLeftAlone) {
  World w(1);
  w.Node("node-0").state = State::kValidation;
  w.Node("node-0").labels[wk::kLabelUpgradeState] = "validation-required";
  w.Pass();
  EXPECT_TRUE(w.Node("node-0").annotations.count(kAnnoSince));
  EXPECT_EQ(ParseState("upgrade-maybe"), std::nullopt);
}

TEST(PlannerTest, ACordonOfOursWithoutAStateIsUndone) {
  World w(1);
  w.target_hash = w.old_hash;  // nothing to upgrade
  w.Node("node-0").node.unschedulable = true;
  w.Node("node-0").annotations[kAnnoCordoned] = "true";  // the state label was lost mid-upgrade
  w.Pass();
  EXPECT_FALSE(w.Node("node-0").node.unschedulable);
  EXPECT_EQ(w.StateOf("node-0"), State::kDone);
}

TEST(NvidiaDriverTest, NvidiasFieldsAndDefaultsAndErrorsNameTheField) {
  nlohmann::json obj = {{"apiVersion", "nvidia.com/v1alpha1"},
                        {"kind", "NVIDIADriver"},
                        {"metadata", {{"name", "a100"}, {"uid", "u1"}, {"generation", 3}}},
                        {"spec",
                         {{"driverType", "gpu"},
                          {"repository", "nvcr.io/nvidia"},
                          {"image", "driver"},
                          {"version", "580.95.05"},
                          {"nodeSelector", {{"nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB"}}},
                          {"rdma", {{"enabled", false}}},
                          {"upgradePolicy",
                           {{"autoUpgrade", true},
                            {"maxParallelUpgrades", 2},
                            {"maxUnavailable", "10%"},
                            {"drain", {{"enable", true}, {"timeoutSeconds", 600}}}}}}}};
  auto d = ParseNvidiaDriver(obj);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->ImageFor("ubuntu22.04"), "nvcr.io/nvidia/driver:580.95.05-ubuntu22.04");
  EXPECT_EQ(d->Policy().max_unavailable.Of(95), 10);  // 9.5 rounded up
  EXPECT_EQ(d->Policy().max_parallel_upgrades, 2);
  EXPECT_TRUE(d->Policy().drain.enable);
  EXPECT_EQ(d->Policy().drain.timeout_seconds, 600);
  EXPECT_EQ(d->Policy().pod_deletion.timeout_seconds, 300);  // NVIDIA's default
  EXPECT_EQ(d->ignored, std::vector<std::string>{"spec.rdma"});

  obj["spec"]["upgradePolicy"]["maxUnavailable"] = "lots";
  auto bad = ParseNvidiaDriver(obj);
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "NVIDIADriver a100")) << bad.status();
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "maxUnavailable")) << bad.status();

  obj["spec"]["upgradePolicy"]["maxUnavailable"] = 1;
  obj["spec"]["default"] = true;
  auto def = ParseNvidiaDriver(obj);
  ASSERT_FALSE(def.ok());
  EXPECT_TRUE(absl::StrContains(def.status().message(), "default NVIDIADriver must not have one")) << def.status();

  obj["spec"].erase("default");
  obj["spec"]["driverType"] = "vgpu";
  EXPECT_FALSE(ParseNvidiaDriver(obj).ok());
  obj["spec"]["driverType"] = "gpu";
  obj["spec"]["image"] = "registry.local:5000/team/driver:custom";
  EXPECT_EQ(ParseNvidiaDriver(obj)->ImageFor("ubuntu22.04"), "registry.local:5000/team/driver:custom");
  obj["spec"]["upgradePolicy"] = "yes";
  EXPECT_FALSE(ParseNvidiaDriver(obj).ok());
  EXPECT_FALSE(ParseNvidiaDriver(nlohmann::json::array()).ok());
}

TEST(NvidiaDriverTest, PoolsByNodeSelectorTheDefaultTakesTheRestAndOverlapsAreRefused) {
  DriverSpec a100, h100, def;
  a100.name = "a100";
  a100.node_selector = {{"pool", "a"}};
  h100.name = "h100";
  h100.node_selector = {{"gpu", "h"}};
  def.name = "default";
  def.is_default = true;
  std::vector<std::pair<std::string, std::map<std::string, std::string>>> nodes = {
      {"n1", {{"pool", "a"}, {wk::kLabelGpuPresent, "true"}}},
      {"n2", {{"gpu", "h"}, {wk::kLabelGpuPresent, "true"}}},
      {"n3", {{"pool", "a"}, {"gpu", "h"}, {wk::kLabelGpuPresent, "true"}}},
      {"n4", {{wk::kLabelGpuPresent, "true"}}},
      {"cpu", {}},
  };
  PoolAssignment p = AssignPools({a100, h100, def}, nodes);
  EXPECT_EQ(p.nodes["a100"], std::vector<std::string>{"n1"});
  EXPECT_EQ(p.nodes["h100"], std::vector<std::string>{"n2"});
  EXPECT_EQ(p.nodes["default"], std::vector<std::string>{"n4"});
  ASSERT_EQ(p.conflicts["a100"].size(), 1u);
  EXPECT_TRUE(absl::StrContains(p.conflicts["a100"][0], "overlaps NVIDIADriver h100 on 1 node(s): n3"));
}

TEST(SelectorTest, KubectlsEqualityTermsAndSetTermsRefused) {
  auto s = ParseSelector("app=train, tier!=web,gpu,!skip", "podSelector");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(s->Matches({{"app", "train"}, {"gpu", "1"}}));
  EXPECT_FALSE(s->Matches({{"app", "train"}, {"gpu", "1"}, {"skip", ""}}));
  EXPECT_FALSE(s->Matches({{"app", "train"}, {"gpu", "1"}, {"tier", "web"}}));
  EXPECT_FALSE(ParseSelector("app in (a,b)", "podSelector").ok());
}

}  // namespace
}  // namespace gpunode::upgrade
