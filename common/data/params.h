#pragma once
// Typed access to an operator's string params, with the error messages users see when a job
// spec is wrong. Every getter remembers the name it was asked for, so finish() can reject
// params the operator does not know (a typo like "cpu-ms" must not be silently ignored).

#include <cstdint>
#include <set>
#include <string>

#include "data/operator.h"
#include "util/result.h"

namespace tellus::data {

class ParamReader {
 public:
  ParamReader(std::string operatorName, const OperatorParams& params);

  // A param that must be present and non-empty.
  Result<std::string> requiredString(const std::string& name);
  std::string optionalString(const std::string& name, const std::string& fallback);
  // Decimal digits only, <= max.
  Result<std::uint64_t> optionalUint(const std::string& name, std::uint64_t fallback, std::uint64_t max);
  // "true" or "false".
  Result<bool> optionalBool(const std::string& name, bool fallback);
  // A finite decimal number >= 0.
  Result<double> optionalNonNegativeDouble(const std::string& name, double fallback);

  // Error if a param was given that no getter asked for.
  Status finish() const;

  // "<operator>: <message>" as a kInvalidArgument error.
  Error error(const std::string& message) const;

 private:
  const std::string* find(const std::string& name);

  std::string operatorName_;
  const OperatorParams& params_;
  std::set<std::string> accepted_;
};

}  // namespace tellus::data
