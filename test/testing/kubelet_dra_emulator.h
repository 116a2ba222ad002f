// A kubelet's DRA side, as far as a DRA plugin can tell, over real gRPC: the plugin watcher on a
// registrar folder (inotify; names starting with '.' and non-sockets ignored, as the kubelet's
// pluginwatcher does) dials each new socket, calls GetInfo (1 s), checks the type ("DRAPlugin") and
// picks the gRPC service as the kubelet does (the first of the plugin's supported_versions the
// kubelet knows; an empty or foreign list is refused), answers NotifyRegistrationStatus, and dials
// the plugin's endpoint. A socket removed deregisters the plugin. Prepare/Unprepare call
// NodePrepareResources/NodeUnprepareResources with given claims through the chosen service (or a
// given one), with the kubelet's 45 s deadline; KubeletVerdict reads an answer as the kubelet's
// DRA manager does. Wipe() does what a kubelet restart on a fresh /var/lib/kubelet does to the
// registry: stop, remove every socket (or the folder), start again. Used by test/dra.
// Modelled on test/testing/kubelet_emulator.h (the device plugin's).
#ifndef GPUNODE_TEST_TESTING_KUBELET_DRA_EMULATOR_H_
#define GPUNODE_TEST_TESTING_KUBELET_DRA_EMULATOR_H_

#include <grpcpp/grpcpp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "dra/v1/api.grpc.pb.h"
#include "dra/v1beta1/api.grpc.pb.h"
#include "pluginregistration/v1/api.grpc.pb.h"

namespace gpunode::testing {

// A claim as the kubelet would pass it, plus the names of its device requests (which the plugin
// reads from the API server; the emulator uses them to check the answer).
struct DraClaim {
  std::string uid;
  std::string ns;
  std::string name;
  std::vector<std::string> requests;
};

struct DraDevice {
  std::vector<std::string> request_names;
  std::string pool_name;
  std::string device_name;
  std::vector<std::string> cdi_device_ids;
  std::optional<std::string> share_id;
};

struct DraClaimResult {
  std::vector<DraDevice> devices;
  std::string error;
};

struct DraPluginInfo {
  std::string socket;    // the registration socket
  std::string type;
  std::string name;      // driver
  std::string endpoint;  // the node service's socket
  std::vector<std::string> versions;
  std::string service;   // chosen: "v1.DRAPlugin" or "v1beta1.DRAPlugin"
};

class KubeletDraEmulator {
 public:
  static constexpr char kV1[] = "v1.DRAPlugin";
  static constexpr char kV1Beta1[] = "v1beta1.DRAPlugin";

  explicit KubeletDraEmulator(std::string registrar_dir,
                              std::vector<std::string> kubelet_services = {kV1, kV1Beta1})
      : dir_(std::move(registrar_dir)), kubelet_services_(std::move(kubelet_services)) {}
  ~KubeletDraEmulator() { Stop(); }

  bool Start() {
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);  // the kubelet makes it (0755)
    inotify_ = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    wake_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (inotify_ < 0 || wake_ < 0) return false;
    if (::inotify_add_watch(inotify_, dir_.c_str(), IN_CREATE | IN_MOVED_TO | IN_DELETE | IN_MOVED_FROM) < 0) return false;
    watcher_ = std::thread([this] { Watch(); });
    return true;
  }

  void Stop() {
    if (watcher_.joinable()) {
      const uint64_t one = 1;
      [[maybe_unused]] ssize_t n = ::write(wake_, &one, sizeof one);
      watcher_.join();
    }
    if (inotify_ >= 0) ::close(inotify_);
    if (wake_ >= 0) ::close(wake_);
    inotify_ = wake_ = -1;
    std::lock_guard<std::mutex> lock(mu_);
    plugins_.clear();
  }

  // A kubelet restart that wipes the registry: every socket (or, with remove_folder, the folder).
  bool Wipe(bool remove_folder) {
    Stop();
    std::error_code ec;
    if (remove_folder) {
      std::filesystem::remove_all(dir_, ec);
    } else {
      for (const auto& e : std::filesystem::directory_iterator(dir_, ec)) {
        if (e.is_socket()) std::filesystem::remove(e.path(), ec);
      }
    }
    return Start();
  }

  bool WaitForRegistrations(int n, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return registrations_ >= n; });
  }
  bool WaitForErrors(size_t n, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return errors_.size() >= n; });
  }
  int registrations() const {
    std::lock_guard<std::mutex> lock(mu_);
    return registrations_;
  }
  // What the kubelet would log for each registration that failed.
  std::vector<std::string> errors() const {
    std::lock_guard<std::mutex> lock(mu_);
    return errors_;
  }
  std::optional<DraPluginInfo> Plugin(const std::string& driver) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = plugins_.find(driver);
    if (it == plugins_.end()) return std::nullopt;
    return it->second.info;
  }

  // Talks to `driver`'s node service at `endpoint` without a registration (a plugin that a real
  // kubelet registered: a tool reaching it beside that kubelet). OK when the socket answers in 10 s.
  bool Connect(const std::string& driver, const std::string& endpoint, const std::string& service = kV1) {
    auto channel = grpc::CreateChannel("unix:" + endpoint, grpc::InsecureChannelCredentials());
    if (!channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10))) return false;
    DraPluginInfo p;
    p.socket = endpoint;
    p.type = "DRAPlugin";
    p.name = driver;
    p.endpoint = endpoint;
    p.service = service;
    p.versions = {service};
    std::lock_guard<std::mutex> lock(mu_);
    plugins_[driver] = Registered{p, channel, 0};
    return true;
  }

  // NodePrepareResources through `service` (default: the one chosen at registration).
  grpc::Status Prepare(const std::string& driver, const std::vector<DraClaim>& claims,
                       std::map<std::string, DraClaimResult>* out, std::string service = "",
                       std::chrono::milliseconds timeout = std::chrono::seconds(45)) {
    out->clear();
    auto ch = Channel(driver, &service);
    if (!ch) return grpc::Status(grpc::StatusCode::NOT_FOUND, "no plugin registered for driver " + driver);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + timeout);
    if (service == kV1) {
      namespace pb = ::k8s::io::kubelet::pkg::apis::dra::v1;
      pb::NodePrepareResourcesRequest req;
      pb::NodePrepareResourcesResponse resp;
      FillClaims(claims, &req);
      grpc::Status st = pb::DRAPlugin::NewStub(ch)->NodePrepareResources(&ctx, req, &resp);
      ReadPrepare(resp, out);
      return st;
    }
    namespace pb = ::k8s::io::kubelet::pkg::apis::dra::v1beta1;
    pb::NodePrepareResourcesRequest req;
    pb::NodePrepareResourcesResponse resp;
    FillClaims(claims, &req);
    grpc::Status st = pb::DRAPlugin::NewStub(ch)->NodePrepareResources(&ctx, req, &resp);
    ReadPrepare(resp, out);
    return st;
  }

  // NodeUnprepareResources; `errors` gets one entry per claim UID the plugin answered.
  grpc::Status Unprepare(const std::string& driver, const std::vector<DraClaim>& claims,
                         std::map<std::string, std::string>* errors, std::string service = "",
                         std::chrono::milliseconds timeout = std::chrono::seconds(45)) {
    errors->clear();
    auto ch = Channel(driver, &service);
    if (!ch) return grpc::Status(grpc::StatusCode::NOT_FOUND, "no plugin registered for driver " + driver);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + timeout);
    auto run = [&](auto stub, auto req, auto resp) {
      FillClaims(claims, &req);
      grpc::Status st = stub->NodeUnprepareResources(&ctx, req, &resp);
      for (const auto& [uid, r] : resp.claims()) (*errors)[uid] = r.error();
      return st;
    };
    if (service == kV1) {
      namespace pb = ::k8s::io::kubelet::pkg::apis::dra::v1;
      return run(pb::DRAPlugin::NewStub(ch), pb::NodeUnprepareResourcesRequest(), pb::NodeUnprepareResourcesResponse());
    }
    namespace pb = ::k8s::io::kubelet::pkg::apis::dra::v1beta1;
    return run(pb::DRAPlugin::NewStub(ch), pb::NodeUnprepareResourcesRequest(), pb::NodeUnprepareResourcesResponse());
  }

  // The kubelet's reading of a prepare answer (pkg/kubelet/cm/dra/manager.go): "" when every claim
  // was prepared, else the error it reports (in the pod's events). The last check is the one the
  // kubelet makes per container: a device for a request the claim does not have reaches no one.
  static std::string KubeletVerdict(const std::vector<DraClaim>& claims,
                                    const std::map<std::string, DraClaimResult>& answers) {
    std::map<std::string, const DraClaim*> by_uid;
    for (const auto& c : claims) by_uid[c.uid] = &c;
    for (const auto& [uid, r] : answers) {
      auto it = by_uid.find(uid);
      if (it == by_uid.end()) return "NodePrepareResources returned result for unknown claim UID " + uid;
      if (!r.error.empty()) return "NodePrepareResources failed for ResourceClaim " + it->second->name + ": " + r.error;
      for (const auto& d : r.devices) {
        for (const auto& rn : d.request_names) {
          const auto& reqs = it->second->requests;
          if (std::find(reqs.begin(), reqs.end(), rn) == reqs.end()) {
            return "device " + d.device_name + " answers request " + rn + " that claim " + it->second->name + " lacks";
          }
        }
      }
    }
    if (answers.size() < by_uid.size()) {
      return "NodePrepareResources skipped " + std::to_string(by_uid.size() - answers.size()) + " ResourceClaims";
    }
    return "";
  }

 private:
  struct Registered {
    DraPluginInfo info;
    std::shared_ptr<grpc::Channel> channel;
    ino_t inode = 0;  // of the registration socket
  };

  template <class Req>
  static void FillClaims(const std::vector<DraClaim>& claims, Req* req) {
    for (const auto& c : claims) {
      auto* m = req->add_claims();
      m->set_uid(c.uid);
      m->set_namespace_(c.ns);
      m->set_name(c.name);
    }
  }
  template <class Resp>
  static void ReadPrepare(const Resp& resp, std::map<std::string, DraClaimResult>* out) {
    for (const auto& [uid, r] : resp.claims()) {
      DraClaimResult& o = (*out)[uid];
      o.error = r.error();
      for (const auto& d : r.devices()) {
        DraDevice dev;
        dev.request_names.assign(d.request_names().begin(), d.request_names().end());
        dev.pool_name = d.pool_name();
        dev.device_name = d.device_name();
        dev.cdi_device_ids.assign(d.cdi_device_ids().begin(), d.cdi_device_ids().end());
        if constexpr (requires { d.has_share_id(); }) {
          if (d.has_share_id()) dev.share_id = d.share_id();
        }
        o.devices.push_back(std::move(dev));
      }
    }
  }

  std::shared_ptr<grpc::Channel> Channel(const std::string& driver, std::string* service) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = plugins_.find(driver);
    if (it == plugins_.end()) return nullptr;
    if (service->empty()) *service = it->second.info.service;
    return it->second.channel;
  }

  void Fail(const std::string& why) {
    std::lock_guard<std::mutex> lock(mu_);
    errors_.push_back(why);
    cv_.notify_all();
  }

  static ino_t SocketInode(const std::string& path) {
    struct stat st;
    return ::lstat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode) ? st.st_ino : 0;
  }
  static bool IsSocket(const std::string& path) { return SocketInode(path) != 0; }

  // The kubelet's operation_generator: dial (10 s), GetInfo (1 s), validate, notify (5 s). A socket
  // already registered (seen by the first scan and by an event) is registered once, as the
  // kubelet's desired-state cache does.
  void Register(const std::string& socket) {
    const ino_t inode = SocketInode(socket);
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const auto& [name, r] : plugins_) {
        if (r.info.socket == socket && r.inode == inode) return;
      }
    }
    auto ch = grpc::CreateChannel("unix://" + socket, grpc::InsecureChannelCredentials());
    if (!ch->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10))) {
      return Fail("RegisterPlugin error -- dial failed at socket " + socket);
    }
    auto stub = pluginregistration::Registration::NewStub(ch);
    pluginregistration::PluginInfo info;
    {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(1));
      grpc::Status st = stub->GetInfo(&ctx, pluginregistration::InfoRequest(), &info);
      if (!st.ok()) return Fail("RegisterPlugin error -- GetInfo at socket " + socket + ": " + st.error_message());
    }
    auto notify = [&](bool ok, const std::string& error) {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
      pluginregistration::RegistrationStatus status;
      status.set_plugin_registered(ok);
      status.set_error(error);
      pluginregistration::RegistrationStatusResponse r;
      return stub->NotifyRegistrationStatus(&ctx, status, &r);
    };
    if (info.type() != "DRAPlugin") {
      const std::string why = "RegisterPlugin error -- no handler registered for plugin type: " + info.type() +
                              " at socket " + socket;
      notify(false, why);
      return Fail(why);
    }
    DraPluginInfo p;
    p.socket = socket;
    p.type = info.type();
    p.name = info.name();
    p.endpoint = info.endpoint().empty() ? socket : info.endpoint();
    p.versions.assign(info.supported_versions().begin(), info.supported_versions().end());
    for (const auto& v : p.versions) {
      if (std::find(kubelet_services_.begin(), kubelet_services_.end(), v) != kubelet_services_.end()) {
        p.service = v;
        break;
      }
    }
    if (p.service.empty()) {
      const std::string why = p.versions.empty()
          ? "RegisterPlugin error -- plugin validation failed with err: empty list of supported gRPC services"
          : "RegisterPlugin error -- plugin validation failed with err: none of services supported by the plugin "
            "are supported by the kubelet";
      notify(false, why);
      return Fail(why);
    }
    auto channel = grpc::CreateChannel("unix:" + p.endpoint, grpc::InsecureChannelCredentials());
    {
      std::lock_guard<std::mutex> lock(mu_);
      plugins_[p.name] = Registered{p, channel, inode};
    }
    grpc::Status st = notify(true, "");
    std::lock_guard<std::mutex> lock(mu_);
    if (!st.ok()) {
      plugins_.erase(p.name);
      errors_.push_back("RegisterPlugin error -- failed to send registration status at socket " + socket);
    } else {
      ++registrations_;
    }
    cv_.notify_all();
  }

  void Deregister(const std::string& socket) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = plugins_.begin(); it != plugins_.end(); ++it) {
      if (it->second.info.socket == socket) {
        plugins_.erase(it);
        return;
      }
    }
  }

  void Watch() {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir_, ec)) {
      const std::string name = e.path().filename().string();
      if (!name.empty() && name[0] != '.' && IsSocket(e.path().string())) Register(e.path().string());
    }
    alignas(inotify_event) char buf[4096];
    while (true) {
      pollfd fds[2] = {{inotify_, POLLIN, 0}, {wake_, POLLIN, 0}};
      if (::poll(fds, 2, -1) < 0) continue;
      if (fds[1].revents & POLLIN) return;
      const ssize_t n = ::read(inotify_, buf, sizeof buf);
      for (ssize_t off = 0; n > 0 && off < n;) {
        const auto* ev = reinterpret_cast<const inotify_event*>(buf + off);
        off += sizeof(inotify_event) + ev->len;
        const std::string name = ev->len > 0 ? std::string(ev->name) : std::string();
        if (name.empty() || name[0] == '.') continue;
        const std::string path = dir_ + "/" + name;
        if (ev->mask & (IN_DELETE | IN_MOVED_FROM)) Deregister(path);
        if ((ev->mask & (IN_CREATE | IN_MOVED_TO)) && IsSocket(path)) Register(path);
      }
    }
  }

  const std::string dir_;
  const std::vector<std::string> kubelet_services_;
  int inotify_ = -1;
  int wake_ = -1;
  std::thread watcher_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Registered> plugins_;  // by driver name
  int registrations_ = 0;
  std::vector<std::string> errors_;
};

}  // namespace gpunode::testing

#endif  // GPUNODE_TEST_TESTING_KUBELET_DRA_EMULATOR_H_
