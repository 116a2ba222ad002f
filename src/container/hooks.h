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

}  // namespace gpunode::container

#endif  // GPUNODE_CONTAINER_HOOKS_H_
