#include "daemon/pause_detector.h"

#include <catch2/catch.hpp>

namespace tellus::daemon {
namespace {

using namespace std::chrono_literals;

TEST_CASE("a pause is a gap between two turns over the threshold; a handler sees it before the next turn",
          "[daemon][pause]") {
  const PauseDetector::Clock::time_point t0{};
  PauseDetector detector(1000ms, t0);
  CHECK(detector.threshold() == 1000ms);
  // Turns at the loop's period: no pause, never overdue in between.
  CHECK_FALSE(detector.tick(t0 + 100ms));
  CHECK_FALSE(detector.overdue(t0 + 600ms));
  CHECK_FALSE(detector.tick(t0 + 1100ms));  // exactly the threshold since the last turn
  // Stopped for 5 s: a request handled first after the resume finds the turn overdue...
  CHECK(detector.overdue(t0 + 6100ms + 1ms));
  // ...and the loop's next turn reports the gap, once.
  auto gap = detector.tick(t0 + 6200ms);
  REQUIRE(gap);
  CHECK(*gap == 5100ms);
  CHECK_FALSE(detector.overdue(t0 + 6300ms));
  CHECK_FALSE(detector.tick(t0 + 6300ms));
}

}  // namespace
}  // namespace tellus::daemon
