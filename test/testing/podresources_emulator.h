// The kubelet's pod-resources API v1 over real gRPC on a unix socket: List answers a settable
// response (or UNAVAILABLE, as a kubelet that is going away), Get answers one pod of it,
// GetAllocatableResources the devices it lists. Counts List calls. Used by test/exporter and by
// `podresources_emulator` (test/tools) for end-to-end runs of the exporter without a kubelet.
#ifndef GPUNODE_TEST_TESTING_PODRESOURCES_EMULATOR_H_
#define GPUNODE_TEST_TESTING_PODRESOURCES_EMULATOR_H_

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "podresources/v1/api.grpc.pb.h"

namespace gpunode::testing {

class PodResourcesEmulator final : public v1::PodResourcesLister::Service {
 public:
  explicit PodResourcesEmulator(std::string socket) : socket_(std::move(socket)) {}
  ~PodResourcesEmulator() override { Stop(); }

  const std::string& socket() const { return socket_; }

  // Serves on the socket (a stale file there is removed first).
  bool Start() {
    ::unlink(socket_.c_str());
    grpc::ServerBuilder b;
    b.AddListeningPort("unix://" + socket_, grpc::InsecureServerCredentials());
    b.RegisterService(this);
    b.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::NUM_CQS, 1);
    b.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MIN_POLLERS, 1);
    b.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, 2);
    b.SetMaxSendMessageSize(-1);
    server_ = b.BuildAndStart();
    return server_ != nullptr;
  }

  // Stops serving and removes the socket file (as a kubelet that exits).
  void Stop() {
    if (server_) {
      server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
      server_->Wait();
      server_.reset();
      ::unlink(socket_.c_str());
    }
  }

  void SetResponse(v1::ListPodResourcesResponse resp) {
    std::lock_guard<std::mutex> lock(mu_);
    resp_ = std::move(resp);
  }
  v1::ListPodResourcesResponse response() const {
    std::lock_guard<std::mutex> lock(mu_);
    return resp_;
  }
  // true: List answers UNAVAILABLE.
  void SetUnavailable(bool unavailable) { unavailable_ = unavailable; }
  int list_calls() const { return list_calls_; }
  // List waits this long before answering (ends early when the caller cancels).
  void SetDelay(std::chrono::milliseconds delay) { delay_ms_ = delay.count(); }

  // Adds one container using `devices` of `resource` to `resp` (its pod is created when new).
  static void AddContainer(v1::ListPodResourcesResponse* resp, const std::string& ns, const std::string& pod,
                           const std::string& container, const std::string& resource,
                           const std::vector<std::string>& devices) {
    v1::PodResources* p = nullptr;
    for (auto& existing : *resp->mutable_pod_resources()) {
      if (existing.name() == pod && existing.namespace_() == ns) p = &existing;
    }
    if (p == nullptr) {
      p = resp->add_pod_resources();
      p->set_name(pod);
      p->set_namespace_(ns);
    }
    v1::ContainerResources* c = nullptr;
    for (auto& existing : *p->mutable_containers()) {
      if (existing.name() == container) c = &existing;
    }
    if (c == nullptr) {
      c = p->add_containers();
      c->set_name(container);
    }
    auto* d = c->add_devices();
    d->set_resource_name(resource);
    for (const auto& id : devices) d->add_device_ids(id);
  }

  grpc::Status List(grpc::ServerContext* ctx, const v1::ListPodResourcesRequest*,
                    v1::ListPodResourcesResponse* out) override {
    ++list_calls_;
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(delay_ms_.load());
    while (std::chrono::steady_clock::now() < until) {
      if (ctx->IsCancelled()) return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled by the caller");
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (unavailable_) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "emulated kubelet unavailable");
    std::lock_guard<std::mutex> lock(mu_);
    *out = resp_;
    return grpc::Status::OK;
  }

  grpc::Status Get(grpc::ServerContext*, const v1::GetPodResourcesRequest* req,
                   v1::GetPodResourcesResponse* out) override {
    if (unavailable_) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "emulated kubelet unavailable");
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& p : resp_.pod_resources()) {
      if (p.name() == req->pod_name() && p.namespace_() == req->pod_namespace()) {
        *out->mutable_pod_resources() = p;
        return grpc::Status::OK;
      }
    }
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        "pod " + req->pod_name() + " in namespace " + req->pod_namespace() + " not found");
  }

  grpc::Status GetAllocatableResources(grpc::ServerContext*, const v1::AllocatableResourcesRequest*,
                                       v1::AllocatableResourcesResponse* out) override {
    if (unavailable_) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "emulated kubelet unavailable");
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& p : resp_.pod_resources()) {
      for (const auto& c : p.containers()) {
        for (const auto& d : c.devices()) *out->add_devices() = d;
      }
    }
    return grpc::Status::OK;
  }

 private:
  std::string socket_;
  std::unique_ptr<grpc::Server> server_;
  mutable std::mutex mu_;
  v1::ListPodResourcesResponse resp_;
  std::atomic<bool> unavailable_{false};
  std::atomic<int> list_calls_{0};
  std::atomic<long long> delay_ms_{0};
};

}  // namespace gpunode::testing

#endif  // GPUNODE_TEST_TESTING_PODRESOURCES_EMULATOR_H_
