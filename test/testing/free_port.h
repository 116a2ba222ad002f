// A loopback TCP port that was free a moment ago (bind to port 0, read it back, close), for tests
// that start a real server on it.
#ifndef GPUNODE_TEST_TESTING_FREE_PORT_H_
#define GPUNODE_TEST_TESTING_FREE_PORT_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace gpunode::testing {

inline int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

}  // namespace gpunode::testing

#endif  // GPUNODE_TEST_TESTING_FREE_PORT_H_
