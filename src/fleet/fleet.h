// The cluster view of GPU nodes (`gpunode fleet`, user doc docs/fleet.md): pure functions over the
// Kubernetes NodeList JSON as the API server returns it (GET /api/v1/nodes) and the labels,
// conditions and resources gpunode's agent and device plugin put on every Node
// (src/labels/labels.cc).
//
//   NodeList JSON --ParseNodeList--> FleetNode[] --Analyze--> FleetReport (pools, findings)
//                                                  --CheckPools--> FleetCompatReport (one verdict per pool)
//                                                  --PlanDrain-->  DrainPlan (waves)
//
//   NVIDIADriver JSON --ParseNvidiaDriver--> NvidiaDriverInfo[] --Analyze--> FleetReport::driver_upgrades
//
// Nothing here does I/O except ListNodes, ListResourceSlices and ListNvidiaDrivers (the API
// client, paginated). Renderers (render.h) return strings; src/cli prints them.
#ifndef GPUNODE_FLEET_FLEET_H_
#define GPUNODE_FLEET_FLEET_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "src/base/status.h"
#include "src/base/version.h"
#include "src/base/well_known.h"
#include "src/compat/dataset.h"
#include "src/compat/engine.h"
#include "src/kube/client.h"

namespace gpunode::kube {
class Fields;
}  // namespace gpunode::kube

namespace gpunode::fleet {

// The label keys read, the GPU resource and the GpuStackReady condition are src/base/well_known.h's
// (the names the node side writes them under).
using namespace ::gpunode::wellknown;  // kLabel*, kResourceGpu, kConditionGpuStackReady

// A Node condition; `present` false when the Node does not carry it.
struct Condition {
  bool present = false;
  std::string status;  // "True", "False", "Unknown"
  std::string reason;
  std::string message;
};

// One device taint that keeps pods off a DRA device (effect NoSchedule or NoExecute).
struct DraTaintSeen {
  std::string device;  // "gpu-3"
  std::string key;     // "gpu.nvidia.com/gpu-lost"
  std::string value;   // "79" for an XID, often ""
  std::string effect;  // "NoSchedule", "NoExecute"
};

// What the node's ResourceSlices of its GPU driver publish (resource.k8s.io; src/fleet/dra.cc):
// only the slices with spec.nodeName = the node, of the newest generation of each pool.
struct NodeDra {
  bool listed = false;   // fleet read the cluster's (or the file's) ResourceSlices
  std::string driver;    // the driver counted: gpunode.io/dra.driver, else gpu.nvidia.com
  int slices = 0;        // slices counted
  int64_t gpus = 0;         // full-GPU devices (type gpu)
  int64_t mig_devices = 0;  // MIG devices (type mig)
  int64_t other_devices = 0;  // devices of another type
  int64_t gpus_published = 0;  // GPUs behind the devices: full GPUs and the distinct parents of MIG devices
  // GPUs with at least one device that has no NoSchedule/NoExecute taint: what DRA can allocate.
  int64_t gpus_allocatable = 0;
  int64_t tainted_devices = 0;       // devices with a NoSchedule/NoExecute taint
  std::vector<DraTaintSeen> taints;  // those taints, by device (at most kMaxDraTaintsKept)
  std::vector<std::string> warnings;  // slices past the API's bounds, named, and what was counted

  bool present() const { return slices > 0; }
};
inline constexpr size_t kMaxDraTaintsKept = 256;

// What fleet knows of one Node, read from the Node object (and its ResourceSlices).
struct FleetNode {
  std::string name;
  std::map<std::string, std::string> labels;        // nvidia.com/*, gpunode.io/* and NFD's pci-10de
  std::map<std::string, int64_t> capacity;          // nvidia.com/* resources only
  std::map<std::string, int64_t> allocatable;       // nvidia.com/* resources only
  Condition ready;                                  // the Ready condition
  Condition gpu_stack;                              // GpuStackReady (set by gpunode agent)
  bool unschedulable = false;                       // spec.unschedulable (cordoned)

  // Derived from the labels (empty/nullopt when the label is absent or malformed).
  bool has_gpus = false;            // any sign of an NVIDIA GPU (labels or nvidia.com/* capacity)
  bool has_agent_labels = false;    // any gpunode.io/ label
  std::string product;              // nvidia.com/gpu.product, e.g. "NVIDIA-H100-80GB-HBM3"
  std::string model;                // product without GFD's "-SHARED" and "-MIG-<profile>" suffixes
  std::string family;               // nvidia.com/gpu.family, e.g. "hopper"
  std::optional<Version> driver;    // nvidia.com/cuda.driver-version.full
  std::string branch;               // gpunode.io/driver.branch, else the driver's major
  std::string cuda_max;             // nvidia.com/cuda.runtime-version.full
  std::string kernel_module;        // open | proprietary
  std::string agent_version;        // gpunode.io/agent.version
  std::string doctor_status;        // ok | warn | fail
  std::string doctor_first;         // gpunode.io/doctor.first-finding
  std::string dra_driver;           // gpunode.io/dra.driver: GPUs served through DRA
  std::optional<int64_t> healthy_gpus;    // gpunode.io/gpu.healthy-count
  std::optional<int64_t> unhealthy_gpus;  // gpunode.io/gpu.unhealthy-count
  std::optional<int64_t> physical_gpus;   // see PhysicalGpus in fleet.cc: labels, else capacity
  int64_t replicas = 1;                   // GPU sharing replicas of nvidia.com/gpu (>= 1)
  std::string sharing;                    // nvidia.com/gpu.sharing-strategy when not "none"
  std::string mig_strategy;               // nvidia.com/mig.strategy
  std::vector<std::string> warnings;      // labels present but malformed, named with their value
  // The driver-upgrade controller's annotation gpunode.io/driver-upgrade.reason (why the node
  // failed or waits; at most kMaxUpgradeTextBytes), "" when absent.
  std::string upgrade_reason;
  NodeDra dra;                            // its DRA devices (ListResourceSlices, ParseNodeList)
  // Served through DRA: gpunode.io/dra.driver, or ResourceSlices of the GPU driver.
  bool ServedThroughDra() const { return !dra_driver.empty() || dra.present(); }

  bool Ready() const { return ready.present && ready.status == "True"; }
  // Cordoned or not Ready: the node already counts as unavailable.
  bool Unavailable() const { return unschedulable || !Ready(); }
  int64_t Allocatable(const std::string& resource) const;
  int64_t Capacity(const std::string& resource) const;
};

// The GPU driver whose ResourceSlices count for a node: its gpunode.io/dra.driver, else
// gpu.nvidia.com.
std::string DraDriverOf(const FleetNode& n);

// One Node object -> FleetNode. InvalidArgument when the object has no metadata.name, or when a
// field has the wrong type ("<where>: metadata.labels: expected an object, got string"); every
// other missing part (labels, status, conditions) is simply absent. `where` names the object.
StatusOr<FleetNode> ParseNode(const nlohmann::json& node, const std::string& where);
// A NodeList (or kubectl's `List`) -> its nodes in order. InvalidArgument naming `source` when the
// document is not a list of Node objects (no `items` array, an item that is not an object, a Node
// without a name, the same name twice). A `List` may also hold ResourceSlices (kubectl get
// nodes,resourceslices -o json): when it holds any, they are counted into each node's `dra`
// (listed = true) as ListResourceSlices does; NVIDIADrivers, checked and left out here
// (ParseFleetList keeps them); any other kind is refused.
StatusOr<std::vector<FleetNode>> ParseNodeList(const nlohmann::json& list, const std::string& source);
// The same from text (ParseJson: depth-limited, no exceptions).
StatusOr<std::vector<FleetNode>> ParseNodeListText(absl::string_view text, const std::string& source);

struct ListNodesOptions {
  int limit = 500;  // Nodes per page
  // First from the API server's watch cache (resourceVersion=0: no etcd read; a Node may be a
  // moment old). API servers before 1.33 ignore `limit` there and answer with every Node at once;
  // when that is over the client's body cap, the Nodes are paged through a consistent list instead.
  bool from_cache = true;
  int max_pages = 10000;
};

// The cluster's Nodes: GET /api/v1/nodes page by page (limit, continue), each item turned into a
// FleetNode as it is read, so neither a page nor the list is ever one JSON document in memory.
// Errors are the client's (they name the request: body cap, deadline, HTTP status) or ParseNode's
// naming the item; a continue token the server repeats or more than `max_pages` pages is Internal
// rather than a loop.
StatusOr<std::vector<FleetNode>> ListNodes(kube::Client& client, const ListNodesOptions& options = {});

// ResourceSlices of the GPU nodes' drivers, counted into each node's `dra`.
class SliceTally {
 public:
  // The nodes of `nodes` and their drivers (DraDriverOf).
  explicit SliceTally(const std::vector<FleetNode>& nodes);
  // One ResourceSlice object of any version (v1, v1beta2; v1beta1's devices[].basic): slices of
  // another driver or node, or not node-local, are skipped; a field of the wrong type is
  // InvalidArgument naming `where` and the field. Bounds (128 devices a slice, 16 taints a device,
  // 4096 devices a node) are warnings on the node, the rest not counted.
  Status Add(const nlohmann::json& slice, const std::string& where);
  // Each node's `dra`, listed = true; a node with slices of its GPU driver has_gpus.
  void Apply(std::vector<FleetNode>& nodes) const;

 private:
  struct Device {
    std::string gpu;  // the GPU it is on: the GPU device's name, a MIG device's parent
    char kind = 'o';  // 'g' GPU, 'm' MIG, 'o' other
    std::vector<DraTaintSeen> taints;  // NoSchedule/NoExecute only
  };
  struct Pool {
    int64_t generation = -1;
    int slices = 0;
    std::map<std::string, Device> devices;  // by name
  };
  // One device of `driver` (v1's device, or v1beta1's `basic`): its kind, its GPU, its taints.
  static StatusOr<Device> ReadDevice(const kube::Fields& body, const std::string& name, const std::string& driver,
                                     const std::string& where, std::vector<std::string>* warnings);
  struct PerNode {
    std::string driver;
    std::map<std::string, Pool> pools;  // by pool name
    size_t devices = 0;
    std::vector<std::string> warnings;
  };
  std::map<std::string, PerNode> nodes_;  // by node name
};

struct SliceListing {
  std::string api_version;  // "resource.k8s.io/v1" ("" when none was read)
  std::vector<std::string> notes;  // why slices were not read (403, no resource.k8s.io), for the report
};
// Lists the cluster's ResourceSlices as ListNodes lists Nodes (pages, watch cache first) from
// resource.k8s.io/v1, falling back to v1beta2 then v1beta1 on 404, and counts them into `nodes`.
// 403 (no RBAC for resourceslices) and no version served are notes, not errors (the nodes keep
// listed = false); other errors are the client's or SliceTally::Add's.
StatusOr<SliceListing> ListResourceSlices(kube::Client& client, std::vector<FleetNode>& nodes,
                                          const ListNodesOptions& options = {});

// Nodes with the same GPU product and driver version.
struct Pool {
  std::string name;     // readable and unique: "h100-80gb-hbm3-580.95.05"
  std::string product;  // the GPU model (FleetNode::model), "unknown" when not labelled
  std::string driver;   // driver version, "unknown" when absent
  std::string branch;
  std::string cuda_max;
  std::string family;
  std::vector<std::string> kernel_modules;  // distinct values, sorted
  std::vector<std::string> nodes;           // names, sorted
  std::vector<std::string> agent_versions;  // distinct values, sorted ("" = no agent)
  int ready_nodes = 0;
  int64_t gpus = 0;         // physical GPUs
  int64_t allocatable = 0;  // nvidia.com/gpu allocatable
  int64_t dra_allocatable = 0;  // GPUs DRA can allocate (NodeDra::gpus_allocatable)
  int compute_major = 0, compute_minor = 0;  // from the first node that has them (0 = unknown)
};

enum class Severity { kInfo, kWarning, kError };
// "info", "warning", "error".
absl::string_view SeverityName(Severity s);

// Why a node's allocatable nvidia.com/gpu is below its physical GPU count.
struct ShortCause {
  std::string id;      // node-not-ready | validation-failing | device-plugin-not-registered |
                       // gpus-unhealthy | resource-renamed | plugin-marked-unhealthy | plugin-advertises-fewer;
                       // dra-below-capacity: no-resource-slices | devices-tainted | devices-missing
  std::string detail;  // the evidence, e.g. "gpunode.io/gpu.unhealthy-count=2"
};

struct Finding {
  std::string id;  // driver-skew, branch-skew, below-capacity, dra-below-capacity, gpus-unhealthy,
                   // validation-failing, node-not-ready, cordoned, agent-skew, no-agent, label-malformed,
                   // resource-slice-malformed, driver-upgrade-failed
  Severity severity = Severity::kWarning;
  std::string subject;  // a node name, a GPU product, an NVIDIADriver or "fleet"
  std::string pool;     // the node's pool, when it is about one node
  std::string message;  // what is wrong, with the numbers
  std::string action;   // what to do about it
  std::vector<ShortCause> causes;  // below-capacity: every cause that applies, the main one first
  std::vector<std::string> nodes;  // the nodes concerned (skew: those off the most common value)
};

// ---- Driver upgrades (src/fleet/upgrades.cc; docs/fleet.md "Driver upgrades") ----

// Text from an NVIDIADriver's status or a Node's annotation is cut to this many bytes.
inline constexpr size_t kMaxUpgradeTextBytes = 1024;
// Entries kept of an NVIDIADriver's status lists (conflicts, ignoredFields, failedNodes; the
// controller writes at most 20 failed nodes).
inline constexpr size_t kMaxUpgradeListEntries = 256;
// NVIDIADrivers read at most (each is a pool; a cluster has a handful).
inline constexpr size_t kMaxNvidiaDrivers = 4096;
// `text` cut to `max_bytes` at a UTF-8 boundary, "..." appended when cut (a code point cut in two
// would make the JSON output invalid).
std::string CutText(std::string text, size_t max_bytes);

// One NVIDIADriver (nvidia.com/v1alpha1, NVIDIA's per-pool driver resource that gpunode's
// driver-upgrade controller reconciles) as fleet shows it: its target, and the status the
// controller writes on it.
struct NvidiaDriverInfo {
  std::string name;                // metadata.name
  std::string version;             // spec.version: the target ("" not set)
  bool paused = false;             // annotation gpunode.io/driver-upgrade.paused=true
  bool has_status = false;         // the controller has written a status
  std::string status_target;       // status.targetVersion (the version the status is about)
  std::string previous_version;    // status.previousVersion
  std::string state;               // status.state: ready | notReady
  std::string message;             // status.message (why notReady, when the resource is refused)
  std::string halted;              // status.halted: why no node starts ("" running)
  std::vector<std::string> conflicts;       // status.conflicts (pools overlapping, ...)
  std::vector<std::string> ignored_fields;  // status.ignoredFields
  std::map<std::string, std::string> failed_reasons;  // status.failedNodes: node -> reason
};
// One NVIDIADriver object. InvalidArgument naming `where`, the object and the field when it is not
// an object, has no metadata.name, or a field fleet reads has the wrong type; long strings are cut
// and long lists kept in part (the bounds above), never refused.
StatusOr<NvidiaDriverInfo> ParseNvidiaDriver(const nlohmann::json& obj, const std::string& where);

struct DriverListing {
  bool listed = false;  // NVIDIADrivers were read (from the cluster or the file); false: not known
  std::vector<NvidiaDriverInfo> drivers;  // sorted by name
  std::string source;                     // "nvidia.com/v1alpha1", "--from FILE"; "" when not listed
  std::vector<std::string> notes;         // why they were not read (403), for the report
};
// GET /apis/nvidia.com/v1alpha1/nvidiadrivers as ListNodes lists Nodes (pages, watch cache first).
// 404 (the CRD is not installed): listed = false, no note; 403: a note; other errors are the
// client's, ParseNvidiaDriver's, or a name twice, or more than kMaxNvidiaDrivers.
StatusOr<DriverListing> ListNvidiaDrivers(kube::Client& client, const ListNodesOptions& options = {});

// What fleet reads from a saved List: its Nodes (with their ResourceSlices counted, as
// ParseNodeList) and its NVIDIADrivers (listed when it holds any).
struct FleetInput {
  std::vector<FleetNode> nodes;
  DriverListing drivers;
};
// A NodeList or kubectl's `List` (kubectl get nodes,resourceslices,nvidiadrivers -o json): Nodes,
// ResourceSlices and NVIDIADriver items; any other kind is refused, an item is named in errors.
StatusOr<FleetInput> ParseFleetList(const nlohmann::json& list, const std::string& source);
StatusOr<FleetInput> ParseFleetListText(absl::string_view text, const std::string& source);

// One pool of the upgrade (one NVIDIADriver): its nodes by nvidia.com/gpu-driver-upgrade-state.
struct FailedNode {
  std::string node;
  std::string reason;  // status.failedNodes' reason, else the node's gpunode.io/driver-upgrade.reason
};
struct DriverUpgrade {
  std::string name;        // the NVIDIADriver
  bool listed = false;     // the NVIDIADriver was read; false: only named by nodes' owner labels
  std::string target;      // spec.version ("" unknown)
  std::string previous;    // status.previousVersion
  int total = 0;           // nodes labelled nvidia.com/gpu-operator.driver.owner=<name>
  int done = 0;            // upgrade-done
  int to_start = 0;        // upgrade-required
  int under_way = 0;       // cordon-required .. uncordon-required
  int failed = 0;          // upgrade-failed
  int no_state = 0;        // owned, no state label yet
  int rolled_back = 0;     // gpunode.io/driver-upgrade.rollback=true
  std::map<std::string, int> by_state;  // state label -> nodes ("none" for no label)
  std::vector<std::string> nodes;       // owned, sorted
  std::vector<FailedNode> failed_nodes;  // sorted by node
  std::vector<std::string> unknown_states;  // label values that are not NVIDIA's states
  bool paused = false;
  std::string halted;  // the status's
  std::string state, message;  // the status's
  std::vector<std::string> conflicts, ignored_fields;
  std::string note;    // one line for the table: paused, halted, conflicts, no status, ...
};
// The upgrade pools: one per listed NVIDIADriver, plus one per owner label naming an NVIDIADriver
// that was not read (listed = false). Sorted by name.
std::vector<DriverUpgrade> SummarizeDriverUpgrades(const std::vector<FleetNode>& nodes, const DriverListing& drivers);
// `driver-upgrade-failed` (error) for each pool with failed nodes, naming them.
void DriverUpgradeFindings(const std::vector<DriverUpgrade>& upgrades, std::vector<Finding>& findings);

struct FleetSummary {
  int nodes = 0;
  int gpu_nodes = 0;
  int cpu_nodes = 0;
  int ready_gpu_nodes = 0;
  int cordoned_gpu_nodes = 0;
  int64_t gpus = 0;         // physical
  int64_t allocatable = 0;  // nvidia.com/gpu
  int dra_nodes = 0;            // GPU nodes served through DRA
  int64_t dra_allocatable = 0;  // GPUs DRA can allocate (untainted, in ResourceSlices)
  int errors = 0, warnings = 0, infos = 0;
  std::vector<std::string> agent_versions;  // distinct, sorted
  std::vector<std::string> drivers;         // distinct, sorted by version
};

struct FleetReport {
  std::string source;  // "--from nodes.json", "https://api:6443 (kubeconfig ...)"
  FleetSummary summary;
  std::vector<Pool> pools;        // sorted by product, then driver
  std::vector<Finding> findings;  // errors first, then warnings, then infos; by subject within
  std::vector<FleetNode> nodes;   // every node, sorted by name
  std::map<std::string, std::string> pool_of;  // node name -> pool name (GPU nodes)
  std::string slices_source;       // "resource.k8s.io/v1", "--from FILE", "" (not read)
  std::vector<std::string> notes;  // what fleet could not read (ResourceSlices forbidden, ...)
  std::vector<DriverUpgrade> driver_upgrades;  // SummarizeDriverUpgrades: one per NVIDIADriver
  std::string drivers_source;      // "nvidia.com/v1alpha1", "--from FILE", "" (NVIDIADrivers not read)
};

// Pools and findings (docs/fleet.md lists each finding and what to do), and the driver upgrades
// of `drivers` (the NVIDIADrivers read, and the pools the nodes' owner labels name; notes and
// source go into the report).
FleetReport Analyze(std::vector<FleetNode> nodes, const std::string& source, const DriverListing& drivers = {});
// 0 when no finding is an error; 1 otherwise (a node below capacity, failing validation, with
// unhealthy GPUs, or NotReady), like doctor.
int ExitCodeOf(const FleetReport& report);

// `gpunode fleet compat --image REF`: one compat verdict per pool.
struct PoolCompat {
  std::string pool;
  int nodes = 0;
  compat::CompatReport report;
};
struct FleetCompatReport {
  std::string image;
  compat::WorkloadSpec workload;
  std::vector<PoolCompat> pools;  // the report's pool order
  compat::Verdict worst = compat::Verdict::kCompatible;
};
// InvalidArgument when `image` is not an image reference. An image the data set cannot map is not
// an error: every pool gets the verdict "unknown" with what would decide it.
StatusOr<FleetCompatReport> CheckPools(const compat::CompatData& data, const FleetReport& fleet,
                                       const std::string& image);
// The same for a workload already resolved — once per image, not per node (the CLI reads the
// image's own config through src/image and builds it with compat::WorkloadFromImageConfig).
FleetCompatReport CheckPools(const compat::CompatData& data, const FleetReport& fleet, const std::string& image,
                             compat::WorkloadSpec workload);
// 0 every pool runs the image (with or without caveats), 1 at least one pool cannot, 2 unknown
// somewhere and no pool incompatible (compat's exit codes).
int ExitCodeOf(const FleetCompatReport& report);

// The one upgrade order, shared by `fleet drain-plan` and the driver-upgrade controller
// (src/upgrade): lower goes first — nodes already out of service (0), failing validation (1), with
// unhealthy GPUs (2), short of allocatable (3), the rest (4) — with the sentence saying why.
std::pair<int, std::string> UpgradePriority(const FleetNode& n);

// Whether `driver` drives the node's GPUs, from the compat data's architectures (first and last
// driver branch of the GPU's architecture, by its compute capability labels or its product):
// nullopt when it does or nothing is known, else the sentence refusing it ("driver 590.44.01 does
// not drive NVIDIA-Tesla-V100 (Volta, compute 7.0): its last driver branch is 580").
std::optional<std::string> DriverRefusal(const compat::CompatData& data, const Version& driver, const FleetNode& n);

// `gpunode fleet drain-plan`.
struct DrainOptions {
  Version to_driver;
  int max_unavailable = 1;           // after resolving a percentage
  std::vector<std::string> pools;    // only these pools (empty: all)
  // When set, pools whose GPUs the target driver does not drive (DriverRefusal) are not planned:
  // a warning each, and `blocked` when no pool is left.
  const compat::CompatData* data = nullptr;
};
// --to-driver text: a driver version with 2 or 3 components ("580.95.05", "570.172"); InvalidArgument
// naming the flag otherwise.
StatusOr<Version> ParseDriverTarget(const std::string& text);
// --max-unavailable: "N" (>= 1) or "P%" of the GPU nodes (rounded down, at least 1), as
// Kubernetes reads maxUnavailable. InvalidArgument otherwise.
StatusOr<int> ParseMaxUnavailable(const std::string& text, int gpu_nodes);

struct PlannedNode {
  std::string name;
  std::string pool;
  std::string from_driver;  // "unknown" when not labelled
  std::string why_first;    // "already unavailable: NotReady", "validation failing (Reason)", ...
  bool already_unavailable = false;
};
struct Wave {
  int number = 0;
  std::string pool;  // "" for the first wave of nodes that are already unavailable (any pool)
  std::vector<PlannedNode> nodes;
  int unavailable_during = 0;  // nodes out of service while this wave runs (never > N)
};
struct DrainPlan {
  std::string to_driver;
  int max_unavailable = 0;
  int gpu_nodes = 0;
  std::vector<std::string> held;       // unavailable nodes not in the plan: they hold slots throughout
  std::vector<std::string> at_target;  // skipped: already at the target driver
  std::vector<Wave> waves;
  std::vector<std::string> warnings;   // downgrades, unknown drivers, pools not found
  std::string blocked;                 // non-empty: no plan is possible, and why
  int nodes_to_upgrade = 0;
};
// Waves, pool by pool, never more than `max_unavailable` nodes unavailable at once (nodes already
// NotReady or cordoned count against it); nodes already at the target are skipped; within a pool
// the unavailable, failing and unhealthy nodes go first. Assumes each wave is back in service
// (Ready, uncordoned, GpuStackReady=True) before the next starts. InvalidArgument when
// `options.pools` names a pool that does not exist.
StatusOr<DrainPlan> PlanDrain(const FleetReport& fleet, const DrainOptions& options);
// 0 a plan (possibly empty: everything at the target), 1 blocked.
int ExitCodeOf(const DrainPlan& plan);

}  // namespace gpunode::fleet

#endif  // GPUNODE_FLEET_FLEET_H_
