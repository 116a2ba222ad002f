// Where the API server is and who we are: kubeconfig files, a pod's service account, URLs.
#include "src/kube/client.h"

#include <sys/stat.h>

#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "src/base/host_fs.h"
#include "src/base/yaml.h"

namespace gpunode::kube {
namespace {

constexpr char kServiceAccountDir[] = "/var/run/secrets/kubernetes.io/serviceaccount";

// Files the user names (kubeconfig, its certificates, the service account's): HostFs::Local(),
// at most 1 MiB, errors naming what the file was for.
StatusOr<std::string> ReadSmallFile(const std::string& path, const std::string& what) {
  auto text = HostFs::Local().ReadFile(path, 1 << 20);
  if (!text.ok()) return Annotate(text.status(), what);
  return text;
}

std::string Dir(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
}

std::string RelativeTo(const std::string& base_dir, const std::string& path) {
  return path.empty() || path[0] == '/' ? path : absl::StrCat(base_dir, "/", path);
}

std::string Scalar(const YAML::Node& n) {
  try {
    return n && n.IsScalar() ? n.as<std::string>() : "";
  } catch (const YAML::Exception&) {
    return "";
  }
}

// A named entry ("clusters", "users", "contexts") of a kubeconfig.
YAML::Node Named(const YAML::Node& doc, const char* list, const std::string& name, const char* field) {
  const YAML::Node items = doc[list];
  if (!items || !items.IsSequence()) return YAML::Node();
  for (const YAML::Node& item : items) {
    if (Scalar(item["name"]) == name) return item[field];
  }
  return YAML::Node();
}

// "-data" fields are base64; the others name files.
StatusOr<std::string> DataOrFile(const YAML::Node& n, const char* field, const std::string& base_dir,
                                 const std::string& where) {
  const std::string data = Scalar(n[absl::StrCat(field, "-data")]);
  if (!data.empty()) {
    std::string out;
    if (!absl::Base64Unescape(data, &out)) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": ", field, "-data is not base64"));
    }
    return out;
  }
  const std::string file = Scalar(n[field]);
  if (file.empty()) return std::string();
  return ReadSmallFile(RelativeTo(base_dir, file), absl::StrCat(where, ": ", field));
}

}  // namespace

std::string UrlEscape(const std::string& s) {
  std::string out;
  for (unsigned char ch : s) {
    if (absl::ascii_isalnum(ch) || ch == '-' || ch == '_' || ch == '.' || ch == '~') {
      out.push_back(static_cast<char>(ch));
    } else {
      static constexpr char kHex[] = "0123456789ABCDEF";
      out.push_back('%');
      out.push_back(kHex[ch >> 4]);
      out.push_back(kHex[ch & 15]);
    }
  }
  return out;
}

Status ParseServer(const std::string& server, Connection* c) {
  absl::string_view s = server;
  if (absl::ConsumePrefix(&s, "https://")) {
    c->scheme = "https";
    c->port = 443;
  } else if (absl::ConsumePrefix(&s, "http://")) {
    c->scheme = "http";
    c->port = 80;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("server \"", server, "\": not an https:// or http:// URL"));
  }
  s = s.substr(0, s.find('/'));  // a path prefix is not supported (nor needed by the API server)
  absl::string_view port;
  if (absl::ConsumePrefix(&s, "[")) {  // [::1]:6443
    size_t close = s.find(']');
    if (close == absl::string_view::npos) return absl::InvalidArgumentError(absl::StrCat("server \"", server, "\": unclosed ["));
    c->host = std::string(s.substr(0, close));
    absl::string_view rest = s.substr(close + 1);
    if (absl::ConsumePrefix(&rest, ":")) port = rest;
  } else {
    size_t colon = s.rfind(':');
    c->host = std::string(colon == absl::string_view::npos ? s : s.substr(0, colon));
    if (colon != absl::string_view::npos) port = s.substr(colon + 1);
  }
  if (c->host.empty()) return absl::InvalidArgumentError(absl::StrCat("server \"", server, "\": no host"));
  if (!port.empty() && (!absl::SimpleAtoi(port, &c->port) || c->port <= 0 || c->port > 65535)) {
    return absl::InvalidArgumentError(absl::StrCat("server \"", server, "\": bad port"));
  }
  return absl::OkStatus();
}

StatusOr<Connection> LoadKubeconfig(const std::string& path, const std::string& context) {
  GPUNODE_ASSIGN_OR_RETURN(std::string text, ReadSmallFile(path, "kubeconfig"));
  GPUNODE_ASSIGN_OR_RETURN(YAML::Node doc, LoadYaml(text, path));
  if (!doc.IsMap()) return absl::InvalidArgumentError(absl::StrCat("kubeconfig ", path, ": not a YAML mapping"));
  const std::string ctx_name = context.empty() ? Scalar(doc["current-context"]) : context;
  if (ctx_name.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("kubeconfig ", path, ": no current-context (name one with --context)"));
  }
  const YAML::Node ctx = Named(doc, "contexts", ctx_name, "context");
  if (!ctx || !ctx.IsMap()) {
    return absl::InvalidArgumentError(absl::StrCat("kubeconfig ", path, ": no context \"", ctx_name, "\""));
  }
  const std::string cluster_name = Scalar(ctx["cluster"]);
  const std::string user_name = Scalar(ctx["user"]);
  const YAML::Node cluster = Named(doc, "clusters", cluster_name, "cluster");
  if (!cluster || !cluster.IsMap()) {
    return absl::InvalidArgumentError(
        absl::StrCat("kubeconfig ", path, ": context \"", ctx_name, "\" names cluster \"", cluster_name, "\", which is not there"));
  }
  Connection c;
  c.source = absl::StrCat("kubeconfig ", path, " (context ", ctx_name, ")");
  const std::string base = Dir(path);
  const std::string where = absl::StrCat("kubeconfig ", path, " cluster \"", cluster_name, "\"");
  GPUNODE_RETURN_IF_ERROR(ParseServer(Scalar(cluster["server"]), &c));
  GPUNODE_ASSIGN_OR_RETURN(c.ca_pem, DataOrFile(cluster, "certificate-authority", base, where));
  c.insecure_skip_verify = Scalar(cluster["insecure-skip-tls-verify"]) == "true";
  c.ns = Scalar(ctx["namespace"]);
  if (c.ns.empty()) c.ns = "default";
  const YAML::Node user = Named(doc, "users", user_name, "user");
  if (user && user.IsMap()) {
    const std::string uwhere = absl::StrCat("kubeconfig ", path, " user \"", user_name, "\"");
    if (user["exec"] || user["auth-provider"]) {
      return absl::UnimplementedError(absl::StrCat(
          uwhere, ": exec and auth-provider credentials are not supported; use a token, a token file or a client certificate"));
    }
    c.token = Scalar(user["token"]);
    c.token_file = RelativeTo(base, Scalar(user["tokenFile"]));
    GPUNODE_ASSIGN_OR_RETURN(c.client_cert_pem, DataOrFile(user, "client-certificate", base, uwhere));
    GPUNODE_ASSIGN_OR_RETURN(c.client_key_pem, DataOrFile(user, "client-key", base, uwhere));
    if (c.client_cert_pem.empty() != c.client_key_pem.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(uwhere, ": a client certificate needs its key, and the other way round"));
    }
  }
  return c;
}

StatusOr<Connection> InClusterConnection(const std::string& dir_in) {
  const std::string dir = dir_in.empty() ? kServiceAccountDir : dir_in;
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (host == nullptr || *host == '\0' || port == nullptr || *port == '\0') {
    return absl::FailedPreconditionError("not in a pod: KUBERNETES_SERVICE_HOST/KUBERNETES_SERVICE_PORT are not set");
  }
  Connection c;
  c.source = "in-cluster (service account)";
  const std::string h = host;
  GPUNODE_RETURN_IF_ERROR(ParseServer(
      absl::StrCat("https://", h.find(':') != std::string::npos ? absl::StrCat("[", h, "]") : h, ":", port), &c));
  c.token_file = dir + "/token";
  GPUNODE_ASSIGN_OR_RETURN(std::string token, ReadSmallFile(c.token_file, "service-account token"));
  GPUNODE_ASSIGN_OR_RETURN(c.ca_pem, ReadSmallFile(dir + "/ca.crt", "service-account CA"));
  if (auto ns = ReadSmallFile(dir + "/namespace", "namespace"); ns.ok()) {
    c.ns = std::string(absl::StripAsciiWhitespace(*ns));
  }
  if (c.ns.empty()) c.ns = "default";
  return c;
}

StatusOr<Connection> ResolveConnection(const std::string& kubeconfig) {
  if (!kubeconfig.empty()) return LoadKubeconfig(kubeconfig);
  if (const char* env = std::getenv("KUBECONFIG"); env != nullptr && *env != '\0') {
    std::string first(env);
    first = first.substr(0, first.find(':'));  // the first file of a list
    return LoadKubeconfig(first);
  }
  auto in = InClusterConnection();
  if (in.ok() || std::getenv("KUBERNETES_SERVICE_HOST") != nullptr) return in;
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    const std::string path = absl::StrCat(home, "/.kube/config");
    struct stat st;
    if (::stat(path.c_str(), &st) == 0) return LoadKubeconfig(path);
  }
  return absl::FailedPreconditionError(
      "no Kubernetes API: give --kubeconfig FILE or set KUBECONFIG, or run in a pod with a service account");
}

}  // namespace gpunode::kube
