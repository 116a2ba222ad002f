// An image's config read from its registry through the OCI distribution API
// (github.com/opencontainers/distribution-spec spec.md): the manifest (an index or manifest list
// first when the image is multi-platform: the entry for the platform asked), then the config
// blob the manifest names. No layer is ever downloaded.
//
//   GET /v2/<repo>/manifests/<tag|digest>   Accept: OCI index/manifest, Docker list/v2 manifest
//   GET /v2/<repo>/manifests/<digest>       the platform's manifest, when the first was an index
//   GET /v2/<repo>/blobs/<config digest>    redirects followed (to another host: no credentials)
//
// Checks: the manifest asked by digest and every manifest reached through an index hash to their
// digest; the config blob hashes to the digest and has the size of its descriptor. Bounds: a
// manifest <= kMaxManifestBytes, the config <= kMaxConfigBytes, a token answer <= kMaxTokenBytes,
// JSON depth (src/base/json.h), at most `max_redirects` redirects per request, and ONE deadline
// for the whole lookup (every connect, handshake and read waits at most until it).
//
// Auth (distribution's docs/spec/auth/token.md): a 401 with `WWW-Authenticate: Bearer realm=...,
// service=...,scope=...` -> GET the realm (with basic credentials when we have some, or POST a
// refresh token for an identity token) for a token, and the request again with it, once; a
// `Basic` challenge -> the request again with basic credentials. registry_auth.h says where
// credentials come from.
#ifndef GPUNODE_IMAGE_REGISTRY_H_
#define GPUNODE_IMAGE_REGISTRY_H_

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "src/base/status.h"
#include "src/compat/image_ref.h"
#include "src/image/image_config.h"
#include "src/image/registry_auth.h"
#include "src/image/store_common.h"  // Platform, Descriptor, digests: shared with the node's stores

namespace gpunode::image {

inline constexpr size_t kMaxTokenBytes = 1u << 20;

struct RegistryOptions {
  std::string platform = "linux/amd64";  // os/arch[/variant]
  std::string ca_file;  // extra CA certificates (PEM) for the registry and its token server
  // Plain HTTP instead of HTTPS (a local test registry); off by default, as in Docker, where
  // a registry must be named insecure to be spoken to without TLS.
  bool plain_http = false;
  // Credentials: the explicit one wins; then a .dockerconfigjson given by the caller (from a
  // Kubernetes Secret); then the Docker config file (DefaultDockerConfigPath() when
  // docker_config_path is empty) unless use_docker_config is false.
  std::optional<Credential> credential;
  std::string docker_config_json;
  std::string docker_config_json_source = "the image pull secret";
  bool use_docker_config = true;
  std::string docker_config_path;
  std::chrono::milliseconds timeout{15000};  // the whole lookup
  std::chrono::milliseconds connect_timeout{5000};
  std::chrono::milliseconds read_timeout{10000};
  int max_redirects = 5;
};

// Reads the config of `ref` from its registry. Errors name the registry and the repository:
// NotFound (404: MANIFEST_UNKNOWN, NAME_UNKNOWN, BLOB_UNKNOWN), Unauthenticated (401 after
// auth; says which credential source was used), PermissionDenied (403), ResourceExhausted
// (429 rate limit with its message and Retry-After; a manifest or config too large),
// Unavailable (no network: name lookup, connection refused, TLS), DeadlineExceeded (the
// deadline), DataLoss (a digest or size mismatch), InvalidArgument (malformed JSON, an unknown
// media type, no entry for the platform: the message lists those the index has).
StatusOr<ImageConfig> FetchFromRegistry(const compat::ImageRef& ref, const RegistryOptions& options);

// ---- pieces, exposed for tests ----

// The host to speak to: Docker Hub's "docker.io" is served by registry-1.docker.io.
std::string RegistryEndpointHost(absl::string_view registry);

// The manifest of an index (OCI image index or Docker manifest list) for `want`: os and
// architecture equal; a variant asked must match, none asked prefers the architecture's default
// ("" for amd64, "v8" for arm64); entries of platform unknown/unknown (attestations) are skipped.
// InvalidArgument naming `source` and listing the platforms present when none fits.
StatusOr<Descriptor> ChoosePlatform(const nlohmann::json& index, const Platform& want, absl::string_view source);

}  // namespace gpunode::image

#endif  // GPUNODE_IMAGE_REGISTRY_H_
