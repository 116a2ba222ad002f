// gpunode's kubelet plugin for DRA, the part the kubelet talks to (facts: docs/dra.md, "How the
// kubelet talks to a DRA plugin"):
//  - RegistrationServer: pluginregistration.Registration on <registrar dir>/<driver>-reg.sock
//    (proto/pluginregistration/v1). The kubelet's plugin watcher sees the socket appear, calls
//    GetInfo (type "DRAPlugin", the driver name, the node service's socket as endpoint, the gRPC
//    services "v1.DRAPlugin" and "v1beta1.DRAPlugin"), then NotifyRegistrationStatus with its verdict.
//  - the node service (src/dra/node_service.h) on <plugins dir>/<driver>/dra.sock, both versions on
//    one socket, delegating to a ClaimPreparer.
//  - KubeletPlugin keeps both sockets there: the kubelet's watcher only acts on sockets that appear,
//    so when the registry folder is wiped (a kubelet restart on a fresh /var/lib/kubelet, an admin,
//    a node cleanup) or our socket is replaced, the socket is served again and the kubelet
//    registers it again. Both folders are watched with inotify (settled for 100 ms, as the device
//    plugin does), with a look every `watch_interval` as well (a folder removed and made again).
//    The device plugin's equivalent sits inside plugin::PluginManager::Run (a member bound to its
//    kubelet.sock protocol), so it is not shared; the safe socket creation is src/dra/unix_socket.h.
#ifndef GPUNODE_DRA_REGISTRATION_H_
#define GPUNODE_DRA_REGISTRATION_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "pluginregistration/v1/api.grpc.pb.h"
#include "src/base/status.h"
#include "src/dra/claim_preparer.h"
#include "src/dra/driver_name.h"
#include "src/dra/node_service.h"
#include "src/dra/unix_socket.h"

namespace gpunode::dra {

inline constexpr char kDefaultRegistrarDir[] = "/var/lib/kubelet/plugins_registry";
inline constexpr char kDefaultPluginsDir[] = "/var/lib/kubelet/plugins";
inline constexpr char kPluginType[] = "DRAPlugin";  // PluginInfo.type
inline constexpr char kNodeServiceSocketName[] = "dra.sock";

// The kubelet's verdict (NotifyRegistrationStatus).
struct RegistrationVerdict {
  bool registered = false;
  std::string error;
};

class RegistrationServer final : public pluginregistration::Registration::Service {
 public:
  RegistrationServer(std::string driver_name, std::string endpoint, std::vector<std::string> versions, Logger log,
                     std::function<void(const RegistrationVerdict&)> on_verdict);

  grpc::Status GetInfo(grpc::ServerContext*, const pluginregistration::InfoRequest*,
                       pluginregistration::PluginInfo* out) override;
  grpc::Status NotifyRegistrationStatus(grpc::ServerContext*, const pluginregistration::RegistrationStatus* req,
                                        pluginregistration::RegistrationStatusResponse*) override;

  int registrations() const ABSL_LOCKS_EXCLUDED(mu_);  // verdicts "registered"
  std::optional<RegistrationVerdict> last_verdict() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const std::string driver_name_;
  const std::string endpoint_;
  const std::vector<std::string> versions_;
  Logger log_;
  std::function<void(const RegistrationVerdict&)> on_verdict_;
  mutable absl::Mutex mu_;
  int registrations_ ABSL_GUARDED_BY(mu_) = 0;
  std::optional<RegistrationVerdict> last_ ABSL_GUARDED_BY(mu_);
};

struct KubeletPluginOptions {
  std::string driver_name = kDefaultDriverName;
  std::string registrar_dir = kDefaultRegistrarDir;  // NVIDIA's --kubelet-registrar-directory-path
  std::string plugins_dir = kDefaultPluginsDir;      // NVIDIA's --kubelet-plugins-directory-path
  // Longest wait between two looks at the sockets without an inotify event.
  std::chrono::milliseconds watch_interval{std::chrono::seconds(1)};
  SocketServerOptions node_socket;                                // the node service's bounds
  SocketServerOptions registration_socket{.max_receive_bytes = 64 << 10};
  NodeServiceOptions node_service;
  // Called (on a gRPC thread) with each verdict of the kubelet.
  std::function<void(const RegistrationVerdict&)> on_verdict;
};

// Serve, Run and Shutdown are called from one thread (Run's); Interrupt and the counters from any.
class KubeletPlugin {
 public:
  // `preparer` is not owned and must outlive the plugin.
  KubeletPlugin(KubeletPluginOptions options, ClaimPreparer* preparer, Logger log);
  ~KubeletPlugin();

  // The driver name is one the kubelet accepts (a DNS subdomain: it is also a file name here).
  static Status CheckDriverName(const std::string& name);

  // Serves whichever socket is not there (the node service's first: the kubelet dials it as soon
  // as it has the registration). Errors when a socket cannot be served now.
  Status Serve();
  // Serve, then keep both sockets there until `stop` is true (or Interrupt after setting it).
  // Errors only for what retrying cannot fix (a bad driver name, a path that is not a socket).
  Status Run(const std::atomic<bool>& stop);
  void Interrupt();
  void Shutdown();

  std::string registration_socket() const { return registration_path_; }
  std::string endpoint() const { return endpoint_; }
  int registrations() const { return registration_->registrations(); }
  int registration_serves() const { return registration_serves_; }  // how often reg.sock was made

 private:
  Status ServeNode();
  Status ServeRegistration();

  KubeletPluginOptions options_;
  Logger log_;
  const std::string plugin_dir_;         // <plugins dir>/<driver>
  const std::string endpoint_;           // <plugin_dir_>/dra.sock
  const std::string registration_path_;  // <registrar dir>/<driver>-reg.sock
  NodeService node_service_;
  std::unique_ptr<RegistrationServer> registration_;
  std::unique_ptr<UnixSocketServer> node_server_;
  std::unique_ptr<UnixSocketServer> registration_server_;
  std::atomic<int> registration_serves_{0};
  const int wake_fd_;
};

}  // namespace gpunode::dra

#endif  // GPUNODE_DRA_REGISTRATION_H_
