#include "src/node/capture.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "src/gpu/nvml.h"

namespace gpunode::node {
namespace {

constexpr uint64_t kMiB = 1024ull * 1024;

using Doc = nlohmann::ordered_json;

int RoundMiB(uint64_t bytes) { return static_cast<int>((bytes + kMiB / 2) / kMiB); }

std::string FlavorName(ModuleFlavor f) {
  return f == ModuleFlavor::kOpen ? "open" : f == ModuleFlavor::kProprietary ? "proprietary" : "open";
}

Doc CaptureGpu(const gpu::GpuInfo& g, const PciDevice* pci) {
  Doc gpu;
  std::vector<std::string> unsupported;
  gpu["name"] = g.name;
  gpu["uuid"] = g.uuid;
  gpu["bus_id"] = g.pci_bus_id;
  gpu["device_id"] = g.pci_device_id;
  gpu["subsystem_id"] = g.pci_subsystem_id;
  if (g.minor_number) gpu["minor"] = *g.minor_number;
  if (g.vbios_version) gpu["vbios"] = *g.vbios_version;
  else unsupported.push_back("vbios");
  if (g.memory_total_bytes) {
    Doc mem = {{"total_mib", RoundMiB(*g.memory_total_bytes)}};
    if (g.memory_used_bytes) mem["used_mib"] = RoundMiB(*g.memory_used_bytes);
    if (g.memory_reserved_bytes) mem["reserved_mib"] = RoundMiB(*g.memory_reserved_bytes);
    gpu["memory"] = mem;
  } else {
    gpu["memory"] = {{"total_mib", 0}};
    unsupported.push_back("memory");
  }
  if (g.persistence_mode) gpu["persistence"] = *g.persistence_mode;
  else unsupported.push_back("persistence_mode");
  if (g.ecc_enabled) {
    Doc ecc = {{"enabled", *g.ecc_enabled}, {"pending", g.ecc_pending.value_or(*g.ecc_enabled)}};
    if (g.ecc_corrected_volatile) ecc["corrected_volatile"] = *g.ecc_corrected_volatile;
    if (g.ecc_uncorrected_volatile) ecc["uncorrected_volatile"] = *g.ecc_uncorrected_volatile;
    if (g.ecc_corrected_aggregate) ecc["corrected_aggregate"] = *g.ecc_corrected_aggregate;
    if (g.ecc_uncorrected_aggregate) ecc["uncorrected_aggregate"] = *g.ecc_uncorrected_aggregate;
    gpu["ecc"] = ecc;
  } else {
    unsupported.push_back("ecc");
  }
  if (g.retired_pages_pending) gpu["retired_pages_pending"] = *g.retired_pages_pending;
  else unsupported.push_back("retired_pages");
  if (g.remapped_rows) {
    gpu["remapped_rows"] = {{"correctable", g.remapped_rows->correctable},
                            {"uncorrectable", g.remapped_rows->uncorrectable},
                            {"pending", g.remapped_rows->pending},
                            {"failure", g.remapped_rows->failure}};
  } else {
    unsupported.push_back("remapped_rows");
  }
  unsigned gen = g.pcie_gen_current.value_or(pci && pci->link_current ? pci->link_current->gen : 1);
  unsigned width = g.pcie_width_current.value_or(pci && pci->link_current ? pci->link_current->width : 16);
  Doc pcie = {{"gen", gen}, {"width", width}};
  if (g.pcie_gen_max) pcie["max_gen"] = *g.pcie_gen_max;
  if (g.pcie_width_max) pcie["max_width"] = *g.pcie_width_max;
  if (g.pcie_gen_gpu_max) pcie["gpu_max_gen"] = *g.pcie_gen_gpu_max;
  gpu["pcie"] = pcie;
  if (!g.pcie_gen_current) unsupported.push_back("pcie");
  gpu["numa_node"] = pci && pci->numa_node ? *pci->numa_node : -1;
  gpu["compute_capability"] = absl::StrCat(g.cc_major.value_or(0), ".", g.cc_minor.value_or(0));
  if (g.temperature_c) gpu["temperature_c"] = *g.temperature_c;
  else unsupported.push_back("temperature");
  Doc power;
  if (g.power_usage_w) power["usage_w"] = *g.power_usage_w;
  else unsupported.push_back("power_usage");
  if (g.power_limit_w) power["limit_w"] = *g.power_limit_w;
  else unsupported.push_back("power_limit");
  if (g.power_enforced_limit_w) power["enforced_limit_w"] = *g.power_enforced_limit_w;
  else unsupported.push_back("enforced_power_limit");
  if (!power.empty()) gpu["power"] = power;
  if (g.sm_clock_mhz && g.mem_clock_mhz) {
    gpu["clocks"] = {{"sm_mhz", *g.sm_clock_mhz}, {"mem_mhz", *g.mem_clock_mhz}};
  } else {
    unsupported.push_back("clocks");
  }
  if (g.utilization_gpu_pct) {
    gpu["utilization"] = {{"gpu", *g.utilization_gpu_pct}, {"memory", g.utilization_memory_pct.value_or(0)}};
  } else {
    unsupported.push_back("utilization");
  }
  if (g.mig_enabled) {
    Doc mig = {{"enabled", *g.mig_enabled}, {"pending", g.mig_pending.value_or(*g.mig_enabled)}};
    if (g.mig_max_devices) mig["max_devices"] = *g.mig_max_devices;
    if (!g.mig_devices.empty()) {
      unsigned max_index = 0;
      Doc devices = Doc::array();
      for (const gpu::MigDevice& m : g.mig_devices) {
        max_index = std::max(max_index, m.index + 1);
        // The profile name as NVIDIA writes it: <GPU slices>g.<memory in GB, rounded up>gb.
        std::string profile = absl::StrCat(m.slices.value_or(1), "g.",
                                           (RoundMiB(m.memory_total_bytes.value_or(0)) + 1023) / 1024, "gb");
        Doc d = {{"profile", profile}, {"uuid", m.uuid}};
        if (m.gpu_instance_id) d["gpu_instance_id"] = *m.gpu_instance_id;
        if (m.compute_instance_id) d["compute_instance_id"] = *m.compute_instance_id;
        if (m.slices) d["slices"] = *m.slices;
        if (m.compute_slices) d["compute_slices"] = *m.compute_slices;
        if (m.memory_total_bytes) d["memory_mib"] = RoundMiB(*m.memory_total_bytes);
        if (m.multiprocessors) d["multiprocessors"] = *m.multiprocessors;
        devices.push_back(d);
      }
      if (!g.mig_max_devices) mig["max_devices"] = max_index;
      mig["devices"] = devices;
    }
    gpu["mig"] = mig;
  } else {
    unsupported.push_back("mig");
  }
  if (!g.nvlinks.empty()) {
    Doc links = Doc::array();
    for (const gpu::NvLinkState& l : g.nvlinks) {
      Doc link = {{"link", l.link}, {"active", l.active}};
      if (!l.remote_bus_id.empty()) link["remote_bus_id"] = l.remote_bus_id;
      links.push_back(link);
    }
    gpu["nvlinks"] = links;
  }
  if (g.compute_processes) {
    if (!g.compute_processes->empty()) {
      Doc procs = Doc::array();
      for (const gpu::GpuProcess& p : *g.compute_processes) {
        procs.push_back({{"pid", p.pid}, {"used_mib", RoundMiB(p.used_memory_bytes.value_or(0))}});
      }
      gpu["processes"] = procs;
    }
  } else {
    unsupported.push_back("processes");
  }
  if (!unsupported.empty()) gpu["unsupported"] = unsupported;
  return gpu;
}

}  // namespace

nlohmann::ordered_json CaptureProfile(const NodeInventory& inv, const std::string& name,
                                      const std::string& description) {
  Doc doc;
  doc["apiVersion"] = "gpunode/v1";
  doc["kind"] = "NodeProfile";
  doc["name"] = name;
  doc["description"] = description;
  Doc host;
  if (!inv.hostname.empty()) host["hostname"] = inv.hostname;
  if (!inv.kernel.kernel_release.empty()) host["kernel_release"] = inv.kernel.kernel_release;
  host["numa_nodes"] = std::max(1, inv.hardware.numa_nodes);
  Doc module = {{"loaded", inv.kernel.proc_present || inv.kernel.nvidia_loaded},
                {"flavor", FlavorName(inv.kernel.flavor)}};
  if (inv.kernel.version) module["version"] = inv.kernel.version->ToString();
  host["module"] = module;
  host["nouveau_loaded"] = inv.kernel.nouveau_loaded;
  host["nvidia_utils"] = !inv.driver.nvidia_smi.empty();
  if (inv.toolchain.cuda_toolkit) {
    Doc tk = {{"version", inv.toolchain.cuda_toolkit->ToString()}};
    if (inv.toolchain.nvcc) tk["nvcc_version"] = inv.toolchain.nvcc->ToString();
    host["cuda_toolkit"] = tk;
  }
  doc["host"] = host;

  Doc driver;
  std::optional<Version> version = inv.driver.driver_version ? inv.driver.driver_version : inv.kernel.version;
  driver["version"] = version ? version->ToString() : "0.0";
  if (inv.driver.nvml_version) driver["nvml_version"] = inv.driver.nvml_version->ToString();
  std::optional<Version> cuda = inv.driver.cuda_version ? inv.driver.cuda_version : inv.driver.cuda.version;
  driver["cuda_version"] = cuda ? cuda->ToString() : "0.0";
  if (auto code = gpu::NvmlReturnOf(inv.driver.status); code && *code != NVML_SUCCESS) {
    driver["init_error"] = std::string(gpu::NvmlReturnName(*code));
  }
  if (inv.driver.cuda.init_result != 0) driver["cuda_init_error"] = inv.driver.cuda.init_result;
  doc["driver"] = driver;

  std::map<std::string, const PciDevice*> pci;
  for (const PciDevice& d : inv.hardware.gpus) pci[d.bus_id] = &d;
  Doc gpus = Doc::array();
  for (const gpu::GpuInfo& g : inv.driver.gpus) {
    auto it = pci.find(g.pci_bus_id);
    gpus.push_back(CaptureGpu(g, it == pci.end() ? nullptr : it->second));
  }
  doc["gpus"] = gpus;
  return doc;
}

}  // namespace gpunode::node
