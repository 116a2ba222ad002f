// The CDI spec generator (`gpunode cdi generate`), in two steps:
//
//  1. DiscoverDriverFiles() reads the host through HostFs: device nodes under /dev (with their
//     major/minor when they are character devices), MIG capability minors, the driver's user-space
//     libraries found through the driver root's etc/ld.so.cache plus the folders they live in,
//     binaries, GSP firmware and IPC sockets. Only files that exist are returned.
//  2. BuildSpec() is pure: node::NodeInventory + DriverFiles + options -> cdi::Spec, shaped like
//     `nvidia-ctk cdi generate` (shared/reference/container-cdi.md §2): kind nvidia.com/gpu, one
//     device per GPU and name (index "0", UUID "GPU-..."), MIG devices ("0:1", "MIG-..."), "all";
//     control nodes, libraries, binaries, firmware and IPC at spec level; a createContainer hook
//     that creates symlinks and one that updates the container's linker cache, both calling
//     `<hook path> cdi hook ...`; cdiVersion = the lowest version the fields need.
//
// Paths: container paths are the paths on the host (inside the driver root); a mount's hostPath
// is the driver root joined with it. --host-root only changes where we read, never what the spec
// says.
#ifndef GPUNODE_CONTAINER_CDI_H_
#define GPUNODE_CONTAINER_CDI_H_

#include <cstdint>
#include <map>
#include <set>
#include <optional>
#include <string>
#include <vector>

#include "src/base/host_fs.h"
#include "src/base/status.h"
#include "src/container/cdi_spec.h"
#include "src/node/inventory.h"

namespace gpunode::container {

inline constexpr char kDefaultSpecPath[] = "/var/run/cdi/nvidia.yaml";
inline constexpr char kNvidiaKind[] = "nvidia.com/gpu";

struct HostDeviceNode {
  std::string path;  // "/dev/nvidia0": the container path, and the host path below DriverFiles.dev_root
  bool char_device = false;  // false in fixture trees, where nodes are plain files
  uint32_t major = 0;
  uint32_t minor = 0;
};

struct DriverFiles {
  std::string driver_root = "/";  // host path of the root the driver is installed in
  std::string dev_root = "/";     // host path of the root whose /dev holds the device nodes
  std::string version;            // the driver version the libraries were matched to
  std::vector<HostDeviceNode> control_nodes;      // present ones, in nvidia-ctk's order
  std::map<unsigned, HostDeviceNode> gpu_nodes;   // by minor: /dev/nvidia<minor>
  std::map<std::string, unsigned> mig_minors;     // "gpu0/gi2/access" -> 3 (proc/driver/nvidia-caps/mig-minors)
  std::map<unsigned, HostDeviceNode> cap_nodes;   // by minor: /dev/nvidia-caps/nvidia-cap<minor>
  // Paths inside the driver root, sorted, no duplicates.
  std::vector<std::string> libraries;  // regular files "<dir>/lib*.so.<version>"
  std::vector<std::pair<std::string, std::string>> links;  // (target, link): "libcuda.so.1", "<dir>/libcuda.so"
  std::vector<std::string> binaries;
  std::vector<std::string> firmware;  // "/lib/firmware/nvidia/<version>/gsp_*.bin"
  std::vector<std::string> ipc;       // persistenced / fabric-manager sockets, the MPS pipe directory
  std::vector<std::string> warnings;  // what was looked for and not usable
};

struct DiscoverOptions {
  std::string driver_root = "/";  // host path
  // Host path of the root whose /dev holds the device nodes; empty = the driver root (nvidia-ctk's
  // --dev-root default). Not "/": the spec's deviceNodes get a hostPath below it.
  std::string dev_root;
};

// The driver version to match: NVML's, else the kernel module's. Empty when neither is known.
std::string RunningDriverVersion(const node::NodeInventory& inv);

// Reads the host (see the file comment). Fails only when there is no driver at all: no version
// known and no libcuda in the linker cache, or a driver root that does not exist.
StatusOr<DriverFiles> DiscoverDriverFiles(const HostFs& fs, const node::NodeInventory& inv,
                                          const DiscoverOptions& options);

enum class NameStrategy { kIndex, kUuid, kBoth };
StatusOr<NameStrategy> ParseNameStrategy(absl::string_view text);

struct BuildOptions {
  NameStrategy names = NameStrategy::kBoth;  // nvidia-ctk's default: index and uuid
  std::string hook_path;                     // absolute path of the gpunode binary (required unless
                                             // every hook is disabled)
  bool all_device = true;
  // Hooks left out (nvidia-ctk's --disable-hook): "create-symlinks", "update-ldcache".
  std::set<std::string> disabled_hooks;
};

struct BuildResult {
  cdi::Spec spec;
  std::vector<std::string> warnings;  // GPUs left out (no device node), files missing, ...
};

// Pure. Fails when no device can be described (no GPU, no device node) or hook_path is not absolute.
StatusOr<BuildResult> BuildSpec(const node::NodeInventory& inv, const DriverFiles& files,
                                const BuildOptions& options);


}  // namespace gpunode::container

#endif  // GPUNODE_CONTAINER_CDI_H_
