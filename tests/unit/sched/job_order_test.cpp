#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <numeric>
#include <random>

#include "sched/job_order.h"

using namespace tellus::sched;

namespace {

// Paper 001 §2.2 (Table 1), recovered from the finish instants the paper states: remaining
// tasks per datacenter, jobs A, B, C arriving in that order, one slot per datacenter.
OrderingInput motivatingExample() {
  OrderingInput input;
  input.jobs = {{"A", 0, {1, 10, 1}}, {"B", 1, {3, 8, 0}}, {"C", 2, {7, 0, 6}}};
  return input;
}

std::vector<std::size_t> ids(std::initializer_list<std::size_t> v) { return v; }

}  // namespace

TEST_CASE("paper 001 motivating example: every policy's order and average finish instant", "[unit][sched][order]") {
  const OrderingInput input = motivatingExample();
  const auto fcfs = computeOrders(input, JobOrder::kFcfs);
  CHECK(finishInstants(input, fcfs) == std::vector<double>{10, 18, 11});
  CHECK(averageFinishInstant(input, fcfs) == Approx(13));

  CHECK(globalSrptOrder(input) == ids({1, 0, 2}));  // B (11) -> A (12) -> C (13)
  CHECK(averageFinishInstant(input, computeOrders(input, JobOrder::kGlobalSrpt)) == Approx(37.0 / 3));

  const SiteOrders independent = independentSrptOrders(input);
  CHECK(independent.perSite[0] == ids({0, 1, 2}));
  CHECK(independent.perSite[1] == ids({2, 1, 0}));  // C has nothing there: size 0 first, harmless
  CHECK(averageFinishInstant(input, independent) == Approx(37.0 / 3));

  // Reordering: B -> C -> A from either SRPT, average 12.
  CHECK(reorder(input, computeOrders(input, JobOrder::kGlobalSrpt)) == ids({1, 2, 0}));
  CHECK(reorder(input, independent) == ids({1, 2, 0}));
  CHECK(averageFinishInstant(input, computeOrders(input, JobOrder::kIndependentSrptReordering)) == Approx(12));

  // SWAG: C (makespan 7) -> B (10, smaller than A) -> A, average 35/3.
  CHECK(swagOrder(input) == ids({2, 1, 0}));
  CHECK(averageFinishInstant(input, computeOrders(input, JobOrder::kSwag)) == Approx(35.0 / 3));
}

TEST_CASE("SWAG third principle: work already queued at a site changes the order", "[unit][sched][order]") {
  // Two tasks already wait at datacenter 1 (the Figure 3 situation). A is smaller, so both
  // SRPTs (and Reordering after them) serve A first; SWAG sees A's sub-job stuck behind the
  // existing work and serves B first.
  OrderingInput input;
  input.jobs = {{"A", 0, {1, 1, 1}}, {"B", 1, {0, 2, 2}}};
  input.existingLoad = {2, 0, 0};
  const auto srpt = computeOrders(input, JobOrder::kGlobalSrpt);
  CHECK(srpt.perSite[0] == ids({0, 1}));
  CHECK(averageFinishInstant(input, srpt) == Approx(3.0));
  CHECK(swagOrder(input) == ids({1, 0}));
  CHECK(averageFinishInstant(input, computeOrders(input, JobOrder::kSwag)) == Approx(2.5));
  // Without the queued work SWAG agrees with SRPT.
  input.existingLoad.clear();
  CHECK(swagOrder(input) == ids({0, 1}));
}

TEST_CASE("capacity-normalized forms divide queue lengths by slots", "[unit][sched][order]") {
  // Same tasks, but datacenter 2 has 4 slots: A's 8 tasks there take 2 units, not 8.
  OrderingInput input;
  input.jobs = {{"A", 0, {0, 8}}, {"B", 1, {3, 0}}};
  CHECK(swagOrder(input) == ids({1, 0}));
  input.slots = {1, 4};
  CHECK(swagOrder(input) == ids({0, 1}));
  CHECK(finishInstants(input, sameOrderEverywhere({0, 1}, 2)) == std::vector<double>{2, 3});
  CHECK(globalSrptOrder(input) == ids({0, 1}));  // normalized sizes 2 < 3
  // Reordering targets the longest normalized queue: datacenter 1 (3) over 2 (2).
  CHECK(reorder(input, sameOrderEverywhere({1, 0}, 2)) == ids({0, 1}));
}

TEST_CASE("property: Reordering never makes the average finish instant worse (Theorem 1)", "[unit][sched][order]") {
  std::mt19937 rng(42);
  for (int instance = 0; instance < 500; ++instance) {
    OrderingInput input;
    const std::size_t sites = 1 + rng() % 5, jobs = 1 + rng() % 7;
    for (std::size_t j = 0; j < jobs; ++j) {
      QueuedJob job{fmt::format("j{}", j), static_cast<double>(j), std::vector<double>(sites)};
      for (double& v : job.remainingTasks) v = rng() % 3 == 0 ? 0 : static_cast<double>(rng() % 10);
      input.jobs.push_back(job);
    }
    // Any base order: FCFS, both SRPTs, a random global order, random per-site orders.
    std::vector<SiteOrders> bases = {computeOrders(input, JobOrder::kFcfs),
                                     computeOrders(input, JobOrder::kGlobalSrpt),
                                     independentSrptOrders(input)};
    std::vector<std::size_t> order(jobs);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    bases.push_back(sameOrderEverywhere(order, sites));
    SiteOrders randomPerSite;
    for (std::size_t d = 0; d < sites; ++d) {
      std::shuffle(order.begin(), order.end(), rng);
      randomPerSite.perSite.push_back(order);
    }
    bases.push_back(randomPerSite);
    for (const SiteOrders& base : bases) {
      const auto reordered = reorder(input, base);
      REQUIRE(reordered.size() == jobs);
      std::vector<std::size_t> sorted = reordered;
      std::sort(sorted.begin(), sorted.end());
      for (std::size_t j = 0; j < jobs; ++j) REQUIRE(sorted[j] == j);  // a permutation
      INFO("instance " << instance);
      CHECK(averageFinishInstant(input, sameOrderEverywhere(reordered, sites)) <=
            averageFinishInstant(input, base) + 1e-9);
    }
  }
}

namespace {

// Paper 001 Alg. 3 transcribed literally (with §5's normalized Step 5): every round computes
// m_j = max over every datacenter of (q_d + |v_jd|) / c_d and takes the smallest, ties to the
// smallest total remaining size (tasks), then the earlier arrival. The reference for swagOrder.
std::vector<std::size_t> swagByTheBook(const OrderingInput& input) {
  const std::size_t sites = input.slots.size();
  std::vector<double> q(sites, 0.0);
  std::vector<bool> done(input.jobs.size(), false);
  std::vector<std::size_t> order;
  while (order.size() < input.jobs.size()) {
    std::size_t pick = input.jobs.size();
    double pickM = 0, pickSize = 0;
    for (std::size_t j = 0; j < input.jobs.size(); ++j) {
      if (done[j]) continue;
      double m = 0, size = 0;
      for (std::size_t d = 0; d < sites; ++d) {
        m = std::max(m, (q[d] + input.jobs[j].remainingTasks[d]) / input.slots[d]);
        size += input.jobs[j].remainingTasks[d];
      }
      if (pick == input.jobs.size() || m < pickM || (m == pickM && size < pickSize)) {
        pick = j;
        pickM = m;
        pickSize = size;
      }
    }
    done[pick] = true;
    order.push_back(pick);
    for (std::size_t d = 0; d < sites; ++d) q[d] += input.jobs[pick].remainingTasks[d];
  }
  return order;
}

// Exhaustive: the smallest average finish instant over all job orders.
double bestAverageOverAllOrders(const OrderingInput& input) {
  std::vector<std::size_t> order(input.jobs.size());
  std::iota(order.begin(), order.end(), 0);
  double best = std::numeric_limits<double>::infinity();
  do {
    best = std::min(best, averageFinishInstant(input, sameOrderEverywhere(order, input.slots.size())));
  } while (std::next_permutation(order.begin(), order.end()));
  return best;
}

}  // namespace

TEST_CASE("SWAG breaks makespan ties by the smallest total size in tasks (paper 001 Alg. 3)", "[unit][sched][order]") {
  // d0 has 2 slots, d1 one. After J2, J1 and J3 tie at makespan 3 with the same normalized
  // size (3.5) but J3 has fewer tasks (4 < 5): the paper serves J3, which is also optimal.
  OrderingInput input;
  input.slots = {2, 1};
  input.jobs = {{"J0", 0, {4, 0}}, {"J1", 1, {3, 2}}, {"J2", 2, {3, 0}}, {"J3", 3, {1, 3}}};
  CHECK(swagOrder(input) == ids({2, 3, 0, 1}));
  CHECK(averageFinishInstant(input, computeOrders(input, JobOrder::kSwag)) == Approx(3.5));
  CHECK(bestAverageOverAllOrders(input) == Approx(3.5));
}

TEST_CASE("property: swagOrder equals paper 001 Alg. 3 run literally, normalized or not", "[unit][sched][order]") {
  std::mt19937 rng(2024);
  int swagOptimal = 0;
  const int instances = 2000;
  for (int instance = 0; instance < instances; ++instance) {
    OrderingInput input;
    const std::size_t sites = 1 + rng() % 4, jobs = 1 + rng() % 6;
    // Few distinct sizes and slot counts so that makespan ties are common.
    for (std::size_t d = 0; d < sites; ++d) input.slots.push_back(instance % 2 == 0 ? 1.0 : 1.0 + rng() % 3);
    for (std::size_t j = 0; j < jobs; ++j) {
      QueuedJob job{fmt::format("j{}", j), static_cast<double>(j), std::vector<double>(sites)};
      for (double& v : job.remainingTasks) v = rng() % 2 == 0 ? 0 : static_cast<double>(rng() % 5);
      input.jobs.push_back(job);
    }
    INFO("instance " << instance);
    REQUIRE(swagOrder(input) == swagByTheBook(input));
    const double swag = averageFinishInstant(input, computeOrders(input, JobOrder::kSwag));
    const double best = bestAverageOverAllOrders(input);
    CHECK(swag >= best - 1e-9);
    if (swag <= best + 1e-9) ++swagOptimal;
  }
  // The paper reports SWAG within 2% of optimal on traces; on these tiny instances it is
  // optimal most of the time (a sanity check on the reference, not a claim).
  CHECK(swagOptimal > instances / 2);
}
