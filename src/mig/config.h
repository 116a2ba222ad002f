// NVIDIA mig-parted's configuration file (version v1), as the GPU Operator's mig-manager reads it
// from its ConfigMap and applies the layout named by the node label `nvidia.com/mig.config`:
//
//   version: v1
//   mig-configs:
//     all-balanced:
//       - device-filter: ["0x233510DE", "0x233B10DE"]   # optional: PCI ids (device<<16|vendor)
//         devices: all                                  # or [0, 1, ...]: GPU indexes
//         mig-enabled: true
//         mig-devices: {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1}
//
// Parsing is strict, as mig-parted's own (unknown keys, a missing `devices`/`mig-enabled`,
// `mig-devices` with MIG off, a bad profile name or count are errors) plus: duplicate keys, an
// empty config and non-boolean `mig-enabled` are refused. Errors name the file, the line and the
// key path: `config.yaml:12: mig-configs.all-balanced[0].mig-devices."1g.18gb": ...`.
// Extensions (documented in docs/mig.md): a device-filter entry that is not a hex id is a GPU
// product name ("NVIDIA H200"), matched case-insensitively; a whole Kubernetes ConfigMap whose
// data holds exactly one file (or `config.yaml`) is read as that file.
#ifndef GPUNODE_MIG_CONFIG_H_
#define GPUNODE_MIG_CONFIG_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "src/base/status.h"

namespace gpunode::mig {

// A MIG device name as mig-parted writes it: [<c>c.]<g>g.<m>gb[+me|+me.all|-me|+gfx].
struct MigProfileName {
  unsigned compute_slices = 0;  // c (== gpu_slices when not written)
  unsigned gpu_slices = 0;      // g
  unsigned memory_gb = 0;       // m
  std::string attributes;       // "", "+me", "+me.all", "-me", "+gfx"

  // Canonical text: the "<c>c." prefix only when c != g ("1c.3g.71gb", "1g.18gb+me").
  std::string ToString() const;
  // The GI profile part: "3g.71gb" for "1c.3g.71gb".
  std::string GpuInstanceName() const;
  bool operator==(const MigProfileName&) const = default;
};
StatusOr<MigProfileName> ParseMigProfileName(absl::string_view text);

struct MigConfigEntry {
  int line = 0;                            // of the entry in the file
  std::vector<uint32_t> filter_ids;        // PCI ids; empty with filter_names empty: any GPU
  std::vector<std::string> filter_names;   // product names (extension)
  bool all_devices = false;
  std::vector<unsigned> devices;           // GPU indexes when !all_devices
  bool mig_enabled = false;
  std::vector<std::pair<MigProfileName, unsigned>> mig_devices;  // in file order, count >= 0

  // Whether this entry selects the GPU at `index` with PCI id `pci_id` and product `name`.
  bool Selects(unsigned index, uint32_t pci_id, absl::string_view name) const;
};

struct MigConfig {
  std::string name;
  int line = 0;
  std::vector<MigConfigEntry> entries;
};

struct MigConfigFile {
  std::string origin;  // file name, for messages
  std::vector<MigConfig> configs;  // in file order

  const MigConfig* Find(absl::string_view name) const;
  std::vector<std::string> Names() const;
};

// `origin` names the input in errors.
StatusOr<MigConfigFile> ParseMigConfigFile(absl::string_view text, absl::string_view origin);
// Reads `path` (a path the user named: HostFs::Local()) and parses it. Errors: kNotFound /
// kPermissionDenied for the file, kInvalidArgument for its content.
StatusOr<MigConfigFile> LoadMigConfigFile(const std::string& path);

}  // namespace gpunode::mig

#endif  // GPUNODE_MIG_CONFIG_H_
