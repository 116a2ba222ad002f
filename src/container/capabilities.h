// NVIDIA_DRIVER_CAPABILITIES: which driver files a container gets, by capability, as NVIDIA's
// libnvidia-container groups them (nvc_info.c's library and binary lists; the same groups as the
// driver files `cdi generate` looks for). Used by `gpunode oci-runtime` for containers that ask
// for GPUs through NVIDIA_VISIBLE_DEVICES (Docker's --gpus, the device plugin's envvar strategy);
// a CDI request gets the whole spec, as NVIDIA's CDI mode does.
#ifndef GPUNODE_CONTAINER_CAPABILITIES_H_
#define GPUNODE_CONTAINER_CAPABILITIES_H_

#include <set>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "src/base/status.h"
#include "src/container/cdi_spec.h"

namespace gpunode::container {

struct CapabilityFiles {
  const char* capability;              // "utility", "compute", "video", "graphics", "display", "ngx", "compat32"
  std::vector<const char*> libraries;  // sonames without the version: "libnvidia-ml.so"
  std::vector<const char*> binaries;   // "nvidia-smi"
  std::vector<const char*> paths;      // other files by path fragment (IPC sockets, the MPS folder)
};

// Every capability, in NVIDIA's order.
const std::vector<CapabilityFiles>& DriverCapabilityTable();

// The capabilities NVIDIA_DRIVER_CAPABILITIES asks for: comma-separated; "all" = every one; unset
// or empty = "utility,compute" (NVIDIA's default). An unknown name is InvalidArgument naming it.
StatusOr<std::set<std::string>> ParseDriverCapabilities(absl::string_view value);

// "libcuda.so.580.95.05" and "libcuda.so.1" are files of soname "libcuda.so"; "libcudart.so" is not.
bool IsFileOfLibrary(absl::string_view file_name, absl::string_view soname);

// The capability a driver file belongs to ("" for none: device nodes, firmware, config files,
// which every container that asks for a GPU gets).
std::string CapabilityOfFile(absl::string_view path);

// `edits` without the mounts of files whose capability is not in `caps`, and without the symlink
// hook's links to those files.
cdi::ContainerEdits FilterByCapabilities(const cdi::ContainerEdits& edits, const std::set<std::string>& caps);

}  // namespace gpunode::container

#endif  // GPUNODE_CONTAINER_CAPABILITIES_H_
