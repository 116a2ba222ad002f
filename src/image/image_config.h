// The part of a container image gpunode reads: its config (OCI image-spec "config" / Docker's
// image JSON) — env, labels, platform — and where it was read. Nothing else of an image (no
// layer) is ever fetched.
//
// Sources (each its own file): the node's stores — containerd's API, Docker's API, podman/CRI-O's
// containers-storage — and registries through the OCI distribution API. Every one returns an
// ImageConfig through ParseImageConfig, so the bounds on what a tenant's image may hold are in
// one place.
#ifndef GPUNODE_IMAGE_IMAGE_CONFIG_H_
#define GPUNODE_IMAGE_IMAGE_CONFIG_H_

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "src/base/status.h"

namespace gpunode::image {

// A config blob larger than this is refused (real ones are a few KiB; NGC's largest ~30 KiB).
inline constexpr size_t kMaxConfigBytes = 4u << 20;
// At most this many env entries / labels are kept (the rest is an error, not truncation).
inline constexpr size_t kMaxEnvEntries = 4096;
inline constexpr size_t kMaxLabels = 4096;

struct ImageConfig {
  std::string reference;      // as asked ("nvcr.io/nvidia/pytorch:25.08-py3")
  std::string digest;         // the manifest's digest ("sha256:<64 hex>") when known
  std::string config_digest;  // the config blob's digest when known
  std::string os;             // "linux"
  std::string architecture;   // "amd64"
  std::string variant;        // "" or "v8"...
  std::vector<std::string> env;               // "KEY=VALUE", in the image's order
  std::map<std::string, std::string> labels;  // config.Labels
  // Where it was read, for people: "image config (containerd, k8s.io)", "image config (docker)",
  // "image config (containers-storage /var/lib/containers/storage)", "registry nvcr.io".
  std::string source;
  std::string source_kind;  // "containerd" | "docker" | "containers-storage" | "registry"
};

// Parses a config blob: {"architecture", "os", "variant", "config": {"Env": [...],
// "Labels": {...}}} (Docker's older "container_config" is not read). Bounded: kMaxConfigBytes,
// the JSON depth limit of src/base/json.h, kMaxEnvEntries, kMaxLabels; a wrong type is
// InvalidArgument naming `source` and the key. `source` names the input in errors.
StatusOr<ImageConfig> ParseImageConfig(absl::string_view json, absl::string_view source);

// The value of `key` in the env (the last entry wins, as in a container), nullopt when unset.
std::optional<std::string> EnvValue(const ImageConfig& c, absl::string_view key);

}  // namespace gpunode::image

#endif  // GPUNODE_IMAGE_IMAGE_CONFIG_H_
