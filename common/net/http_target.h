#pragma once
// The request target of an HTTP GET ("/status?job=job-0000000001&limit=50"), checked at the
// boundary before any handler sees it. Pure; unit-tested (tests/unit/net/http_target_test.cpp).
//
// Accepted: an origin-form target of at most kMaxTargetBytes; a path of [A-Za-z0-9/._-] that
// starts with '/'; an optional query of at most kMaxQueryParams `key=value` pairs joined by
// '&', keys of 1-32 [a-z0-9_], values of at most kMaxQueryValueBytes after percent-decoding
// ('+' is a space) of printable ASCII only, no key twice. Anything else is kInvalidArgument
// with a one-line reason (the server answers 400 with it).

#include <cstddef>
#include <map>
#include <string>
#include <string_view>

#include "util/result.h"

namespace tellus::net {

inline constexpr std::size_t kMaxTargetBytes = 2048;
inline constexpr std::size_t kMaxQueryParams = 16;
inline constexpr std::size_t kMaxQueryValueBytes = 256;

struct HttpRequest {
  std::string path;                          // "/status"
  std::map<std::string, std::string> query;  // decoded
};

[[nodiscard]] Result<HttpRequest> parseHttpTarget(std::string_view target);

}  // namespace tellus::net
