#pragma once
// Logging is spdlog everywhere; this sets up the process-wide format once, in main().
#include <spdlog/spdlog.h>

#include <string>

namespace tellus {

// Name appears in every line (e.g. "master/eu"); level is one of trace|debug|info|warn|error.
void initLogging(const std::string& processName, const std::string& level = "info");

}  // namespace tellus
