#include "src/cli/image_source.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "src/image/registry_auth.h"
#include "src/image/store_containers_storage.h"

namespace gpunode::cli {

void AddStoreFlags(CLI::App* cmd, StoreFlags& f) {
  cmd->add_option("--store", f.store, "Only this store of the node (default: all three)")
      ->check(CLI::IsMember({"containerd", "docker", "containers-storage"}));
  cmd->add_option("--containerd-socket", f.containerd_socket,
                  "containerd's socket (k3s/RKE2: /run/k3s/containerd/containerd.sock)")
      ->capture_default_str();
  cmd->add_option("--containerd-namespace", f.containerd_namespace,
                  "Only this containerd namespace (default: k8s.io, moby, default, then the others)");
  cmd->add_option("--docker-socket", f.docker_socket, "Docker's socket")->capture_default_str();
  cmd->add_option("--storage-root", f.storage_root,
                  "containers-storage's graph root (default: from storage.conf, /var/lib/containers/storage)");
}

void AddRegistryFlags(CLI::App* cmd, RegistryFlags& f) {
  cmd->add_option("--registry-ca", f.ca_file, "PEM CA certificates trusted besides the system's");
  cmd->add_option("--registry-auth", f.auth, "USER:PASSWORD for the registry (visible to ps; prefer the file)");
  cmd->add_option("--registry-auth-file", f.auth_file, "A file holding USER:PASSWORD for the registry");
  cmd->add_option("--docker-config", f.docker_config,
                  "Docker config with registry credentials (default: $DOCKER_CONFIG/config.json or "
                  "~/.docker/config.json)");
  cmd->add_flag("--insecure-registry", f.insecure, "Speak plain HTTP to the registry (a local test registry)");
}

void AddImageSourceFlags(CLI::App* cmd, ImageSourceFlags& f, bool node_stores) {
  cmd->add_option("--image-source", f.source,
                  node_stores ? "Where to read the image's config: auto (the node's stores, then the registry, then "
                                "the data set), node, registry, or data (the data set only, offline)"
                              : "Where to read the image's config: auto (the registry, then the data set), registry, "
                                "or data (the data set only, offline)")
      ->check(node_stores ? CLI::IsMember({"auto", "node", "registry", "data"})
                          : CLI::IsMember({"auto", "registry", "data"}))
      ->capture_default_str();
  cmd->add_option("--platform", f.platform, "The entry of a multi-platform image: os/arch[/variant]")
      ->capture_default_str();
  cmd->add_option("--registry-timeout", f.timeout_s, "Seconds for the whole registry lookup")->capture_default_str();
  if (node_stores) AddStoreFlags(cmd, f.stores);
  AddRegistryFlags(cmd, f.registry);
}

StatusOr<image::RegistryOptions> RegistryOptionsFrom(const RegistryFlags& f, const std::string& platform,
                                                     double timeout_s) {
  if (!(timeout_s > 0 && timeout_s <= 600)) {
    return absl::InvalidArgumentError(absl::StrCat("timeout ", timeout_s, ": not between 0 and 600 seconds"));
  }
  GPUNODE_RETURN_IF_ERROR(image::ParsePlatform(platform).status());
  image::RegistryOptions o;
  o.platform = platform;
  o.ca_file = f.ca_file;
  o.plain_http = f.insecure;
  o.docker_config_path = f.docker_config;
  o.timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  if (!f.auth.empty() && !f.auth_file.empty()) {
    return absl::InvalidArgumentError("--registry-auth and --registry-auth-file: give one of them");
  }
  if (!f.auth.empty()) {
    GPUNODE_ASSIGN_OR_RETURN(o.credential, image::ParseUserPassword(f.auth, "--registry-auth"));
  } else if (!f.auth_file.empty()) {
    std::ifstream in(f.auth_file, std::ios::binary);
    if (!in) return absl::InvalidArgumentError(absl::StrCat("--registry-auth-file ", f.auth_file, ": cannot be read"));
    std::string text(4097, '\0');
    in.read(text.data(), static_cast<std::streamsize>(text.size()));
    text.resize(static_cast<size_t>(in.gcount()));
    if (text.size() > 4096) {
      return absl::InvalidArgumentError(absl::StrCat("--registry-auth-file ", f.auth_file, ": larger than 4096 bytes"));
    }
    GPUNODE_ASSIGN_OR_RETURN(o.credential,
                             image::ParseUserPassword(text, absl::StrCat("--registry-auth-file ", f.auth_file)));
  }
  return o;
}

StatusOr<std::vector<std::unique_ptr<image::ImageStore>>> OpenNodeStores(const HostFs& fs, const StoreFlags& f,
                                                                         const image::StoreOptions& so) {
  std::vector<std::unique_ptr<image::ImageStore>> stores;
  if (f.store.empty() || f.store == "containerd") {
    stores.push_back(image::NewContainerdStore(fs, {f.containerd_socket, f.containerd_namespace, so}));
  }
  if (f.store.empty() || f.store == "docker") {
    stores.push_back(image::NewDockerStore(fs, {f.docker_socket, so}));
  }
  if (f.store.empty() || f.store == "containers-storage") {
    image::ContainersStorageOptions o;
    if (!f.storage_root.empty()) {
      o.graph_root = f.storage_root;
    } else {
      const char* home = std::getenv("HOME");
      // Rootless podman's store is the user's own; under --host-root, the node's.
      const bool rootless = ::geteuid() != 0 && fs.is_system_root();
      GPUNODE_ASSIGN_OR_RETURN(o, image::DefaultContainersStorage(fs, rootless, home != nullptr ? home : ""));
    }
    o.store = so;
    stores.push_back(image::NewContainersStorageStore(fs, o));
  }
  return stores;
}

StatusOr<image::LookupPlan> MakeLookupPlan(const HostFs& fs, const ImageSourceFlags& f, bool node_stores) {
  image::LookupPlan plan;
  if (f.source == "data") return plan;
  GPUNODE_ASSIGN_OR_RETURN(image::Platform platform, image::ParsePlatform(f.platform));
  if (node_stores && (f.source == "auto" || f.source == "node")) {
    image::StoreOptions so;
    so.platform = platform;
    GPUNODE_ASSIGN_OR_RETURN(plan.stores, OpenNodeStores(fs, f.stores, so));
  }
  if (f.source == "auto" || f.source == "registry") {
    GPUNODE_ASSIGN_OR_RETURN(plan.registry, RegistryOptionsFrom(f.registry, f.platform, f.timeout_s));
  }
  return plan;
}

}  // namespace gpunode::cli
