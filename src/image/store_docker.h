// Docker's image store through the Engine API on its Unix socket: GET /images/<ref>/json (inspect:
// Config.Env, Config.Labels, Os, Architecture, Variant, RepoTags, RepoDigests, Id) and GET
// /images/json (the list). The paths carry no version prefix, so the daemon answers in its own API
// version: Docker 29 refuses versions below 1.44, 20.10 knows none above 1.41, and the fields read
// here are the same in all of them (Docker Engine API reference, "Image inspect").
// HTTP/1.1 over AF_UNIX with cpp-httplib; every answer bounded in size and time.
#ifndef GPUNODE_IMAGE_STORE_DOCKER_H_
#define GPUNODE_IMAGE_STORE_DOCKER_H_

#include <memory>
#include <string>

#include "src/base/host_fs.h"
#include "src/image/store_common.h"

namespace gpunode::image {

inline constexpr char kDockerSocket[] = "/var/run/docker.sock";
// An inspect answer larger than this is refused (a real one is a few KiB: the config plus the
// layer list); the list of images, kMaxDockerListBytes.
inline constexpr size_t kMaxDockerInspectBytes = 8u << 20;
inline constexpr size_t kMaxDockerListBytes = 32u << 20;

struct DockerOptions {
  std::string socket = kDockerSocket;  // a host path (read through the HostFs)
  StoreOptions store;
};

// An inspect answer (GET /images/<ref>/json) -> ImageConfig: the config through ParseImageConfig,
// `digest` the RepoDigests entry of `repository` ("reg/repo", "" for any), config_digest the Id.
// Pure, for tests; `where` names the answer in errors.
StatusOr<ImageConfig> ConfigFromDockerInspect(absl::string_view body, absl::string_view repository,
                                              absl::string_view where);

std::unique_ptr<ImageStore> NewDockerStore(const HostFs& fs, DockerOptions options);

}  // namespace gpunode::image

#endif  // GPUNODE_IMAGE_STORE_DOCKER_H_
