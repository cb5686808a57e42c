#include <catch2/catch.hpp>

#include "net/endpoint.h"

using tellus::ErrorCode;
using tellus::net::Endpoint;

TEST_CASE("host:port endpoints parse", "[unit][net]") {
  auto named = Endpoint::parse("master.eu.example:7000");
  REQUIRE(named.isOk());
  CHECK(named->host == "master.eu.example");
  CHECK(named->port == 7000);

  auto v4 = Endpoint::parse("10.0.0.7:65535");
  REQUIRE(v4.isOk());
  CHECK(v4->host == "10.0.0.7");
  CHECK(v4->port == 65535);

  auto any = Endpoint::parse("0.0.0.0:0");
  REQUIRE(any.isOk());
  CHECK(any->port == 0);

  auto v6 = Endpoint::parse("[::1]:8080");
  REQUIRE(v6.isOk());
  CHECK(v6->host == "::1");
  CHECK(v6->port == 8080);
}

TEST_CASE("toString is the inverse of parse", "[unit][net]") {
  for (const char* text : {"localhost:1", "127.0.0.1:7000", "[::1]:8080", "[fe80::1]:0"}) {
    auto endpoint = Endpoint::parse(text);
    REQUIRE(endpoint.isOk());
    CHECK(endpoint->toString() == text);
  }
  CHECK(Endpoint{"a", 1} == Endpoint{"a", 1});
  CHECK_FALSE(Endpoint{"a", 1} == Endpoint{"a", 2});
}

TEST_CASE("bad endpoints are rejected with a reason", "[unit][net]") {
  const std::pair<const char*, const char*> cases[] = {
      {"", "empty"},
      {"localhost", "missing ':port'"},
      {":7000", "empty host"},
      {"host:", "empty port"},
      {"host:http", "port is not a number"},
      {"host:70a", "port is not a number"},
      {"host:-1", "port is not a number"},
      {"host:65536", "port out of range"},
      {"host:99999999999999999999", "port out of range"},
      {"::1:80", "IPv6 addresses must be written as [addr]:port"},
      {"[::1]80", "missing ':port' after ']'"},
      {"[::1:80", "missing ']'"},
      {"[]:80", "empty host"},
      {"bad host:80", "invalid character"},
  };
  for (const auto& [text, reason] : cases) {
    INFO("input '" << text << "'");
    auto endpoint = Endpoint::parse(text);
    REQUIRE_FALSE(endpoint.isOk());
    CHECK(endpoint.error().code == ErrorCode::kInvalidArgument);
    CHECK_THAT(endpoint.message(), Catch::Contains(reason));
    CHECK_THAT(endpoint.message(), Catch::Contains(std::string("'") + text + "'"));
  }
}
