// The agent's policy file (policyFile): a second file, written by gpunode's controller from NVIDIA's
// ClusterPolicy, whose keys apply over the agent config; only what a ClusterPolicy says, never a
// command line root runs or a file root writes.
#include <filesystem>
#include <fstream>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/agent/config.h"
#include "test/testing/status_matchers.h"

namespace gpunode::agent {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// The agent config the chart renders (deploy/helm/gpunode/templates/configmap-agent.yaml, default
// values with a device-plugin config file), with the policy file named.
constexpr char kChartConfig[] = R"(apiVersion: gpunode/v1
kind: AgentConfig
healthListen: ""
publishDir: /run/gpunode/publish
cdi:
  enabled: true
  args: [cdi, generate, --output, /var/run/cdi/nvidia.yaml, --hook-path, /usr/bin/gpunode, --device-name-strategy, both, --driver-root, /]
runtime:
  enabled: false
  args: [runtime, configure, --runtime, containerd, --cdi]
plugin:
  enabled: true
  kubeletDir: /var/lib/kubelet/device-plugins
  configFile: /etc/gpunode/device-plugin/config.yaml
  deviceListStrategy: cdi-cri
labels:
  enabled: true
  interval: 60s
exporter:
  enabled: true
  listen: ""
  collectInterval: 30000
policyFile: /etc/gpunode/policy/policy.yaml
)";

AgentConfig Chart() {
  auto c = ParseAgentConfig(kChartConfig, "agent.yaml");
  EXPECT_OK(c);
  return c.ok() ? *c : AgentConfig{};
}

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(PolicyFileTest, TheControllersFileAppliesOverTheChartsConfig) {
  AgentConfig c = Chart();
  EXPECT_EQ(c.policy_file, "/etc/gpunode/policy/policy.yaml");
  // What the controller writes for NVIDIA's chart rendered with device-plugin, MIG and metrics
  // ConfigMaps (test/upgrade/cluster_policy_test.cc compares the translation with this file).
  const std::string policy =
      Read(std::string(GPUNODE_SOURCE_DIR) + "/test/upgrade/data/chart-upgrade-policy.agent-policy.yaml");
  ASSERT_FALSE(policy.empty());
  ASSERT_OK(ApplyAgentPolicy(policy, "policy.yaml", &c));
  EXPECT_EQ(c.policy_source, "policy.yaml");
  EXPECT_EQ(c.policy_origin, "ClusterPolicy cluster-policy generation 0");
  EXPECT_TRUE(c.cdi.enabled);
  EXPECT_TRUE(c.runtime.enabled);  // the toolkit's switch; the command line stays the config's
  EXPECT_THAT(c.runtime.args, ElementsAre("runtime", "configure", "--runtime", "containerd", "--cdi"));
  EXPECT_EQ(c.plugin.config_dir, "/etc/gpunode/policy-device-plugin");
  EXPECT_EQ(c.plugin.config_file, "");  // exclusive with configDir: the policy's named configs win
  EXPECT_EQ(c.plugin.default_config, "any");
  EXPECT_EQ(c.plugin.mig_strategy, "mixed");
  EXPECT_EQ(c.plugin.device_list_strategy, "cdi-cri");  // not in the policy: the config's
  EXPECT_EQ(c.plugin.kubelet_dir, "/var/lib/kubelet/device-plugins");
  EXPECT_EQ(c.exporter.collectors, "/etc/gpunode/policy-exporter/dcgm-metrics.csv");
  EXPECT_EQ(c.exporter.collect_interval, std::chrono::milliseconds(30000));
  EXPECT_EQ(c.mig.config_file, "/etc/gpunode/policy-mig/config.yaml");
  EXPECT_TRUE(c.validator.enabled);
  EXPECT_EQ(ConfigToJson(c)["policyFile"], "/etc/gpunode/policy/policy.yaml");
}

TEST(PolicyFileTest, SwitchesAndTheRuntimeNameComeFromThePolicy) {
  AgentConfig c = Chart();
  ASSERT_OK(ApplyAgentPolicy(R"(kind: AgentPolicy
runtime:
  enabled: true
  args: [runtime, configure, --runtime, crio, --cdi]
plugin: {enabled: false}
labels: {enabled: false}
validator: {cuda: false}
mig: {configFile: ""}
)", "policy.yaml", &c));
  EXPECT_TRUE(c.runtime.enabled);
  EXPECT_THAT(c.runtime.args, ElementsAre("runtime", "configure", "--runtime", "crio", "--cdi"));
  EXPECT_FALSE(c.plugin.enabled);
  EXPECT_FALSE(c.labels.enabled);
  EXPECT_FALSE(c.validator.cuda);
  EXPECT_TRUE(c.exporter.enabled);
  EXPECT_EQ(c.plugin.config_file, "/etc/gpunode/device-plugin/config.yaml");  // no configDir given: kept
}

TEST(PolicyFileTest, AnEmptyPolicySetsNothing) {
  AgentConfig c = Chart();
  const auto before = ConfigToJson(c);
  ASSERT_OK(ApplyAgentPolicy("# nothing yet\n", "policy.yaml", &c));
  EXPECT_EQ(ConfigToJson(c), before);
  EXPECT_EQ(c.policy_source, "policy.yaml");
}

TEST(PolicyFileTest, OnlyWhatAClusterPolicySaysMayBeSetAndErrorsNameFileLineAndKey) {
  struct Case {
    const char* text;
    const char* error;
  } cases[] = {
      {"plugin:\n  enabled: true\n  kubeletDir: /tmp/evil\n",
       "policy.yaml:3: plugin.kubeletDir: not settable by a policy file (plugin: only enabled, configDir"},
      {"kind: AgentPolicy\nnodeName: n2\n", "policy.yaml:2: nodeName: not settable by a policy file (it sets only cdi"},
      {"dra: {enabled: true}\n", "policy.yaml:1: dra: not settable by a policy file"},
      {"policyFile: /etc/other.yaml\n", "policy.yaml:1: policyFile: not settable by a policy file"},
      {"cdi:\n  args: [cdi, generate]\n", "policy.yaml:2: cdi.args: not settable by a policy file (cdi: only enabled"},
      {"runtime:\n  globalArgs: [--nvml-library, /tmp/x.so]\n", "policy.yaml:2: runtime.globalArgs: not settable"},
      {"plugin:\n  enabled: maybe\n", "policy.yaml:2: plugin.enabled: expected true or false"},
      {"plugin:\n  migStrategy: all\n", "policy.yaml:2: plugin.migStrategy: expected one of none, single, mixed"},
      {"kind: AgentConfig\n", "policy.yaml:1: kind: expected AgentPolicy (a policy file)"},
      {"plugin: [enabled]\n", "policy.yaml:1: plugin: expected a map"},
      {"- a\n", "policy.yaml:1: expected a map"},
      {"plugin:\n  configDir: etc/configs\n", "policy.yaml:2: plugin.configDir: expected an absolute path"},
      {"mig:\n  configFile: /etc/../root/mig.yaml\n", "policy.yaml:2: mig.configFile: expected an absolute path"},
      {"exporter: {collectors: relative.csv}\n", "policy.yaml:1: exporter.collectors: expected an absolute path"},
      {"plugin: {enabled: true\n", "policy.yaml:"},
  };
  for (const Case& k : cases) {
    AgentConfig c = Chart();
    const auto before = ConfigToJson(c);
    Status st = ApplyAgentPolicy(k.text, "policy.yaml", &c);
    ASSERT_FALSE(st.ok()) << k.text;
    EXPECT_THAT(std::string(st.message()), HasSubstr(k.error)) << k.text;
    EXPECT_EQ(ConfigToJson(c), before) << "a refused policy changed the config: " << k.text;
    EXPECT_EQ(c.policy_source, "");
  }
}

// step_args' rules hold for a policy as for the config, and a policy never changes a value that
// is fixed while the agent runs: not even at start.
TEST(PolicyFileTest, APolicyCannotRunAnotherCommandOrChangeWhereRootWrites) {
  AgentConfig c = Chart();
  Status st = ApplyAgentPolicy("runtime:\n  enabled: true\n  args: [sim, hostroot, /tmp/x]\n", "policy.yaml", &c);
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(std::string(st.message()), HasSubstr("policy.yaml:3: runtime.args[0]: \"sim\""));
  st = ApplyAgentPolicy("runtime:\n  args: [runtime, configure, --runtime, containerd, --config, /etc/passwd]\n",
                        "policy.yaml", &c);
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(std::string(st.message()),
              HasSubstr("policy.yaml:2: runtime.args: --config would be \"/etc/passwd\" where the agent config "
                        "agent.yaml has \"\": a policy file never changes what runs as root or where root writes"));
  // The config names the engine's file: a policy's command line must name the same.
  auto with_config = ParseAgentConfig(
      "runtime:\n  args: [runtime, configure, --runtime, containerd, --config, /host/etc/containerd/config.toml]\n",
      "agent.yaml");
  ASSERT_OK(with_config);
  st = ApplyAgentPolicy("runtime:\n  args: [runtime, configure, --runtime, crio, --cdi]\n", "policy.yaml", &*with_config);
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(std::string(st.message()), HasSubstr("--config would be \"\" where the agent config"));
  EXPECT_OK(ApplyAgentPolicy("runtime:\n  args: [runtime, configure, --runtime, containerd, --config, "
                             "/host/etc/containerd/config.toml, --set-as-default]\n",
                             "policy.yaml", &*with_config));
  EXPECT_THAT(with_config->runtime.args, ::testing::Contains("--set-as-default"));
}

class PolicyFileLoadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("gpunode-policy-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }
  void Write(const std::string& name, const std::string& text) { std::ofstream(Path(name)) << text; }
  fs::path dir_;
};

TEST_F(PolicyFileLoadTest, AMissingPolicyFileIsNoOverlayAndEveryLoadReadsBothFiles) {
  Write("agent.yaml", "labels: {enabled: true}\npolicyFile: " + Path("policy/policy.yaml") + "\n");
  auto c = LoadAgentConfig(Path("agent.yaml"));
  ASSERT_OK(c);
  EXPECT_TRUE(c->labels.enabled);
  EXPECT_EQ(c->policy_source, "");  // the optional ConfigMap is not there yet
  fs::create_directories(dir_ / "policy");
  Write("policy/policy.yaml", "origin: ClusterPolicy p generation 2\nlabels: {enabled: false}\n");
  c = LoadAgentConfig(Path("agent.yaml"));  // what a reload does
  ASSERT_OK(c);
  EXPECT_FALSE(c->labels.enabled);
  EXPECT_EQ(c->policy_source, Path("policy/policy.yaml"));
  EXPECT_EQ(c->policy_origin, "ClusterPolicy p generation 2");
  Write("policy/policy.yaml", "labels:\n  enabled: false\n  interval: 5s\n");
  c = LoadAgentConfig(Path("agent.yaml"));
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()),
              HasSubstr(Path("policy/policy.yaml") + ":3: labels.interval: not settable by a policy file"));
  fs::remove(Path("policy/policy.yaml"));
  fs::create_directories(Path("policy/policy.yaml"));  // not a file: an error, not "no overlay"
  EXPECT_FALSE(LoadAgentConfig(Path("agent.yaml")).ok());
}

TEST_F(PolicyFileLoadTest, ThePolicyFileKeyIsAnAbsolutePath) {
  Write("agent.yaml", "policyFile: policy.yaml\n");
  auto c = LoadAgentConfig(Path("agent.yaml"));
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()), HasSubstr(":1: policyFile: expected an absolute path"));
}

}  // namespace
}  // namespace gpunode::agent
