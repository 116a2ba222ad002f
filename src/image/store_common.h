// The node's own image stores — containerd, Docker, containers-storage (podman, CRI-O) — behind one
// interface, and what they share: the platform to pick, the names a reference may be stored under,
// digests checked, the walk from an OCI/Docker index or manifest to the config blob.
//
// A store answers Find (one image, by reference) and List (every image it holds, bounded). Errors
// name the store and its socket or folder: "containerd /run/containerd/containerd.sock: namespace
// k8s.io: image not found". Codes: NotFound — the store is there but lacks the image (or a blob of
// it); Unavailable — the store is not there (no socket, nobody answering, no storage folder);
// DeadlineExceeded — it did not answer in time; InvalidArgument/DataLoss — what it holds is
// malformed or does not match its digest. Nothing is written to a store, no lock of its is taken.
#ifndef GPUNODE_IMAGE_STORE_COMMON_H_
#define GPUNODE_IMAGE_STORE_COMMON_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "src/base/status.h"
#include "src/compat/image_ref.h"
#include "src/image/image_config.h"

namespace gpunode::image {

// A manifest or index larger than this is refused (real ones: a few KiB; big multi-arch indexes
// with attestations ~100 KiB).
inline constexpr size_t kMaxManifestBytes = 4u << 20;
// containers-storage's images.json larger than this is refused.
inline constexpr size_t kMaxImagesJsonBytes = 64u << 20;
// A List answers at most this many images per store (the rest is an error, not truncation).
inline constexpr size_t kMaxListedImages = 10000;
// Default time for one call to a store's socket.
inline constexpr absl::Duration kDefaultStoreTimeout = absl::Seconds(2);

// os/architecture[/variant], as OCI image indexes name platforms.
struct Platform {
  std::string os = "linux";
  std::string architecture = "amd64";
  std::string variant;  // "" matches any variant
  std::string ToString() const;
};
// "linux/amd64", "linux/arm64/v8", "linux/arm/v7" (any case; architecture aliases x86_64 -> amd64,
// aarch64 -> arm64); InvalidArgument otherwise.
StatusOr<Platform> ParsePlatform(absl::string_view text);
// x86_64 / x86-64 -> amd64, aarch64 -> arm64, others unchanged.
std::string NormalizeArchitecture(absl::string_view architecture);
// Whether an index entry's platform is the wanted one (arm64's variant "v8" is its default, so
// "linux/arm64" and "linux/arm64/v8" are the same).
bool PlatformMatches(const Platform& want, absl::string_view os, absl::string_view architecture,
                     absl::string_view variant);

// One image of a store's List.
struct StoredImage {
  std::vector<std::string> names;  // the store's names ("docker.io/library/ubuntu:22.04", ...)
  std::string id;                  // the store's id (containers-storage / Docker image id)
  std::string namespace_name;      // containerd's namespace, else ""
  ImageConfig config;              // valid when error is empty
  std::string error;               // why its config could not be read (the rest still listed)
};

struct StoreOptions {
  Platform platform;                     // the instance to pick from an index
  absl::Duration timeout = kDefaultStoreTimeout;  // per call to a socket
  size_t max_images = kMaxListedImages;  // List's bound
};

class ImageStore {
 public:
  virtual ~ImageStore() = default;
  // "containerd /run/containerd/containerd.sock", "docker /var/run/docker.sock",
  // "containers-storage /var/lib/containers/storage": the prefix of every error.
  virtual std::string Name() const = 0;
  // "containerd" | "docker" | "containers-storage" (ImageConfig::source_kind).
  virtual std::string Kind() const = 0;
  virtual StatusOr<ImageConfig> Find(const compat::ImageRef& ref) = 0;
  virtual StatusOr<std::vector<StoredImage>> List() = 0;
};

// The full names a reference may be stored under, most specific first: "reg/repo:tag@digest",
// "reg/repo@digest", "reg/repo:tag" (containerd's CRI and containers-storage keep full names;
// "ubuntu" is "docker.io/library/ubuntu:latest").
std::vector<std::string> CandidateNames(const compat::ImageRef& ref);
// "reg/repo" of a full stored name ("docker.io/library/ubuntu:22.04" -> "docker.io/library/ubuntu");
// "" when it does not parse.
std::string RepositoryOf(absl::string_view stored_name);

// "sha256:<64 lower-case hex>" of `data`.
std::string Sha256Digest(absl::string_view data);
// A digest as gpunode accepts it from a store: sha256 with 64 lower-case hex digits (anything
// else, e.g. a path-like string, is InvalidArgument naming `what`).
Status CheckDigest(absl::string_view digest, absl::string_view what);
// OK when `data` has `digest` (sha256 or sha512); InvalidArgument for another or a malformed
// digest, DataLoss naming `what` when the data does not hash to it.
Status VerifyDigest(absl::string_view data, absl::string_view digest, absl::string_view what);

// A content descriptor of an index or manifest.
struct Descriptor {
  std::string media_type;
  std::string digest;
  int64_t size = -1;  // -1: unknown
};

// Reads one blob by its descriptor: the bytes, verified against the digest, at most `max_bytes`.
// NotFound when the store lacks it.
using BlobReader = std::function<StatusOr<std::string>(const Descriptor&, size_t max_bytes)>;

struct ResolvedImage {
  std::string manifest_digest;  // the platform's manifest (== the top digest for a single manifest)
  Descriptor config;
  std::string config_json;
};
// From an index or manifest document (`top`, whose descriptor is `top_desc`) to the config blob of
// `platform`: an index (OCI or Docker manifest list) picks the entry of that platform (attestation
// entries "unknown/unknown" are skipped; nested indexes at most 2 deep), a manifest names its
// config. Each document and blob through `read`. Errors name `source` ("containerd ...: image
// docker.io/library/ubuntu:22.04"): no entry for the platform lists the platforms there are.
StatusOr<ResolvedImage> ResolveConfig(absl::string_view top, const Descriptor& top_desc,
                                      const Platform& platform, const BlobReader& read,
                                      absl::string_view source);

// Unavailable naming `store` when `local_path` is missing or not a socket ("no socket at ...").
Status CheckUnixSocket(const std::string& local_path, absl::string_view store);

// ParseImageConfig of a resolved image with the store's facts filled in.
StatusOr<ImageConfig> ConfigFromResolved(const ResolvedImage& r, absl::string_view reference,
                                         absl::string_view top_digest, absl::string_view source,
                                         absl::string_view source_kind, absl::string_view error_prefix);

}  // namespace gpunode::image

#endif  // GPUNODE_IMAGE_STORE_COMMON_H_
