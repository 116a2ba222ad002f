// Unit tests of src/fleet on the hand-made fixture test/fixtures/fleet/nodes-small.json (8 nodes:
// every finding once, with its reason) and on bad input.
//
//   h100-a  H100 580.95.05, healthy                    a100-a  A100 535, no nvidia.com/* capacity
//   h100-b  H100 580.95.05, 2 GPUs unhealthy (6 of 8)   a100-b  A100 535, Ready=Unknown, cordoned
//   h100-c  H100 570.172.08, GpuStackReady=False, 0/8   a100-c  A100 535, MIG mixed (mig-1g.10gb)
//   v100-a  V100 535, GFD labels only (no agent)        cpu-a   no GPU
#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/compat/dataset.h"
#include "src/fleet/fleet.h"
#include "src/fleet/render.h"
#include "test/testing/status_matchers.h"

namespace gpunode::fleet {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

std::string ReadFixture(const std::string& name) {
  std::ifstream in(std::string(GPUNODE_SOURCE_DIR) + "/test/fixtures/fleet/" + name);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

FleetReport Small() {
  auto nodes = ParseNodeListText(ReadFixture("nodes-small.json"), "nodes-small.json");
  EXPECT_OK(nodes) << nodes.status();
  return Analyze(std::move(*nodes), "nodes-small.json");
}

std::vector<const Finding*> Find(const FleetReport& r, const std::string& id, const std::string& subject = "") {
  std::vector<const Finding*> out;
  for (const Finding& f : r.findings) {
    if (f.id == id && (subject.empty() || f.subject == subject)) out.push_back(&f);
  }
  return out;
}

const FleetNode& NodeOf(const FleetReport& r, const std::string& name) {
  for (const FleetNode& n : r.nodes) {
    if (n.name == name) return n;
  }
  ADD_FAILURE() << "no node " << name;
  return r.nodes.front();
}

TEST(FleetModel, ReadsLabelsResourcesAndConditionsOfANode) {
  FleetReport r = Small();
  const FleetNode& b = NodeOf(r, "h100-b");
  EXPECT_EQ(b.product, "NVIDIA-H100-80GB-HBM3");
  EXPECT_EQ(b.driver->ToString(), "580.95.05");
  EXPECT_EQ(b.branch, "580");
  EXPECT_EQ(b.cuda_max, "13.0");
  EXPECT_EQ(b.kernel_module, "open");
  EXPECT_EQ(b.agent_version, "0.9.0");
  EXPECT_EQ(b.physical_gpus, 8);
  EXPECT_EQ(b.unhealthy_gpus, 2);
  EXPECT_EQ(b.Capacity("nvidia.com/gpu"), 8);
  EXPECT_EQ(b.Allocatable("nvidia.com/gpu"), 6);
  EXPECT_TRUE(b.Ready());
  EXPECT_TRUE(b.gpu_stack.present);
  EXPECT_EQ(b.gpu_stack.status, "True");
  EXPECT_EQ(b.capacity.count("cpu"), 0u) << "only nvidia.com/* resources are kept";

  const FleetNode& ab = NodeOf(r, "a100-b");
  EXPECT_TRUE(ab.unschedulable);
  EXPECT_FALSE(ab.Ready());
  EXPECT_TRUE(ab.Unavailable());
  EXPECT_FALSE(NodeOf(r, "cpu-a").has_gpus);
  EXPECT_TRUE(NodeOf(r, "v100-a").has_gpus);
  EXPECT_FALSE(NodeOf(r, "v100-a").has_agent_labels);
  EXPECT_EQ(NodeOf(r, "v100-a").branch, "535") << "from the driver when gpunode's label is missing";
}

TEST(FleetPools, OnePoolPerGpuProductAndDriverVersionWithReadableNames) {
  FleetReport r = Small();
  std::vector<std::string> names;
  for (const Pool& p : r.pools) names.push_back(p.name);
  EXPECT_THAT(names, ElementsAre("a100-sxm4-80gb-535.261.03", "h100-80gb-hbm3-570.172.08", "h100-80gb-hbm3-580.95.05",
                                 "tesla-v100-sxm2-16gb-535.261.03"));
  const Pool& a100 = r.pools[0];
  EXPECT_EQ(a100.product, "NVIDIA-A100-SXM4-80GB");
  EXPECT_EQ(a100.driver, "535.261.03");
  EXPECT_THAT(a100.nodes, ElementsAre("a100-a", "a100-b", "a100-c"));
  EXPECT_EQ(a100.ready_nodes, 2);
  EXPECT_EQ(a100.gpus, 24);
  EXPECT_EQ(a100.allocatable, 8);
  EXPECT_EQ(a100.compute_major, 8);
  EXPECT_EQ(r.summary.nodes, 8);
  EXPECT_EQ(r.summary.gpu_nodes, 7);
  EXPECT_EQ(r.summary.cpu_nodes, 1);
  EXPECT_EQ(r.summary.gpus, 52);
  EXPECT_EQ(r.summary.allocatable, 26);
  EXPECT_EQ(r.pool_of.count("cpu-a"), 0u);
}

TEST(FleetPools, SharedAndMigProductsPoolWithTheirGpuModel) {
  auto nodes = ParseNodeListText(R"({"kind":"NodeList","items":[
    {"metadata":{"name":"n1","labels":{"nvidia.com/gpu.product":"NVIDIA-L40S-SHARED","nvidia.com/gpu.count":"4",
      "nvidia.com/gpu.replicas":"4","nvidia.com/gpu.sharing-strategy":"time-slicing",
      "nvidia.com/cuda.driver-version.full":"570.172.08"}},
     "status":{"capacity":{"nvidia.com/gpu":"16"},"allocatable":{"nvidia.com/gpu":"16"},
       "conditions":[{"type":"Ready","status":"True"}]}},
    {"metadata":{"name":"n2","labels":{"nvidia.com/gpu.product":"NVIDIA-L40S","nvidia.com/gpu.count":"4",
      "nvidia.com/cuda.driver-version.full":"570.172.08"}},
     "status":{"capacity":{"nvidia.com/gpu":"4"},"allocatable":{"nvidia.com/gpu":"4"},
       "conditions":[{"type":"Ready","status":"True"}]}}]})",
                                 "t");
  ASSERT_OK(nodes) << nodes.status();
  FleetReport r = Analyze(std::move(*nodes), "t");
  ASSERT_EQ(r.pools.size(), 1u);
  EXPECT_EQ(r.pools[0].name, "l40s-570.172.08");
  EXPECT_TRUE(Find(r, "below-capacity").empty()) << "16 = 4 GPUs x 4 replicas";
}

TEST(FleetFindings, BelowCapacityNamesEveryReason) {
  FleetReport r = Small();
  auto unhealthy = Find(r, "below-capacity", "h100-b");
  ASSERT_EQ(unhealthy.size(), 1u);
  EXPECT_EQ(unhealthy[0]->severity, Severity::kError);
  EXPECT_EQ(unhealthy[0]->causes.front().id, "gpus-unhealthy");
  EXPECT_THAT(unhealthy[0]->message, HasSubstr("allocatable nvidia.com/gpu 6 of 8"));
  EXPECT_EQ(unhealthy[0]->pool, "h100-80gb-hbm3-580.95.05");

  auto validation = Find(r, "below-capacity", "h100-c");
  ASSERT_EQ(validation.size(), 1u);
  EXPECT_EQ(validation[0]->causes.front().id, "validation-failing");
  EXPECT_THAT(validation[0]->causes.front().detail, HasSubstr("DriverVersionMismatch"));
  EXPECT_THAT(validation[0]->action, HasSubstr("reboot the node")) << "the condition's message is the first action";

  auto plugin = Find(r, "below-capacity", "a100-a");
  ASSERT_EQ(plugin.size(), 1u);
  EXPECT_EQ(plugin[0]->causes.front().id, "device-plugin-not-registered");

  auto mig = Find(r, "below-capacity", "a100-c");
  ASSERT_EQ(mig.size(), 1u);
  EXPECT_EQ(mig[0]->severity, Severity::kInfo) << "renamed, not missing";
  EXPECT_EQ(mig[0]->causes.front().id, "resource-renamed");
  EXPECT_THAT(mig[0]->message, HasSubstr("nvidia.com/mig-1g.10gb (56)"));

  EXPECT_TRUE(Find(r, "below-capacity", "h100-a").empty());
  EXPECT_TRUE(Find(r, "below-capacity", "a100-b").empty()) << "NotReady, but still advertising 8";
}

TEST(FleetFindings, PluginMarkedUnhealthyAndNotReadyAsCauses) {
  auto nodes = ParseNodeListText(R"({"items":[
    {"metadata":{"name":"x","labels":{"nvidia.com/gpu.count":"8","nvidia.com/gpu.present":"true",
      "gpunode.io/gpu.healthy-count":"8","gpunode.io/gpu.unhealthy-count":"0"}},
     "status":{"capacity":{"nvidia.com/gpu":"8"},"allocatable":{"nvidia.com/gpu":"7"},
       "conditions":[{"type":"Ready","status":"True"}]}},
    {"metadata":{"name":"y","labels":{"nvidia.com/gpu.count":"8"}},
     "status":{"capacity":{"nvidia.com/gpu":"8"},"allocatable":{"nvidia.com/gpu":"0"},
       "conditions":[{"type":"Ready","status":"False","reason":"KubeletNotReady","message":"PLEG is not healthy"}]}}]})",
                                 "t");
  ASSERT_OK(nodes) << nodes.status();
  FleetReport r = Analyze(std::move(*nodes), "t");
  auto x = Find(r, "below-capacity", "x");
  ASSERT_EQ(x.size(), 1u);
  EXPECT_EQ(x[0]->causes.front().id, "plugin-marked-unhealthy");
  auto y = Find(r, "below-capacity", "y");
  ASSERT_EQ(y.size(), 1u);
  EXPECT_EQ(y[0]->causes.front().id, "node-not-ready");
  EXPECT_THAT(y[0]->causes.front().detail, HasSubstr("PLEG is not healthy"));
}

// A node whose GPUs are served through DRA alone (gpunode.io/dra.driver, no device plugin: no
// nvidia.com/gpu in allocatable) is not below capacity; one with a device plugin beside still is.
TEST(FleetFindings, ANodeServedThroughDraIsNotBelowCapacity) {
  auto nodes = ParseNodeListText(R"({"items":[
    {"metadata":{"name":"dra","labels":{"nvidia.com/gpu.count":"8","gpunode.io/dra.driver":"gpu.nvidia.com",
      "gpunode.io/gpu.healthy-count":"8","gpunode.io/gpu.unhealthy-count":"0"}},
     "status":{"conditions":[{"type":"Ready","status":"True"}]}},
    {"metadata":{"name":"both","labels":{"nvidia.com/gpu.count":"8","gpunode.io/dra.driver":"gpu.nvidia.com",
      "gpunode.io/gpu.healthy-count":"8","gpunode.io/gpu.unhealthy-count":"0"}},
     "status":{"capacity":{"nvidia.com/gpu":"8"},"allocatable":{"nvidia.com/gpu":"7"},
       "conditions":[{"type":"Ready","status":"True"}]}}]})",
                                 "t");
  ASSERT_OK(nodes) << nodes.status();
  FleetReport r = Analyze(std::move(*nodes), "t");
  EXPECT_EQ(NodeOf(r, "dra").dra_driver, "gpu.nvidia.com");
  EXPECT_TRUE(Find(r, "below-capacity", "dra").empty());
  EXPECT_EQ(Find(r, "below-capacity", "both").size(), 1u);
}

TEST(FleetFindings, UnhealthyFailingNotReadyCordonedNoAgent) {
  FleetReport r = Small();
  auto gpus = Find(r, "gpus-unhealthy");
  ASSERT_EQ(gpus.size(), 1u);
  EXPECT_EQ(gpus[0]->subject, "h100-b");
  EXPECT_THAT(gpus[0]->message, HasSubstr("2 of 8 GPUs unhealthy"));
  EXPECT_THAT(gpus[0]->message, HasSubstr("driver.gpu-lost"));

  auto failing = Find(r, "validation-failing");
  ASSERT_EQ(failing.size(), 1u);
  EXPECT_EQ(failing[0]->subject, "h100-c");
  EXPECT_EQ(failing[0]->severity, Severity::kError);
  EXPECT_THAT(failing[0]->message, HasSubstr("GpuStackReady=False (DriverVersionMismatch"));

  auto not_ready = Find(r, "node-not-ready");
  ASSERT_EQ(not_ready.size(), 1u);
  EXPECT_EQ(not_ready[0]->subject, "a100-b");
  EXPECT_THAT(not_ready[0]->message, HasSubstr("Ready=Unknown (NodeStatusUnknown"));

  auto cordoned = Find(r, "cordoned");
  ASSERT_EQ(cordoned.size(), 1u);
  EXPECT_EQ(cordoned[0]->subject, "a100-b");

  auto no_agent = Find(r, "no-agent");
  ASSERT_EQ(no_agent.size(), 1u);
  EXPECT_EQ(no_agent[0]->subject, "v100-a");
  EXPECT_TRUE(Find(r, "no-agent", "cpu-a").empty()) << "CPU nodes need no agent";
}

TEST(FleetFindings, DriverBranchAndAgentSkew) {
  FleetReport r = Small();
  auto skew = Find(r, "driver-skew");
  ASSERT_EQ(skew.size(), 1u) << "A100 has one driver; H100 two";
  EXPECT_EQ(skew[0]->subject, "NVIDIA-H100-80GB-HBM3");
  EXPECT_THAT(skew[0]->message, HasSubstr("580.95.05 (2), 570.172.08 (1); branches 570, 580"));
  EXPECT_THAT(skew[0]->nodes, ElementsAre("h100-c"));
  EXPECT_THAT(skew[0]->action, HasSubstr("--to-driver 580.95.05"));

  auto branches = Find(r, "branch-skew");
  ASSERT_EQ(branches.size(), 1u);
  EXPECT_EQ(branches[0]->severity, Severity::kInfo);
  EXPECT_THAT(branches[0]->message, HasSubstr("3 driver branches"));

  auto agents = Find(r, "agent-skew");
  ASSERT_EQ(agents.size(), 1u);
  EXPECT_THAT(agents[0]->message, HasSubstr("0.9.0 (5), 0.8.2 (1)"));
  EXPECT_THAT(agents[0]->nodes, ElementsAre("h100-c"));
}

TEST(FleetFindings, ExitCodeAndOrderErrorsFirst) {
  FleetReport r = Small();
  EXPECT_EQ(ExitCodeOf(r), 1);
  EXPECT_EQ(r.summary.errors, 6);
  EXPECT_EQ(r.summary.warnings, 3);
  EXPECT_EQ(r.summary.infos, 3);
  for (size_t i = 1; i < r.findings.size(); ++i) {
    EXPECT_GE(static_cast<int>(r.findings[i - 1].severity), static_cast<int>(r.findings[i].severity));
  }
  // A healthy fleet: only h100-a.
  auto nodes = ParseNodeListText(ReadFixture("nodes-small.json"), "s");
  ASSERT_OK(nodes);
  nodes->erase(std::remove_if(nodes->begin(), nodes->end(), [](const FleetNode& n) { return n.name != "h100-a"; }),
               nodes->end());
  FleetReport healthy = Analyze(std::move(*nodes), "s");
  EXPECT_EQ(ExitCodeOf(healthy), 0);
  EXPECT_TRUE(healthy.findings.empty());
}

TEST(FleetCompat, OneVerdictPerPoolWithRuleAndSmallestFix) {
  auto data = compat::LoadBuiltin();
  ASSERT_OK(data) << data.status();
  FleetReport r = Small();
  auto c = CheckPools(*data, r, "nvidia/cuda:13.0.2-base-ubuntu24.04");
  ASSERT_OK(c) << c.status();
  ASSERT_EQ(c->pools.size(), 4u);
  std::map<std::string, const PoolCompat*> by;
  for (const PoolCompat& p : c->pools) by[p.pool] = &p;
  EXPECT_EQ(by["h100-80gb-hbm3-580.95.05"]->report.verdict, compat::Verdict::kCompatible);
  EXPECT_EQ(by["h100-80gb-hbm3-570.172.08"]->report.verdict, compat::Verdict::kCompatibleWithCaveats);
  EXPECT_EQ(by["h100-80gb-hbm3-570.172.08"]->report.decision.rule, "forward-compat");
  const compat::CompatReport& v100 = by["tesla-v100-sxm2-16gb-535.261.03"]->report;
  EXPECT_EQ(v100.verdict, compat::Verdict::kIncompatible);
  EXPECT_EQ(v100.decision.rule, "toolkit-drops-arch");
  ASSERT_FALSE(v100.fixes.empty());
  EXPECT_THAT(v100.fixes.front().action, HasSubstr("CUDA 12.x"));
  EXPECT_EQ(by["a100-sxm4-80gb-535.261.03"]->nodes, 3);
  EXPECT_EQ(ExitCodeOf(*c), 1);

  auto ok = CheckPools(*data, r, "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime");
  ASSERT_OK(ok);
  EXPECT_EQ(ExitCodeOf(*ok), 0);
  EXPECT_EQ(ok->worst, compat::Verdict::kCompatibleWithCaveats);

  auto json = ToJson(*c);
  EXPECT_EQ(json["kind"], "FleetCompat");
  EXPECT_EQ(json["pools"][3]["verdict"], "incompatible");
  EXPECT_EQ(json["pools"][3]["rule"]["id"], "toolkit-drops-arch");
}

TEST(FleetCompat, UnknownAndMalformedImages) {
  auto data = compat::LoadBuiltin();
  ASSERT_OK(data);
  FleetReport r = Small();
  auto unknown = CheckPools(*data, r, "registry.example.com/team/trainer:v7");
  ASSERT_OK(unknown) << unknown.status();
  EXPECT_EQ(unknown->worst, compat::Verdict::kUnknown);
  EXPECT_EQ(ExitCodeOf(*unknown), 2);
  EXPECT_FALSE(unknown->pools[0].report.needed.empty());
  auto bad = CheckPools(*data, r, "Not An Image!!");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(FleetDrainPlan, WavesNeverExceedMaxUnavailableAndFailingNodesGoFirst) {
  FleetReport r = Small();
  for (int n : {1, 2, 3}) {
    DrainOptions o;
    o.to_driver = *ParseDriverTarget("580.95.05");
    o.max_unavailable = n;
    auto plan = PlanDrain(r, o);
    ASSERT_OK(plan) << plan.status();
    EXPECT_TRUE(plan->blocked.empty()) << plan->blocked;
    EXPECT_EQ(plan->nodes_to_upgrade, 5);
    EXPECT_THAT(plan->at_target, ElementsAre("h100-a", "h100-b"));
    std::set<std::string> planned;
    for (const Wave& w : plan->waves) {
      EXPECT_LE(w.unavailable_during, n) << "wave " << w.number;
      EXPECT_LE(static_cast<int>(w.nodes.size()), n);
      std::set<std::string> pools;
      for (const PlannedNode& p : w.nodes) {
        EXPECT_TRUE(planned.insert(p.name).second) << p.name << " twice";
        pools.insert(p.pool);
      }
      if (!w.pool.empty()) {
        EXPECT_EQ(pools.size(), 1u) << "pool by pool";
      }
    }
    EXPECT_EQ(planned.size(), 5u);
    // The node already down goes first, then the one failing validation.
    ASSERT_GE(plan->waves.size(), 2u);
    EXPECT_EQ(plan->waves[0].nodes[0].name, "a100-b");
    EXPECT_TRUE(plan->waves[0].nodes[0].already_unavailable);
    EXPECT_EQ(plan->waves[1].nodes[0].name, "h100-c");
    EXPECT_THAT(plan->waves[1].nodes[0].why_first, HasSubstr("DriverVersionMismatch"));
  }
}

TEST(FleetDrainPlan, UnavailableNodesOutsideThePlanHoldSlots) {
  FleetReport r = Small();
  DrainOptions o;
  o.to_driver = *ParseDriverTarget("535.261.03");  // a100-b (down) is at the target: it holds a slot
  o.max_unavailable = 2;
  auto plan = PlanDrain(r, o);
  ASSERT_OK(plan);
  EXPECT_THAT(plan->held, ElementsAre("a100-b"));
  for (const Wave& w : plan->waves) {
    EXPECT_EQ(static_cast<int>(w.nodes.size()), 1) << "one slot left";
    EXPECT_EQ(w.unavailable_during, 2);
  }
  EXPECT_THAT(plan->warnings, Contains(HasSubstr("downgrades them"))) << "580 and 570 nodes go down to 535";

  o.max_unavailable = 1;
  auto blocked = PlanDrain(r, o);
  ASSERT_OK(blocked);
  EXPECT_THAT(blocked->blocked, HasSubstr("a100-b"));
  EXPECT_EQ(ExitCodeOf(*blocked), 1);
}

TEST(FleetDrainPlan, PoolFilterAndNothingToDo) {
  FleetReport r = Small();
  DrainOptions o;
  o.to_driver = *ParseDriverTarget("580.95.05");
  o.max_unavailable = 2;
  o.pools = {"h100-80gb-hbm3-580.95.05"};
  auto none = PlanDrain(r, o);
  ASSERT_OK(none);
  EXPECT_TRUE(none->waves.empty());
  EXPECT_EQ(none->nodes_to_upgrade, 0);
  EXPECT_THAT(RenderText(*none), HasSubstr("nothing to do"));
  o.pools = {"no-such-pool"};
  auto bad = PlanDrain(r, o);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("--pool \"no-such-pool\": no such pool"));
}

TEST(FleetDrainPlan, BadFlags) {
  for (const char* bad : {"", "580", "latest", "580.x", "v580.95.05", "1.2.3", "580.95.05.1.2.3"}) {
    auto v = ParseDriverTarget(bad);
    EXPECT_FALSE(v.ok()) << bad;
    if (!v.ok()) {
      EXPECT_THAT(v.status().message(), HasSubstr("--to-driver")) << bad;
    }
  }
  EXPECT_OK(ParseDriverTarget("570.172"));
  EXPECT_EQ(*ParseMaxUnavailable("3", 100), 3);
  EXPECT_EQ(*ParseMaxUnavailable("10%", 192), 19);
  EXPECT_EQ(*ParseMaxUnavailable("1%", 20), 1) << "at least one";
  for (const char* bad : {"0", "-1", "", "abc", "0%", "101%", "2.5", "99999999999"}) {
    auto n = ParseMaxUnavailable(bad, 100);
    EXPECT_FALSE(n.ok()) << bad;
    if (!n.ok()) {
      EXPECT_THAT(n.status().message(), HasSubstr("--max-unavailable")) << bad;
    }
  }
}

TEST(FleetInput, MalformedJsonAndNotANodeList) {
  auto bad = ParseNodeListText("{\"items\": [", "nodes.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("nodes.json: line 1, column 12: not valid JSON"));
  auto pods = ParseNodeListText(R"({"kind":"PodList","items":[]})", "pods.json");
  ASSERT_FALSE(pods.ok());
  EXPECT_THAT(pods.status().message(), HasSubstr("kind \"PodList\", expected a NodeList"));
  auto no_items = ParseNodeListText(R"({"kind":"NodeList"})", "x");
  ASSERT_FALSE(no_items.ok());
  EXPECT_THAT(no_items.status().message(), HasSubstr("no \"items\" array"));
  auto no_name = ParseNodeListText(R"({"items":[{"metadata":{}}]})", "x");
  ASSERT_FALSE(no_name.ok());
  EXPECT_THAT(no_name.status().message(), HasSubstr("items[0]: a Node without metadata.name"));
  auto twice = ParseNodeListText(R"({"items":[{"metadata":{"name":"a"}},{"metadata":{"name":"a"}}]})", "x");
  ASSERT_FALSE(twice.ok());
  EXPECT_THAT(twice.status().message(), HasSubstr("Node \"a\" appears twice"));
  auto array = ParseNodeListText("[1,2]", "x");
  EXPECT_FALSE(array.ok());
  auto deep = ParseNodeListText(std::string(1000, '[') + std::string(1000, ']'), "x");
  EXPECT_FALSE(deep.ok()) << "nesting limit, not a stack overflow";
}

TEST(FleetInput, MissingFieldsAreAbsentNotErrors) {
  auto nodes = ParseNodeListText(R"({"kind":"NodeList","items":[
    {"metadata":{"name":"bare"}},
    {"metadata":{"name":"odd","labels":{"nvidia.com/gpu.present":"true","nvidia.com/gpu.count":"eight",
      "nvidia.com/cuda.driver-version.full":"r580"}},
     "spec":{"unschedulable":null},
     "status":{"capacity":{"nvidia.com/gpu":"1k"},"conditions":[null,{"type":"Ready"}]}}]})",
                                 "x");
  ASSERT_OK(nodes) << nodes.status();
  FleetReport r = Analyze(std::move(*nodes), "x");
  EXPECT_FALSE(NodeOf(r, "bare").has_gpus);
  const FleetNode& odd = NodeOf(r, "odd");
  EXPECT_TRUE(odd.has_gpus);
  EXPECT_FALSE(odd.driver.has_value());
  EXPECT_FALSE(odd.unschedulable);
  EXPECT_EQ(odd.warnings.size(), 3u);
  EXPECT_EQ(Find(r, "label-malformed").size(), 3u);
  EXPECT_EQ(r.pools.at(0).name, "unknown-gpu-unknown-driver");
  auto empty = ParseNodeListText(R"({"kind":"NodeList","items":null})", "x");
  ASSERT_OK(empty);
  EXPECT_TRUE(empty->empty());
}

TEST(FleetRender, JsonDocumentAndEscapedHtml) {
  auto nodes = ParseNodeListText(R"({"items":[{"metadata":{"name":"<script>alert(1)</script>",
    "labels":{"nvidia.com/gpu.present":"true","nvidia.com/gpu.product":"\"><img src=x onerror=alert(2)>"}},
    "status":{"conditions":[{"type":"Ready","status":"False","message":"<b>&'"}]}}]})",
                                 "x");
  ASSERT_OK(nodes) << nodes.status();
  FleetReport r = Analyze(std::move(*nodes), "x");
  const std::string html = RenderHtml(r);
  EXPECT_THAT(html, Not(HasSubstr("<script>")));
  EXPECT_THAT(html, Not(HasSubstr("<img")));
  EXPECT_THAT(html, Not(HasSubstr("<b>")));
  EXPECT_THAT(html, HasSubstr("&lt;script&gt;alert(1)&lt;/script&gt;"));
  EXPECT_THAT(html, Not(HasSubstr("http"))) << "no external asset";
  EXPECT_EQ(HtmlEscape("a&b<c>\"d'"), "a&amp;b&lt;c&gt;&quot;d&#39;");

  FleetReport small = Small();
  auto j = ToJson(small);
  EXPECT_EQ(j["apiVersion"], "gpunode/v1");
  EXPECT_EQ(j["kind"], "FleetReport");
  EXPECT_EQ(j["summary"]["gpuNodes"], 7);
  EXPECT_EQ(j["summary"]["healthy"], false);
  EXPECT_EQ(j["pools"].size(), 4u);
  EXPECT_EQ(j["nodes"].size(), 8u);
  EXPECT_EQ(j["findings"][0]["severity"], "error");
}

}  // namespace
}  // namespace gpunode::fleet
