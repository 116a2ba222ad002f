// The exporter's landing page at `/`: one row per GPU (model, utilization, memory, temperature,
// power, health, pod), the node's driver and CUDA, links to /metrics and /health. Self-contained
// HTML (inline CSS, no scripts, no external assets) that reloads itself every `refresh_seconds`.
#ifndef GPUNODE_EXPORTER_STATUS_PAGE_H_
#define GPUNODE_EXPORTER_STATUS_PAGE_H_

#include <string>
#include <string_view>

#include "src/base/html.h"
#include "src/exporter/pod_mapper.h"
#include "src/exporter/sample.h"

namespace gpunode::exporter {

struct StatusPageOptions {
  int refresh_seconds = 10;
  std::string version = GPUNODE_VERSION;
  std::string health = "OK";      // Exporter::Health().reason
  bool healthy = true;
  const PodMapping* pods = nullptr;  // nullptr: pod attribution off
};

std::string RenderStatusPage(const NodeSnapshot* snapshot, const StatusPageOptions& options);

// &, <, >, ", ' escaped for HTML text and attribute values.
using ::gpunode::HtmlEscape;  // src/base/html.h

}  // namespace gpunode::exporter

#endif  // GPUNODE_EXPORTER_STATUS_PAGE_H_
