#include "src/dra/k8s_names.h"
#include "src/dra/node_service.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dra/v1/api.grpc.pb.h"
#include "dra/v1beta1/api.grpc.pb.h"
#include "src/base/terminal.h"

namespace gpunode::dra {
namespace {

namespace drav1 = ::k8s::io::kubelet::pkg::apis::dra::v1;
namespace drav1beta1 = ::k8s::io::kubelet::pkg::apis::dra::v1beta1;

// Foreign text in our messages: shown escaped and cut.
std::string Shown(const std::string& s) {
  std::string cut = s.size() > 80 ? s.substr(0, 80) + "..." : s;
  return absl::StrCat("\"", TerminalSafe(cut), "\"");
}

grpc::Status ToGrpc(const Status& st) {
  return grpc::Status(static_cast<grpc::StatusCode>(st.code()), std::string(st.message()));
}

std::string ClaimName(const ClaimRef& c) { return absl::StrCat(c.ns, "/", c.name, " (", c.uid, ")"); }

// The same API in two versions: the adapters convert the kubelet's messages to ours and back.
template <class Req>
std::vector<ClaimRef> ClaimsOf(const Req& req) {
  std::vector<ClaimRef> out;
  out.reserve(req.claims_size());
  for (const auto& c : req.claims()) out.push_back(ClaimRef{c.uid(), c.namespace_(), c.name()});
  return out;
}

template <class DeviceMsg>
void FillDevice(const PreparedDevice& d, DeviceMsg* m) {
  for (const auto& r : d.request_names) m->add_request_names(r);
  m->set_pool_name(d.pool_name);
  m->set_device_name(d.device_name);
  for (const auto& id : d.cdi_device_ids) m->add_cdi_device_ids(id);
  if constexpr (requires { m->set_share_id(std::string()); }) {
    if (d.share_id) m->set_share_id(*d.share_id);
  }
  // v1beta1 has no share_id: a share is handed over as the device itself, as the kubelet's own
  // v1beta1 conversion does.
}

template <class Pb>
class Adapter final : public Pb::DRAPlugin::Service {
 public:
  explicit Adapter(NodeService* service) : service_(service) {}

  grpc::Status NodePrepareResources(grpc::ServerContext* ctx, const typename Pb::NodePrepareResourcesRequest* req,
                                    typename Pb::NodePrepareResourcesResponse* resp) override {
    std::map<std::string, ClaimAnswer> answers;
    grpc::Status st = service_->Prepare(ctx, ClaimsOf(*req), &answers);
    if (!st.ok()) return st;
    auto* claims = resp->mutable_claims();
    for (const auto& [uid, a] : answers) {
      auto& m = (*claims)[uid];
      if (!a.error.empty()) {
        m.set_error(a.error);
        continue;
      }
      for (const auto& d : a.devices) FillDevice(d, m.add_devices());
    }
    return grpc::Status::OK;
  }

  grpc::Status NodeUnprepareResources(grpc::ServerContext* ctx, const typename Pb::NodeUnprepareResourcesRequest* req,
                                      typename Pb::NodeUnprepareResourcesResponse* resp) override {
    std::map<std::string, std::string> answers;
    grpc::Status st = service_->Unprepare(ctx, ClaimsOf(*req), &answers);
    if (!st.ok()) return st;
    auto* claims = resp->mutable_claims();
    for (const auto& [uid, error] : answers) (*claims)[uid].set_error(error);
    return grpc::Status::OK;
  }

 private:
  NodeService* service_;
};

struct V1 {
  using DRAPlugin = drav1::DRAPlugin;
  using NodePrepareResourcesRequest = drav1::NodePrepareResourcesRequest;
  using NodePrepareResourcesResponse = drav1::NodePrepareResourcesResponse;
  using NodeUnprepareResourcesRequest = drav1::NodeUnprepareResourcesRequest;
  using NodeUnprepareResourcesResponse = drav1::NodeUnprepareResourcesResponse;
};
struct V1Beta1 {
  using DRAPlugin = drav1beta1::DRAPlugin;
  using NodePrepareResourcesRequest = drav1beta1::NodePrepareResourcesRequest;
  using NodePrepareResourcesResponse = drav1beta1::NodePrepareResourcesResponse;
  using NodeUnprepareResourcesRequest = drav1beta1::NodeUnprepareResourcesRequest;
  using NodeUnprepareResourcesResponse = drav1beta1::NodeUnprepareResourcesResponse;
};

}  // namespace

NodeService::NodeService(ClaimPreparer* preparer, NodeServiceOptions options, Logger log)
    : preparer_(preparer),
      options_(options),
      log_(log ? std::move(log) : Logger([](const std::string&) {})),
      v1_(std::make_unique<Adapter<V1>>(this)),
      v1beta1_(std::make_unique<Adapter<V1Beta1>>(this)) {}

NodeService::~NodeService() = default;

StatusOr<std::vector<ClaimRef>> NodeService::CheckClaims(const std::vector<ClaimRef>& claims, size_t max_claims) {
  if (claims.size() > max_claims) {
    return absl::InvalidArgumentError(
        absl::StrCat("the request has ", claims.size(), " claims; at most ", max_claims, " are accepted in one call"));
  }
  std::vector<ClaimRef> out;
  std::map<std::string, size_t> by_uid;
  for (size_t i = 0; i < claims.size(); ++i) {
    const ClaimRef& c = claims[i];
    if (!IsUid(c.uid)) {
      return absl::InvalidArgumentError(absl::StrCat("claims[", i, "]: uid ", Shown(c.uid),
                                                     " is not a UID (1-128 letters, digits, dashes)"));
    }
    if (!IsDnsLabel(c.ns)) {
      return absl::InvalidArgumentError(absl::StrCat("claims[", i, "]: namespace ", Shown(c.ns),
                                                     " is not a namespace (a DNS label)"));
    }
    if (!IsDnsSubdomain(c.name)) {
      return absl::InvalidArgumentError(absl::StrCat("claims[", i, "]: name ", Shown(c.name),
                                                     " is not a ResourceClaim name (a DNS subdomain)"));
    }
    auto [it, fresh] = by_uid.emplace(c.uid, i);
    if (!fresh) {
      if (claims[it->second] == c) continue;  // the same claim twice: once is enough
      return absl::InvalidArgumentError(absl::StrCat("claims[", i, "]: uid ", c.uid, " is also claims[", it->second,
                                                     "] with another namespace or name"));
    }
    out.push_back(c);
  }
  return out;
}

bool NodeService::Lock(const grpc::ServerContext* ctx, std::unique_lock<std::timed_mutex>* lock) {
  auto wait = options_.max_wait;
  const auto deadline = ctx != nullptr ? ctx->deadline() : std::chrono::system_clock::time_point::max();
  if (deadline != std::chrono::system_clock::time_point::max()) {
    wait = std::min(wait, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::system_clock::now()));
  }
  *lock = std::unique_lock<std::timed_mutex>(call_mu_, std::defer_lock);
  return wait.count() > 0 && lock->try_lock_for(wait);
}

grpc::Status NodeService::Prepare(const grpc::ServerContext* ctx, const std::vector<ClaimRef>& raw,
                                  std::map<std::string, ClaimAnswer>* out) {
  out->clear();
  StatusOr<std::vector<ClaimRef>> claims = CheckClaims(raw, options_.max_claims);
  if (!claims.ok()) {
    log_(absl::StrCat("NodePrepareResources refused: ", claims.status().message()));
    return ToGrpc(Annotate(claims.status(), "NodePrepareResources"));
  }
  if (claims->empty()) return grpc::Status::OK;
  std::unique_lock<std::timed_mutex> lock;
  if (!Lock(ctx, &lock)) {
    return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                        "NodePrepareResources: the call before this one is still running");
  }
  StatusOr<PrepareResults> results = preparer_->Prepare(*claims);
  if (!results.ok()) {
    log_(absl::StrCat("NodePrepareResources failed: ", results.status().message()));
    return ToGrpc(Annotate(results.status(), "NodePrepareResources"));
  }
  std::vector<std::string> failed;
  for (const ClaimRef& c : *claims) {
    ClaimAnswer& a = (*out)[c.uid];
    auto it = results->find(c.uid);
    if (it == results->end()) {
      a.error = absl::StrCat("claim ", ClaimName(c), ": the driver gave no answer for it");
    } else if (!it->second.ok()) {
      a.error = std::string(it->second.status().message());
    } else {
      for (const PreparedDevice& d : *it->second) {
        if (d.pool_name.empty() || d.device_name.empty()) {
          a.error = absl::StrCat("claim ", ClaimName(c), ": the driver answered a device without pool or name");
          break;
        }
      }
      if (a.error.empty()) a.devices = *it->second;
    }
    if (!a.error.empty()) failed.push_back(absl::StrCat(ClaimName(c), ": ", a.error));
  }
  if (!failed.empty()) log_(absl::StrCat("NodePrepareResources: ", absl::StrJoin(failed, "; ")));
  return grpc::Status::OK;
}

grpc::Status NodeService::Unprepare(const grpc::ServerContext* ctx, const std::vector<ClaimRef>& raw,
                                    std::map<std::string, std::string>* out) {
  out->clear();
  StatusOr<std::vector<ClaimRef>> claims = CheckClaims(raw, options_.max_claims);
  if (!claims.ok()) {
    log_(absl::StrCat("NodeUnprepareResources refused: ", claims.status().message()));
    return ToGrpc(Annotate(claims.status(), "NodeUnprepareResources"));
  }
  if (claims->empty()) return grpc::Status::OK;
  std::unique_lock<std::timed_mutex> lock;
  if (!Lock(ctx, &lock)) {
    return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                        "NodeUnprepareResources: the call before this one is still running");
  }
  StatusOr<UnprepareResults> results = preparer_->Unprepare(*claims);
  if (!results.ok()) {
    log_(absl::StrCat("NodeUnprepareResources failed: ", results.status().message()));
    return ToGrpc(Annotate(results.status(), "NodeUnprepareResources"));
  }
  std::vector<std::string> failed;
  for (const ClaimRef& c : *claims) {
    std::string& error = (*out)[c.uid];
    auto it = results->find(c.uid);
    if (it == results->end()) {
      error = absl::StrCat("claim ", ClaimName(c), ": the driver gave no answer for it");
    } else if (!it->second.ok()) {
      error = std::string(it->second.message());
    }
    if (!error.empty()) failed.push_back(absl::StrCat(ClaimName(c), ": ", error));
  }
  if (!failed.empty()) log_(absl::StrCat("NodeUnprepareResources: ", absl::StrJoin(failed, "; ")));
  return grpc::Status::OK;
}

}  // namespace gpunode::dra
