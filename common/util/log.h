#pragma once
// Logging is spdlog everywhere; this sets up the process-wide format once, in main().
#include <spdlog/spdlog.h>

#include <string>
#include <string_view>

namespace tellus {

// kText: "2026-11-25 23:16:28.123 I [master/eu] message". kJson: one JSON object per line
// (jsonLogLine), for log shippers. A config's `log_format: text|json`.
enum class LogFormat { kText, kJson };

// Name appears in every line (e.g. "master/eu"); level is one of trace|debug|info|warn|error.
void initLogging(const std::string& processName, const std::string& level = "info",
                 LogFormat format = LogFormat::kText);

// One JSON-lines record, newline-terminated:
//   {"ts":"2026-11-25T23:16:28.123Z","level":"info","process":"master/eu","msg":"..."}
// Strings are escaped for JSON (quote, backslash, control characters) and bytes that are not
// valid UTF-8 become U+FFFD, so every line parses whatever a message holds. Pure.
std::string jsonLogLine(std::string_view isoTime, std::string_view level, std::string_view process,
                        std::string_view message);

}  // namespace tellus
