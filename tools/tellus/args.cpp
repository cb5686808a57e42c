#include "args.h"

#include <fmt/format.h>

#include <charconv>

#include "util/names.h"

namespace tellus::cli {

Result<TaskRef> parseTaskRef(std::string_view text) {
  const auto bad = [&](std::string_view why) {
    return makeError(ErrorCode::kInvalidArgument,
                     fmt::format("--task '{}': {} (expected STAGE:N, e.g. map:3)", text.substr(0, 64), why));
  };
  const auto colon = text.rfind(':');
  if (colon == std::string_view::npos) return bad("no ':'");
  const auto stage = text.substr(0, colon);
  const auto number = text.substr(colon + 1);
  if (!isName(stage)) return bad("the stage must be a stage's name or index");
  TaskRef ref{std::string(stage), 0};
  const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), ref.task);
  if (number.empty() || ec != std::errc() || end != number.data() + number.size()) {
    return bad("the task must be a number");
  }
  return ref;
}

}  // namespace tellus::cli
