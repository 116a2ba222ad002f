// Node-feature labels: the label set of NVIDIA's gpu-feature-discovery (GFD), with its names and
// value formats (shared/reference/device-plugin.md §1.9), plus gpunode's own under `gpunode.io/`
// (driver branch, which CUDA majors the driver runs, a health summary). User doc: docs/labels.md.
//
// Pure: BuildLabels reads a node::NodeInventory, the plugin configuration and a few facts the caller
// gathers (machine type, time, compat data set); the command (src/cli/labels_cmd.cc) probes,
// prints, and writes node-feature-discovery's features file.
#ifndef GPUNODE_LABELS_LABELS_H_
#define GPUNODE_LABELS_LABELS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "src/base/status.h"
#include "src/compat/dataset.h"
#include "src/devices/config.h"
#include "src/node/inventory.h"

namespace gpunode::labels {

// Label key -> value, sorted by key (the order of the features file).
using Labels = std::map<std::string, std::string>;

// GFD's vGPU labels (nvidia.com/vgpu.*): whether an NVIDIA PCI function is a vGPU (its
// configuration space has a vendor-specific capability signed "VF"), and the hypervisor's driver
// that the capability's record 0 names.
struct VgpuHost {
  std::string driver_version;  // e.g. "460.16"
  std::string driver_branch;   // e.g. "r460_00"
};
struct VgpuInfo {
  bool present = false;                 // some NVIDIA function is a vGPU
  std::optional<VgpuHost> host;         // of the last vGPU function read (GFD keeps the last)
};

// One function's PCI configuration space (sysfs `config`) -> nullopt when it is not a vGPU, else
// its host driver record. As GFD: fewer than 256 bytes (an unprivileged read) is
// FailedPrecondition, a vGPU capability without the record is NotFound.
StatusOr<std::optional<VgpuHost>> ParseVgpuConfigSpace(absl::string_view config);

struct LabelOptions {
  // nvidia.com/vgpu.present (and .host-driver-version/-branch); nullopt leaves them out, as GFD
  // does when a configuration space cannot be read.
  std::optional<VgpuInfo> vgpu;

  // Unix seconds for `nvidia.com/gfd.timestamp`; empty leaves the label out (--no-timestamp).
  std::optional<int64_t> timestamp;
  // The DMI product name as read (e.g. "DGX H200"), "unknown" when it could not be read.
  std::string machine_type = "unknown";
  // For `gpunode.io/driver.cuda-<major>`; null leaves those labels out.
  const compat::CompatData* compat = nullptr;
};

struct LabelSet {
  Labels labels;
  // What a user should know about the set (several GPU models, an invalid MIG layout for the
  // `single` strategy, MPS with MIG, ...). GFD logs the same situations.
  std::vector<std::string> warnings;
};

// Every label for the node. Never fails: what cannot be read is left out (GFD's full-GPU labels
// need NVML; a node without readable GPUs keeps the timestamp, machine and gpunode.io labels).
LabelSet BuildLabels(const node::NodeInventory& inv, const devices::PluginConfig& config,
                     const LabelOptions& options);

// node-feature-discovery's "local" feature file: one `key=value` line per label, sorted by key.
std::string RenderFeaturesFile(const Labels& labels);

// GFD's `nvidia.com/gpu.family` from a compute capability: tesla (1.x), fermi (2.x), kepler
// (3.x), maxwell (5.x), pascal (6.x), volta (7.0-7.4), turing (7.5+), ampere (8.0-8.8),
// ada-lovelace (8.9), hopper (9.x), blackwell (10.x, 12.x), rubin (13.x), else "undefined".
std::string ArchFamily(int cc_major, int cc_minor);

// A valid Kubernetes label value from any text: runs of blanks become one '-', characters outside
// [A-Za-z0-9._-] are dropped (as GFD sanitises product names), then the value is cut to 63
// characters and trimmed so that it begins and ends with a letter or digit. May return "".
std::string SanitizeLabelValue(absl::string_view raw);
// Empty, or <= 63 characters of [A-Za-z0-9._-] beginning and ending alphanumeric.
bool IsValidLabelValue(absl::string_view value);
// [prefix/]name: prefix a DNS subdomain (<= 253), name as a value but non-empty.
bool IsValidLabelKey(absl::string_view key);


// The labels as a document for `gpunode labels --print -o json|yaml` (kind NodeLabels).
nlohmann::ordered_json LabelsDocument(const node::NodeInventory& inv, const LabelSet& set);

}  // namespace gpunode::labels

#endif  // GPUNODE_LABELS_LABELS_H_
