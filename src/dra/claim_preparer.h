// What the kubelet's DRA node service asks of a driver, in our own types: prepare or unprepare a
// batch of ResourceClaims (every claim of one pod for this driver). The gRPC side
// (src/dra/node_service.h) checks and converts the kubelet's messages, both API versions, and calls
// a ClaimPreparer; the driver (which reads each claim's allocation from the API server, writes the
// CDI spec and keeps a checkpoint) implements it.
#ifndef GPUNODE_DRA_CLAIM_PREPARER_H_
#define GPUNODE_DRA_CLAIM_PREPARER_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "src/base/status.h"

namespace gpunode::dra {

// A ResourceClaim as the kubelet names it (its metadata; the allocation is in the API server).
struct ClaimRef {
  std::string uid;
  std::string ns;  // namespace
  std::string name;
  bool operator==(const ClaimRef&) const = default;
};

// One device handed to a claim: what the kubelet passes on to the container runtime.
struct PreparedDevice {
  std::vector<std::string> request_names;  // the claim's requests it serves; empty: all
  std::string pool_name;                   // required
  std::string device_name;                 // required
  std::vector<std::string> cdi_device_ids;  // fully qualified CDI device names
  std::optional<std::string> share_id;     // a share of a shared device (the v1 API only)
};

// Per claim UID: the devices, or why this claim failed (the kubelet shows the message in the pod's
// events and calls again).
using PrepareResults = std::map<std::string, StatusOr<std::vector<PreparedDevice>>>;
using UnprepareResults = std::map<std::string, Status>;

class ClaimPreparer {
 public:
  virtual ~ClaimPreparer() = default;
  // Both are called with well-formed claims (UIDs unique) and one call at a time. An error of the
  // whole call makes the kubelet retry every claim; a claim the answer lacks is reported to the
  // kubelet as failed. Both must be idempotent: the kubelet repeats calls after errors and restarts.
  virtual StatusOr<PrepareResults> Prepare(const std::vector<ClaimRef>& claims) = 0;
  virtual StatusOr<UnprepareResults> Unprepare(const std::vector<ClaimRef>& claims) = 0;
};

}  // namespace gpunode::dra

#endif  // GPUNODE_DRA_CLAIM_PREPARER_H_
