#pragma once
// `tellus plan PROBLEM.yaml`: solve a placement / ordering problem offline, with the same
// policy code the daemons use, and print per-site task counts, fractions, stage times,
// completion times and the job order. The YAML format is documented in docs/plan.md.

#include <cstddef>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "sched/placement.h"
#include "util/result.h"

namespace tellus::plan {

struct PlanMapStage {
  std::vector<double> inputGB;  // per site, in the order of PlanProblem::sites
  int tasks = 0;
  double taskS = 0;
};

struct PlanReduceStage {
  int tasks = 0;
  double taskS = 0;
  // Either the shuffle data per site is given (a job whose current stage is the reduce), or
  // it follows from the map placement: each map task writes outputRatio × its input.
  std::optional<std::vector<double>> shuffleGB;
  double outputRatio = 1.0;
};

struct PlanJob {
  std::string id;
  double arrivalS = 0;
  int remainingStages = 0;  // 0 = derived: (map ? 1 : 0) + (reduce ? 1 : 0)
  std::optional<PlanMapStage> map;
  std::optional<PlanReduceStage> reduce;
};

struct PlanProblem {
  std::string sourceName;  // file name, for messages
  std::vector<sched::SiteResources> sites;  // bandwidth converted to GB/s
  std::vector<PlanJob> jobs;
  std::string policy;  // from the file; empty = default ("tetrium")
  double wanBudgetRho = 1.0;
  double fairnessEpsilon = 1.0;
  double maxMinTimeBudgetS = 0.5;  // wall-clock seconds for max-min's exact tie search
  // options.cost_weight: seconds per currency unit tetrium may trade for money, at the sites'
  // container_hour / egress_gb (`prices`, in site order; empty when no site has a price).
  double costWeight = 0;
  std::vector<sched::SitePrices> prices;
};

// Policy names accepted by --policy / `policy:`.
std::vector<std::string> planPolicyNames();

// Parses YAML text. Errors (kInvalidArgument) read "<sourceName>:<line>: <field path>: <what
// was expected>", e.g. "p.yaml:7: sites[1].slots: expected a non-negative integer, got -3".
// Unknown fields are rejected the same way.
Result<PlanProblem> parsePlanProblem(const std::string& yamlText, const std::string& sourceName);
Result<PlanProblem> loadPlanProblem(const std::string& path);

// Per-job outcome of a plan.
struct PlanJobResult {
  std::string id;
  std::vector<int> mapTasksAtSite, reduceTasksAtSite;      // empty if the job has no such stage
  // Share of the stage's tasks at each site: tasks at site / tasks (the integer placement),
  // for maps and reduces alike.
  std::vector<double> mapFractionAtSite, reduceFractionAtSite;
  // Stage times of the integer placement (ceil waves); only placement policies model them.
  bool stageTimesModeled = true;
  sched::StageTimes mapTimes, reduceTimes;
  // The placement's fractional model (placement policies): the LP optimum for tetrium
  // (fractional waves, before rounding) and the share of tasks it puts at each site.
  std::optional<sched::StageTimes> mapLpTimes, reduceLpTimes;
  std::vector<double> mapLpFractionAtSite, reduceLpFractionAtSite;
  double startS = 0;       // when the job's stage starts (0 unless ordering policies queue it)
  double completionS = 0;  // estimated completion from the plan's start
  double wanGB = 0;
  double money = 0;  // what the placement costs at the sites' prices (policies that model stage times)
};

struct PlanResult {
  std::string policy;
  std::vector<std::string> order;  // job ids in priority order
  std::vector<PlanJobResult> jobs;  // in input order
  double averageCompletionS = 0;
  std::string note;  // model caveats printed under the table
  // max-min only: whether the result is proven lexicographically optimal, else a proven lower
  // bound on the optimum's sorted completions and the largest rank-by-rank gap to it.
  bool maxMinProven = true;
  bool maxMinProvenByBound = false;  // proven because the lower bound meets the result
  std::vector<double> maxMinLowerBoundS;
  double maxMinGapS = 0;
};

// Runs `policy` (empty = the file's, else "tetrium").
Result<PlanResult> solvePlan(const PlanProblem& problem, const std::string& policy);

void printPlanTable(const PlanProblem& problem, const PlanResult& result, std::ostream& out);
void printPlanJson(const PlanProblem& problem, const PlanResult& result, std::ostream& out);

// The whole command: load, solve, print. Returns 0 on success, 2 on bad input (message on
// `err`), 1 on an internal failure.
int runPlanCommand(const std::string& problemPath, const std::string& policy, bool json, std::ostream& out,
                   std::ostream& err);

}  // namespace tellus::plan
