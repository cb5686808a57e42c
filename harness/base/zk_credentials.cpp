#include "harness/zk_credentials.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

#include <fmt/format.h>

namespace tellus::harness {

Result<coord::DigestCredentials> writeZkCredentials(const std::filesystem::path& path) {
  std::random_device random;  // the kernel's generator: nothing to seed, nothing to guess
  coord::DigestCredentials credentials{"tellus", ""};
  for (int i = 0; i < 4; ++i) credentials.password += fmt::format("{:08x}", random());
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    return makeError(ErrorCode::kInternal, fmt::format("cannot create {}: {}", path.string(), std::strerror(errno)));
  }
  const std::string line = credentials.authString() + "\n";
  const bool written = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  const int err = errno;
  ::close(fd);
  if (!written) {
    return makeError(ErrorCode::kInternal, fmt::format("cannot write {}: {}", path.string(), std::strerror(err)));
  }
  return credentials;
}

}  // namespace tellus::harness
