// GPU lookup over the data set's `gpus` list: by what people type ("H100", "Tesla T4",
// "RTX 4090", "A100 80GB", "0x2335"), by PCI device id, and by the names NVML reports
// ("NVIDIA A100-SXM4-80GB", "NVIDIA GeForce RTX 4090").
//
// Matching ignores case, the words NVIDIA / Tesla / GeForce / Quadro, spaces, hyphens and
// underscores. When several models match and they agree on architecture, compute capability and
// segment (everything the rules look at), the first one in the data set wins; when they disagree
// the lookup is ambiguous.
#ifndef GPUNODE_COMPAT_GPU_CATALOG_H_
#define GPUNODE_COMPAT_GPU_CATALOG_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/string_view.h"
#include "src/base/status.h"
#include "src/base/version.h"
#include "src/compat/dataset.h"

namespace gpunode::compat {

// One GPU the rules are evaluated for.
struct GpuRef {
  std::string name;          // data set name ("H100 SXM5 80GB") or what NVML reported
  std::string arch;          // "Hopper"; empty if unknown
  std::optional<Version> cc; // compute capability
  std::string segment;       // datacenter | workstation | consumer | embedded | "" (unknown)
  std::optional<uint16_t> pci_device_id;
  std::string matched_from;  // the text or id it was looked up by
  bool in_data_set = false;  // false: built from NVML facts only
  // NVML's brand in libnvidia-container's words ("tesla", "nvidia", "geforce", "quadrortx"...),
  // what NVIDIA_REQUIRE_* `brand=` terms compare against; empty when unknown.
  std::string brand;
};

class GpuCatalog {
 public:
  // `data` must outlive the catalog.
  explicit GpuCatalog(const CompatData& data) : data_(data) {}

  // --gpu NAME|PCI_ID. Unknown or ambiguous -> InvalidArgument naming the input and listing
  // close matches.
  StatusOr<GpuRef> Lookup(absl::string_view typed) const;

  std::optional<GpuRef> LookupByPciId(uint16_t device_id) const;
  // NVML device names; also tolerates suffixes NVML adds ("NVIDIA H100 80GB HBM3").
  std::optional<GpuRef> LookupByName(absl::string_view nvml_name) const;

  // A GPU as NVML describes it: by PCI id, else by name, else from its compute capability alone
  // (architecture from the data set, segment unknown).
  GpuRef FromNode(absl::string_view nvml_name, uint16_t pci_device_id, std::optional<int> cc_major,
                  std::optional<int> cc_minor) const;

 private:
  GpuRef Ref(const GpuModel& m, absl::string_view matched_from) const;
  // Candidates by name matching; `loose` also accepts models whose name is contained in the input.
  std::vector<const GpuModel*> Match(absl::string_view text, bool loose) const;

  const CompatData& data_;
};

// "0x2335", "2335", "10de:2335" -> 0x2335; nullopt if `text` is not a PCI device id.
std::optional<uint16_t> ParsePciDeviceId(absl::string_view text);

}  // namespace gpunode::compat

#endif  // GPUNODE_COMPAT_GPU_CATALOG_H_
