// gpunode mig: the MIG layout of the node's GPUs (`show`) and applying a named layout of an
// NVIDIA mig-parted config file (`apply`), what the GPU Operator's mig-manager does for the node
// label nvidia.com/mig.config. Real GPUs are changed only with --allow-real (docs/mig.md).
//
// Exit codes: 0 done (or nothing to do); 2 an NVML call failed, the node could not be read, or a
// change is pending (GPU busy / reset needed); 3 bad flags, a bad config file, an unknown config
// name, a layout that does not fit, or a refused change (processes running, real GPU).
#include <iostream>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/cli/common.h"
#include "src/gpu/nvml.h"
#include "src/mig/apply.h"
#include "src/mig/config.h"
#include "src/mig/plan.h"

namespace gpunode::cli {
namespace {

struct MigFlags {
  std::string config_file;
  std::string config;
  bool dry_run = false;
  bool allow_real = false;
};

nlohmann::ordered_json GpuJson(const mig::GpuMigState& g) {
  nlohmann::ordered_json j;
  j["index"] = g.index;
  j["uuid"] = g.uuid;
  j["name"] = g.name;
  char id[16];
  std::snprintf(id, sizeof id, "0x%08X", g.pci_id);
  j["pciDeviceId"] = id;
  j["migCapable"] = g.mig_capable;
  j["migEnabled"] = g.mig_current;
  j["migPending"] = g.mig_pending;
  nlohmann::ordered_json counts = nlohmann::ordered_json::object();
  for (const auto& [name, n] : mig::DeviceCounts(g)) counts[name] = n;
  j["migDevices"] = counts;
  nlohmann::ordered_json gis = nlohmann::ordered_json::array();
  for (const mig::GiState& gi : g.gis) {
    nlohmann::ordered_json cis = nlohmann::ordered_json::array();
    for (const mig::CiState& ci : gi.cis) cis.push_back({{"id", ci.id}, {"profile", ci.name}});
    gis.push_back({{"id", gi.id},
                   {"profile", gi.name},
                   {"profileId", gi.profile_id},
                   {"placement", {{"start", gi.start}, {"size", gi.size}}},
                   {"computeInstances", cis}});
  }
  j["gpuInstances"] = gis;
  nlohmann::ordered_json profiles = nlohmann::ordered_json::array();
  for (const mig::GiProfile& p : g.profiles) {
    profiles.push_back({{"name", p.name},
                        {"id", p.id},
                        {"slices", p.slices},
                        {"instances", p.instance_count},
                        {"memoryMiB", p.memory_mib},
                        {"multiprocessors", p.multiprocessors},
                        {"placements", p.starts}});
  }
  j["profiles"] = profiles;
  j["processes"] = g.process_pids;
  return j;
}

std::string CountsText(const mig::GpuMigState& g) {
  auto counts = mig::DeviceCounts(g);
  if (counts.empty()) return "-";
  return absl::StrJoin(counts, ", ", [](std::string* out, const auto& p) {
    absl::StrAppend(out, p.second, "x ", p.first);
  });
}

void PrintShowTable(const std::vector<mig::GpuMigState>& gpus) {
  for (const mig::GpuMigState& g : gpus) {
    std::string mode = !g.mig_capable ? "not MIG-capable"
                       : g.mig_current ? (g.mig_pending ? "MIG on" : "MIG on (off pending)")
                                       : (g.mig_pending ? "MIG off (on pending)" : "MIG off");
    std::cout << "GPU " << g.index << "  " << g.name << "  " << mode;
    if (g.mig_current) std::cout << "  " << CountsText(g);
    std::cout << "\n";
    for (const mig::GiState& gi : g.gis) {
      std::cout << "  GI " << gi.id << "  " << gi.name << "  slices " << gi.start << "-"
                << gi.start + gi.size - 1 << "  CIs:";
      if (gi.cis.empty()) std::cout << " none";
      for (const mig::CiState& ci : gi.cis) std::cout << " " << ci.id << " (" << ci.name << ")";
      std::cout << "\n";
    }
    if (!g.process_pids.empty())
      std::cout << "  processes: " << absl::StrJoin(g.process_pids, ", ") << "\n";
  }
}

int RunShow(const GlobalOptions& global) {
  auto format = ParseOutputFormat(global.output);
  if (!format.ok()) {
    PrintError(format.status());
    return kExitUsage;
  }
  auto session = NodeSession::Open(global);
  if (!session.ok()) {
    PrintError(session.status());
    return kExitUsage;
  }
  auto nvml = gpu::NvmlLibrary::Open((*session)->probe_options().nvml_library);
  if (!nvml.ok()) {
    PrintError(nvml.status());
    return kExitFailed;
  }
  auto state = mig::ReadMigState(**nvml);
  if (!state.ok()) {
    PrintError(state.status());
    return kExitFailed;
  }
  if (*format == OutputFormat::kTable) {
    PrintShowTable(*state);
    return kExitOk;
  }
  nlohmann::ordered_json doc;
  doc["apiVersion"] = "gpunode/v1";
  doc["kind"] = "MigState";
  doc["simulated"] = mig::IsSimulatedNvml(**nvml);
  doc["gpus"] = nlohmann::ordered_json::array();
  for (const auto& g : *state) doc["gpus"].push_back(GpuJson(g));
  PrintDocument(doc, *format);
  return kExitOk;
}

nlohmann::ordered_json StepJson(const mig::Step& s) {
  nlohmann::ordered_json j;
  j["action"] = mig::StepKindName(s.kind);
  j["gpu"] = s.gpu;
  if (!s.name.empty()) j["profile"] = s.name;
  if (s.gi_id >= 0) j["gpuInstance"] = s.gi_id;
  if (s.ci_id >= 0) j["computeInstance"] = s.ci_id;
  if (s.new_gi >= 0) j["newGpuInstance"] = s.new_gi;
  if (s.kind == mig::StepKind::kCreateGi && s.start)
    j["placement"] = {{"start", *s.start}, {"size", s.size}};
  j["description"] = s.Describe();
  return j;
}

int ExitFor(const Status& s) {
  if (absl::IsInvalidArgument(s) || absl::IsNotFound(s) || absl::IsPermissionDenied(s) ||
      (absl::IsFailedPrecondition(s) && !gpu::NvmlReturnOf(s)))
    return kExitUsage;
  return kExitFailed;
}

int RunApply(const GlobalOptions& global, const MigFlags& flags) {
  auto format = ParseOutputFormat(global.output);
  if (!format.ok()) {
    PrintError(format.status());
    return kExitUsage;
  }
  auto file = mig::LoadMigConfigFile(flags.config_file);
  if (!file.ok()) {
    PrintError(file.status());
    return kExitUsage;
  }
  if (file->Find(flags.config) == nullptr) {
    PrintError(absl::StrCat("MIG config \"", flags.config, "\" is not in ", flags.config_file,
                            "; it has: ", absl::StrJoin(file->Names(), ", ")));
    return kExitUsage;
  }
  auto session = NodeSession::Open(global);
  if (!session.ok()) {
    PrintError(session.status());
    return kExitUsage;
  }
  auto nvml = gpu::NvmlLibrary::Open((*session)->probe_options().nvml_library);
  if (!nvml.ok()) {
    PrintError(nvml.status());
    return kExitFailed;
  }
  mig::ApplyOptions options;
  options.dry_run = flags.dry_run;
  options.allow_real = flags.allow_real;
  auto report = mig::ApplyMigConfig(**nvml, *file, flags.config, options);
  if (!report.ok()) {
    PrintError(report.status());
    return ExitFor(report.status());
  }
  const int rc = report->status.ok() ? kExitOk : kExitFailed;
  if (*format == OutputFormat::kTable) {
    const auto& r = *report;
    std::cout << "MIG config " << r.config << (r.dry_run ? " (dry run)" : "")
              << (r.simulated ? " on the simulated node" : "") << "\n";
    if (r.plan.empty()) {
      std::cout << "nothing to do: every selected GPU already has this layout\n";
    } else if (r.dry_run) {
      std::cout << "plan (" << r.plan.steps.size() << " steps):\n";
      for (const auto& s : r.plan.steps) std::cout << "  " << s.Describe() << "\n";
    } else {
      std::cout << "done (" << r.done.size() << " of " << r.plan.steps.size() << " planned steps):\n";
      for (const auto& d : r.done) {
        std::cout << "  " << (d.status.ok() ? "ok    " : "FAILED") << " " << d.step.Describe();
        if (!d.detail.empty()) std::cout << ": " << d.detail;
        std::cout << "\n";
      }
    }
    for (const auto& gp : r.plan.gpus) {
      if (!gp.selected) std::cout << "GPU " << gp.gpu << ": not selected by this config, left as is\n";
    }
    std::cout << "now:\n";
    PrintShowTable(r.after);
    if (!r.status.ok()) PrintError(r.status);
    return rc;
  }
  nlohmann::ordered_json doc;
  doc["apiVersion"] = "gpunode/v1";
  doc["kind"] = "MigApplyReport";
  doc["config"] = report->config;
  doc["configFile"] = flags.config_file;
  doc["dryRun"] = report->dry_run;
  doc["simulated"] = report->simulated;
  doc["ok"] = report->status.ok();
  if (!report->status.ok()) doc["error"] = std::string(report->status.message());
  doc["changed"] = report->changed;
  doc["plan"] = nlohmann::ordered_json::array();
  for (const auto& s : report->plan.steps) doc["plan"].push_back(StepJson(s));
  doc["done"] = nlohmann::ordered_json::array();
  for (const auto& d : report->done) {
    nlohmann::ordered_json j = StepJson(d.step);
    j["ok"] = d.status.ok();
    if (!d.detail.empty()) j["result"] = d.detail;
    if (!d.status.ok()) j["error"] = std::string(d.status.message());
    doc["done"].push_back(j);
  }
  doc["gpus"] = nlohmann::ordered_json::array();
  for (const auto& g : report->after) {
    nlohmann::ordered_json j = GpuJson(g);
    for (const auto& gp : report->plan.gpus) {
      if (gp.gpu == g.index) j["selected"] = gp.selected;
    }
    doc["gpus"].push_back(j);
  }
  PrintDocument(doc, *format);
  if (!report->status.ok()) PrintError(report->status);
  return rc;
}

}  // namespace

void AddMigCommand(CLI::App& app, GlobalOptions& global, int* exit_code) {
  CLI::App* cmd = app.add_subcommand(
      "mig", "Show the MIG layout of the GPUs, or apply a named layout of a mig-parted config");
  cmd->require_subcommand(1);
  CLI::App* show = cmd->add_subcommand("show", "MIG mode, GPU and compute instances of each GPU");
  show->callback([&global, exit_code] { *exit_code = RunShow(global); });

  auto flags = std::make_shared<MigFlags>();
  CLI::App* apply = cmd->add_subcommand(
      "apply", "Apply config NAME of a mig-parted config file (what nvidia.com/mig.config=NAME asks)");
  apply->add_option("--config-file,-f", flags->config_file,
                    "mig-parted config file (version v1), or a ConfigMap holding one")
      ->required();
  apply->add_option("--config,-c", flags->config, "Name of the layout in mig-configs")->required();
  apply->add_flag("--dry-run", flags->dry_run, "Print the plan; change nothing");
  apply->add_flag("--allow-real", flags->allow_real,
                  "Allow changing the MIG layout of real GPUs (by default only simulated nodes change)");
  apply->callback([&global, flags, exit_code] { *exit_code = RunApply(global, *flags); });
}

}  // namespace gpunode::cli
