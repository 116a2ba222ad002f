// The dra component: gpunode as a DRA driver (src/dra, docs/dra.md) inside the agent, and behind
// `gpunode dra-plugin`. One run:
//   - waits for the first validation (as the plugin does), probes the node, and publishes its
//     devices as the ResourceSlices of one pool (SlicePublisher: nothing written when unchanged);
//   - prepares claims through CdiPreparer (one transient CDI spec per claim, a checkpoint) behind
//     the kubelet's registration and node service sockets (KubeletPlugin: served again when the
//     kubelet's folders are wiped), their TimeSlicing and MPS settings carried out by
//     NodeSharingApplier (src/dra/sharing.h: the driver root's nvidia-smi, an MPS daemon per claim
//     under <plugins dir>/<driver>/mps, the host's paths through --host-root);
//   - health as device taints: a critical XID (gpu.nvidia.com/xid=<code>) or a lost GPU
//     (gpu.nvidia.com/gpu-lost) taints that GPU and its MIG devices NoSchedule, a closed validation
//     gate taints every device (gpunode.io/gpu-stack-not-ready=<reason>); each taint goes again on
//     recovery (the health monitor's quiet period, the gate opening) — NVIDIA's driver keeps its
//     taints until it restarts;
//   - republishes when the inventory changes (a driver change, a GPU lost, a MIG layout).
#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/agent/components.h"
#include "src/base/backoff.h"
#include "src/compat/dataset.h"
#include "src/devices/health.h"
#include "src/dra/cdi_preparer.h"
#include "src/dra/device_model.h"
#include "src/dra/registration.h"
#include "src/dra/resource_slices.h"
#include "src/dra/sharing.h"
#include "src/devices/mps.h"

namespace gpunode::agent {
namespace {

constexpr char kTaintNotReady[] = "gpunode.io/gpu-stack-not-ready";

class DraComponent final : public Component {
 public:
  DraComponent(NodeContext& ctx, DraSection s, bool gate, Log& log)
      : ctx_(ctx), s_(std::move(s)), gate_(gate), log_(log) {}
  std::string name() const override { return "dra"; }
  bool Ready() const override { return registered_.load() && published_.load(); }

  Status Run(std::stop_token stop) override {
    registered_ = false;
    published_ = false;
    if (ctx_.kube() == nullptr || ctx_.node_name().empty()) {
      return absl::FailedPreconditionError(
          "dra needs the Kubernetes API and the node name (kubernetes.enabled, nodeName or $NODE_NAME): "
          "it publishes ResourceSlices and reads ResourceClaims");
    }
    GPUNODE_RETURN_IF_ERROR(dra::KubeletPlugin::CheckDriverName(s_.driver_name));
    if (gate_) {
      ctx_.WaitGateDecided(std::chrono::steady_clock::now() + std::chrono::seconds(20), stop);
      if (stop.stop_requested()) return absl::OkStatus();
    }
    GPUNODE_ASSIGN_OR_RETURN(std::shared_ptr<const node::NodeInventory> inv, ctx_.Inventory(/*refresh=*/true));
    if (!inv->driver.status.ok()) {
      log_.Warn(name(), absl::StrCat("NVML: ", inv->driver.status.message(), "; publishing no devices"));
    }
    if (!compat_) {  // read by Devices() on the gRPC thread too: loaded before any thread starts
      if (auto data = compat::LoadBuiltin(compat::Sections::kCudaTables); data.ok()) compat_ = std::move(*data);
    }
    // A client of its own: the kubelet's prepare calls must not wait behind the agent's 2 requests/s.
    kube::ClientOptions co;
    co.qps = 50;
    co.burst = 100;
    kube::Client client(ctx_.kube()->connection(), co);

    // Health: per GPU UUID the taint it carries now (none: healthy), and the gate's.
    devices::HealthOptions health;
    health.recovery_quiet = s_.health_recovery;
    for (unsigned x : s_.additional_xids_to_ignore) health.ignored_xids.insert(x);
    std::vector<std::pair<unsigned, std::string>> watched;
    for (const gpu::GpuInfo& g : inv->driver.gpus) watched.emplace_back(g.index, g.uuid);
    std::unique_ptr<devices::HealthMonitor> monitor;
    if (const gpu::NvmlLibrary* nvml = ctx_.Nvml(); nvml != nullptr && !watched.empty()) {
      monitor = std::make_unique<devices::HealthMonitor>(
          *nvml, watched, health,
          [this](const devices::HealthEvent& e) {
            {
              std::lock_guard<std::mutex> lock(mu_);
              if (e.healthy) {
                gpu_taints_.erase(e.uuid);
              } else {
                gpu_taints_[e.uuid] = TaintFor(e.reason);
              }
            }
            log_.Info(name(), absl::StrCat("GPU ", e.uuid, e.healthy ? " healthy again (" : " unhealthy (", e.reason,
                                           "): republishing its devices"));
            Wake();
          },
          ctx_.Pump());
      monitor->Start();
    }
    const int gate_sub = ctx_.OnGateChange([this](const Gate&) { Wake(); });

    // The claim preparer over this node's devices as published.
    dra::CdiPreparerOptions po;
    po.driver_name = s_.driver_name;
    po.node_name = ctx_.node_name();
    po.cdi_root = s_.cdi_root;
    po.checkpoint_path = absl::StrCat(s_.plugins_dir, "/", s_.driver_name, "/gpunode-checkpoint.json");
    po.discover.driver_root = s_.driver_root;
    po.discover.dev_root = s_.dev_root;
    // The host as the agent sees it (--host-root), or dra.hostRoot; specs are written locally.
    if (s_.host_root.empty()) {
      po.node_fs = ctx_.fs();
    } else {
      GPUNODE_ASSIGN_OR_RETURN(po.node_fs, HostFs::Open(s_.host_root));
    }
    po.hook_path = s_.hook_path;
    for (const std::string& h : s_.disable_hooks) {
      if (h == "all") {
        po.disabled_hooks = {"create-symlinks", "update-ldcache"};
      } else {
        po.disabled_hooks.insert(h);
      }
    }
    // Sharing: time slices through the driver root's nvidia-smi, an MPS control daemon per MPS
    // claim (children of this component: they stop with it and start again from the checkpoint).
    devices::MpsOptions mps_options;
    mps_options.isolate_shm = s_.mps_private_shm;
    devices::MpsManager mps(*po.node_fs, mps_options, log_.For(name()));
    mps.Start();
    dra::NodeSharingOptions so;
    so.node_fs = *po.node_fs;
    so.driver_root = s_.driver_root;
    so.plugins_dir = s_.plugins_dir;
    so.driver_name = s_.driver_name;
    so.mps = &mps;
    so.log = [this](const std::string& m) { log_.Info(name(), m); };
    dra::NodeSharingApplier sharing(so);
    po.sharing = &sharing;
    po.devices = [this] { return Devices(); };
    po.inventory = [this] { return ctx_.Inventory(); };
    po.client = &client;
    GPUNODE_ASSIGN_OR_RETURN(std::unique_ptr<dra::CdiPreparer> preparer, dra::CdiPreparer::Create(HostFs::Local(), po));
    for (const std::string& n : preparer->start_notes()) log_.Info(name(), n);

    dra::SlicePublisher publisher(client, {.driver = s_.driver_name, .node = ctx_.node_name()});
    dra::KubeletPluginOptions ko;
    ko.driver_name = s_.driver_name;
    ko.registrar_dir = s_.registrar_dir;
    ko.plugins_dir = s_.plugins_dir;
    ko.on_verdict = [this](const dra::RegistrationVerdict& v) {
      registered_ = v.registered;
      if (v.registered) {
        log_.Info(name(), absl::StrCat("registered with the kubelet as DRA driver ", s_.driver_name));
      } else {
        log_.Warn(name(), absl::StrCat("the kubelet refused the registration: ", v.error));
      }
    };
    dra::KubeletPlugin plugin(ko, preparer.get(), log_.For(name()));
    std::atomic<bool> plugin_stop{false};
    Status plugin_status;
    std::thread serve([&] { plugin_status = plugin.Run(plugin_stop); });

    // Publish, then again whenever health, the gate or the inventory changes; a failed publish is
    // retried with backoff.
    Backoff backoff({.initial = std::chrono::seconds(1), .max = std::chrono::seconds(30), .jitter = 1.0});
    uint64_t generation = ctx_.generation();
    bool dirty = true;
    Status result;
    while (!stop.stop_requested()) {
      if (dirty) {
        const std::vector<dra::DraDevice> devices = Devices();
        Status st = publisher.Publish(devices);
        if (st.ok()) {
          dirty = false;
          backoff.Reset();
          const auto& w = publisher.last_writes();
          if (w.total() > 0 || !published_) {
            log_.Info(name(), absl::StrCat(devices.size(), " devices in pool ", ctx_.node_name(), " (generation ",
                                           publisher.generation(), "; ", w.created, " created, ", w.updated,
                                           " updated, ", w.deleted, " deleted)"));
          }
          published_ = true;
        } else {
          log_.Warn(name(), absl::StrCat("ResourceSlices not published: ", st.message()));
          if (absl::IsPermissionDenied(st) || absl::IsUnauthenticated(st)) {
            result = st;
            break;
          }
        }
      }
      const auto wait = dirty ? backoff.Next() : std::chrono::milliseconds(1000);
      {
        std::unique_lock<std::mutex> lock(mu_);
        if (!woken_) ctx_.clock().WaitUntil(wake_, lock, ctx_.clock().Now() + wait);
        dirty = dirty || woken_;
        woken_ = false;
      }
      if (ctx_.generation() != generation) {
        generation = ctx_.generation();
        dirty = true;
      }
    }
    ctx_.RemoveGateSubscriber(gate_sub);
    if (monitor) monitor->Stop();
    plugin_stop = true;
    plugin.Interrupt();
    serve.join();
    plugin.Shutdown();
    if (!plugin_status.ok() && result.ok() && !stop.stop_requested()) result = plugin_status;
    return result;
  }

 private:
  static dra::DraTaint TaintFor(const std::string& reason) {
    unsigned xid = 0;
    if (absl::StartsWith(reason, "XID ") && absl::SimpleAtoi(reason.substr(4), &xid)) {
      return {dra::kTaintXid, std::to_string(xid), dra::kTaintEffectNoSchedule, ""};
    }
    return {dra::kTaintGpuLost, "", dra::kTaintEffectNoSchedule, ""};
  }

  // The devices as published: the inventory's, with the taints of their GPU and of the gate. A GPU
  // that is tainted and gone from a newer inventory (lost: NVML no longer enumerates it) keeps its
  // devices as last published, tainted, until it is healthy again: a claim must see it tainted, not
  // vanish and come back (NVIDIA's driver keeps it too).
  // A GPU back to health that the inventory lacks (read while it was lost) has the node read again.
  std::vector<dra::DraDevice> Devices() {
    std::vector<dra::DraDevice> out;
    auto inv = ctx_.Inventory();
    if (!inv.ok()) return out;
    out = DraDevicesOfNode(**inv, compat_ ? &*compat_ : nullptr);
    auto gpus_of = [](const std::vector<dra::DraDevice>& devices) {
      std::set<std::string> gpus;
      for (const dra::DraDevice& d : devices) gpus.insert(d.parent_uuid.empty() ? d.uuid : d.parent_uuid);
      return gpus;
    };
    bool healed_missing = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      const std::set<std::string> present = gpus_of(out);
      for (const std::string& gpu : gpus_of(last_devices_)) {
        if (!present.count(gpu) && !gpu_taints_.count(gpu)) healed_missing = true;
      }
    }
    if (healed_missing) {
      inv = ctx_.Inventory(/*refresh=*/true);
      if (!inv.ok()) return out;
      out = DraDevicesOfNode(**inv, compat_ ? &*compat_ : nullptr);
    }
    const Gate g = ctx_.gate();
    std::lock_guard<std::mutex> lock(mu_);
    const std::set<std::string> present = gpus_of(out);
    for (const dra::DraDevice& d : last_devices_) {
      const std::string& gpu = d.parent_uuid.empty() ? d.uuid : d.parent_uuid;
      if (!present.count(gpu) && gpu_taints_.count(gpu)) {
        out.push_back(d);
        out.back().taints.clear();
      }
    }
    for (dra::DraDevice& d : out) {
      auto it = gpu_taints_.find(d.parent_uuid.empty() ? d.uuid : d.parent_uuid);
      if (it != gpu_taints_.end()) d.taints.push_back(it->second);
      if (gate_ && !g.open) {
        d.taints.push_back({kTaintNotReady, g.reason.substr(0, 63), dra::kTaintEffectNoSchedule, ""});
      }
      d.healthy = d.taints.empty();
    }
    last_devices_ = out;
    return out;
  }

  void Wake() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      woken_ = true;
    }
    wake_.notify_all();
  }

  NodeContext& ctx_;
  DraSection s_;
  bool gate_;
  Log& log_;
  std::atomic<bool> registered_{false};
  std::atomic<bool> published_{false};
  std::mutex mu_;
  std::condition_variable_any wake_;
  bool woken_ = false;
  std::map<std::string, dra::DraTaint> gpu_taints_;  // GPU UUID -> its taint
  std::vector<dra::DraDevice> last_devices_;           // as Devices() last made them
  std::optional<compat::CompatData> compat_;          // loaded at the start of Run
};

}  // namespace

std::vector<dra::DraDevice> DraDevicesOfNode(const node::NodeInventory& inv, const compat::CompatData* compat,
                                             std::vector<std::string>* problems) {
  std::vector<dra::DraDevice> out = dra::DraDevicesOf(inv, problems);
  // NVML gives the CUDA version through libcuda, which the services keep out: then the driver
  // branch's, as the labels do (NVIDIA's driver reads it with libcuda loaded).
  const node::UserDriverLayer& drv = inv.driver;
  if (drv.cuda_version || !drv.driver_version || compat == nullptr) return out;
  if (auto cuda = compat::MaxCudaOfDriver(*compat, *drv.driver_version)) {
    for (dra::DraDevice& d : out) {
      d.attributes["cudaDriverVersion"] = {{"version", absl::StrCat(cuda->major(), ".", cuda->minor(), ".0")}};
    }
  }
  return out;
}

std::unique_ptr<Component> MakeDra(NodeContext& ctx, const AgentConfig& c, Log& log) {
  return std::make_unique<DraComponent>(ctx, c.dra, c.validator.enabled && c.validator.gate, log);
}

}  // namespace gpunode::agent
