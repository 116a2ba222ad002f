// The labels and UID of the pods that use GPUs, from the API server, for dcgm-exporter's
// --kubernetes-enable-pod-labels and --kubernetes-enable-pod-uid (NVIDIA/dcgm-exporter
// internal/pkg/transformation/kubernetes.go at 4.5.3-4.8.2: createPodInfo, shouldIncludeLabel;
// internal/pkg/utils/utils.go: SanitizeLabelName).
//
// What dcgm-exporter does, and gpunode with it:
//   - each label key of the pod is kept when it matches one of the allowlist patterns (Go's
//     regexp.MatchString: a match anywhere in the key, so "^app$" to want exactly "app"; none given:
//     every label), then becomes a Prometheus label name by replacing every character other than
//     [a-zA-Z0-9_] with "_" ("app.kubernetes.io/name" -> "app_kubernetes_io_name");
//   - pod_uid is metadata.uid;
//   - a pod that cannot be read has no labels and an empty UID; its series keep pod, namespace and
//     container.
// Where gpunode differs, because pod labels are tenant input (docs/security.md):
//   - reads are one GET of the pod (namespace and name from the kubelet's pod-resources List) per
//     pod that holds a GPU, in a thread of their own, never in a scrape; cached, labels read again
//     every `refresh` (a UID never changes); dcgm-exporter keeps an informer on every pod of the node;
//   - bounds: at most kMaxLabelsPerPod labels per pod (in key order), values of at most 63 bytes
//     in Kubernetes' label-value alphabet, keys of at most 317 bytes, kMaxPods pods, each answer at
//     most kMaxPodBytes; a label over a bound is left out and counted;
//   - a sanitized name that is not a valid Prometheus label name (a leading digit, a reserved "__"
//     prefix) is left out, and of two keys that sanitize to the same name the first in key order is
//     kept; the render leaves out a pod label whose name is already on the series (gpu, UUID, pod,
//     ...), where dcgm-exporter would write the name twice and Prometheus would refuse the scrape;
//   - an allowlist pattern that does not compile is an error at start (dcgm-exporter skips it, and
//     with none left keeps every label).
#ifndef GPUNODE_EXPORTER_POD_METADATA_H_
#define GPUNODE_EXPORTER_POD_METADATA_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <stop_token>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "nlohmann/json.hpp"
#include "src/base/status.h"
#include "src/exporter/pod_mapper.h"

namespace re2 {
class RE2;
}  // namespace re2

namespace gpunode::kube {
class Client;
}  // namespace gpunode::kube

namespace gpunode::exporter {

inline constexpr size_t kMaxLabelsPerPod = 32;
inline constexpr size_t kMaxPodLabelValueBytes = 63;   // Kubernetes' own limit on a label value
inline constexpr size_t kMaxPodLabelKeyBytes = 317;    // a 253-byte prefix, "/", a 63-byte name
inline constexpr size_t kMaxPods = 512;                // pods whose metadata is kept
inline constexpr size_t kMaxPodBytes = size_t{2} << 20;  // one pod's JSON (etcd's limit is 1.5 MiB)
inline constexpr size_t kMaxPodUidBytes = 64;

// dcgm-exporter's --kubernetes-pod-label-allowlist-regex: RE2 patterns (Go's regexp syntax), a key
// is kept when any of them matches part of it. No pattern: every key.
class PodLabelFilter {
 public:
  // InvalidArgument naming the first pattern that does not compile and why.
  static StatusOr<std::shared_ptr<const PodLabelFilter>> Create(const std::vector<std::string>& patterns);
  ~PodLabelFilter();
  bool Allowed(std::string_view key) const;
  const std::vector<std::string>& patterns() const { return patterns_; }

 private:
  PodLabelFilter() = default;
  std::vector<std::string> patterns_;
  std::vector<std::unique_ptr<re2::RE2>> compiled_;
};

// "app.kubernetes.io/name" -> "app_kubernetes_io_name" (dcgm-exporter's SanitizeLabelName).
std::string SanitizePodLabelName(std::string_view key);

struct PodMetadata {
  bool read = false;  // the API server answered with the pod (else: no labels, empty UID)
  std::string uid;
  // Sanitized name -> value, in name order, at most kMaxLabelsPerPod.
  std::vector<std::pair<std::string, std::string>> labels;
  uint64_t dropped = 0;  // labels left out: over a bound, an invalid name, a duplicate name
  friend bool operator==(const PodMetadata& a, const PodMetadata& b) = default;
};

// The pod object of a GET -> its UID and allowed labels (`filter` nullptr: every label).
// InvalidArgument naming the field when metadata, its uid or labels have the wrong type.
StatusOr<PodMetadata> ExtractPodMetadata(const nlohmann::json& pod, const PodLabelFilter* filter,
                                         std::string_view what);

struct PodKey {
  std::string namespace_name;
  std::string name;
  friend bool operator<(const PodKey& a, const PodKey& b) {
    return std::tie(a.namespace_name, a.name) < std::tie(b.namespace_name, b.name);
  }
  friend bool operator==(const PodKey& a, const PodKey& b) = default;
};

struct PodMetadataSnapshot {
  std::map<PodKey, PodMetadata> pods;
  uint64_t errors_total = 0;    // failed reads (not found included) since start
  uint64_t pods_over_limit = 0; // pods of the last round beyond kMaxPods (not read)
  const PodMetadata* Find(const std::string& ns, const std::string& name) const;
};

struct PodMetadataOptions {
  std::shared_ptr<const PodLabelFilter> filter;  // nullptr: every label
  bool labels = false;                           // --kubernetes-enable-pod-labels
  bool uid = false;                              // --kubernetes-enable-pod-uid
  std::chrono::milliseconds refresh{std::chrono::minutes(5)};  // a pod's labels are read again after
  std::chrono::milliseconds retry{std::chrono::seconds(30)};   // a failed read is tried again after
  std::chrono::milliseconds timeout{std::chrono::seconds(5)};  // per GET
  std::chrono::milliseconds round{std::chrono::seconds(1)};    // how often the pod list is looked at
  std::function<void(const std::string&)> log;  // empty: the exporter's log (or none)
};

// Reads the metadata of the pods a PodMapper names, in its own thread: every `round` it takes the
// pods of `pods()` (the latest successful List's; after a failed List the last one is kept), GETs
// those not read yet, due for refresh or retry, and forgets the pods no longer listed. Failures
// keep the last good metadata of the pod; each kind of failure is logged once until a read works.
class PodMetadataCache {
 public:
  PodMetadataCache(kube::Client& client, PodMetadataOptions options,
                   std::function<std::shared_ptr<const PodMapping>()> pods);
  ~PodMetadataCache();  // Stop()
  PodMetadataCache(const PodMetadataCache&) = delete;
  PodMetadataCache& operator=(const PodMetadataCache&) = delete;

  void Start();
  void Stop();  // cancels a GET in flight
  // One round in the caller (tests, and the first round before Start).
  void RunOnce();

  std::shared_ptr<const PodMetadataSnapshot> Latest() const;
  uint64_t generation() const;  // bumped when a pod's metadata (or the set of pods) changed
  const PodMetadataOptions& options() const { return options_; }

 private:
  struct Entry {
    PodMetadata meta;
    std::chrono::steady_clock::time_point next;  // when to read it again
  };
  void Run();
  // One GET; the entry's next read and the log on failure.
  void Read(const PodKey& key, Entry& e, std::stop_token stop);

  kube::Client& client_;
  const PodMetadataOptions options_;
  std::function<std::shared_ptr<const PodMapping>()> pods_;

  std::map<PodKey, Entry> entries_;  // the reading thread's (RunOnce's caller's)
  std::set<std::string> logged_;     // failure kinds logged since the last good read
  uint64_t errors_total_ = 0;
  uint64_t pods_over_limit_ = 0;

  mutable std::mutex mu_;
  std::condition_variable_any cv_;
  std::shared_ptr<const PodMetadataSnapshot> latest_;
  uint64_t generation_ = 0;
  std::stop_source stop_;
  std::thread thread_;
};

}  // namespace gpunode::exporter

#endif  // GPUNODE_EXPORTER_POD_METADATA_H_
