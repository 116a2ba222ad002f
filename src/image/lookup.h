// Where `compat check --image` and `fleet compat --image` look for an image's config, in order:
// the node's own stores (containerd, Docker, containers-storage — an image that runs here is
// usually there), then its registry. The first that has it answers; what each of the others said
// is kept, so the caller can say why it fell back to the data set.
#ifndef GPUNODE_IMAGE_LOOKUP_H_
#define GPUNODE_IMAGE_LOOKUP_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "src/base/status.h"
#include "src/compat/image_ref.h"
#include "src/image/image_config.h"
#include "src/image/registry.h"
#include "src/image/store_common.h"

namespace gpunode::image {

struct LookupPlan {
  std::vector<std::unique_ptr<ImageStore>> stores;  // tried in order
  std::optional<RegistryOptions> registry;          // absent: no registry lookup
};

struct LookupResult {
  std::optional<ImageConfig> config;
  // One line per source that did not answer, in order: "containerd /run/containerd/containerd.sock:
  // namespace k8s.io: image not found", "registry docker.io: no network: ...".
  std::vector<std::string> tried;
};

// Tries each store's Find, then the registry. A store that is not there (Unavailable) or lacks
// the image (NotFound) is passed over like any other failure: the next source is tried.
LookupResult LookUpImageConfig(const compat::ImageRef& ref, LookupPlan& plan);

}  // namespace gpunode::image

#endif  // GPUNODE_IMAGE_LOOKUP_H_
