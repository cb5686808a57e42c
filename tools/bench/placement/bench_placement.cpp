// bench-placement: timings of the placement/ordering policies on seeded random instances,
// printed as one JSON document on stdout. Not a test: it asserts nothing, it measures.
//
//   bench-placement [--repetitions N]
//
// Each case reports the median and minimum wall time over N runs (default 5) on one thread.

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fmt/format.h>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "sched/job_order.h"
#include "sched/max_min.h"
#include "sched/placement.h"
#include "sched/tetrium_round.h"

using namespace tellus::sched;

namespace {

std::vector<SiteResources> randomSites(std::mt19937& rng, std::size_t n) {
  std::uniform_int_distribution<int> slots(10, 200);
  std::uniform_real_distribution<double> bandwidth(0.1, 2.0);
  std::vector<SiteResources> sites;
  for (std::size_t x = 0; x < n; ++x) sites.push_back({fmt::format("s{}", x), slots(rng), bandwidth(rng), bandwidth(rng)});
  return sites;
}

// Input spread over a few sites (most jobs touch a handful of the 50 sites).
std::vector<double> randomData(std::mt19937& rng, std::size_t n, std::size_t touched) {
  std::vector<double> data(n, 0.0);
  std::uniform_real_distribution<double> gb(1, 100);
  for (std::size_t k = 0; k < touched; ++k) data[rng() % n] += gb(rng);
  return data;
}

MapStage randomMap(std::mt19937& rng, std::size_t n, std::size_t touched) {
  return MapStage{randomData(rng, n, touched), static_cast<int>(50 + rng() % 2000), 1.0 + rng() % 10};
}

ReduceStage randomReduce(std::mt19937& rng, std::size_t n, std::size_t touched) {
  return ReduceStage{randomData(rng, n, touched), static_cast<int>(20 + rng() % 500), 1.0 + rng() % 10};
}

struct Timing {
  double medianMs = 0, minMs = 0;
};

Timing measure(int repetitions, const std::function<void()>& run) {
  std::vector<double> ms;
  for (int r = 0; r < repetitions; ++r) {
    const auto start = std::chrono::steady_clock::now();
    run();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(ms.begin(), ms.end());
  return Timing{ms[ms.size() / 2], ms.front()};
}

[[noreturn]] void fail(const std::string& what) {
  std::cerr << "bench-placement: " << what << "\n";
  std::exit(1);
}

// Extras are built after the timed runs (they report what the runs computed).
nlohmann::json row(const std::string& name, const Timing& t, nlohmann::json extra = nlohmann::json::object()) {
  extra["name"] = name;
  extra["median_ms"] = t.medianMs;
  extra["min_ms"] = t.minMs;
  return extra;
}

}  // namespace

int main(int argc, char** argv) {
  int repetitions = 5;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--repetitions" && i + 1 < argc) {
      repetitions = std::max(1, std::atoi(argv[++i]));
    } else {
      std::cerr << "usage: bench-placement [--repetitions N]\n";
      return 2;
    }
  }
  nlohmann::json results = nlohmann::json::array();

  // Single-stage LPs (the full tetriumMap/Reduce: relaxation, whole-wave refinement, rounding).
  for (std::size_t n : {10, 50, 100}) {
    std::mt19937 rng(static_cast<unsigned>(n));
    const auto sites = randomSites(rng, n);
    const MapStage map = randomMap(rng, n, n);
    const ReduceStage reduce = randomReduce(rng, n, n);
    double mapTime = 0, reduceTime = 0;
    {
    const Timing timing = measure(repetitions, [&] {
                            auto p = tetriumMap(sites, map);
                            if (!p) fail(p.message());
                            mapTime = p->times.totalS();
                          });
    results.push_back(row("map_lp", timing, {{"sites", n}, {"tasks", map.tasks}, {"stage_s", mapTime}}));
  }
    {
    const Timing timing = measure(repetitions, [&] {
                            auto p = tetriumReduce(sites, reduce);
                            if (!p) fail(p.message());
                            reduceTime = p->times.totalS();
                          });
    results.push_back(row("reduce_lp", timing, {{"sites", n}, {"tasks", reduce.tasks}, {"stage_s", reduceTime}}));
  }
  }

  // A full Tetrium scheduling round (ordering LP per job + placement over what is left).
  for (std::size_t jobsCount : {50, 400}) {
    std::mt19937 rng(static_cast<unsigned>(jobsCount));
    const std::size_t n = 50;
    const auto sites = randomSites(rng, n);
    std::vector<TetriumJob> jobs;
    for (std::size_t j = 0; j < jobsCount; ++j) {
      TetriumJob job;
      job.id = fmt::format("j{}", j);
      job.remainingStages = 1 + static_cast<int>(rng() % 3);
      const std::size_t touched = 1 + rng() % 10;
      if (rng() % 2 == 0) {
        job.kind = StageKind::kMap;
        job.map = randomMap(rng, n, touched);
      } else {
        job.kind = StageKind::kReduce;
        job.reduce = randomReduce(rng, n, touched);
      }
      jobs.push_back(std::move(job));
    }
    std::size_t scheduled = 0;
    {
    const Timing timing = measure(repetitions, [&] {
                            auto r = tetriumSchedulingRound(sites, jobs);
                            if (!r) fail(r.message());
                            scheduled = r->allocations.size();
                          });
    results.push_back(row("scheduling_round", timing, {{"sites", n}, {"jobs", jobsCount}, {"jobs_given_slots", scheduled}}));
  }
  }

  // Max-min fair assignment at 120 and 10,000 variables (tasks x datacenters).
  struct MaxMinCase {
    std::size_t dcs, jobs, tasksPerJob;
  };
  for (const MaxMinCase& c : {MaxMinCase{6, 4, 5}, MaxMinCase{20, 25, 20}}) {
    std::mt19937 rng(static_cast<unsigned>(c.dcs * 1000 + c.jobs));
    std::uniform_real_distribution<double> bandwidth(20, 200);  // MB/s
    std::uniform_real_distribution<double> mb(50, 500);
    std::vector<std::vector<double>> b(c.dcs, std::vector<double>(c.dcs));
    for (auto& rowB : b)
      for (double& v : rowB) v = bandwidth(rng);
    MaxMinProblem problem;
    problem.jobs = c.jobs;
    const std::size_t tasks = c.jobs * c.tasksPerJob;
    for (std::size_t j = 0; j < c.dcs; ++j) problem.slots.push_back(static_cast<int>(tasks / c.dcs + 1 + rng() % 3));
    for (std::size_t k = 0; k < c.jobs; ++k) {
      const double exec = 1.0 + rng() % 5;
      for (std::size_t i = 0; i < c.tasksPerJob; ++i) {
        std::vector<double> input(c.dcs, 0.0);
        input[rng() % c.dcs] = mb(rng);
        input[rng() % c.dcs] += mb(rng);
        MaxMinTask t;
        t.job = k;
        for (std::size_t d = 0; d < c.dcs; ++d) t.costS.push_back(maxMinTransferS(input, b, d) + exec);
        problem.tasks.push_back(std::move(t));
      }
    }
    std::size_t checks = 0;
    bool proven = false;
    {
    const Timing timing = measure(repetitions, [&] {
                            auto r = maxMinFairAssign(problem);
                            if (!r) fail(r.message());
                            checks = r->flowChecks;
                            proven = r->provenLexOptimal;
                          });
    results.push_back(row("max_min", timing, {{"variables", tasks * c.dcs}, {"jobs", c.jobs}, {"datacenters", c.dcs},
                           {"flow_checks", checks}, {"proven_lex_optimal", proven}}));
  }
  }

  // Max-min with ties (issue 14): identical sites (22 slots, 1 GB/s), jobs of equal size with
  // 1 GB on each of 3 random sites, tasks apportioned per source as `tellus plan` does. Many
  // jobs compete for the same bottleneck, the hard case for the exact tie search.
  struct TieCase {
    std::size_t sites, jobs, tasksPerJob;
  };
  for (const TieCase& c : {TieCase{20, 40, 10}, TieCase{50, 40, 25}}) {
    std::mt19937 rng(static_cast<unsigned>(c.sites * 1000 + c.tasksPerJob));
    MaxMinProblem problem;
    problem.jobs = c.jobs;
    problem.slots.assign(c.sites, 22);
    for (std::size_t k = 0; k < c.jobs; ++k) {
      std::vector<double> input(c.sites, 0.0);
      for (std::size_t placed = 0; placed < 3;) {
        const std::size_t x = rng() % c.sites;
        if (input[x] == 0) {
          input[x] = 1.0;
          ++placed;
        }
      }
      const std::vector<int> perSource = mapTasksPerSource(input, static_cast<int>(c.tasksPerJob));
      for (std::size_t x = 0; x < c.sites; ++x) {
        for (int t = 0; t < perSource[x]; ++t) {
          MaxMinTask task;
          task.job = k;
          for (std::size_t y = 0; y < c.sites; ++y) task.costS.push_back(1.0 + (y == x ? 0.0 : input[x] / perSource[x]));
          problem.tasks.push_back(std::move(task));
        }
      }
    }
    MaxMinResult last;
    const Timing timing = measure(repetitions, [&] {
      auto r = maxMinFairAssign(problem);
      if (!r) fail(r.message());
      last = std::move(r.value());
    });
    double mean = 0;
    for (double v : last.jobCompletionS) mean += v / static_cast<double>(c.jobs);
    results.push_back(row("max_min_ties", timing,
                          {{"sites", c.sites}, {"jobs", c.jobs}, {"tasks", c.jobs * c.tasksPerJob},
                           {"time_budget_s", MaxMinOptions{}.timeBudgetS}, {"flow_checks", last.flowChecks},
                           {"proven_lex_optimal", last.provenLexOptimal}, {"proven_by_bound", last.provenByBound},
                           {"bound_lps", last.boundLps}, {"max_gap_s", last.maxGapS},
                           {"mean_completion_s", mean}}));
  }

  // SWAG and Reordering over 1,000 jobs x 50 sites.
  {
    std::mt19937 rng(1000);
    OrderingInput input;
    const std::size_t n = 50;
    for (std::size_t s = 0; s < n; ++s) input.slots.push_back(10 + rng() % 300);
    for (std::size_t j = 0; j < 1000; ++j) {
      QueuedJob job{fmt::format("j{}", j), static_cast<double>(j), std::vector<double>(n, 0.0)};
      const std::size_t touched = 1 + rng() % 10;
      for (std::size_t k = 0; k < touched; ++k) job.remainingTasks[rng() % n] += 1 + rng() % 200;
      input.jobs.push_back(std::move(job));
    }
    double average = 0;
    {
    const Timing timing = measure(repetitions, [&] {
                            const auto order = swagOrder(input);
                            average = averageFinishInstant(input, sameOrderEverywhere(order, n));
                          });
    results.push_back(row("swag", timing, {{"jobs", 1000}, {"sites", n}, {"average_finish_instant", average}}));
  }
    {
    const Timing timing = measure(repetitions, [&] {
                            const auto orders = computeOrders(input, JobOrder::kIndependentSrptReordering);
                            average = averageFinishInstant(input, orders);
                          });
    results.push_back(row("independent_srpt_reordering", timing, {{"jobs", 1000}, {"sites", n}, {"average_finish_instant", average}}));
  }
  }

  nlohmann::json doc;
  doc["benchmark"] = "placement";
  doc["repetitions"] = repetitions;
  doc["results"] = results;
  std::cout << doc.dump(2) << "\n";
  return 0;
}
