// Privilege separation, the front's side: `gpunode exporter --from-dir DIR` serves what the agent
// published into DIR (publish.h) with the exporter's server and web config, from an unprivileged
// container. The front only reads the folder.
//
//   PublishedDir     reads a published file again only when it changed (one stat(2) per request:
//                    inode, size, modification and change times), bounded in size;
//   FilePageSource   /metrics, /health and / from the files, 503 while the exporter's heartbeat
//                    (the `health` file) is missing or stale;
//   PublishedRoutes  the agent's /healthz, /readyz, /healthz/<component>, /readyz/<component>
//                    (and /metrics of its health port) from agent-health.json, 503 while that
//                    file is missing or stale.
// A missing folder or file is a 503 that says so (the agent may not have started yet); a file
// that cannot be decoded (truncated, over the size bound, not ours) a 500 that says why.
#ifndef GPUNODE_EXPORTER_PUBLISHED_H_
#define GPUNODE_EXPORTER_PUBLISHED_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "nlohmann/json.hpp"
#include "src/base/status.h"
#include "src/exporter/http_server.h"
#include "src/exporter/page_source.h"
#include "src/exporter/publish.h"

namespace gpunode::exporter {

class PublishedDir {
 public:
  // Files larger than `max_file_bytes` are refused (RESOURCE_EXHAUSTED) without being kept.
  explicit PublishedDir(std::string dir, size_t max_file_bytes = 64u << 20);

  // The file as last published. NOT_FOUND (the folder or the file is missing: the message says
  // which and what publishes it), DATA_LOSS (truncated or not ours), RESOURCE_EXHAUSTED (too
  // large). Thread-safe; an unchanged file is answered from memory.
  StatusOr<std::shared_ptr<const PublishedFile>> Get(const std::string& name);

  const std::string& dir() const { return dir_; }
  // Files read from disk so far (not answered from memory): tests.
  uint64_t reads() const;

 private:
  struct Key {
    uint64_t dev = 0, ino = 0, size = 0;
    int64_t mtime_ns = 0, ctime_ns = 0;
    bool operator==(const Key&) const = default;
  };
  struct Entry {
    Key key;
    StatusOr<std::shared_ptr<const PublishedFile>> file = absl::UnknownError("unread");
  };

  const std::string dir_;
  const size_t max_file_bytes_;
  mutable absl::Mutex mu_;
  std::map<std::string, Entry> cache_ ABSL_GUARDED_BY(mu_);
  uint64_t reads_ ABSL_GUARDED_BY(mu_) = 0;
};

struct FreshnessOptions {
  // A heartbeat file older than this is stale; 0: 5 times the period it was written with.
  std::chrono::milliseconds stale_after{0};
};

// Why `file` (a heartbeat of `what`, e.g. "the agent's health") is stale at `now_ms`, "" when it
// is fresh (or no heartbeat).
std::string Staleness(const PublishedFile& file, int64_t now_ms, const FreshnessOptions& options,
                      std::string_view what);

// An error of PublishedDir::Get as an answer: 503 for a missing file, 500 otherwise.
Page ErrorPage(const Status& status);

class FilePageSource final : public PageSource {
 public:
  // `dir` must outlive the source.
  explicit FilePageSource(PublishedDir& dir, FreshnessOptions options = {}) : dir_(dir), options_(options) {}
  Page Metrics() override;
  Page Health() override;
  Page StatusPage() override;

 private:
  // nullopt when the exporter's heartbeat is present and fresh; the 503/500 otherwise.
  std::optional<Page> NotCurrent();
  PublishedDir& dir_;
  const FreshnessOptions options_;
};

// ServerOptions::routes over agent-health.json. `health_port`: also /metrics (the component
// metrics; on the exporter's port /metrics stays the exporter's page).
class PublishedRoutes {
 public:
  PublishedRoutes(PublishedDir& dir, FreshnessOptions options, bool health_port)
      : dir_(dir), options_(options), health_port_(health_port) {}
  std::optional<RouteResponse> operator()(std::string_view path);

 private:
  PublishedDir& dir_;
  const FreshnessOptions options_;
  const bool health_port_;
  absl::Mutex mu_;
  // The last document parsed, and the file it came from.
  std::shared_ptr<const PublishedFile> parsed_from_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const nlohmann::json> parsed_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gpunode::exporter

#endif  // GPUNODE_EXPORTER_PUBLISHED_H_
