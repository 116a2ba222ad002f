// The validator component: the GPU Operator's validator, in-process. doctor's checks run in a
// child `gpunode doctor -o json` (cuInit's ~14 MiB of driver state and libcuda stay out of the
// agent); a failing hardware, kernel-driver or user-space-driver layer (NVML, CUDA) closes the
// gate: the plugin advertises every GPU Unhealthy (allocatable 0) until a check passes. The Node
// carries the verdict as the condition GpuStackReady (reason = the finding id in CamelCase,
// message = its first action) and an Event on each change. Checks run at start, every interval
// (retry while failing), at once after a critical XID, and when the driver's version changes.
#include <algorithm>
#include <cctype>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/agent/components.h"
#include "src/agent/step_args.h"
#include "src/base/json.h"
#include "src/base/well_known.h"
#include "src/kube/node.h"

namespace gpunode::agent {

std::string CamelCaseReason(const std::string& finding_id) {
  std::string out;
  bool upper = true;
  for (char c : finding_id) {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      out += upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
      upper = false;
    } else {
      upper = true;
    }
  }
  return out.empty() ? "Unknown" : out;
}

namespace {

constexpr const auto& kConditionType = wellknown::kConditionGpuStackReady;

struct Verdict {
  bool pass = false;
  std::string reason, message;
};

// The gate's rule over doctor's JSON: the first "fail" finding in a layer the GPUs cannot work
// without. Warnings and the layers above (toolkit, frameworks, runtime, orchestrator) do not gate,
// nor do findings about single GPUs (one lost, one with uncorrected ECC errors): the health
// monitor takes exactly those GPUs out, and the others keep working.
StatusOr<Verdict> Judge(const std::string& json) {
  static const std::set<std::string> kPerGpu = {"driver.fewer-gpus", "driver.gpu-lost", "driver.gpu-unreadable",
                                                "hardware.ecc-uncorrected", "hardware.row-remap-failure"};
  std::vector<std::string> per_gpu;
  GPUNODE_ASSIGN_OR_RETURN(nlohmann::json doc, ParseJson(json, "gpunode doctor -o json"));
  if (!doc.is_object() || !doc.contains("checks") || !doc["checks"].is_array()) {
    return absl::InvalidArgumentError("gpunode doctor -o json: no \"checks\" list");
  }
  static const std::set<std::string> kGating = {"hardware", "kernel-driver", "user-space-driver"};
  for (const nlohmann::json& check : doc["checks"]) {
    if (!check.is_object() || !check.contains("findings") || !check["findings"].is_array()) continue;
    for (const nlohmann::json& f : check["findings"]) {
      if (!f.is_object() || f.value("status", "") != "fail") continue;
      std::string layer = check.value("layer", "");
      if (!kGating.count(layer)) continue;
      if (kPerGpu.count(f.value("id", ""))) {
        per_gpu.push_back(f.value("id", ""));
        continue;
      }
      Verdict v;
      v.reason = CamelCaseReason(f.value("id", "unknown"));
      v.message = f.value("summary", "") + ". " + f.value("action", "");
      return v;
    }
  }
  Verdict v;
  v.pass = true;
  v.reason = "AllChecksPassed";
  v.message = "hardware, kernel driver, NVML and CUDA checks passed (gpunode doctor)";
  // The driver validated, for the driver-upgrade controller's gate (docs/driver-upgrades.md).
  if (doc.contains("baseline") && doc["baseline"].is_object() && doc["baseline"].contains("node") &&
      doc["baseline"]["node"].is_object()) {
    const nlohmann::json& node = doc["baseline"]["node"];
    if (node.contains("driverVersion") && node["driverVersion"].is_string() &&
        !node["driverVersion"].get<std::string>().empty()) {
      v.message += absl::StrCat(wellknown::kValidatedOnDriver, node["driverVersion"].get<std::string>().substr(0, 64));
    }
  }
  if (!per_gpu.empty()) {
    v.message += absl::StrCat("; single GPUs failing (advertised Unhealthy one by one): ", absl::StrJoin(per_gpu, ", "));
  }
  return v;
}

class Validator final : public Component {
 public:
  Validator(NodeContext& ctx, ValidatorSection s, Log& log, std::function<void()> on_driver_change)
      : ctx_(ctx), s_(std::move(s)), log_(log), on_driver_change_(std::move(on_driver_change)) {}
  std::string name() const override { return "validator"; }
  bool Ready() const override { return checked_.load(); }

  Status Run(std::stop_token stop) override {
    std::atomic<bool> xid{false};
    int sub = 0;
    gpu::NvmlEventPump* pump = ctx_.Pump();
    if (pump != nullptr) {
      sub = pump->Subscribe([&xid](const gpu::NvmlEvent& e) {
        // Application XIDs (13, 31, 43, 45, 68, 109) say nothing about the node.
        static const std::set<unsigned long long> kApp = {13, 31, 43, 45, 68, 109};
        if (e.kind == gpu::NvmlEvent::Kind::kLost || !kApp.count(e.xid)) xid = true;
      });
    }
    std::string driver = DriverLine();
    while (!stop.stop_requested()) {
      Status st = CheckOnce(stop);
      if (!st.ok()) {
        if (stop.stop_requested()) break;
        log_.Warn(name(), absl::StrCat("check not run: ", st.message()));
      }
      Clock& clock = ctx_.clock();
      const auto until = clock.Now() + (ctx_.gate().open ? s_.interval : s_.retry);
      while (!stop.stop_requested() && clock.Now() < until) {
        clock.WaitFor(std::chrono::milliseconds(1000), stop);
        if (xid.exchange(false)) {
          log_.Info(name(), "critical XID or lost GPU: checking again");
          Refresh();
          break;
        }
        if (std::string now = DriverLine(); now != driver) {
          log_.Info(name(), absl::StrCat("driver changed (", now.empty() ? "none" : now, "): checking again"));
          driver = now;
          Refresh();
          if (on_driver_change_) on_driver_change_();
          break;
        }
      }
    }
    if (pump != nullptr) pump->Unsubscribe(sub);
    return absl::OkStatus();
  }

 private:
  void Refresh() {
    if (auto inv = ctx_.Inventory(/*refresh=*/true); !inv.ok()) {
      log_.Warn(name(), absl::StrCat("probe: ", inv.status().message()));
    }
  }

  std::string DriverLine() const {
    auto text = ctx_.fs().ReadFile("/proc/driver/nvidia/version", 4096);
    if (!text.ok()) return "";
    return text->substr(0, text->find('\n'));
  }

  Status CheckOnce(std::stop_token stop) {
    std::vector<std::string> args = ctx_.self_args();
    args.insert(args.end(), {"doctor", "-o", "json"});
    if (!s_.cuda) args.push_back("--no-cuda");
    const auto start = std::chrono::steady_clock::now();
    GPUNODE_ASSIGN_OR_RETURN(ChildResult r, RunChild(args, std::chrono::seconds(120), stop));
    auto verdict = Judge(r.out);
    if (!verdict.ok()) {
      return absl::InternalError(absl::StrCat(verdict.status().message(), " (exit ", r.exit_code, "; ",
                                              r.err.substr(0, 300), ")"));
    }
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    const Gate before = ctx_.gate();
    Gate g{verdict->pass, verdict->reason, verdict->message};
    ctx_.SetGate(g);
    const bool first = !checked_.exchange(true);
    const bool changed = first || before.open != g.open || before.reason != g.reason;
    if (changed) {
      log_.Info(name(), absl::StrCat(g.open ? "passed" : "FAILED", " in ", static_cast<int>(ms), " ms (",
                                     ctx_.MsSinceStart(), " ms after the agent started): ", g.reason, ": ",
                                     g.message));
    }
    if (ctx_.kube() != nullptr && !ctx_.node_name().empty()) {
      kube::NodeCondition c{kConditionType, g.open ? "True" : "False", g.reason, g.message};
      // The watch's copy of the Node: no GET, and no write while the verdict stays the same.
      const std::shared_ptr<const nlohmann::json> known = ctx_.node();
      // The heartbeat is refreshed every 30 min (at least 3 checks), so an unchanged verdict costs
      // two writes an hour, not one per check.
      const auto heartbeat = std::max<std::chrono::seconds>(
          std::chrono::minutes(30), std::chrono::duration_cast<std::chrono::seconds>(3 * s_.interval));
      auto transition = kube::SetNodeCondition(*ctx_.kube(), ctx_.node_name(), c, known.get(), heartbeat);
      if (!transition.ok()) {
        log_.Warn(name(), absl::StrCat("Node condition ", kConditionType, " not set: ", transition.status().message()));
      } else if (*transition || changed) {
        if (changed) {
          log_.Info(name(), absl::StrCat("Node condition ", kConditionType, "=", c.status, " (", c.reason, ") set ",
                                         ctx_.MsSinceStart(), " ms after the agent started"));
        }
        Status ev = kube::CreateNodeEvent(*ctx_.kube(), ctx_.node_name(), g.open ? "Normal" : "Warning",
                                          g.open ? kConditionType : g.reason,
                                          g.open ? g.message : absl::StrCat("GPUs advertised Unhealthy: ", g.message),
                                          known.get());
        if (!ev.ok()) log_.Warn(name(), absl::StrCat("Event not created: ", ev.message()));
      }
    }
    return absl::OkStatus();
  }

  NodeContext& ctx_;
  ValidatorSection s_;
  Log& log_;
  std::function<void()> on_driver_change_;
  std::atomic<bool> checked_{false};
};

class OneShot final : public Component {
 public:
  OneShot(std::string name, NodeContext& ctx, OneShotSection s, Log& log)
      : name_(std::move(name)), ctx_(ctx), s_(std::move(s)), log_(log) {}
  std::string name() const override { return name_; }
  bool one_shot() const override { return true; }

  Status Run(std::stop_token stop) override {
    if (s_.args.empty()) return absl::InvalidArgumentError(absl::StrCat(name_, ".args: empty"));
    // The config reader refused anything else already; this step runs as root, so check again.
    if (auto p = CheckStepArgs(name_, s_.args, s_.global_args)) {
      return absl::InvalidArgumentError(absl::StrCat(name_, ".", p->list, "[", p->index, "]: ", p->message));
    }
    std::vector<std::string> args = ctx_.self_args();
    if (!s_.global_args.empty()) {
      args.resize(1);  // the program
      args.insert(args.end(), s_.global_args.begin(), s_.global_args.end());
    }
    args.insert(args.end(), s_.args.begin(), s_.args.end());
    GPUNODE_ASSIGN_OR_RETURN(ChildResult r, RunChild(args, std::chrono::minutes(2), stop));
    std::string text = r.err + r.out;
    while (!text.empty() && text.back() == '\n') text.pop_back();
    if (r.exit_code != 0) {
      return absl::FailedPreconditionError(absl::StrCat("gpunode ", s_.args[0], " exited ", r.exit_code, ": ", text));
    }
    log_.Info(name_, text.empty() ? "done" : text);
    return absl::OkStatus();
  }

 private:
  std::string name_;
  NodeContext& ctx_;
  OneShotSection s_;
  Log& log_;
};

}  // namespace

std::unique_ptr<Component> MakeValidator(NodeContext& ctx, const AgentConfig& c, Log& log,
                                         std::function<void()> on_driver_change) {
  return std::make_unique<Validator>(ctx, c.validator, log, std::move(on_driver_change));
}

std::unique_ptr<Component> MakeOneShot(const std::string& name, NodeContext& ctx, const OneShotSection& s, Log& log) {
  return std::make_unique<OneShot>(name, ctx, s, log);
}

}  // namespace gpunode::agent
