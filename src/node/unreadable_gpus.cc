#include "src/node/unreadable_gpus.h"

#include <algorithm>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "src/gpu/nvml.h"

namespace gpunode::node {
namespace {

// /proc shows "??" (or a run of '?') for what the driver could not read.
bool Known(const std::string& value) { return !value.empty() && value.find('?') == std::string::npos; }

}  // namespace

std::string SysfsBusId(std::string_view bus_id) {
  std::string id = absl::AsciiStrToLower(absl::string_view(bus_id.data(), bus_id.size()));
  // NVML's 8-digit domain ("00000000:3a:00.0") -> sysfs's 4 digits.
  if (id.find(':') == 8 && id.compare(0, 4, "0000") == 0) id.erase(0, 4);
  return id;
}

std::vector<BusGpu> NvidiaGpusOnBus(const HardwareLayer& hardware, const KernelDriverLayer& kernel) {
  std::map<std::string, const ProcGpu*> proc;
  for (const ProcGpu& g : kernel.gpus) proc[SysfsBusId(g.bus_id)] = &g;
  std::vector<BusGpu> out;
  auto add_proc_facts = [](BusGpu& b, const ProcGpu& p) {
    if (Known(p.model)) b.model = p.model;
    if (Known(p.uuid) && absl::StartsWith(p.uuid, "GPU-")) b.uuid = p.uuid;
  };
  for (const PciDevice& d : hardware.gpus) {
    if (!d.driver.empty() && d.driver != "nvidia") continue;  // vfio-pci, nouveau, ...: not NVML's
    BusGpu b;
    b.pci_bus_id = SysfsBusId(d.bus_id);
    b.pci_device_id = d.device;
    b.numa_node = d.numa_node;
    b.link_current = d.link_current;
    b.link_max = d.link_max;
    if (auto it = proc.find(b.pci_bus_id); it != proc.end()) {
      if (it->second->excluded) continue;
      add_proc_facts(b, *it->second);
    }
    out.push_back(std::move(b));
  }
  if (hardware.gpus.empty()) {
    for (const ProcGpu& p : kernel.gpus) {
      if (p.excluded || p.bus_id.empty()) continue;
      BusGpu b;
      b.pci_bus_id = SysfsBusId(p.bus_id);
      add_proc_facts(b, p);
      out.push_back(std::move(b));
    }
  }
  std::sort(out.begin(), out.end(), [](const BusGpu& a, const BusGpu& b) { return a.pci_bus_id < b.pci_bus_id; });
  return out;
}

std::map<unsigned, BusGpu> MatchUnreadableGpus(const std::vector<BusGpu>& bus,
                                               const std::vector<std::string>& readable_bus_ids,
                                               const std::vector<unsigned>& unreadable) {
  std::set<std::string> claimed;
  for (const std::string& id : readable_bus_ids) claimed.insert(SysfsBusId(id));
  std::vector<const BusGpu*> unclaimed;
  for (const BusGpu& b : bus) {
    if (claimed.count(b.pci_bus_id) == 0) unclaimed.push_back(&b);
  }
  std::sort(unclaimed.begin(), unclaimed.end(),
            [](const BusGpu* a, const BusGpu* b) { return a->pci_bus_id < b->pci_bus_id; });
  std::vector<unsigned> indices = unreadable;
  std::sort(indices.begin(), indices.end());
  indices.erase(std::unique(indices.begin(), indices.end()), indices.end());
  std::map<unsigned, BusGpu> out;
  if (indices.empty() || unclaimed.size() != indices.size()) return out;
  for (size_t i = 0; i < indices.size(); ++i) out.emplace(indices[i], *unclaimed[i]);
  return out;
}

std::map<unsigned, BusGpu> UnreadableGpusOnBus(const NodeInventory& inv) {
  std::vector<std::string> readable;
  for (const gpu::GpuInfo& g : inv.driver.gpus) {
    if (!g.pci_bus_id.empty()) readable.push_back(g.pci_bus_id);
  }
  std::vector<unsigned> unreadable;
  for (const gpu::GpuFailure& f : inv.driver.gpu_failures) unreadable.push_back(f.index);
  return MatchUnreadableGpus(NvidiaGpusOnBus(inv.hardware, inv.kernel), readable, unreadable);
}

const char* UnreadableState(const Status& status) {
  return gpu::NvmlReturnOf(status) == NVML_ERROR_GPU_IS_LOST ? "lost" : "unreadable";
}

std::string UnreadableReason(const Status& status) {
  std::string words(status.message());
  const std::optional<nvmlReturn_t> code = gpu::NvmlReturnOf(status);
  if (!code) return words;
  // gpu::NvmlReturnToStatus wrote "<op>: <NVML's text> (<NVML_ERROR_X>)".
  if (size_t colon = words.find(": "); colon != std::string::npos) words.erase(0, colon + 2);
  const std::string suffix = absl::StrCat(" (", gpu::NvmlReturnName(*code), ")");
  if (words.size() > suffix.size() && absl::EndsWith(words, suffix)) words.resize(words.size() - suffix.size());
  return words;
}

}  // namespace gpunode::node
