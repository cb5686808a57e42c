#pragma once
// A tiny LP builder over COIN-OR Clp, so that policy code never includes Clp headers.
// Build variables (with bounds and objective coefficients) and rows (sparse, with bounds),
// then solve. Only a proven optimum is returned as a value; anything else is an error.

#include <cstddef>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "util/result.h"

namespace tellus::lp {

inline constexpr double kInfinity = std::numeric_limits<double>::infinity();

enum class Sense { kMinimize, kMaximize };

struct Solution {
  double objective = 0;
  std::vector<double> values;  // one per variable, in the order they were added
  std::vector<double> duals;   // one per row (row prices), in the order rows were added
};

class LinearProgram {
 public:
  explicit LinearProgram(Sense sense = Sense::kMinimize) : sense_(sense) {}

  // Adds a variable lower <= x <= upper (either bound may be +-kInfinity) with objective
  // coefficient `cost`; returns its index.
  std::size_t addVariable(double lower, double upper, double cost, std::string name = {});

  // Adds lower <= sum(coef * x[index]) <= upper. Repeated indices are summed.
  std::size_t addRow(const std::vector<std::pair<std::size_t, double>>& terms, double lower, double upper,
                     std::string name = {});
  std::size_t addLessEqual(const std::vector<std::pair<std::size_t, double>>& terms, double upper,
                           std::string name = {}) {
    return addRow(terms, -kInfinity, upper, std::move(name));
  }
  std::size_t addGreaterEqual(const std::vector<std::pair<std::size_t, double>>& terms, double lower,
                              std::string name = {}) {
    return addRow(terms, lower, kInfinity, std::move(name));
  }
  std::size_t addEqual(const std::vector<std::pair<std::size_t, double>>& terms, double value,
                       std::string name = {}) {
    return addRow(terms, value, value, std::move(name));
  }

  std::size_t variableCount() const { return columnLower_.size(); }
  std::size_t rowCount() const { return rowLower_.size(); }

  // Solves with Clp's dual simplex. Errors: kInvalidArgument for infeasible or unbounded
  // problems and malformed input (NaN coefficients, lower > upper, unknown variable index),
  // kInternal when Clp stops without a proven optimum, kDeadlineExceeded when it ran out of
  // `maxWallSeconds` (wall-clock; infinity = no limit) first.
  Result<Solution> solve(double maxWallSeconds = kInfinity) const;

 private:
  Sense sense_;
  std::vector<double> columnLower_, columnUpper_, cost_;
  std::vector<std::string> columnName_;
  std::vector<double> rowLower_, rowUpper_;
  std::vector<std::string> rowName_;
  // Row-wise sparse entries (row, column, value).
  std::vector<int> entryRow_, entryColumn_;
  std::vector<double> entryValue_;
};

}  // namespace tellus::lp
