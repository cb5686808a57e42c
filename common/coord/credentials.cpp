#include "coord/credentials.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace tellus::coord {

namespace {

bool isUserChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
         c == '-';
}

bool isPrintableAscii(char c) { return c >= 0x20 && c < 0x7f; }

Error invalid(const std::string& file, std::string_view why) {
  return makeError(ErrorCode::kInvalidArgument, fmt::format("ZooKeeper credentials file '{}': {}", file, why));
}

}  // namespace

Result<DigestCredentials> parseDigestCredentials(std::string_view text, const std::string& file) {
  if (text.size() > kMaxCredentialsFileBytes) {
    return invalid(file, fmt::format("larger than {} bytes", kMaxCredentialsFileBytes));
  }
  // One trailing line end is what editors and `echo` add; anything else is a second line.
  if (text.ends_with("\r\n")) {
    text.remove_suffix(2);
  } else if (text.ends_with('\n')) {
    text.remove_suffix(1);
  }
  const std::size_t colon = text.find(':');
  if (text.empty() || colon == std::string_view::npos) {
    return invalid(file, "expected one line user:password");
  }
  const std::string_view user = text.substr(0, colon);
  const std::string_view password = text.substr(colon + 1);
  if (user.empty() || user.size() > kMaxCredentialsUserBytes) {
    return invalid(file, fmt::format("expected a user of 1 to {} bytes before the ':'", kMaxCredentialsUserBytes));
  }
  for (char c : user) {
    if (!isUserChar(c)) return invalid(file, "expected a user of [A-Za-z0-9._-] before the ':'");
  }
  if (password.empty()) return invalid(file, "expected a password after the ':'");
  for (char c : password) {
    // Says which rule, not which byte: the file is a secret.
    if (!isPrintableAscii(c)) {
      return invalid(file, "expected one line user:password: the password holds a control character "
                           "(a NUL, a second line, ...) or a non-ASCII byte");
    }
  }
  return DigestCredentials{std::string(user), std::string(password)};
}

Result<DigestCredentials> readDigestCredentials(const std::string& path, bool* groupOrOtherReadable) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) {
    const int err = errno;
    return makeError(err == ENOENT ? ErrorCode::kNotFound : ErrorCode::kInvalidArgument,
                     fmt::format("ZooKeeper credentials file '{}': {}", path, std::strerror(err)));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return invalid(path, "not a regular file");
  }
  if (groupOrOtherReadable != nullptr) *groupOrOtherReadable = (st.st_mode & (S_IRGRP | S_IROTH)) != 0;
  // One byte more than allowed tells a file that is too large from one that fits exactly.
  std::string text(kMaxCredentialsFileBytes + 1, '\0');
  std::size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return invalid(path, std::strerror(err));
    }
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  ::close(fd);
  text.resize(got);
  return parseDigestCredentials(text, path);
}

}  // namespace tellus::coord
