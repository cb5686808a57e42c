// jsonLogLine: the JSON-lines log format parses whatever a message holds.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <string>

#include "util/log.h"

namespace tellus {
namespace {

TEST_CASE("a JSON log line has the time, level, process and message", "[unit][util]") {
  const std::string line = jsonLogLine("2026-11-25T23:16:28.123Z", "info", "master/eu", "job job-1 submitted");
  CHECK(line ==
        "{\"ts\":\"2026-11-25T23:16:28.123Z\",\"level\":\"info\",\"process\":\"master/eu\",\"msg\":\"job job-1 "
        "submitted\"}\n");
}

TEST_CASE("a JSON log line escapes quotes, control characters and invalid UTF-8", "[unit][util]") {
  const std::string message = "say \"hi\"\\ now\n\ttab \x01 caf\xc3\xa9 bad\xff\xc3 end";
  const std::string line = jsonLogLine("t", "warning", "worker/eu/w1", message);
  REQUIRE(line.back() == '\n');
  CHECK(line.find('\n') == line.size() - 1);  // one line, whatever the message
  auto parsed = nlohmann::json::parse(line);  // throws on invalid JSON or UTF-8
  CHECK(parsed["level"] == "warning");
  CHECK(parsed["msg"] == "say \"hi\"\\ now\n\ttab \x01 caf\xc3\xa9 bad\xef\xbf\xbd\xef\xbf\xbd end");
  // Overlong forms and surrogates are not UTF-8 either.
  auto odd = nlohmann::json::parse(jsonLogLine("t", "info", "p", "\xc0\xaf \xed\xa0\x80"));
  CHECK(odd["msg"] == "\xef\xbf\xbd\xef\xbf\xbd \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
}

}  // namespace
}  // namespace tellus
