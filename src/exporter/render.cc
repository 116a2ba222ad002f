#include "src/exporter/render.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <utility>

#include "src/exporter/xid.h"

namespace gpunode::exporter {
namespace {

// Appends text and numbers (absl::StrAppend wants absl::string_view, which Debian's abseil keeps
// distinct from std::string_view).
void AppendTo(std::string& out, std::string_view s) { out.append(s); }
void AppendTo(std::string& out, const char* s) { out.append(s); }
void AppendTo(std::string& out, const std::string& s) { out.append(s); }
void AppendTo(std::string& out, unsigned n) { out.append(std::to_string(n)); }
void AppendTo(std::string& out, int n) { out.append(std::to_string(n)); }
void AppendTo(std::string& out, uint64_t n) { out.append(std::to_string(n)); }
template <typename... Parts>
void Append(std::string& out, const Parts&... parts) {
  (AppendTo(out, parts), ...);
}
template <typename... Parts>
std::string Cat(const Parts&... parts) {
  std::string out;
  (AppendTo(out, parts), ...);
  return out;
}

std::string_view PrometheusType(MetricType type) {
  return type == MetricType::kCounter ? "counter" : "gauge";
}

void AppendFamilyHeader(std::string& out, std::string_view name, std::string_view help,
                        std::string_view type) {
  Append(out, "# HELP ", name, " ", EscapeHelp(help), "\n", "# TYPE ", name, " ", type, "\n");
}

std::string NonFinite(double value) {
  if (std::isnan(value)) return "NaN";
  return value > 0 ? "+Inf" : "-Inf";
}

// gpu, UUID, pci_bus_id, device[, modelName][, GPU_I_PROFILE, GPU_I_ID][, <hostname label>]: without
// braces (dcgm-exporter's gpuMetricsFormat).
std::string IdentityLabels(const GpuSample& g, const std::string& hostname,
                           const RenderOptions& options, bool model_name,
                           const MigInstanceSample* instance = nullptr) {
  std::string out =
      Cat("gpu=\"", g.index, "\",UUID=\"", EscapeLabelValue(g.uuid), "\",pci_bus_id=\"",
          EscapeLabelValue(g.pci_bus_id), "\",device=\"", EscapeLabelValue(g.device), "\"");
  if (model_name) Append(out, ",modelName=\"", EscapeLabelValue(g.model_name), "\"");
  if (instance != nullptr) {
    Append(out, ",GPU_I_PROFILE=\"", EscapeLabelValue(instance->profile), "\",GPU_I_ID=\"",
           instance->gpu_instance_id, "\"");
  }
  if (!options.hostname_label.empty() && !hostname.empty()) {
    Append(out, ",", options.hostname_label, "=\"", EscapeLabelValue(hostname), "\"");
  }
  return out;
}

// Whether `name` is a label the series has already (identity, host, a label row, a pod attribute,
// XID's code and text): a pod label of that name is left out, where dcgm-exporter would write the
// name twice (or replace a label row) and Prometheus would refuse the whole scrape.
bool IsSeriesLabelName(std::string_view name, const RenderOptions& options,
                       const std::vector<std::pair<std::string_view, std::string>>& label_rows) {
  static constexpr std::string_view kFixed[] = {"gpu",     "UUID",      "pci_bus_id", "device",  "modelName",
                                                "GPU_I_PROFILE", "GPU_I_ID", "container", "namespace", "pod",
                                                "pod_uid", "err_code",  "err_msg"};
  for (std::string_view f : kFixed) {
    if (name == f) return true;
  }
  if (!options.hostname_label.empty() && name == options.hostname_label) return true;
  for (const auto& [row, value] : label_rows) {
    if (name == row) return true;
  }
  return false;
}

}  // namespace

std::string EscapeLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string EscapeHelp(std::string_view help) {
  std::string out;
  out.reserve(help.size());
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string FormatDcgmValue(double value, bool is_double) {
  if (!std::isfinite(value)) return NonFinite(value);
  char buf[64];
  if (is_double) {
    std::snprintf(buf, sizeof buf, "%f", value);
  } else {
    std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(std::llround(value)));
  }
  return buf;
}

std::string FormatValue(double value) {
  if (!std::isfinite(value)) return NonFinite(value);
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
  if (ec != std::errc()) return std::to_string(value);
  return std::string(buf, end);
}

std::string RenderMetrics(const NodeSnapshot& snapshot, const std::vector<Counter>& counters,
                          const RenderOptions& options) {
  // Label-type counters: extra labels on every series, sorted by name (dcgm-exporter's order).
  std::vector<std::pair<std::string_view, std::string>> extra_labels;
  std::vector<const Counter*> numeric;
  for (const Counter& c : counters) {
    if (c.type == MetricType::kLabel) {
      if (c.field->id == FieldId::kDriverVersion && !snapshot.driver_version.empty()) {
        extra_labels.emplace_back(c.field->name, snapshot.driver_version);
      }
    } else {
      numeric.push_back(&c);
    }
  }
  std::sort(extra_labels.begin(), extra_labels.end());
  std::stable_sort(numeric.begin(), numeric.end(), [](const Counter* a, const Counter* b) {
    return a->field->dcgm_field_id < b->field->dcgm_field_id;
  });

  // The series' entities: each healthy GPU, or each GPU instance of a GPU in MIG mode that has
  // some (dcgm-exporter's `-d f`); the label set of each once.
  struct Entity {
    const GpuSample* gpu;
    const MigInstanceSample* instance;  // nullptr: the whole GPU
    std::string labels;
  };
  std::vector<Entity> entities;
  for (const GpuSample& g : snapshot.gpus) {
    if (!g.healthy) continue;
    if (g.mig_enabled && !g.mig_instances.empty()) {
      for (const MigInstanceSample& m : g.mig_instances) entities.push_back(Entity{&g, &m, {}});
    } else {
      entities.push_back(Entity{&g, nullptr, {}});
    }
  }
  for (Entity& e : entities) {
    const GpuSample& g = *e.gpu;
    e.labels = IdentityLabels(g, snapshot.hostname, options, /*model_name=*/true, e.instance);
    const PodRef* pod = nullptr;
    if (options.pods != nullptr && options.pods->ok) {  // a failed List: no pod labels at all
      const std::vector<PodRef>* refs = e.instance != nullptr
                                            ? options.pods->ForMigInstance(g.index, g.minor, *e.instance)
                                            : options.pods->ForGpu(g.uuid, g.device, g.dra_device);
      if (refs != nullptr && !refs->empty()) pod = &refs->front();
    }
    const PodMetadata* meta = nullptr;
    if (pod != nullptr && options.pod_metadata != nullptr) {
      meta = options.pod_metadata->Find(pod->namespace_name, pod->pod);
    }
    // dcgm-exporter's Labels (label rows and the pod's own labels, by name), then its Attributes
    // (container, namespace, pod, pod_uid): render_metrics.go ranges over both maps in key order.
    std::vector<std::pair<std::string_view, std::string_view>> labels;
    for (const auto& [name, value] : extra_labels) labels.emplace_back(name, value);
    if (meta != nullptr && options.pod_labels) {
      for (const auto& [name, value] : meta->labels) {
        if (!IsSeriesLabelName(name, options, extra_labels)) labels.emplace_back(name, value);
      }
      std::sort(labels.begin(), labels.end());
    }
    for (const auto& [name, value] : labels) Append(e.labels, ",", name, "=\"", EscapeLabelValue(value), "\"");
    if (pod != nullptr) {
      Append(e.labels, ",container=\"", EscapeLabelValue(pod->container), "\",namespace=\"",
             EscapeLabelValue(pod->namespace_name), "\",pod=\"", EscapeLabelValue(pod->pod), "\"");
      // dcgm-exporter writes the UID it has: "" while the pod is not read (or not found).
      if (options.pod_uid) Append(e.labels, ",pod_uid=\"", EscapeLabelValue(meta != nullptr ? meta->uid : ""), "\"");
    }
  }

  std::string out;
  for (const Counter* c : numeric) {
    std::string lines;
    for (const Entity& e : entities) {
      const std::optional<double> v =
          e.instance != nullptr ? InstanceValue(*e.gpu, *e.instance, c->field->id) : e.gpu->value(c->field->id);
      if (!v) continue;
      if (c->field->id == FieldId::kXidErrors) {
        const auto xid = static_cast<unsigned long long>(*v);
        Append(lines, c->field->name, "{", e.labels, ",err_code=\"", std::to_string(xid),
               "\",err_msg=\"", EscapeLabelValue(XidDescription(xid)), "\"} ",
               FormatDcgmValue(*v, c->field->is_double), "\n");
        continue;
      }
      Append(lines, c->field->name, "{", e.labels, "} ", FormatDcgmValue(*v, c->field->is_double),
             "\n");
    }
    if (lines.empty()) continue;
    AppendFamilyHeader(out, c->field->name, c->help, PrometheusType(c->type));
    out += lines;
  }
  out += RenderSelfMetrics(snapshot, options);
  return out;
}

std::string RenderSelfMetrics(const NodeSnapshot& snapshot, const RenderOptions& options) {
  std::string out;
  if (!snapshot.gpus.empty()) {
    AppendFamilyHeader(
        out, "gpunode_gpu_health",
        "1 when the GPU answered the last collection, 0 when it could not be read (lost, no "
        "permission, ...).",
        "gauge");
    for (const GpuSample& g : snapshot.gpus) {
      Append(out, "gpunode_gpu_health{", IdentityLabels(g, snapshot.hostname, options, false), "} ",
             g.healthy ? 1 : 0, "\n");
    }
  }
  bool any_xid = false;
  for (const GpuSample& g : snapshot.gpus) any_xid = any_xid || !g.xid_counts.empty();
  if (any_xid) {
    AppendFamilyHeader(out, "gpunode_xid_errors_total",
                       "XID errors NVML reported since the exporter started, by GPU and XID code.",
                       "counter");
    for (const GpuSample& g : snapshot.gpus) {
      for (const auto& [xid, count] : g.xid_counts) {
        Append(out, "gpunode_xid_errors_total{", IdentityLabels(g, snapshot.hostname, options, false),
               ",xid=\"", std::to_string(xid), "\"} ", count, "\n");
      }
    }
  }
  if (options.pod_metadata != nullptr) {
    const PodMetadataSnapshot& p = *options.pod_metadata;
    uint64_t dropped = 0;
    for (const auto& [key, meta] : p.pods) dropped += meta.dropped;
    AppendFamilyHeader(out, "gpunode_pod_metadata_errors_total",
                       "Failed API server reads of GPU pods' labels and UID since start (a pod not found included).",
                       "counter");
    Append(out, "gpunode_pod_metadata_errors_total ", p.errors_total, "\n");
    AppendFamilyHeader(out, "gpunode_pod_labels_dropped",
                       "Labels of the GPU pods left off their series: over the per-pod bound, a value Kubernetes would "
                       "not allow, a name Prometheus would not take or twice after sanitizing.",
                       "gauge");
    Append(out, "gpunode_pod_labels_dropped ", dropped, "\n");
    AppendFamilyHeader(out, "gpunode_pod_metadata_pods_skipped",
                       "GPU pods whose labels and UID are not read: more pods than the exporter keeps.", "gauge");
    Append(out, "gpunode_pod_metadata_pods_skipped ", p.pods_over_limit, "\n");
  }
  if (options.pods != nullptr) {
    const PodMapping& m = *options.pods;
    AppendFamilyHeader(out, "gpunode_pod_mapping_up",
                       "1 when the last kubelet pod-resources List succeeded (pod labels are "
                       "current), 0 when it failed (metrics carry no pod labels).",
                       "gauge");
    Append(out, "gpunode_pod_mapping_up ", m.ok ? 1 : 0, "\n");
    AppendFamilyHeader(out, "gpunode_pod_mapping_errors_total",
                       "Failed kubelet pod-resources List calls since start.", "counter");
    Append(out, "gpunode_pod_mapping_errors_total ", m.refresh_errors_total, "\n");
    AppendFamilyHeader(out, "gpunode_pod_mapping_last_success_timestamp_seconds",
                       "Unix time of the last successful kubelet pod-resources List (0: never).",
                       "gauge");
    Append(out, "gpunode_pod_mapping_last_success_timestamp_seconds ",
           FormatValue(m.last_success_timestamp_seconds), "\n");
  }
  AppendFamilyHeader(out, "gpunode_collection_duration_seconds",
                     "Time the last collection of all GPUs took.", "gauge");
  Append(out, "gpunode_collection_duration_seconds ",
         FormatValue(snapshot.collection_duration_seconds), "\n");
  AppendFamilyHeader(out, "gpunode_last_collection_timestamp_seconds",
                     "Unix time the last collection finished; the GPU values were read then.",
                     "gauge");
  Append(out, "gpunode_last_collection_timestamp_seconds ", FormatValue(snapshot.timestamp_seconds),
         "\n");
  if (!snapshot.collection_errors_total.empty()) {
    AppendFamilyHeader(out, "gpunode_collection_errors_total",
                       "Failed queries since start, by field (field=\"gpu\": a GPU that could not "
                       "be read at all).",
                       "counter");
    for (const auto& [field, count] : snapshot.collection_errors_total) {
      Append(out, "gpunode_collection_errors_total{field=\"", EscapeLabelValue(field), "\"} ",
             count, "\n");
    }
  }
  AppendFamilyHeader(out, "gpunode_build_info", "gpunode's version; the value is always 1.",
                     "gauge");
  Append(out, "gpunode_build_info{version=\"", EscapeLabelValue(options.version), "\"} 1\n");
  return out;
}

}  // namespace gpunode::exporter
