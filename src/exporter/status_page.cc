#include "src/exporter/status_page.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>

#include "absl/strings/str_cat.h"
#include "src/gpu/nvml.h"
#include "src/node/unreadable_gpus.h"

namespace gpunode::exporter {
namespace {

std::string Num(const std::optional<double>& v, const char* fmt, const char* unit) {
  if (!v) return "&ndash;";
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, *v);
  return absl::StrCat(buf, unit);
}

std::string Utc(double seconds) {
  if (seconds <= 0) return "never";
  const std::time_t t = static_cast<std::time_t>(seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

constexpr std::string_view kStyle = R"(
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px;color:#1d2330;background:#fafbfc}
h1{font-size:20px;margin:0 0 4px}
.meta{color:#5a6270;margin-bottom:16px}
table{border-collapse:collapse;background:#fff;box-shadow:0 1px 2px rgba(0,0,0,.08)}
th,td{padding:6px 12px;border-bottom:1px solid #e3e6ea;text-align:right;white-space:nowrap}
th{background:#f0f2f5;font-weight:600}
td.l,th.l{text-align:left}
.ok{color:#137333;font-weight:600}.bad{color:#b3261e;font-weight:600}
td.down{background:#fdecea}.why{color:#5a6270;margin-left:6px}
.bar{display:inline-block;width:60px;height:8px;background:#e3e6ea;margin-left:6px;vertical-align:middle}
.bar i{display:block;height:8px;background:#4c7bd9}
a{color:#2856b6}
)";

std::string Bar(const std::optional<double>& ratio) {
  if (!ratio) return "";
  const double pct = std::clamp(*ratio, 0.0, 1.0) * 100.0;
  char buf[96];
  std::snprintf(buf, sizeof buf, "<span class=\"bar\"><i style=\"width:%.0f%%\"></i></span>", pct);
  return buf;
}

// A text cell: escaped, a dash when empty.
std::string Text(const std::string& v) { return v.empty() ? std::string("&ndash;") : HtmlEscape(v); }

// The health cell: "healthy", or the state NVML left the GPU in ("lost" for
// NVML_ERROR_GPU_IS_LOST, "unreadable" otherwise) and NVML's words with its code.
std::string HealthCell(const GpuSample& g) {
  if (g.healthy) return "<td class=\"l\"><span class=\"ok\">healthy</span></td>";
  const char* state = node::UnreadableState(g.status);
  std::string why = node::UnreadableReason(g.status);
  if (std::optional<nvmlReturn_t> code = gpu::NvmlReturnOf(g.status)) absl::StrAppend(&why, " (", gpu::NvmlReturnName(*code), ")");
  return absl::StrCat("<td class=\"l down\"><span class=\"bad\" data-state=\"", state, "\">", state,
                      "</span><span class=\"why\">", HtmlEscape(why), "</span></td>");
}

}  // namespace

std::string RenderStatusPage(const NodeSnapshot* snapshot, const StatusPageOptions& options) {
  std::string out = absl::StrCat(
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta http-equiv=\"refresh\" content=\"", options.refresh_seconds, "\">"
      "<title>gpunode exporter</title><style>", std::string(kStyle), "</style></head><body>\n");
  const std::string host = snapshot != nullptr ? snapshot->hostname : "";
  absl::StrAppend(&out, "<h1>gpunode exporter", host.empty() ? "" : " &middot; ", HtmlEscape(host), "</h1>\n");
  absl::StrAppend(&out, "<div class=\"meta\" id=\"node\">driver <b>",
                  HtmlEscape(snapshot != nullptr && !snapshot->driver_version.empty() ? snapshot->driver_version : "unknown"),
                  "</b> &middot; CUDA <b>",
                  HtmlEscape(snapshot != nullptr && !snapshot->cuda_driver_version.empty() ? snapshot->cuda_driver_version : "unknown"),
                  "</b> &middot; exporter <span class=\"", options.healthy ? "ok" : "bad", "\" id=\"health\">",
                  HtmlEscape(options.health), "</span> &middot; last collection ",
                  snapshot != nullptr ? Utc(snapshot->timestamp_seconds) : std::string("none yet"));
  if (snapshot != nullptr) {
    char ms[32];
    std::snprintf(ms, sizeof ms, "%.1f", snapshot->collection_duration_seconds * 1000.0);
    absl::StrAppend(&out, " (", ms, " ms)");
  }
  if (options.pods != nullptr) {
    absl::StrAppend(&out, " &middot; pod mapping <span class=\"", options.pods->ok ? "ok\">up" : "bad\">down",
                    "</span>");
  }
  absl::StrAppend(&out, " &middot; gpunode ", HtmlEscape(options.version),
                  " &middot; <a href=\"./metrics\">metrics</a> &middot; <a href=\"./health\">health</a></div>\n");

  absl::StrAppend(&out,
                  "<table id=\"gpus\"><thead><tr><th>GPU</th><th class=\"l\">Model</th><th class=\"l\">PCI bus</th>"
                  "<th class=\"l\">UUID</th>"
                  "<th>Utilization</th><th>Memory used</th><th>Temperature</th><th>Power</th>"
                  "<th class=\"l\">Health</th>",
                  options.pods != nullptr ? "<th class=\"l\">Pod</th>" : "", "</tr></thead><tbody>\n");
  if (snapshot != nullptr) {
    for (const GpuSample& g : snapshot->gpus) {
      std::optional<double> util = g.value(FieldId::kGpuUtil);
      std::optional<double> used = g.value(FieldId::kFbUsed);
      std::string memory = "&ndash;";
      if (used) {
        memory = Num(std::optional<double>(*used / 1024.0), "%.1f", " GiB");
        if (g.memory_total_mib && *g.memory_total_mib > 0) {
          absl::StrAppend(&memory, " / ", Num(std::optional<double>(*g.memory_total_mib / 1024.0), "%.0f", " GiB"),
                          Bar(*used / *g.memory_total_mib));
        }
      }
      // Every row has the same cells: a GPU NVML cannot read shows its identity (from the bus when
      // NVML never told it) and dashes for the values.
      absl::StrAppend(&out, "<tr class=\"gpu\"><td>", g.index, "</td><td class=\"l\">", Text(g.model_name),
                      "</td><td class=\"l\">", Text(g.pci_bus_id), "</td><td class=\"l\">", Text(g.uuid),
                      "</td><td>", Num(util, "%.0f", " %"), util ? Bar(*util / 100.0) : "", "</td><td>", memory,
                      "</td><td>", Num(g.value(FieldId::kGpuTemp), "%.0f", " &deg;C"), "</td><td>",
                      Num(g.value(FieldId::kPowerUsage), "%.1f", " W"), "</td>", HealthCell(g));
      if (options.pods != nullptr) {
        std::string pod;
        auto add = [&pod](const std::vector<PodRef>* refs, const MigInstanceSample* instance) {
          if (refs == nullptr) return;
          for (const PodRef& p : *refs) {
            absl::StrAppend(&pod, pod.empty() ? "" : "<br>", HtmlEscape(p.namespace_name), "/", HtmlEscape(p.pod));
            if (instance != nullptr) absl::StrAppend(&pod, " (", HtmlEscape(instance->profile), ")");
          }
        };
        if (options.pods->ok) {
          // A GPU in MIG mode: the pods of each of its GPU instances, with the instance's profile.
          add(options.pods->ForGpu(g.uuid, g.device, g.dra_device), nullptr);
          for (const MigInstanceSample& m : g.mig_instances) add(options.pods->ForMigInstance(g.index, g.minor, m), &m);
        }
        if (pod.empty()) pod = "&ndash;";
        absl::StrAppend(&out, "<td class=\"l\">", pod, "</td>");
      }
      absl::StrAppend(&out, "</tr>\n");
    }
  }
  absl::StrAppend(&out, "</tbody></table>\n</body></html>\n");
  return out;
}

}  // namespace gpunode::exporter
