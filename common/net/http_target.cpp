#include "net/http_target.h"

#include <fmt/format.h>

namespace tellus::net {

namespace {

bool isPathChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '/' || c == '.' ||
         c == '_' || c == '-';
}

bool isKeyChar(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'; }

int hexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

Result<std::string> decodeValue(std::string_view key, std::string_view raw) {
  std::string out;
  out.reserve(raw.size());
  for (std::size_t i = 0; i < raw.size(); ++i) {
    char c = raw[i];
    if (c == '+') {
      c = ' ';
    } else if (c == '%') {
      const int hi = i + 2 < raw.size() ? hexValue(raw[i + 1]) : -1;
      const int lo = hi >= 0 ? hexValue(raw[i + 2]) : -1;
      if (hi < 0 || lo < 0) return makeError(ErrorCode::kInvalidArgument, fmt::format("query '{}': bad %-escape", key));
      c = static_cast<char>(hi * 16 + lo);
      i += 2;
    }
    if (c < 0x20 || c > 0x7e) {
      return makeError(ErrorCode::kInvalidArgument, fmt::format("query '{}': only printable ASCII is accepted", key));
    }
    out += c;
  }
  if (out.size() > kMaxQueryValueBytes) {
    return makeError(ErrorCode::kInvalidArgument,
                     fmt::format("query '{}': value longer than {} bytes", key, kMaxQueryValueBytes));
  }
  return out;
}

}  // namespace

Result<HttpRequest> parseHttpTarget(std::string_view target) {
  if (target.size() > kMaxTargetBytes) {
    return makeError(ErrorCode::kInvalidArgument, fmt::format("request target longer than {} bytes", kMaxTargetBytes));
  }
  if (target.empty() || target.front() != '/') {
    return makeError(ErrorCode::kInvalidArgument, "request target must be a path starting with '/'");
  }
  const std::size_t question = target.find('?');
  HttpRequest request;
  const std::string_view path = target.substr(0, question);
  for (char c : path) {
    if (!isPathChar(c)) return makeError(ErrorCode::kInvalidArgument, "request path has a character outside [A-Za-z0-9/._-]");
  }
  request.path = std::string(path);
  if (question == std::string_view::npos) return request;
  std::string_view query = target.substr(question + 1);
  while (!query.empty()) {
    const std::size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (pair.empty()) continue;  // "a=1&&b=2", a trailing '&'
    const std::size_t eq = pair.find('=');
    const std::string_view key = pair.substr(0, eq);
    if (key.empty() || key.size() > 32) return makeError(ErrorCode::kInvalidArgument, "query key must be 1-32 of [a-z0-9_]");
    for (char c : key) {
      if (!isKeyChar(c)) return makeError(ErrorCode::kInvalidArgument, "query key must be 1-32 of [a-z0-9_]");
    }
    const std::string_view raw = eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1);
    auto value = decodeValue(key, raw);
    if (!value) return value.error();
    if (request.query.size() >= kMaxQueryParams) {
      return makeError(ErrorCode::kInvalidArgument, fmt::format("more than {} query parameters", kMaxQueryParams));
    }
    if (!request.query.emplace(std::string(key), std::move(value).value()).second) {
      return makeError(ErrorCode::kInvalidArgument, fmt::format("query '{}' given twice", key));
    }
  }
  return request;
}

}  // namespace tellus::net
