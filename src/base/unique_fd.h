// A file descriptor that is closed when its owner goes: the one owner type of the project (the
// host file system's atomic writes, the OCI hook's mount and BPF work).
#ifndef GPUNODE_BASE_UNIQUE_FD_H_
#define GPUNODE_BASE_UNIQUE_FD_H_

#include <unistd.h>

namespace gpunode {

class UniqueFd {
 public:
  explicit UniqueFd(int fd = -1) : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) reset(o.release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  int get() const { return fd_; }
  int release() {
    const int f = fd_;
    fd_ = -1;
    return f;
  }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_;
};

}  // namespace gpunode

#endif  // GPUNODE_BASE_UNIQUE_FD_H_
