// gpunode fleet: the cluster view of GPU nodes (docs/fleet.md). Reads the Nodes from the API server
// (--kubeconfig, GET /api/v1/nodes paginated, read item by item; with the ResourceSlices and the
// NVIDIADrivers) or from a saved List (--from FILE, - for stdin), and prints pools, driver
// upgrades, findings, a compat verdict per pool or a drain plan. The analysis is
// src/fleet; this file turns flags into inputs and prints.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "src/base/host_fs.h"
#include "src/cli/common.h"
#include "src/cli/image_source.h"
#include "src/compat/dataset.h"
#include "src/fleet/fleet.h"
#include "src/fleet/render.h"
#include "src/kube/client.h"

namespace gpunode::cli {
namespace {

constexpr size_t kMaxNodeListBytes = size_t{512} << 20;  // ~100k nodes

struct FleetFlags {
  std::string kubeconfig;
  std::string from;
  std::string html;
  bool nodes = false;
  // compat
  std::string image;
  std::string data;
  ImageSourceFlags image_source;  // the image's config: read once, for every pool
  // drain-plan
  std::string to_driver;
  std::string max_unavailable;
  std::vector<std::string> pools;
};

std::string Absolute(const std::string& path) {
  std::error_code ec;
  std::filesystem::path p = std::filesystem::absolute(path, ec);
  return ec ? path : p.string();
}

// The Nodes and where they came from; on error, the exit code (already printed).
struct Loaded {
  fleet::FleetReport report;
  int rc = -1;
};

Loaded Load(const FleetFlags& f) {
  Loaded out;
  if (!f.from.empty() && !f.kubeconfig.empty()) {
    PrintError("--from and --kubeconfig exclude each other: read a saved NodeList or the live cluster");
    out.rc = kExitUsage;
    return out;
  }
  if (!f.from.empty()) {
    std::string text;
    if (f.from == "-") {
      text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    } else {
      auto read = HostFs::Local().ReadFile(Absolute(f.from), kMaxNodeListBytes);
      if (!read.ok()) {
        PrintError(Annotate(read.status(), "--from"));
        out.rc = kExitUsage;
        return out;
      }
      text = std::move(*read);
    }
    const std::string source = absl::StrCat("--from ", f.from == "-" ? "stdin" : f.from);
    auto input = fleet::ParseFleetListText(text, source);
    if (!input.ok()) {
      PrintError(input.status());
      out.rc = kExitUsage;
      return out;
    }
    const bool slices = std::any_of(input->nodes.begin(), input->nodes.end(),
                                    [](const fleet::FleetNode& n) { return n.dra.listed; });
    out.report = fleet::Analyze(std::move(input->nodes), source, input->drivers);
    if (slices) out.report.slices_source = source;
    return out;
  }
  auto conn = kube::ResolveConnection(f.kubeconfig);
  if (!conn.ok()) {
    PrintError(conn.status());
    out.rc = kExitUsage;
    return out;
  }
  // A cluster-wide read: kubectl's rate (50 requests/s, burst 100) rather than the agent's, and a
  // minute per page; each answer stays within the client's body cap (64 MiB).
  kube::ClientOptions options;
  options.qps = 50;
  options.burst = 100;
  options.timeout = std::chrono::seconds(60);
  kube::Client client(*conn, options);
  auto nodes = fleet::ListNodes(client);
  if (!nodes.ok()) {
    PrintError(Annotate(nodes.status(), "list nodes"));
    out.rc = kExitFailed;
    return out;
  }
  // The GPU driver's ResourceSlices: DRA devices per node (403 or no resource.k8s.io: a note).
  auto slices = fleet::ListResourceSlices(client, *nodes);
  if (!slices.ok()) {
    PrintError(Annotate(slices.status(), "list resourceslices"));
    out.rc = kExitFailed;
    return out;
  }
  // NVIDIA's NVIDIADrivers: the driver upgrades per pool (404, no CRD: none; 403: a note).
  auto drivers = fleet::ListNvidiaDrivers(client);
  if (!drivers.ok()) {
    PrintError(Annotate(drivers.status(), "list nvidiadrivers"));
    out.rc = kExitFailed;
    return out;
  }
  const std::string source = absl::StrCat(conn->scheme, "://", conn->host, ":", conn->port, " (", conn->source, ")");
  out.report = fleet::Analyze(std::move(*nodes), source, *drivers);
  out.report.slices_source = slices->api_version;
  out.report.notes.insert(out.report.notes.begin(), slices->notes.begin(), slices->notes.end());
  return out;
}

// Writes the HTML page; returns an exit code other than -1 on error (printed).
int WriteHtml(const std::string& path, const std::string& page) {
  if (path.empty()) return -1;
  WriteOptions w;
  w.mode = 0644;
  w.keep_mode = false;
  auto written = HostFs::Local().WriteFileAtomically(Absolute(path), page, w);
  if (!written.ok()) {
    PrintError(Annotate(written.status(), "--html"));
    return absl::IsFailedPrecondition(written.status()) ? kExitUsage : kExitFailed;
  }
  std::cerr << "wrote " << path << " (" << page.size() << " bytes)\n";
  return -1;
}

int RunSummary(const GlobalOptions& global, const FleetFlags& f) {
  auto format = ParseOutputFormat(global.output);
  if (!format.ok()) {
    PrintError(format.status());
    return kExitUsage;
  }
  Loaded l = Load(f);
  if (l.rc != -1) return l.rc;
  if (int rc = WriteHtml(f.html, fleet::RenderHtml(l.report)); rc != -1) return rc;
  if (*format == OutputFormat::kTable) {
    std::cout << fleet::RenderText(l.report, f.nodes, UseColor(global));
  } else {
    PrintDocument(fleet::ToJson(l.report), *format);
  }
  return fleet::ExitCodeOf(l.report);
}

int RunCompat(const GlobalOptions& global, const FleetFlags& f) {
  auto format = ParseOutputFormat(global.output);
  if (!format.ok()) {
    PrintError(format.status());
    return kExitUsage;
  }
  auto data = f.data.empty() ? compat::LoadBuiltin() : compat::LoadFile(f.data);
  if (!data.ok()) {
    PrintError(Annotate(data.status(), "--data"));
    return kExitUsage;
  }
  // The image first, once for every pool (its config from the registry, else the data set): a
  // typo is reported before the cluster is asked.
  auto w = WorkloadOfImage(global, *data, f.image, f.image_source, /*node_stores=*/false);
  if (!w.ok()) {
    PrintError(Annotate(w.status(), "--image"));
    return kExitUsage;
  }
  Loaded l = Load(f);
  if (l.rc != -1) return l.rc;
  std::optional<fleet::FleetCompatReport> report = fleet::CheckPools(*data, l.report, f.image, *std::move(w));
  if (int rc = WriteHtml(f.html, fleet::RenderHtml(l.report, &*report)); rc != -1) return rc;
  if (*format == OutputFormat::kTable) {
    std::cout << fleet::RenderText(*report, UseColor(global));
  } else {
    PrintDocument(fleet::ToJson(*report), *format);
  }
  return fleet::ExitCodeOf(*report);
}

int RunDrainPlan(const GlobalOptions& global, const FleetFlags& f) {
  auto format = ParseOutputFormat(global.output);
  if (!format.ok()) {
    PrintError(format.status());
    return kExitUsage;
  }
  fleet::DrainOptions options;
  auto target = fleet::ParseDriverTarget(f.to_driver);
  if (!target.ok()) {
    PrintError(target.status());
    return kExitUsage;
  }
  options.to_driver = *target;
  // Checked once before the cluster is asked (the percentage needs the node count: again below).
  if (auto n = fleet::ParseMaxUnavailable(f.max_unavailable, 1); !n.ok()) {
    PrintError(n.status());
    return kExitUsage;
  }
  Loaded l = Load(f);
  if (l.rc != -1) return l.rc;
  auto n = fleet::ParseMaxUnavailable(f.max_unavailable, l.report.summary.gpu_nodes);
  if (!n.ok()) {
    PrintError(n.status());
    return kExitUsage;
  }
  options.max_unavailable = *n;
  options.pools = f.pools;
  // Pools whose GPUs the target driver does not drive are not planned (the compat data's branches).
  auto data = f.data.empty() ? compat::LoadBuiltin() : compat::LoadFile(f.data);
  if (!data.ok()) {
    PrintError(Annotate(data.status(), "--data"));
    return kExitUsage;
  }
  options.data = &*data;
  auto plan = fleet::PlanDrain(l.report, options);
  if (!plan.ok()) {
    PrintError(plan.status());
    return kExitUsage;
  }
  if (int rc = WriteHtml(f.html, fleet::RenderHtml(l.report, nullptr, &*plan)); rc != -1) return rc;
  if (*format == OutputFormat::kTable) {
    std::cout << fleet::RenderText(*plan);
  } else {
    PrintDocument(fleet::ToJson(*plan), *format);
  }
  return fleet::ExitCodeOf(*plan);
}

void AddInputOptions(CLI::App* cmd, FleetFlags* f) {
  AddKubeconfigOption(cmd, &f->kubeconfig);
  cmd->add_option("--from", f->from,
                  "Read a saved NodeList instead of the cluster (kubectl get nodes -o json > FILE, or with the DRA "
                  "devices and driver upgrades kubectl get nodes,resourceslices,nvidiadrivers -o json; - for stdin)");
  cmd->add_option("--html", f->html, "Also write one self-contained HTML page to this file");
}

}  // namespace

// fleet_upgrade_cmd.cc: `fleet controller` and `fleet upgrade`.
void AddFleetUpgradeCommands(CLI::App* fleet, GlobalOptions& global, int* exit_code);

void AddFleetCommand(CLI::App& app, GlobalOptions& global, int* exit_code) {
  auto flags = std::make_shared<FleetFlags>();
  CLI::App* cmd = app.add_subcommand(
      "fleet",
      "The cluster view of GPU nodes: pools by GPU and driver, driver and agent skew, nodes whose allocatable\n"
      "GPUs are below their GPU count and why, unhealthy GPUs, failing validation, driver upgrades (docs/fleet.md)");
  AddInputOptions(cmd, flags.get());
  cmd->add_flag("--nodes", flags->nodes, "List every GPU node in the table output");
  cmd->footer(
      "Subcommands:\n"
      "  compat      which pools can run an image, the rule and the smallest fix\n"
      "  drain-plan  the waves in which to cordon, drain and upgrade nodes to a driver\n"
      "  controller  the driver-upgrade controller: NVIDIA's NVIDIADriver resources, upgraded node by node\n"
      "  upgrade     its status, pause/resume, retry NODE, rollback NODE\n"
      "Reads GET /api/v1/nodes (RBAC: get, list on nodes), the ResourceSlices of resource.k8s.io (list on\n"
      "resourceslices; without it a note, DRA devices not counted) and NVIDIA's NVIDIADrivers (list on\n"
      "nvidiadrivers.nvidia.com; without it a note, upgrades from the nodes' labels only) through --kubeconfig,\n"
      "$KUBECONFIG, the pod's service account or ~/.kube/config; or a saved List with --from\n"
      "(kubectl get nodes,resourceslices,nvidiadrivers -o json).\n"
      "Exit codes: 0 no error finding, 1 a node below capacity (device plugin or DRA), failing validation, with\n"
      "unhealthy GPUs, NotReady or failed in a driver upgrade, 2 the API failed, 3 usage or malformed input.\n"
      "Examples:\n"
      "  gpunode fleet\n"
      "  gpunode fleet --from nodes.json -o json          # kind: FleetReport\n"
      "  gpunode fleet --html fleet.html --nodes");
  cmd->callback([&global, flags, exit_code, cmd] {
    if (!cmd->get_subcommands().empty()) return;
    *exit_code = RunSummary(global, *flags);
  });

  CLI::App* c = cmd->add_subcommand(
      "compat", "Which pools can run an image: the compat verdict per pool (its driver and GPU), the rule and the smallest fix");
  c->add_option("--image", flags->image, "Container image reference, as for gpunode compat check")->required();
  c->add_option("--data", flags->data, "Use this compat data set instead of the built-in one");
  AddImageSourceFlags(c, flags->image_source, /*node_stores=*/false);
  c->footer(
      "Exit codes: 0 every pool runs it (maybe with caveats), 1 a pool cannot, 2 unknown somewhere, 3 bad input.\n"
      "Example:\n"
      "  gpunode fleet compat --image pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime");
  c->callback([&global, flags, exit_code] { *exit_code = RunCompat(global, *flags); });

  CLI::App* d = cmd->add_subcommand(
      "drain-plan",
      "Print the waves in which to cordon, drain and upgrade GPU nodes to a driver, pool by pool, never more than\n"
      "--max-unavailable nodes out of service at once. Only prints: installing drivers stays with the OS image or\n"
      "the operator (or gpunode fleet controller, which upgrades in this order). Pools whose GPUs the driver does\n"
      "not drive (an architecture past its last driver branch, or before its first) are not planned.");
  d->add_option("--data", flags->data, "Use this compat data set instead of the built-in one");
  d->add_option("--to-driver", flags->to_driver, "Target driver version, e.g. 580.95.05")->required();
  d->add_option("--max-unavailable", flags->max_unavailable,
                "Most GPU nodes out of service at once, including those already NotReady or cordoned: N or P%")
      ->required();
  d->add_option("--pool", flags->pools, "Only these pools (repeatable; names as gpunode fleet prints them)");
  d->footer(
      "Exit codes: 0 a plan (or nothing to do), 1 blocked (too many nodes already unavailable, or no pool the\n"
      "driver drives), 3 bad input.\n"
      "Example:\n"
      "  gpunode fleet drain-plan --to-driver 580.95.05 --max-unavailable 2");
  d->callback([&global, flags, exit_code] { *exit_code = RunDrainPlan(global, *flags); });
  AddFleetUpgradeCommands(cmd, global, exit_code);
}

}  // namespace gpunode::cli
