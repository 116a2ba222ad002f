#include "src/exporter/page_source.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "src/exporter/render.h"
#include "src/exporter/status_page.h"

namespace gpunode::exporter {

Page TextPage(int status, std::string text) {
  Page p;
  p.status = status;
  p.body = std::make_shared<const std::string>(std::move(text));
  return p;
}

Page ExporterPageSource::Metrics() {
  // The hot path: the page rendered once per snapshot, and its gzip made then too (Prometheus
  // asks for gzip). A scrape is a reference to it, not a copy.
  Exporter::RenderedPage page = exporter_.Page();
  if (!page.text) return TextPage(503, "no collection has finished yet\n");
  Page p;
  p.content_type = std::string(kPrometheusTextContentType);
  p.body = std::move(page.text);
  p.gzip = std::move(page.gzip);
  return p;
}

Page ExporterPageSource::Health() {
  const Exporter::HealthState h = exporter_.Health();
  return TextPage(h.ok ? 200 : 503, h.reason + "\n");
}

Page ExporterPageSource::StatusPage() {
  const Exporter::HealthState h = exporter_.Health();
  std::shared_ptr<const NodeSnapshot> snap = exporter_.Latest();
  std::shared_ptr<const PodMapping> pods = exporter_.Pods();
  StatusPageOptions o;
  o.healthy = h.ok;
  o.health = h.reason;
  o.pods = pods.get();
  const double interval_s = std::chrono::duration<double>(exporter_.options().interval).count();
  o.refresh_seconds = static_cast<int>(std::clamp(interval_s, 2.0, 60.0));
  Page p = TextPage(200, RenderStatusPage(snap.get(), o));
  p.content_type = kHtmlUtf8;
  return p;
}

}  // namespace gpunode::exporter
