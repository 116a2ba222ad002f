// The Prometheus exporter-toolkit web configuration file (`--web-config-file`), the format
// dcgm-exporter and every Prometheus exporter read:
//   tls_server_config: {cert_file, key_file, client_auth_type, client_ca_file, min_version,
//                       max_version}
//   http_server_config: {http2, headers: {Name: value}}
//   basic_auth_users: {user: <bcrypt hash>}
// Unknown keys are errors (the toolkit parses strictly); settings gpunode does not implement
// (cipher_suites, curve_preferences, client_allowed_sans, inline cert/key, rate_limit) are errors
// naming the key rather than being ignored, so a security setting never silently does nothing.
#ifndef GPUNODE_EXPORTER_WEB_CONFIG_H_
#define GPUNODE_EXPORTER_WEB_CONFIG_H_

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "src/base/status.h"

namespace gpunode::exporter {

struct WebConfig {
  struct Tls {
    std::string cert_file;
    std::string key_file;
    std::string client_ca_file;
    // NoClientCert | RequestClientCert | RequireAnyClientCert | VerifyClientCertIfGiven |
    // RequireAndVerifyClientCert (Go's names, as the toolkit).
    std::string client_auth_type = "NoClientCert";
    std::string min_version = "TLS12";  // TLS10 | TLS11 | TLS12 | TLS13
    std::string max_version = "TLS13";
  };
  std::optional<Tls> tls;
  std::map<std::string, std::string> basic_auth_users;  // user -> bcrypt hash ($2a$/$2b$/$2y$)
  std::map<std::string, std::string> headers;           // added to every response
};

// `source` names the file in errors. Paths in the file are taken relative to `base_dir` when not
// absolute (the toolkit resolves them against the config file's directory).
StatusOr<WebConfig> ParseWebConfig(std::string_view yaml, std::string_view source,
                                   std::string_view base_dir = "");
// Reads and parses the file; a missing or unreadable file is an error naming it. The TLS files it
// names must be readable too.
StatusOr<WebConfig> LoadWebConfig(const std::string& path);

// true when `password` matches the crypt(3) `hash` (bcrypt through libcrypt).
bool CheckPassword(const std::string& password, const std::string& hash);

// HTTP basic authentication against basic_auth_users. A successful check is remembered (bcrypt
// costs tens of milliseconds by design; Prometheus sends the same credentials every scrape).
class BasicAuthenticator {
 public:
  explicit BasicAuthenticator(std::map<std::string, std::string> users) : users_(std::move(users)) {}
  bool enabled() const { return !users_.empty(); }
  // `authorization` is the request's Authorization header ("Basic dXNlcjpwYXNz").
  bool Allow(std::string_view authorization);

 private:
  std::map<std::string, std::string> users_;
  std::mutex mu_;
  std::map<std::string, std::string> verified_;  // user -> password that matched
};

}  // namespace gpunode::exporter

#endif  // GPUNODE_EXPORTER_WEB_CONFIG_H_
