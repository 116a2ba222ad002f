#include "src/kube/client.h"

#include <signal.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <thread>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "httplib.h"
#include "src/base/host_fs.h"
#include "src/base/json.h"
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

struct X509Deleter {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyDeleter {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct BioDeleter {
  void operator()(BIO* b) const { BIO_free(b); }
};

std::string OpenSslError() {
  unsigned long e = ERR_get_error();
  if (e == 0) return "no PEM data";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  ERR_clear_error();
  return buf;
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

struct Client::Impl {
  std::unique_ptr<httplib::ClientImpl> http;
  std::string token_cache;
  struct timespec token_mtime {};
  Status init_error;
};

namespace {

// One HTTP(S) client for a connection: the CA store, the client certificate, verification.
std::unique_ptr<httplib::ClientImpl> MakeHttp(const Connection& c, Status* init_error) {
  if (c.scheme == "http") return std::make_unique<httplib::ClientImpl>(c.host, c.port);
  std::unique_ptr<X509, X509Deleter> cert;
  std::unique_ptr<EVP_PKEY, KeyDeleter> key;
  if (!c.client_cert_pem.empty()) {
    std::unique_ptr<BIO, BioDeleter> b(BIO_new_mem_buf(c.client_cert_pem.data(), static_cast<int>(c.client_cert_pem.size())));
    cert.reset(PEM_read_bio_X509(b.get(), nullptr, nullptr, nullptr));
    std::unique_ptr<BIO, BioDeleter> k(BIO_new_mem_buf(c.client_key_pem.data(), static_cast<int>(c.client_key_pem.size())));
    key.reset(PEM_read_bio_PrivateKey(k.get(), nullptr, nullptr, nullptr));
    if (!cert || !key) {
      *init_error = absl::InvalidArgumentError(
          absl::StrCat(c.source, ": the client certificate or key is not PEM: ", OpenSslError()));
    }
  }
  auto ssl = cert && key ? std::make_unique<httplib::SSLClient>(c.host, c.port, cert.get(), key.get())
                         : std::make_unique<httplib::SSLClient>(c.host, c.port);
  if (!c.ca_pem.empty()) {
    X509_STORE* store = X509_STORE_new();
    std::unique_ptr<BIO, BioDeleter> b(BIO_new_mem_buf(c.ca_pem.data(), static_cast<int>(c.ca_pem.size())));
    int added = 0;
    while (X509* x = PEM_read_bio_X509(b.get(), nullptr, nullptr, nullptr)) {
      added += X509_STORE_add_cert(store, x) == 1;
      X509_free(x);
    }
    ERR_clear_error();  // the loop ends on "no start line"
    if (added == 0) {
      X509_STORE_free(store);
      *init_error = absl::InvalidArgumentError(absl::StrCat(c.source, ": the CA data holds no PEM certificate"));
    } else {
      ssl->set_ca_cert_store(store);  // owned by the client from here
    }
  }
  ssl->enable_server_certificate_verification(!c.insecure_skip_verify);
  return ssl;
}

}  // namespace

Client::Client(Connection c) : c_(std::move(c)), impl_(std::make_unique<Impl>()) {
  // OpenSSL writes to a socket the API server closed (a restart, an idle keep-alive) without
  // MSG_NOSIGNAL: SIGPIPE would kill the process. Processes that talk to the API ignore it and get
  // EPIPE, which ends the call with Unavailable. (Only here: gpunode oci-runtime must not hand
  // an ignored SIGPIPE on to runc and the container.)
  static std::once_flag once;
  std::call_once(once, [] { ::signal(SIGPIPE, SIG_IGN); });
  impl_->http = MakeHttp(c_, &impl_->init_error);
}

Client::~Client() = default;

std::string Client::BearerToken() {
  if (c_.token_file.empty()) return c_.token;
  struct stat st;
  if (::stat(c_.token_file.c_str(), &st) == 0 &&
      (st.st_mtim.tv_sec != impl_->token_mtime.tv_sec || st.st_mtim.tv_nsec != impl_->token_mtime.tv_nsec)) {
    if (auto t = ReadSmallFile(c_.token_file, "token"); t.ok()) {
      impl_->token_cache = std::string(absl::StripAsciiWhitespace(*t));
      impl_->token_mtime = st.st_mtim;
    }
  }
  return impl_->token_cache.empty() ? c_.token : impl_->token_cache;
}

StatusOr<nlohmann::json> Client::Call(const char* verb, const std::string& path, const std::string& body,
                                      const char* content_type) {
  absl::MutexLock lock(&mu_);
  if (!impl_->init_error.ok()) return impl_->init_error;
  const std::string what = absl::StrCat(verb, " ", path);
  httplib::Headers headers = {{"Accept", "application/json"}, {"User-Agent", "gpunode/" GPUNODE_VERSION}};
  if (std::string token = BearerToken(); !token.empty()) headers.emplace("Authorization", "Bearer " + token);
  const auto secs = std::chrono::duration_cast<std::chrono::seconds>(timeout_);
  const auto usecs = std::chrono::duration_cast<std::chrono::microseconds>(timeout_ - secs);
  impl_->http->set_connection_timeout(secs.count(), usecs.count());
  impl_->http->set_read_timeout(secs.count(), usecs.count());
  impl_->http->set_write_timeout(secs.count(), usecs.count());
  impl_->http->set_keep_alive(true);
  const std::string v = verb;
  auto send = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return v == "GET"     ? impl_->http->Get(path.c_str(), headers)
           : v == "PATCH" ? impl_->http->Patch(path.c_str(), headers, body, content_type)
           : v == "POST"  ? impl_->http->Post(path.c_str(), headers, body, content_type)
           : v == "PUT"   ? impl_->http->Put(path.c_str(), headers, body, content_type)
           : body.empty() ? impl_->http->Delete(path.c_str(), headers)
                          : impl_->http->Delete(path.c_str(), headers, body, content_type);
  };
  httplib::Result res = send();
  // A kept-alive connection the server closed meanwhile (an API server restart, an idle timeout)
  // fails on first use: open a new one and send again, once. Not for POST (a create that did reach
  // the server would be made twice); PUT carries its resourceVersion, PATCH and DELETE repeat safely.
  if (!res && v != "POST" &&
      (res.error() == httplib::Error::Read || res.error() == httplib::Error::Write ||
       res.error() == httplib::Error::Connection || res.error() == httplib::Error::SSLConnection)) {
    impl_->http->stop();
    res = send();
  }
  const std::string server = absl::StrCat(c_.scheme, "://", c_.host, ":", c_.port);
  if (!res) {
    std::string why = httplib::to_string(res.error());
    if (res.error() == httplib::Error::SSLServerVerification) {
      if (auto* ssl = dynamic_cast<httplib::SSLClient*>(impl_->http.get())) {
        why = absl::StrCat("the server's certificate was not accepted: ",
                           X509_verify_cert_error_string(ssl->get_openssl_verify_result()), " (CA from ", c_.source, ")");
      }
    }
    if (res.error() == httplib::Error::Read || res.error() == httplib::Error::Write) {
      impl_->http->stop();  // a broken keep-alive connection: the next call opens a new one
    }
    if (res.error() == httplib::Error::ConnectionTimeout) {
      return absl::DeadlineExceededError(absl::StrCat(what, ": ", server, ": ", why));
    }
    return absl::UnavailableError(absl::StrCat(what, ": ", server, ": ", why));
  }
  const int status = res->status;
  nlohmann::json doc;
  if (!res->body.empty()) {
    auto parsed = ParseJson(res->body, what);
    if (parsed.ok()) doc = std::move(*parsed);
  }
  if (status >= 200 && status < 300) return doc;
  std::string message = doc.is_object() && doc.contains("message") && doc["message"].is_string()
                            ? doc["message"].get<std::string>()
                            : std::string(absl::StripAsciiWhitespace(res->body.substr(0, 300)));
  const std::string text = absl::StrCat(what, ": HTTP ", status, ": ", message);
  switch (status) {
    case 401:
      return absl::UnauthenticatedError(absl::StrCat(text, " (the credentials of ", c_.source, " were refused)"));
    case 403:
      return absl::PermissionDeniedError(text);
    case 404:
      return absl::NotFoundError(text);
    case 409:
      return absl::AbortedError(text);
    case 422:
    case 400:
      return absl::FailedPreconditionError(text);
    case 408:
    case 504:
      return absl::DeadlineExceededError(text);
    default:
      return absl::UnavailableError(text);
  }
}

StatusOr<nlohmann::json> Client::Get(const std::string& path) { return Call("GET", path, "", nullptr); }

StatusOr<nlohmann::json> Client::MergePatch(const std::string& path, const nlohmann::json& patch) {
  return Call("PATCH", path, DumpJson(patch), "application/merge-patch+json");
}

StatusOr<nlohmann::json> Client::Post(const std::string& path, const nlohmann::json& body) {
  return Call("POST", path, DumpJson(body), "application/json");
}

StatusOr<nlohmann::json> Client::Delete(const std::string& path, const nlohmann::json& body) {
  return Call("DELETE", path, body.is_null() ? "" : DumpJson(body), "application/json");
}

}  // namespace gpunode::kube

namespace gpunode::kube {

StatusOr<nlohmann::json> Client::StrategicPatch(const std::string& path, const nlohmann::json& patch) {
  return Call("PATCH", path, DumpJson(patch), "application/strategic-merge-patch+json");
}

StatusOr<nlohmann::json> Client::Put(const std::string& path, const nlohmann::json& body) {
  return Call("PUT", path, DumpJson(body), "application/json");
}

Status Client::Watch(const std::string& path, const std::string& resource_version, int timeout_seconds,
                     const std::function<bool(const std::string&, const nlohmann::json&)>& on_event,
                     const std::atomic<bool>* stop) {
  Status init;
  std::unique_ptr<httplib::ClientImpl> http = MakeHttp(c_, &init);
  if (!init.ok()) return init;
  std::string url = absl::StrCat(path, path.find('?') == std::string::npos ? "?" : "&",
                                 "watch=1&allowWatchBookmarks=true&timeoutSeconds=", timeout_seconds);
  if (!resource_version.empty()) absl::StrAppend(&url, "&resourceVersion=", UrlEscape(resource_version));
  httplib::Headers headers = {{"Accept", "application/json"}, {"User-Agent", "gpunode/" GPUNODE_VERSION}};
  {
    absl::MutexLock lock(&mu_);
    if (std::string token = BearerToken(); !token.empty()) headers.emplace("Authorization", "Bearer " + token);
  }
  http->set_connection_timeout(10, 0);
  http->set_read_timeout(timeout_seconds + 15, 0);
  const std::string what = absl::StrCat("WATCH ", path);
  std::string buffer;
  Status result;
  int http_status = 0;
  bool ended_here = false;
  // A watch with no events blocks in a read for up to timeoutSeconds: `stop` must not wait for
  // the next event (a pod's SIGTERM has 30 s). A helper shuts the socket down when it is set.
  std::atomic<bool> done{false};
  std::thread stopper;
  if (stop != nullptr) {
    stopper = std::thread([&] {
      while (!done.load()) {
        if (stop->load()) {
          http->stop();
          return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    });
  }
  auto res = http->Get(
      url.c_str(), headers,
      [&](const httplib::Response& r) {
        http_status = r.status;
        return r.status == 200;
      },
      [&](const char* data, size_t len) {
        if (stop != nullptr && stop->load()) {
          ended_here = true;
          return false;
        }
        buffer.append(data, len);
        for (size_t nl; (nl = buffer.find('\n')) != std::string::npos;) {
          const std::string line = buffer.substr(0, nl);
          buffer.erase(0, nl + 1);
          if (line.empty()) continue;
          auto ev = ParseJson(line, what);
          if (!ev.ok() || !ev->is_object()) {
            result = absl::UnavailableError(absl::StrCat(what, ": a watch event that is not JSON"));
            return false;
          }
          const std::string type = ev->value("type", "");
          const nlohmann::json& object = (*ev)["object"];
          if (type == "ERROR") {
            const int code = object.is_object() ? object.value("code", 0) : 0;
            const std::string msg = object.is_object() ? object.value("message", "") : "";
            result = code == 410 ? absl::AbortedError(absl::StrCat(what, ": 410 Gone: ", msg, " (list again)"))
                                 : absl::UnavailableError(absl::StrCat(what, ": error event ", code, ": ", msg));
            return false;
          }
          if (!on_event(type, object)) {
            ended_here = true;
            return false;
          }
        }
        return true;
      });
  done = true;
  if (stopper.joinable()) stopper.join();
  if (ended_here || (stop != nullptr && stop->load())) return absl::OkStatus();
  if (!result.ok()) return result;
  if (http_status != 0 && http_status != 200) {
    const std::string text = absl::StrCat(what, ": HTTP ", http_status);
    if (http_status == 401) return absl::UnauthenticatedError(text);
    if (http_status == 403) return absl::PermissionDeniedError(text);
    if (http_status == 410) return absl::AbortedError(absl::StrCat(text, " (list again)"));
    return absl::UnavailableError(text);
  }
  if (!res) {
    return absl::UnavailableError(absl::StrCat(what, ": ", c_.scheme, "://", c_.host, ":", c_.port, ": ",
                                               httplib::to_string(res.error())));
  }
  return absl::OkStatus();  // the server ended it (timeoutSeconds)
}

}  // namespace gpunode::kube
