// The kubelet device plugin, over real gRPC on Unix sockets (proto/deviceplugin/v1beta1):
//  - ResourceServer serves one resource ("nvidia.com/gpu", "nvidia.com/mig-1g.10gb", ...) on its
//    socket in the kubelet's device-plugin directory: GetDevicePluginOptions, ListAndWatch (the
//    full list on every change), GetPreferredAllocation (topology-aware for full GPUs, from a link
//    matrix built once), Allocate (src/deviceplugin/allocate.h), PreStartContainer (empty).
//  - PluginManager starts one server per resource, registers each at kubelet.sock, and keeps them
//    registered: when the kubelet restarts (it deletes every socket in the directory and creates
//    kubelet.sock anew) the servers serve again and re-register within a second or two; when the
//    kubelet is absent it retries with backoff and says so. Health changes from HealthMonitor reach
//    every server whose devices live on that GPU.
#ifndef GPUNODE_DEVICEPLUGIN_SERVER_H_
#define GPUNODE_DEVICEPLUGIN_SERVER_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "deviceplugin/v1beta1/api.grpc.pb.h"
#include "src/base/clock.h"
#include "src/base/status.h"
#include "src/devices/config.h"
#include "src/devices/devices.h"
#include "src/devices/topology.h"

namespace gpunode::deviceplugin {

using devices::LinkMatrix;
using devices::PluginConfig;
using devices::PluginDevice;
using devices::Resource;

inline constexpr char kDefaultPluginDir[] = "/var/lib/kubelet/device-plugins";
inline constexpr char kKubeletSocketName[] = "kubelet.sock";
inline constexpr char kApiVersion[] = "v1beta1";

using Logger = std::function<void(const std::string&)>;

class ResourceServer final : public v1beta1::DevicePlugin::Service {
 public:
  ResourceServer(Resource resource, PluginConfig config, std::vector<std::string> control_nodes,
                 std::shared_ptr<const LinkMatrix> links, Logger log);
  ~ResourceServer() override;

  const Resource& resource() const { return resource_; }
  // Listens on <dir>/<socket_name> (a stale file there is removed first) and checks that it answers.
  Status Serve(const std::string& dir);
  // Register at the kubelet (blocking dial with `timeout`).
  Status Register(const std::string& kubelet_socket, std::chrono::milliseconds timeout) const;
  void Shutdown();
  bool serving() const { return server_ != nullptr; }
  std::string socket_path() const { return socket_path_; }

  // Marks every device on GPU `gpu_uuid` (or the MIG device with that UUID) healthy or not, and
  // wakes every ListAndWatch stream. Returns whether this resource has such a device.
  bool SetHealth(const std::string& uuid, bool healthy);
  v1beta1::ListAndWatchResponse DeviceList() const ABSL_LOCKS_EXCLUDED(mu_);

  grpc::Status GetDevicePluginOptions(grpc::ServerContext*, const v1beta1::Empty*,
                                      v1beta1::DevicePluginOptions* out) override;
  grpc::Status ListAndWatch(grpc::ServerContext* ctx, const v1beta1::Empty*,
                            grpc::ServerWriter<v1beta1::ListAndWatchResponse>* writer) override;
  grpc::Status GetPreferredAllocation(grpc::ServerContext*, const v1beta1::PreferredAllocationRequest* req,
                                      v1beta1::PreferredAllocationResponse* out) override;
  grpc::Status Allocate(grpc::ServerContext*, const v1beta1::AllocateRequest* req,
                        v1beta1::AllocateResponse* out) override;
  grpc::Status PreStartContainer(grpc::ServerContext*, const v1beta1::PreStartContainerRequest*,
                                 v1beta1::PreStartContainerResponse*) override;

 private:
  Resource resource_;
  PluginConfig config_;
  std::vector<std::string> control_nodes_;
  std::shared_ptr<const LinkMatrix> links_;
  Logger log_;
  std::unique_ptr<grpc::Server> server_;
  std::string socket_path_;

  mutable absl::Mutex mu_;
  std::condition_variable_any cv_;  // version_ or stopping_ changed (a timed wait: see server.cc)
  uint64_t version_ ABSL_GUARDED_BY(mu_) = 1;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::set<std::string> unhealthy_ ABSL_GUARDED_BY(mu_);  // GPU or MIG UUIDs
};

struct ManagerOptions {
  std::string plugin_dir = kDefaultPluginDir;
  std::string kubelet_socket;  // empty: <plugin_dir>/kubelet.sock
  // The folder is watched with inotify (a kubelet restart deletes our sockets and makes a new
  // kubelet.sock: seen at once); this is the longest wait between two looks without an event.
  std::chrono::milliseconds watch_interval{1000};
  // Registration retries: 1 s doubling up to max_backoff (src/base/backoff.h), on `clock`.
  std::chrono::milliseconds max_backoff{std::chrono::seconds(30)};
  Clock* clock = &SystemClock();  // tests: a FakeClock
  // Called (on Run's thread) after each successful registration.
  std::function<void()> on_registered;
};

class PluginManager {
 public:
  PluginManager(std::vector<Resource> resources, PluginConfig config, std::vector<std::string> control_nodes,
                std::shared_ptr<const LinkMatrix> links, ManagerOptions options, Logger log);
  ~PluginManager();

  // Serves every resource, then keeps them registered until `stop` becomes true. Returns an error
  // only when a socket cannot be served at all (the directory is missing or not writable).
  Status Run(const std::atomic<bool>& stop);
  // Health from the monitor (any thread).
  void SetHealth(const std::string& uuid, bool healthy, const std::string& reason);
  // Number of successful registrations so far (tests, logs).
  int registrations() const { return registrations_; }
  // Number of registration attempts so far, failed ones included (tests).
  int attempts() const { return attempts_; }
  // Wakes Run at once (after setting its `stop`, so it need not wait for the watch interval).
  void Interrupt();

 private:
  Status ServeAll();
  void ShutdownAll();
  bool SocketsIntact() const;

  std::vector<std::unique_ptr<ResourceServer>> servers_;
  PluginConfig config_;
  ManagerOptions options_;
  Logger log_;
  std::atomic<int> registrations_{0};
  std::atomic<int> attempts_{0};
  const int wake_fd_;  // eventfd for Interrupt (-1 if none could be made)
};

}  // namespace gpunode::deviceplugin

#endif  // GPUNODE_DEVICEPLUGIN_SERVER_H_
