#include "src/image/registry.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <utility>

#include <openssl/evp.h>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "src/base/json.h"
#include "src/image/http_get.h"

namespace gpunode::image {
namespace {

constexpr char kOciIndex[] = "application/vnd.oci.image.index.v1+json";
constexpr char kOciManifest[] = "application/vnd.oci.image.manifest.v1+json";
constexpr char kDockerList[] = "application/vnd.docker.distribution.manifest.list.v2+json";
constexpr char kDockerManifest[] = "application/vnd.docker.distribution.manifest.v2+json";
constexpr char kOciConfig[] = "application/vnd.oci.image.config.v1+json";
constexpr char kDockerConfig[] = "application/vnd.docker.container.image.v1+json";

bool IsIndex(absl::string_view t) { return t == kOciIndex || t == kDockerList; }
bool IsManifest(absl::string_view t) { return t == kOciManifest || t == kDockerManifest; }


std::string DefaultVariant(absl::string_view arch) { return arch == "arm64" ? "v8" : ""; }

// "media/type; charset=..." -> "media/type"
std::string BareMediaType(absl::string_view t) {
  return absl::AsciiStrToLower(absl::StripAsciiWhitespace(t.substr(0, t.find(';'))));
}

// The distribution API's error body: {"errors":[{"code":"MANIFEST_UNKNOWN","message":"..."}]}.
std::string RegistryErrors(absl::string_view body) {
  auto doc = ParseJson(body.substr(0, 16384), "error body");
  if (!doc.ok() || !doc->is_object()) return "";
  auto errs = doc->find("errors");
  if (errs == doc->end() || !errs->is_array()) return "";
  std::vector<std::string> out;
  for (const auto& e : *errs) {
    if (!e.is_object() || out.size() >= 3) continue;
    std::string code = e.contains("code") && e["code"].is_string() ? e["code"].get<std::string>() : "";
    std::string msg = e.contains("message") && e["message"].is_string() ? e["message"].get<std::string>() : "";
    if (msg.size() > 300) msg = msg.substr(0, 300) + "...";
    // The registry's text, on one line (no control characters reach a log or a terminal).
    for (std::string* t : {&code, &msg}) {
      for (char& ch : *t) {
        if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) ch = ' ';
      }
    }
    out.push_back(code.empty() ? msg : msg.empty() ? code : absl::StrCat(msg, " (", code, ")"));
  }
  return absl::StrJoin(out, "; ");
}

// A body for a message: printable ASCII, at most 200 bytes.
std::string Snippet(absl::string_view body) {
  std::string s;
  for (char c : body.substr(0, 200)) s += (c >= 0x20 && c < 0x7f) ? c : ' ';
  return std::string(absl::StripAsciiWhitespace(s));
}

StatusOr<std::string> ReadSmallFile(const std::string& path, size_t limit, bool* missing) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    if (missing != nullptr) *missing = true;
    return absl::NotFoundError(absl::StrCat(path, ": cannot be read"));
  }
  std::string data(limit + 1, '\0');
  f.read(data.data(), static_cast<std::streamsize>(data.size()));
  data.resize(static_cast<size_t>(f.gcount()));
  if (data.size() > limit) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": larger than the ", limit, " bytes gpunode reads"));
  }
  return data;
}

// One lookup: the registry's URL, the credential, the token once there is one, the deadline.
class Session {
 public:
  Session(const compat::ImageRef& ref, const RegistryOptions& o)
      : ref_(ref), o_(o), deadline_(SteadyClock::now() + o.timeout) {
    base_.scheme = o.plain_http ? "http" : "https";
    base_.port = o.plain_http ? 80 : 443;
    const std::string host = RegistryEndpointHost(ref.registry);
    // "host:port" / "[v6]:port"
    std::string h = host, port;
    if (absl::StartsWith(host, "[")) {
      const size_t close = host.find(']');
      h = host.substr(1, close - 1);
      if (close + 1 < host.size() && host[close + 1] == ':') port = host.substr(close + 2);
    } else if (const size_t colon = host.rfind(':'); colon != std::string::npos) {
      h = host.substr(0, colon);
      port = host.substr(colon + 1);
    }
    base_.host = h;
    if (!port.empty() && !absl::SimpleAtoi(port, &base_.port)) base_.port = 0;
  }

  Status Init();
  // GET a path of the registry (auth and redirects handled); the answer of the last hop.
  StatusOr<HttpResponse> Get(const std::string& path, const std::string& accept, size_t max_body);
  // A Status for a non-2xx answer.
  Status ErrorFor(const HttpResponse& r, absl::string_view what) const;
  std::string Prefix() const { return absl::StrCat("registry ", ref_.registry, ", repository ", ref_.repository); }
  std::string Registry() const { return ref_.registry; }

 private:
  HttpOptions Options(size_t max_body) const {
    HttpOptions h;
    h.deadline = deadline_;
    h.connect_timeout = o_.connect_timeout;
    h.read_timeout = o_.read_timeout;
    h.max_body = max_body;
    h.ca_file = o_.ca_file;
    return h;
  }
  Status Annotated(const Status& s) const {
    if (s.code() == absl::StatusCode::kDeadlineExceeded && absl::StrContains(s.message(), "deadline passed")) {
      return absl::DeadlineExceededError(absl::StrCat(Prefix(), ": no complete answer within the lookup's ",
                                                      o_.timeout.count() / 1000.0, " s: ", s.message()));
    }
    return Status(s.code(), absl::StrCat(Prefix(), ": ", s.message()));
  }
  // Follows redirects; last_on_registry_ says whether the answer came from the registry itself.
  StatusOr<HttpResponse> Follow(const std::string& path, const std::string& accept, size_t max_body);
  Status Authenticate(const HttpResponse& challenge);
  Status FetchToken(const AuthChallenge& c);
  std::string CredentialSource() const {
    if (cred_) return cred_->source;
    return note_.empty() ? "anonymous (no credentials for this registry)" : absl::StrCat("anonymous; ", note_);
  }

  const compat::ImageRef& ref_;
  const RegistryOptions& o_;
  const SteadyClock::time_point deadline_;
  Url base_;
  std::optional<Credential> cred_;
  std::string note_;           // why no credential was used, when a config hinted at one
  std::string authorization_;  // "Bearer ..." or "Basic ..."
  bool auth_tried_ = false;
  bool last_on_registry_ = true;
};

Status Session::Init() {
  if (base_.port <= 0 || base_.port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(Prefix(), ": bad port in the registry name"));
  }
  if (o_.credential) {
    cred_ = o_.credential;
    return absl::OkStatus();
  }
  if (!o_.docker_config_json.empty()) {
    GPUNODE_ASSIGN_OR_RETURN(cred_, CredentialFromDockerConfig(o_.docker_config_json, ref_.registry,
                                                               o_.docker_config_json_source, &note_));
    if (cred_) return absl::OkStatus();
  }
  if (!o_.use_docker_config) return absl::OkStatus();
  const std::string path = o_.docker_config_path.empty() ? DefaultDockerConfigPath() : o_.docker_config_path;
  if (path.empty()) return absl::OkStatus();
  bool missing = false;
  auto text = ReadSmallFile(path, kMaxDockerConfigBytes, &missing);
  if (missing) return absl::OkStatus();  // no Docker config: anonymous
  if (!text.ok()) return text.status();
  std::string note;
  GPUNODE_ASSIGN_OR_RETURN(cred_, CredentialFromDockerConfig(*text, ref_.registry, path, &note));
  if (!cred_ && note_.empty()) note_ = note;
  return absl::OkStatus();
}

Status Session::FetchToken(const AuthChallenge& c) {
  auto realm_it = c.params.find("realm");
  if (realm_it == c.params.end() || realm_it->second.empty()) {
    return absl::UnauthenticatedError(absl::StrCat(Prefix(), ": the registry's Bearer challenge has no realm"));
  }
  auto realm = ParseUrl(realm_it->second);
  if (!realm.ok()) return Annotated(Status(realm.status().code(), absl::StrCat("token realm: ", realm.status().message())));
  if (realm->scheme == "http" && base_.scheme == "https") {
    return absl::UnauthenticatedError(
        absl::StrCat(Prefix(), ": the token realm ", realm->String(), " is plain HTTP; gpunode does not send "
                     "credentials or take tokens over it"));
  }
  std::string service = c.params.count("service") ? c.params.at("service") : "";
  std::string scope = c.params.count("scope") ? c.params.at("scope") : absl::StrCat("repository:", ref_.repository, ":pull");
  HttpOptions h = Options(kMaxTokenBytes);
  auto enc = [](absl::string_view s) {
    std::string out;
    for (unsigned char ch : s) {
      if (absl::ascii_isalnum(ch) || ch == '-' || ch == '_' || ch == '.' || ch == '~') {
        out += static_cast<char>(ch);
      } else {
        absl::StrAppend(&out, "%", absl::AsciiStrToUpper(absl::BytesToHexString(absl::string_view(
                                                          reinterpret_cast<const char*>(&ch), 1))));
      }
    }
    return out;
  };
  Url url = *realm;
  if (cred_ && !cred_->identity_token.empty()) {
    // docker login with an identity token: the OAuth2 refresh-token grant (token spec, oauth.md).
    h.method = "POST";
    h.headers.emplace_back("Content-Type", "application/x-www-form-urlencoded");
    h.body = absl::StrCat("grant_type=refresh_token&client_id=gpunode&refresh_token=", enc(cred_->identity_token),
                          "&service=", enc(service), "&scope=", enc(scope));
  } else {
    std::string q = absl::StrCat(service.empty() ? "" : absl::StrCat("service=", enc(service), "&"), "scope=", enc(scope));
    url.target += (url.target.find('?') == std::string::npos ? "?" : "&") + q;
    if (cred_ && cred_->HasBasic()) {
      h.headers.emplace_back("Authorization",
                             "Basic " + absl::Base64Escape(absl::StrCat(cred_->username, ":", cred_->password)));
    }
  }
  auto r = HttpRequest(url, h);
  if (!r.ok()) return Annotated(Status(r.status().code(), absl::StrCat("token server: ", r.status().message())));
  if (r->status == 401 || r->status == 403) {
    return absl::UnauthenticatedError(absl::StrCat(Prefix(), ": unauthorized: the token server ", realm->Authority(),
                                                   " refused the credentials from ", CredentialSource(), " (HTTP ",
                                                   r->status, ")"));
  }
  if (r->status != 200) return ErrorFor(*r, absl::StrCat("token server ", realm->Authority()));
  auto doc = ParseJson(r->body, absl::StrCat("the token answer of ", realm->Authority()));
  if (!doc.ok()) return Annotated(doc.status());
  std::string token;
  for (const char* k : {"token", "access_token"}) {
    if (doc->is_object() && doc->contains(k) && (*doc)[k].is_string() && !(*doc)[k].get<std::string>().empty()) {
      token = (*doc)[k].get<std::string>();
      break;
    }
  }
  if (token.empty() || token.find_first_of("\r\n") != std::string::npos) {
    return absl::UnauthenticatedError(absl::StrCat(Prefix(), ": the token server ", realm->Authority(),
                                                   " answered without a usable token"));
  }
  authorization_ = "Bearer " + token;
  return absl::OkStatus();
}

Status Session::Authenticate(const HttpResponse& r) {
  std::vector<AuthChallenge> all;
  for (const std::string& v : r.Headers("www-authenticate")) {
    auto parsed = ParseWwwAuthenticate(v);
    if (!parsed.ok()) return Annotated(parsed.status());
    all.insert(all.end(), parsed->begin(), parsed->end());
  }
  for (const AuthChallenge& c : all) {
    if (c.scheme == "bearer") return FetchToken(c);
  }
  for (const AuthChallenge& c : all) {
    if (c.scheme != "basic") continue;
    if (!cred_ || !cred_->HasBasic()) {
      return absl::UnauthenticatedError(absl::StrCat(Prefix(), ": unauthorized: the registry asks for a user name "
                                                     "and password and there are none: ", CredentialSource()));
    }
    authorization_ = "Basic " + absl::Base64Escape(absl::StrCat(cred_->username, ":", cred_->password));
    return absl::OkStatus();
  }
  return absl::UnauthenticatedError(absl::StrCat(
      Prefix(), ": unauthorized (HTTP 401) without a Bearer or Basic challenge gpunode can answer",
      all.empty() ? std::string() : absl::StrCat(" (offered: ", all.front().scheme, ")")));
}

StatusOr<HttpResponse> Session::Follow(const std::string& path, const std::string& accept, size_t max_body) {
  Url url = base_;
  url.target = path;
  last_on_registry_ = true;
  for (int hop = 0;; ++hop) {
    HttpOptions h = Options(max_body);
    if (!accept.empty()) h.headers.emplace_back("Accept", accept);
    if (last_on_registry_ && !authorization_.empty()) h.headers.emplace_back("Authorization", authorization_);
    auto r = HttpRequest(url, h);
    if (!r.ok()) return Annotated(r.status());
    const int st = r->status;
    if (st != 301 && st != 302 && st != 303 && st != 307 && st != 308) return r;
    if (hop >= o_.max_redirects) {
      return absl::UnavailableError(absl::StrCat(Prefix(), ": more than ", o_.max_redirects, " redirects for ", path));
    }
    auto next = ResolveUrl(url, r->Header("location"));
    if (!next.ok()) return Annotated(Status(next.status().code(), absl::StrCat("redirect: ", next.status().message())));
    if (next->scheme == "http" && url.scheme == "https") {
      return absl::UnavailableError(
          absl::StrCat(Prefix(), ": a redirect from HTTPS to plain HTTP (", next->Authority(), ") is refused"));
    }
    // Credentials go to the registry only, never to the storage a blob redirects to.
    last_on_registry_ = last_on_registry_ && next->host == base_.host && next->port == base_.port &&
                        next->scheme == base_.scheme;
    url = *next;
  }
}

StatusOr<HttpResponse> Session::Get(const std::string& path, const std::string& accept, size_t max_body) {
  for (;;) {
    GPUNODE_ASSIGN_OR_RETURN(HttpResponse r, Follow(path, accept, max_body));
    if (r.status != 401 || !last_on_registry_ || auth_tried_) return r;
    auth_tried_ = true;  // one authentication per lookup; a second 401 is the answer
    GPUNODE_RETURN_IF_ERROR(Authenticate(r));
  }
}

Status Session::ErrorFor(const HttpResponse& r, absl::string_view what) const {
  const std::string detail = RegistryErrors(r.body);
  const std::string tail = detail.empty() ? (r.body.empty() ? "" : absl::StrCat(": ", Snippet(r.body)))
                                          : absl::StrCat(": ", detail);
  const std::string head = absl::StrCat(Prefix(), ": ", what, ": ");
  switch (r.status) {
    case 404:
      return absl::NotFoundError(absl::StrCat(head, "not found (HTTP 404)", tail));
    case 401:
      return absl::UnauthenticatedError(
          absl::StrCat(head, "unauthorized (HTTP 401) with credentials from ", CredentialSource(), tail));
    case 403:
      return absl::PermissionDeniedError(absl::StrCat(head, "denied (HTTP 403)", tail));
    case 429: {
      const std::string retry = Snippet(r.Header("retry-after"));
      int seconds = 0;
      const std::string after =
          retry.empty() ? "" : absl::StrCat("; retry after ", retry, absl::SimpleAtoi(retry, &seconds) ? " s" : "");
      // Docker Hub's pull limit: RateLimit-Limit / RateLimit-Remaining ("100;w=21600").
      const std::string limit = Snippet(r.Header("ratelimit-limit"));
      return absl::ResourceExhaustedError(absl::StrCat(head, "rate-limited (HTTP 429)", tail, after,
                                                       limit.empty() ? "" : absl::StrCat("; limit ", limit)));
    }
    default:
      return absl::UnavailableError(absl::StrCat(head, "HTTP ", r.status, tail));
  }
}

// Only the syntax of a digest (it goes into a URL path): InvalidArgument when malformed.
Status DigestSyntax(absl::string_view digest, absl::string_view what) {
  Status st = VerifyDigest("", digest, what);
  return st.code() == absl::StatusCode::kInvalidArgument ? st : absl::OkStatus();
}

struct Manifest {
  std::string media_type;
  std::string body;
  nlohmann::json doc;
};

StatusOr<Manifest> GetManifest(Session& s, const std::string& repo, const std::string& reference,
                               bool verify) {
  static const std::string accept = absl::StrJoin({kOciIndex, kOciManifest, kDockerList, kDockerManifest}, ", ");
  GPUNODE_ASSIGN_OR_RETURN(HttpResponse r, s.Get(absl::StrCat("/v2/", repo, "/manifests/", reference), accept,
                                                 kMaxManifestBytes));
  if (r.status != 200) return s.ErrorFor(r, absl::StrCat("manifest ", reference));
  if (verify) GPUNODE_RETURN_IF_ERROR(VerifyDigest(r.body, reference, absl::StrCat(s.Prefix(), ": manifest")));
  Manifest m;
  const std::string where = absl::StrCat(s.Prefix(), ": manifest ", reference);
  GPUNODE_ASSIGN_OR_RETURN(m.doc, ParseJson(r.body, where));
  if (!m.doc.is_object()) return absl::InvalidArgumentError(absl::StrCat(where, ": not a JSON object"));
  // The mediaType field (OCI: optional but set by every builder), else Content-Type.
  if (auto mt = m.doc.find("mediaType"); mt != m.doc.end() && mt->is_string()) {
    m.media_type = mt->get<std::string>();
  } else {
    m.media_type = BareMediaType(r.Header("content-type"));
    if (m.media_type.empty() || m.media_type == "application/json") {
      m.media_type = m.doc.contains("manifests") ? kOciIndex : kOciManifest;
    }
  }
  if (!IsIndex(m.media_type) && !IsManifest(m.media_type)) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": unknown media type \"", Snippet(m.media_type),
                                                   "\" (gpunode reads OCI and Docker v2 manifests and indexes)"));
  }
  m.body = std::move(r.body);
  return m;
}

StatusOr<Descriptor> ReadDescriptor(const nlohmann::json& d, absl::string_view where) {
  if (!d.is_object()) return absl::InvalidArgumentError(absl::StrCat(where, ": not an object"));
  Descriptor out;
  auto str = [&](const char* k, std::string& dst) -> Status {
    auto it = d.find(k);
    if (it == d.end() || !it->is_string()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": ", k, " is missing or not a string"));
    }
    dst = it->get<std::string>();
    return absl::OkStatus();
  };
  GPUNODE_RETURN_IF_ERROR(str("digest", out.digest));
  if (d.contains("mediaType")) GPUNODE_RETURN_IF_ERROR(str("mediaType", out.media_type));
  if (auto sz = d.find("size"); sz != d.end()) {
    if (!sz->is_number_integer() || sz->get<int64_t>() < 0) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": size is not a non-negative integer"));
    }
    out.size = sz->get<int64_t>();
  }
  return out;
}

}  // namespace

std::string RegistryEndpointHost(absl::string_view registry) {
  if (registry == "docker.io" || registry == "index.docker.io") return "registry-1.docker.io";
  return std::string(registry);
}

StatusOr<Descriptor> ChoosePlatform(const nlohmann::json& index, const Platform& want, absl::string_view source) {
  auto list = index.find("manifests");
  if (list == index.end() || !list->is_array()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": the index has no manifests list"));
  }
  std::vector<std::string> have;
  std::optional<Descriptor> best;
  int best_rank = -1;
  for (size_t i = 0; i < list->size(); ++i) {
    const auto& e = (*list)[i];
    const std::string where = absl::StrCat(source, ": manifests[", i, "]");
    if (!e.is_object()) return absl::InvalidArgumentError(absl::StrCat(where, ": not an object"));
    auto p = e.find("platform");
    if (p == e.end() || !p->is_object()) continue;
    auto field = [&](const char* k) {
      auto it = p->find(k);
      return it != p->end() && it->is_string() ? it->get<std::string>() : std::string();
    };
    Platform got{field("os"), NormalizeArchitecture(field("architecture")), field("variant")};
    if (got.os == "unknown" || got.os.empty()) continue;  // attestation manifests
    if (have.size() < 32) have.push_back(got.ToString());
    if (got.os != want.os || got.architecture != want.architecture) continue;
    int rank;
    if (!want.variant.empty()) {
      const bool same = got.variant == want.variant ||
                        (got.variant.empty() && want.variant == DefaultVariant(want.architecture));
      if (!same) continue;
      rank = got.variant == want.variant ? 2 : 1;
    } else {
      rank = got.variant.empty() || got.variant == DefaultVariant(got.architecture) ? 2 : 1;
    }
    if (rank > best_rank) {
      GPUNODE_ASSIGN_OR_RETURN(Descriptor d, ReadDescriptor(e, where));
      best = d;
      best_rank = rank;
    }
  }
  if (!best) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": no image for platform ", want.ToString(), "; the index has ",
                                                   have.empty() ? "no platforms" : absl::StrJoin(have, ", ")));
  }
  return *best;
}

StatusOr<ImageConfig> FetchFromRegistry(const compat::ImageRef& ref, const RegistryOptions& o) {
  GPUNODE_ASSIGN_OR_RETURN(Platform want, ParsePlatform(o.platform));
  Session s(ref, o);
  GPUNODE_RETURN_IF_ERROR(s.Init());
  const bool by_digest = !ref.digest.empty();
  const std::string reference = by_digest ? ref.digest : (ref.tag.empty() ? "latest" : ref.tag);
  GPUNODE_ASSIGN_OR_RETURN(Manifest m, GetManifest(s, ref.repository, reference, by_digest));
  std::string manifest_digest = by_digest ? ref.digest : Sha256Digest(m.body);
  if (IsIndex(m.media_type)) {
    GPUNODE_ASSIGN_OR_RETURN(Descriptor d, ChoosePlatform(m.doc, want, absl::StrCat(s.Prefix(), ": index ", reference)));
    if (!d.media_type.empty() && !IsManifest(d.media_type)) {
      return absl::InvalidArgumentError(absl::StrCat(s.Prefix(), ": the index entry for ", want.ToString(),
                                                     " has the unknown media type \"", Snippet(d.media_type), "\""));
    }
    GPUNODE_RETURN_IF_ERROR(DigestSyntax(d.digest, absl::StrCat(s.Prefix(), ": index entry")));
    GPUNODE_ASSIGN_OR_RETURN(m, GetManifest(s, ref.repository, d.digest, /*verify=*/true));
    if (!IsManifest(m.media_type)) {
      return absl::InvalidArgumentError(absl::StrCat(s.Prefix(), ": the index entry for ", want.ToString(),
                                                     " is another index (nested indexes are not read)"));
    }
    manifest_digest = d.digest;
  }
  auto cfg = m.doc.find("config");
  if (cfg == m.doc.end()) {
    return absl::InvalidArgumentError(absl::StrCat(s.Prefix(), ": manifest ", reference, " has no config descriptor"));
  }
  GPUNODE_ASSIGN_OR_RETURN(Descriptor c, ReadDescriptor(*cfg, absl::StrCat(s.Prefix(), ": manifest config")));
  if (!c.media_type.empty() && c.media_type != kOciConfig && c.media_type != kDockerConfig) {
    return absl::InvalidArgumentError(absl::StrCat(s.Prefix(), ": the manifest's config has the unknown media type \"",
                                                   Snippet(c.media_type), "\" (not a container image?)"));
  }
  if (c.size > static_cast<int64_t>(kMaxConfigBytes)) {
    return absl::ResourceExhaustedError(absl::StrCat(s.Prefix(), ": the config blob is ", c.size,
                                                     " bytes, more than the ", kMaxConfigBytes, " gpunode reads"));
  }
  GPUNODE_RETURN_IF_ERROR(DigestSyntax(c.digest, absl::StrCat(s.Prefix(), ": config descriptor")));
  GPUNODE_ASSIGN_OR_RETURN(HttpResponse blob,
                           s.Get(absl::StrCat("/v2/", ref.repository, "/blobs/", c.digest), "", kMaxConfigBytes));
  if (blob.status != 200) return s.ErrorFor(blob, absl::StrCat("config blob ", c.digest));
  if (c.size >= 0 && static_cast<int64_t>(blob.body.size()) != c.size) {
    return absl::DataLossError(absl::StrCat(s.Prefix(), ": config blob ", c.digest, " is ", blob.body.size(),
                                            " bytes, the manifest says ", c.size));
  }
  GPUNODE_RETURN_IF_ERROR(VerifyDigest(blob.body, c.digest, absl::StrCat(s.Prefix(), ": config blob")));
  GPUNODE_ASSIGN_OR_RETURN(ImageConfig out,
                           ParseImageConfig(blob.body, absl::StrCat(s.Prefix(), ": config ", c.digest)));
  out.reference = ref.Name() + (ref.tag.empty() ? "" : ":" + ref.tag) + (by_digest ? "@" + ref.digest : "");
  out.digest = manifest_digest;
  out.config_digest = c.digest;
  out.source = absl::StrCat("registry ", ref.registry);
  out.source_kind = "registry";
  return out;
}

}  // namespace gpunode::image
