// parseHttpTarget: what the HTTP server accepts from the network before any handler runs.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <string>

#include "net/http_target.h"

namespace tellus::net {
namespace {

TEST_CASE("a path without a query", "[unit][net]") {
  auto r = parseHttpTarget("/status");
  REQUIRE(r.isOk());
  CHECK(r->path == "/status");
  CHECK(r->query.empty());
  auto root = parseHttpTarget("/");
  REQUIRE(root.isOk());
  CHECK(root->path == "/");
}

TEST_CASE("query parameters are split and percent-decoded", "[unit][net]") {
  auto r = parseHttpTarget("/status?job=job-0000000001&offset=200&name=a%20b+c%2Fd&flag&&");
  REQUIRE(r.isOk());
  CHECK(r->path == "/status");
  CHECK(r->query.size() == 4);
  CHECK(r->query.at("job") == "job-0000000001");
  CHECK(r->query.at("offset") == "200");
  CHECK(r->query.at("name") == "a b c/d");
  CHECK(r->query.at("flag").empty());
  auto empty = parseHttpTarget("/status?");
  REQUIRE(empty.isOk());
  CHECK(empty->query.empty());
}

TEST_CASE("bad targets are refused with a reason", "[unit][net]") {
  const char* bad[] = {
      "",                         // no path
      "status",                   // not origin-form
      "http://x/status",          // absolute-form
      "/st%61tus",                // escapes in the path
      "/a b",                     // space
      "/status?Job=1",            // upper-case key
      "/status?=1",               // empty key
      "/status?job=1&job=2",      // twice
      "/status?job=%zz",          // bad escape
      "/status?job=%4",           // truncated escape
      "/status?job=%0a",          // control character
      "/status?job=%c3%a9",       // non-ASCII
      "/status?abcdefghijabcdefghijabcdefghijabc=1",  // 33-byte key
  };
  for (const char* target : bad) {
    INFO(target);
    auto r = parseHttpTarget(target);
    REQUIRE_FALSE(r.isOk());
    CHECK(r.error().code == ErrorCode::kInvalidArgument);
    CHECK_FALSE(r.message().empty());
  }
}

TEST_CASE("sizes are bounded", "[unit][net]") {
  CHECK_FALSE(parseHttpTarget(fmt::format("/{}", std::string(kMaxTargetBytes, 'a'))).isOk());
  CHECK(parseHttpTarget(fmt::format("/{}", std::string(kMaxTargetBytes - 1, 'a'))).isOk());
  CHECK(parseHttpTarget(fmt::format("/s?v={}", std::string(kMaxQueryValueBytes, 'x'))).isOk());
  CHECK_FALSE(parseHttpTarget(fmt::format("/s?v={}", std::string(kMaxQueryValueBytes + 1, 'x'))).isOk());
  std::string many = "/s?";
  for (std::size_t i = 0; i <= kMaxQueryParams; ++i) many += fmt::format("k{}=1&", i);
  CHECK_FALSE(parseHttpTarget(many).isOk());
}

}  // namespace
}  // namespace tellus::net
