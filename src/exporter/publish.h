// Privilege separation, the agent's side: what the exporter's port and the agent's health port
// would serve, written into a folder (in the pod an emptyDir in memory shared with the front
// container) instead of (or besides) being served from the privileged process. The unprivileged
// front (`gpunode exporter --from-dir`, published.h) serves those files. The channel is one way:
// the agent writes and never reads the folder; the front reads and never writes.
//
// Every file is replaced atomically (temp file + rename through HostFs::Local()), mode 0644, and
// starts with one header line that carries when it was produced and how often it is rewritten:
//
//   gpunode-published/1 produced_ms=<Unix ms> period_ms=<ms> status=<HTTP> length=<n> gzip_length=<m>\n
//   <n bytes: the body><m bytes: the body gzip-encoded (only the metrics page)>
//
// period_ms > 0 makes the file a heartbeat: it is rewritten at least that often even when nothing
// changed, so a front can tell a dead agent from a quiet one.
#ifndef GPUNODE_EXPORTER_PUBLISH_H_
#define GPUNODE_EXPORTER_PUBLISH_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "src/base/status.h"
#include "src/exporter/http_server.h"
#include "src/exporter/page_source.h"

namespace gpunode::exporter {

// The files of a publish folder.
inline constexpr char kPublishedMetrics[] = "metrics";         // /metrics: the page and its gzip
inline constexpr char kPublishedHealth[] = "health";           // /health; the exporter's heartbeat
inline constexpr char kPublishedStatusPage[] = "status.html";  // /
// The agent's health port as one JSON document, a heartbeat:
// {"paths": {"/healthz": {"status": 200, "contentType": "text/plain; charset=utf-8", "body": "..."},
//            "/readyz": ..., "/healthz/<component>": ..., "/readyz/<component>": ..., "/metrics": ...}}
inline constexpr char kPublishedAgentHealth[] = "agent-health.json";

inline constexpr std::chrono::milliseconds kDefaultPublishPeriod{1000};

// One decoded file.
struct PublishedFile {
  int64_t produced_ms = 0;  // Unix time, milliseconds
  int64_t period_ms = 0;    // rewritten at least this often; 0: only when it changes
  int status = 200;         // the HTTP status to answer with
  std::shared_ptr<const std::string> body;
  std::shared_ptr<const std::string> gzip;  // nullptr: none
};

std::string EncodePublished(int64_t produced_ms, int64_t period_ms, int status, std::string_view body,
                            std::string_view gzip = {});
// `source` names the file in errors. A header that is not ours, a body shorter than its header
// says (truncated) or longer (trailing bytes) is DATA_LOSS naming the file and the numbers.
StatusOr<PublishedFile> DecodePublished(std::string_view data, std::string_view source);

// Now, as produced_ms counts it.
int64_t UnixMillis();

// The folder, ready for writing.
class PublishDir {
 public:
  // Creates `dir` (mode 0755) when missing. A folder that group or others may write (an emptyDir
  // is 0777) is made 0755 when this process owns it, and refused otherwise: whoever can write
  // there could swap a file for a symbolic link and have this (root) process write through it.
  static StatusOr<PublishDir> Open(std::string dir);
  // Replaces `name` atomically (mode 0644). A symbolic link in its place is refused, not followed.
  Status Write(std::string_view name, std::string_view encoded) const;
  // A missing file is OK.
  Status Remove(std::string_view name) const;
  const std::string& dir() const { return dir_; }
  std::string PathOf(std::string_view name) const;

 private:
  explicit PublishDir(std::string dir) : dir_(std::move(dir)) {}
  std::string dir_;
};

struct PublisherOptions {
  std::chrono::milliseconds period = kDefaultPublishPeriod;
  // A failed write, once per distinct error (and once when writes work again).
  std::function<void(const std::string&)> log = [](const std::string&) {};
};

// Runs `round` now and then every period on its own thread until Stop; Stop runs `finish`.
class PeriodicPublisher {
 public:
  PeriodicPublisher(PublishDir dir, PublisherOptions options) : dir_(std::move(dir)), options_(std::move(options)) {}
  virtual ~PeriodicPublisher();
  PeriodicPublisher(const PeriodicPublisher&) = delete;
  PeriodicPublisher& operator=(const PeriodicPublisher&) = delete;

  // One round in the caller (the files are there when it returns), then the thread. The round's
  // error is returned (the thread keeps trying).
  Status Start();
  // Stops the thread and removes the files: the front says "not published" at once instead of
  // after its staleness bound. Idempotent.
  void Stop();
  // One round in the caller (tests; Start's first round).
  Status PublishOnce();
  const PublishDir& dir() const { return dir_; }

 protected:
  virtual Status Round() = 0;
  virtual std::vector<std::string> Files() const = 0;
  Status Write(std::string_view name, std::string_view encoded);
  int64_t period_ms() const { return options_.period.count(); }

 private:
  void Loop();
  void Report(const Status& s);

  PublishDir dir_;
  PublisherOptions options_;
  std::mutex mu_;  // the timed wait (steady clock), `stopping_`, Round() against Stop()
  std::condition_variable cv_;
  bool stopping_ = false;
  bool stopped_ = false;
  std::thread thread_;
  std::string last_error_;  // the round's, for logging changes only
};

// The exporter's pages: every period /health (the heartbeat, rewritten even when nothing changed),
// /metrics when the page changed (a new sampling pass, new pod labels), / when it changed.
class PagePublisher final : public PeriodicPublisher {
 public:
  // `source` (the live exporter's) must outlive the publisher.
  PagePublisher(PageSource& source, PublishDir dir, PublisherOptions options = {})
      : PeriodicPublisher(std::move(dir), std::move(options)), source_(source) {}
  ~PagePublisher() override { Stop(); }

 protected:
  Status Round() override;
  std::vector<std::string> Files() const override {
    return {kPublishedMetrics, kPublishedStatusPage, kPublishedHealth};
  }

 private:
  PageSource& source_;
  std::shared_ptr<const std::string> metrics_written_;  // Round() only (one thread at a time)
  std::string status_written_;
  bool status_valid_ = false;
};

// The answers of a routes function (the agent's health port: /healthz, /readyz, per component,
// /metrics) for the paths `paths()` names, as kPublishedAgentHealth, every period.
class RoutesPublisher final : public PeriodicPublisher {
 public:
  using Routes = std::function<std::optional<RouteResponse>(std::string_view path)>;
  RoutesPublisher(std::function<std::vector<std::string>()> paths, Routes routes, PublishDir dir,
                  PublisherOptions options = {})
      : PeriodicPublisher(std::move(dir), std::move(options)), paths_(std::move(paths)), routes_(std::move(routes)) {}
  ~RoutesPublisher() override { Stop(); }

 protected:
  Status Round() override;
  std::vector<std::string> Files() const override { return {kPublishedAgentHealth}; }

 private:
  std::function<std::vector<std::string>()> paths_;
  Routes routes_;
};

// The agent's health port's paths: /healthz, /readyz, /metrics and /healthz/<c>, /readyz/<c> for
// each of `components`.
std::vector<std::string> AgentHealthPaths(const std::vector<std::string>& components);

}  // namespace gpunode::exporter

#endif  // GPUNODE_EXPORTER_PUBLISH_H_
