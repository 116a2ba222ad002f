#include "src/exporter/publish.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "src/base/host_fs.h"
#include "src/base/json.h"

namespace gpunode::exporter {
namespace {

constexpr char kMagic[] = "gpunode-published/1";
constexpr size_t kMaxHeaderBytes = 256;

std::string Octal(uint32_t mode) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%04o", mode & 07777);
  return buf;
}

}  // namespace

int64_t UnixMillis() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string EncodePublished(int64_t produced_ms, int64_t period_ms, int status, std::string_view body,
                            std::string_view gzip) {
  std::string out = absl::StrCat(kMagic, " produced_ms=", produced_ms, " period_ms=", period_ms, " status=", status,
                                 " length=", body.size(), " gzip_length=", gzip.size(), "\n");
  out.reserve(out.size() + body.size() + gzip.size());
  out.append(body);
  out.append(gzip);
  return out;
}

StatusOr<PublishedFile> DecodePublished(std::string_view data, std::string_view source) {
  auto bad = [&](const std::string& why) {
    return absl::DataLossError(absl::StrCat(std::string(source), ": ", why));
  };
  const size_t eol = data.substr(0, kMaxHeaderBytes).find('\n');
  if (eol == std::string_view::npos) {
    return bad(data.empty() ? "empty file (truncated?)" : "no gpunode-published header line (truncated or not ours)");
  }
  const std::string_view header = data.substr(0, eol);
  std::vector<absl::string_view> fields = absl::StrSplit(absl::string_view(header.data(), header.size()), ' ');
  if (fields.empty() || fields[0] != kMagic) {
    return bad(absl::StrCat("header \"", std::string(header.substr(0, 64)), "\" is not ", kMagic,
                            " (written by another gpunode version?)"));
  }
  PublishedFile f;
  int64_t length = -1, gzip_length = 0;
  bool have_produced = false, have_status = false;
  for (size_t i = 1; i < fields.size(); ++i) {
    const size_t eq = fields[i].find('=');
    if (eq == absl::string_view::npos) return bad(absl::StrCat("header field \"", fields[i], "\" is not key=value"));
    const absl::string_view key = fields[i].substr(0, eq), value = fields[i].substr(eq + 1);
    int64_t v = 0;
    if (!absl::SimpleAtoi(value, &v) || v < 0) {
      return bad(absl::StrCat("header field ", key, "=", value, " is not a non-negative number"));
    }
    if (key == "produced_ms") {
      f.produced_ms = v;
      have_produced = true;
    } else if (key == "period_ms") {
      f.period_ms = v;
    } else if (key == "status") {
      if (v < 100 || v > 599) return bad(absl::StrCat("status ", v, " is not an HTTP status"));
      f.status = static_cast<int>(v);
      have_status = true;
    } else if (key == "length") {
      length = v;
    } else if (key == "gzip_length") {
      gzip_length = v;
    }  // other keys: a later version's additions
  }
  if (!have_produced || !have_status || length < 0) {
    return bad("the header lacks produced_ms, status or length");
  }
  const std::string_view rest = data.substr(eol + 1);
  const uint64_t want = static_cast<uint64_t>(length) + static_cast<uint64_t>(gzip_length);
  if (rest.size() < want) {
    return bad(absl::StrCat("truncated: the header announces ", want, " bytes, the file has ", rest.size()));
  }
  if (rest.size() > want) {
    return bad(absl::StrCat("the header announces ", want, " bytes, the file has ", rest.size(), " (trailing bytes)"));
  }
  f.body = std::make_shared<const std::string>(rest.substr(0, static_cast<size_t>(length)));
  if (gzip_length > 0) f.gzip = std::make_shared<const std::string>(rest.substr(static_cast<size_t>(length)));
  return f;
}

StatusOr<PublishDir> PublishDir::Open(std::string dir) {
  if (dir.empty()) return absl::InvalidArgumentError("publish folder: empty path");
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  GPUNODE_RETURN_IF_ERROR(HostFs::Local().MakeDirs(dir, 0755));
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return ErrnoToStatus(errno, "stat publish folder", dir);
  if (!S_ISDIR(st.st_mode)) return absl::FailedPreconditionError(absl::StrCat("publish folder ", dir, ": not a folder"));
  if ((st.st_mode & 022) != 0 && st.st_uid == ::geteuid()) {
    if (::chmod(dir.c_str(), (st.st_mode & 07777) & ~022u) != 0) {
      return ErrnoToStatus(errno, "chmod go-w publish folder", dir);
    }
    if (::stat(dir.c_str(), &st) != 0) return ErrnoToStatus(errno, "stat publish folder", dir);
  }
  if ((st.st_mode & 022) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "publish folder ", dir, " may be written by others (mode ", Octal(st.st_mode), ", owner uid ", st.st_uid,
        ") and is not ours to change: whoever writes there could turn our files into links; make it writable by "
        "the agent's user only (the front needs only read access)"));
  }
  return PublishDir(std::move(dir));
}

std::string PublishDir::PathOf(std::string_view name) const { return absl::StrCat(dir_, "/", std::string(name)); }

Status PublishDir::Write(std::string_view name, std::string_view encoded) const {
  const std::string path = PathOf(name);
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "publish ", path, ": ", S_ISLNK(st.st_mode) ? "a symbolic link" : "not a regular file",
        " is in its place; nothing written (only the agent may write the publish folder)"));
  }
  WriteOptions o;
  o.mode = 0644;
  o.keep_mode = false;
  o.durable = false;  // a memory folder, rewritten every second: nothing to make durable
  return HostFs::Local().WriteFileAtomically(path, absl::string_view(encoded.data(), encoded.size()), o).status();
}

Status PublishDir::Remove(std::string_view name) const {
  if (::unlink(PathOf(name).c_str()) != 0 && errno != ENOENT) return ErrnoToStatus(errno, "remove", PathOf(name));
  return absl::OkStatus();
}

PeriodicPublisher::~PeriodicPublisher() {
  // Derived classes Stop() in their destructors (Round is theirs); this only guards a forgotten one.
  if (thread_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
}

Status PeriodicPublisher::Write(std::string_view name, std::string_view encoded) {
  return dir_.Write(name, encoded);
}

void PeriodicPublisher::Report(const Status& s) {
  const std::string now = s.ok() ? "" : std::string(s.message());
  if (now == last_error_) return;
  if (now.empty()) {
    options_.log(absl::StrCat("publishing to ", dir_.dir(), " works again"));
  } else {
    options_.log(absl::StrCat("cannot publish: ", now));
  }
  last_error_ = now;
}

Status PeriodicPublisher::PublishOnce() {
  Status s = Round();
  Report(s);
  return s;
}

Status PeriodicPublisher::Start() {
  Status s = PublishOnce();
  thread_ = std::thread([this] { Loop(); });
  return s;
}

void PeriodicPublisher::Loop() {
  auto next = std::chrono::steady_clock::now() + options_.period;
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_until(lock, next, [this] { return stopping_; })) {
    next += options_.period;
    if (next < std::chrono::steady_clock::now()) next = std::chrono::steady_clock::now() + options_.period;
    lock.unlock();
    PublishOnce().IgnoreError();  // reported (logged) by PublishOnce
    lock.lock();
  }
}

void PeriodicPublisher::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_) return;
    stopped_ = stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  for (const std::string& name : Files()) {
    if (Status s = dir_.Remove(name); !s.ok()) options_.log(std::string(s.message()));
  }
}

Status PagePublisher::Round() {
  Status first;
  auto keep = [&first](Status s) {
    if (first.ok() && !s.ok()) first = std::move(s);
    return first.ok();
  };
  const int64_t now = UnixMillis();
  const Page metrics = source_.Metrics();
  if (metrics.body != metrics_written_) {
    const std::string_view gzip = metrics.gzip ? std::string_view(*metrics.gzip) : std::string_view();
    if (keep(Write(kPublishedMetrics, EncodePublished(now, 0, metrics.status, *metrics.body, gzip)))) {
      metrics_written_ = metrics.body;
    }
  }
  const Page status = source_.StatusPage();
  if (!status_valid_ || *status.body != status_written_) {
    if (keep(Write(kPublishedStatusPage, EncodePublished(now, 0, status.status, *status.body)))) {
      status_written_ = *status.body;
      status_valid_ = true;
    }
  }
  // Last: a fresh heartbeat says that what was written before it is current.
  const Page health = source_.Health();
  keep(Write(kPublishedHealth, EncodePublished(now, period_ms(), health.status, *health.body)));
  return first;
}

Status RoutesPublisher::Round() {
  nlohmann::json paths = nlohmann::json::object();
  for (const std::string& p : paths_()) {
    std::optional<RouteResponse> r = routes_(p);
    if (!r) continue;
    paths[p] = {{"status", r->status}, {"contentType", r->content_type}, {"body", r->body}};
  }
  const nlohmann::json doc = {{"paths", std::move(paths)}};
  return Write(kPublishedAgentHealth, EncodePublished(UnixMillis(), period_ms(), 200, DumpJson(doc)));
}

std::vector<std::string> AgentHealthPaths(const std::vector<std::string>& components) {
  std::vector<std::string> out = {"/healthz", "/readyz", "/metrics"};
  for (const std::string& c : components) {
    out.push_back("/healthz/" + c);
    out.push_back("/readyz/" + c);
  }
  return out;
}

}  // namespace gpunode::exporter
