#include "util/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

namespace tellus {

void initLogging(const std::string& processName, const std::string& level) {
  auto logger = spdlog::stderr_color_mt(processName);
  logger->set_pattern("%Y-%m-%d %H:%M:%S.%e %^%L%$ [%n] %v");
  logger->set_level(spdlog::level::from_str(level));
  spdlog::set_default_logger(logger);
  spdlog::flush_every(std::chrono::seconds(1));
}

}  // namespace tellus
