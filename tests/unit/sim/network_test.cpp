#include <catch2/catch.hpp>

#include "sim/network.h"

using tellus::sim::CompletedFlow;
using tellus::sim::FairShareNetwork;
using tellus::sim::FlowTag;

namespace {

FlowTag tag(int32_t task) { return FlowTag{1, 0, task, 1}; }

// Runs the network until idle; returns (task, completion time) in completion order.
std::vector<std::pair<int32_t, double>> drain(FairShareNetwork& network) {
  std::vector<std::pair<int32_t, double>> done;
  while (network.nextCompletionTime() != FairShareNetwork::kNever) {
    const double now = network.nextCompletionTime();
    std::vector<CompletedFlow> completed;
    network.completeFlowsAt(now, completed);
    for (const auto& flow : completed) done.emplace_back(flow.tag.task, now);
  }
  return done;
}

}  // namespace

TEST_CASE("one flow moves at the slower of uplink and downlink", "[unit][sim]") {
  FairShareNetwork network({100, 1000}, {1000, 40});
  network.addFlow(0, 0, 1, 200, tag(7));
  CHECK(network.currentRate(0, 1) == Approx(40));
  const auto done = drain(network);
  REQUIRE(done.size() == 1);
  CHECK(done[0].first == 7);
  CHECK(done[0].second == Approx(5.0));  // 200 B at min(100, 40) B/s
}

TEST_CASE("flows leaving one site share its uplink equally", "[unit][sim]") {
  // Site 0 uploads at 100 B/s to two sites with ample downlink. A (100 B) and B (300 B)
  // both get 50 B/s: A is done at t=2, having moved 100 B while B moved 100 B; B then gets
  // the whole uplink and needs 200 B / 100 B/s = 2 s more: done at t=4.
  FairShareNetwork network({100, 1000, 1000}, {1000, 1000, 1000});
  network.addFlow(0, 0, 1, 100, tag(1));
  network.addFlow(0, 0, 2, 300, tag(2));
  CHECK(network.currentRate(0, 1) == Approx(50));
  CHECK(network.currentRate(0, 2) == Approx(50));
  const auto done = drain(network);
  REQUIRE(done.size() == 2);
  CHECK(done[0].first == 1);
  CHECK(done[0].second == Approx(2.0));
  CHECK(done[1].first == 2);
  CHECK(done[1].second == Approx(4.0));
}

TEST_CASE("flows entering one site share its downlink; a late flow slows the others", "[unit][sim]") {
  // Site 2 downloads at 60 B/s. Flow 1 (120 B) starts at 0 alone (60 B/s); at t=1 flow 2
  // (30 B) joins: both at 30 B/s. Flow 2 ends at t=2 (flow 1 has 120-60-30=30 B left), then
  // flow 1 is back at 60 B/s: done at t=2.5.
  FairShareNetwork network({1000, 1000, 1000}, {1000, 1000, 60});
  network.addFlow(0, 0, 2, 120, tag(1));
  std::vector<CompletedFlow> none;
  network.completeFlowsAt(1.0, none);
  CHECK(none.empty());
  network.addFlow(1.0, 1, 2, 30, tag(2));
  CHECK(network.flowsIn(2) == 2);
  const auto done = drain(network);
  REQUIRE(done.size() == 2);
  CHECK(done[0].first == 2);
  CHECK(done[0].second == Approx(2.0));
  CHECK(done[1].first == 1);
  CHECK(done[1].second == Approx(2.5));
}

TEST_CASE("each flow gets the minimum of its two fair shares", "[unit][sim]") {
  // 0 -> 2 and 1 -> 2 share site 2's downlink (100 B/s: 50 each); 0 -> 3 shares site 0's
  // uplink with 0 -> 2 (80 B/s: 40 each). So 0->2 runs at min(40, 50) = 40, 1->2 at
  // min(1000, 50) = 50, 0->3 at min(40, 1000) = 40 (no redistribution of unused shares).
  FairShareNetwork network({80, 1000, 1000, 1000}, {1000, 1000, 100, 1000});
  network.addFlow(0, 0, 2, 400, tag(1));
  network.addFlow(0, 1, 2, 400, tag(2));
  network.addFlow(0, 0, 3, 400, tag(3));
  CHECK(network.currentRate(0, 2) == Approx(40));
  CHECK(network.currentRate(1, 2) == Approx(50));
  CHECK(network.currentRate(0, 3) == Approx(40));
}

TEST_CASE("cancelling a flow returns what it delivered and speeds up the rest", "[unit][sim]") {
  FairShareNetwork network({100, 1000, 1000}, {1000, 1000, 1000});
  const auto first = network.addFlow(0, 0, 1, 1000, tag(1));
  network.addFlow(0, 0, 2, 100, tag(2));
  // Both at 50 B/s; at t=1 the first has delivered 50 B.
  CHECK(network.cancelFlow(1.0, first) == Approx(50));
  CHECK(network.activeFlowCount() == 1);
  const auto done = drain(network);
  REQUIRE(done.size() == 1);
  CHECK(done[0].first == 2);
  CHECK(done[0].second == Approx(1.5));  // 50 B left at 100 B/s
}

TEST_CASE("a bandwidth drop slows flows from that moment on", "[unit][sim]") {
  FairShareNetwork network({100, 1000}, {1000, 1000});
  network.addFlow(0, 0, 1, 300, tag(1));
  network.setBandwidth(1.0, 0, 50, 1000);  // 100 B moved; 200 B left at 50 B/s
  const auto done = drain(network);
  REQUIRE(done.size() == 1);
  CHECK(done[0].second == Approx(5.0));
}

TEST_CASE("many equal flows of one pair finish together", "[unit][sim]") {
  FairShareNetwork network({100, 1000}, {1000, 1000});
  for (int32_t i = 0; i < 10; ++i) network.addFlow(0, 0, 1, 10, tag(i));
  const auto done = drain(network);
  REQUIRE(done.size() == 10);
  for (int32_t i = 0; i < 10; ++i) {
    CHECK(done[static_cast<size_t>(i)].first == i);  // ties complete in start order
    CHECK(done[static_cast<size_t>(i)].second == Approx(1.0));
  }
}
