#pragma once
// A TCP destination or listen address as written in configs and on command lines.

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "util/result.h"

namespace tellus::net {

struct Endpoint {
  std::string host;  // name, IPv4 literal or IPv6 literal (without brackets)
  std::uint16_t port = 0;

  // "host:port", "1.2.3.4:80" or "[::1]:80". Port 0 is accepted (listen on any free port).
  // Errors are kInvalidArgument and quote the input.
  [[nodiscard]] static Result<Endpoint> parse(std::string_view text);

  // Inverse of parse(): IPv6 literals get brackets.
  std::string toString() const;

  bool operator==(const Endpoint&) const = default;
};

}  // namespace tellus::net

template <>
struct std::hash<tellus::net::Endpoint> {
  std::size_t operator()(const tellus::net::Endpoint& e) const noexcept {
    return std::hash<std::string>()(e.host) * 31 + e.port;
  }
};
