// The node watcher: follows the agent's own Node (a watch, src/kube/node.h) and applies the GPU
// Operator's per-node labels within a second of their change, without restarting the pod:
//   nvidia.com/gpu.deploy.operands=false        every component off
//   nvidia.com/gpu.deploy.<operand>=false       that component off (NVIDIA's operand names or ours)
//   nvidia.com/device-plugin.config=<name>      the plugin (and labels) restart with configDir/<name>
//   nvidia.com/mig.config=<name>                that MIG layout (mig.configFile) through NVML; the
//                                               result in nvidia.com/mig.config.state, as NVIDIA's
//                                               mig-manager (pending, success, failed)
#include <mutex>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/agent/components.h"
#include "src/base/well_known.h"
#include "src/kube/node.h"
#include "src/mig/apply.h"
#include "src/mig/config.h"

namespace gpunode::agent {

std::vector<std::string> ComponentsOfDeployLabel(const std::string& key) {
  static const auto* const kMap = new std::map<std::string, std::vector<std::string>>{
      {"device-plugin", {"plugin"}},
      {"gpu-feature-discovery", {"labels"}},
      {"dcgm-exporter", {"exporter"}},
      {"dcgm", {"exporter"}},
      {"operator-validator", {"validator"}},
      {"container-toolkit", {"cdi", "runtime"}},
      {"plugin", {"plugin"}},
      {"dra", {"dra"}},
      {"labels", {"labels"}},
      {"exporter", {"exporter"}},
      {"validator", {"validator"}},
      {"cdi", {"cdi"}},
      {"runtime", {"runtime"}},
  };
  auto it = kMap->find(key);
  return it == kMap->end() ? std::vector<std::string>{} : it->second;
}

namespace {

constexpr const auto& kDeployPrefix = wellknown::kDeployLabelPrefix;
constexpr const auto& kPluginConfigLabel = wellknown::kLabelDevicePluginConfig;
constexpr const auto& kMigConfigLabel = wellknown::kLabelMigConfig;
constexpr const auto& kMigStateLabel = wellknown::kLabelMigConfigState;
// The writer of nvidia.com/mig.config.state (NVIDIA's mig-manager writes it too).
constexpr char kMigFieldManager[] = "gpunode-mig-manager";

std::map<std::string, std::string> LabelsOf(const nlohmann::json& node) {
  std::map<std::string, std::string> labels;
  if (node.is_object() && node.contains("metadata") && node["metadata"].is_object() &&
      node["metadata"].contains("labels") && node["metadata"]["labels"].is_object()) {
    for (const auto& [k, v] : node["metadata"]["labels"].items()) {
      if (v.is_string()) labels[k] = v.get<std::string>();
    }
  }
  return labels;
}

}  // namespace

NodeWatcher::NodeWatcher(NodeContext& ctx, const AgentConfig& c, Log& log, Harness& harness,
                         std::chrono::milliseconds barrier_timeout)
    : ctx_(ctx),
      log_(log),
      harness_(harness),
      barrier_deadline_(std::chrono::steady_clock::now() + barrier_timeout),
      barrier_timeout_(barrier_timeout) {
  Reconfigure(c);
}

void NodeWatcher::Reconfigure(const AgentConfig& c) {
  absl::MutexLock lock(&mu_);
  has_config_dir_ = !c.plugin.config_dir.empty();
  mig_ = c.mig;
}

void NodeWatcher::HoldUntilFirstRead() {
  absl::MutexLock lock(&mu_);
  if (barrier_released_) return;
  for (const char* c : kHeldUntilNodeRead) harness_.SetOff(c, OffReason::kStartBarrier, true);
  barrier_set_ = true;
}

void NodeWatcher::ReleaseBarrier(const std::string& why) {
  {
    absl::MutexLock lock(&mu_);
    if (barrier_released_) return;
    barrier_released_ = true;
    if (!barrier_set_) return;
  }
  barrier_changed_.notify_all();
  if (!why.empty()) log_.Warn(name(), why);
  for (const char* c : kHeldUntilNodeRead) harness_.SetOff(c, OffReason::kStartBarrier, false);
}

Status NodeWatcher::Run(std::stop_token stop) {
  if (ctx_.kube() == nullptr || ctx_.node_name().empty()) {
    ReleaseBarrier("no Kubernetes API or no node name: starting without per-node settings");
    return absl::FailedPreconditionError("no Kubernetes API or no node name");
  }
  // The start barrier has a deadline: a Node that cannot be read (the API server down) must not
  // keep the plugin from registering for ever.
  std::jthread timer([this](std::stop_token timer_stop) {
    std::mutex m;
    std::unique_lock<std::mutex> lock(m);
    const bool released = barrier_changed_.wait_until(lock, timer_stop, barrier_deadline_, [this] {
      absl::MutexLock l(&mu_);
      return barrier_released_;
    });
    if (!released && !timer_stop.stop_requested()) {
      ReleaseBarrier(absl::StrCat("the Node was not read within ",
                                  std::chrono::duration<double>(barrier_timeout_).count(),
                                  " s: starting plugin and labels without its per-node settings"));
    }
  });
  // A watch holds its connection: a client of its own.
  kube::Client client(ctx_.kube()->connection());
  kube::WatchNodeOptions o;
  o.clock = &ctx_.clock();
  o.log = [this](const std::string& m) { log_.Info(name(), m); };
  Status st = kube::WatchNode(
      client, ctx_.node_name(),
      [this](const nlohmann::json& node) {
        Apply(node);
        return true;
      },
      stop, o);
  if (!st.ok() && !stop.stop_requested()) {
    ReleaseBarrier(absl::StrCat("the Node cannot be read (", st.message(),
                                "): starting plugin and labels without its per-node settings"));
  }
  return st;
}

void NodeWatcher::Apply(const nlohmann::json& node) {
  ctx_.SetNode(std::make_shared<const nlohmann::json>(node));
  const std::map<std::string, std::string> labels = LabelsOf(node);
  bool has_config_dir;
  {
    absl::MutexLock lock(&mu_);
    has_config_dir = has_config_dir_;
  }
  const bool first = !seen_.load();
  // Switches: this watcher owns the kNodeLabel reason, nothing else (the config's switch is the
  // kConfig reason; a reload never undoes a label's veto).
  std::map<std::string, std::string> off_because;
  if (auto it = labels.find(absl::StrCat(kDeployPrefix, "operands")); it != labels.end() && it->second == "false") {
    for (const std::string& c : ComponentNames()) off_because[c] = it->first + "=false";
  }
  for (const auto& [k, v] : labels) {
    if (!absl::StartsWith(k, kDeployPrefix) || v != "false") continue;
    for (const std::string& c : ComponentsOfDeployLabel(k.substr(sizeof(kDeployPrefix) - 1))) off_because[c] = k + "=false";
  }
  for (const std::string& c : ComponentNames()) {
    auto it = off_because.find(c);
    harness_.SetOff(c, OffReason::kNodeLabel, it != off_because.end(), it != off_because.end() ? it->second : "");
  }
  // The device-plugin config: read by plugin and labels when they start. At the first read they
  // have not started yet (the start barrier), so nothing restarts.
  std::string cfg;
  if (auto it = labels.find(kPluginConfigLabel); it != labels.end()) cfg = it->second;
  if (cfg != ctx_.plugin_config_name()) {
    if (!has_config_dir) {
      if (!warned_no_dir_) log_.Warn(name(), absl::StrCat(kPluginConfigLabel, "=", cfg, " ignored: plugin.configDir is not set"));
      warned_no_dir_ = true;
    } else {
      ctx_.set_plugin_config_name(cfg);
      const bool running = BarrierReleased();
      log_.Info(name(), absl::StrCat(kPluginConfigLabel, " ", cfg.empty() ? "removed: the default config" : "= " + cfg,
                                     running ? ": restarting plugin and labels" : ""));
      if (running) {
        harness_.Restart("plugin");
        harness_.Restart("labels");
      }
    }
  }
  // The MIG layout: applied before the plugin starts (it is held until this read is done).
  if (auto it = labels.find(kMigConfigLabel); it != labels.end() && it->second != mig_applied_) {
    mig_applied_ = it->second;
    auto state = labels.find(kMigStateLabel);
    ApplyMig(it->second, state == labels.end() ? "" : state->second);
  }
  seen_ = true;
  if (first) ReleaseBarrier("");
}

bool NodeWatcher::BarrierReleased() const {
  absl::MutexLock lock(&mu_);
  return barrier_released_;
}

void NodeWatcher::SetMigState(const std::string& state, const std::string& now) {
  if (state == now) return;
  nlohmann::json patch = {{"metadata", {{"labels", {{kMigStateLabel, state}}}}}};
  // Its own field manager: written as "gpunode" (the User-Agent's name for a merge patch), the
  // labels component's apply took it for an earlier agent's label and removed it again.
  const std::string path =
      absl::StrCat("/api/v1/nodes/", kube::UrlEscape(ctx_.node_name()), "?fieldManager=", kMigFieldManager);
  if (auto r = ctx_.kube()->MergePatch(path, patch); !r.ok()) {
    log_.Warn(name(), absl::StrCat(kMigStateLabel, " not set: ", r.status().message()));
  }
}

void NodeWatcher::ApplyMig(const std::string& config, const std::string& state_now) {
  MigSection mig;
  {
    absl::MutexLock lock(&mu_);
    mig = mig_;
  }
  if (mig.config_file.empty()) {
    log_.Warn(name(), absl::StrCat(kMigConfigLabel, "=", config, " ignored: mig.configFile is not set"));
    return;
  }
  const std::string what = absl::StrCat(kMigConfigLabel, "=", config);
  auto file = mig::LoadMigConfigFile(mig.config_file);
  const gpu::NvmlLibrary* nvml = ctx_.Nvml();
  // First a plan: a layout already in place changes nothing and restarts nothing.
  StatusOr<mig::MigReport> plan = !file.ok() ? StatusOr<mig::MigReport>(file.status())
                                  : nvml == nullptr
                                      ? StatusOr<mig::MigReport>(absl::FailedPreconditionError("NVML is not usable"))
                                      : mig::ApplyMigConfig(*nvml, *file, config, {true, mig.allow_real});
  if (!plan.ok()) {
    log_.Error(name(), absl::StrCat(what, ": ", plan.status().message()));
    SetMigState("failed", state_now);
    return;
  }
  if (plan->plan.empty()) {
    log_.Info(name(), absl::StrCat(what, ": already in place; nothing restarts"));
    SetMigState("success", state_now);
    return;
  }
  SetMigState("pending", state_now);
  // The plugin is off while the layout changes: the kubelet never gets devices that are going.
  const bool running = BarrierReleased();
  harness_.SetOff("plugin", OffReason::kMigChange, true, what);
  if (!harness_.WaitStopped("plugin", std::chrono::seconds(30))) {
    log_.Warn(name(), absl::StrCat(what, ": the plugin did not stop within 30 s; applying the layout anyway"));
  }
  StatusOr<mig::MigReport> report = mig::ApplyMigConfig(*nvml, *file, config, {false, mig.allow_real});
  Status st = report.ok() ? report->status : report.status();
  if (auto inv = ctx_.Inventory(/*refresh=*/true); !inv.ok()) log_.Warn(name(), std::string(inv.status().message()));
  if (!st.ok()) {
    log_.Error(name(), absl::StrCat(what, ": ", st.message()));
  } else {
    log_.Info(name(), absl::StrCat(what, ": ", report->done.size(), " steps applied",
                                   running ? "; plugin and labels start over the new devices" : ""));
  }
  harness_.SetOff("plugin", OffReason::kMigChange, false);
  if (running) harness_.Restart("labels");
  SetMigState(st.ok() ? "success" : "failed", "pending");
}

std::unique_ptr<NodeWatcher> MakeNodeWatcher(NodeContext& ctx, const AgentConfig& c, Log& log, Harness& harness) {
  return std::make_unique<NodeWatcher>(ctx, c, log, harness);
}

}  // namespace gpunode::agent
