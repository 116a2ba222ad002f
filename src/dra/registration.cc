#include "src/dra/k8s_names.h"
#include "src/dra/registration.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace gpunode::dra {
namespace {

// The folder of the node service's socket: made (mode 0750) when missing, and the kubelet's plugins
// folder above it (0755, as the kubelet makes it) when that is missing too (a plugin started before
// the kubelet, or outside Kubernetes); a symlink or a file there is refused rather than followed.
Status EnsurePluginDir(const std::string& dir) {
  int rc = ::mkdir(dir.c_str(), 0750);
  if (rc != 0 && errno == ENOENT) {
    const std::string parent = dir.substr(0, dir.rfind('/'));
    if (!parent.empty() && ::mkdir(parent.c_str(), 0755) != 0 && errno != EEXIST) {
      return ErrnoToStatus(errno, "make the kubelet's plugins folder", parent);
    }
    rc = ::mkdir(dir.c_str(), 0750);
  }
  if (rc != 0 && errno != EEXIST) return ErrnoToStatus(errno, "make plugin folder", dir);
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ELOOP || err == ENOTDIR) {
      return absl::FailedPreconditionError(
          absl::StrCat("plugin folder ", dir, " is not a folder (a symbolic link or a file); not using it"));
    }
    return ErrnoToStatus(err, "open plugin folder", dir);
  }
  ::close(fd);
  return absl::OkStatus();
}

bool IsDir(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace

RegistrationServer::RegistrationServer(std::string driver_name, std::string endpoint, std::vector<std::string> versions,
                                       Logger log, std::function<void(const RegistrationVerdict&)> on_verdict)
    : driver_name_(std::move(driver_name)),
      endpoint_(std::move(endpoint)),
      versions_(std::move(versions)),
      log_(std::move(log)),
      on_verdict_(std::move(on_verdict)) {}

grpc::Status RegistrationServer::GetInfo(grpc::ServerContext*, const pluginregistration::InfoRequest*,
                                         pluginregistration::PluginInfo* out) {
  out->set_type(kPluginType);
  out->set_name(driver_name_);
  out->set_endpoint(endpoint_);
  for (const auto& v : versions_) out->add_supported_versions(v);
  return grpc::Status::OK;
}

grpc::Status RegistrationServer::NotifyRegistrationStatus(grpc::ServerContext*,
                                                          const pluginregistration::RegistrationStatus* req,
                                                          pluginregistration::RegistrationStatusResponse*) {
  RegistrationVerdict v{req->plugin_registered(), req->error().substr(0, 4096)};
  {
    absl::MutexLock lock(&mu_);
    if (v.registered) ++registrations_;
    last_ = v;
  }
  if (v.registered) {
    log_(absl::StrCat("registered with the kubelet as DRA driver ", driver_name_, " (", endpoint_, ")"));
  } else {
    log_(absl::StrCat("the kubelet refused DRA driver ", driver_name_, ": ", v.error));
  }
  if (on_verdict_) on_verdict_(v);
  return grpc::Status::OK;
}

int RegistrationServer::registrations() const {
  absl::MutexLock lock(&mu_);
  return registrations_;
}

std::optional<RegistrationVerdict> RegistrationServer::last_verdict() const {
  absl::MutexLock lock(&mu_);
  return last_;
}

Status KubeletPlugin::CheckDriverName(const std::string& s) {
  const bool ok = !s.empty() && s.size() <= 63 && IsLowerAlnum(s.front()) && IsLowerAlnum(s.back()) &&
                  std::all_of(s.begin(), s.end(), [](char c) { return IsLowerAlnum(c) || c == '-' || c == '.'; });
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DRA driver name \"", s, "\" is not valid: at most 63 lower-case letters, digits, '-' and '.', "
        "starting and ending with a letter or digit (e.g. gpu.nvidia.com)"));
  }
  return absl::OkStatus();
}

KubeletPlugin::KubeletPlugin(KubeletPluginOptions options, ClaimPreparer* preparer, Logger log)
    : options_(std::move(options)),
      log_(log ? std::move(log) : Logger([](const std::string&) {})),
      plugin_dir_((std::filesystem::path(options_.plugins_dir) / options_.driver_name).string()),
      endpoint_((std::filesystem::path(plugin_dir_) / kNodeServiceSocketName).string()),
      registration_path_(
          (std::filesystem::path(options_.registrar_dir) / (options_.driver_name + "-reg.sock")).string()),
      node_service_(preparer, options_.node_service, log_),
      registration_(std::make_unique<RegistrationServer>(
          options_.driver_name, endpoint_, std::vector<std::string>{kServiceV1, kServiceV1Beta1}, log_,
          options_.on_verdict)),
      wake_fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}

KubeletPlugin::~KubeletPlugin() {
  Shutdown();
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void KubeletPlugin::Interrupt() {
  if (wake_fd_ >= 0) {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof one);
  }
}

void KubeletPlugin::Shutdown() {
  // Registration first: the kubelet deregisters the driver and stops calling before the node
  // service goes.
  if (registration_server_) registration_server_->Shutdown();
  registration_server_.reset();
  if (node_server_) node_server_->Shutdown();
  node_server_.reset();
}

Status KubeletPlugin::ServeNode() {
  GPUNODE_RETURN_IF_ERROR(EnsurePluginDir(plugin_dir_));
  node_server_.reset();
  GPUNODE_ASSIGN_OR_RETURN(node_server_,
                           UnixSocketServer::Serve(endpoint_, {node_service_.v1(), node_service_.v1beta1()},
                                                   options_.node_socket));
  return absl::OkStatus();
}

Status KubeletPlugin::ServeRegistration() {
  if (!IsDir(options_.registrar_dir)) {
    return absl::UnavailableError(absl::StrCat("the kubelet's plugin registry ", options_.registrar_dir,
                                               " is not there (is the kubelet running, and the folder mounted?)"));
  }
  registration_server_.reset();
  GPUNODE_ASSIGN_OR_RETURN(registration_server_, UnixSocketServer::Serve(registration_path_, {registration_.get()},
                                                                         options_.registration_socket));
  ++registration_serves_;
  return absl::OkStatus();
}

Status KubeletPlugin::Serve() {
  GPUNODE_RETURN_IF_ERROR(CheckDriverName(options_.driver_name));
  bool node_new = false;
  if (!node_server_ || !node_server_->Intact()) {
    GPUNODE_RETURN_IF_ERROR(ServeNode());
    node_new = true;
  }
  // A new node service socket means a new endpoint to dial: the kubelet learns it by registering
  // again, so the registration socket is made anew too.
  if (node_new || !registration_server_ || !registration_server_->Intact()) {
    GPUNODE_RETURN_IF_ERROR(ServeRegistration());
  }
  return absl::OkStatus();
}

Status KubeletPlugin::Run(const std::atomic<bool>& stop) {
  GPUNODE_RETURN_IF_ERROR(CheckDriverName(options_.driver_name));
  using Clock = std::chrono::steady_clock;
  const uint32_t mask = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF;
  int watch = -1;
  auto rewatch = [&] {
    if (watch >= 0) ::close(watch);
    watch = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (watch < 0) return;
    ::inotify_add_watch(watch, options_.registrar_dir.c_str(), mask);
    ::inotify_add_watch(watch, plugin_dir_.c_str(), mask);
  };
  std::string last_error;
  bool serving = false;
  while (!stop) {
    const bool intact = node_server_ && node_server_->Intact() && registration_server_ && registration_server_->Intact();
    if (!intact) {
      if (serving) {
        log_(absl::StrCat(!node_server_ || !node_server_->Intact() ? endpoint_ : registration_path_,
                          " was removed or replaced: serving again so the kubelet registers the driver again"));
      }
      Status st = Serve();
      serving = st.ok();
      if (!st.ok()) {
        if (absl::IsInvalidArgument(st) || absl::IsFailedPrecondition(st)) {
          Shutdown();
          if (watch >= 0) ::close(watch);
          return st;
        }
        if (std::string(st.message()) != last_error) log_(absl::StrCat(st.message(), "; retrying"));
        last_error = std::string(st.message());
      } else {
        last_error.clear();
        log_(absl::StrCat("serving DRA driver ", options_.driver_name, ": registration ", registration_path_,
                          ", node service ", endpoint_, " (", kServiceV1, ", ", kServiceV1Beta1, ")"));
      }
      rewatch();  // the folders may have been made anew
    }
    if (stop) break;
    pollfd fds[2] = {{watch, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    if (::poll(fds, 2, static_cast<int>(options_.watch_interval.count())) > 0) {
      char buf[4096];
      if (fds[1].revents & POLLIN) {
        while (::read(wake_fd_, buf, sizeof buf) > 0) {
        }
      }
      if (fds[0].revents & POLLIN) {
        // Let the folder settle (a wipe removes file after file): until 100 ms pass without a
        // change, at most a second.
        const auto settle_until = Clock::now() + std::chrono::seconds(1);
        do {
          while (::read(watch, buf, sizeof buf) > 0) {
          }
        } while (!stop && Clock::now() < settle_until && ::poll(&fds[0], 1, 100) > 0);
      }
    }
  }
  if (watch >= 0) ::close(watch);
  Shutdown();
  return absl::OkStatus();
}

}  // namespace gpunode::dra
