#include <catch2/catch.hpp>

#include "sched/af.h"
#include "sched/fair_share.h"
#include "sched/parades.h"

using namespace tellus::sched;

TEST_CASE("Af follows HOUTU Algorithm 1 case by case", "[unit][sched][af]") {
  const AfParams params{.delta = 0.8, .rho = 2.0};
  // q = 1: the first desire is one container whatever was observed.
  AfState s = afDesire(AfState{}, AfObservation{0, 0, true}, params);
  CHECK(s.period == 1);
  CHECK(s.desire == 1.0);
  // Efficient (u >= δ) and satisfied (a = d): grow by ρ.
  s = afDesire(s, AfObservation{1, 0.9, false}, params);
  CHECK(s.desire == 2.0);
  s = afDesire(s, AfObservation{2, 0.95, false}, params);
  CHECK(s.desire == 4.0);
  // Efficient and deprived (a < d): keep the desire.
  s = afDesire(s, AfObservation{3, 0.9, true}, params);
  CHECK(s.desire == 4.0);
  // Low utilization but tasks were waiting: efficient; satisfied -> grow.
  s = afDesire(s, AfObservation{4, 0.1, true}, params);
  CHECK(s.desire == 8.0);
  // Inefficient: u < δ and nothing waiting -> shrink by ρ, even when deprived.
  s = afDesire(s, AfObservation{2, 0.5, false}, params);
  CHECK(s.desire == 4.0);
  CHECK(s.period == 6);
  CHECK(afContainerRequest(s) == 4);
}

TEST_CASE("Af desire stays within its bounds and rounds up to whole containers", "[unit][sched][af]") {
  AfParams params{.delta = 0.8, .rho = 1.5, .minDesire = 1.0, .maxDesire = 5.0};
  AfState s{3, 1.2};
  s = afDesire(s, AfObservation{1, 0.1, false}, params);  // 1.2 / 1.5 = 0.8 -> clamped to 1
  CHECK(s.desire == 1.0);
  s = AfState{3, 4.0};
  s = afDesire(s, AfObservation{4, 1.0, false}, params);  // 6 -> clamped to 5
  CHECK(s.desire == 5.0);
  CHECK(afContainerRequest(AfState{1, 2.25}) == 3);
  CHECK(afContainerRequest(AfState{1, 2.0}) == 2);
}

namespace {
// Tasks by name in the cases below (WaitingTask::key).
enum : uint64_t { kRack = 1, kFar, kLocal, kBig, kSmall, kX, kY, kZ };

// (Names are literals: WaitingTask views them.)
WaitingTask task(uint64_t key, std::vector<std::string_view> nodes, std::vector<std::string_view> racks, double wait,
                 double p = 10, double r = 0.2) {
  return WaitingTask{key, std::move(nodes), std::move(racks), wait, p, r};
}
}  // namespace

TEST_CASE("Parades steals when nothing waits", "[unit][sched][parades]") {
  auto d = paradesOnUpdate({}, ContainerUpdate{"c1", "n1", "r1", 1.0}, ParadesParams{});
  CHECK(d.steal);
  CHECK(d.launches.empty());
  CHECK(d.freeAfter == 1.0);
}

TEST_CASE("Parades prefers node-local, then rack-local after tau*p, then any after 2tau*p", "[unit][sched][parades]") {
  const ParadesParams params{.tau = 0.5, .delta = 0.8};
  const ContainerUpdate container{"c1", "n1", "r1", 0.5};
  // Only a rack-local task that waited 4 s < τ·p = 5 s and a remote one: nothing launches.
  std::vector<WaitingTask> waiting = {task(kRack, {"n2"}, {"r1"}, 4), task(kFar, {"n9"}, {"r9"}, 9)};
  auto d = paradesOnUpdate(waiting, container, params);
  CHECK(d.launches.empty());
  CHECK_FALSE(d.steal);
  // After 5 s the rack-local task may go; the remote one needs 2τ·p = 10 s.
  waiting[0].waitS = 5;
  d = paradesOnUpdate(waiting, container, params);
  REQUIRE(d.launches.size() == 1);
  CHECK(d.launches[0].key == kRack);
  CHECK(d.launches[0].locality == Locality::kRackLocal);
  // A node-local task goes first regardless of waiting, and several tasks pack the container.
  waiting.push_back(task(kLocal, {"n1"}, {"r1"}, 0));
  waiting[1].waitS = 10;
  d = paradesOnUpdate(waiting, ContainerUpdate{"c1", "n1", "r1", 1.0}, params);
  REQUIRE(d.launches.size() == 3);
  CHECK(d.launches[0].key == kLocal);
  CHECK(d.launches[0].locality == Locality::kNodeLocal);
  CHECK(d.launches[1].key == kRack);
  CHECK(d.launches[2].key == kFar);
  CHECK(d.launches[2].locality == Locality::kAny);
  CHECK(d.freeAfter == Approx(0.4));
}

TEST_CASE("Parades launches non-local work only on an almost idle container and never overfills", "[unit][sched][parades]") {
  const ParadesParams params{.tau = 0.5, .delta = 0.8};
  std::vector<WaitingTask> waiting = {task(kFar, {"n9"}, {"r9"}, 100)};
  // free 0.15 < 1 - δ = 0.2: the long-waiting remote task must not be packed here.
  auto d = paradesOnUpdate(waiting, ContainerUpdate{"c", "n1", "r1", 0.15}, params);
  CHECK(d.launches.empty());
  // Node-local tasks that do not fit are skipped.
  waiting = {task(kBig, {"n1"}, {}, 0, 10, 0.6), task(kSmall, {"n1"}, {}, 0, 10, 0.3)};
  d = paradesOnUpdate(waiting, ContainerUpdate{"c", "n1", "r1", 0.5}, params);
  REQUIRE(d.launches.size() == 1);
  CHECK(d.launches[0].key == kSmall);
  CHECK(d.freeAfter == Approx(0.2));
}

TEST_CASE("Parades: longest waiting first whatever the input order, ties in input order; a full container takes "
          "nothing",
          "[unit][sched][parades]") {
  const ParadesParams params{.tau = 0.5, .delta = 0.8};
  const ContainerUpdate container{"c", "n1", "r1", 1.0};
  auto order = [&](const std::vector<WaitingTask>& waiting) {
    std::vector<uint64_t> keys;
    for (const auto& l : paradesOnUpdate(waiting, container, params).launches) keys.push_back(l.key);
    return keys;
  };
  // Already in order (callers sort once for many containers) and not: the same launches.
  CHECK(order({task(kX, {"n1"}, {}, 9), task(kY, {"n1"}, {}, 5), task(kZ, {"n1"}, {}, 5)}) ==
        std::vector<uint64_t>{kX, kY, kZ});
  CHECK(order({task(kY, {"n1"}, {}, 5), task(kX, {"n1"}, {}, 9), task(kZ, {"n1"}, {}, 5)}) ==
        std::vector<uint64_t>{kX, kY, kZ});
  CHECK(order({task(kZ, {"n1"}, {}, 5), task(kY, {"n1"}, {}, 5), task(kX, {"n1"}, {}, 9)}) ==
        std::vector<uint64_t>{kX, kZ, kY});
  // sortForParades puts them in that order once, for many containers in a row.
  std::vector<WaitingTask> unsorted = {task(kZ, {"n1"}, {}, 5), task(kY, {"n1"}, {}, 5), task(kX, {"n1"}, {}, 9)};
  sortForParades(unsorted);
  std::vector<uint64_t> sorted;
  for (const auto& w : unsorted) sorted.push_back(w.key);
  CHECK(sorted == std::vector<uint64_t>{kX, kZ, kY});
  CHECK(order(unsorted) == sorted);
  // A launched task leaves the view, the others keep their order; its entry goes past the end.
  std::span<WaitingTask> view(unsorted);
  dropLaunched(view, kZ);
  REQUIRE(view.size() == 2);
  CHECK(view[0].key == kX);
  CHECK(view[1].key == kY);
  CHECK(unsorted[2].key == kZ);
  dropLaunched(view, kZ);  // not in it: nothing
  CHECK(view.size() == 2);
  dropLaunched(view, kX);
  REQUIRE(view.size() == 1);
  CHECK(view[0].key == kY);
  // No room: nothing, and no steal (work waits).
  for (double free : {0.0, 1e-12}) {
    const std::vector<WaitingTask> one = {task(kX, {"n1"}, {}, 9)};
    auto d = paradesOnUpdate(one, ContainerUpdate{"c", "n1", "r1", free}, params);
    CHECK(d.launches.empty());
    CHECK_FALSE(d.steal);
    CHECK_FALSE(hasRoom(free));
  }
  CHECK(hasRoom(0.2));
}

TEST_CASE("fair share gives each container to the smallest unmet share", "[unit][sched][fair]") {
  std::vector<SubJobShare> jobs = {{"a", 5, 3}, {"b", 2, 0}, {"c", 10, 1}};
  // 6 free: b 0->1, b 1->2 (ties with c at 1, smaller index; desire met), c 1->2, c 2->3,
  // a and c tie at 3 -> a 3->4, then c 3->4.
  auto grants = fairShare(jobs, 6);
  CHECK(grants == std::vector<int>{1, 2, 3});
  // Desires cap the grants even with plenty free.
  grants = fairShare(jobs, 100);
  CHECK(grants == std::vector<int>{2, 2, 9});
  CHECK(fairShare(jobs, 0) == std::vector<int>{0, 0, 0});
  // Weights: share = allocated / weight.
  std::vector<SubJobShare> weighted = {{"heavy", 10, 0, 3.0}, {"light", 10, 0, 1.0}};
  CHECK(fairShare(weighted, 4) == std::vector<int>{3, 1});
}

TEST_CASE("all-or-none requests: owed in one piece or not at all, the rest shared again", "[unit][sched]") {
  auto fair = [](const std::vector<SubJobShare>& s, int n) { return fairShare(s, n); };
  // 4 free of 10: A (atomic) owed 3, B owed 5. Fair share gives 2 and 2: A's 2 are not its 3,
  // so A gets none and B gets all 4.
  std::vector<SubJobShare> jobs{{"A", 3, 0, 1}, {"B", 5, 0, 1}};
  auto grants = fairShare(jobs, 4);
  REQUIRE(grants == std::vector<int>{2, 2});
  CHECK(withAllOrNone(jobs, {true, false}, grants, 4, 10, fair) == std::vector<int>{0, 4});
  // With 8 free A is owed 3 and gets 3.
  grants = fairShare(jobs, 8);
  CHECK(withAllOrNone(jobs, {true, false}, grants, 8, 10, fair) == grants);
  // Owed is capped by the site: asking 50 of a 10-container site holding 4, owed is 6.
  std::vector<SubJobShare> big{{"A", 50, 4, 1}};
  CHECK(withAllOrNone(big, {true}, fairShare(big, 6), 6, 10, fair) == std::vector<int>{6});
  CHECK(withAllOrNone(big, {true}, fairShare(big, 5), 5, 10, fair) == std::vector<int>{0});
  // Not marked: unchanged.
  CHECK(withAllOrNone(jobs, {false, false}, {2, 2}, 4, 10, fair) == std::vector<int>{2, 2});
}
