#pragma once
// Pure parsing of the `tellus` arguments that CLI11 does not check by itself (unit-tested).

#include <cstdint>
#include <string>
#include <string_view>

#include "util/result.h"

namespace tellus::cli {

// `tellus logs --task STAGE:N`: a stage's name (or its index in decimal) and a task number.
struct TaskRef {
  std::string stage;
  uint32_t task = 0;
};

// "map:3", "0:12"; a one-line kInvalidArgument naming the expected form otherwise.
Result<TaskRef> parseTaskRef(std::string_view text);

}  // namespace tellus::cli
