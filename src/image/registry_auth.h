// Credentials for a registry and the challenges it answers with (src/image/registry.h uses them).
//
// Sources, in the order a lookup tries them: an explicit credential (--registry-auth USER:PASSWORD
// or a file holding that), a Kubernetes Secret of type kubernetes.io/dockerconfigjson (its
// `.dockerconfigjson`, read by the caller), the Docker config ($DOCKER_CONFIG/config.json, else
// ~/.docker/config.json). From a Docker config only `auths.<host>.auth` (base64 "user:password")
// and `auths.<host>.identitytoken` are used; credential helpers (credsStore, credHelpers) are
// programs gpunode does not run: a helper named for the host is an error saying so.
//
// Formats: Docker CLI's cli/config/configfile (auths keys may carry a scheme and a path, Docker
// Hub's is "https://index.docker.io/v1/"); the WWW-Authenticate grammar of RFC 7235 §4.1 with the
// parameters of the distribution token spec (docs/spec/auth/token.md: realm, service, scope).
#ifndef GPUNODE_IMAGE_REGISTRY_AUTH_H_
#define GPUNODE_IMAGE_REGISTRY_AUTH_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "src/base/status.h"

namespace gpunode::image {

// A Docker config or .dockerconfigjson larger than this is refused.
inline constexpr size_t kMaxDockerConfigBytes = 1u << 20;

struct Credential {
  std::string username;
  std::string password;
  std::string identity_token;  // an OAuth2 refresh token (docker login with a token)
  // Where it came from, for error messages: "--registry-auth", "/root/.docker/config.json
  // (auths \"localhost:5000\")" ... Never the secret itself.
  std::string source;
  bool HasBasic() const { return !username.empty() || !password.empty(); }
};

// "USER:PASSWORD" (the password may hold ':'); InvalidArgument naming `source` otherwise.
StatusOr<Credential> ParseUserPassword(absl::string_view text, absl::string_view source);

// What a Docker config says about `host` (a registry host as in image references, "docker.io"
// for Docker Hub). nullopt: nothing for this host. `note` (when not null) receives a sentence
// for an error message when the config names a credential store that might have had one
// ("credsStore \"desktop\" is a credential helper, which gpunode does not run"). A
// credHelpers entry for the host is FailedPrecondition (not supported). `source` names the
// file (or Secret) in messages.
StatusOr<std::optional<Credential>> CredentialFromDockerConfig(absl::string_view json, absl::string_view host,
                                                               absl::string_view source,
                                                               std::string* note = nullptr);

// $DOCKER_CONFIG/config.json when DOCKER_CONFIG is set, else $HOME/.docker/config.json ("" when
// neither variable is set).
std::string DefaultDockerConfigPath();

// One challenge of a WWW-Authenticate header.
struct AuthChallenge {
  std::string scheme;                         // lower case: "bearer", "basic"
  std::map<std::string, std::string> params;  // names in lower case, values unquoted
};
// All challenges in one header value ("Bearer realm=\"...\",service=\"...\", Basic realm=x").
// InvalidArgument on a syntax error (an unclosed quote, a parameter without a scheme).
StatusOr<std::vector<AuthChallenge>> ParseWwwAuthenticate(absl::string_view header);

}  // namespace gpunode::image

#endif  // GPUNODE_IMAGE_REGISTRY_AUTH_H_
