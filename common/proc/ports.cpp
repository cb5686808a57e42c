#include "proc/ports.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

namespace tellus::proc {
namespace {

struct SocketGuard {
  int fd = -1;
  ~SocketGuard() {
    if (fd >= 0) ::close(fd);
  }
};

Result<sockaddr_in> loopbackAddress(const std::string& host, uint16_t port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  if (::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    return makeError(ErrorCode::kInvalidArgument, "'" + host + "' is not a numeric IPv4 address");
  }
  return addr;
}

}  // namespace

Result<std::vector<uint16_t>> findFreePorts(size_t count) {
  std::vector<SocketGuard> sockets(count);
  std::vector<uint16_t> ports;
  ports.reserve(count);
  for (auto& sock : sockets) {
    sock.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (sock.fd < 0) return makeError(ErrorCode::kInternal, std::string("socket(): ") + std::strerror(errno));
    auto addr = loopbackAddress("127.0.0.1", 0);
    if (::bind(sock.fd, reinterpret_cast<const sockaddr*>(&*addr), sizeof(sockaddr_in)) != 0) {
      return makeError(ErrorCode::kUnavailable, std::string("bind 127.0.0.1:0: ") + std::strerror(errno));
    }
    sockaddr_in bound{};
    socklen_t len = sizeof(bound);
    if (::getsockname(sock.fd, reinterpret_cast<sockaddr*>(&bound), &len) != 0) {
      return makeError(ErrorCode::kInternal, std::string("getsockname: ") + std::strerror(errno));
    }
    ports.push_back(ntohs(bound.sin_port));
  }
  return ports;
}

Result<uint16_t> findFreePort() {
  auto ports = findFreePorts(1);
  if (!ports) return ports.error();
  return ports->front();
}

Status waitForTcpPort(const std::string& host, uint16_t port, std::chrono::steady_clock::time_point deadline) {
  auto addr = loopbackAddress(host, port);
  if (!addr) return addr.error().prepend("waiting for port " + std::to_string(port));
  auto delay = std::chrono::milliseconds(2);
  std::string lastError = "not tried";
  while (true) {
    SocketGuard sock;
    sock.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (sock.fd < 0) return makeError(ErrorCode::kInternal, std::string("socket(): ") + std::strerror(errno));
    // A loopback connect either succeeds or is refused at once; it does not block.
    if (::connect(sock.fd, reinterpret_cast<const sockaddr*>(&*addr), sizeof(sockaddr_in)) == 0) {
      return Status::ok();
    }
    lastError = std::strerror(errno);
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      return makeError(ErrorCode::kDeadlineExceeded,
                       "nothing accepts connections on " + host + ":" + std::to_string(port) + " (" + lastError + ")");
    }
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(delay, deadline - now));
    delay = std::min(delay * 2, std::chrono::milliseconds(50));
  }
}

}  // namespace tellus::proc
