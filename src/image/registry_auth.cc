#include "src/image/registry_auth.h"

#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "src/base/json.h"

namespace gpunode::image {
namespace {

// The host part of an auths key: "https://index.docker.io/v1/" -> "index.docker.io",
// "http://localhost:5000/v2/" -> "localhost:5000", "Registry.Example" -> "registry.example".
std::string KeyHost(absl::string_view key) {
  absl::ConsumePrefix(&key, "https://") || absl::ConsumePrefix(&key, "http://");
  key = key.substr(0, key.find('/'));
  return absl::AsciiStrToLower(key);
}

bool IsDockerHub(absl::string_view host) {
  return host == "docker.io" || host == "index.docker.io" || host == "registry-1.docker.io";
}

bool SameHost(absl::string_view key_host, absl::string_view host) {
  return key_host == host || (IsDockerHub(key_host) && IsDockerHub(host));
}

Status Bad(absl::string_view source, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(source, ": ", what));
}

}  // namespace

StatusOr<Credential> ParseUserPassword(absl::string_view text, absl::string_view source) {
  text = absl::StripTrailingAsciiWhitespace(text);  // a file's final newline
  const size_t colon = text.find(':');
  if (colon == absl::string_view::npos || colon == 0) {
    return Bad(source, "not USER:PASSWORD (no user name before a ':')");
  }
  if (text.find_first_of("\r\n") != absl::string_view::npos) return Bad(source, "a line break in USER:PASSWORD");
  Credential c;
  c.username = std::string(text.substr(0, colon));
  c.password = std::string(text.substr(colon + 1));
  c.source = std::string(source);
  return c;
}

StatusOr<std::optional<Credential>> CredentialFromDockerConfig(absl::string_view json, absl::string_view host_in,
                                                               absl::string_view source, std::string* note) {
  if (json.size() > kMaxDockerConfigBytes) {
    return Bad(source, absl::StrCat(json.size(), " bytes, more than the ", kMaxDockerConfigBytes, " gpunode reads"));
  }
  GPUNODE_ASSIGN_OR_RETURN(nlohmann::json doc, ParseJson(json, source));
  if (!doc.is_object()) return Bad(source, "not a JSON object");
  const std::string host = absl::AsciiStrToLower(host_in);

  // credHelpers: a program named for this host; gpunode does not run credential helpers.
  if (auto helpers = doc.find("credHelpers"); helpers != doc.end() && helpers->is_object()) {
    for (const auto& [key, helper] : helpers->items()) {
      if (!SameHost(KeyHost(key), host)) continue;
      return absl::FailedPreconditionError(absl::StrCat(
          source, ": credHelpers names the credential helper \"docker-credential-",
          helper.is_string() ? helper.get<std::string>() : std::string("?"), "\" for ", host,
          "; gpunode does not run credential helpers (not supported): give the credentials with "
          "--registry-auth or an auths entry"));
    }
  }
  std::string store;
  if (auto cs = doc.find("credsStore"); cs != doc.end() && cs->is_string() && !cs->get<std::string>().empty()) {
    store = cs->get<std::string>();
  }

  std::optional<Credential> found;
  auto auths = doc.find("auths");
  if (auths != doc.end() && !auths->is_null()) {
    if (!auths->is_object()) return Bad(source, "auths is not an object");
    for (const auto& [key, entry] : auths->items()) {
      if (!SameHost(KeyHost(key), host)) continue;
      const std::string where = absl::StrCat(source, " (auths \"", key, "\")");
      if (!entry.is_object()) return Bad(where, "not an object");
      Credential c;
      c.source = where;
      if (auto a = entry.find("auth"); a != entry.end() && !a->is_null()) {
        if (!a->is_string()) return Bad(where, "auth is not a string");
        std::string decoded;
        if (!absl::Base64Unescape(a->get<std::string>(), &decoded)) return Bad(where, "auth is not base64");
        if (!decoded.empty()) {
          GPUNODE_ASSIGN_OR_RETURN(c, ParseUserPassword(decoded, absl::StrCat(where, " auth")));
          c.source = where;
        }
      }
      // The older form with separate fields (still written by some tools).
      for (const char* k : {"username", "password", "identitytoken"}) {
        auto it = entry.find(k);
        if (it == entry.end() || it->is_null()) continue;
        if (!it->is_string()) return Bad(where, absl::StrCat(k, " is not a string"));
        std::string v = it->get<std::string>();
        if (v.empty()) continue;
        if (k[0] == 'u') c.username = v;
        if (k[0] == 'p') c.password = v;
        if (k[0] == 'i') c.identity_token = v;
      }
      if (!c.HasBasic() && c.identity_token.empty()) continue;  // "{}": a credential store's mark
      found = c;
      if (KeyHost(key) == host) break;  // an exact key wins over a Docker Hub alias
    }
  }
  if (!found && !store.empty() && note != nullptr) {
    *note = absl::StrCat(source, " names the credential store \"docker-credential-", store,
                         "\", which gpunode does not run (not supported); the request was made without "
                         "credentials: give them with --registry-auth");
  }
  return found;
}

std::string DefaultDockerConfigPath() {
  if (const char* d = std::getenv("DOCKER_CONFIG"); d != nullptr && *d != '\0') {
    return absl::StrCat(d, "/config.json");
  }
  if (const char* h = std::getenv("HOME"); h != nullptr && *h != '\0') {
    return absl::StrCat(h, "/.docker/config.json");
  }
  return "";
}

StatusOr<std::vector<AuthChallenge>> ParseWwwAuthenticate(absl::string_view header) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("WWW-Authenticate \"", header.substr(0, 200), "\": ", why));
  };
  if (header.size() > 16384) return bad("longer than 16384 bytes");
  std::vector<AuthChallenge> out;
  size_t i = 0;
  const size_t n = header.size();
  auto skip_ws = [&] {
    while (i < n && (header[i] == ' ' || header[i] == '\t')) ++i;
  };
  auto is_token = [](char c) {
    return absl::ascii_isalnum(c) || absl::StrContains("!#$%&'*+-.^_`|~/", c);
  };
  while (i < n) {
    skip_ws();
    if (i < n && header[i] == ',') {
      ++i;
      continue;
    }
    if (i >= n) break;
    // A token: either a new scheme or (after a scheme) a parameter name followed by '='.
    const size_t start = i;
    while (i < n && is_token(header[i])) ++i;
    if (i == start) return bad(absl::StrCat("unexpected character '", header.substr(i, 1), "'"));
    std::string token(header.substr(start, i - start));
    skip_ws();
    if (i < n && header[i] == '=' && !out.empty() &&
        !(i + 1 < n && header[i + 1] == '=')) {  // token68 ends in '='; parameters do not
      ++i;
      skip_ws();
      std::string value;
      if (i < n && header[i] == '"') {
        ++i;
        bool closed = false;
        while (i < n) {
          const char c = header[i++];
          if (c == '\\' && i < n) {
            value += header[i++];
          } else if (c == '"') {
            closed = true;
            break;
          } else {
            value += c;
          }
        }
        if (!closed) return bad("an unclosed quoted string");
      } else {
        // RFC 7235 wants a token here; registries also send URLs unquoted: up to ',' or a space.
        const size_t vs = i;
        while (i < n && header[i] != ',' && header[i] != ' ' && header[i] != '\t') ++i;
        value = std::string(header.substr(vs, i - vs));
      }
      out.back().params[absl::AsciiStrToLower(token)] = value;
      continue;
    }
    if (i < n && header[i] == '=' && out.empty()) return bad("a parameter before any scheme");
    AuthChallenge c;
    c.scheme = absl::AsciiStrToLower(token);
    out.push_back(std::move(c));
    if (out.size() > 16) return bad("more than 16 challenges");
  }
  if (out.empty()) return bad("no challenge");
  return out;
}

}  // namespace gpunode::image
