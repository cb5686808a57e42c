#include "jobstate/paths.h"

#include <algorithm>
#include <charconv>

#include "util/names.h"

namespace tellus::jobstate {
namespace {

// A decimal number at the front of `text`, consumed from it.
std::optional<uint32_t> takeNumber(std::string_view& text) {
  uint32_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end == text.data()) return std::nullopt;
  text.remove_prefix(static_cast<size_t>(end - text.data()));
  return value;
}

}  // namespace

std::optional<std::pair<uint32_t, uint32_t>> parseTaskName(std::string_view name) {
  auto stage = takeNumber(name);
  if (!stage || name.empty() || name.front() != '-') return std::nullopt;
  name.remove_prefix(1);
  auto task = takeNumber(name);
  if (!task) return std::nullopt;
  if (name.empty()) return std::make_pair(*stage, *task);
  // An attempt: "-<n>" must follow.
  if (name.front() != '-') return std::nullopt;
  name.remove_prefix(1);
  if (!takeNumber(name) || !name.empty()) return std::nullopt;
  return std::make_pair(*stage, *task);
}

bool isJobId(std::string_view id) { return isName(id); }

std::optional<uint32_t> parsePartName(std::string_view name) {
  auto task = takeNumber(name);
  if (!task || !name.empty()) return std::nullopt;
  return task;
}

}  // namespace tellus::jobstate
