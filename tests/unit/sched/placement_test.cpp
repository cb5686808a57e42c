#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <random>

#include "sched/placement.h"

using namespace tellus::sched;

namespace {

// Tetrium §2.2, Figure 4: slots 40/10/20, up 5/1/2 GB/s, down 5/1/5 GB/s, input 20/30/50 GB;
// 1000 map tasks of 100 MB and 2 s, output half the input; 500 reduce tasks of 1 s.
std::vector<SiteResources> figure4Sites() {
  return {{"site-1", 40, 5, 5}, {"site-2", 10, 1, 1}, {"site-3", 20, 2, 5}};
}
MapStage figure4Map() { return MapStage{{20, 30, 50}, 1000, 2.0}; }

// Shuffle data after a map placement: each task writes half of its 100 MB.
std::vector<double> shuffleOf(const std::vector<std::vector<int>>& tasks) {
  std::vector<double> shuffle(tasks.size(), 0.0);
  for (std::size_t x = 0; x < tasks.size(); ++x)
    for (std::size_t y = 0; y < tasks.size(); ++y) shuffle[y] += 0.05 * tasks[x][y];
  return shuffle;
}

int total(const std::vector<int>& v) { return std::accumulate(v.begin(), v.end(), 0); }

}  // namespace

TEST_CASE("Tetrium 2.2: the paper's Iridium placement evaluates to 88.5 s", "[unit][sched][placement]") {
  const auto sites = figure4Sites();
  const std::vector<std::vector<int>> map = {{200, 0, 0}, {0, 300, 0}, {0, 0, 500}};
  const StageTimes mapTimes = evaluateMap(sites, figure4Map(), map);
  CHECK(mapTimes.transferS == Approx(0));
  CHECK(mapTimes.computeS == Approx(60));  // site 2: 2 s * ceil(300/10)
  const ReduceStage reduce{shuffleOf(map), 500, 1.0};
  CHECK(reduce.shuffleGB == std::vector<double>{10, 15, 25});
  const StageTimes reduceTimes = evaluateReduce(sites, reduce, {0, 150, 350});
  CHECK(reduceTimes.transferS == Approx(10.5));  // site 2: (10+25 GB)*0.3 / 1 GB/s
  CHECK(reduceTimes.computeS == Approx(18));     // site 3: 1 s * ceil(350/20)
  CHECK(mapTimes.totalS() + reduceTimes.totalS() == Approx(88.5));
}

TEST_CASE("Tetrium 2.2: the paper's better placement evaluates to 59.83 s", "[unit][sched][placement]") {
  const auto sites = figure4Sites();
  // 15.7 GB (157 tasks) from site 2 and 21.4 GB (214 tasks) from site 3 run at site 1.
  const std::vector<std::vector<int>> map = {{200, 0, 0}, {157, 143, 0}, {214, 0, 286}};
  const StageTimes mapTimes = evaluateMap(sites, figure4Map(), map);
  CHECK(mapTimes.transferS == Approx(15.7));
  CHECK(mapTimes.computeS == Approx(30));
  const ReduceStage reduce{shuffleOf(map), 500, 1.0};
  const StageTimes reduceTimes = evaluateReduce(sites, reduce, {286, 71, 143});
  CHECK(reduceTimes.transferS == Approx(6.13).margin(0.01));
  CHECK(reduceTimes.computeS == Approx(8));
  CHECK(mapTimes.totalS() + reduceTimes.totalS() == Approx(59.83).margin(0.01));
}

TEST_CASE("Tetrium 2.2: centralized takes 93 s and Iridium's reduce LP finds the 10.5 s shuffle", "[unit][sched][placement]") {
  const auto sites = figure4Sites();
  auto map = centralizedMap(sites, figure4Map());
  REQUIRE(map.isOk());
  CHECK(map->tasksAtSite == std::vector<int>{1000, 0, 0});
  CHECK(map->times.transferS == Approx(30));  // 30 GB over site 2's 1 GB/s uplink
  CHECK(map->times.computeS == Approx(50));
  auto reduce = centralizedReduce(sites, ReduceStage{shuffleOf(map->tasks), 500, 1.0});
  REQUIRE(reduce.isOk());
  CHECK(reduce->times.transferS == Approx(0));
  CHECK(reduce->times.computeS == Approx(13));
  CHECK(map->times.totalS() + reduce->times.totalS() == Approx(93));

  auto local = inPlaceMap(sites, figure4Map());
  REQUIRE(local.isOk());
  CHECK(local->tasksAtSite == std::vector<int>{200, 300, 500});
  CHECK(local->wanGB == Approx(0));
  auto iridium = iridiumReduce(sites, ReduceStage{shuffleOf(local->tasks), 500, 1.0});
  REQUIRE(iridium.isOk());
  CHECK(iridium->lpTimes.transferS == Approx(10.5));
  CHECK(iridium->fraction[1] == Approx(0.3));
  CHECK(total(iridium->tasks) == 500);
}

TEST_CASE("Tetrium 2.2: the map and reduce LPs do at least as well as the paper's better placement", "[unit][sched][placement]") {
  const auto sites = figure4Sites();
  auto map = tetriumMap(sites, figure4Map());
  REQUIRE(map.isOk());
  CHECK(total(map->tasksAtSite) == 1000);
  for (std::size_t x = 0; x < 3; ++x) {
    CHECK(total(map->tasks[x]) == std::vector<int>{200, 300, 500}[x]);  // rows keep the data's tasks
  }
  auto reduce = tetriumReduce(sites, ReduceStage{shuffleOf(map->tasks), 500, 1.0});
  REQUIRE(reduce.isOk());
  CHECK(total(reduce->tasks) == 500);
  const double lpTotal = map->lpTimes.totalS() + reduce->lpTimes.totalS();
  const double evaluated = map->times.totalS() + reduce->times.totalS();
  INFO("LP map " << map->lpTimes.transferS << "+" << map->lpTimes.computeS << ", reduce " << reduce->lpTimes.transferS
                 << "+" << reduce->lpTimes.computeS << "; integer " << evaluated);
  CHECK(lpTotal <= 59.83);
  CHECK(evaluated <= 59.83);
  // The map LP alone beats the better placement's map stage (15.7 + 30 s).
  CHECK(map->lpTimes.totalS() <= 45.7 + 1e-9);
}

TEST_CASE("largest-remainder apportionment keeps the total exact", "[unit][sched][placement]") {
  CHECK(proportionalToData({20, 30, 50}, 1000) == std::vector<int>{200, 300, 500});
  CHECK(proportionalToData({1, 1, 1}, 10) == std::vector<int>{4, 3, 3});
  CHECK(proportionalToData({0, 0}, 5) == std::vector<int>{3, 2});
  CHECK(proportionalToData({0.1, 0.3, 0.6}, 0) == std::vector<int>{0, 0, 0});
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> weight(0, 100);
  for (int round = 0; round < 200; ++round) {
    std::vector<double> w(1 + rng() % 8);
    for (double& v : w) v = weight(rng);
    const int n = static_cast<int>(rng() % 1000);
    const std::vector<int> counts = proportionalToData(w, n);
    REQUIRE(total(counts) == n);
    const double sum = std::accumulate(w.begin(), w.end(), 0.0);
    for (std::size_t i = 0; i < w.size(); ++i) CHECK(std::abs(counts[i] - w[i] / sum * n) < 1.0);
  }
}

TEST_CASE("controlled matrix rounding keeps row sums and column sums within one", "[unit][sched][placement]") {
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> value(0, 5);
  for (int round = 0; round < 200; ++round) {
    const std::size_t rows = 1 + rng() % 6, columns = 1 + rng() % 6;
    std::vector<std::vector<double>> cells(rows, std::vector<double>(columns));
    for (auto& row : cells) {
      double sum = 0;
      for (double& v : row) sum += (v = value(rng));
      // Make the row sum integral, as the contract requires.
      const double target = std::ceil(sum);
      row[0] += target - sum;
    }
    const auto rounded = roundMatrixKeepingSums(cells);
    for (std::size_t j = 0; j < columns; ++j) {
      double fractional = 0;
      int integer = 0;
      for (std::size_t i = 0; i < rows; ++i) {
        fractional += cells[i][j];
        integer += rounded[i][j];
        REQUIRE(std::abs(rounded[i][j] - cells[i][j]) < 1.0 + 1e-9);
      }
      CHECK(integer >= std::floor(fractional + 1e-6));
      CHECK(integer <= std::ceil(fractional - 1e-6));
    }
    for (std::size_t i = 0; i < rows; ++i) {
      const double sum = std::accumulate(cells[i].begin(), cells[i].end(), 0.0);
      CHECK(total(rounded[i]) == std::llround(sum));
    }
  }
}

namespace {

std::vector<SiteResources> randomSites(std::mt19937& rng, std::size_t n) {
  std::vector<SiteResources> sites(n);
  for (std::size_t x = 0; x < n; ++x) {
    sites[x] = SiteResources{fmt::format("s{}", x), static_cast<int>(1 + rng() % 20),
                             0.5 + (rng() % 100) / 20.0, 0.5 + (rng() % 100) / 20.0};
  }
  return sites;
}

}  // namespace

TEST_CASE("property: the map LP optimum is never worse than any placement on a grid", "[unit][sched][placement]") {
  std::mt19937 rng(20240601);
  for (int instance = 0; instance < 40; ++instance) {
    const auto sites = randomSites(rng, 2 + rng() % 2);
    const std::size_t n = sites.size();
    MapStage stage{std::vector<double>(n), static_cast<int>(10 + rng() % 500), 0.5 + (rng() % 40) / 10.0};
    for (double& v : stage.inputGB) v = static_cast<double>(rng() % 50);
    if (std::accumulate(stage.inputGB.begin(), stage.inputGB.end(), 0.0) == 0) stage.inputGB[0] = 1;
    auto lp = tetriumMap(sites, stage);
    REQUIRE(lp.isOk());
    const double total = std::accumulate(stage.inputGB.begin(), stage.inputGB.end(), 0.0);
    // Each row x splits its share I_x/I over the sites in steps of a sixth.
    const int steps = 6;
    std::vector<std::vector<int>> splits;  // all compositions of `steps` into n parts
    std::vector<int> part(n, 0);
    std::function<void(std::size_t, int)> compose = [&](std::size_t i, int left) {
      if (i + 1 == n) {
        part[i] = left;
        splits.push_back(part);
        return;
      }
      for (int k = 0; k <= left; ++k) {
        part[i] = k;
        compose(i + 1, left - k);
      }
    };
    compose(0, steps);
    std::vector<std::size_t> choice(n, 0);
    double bestGrid = std::numeric_limits<double>::infinity();
    while (true) {
      std::vector<std::vector<double>> fraction(n, std::vector<double>(n));
      for (std::size_t x = 0; x < n; ++x)
        for (std::size_t y = 0; y < n; ++y)
          fraction[x][y] = stage.inputGB[x] / total * splits[choice[x]][y] / steps;
      bestGrid = std::min(bestGrid, evaluateMapFractions(sites, stage, fraction).totalS());
      std::size_t x = 0;
      while (x < n && ++choice[x] == splits.size()) choice[x++] = 0;
      if (x == n) break;
    }
    INFO("instance " << instance);
    CHECK(lp->lpTimes.totalS() <= bestGrid + 1e-6);
    // The LP's own fractions evaluate to its objective (model consistency).
    CHECK(evaluateMapFractions(sites, stage, lp->fraction).totalS() == Approx(lp->lpTimes.totalS()).margin(1e-6));
    // Integer placement: exact totals, rows = proportional-to-data counts, nothing on 0 slots.
    const std::vector<int> rows = proportionalToData(stage.inputGB, stage.tasks);
    int placed = 0;
    for (std::size_t x = 0; x < n; ++x) {
      CHECK(std::accumulate(lp->tasks[x].begin(), lp->tasks[x].end(), 0) == rows[x]);
      placed += lp->tasksAtSite[x];
    }
    CHECK(placed == stage.tasks);
  }
}

TEST_CASE("property: the reduce LP optimum is never worse than any placement on a grid", "[unit][sched][placement]") {
  std::mt19937 rng(99);
  for (int instance = 0; instance < 60; ++instance) {
    const auto sites = randomSites(rng, 3);
    ReduceStage stage{{static_cast<double>(rng() % 30), static_cast<double>(rng() % 30),
                       static_cast<double>(rng() % 30)},
                      static_cast<int>(1 + rng() % 300), 0.2 + (rng() % 30) / 10.0};
    auto lp = tetriumReduce(sites, stage);
    REQUIRE(lp.isOk());
    double bestGrid = std::numeric_limits<double>::infinity();
    const int steps = 40;
    for (int a = 0; a <= steps; ++a) {
      for (int b = 0; a + b <= steps; ++b) {
        const std::vector<double> r = {double(a) / steps, double(b) / steps, double(steps - a - b) / steps};
        bestGrid = std::min(bestGrid, evaluateReduceFractions(sites, stage, r).totalS());
      }
    }
    INFO("instance " << instance);
    CHECK(lp->lpTimes.totalS() <= bestGrid + 1e-6);
    CHECK(total(lp->tasks) == stage.tasks);
  }
}

TEST_CASE("the WAN budget rho limits the data a placement moves", "[unit][sched][placement]") {
  const auto sites = figure4Sites();
  auto free = tetriumMap(sites, figure4Map(), TetriumOptions{1.0});
  auto none = tetriumMap(sites, figure4Map(), TetriumOptions{0.0});
  auto some = tetriumMap(sites, figure4Map(), TetriumOptions{0.2});
  REQUIRE(free.isOk());
  REQUIRE(none.isOk());
  REQUIRE(some.isOk());
  CHECK(free->wanGB > 20);
  CHECK(none->wanGB == Approx(0).margin(1e-9));
  CHECK(none->tasksAtSite == std::vector<int>{200, 300, 500});
  // ρ = 0.2 of 100 GB: at most 20 GB may cross (up to rounding of one task per cell).
  CHECK(some->wanGB <= 20 + 0.5);
  CHECK(some->lpTimes.totalS() >= free->lpTimes.totalS() - 1e-9);
  CHECK(some->lpTimes.totalS() <= none->lpTimes.totalS() + 1e-9);

  const ReduceStage reduce{{10, 15, 25}, 500, 1.0};
  auto reduceNone = tetriumReduce(sites, reduce, TetriumOptions{0.0});
  REQUIRE(reduceNone.isOk());
  // W_min: everything reduces where the most shuffle data is (site 3): 25 GB cross.
  CHECK(reduceNone->wanGB == Approx(25).margin(0.1));
  CHECK_FALSE(tetriumReduce(sites, reduce, TetriumOptions{1.5}).isOk());
}

TEST_CASE("bad stage input gets an error naming the field", "[unit][sched][placement]") {
  const auto sites = figure4Sites();
  auto wrongSize = tetriumMap(sites, MapStage{{1, 2}, 10, 1});
  REQUIRE_FALSE(wrongSize.isOk());
  CHECK_THAT(wrongSize.message(), Catch::Contains("input_gb") && Catch::Contains("2 values for 3 sites"));
  auto negative = tetriumReduce(sites, ReduceStage{{1, -2, 3}, 10, 1});
  REQUIRE_FALSE(negative.isOk());
  CHECK_THAT(negative.message(), Catch::Contains("site 'site-2'"));
  std::vector<SiteResources> noSlots = {{"a", 0, 1, 1}};
  CHECK_FALSE(tetriumMap(noSlots, MapStage{{1}, 10, 1}).isOk());
}

TEST_CASE("an LP without a solution is reported naming the site at fault", "[unit][sched][placement]") {
  // c holds input, has no slots and no uplink: its tasks can neither run there nor leave.
  const std::vector<SiteResources> sites = {{"a", 1, 1, 1}, {"b", 1, 1, 1}, {"c", 0, 0, 1}};
  auto map = tetriumMap(sites, MapStage{{10, 10, 10}, 3, 1});
  REQUIRE_FALSE(map.isOk());
  CHECK(map.message() ==
        "tetrium map LP: site 'c' holds 10 GB of map input but has no slots and a 0 Gbps uplink: its input can "
        "neither be processed there nor leave");
  CHECK(tetriumMapLpTimes(sites, MapStage{{10, 10, 10}, 3, 1}).message() == map.message());
  // With an uplink, rho = 0 forbids the 10 GB that has to leave c.
  const std::vector<SiteResources> open = {{"a", 1, 1, 1}, {"b", 1, 1, 1}, {"c", 0, 1, 1}};
  auto budget = tetriumMap(open, MapStage{{10, 10, 10}, 3, 1}, TetriumOptions{0.0});
  REQUIRE_FALSE(budget.isOk());
  CHECK_THAT(budget.message(), Catch::Contains("site 'c' holds 10 GB"));
  // Reduce: a's shuffle data cannot leave (uplink 0), so every task must run at a, which has none.
  const std::vector<SiteResources> reduceSites = {{"a", 0, 0, 1}, {"b", 1, 1, 1}};
  auto reduce = tetriumReduce(reduceSites, ReduceStage{{10, 10}, 3, 1});
  REQUIRE_FALSE(reduce.isOk());
  CHECK(reduce.message() ==
        "tetrium reduce LP: site 'a' holds 10 GB of shuffle data behind a 0 Gbps uplink, so every reduce task must "
        "run there, but it has no slots");
  auto twoPinned = iridiumReduce({{"a", 1, 0, 1}, {"b", 1, 0, 1}}, ReduceStage{{10, 10}, 3, 1});
  REQUIRE_FALSE(twoPinned.isOk());
  CHECK_THAT(twoPinned.message(), Catch::Contains("site 'a' and site 'b'"));
}

namespace {

// Every way to put `tasks` (per source row) on the sites, as integer matrices.
void forEachMapPlacement(const std::vector<int>& rows, std::size_t x, std::vector<std::vector<int>>& cells,
                         const std::function<void()>& visit) {
  const std::size_t n = rows.size();
  if (x == n) return visit();
  std::function<void(std::size_t, int)> fill = [&](std::size_t y, int left) {
    if (y + 1 == n) {
      cells[x][y] = left;
      forEachMapPlacement(rows, x + 1, cells, visit);
      return;
    }
    for (int k = 0; k <= left; ++k) {
      cells[x][y] = k;
      fill(y + 1, left - k);
    }
  };
  fill(0, rows[x]);
}

void forEachSplit(int tasks, std::size_t n, std::vector<int>& counts, std::size_t at, const std::function<void()>& visit) {
  if (at + 1 == n) {
    counts[at] = tasks;
    return visit();
  }
  for (int k = 0; k <= tasks; ++k) {
    counts[at] = k;
    forEachSplit(tasks - k, n, counts, at + 1, visit);
  }
}

}  // namespace

TEST_CASE("property: an LP policy fails exactly when no integer placement finishes, naming a site (brute force)",
          "[unit][sched][placement]") {
  std::mt19937 rng(4141);
  int failures = 0, successes = 0;
  for (int instance = 0; instance < 1500; ++instance) {
    const std::size_t n = 2 + rng() % 2;
    std::vector<SiteResources> sites;
    std::vector<double> data(n);
    for (std::size_t x = 0; x < n; ++x) {
      sites.push_back({fmt::format("s{}", x), static_cast<int>(rng() % 3), static_cast<double>(rng() % 3),
                       static_cast<double>(rng() % 3)});
      data[x] = rng() % 3 == 0 ? 0.0 : static_cast<double>(1 + rng() % 4);
    }
    if (std::all_of(sites.begin(), sites.end(), [](const SiteResources& s) { return s.slots == 0; })) sites[0].slots = 1;
    const int tasks = static_cast<int>(n) + static_cast<int>(rng() % 2);
    const double rho = std::array<double, 3>{1.0, 0.5, 0.0}[rng() % 3];
    const double totalGB = std::accumulate(data.begin(), data.end(), 0.0);
    INFO("instance " << instance << " rho " << rho);

    // Map: some integer placement within the budget finishes <=> tetrium succeeds.
    const MapStage map{data, tasks, 1.0};
    const std::vector<int> rows = mapTasksPerSource(data, tasks);
    std::vector<std::vector<int>> cells(n, std::vector<int>(n, 0));
    bool mapFinishes = false;
    forEachMapPlacement(rows, 0, cells, [&] {
      double wan = 0;
      for (std::size_t x = 0; x < n; ++x)
        for (std::size_t y = 0; y < n; ++y)
          if (x != y && rows[x] > 0) wan += data[x] / rows[x] * cells[x][y];
      if (wan <= rho * totalGB + 1e-9 && std::isfinite(evaluateMap(sites, map, cells).totalS())) mapFinishes = true;
    });
    auto placedMap = tetriumMap(sites, map, TetriumOptions{rho});
    CHECK(placedMap.isOk() == mapFinishes);
    if (!placedMap.isOk()) CHECK_THAT(placedMap.message(), Catch::Contains("site 's"));

    // Reduce (tetrium: slots count; iridium: shuffle only, without a budget).
    const ReduceStage reduce{data, tasks, 1.0};
    double largest = *std::max_element(data.begin(), data.end());
    const double budget = (totalGB - largest) + rho * largest;
    std::vector<int> counts(n, 0);
    bool reduceFinishes = false, shuffleFinishes = false;
    forEachSplit(tasks, n, counts, 0, [&] {
      double wan = 0;
      for (std::size_t x = 0; x < n; ++x) wan += data[x] * (1.0 - static_cast<double>(counts[x]) / tasks);
      const StageTimes times = evaluateReduce(sites, reduce, counts);
      if (wan <= budget + 1e-9 && std::isfinite(times.totalS())) reduceFinishes = true;
      if (std::isfinite(times.transferS)) shuffleFinishes = true;
    });
    auto placedReduce = tetriumReduce(sites, reduce, TetriumOptions{rho});
    CHECK(placedReduce.isOk() == reduceFinishes);
    if (!placedReduce.isOk()) CHECK_THAT(placedReduce.message(), Catch::Contains("site 's"));
    auto iridium = iridiumReduce(sites, reduce);
    CHECK(iridium.isOk() == shuffleFinishes);
    if (!iridium.isOk()) CHECK_THAT(iridium.message(), Catch::Contains("site 's"));
    (placedMap.isOk() ? successes : failures) += 1;
  }
  CHECK(failures > 100);
  CHECK(successes > 100);
}

TEST_CASE("a given task split must cover every site holding input", "[unit][sched][placement]") {
  const std::vector<SiteResources> sites{{"a", 1, 1, 1}, {"b", 1, 1, 1}};
  auto unread = tetriumMap(sites, MapStage{{1, 1}, 2, 1, {2, 0}});
  REQUIRE_FALSE(unread.isOk());
  CHECK(unread.message() == "map stage: site 'b' holds input but no task reads it");
  auto wrongSum = inPlaceMap(sites, MapStage{{1, 1}, 3, 1, {1, 1}});
  REQUIRE_FALSE(wrongSum.isOk());
  CHECK(wrongSum.message() == "map stage: tasks per source sum to 2, not the stage's 3 tasks");
}

TEST_CASE("task ordering: remote first, slow uplinks first, spread across sources", "[unit][sched][placement]") {
  const std::vector<SiteResources> sites = {{"a", 10, 5, 5}, {"b", 10, 1, 5}, {"c", 10, 2, 5}};
  // Site a runs 2 local tasks, 2 from b (slowest uplink), 3 from c.
  const std::vector<std::vector<int>> tasks = {{2, 0, 0}, {2, 1, 0}, {3, 0, 1}};
  const auto order = orderMapTasks(sites, tasks);
  CHECK(order[0] == std::vector<int>{1, 2, 1, 2, 2, 0, 0});
  CHECK(order[1] == std::vector<int>{1});
  CHECK(order[2] == std::vector<int>{2});
  CHECK(orderReduceTasks({1.0, 3.0, 2.0, 3.0}) == std::vector<std::size_t>{1, 3, 2, 0});
}

TEST_CASE("k-site reassignment matches exhaustive search and respects k", "[unit][sched][placement]") {
  auto r = reassignKSites({10, 10, 10, 10}, {4, 12, 12, 12}, 2);
  REQUIRE(r.isOk());
  CHECK(r->changed.size() <= 2);
  CHECK(total(r->tasks) == 40);
  // Best with 2 sites: site 0 and one other share their 20 tasks against ideals 4 and 12 as
  // (6, 14): Q^2 = 4 + 4 + (10-12)^2 + (10-12)^2 = 16.
  CHECK(r->distance == Approx(4.0));
  CHECK(r->exhaustive);

  std::mt19937 rng(5);
  for (int round = 0; round < 100; ++round) {
    const std::size_t n = 2 + rng() % 4;
    std::vector<int> current(n), ideal(n, 0);
    for (int& v : current) v = static_cast<int>(rng() % 10);
    // ideal with the same total
    int left = total(current);
    for (std::size_t i = 0; i + 1 < n; ++i) {
      ideal[i] = left > 0 ? static_cast<int>(rng() % (left + 1)) : 0;
      left -= ideal[i];
    }
    ideal[n - 1] = left;
    const int k = static_cast<int>(rng() % (n + 1));
    auto got = reassignKSites(current, ideal, k);
    REQUIRE(got.isOk());
    CHECK(total(got->tasks) == total(current));
    CHECK(got->changed.size() <= static_cast<std::size_t>(k));
    // Brute force: every vector with the same total, >= 0, differing in <= k places.
    double best = std::numeric_limits<double>::infinity();
    std::vector<int> candidate(n, 0);
    std::function<void(std::size_t, int)> search = [&](std::size_t i, int remaining) {
      if (i + 1 == n) {
        candidate[i] = remaining;
        int changed = 0;
        double q = 0;
        for (std::size_t j = 0; j < n; ++j) {
          changed += candidate[j] != current[j];
          q += std::pow(candidate[j] - ideal[j], 2);
        }
        if (changed <= k) best = std::min(best, q);
        return;
      }
      for (int v = 0; v <= remaining; ++v) {
        candidate[i] = v;
        search(i + 1, remaining - v);
      }
    };
    search(0, total(current));
    CHECK(got->distance == Approx(std::sqrt(best)));
  }
}

TEST_CASE("property: the combinatorial LP optimum used for ranking equals Clp's", "[unit][sched][placement]") {
  std::mt19937 rng(777);
  for (int instance = 0; instance < 300; ++instance) {
    const std::size_t n = 1 + rng() % 8;
    auto sites = randomSites(rng, n);
    // Some sites without slots or without a link direction.
    for (auto& s : sites) {
      if (rng() % 6 == 0) s.slots = 0;
      if (rng() % 8 == 0) s.upGBps = 0;
      if (rng() % 8 == 0) s.downGBps = 0;
    }
    std::vector<double> data(n);
    for (double& v : data) v = rng() % 3 == 0 ? 0.0 : static_cast<double>(rng() % 60);
    const MapStage map{data, static_cast<int>(1 + rng() % 900), 0.1 + (rng() % 50) / 10.0};
    const ReduceStage reduce{data, static_cast<int>(1 + rng() % 400), 0.1 + (rng() % 50) / 10.0};
    INFO("instance " << instance);
    auto clpMap = tetriumMap(sites, map);
    auto fastMap = tetriumMapLpTimes(sites, map);
    CHECK(clpMap.isOk() == fastMap.isOk());
    if (clpMap.isOk() && fastMap.isOk()) {
      CHECK(fastMap->totalS() == Approx(clpMap->lpTimes.totalS()).epsilon(1e-6).margin(1e-9));
    }
    auto clpReduce = tetriumReduce(sites, reduce);
    auto fastReduce = tetriumReduceLpTimes(sites, reduce);
    CHECK(clpReduce.isOk() == fastReduce.isOk());
    if (clpReduce.isOk() && fastReduce.isOk()) {
      CHECK(fastReduce->totalS() == Approx(clpReduce->lpTimes.totalS()).epsilon(1e-6).margin(1e-9));
    }
  }
}
