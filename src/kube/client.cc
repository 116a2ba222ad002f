// The client's calls: rate limit, a pooled connection, the request with its deadline and body
// cap, the API server's refusal turned into a Status that keeps its reason, retries after 429/503,
// lists page by page. Watches are in watch.cc, the plumbing in transport.cc, kubeconfig files in
// config.cc.
#include "src/kube/client.h"

#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "httplib.h"
#include "src/base/host_fs.h"
#include "src/base/json.h"
#include "src/base/terminal.h"
#include "src/kube/client_internal.h"
#include "src/kube/json_fields.h"
#include "src/kube/list_stream.h"

namespace gpunode::kube {

using internal::CallContext;
using internal::SteadyClock;

namespace {

constexpr char kApiErrorPayload[] = "type.googleapis.com/gpunode.kube.ApiError";
constexpr size_t kMaxErrorBodyParsed = size_t{1} << 20;

void SetTimeouts(httplib::ClientImpl& http, std::chrono::milliseconds connect, std::chrono::milliseconds io) {
  connect = std::max(connect, std::chrono::milliseconds(1));
  io = std::max(io, std::chrono::milliseconds(1));
  http.set_connection_timeout(connect.count() / 1000, (connect.count() % 1000) * 1000);
  http.set_read_timeout(io.count() / 1000, (io.count() % 1000) * 1000);
  http.set_write_timeout(io.count() / 1000, (io.count() % 1000) * 1000);
}

bool Retryable(httplib::Error e) {
  return e == httplib::Error::Read || e == httplib::Error::Write || e == httplib::Error::Connection ||
         e == httplib::Error::SSLConnection;
}

}  // namespace

// ---- the API server's reason, kept ----

Status WithApiError(Status status, const ApiError& e) {
  status.SetPayload(kApiErrorPayload,
                    absl::Cord(absl::StrCat(e.http_code, "\n", e.retry_after_seconds, "\n", e.reason)));
  return status;
}

std::optional<ApiError> ApiErrorOf(const Status& status) {
  auto payload = status.GetPayload(kApiErrorPayload);
  if (!payload) return std::nullopt;
  std::vector<std::string> parts = absl::StrSplit(std::string(*payload), absl::MaxSplits('\n', 2));
  ApiError e;
  if (parts.size() != 3 || !absl::SimpleAtoi(parts[0], &e.http_code) ||
      !absl::SimpleAtoi(parts[1], &e.retry_after_seconds)) {
    return std::nullopt;
  }
  e.reason = parts[2];
  return e;
}

std::string ReasonOf(const Status& status) {
  auto e = ApiErrorOf(status);
  return e ? e->reason : std::string();
}

namespace internal {

std::string Bytes(size_t n) {
  if (n >= (size_t{1} << 20) && n % (size_t{1} << 20) == 0) return absl::StrCat(n >> 20, " MiB");
  if (n >= 1024 && n % 1024 == 0) return absl::StrCat(n >> 10, " KiB");
  return absl::StrCat(n, " bytes");
}

ApiError ReadApiError(int http_code, const httplib::Headers& headers, const std::string& body, std::string* message) {
  ApiError e;
  e.http_code = http_code;
  if (auto it = headers.find("Retry-After"); it != headers.end()) {
    int s = 0;
    if (absl::SimpleAtoi(absl::StripAsciiWhitespace(it->second), &s) && s >= 0) e.retry_after_seconds = s;
  }
  nlohmann::json doc;
  if (!body.empty() && body.size() <= kMaxErrorBodyParsed) {
    if (auto parsed = ParseJson(body, "answer"); parsed.ok()) doc = std::move(*parsed);
  }
  message->clear();
  if (auto root = Fields::Root(doc, "answer"); root.ok()) {
    if (auto m = root->String("message"); m.ok()) *message = *m;
    if (auto r = root->String("reason"); r.ok()) e.reason = TerminalSafe(*r);
    if (auto details = root->Object("details"); details.ok() && e.retry_after_seconds < 0) {
      if (auto ra = details->Int("retryAfterSeconds"); ra.ok() && *ra && **ra >= 0 && **ra < (1 << 30)) {
        e.retry_after_seconds = static_cast<int>(**ra);
      }
    }
  }
  if (message->empty()) *message = std::string(absl::StripAsciiWhitespace(body.substr(0, 300)));
  *message = TerminalSafe(message->substr(0, 2000));
  return e;
}

Status ErrorFromAnswer(const std::string& what, int http_code, const httplib::Headers& headers,
                       const std::string& body, const std::string& source, bool watch) {
  std::string message;
  const ApiError e = ReadApiError(http_code, headers, body, &message);
  const std::string text = absl::StrCat(what, ": HTTP ", http_code, ": ", message);
  Status st;
  switch (http_code) {
    case 401:
      st = absl::UnauthenticatedError(absl::StrCat(text, " (the credentials of ", source, " were refused)"));
      break;
    case 403:
      st = absl::PermissionDeniedError(text);
      break;
    case 404:
      st = absl::NotFoundError(text);
      break;
    case 409:
      st = absl::AbortedError(text);
      break;
    case 410:
      st = watch ? absl::AbortedError(absl::StrCat(text, " (list again)")) : absl::UnavailableError(text);
      break;
    case 422:
    case 400:
      st = absl::FailedPreconditionError(text);
      break;
    case 408:
    case 504:
      st = absl::DeadlineExceededError(text);
      break;
    default:
      st = absl::UnavailableError(text);
  }
  return WithApiError(st, e);
}

Status TransportError(const std::string& what, const std::string& server, httplib::Error error, long verify_result,
                      const std::string& source) {
  std::string why = httplib::to_string(error);
  if (error == httplib::Error::SSLServerVerification) {
    why = absl::StrCat("the server's certificate was not accepted: ", X509_verify_cert_error_string(verify_result),
                       " (CA from ", source, ")");
  }
  if (error == httplib::Error::ConnectionTimeout) {
    return absl::DeadlineExceededError(absl::StrCat(what, ": ", server, ": ", why));
  }
  return absl::UnavailableError(absl::StrCat(what, ": ", server, ": ", why));
}

}  // namespace internal

// ---- Client ----

Client::Client(Connection c, ClientOptions options) : c_(std::move(c)), options_(options), impl_(std::make_unique<Impl>()) {
  // OpenSSL writes to a socket the API server closed (a restart, an idle keep-alive) without
  // MSG_NOSIGNAL: SIGPIPE would kill the process. Processes that talk to the API ignore it and get
  // EPIPE, which ends the call with Unavailable. (Only here: gpunode oci-runtime must not hand
  // an ignored SIGPIPE on to runc and the container.)
  static std::once_flag once;
  std::call_once(once, [] { ::signal(SIGPIPE, SIG_IGN); });
  auto endpoint = internal::MakeEndpoint(c_);
  if (endpoint.ok()) {
    impl_->endpoint = *std::move(endpoint);
  } else {
    impl_->init_error = endpoint.status();
    impl_->endpoint = std::make_shared<internal::Endpoint>();
    impl_->endpoint->c = c_;
  }
  impl_->limiter = std::make_unique<internal::RateLimiter>(options_.qps, options_.burst);
  impl_->pool = std::make_unique<internal::Pool>(impl_->endpoint, options_.max_connections);
}

Client::~Client() {
  Stop();
  impl_.reset();
}

void Client::Stop() { impl_->stop.request_stop(); }

std::string Client::BearerToken() {
  if (c_.token_file.empty()) return c_.token;
  absl::MutexLock l(&impl_->token_mu);
  struct stat st;
  if (::stat(c_.token_file.c_str(), &st) == 0 &&
      (st.st_mtim.tv_sec != impl_->token_mtime.tv_sec || st.st_mtim.tv_nsec != impl_->token_mtime.tv_nsec)) {
    if (auto t = HostFs::Local().ReadFile(c_.token_file, 1 << 20); t.ok()) {
      impl_->token_cache = std::string(absl::StripAsciiWhitespace(*t));
      impl_->token_mtime = st.st_mtim;
    }
  }
  return impl_->token_cache.empty() ? c_.token : impl_->token_cache;
}

httplib::Headers Client::Impl::BaseHeaders(Client& client) {
  httplib::Headers headers = {{"Accept", "application/json"}, {"User-Agent", "gpunode/" GPUNODE_VERSION}};
  if (std::string token = client.BearerToken(); !token.empty()) headers.emplace("Authorization", "Bearer " + token);
  return headers;
}

std::string Client::Impl::Server() const {
  const Connection& c = endpoint->c;
  return absl::StrCat(c.scheme, "://", c.host.find(':') != std::string::npos ? absl::StrCat("[", c.host, "]") : c.host,
                      ":", c.port);
}

namespace {

// What one request got back.
struct Exchange {
  bool answered = false;  // an HTTP answer came (status, headers, body within the cap)
  httplib::Error error = httplib::Error::Success;
  int status = 0;
  httplib::Headers headers;
  std::string body;
  bool too_big = false;  // over the body cap (then not `answered`)
};

// One request on `conn`, its answer read into memory up to `cap` bytes.
Exchange Send(internal::Conn& conn, const CallContext& call, const ClientOptions& o, const char* verb,
              const std::string& path, const httplib::Headers& headers, const std::string& body,
              const char* content_type, size_t cap) {
  Exchange ex;
  // The watchdog ends the call at its deadline; httplib's per-read timeouts only back it up.
  SetTimeouts(conn.http(), std::min(o.connect_timeout, call.Remaining()),
              call.Remaining() + std::chrono::milliseconds(500));
  httplib::Request req;
  req.method = verb;
  req.path = path;
  req.headers = headers;
  req.body = body;
  if (content_type != nullptr && !body.empty()) req.headers.emplace("Content-Type", content_type);
  req.response_handler = [&](const httplib::Response& r) {
    if (r.has_header("Content-Length")) {  // announced: refused before reading it
      uint64_t n = 0;
      if (absl::SimpleAtoi(r.get_header_value("Content-Length"), &n) && n > cap) {
        ex.too_big = true;
        return false;
      }
    }
    return true;
  };
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {  // after decompression
    if (ex.body.size() + n > cap) {
      ex.too_big = true;
      return false;
    }
    ex.body.append(data, n);
    return true;
  };
  httplib::Response res;
  ex.answered = conn.http().send(req, res, ex.error) && !ex.too_big;
  ex.status = res.status;
  ex.headers = std::move(res.headers);
  return ex;
}

// Whether to send again after `status`, and after how long.
std::optional<std::chrono::milliseconds> RetryAfter(const ApiError& e, const std::string& verb, int attempt,
                                                    const ClientOptions& o) {
  if (attempt >= o.max_retries || e.retry_after_seconds < 0) return std::nullopt;
  const bool idempotent = verb != "POST";
  if (!(e.http_code == 429 || (e.http_code == 503 && idempotent))) return std::nullopt;
  return std::min(std::chrono::milliseconds(std::chrono::seconds(e.retry_after_seconds)), o.max_retry_after);
}

}  // namespace

StatusOr<std::string> Client::CallRaw(const char* verb, const std::string& path, const std::string& body,
                                      const char* content_type, const CallOptions& options) {
  const std::string what = absl::StrCat(verb, " ", path);
  if (!impl_->init_error.ok()) return impl_->init_error;
  const std::chrono::milliseconds timeout = options.timeout.count() > 0 ? options.timeout : options_.timeout;
  const size_t body_cap = options.max_body_bytes > 0 ? std::min(options.max_body_bytes, options_.max_body_bytes)
                                                     : options_.max_body_bytes;
  CallContext call(SteadyClock::now() + timeout, options.stop, impl_->stop.get_token());
  internal::WatchdogEntry watched(impl_->watchdog, &call, nullptr);
  const std::string v = verb;
  for (int attempt = 0;; ++attempt) {
    if (call.stopped()) return internal::EndedEarly(call, what, timeout);
    if (Status st = impl_->limiter->Take(call, what); !st.ok()) {
      return call.why() != CallContext::Why::kNone ? internal::EndedEarly(call, what, timeout) : st;
    }
    auto conn = impl_->pool->Acquire(call, what);
    if (!conn.ok()) {
      return call.why() != CallContext::Why::kNone ? internal::EndedEarly(call, what, timeout) : conn.status();
    }
    const httplib::Headers headers = Impl::BaseHeaders(*this);
    const bool reused = (*conn)->Arm();  // before Use: Arm clears a cancel; a stop that came already stays
    call.Use(conn->get());
    Exchange ex = Send(**conn, call, options_, verb, path, headers, body, content_type, body_cap);
    // A kept-alive connection the server closed meanwhile (an API server restart, an idle timeout)
    // fails on first use: open a new one and send again, once. Not for POST (a create that did reach
    // the server would be made twice); PUT carries its resourceVersion, PATCH and DELETE repeat safely.
    if (!ex.answered && !ex.too_big && reused && v != "POST" && !(*conn)->cancelled() && Retryable(ex.error)) {
      (*conn)->http().stop();
      (*conn)->Arm();
      if (call.stopped()) (*conn)->Cancel();
      ex = Send(**conn, call, options_, verb, path, headers, body, content_type, body_cap);
    }
    call.Use(nullptr);
    const bool cancelled = (*conn)->cancelled();
    (*conn)->Disarm();
    const long verify = (*conn)->VerifyResult();
    impl_->pool->Release(*std::move(conn), ex.answered && !cancelled);
    // An answer read in full counts even when the deadline or a stop came just after it.
    if (!ex.answered && SteadyClock::now() >= call.deadline()) call.Stop(CallContext::Why::kDeadline);
    if (!ex.answered && call.why() != CallContext::Why::kNone) return internal::EndedEarly(call, what, timeout);
    if (ex.too_big) {
      return absl::ResourceExhaustedError(
          absl::StrCat(what, ": the answer is larger than ", internal::Bytes(body_cap),
                       body_cap < options_.max_body_bytes ? " (this call's body cap, CallOptions::max_body_bytes)"
                                                          : " (the client's body cap, ClientOptions::max_body_bytes)"));
    }
    if (!ex.answered) return internal::TransportError(what, impl_->Server(), ex.error, verify, c_.source);
    if (ex.status >= 200 && ex.status < 300) return std::move(ex.body);
    Status err = internal::ErrorFromAnswer(what, ex.status, ex.headers, ex.body, c_.source, /*watch=*/false);
    const std::optional<ApiError> api = ApiErrorOf(err);
    const auto wait = api ? RetryAfter(*api, v, attempt, options_) : std::nullopt;
    if (!wait) return err;
    if (SteadyClock::now() + *wait >= call.deadline()) {
      return WithApiError(Status(err.code(), absl::StrCat(err.message(), " (Retry-After ", api->retry_after_seconds,
                                                          " s: past the call's deadline of ", timeout.count(), " ms)")),
                          *api);
    }
    if (!call.SleepUntil(SteadyClock::now() + *wait)) return internal::EndedEarly(call, what, timeout);
  }
}

StatusOr<nlohmann::json> Client::Call(const char* verb, const std::string& path, const std::string& body,
                                      const char* content_type, const CallOptions& options) {
  GPUNODE_ASSIGN_OR_RETURN(std::string text, CallRaw(verb, path, body, content_type, options));
  if (text.empty()) return nlohmann::json();
  auto doc = ParseJson(text, absl::StrCat(verb, " ", path, ": the answer"));
  if (!doc.ok()) return absl::UnavailableError(doc.status().message());
  return doc;
}

StatusOr<nlohmann::json> Client::Get(const std::string& path, const CallOptions& o) {
  return Call("GET", path, "", nullptr, o);
}

StatusOr<nlohmann::json> Client::MergePatch(const std::string& path, const nlohmann::json& patch, const CallOptions& o) {
  return Call("PATCH", path, DumpJson(patch), "application/merge-patch+json", o);
}

StatusOr<nlohmann::json> Client::Post(const std::string& path, const nlohmann::json& body, const CallOptions& o) {
  return Call("POST", path, DumpJson(body), "application/json", o);
}

StatusOr<nlohmann::json> Client::Delete(const std::string& path, const nlohmann::json& body, const CallOptions& o) {
  return Call("DELETE", path, body.is_null() ? "" : DumpJson(body), "application/json", o);
}

StatusOr<nlohmann::json> Client::StrategicPatch(const std::string& path, const nlohmann::json& patch,
                                                const CallOptions& o) {
  return Call("PATCH", path, DumpJson(patch), "application/strategic-merge-patch+json", o);
}

StatusOr<nlohmann::json> Client::Apply(const std::string& path, const nlohmann::json& apply_config,
                                       const std::string& field_manager, bool force, const CallOptions& o) {
  const std::string url = absl::StrCat(path, path.find('?') == std::string::npos ? "?" : "&",
                                       "fieldManager=", UrlEscape(field_manager), force ? "&force=true" : "");
  return Call("PATCH", url, DumpJson(apply_config), "application/apply-patch+yaml", o);
}

StatusOr<nlohmann::json> Client::JsonPatch(const std::string& path, const nlohmann::json& operations,
                                           const CallOptions& o) {
  return Call("PATCH", path, DumpJson(operations), "application/json-patch+json", o);
}

StatusOr<nlohmann::json> Client::Put(const std::string& path, const nlohmann::json& body, const CallOptions& o) {
  return Call("PUT", path, DumpJson(body), "application/json", o);
}

StatusOr<ListResult> Client::List(const std::string& path, const ListOptions& options,
                                  const std::function<Status(nlohmann::json& item)>& on_item) {
  ListResult result;
  std::string token;
  std::set<std::string> seen;
  for (int page = 0;; ++page) {
    if (page >= options.max_pages) {
      return absl::InternalError(absl::StrCat("GET ", path, ": more than ", options.max_pages, " pages; giving up"));
    }
    std::vector<std::string> query;
    if (options.limit > 0) query.push_back(absl::StrCat("limit=", options.limit));
    if (!token.empty()) {
      query.push_back(absl::StrCat("continue=", UrlEscape(token)));
    } else if (!options.resource_version.empty()) {
      query.push_back(absl::StrCat("resourceVersion=", UrlEscape(options.resource_version)));
    }
    std::string url = path;
    if (!query.empty()) absl::StrAppend(&url, path.find('?') == std::string::npos ? "?" : "&", absl::StrJoin(query, "&"));
    const std::string what = absl::StrCat("GET ", url);
    GPUNODE_ASSIGN_OR_RETURN(std::string body, CallRaw("GET", url, "", nullptr, options.call));
    // The page's metadata, typed: its resourceVersion, and a continue token that must be new (a
    // server that repeats one would have us loop; it is refused before the page's items are used).
    std::string page_version;
    std::string next;
    bool read_metadata = false;
    auto on_metadata = [&](const nlohmann::json& metadata) -> Status {
      read_metadata = true;
      const nlohmann::json wrapper = {{"metadata", metadata}};
      GPUNODE_ASSIGN_OR_RETURN(Fields root, Fields::Root(wrapper, what));
      GPUNODE_ASSIGN_OR_RETURN(Fields meta, root.Object("metadata"));
      GPUNODE_ASSIGN_OR_RETURN(page_version, meta.String("resourceVersion"));
      GPUNODE_ASSIGN_OR_RETURN(next, meta.String("continue"));
      if (!next.empty() && !seen.insert(next).second) {
        return absl::InternalError(absl::StrCat(what, ": the server repeated continue token \"",
                                                TerminalSafe(next.substr(0, 40)), "\"; giving up instead of looping"));
      }
      return absl::OkStatus();
    };
    GPUNODE_ASSIGN_OR_RETURN(
        internal::ListPageHead head,
        internal::ParseListPage(body, what, on_metadata, [&](nlohmann::json& item, size_t) { return on_item(item); }));
    std::string().swap(body);
    if (!read_metadata) GPUNODE_RETURN_IF_ERROR(on_metadata(nlohmann::json()));
    ++result.pages;
    result.items += head.items;
    if (page == 0) result.resource_version = page_version;
    token = next;
    if (token.empty()) break;
  }
  return result;
}

}  // namespace gpunode::kube
