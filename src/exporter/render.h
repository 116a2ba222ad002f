// The Prometheus text exposition format 0.0.4 of a snapshot: dcgm-exporter's families (names,
// HELP/TYPE from the counters, labels in its order) followed by gpunode's own metrics. Pure: the
// HTTP handler calls RenderMetrics on the last published snapshot and never touches NVML.
#ifndef GPUNODE_EXPORTER_RENDER_H_
#define GPUNODE_EXPORTER_RENDER_H_

#include <string>
#include <string_view>
#include <vector>

#include "src/exporter/counters.h"
#include "src/exporter/pod_mapper.h"
#include "src/exporter/pod_metadata.h"
#include "src/exporter/sample.h"

namespace gpunode::exporter {

// What /metrics answers with (dcgm-exporter sends none; Prometheus 3 wants one).
inline constexpr std::string_view kPrometheusTextContentType =
    "text/plain; version=0.0.4; charset=utf-8";

struct RenderOptions {
  // Name of the hostname label: "Hostname" (every released dcgm-exporter), "hostname" (its main
  // branch since #655), or empty to leave it out (dcgm-exporter -n/--no-hostname).
  std::string hostname_label = "Hostname";
  // gpunode_build_info{version}.
  std::string version = GPUNODE_VERSION;
  // Pod attribution (nullptr: off). A GPU used by a pod gets pod/namespace/container labels (the
  // first pod in namespace/pod/container order when several share it), and the
  // gpunode_pod_mapping_* self-metrics appear. While the last List failed (ok = false) no GPU gets
  // pod labels: an old mapping may name pods that are gone.
  const PodMapping* pods = nullptr;
  // The pods' labels and UID from the API server (nullptr: not read; pod_metadata.h). A series
  // labelled with a pod gets that pod's labels when `pod_labels` (sorted by name among the label
  // rows, a name the series already has left out) and pod_uid after pod when `pod_uid` ("" while
  // the pod is not read), and the gpunode_pod_metadata_* self-metrics appear.
  const PodMetadataSnapshot* pod_metadata = nullptr;
  bool pod_labels = false;  // --kubernetes-enable-pod-labels
  bool pod_uid = false;     // --kubernetes-enable-pod-uid
};

// Every selected counter's family with at least one value (a field no GPU has is left out,
// HELP/TYPE included), families in DCGM field id order, one line per healthy GPU in index order
// (for a GPU in MIG mode with GPU instances, one line per instance instead, GPU_I_PROFILE and
// GPU_I_ID after modelName, values as mig_sample.h says):
//   NAME{gpu="0",UUID="GPU-..",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="NVIDIA
//   H200",
//        Hostname="node",DCGM_FI_DRIVER_VERSION="580.95.05"} 1980
// (`label` counters become labels, after Hostname, in alphabetical order, then container/namespace/pod
// when the GPU is used by a pod; DCGM_FI_DEV_XID_ERRORS adds err_code and err_msg). Integer fields print as
// "%d", FP64 fields as "%f", as dcgm-exporter does. Then RenderSelfMetrics.
std::string RenderMetrics(const NodeSnapshot& snapshot, const std::vector<Counter>& counters,
                          const RenderOptions& options = {});

// gpunode's own, promtool-lint-clean families:
//   gpunode_gpu_health{gpu,UUID,pci_bus_id,device,Hostname}  gauge 1/0 (every GPU NVML counts)
//   gpunode_xid_errors_total{gpu,UUID,pci_bus_id,device,Hostname,xid}  counter (XIDs seen)
//   gpunode_pod_metadata_errors_total, gpunode_pod_labels_dropped,
//   gpunode_pod_metadata_pods_skipped                        (only with pod labels or UID on)
//   gpunode_pod_mapping_up, gpunode_pod_mapping_errors_total,
//   gpunode_pod_mapping_last_success_timestamp_seconds       (only with pod attribution on)
//   gpunode_collection_duration_seconds                      gauge
//   gpunode_last_collection_timestamp_seconds                gauge
//   gpunode_collection_errors_total{field}                   counter (only when there were errors)
//   gpunode_build_info{version}                              gauge 1
std::string RenderSelfMetrics(const NodeSnapshot& snapshot, const RenderOptions& options = {});

// Label value escaping: \ -> \\, " -> \", newline -> \n.
std::string EscapeLabelValue(std::string_view value);
// HELP text escaping: \ -> \\, newline -> \n.
std::string EscapeHelp(std::string_view help);
// dcgm-exporter's value format: "%f" when `is_double`, else the value as an int64 ("%d");
// NaN, +Inf, -Inf as Prometheus spells them.
std::string FormatDcgmValue(double value, bool is_double);
// Shortest text that reads back as the same double ("0.0125", "1767225600", "NaN", "+Inf").
std::string FormatValue(double value);

}  // namespace gpunode::exporter

#endif  // GPUNODE_EXPORTER_RENDER_H_
