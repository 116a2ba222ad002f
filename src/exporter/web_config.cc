#include "src/exporter/web_config.h"

#include <crypt.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <sstream>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "src/base/yaml.h"
#include "src/base/yaml_reader.h"
#include "yaml-cpp/yaml.h"

namespace gpunode::exporter {
namespace {

// Every key of the map `v` must be in `known`; keys in `unsupported` get their own message.
Status CheckKeys(const YamlValue& v, const std::vector<std::string>& known,
                 const std::set<std::string>& unsupported) {
  if (v.IsMap()) {
    for (const auto& kv : v.node()) {
      if (kv.first.IsScalar() && unsupported.count(kv.first.Scalar())) {
        return v.Child(kv.first.Scalar())
            .Error("is not supported by gpunode (remove it or use a TLS proxy)");
      }
    }
  }
  return v.ExpectMap(known);
}

std::string Resolve(std::string_view base_dir, const std::string& path) {
  if (path.empty() || path[0] == '/' || base_dir.empty()) return path;
  return absl::StrCat(std::string(base_dir), "/", path);
}

StatusOr<WebConfig::Tls> ParseTls(const YamlValue& tls, std::string_view base_dir) {
  GPUNODE_RETURN_IF_ERROR(CheckKeys(
      tls, {"cert_file", "key_file", "client_auth_type", "client_ca_file", "min_version", "max_version"},
      {"cert", "key", "client_ca", "client_allowed_sans", "cipher_suites", "curve_preferences",
       "prefer_server_cipher_suites"}));
  WebConfig::Tls t;
  GPUNODE_RETURN_IF_ERROR(tls.Get("cert_file", &t.cert_file));
  GPUNODE_RETURN_IF_ERROR(tls.Get("key_file", &t.key_file));
  GPUNODE_RETURN_IF_ERROR(tls.Get("client_ca_file", &t.client_ca_file));
  GPUNODE_RETURN_IF_ERROR(tls.Get("client_auth_type", &t.client_auth_type));
  GPUNODE_RETURN_IF_ERROR(tls.Get("min_version", &t.min_version));
  GPUNODE_RETURN_IF_ERROR(tls.Get("max_version", &t.max_version));
  if (t.cert_file.empty() || t.key_file.empty()) return tls.Error("needs both cert_file and key_file");
  static const std::set<std::string> kAuth = {"NoClientCert", "RequestClientCert", "RequireAnyClientCert",
                                              "VerifyClientCertIfGiven", "RequireAndVerifyClientCert"};
  if (!kAuth.count(t.client_auth_type)) {
    return tls.Child("client_auth_type")
        .Expected("one of NoClientCert, RequestClientCert, RequireAnyClientCert, VerifyClientCertIfGiven, "
                  "RequireAndVerifyClientCert");
  }
  if ((t.client_auth_type == "VerifyClientCertIfGiven" || t.client_auth_type == "RequireAndVerifyClientCert") &&
      t.client_ca_file.empty()) {
    return tls.Child("client_auth_type").Error(absl::StrCat(t.client_auth_type, " needs client_ca_file"));
  }
  static const std::set<std::string> kVersions = {"TLS10", "TLS11", "TLS12", "TLS13"};
  for (const char* key : {"min_version", "max_version"}) {
    const std::string& v = std::string_view(key) == "min_version" ? t.min_version : t.max_version;
    if (!kVersions.count(v)) {
      // A default that is not in the file cannot be wrong; only a value read from it can.
      return tls.Child(key).Error(absl::StrCat("expected one of TLS10, TLS11, TLS12, TLS13, got ", YamlQuote(v)));
    }
  }
  if (t.min_version > t.max_version) return tls.Child("min_version").Error("is above max_version");
  t.cert_file = Resolve(base_dir, t.cert_file);
  t.key_file = Resolve(base_dir, t.key_file);
  t.client_ca_file = Resolve(base_dir, t.client_ca_file);
  return t;
}

Status ParseHttp(const YamlValue& http, WebConfig* config) {
  GPUNODE_RETURN_IF_ERROR(CheckKeys(http, {"http2", "headers"}, {}));
  // gpunode serves HTTP/1.1 (docs/exporter.md): the value is ignored, but checked as the toolkit's
  // decoder checks it (a bool).
  if (const YamlValue h2 = http.Child("http2"); h2.IsSet()) GPUNODE_RETURN_IF_ERROR(h2.Bool(YamlBool::kStrict).status());
  const YamlValue h = http.Child("headers");
  if (!h.IsSet()) return absl::OkStatus();
  if (!h.IsMap()) return h.Expected("a map of header: value");
  return h.ForEachEntry([&](const std::string& name, const YamlValue& v) -> Status {
    GPUNODE_ASSIGN_OR_RETURN(std::string value, v.String());
    if (name.empty() || name.find_first_of(" :\r\n") != std::string::npos ||
        value.find_first_of("\r\n") != std::string::npos) {
      return v.Error(absl::StrCat("header ", YamlQuote(name), " is not a valid HTTP header"));
    }
    config->headers[name] = value;
    return absl::OkStatus();
  });
}

Status ParseUsers(const YamlValue& users, WebConfig* config) {
  if (!users.IsMap()) return users.Expected("a map of user: bcrypt hash");
  return users.ForEachEntry([&](const std::string& user, const YamlValue& v) -> Status {
    GPUNODE_ASSIGN_OR_RETURN(std::string hash, v.String());
    if (!(absl::StartsWith(hash, "$2a$") || absl::StartsWith(hash, "$2b$") || absl::StartsWith(hash, "$2y$"))) {
      return v.Error("expected a bcrypt hash ($2y$..., e.g. from `htpasswd -nBC 10 \"\" | tr -d ':\\n'`)");
    }
    if (user.find(':') != std::string::npos) return v.Error(absl::StrCat("user ", YamlQuote(user), " contains ':'"));
    config->basic_auth_users[user] = hash;
    return absl::OkStatus();
  });
}

}  // namespace

StatusOr<WebConfig> ParseWebConfig(std::string_view yaml, std::string_view source,
                                   std::string_view base_dir) {
  auto loaded = LoadYaml(absl::string_view(yaml.data(), yaml.size()),
                         absl::string_view(source.data(), source.size()));  // nesting limit; no throw
  if (!loaded.ok()) return loaded.status();
  const YamlValue root(*loaded, std::string(source));
  WebConfig config;
  if (root.node().IsNull()) return config;  // an empty file: plain HTTP, no auth
  try {
    GPUNODE_RETURN_IF_ERROR(
        CheckKeys(root, {"tls_server_config", "http_server_config", "basic_auth_users"}, {"rate_limit"}));
    if (const YamlValue tls = root.Child("tls_server_config"); tls.IsSet()) {
      GPUNODE_ASSIGN_OR_RETURN(config.tls, ParseTls(tls, base_dir));
    }
    if (const YamlValue http = root.Child("http_server_config"); http.IsSet()) {
      GPUNODE_RETURN_IF_ERROR(ParseHttp(http, &config));
    }
    if (const YamlValue users = root.Child("basic_auth_users"); users.IsSet()) {
      GPUNODE_RETURN_IF_ERROR(ParseUsers(users, &config));
    }
  } catch (const YAML::Exception& e) {
    return root.Error(e.what());
  }
  return config;
}

StatusOr<WebConfig> LoadWebConfig(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat("web config file ", path, ": cannot read: ", std::strerror(errno)));
  }
  std::stringstream ss;
  ss << in.rdbuf();
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  GPUNODE_ASSIGN_OR_RETURN(WebConfig config,
                           ParseWebConfig(ss.str(), absl::StrCat("web config file ", path), dir));
  if (config.tls) {
    for (const std::string* f : {&config.tls->cert_file, &config.tls->key_file, &config.tls->client_ca_file}) {
      if (f->empty()) continue;
      if (access(f->c_str(), R_OK) != 0) {
        return absl::InvalidArgumentError(absl::StrCat("web config file ", path, ": cannot read ", *f,
                                                       ": ", std::strerror(errno)));
      }
    }
  }
  return config;
}

bool CheckPassword(const std::string& password, const std::string& hash) {
  // crypt_r takes a C string and bcrypt reads at most 72 bytes: anything it would not see is a
  // wrong password, not a longer spelling of a right one.
  if (password.size() > kMaxPasswordBytes || password.find('\0') != std::string::npos) return false;
  auto data = std::make_unique<crypt_data>();
  std::memset(data.get(), 0, sizeof(crypt_data));
  const char* out = crypt_r(password.c_str(), hash.c_str(), data.get());
  if (out == nullptr || out[0] == '*') return false;
  const size_t n = std::strlen(out);
  if (n != hash.size()) return false;
  return CRYPTO_memcmp(out, hash.data(), n) == 0;
}

BasicAuthenticator::BasicAuthenticator(std::map<std::string, std::string> users, AuthLimits limits)
    : users_(std::move(users)), limits_(limits) {
  if (RAND_bytes(key_, sizeof key_) != 1) {
    std::random_device rd;  // OpenSSL without entropy: the kernel's, through the C++ library
    for (unsigned char& c : key_) c = static_cast<unsigned char>(rd());
  }
  if (!enabled()) return;
  const int n = std::max(1, limits_.threads);
  for (int i = 0; i < n; ++i) workers_.emplace_back([this] { Work(); });
}

BasicAuthenticator::~BasicAuthenticator() {
  std::deque<Job> dropped;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    dropped.swap(queue_);
  }
  for (std::thread& t : workers_) t.join();
  dropped.clear();  // outside the lock: a callback's captures may do anything when destroyed
}

BasicAuthenticator::Digest BasicAuthenticator::Key(std::string_view user, std::string_view password) const {
  // HMAC-SHA256(key, len(user) || user || password): the length prefix keeps ("a", "bc") and
  // ("ab", "c") apart.
  std::string msg;
  msg.reserve(8 + user.size() + password.size());
  const uint64_t len = user.size();
  msg.append(reinterpret_cast<const char*>(&len), sizeof len);
  msg.append(user.data(), user.size());
  msg.append(password.data(), password.size());
  Digest d{};
  unsigned int out = 0;
  HMAC(EVP_sha256(), key_, sizeof key_, reinterpret_cast<const unsigned char*>(msg.data()), msg.size(), d.data(),
       &out);
  OPENSSL_cleanse(msg.data(), msg.size());
  return d;
}

void BasicAuthenticator::ForgetExpiredLocked(std::chrono::steady_clock::time_point now) {
  while (!denied_order_.empty() &&
         (denied_order_.front().second <= now || denied_order_.size() > limits_.negative_cache_entries)) {
    denied_.erase(denied_order_.front().first);
    denied_order_.pop_front();
  }
}

BasicAuthenticator::Verdict BasicAuthenticator::Check(std::string_view authorization, std::string_view source,
                                                      Done done) {
  if (!enabled()) return Verdict::kAllowed;
  constexpr std::string_view kPrefix = "Basic ";
  if (authorization.size() <= kPrefix.size() ||
      !absl::EqualsIgnoreCase(absl::string_view(authorization.data(), kPrefix.size()),
                              absl::string_view(kPrefix.data(), kPrefix.size()))) {
    return Verdict::kDenied;
  }
  std::string decoded;
  if (!absl::Base64Unescape(absl::string_view(authorization.data() + kPrefix.size(),
                                              authorization.size() - kPrefix.size()),
                            &decoded)) {
    return Verdict::kDenied;
  }
  const size_t colon = decoded.find(':');
  if (colon == std::string::npos) return Verdict::kDenied;
  std::string user = decoded.substr(0, colon);
  std::string password = decoded.substr(colon + 1);
  OPENSSL_cleanse(decoded.data(), decoded.size());
  // What bcrypt would not see (after a NUL, past 72 bytes) is never a right password.
  if (password.size() > kMaxPasswordBytes || password.find('\0') != std::string::npos) return Verdict::kDenied;

  auto it = users_.find(user);
  // An unknown user is checked against a real user's hash (same cost), then denied.
  const bool known = it != users_.end();
  const std::string& hash = known ? it->second : users_.begin()->second;
  const Digest digest = Key(user, password);
  const std::string digest_key(reinterpret_cast<const char*>(digest.data()), digest.size());
  const auto now = std::chrono::steady_clock::now();
  absl::MutexLock lock(&mu_);
  if (known) {
    if (auto a = allowed_.find(user); a != allowed_.end() && CRYPTO_memcmp(a->second.data(), digest.data(), digest.size()) == 0) {
      ++stats_.cached_allowed;
      return Verdict::kAllowed;
    }
  }
  ForgetExpiredLocked(now);
  if (denied_.count(digest_key)) {
    ++stats_.cached_denied;
    return Verdict::kDenied;
  }
  size_t& mine = per_source_[std::string(source)];
  if (stopping_ || pending_ >= limits_.max_pending || mine >= limits_.max_pending_per_source) {
    if (mine == 0) per_source_.erase(std::string(source));
    ++stats_.busy;
    return Verdict::kBusy;
  }
  ++mine;
  ++pending_;
  Job job;
  job.user = known ? std::move(user) : std::string();
  job.password = std::move(password);
  job.hash = hash;
  job.digest = digest;
  job.source = std::string(source);
  job.queued = now;
  job.done = std::move(done);
  queue_.push_back(std::move(job));
  return Verdict::kPending;
}

void BasicAuthenticator::Work() {
  if (limits_.worker_nice > 0) {
    // Only lowers this thread's priority (allowed without privileges); failure changes nothing else.
    (void)::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), limits_.worker_nice);
  }
  for (;;) {
    Job job;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || !queue_.empty(); };
      mu_.Await(absl::Condition(&ready));
      if (stopping_) return;
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    Verdict verdict = Verdict::kBusy;
    const bool stale = std::chrono::steady_clock::now() - job.queued > limits_.max_queue_wait;
    if (!stale) {
      const bool ok = CheckPassword(job.password, job.hash) && !job.user.empty();
      verdict = ok ? Verdict::kAllowed : Verdict::kDenied;
    }
    OPENSSL_cleanse(job.password.data(), job.password.size());
    {
      absl::MutexLock lock(&mu_);
      if (stale) {
        ++stats_.dropped;
      } else {
        ++stats_.bcrypt_runs;
      }
      if (verdict == Verdict::kAllowed) {
        allowed_[job.user] = job.digest;
      } else if (verdict == Verdict::kDenied) {
        std::string k(reinterpret_cast<const char*>(job.digest.data()), job.digest.size());
        if (denied_.insert(k).second) {
          denied_order_.emplace_back(std::move(k), std::chrono::steady_clock::now() + limits_.negative_cache_ttl);
        }
        ForgetExpiredLocked(std::chrono::steady_clock::now());
      }
      --pending_;
      if (auto s = per_source_.find(job.source); s != per_source_.end() && --s->second == 0) per_source_.erase(s);
    }
    job.done(verdict);
  }
}

bool BasicAuthenticator::Allow(std::string_view authorization, std::string_view source) {
  // One wait on one result: a local std::mutex (locals cannot carry ABSL_GUARDED_BY).
  std::mutex m;
  std::condition_variable cv;
  std::optional<Verdict> result;
  Verdict v = Check(authorization, source, [&](Verdict r) {
    std::lock_guard<std::mutex> lock(m);
    result = r;
    cv.notify_one();
  });
  if (v == Verdict::kPending) {
    std::unique_lock<std::mutex> lock(m);
    cv.wait(lock, [&] { return result.has_value(); });
    v = *result;
  }
  return v == Verdict::kAllowed;
}

BasicAuthenticator::Stats BasicAuthenticator::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

}  // namespace gpunode::exporter
