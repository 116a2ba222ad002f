// containerd's image store through its gRPC API on its socket: Namespaces.List, Images.Get/List,
// Content.Read (our minimal protos in proto/containerd/, containerd's package names and field
// numbers). An image is a name in a namespace — the CRI's "k8s.io", Docker's "moby" (with
// containerd's image store), ctr's and nerdctl's "default" — pointing at an index or manifest in
// the content store; the namespace is the gRPC metadata "containerd-namespace". Only the blobs
// present locally are read (containerd keeps the pulled platform's manifest and config, and the
// index).
//
// Sockets: /run/containerd/containerd.sock (containerd's default); k3s runs its own at
// /run/k3s/containerd/containerd.sock, RKE2 at /run/k3s/containerd/containerd.sock too, MicroK8s at
// /var/snap/microk8s/common/run/containerd.sock — pass those with `socket`.
#ifndef GPUNODE_IMAGE_STORE_CONTAINERD_H_
#define GPUNODE_IMAGE_STORE_CONTAINERD_H_

#include <memory>
#include <string>

#include "src/base/host_fs.h"
#include "src/image/store_common.h"

namespace gpunode::image {

inline constexpr char kContainerdSocket[] = "/run/containerd/containerd.sock";

struct ContainerdOptions {
  std::string socket = kContainerdSocket;  // a host path (read through the HostFs)
  // Only this namespace; empty: "k8s.io", "moby", "default", then the others Namespaces.List names.
  std::string namespace_name;
  StoreOptions store;
};

// The namespaces to search, in gpunode's order: k8s.io, moby, default (those that exist), then the
// rest as listed. Pure, for tests.
std::vector<std::string> OrderNamespaces(std::vector<std::string> listed);

std::unique_ptr<ImageStore> NewContainerdStore(const HostFs& fs, ContainerdOptions options);

}  // namespace gpunode::image

#endif  // GPUNODE_IMAGE_STORE_CONTAINERD_H_
