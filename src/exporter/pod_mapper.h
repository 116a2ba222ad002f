// GPU → pod attribution for the exporter, dcgm-exporter compatible (shared/reference/monitoring.md
// §1.3): the kubelet's pod-resources API v1 `List` (unix socket, default
// /var/lib/kubelet/pod-resources/kubelet.sock) tells which pod/namespace/container holds each
// device of nvidia.com/gpu, nvidia.com/mig-* and any extra resource names. Unlike dcgm-exporter,
// which calls List inside every scrape, PodMapper refreshes in its own thread and a scrape only
// reads Latest(); the receive limit is 64 MiB (dcgm-exporter's 4 MiB default broke big nodes, #509).
// GPUs allocated through DRA come from the same List: each container's dynamic_resources name the
// claim's devices by driver, pool and device name; those of the GPU driver (gpu.nvidia.com, NVIDIA's
// and gpunode's) in this node's pool are keyed by NVIDIA's device names (src/dra/device_model.h).
#ifndef GPUNODE_EXPORTER_POD_MAPPER_H_
#define GPUNODE_EXPORTER_POD_MAPPER_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "src/base/status.h"
#include "src/base/well_known.h"
#include "src/exporter/mig_sample.h"

namespace grpc {
class ClientContext;
}  // namespace grpc
namespace v1 {
class ListPodResourcesResponse;
}  // namespace v1

namespace gpunode::exporter {

struct PodRef {
  std::string pod;             // pod="train-0"
  std::string namespace_name;  // namespace="ml"
  std::string container;       // container="main"

  friend bool operator<(const PodRef& a, const PodRef& b) {
    return std::tie(a.namespace_name, a.pod, a.container) < std::tie(b.namespace_name, b.pod, b.container);
  }
  friend bool operator==(const PodRef& a, const PodRef& b) {
    return a.pod == b.pod && a.namespace_name == b.namespace_name && a.container == b.container;
  }
};

struct PodMapping {
  bool ok = false;  // the last List succeeded
  Status status;    // why not (a missing socket names its path)
  double last_success_timestamp_seconds = 0;  // Unix time of the last successful List (0: never)
  uint64_t refresh_errors_total = 0;          // failed Lists over the mapper's life
  // Device key -> the containers using it, sorted by (namespace, pod, container), no duplicates.
  // Keys: "GPU-<uuid>" (time-sliced replicas "GPU-<uuid>::N" are stripped of "::N"), "MIG-<uuid>"
  // as given, GKE device names "nvidia0" (from "nvidia0", "nvidia0/vgpu1") and "nvidia0/gi2" (a
  // MIG instance: from "nvidia0/gi2", "nvidia0/gi2/vgpu1"); DRA devices by NVIDIA's names, "gpu-<minor>" for a GPU and
  // "gpu-<minor>-mig-<profile>-<GI profile id>-<placement start>" for a MIG device (kept whole, as
  // MIG UUIDs are). After a failed List, PodMapper keeps the last successful mapping here (with
  // ok = false), so a kubelet restart does not drop pod labels; consumers that want to drop stale
  // attribution compare last_success_timestamp_seconds with the clock.
  std::map<std::string, std::vector<PodRef>> by_device;
  // DRA devices of the GPU driver the last List named but that were not mapped: another pool, a
  // name that is not NVIDIA's shape, or past the bounds (kMaxDraClaimsPerContainer,
  // kMaxDraDevicesPerClaim). Other drivers' devices are not counted.
  uint64_t dra_ignored = 0;

  // The containers using one GPU: by UUID ("GPU-..." or "MIG-...") first, then by device name
  // ("nvidia0", GKE), then by DRA device name ("gpu-0"); nullptr when none (or all empty).
  const std::vector<PodRef>* ForGpu(std::string_view uuid, std::string_view device_name,
                                    std::string_view dra_device = {}) const;
  // The containers using one GPU instance of GPU `gpu_index` (minor number `minor`): by the MIG
  // UUID of any of its compute instances, then GKE's "nvidia<gpu_index>/gi<GPU instance id>", then
  // NVIDIA's DRA name "gpu-<minor>-mig-<profile>-<GI profile id>-<placement start>" (matched on
  // the minor, GI profile id and placement start, which name one GPU instance; the profile text
  // between them is not compared). nullptr when none.
  const std::vector<PodRef>* ForMigInstance(unsigned gpu_index, std::optional<unsigned> minor,
                                            const MigInstanceSample& instance) const;
};

// The DRA driver whose claims attribute GPUs, and this node's pool.
inline constexpr const char* kDefaultDraDriver = wellknown::kDraGpuDriver;  // "gpu.nvidia.com"
struct DraSource {
  std::string driver = kDefaultDraDriver;  // "": DRA claims are not read
  // This node's pool (the node's name: gpunode and NVIDIA publish one pool per node named after
  // it); "": any pool (the kubelet lists only this node's pods, whose devices are this node's).
  std::string pool;
};

// Bounds on what one List may name through DRA (the rest is counted in dra_ignored): claims per
// container, devices per claim (resource.k8s.io/v1 AllocationResultsMaxSize is 32).
inline constexpr int kMaxDraClaimsPerContainer = 256;
inline constexpr int kMaxDraDevicesPerClaim = 32;

struct PodMapperOptions {
  std::string socket_path = "/var/lib/kubelet/pod-resources/kubelet.sock";
  // Extra resource names besides nvidia.com/gpu and the prefix nvidia.com/mig- (dcgm-exporter's
  // --nvidia-resource-names), e.g. a renamed time-sliced resource "nvidia.com/gpu.shared".
  std::vector<std::string> resource_names;
  DraSource dra;  // GPUs allocated through DRA (ResourceClaims of dra.driver)
  std::chrono::milliseconds refresh_interval{10000};
  std::chrono::milliseconds timeout{5000};  // per List call
};

// The map key of one device ID as the device plugin reported it (see PodMapping::by_device).
std::string PodDeviceKey(std::string_view device_id);

// Whether a resource is attributed: nvidia.com/gpu, nvidia.com/mig-*, or one of `resource_names`.
bool IsGpuResource(std::string_view resource_name, const std::vector<std::string>& resource_names);

// NVIDIA's DRA name of a GPU: "gpu-<minor>" (the /dev/nvidia<minor> minor number).
std::string DraGpuName(unsigned minor);
// Whether `name` has the shape of NVIDIA's DRA device names: "gpu-<minor>" or
// "gpu-<minor>-mig-<profile>-<GI profile id>-<placement start>" (numbers without leading zeros,
// the profile lower-case letters, digits and dashes), a DNS label of at most 63 characters.
bool IsNvidiaDraDeviceName(std::string_view name);

// Pure: one List response -> mapping (ok = true, status OK, no timestamp). Other resources
// (CPUs, memory, other device plugins, other DRA drivers' claims) are ignored.
PodMapping BuildPodMapping(const v1::ListPodResourcesResponse& resp, const std::vector<std::string>& resource_names,
                           const DraSource& dra = {});

// One synchronous List over a fresh channel (unix:<socket_path>, 64 MiB receive limit, deadline
// options.timeout). A missing socket file is reported without dialing (NotFound, naming the path);
// a failed call keeps gRPC's code and names the socket. The result's timestamp is now.
StatusOr<PodMapping> ListOnce(const PodMapperOptions& options);

// Refreshes the mapping every refresh_interval in one background thread. The channel is kept
// between refreshes and recreated after a failure.
class PodMapper {
 public:
  explicit PodMapper(PodMapperOptions options);
  ~PodMapper();  // Stop()
  PodMapper(const PodMapper&) = delete;
  PodMapper& operator=(const PodMapper&) = delete;

  // Starts the thread; the first refresh runs there, so this never blocks on the kubelet.
  void Start();
  // Wakes the thread (cancelling a List in flight) and joins it. Start may be called again.
  void Stop();

  // The latest mapping; never nullptr (before the first refresh: ok = false, "not yet refreshed").
  std::shared_ptr<const PodMapping> Latest() const ABSL_LOCKS_EXCLUDED(mu_);
  // Bumped by every refresh that changed by_device or ok.
  uint64_t generation() const;

 private:
  class Client;
  void Run() ABSL_LOCKS_EXCLUDED(mu_);
  void RefreshOnce() ABSL_LOCKS_EXCLUDED(mu_);

  const PodMapperOptions options_;
  std::unique_ptr<Client> client_;  // used only by the thread

  mutable absl::Mutex mu_;
  std::condition_variable_any cv_;  // stopping_ set (a timed wait: see pod_mapper.cc)
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  grpc::ClientContext* in_flight_ ABSL_GUARDED_BY(mu_) = nullptr;  // the List in progress, cancelled by Stop
  std::shared_ptr<const PodMapping> latest_ ABSL_GUARDED_BY(mu_);
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gpunode::exporter

#endif  // GPUNODE_EXPORTER_POD_MAPPER_H_
