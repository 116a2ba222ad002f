// Client::Watch: one watch request on a connection of its own, its newline-delimited events read
// as they come, each line bounded (ClientOptions::max_watch_line_bytes) and every event's fields
// checked for their type before use.
#include <algorithm>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "src/base/json.h"
#include "src/base/terminal.h"
#include "src/kube/client.h"
#include "src/kube/client_internal.h"
#include "src/kube/json_fields.h"

namespace gpunode::kube {

using internal::CallContext;
using internal::SteadyClock;

namespace {

constexpr size_t kMaxWatchErrorBody = size_t{1} << 20;

void SetTimeoutsForWatch(httplib::ClientImpl& http, std::chrono::milliseconds connect, std::chrono::seconds read) {
  connect = std::max(connect, std::chrono::milliseconds(1));
  http.set_connection_timeout(connect.count() / 1000, (connect.count() % 1000) * 1000);
  http.set_read_timeout(read.count(), 0);
  http.set_write_timeout(10, 0);
}

// Splits the stream into lines as it comes. The search for the next newline resumes where the
// last one stopped, and consumed lines are dropped in bulk, so a long line costs linear time
// however small the chunks it arrives in.
class LineSplitter {
 public:
  explicit LineSplitter(size_t max_line) : max_line_(max_line) {}

  // Calls `on_line` for each complete line; false from it stops. Returns false when a line is
  // longer than the cap (too_long() says so) or `on_line` stopped.
  template <typename F>
  bool Feed(const char* data, size_t n, F&& on_line) {
    if (start_ > 0 && start_ * 2 >= buf_.size()) {
      buf_.erase(0, start_);
      scanned_ -= start_;
      start_ = 0;
    }
    buf_.append(data, n);
    for (;;) {
      const size_t nl = buf_.find('\n', scanned_);
      if (nl == std::string::npos) {
        scanned_ = buf_.size();
        break;
      }
      const std::string_view line(buf_.data() + start_, nl - start_);
      start_ = scanned_ = nl + 1;
      if (line.size() > max_line_) {
        too_long_ = true;
        return false;
      }
      if (!on_line(line)) return false;
    }
    if (buf_.size() - start_ > max_line_) {
      too_long_ = true;
      return false;
    }
    return true;
  }
  bool too_long() const { return too_long_; }

 private:
  size_t max_line_;
  std::string buf_;
  size_t start_ = 0;    // where the current line begins
  size_t scanned_ = 0;  // searched for a newline up to here
  bool too_long_ = false;
};

// The ERROR event's Status object: 410 (Expired, Gone) is Aborted, "list again".
Status ErrorEvent(const std::string& where, const Fields& object) {
  auto code = object.Int("code");
  auto message = object.String("message");
  auto reason = object.String("reason");
  if (!code.ok()) return absl::UnavailableError(code.status().message());
  if (!message.ok()) return absl::UnavailableError(message.status().message());
  if (!reason.ok()) return absl::UnavailableError(reason.status().message());
  ApiError e;
  e.http_code = static_cast<int>(code->value_or(0));
  e.reason = TerminalSafe(*reason);
  const std::string msg = TerminalSafe(message->substr(0, 2000));
  if (e.http_code == 410) {
    return WithApiError(absl::AbortedError(absl::StrCat(where, ": 410 Gone: ", msg, " (list again)")), e);
  }
  return WithApiError(absl::UnavailableError(absl::StrCat(where, ": error event ", e.http_code, ": ", msg)), e);
}

}  // namespace

Status Client::Watch(const std::string& path, const std::string& resource_version, int timeout_seconds,
                     const WatchHandler& on_event, const std::atomic<bool>* stop) {
  WatchOptions o;
  o.resource_version = resource_version;
  o.timeout_seconds = timeout_seconds;
  o.stop_flag = stop;
  return Watch(path, o, on_event);
}

Status Client::Watch(const std::string& path, const WatchOptions& options, const WatchHandler& on_event) {
  const std::string what = absl::StrCat("WATCH ", path);
  if (!impl_->init_error.ok()) return impl_->init_error;
  std::string url = absl::StrCat(path, path.find('?') == std::string::npos ? "?" : "&",
                                 "watch=1", options.bookmarks ? "&allowWatchBookmarks=true" : "",
                                 "&timeoutSeconds=", options.timeout_seconds);
  if (!options.resource_version.empty()) absl::StrAppend(&url, "&resourceVersion=", UrlEscape(options.resource_version));
  // The server ends the watch at timeoutSeconds; one that does not is cut off 30 s later.
  const auto limit = std::chrono::seconds(std::max(1, options.timeout_seconds) + 30);
  CallContext call(SteadyClock::now() + limit, options.stop, impl_->stop.get_token());
  internal::WatchdogEntry watched(impl_->watchdog, &call, options.stop_flag);
  if (Status st = impl_->limiter->Take(call, what); !st.ok()) {
    if (call.why() == CallContext::Why::kStopped) return absl::OkStatus();
    return st;
  }
  internal::Conn conn(impl_->endpoint);  // a watch holds its connection: one of its own
  conn.Arm();       // before Use: Arm clears a cancel, and a stop that came already must stay
  call.Use(&conn);  // cancels at once when the call was stopped meanwhile
  SetTimeoutsForWatch(conn.http(), std::min(options_.connect_timeout, call.Remaining()),
                      std::chrono::seconds(std::max(1, options.timeout_seconds) + 15));

  LineSplitter lines(options_.max_watch_line_bytes);
  Status result;
  int http_status = 0;
  httplib::Headers answer_headers;
  std::string error_body;
  bool ended_here = false;
  size_t events = 0;
  auto on_line = [&](std::string_view line) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) return true;
    ++events;
    const std::string where = absl::StrCat(what, ": event ", events);
    auto ev = ParseJson(absl::string_view(line.data(), line.size()), where);
    if (!ev.ok()) {
      result = absl::UnavailableError(ev.status().message());
      return false;
    }
    auto fields = Fields::Root(*ev, where);
    StatusOr<std::string> type = fields.ok() ? fields->String("type") : StatusOr<std::string>(fields.status());
    StatusOr<Fields> object = fields.ok() ? fields->Object("object") : StatusOr<Fields>(fields.status());
    if (!type.ok() || !object.ok()) {
      result = absl::UnavailableError(!type.ok() ? type.status().message() : object.status().message());
      return false;
    }
    if (*type == "ERROR") {
      result = ErrorEvent(where, *object);
      return false;
    }
    if (type->empty() || !object->present()) {
      result = absl::UnavailableError(absl::StrCat(where, ": an event without ", type->empty() ? "type" : "object"));
      return false;
    }
    if (!on_event(*type, object->json())) {
      ended_here = true;
      return false;
    }
    return true;
  };

  httplib::Request req;
  req.method = "GET";
  req.path = url;
  req.headers = Impl::BaseHeaders(*this);
  req.response_handler = [&](const httplib::Response& r) {
    http_status = r.status;
    answer_headers = r.headers;
    return true;
  };
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    if (http_status != 200) {  // the refusal's Status object, bounded
      error_body.append(data, std::min(n, kMaxWatchErrorBody - std::min(kMaxWatchErrorBody, error_body.size())));
      return error_body.size() < kMaxWatchErrorBody;
    }
    return lines.Feed(data, n, on_line);
  };
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  const bool answered = conn.http().send(req, res, err);
  call.Use(nullptr);
  conn.Disarm();

  if (ended_here || call.why() == CallContext::Why::kStopped) return absl::OkStatus();
  if (call.why() == CallContext::Why::kDeadline) {
    return absl::UnavailableError(absl::StrCat(what, ": the server did not end the watch within ", limit.count(),
                                               " s (timeoutSeconds ", options.timeout_seconds, " + 30 s)"));
  }
  if (lines.too_long()) {
    return absl::ResourceExhaustedError(absl::StrCat(what, ": an event line longer than ",
                                                     internal::Bytes(options_.max_watch_line_bytes),
                                                     " (the client's line cap, ClientOptions::max_watch_line_bytes)"));
  }
  if (!result.ok()) return result;
  if (http_status != 0 && http_status != 200) {
    return internal::ErrorFromAnswer(what, http_status, answer_headers, error_body, c_.source, /*watch=*/true);
  }
  if (!answered) return internal::TransportError(what, impl_->Server(), err, conn.VerifyResult(), c_.source);
  return absl::OkStatus();  // the server ended it (timeoutSeconds)
}

}  // namespace gpunode::kube
