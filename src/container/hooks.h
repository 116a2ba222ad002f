// The createContainer hooks our CDI specs name (`gpunode cdi hook create-symlinks|update-ldcache`),
// the equivalents of nvidia-cdi-hook's. The runtime runs them with the OCI state on stdin; they act
// on the container's root filesystem (root.path of the bundle's config.json). These paths come from
// the runtime, not from the host root, so they do not go through HostFs.
#ifndef GPUNODE_CONTAINER_HOOKS_H_
#define GPUNODE_CONTAINER_HOOKS_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "src/base/status.h"

namespace gpunode::container {

// The container's root directory from the OCI state JSON: <bundle>/config.json's root.path,
// relative to the bundle unless absolute.
StatusOr<std::string> ContainerRootFromState(absl::string_view state_json);

// Creates each link "<target>::<link>" inside `rootfs` (link is an absolute container path; target
// is written as given). An existing entry at the link is left alone; ".." in a link is refused.
Status CreateSymlinks(const std::string& rootfs, const std::vector<std::string>& links);

// Writes <rootfs>/etc/ld.so.conf.d/00-gpunode-cdi.conf listing `folders` (creating etc/ld.so.conf
// with an include of ld.so.conf.d when missing), then runs
// `<ldconfig> -r <rootfs> -f /etc/ld.so.conf -C /etc/ld.so.cache` and fails when it does.
Status UpdateLdCache(const std::string& rootfs, const std::vector<std::string>& folders,
                     const std::string& ldconfig = "/sbin/ldconfig");

// nvidia-cdi-hook's enable-cuda-compat (NVIDIA/nvidia-container-toolkit
// cmd/nvidia-cdi-hook/cudacompat): when the container has exactly one
// <compat_dir>/libcuda.so.<version> (the image's cuda-compat package) and that version's major is
// above the host driver's, writes <rootfs>/etc/ld.so.conf.d/00-compat-gpunode.conf naming
// compat_dir, so the update-ldcache hook that runs next puts the compat libraries first in the
// container's ld cache (forward compatibility). Returns whether it did; no compat library, several,
// or one not newer: false, nothing written. (NVIDIA's newer hook also reads an ELF note of the
// library; the major-version comparison is its fallback and libnvidia-container's rule,
// src/cli/compat_mode.c.)
StatusOr<bool> EnableCudaCompat(const std::string& rootfs, const std::string& host_driver_version,
                                const std::string& compat_dir = "/usr/local/cuda/compat");

}  // namespace gpunode::container

#endif  // GPUNODE_CONTAINER_HOOKS_H_
