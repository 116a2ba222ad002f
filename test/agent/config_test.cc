#include "src/agent/config.h"

#include "gtest/gtest.h"
#include "src/agent/components.h"
#include "test/testing/status_matchers.h"

namespace gpunode::agent {
namespace {

TEST(AgentConfigTest, EmptyFileGivesNvidiasDefaults) {
  auto c = ParseAgentConfig("", "agent.yaml");
  ASSERT_OK(c) << c.status();
  EXPECT_TRUE(c->plugin.enabled);
  EXPECT_TRUE(c->labels.enabled);
  EXPECT_TRUE(c->exporter.enabled);
  EXPECT_TRUE(c->validator.enabled);
  EXPECT_FALSE(c->cdi.enabled);
  EXPECT_FALSE(c->runtime.enabled);
  EXPECT_EQ(c->exporter.listen, ":9400");
  EXPECT_EQ(c->exporter.collect_interval, std::chrono::milliseconds(30000));
  EXPECT_EQ(c->plugin.kubelet_dir, "/var/lib/kubelet/device-plugins");
  EXPECT_EQ(c->labels.interval, std::chrono::seconds(60));
}

TEST(AgentConfigTest, SectionsAreRead) {
  auto c = ParseAgentConfig(R"(apiVersion: gpunode/v1
kind: AgentConfig
logFormat: json
exporter:
  enabled: false
  collectInterval: 1000
plugin:
  configDir: /etc/gpunode/device-plugin-configs
  defaultConfig: default
  healthRecovery: 30s
cdi:
  enabled: true
  args: [cdi, generate, --driver-root, /]
validator:
  cuda: false
  retry: 5s
)", "agent.yaml");
  ASSERT_OK(c) << c.status();
  EXPECT_EQ(c->log_format, "json");
  EXPECT_FALSE(c->exporter.enabled);
  EXPECT_EQ(c->exporter.collect_interval, std::chrono::milliseconds(1000));  // bare = ms, as dcgm-exporter -c
  EXPECT_EQ(c->plugin.config_dir, "/etc/gpunode/device-plugin-configs");
  EXPECT_EQ(c->plugin.health_recovery, std::chrono::seconds(30));
  EXPECT_TRUE(c->cdi.enabled);
  ASSERT_EQ(c->cdi.args.size(), 4u);
  EXPECT_EQ(c->cdi.args[1], "generate");
  EXPECT_FALSE(c->validator.cuda);
  EXPECT_EQ(c->validator.retry, std::chrono::seconds(5));
}

TEST(AgentConfigTest, ErrorsNameFileLineAndKeyPath) {
  struct Case {
    const char* text;
    const char* want;
  } cases[] = {
      {"plugin:\n  enabeld: true\n", "agent.yaml:2: plugin: unknown key \"enabeld\" (known: enabled, kubeletDir, "},
      {"exporter:\n  enabled: yes please\n", "agent.yaml:2: exporter.enabled: expected true or false, got \"yes please\""},
      {"labels:\n  interval: soon\n", "agent.yaml:2: labels.interval: expected a duration such as 30s, 5m or 500ms, got \"soon\""},
      {"kind: ClusterPolicy\n", "agent.yaml:1: kind: expected AgentConfig, got \"ClusterPolicy\""},
      {"plugin: [1, 2]\n", "agent.yaml:1: plugin: expected a map, got a list"},
      {"logFormat: xml\n", "agent.yaml:1: logFormat: expected one of text, json, got \"xml\""},
      {"plugin:\n  migStrategy: half\n", "agent.yaml:2: plugin.migStrategy: expected one of none, single, mixed, got \"half\""},
      {"kubernetes:\n  daemonset: gpunode\n", "agent.yaml:2: kubernetes.daemonset: expected NAMESPACE/NAME, got \"gpunode\""},
      {"exporter:\n  collectInterval: 10\n", "agent.yaml:2: exporter.collectInterval: expected 100ms to 1h"},
      {"cdi:\n  args: generate\n", "agent.yaml:2: cdi.args: expected a list of strings, got \"generate\""},
      {"plugin:\n  configFile: a.yaml\n  configDir: /d\n", "configFile and configDir are exclusive"},
      {"nope: 1\n", "agent.yaml:1: unknown key \"nope\" (known: apiVersion, kind, "},
      {"plugin: {\n", "agent.yaml"},
  };
  for (const Case& c : cases) {
    auto r = ParseAgentConfig(c.text, "agent.yaml");
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_NE(std::string(r.status().message()).find(c.want), std::string::npos)
        << "got: " << r.status().message() << "\nwant: " << c.want;
  }
}

TEST(AgentConfigTest, MissingFileIsAnErrorNamingIt) {
  auto r = LoadAgentConfig("/nonexistent/agent.yaml");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message()).find("/nonexistent/agent.yaml"), std::string::npos);
  auto none = LoadAgentConfig("");
  ASSERT_OK(none);
}

TEST(AgentConfigTest, PrintedConfigParsesBackToTheSame) {
  auto c = ParseAgentConfig("exporter:\n  collectInterval: 1500ms\nvalidator:\n  interval: 10m\n", "a.yaml");
  ASSERT_OK(c);
  const std::string json = ConfigToJson(*c).dump();
  auto again = ParseAgentConfig(json, "printed");
  ASSERT_OK(again) << again.status() << "\n" << json;
  EXPECT_EQ(ConfigToJson(*again), ConfigToJson(*c));
}

TEST(DeployLabelsTest, NvidiaOperandNamesAndOursMapToComponents) {
  EXPECT_EQ(ComponentsOfDeployLabel("device-plugin"), std::vector<std::string>{"plugin"});
  EXPECT_EQ(ComponentsOfDeployLabel("gpu-feature-discovery"), std::vector<std::string>{"labels"});
  EXPECT_EQ(ComponentsOfDeployLabel("dcgm-exporter"), std::vector<std::string>{"exporter"});
  EXPECT_EQ(ComponentsOfDeployLabel("operator-validator"), std::vector<std::string>{"validator"});
  EXPECT_EQ(ComponentsOfDeployLabel("container-toolkit"), (std::vector<std::string>{"cdi", "runtime"}));
  EXPECT_EQ(ComponentsOfDeployLabel("exporter"), std::vector<std::string>{"exporter"});
  EXPECT_TRUE(ComponentsOfDeployLabel("mig-manager-typo").empty());
}

TEST(ReasonTest, FindingIdsBecomeConditionReasons) {
  EXPECT_EQ(CamelCaseReason("driver.version-mismatch"), "DriverVersionMismatch");
  EXPECT_EQ(CamelCaseReason("gpu.lost"), "GpuLost");
  EXPECT_EQ(CamelCaseReason(""), "Unknown");
}

TEST(RunChildTest, CapturesOutputExitCodeAndTimesOut) {
  auto r = RunChild({"/bin/sh", "-c", "echo out; echo err >&2; exit 7"}, std::chrono::seconds(5));
  ASSERT_OK(r) << r.status();
  EXPECT_EQ(r->exit_code, 7);
  EXPECT_EQ(r->out, "out\n");
  EXPECT_EQ(r->err, "err\n");
  auto slow = RunChild({"/bin/sleep", "5"}, std::chrono::milliseconds(200));
  ASSERT_FALSE(slow.ok());
  EXPECT_TRUE(absl::IsDeadlineExceeded(slow.status())) << slow.status();
  auto missing = RunChild({"/nonexistent/gpunode"}, std::chrono::seconds(1));
  EXPECT_FALSE(missing.ok());
}

}  // namespace
}  // namespace gpunode::agent
