#include <catch2/catch.hpp>

#include <algorithm>
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
}
