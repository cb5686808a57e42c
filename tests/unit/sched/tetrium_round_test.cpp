#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <numeric>
#include <random>

#include "sched/tetrium_round.h"

using namespace tellus::sched;

namespace {

// Tetrium §2.2, second example: 3 sites with 3 slots and 1 GB/s each way; 100 MB, 1 s tasks.
std::vector<SiteResources> threeSmallSites() { return {{"1", 3, 1, 1}, {"2", 3, 1, 1}, {"3", 3, 1, 1}}; }
TetriumJob mapJob(std::string id, std::vector<int> tasksPerSite, int remainingStages = 1) {
  TetriumJob job;
  job.id = std::move(id);
  job.remainingStages = remainingStages;
  job.kind = StageKind::kMap;
  for (int t : tasksPerSite) job.map.inputGB.push_back(0.1 * t);
  job.map.tasks = std::accumulate(tasksPerSite.begin(), tasksPerSite.end(), 0);
  job.map.taskS = 1.0;
  return job;
}

}  // namespace

TEST_CASE("Tetrium 2.2 two jobs: job-1 first, job-2 placed 6/4/2, average 1.7 s", "[unit][sched][tetrium]") {
  const std::vector<TetriumJob> jobs = {mapJob("job-1", {0, 1, 2}), mapJob("job-2", {2, 4, 6})};
  auto round = tetriumSchedulingRound(threeSmallSites(), jobs);
  REQUIRE(round.isOk());
  CHECK(round->order == std::vector<std::size_t>{0, 1});
  REQUIRE(round->allocations.size() == 2);
  const JobAllocation& first = round->allocations[0];
  const JobAllocation& second = round->allocations[1];
  CHECK(first.tasksAtSite == std::vector<int>{0, 1, 2});
  CHECK(first.slots == std::vector<int>{0, 1, 2});
  CHECK(first.estimatedCompletionS == Approx(1.0));
  CHECK(second.tasksAtSite == std::vector<int>{6, 4, 2});
  CHECK(second.slots == std::vector<int>{3, 2, 1});
  CHECK(second.times.transferS == Approx(0.4));  // 4 remote tasks of 100 MB into site 1
  CHECK(second.estimatedCompletionS == Approx(2.4));
  CHECK((first.estimatedCompletionS + second.estimatedCompletionS) / 2 == Approx(1.7));
  CHECK(round->waiting.empty());
}

TEST_CASE("Tetrium 2.2 two jobs in the opposite order average 2.65 s", "[unit][sched][tetrium]") {
  // More remaining stages put job-1 behind job-2 (§4.1 orders by stages first).
  const std::vector<TetriumJob> jobs = {mapJob("job-1", {0, 1, 2}, 2), mapJob("job-2", {2, 4, 6}, 1)};
  auto round = tetriumSchedulingRound(threeSmallSites(), jobs);
  REQUIRE(round.isOk());
  CHECK(round->order == std::vector<std::size_t>{1, 0});
  REQUIRE(round->allocations.size() == 2);
  CHECK(round->allocations[0].tasksAtSite == std::vector<int>{2, 4, 6});
  CHECK(round->allocations[0].estimatedCompletionS == Approx(2.0));
  CHECK(round->allocations[1].tasksAtSite == std::vector<int>{3, 0, 0});
  CHECK(round->allocations[1].estimatedCompletionS == Approx(3.3));
}

TEST_CASE("job order: fewest remaining stages, then shortest remaining time", "[unit][sched][tetrium]") {
  CHECK(tetriumJobOrder({{2, 1.0}, {1, 50.0}, {1, 3.0}, {3, 0.1}, {1, 3.0}}) ==
        std::vector<std::size_t>{2, 4, 1, 0, 3});
}

TEST_CASE("the round never hands out more slots than are free and stops when they run out", "[unit][sched][tetrium]") {
  std::mt19937 rng(3);
  for (int instance = 0; instance < 30; ++instance) {
    std::vector<SiteResources> sites;
    for (int x = 0; x < 4; ++x) {
      sites.push_back({std::to_string(x), static_cast<int>(rng() % 8), 0.5 + rng() % 4, 0.5 + rng() % 4});
    }
    sites[0].slots = std::max(sites[0].slots, 1);
    std::vector<TetriumJob> jobs;
    for (int j = 0; j < 6; ++j) {
      std::vector<int> perSite;
      for (int x = 0; x < 4; ++x) perSite.push_back(static_cast<int>(rng() % 10));
      jobs.push_back(mapJob(fmt::format("j{}", j), perSite, 1 + static_cast<int>(rng() % 3)));
    }
    for (double epsilon : {1.0, 0.5, 0.0}) {
      auto round = tetriumSchedulingRound(sites, jobs, TetriumRoundOptions{{}, epsilon});
      REQUIRE(round.isOk());
      std::vector<int> used(4, 0);
      for (const JobAllocation& a : round->allocations) {
        int tasks = 0;
        for (int x = 0; x < 4; ++x) {
          used[x] += a.slots[x];
          tasks += a.tasksAtSite[x];
          if (a.tasksAtSite[x] > 0) CHECK(a.slots[x] > 0);  // no tasks where it got no slot
        }
        CHECK(tasks == jobs[a.job].map.tasks);
      }
      for (int x = 0; x < 4; ++x) CHECK(used[x] <= sites[x].slots);
      CHECK(round->allocations.size() + round->waiting.size() == jobs.size());
    }
  }
}

TEST_CASE("epsilon-fairness keeps slots for the jobs behind", "[unit][sched][tetrium]") {
  // One big job first in order would take every slot; with ε = 0 the second keeps its share.
  const std::vector<SiteResources> sites = {{"a", 10, 1, 1}};
  std::vector<TetriumJob> jobs = {mapJob("small-first", {30}, 1), mapJob("later", {10}, 2)};
  jobs[0].map.inputGB = {0};
  jobs[1].map.inputGB = {0};
  auto greedy = tetriumSchedulingRound(sites, jobs, TetriumRoundOptions{{}, 1.0});
  REQUIRE(greedy.isOk());
  CHECK(greedy->allocations.size() == 1);
  CHECK(greedy->waiting == std::vector<std::size_t>{1});
  auto fair = tetriumSchedulingRound(sites, jobs, TetriumRoundOptions{{}, 0.0});
  REQUIRE(fair.isOk());
  REQUIRE(fair->allocations.size() == 2);
  // Shares of 10 slots by remaining tasks 30:10 -> 7.5 and 2.5.
  CHECK(fair->allocations[0].slots == std::vector<int>{7});
  CHECK(fair->allocations[1].slots == std::vector<int>{3});
  CHECK_FALSE(tetriumSchedulingRound(sites, jobs, TetriumRoundOptions{{}, 2.0}).isOk());
}
