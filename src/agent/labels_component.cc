// The labels component: GFD's and gpunode's labels straight onto the Node (and NFD's features
// file when asked), every interval and at once when the inventory changes.
#include <ctime>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/agent/components.h"
#include "src/base/well_known.h"
#include "src/compat/dataset.h"
#include "src/kube/node.h"
#include "src/labels/labels.h"

namespace gpunode::agent {
namespace {

class LabelsComponent final : public Component {
 public:
  LabelsComponent(NodeContext& ctx, const AgentConfig& c, Log& log)
      : ctx_(ctx),
        s_(c.labels),
        plugin_(c.plugin),
        dra_driver_(c.dra.enabled ? c.dra.driver_name : ""),
        kube_(c.kubernetes.enabled),
        log_(log) {}
  std::string name() const override { return "labels"; }
  bool Ready() const override { return labelled_.load(); }

  Status Run(std::stop_token stop) override {
    labelled_ = false;
    GPUNODE_ASSIGN_OR_RETURN(devices::PluginConfig config,
                             ResolvePluginConfig(plugin_, ctx_.plugin_config_name(), ProcessEnvironment()));
    if (!compat_) {
      if (auto data = compat::LoadBuiltin(compat::Sections::kCudaTables); data.ok()) compat_ = std::move(*data);
    }
    if (s_.node_labels && (!kube_ || ctx_.kube() == nullptr)) {
      log_.Warn(name(), "nodeLabels needs the Kubernetes API (kubernetes.enabled and a node name): labels not put on the Node");
    }
    uint64_t seen_generation = ~0ull;
    while (!stop.stop_requested()) {
      const uint64_t generation = ctx_.generation();
      if (Status st = Round(config, generation != seen_generation); !st.ok()) {
        if (!labelled_) return st;  // the first round must succeed; later ones are retried
        Warn(absl::StrCat("labels not refreshed: ", st.message()));
      } else {
        labelled_ = true;
      }
      seen_generation = generation;
      // Relabel every interval, or within a second of an inventory change.
      Clock& clock = ctx_.clock();
      const auto until = clock.Now() + s_.interval;
      while (!stop.stop_requested() && clock.Now() < until && ctx_.generation() == seen_generation) {
        clock.WaitFor(std::chrono::milliseconds(500), stop);
      }
    }
    return absl::OkStatus();
  }

 private:
  void Warn(const std::string& w) {
    if (warned_.insert(w).second) log_.Warn(name(), w);
  }

  Status Round(const devices::PluginConfig& config, bool refresh) {
    GPUNODE_ASSIGN_OR_RETURN(std::shared_ptr<const node::NodeInventory> inv, ctx_.Inventory(refresh));
    labels::LabelOptions options;
    if (!config.gfd_no_timestamp) options.timestamp = static_cast<int64_t>(std::time(nullptr));
    if (auto text = ctx_.fs().ReadFile(config.machine_type_file, 4096); text.ok()) {
      std::string t(absl::StripAsciiWhitespace(*text));
      if (!t.empty()) options.machine_type = t;
    }
    options.compat = compat_ ? &*compat_ : nullptr;
    labels::LabelSet set = labels::BuildLabels(*inv, config, options);
    for (const std::string& w : set.warnings) Warn(w);
    set.labels[wellknown::kLabelAgentVersion] = GPUNODE_VERSION;
    if (!dra_driver_.empty()) set.labels[wellknown::kLabelDraDriver] = dra_driver_;
    if (!s_.features_file.empty()) {
      WriteOptions w;
      w.mode = 0644;
      w.keep_mode = false;
      GPUNODE_RETURN_IF_ERROR(HostFs::Local().WriteFileAtomically(s_.features_file, labels::RenderFeaturesFile(set.labels), w).status());
    }
    if (s_.node_labels && kube_ && ctx_.kube() != nullptr) {
      std::map<std::string, std::string> node_labels = set.labels;
      node_labels.erase("nvidia.com/gfd.timestamp");  // a Node write a minute for nothing
      const std::shared_ptr<const nlohmann::json> known = ctx_.node();  // the watch's copy: no GET
      GPUNODE_ASSIGN_OR_RETURN(kube::NodeLabelChange change,
                               kube::ApplyNodeLabels(*ctx_.kube(), ctx_.node_name(), node_labels, known.get()));
      if (!change.ignored.empty()) {
        Warn(absl::StrCat("Node ", ctx_.node_name(), ": left alone, not gpunode's (outside nvidia.com/",
                          " and gpunode.io/): ", absl::StrJoin(change.ignored, ", ")));
      }
      if (change.patched) {
        log_.Info(name(), absl::StrCat("Node ", ctx_.node_name(), ": ", change.set.size(), " labels set",
                                       change.removed.empty() ? "" : absl::StrCat(", ", change.removed.size(), " removed")));
      }
    }
    return absl::OkStatus();
  }

  NodeContext& ctx_;
  LabelsSection s_;
  PluginSection plugin_;
  std::string dra_driver_;  // the dra component's driver when it is on: gpunode.io/dra.driver
  bool kube_;
  Log& log_;
  std::optional<compat::CompatData> compat_;
  std::set<std::string> warned_;
  std::atomic<bool> labelled_{false};
};

}  // namespace

std::unique_ptr<Component> MakeLabels(NodeContext& ctx, const AgentConfig& c, Log& log) {
  return std::make_unique<LabelsComponent>(ctx, c, log);
}

}  // namespace gpunode::agent
