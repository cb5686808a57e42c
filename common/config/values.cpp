#include "config/values.h"

#include <algorithm>
#include <charconv>

namespace tellus::config {

namespace {

bool isLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

bool isHostChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-' ||
         c == '_';
}

}  // namespace

bool isSiteId(std::string_view s) {
  if (s.empty() || !isLowerAlnum(s.front())) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return isLowerAlnum(c) || c == '-'; });
}

bool isName(std::string_view s) { return tellus::isName(s); }

std::optional<HostPort> parseHostPort(std::string_view s) {
  const std::size_t colon = s.rfind(':');
  if (colon == std::string_view::npos) return std::nullopt;
  std::string_view host = s.substr(0, colon);
  const std::string_view port = s.substr(colon + 1);
  if (!host.empty() && host.front() == '[') {
    // "[::1]:80": the brackets keep the address's own colons apart from the port's.
    if (host.size() < 3 || host.back() != ']') return std::nullopt;
    host = host.substr(1, host.size() - 2);
    const bool v6chars = std::all_of(host.begin(), host.end(), [](char c) {
      return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || c == ':' || c == '.';
    });
    if (!v6chars || host.find(':') == std::string_view::npos) return std::nullopt;
  } else if (host.empty() || !std::all_of(host.begin(), host.end(), isHostChar)) {
    return std::nullopt;
  }
  if (port.empty() || port.size() > 5 || !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  unsigned value = 0;
  std::from_chars(port.data(), port.data() + port.size(), value);
  if (value > 65535) return std::nullopt;
  return HostPort{std::string(host), static_cast<uint16_t>(value)};
}

bool isZkChroot(std::string_view s) {
  if (s == "/") return true;
  if (s.empty() || s.front() != '/' || s.back() == '/') return false;
  return s.find("//") == std::string_view::npos;
}

bool isLogLevel(std::string_view s) {
  return s == "trace" || s == "debug" || s == "info" || s == "warn" || s == "error";
}

}  // namespace tellus::config
