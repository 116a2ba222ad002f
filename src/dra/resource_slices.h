// The node's ResourceSlices: what the DRA driver tells the scheduler about this node's devices.
//
// BuildResourceSlices() turns the device model (device_model.h) into ResourceSlice objects as JSON
// for resource.k8s.io/v1 (v1beta2 has the same shape; v1beta1 wraps each device's attributes,
// capacity and taints in `basic`): one pool per node, named after the node, with `nodeName` set;
// at most 128 devices per slice (64 when a device of the slice has taints, the API's limit), so a
// pool of more devices is split over slices named `<node>-<driver, dots as dashes>-<index>`.
//
// SlicePublisher keeps the API server's copy equal to the devices it is given: it lists this
// node's slices of this driver, and when anything differs writes all of them with the next pool
// generation (updates, creates) after deleting the ones no longer wanted; when nothing differs it
// writes nothing. It uses resource.k8s.io/v1 and falls back to v1beta2, then v1beta1, when the API
// server does not serve the version (404 on the list), remembering the one that answered. Every
// answer is read with its types checked (src/kube/json_fields.h); errors name the slice and field.
#ifndef GPUNODE_DRA_RESOURCE_SLICES_H_
#define GPUNODE_DRA_RESOURCE_SLICES_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "src/base/status.h"
#include "src/dra/device_model.h"
#include "src/kube/client.h"

namespace gpunode::dra {

// The API's limits on one ResourceSlice (k8s.io/api resource/v1 types.go).
inline constexpr size_t kMaxDevicesPerSlice = 128;
inline constexpr size_t kMaxDevicesPerSliceWithTaints = 64;

enum class SliceApi { kV1, kV1beta2, kV1beta1 };
// "resource.k8s.io/v1", "resource.k8s.io/v1beta2", "resource.k8s.io/v1beta1".
const char* ApiVersionOf(SliceApi api);
// "/apis/resource.k8s.io/v1/resourceslices" (cluster scoped).
std::string SlicesPath(SliceApi api);

struct SliceSpec {
  std::string driver = kDefaultDriverName;
  std::string node;            // nodeName and the pool's name
  int64_t generation = 1;      // the pool's generation, the same in every slice
  std::string node_uid;        // set: the slices are owned by their Node (deleted with it)
};

// "<node>-<driver with dots as dashes>-<index>": a DNS subdomain of at most 253 characters (a
// longer node name is cut and a hash of it added, so names stay distinct and stable).
std::string SliceName(const std::string& node, const std::string& driver, size_t index);

// Checks what the API will check: the driver a DNS subdomain of at most 63 characters, the node a
// DNS subdomain, every device name a DNS label and unique, at most 32 attributes and capacities
// and 16 taints per device, taint effects the API knows.
Status ValidateSlices(const SliceSpec& spec, const std::vector<DraDevice>& devices);

// One device as the API writes it in `api`.
nlohmann::json DeviceJson(const DraDevice& d, SliceApi api);

// The pool's slices, in order (a pool without devices is one slice without devices, as NVIDIA's
// driver publishes it).
std::vector<nlohmann::json> BuildResourceSlices(const std::vector<DraDevice>& devices, const SliceSpec& spec,
                                                SliceApi api = SliceApi::kV1);

class SlicePublisher {
 public:
  struct Options {
    std::string driver = kDefaultDriverName;
    std::string node;
    // Own the slices by the Node (its UID is read once): the garbage collector removes them with it.
    bool owned_by_node = true;
    // The most ResourceSlices one list may return (this node's and driver's, or any the server
    // sends anyway); more is ResourceExhausted.
    size_t max_slices = 256;
    // A write refused as a conflict (409: someone changed a slice) starts over from the list, at
    // most this many times more.
    int conflict_retries = 3;
    // How long the slices as this publisher last wrote or listed them (the API server's answers)
    // stand in for a list: a change is then one request, not a list and a write. Safe for writes
    // (each carries the resourceVersion it read: a slice changed meanwhile is a 409, deleted a 404,
    // and either starts over from a list); what it can miss is someone else's change to our slices
    // while ours do not change, repaired at the next change or list. 0: list every time.
    std::chrono::milliseconds reuse_written{std::chrono::minutes(10)};
    kube::CallOptions call;
  };

  // What the last Publish or RemoveAll wrote.
  struct Writes {
    int created = 0;
    int updated = 0;
    int deleted = 0;
    int total() const { return created + updated + deleted; }
  };

  SlicePublisher(kube::Client& client, Options options);
  ~SlicePublisher();
  SlicePublisher(SlicePublisher&&) noexcept;

  // Makes the API server's slices of this node and driver equal to `devices` (see above). Not
  // safe to call from two threads at once.
  Status Publish(const std::vector<DraDevice>& devices);
  // Deletes every slice of this node and driver (uninstall). An API server without DRA has none.
  Status RemoveAll();

  // The version the API server answered in (after a Publish or RemoveAll).
  std::optional<SliceApi> api() const { return api_; }
  // The pool's generation on the API server after the last Publish.
  int64_t generation() const { return generation_; }
  const Writes& last_writes() const { return writes_; }
  // The API server dropped the taints written (its DRADeviceTaints feature is off): they are left
  // out of comparisons from then on, so an unchanged pool is not written again and again.
  bool taints_dropped() const { return taints_dropped_; }

 private:
  struct Existing;
  Status Reconcile(const std::vector<DraDevice>& devices, bool* start_over);
  StatusOr<std::vector<Existing>> ListOurs();
  StatusOr<std::vector<Existing>> ListIn(SliceApi api);
  StatusOr<Existing> ReadSlice(const nlohmann::json& item, SliceApi api) const;
  Status EnsureNodeUid();
  Status DeleteSlice(const Existing& e);
  void NoteWritten(const nlohmann::json& sent, const nlohmann::json& answer, SliceApi api);

  kube::Client& client_;
  Options options_;
  std::optional<SliceApi> api_;
  std::string node_uid_;
  int64_t generation_ = 0;
  Writes writes_;
  bool taints_dropped_ = false;
  // The slices as last written or listed, and when (see Options::reuse_written).
  std::optional<std::vector<Existing>> known_;
  std::chrono::steady_clock::time_point known_at_{};
};

}  // namespace gpunode::dra

#endif  // GPUNODE_DRA_RESOURCE_SLICES_H_
