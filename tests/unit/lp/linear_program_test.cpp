#include <catch2/catch.hpp>

#include "lp/linear_program.h"

using tellus::ErrorCode;
using tellus::lp::LinearProgram;
using tellus::lp::Sense;

TEST_CASE("a small LP is solved to its optimum", "[unit][lp]") {
  // max 3x + 2y  s.t. x + y <= 4, x + 3y <= 6, x <= 3  -> x = 3, y = 1, objective 11
  LinearProgram lp(Sense::kMaximize);
  const auto x = lp.addVariable(0, 3, 3, "x");
  const auto y = lp.addVariable(0, tellus::lp::kInfinity, 2, "y");
  lp.addLessEqual({{x, 1}, {y, 1}}, 4);
  lp.addLessEqual({{x, 1}, {y, 3}}, 6);
  auto solved = lp.solve();
  REQUIRE(solved.isOk());
  CHECK(solved->objective == Approx(11));
  CHECK(solved->values[x] == Approx(3));
  CHECK(solved->values[y] == Approx(1));
}

TEST_CASE("duplicate terms in a row are summed and equality rows hold", "[unit][lp]") {
  LinearProgram lp;
  const auto x = lp.addVariable(0, 10, 1);
  lp.addEqual({{x, 1}, {x, 1}}, 5);  // 2x = 5
  auto solved = lp.solve();
  REQUIRE(solved.isOk());
  CHECK(solved->values[x] == Approx(2.5));
}

TEST_CASE("infeasible, unbounded and malformed LPs are errors", "[unit][lp]") {
  {
    LinearProgram lp;
    const auto x = lp.addVariable(0, 1, 1);
    lp.addGreaterEqual({{x, 1}}, 2);
    auto solved = lp.solve();
    REQUIRE_FALSE(solved.isOk());
    CHECK(solved.error().code == ErrorCode::kInvalidArgument);
    CHECK_THAT(solved.message(), Catch::Contains("infeasible"));
  }
  {
    LinearProgram lp(Sense::kMaximize);
    lp.addVariable(0, tellus::lp::kInfinity, 1);
    auto solved = lp.solve();
    REQUIRE_FALSE(solved.isOk());
    CHECK_THAT(solved.message(), Catch::Contains("unbounded"));
  }
  {
    LinearProgram lp;
    lp.addVariable(2, 1, 0, "backwards");
    auto solved = lp.solve();
    REQUIRE_FALSE(solved.isOk());
    CHECK_THAT(solved.message(), Catch::Contains("backwards"));
  }
  {
    LinearProgram lp;
    lp.addVariable(0, 1, 0);
    lp.addLessEqual({{7, 1.0}}, 1, "row-with-bad-index");
    auto solved = lp.solve();
    REQUIRE_FALSE(solved.isOk());
    CHECK_THAT(solved.message(), Catch::Contains("row-with-bad-index"));
  }
}
