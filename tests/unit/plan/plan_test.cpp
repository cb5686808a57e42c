#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <nlohmann/json.hpp>
#include <sstream>

#include "plan/plan.h"

using namespace tellus::plan;

namespace {

// examples/plan-tetrium.yaml, inline: unit tests do no I/O.
const char* const kTetrium = R"(sites:
  - {name: site-1, slots: 40, up_gbps: 40, down_gbps: 40}
  - {name: site-2, slots: 10, up_gbps: 8, down_gbps: 8}
  - {name: site-3, slots: 20, up_gbps: 16, down_gbps: 40}
jobs:
  - id: analytics
    map:
      tasks: 1000
      task_s: 2
      input_gb: {site-1: 20, site-2: 30, site-3: 50}
    reduce:
      tasks: 500
      task_s: 1
      output_ratio: 0.5
)";

const char* const kTwoJobs = R"(sites:
  - {name: dc-1, slots: 3, up_gbps: 8, down_gbps: 8}
  - {name: dc-2, slots: 3, up_gbps: 8, down_gbps: 8}
  - {name: dc-3, slots: 3, up_gbps: 8, down_gbps: 8}
jobs:
  - id: job-1
    map: {tasks: 3, task_s: 1, input_gb: {dc-2: 0.1, dc-3: 0.2}}
  - id: job-2
    map: {tasks: 12, task_s: 1, input_gb: {dc-1: 0.2, dc-2: 0.4, dc-3: 0.6}}
)";

std::string errorOf(const std::string& yaml) {
  auto parsed = parsePlanProblem(yaml, "p.yaml");
  REQUIRE_FALSE(parsed.isOk());
  return parsed.message();
}

}  // namespace

TEST_CASE("plan parses sites with units converted and jobs with per-site input", "[unit][plan]") {
  auto problem = parsePlanProblem(kTetrium, "t.yaml");
  REQUIRE(problem.isOk());
  REQUIRE(problem->sites.size() == 3);
  CHECK(problem->sites[2].upGBps == Approx(2.0));  // 16 Gbit/s
  CHECK(problem->sites[2].downGBps == Approx(5.0));
  REQUIRE(problem->jobs.size() == 1);
  CHECK(problem->jobs[0].map->inputGB == std::vector<double>{20, 30, 50});
  CHECK(problem->jobs[0].remainingStages == 2);
  CHECK(problem->jobs[0].reduce->outputRatio == 0.5);
}

TEST_CASE("plan: Tetrium example under each placement policy", "[unit][plan]") {
  auto problem = parsePlanProblem(kTetrium, "t.yaml");
  REQUIRE(problem.isOk());
  auto tetrium = solvePlan(*problem, "");
  REQUIRE(tetrium.isOk());
  CHECK(tetrium->policy == "tetrium");
  CHECK(tetrium->jobs[0].completionS <= 59.83);
  auto centralized = solvePlan(*problem, "centralized");
  REQUIRE(centralized.isOk());
  CHECK(centralized->jobs[0].completionS == Approx(93));
  CHECK(centralized->jobs[0].mapTasksAtSite == std::vector<int>{1000, 0, 0});
  auto iridium = solvePlan(*problem, "iridium");
  REQUIRE(iridium.isOk());
  CHECK(iridium->jobs[0].mapTimes.computeS == Approx(60));
  CHECK(iridium->jobs[0].reduceTimes.transferS == Approx(10.5));
  CHECK(tetrium->jobs[0].completionS < iridium->jobs[0].completionS);
  auto proportional = solvePlan(*problem, "proportional");
  REQUIRE(proportional.isOk());
  CHECK(proportional->jobs[0].reduceTasksAtSite == std::vector<int>{100, 150, 250});
}

TEST_CASE("plan: two-job example orders job-1 first with average 1.7 s, JSON output", "[unit][plan]") {
  auto problem = parsePlanProblem(kTwoJobs, "two.yaml");
  REQUIRE(problem.isOk());
  auto result = solvePlan(*problem, "tetrium");
  REQUIRE(result.isOk());
  CHECK(result->order == std::vector<std::string>{"job-1", "job-2"});
  CHECK(result->averageCompletionS == Approx(1.7));
  std::ostringstream json;
  printPlanJson(*problem, *result, json);
  const auto doc = nlohmann::json::parse(json.str());
  CHECK(doc["jobs"][1]["map"]["tasks"] == std::vector<int>{6, 4, 2});
  CHECK(doc["jobs"][1]["map"]["t_aggr_s"].get<double>() == Approx(0.4));
  CHECK(doc["average_completion_s"].get<double>() == Approx(1.7));
  std::ostringstream table;
  printPlanTable(*problem, *result, table);
  CHECK_THAT(table.str(), Catch::Contains("order:  job-1 -> job-2") && Catch::Contains("T_aggr 0.40 s"));
}

TEST_CASE("plan: ordering and max-min policies", "[unit][plan]") {
  const std::string swag = R"(sites:
  - {name: dc-1, slots: 1, up_gbps: 8, down_gbps: 8}
  - {name: dc-2, slots: 1, up_gbps: 8, down_gbps: 8}
  - {name: dc-3, slots: 1, up_gbps: 8, down_gbps: 8}
jobs:
  - {id: A, arrival_s: 0, map: {tasks: 12, task_s: 1, input_gb: {dc-1: 1, dc-2: 10, dc-3: 1}}}
  - {id: B, arrival_s: 1, map: {tasks: 11, task_s: 1, input_gb: {dc-1: 3, dc-2: 8}}}
  - {id: C, arrival_s: 2, map: {tasks: 13, task_s: 1, input_gb: {dc-1: 7, dc-3: 6}}}
)";
  auto problem = parsePlanProblem(swag, "s.yaml");
  REQUIRE(problem.isOk());
  auto fcfs = solvePlan(*problem, "fcfs");
  REQUIRE(fcfs.isOk());
  CHECK(fcfs->averageCompletionS == Approx(13));
  auto result = solvePlan(*problem, "swag");
  REQUIRE(result.isOk());
  CHECK(result->order == std::vector<std::string>{"C", "B", "A"});
  CHECK(result->averageCompletionS == Approx(35.0 / 3));

  // Issue 14: after J2, J1 and J3 tie at makespan 3; paper 001 serves the smaller job in tasks
  // (J3: 4 < 5), which the capacity-normalized size (3.5 each) could not tell apart.
  auto ties = parsePlanProblem(R"(sites:
  - {name: d0, slots: 2, up_gbps: 8, down_gbps: 8}
  - {name: d1, slots: 1, up_gbps: 8, down_gbps: 8}
jobs:
  - {id: J0, arrival_s: 0, map: {tasks: 4, task_s: 1, input_gb: {d0: 4}}}
  - {id: J1, arrival_s: 1, map: {tasks: 5, task_s: 1, input_gb: {d0: 3, d1: 2}}}
  - {id: J2, arrival_s: 2, map: {tasks: 3, task_s: 1, input_gb: {d0: 3}}}
  - {id: J3, arrival_s: 3, map: {tasks: 4, task_s: 1, input_gb: {d0: 1, d1: 3}}}
)",
                               "ties.yaml");
  REQUIRE(ties.isOk());
  auto swagTies = solvePlan(*ties, "swag");
  REQUIRE(swagTies.isOk());
  CHECK(swagTies->order == std::vector<std::string>{"J2", "J3", "J0", "J1"});
  CHECK(swagTies->averageCompletionS == Approx(3.5));

  auto two = parsePlanProblem(kTwoJobs, "two.yaml");
  REQUIRE(two.isOk());
  // 15 tasks on 9 slots cannot run one task per slot (paper 002's model).
  auto tooMany = solvePlan(*two, "max-min");
  REQUIRE_FALSE(tooMany.isOk());
  CHECK_THAT(tooMany.message(), Catch::Contains("no assignment fits"));
  CHECK_FALSE(solvePlan(*two, "no-such-policy").isOk());
  // With 5 slots per site every task fits; job-2's 6 tasks at dc-3 must spill (0.1 s remote).
  std::string roomy = kTwoJobs;
  for (std::size_t at = roomy.find("slots: 3"); at != std::string::npos; at = roomy.find("slots: 3")) {
    roomy.replace(at, 8, "slots: 5");
  }
  auto bigger = parsePlanProblem(roomy, "roomy.yaml");
  REQUIRE(bigger.isOk());
  auto maxMin = solvePlan(*bigger, "max-min");
  REQUIRE(maxMin.isOk());
  // Some task must run remotely (1.1 s); only one job needs to pay for it (a tie between them).
  const double worst = std::max(maxMin->jobs[0].completionS, maxMin->jobs[1].completionS);
  const double best = std::min(maxMin->jobs[0].completionS, maxMin->jobs[1].completionS);
  CHECK(worst == Approx(1.1));
  CHECK(best == Approx(1.0));
  int placed = 0;
  for (const auto& j : maxMin->jobs)
    for (std::size_t x = 0; x < 3; ++x) placed += j.mapTasksAtSite[x];
  CHECK(placed == 15);
}

TEST_CASE("plan: bad input names file, line, field and what was expected", "[unit][plan]") {
  CHECK(errorOf("sites:\n  - {name: a, slots: -3, up_gbps: 1, down_gbps: 1}\njobs: []\n") ==
        "p.yaml:2: sites[0].slots: expected an integer >= 0, got '-3'");
  CHECK_THAT(errorOf("sites:\n  - {name: a, slots: 1, up_gbps: 1, down_gbps: 1, colour: red}\njobs: []\n"),
             Catch::StartsWith("p.yaml:2: sites[0].colour: unknown field"));
  CHECK_THAT(errorOf("sites:\n  - {name: a, slots: 1, up_gbps: fast, down_gbps: 1}\njobs: []\n"),
             Catch::StartsWith("p.yaml:2: sites[0].up_gbps: expected a number >= 0, got 'fast'"));
  CHECK_THAT(errorOf("sites:\n  - {name: a, slots: 1, up_gbps: 1, down_gbps: 1}\njobs:\n  - id: j\n"
                     "    map: {tasks: 2, task_s: 1, input_gb: {b: 3}}\n"),
             Catch::StartsWith("p.yaml:5: jobs[0].map.input_gb.b: unknown site"));
  CHECK_THAT(errorOf("sites:\n  - {name: a, slots: 1, up_gbps: 1}\njobs: []\n"),
             Catch::StartsWith("p.yaml:2: sites[0].down_gbps: missing"));
  CHECK_THAT(errorOf("sites:\n  - {name: a, slots: 1, up_gbps: 1, down_gbps: 1}\njobs:\n  - id: j\n"
                     "    reduce: {tasks: 2, task_s: 1}\n"),
             Catch::Contains("jobs[0].reduce.shuffle_gb: missing"));
  CHECK_THAT(errorOf("sites: [\n"), Catch::StartsWith("p.yaml:") && Catch::Contains("invalid YAML"));
  CHECK_THAT(errorOf("policy: magic\nsites:\n  - {name: a, slots: 1, up_gbps: 1, down_gbps: 1}\njobs: []\n"),
             Catch::StartsWith("p.yaml:1: policy: expected one of"));
  CHECK_THAT(errorOf("options: {wan_budget_rho: 2}\nsites:\n  - {name: a, slots: 1, up_gbps: 1, down_gbps: 1}\njobs: []\n"),
             Catch::StartsWith("p.yaml:1: options.wan_budget_rho: expected a number in [0,1]"));
  CHECK_THAT(errorOf("options: {max_min_budget_s: 1e9}\nsites:\n  - {name: a, slots: 1, up_gbps: 1, down_gbps: 1}\n"
                     "jobs: []\n"),
             Catch::StartsWith("p.yaml:1: options.max_min_budget_s: expected at most 3600 (seconds)"));
}

namespace {

// ---- exhaustive references for the map model of docs/plan.md ------------------------------

struct TinySite {
  int slots;
  double gbps;  // up = down, GB/s
};

double transferTime(double gb, double rate) {
  if (gb <= 1e-12) return 0;
  return rate > 0 ? gb / rate : std::numeric_limits<double>::infinity();
}

// Every integer map placement: rows r_x >= 1 where there is input (a task reads one site),
// any split of each row over the destinations; cost T_aggr + T_map with ceil waves. The
// smallest over all of them: no honest plan can report less.
double bestIntegerMapTime(const std::vector<TinySite>& sites, const std::vector<double>& input, int tasks, double taskS) {
  const std::size_t n = sites.size();
  const bool anyInput = std::any_of(input.begin(), input.end(), [](double gb) { return gb > 0; });
  double best = std::numeric_limits<double>::infinity();
  std::vector<std::vector<int>> m(n, std::vector<int>(n, 0));
  std::function<void(std::size_t, int)> cell = [&](std::size_t index, int left) {
    if (index == n * n) {
      if (left != 0) return;
      std::vector<double> up(n, 0), down(n, 0);
      std::vector<int> at(n, 0);
      for (std::size_t x = 0; x < n; ++x) {
        int row = 0;
        for (std::size_t y = 0; y < n; ++y) row += m[x][y];
        if (input[x] > 0 && row == 0) return;  // input nobody reads: not a placement
        if (input[x] <= 0 && row > 0 && anyInput) return;  // tasks read the stage's input
        for (std::size_t y = 0; y < n; ++y) {
          at[y] += m[x][y];
          if (y == x || row == 0) continue;
          up[x] += input[x] / row * m[x][y];
          down[y] += input[x] / row * m[x][y];
        }
      }
      double transfer = 0, compute = 0;
      for (std::size_t x = 0; x < n; ++x) {
        transfer = std::max({transfer, transferTime(up[x], sites[x].gbps), transferTime(down[x], sites[x].gbps)});
        if (at[x] > 0) {
          compute = std::max(compute, sites[x].slots > 0 ? taskS * std::ceil(static_cast<double>(at[x]) / sites[x].slots)
                                                         : std::numeric_limits<double>::infinity());
        }
      }
      best = std::min(best, transfer + compute);
      return;
    }
    for (int v = 0; v <= left; ++v) {
      m[index / n][index % n] = v;
      cell(index + 1, left - v);
    }
    m[index / n][index % n] = 0;
  };
  cell(0, tasks);
  return best;
}

// Paper 002's one-task-per-slot model for a single job: every row split covering the input,
// every assignment of tasks to slots; the smallest slowest task.
double bestMaxMinTime(const std::vector<TinySite>& sites, const std::vector<double>& input, int tasks, double taskS) {
  const std::size_t n = sites.size();
  double best = std::numeric_limits<double>::infinity();
  std::vector<int> rows(n, 0);
  std::function<void(std::size_t, int)> split = [&](std::size_t x, int left) {
    if (x == n) {
      if (left != 0) return;
      // Tasks as (source, gb); assign greedily is not enough: enumerate destinations.
      std::vector<std::pair<std::size_t, double>> list;
      for (std::size_t s = 0; s < n; ++s)
        for (int t = 0; t < rows[s]; ++t) list.emplace_back(s, input[s] / rows[s]);
      std::vector<int> used(n, 0);
      std::function<void(std::size_t, double)> place = [&](std::size_t i, double worst) {
        if (worst >= best) return;
        if (i == list.size()) {
          best = worst;
          return;
        }
        for (std::size_t y = 0; y < n; ++y) {
          if (used[y] >= sites[y].slots) continue;
          const auto [s, gb] = list[i];
          const double rate = std::min(sites[s].gbps, sites[y].gbps);
          const double cost = taskS + (y == s || gb <= 0 ? 0.0 : (rate > 0 ? gb / rate : std::numeric_limits<double>::infinity()));
          ++used[y];
          place(i + 1, std::max(worst, cost));
          --used[y];
        }
      };
      place(0, 0.0);
      return;
    }
    const bool anyInput = std::any_of(input.begin(), input.end(), [](double gb) { return gb > 0; });
    for (int v = input[x] > 0 ? 1 : 0; v <= (input[x] > 0 || !anyInput ? left : 0); ++v) {
      rows[x] = v;
      split(x + 1, left - v);
    }
    rows[x] = 0;
  };
  split(0, tasks);
  return best;
}

std::string tinyProblem(const std::vector<TinySite>& sites, const std::vector<double>& input, int tasks) {
  std::ostringstream yaml;
  yaml << "sites:\n";
  for (std::size_t x = 0; x < sites.size(); ++x) {
    yaml << "  - {name: s" << x << ", slots: " << sites[x].slots << ", up_gbps: " << sites[x].gbps * 8
         << ", down_gbps: " << sites[x].gbps * 8 << "}\n";
  }
  yaml << "jobs:\n  - id: j\n    map: {tasks: " << tasks << ", task_s: 1, input_gb: {";
  for (std::size_t x = 0; x < sites.size(); ++x) yaml << (x ? ", " : "") << "s" << x << ": " << input[x];
  yaml << "}}\n";
  return yaml.str();
}

}  // namespace

TEST_CASE("plan rejects a map stage with fewer tasks than sites holding input, naming the site", "[unit][plan]") {
  // Issue 14's example: 2 tasks cannot read 3 sites' input (c's 10 GB would be dropped).
  const std::string yaml = tinyProblem({{1, 1}, {1, 1}, {0, 1}}, {10, 10, 10}, 2);
  auto problem = parsePlanProblem(yaml, "p.yaml");
  REQUIRE(problem.isOk());
  for (const std::string& policy : planPolicyNames()) {
    auto result = solvePlan(*problem, policy);
    INFO(policy);
    REQUIRE_FALSE(result.isOk());
    CHECK(result.message() ==
          "p.yaml: job 'j': map stage: site 's2' holds input but no task would read it (2 tasks for 3 sites "
          "holding input; a task reads one site)");
  }
}

TEST_CASE("property: no policy reports less than the best placement reading all input (brute force)", "[unit][plan]") {
  std::mt19937 rng(14);
  int compared = 0, rejected = 0;
  for (int instance = 0; instance < 300; ++instance) {
    const std::size_t n = 2 + rng() % 2;
    std::vector<TinySite> sites;
    std::vector<double> input;
    for (std::size_t x = 0; x < n; ++x) {
      sites.push_back({static_cast<int>(rng() % 3), 0.5 * static_cast<double>(1 + rng() % 4)});
      input.push_back(rng() % 3 == 0 ? 0.0 : static_cast<double>(1 + rng() % 10));
    }
    if (std::all_of(sites.begin(), sites.end(), [](const TinySite& s) { return s.slots == 0; })) sites[0].slots = 1;
    const int tasks = 1 + static_cast<int>(rng() % 4);
    auto problem = parsePlanProblem(tinyProblem(sites, input, tasks), "p.yaml");
    REQUIRE(problem.isOk());
    const auto holding = static_cast<int>(std::count_if(input.begin(), input.end(), [](double gb) { return gb > 0; }));
    const double best = bestIntegerMapTime(sites, input, tasks, 1.0);
    double mustLeave = 0;  // input at sites without slots has to cross the WAN
    for (std::size_t x = 0; x < n; ++x)
      if (sites[x].slots == 0) mustLeave += input[x];
    INFO("instance " << instance << "\n" << tinyProblem(sites, input, tasks));
    for (const std::string policy : {"tetrium", "iridium", "centralized", "proportional"}) {
      INFO(policy);
      auto result = solvePlan(*problem, policy);
      if (tasks < holding) {
        CHECK_FALSE(result.isOk());
        ++rejected;
        continue;
      }
      REQUIRE(result.isOk());
      const PlanJobResult& job = result->jobs[0];
      CHECK(job.completionS >= best - 1e-9);
      if (std::isfinite(job.completionS)) CHECK(job.wanGB >= mustLeave - 1e-9);
      // Input at a site without slots leaves over its uplink, in the integer placement and
      // in the fractional model (the LP) alike.
      REQUIRE(job.mapLpTimes);
      for (std::size_t x = 0; x < n; ++x) {
        if (sites[x].slots > 0 || input[x] <= 0) continue;
        const double leaving = input[x] / sites[x].gbps;
        // (In-place policies leave it there and never finish: infinite compute instead.)
        if (std::isfinite(job.mapTimes.computeS)) CHECK(job.mapTimes.transferS >= leaving - 1e-9);
        if (std::isfinite(job.mapLpTimes->computeS)) CHECK(job.mapLpTimes->transferS >= leaving - 1e-9);
      }
      ++compared;
    }
    if (tasks < holding) continue;
    // Ordering policies: every site holding input has a sub-job.
    auto swag = solvePlan(*problem, "swag");
    REQUIRE(swag.isOk());
    for (std::size_t x = 0; x < n; ++x)
      if (input[x] > 0) CHECK(swag->jobs[0].mapTasksAtSite[x] > 0);
    // Max-min (one task per slot): never below the best over every covering row split.
    int slots = 0;
    for (const auto& s : sites) slots += s.slots;
    if (tasks <= slots) {
      auto maxMin = solvePlan(*problem, "max-min");
      const double bestMaxMin = bestMaxMinTime(sites, input, tasks, 1.0);
      if (std::isfinite(bestMaxMin)) {
        REQUIRE(maxMin.isOk());
        CHECK(maxMin->jobs[0].completionS >= bestMaxMin - 1e-9);
      }
    }
  }
  CHECK(compared > 400);
  CHECK(rejected > 20);
}

TEST_CASE("plan reports the LP optimum, task-share fractions, and no stage times where none are modeled",
          "[unit][plan]") {
  auto problem = parsePlanProblem(kTetrium, "t.yaml");
  REQUIRE(problem.isOk());
  auto tetrium = solvePlan(*problem, "tetrium");
  REQUIRE(tetrium.isOk());
  const PlanJobResult& job = tetrium->jobs[0];
  REQUIRE(job.mapLpTimes);
  CHECK(job.mapLpTimes->totalS() == Approx(44.29).margin(0.01));
  for (std::size_t x = 0; x < 3; ++x) {
    CHECK(job.reduceFractionAtSite[x] == Approx(job.reduceTasksAtSite[x] / 500.0));
    CHECK(job.mapFractionAtSite[x] == Approx(job.mapTasksAtSite[x] / 1000.0));
  }
  std::ostringstream json;
  printPlanJson(*problem, *tetrium, json);
  CHECK(nlohmann::json::parse(json.str())["jobs"][0]["map"]["lp"]["total_s"].get<double>() == Approx(44.29).margin(0.01));

  auto two = parsePlanProblem(kTwoJobs, "two.yaml");
  REQUIRE(two.isOk());
  auto swag = solvePlan(*two, "swag");
  REQUIRE(swag.isOk());
  std::ostringstream table, swagJson;
  printPlanTable(*two, *swag, table);
  CHECK_THAT(table.str(), !Catch::Contains("T_aggr"));
  printPlanJson(*two, *swag, swagJson);
  CHECK_FALSE(nlohmann::json::parse(swagJson.str())["jobs"][0]["map"].contains("t_aggr_s"));
}

TEST_CASE("plan: site prices and options.cost_weight make tetrium weigh money", "[unit][plan][cost]") {
  // The Tetrium example with egress at 1 per GB everywhere: time alone moves map input, a
  // second worth 1/1000 of a unit keeps every map task where its input is.
  const std::string priced = R"(sites:
  - {name: site-1, slots: 40, up_gbps: 40, down_gbps: 40, container_hour: 0.5, egress_gb: 1}
  - {name: site-2, slots: 10, up_gbps: 8, down_gbps: 8, egress_gb: 1}
  - {name: site-3, slots: 20, up_gbps: 16, down_gbps: 40, egress_gb: 1}
jobs:
  - id: analytics
    map: {tasks: 1000, task_s: 2, input_gb: {site-1: 20, site-2: 30, site-3: 50}}
)";
  auto timeOnly = parsePlanProblem(priced, "p.yaml");
  REQUIRE(timeOnly.isOk());
  REQUIRE(timeOnly->prices.size() == 3);
  CHECK(timeOnly->prices[0].containerHour == 0.5);
  CHECK(timeOnly->prices[1].egressGB == std::vector<double>{1, 0, 1});
  auto fast = solvePlan(*timeOnly, "tetrium");
  REQUIRE(fast.isOk());
  REQUIRE(fast->jobs[0].wanGB > 1);
  CHECK(fast->jobs[0].money > fast->jobs[0].wanGB);  // egress at 1 per GB, plus site-1's containers

  auto weighted = parsePlanProblem(std::string(priced) + "options: {cost_weight: 1000}\n", "p.yaml");
  REQUIRE(weighted.isOk());
  auto cheap = solvePlan(*weighted, "tetrium");
  REQUIRE(cheap.isOk());
  CHECK(cheap->jobs[0].mapTasksAtSite == std::vector<int>{200, 300, 500});
  CHECK(cheap->jobs[0].wanGB == 0);
  CHECK(cheap->jobs[0].money == Approx(200 * 2 * 0.5 / 3600));
  CHECK(cheap->jobs[0].completionS > fast->jobs[0].completionS);
  std::ostringstream json, table;
  printPlanJson(*weighted, *cheap, json);
  CHECK(nlohmann::json::parse(json.str())["jobs"][0]["money"].get<double>() == Approx(cheap->jobs[0].money));
  printPlanTable(*weighted, *cheap, table);
  CHECK_THAT(table.str(), Catch::Contains("money 0.06"));

  CHECK(errorOf(std::string(priced) + "options: {cost_weight: 2000000}\n") ==
        "p.yaml:8: options.cost_weight: expected seconds per currency unit in [0, 1000000]");
  CHECK_THAT(errorOf(std::string(kTetrium).replace(std::string(kTetrium).find("down_gbps: 8}"), 13,
                                                  "down_gbps: 8, egress_gb: -1}")),
             Catch::Contains("sites[1].egress_gb"));
}
