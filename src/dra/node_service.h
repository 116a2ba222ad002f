// The kubelet's DRA node service (proto/dra/v1 and v1beta1, "v1.DRAPlugin" and "v1beta1.DRAPlugin"):
// NodePrepareResources and NodeUnprepareResources, served by one implementation for both API
// versions. NodeService checks what the kubelet sent, converts it to our types, calls the
// driver's ClaimPreparer one call at a time (as the Go helper k8s.io/dynamic-resource-allocation
// does by default) and converts the answer back, one entry per claim of the request.
//
// Bounds (the socket is root's, but a request is still input): a request over
// SocketServerOptions::max_receive_bytes is refused by gRPC; more than `max_claims` claims, a claim
// whose UID, namespace or name is not the shape Kubernetes gives them, or one UID given twice with
// different names, refuse the whole call with INVALID_ARGUMENT naming claims[i]; a call that waits
// for the one before it longer than its deadline (the kubelet's is 45 s) gives DEADLINE_EXCEEDED.
#ifndef GPUNODE_DRA_NODE_SERVICE_H_
#define GPUNODE_DRA_NODE_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "src/base/status.h"
#include "src/dra/claim_preparer.h"

namespace gpunode::dra {

using Logger = std::function<void(const std::string&)>;

// The gRPC service names a plugin lists in PluginInfo.supported_versions, newest first.
inline constexpr char kServiceV1[] = "v1.DRAPlugin";
inline constexpr char kServiceV1Beta1[] = "v1beta1.DRAPlugin";

struct NodeServiceOptions {
  size_t max_claims = 256;  // per call: a pod's claims for one driver
  // The longest a call waits for the one before it when the kubelet set no deadline.
  std::chrono::milliseconds max_wait{std::chrono::seconds(60)};
};

// What one claim of a call came to, version-neutral.
struct ClaimAnswer {
  std::vector<PreparedDevice> devices;
  std::string error;  // non-empty: this claim failed
};

class NodeService {
 public:
  NodeService(ClaimPreparer* preparer, NodeServiceOptions options, Logger log);
  ~NodeService();

  // The claims of a request, checked; duplicates of one claim merged.
  static StatusOr<std::vector<ClaimRef>> CheckClaims(const std::vector<ClaimRef>& claims, size_t max_claims);

  // One call, for both API versions: the answer per claim UID, one for every claim of the request.
  grpc::Status Prepare(const grpc::ServerContext* ctx, const std::vector<ClaimRef>& claims,
                       std::map<std::string, ClaimAnswer>* out);
  grpc::Status Unprepare(const grpc::ServerContext* ctx, const std::vector<ClaimRef>& claims,
                         std::map<std::string, std::string>* out);

  // The gRPC services to register (owned by this object).
  grpc::Service* v1() const { return v1_.get(); }
  grpc::Service* v1beta1() const { return v1beta1_.get(); }

 private:
  // Takes the call lock, waiting no longer than the call's deadline.
  bool Lock(const grpc::ServerContext* ctx, std::unique_lock<std::timed_mutex>* lock);

  ClaimPreparer* preparer_;
  NodeServiceOptions options_;
  Logger log_;
  std::timed_mutex call_mu_;  // one call of the preparer at a time
  std::unique_ptr<grpc::Service> v1_;
  std::unique_ptr<grpc::Service> v1beta1_;
};

}  // namespace gpunode::dra

#endif  // GPUNODE_DRA_NODE_SERVICE_H_
