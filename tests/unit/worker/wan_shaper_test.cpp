#include <catch2/catch.hpp>

#include "worker/wan_shaper.h"

using tellus::worker::WanShaper;
using namespace std::chrono_literals;

TEST_CASE("WAN shaper: chunks to a site go out back to back at the link rate, plus latency", "[unit][wan]") {
  // 8 Mbit/s = 1,000,000 bytes/s; 20 ms one way.
  WanShaper shaper({{"eu", 8.0, 20}});
  WanShaper::Clock::time_point t0{};
  auto first = shaper.reserve("eu", 500'000, t0);
  CHECK(first - t0 == 520ms);
  // The second chunk queues behind the first on the link.
  auto second = shaper.reserve("eu", 500'000, t0);
  CHECK(second - t0 == 1020ms);
  // After the link drained, a chunk starts at once.
  auto later = shaper.reserve("eu", 1'000'000, t0 + 5s);
  CHECK(later - t0 == 6020ms);
}

TEST_CASE("WAN shaper: unknown sites and links without bandwidth are unlimited", "[unit][wan]") {
  WanShaper shaper({{"ap", 0.0, 50}});
  WanShaper::Clock::time_point t0{};
  CHECK(shaper.reserve("us", 1'000'000'000, t0) == t0);
  CHECK(shaper.reserve("ap", 1'000'000'000, t0) - t0 == 50ms);  // latency only
}
