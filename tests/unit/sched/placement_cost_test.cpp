// Tetrium's placement with a cost weight: time + weight·money (TetriumOptions::costWeightSPerUnit).
#include <fmt/format.h>

#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "sched/placement.h"

using namespace tellus::sched;

namespace {

// Tetrium §2.2, Figure 4 (as in placement_test.cpp): the time-only LP moves map input.
std::vector<SiteResources> figure4Sites() { return {{"site-1", 40, 5, 5}, {"site-2", 10, 1, 1}, {"site-3", 20, 2, 5}}; }
MapStage figure4Map() { return MapStage{{20, 30, 50}, 1000, 2.0}; }

std::vector<SitePrices> uniformPrices(std::size_t n, double containerHour, double egressGB) {
  std::vector<SitePrices> prices(n);
  for (auto& p : prices) {
    p.containerHour = containerHour;
    p.egressGB.assign(n, egressGB);
  }
  return prices;
}

TetriumOptions weighted(double weight, std::vector<SitePrices> prices) {
  TetriumOptions options;
  options.costWeightSPerUnit = weight;
  options.prices = std::move(prices);
  return options;
}

std::vector<SiteResources> randomSites(std::mt19937& rng, std::size_t n) {
  std::uniform_int_distribution<int> slots(1, 40);
  std::uniform_real_distribution<double> bandwidth(0.2, 5.0);
  std::vector<SiteResources> sites;
  for (std::size_t x = 0; x < n; ++x) sites.push_back({fmt::format("s{}", x), slots(rng), bandwidth(rng), bandwidth(rng)});
  return sites;
}

std::vector<SitePrices> randomPrices(std::mt19937& rng, std::size_t n) {
  std::uniform_real_distribution<double> container(0.0, 4.0), egress(0.0, 0.2);
  std::vector<SitePrices> prices(n);
  for (auto& p : prices) {
    p.containerHour = container(rng);
    for (std::size_t y = 0; y < n; ++y) p.egressGB.push_back(egress(rng));
  }
  return prices;
}

std::vector<double> randomData(std::mt19937& rng, std::size_t n) {
  std::uniform_real_distribution<double> gb(0.0, 60.0);
  std::vector<double> data;
  for (std::size_t x = 0; x < n; ++x) data.push_back(gb(rng));
  return data;
}

}  // namespace

TEST_CASE("placement money: container task-seconds and the sender's egress per pair", "[unit][sched][placement][cost]") {
  std::vector<SitePrices> prices(2);
  prices[0] = {3.6, {0, 0.5}};  // 0.001 per task-second; 0.5 per GB sent to site 1
  prices[1] = {7.2, {}};        // sending is free
  // 10 tasks of 100 s; site 0 holds 20 GB read by 4 tasks (5 GB each), site 1 holds 6 GB read by 6.
  const MapStage map{{20, 6}, 10, 100.0};
  // 1 of site 0's tasks and 2 of site 1's run remotely: 5 GB 0->1 at 0.5; 1->0 free.
  const std::vector<std::vector<int>> tasks = {{3, 1}, {2, 4}};
  // containers: 5 tasks at site 0 = 500 s · 0.001 + 5 at site 1 = 500 s · 0.002; egress 5 · 0.5
  CHECK(mapMoney(map, tasks, prices) == Approx(0.5 + 1.0 + 2.5));
  CHECK(mapMoney(map, tasks, {}) == 0.0);

  // Reduce: 4 tasks of 10 s, shuffle 8 GB at site 0, 2 GB at 1; one task (r = 1/4) at site 1
  // fetches 8/4 = 2 GB from site 0 at 0.5.
  const ReduceStage reduce{{8, 2}, 4, 10.0};
  CHECK(reduceMoney(reduce, {3, 1}, prices) == Approx(30 * 0.001 + 10 * 0.002 + 2 * 0.5));
  CHECK(placementObjective(StageTimes{1, 2}, 10, weighted(3, prices)) == Approx(33));
  CHECK(placementObjective(StageTimes{1, 2}, 10, weighted(0, prices)) == 3);
  CHECK(placementObjective(StageTimes{1, 2}, 10, weighted(3, {})) == 3);
}

TEST_CASE("cost weight 0, or no prices, gives exactly the time-only placement", "[unit][sched][placement][cost]") {
  std::mt19937 rng(31337);
  for (int round = 0; round < 40; ++round) {
    const std::size_t n = 2 + rng() % 5;
    const auto sites = randomSites(rng, n);
    const MapStage map{randomData(rng, n), static_cast<int>(n + rng() % 200), 0.5 + rng() % 20};
    const ReduceStage reduce{randomData(rng, n), static_cast<int>(1 + rng() % 200), 0.5 + rng() % 20};
    const auto prices = randomPrices(rng, n);
    for (const TetriumOptions& options : {weighted(0, prices), weighted(50, {})}) {
      auto plain = tetriumMap(sites, map);
      auto priced = tetriumMap(sites, map, options);
      REQUIRE(plain);
      REQUIRE(priced);
      CHECK(priced->tasks == plain->tasks);
      CHECK(priced->times.totalS() == plain->times.totalS());
      CHECK(priced->money == Approx(mapMoney(map, priced->tasks, options.prices)).margin(1e-9));
      auto plainReduce = tetriumReduce(sites, reduce);
      auto pricedReduce = tetriumReduce(sites, reduce, options);
      REQUIRE(plainReduce);
      REQUIRE(pricedReduce);
      CHECK(pricedReduce->tasks == plainReduce->tasks);
      CHECK(pricedReduce->times.totalS() == plainReduce->times.totalS());
    }
  }
}

TEST_CASE("a heavy cost weight moves work off an expensive site", "[unit][sched][placement][cost]") {
  const auto sites = figure4Sites();
  auto prices = uniformPrices(3, 0.1, 0.0);
  prices[0].containerHour = 100;  // site-1, the biggest, is expensive to compute at
  auto fast = tetriumMap(sites, figure4Map());
  REQUIRE(fast);
  REQUIRE(fast->tasksAtSite[0] > 0);
  auto cheap = tetriumMap(sites, figure4Map(), weighted(1000, prices));
  REQUIRE(cheap);
  CHECK(cheap->tasksAtSite[0] == 0);
  CHECK(cheap->money < mapMoney(figure4Map(), fast->tasks, prices));
  CHECK(cheap->times.totalS() >= fast->times.totalS());

  const ReduceStage reduce{{10, 15, 25}, 500, 1.0};
  auto fastReduce = tetriumReduce(sites, reduce);
  REQUIRE(fastReduce);
  REQUIRE(fastReduce->tasks[0] > 0);
  auto cheapReduce = tetriumReduce(sites, reduce, weighted(1000, prices));
  REQUIRE(cheapReduce);
  CHECK(cheapReduce->tasks[0] == 0);
  CHECK(cheapReduce->money < reduceMoney(reduce, fastReduce->tasks, prices));
}

TEST_CASE("a heavy cost weight with expensive egress keeps tasks where their data is", "[unit][sched][placement][cost]") {
  const auto sites = figure4Sites();
  const auto prices = uniformPrices(3, 0.0, 10.0);
  auto fast = tetriumMap(sites, figure4Map());
  REQUIRE(fast);
  REQUIRE(fast->wanGB > 1);  // the time-only LP moves input off site-2
  auto kept = tetriumMap(sites, figure4Map(), weighted(100, prices));
  REQUIRE(kept);
  CHECK(kept->wanGB == 0);
  CHECK(kept->tasks == std::vector<std::vector<int>>{{200, 0, 0}, {0, 300, 0}, {0, 0, 500}});
  CHECK(kept->money == 0);

  // A reduce always moves shuffle data; with egress alone priced, the least is moved by running
  // every task where most of it is.
  const ReduceStage reduce{{10, 15, 25}, 500, 1.0};
  auto gathered = tetriumReduce(sites, reduce, weighted(100, prices));
  REQUIRE(gathered);
  CHECK(gathered->tasks == std::vector<int>{0, 0, 500});
  CHECK(gathered->wanGB == Approx(25));
}

TEST_CASE("the weighted placement is never worse on time + weight*money than the time-only one",
          "[unit][sched][placement][cost]") {
  std::mt19937 rng(4242);
  int cheaper = 0;
  for (int round = 0; round < 60; ++round) {
    const std::size_t n = 2 + rng() % 5;
    const auto sites = randomSites(rng, n);
    const MapStage map{randomData(rng, n), static_cast<int>(n + rng() % 200), 0.5 + rng() % 30};
    const ReduceStage reduce{randomData(rng, n), static_cast<int>(1 + rng() % 200), 0.5 + rng() % 30};
    const double weight = std::pow(10.0, static_cast<double>(rng() % 6) - 1);  // 0.1 .. 1e4 s per unit
    const TetriumOptions options = weighted(weight, randomPrices(rng, n));
    const TetriumOptions rho = [&] {
      TetriumOptions o = options;
      o.wanBudgetRho = 0.5;
      return o;
    }();
    for (const TetriumOptions& o : {options, rho}) {
      TetriumOptions timeOnly = o;
      timeOnly.costWeightSPerUnit = 0;
      auto fast = tetriumMap(sites, map, timeOnly);
      auto best = tetriumMap(sites, map, o);
      REQUIRE(fast);
      REQUIRE(best);
      const double fastObjective = placementObjective(fast->times, mapMoney(map, fast->tasks, o.prices), o);
      const double bestObjective = placementObjective(best->times, mapMoney(map, best->tasks, o.prices), o);
      CHECK(bestObjective <= fastObjective + 1e-9 * std::max(1.0, fastObjective));
      CHECK(best->money == Approx(mapMoney(map, best->tasks, o.prices)).margin(1e-9));
      cheaper += bestObjective < fastObjective - 1e-6 ? 1 : 0;

      auto fastReduce = tetriumReduce(sites, reduce, timeOnly);
      auto bestReduce = tetriumReduce(sites, reduce, o);
      REQUIRE(fastReduce);
      REQUIRE(bestReduce);
      const double fastReduceObjective =
          placementObjective(fastReduce->times, reduceMoney(reduce, fastReduce->tasks, o.prices), o);
      const double bestReduceObjective =
          placementObjective(bestReduce->times, reduceMoney(reduce, bestReduce->tasks, o.prices), o);
      CHECK(bestReduceObjective <= fastReduceObjective + 1e-9 * std::max(1.0, fastReduceObjective));
      cheaper += bestReduceObjective < fastReduceObjective - 1e-6 ? 1 : 0;
    }
  }
  // The weight changes something: most random priced clusters have a cheaper trade-off.
  CHECK(cheaper > 20);
}

TEST_CASE("cost weight and prices are validated", "[unit][sched][placement][cost]") {
  const auto sites = figure4Sites();
  const auto prices = uniformPrices(3, 1, 1);
  for (double bad : {-1.0, kMaxCostWeightSPerUnit * 2, std::nan("")}) {
    auto placed = tetriumMap(sites, figure4Map(), weighted(bad, prices));
    REQUIRE_FALSE(placed);
    CHECK_THAT(placed.error().message, Catch::Contains("cost weight"));
  }
  auto fewer = placeReduce(Placement::kProportional, sites, ReduceStage{{1, 2, 3}, 4, 1}, weighted(1, uniformPrices(2, 1, 1)));
  REQUIRE_FALSE(fewer);
  CHECK_THAT(fewer.error().message, Catch::Contains("prices: 2 values for 3 sites"));
  auto negative = prices;
  negative[1].egressGB[2] = -0.5;
  auto placed = tetriumReduce(sites, ReduceStage{{1, 2, 3}, 4, 1}, weighted(1, negative));
  REQUIRE_FALSE(placed);
  CHECK_THAT(placed.error().message, Catch::Contains("site 'site-2': egress prices"));
  auto shortEgress = prices;
  shortEgress[0].egressGB = {1};
  CHECK_FALSE(tetriumMap(sites, figure4Map(), weighted(1, shortEgress)));
}

TEST_CASE("every policy reports its placement's money", "[unit][sched][placement][cost]") {
  const auto sites = figure4Sites();
  const auto prices = uniformPrices(3, 3.6, 0.1);
  auto placed = placeMap(Placement::kInPlace, sites, figure4Map(), weighted(0, prices));
  REQUIRE(placed);
  CHECK(placed->money == Approx(1000 * 2.0 * 0.001));  // in place: no egress
  auto reduce = placeReduce(Placement::kCentralized, sites, ReduceStage{{10, 15, 25}, 500, 1.0}, weighted(0, prices));
  REQUIRE(reduce);
  CHECK(reduce->money == Approx(500 * 0.001 + 40 * 0.1));  // all at site-1 (most slots): 40 GB come in
}
