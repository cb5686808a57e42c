#include "lp/linear_program.h"

#include <coin/ClpSimplex.hpp>
#include <coin/CoinPackedMatrix.hpp>

#include <algorithm>
#include <cmath>
#include <string>

namespace tellus::lp {
namespace {

std::string describe(const std::string& kind, std::size_t index, const std::string& name) {
  return kind + " " + std::to_string(index) + (name.empty() ? "" : " (" + name + ")");
}

// Clp's own infinity; +-inf from callers maps onto it.
double toClp(double bound) {
  if (bound == kInfinity) return COIN_DBL_MAX;
  if (bound == -kInfinity) return -COIN_DBL_MAX;
  return bound;
}

}  // namespace

std::size_t LinearProgram::addVariable(double lower, double upper, double cost, std::string name) {
  columnLower_.push_back(lower);
  columnUpper_.push_back(upper);
  cost_.push_back(cost);
  columnName_.push_back(std::move(name));
  return columnLower_.size() - 1;
}

std::size_t LinearProgram::addRow(const std::vector<std::pair<std::size_t, double>>& terms, double lower,
                                  double upper, std::string name) {
  const int row = static_cast<int>(rowLower_.size());
  for (const auto& [column, value] : terms) {
    entryRow_.push_back(row);
    // An out-of-range index is reported by solve(), where errors can be returned.
    entryColumn_.push_back(static_cast<int>(column));
    entryValue_.push_back(value);
  }
  rowLower_.push_back(lower);
  rowUpper_.push_back(upper);
  rowName_.push_back(std::move(name));
  return rowLower_.size() - 1;
}

Result<Solution> LinearProgram::solve(double maxWallSeconds) const {
  const std::size_t columns = columnLower_.size();
  for (std::size_t c = 0; c < columns; ++c) {
    if (std::isnan(columnLower_[c]) || std::isnan(columnUpper_[c]) || std::isnan(cost_[c]) ||
        !std::isfinite(cost_[c]) || columnLower_[c] > columnUpper_[c]) {
      return makeError(ErrorCode::kInvalidArgument,
                       "LP " + describe("variable", c, columnName_[c]) + ": bad bounds or cost");
    }
  }
  for (std::size_t r = 0; r < rowLower_.size(); ++r) {
    if (std::isnan(rowLower_[r]) || std::isnan(rowUpper_[r]) || rowLower_[r] > rowUpper_[r]) {
      return makeError(ErrorCode::kInvalidArgument, "LP " + describe("row", r, rowName_[r]) + ": bad bounds");
    }
  }
  for (std::size_t e = 0; e < entryValue_.size(); ++e) {
    if (entryColumn_[e] < 0 || static_cast<std::size_t>(entryColumn_[e]) >= columns) {
      return makeError(ErrorCode::kInvalidArgument,
                       "LP " + describe("row", static_cast<std::size_t>(entryRow_[e]),
                                        rowName_[static_cast<std::size_t>(entryRow_[e])]) +
                           ": unknown variable index " + std::to_string(entryColumn_[e]));
    }
    if (!std::isfinite(entryValue_[e])) {
      return makeError(ErrorCode::kInvalidArgument,
                       "LP " + describe("row", static_cast<std::size_t>(entryRow_[e]),
                                        rowName_[static_cast<std::size_t>(entryRow_[e])]) +
                           ": non-finite coefficient");
    }
  }

  // The triplet constructor sums duplicate (row, column) entries, as addRow documents.
  CoinPackedMatrix matrix(false, entryRow_.data(), entryColumn_.data(), entryValue_.data(),
                          static_cast<CoinBigIndex>(entryValue_.size()));
  matrix.setDimensions(static_cast<int>(rowLower_.size()), static_cast<int>(columns));

  std::vector<double> colLower(columns), colUpper(columns), rowLower(rowLower_.size()), rowUpper(rowUpper_.size());
  for (std::size_t c = 0; c < columns; ++c) {
    colLower[c] = toClp(columnLower_[c]);
    colUpper[c] = toClp(columnUpper_[c]);
  }
  for (std::size_t r = 0; r < rowLower_.size(); ++r) {
    rowLower[r] = toClp(rowLower_[r]);
    rowUpper[r] = toClp(rowUpper_[r]);
  }

  ClpSimplex model;
  model.setLogLevel(0);
  model.loadProblem(matrix, colLower.data(), colUpper.data(), cost_.data(), rowLower.data(), rowUpper.data());
  model.setOptimizationDirection(sense_ == Sense::kMinimize ? 1.0 : -1.0);
  const bool limited = maxWallSeconds < kInfinity;
  if (limited) model.setMaximumWallSeconds(std::max(0.0, maxWallSeconds));
  model.dual();
  if (limited && !model.isProvenOptimal() && !model.isProvenPrimalInfeasible() && !model.isProvenDualInfeasible()) {
    return makeError(ErrorCode::kDeadlineExceeded,
                     "Clp stopped at its time limit of " + std::to_string(maxWallSeconds) + " s");
  }
  if (!model.isProvenOptimal()) {
    // One retry with primal: dual occasionally stops on numerically hard bases.
    model.primal();
  }
  if (model.isProvenPrimalInfeasible()) {
    return makeError(ErrorCode::kInvalidArgument, "LP is infeasible");
  }
  if (model.isProvenDualInfeasible()) {
    return makeError(ErrorCode::kInvalidArgument, "LP is unbounded");
  }
  if (!model.isProvenOptimal()) {
    return makeError(ErrorCode::kInternal, "Clp stopped without a proven optimum (status " +
                                               std::to_string(model.status()) + ")");
  }
  Solution solution;
  solution.objective = model.objectiveValue();
  const double* values = model.primalColumnSolution();
  solution.values.assign(values, values + columns);
  const double* duals = model.dualRowSolution();
  solution.duals.assign(duals, duals + rowLower_.size());
  return solution;
}

}  // namespace tellus::lp
