#include "src/agent/config.h"

#include <signal.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/agent/components.h"
#include "src/agent/step_args.h"
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

TEST(AgentConfigTest, ExporterPodLabelsAndUidAreReadAndCheckedAtLoad) {
  auto c = ParseAgentConfig(
      "exporter:\n  podLabels: true\n  podLabelAllowlist: [\"^team$\", app]\n  podUid: true\n", "agent.yaml");
  ASSERT_OK(c) << c.status();
  EXPECT_TRUE(c->exporter.pod_labels);
  EXPECT_TRUE(c->exporter.pod_uid);
  EXPECT_EQ(c->exporter.pod_label_allowlist, (std::vector<std::string>{"^team$", "app"}));
  auto off = ParseAgentConfig("", "agent.yaml");
  ASSERT_OK(off);
  EXPECT_FALSE(off->exporter.pod_labels);
  EXPECT_FALSE(off->exporter.pod_uid);
  // A pattern that does not compile is refused at load, naming it (dcgm-exporter would skip it).
  auto bad = ParseAgentConfig("exporter:\n  podLabels: true\n  podLabelAllowlist: [\"a(b\"]\n", "agent.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()),
              ::testing::HasSubstr("agent.yaml:3: exporter.podLabelAllowlist: pod label allowlist pattern \"a(b\" "
                                   "does not compile: "));
  // They are read from the API server: not without it.
  auto no_api = ParseAgentConfig("kubernetes:\n  enabled: false\nexporter:\n  podUid: true\n", "agent.yaml");
  ASSERT_FALSE(no_api.ok());
  EXPECT_THAT(std::string(no_api.status().message()),
              ::testing::HasSubstr("exporter.podUid: expected false while kubernetes.enabled is false"));
  auto printed = ParseAgentConfig(ConfigToJson(*c).dump(), "printed");
  ASSERT_OK(printed) << printed.status();
  EXPECT_EQ(ConfigToJson(*printed), ConfigToJson(*c));
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

// The chart's cdi and runtime steps (deploy/helm/gpunode/templates/configmap-agent.yaml), simulate
// mode included: accepted at start.
constexpr char kChartSteps[] = R"(cdi:
  enabled: true
  globalArgs: [--host-root, /, --nvml-library, /usr/lib/gpunode/libgpunode-simnvml.so, --cuda-library, /usr/lib/gpunode/libgpunode-simnvml.so]
  args:
    - cdi
    - generate
    - --output
    - /var/run/cdi/nvidia.yaml
    - --hook-path
    - "/usr/bin/gpunode"
    - --device-name-strategy
    - both
    - --driver-root
    - "/var/lib/gpunode/sim"
    - --disable-hook
    - all
runtime:
  enabled: true
  args: [runtime, configure, --runtime, containerd, --config, "/host/etc/containerd/config.toml", --set-as-default, --cdi]
)";

TEST(StepArgsTest, TheChartsStepsAndTheDefaultsAreAccepted) {
  auto c = ParseAgentConfig(kChartSteps, "agent.yaml");
  ASSERT_OK(c) << c.status();
  EXPECT_EQ(c->cdi.global_args.size(), 6u);
  auto defaults = ParseAgentConfig("", "agent.yaml");
  ASSERT_OK(defaults);
  EXPECT_FALSE(CheckStepArgs("cdi", defaults->cdi.args, {}).has_value());
  EXPECT_FALSE(CheckStepArgs("runtime", defaults->runtime.args, {}).has_value());
  EXPECT_FALSE(CheckStepArgs("cdi", {"cdi", "generate", "--output=/tmp/x/nvidia.yaml", "--disable-hook",
                                     "create-symlinks,update-ldcache", "--disable-hook", "all"},
                             {})
                   .has_value());
}

TEST(StepArgsTest, AnyOtherCommandOrFlagIsRefusedNamingTheArg) {
  struct Case {
    const char* text;
    const char* want;
  } cases[] = {
      // Another command: root on every GPU node.
      {"cdi:\n  args: [sim, hostroot, --output, /]\n",
       "agent.yaml:2: cdi.args[0]: \"sim\": the cdi step runs only `gpunode cdi generate ...`"},
      {"runtime:\n  args: [cdi, generate]\n", "runtime.args[0]: \"cdi\": the runtime step runs only `gpunode runtime configure ...`"},
      {"cdi:\n  args: [cdi]\n", "cdi.args: the cdi step runs only `gpunode cdi generate ...`"},
      // A flag the chart does not render.
      {"runtime:\n  args: [runtime, configure, --runtime, containerd, --runtime-path, /tmp/x]\n",
       "runtime.args[4]: flag \"--runtime-path\" is not accepted for gpunode runtime configure (accepted: --runtime, "
       "--config, --set-as-default, --cdi)"},
      {"cdi:\n  args: [cdi, generate, extra]\n", "cdi.args[2]: argument \"extra\" is not accepted for gpunode cdi generate"},
      // A global option hidden after the subcommand (CLI11 lets it fall through).
      {"cdi:\n  args: [cdi, generate, --nvml-library, /tmp/evil.so]\n",
       "cdi.args[2]: flag \"--nvml-library\" is not accepted for gpunode cdi generate"},
      {"cdi:\n  args: [cdi, generate, --output, --nvml-library]\n", "--output needs a value, not \"--nvml-library\""},
      {"cdi:\n  args: [cdi, generate, --output]\n", "cdi.args: --output needs a value"},
      {"cdi:\n  args: [cdi, generate, --output, relative.yaml]\n",
       "--output \"relative.yaml\": expected an absolute path without \"..\""},
      {"cdi:\n  args: [cdi, generate, --hook-path, /usr/bin/../../tmp/x]\n", "expected an absolute path without \"..\""},
      {"cdi:\n  args: [cdi, generate, --device-name-strategy, all]\n", "expected index, uuid, both"},
      {"cdi:\n  args: [cdi, generate, --output, /a.yaml, --output, /b.yaml]\n", "cdi.args[4]: --output is given twice"},
      {"runtime:\n  args: [runtime, configure, --cdi=yes]\n", "--cdi takes no value"},
      {"cdi:\n  globalArgs: [--simulate, dgx-h200]\n",
       "cdi.globalArgs[0]: flag \"--simulate\" is not accepted for the steps' global options (accepted: --host-root, "
       "--nvml-library, --cuda-library)"},
  };
  for (const Case& c : cases) {
    auto r = ParseAgentConfig(c.text, "agent.yaml");
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_NE(std::string(r.status().message()).find(c.want), std::string::npos)
        << "got: " << r.status().message() << "\nwant: " << c.want;
  }
}

TEST(StepArgsTest, AReloadMayNotChangeWhatLoadsCodeOrWhereRootWrites) {
  auto running = ParseAgentConfig(kChartSteps, "agent.yaml");
  ASSERT_OK(running) << running.status();
  // Other settings may change.
  std::string same = kChartSteps;
  same.replace(same.find("    - both"), 10, "    - uuid");
  auto next = ParseAgentConfig(same + "exporter: {collectInterval: 2000}\n", "agent.yaml");
  ASSERT_OK(next) << next.status();
  EXPECT_OK(CheckReloadable(*running, *next));
  struct Case {
    std::string from, to, want;
  } cases[] = {
      {"/usr/lib/gpunode/libgpunode-simnvml.so, --cuda", "/tmp/evil.so, --cuda",
       "cdi.globalArgs: --nvml-library changed from \"/usr/lib/gpunode/libgpunode-simnvml.so\" to \"/tmp/evil.so\""},
      {"\"/usr/bin/gpunode\"", "\"/tmp/hook\"", "cdi.args: --hook-path changed from \"/usr/bin/gpunode\" to \"/tmp/hook\""},
      {"\"/var/lib/gpunode/sim\"", "\"/tmp/driver\"", "cdi.args: --driver-root changed"},
      {"/var/run/cdi/nvidia.yaml", "/etc/cdi/other.yaml", "cdi.args: --output changed"},
      {"--host-root, /, ", "", "cdi.globalArgs: --host-root changed from \"/\" to \"\""},
      {"\"/host/etc/containerd/config.toml\"", "\"/host/etc/shadow\"", "runtime.args: --config changed"},
  };
  for (const Case& c : cases) {
    std::string text = kChartSteps;
    ASSERT_NE(text.find(c.from), std::string::npos) << c.from;
    text.replace(text.find(c.from), c.from.size(), c.to);
    auto changed = ParseAgentConfig(text, "agent.yaml");
    ASSERT_OK(changed) << changed.status();
    Status st = CheckReloadable(*running, *changed);
    EXPECT_TRUE(absl::IsFailedPrecondition(st)) << st;
    EXPECT_NE(std::string(st.message()).find(c.want), std::string::npos) << "got: " << st << "\nwant: " << c.want;
    EXPECT_NE(std::string(st.message()).find("takes effect when the agent's pod restarts"), std::string::npos) << st;
  }
}

TEST(StepArgsTest, TheStepItselfRefusesACommandLineTheReaderWouldRefuse) {
  AgentConfig c;
  c.cdi.enabled = true;
  c.cdi.args = {"sim", "hostroot", "--output", "/"};  // built in code, not read from a file
  NodeContextOptions o;
  o.self_args = {"/bin/false"};
  NodeContext ctx(std::move(o));
  Log log(Log::Format::kText, [](const std::string&) {});
  auto step = MakeOneShot("cdi", ctx, c.cdi, log);
  Status st = step->Run(std::stop_token());
  EXPECT_TRUE(absl::IsInvalidArgument(st)) << st;
  EXPECT_NE(std::string(st.message()).find("cdi.args[0]"), std::string::npos) << st;
}

TEST(AgentConfigTest, StopTimeoutIsReadAndBounded) {
  auto c = ParseAgentConfig("stopTimeout: 3s\n", "agent.yaml");
  ASSERT_OK(c) << c.status();
  EXPECT_EQ(c->stop_timeout, std::chrono::seconds(3));
  EXPECT_EQ(ParseAgentConfig("", "a")->stop_timeout, std::chrono::seconds(10));
  auto bad = ParseAgentConfig("stopTimeout: 1h\n", "agent.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string(bad.status().message()).find("agent.yaml:1: stopTimeout: expected 100ms to 5m"), std::string::npos)
      << bad.status();
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

TEST(RunChildTest, AChildThatLeftSomethingHoldingItsPipesDoesNotHoldTheCaller) {
  // The child exits at once; what it started (outside its process group) keeps stdout open.
  auto start = std::chrono::steady_clock::now();
  auto r = RunChild({"/bin/sh", "-c", "setsid sleep 4 & echo started"}, std::chrono::seconds(20));
  auto took = std::chrono::steady_clock::now() - start;
  ASSERT_OK(r) << r.status();
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_EQ(r->out, "started\n");
  EXPECT_LT(took, std::chrono::milliseconds(2500)) << "RunChild read until the grandchild ended";
  // Killed at its timeout: the same.
  start = std::chrono::steady_clock::now();
  auto slow = RunChild({"/bin/sh", "-c", "setsid sleep 4 & sleep 4"}, std::chrono::milliseconds(200));
  took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(slow.ok());
  EXPECT_TRUE(absl::IsDeadlineExceeded(slow.status())) << slow.status();
  EXPECT_LT(took, std::chrono::milliseconds(2500)) << "RunChild kept polling after the kill";
}

TEST(RunChildTest, ATimeoutKillsWhatTheChildStartedInItsGroup) {
  char dir[] = "/tmp/gpunode-runchild.XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string pidfile = std::string(dir) + "/pid";
  auto r = RunChild({"/bin/sh", "-c", "sleep 30 & echo $! > " + pidfile + "; wait"}, std::chrono::milliseconds(300));
  ASSERT_FALSE(r.ok());
  std::ifstream in(pidfile);
  int pid = 0;
  in >> pid;
  ASSERT_GT(pid, 0);
  bool gone = false;
  for (int i = 0; i < 100 && !gone; ++i) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    const size_t close = text.rfind(')');
    gone = text.empty() || (close != std::string::npos && close + 2 < text.size() && text[close + 2] == 'Z');
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(gone) << "the grandchild " << pid << " outlived the timeout";
  std::filesystem::remove_all(dir);
}

TEST(GateTest, WaitGateDecidedWakesWhenTheFirstCheckDecides) {
  NodeContextOptions o;
  o.gate_pending = true;
  NodeContext ctx(std::move(o));
  EXPECT_FALSE(ctx.WaitGateDecided(std::chrono::steady_clock::now() + std::chrono::milliseconds(30), {}));
  std::chrono::steady_clock::time_point set_at;
  std::thread setter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    set_at = std::chrono::steady_clock::now();
    ctx.SetGate({true, "AllChecksPassed", "ok"});
  });
  EXPECT_TRUE(ctx.WaitGateDecided(std::chrono::steady_clock::now() + std::chrono::seconds(10), {}));
  const auto woke = std::chrono::steady_clock::now();
  setter.join();
  EXPECT_LT(woke - set_at, std::chrono::milliseconds(50));
  // A stop ends the wait at once.
  NodeContextOptions o2;
  NodeContext pending(std::move(o2));
  std::stop_source stop;
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    stop.request_stop();
  });
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(pending.WaitGateDecided(std::chrono::steady_clock::now() + std::chrono::seconds(10), stop.get_token()));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  stopper.join();
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
