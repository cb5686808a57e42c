#include "net/endpoint.h"

#include <fmt/format.h>

#include <charconv>

namespace tellus::net {
namespace {

Error invalid(std::string_view text, std::string_view why) {
  return makeError(ErrorCode::kInvalidArgument, fmt::format("bad endpoint '{}': {} (expected host:port)", text, why));
}

}  // namespace

Result<Endpoint> Endpoint::parse(std::string_view text) {
  if (text.empty()) return invalid(text, "empty");
  std::string_view host;
  std::string_view portText;
  if (text.front() == '[') {
    const auto close = text.find(']');
    if (close == std::string_view::npos) return invalid(text, "missing ']' after IPv6 address");
    host = text.substr(1, close - 1);
    if (close + 1 >= text.size() || text[close + 1] != ':') return invalid(text, "missing ':port' after ']'");
    portText = text.substr(close + 2);
  } else {
    const auto colon = text.rfind(':');
    if (colon == std::string_view::npos) return invalid(text, "missing ':port'");
    host = text.substr(0, colon);
    if (host.find(':') != std::string_view::npos) return invalid(text, "IPv6 addresses must be written as [addr]:port");
    portText = text.substr(colon + 1);
  }
  if (host.empty()) return invalid(text, "empty host");
  for (char c : host) {
    if (c == ' ' || c == '\t' || c == '/' || c == '[' || c == ']') return invalid(text, "invalid character in host");
  }
  if (portText.empty()) return invalid(text, "empty port");
  unsigned port = 0;
  const auto [end, ec] = std::from_chars(portText.data(), portText.data() + portText.size(), port);
  if (ec == std::errc::result_out_of_range) return invalid(text, "port out of range 0-65535");
  if (ec != std::errc() || end != portText.data() + portText.size()) return invalid(text, "port is not a number");
  if (port > 65535) return invalid(text, "port out of range 0-65535");
  return Endpoint{std::string(host), static_cast<std::uint16_t>(port)};
}

std::string Endpoint::toString() const {
  if (host.find(':') != std::string::npos) return fmt::format("[{}]:{}", host, port);
  return fmt::format("{}:{}", host, port);
}

}  // namespace tellus::net
