#include "data/params.h"

#include <charconv>
#include <cmath>

namespace tellus::data {

ParamReader::ParamReader(std::string operatorName, const OperatorParams& params)
    : operatorName_(std::move(operatorName)), params_(params) {}

Error ParamReader::error(const std::string& message) const {
  return makeError(ErrorCode::kInvalidArgument, operatorName_ + ": " + message);
}

const std::string* ParamReader::find(const std::string& name) {
  accepted_.insert(name);
  const auto it = params_.find(name);
  return it == params_.end() ? nullptr : &it->second;
}

Result<std::string> ParamReader::requiredString(const std::string& name) {
  const std::string* value = find(name);
  if (value == nullptr) return error("missing required param '" + name + "'");
  if (value->empty()) return error("param " + name + ": must not be empty");
  return *value;
}

std::string ParamReader::optionalString(const std::string& name, const std::string& fallback) {
  const std::string* value = find(name);
  return value == nullptr ? fallback : *value;
}

Result<std::uint64_t> ParamReader::optionalUint(const std::string& name, std::uint64_t fallback,
                                                std::uint64_t max) {
  const std::string* value = find(name);
  if (value == nullptr) return fallback;
  std::uint64_t parsed = 0;
  const char* end = value->data() + value->size();
  // from_chars accepts no sign, no spaces and no "0x": exactly the digits we want.
  const auto [ptr, ec] = std::from_chars(value->data(), end, parsed);
  if (value->empty() || ec == std::errc::invalid_argument || ptr != end) {
    return error("param " + name + ": expected a non-negative integer, got '" + *value + "'");
  }
  if (ec == std::errc::result_out_of_range || parsed > max) {
    return error("param " + name + ": " + *value + " is larger than the maximum " + std::to_string(max));
  }
  return parsed;
}

Result<bool> ParamReader::optionalBool(const std::string& name, bool fallback) {
  const std::string* value = find(name);
  if (value == nullptr) return fallback;
  if (*value == "true") return true;
  if (*value == "false") return false;
  return error("param " + name + ": expected 'true' or 'false', got '" + *value + "'");
}

Result<double> ParamReader::optionalNonNegativeDouble(const std::string& name, double fallback) {
  const std::string* value = find(name);
  if (value == nullptr) return fallback;
  double parsed = 0;
  const char* end = value->data() + value->size();
  const auto [ptr, ec] = std::from_chars(value->data(), end, parsed);
  if (value->empty() || ec != std::errc() || ptr != end || !std::isfinite(parsed) || parsed < 0) {
    return error("param " + name + ": expected a non-negative number, got '" + *value + "'");
  }
  return parsed;
}

Status ParamReader::finish() const {
  for (const auto& [name, value] : params_) {
    if (accepted_.count(name) != 0) continue;
    std::string acceptedList;
    for (const auto& known : accepted_) acceptedList += (acceptedList.empty() ? "" : ", ") + known;
    return error("unknown param '" + name + "' (accepted: " +
                 (acceptedList.empty() ? std::string("none") : acceptedList) + ")");
  }
  return Status::ok();
}

}  // namespace tellus::data
