#include <catch2/catch.hpp>

#include <limits>

#include "sched/lease.h"

using namespace tellus::sched;

TEST_CASE("compute history: the newest k at the node, else every node's, else nothing", "[lease]") {
  ComputeHistory history(3);
  CHECK_FALSE(history.meanS("s0", "w1"));
  history.record("s0", "w1", 1.0);
  history.record("s0", "w1", 2.0);
  history.record("s0", "w1", 3.0);
  history.record("s0", "w1", 7.0);  // pushes 1.0 out: (2 + 3 + 7) / 3
  CHECK(*history.meanS("s0", "w1") == Approx(4.0));
  history.record("s0", "w2", 10.0);
  CHECK(*history.meanS("s0", "w2") == Approx(10.0));
  // A node that never ran the class: every node's records, (2 + 3 + 7 + 10) / 4.
  CHECK(*history.meanS("s0", "w3") == Approx(5.5));
  CHECK_FALSE(history.meanS("s1", "w1"));
  history.record("s0", "w1", -1.0);  // not a time
  history.record("s0", "w1", std::numeric_limits<double>::quiet_NaN());
  CHECK(*history.meanS("s0", "w1") == Approx(4.0));
  history.forget("s0");
  CHECK_FALSE(history.meanS("s0", "w1"));
}

TEST_CASE("lease estimate: eq. 1, transfer per source site plus compute plus slack", "[lease]") {
  LeaseParams params;
  params.slackS = 0.5;
  params.defaultS = 100;
  // 2 GB from b at 100 MB/s and 1 GB from c at 50 MB/s: 20 s + 20 s, + 4 s compute + 0.5 s.
  const std::map<std::string, double> bytes{{"b", 2e9}, {"c", 1e9}};
  const std::map<std::string, double> rates{{"b", 100e6}, {"c", 50e6}, {"d", 1e6}};
  CHECK(leaseEstimateS(bytes, rates, 4.0, params) == Approx(44.5));
  // Local input only: compute and slack.
  CHECK(leaseEstimateS({}, rates, 4.0, params) == Approx(4.5));
  CHECK(leaseEstimateS({{"b", 0}}, {}, 4.0, params) == Approx(4.5));
  // Nothing known of the task, or of a link it needs: the predefined lease.
  CHECK(leaseEstimateS(bytes, rates, std::nullopt, params) == Approx(100));
  CHECK(leaseEstimateS({{"e", 1e6}}, rates, 4.0, params) == Approx(100));
  CHECK(leaseEstimateS({{"b", 1e6}}, {{"b", 0}}, 4.0, params) == Approx(100));
  // A negative slack (the paper's underestimation experiment) never makes a negative lease.
  params.slackS = -30;
  CHECK(leaseEstimateS({}, rates, 4.0, params) == 0);
}

TEST_CASE("lease accuracy: eq. 3, floored at 0", "[lease]") {
  CHECK(*leaseAccuracy(50, 40) == Approx(0.8));
  CHECK(*leaseAccuracy(50, 60) == Approx(0.8));
  CHECK(*leaseAccuracy(50, 50) == Approx(1.0));
  CHECK(*leaseAccuracy(10, 35) == 0);
  CHECK_FALSE(leaseAccuracy(0, 1));
}

TEST_CASE("locality level: eq. 2", "[lease]") {
  CHECK(localityLevel({}, 100) == 1.0);
  CHECK(localityLevel({1000, 10, 100, 99.9}, 100) == Approx(0.5));
  CHECK(localityLevel({1, 2}, 100) == 0.0);
}

TEST_CASE("locality gate: below the minimum a stage is skipped, for a bounded time", "[lease]") {
  LocalityGate gate(0.5, 10.0);
  CHECK(gate.admit(0, 0.5, 0.0));  // at the minimum: admitted
  CHECK_FALSE(gate.nextDeadline());
  CHECK_FALSE(gate.admit(1, 0.25, 1.0));
  CHECK(*gate.nextDeadline() == Approx(11.0));
  CHECK_FALSE(gate.admit(1, 0.25, 10.9));
  CHECK(gate.admit(1, 0.25, 11.0));  // skipped for its 10 s: admitted whatever its locality
  CHECK_FALSE(gate.nextDeadline());
  // A new window after an admission; locality reached within it admits at once and forgets.
  CHECK_FALSE(gate.admit(1, 0.0, 20.0));
  CHECK(gate.admit(1, 0.75, 21.0));
  CHECK_FALSE(gate.admit(1, 0.0, 22.0));
  CHECK(*gate.nextDeadline() == Approx(32.0));
  // Level 0 admits everything.
  LocalityGate open(0.0, 10.0);
  CHECK(open.admit(0, 0.0, 0.0));
}

TEST_CASE("queued start: containers by free time, one task per task time after", "[lease]") {
  // Containers free at 5, 1, 3; tasks of 2 s. Positions 0..2 start when each frees (in order
  // 1, 3, 5), 3..5 one task time later.
  const std::vector<double> freeAt{5, 1, 3};
  CHECK(queuedStartAt(freeAt, 0, 2) == 1);
  CHECK(queuedStartAt(freeAt, 2, 2) == 5);
  CHECK(queuedStartAt(freeAt, 3, 2) == 3);
  CHECK(queuedStartAt(freeAt, 5, 2) == 7);
  CHECK(queuedStartAt({}, 0, 2) == std::numeric_limits<double>::infinity());
}
