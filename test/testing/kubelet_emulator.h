// A kubelet's device manager, as far as a device plugin can tell, over real gRPC: serves
// Registration on <dir>/kubelet.sock; on Register checks the version and resource name, dials the
// plugin back at <dir>/<endpoint>, calls GetDevicePluginOptions and keeps a ListAndWatch stream
// open, recording every list. Restart() does what a kubelet restart does: stop, delete every
// socket in the directory, serve a new kubelet.sock. Used by test/deviceplugin and by
// `kubelet_emulator` (test/tools) on the GPU machine, which has no kubelet.
#ifndef GPUNODE_TEST_TESTING_KUBELET_EMULATOR_H_
#define GPUNODE_TEST_TESTING_KUBELET_EMULATOR_H_

#include <grpcpp/grpcpp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "deviceplugin/v1beta1/api.grpc.pb.h"

namespace gpunode::testing {

class KubeletEmulator final : public v1beta1::Registration::Service {
 public:
  explicit KubeletEmulator(std::string dir) : dir_(std::move(dir)) {}
  ~KubeletEmulator() override { Stop(); }

  std::string socket() const { return dir_ + "/kubelet.sock"; }

  bool Start() {
    ::unlink(socket().c_str());
    grpc::ServerBuilder b;
    b.AddListeningPort("unix://" + socket(), grpc::InsecureServerCredentials());
    b.RegisterService(this);
    server_ = b.BuildAndStart();
    return server_ != nullptr;
  }

  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
      for (auto& [name, p] : plugins_) {
        if (p.ctx) p.ctx->TryCancel();
      }
    }
    for (auto& [name, p] : plugins_) {
      if (p.reader.joinable()) p.reader.join();
    }
    if (server_) {
      server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
      server_->Wait();
      server_.reset();
    }
    std::lock_guard<std::mutex> lock(mu_);
    plugins_.clear();
    stopping_ = false;
  }

  // Stop, remove every socket in the directory (as a starting kubelet does), serve again.
  bool Restart() {
    Stop();
    for (const auto& e : std::filesystem::directory_iterator(dir_)) {
      if (e.is_socket()) std::filesystem::remove(e.path());
    }
    return Start();
  }

  // While set, every Register is refused (as a kubelet that is not ready yet) and counted.
  void RefuseRegistrations(bool refuse) { refuse_ = refuse; }
  int refused() const { return refused_; }

  grpc::Status Register(grpc::ServerContext*, const v1beta1::RegisterRequest* req, v1beta1::Empty*) override {
    if (refuse_) {
      ++refused_;
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the kubelet's device manager is not ready");
    }
    if (req->version() != "v1beta1") {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "requested API version \"" + req->version() + "\" is not supported by kubelet");
    }
    if (req->resource_name().find('/') == std::string::npos) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "the ResourceName is invalid");
    }
    auto channel = grpc::CreateChannel("unix://" + dir_ + "/" + req->endpoint(), grpc::InsecureChannelCredentials());
    if (!channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10))) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "cannot dial the plugin at " + req->endpoint());
    }
    auto stub = v1beta1::DevicePlugin::NewStub(channel);
    v1beta1::DevicePluginOptions options;
    {
      grpc::ClientContext ctx;
      v1beta1::Empty empty;
      grpc::Status st = stub->GetDevicePluginOptions(&ctx, empty, &options);
      if (!st.ok()) return st;
    }
    std::unique_lock<std::mutex> lock(mu_);
    Plugin& old = plugins_[req->resource_name()];
    if (old.ctx) old.ctx->TryCancel();
    std::thread old_reader = std::move(old.reader);
    lock.unlock();
    if (old_reader.joinable()) old_reader.join();
    lock.lock();
    Plugin& p = plugins_[req->resource_name()];
    p.endpoint = req->endpoint();
    p.options = options;
    p.stub = std::move(stub);
    p.ctx = std::make_unique<grpc::ClientContext>();
    ++registrations_;
    registration_times_.push_back(std::chrono::steady_clock::now());
    const std::string name = req->resource_name();
    grpc::ClientContext* ctx = p.ctx.get();
    v1beta1::DevicePlugin::Stub* s = p.stub.get();
    p.reader = std::thread([this, name, ctx, s] {
      v1beta1::Empty empty;
      auto reader = s->ListAndWatch(ctx, empty);
      v1beta1::ListAndWatchResponse resp;
      while (reader->Read(&resp)) {
        std::lock_guard<std::mutex> l(mu_);
        lists_[name].push_back(resp);
        cv_.notify_all();
      }
      reader->Finish();
    });
    cv_.notify_all();
    return grpc::Status::OK;
  }

  // Waits until `pred(latest list of resource)` holds; false on timeout.
  bool WaitFor(const std::string& resource, const std::function<bool(const v1beta1::ListAndWatchResponse&)>& pred,
               std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] {
      auto it = lists_.find(resource);
      return it != lists_.end() && !it->second.empty() && pred(it->second.back());
    });
  }
  bool WaitForRegistrations(int n, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return registrations_ >= n; });
  }
  int registrations() const {
    std::lock_guard<std::mutex> lock(mu_);
    return registrations_;
  }
  std::chrono::steady_clock::time_point last_registration() const {
    std::lock_guard<std::mutex> lock(mu_);
    return registration_times_.empty() ? std::chrono::steady_clock::time_point{} : registration_times_.back();
  }
  std::vector<v1beta1::ListAndWatchResponse> Lists(const std::string& resource) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = lists_.find(resource);
    return it == lists_.end() ? std::vector<v1beta1::ListAndWatchResponse>{} : it->second;
  }
  // The resource names registered so far, sorted.
  std::vector<std::string> Resources() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::string> out;
    for (const auto& [name, p] : plugins_) out.push_back(name);
    return out;
  }
  v1beta1::DevicePluginOptions Options(const std::string& resource) const {
    std::lock_guard<std::mutex> lock(mu_);
    return plugins_.at(resource).options;
  }

  grpc::Status Allocate(const std::string& resource, const std::vector<std::string>& ids,
                        v1beta1::AllocateResponse* out) {
    v1beta1::AllocateRequest req;
    auto* c = req.add_container_requests();
    for (const auto& id : ids) c->add_devices_ids(id);
    grpc::ClientContext ctx;
    return Stub(resource)->Allocate(&ctx, req, out);
  }
  grpc::Status Preferred(const std::string& resource, const std::vector<std::string>& available,
                         const std::vector<std::string>& must, int size, std::vector<std::string>* out) {
    v1beta1::PreferredAllocationRequest req;
    auto* c = req.add_container_requests();
    for (const auto& id : available) c->add_available_deviceids(id);
    for (const auto& id : must) c->add_must_include_deviceids(id);
    c->set_allocation_size(size);
    v1beta1::PreferredAllocationResponse resp;
    grpc::ClientContext ctx;
    grpc::Status st = Stub(resource)->GetPreferredAllocation(&ctx, req, &resp);
    out->clear();
    if (st.ok() && resp.container_responses_size() > 0) {
      for (const auto& id : resp.container_responses(0).deviceids()) out->push_back(id);
    }
    return st;
  }

 private:
  struct Plugin {
    std::string endpoint;
    v1beta1::DevicePluginOptions options;
    std::unique_ptr<v1beta1::DevicePlugin::Stub> stub;
    std::unique_ptr<grpc::ClientContext> ctx;
    std::thread reader;
  };
  v1beta1::DevicePlugin::Stub* Stub(const std::string& resource) {
    std::lock_guard<std::mutex> lock(mu_);
    return plugins_.at(resource).stub.get();
  }

  std::string dir_;
  std::atomic<bool> refuse_{false};
  std::atomic<int> refused_{0};
  std::unique_ptr<grpc::Server> server_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::map<std::string, Plugin> plugins_;
  std::map<std::string, std::vector<v1beta1::ListAndWatchResponse>> lists_;
  int registrations_ = 0;
  std::vector<std::chrono::steady_clock::time_point> registration_times_;
};

}  // namespace gpunode::testing

#endif  // GPUNODE_TEST_TESTING_KUBELET_EMULATOR_H_
