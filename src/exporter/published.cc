#include "src/exporter/published.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "src/base/host_fs.h"
#include "src/base/json.h"
#include "src/exporter/render.h"

namespace gpunode::exporter {
namespace {

// Who writes `name`, for the "not published" message.
std::string Writer(const std::string& name) {
  if (name == kPublishedAgentHealth) return "gpunode agent writes it every second while it runs with publishDir";
  return "the agent's exporter writes it while it runs with publishDir";
}

std::string Seconds(int64_t ms) {
  if (ms % 1000 == 0) return absl::StrCat(ms / 1000, " s");
  return absl::StrCat(static_cast<double>(ms) / 1000.0, " s");
}

bool SafeHeaderValue(const std::string& v) {
  if (v.empty() || v.size() > 128) return false;
  for (const char c : v) {
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

}  // namespace

PublishedDir::PublishedDir(std::string dir, size_t max_file_bytes)
    : dir_(std::move(dir)), max_file_bytes_(max_file_bytes) {}

uint64_t PublishedDir::reads() const {
  absl::MutexLock lock(&mu_);
  return reads_;
}

StatusOr<std::shared_ptr<const PublishedFile>> PublishedDir::Get(const std::string& name) {
  const std::string path = absl::StrCat(dir_, "/", name);
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const int err = errno;
    {
      absl::MutexLock lock(&mu_);
      cache_.erase(name);
    }
    if (err != ENOENT) return ErrnoToStatus(err, "stat published file", path);
    struct stat d {};
    if (::stat(dir_.c_str(), &d) != 0 || !S_ISDIR(d.st_mode)) {
      return absl::NotFoundError(absl::StrCat("the publish folder ", dir_,
                                              " does not exist: nothing has been published (the agent creates it; "
                                              "both containers must mount the same folder)"));
    }
    return absl::NotFoundError(absl::StrCat(path, " has not been published (yet): ", Writer(name)));
  }
  Key key{static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino), static_cast<uint64_t>(st.st_size),
          static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec,
          static_cast<int64_t>(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec};
  absl::MutexLock lock(&mu_);
  if (auto it = cache_.find(name); it != cache_.end() && it->second.key == key) return it->second.file;
  if (!S_ISREG(st.st_mode)) return absl::DataLossError(absl::StrCat(path, ": not a regular file"));
  if (key.size > max_file_bytes_) {
    cache_.erase(name);
    return absl::ResourceExhaustedError(
        absl::StrCat(path, ": ", key.size, " bytes, more than the ", max_file_bytes_, " a published file may have"));
  }
  // Read once per change (one reader at a time: a change comes once per sampling pass).
  ++reads_;
  StatusOr<HostFs::Versioned> read = HostFs::Local().ReadVersioned(path, max_file_bytes_);
  if (!read.ok()) {
    cache_.erase(name);
    return read.status();
  }
  if (!read->identity.exists) {  // removed since the stat
    cache_.erase(name);
    return absl::NotFoundError(absl::StrCat(path, " has not been published (yet): ", Writer(name)));
  }
  Entry e;
  e.key = Key{read->identity.dev, read->identity.ino, read->identity.size, read->identity.mtime_ns,
              read->identity.ctime_ns};
  StatusOr<PublishedFile> decoded = DecodePublished(read->text, path);
  if (decoded.ok()) {
    e.file = std::make_shared<const PublishedFile>(*std::move(decoded));
  } else {
    e.file = decoded.status();
  }
  auto& slot = cache_[name];
  slot = std::move(e);
  return slot.file;
}

std::string Staleness(const PublishedFile& file, int64_t now_ms, const FreshnessOptions& options,
                      std::string_view what) {
  if (file.period_ms <= 0) return "";
  const int64_t bound = options.stale_after.count() > 0 ? options.stale_after.count() : 5 * file.period_ms;
  const int64_t age = std::max<int64_t>(0, now_ms - file.produced_ms);
  if (age <= bound) return "";
  return absl::StrCat(std::string(what), " is ", age / 1000, " s old (rewritten every ", Seconds(file.period_ms),
                      ", stale after ", Seconds(bound), "): is the agent running?");
}

Page ErrorPage(const Status& status) {
  return TextPage(absl::IsNotFound(status) ? 503 : 500, absl::StrCat(status.message(), "\n"));
}

std::optional<Page> FilePageSource::NotCurrent() {
  StatusOr<std::shared_ptr<const PublishedFile>> health = dir_.Get(kPublishedHealth);
  if (!health.ok()) return ErrorPage(health.status());
  std::string stale = Staleness(**health, UnixMillis(), options_, "the agent's exporter heartbeat");
  if (!stale.empty()) return TextPage(503, stale + "\n");
  return std::nullopt;
}

Page FilePageSource::Metrics() {
  if (std::optional<Page> no = NotCurrent()) return *std::move(no);
  StatusOr<std::shared_ptr<const PublishedFile>> f = dir_.Get(kPublishedMetrics);
  if (!f.ok()) return ErrorPage(f.status());
  Page p;
  p.status = (*f)->status;
  if (p.status == 200) p.content_type = std::string(kPrometheusTextContentType);
  p.body = (*f)->body;
  p.gzip = (*f)->gzip;
  return p;
}

Page FilePageSource::Health() {
  StatusOr<std::shared_ptr<const PublishedFile>> f = dir_.Get(kPublishedHealth);
  if (!f.ok()) return ErrorPage(f.status());
  std::string stale = Staleness(**f, UnixMillis(), options_, "the agent's exporter heartbeat");
  if (!stale.empty()) return TextPage(503, stale + "\n");
  Page p;
  p.status = (*f)->status;
  p.body = (*f)->body;
  return p;
}

Page FilePageSource::StatusPage() {
  if (std::optional<Page> no = NotCurrent()) return *std::move(no);
  StatusOr<std::shared_ptr<const PublishedFile>> f = dir_.Get(kPublishedStatusPage);
  if (!f.ok()) return ErrorPage(f.status());
  Page p;
  p.status = (*f)->status;
  if (p.status == 200) p.content_type = kHtmlUtf8;
  p.body = (*f)->body;
  return p;
}

std::optional<RouteResponse> PublishedRoutes::operator()(std::string_view path_view) {
  const absl::string_view path(path_view.data(), path_view.size());
  const bool health_path = path == "/healthz" || path == "/readyz" || absl::StartsWith(path, "/healthz/") ||
                           absl::StartsWith(path, "/readyz/");
  if (!health_path && !(health_port_ && path == "/metrics")) return std::nullopt;
  auto answer = [](const Page& p) { return RouteResponse{p.status, p.content_type, *p.body}; };
  StatusOr<std::shared_ptr<const PublishedFile>> f = dir_.Get(kPublishedAgentHealth);
  if (!f.ok()) return answer(ErrorPage(f.status()));
  std::string stale = Staleness(**f, UnixMillis(), options_, "the agent's health");
  if (!stale.empty()) return RouteResponse{503, kTextPlainUtf8, stale + "\n"};
  std::shared_ptr<const nlohmann::json> doc;
  {
    absl::MutexLock lock(&mu_);
    if (parsed_from_ != *f) {
      StatusOr<nlohmann::json> parsed = ParseJson(*(*f)->body, dir_.dir() + "/" + kPublishedAgentHealth);
      if (!parsed.ok()) return answer(ErrorPage(absl::DataLossError(parsed.status().message())));
      parsed_ = std::make_shared<const nlohmann::json>(*std::move(parsed));
      parsed_from_ = *f;
    }
    doc = parsed_;
  }
  const std::string key(path);
  auto member = [](const nlohmann::json& o, const char* name) -> const nlohmann::json* {
    if (!o.is_object()) return nullptr;
    auto it = o.find(name);
    return it == o.end() ? nullptr : &*it;
  };
  const nlohmann::json* paths = member(*doc, "paths");
  if (const nlohmann::json* r = paths != nullptr ? member(*paths, key.c_str()) : nullptr; r != nullptr) {
    const nlohmann::json* status = member(*r, "status");
    const nlohmann::json* type = member(*r, "contentType");
    const nlohmann::json* body = member(*r, "body");
    if (status == nullptr || !status->is_number_integer() || *status < 100 || *status > 599 || type == nullptr ||
        !type->is_string() || !SafeHeaderValue(type->get<std::string>()) || body == nullptr || !body->is_string()) {
      return RouteResponse{500, kTextPlainUtf8,
                           absl::StrCat(dir_.dir(), "/", kPublishedAgentHealth, ": the answer for ", key,
                                        " is not {status, contentType, body}\n")};
    }
    return RouteResponse{status->get<int>(), type->get<std::string>(), body->get<std::string>()};
  }
  if (absl::StartsWith(path, "/healthz/") || absl::StartsWith(path, "/readyz/")) {
    // What the agent answers for a name it does not know.
    return RouteResponse{404, kTextPlainUtf8, absl::StrCat("no component ", path.substr(path.find('/', 1) + 1), "\n")};
  }
  return std::nullopt;
}

}  // namespace gpunode::exporter
