#include "src/doctor/doctor.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "src/doctor/internal.h"
#include "src/gpu/nvml.h"
#include "src/node/unreadable_gpus.h"

namespace gpunode::doctor {
namespace {

constexpr uint64_t kMiB = 1024ull * 1024;

BaselineCard MakeCard(const node::NodeInventory& inv) {
  BaselineCard card;
  card.hostname = inv.hostname;
  card.kernel_release = inv.kernel.kernel_release;
  if (inv.driver.driver_version) card.driver_version = inv.driver.driver_version->ToString();
  else if (inv.kernel.version) card.driver_version = inv.kernel.version->ToString();
  if (inv.driver.cuda_version) card.cuda_version = inv.driver.cuda_version->ToString();
  else if (inv.driver.cuda.version) card.cuda_version = inv.driver.cuda.version->ToString();
  card.module_flavor = inv.kernel.flavor == node::ModuleFlavor::kOpen          ? "open"
                       : inv.kernel.flavor == node::ModuleFlavor::kProprietary ? "proprietary"
                                                                         : "";
  if (inv.toolchain.nvcc) card.nvcc = inv.toolchain.nvcc->ToString();
  for (const node::ContainerRuntime& rt : inv.containers.runtimes) {
    if (rt.installed) card.container_runtimes.push_back(rt.name);
  }
  card.numa_nodes = inv.hardware.numa_nodes;
  std::map<std::string, const node::PciDevice*> pci;
  for (const node::PciDevice& d : inv.hardware.gpus) pci[d.bus_id] = &d;
  for (const gpu::GpuInfo& g : inv.driver.gpus) {
    GpuCard c;
    c.index = g.index;
    c.model = g.name;
    c.uuid = g.uuid;
    c.bus_id = g.pci_bus_id;
    if (g.memory_total_bytes) c.memory_total_mib = *g.memory_total_bytes / kMiB;
    if (g.memory_used_bytes) c.memory_used_mib = *g.memory_used_bytes / kMiB;
    c.persistence = g.persistence_mode;
    c.ecc = g.ecc_enabled;
    c.mig = g.mig_enabled;
    c.pcie_gen = g.pcie_gen_current;
    c.pcie_gen_max = g.pcie_gen_gpu_max ? g.pcie_gen_gpu_max : g.pcie_gen_max;
    c.pcie_width = g.pcie_width_current;
    c.pcie_width_max = g.pcie_width_max;
    if (auto it = pci.find(g.pci_bus_id); it != pci.end()) c.numa_node = it->second->numa_node;
    c.temperature_c = g.temperature_c;
    c.power_limit_w = g.power_limit_w;
    if (g.cc_major) c.compute_capability = absl::StrCat(*g.cc_major, ".", g.cc_minor.value_or(0));
    c.vbios = g.vbios_version.value_or("");
    card.gpus.push_back(std::move(c));
  }
  // GPUs NVML counts but cannot open (lost...) keep their row, with what sysfs and /proc tell.
  const std::map<unsigned, node::BusGpu> on_bus = node::UnreadableGpusOnBus(inv);
  for (const gpu::GpuFailure& f : inv.driver.gpu_failures) {
    GpuCard c;
    c.index = f.index;
    c.state = std::string(node::UnreadableState(f.status));
    c.error = node::UnreadableReason(f.status);
    if (auto code = gpu::NvmlReturnOf(f.status)) c.nvml_error = std::string(gpu::NvmlReturnName(*code));
    if (auto it = on_bus.find(f.index); it != on_bus.end()) {
      const node::BusGpu& b = it->second;
      c.bus_id = b.pci_bus_id;
      c.uuid = b.uuid;
      c.model = !b.model.empty()       ? b.model
                : b.pci_device_id != 0 ? absl::StrFormat("10de:%04x", b.pci_device_id)
                                       : "";
      c.numa_node = b.numa_node;
    }
    card.gpus.push_back(std::move(c));
  }
  std::stable_sort(card.gpus.begin(), card.gpus.end(),
                   [](const GpuCard& a, const GpuCard& b) { return a.index < b.index; });
  // Without NVML, the GPUs still get a line from the PCI bus.
  if (inv.driver.gpus.empty() && inv.driver.gpu_failures.empty()) {
    unsigned i = 0;
    for (const node::PciDevice& d : inv.hardware.gpus) {
      GpuCard c;
      c.index = i++;
      c.state = "unknown";
      if (!inv.driver.status.ok()) {
        c.error = node::UnreadableReason(inv.driver.status);
        if (auto code = gpu::NvmlReturnOf(inv.driver.status)) c.nvml_error = std::string(gpu::NvmlReturnName(*code));
      }
      c.model = absl::StrFormat("10de:%04x", d.device);
      c.bus_id = d.bus_id;
      c.numa_node = d.numa_node;
      if (d.link_current) {
        c.pcie_gen = d.link_current->gen;
        c.pcie_width = d.link_current->width;
      }
      if (d.link_max) {
        c.pcie_gen_max = d.link_max->gen;
        c.pcie_width_max = d.link_max->width;
      }
      card.gpus.push_back(std::move(c));
    }
  }
  return card;
}

template <typename T>
nlohmann::ordered_json Opt(const std::optional<T>& v) {
  return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr);
}

nlohmann::ordered_json FindingJson(const Finding& f) {
  nlohmann::ordered_json layers = nlohmann::ordered_json::array();
  for (Layer l : f.layers) layers.push_back(LayerId(l));
  return {{"id", f.id},           {"status", StatusName(f.status)}, {"summary", f.summary},
          {"observed", f.observed}, {"expected", f.expected},       {"diagnosis", f.diagnosis},
          {"action", f.action},   {"layers", layers}};
}

size_t CountState(const BaselineCard& card, absl::string_view state) {
  return static_cast<size_t>(
      std::count_if(card.gpus.begin(), card.gpus.end(), [&](const GpuCard& g) { return g.state == state; }));
}

double Round2(double v) { return static_cast<double>(static_cast<long long>(v * 100 + 0.5)) / 100; }

}  // namespace

absl::string_view StatusName(CheckStatus s) {
  switch (s) {
    case CheckStatus::kOk: return "ok";
    case CheckStatus::kSkip: return "skip";
    case CheckStatus::kWarn: return "warn";
    case CheckStatus::kFail: return "fail";
  }
  return "?";
}

absl::string_view LayerId(Layer l) {
  switch (l) {
    case Layer::kHardware: return "hardware";
    case Layer::kKernelDriver: return "kernel-driver";
    case Layer::kUserDriver: return "user-space-driver";
    case Layer::kToolchain: return "toolchain";
    case Layer::kContainerRuntime: return "container-runtime";
    case Layer::kOrchestrator: return "kubelet";
  }
  return "?";
}

absl::string_view LayerTitle(Layer l) {
  switch (l) {
    case Layer::kHardware: return "hardware";
    case Layer::kKernelDriver: return "kernel driver";
    case Layer::kUserDriver: return "user-space driver";
    case Layer::kToolchain: return "toolchain";
    case Layer::kContainerRuntime: return "container runtime";
    case Layer::kOrchestrator: return "kubelet";
  }
  return "?";
}

DoctorReport RunDoctor(const node::NodeInventory& inv) {
  DoctorReport r;
  r.checks = {CheckHardware(inv),   CheckKernelDriver(inv), CheckUserDriver(inv),
              CheckToolchain(inv),  CheckContainers(inv),   CheckOrchestrator(inv)};
  r.overall = CheckStatus::kOk;
  for (CheckResult& c : r.checks) {
    for (const Finding& f : c.findings) c.status = std::max(c.status, f.status);
    if (c.status != CheckStatus::kSkip) r.overall = std::max(r.overall, c.status);
  }
  // What to do first: the first failure from the bottom of the stack up (a broken lower layer
  // explains the symptoms above it); without failures, the lowest warning.
  for (CheckStatus wanted : {CheckStatus::kFail, CheckStatus::kWarn}) {
    for (const CheckResult& c : r.checks) {
      for (const Finding& f : c.findings) {
        if (!r.first && f.status == wanted) r.first = f;
      }
    }
  }
  r.card = MakeCard(inv);
  r.timings = inv.timings;
  r.host_root = inv.host_root;
  r.simulated = inv.simulated_profile;
  return r;
}

int ExitCode(const DoctorReport& report) {
  switch (report.overall) {
    case CheckStatus::kFail: return 2;
    case CheckStatus::kWarn: return 1;
    default: return 0;
  }
}

nlohmann::ordered_json ToJson(const DoctorReport& r) {
  nlohmann::ordered_json checks = nlohmann::ordered_json::array();
  for (const CheckResult& c : r.checks) {
    nlohmann::ordered_json findings = nlohmann::ordered_json::array();
    for (const Finding& f : c.findings) findings.push_back(FindingJson(f));
    checks.push_back({{"layer", LayerId(c.layer)}, {"status", StatusName(c.status)}, {"observed", c.observed},
                      {"expected", c.expected}, {"findings", findings}});
  }
  nlohmann::ordered_json gpus = nlohmann::ordered_json::array();
  for (const GpuCard& g : r.card.gpus) {
    auto or_null = [](const std::string& v) {
      return v.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(v);
    };
    gpus.push_back({{"index", g.index},
                    {"state", g.state},
                    {"error", or_null(g.error)},
                    {"nvmlError", or_null(g.nvml_error)},
                    {"model", g.model},
                    {"uuid", g.uuid},
                    {"pciBusId", g.bus_id},
                    {"memoryTotalMiB", Opt(g.memory_total_mib)},
                    {"memoryUsedMiB", Opt(g.memory_used_mib)},
                    {"persistenceMode", Opt(g.persistence)},
                    {"eccEnabled", Opt(g.ecc)},
                    {"pcie", {{"gen", Opt(g.pcie_gen)}, {"genMax", Opt(g.pcie_gen_max)},
                              {"width", Opt(g.pcie_width)}, {"widthMax", Opt(g.pcie_width_max)}}},
                    {"numaNode", Opt(g.numa_node)},
                    {"migEnabled", Opt(g.mig)},
                    {"temperatureC", Opt(g.temperature_c)},
                    {"powerLimitW", Opt(g.power_limit_w)},
                    {"computeCapability", g.compute_capability},
                    {"vbios", g.vbios}});
  }
  const BaselineCard& card = r.card;
  nlohmann::ordered_json doc = {
      {"apiVersion", "gpunode/v1"},
      {"kind", "DoctorReport"},
      {"metadata", {{"hostname", card.hostname}, {"hostRoot", r.host_root},
                    {"simulated", r.simulated ? nlohmann::ordered_json(*r.simulated) : nlohmann::ordered_json(nullptr)},
                    {"gpunodeVersion", GPUNODE_VERSION}}},
      {"summary", {{"status", StatusName(r.overall)}, {"exitCode", ExitCode(r)},
                   {"firstAction", r.first ? FindingJson(*r.first) : nlohmann::ordered_json(nullptr)}}},
      {"checks", checks},
      {"baseline", {{"node", {{"hostname", card.hostname}, {"kernelRelease", card.kernel_release},
                              {"driverVersion", card.driver_version}, {"cudaVersion", card.cuda_version},
                              {"kernelModule", card.module_flavor}, {"nvcc", card.nvcc},
                              {"containerRuntimes", card.container_runtimes}, {"numaNodes", card.numa_nodes},
                              {"gpuCount", card.gpus.size()},
                              {"readableGpuCount", CountState(card, "ok")},
                              {"lostGpuCount", CountState(card, "lost")}}},
                    {"gpus", gpus}}},
      {"timings", {{"totalMs", Round2(r.timings.total_ms)}, {"nvmlLoadMs", Round2(r.timings.nvml_load_ms)},
                   {"nvmlInitMs", Round2(r.timings.nvml_init_ms)}, {"nvmlQueryMs", Round2(r.timings.nvml_query_ms)},
                   {"cudaInitMs", Round2(r.timings.cuda_init_ms)}, {"filesMs", Round2(r.timings.files_ms)},
                   {"nonCudaMs", Round2(r.timings.non_cuda_ms)}}}};
  return doc;
}

namespace {

struct Style {
  bool color;
  std::string Paint(absl::string_view text, const char* code) const {
    return color ? absl::StrCat("\033[", code, "m", text, "\033[0m") : std::string(text);
  }
  std::string Status(CheckStatus s) const {
    std::string word = absl::StrFormat("%-4s", StatusName(s));
    switch (s) {
      case CheckStatus::kOk: return Paint(word, "32");
      case CheckStatus::kSkip: return Paint(word, "2");
      case CheckStatus::kWarn: return Paint(word, "33");
      case CheckStatus::kFail: return Paint(word, "1;31");
    }
    return word;
  }
  std::string Bold(absl::string_view t) const { return Paint(t, "1"); }
};

template <typename T>
std::string Or(const std::optional<T>& v, absl::string_view dash = "-") {
  return v ? absl::StrCat(*v) : std::string(dash);
}
std::string YesNo(const std::optional<bool>& v) { return v ? (*v ? "on" : "off") : "-"; }

}  // namespace

std::string RenderText(const DoctorReport& r, bool color) {
  Style s{color};
  std::string out;
  absl::StrAppend(&out, s.Bold("gpunode doctor"), "  ", r.card.hostname.empty() ? "(unknown host)" : r.card.hostname);
  if (r.simulated) absl::StrAppend(&out, "  [simulated node: ", *r.simulated, "]");
  if (!r.simulated && r.host_root != "/") absl::StrAppend(&out, "  [host root ", r.host_root, "]");
  absl::StrAppend(&out, "\n\n");
  for (const CheckResult& c : r.checks) {
    absl::StrAppend(&out, "  ", s.Status(c.status), "  ", absl::StrFormat("%-18s", LayerTitle(c.layer)), c.observed, "\n");
  }
  bool any = false;
  for (const CheckResult& c : r.checks) {
    for (const Finding& f : c.findings) {
      if (!any) absl::StrAppend(&out, "\n", s.Bold("Findings"), "\n");
      any = true;
      std::vector<std::string> layers;
      for (Layer l : f.layers) layers.emplace_back(LayerTitle(l));
      absl::StrAppend(&out, "  ", s.Status(f.status), "  ", f.summary, "  [", absl::StrJoin(layers, " vs "), "; ", f.id,
                      "]\n");
      absl::StrAppend(&out, "        observed:  ", f.observed, "\n");
      if (!f.expected.empty()) absl::StrAppend(&out, "        expected:  ", f.expected, "\n");
      absl::StrAppend(&out, "        why:       ", f.diagnosis, "\n");
      absl::StrAppend(&out, "        do:        ", f.action, "\n");
    }
  }
  const BaselineCard& card = r.card;
  absl::StrAppend(&out, "\n", s.Bold("Baseline card"), "\n");
  absl::StrAppend(&out, "  node      ", card.hostname.empty() ? "-" : card.hostname, ", kernel ",
                  card.kernel_release.empty() ? "-" : card.kernel_release, ", ", card.numa_nodes, " NUMA node(s)\n");
  absl::StrAppend(&out, "  driver    ", card.driver_version.empty() ? "-" : card.driver_version,
                  card.module_flavor.empty() ? "" : " (" + card.module_flavor + " kernel module)", ", supports CUDA ",
                  card.cuda_version.empty() ? "-" : card.cuda_version, "\n");
  absl::StrAppend(&out, "  toolchain ", card.nvcc.empty() ? "no nvcc on the host" : "nvcc " + card.nvcc, "\n");
  absl::StrAppend(&out, "  runtimes  ",
                  card.container_runtimes.empty() ? "none" : absl::StrJoin(card.container_runtimes, ", "), "\n");
  if (!card.gpus.empty()) {
    absl::StrAppend(&out, "\n  ",
                    absl::StrFormat("%-3s %-24s %-14s %-17s %-7s %-4s %-4s %-13s %-4s %-4s %-5s %s", "GPU", "MODEL",
                                    "BUS", "MEMORY MiB", "PERSIST", "ECC", "MIG", "PCIE NOW/MAX", "NUMA", "TEMP",
                                    "POWER", "UUID"),
                    "\n");
    for (const GpuCard& g : card.gpus) {
      if (g.state != "ok" && g.state != "unknown") {
        // NVML cannot open it: what the bus tells, then the state in place of the measurements
        // (the UUID stays in its column).
        std::string what = absl::StrCat(g.state, " (NVML: ", g.error.empty() ? g.nvml_error : g.error, ")");
        absl::StrAppend(&out, "  ",
                        absl::StrFormat("%-3d %-24s %-14s ", g.index, g.model.empty() ? "-" : g.model.substr(0, 24),
                                        g.bus_id.empty() ? "-" : g.bus_id),
                        s.Paint(absl::StrFormat("%-65s", what), "1;31"), " ", g.uuid.empty() ? "-" : g.uuid, "\n");
        continue;
      }
      std::string mem = g.memory_total_mib ? absl::StrCat(Or(g.memory_used_mib), "/", *g.memory_total_mib) : "-";
      std::string pcie = absl::StrCat(g.pcie_gen ? absl::StrCat("G", *g.pcie_gen) : "-", "x", Or(g.pcie_width), "/",
                                      g.pcie_gen_max ? absl::StrCat("G", *g.pcie_gen_max) : "-", "x",
                                      Or(g.pcie_width_max));
      std::string power = g.power_limit_w ? absl::StrFormat("%.0fW", *g.power_limit_w) : "-";
      std::string temp = g.temperature_c ? absl::StrCat(*g.temperature_c, "C") : "-";
      absl::StrAppend(&out, "  ",
                      absl::StrFormat("%-3d %-24s %-14s %-17s %-7s %-4s %-4s %-13s %-4s %-4s %-5s %s", g.index,
                                      g.model.substr(0, 24), g.bus_id, mem, YesNo(g.persistence), YesNo(g.ecc),
                                      YesNo(g.mig), pcie, Or(g.numa_node), temp, power, g.uuid),
                      "\n");
    }
  }
  absl::StrAppend(&out, "\n");
  std::string verdict = r.overall == CheckStatus::kFail   ? s.Paint("FAIL", "1;31")
                        : r.overall == CheckStatus::kWarn ? s.Paint("WARN", "33")
                                                          : s.Paint("OK", "32");
  absl::StrAppend(&out, s.Bold("Result"), ": ", verdict,
                  absl::StrFormat(" in %.0f ms (CUDA init %.0f ms, in parallel with everything else: %.1f ms, "
                                  "of which NVML init %.1f ms)\n",
                                  r.timings.total_ms, r.timings.cuda_init_ms, r.timings.non_cuda_ms,
                                  r.timings.nvml_init_ms));
  if (r.first && r.first->status >= CheckStatus::kWarn) {
    absl::StrAppend(&out, s.Bold("Do first"), ": ", r.first->action, "\n");
  }
  return out;
}

}  // namespace gpunode::doctor
