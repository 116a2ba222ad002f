// The node watcher: follows the agent's own Node (a watch, src/kube/node.h) and applies the GPU
// Operator's per-node labels within a second of their change, without restarting the pod:
//   nvidia.com/gpu.deploy.operands=false        every component off
//   nvidia.com/gpu.deploy.<operand>=false       that component off (NVIDIA's operand names or ours)
//   nvidia.com/device-plugin.config=<name>      the plugin (and labels) restart with configDir/<name>
//   nvidia.com/mig.config=<name>                that MIG layout (mig.configFile) through NVML; the
//                                               result in nvidia.com/mig.config.state, as NVIDIA's
//                                               mig-manager (pending, success, failed)
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/agent/components.h"
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

constexpr char kDeployPrefix[] = "nvidia.com/gpu.deploy.";
constexpr char kPluginConfigLabel[] = "nvidia.com/device-plugin.config";
constexpr char kMigConfigLabel[] = "nvidia.com/mig.config";
constexpr char kMigStateLabel[] = "nvidia.com/mig.config.state";

class NodeWatcher final : public Component {
 public:
  NodeWatcher(NodeContext& ctx, const AgentConfig& c, Log& log, Harness& harness)
      : ctx_(ctx), log_(log), harness_(harness) {
    configured_ = {{"cdi", c.cdi.enabled},           {"runtime", c.runtime.enabled},
                   {"validator", c.validator.enabled}, {"plugin", c.plugin.enabled},
                   {"labels", c.labels.enabled},       {"exporter", c.exporter.enabled}};
    has_config_dir_ = !c.plugin.config_dir.empty();
    mig_ = c.mig;
  }
  std::string name() const override { return "node"; }
  bool Ready() const override { return seen_.load(); }

  Status Run(std::stop_token stop) override {
    if (ctx_.kube() == nullptr || ctx_.node_name().empty()) {
      return absl::FailedPreconditionError("no Kubernetes API or no node name");
    }
    // A watch holds its connection: a client of its own.
    kube::Client client(ctx_.kube()->connection());
    std::atomic<bool> stop_flag{false};
    std::stop_callback on_stop(stop, [&] { stop_flag = true; });
    kube::WatchNodeOptions o;
    o.log = [this](const std::string& m) { log_.Info(name(), m); };
    return kube::WatchNode(
        client, ctx_.node_name(),
        [this](const nlohmann::json& node) {
          Apply(node);
          return true;
        },
        stop_flag, o);
  }

 private:
  void Apply(const nlohmann::json& node) {
    std::map<std::string, std::string> labels;
    if (node.contains("metadata") && node["metadata"].contains("labels") && node["metadata"]["labels"].is_object()) {
      for (const auto& [k, v] : node["metadata"]["labels"].items()) {
        if (v.is_string()) labels[k] = v.get<std::string>();
      }
    }
    // Switches.
    std::map<std::string, std::string> off_because;
    if (auto it = labels.find(absl::StrCat(kDeployPrefix, "operands")); it != labels.end() && it->second == "false") {
      for (const auto& [c, on] : configured_) off_because[c] = it->first + "=false";
    }
    for (const auto& [k, v] : labels) {
      if (!absl::StartsWith(k, kDeployPrefix) || v != "false") continue;
      for (const std::string& c : ComponentsOfDeployLabel(k.substr(sizeof(kDeployPrefix) - 1))) off_because[c] = k + "=false";
    }
    for (const auto& [c, on] : configured_) {
      const bool want = on && !off_because.count(c);
      auto prev = applied_.find(c);
      if (prev != applied_.end() && prev->second == want) continue;
      applied_[c] = want;
      if (prev == applied_.end() && want) continue;  // as started
      if (on) {
        log_.Info(name(), want ? absl::StrCat(c, ": switched on (no deploy label turns it off)")
                               : absl::StrCat(c, ": switched off by ", off_because[c]));
        harness_.SetEnabled(c, want);
      }
    }
    // The device-plugin config.
    std::string cfg;
    if (auto it = labels.find(kPluginConfigLabel); it != labels.end()) cfg = it->second;
    if (cfg != ctx_.plugin_config_name()) {
      if (!has_config_dir_) {
        if (!warned_no_dir_) log_.Warn(name(), absl::StrCat(kPluginConfigLabel, "=", cfg, " ignored: plugin.configDir is not set"));
        warned_no_dir_ = true;
      } else {
        log_.Info(name(), absl::StrCat(kPluginConfigLabel, " ", cfg.empty() ? "removed: the default config" : "= " + cfg,
                                       ": restarting plugin and labels"));
        ctx_.set_plugin_config_name(cfg);
        harness_.Restart("plugin");
        harness_.Restart("labels");
      }
    }
    // The MIG layout.
    if (auto it = labels.find(kMigConfigLabel); it != labels.end() && it->second != mig_applied_) {
      mig_applied_ = it->second;
      ApplyMig(it->second);
    }
    seen_ = true;
  }

  void SetMigState(const std::string& state) {
    nlohmann::json patch = {{"metadata", {{"labels", {{kMigStateLabel, state}}}}}};
    if (auto r = ctx_.kube()->MergePatch(absl::StrCat("/api/v1/nodes/", kube::UrlEscape(ctx_.node_name())), patch); !r.ok()) {
      log_.Warn(name(), absl::StrCat(kMigStateLabel, " not set: ", r.status().message()));
    }
  }

  void ApplyMig(const std::string& config) {
    if (mig_.config_file.empty()) {
      log_.Warn(name(), absl::StrCat(kMigConfigLabel, "=", config, " ignored: mig.configFile is not set"));
      return;
    }
    SetMigState("pending");
    auto file = mig::LoadMigConfigFile(mig_.config_file);
    const gpu::NvmlLibrary* nvml = ctx_.Nvml();
    StatusOr<mig::MigReport> report = !file.ok() ? StatusOr<mig::MigReport>(file.status())
                                      : nvml == nullptr ? StatusOr<mig::MigReport>(absl::FailedPreconditionError("NVML is not usable"))
                                                        : mig::ApplyMigConfig(*nvml, *file, config, {false, mig_.allow_real});
    Status st = report.ok() ? report->status : report.status();
    if (!st.ok()) {
      log_.Error(name(), absl::StrCat(kMigConfigLabel, "=", config, ": ", st.message()));
      SetMigState("failed");
      return;
    }
    log_.Info(name(), absl::StrCat(kMigConfigLabel, "=", config, ": ",
                                   report->changed ? absl::StrCat(report->done.size(), " steps applied") : "already in place",
                                   "; restarting plugin and labels over the new devices"));
    if (auto inv = ctx_.Inventory(/*refresh=*/true); !inv.ok()) log_.Warn(name(), std::string(inv.status().message()));
    harness_.Restart("plugin");
    harness_.Restart("labels");
    SetMigState("success");
  }

  NodeContext& ctx_;
  Log& log_;
  Harness& harness_;
  std::map<std::string, bool> configured_;
  std::map<std::string, bool> applied_;
  bool has_config_dir_ = false;
  MigSection mig_;
  std::string mig_applied_;
  bool warned_no_dir_ = false;
  std::atomic<bool> seen_{false};
};

}  // namespace

std::unique_ptr<Component> MakeNodeWatcher(NodeContext& ctx, const AgentConfig& c, Log& log, Harness& harness) {
  return std::make_unique<NodeWatcher>(ctx, c, log, harness);
}

}  // namespace gpunode::agent
