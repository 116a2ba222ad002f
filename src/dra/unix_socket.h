// A gRPC server on a Unix socket the kubelet dials (the DRA plugin's registration socket and its
// node service), created safely:
//  - the socket is bound inside a fresh private folder beside its final path (mkdtemp, mode 0700,
//    a dot name the kubelet's plugin watcher ignores), made mode 0600, checked to answer, then
//    renamed into place (so whoever sees it can use it at once): no
//    moment where another user could connect, and a stale socket or symlink at the path is
//    replaced atomically (rename never follows a symlink); anything else there (a file, a folder)
//    is refused, not removed;
//  - at shutdown the path is removed only if it still holds our socket (same device and inode), so
//    a successor's socket is never deleted (gRPC's own unlink hits the temporary path, long gone);
//  - Intact() says whether the path still holds our socket (the kubelet or an admin may have
//    wiped the folder).
#ifndef GPUNODE_DRA_UNIX_SOCKET_H_
#define GPUNODE_DRA_UNIX_SOCKET_H_

#include <grpcpp/grpcpp.h>
#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "src/base/status.h"

namespace gpunode::dra {

struct FileIdentity {
  dev_t dev = 0;
  ino_t ino = 0;
  bool operator==(const FileIdentity&) const = default;
};

// The identity of the socket at `path` (lstat: a symlink is not followed), or nullopt when there is
// nothing there or it is not a socket.
std::optional<FileIdentity> SocketAt(const std::string& path);

struct SocketServerOptions {
  int max_receive_bytes = 1 << 20;  // a larger request is refused by gRPC (RESOURCE_EXHAUSTED)
};

class UnixSocketServer {
 public:
  // Serves `services` (not owned; they must outlive the server) on `path`.
  static StatusOr<std::unique_ptr<UnixSocketServer>> Serve(const std::string& path,
                                                           const std::vector<grpc::Service*>& services,
                                                           const SocketServerOptions& options);
  ~UnixSocketServer();
  UnixSocketServer(const UnixSocketServer&) = delete;
  UnixSocketServer& operator=(const UnixSocketServer&) = delete;

  const std::string& path() const { return path_; }
  bool Intact() const;
  // Stops serving (calls in flight get 2 s) and removes the socket if it is still ours.
  void Shutdown();

 private:
  UnixSocketServer(std::string path, std::unique_ptr<grpc::Server> server, FileIdentity id)
      : path_(std::move(path)), server_(std::move(server)), id_(id) {}
  std::string path_;
  std::unique_ptr<grpc::Server> server_;
  FileIdentity id_;
};

}  // namespace gpunode::dra

#endif  // GPUNODE_DRA_UNIX_SOCKET_H_
