#include "src/dra/unix_socket.h"

#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>

#include "absl/strings/str_cat.h"

namespace gpunode::dra {
namespace {

constexpr size_t kMaxSocketPath = sizeof(sockaddr_un::sun_path) - 1;

const char* KindOf(mode_t mode) {
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device node";
  return "not a socket";
}

}  // namespace

std::optional<FileIdentity> SocketAt(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode)) return std::nullopt;
  return FileIdentity{st.st_dev, st.st_ino};
}

StatusOr<std::unique_ptr<UnixSocketServer>> UnixSocketServer::Serve(const std::string& path_in,
                                                                    const std::vector<grpc::Service*>& services,
                                                                    const SocketServerOptions& options) {
  std::error_code ec;
  const std::string path = std::filesystem::absolute(path_in, ec).lexically_normal().string();
  if (ec || path.empty()) return absl::InvalidArgumentError(absl::StrCat("socket path \"", path_in, "\" is not usable"));
  if (path.size() > kMaxSocketPath) {
    return absl::InvalidArgumentError(absl::StrCat("socket path ", path, " is ", path.size(),
                                                   " bytes long; a Unix socket path may have at most ",
                                                   kMaxSocketPath));
  }
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode) && !S_ISLNK(st.st_mode)) {
      return absl::FailedPreconditionError(
          absl::StrCat("serve on ", path, ": the path is ", KindOf(st.st_mode), ", not a socket; not removing it"));
    }
  } else if (errno != ENOENT) {
    return ErrnoToStatus(errno, "stat socket path", path);
  }
  const std::string dir = std::filesystem::path(path).parent_path().string();
  std::string tmpl = dir + "/.gpunode-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) return ErrnoToStatus(errno, "make a private folder in", dir);
  const std::string tmp_dir = tmpl;
  const std::string tmp_sock = tmp_dir + "/s";
  auto cleanup = [&] {
    ::unlink(tmp_sock.c_str());
    ::rmdir(tmp_dir.c_str());
  };
  if (tmp_sock.size() > kMaxSocketPath) {
    cleanup();
    return absl::InvalidArgumentError(absl::StrCat("socket folder ", dir, " has too long a path for a Unix socket"));
  }

  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix://" + tmp_sock, grpc::InsecureServerCredentials());
  for (grpc::Service* s : services) builder.RegisterService(s);
  builder.SetMaxReceiveMessageSize(options.max_receive_bytes);
  // The kubelet is the only client and calls one thing at a time. No ResourceQuota thread limit:
  // with one, BuildAndStart spun on a core for ever on the 16-core H200 machine (gRPC 1.51; the
  // device plugin's server, which has none, serves there) — the pollers below bound the threads.
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::NUM_CQS, 1);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MIN_POLLERS, 1);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, 2);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr) {
    cleanup();
    return absl::UnavailableError(absl::StrCat("serve on ", path, ": gRPC could not listen in ", dir));
  }
  auto fail = [&](Status why) {
    server->Shutdown(std::chrono::system_clock::now());
    server->Wait();
    cleanup();
    return why;
  };
  if (::chmod(tmp_sock.c_str(), 0600) != 0) return fail(ErrnoToStatus(errno, "chmod socket", tmp_sock));
  // Check that it answers before it is where anyone can see it (the kubelet dials at once).
  auto channel = grpc::CreateChannel("unix://" + tmp_sock, grpc::InsecureChannelCredentials());
  if (!channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(5))) {
    return fail(absl::UnavailableError(absl::StrCat("serve on ", path, ": the socket does not answer")));
  }
  if (::rename(tmp_sock.c_str(), path.c_str()) != 0) return fail(ErrnoToStatus(errno, "move socket into place at", path));
  ::rmdir(tmp_dir.c_str());
  std::optional<FileIdentity> id = SocketAt(path);
  if (!id) return fail(absl::UnavailableError(absl::StrCat("serve on ", path, ": the socket vanished at once")));
  return std::unique_ptr<UnixSocketServer>(new UnixSocketServer(path, std::move(server), *id));
}

UnixSocketServer::~UnixSocketServer() { Shutdown(); }

bool UnixSocketServer::Intact() const { return server_ != nullptr && SocketAt(path_) == id_; }

void UnixSocketServer::Shutdown() {
  if (server_ == nullptr) return;
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  server_->Wait();
  server_.reset();
  if (SocketAt(path_) == id_) ::unlink(path_.c_str());
}

}  // namespace gpunode::dra
