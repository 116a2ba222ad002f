// The flags that say where an image's config is read from, shared by `compat check --image`,
// `fleet compat --image`, `image config` and `image list`, and the plan they make for
// src/image/lookup.h: the node's stores, then the registry (docs/images.md).
#ifndef GPUNODE_CLI_IMAGE_SOURCE_H_
#define GPUNODE_CLI_IMAGE_SOURCE_H_

#include <memory>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "src/base/host_fs.h"
#include "src/base/status.h"
#include "src/compat/dataset.h"
#include "src/compat/image_ref.h"
#include "src/image/lookup.h"
#include "src/image/registry.h"
#include "src/image/store_common.h"
#include "src/image/store_containerd.h"
#include "src/image/store_docker.h"

namespace gpunode::cli {

// The node's stores.
struct StoreFlags {
  std::string store;  // "" = all three
  std::string containerd_socket = image::kContainerdSocket;
  std::string containerd_namespace;
  std::string docker_socket = image::kDockerSocket;
  std::string storage_root;
};

// The registry.
struct RegistryFlags {
  std::string ca_file;
  std::string auth;       // USER:PASSWORD
  std::string auth_file;  // a file holding USER:PASSWORD
  std::string docker_config;
  bool insecure = false;
};

// For compat check / fleet compat: where to look, and how.
struct ImageSourceFlags {
  std::string source = "auto";  // auto | node | registry | data
  std::string platform = "linux/amd64";
  double timeout_s = 15;        // the registry lookup; the stores get 2 s per call
  StoreFlags stores;
  RegistryFlags registry;
};

void AddStoreFlags(CLI::App* cmd, StoreFlags& f);
void AddRegistryFlags(CLI::App* cmd, RegistryFlags& f);
void AddImageSourceFlags(CLI::App* cmd, ImageSourceFlags& f, bool node_stores);

// The registry options of the flags (credentials read from --registry-auth[-file]);
// InvalidArgument naming the flag.
StatusOr<image::RegistryOptions> RegistryOptionsFrom(const RegistryFlags& f, const std::string& platform,
                                                     double timeout_s);
// The stores the flags name, opened over `fs`.
StatusOr<std::vector<std::unique_ptr<image::ImageStore>>> OpenNodeStores(const HostFs& fs, const StoreFlags& f,
                                                                         const image::StoreOptions& so);
// The whole plan for --image-source; `fs` is the node's (--host-root). For "data" the plan is
// empty (nothing is looked up).
StatusOr<image::LookupPlan> MakeLookupPlan(const HostFs& fs, const ImageSourceFlags& f, bool node_stores);

struct GlobalOptions;
// The workload of `--image REF`: the image's config from where the flags say (compat_cmd.cc),
// over the data set; the data set alone when the config is not found (the sources tried are in
// WorkloadSpec::sources_tried). InvalidArgument for a reference that does not parse.
StatusOr<compat::WorkloadSpec> WorkloadOfImage(const GlobalOptions& global, const compat::CompatData& data,
                                               const std::string& image, const ImageSourceFlags& flags,
                                               bool node_stores);

}  // namespace gpunode::cli

#endif  // GPUNODE_CLI_IMAGE_SOURCE_H_
