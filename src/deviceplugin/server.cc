#include "src/deviceplugin/server.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <map>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "src/base/backoff.h"
#include "src/base/clock.h"
#include "src/base/held_mutex.h"
#include "src/deviceplugin/allocate.h"

namespace gpunode::deviceplugin {

using devices::CountAllocatedPerGpu;
using devices::PreferredGpus;
using devices::PreferredShared;
using devices::SharedPolicy;
namespace {

grpc::Status ToGrpc(const Status& st) {
  grpc::StatusCode code = grpc::StatusCode::UNKNOWN;
  switch (st.code()) {
    case absl::StatusCode::kInvalidArgument: code = grpc::StatusCode::INVALID_ARGUMENT; break;
    case absl::StatusCode::kNotFound: code = grpc::StatusCode::NOT_FOUND; break;
    case absl::StatusCode::kFailedPrecondition: code = grpc::StatusCode::FAILED_PRECONDITION; break;
    case absl::StatusCode::kUnavailable: code = grpc::StatusCode::UNAVAILABLE; break;
    default: break;
  }
  return grpc::Status(code, std::string(st.message()));
}

// (inode, exists) of a path, to notice a socket that was deleted or re-created.
std::pair<ino_t, bool> Identity(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return {0, false};
  return {st.st_ino, true};
}

}  // namespace

ResourceServer::ResourceServer(Resource resource, PluginConfig config, std::vector<std::string> control_nodes,
                               std::shared_ptr<const LinkMatrix> links, Logger log)
    : resource_(std::move(resource)),
      config_(std::move(config)),
      control_nodes_(std::move(control_nodes)),
      links_(std::move(links)),
      log_(std::move(log)) {}

ResourceServer::~ResourceServer() { Shutdown(); }

Status ResourceServer::Serve(const std::string& dir) {
  Shutdown();
  {
    absl::MutexLock lock(&mu_);
    stopping_ = false;
  }
  socket_path_ = (std::filesystem::path(dir) / resource_.socket_name).string();
  if (::unlink(socket_path_.c_str()) != 0 && errno != ENOENT) {
    return ErrnoToStatus(errno, "remove stale socket", socket_path_);
  }
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix://" + socket_path_, grpc::InsecureServerCredentials());
  builder.RegisterService(this);
  // The kubelet is the only client and calls one thing at a time (plus one open stream): a
  // couple of pollers is plenty, and each idle thread costs memory.
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::NUM_CQS, 1);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MIN_POLLERS, 1);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, 2);
  server_ = builder.BuildAndStart();
  if (server_ == nullptr) {
    return absl::UnavailableError(absl::StrCat("serve ", resource_.name, " on ", socket_path_,
                                               ": gRPC could not listen (is ", dir, " there and writable?)"));
  }
  // Check that it answers before telling the kubelet about it (the kubelet dials back at once).
  auto channel = grpc::CreateChannel("unix://" + socket_path_, grpc::InsecureChannelCredentials());
  if (!channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(5))) {
    Shutdown();
    return absl::UnavailableError(absl::StrCat("serve ", resource_.name, ": ", socket_path_, " does not answer"));
  }
  return absl::OkStatus();
}

Status ResourceServer::Register(const std::string& kubelet_socket, std::chrono::milliseconds timeout) const {
  auto channel = grpc::CreateChannel("unix://" + kubelet_socket, grpc::InsecureChannelCredentials());
  const auto deadline = std::chrono::system_clock::now() + timeout;
  if (!channel->WaitForConnected(deadline)) {
    return absl::UnavailableError(absl::StrCat("the kubelet does not answer at ", kubelet_socket));
  }
  auto stub = v1beta1::Registration::NewStub(channel);
  v1beta1::RegisterRequest req;
  req.set_version(kApiVersion);
  req.set_endpoint(resource_.socket_name);
  req.set_resource_name(resource_.name);
  req.mutable_options()->set_get_preferred_allocation_available(true);
  v1beta1::Empty reply;
  grpc::ClientContext ctx;
  ctx.set_deadline(deadline + std::chrono::seconds(10));  // the kubelet dials us back (10 s) before it answers
  grpc::Status st = stub->Register(&ctx, req, &reply);
  if (!st.ok()) {
    return absl::FailedPreconditionError(absl::StrCat("register ", resource_.name, " at ", kubelet_socket,
                                                      ": the kubelet refused: ", st.error_message()));
  }
  return absl::OkStatus();
}

void ResourceServer::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (server_ != nullptr) {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    server_->Wait();
    server_.reset();
  }
}

bool ResourceServer::SetHealth(const std::string& uuid, bool healthy) {
  const bool ours = std::any_of(resource_.devices.begin(), resource_.devices.end(),
                                [&](const PluginDevice& d) { return d.uuid == uuid || d.gpu_uuid == uuid; });
  if (!ours) return false;
  {
    absl::MutexLock lock(&mu_);
    const bool changed = healthy ? unhealthy_.erase(uuid) > 0 : unhealthy_.insert(uuid).second;
    if (!changed) return true;
    ++version_;
  }
  cv_.notify_all();
  return true;
}

v1beta1::ListAndWatchResponse ResourceServer::DeviceList() const {
  v1beta1::ListAndWatchResponse out;
  absl::MutexLock lock(&mu_);
  for (const PluginDevice& d : resource_.devices) {
    v1beta1::Device* dev = out.add_devices();
    dev->set_id(d.id);
    const bool bad = unhealthy_.count(d.uuid) || unhealthy_.count(d.gpu_uuid);
    dev->set_health(bad ? kUnhealthy : kHealthy);
    if (d.numa_node) dev->mutable_topology()->add_nodes()->set_id(*d.numa_node);
  }
  return out;
}

grpc::Status ResourceServer::GetDevicePluginOptions(grpc::ServerContext*, const v1beta1::Empty*,
                                                    v1beta1::DevicePluginOptions* out) {
  out->set_pre_start_required(false);
  out->set_get_preferred_allocation_available(true);
  return grpc::Status::OK;
}

grpc::Status ResourceServer::ListAndWatch(grpc::ServerContext* ctx, const v1beta1::Empty*,
                                          grpc::ServerWriter<v1beta1::ListAndWatchResponse>* writer) {
  uint64_t sent = 0;
  mu_.Lock();
  while (!stopping_ && !ctx->IsCancelled()) {
    if (sent != version_) {
      sent = version_;
      mu_.Unlock();
      const v1beta1::ListAndWatchResponse list = DeviceList();
      const bool ok = writer->Write(list);
      mu_.Lock();
      if (!ok) break;
      continue;
    }
    // A change notifies cv_; the sync API tells of a kubelet that went away only through
    // IsCancelled, so look at that once a second.
    HeldMutex held(mu_);
    cv_.wait_for(held, std::chrono::seconds(1));
  }
  mu_.Unlock();
  return grpc::Status::OK;
}

grpc::Status ResourceServer::GetPreferredAllocation(grpc::ServerContext*,
                                                    const v1beta1::PreferredAllocationRequest* req,
                                                    v1beta1::PreferredAllocationResponse* out) {
  for (const auto& c : req->container_requests()) {
    const std::vector<std::string> available(c.available_deviceids().begin(), c.available_deviceids().end());
    const std::vector<std::string> must(c.must_include_deviceids().begin(), c.must_include_deviceids().end());
    StatusOr<std::vector<std::string>> pick = absl::InternalError("unset");
    const bool full_gpus = !resource_.shared && std::none_of(resource_.devices.begin(), resource_.devices.end(),
                                                             [](const PluginDevice& d) { return d.mig; });
    if (full_gpus && links_ != nullptr) {
      pick = PreferredGpus(*links_, available, must, c.allocation_size());
    } else {
      std::vector<std::string> all;
      std::map<std::string, std::string> gpu_of;
      for (const PluginDevice& d : resource_.devices) {
        all.push_back(d.id);
        gpu_of[d.base] = d.gpu_uuid;
      }
      pick = PreferredShared(available, must, c.allocation_size(), CountAllocatedPerGpu(all, available, gpu_of),
                             SharedPolicy::kDistributed, gpu_of);
    }
    if (!pick.ok()) {
      log_(absl::StrCat(resource_.name, ": GetPreferredAllocation: ", pick.status().message()));
      return ToGrpc(pick.status());
    }
    auto* r = out->add_container_responses();
    for (const std::string& id : *pick) r->add_deviceids(id);
  }
  return grpc::Status::OK;
}

grpc::Status ResourceServer::Allocate(grpc::ServerContext*, const v1beta1::AllocateRequest* req,
                                      v1beta1::AllocateResponse* out) {
  for (const auto& c : req->container_requests()) {
    const std::vector<std::string> ids(c.devices_ids().begin(), c.devices_ids().end());
    {
      absl::MutexLock lock(&mu_);
      for (const std::string& id : ids) {
        auto it = std::find_if(resource_.devices.begin(), resource_.devices.end(),
                               [&](const PluginDevice& d) { return d.id == id; });
        if (it != resource_.devices.end() && (unhealthy_.count(it->uuid) || unhealthy_.count(it->gpu_uuid))) {
          const std::string msg = absl::StrCat("device ", id, " of ", resource_.name,
                                               " is unhealthy; the kubelet should not have offered it");
          log_(absl::StrCat("Allocate: ", msg));
          return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, msg);
        }
      }
    }
    auto response = BuildAllocateResponse(resource_, config_, ids, control_nodes_);
    if (!response.ok()) {
      log_(absl::StrCat("Allocate: ", response.status().message()));
      return ToGrpc(response.status());
    }
    *out->add_container_responses() = *std::move(response);
    log_(absl::StrCat("Allocate ", resource_.name, ": ", absl::StrJoin(ids, ",")));
  }
  return grpc::Status::OK;
}

grpc::Status ResourceServer::PreStartContainer(grpc::ServerContext*, const v1beta1::PreStartContainerRequest*,
                                               v1beta1::PreStartContainerResponse*) {
  return grpc::Status::OK;
}

PluginManager::PluginManager(std::vector<Resource> resources, PluginConfig config,
                             std::vector<std::string> control_nodes, std::shared_ptr<const LinkMatrix> links,
                             ManagerOptions options, Logger log)
    : config_(std::move(config)),
      options_(std::move(options)),
      log_(std::move(log)),
      wake_fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
  if (options_.kubelet_socket.empty()) {
    options_.kubelet_socket = (std::filesystem::path(options_.plugin_dir) / kKubeletSocketName).string();
  }
  for (Resource& r : resources) {
    servers_.push_back(std::make_unique<ResourceServer>(std::move(r), config_, control_nodes, links, log_));
  }
}

PluginManager::~PluginManager() {
  ShutdownAll();
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void PluginManager::Interrupt() {
  if (wake_fd_ >= 0) {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof one);
  }
}

Status PluginManager::ServeAll() {
  for (auto& s : servers_) {
    GPUNODE_RETURN_IF_ERROR(s->Serve(options_.plugin_dir));
  }
  return absl::OkStatus();
}

void PluginManager::ShutdownAll() {
  for (auto& s : servers_) {
    const std::string path = s->socket_path();
    s->Shutdown();
    if (!path.empty()) ::unlink(path.c_str());
  }
}

bool PluginManager::SocketsIntact() const {
  for (const auto& s : servers_) {
    if (!Identity(s->socket_path()).second) return false;
  }
  return true;
}

void PluginManager::SetHealth(const std::string& uuid, bool healthy, const std::string& reason) {
  bool any = false;
  for (auto& s : servers_) any |= s->SetHealth(uuid, healthy);
  if (any) log_(absl::StrCat("GPU ", uuid, " is now ", healthy ? "Healthy" : "Unhealthy", ": ", reason));
}

Status PluginManager::Run(const std::atomic<bool>& stop) {
  Clock& clock = options_.clock != nullptr ? *options_.clock : SystemClock();
  bool registered = false;
  Backoff backoff({.initial = std::chrono::milliseconds(1000), .max = options_.max_backoff});
  Clock::TimePoint next_attempt = clock.Now();
  std::pair<ino_t, bool> kubelet_seen{0, false};
  bool said_absent = false;
  bool quick_retry_done = false;  // one immediate retry after the kubelet emptied our folder
  GPUNODE_RETURN_IF_ERROR(ServeAll());
  // inotify on the plugin folder (and the kubelet socket's, if elsewhere): sockets deleted or
  // made wake the loop at once; without inotify it looks every watch interval.
  const int watch = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  const uint32_t mask = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF;
  if (watch >= 0) {
    ::inotify_add_watch(watch, options_.plugin_dir.c_str(), mask);
    const std::string kdir = std::filesystem::path(options_.kubelet_socket).parent_path().string();
    if (!kdir.empty() && kdir != options_.plugin_dir) ::inotify_add_watch(watch, kdir.c_str(), mask);
  }
  bool waiting_for_kubelet = false;  // the last attempt found no kubelet.sock
  while (!stop) {
    const auto kubelet_now = Identity(options_.kubelet_socket);
    if (!registered && waiting_for_kubelet && kubelet_now.second) {
      // The kubelet's socket appeared (inotify woke us): register now, not after the backoff.
      waiting_for_kubelet = false;
      next_attempt = clock.Now();
    }
    if (registered) {
      // A kubelet restart deletes our sockets and makes a new kubelet.sock.
      const bool kubelet_new = kubelet_now.second && kubelet_now != kubelet_seen;
      if (!SocketsIntact() || kubelet_new || !kubelet_now.second) {
        const char* why = !SocketsIntact()         ? "our socket was removed (kubelet restart?)"
                          : !kubelet_now.second    ? "kubelet.sock is gone (kubelet stopped?)"
                                                   : "kubelet.sock was re-created (kubelet restart)";
        log_(absl::StrCat(why, ": serving again and re-registering"));
        registered = false;
        backoff.Reset();
        next_attempt = clock.Now();
        if (Status st = ServeAll(); !st.ok()) {
          log_(absl::StrCat("serve again: ", st.message()));
          next_attempt = clock.Now() + backoff.current();
        }
      }
    }
    if (!registered && clock.Now() >= next_attempt) {
      if (!SocketsIntact()) {
        if (Status st = ServeAll(); !st.ok()) log_(absl::StrCat("serve: ", st.message()));
      }
      Status st = absl::OkStatus();
      if (!kubelet_now.second) {
        st = absl::UnavailableError(absl::StrCat("no kubelet socket at ", options_.kubelet_socket));
        waiting_for_kubelet = true;
      }
      for (auto& s : servers_) {
        if (!st.ok()) break;
        st = s->Register(options_.kubelet_socket, std::chrono::seconds(5));
      }
      if (st.ok()) {
        registered = true;
        said_absent = false;
        quick_retry_done = false;
        kubelet_seen = Identity(options_.kubelet_socket);
        ++registrations_;
        std::vector<std::string> names;
        for (auto& s : servers_) {
          names.push_back(absl::StrCat(s->resource().name, " (", s->resource().devices.size(), " devices, ",
                                       s->resource().socket_name, ")"));
        }
        log_(absl::StrCat("registered with the kubelet: ", absl::StrJoin(names, ", ")));
        if (options_.on_registered) options_.on_registered();
      } else if (kubelet_now.second && !SocketsIntact() && !quick_retry_done) {
        quick_retry_done = true;
        // A starting kubelet empties the plugin folder: our socket went while we registered. Serve
        // again and register at once, not after the backoff (pods admitted meanwhile would be
        // refused for lack of devices).
        log_(absl::StrCat(st.message(), "; our socket was removed meanwhile (kubelet start): serving again"));
        next_attempt = clock.Now();
      } else {
        const bool at_max = backoff.at_max();
        const std::chrono::milliseconds pause = backoff.Next();
        if (!said_absent || at_max) {
          log_(absl::StrCat(st.message(), "; retrying in ", pause.count() / 1000.0, " s"));
          said_absent = true;
        }
        next_attempt = clock.Now() + pause;
      }
      ++attempts_;  // after next_attempt is set: a test advancing the clock then sees its effect
    }
    if (stop) break;
    auto wait = options_.watch_interval;
    if (!registered) {
      wait = std::min(wait, std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::max(Clock::TimePoint::duration::zero(), next_attempt - clock.Now())) +
                                std::chrono::milliseconds(1));
    }
    if (watch < 0 && wake_fd_ < 0) {
      clock.WaitFor(wait, std::stop_token());
      continue;
    }
    pollfd fds[2] = {{watch, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    if (::poll(fds, 2, static_cast<int>(wait.count())) > 0) {
      char buf[4096];
      if (fds[1].revents & POLLIN) {
        while (::read(wake_fd_, buf, sizeof buf) > 0) {
        }
      }
      if (fds[0].revents & POLLIN) {
        // The folder changed: let it settle first (a starting kubelet deletes every socket in it,
        // one after the other, then makes kubelet.sock), so that a socket we serve again is not
        // deleted by the same sweep. Until 100 ms pass without a change, at most a second.
        const auto settle_until = clock.Now() + std::chrono::seconds(1);
        do {
          while (::read(watch, buf, sizeof buf) > 0) {
          }
        } while (!stop && clock.Now() < settle_until && ::poll(&fds[0], 1, 100) > 0);
      }
    }
  }
  if (watch >= 0) ::close(watch);
  ShutdownAll();
  return absl::OkStatus();
}

}  // namespace gpunode::deviceplugin
