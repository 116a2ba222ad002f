// What the exporter's server answers on /metrics, /health and /: the seam between the HTTP server
// (http_server.h) and where the pages come from. Two sources:
//   - ExporterPageSource: the live Exporter in this process (gpunode exporter, the agent's
//     exporter component);
//   - FilePageSource (published.h): the files the agent published into a folder, served by the
//     unprivileged front (`gpunode exporter --from-dir`).
// The agent's publisher (publish.h) writes exactly what an ExporterPageSource answers, so the two
// serve the same bytes.
#ifndef GPUNODE_EXPORTER_PAGE_SOURCE_H_
#define GPUNODE_EXPORTER_PAGE_SOURCE_H_

#include <memory>
#include <string>

#include "src/exporter/exporter.h"

namespace gpunode::exporter {

inline constexpr char kTextPlainUtf8[] = "text/plain; charset=utf-8";
inline constexpr char kHtmlUtf8[] = "text/html; charset=utf-8";

// One answer. `body` is never nullptr; `gzip` (only /metrics has one) is the same body
// gzip-encoded, made once when the page was rendered, or nullptr.
struct Page {
  int status = 200;
  std::string content_type = kTextPlainUtf8;
  std::shared_ptr<const std::string> body;
  std::shared_ptr<const std::string> gzip;
};

// A text answer (errors, health reasons).
Page TextPage(int status, std::string text);

// Called on the server's event loop, from several threads at once: quick, thread-safe, never
// blocking on NVML or the network.
class PageSource {
 public:
  virtual ~PageSource() = default;
  // /metrics: 200 with the Prometheus page (kPrometheusTextContentType) and its gzip, or why not.
  virtual Page Metrics() = 0;
  // /health: dcgm-exporter's path with gpunode's meaning (docs/exporter.md): 200 "OK\n", or 503
  // with the reason.
  virtual Page Health() = 0;
  // /: the status page (text/html), or why not.
  virtual Page StatusPage() = 0;
};

// The live exporter. `exporter` must outlive the source.
class ExporterPageSource final : public PageSource {
 public:
  explicit ExporterPageSource(Exporter& exporter) : exporter_(exporter) {}
  Page Metrics() override;
  Page Health() override;
  Page StatusPage() override;

 private:
  Exporter& exporter_;
};

}  // namespace gpunode::exporter

#endif  // GPUNODE_EXPORTER_PAGE_SOURCE_H_
