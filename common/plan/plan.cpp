#include "plan/plan.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iomanip>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>
#include <sstream>

#include "sched/job_order.h"
#include "sched/max_min.h"
#include "sched/tetrium_round.h"

namespace tellus::plan {
namespace {

constexpr double kBitsPerByte = 8.0;
const char* const kDefaultPolicy = "tetrium";

// ---- parsing ------------------------------------------------------------------------------

class Parser {
 public:
  explicit Parser(std::string source) : source_(std::move(source)) {}

  Error error(const YAML::Node& node, const std::string& path, const std::string& what) const {
    const int line = node.Mark().line >= 0 ? node.Mark().line + 1 : 0;
    return makeError(ErrorCode::kInvalidArgument, source_ + ":" + std::to_string(line) + ": " + path + ": " + what);
  }

  static std::string shown(const YAML::Node& node) {
    if (node.IsScalar()) return "'" + node.Scalar() + "'";
    if (node.IsMap()) return "a mapping";
    if (node.IsSequence()) return "a list";
    return "nothing";
  }

  Status expectMap(const YAML::Node& node, const std::string& path, const std::set<std::string>& allowed) const {
    if (!node.IsMap()) return error(node, path, "expected a mapping, got " + shown(node));
    for (const auto& entry : node) {
      const std::string key = entry.first.as<std::string>();
      if (!allowed.contains(key)) {
        std::string known;
        for (const std::string& k : allowed) known += (known.empty() ? "" : ", ") + k;
        return error(entry.first, path.empty() ? key : path + "." + key, "unknown field (expected one of: " + known + ")");
      }
    }
    return Status::ok();
  }

  Result<double> number(const YAML::Node& node, const std::string& path, double minimum, bool exclusive = false) const {
    const std::string expected = std::string("expected a number ") + (exclusive ? "> " : ">= ") + format(minimum);
    if (!node.IsScalar()) return error(node, path, expected + ", got " + shown(node));
    double value = 0;
    try {
      std::size_t used = 0;
      value = std::stod(node.Scalar(), &used);
      if (used != node.Scalar().size()) throw std::invalid_argument("trailing");
    } catch (const std::exception&) {
      return error(node, path, expected + ", got " + shown(node));
    }
    if (!std::isfinite(value) || value < minimum || (exclusive && value == minimum)) {
      return error(node, path, expected + ", got " + shown(node));
    }
    return value;
  }

  Result<int> integer(const YAML::Node& node, const std::string& path, int minimum) const {
    const std::string expected = "expected an integer >= " + std::to_string(minimum);
    if (!node.IsScalar()) return error(node, path, expected + ", got " + shown(node));
    long long value = 0;
    try {
      std::size_t used = 0;
      value = std::stoll(node.Scalar(), &used);
      if (used != node.Scalar().size()) throw std::invalid_argument("trailing");
    } catch (const std::exception&) {
      return error(node, path, expected + ", got " + shown(node));
    }
    if (value < minimum || value > 1'000'000'000) return error(node, path, expected + ", got " + shown(node));
    return static_cast<int>(value);
  }

  Result<std::string> text(const YAML::Node& node, const std::string& path) const {
    if (!node.IsScalar() || node.Scalar().empty()) return error(node, path, "expected a non-empty string, got " + shown(node));
    return node.Scalar();
  }

  // Per-site amounts as a mapping {site: GB}; sites not named hold 0.
  Result<std::vector<double>> perSite(const YAML::Node& node, const std::string& path,
                                      const std::vector<sched::SiteResources>& sites) const {
    if (!node.IsMap()) return error(node, path, "expected a mapping of site name to GB, got " + shown(node));
    std::vector<double> values(sites.size(), 0.0);
    for (const auto& entry : node) {
      const std::string site = entry.first.as<std::string>();
      auto it = std::find_if(sites.begin(), sites.end(), [&](const auto& s) { return s.name == site; });
      if (it == sites.end()) return error(entry.first, path + "." + site, "unknown site (not listed under sites)");
      auto value = number(entry.second, path + "." + site, 0);
      if (!value) return value.error();
      values[static_cast<std::size_t>(it - sites.begin())] = *value;
    }
    return values;
  }

  static std::string format(double v) {
    std::ostringstream s;
    s << v;
    return s.str();
  }

 private:
  std::string source_;
};

#define PLAN_ASSIGN(target, expr)          \
  do {                                     \
    auto _r = (expr);                      \
    if (!_r) return Status(_r.error());    \
    target = std::move(_r.value());        \
  } while (0)

Status parseSites(const Parser& p, const YAML::Node& node, PlanProblem& problem) {
  if (!node.IsSequence() || node.size() == 0) return p.error(node, "sites", "expected a non-empty list of sites");
  for (std::size_t i = 0; i < node.size(); ++i) {
    const YAML::Node site = node[i];
    const std::string path = "sites[" + std::to_string(i) + "]";
    TELLUS_RETURN_IF_ERROR(
        p.expectMap(site, path, {"name", "slots", "up_gbps", "down_gbps", "container_hour", "egress_gb"}));
    for (const char* field : {"name", "slots", "up_gbps", "down_gbps"}) {
      if (!site[field]) return p.error(site, path + "." + field, "missing (required)");
    }
    sched::SiteResources s;
    PLAN_ASSIGN(s.name, p.text(site["name"], path + ".name"));
    for (const auto& other : problem.sites) {
      if (other.name == s.name) return p.error(site["name"], path + ".name", "duplicate site name '" + s.name + "'");
    }
    PLAN_ASSIGN(s.slots, p.integer(site["slots"], path + ".slots", 0));
    double up = 0, down = 0;
    PLAN_ASSIGN(up, p.number(site["up_gbps"], path + ".up_gbps", 0));
    PLAN_ASSIGN(down, p.number(site["down_gbps"], path + ".down_gbps", 0));
    s.upGBps = up / kBitsPerByte;
    s.downGBps = down / kBitsPerByte;
    // Prices: per container-hour, and per GB sent to any other site (the sender pays).
    sched::SitePrices prices;
    double egress = 0;
    if (site["container_hour"]) PLAN_ASSIGN(prices.containerHour, p.number(site["container_hour"], path + ".container_hour", 0));
    if (site["egress_gb"]) PLAN_ASSIGN(egress, p.number(site["egress_gb"], path + ".egress_gb", 0));
    if (egress > 0) prices.egressGB.assign(node.size(), egress);
    if (site["container_hour"] || site["egress_gb"]) {
      problem.prices.resize(node.size());
      problem.prices[i] = prices;
    }
    problem.sites.push_back(s);
  }
  for (std::size_t x = 0; x < problem.prices.size(); ++x) {
    if (!problem.prices[x].egressGB.empty()) problem.prices[x].egressGB[x] = 0;  // intra-site is free
  }
  return Status::ok();
}

Status parseJob(const Parser& p, const YAML::Node& node, std::size_t index, PlanProblem& problem) {
  const std::string path = "jobs[" + std::to_string(index) + "]";
  TELLUS_RETURN_IF_ERROR(p.expectMap(node, path, {"id", "arrival_s", "remaining_stages", "map", "reduce"}));
  PlanJob job;
  if (!node["id"]) return p.error(node, path + ".id", "missing (required)");
  PLAN_ASSIGN(job.id, p.text(node["id"], path + ".id"));
  for (const auto& other : problem.jobs) {
    if (other.id == job.id) return p.error(node["id"], path + ".id", "duplicate job id '" + job.id + "'");
  }
  if (node["arrival_s"]) PLAN_ASSIGN(job.arrivalS, p.number(node["arrival_s"], path + ".arrival_s", 0));
  if (node["remaining_stages"]) PLAN_ASSIGN(job.remainingStages, p.integer(node["remaining_stages"], path + ".remaining_stages", 1));
  if (!node["map"] && !node["reduce"]) return p.error(node, path, "expected a map and/or a reduce stage");
  if (node["map"]) {
    const YAML::Node map = node["map"];
    const std::string mp = path + ".map";
    TELLUS_RETURN_IF_ERROR(p.expectMap(map, mp, {"tasks", "task_s", "input_gb"}));
    for (const char* field : {"tasks", "task_s", "input_gb"}) {
      if (!map[field]) return p.error(map, mp + "." + field, "missing (required)");
    }
    PlanMapStage stage;
    PLAN_ASSIGN(stage.tasks, p.integer(map["tasks"], mp + ".tasks", 0));
    PLAN_ASSIGN(stage.taskS, p.number(map["task_s"], mp + ".task_s", 0));
    PLAN_ASSIGN(stage.inputGB, p.perSite(map["input_gb"], mp + ".input_gb", problem.sites));
    job.map = stage;
  }
  if (node["reduce"]) {
    const YAML::Node reduce = node["reduce"];
    const std::string rp = path + ".reduce";
    TELLUS_RETURN_IF_ERROR(p.expectMap(reduce, rp, {"tasks", "task_s", "shuffle_gb", "output_ratio"}));
    for (const char* field : {"tasks", "task_s"}) {
      if (!reduce[field]) return p.error(reduce, rp + "." + field, "missing (required)");
    }
    PlanReduceStage stage;
    PLAN_ASSIGN(stage.tasks, p.integer(reduce["tasks"], rp + ".tasks", 0));
    PLAN_ASSIGN(stage.taskS, p.number(reduce["task_s"], rp + ".task_s", 0));
    if (reduce["shuffle_gb"]) {
      if (job.map) {
        return p.error(reduce["shuffle_gb"], rp + ".shuffle_gb",
                       "not allowed after a map stage (the map placement decides it; use output_ratio)");
      }
      std::vector<double> shuffle;
      PLAN_ASSIGN(shuffle, p.perSite(reduce["shuffle_gb"], rp + ".shuffle_gb", problem.sites));
      stage.shuffleGB = shuffle;
    } else if (!job.map) {
      return p.error(reduce, rp + ".shuffle_gb", "missing (required for a job whose current stage is the reduce)");
    }
    if (reduce["output_ratio"]) {
      if (!job.map) return p.error(reduce["output_ratio"], rp + ".output_ratio", "only meaningful after a map stage");
      PLAN_ASSIGN(stage.outputRatio, p.number(reduce["output_ratio"], rp + ".output_ratio", 0));
    }
    job.reduce = stage;
  }
  const int stages = (job.map ? 1 : 0) + (job.reduce ? 1 : 0);
  if (job.remainingStages == 0) job.remainingStages = stages;
  if (job.remainingStages < stages) {
    return p.error(node["remaining_stages"], path + ".remaining_stages",
                   "expected at least " + std::to_string(stages) + " (the stages listed)");
  }
  problem.jobs.push_back(std::move(job));
  return Status::ok();
}

bool knownPolicy(const std::string& name) {
  const auto names = planPolicyNames();
  return std::find(names.begin(), names.end(), name) != names.end();
}

std::string policyList() {
  std::string list;
  for (const std::string& n : planPolicyNames()) list += (list.empty() ? "" : ", ") + n;
  return list;
}

}  // namespace

std::vector<std::string> planPolicyNames() {
  // Stage placements and the job orders of the registry that rank jobs across sites (fair and
  // Tetrium's order need a running cluster: tellus-sim). "max-min" is a placement name too, but
  // a plan sees every job, so it runs paper 002 across the jobs (maxMinPolicy), not per stage.
  std::vector<std::string> names = sched::placementNames();
  for (const auto& order : sched::jobOrderNames()) {
    if (sched::ranksFromQueues(*sched::parseJobOrder(order))) names.push_back(order);
  }
  return names;
}

Result<PlanProblem> parsePlanProblem(const std::string& yamlText, const std::string& sourceName) {
  YAML::Node root;
  try {
    root = YAML::Load(yamlText);
  } catch (const YAML::Exception& e) {
    return makeError(ErrorCode::kInvalidArgument,
                     sourceName + ":" + std::to_string(e.mark.line + 1) + ": invalid YAML: " + e.msg);
  }
  Parser p(sourceName);
  PlanProblem problem;
  problem.sourceName = sourceName;
  if (!root.IsMap()) return p.error(root, "(top level)", "expected a mapping with sites and jobs");
  TELLUS_RETURN_IF_ERROR(p.expectMap(root, "", {"policy", "options", "sites", "jobs"}));
  if (!root["sites"]) return p.error(root, "sites", "missing (required)");
  if (!root["jobs"]) return p.error(root, "jobs", "missing (required)");
  TELLUS_RETURN_IF_ERROR(parseSites(p, root["sites"], problem));
  if (root["policy"]) {
    PLAN_ASSIGN(problem.policy, p.text(root["policy"], "policy"));
    if (!knownPolicy(problem.policy)) return p.error(root["policy"], "policy", "expected one of: " + policyList());
  }
  if (root["options"]) {
    const YAML::Node options = root["options"];
    TELLUS_RETURN_IF_ERROR(
        p.expectMap(options, "options", {"wan_budget_rho", "fairness_epsilon", "max_min_budget_s", "cost_weight"}));
    if (options["cost_weight"]) {
      PLAN_ASSIGN(problem.costWeight, p.number(options["cost_weight"], "options.cost_weight", 0));
      if (problem.costWeight > sched::kMaxCostWeightSPerUnit) {
        return p.error(options["cost_weight"], "options.cost_weight",
                       fmt::format("expected seconds per currency unit in [0, {}]", sched::kMaxCostWeightSPerUnit));
      }
    }
    if (options["max_min_budget_s"]) {
      PLAN_ASSIGN(problem.maxMinTimeBudgetS, p.number(options["max_min_budget_s"], "options.max_min_budget_s", 0, true));
      if (problem.maxMinTimeBudgetS > 3600) {
        return p.error(options["max_min_budget_s"], "options.max_min_budget_s", "expected at most 3600 (seconds)");
      }
    }
    if (options["wan_budget_rho"]) {
      PLAN_ASSIGN(problem.wanBudgetRho, p.number(options["wan_budget_rho"], "options.wan_budget_rho", 0));
      if (problem.wanBudgetRho > 1) return p.error(options["wan_budget_rho"], "options.wan_budget_rho", "expected a number in [0,1]");
    }
    if (options["fairness_epsilon"]) {
      PLAN_ASSIGN(problem.fairnessEpsilon, p.number(options["fairness_epsilon"], "options.fairness_epsilon", 0));
      if (problem.fairnessEpsilon > 1) {
        return p.error(options["fairness_epsilon"], "options.fairness_epsilon", "expected a number in [0,1]");
      }
    }
  }
  const YAML::Node jobs = root["jobs"];
  if (!jobs.IsSequence() || jobs.size() == 0) return p.error(jobs, "jobs", "expected a non-empty list of jobs");
  for (std::size_t i = 0; i < jobs.size(); ++i) TELLUS_RETURN_IF_ERROR(parseJob(p, jobs[i], i, problem));
  int slots = 0;
  for (const auto& s : problem.sites) slots += s.slots;
  if (slots == 0) return p.error(root["sites"], "sites", "expected at least one site with slots > 0");
  return problem;
}

Result<PlanProblem> loadPlanProblem(const std::string& path) {
  std::ifstream in(path);
  if (!in) return makeError(ErrorCode::kInvalidArgument, path + ": cannot open file");
  std::stringstream text;
  text << in.rdbuf();
  return parsePlanProblem(text.str(), path);
}

namespace {

// ---- solving ------------------------------------------------------------------------------

sched::MapStage mapStageOf(const PlanMapStage& s) { return sched::MapStage{s.inputGB, s.tasks, s.taskS}; }

// Shuffle data left at each site by a map placement: each map task writes ratio × its input.
std::vector<double> shuffleAfterMap(const PlanMapStage& map, const std::vector<std::vector<int>>& tasks, double ratio) {
  const std::size_t n = map.inputGB.size();
  std::vector<double> shuffle(n, 0.0);
  for (std::size_t x = 0; x < n; ++x) {
    const int reading = std::accumulate(tasks[x].begin(), tasks[x].end(), 0);
    if (reading == 0) continue;
    for (std::size_t y = 0; y < n; ++y) shuffle[y] += ratio * map.inputGB[x] * tasks[x][y] / reading;
  }
  return shuffle;
}

std::string fixed(double v, int precision = 2) {
  if (std::isinf(v)) return "inf";
  std::ostringstream s;
  s << std::fixed << std::setprecision(precision) << v;
  return s.str();
}

// Share of all map tasks running at each site in a fractional map placement (column sums).
std::vector<double> mapColumnShares(const std::vector<std::vector<double>>& fraction) {
  std::vector<double> share(fraction.size(), 0.0);
  for (const auto& row : fraction)
    for (std::size_t y = 0; y < row.size() && y < share.size(); ++y) share[y] += row[y];
  return share;
}

std::vector<double> toFractions(const std::vector<int>& tasks) {
  const int total = std::accumulate(tasks.begin(), tasks.end(), 0);
  std::vector<double> f(tasks.size(), 0.0);
  for (std::size_t i = 0; i < tasks.size(); ++i) f[i] = total > 0 ? static_cast<double>(tasks[i]) / total : 0.0;
  return f;
}

sched::TetriumOptions tetriumOptions(const PlanProblem& problem) {
  sched::TetriumOptions options{problem.wanBudgetRho};
  options.costWeightSPerUnit = problem.costWeight;
  options.prices = problem.prices;
  return options;
}

// The stage after the current one, placed alone on all sites.
Status addReduceAfterMap(const PlanProblem& problem, sched::Placement policy, const PlanJob& job,
                         const std::vector<std::vector<int>>& mapTasks, PlanJobResult& result) {
  if (!job.reduce) return Status::ok();
  sched::ReduceStage stage{shuffleAfterMap(*job.map, mapTasks, job.reduce->outputRatio), job.reduce->tasks,
                           job.reduce->taskS};
  auto placed = sched::placeReduce(policy, problem.sites, stage, tetriumOptions(problem));
  if (!placed) return Status(placed.error().prepend("job '" + job.id + "' reduce stage"));
  result.money += placed->money;
  result.reduceTasksAtSite = placed->tasks;
  result.reduceFractionAtSite = toFractions(placed->tasks);
  result.reduceTimes = placed->times;
  result.reduceLpTimes = placed->lpTimes;
  result.reduceLpFractionAtSite = placed->fraction;
  result.wanGB += placed->wanGB;
  return Status::ok();
}

Status placementPolicy(const PlanProblem& problem, sched::Placement policy, PlanResult& result) {
  const sched::TetriumOptions options = tetriumOptions(problem);
  result.jobs.resize(problem.jobs.size());
  std::vector<double> completion(problem.jobs.size(), 0.0);
  if (policy == sched::Placement::kTetrium) {
    // The current stages share the sites in one scheduling round (§4.1); later stages are
    // estimated alone on all sites.
    std::vector<sched::TetriumJob> jobs;
    for (const PlanJob& job : problem.jobs) {
      sched::TetriumJob t;
      t.id = job.id;
      t.remainingStages = job.remainingStages;
      if (job.map) {
        t.kind = sched::StageKind::kMap;
        t.map = mapStageOf(*job.map);
      } else {
        t.kind = sched::StageKind::kReduce;
        t.reduce = sched::ReduceStage{*job.reduce->shuffleGB, job.reduce->tasks, job.reduce->taskS};
      }
      jobs.push_back(std::move(t));
    }
    auto round = sched::tetriumSchedulingRound(problem.sites, jobs, sched::TetriumRoundOptions{options, problem.fairnessEpsilon});
    if (!round) return round.status();
    for (std::size_t j : round->order) result.order.push_back(problem.jobs[j].id);
    for (const sched::JobAllocation& a : round->allocations) {
      const PlanJob& job = problem.jobs[a.job];
      PlanJobResult& r = result.jobs[a.job];
      if (job.map) {
        r.mapTasksAtSite = a.map.tasksAtSite;
        r.mapFractionAtSite = toFractions(a.map.tasksAtSite);
        r.mapTimes = a.times;
        r.mapLpTimes = a.map.lpTimes;
        r.mapLpFractionAtSite = mapColumnShares(a.map.fraction);
        r.wanGB = a.map.wanGB;
        r.money = a.map.money;
        TELLUS_RETURN_IF_ERROR(addReduceAfterMap(problem, policy, job, a.map.tasks, r));
      } else {
        r.reduceTasksAtSite = a.reduce.tasks;
        r.reduceFractionAtSite = toFractions(a.reduce.tasks);
        r.reduceTimes = a.times;
        r.reduceLpTimes = a.reduce.lpTimes;
        r.reduceLpFractionAtSite = a.reduce.fraction;
        r.wanGB = a.reduce.wanGB;
        r.money = a.reduce.money;
      }
    }
    if (!round->waiting.empty()) {
      result.note += "jobs without free slots this round (they wait for the next):";
      for (std::size_t j : round->waiting) {
        result.note += " " + problem.jobs[j].id;
        result.jobs[j].completionS = std::numeric_limits<double>::infinity();
      }
      result.note += "\n";
    }
    result.note += "current stages share the sites in one Tetrium round (slots taken in order); the next stage is "
                   "estimated alone on all sites\n";
  } else {
    for (std::size_t j = 0; j < problem.jobs.size(); ++j) {
      const PlanJob& job = problem.jobs[j];
      PlanJobResult& r = result.jobs[j];
      if (job.map) {
        auto placed = sched::placeMap(policy, problem.sites, mapStageOf(*job.map), options);
        if (!placed) return Status(placed.error().prepend("job '" + job.id + "' map stage"));
        r.mapTasksAtSite = placed->tasksAtSite;
        r.mapFractionAtSite = toFractions(placed->tasksAtSite);
        r.mapTimes = placed->times;
        r.mapLpTimes = placed->lpTimes;
        r.mapLpFractionAtSite = mapColumnShares(placed->fraction);
        r.wanGB = placed->wanGB;
        r.money = placed->money;
        TELLUS_RETURN_IF_ERROR(addReduceAfterMap(problem, policy, job, placed->tasks, r));
      } else {
        sched::ReduceStage stage{*job.reduce->shuffleGB, job.reduce->tasks, job.reduce->taskS};
        auto placed = sched::placeReduce(policy, problem.sites, stage, options);
        if (!placed) return Status(placed.error().prepend("job '" + job.id + "' reduce stage"));
        r.reduceTasksAtSite = placed->tasks;
        r.reduceFractionAtSite = toFractions(placed->tasks);
        r.reduceTimes = placed->times;
        r.reduceLpTimes = placed->lpTimes;
        r.reduceLpFractionAtSite = placed->fraction;
        r.wanGB = placed->wanGB;
        r.money = placed->money;
      }
    }
    for (const PlanJob& job : problem.jobs) result.order.push_back(job.id);
    result.note += "each job is placed alone on all sites (no contention between jobs under this policy)\n";
  }
  for (std::size_t j = 0; j < problem.jobs.size(); ++j) {
    PlanJobResult& r = result.jobs[j];
    r.id = problem.jobs[j].id;
    if (!std::isinf(r.completionS)) r.completionS = r.mapTimes.totalS() + r.reduceTimes.totalS();
  }
  return Status::ok();
}

Status orderingPolicy(const PlanProblem& problem, sched::JobOrder policy, PlanResult& result) {
  sched::OrderingInput input;
  double taskS = 0;
  for (const auto& s : problem.sites) input.slots.push_back(s.slots);
  result.jobs.resize(problem.jobs.size());
  for (std::size_t j = 0; j < problem.jobs.size(); ++j) {
    const PlanJob& job = problem.jobs[j];
    std::vector<int> tasks;
    if (job.map) {
      // Sub-jobs where the data is (the setting of paper 001).
      tasks = sched::mapTasksPerSource(job.map->inputGB, job.map->tasks);
      result.jobs[j].mapTasksAtSite = tasks;
      result.jobs[j].mapFractionAtSite = toFractions(tasks);
      taskS += job.map->taskS;
    } else {
      tasks = sched::proportionalToData(*job.reduce->shuffleGB, job.reduce->tasks);
      result.jobs[j].reduceTasksAtSite = tasks;
      result.jobs[j].reduceFractionAtSite = toFractions(tasks);
      taskS += job.reduce->taskS;
    }
    input.jobs.push_back(sched::QueuedJob{job.id, job.arrivalS, std::vector<double>(tasks.begin(), tasks.end())});
  }
  taskS /= static_cast<double>(problem.jobs.size());
  const sched::SiteOrders orders = sched::computeOrders(input, policy);
  const std::vector<double> finish = sched::finishInstants(input, orders);
  if (orders.perSite.size() > 0) {
    // Independent-SRPT has one order per site; report the jobs by finish instant.
    std::vector<std::size_t> byFinish(problem.jobs.size());
    std::iota(byFinish.begin(), byFinish.end(), 0);
    if (policy == sched::JobOrder::kIndependentSrpt) {
      std::stable_sort(byFinish.begin(), byFinish.end(), [&](auto a, auto b) { return finish[a] < finish[b]; });
    } else {
      byFinish = orders.perSite[0];
    }
    for (std::size_t j : byFinish) result.order.push_back(problem.jobs[j].id);
  }
  for (std::size_t j = 0; j < problem.jobs.size(); ++j) {
    result.jobs[j].id = problem.jobs[j].id;
    result.jobs[j].completionS = finish[j] * taskS;
    result.jobs[j].stageTimesModeled = false;
  }
  std::ostringstream note;
  note << "ordering policies serve the sites' queues in the computed order; only the current stage is "
          "counted, completion = finish instant (tasks per slot) x mean task_s ("
       << taskS << " s)";
  if (policy == sched::JobOrder::kIndependentSrpt) note << "; each site has its own order, jobs listed by finish";
  note << "\n";
  result.note += note.str();
  return Status::ok();
}

Status maxMinPolicy(const PlanProblem& problem, PlanResult& result) {
  // One task per slot (paper 002): task from source x costs its transfer (its input over the
  // slower of x's uplink and the destination's downlink) plus its task time.
  const std::size_t n = problem.sites.size();
  sched::MaxMinProblem mm;
  mm.jobs = problem.jobs.size();
  for (const auto& s : problem.sites) {
    mm.slots.push_back(s.slots);
    mm.datacenterNames.push_back("site '" + s.name + "'");
  }
  std::vector<std::size_t> taskSource;
  std::vector<double> taskGB;
  for (std::size_t j = 0; j < problem.jobs.size(); ++j) {
    const PlanJob& job = problem.jobs[j];
    if (!job.map) return makeError(ErrorCode::kInvalidArgument, "max-min: job '" + job.id + "' has no map stage");
    const std::vector<int> perSource = sched::mapTasksPerSource(job.map->inputGB, job.map->tasks);
    for (std::size_t x = 0; x < n; ++x) {
      for (int t = 0; t < perSource[x]; ++t) {
        sched::MaxMinTask task;
        task.job = j;
        const double gb = job.map->inputGB[x] / perSource[x];
        for (std::size_t y = 0; y < n; ++y) {
          const double bw = std::min(problem.sites[x].upGBps, problem.sites[y].downGBps);
          const double transfer = y == x || gb <= 0 ? 0.0 : (bw > 0 ? gb / bw : sched::kNotAllowed);
          task.costS.push_back(transfer + job.map->taskS);
        }
        mm.tasks.push_back(std::move(task));
        taskSource.push_back(x);
        taskGB.push_back(gb);
      }
    }
  }
  auto solved = sched::maxMinFairAssign(mm, sched::MaxMinOptions{problem.maxMinTimeBudgetS});
  if (!solved) return Status(solved.error().prepend("max-min"));
  result.jobs.resize(problem.jobs.size());
  for (std::size_t j = 0; j < problem.jobs.size(); ++j) {
    result.jobs[j].id = problem.jobs[j].id;
    result.jobs[j].mapTasksAtSite.assign(n, 0);
    result.jobs[j].completionS = solved->jobCompletionS[j];
    result.jobs[j].stageTimesModeled = false;
  }
  for (std::size_t i = 0; i < mm.tasks.size(); ++i) {
    const auto site = static_cast<std::size_t>(solved->datacenterOfTask[i]);
    PlanJobResult& r = result.jobs[mm.tasks[i].job];
    ++r.mapTasksAtSite[site];
    if (site != taskSource[i]) r.wanGB += taskGB[i];
  }
  for (auto& r : result.jobs) r.mapFractionAtSite = toFractions(r.mapTasksAtSite);
  std::vector<std::size_t> order(problem.jobs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](auto a, auto b) { return result.jobs[a].completionS < result.jobs[b].completionS; });
  for (std::size_t j : order) result.order.push_back(problem.jobs[j].id);
  result.maxMinProven = solved->provenLexOptimal;
  result.maxMinProvenByBound = solved->provenByBound;
  result.maxMinLowerBoundS = solved->lowerBoundS;
  result.maxMinGapS = solved->maxGapS;
  std::ostringstream note;
  note << "max-min: one task per slot, completion = slowest task (transfer + task_s); jobs listed by completion; ";
  const sched::MaxMinOptions options{problem.maxMinTimeBudgetS};
  const double searchS = options.searchShare * options.timeBudgetS;
  if (solved->provenByBound) {
    note << "lexicographically optimal (proven: the tie search stopped after " << fixed(searchS)
         << " s, and the lower bound meets this result at every rank)\n";
  } else if (solved->provenLexOptimal) {
    note << "lexicographically optimal (proven)\n";
  } else {
    note << "tie search stopped after " << fixed(searchS)
         << " s: not proven optimal; the k-th slowest job of the optimum is at most " << fixed(solved->maxGapS)
         << " s faster than here (proven bound)\n";
  }
  result.note += note.str();
  return Status::ok();
}

}  // namespace

Result<PlanResult> solvePlan(const PlanProblem& problem, const std::string& policy) {
  PlanResult result;
  result.policy = !policy.empty() ? policy : (!problem.policy.empty() ? problem.policy : kDefaultPolicy);
  if (!knownPolicy(result.policy)) {
    return makeError(ErrorCode::kInvalidArgument, "--policy: unknown policy '" + result.policy + "' (expected one of: " +
                                                      policyList() + ")");
  }
  // Every policy sees the same stages, so a stage no policy can run honestly (a site's input
  // that no task would read) is rejected once, here, naming the job and the site.
  for (const PlanJob& job : problem.jobs) {
    if (!job.map) continue;
    const Status valid = sched::validateMap(problem.sites, mapStageOf(*job.map));
    if (!valid) return Status(valid.error().prepend(problem.sourceName + ": job '" + job.id + "'"));
  }
  Status status;
  if (result.policy == "max-min") {
    status = maxMinPolicy(problem, result);
  } else if (const auto placement = sched::parsePlacement(result.policy)) {
    status = placementPolicy(problem, *placement, result);
  } else {
    const auto order = sched::parseJobOrder(result.policy);
    if (!order || !sched::ranksFromQueues(*order)) {
      return makeError(ErrorCode::kInternal, "policy '" + result.policy + "' has no plan");
    }
    status = orderingPolicy(problem, *order, result);
  }
  if (!status) return Status(status.error().prepend(problem.sourceName));
  double total = 0;
  for (const auto& j : result.jobs) total += j.completionS;
  result.averageCompletionS = result.jobs.empty() ? 0 : total / static_cast<double>(result.jobs.size());
  return result;
}

void printPlanTable(const PlanProblem& problem, const PlanResult& result, std::ostream& out) {
  out << "policy: " << result.policy << "\n";
  out << "order:  ";
  for (std::size_t i = 0; i < result.order.size(); ++i) out << (i ? " -> " : "") << result.order[i];
  out << "\n\n";
  std::size_t width = 6;
  for (const auto& s : problem.sites) width = std::max(width, s.name.size() + 1);
  for (const PlanJobResult& job : result.jobs) {
    out << "job " << job.id << "  completion " << fixed(job.completionS) << " s  wan " << fixed(job.wanGB) << " GB";
    if (!problem.prices.empty() && job.stageTimesModeled) out << "  money " << fixed(job.money);
    out << "\n";
    out << "  " << std::left << std::setw(static_cast<int>(width)) << "site" << std::right;
    const bool hasMap = !job.mapTasksAtSite.empty(), hasReduce = !job.reduceTasksAtSite.empty();
    if (hasMap) out << std::setw(10) << "map" << std::setw(10) << "map%";
    if (hasReduce) out << std::setw(10) << "reduce" << std::setw(10) << "reduce%";
    out << "\n";
    for (std::size_t x = 0; x < problem.sites.size(); ++x) {
      out << "  " << std::left << std::setw(static_cast<int>(width)) << problem.sites[x].name << std::right;
      if (hasMap) out << std::setw(10) << job.mapTasksAtSite[x] << std::setw(10) << fixed(100 * job.mapFractionAtSite[x], 1);
      if (hasReduce) {
        out << std::setw(10) << job.reduceTasksAtSite[x] << std::setw(10) << fixed(100 * job.reduceFractionAtSite[x], 1);
      }
      out << "\n";
    }
    // Ordering and max-min policies do not model stage times: nothing to print.
    if (job.stageTimesModeled && hasMap) {
      out << "  T_aggr " << fixed(job.mapTimes.transferS) << " s  T_map " << fixed(job.mapTimes.computeS) << " s";
      if (job.mapLpTimes) {
        out << "   (fractional model: T_aggr " << fixed(job.mapLpTimes->transferS) << " s  T_map "
            << fixed(job.mapLpTimes->computeS) << " s  = " << fixed(job.mapLpTimes->totalS()) << " s)";
      }
      out << "\n";
    }
    if (job.stageTimesModeled && hasReduce) {
      out << "  T_shuf " << fixed(job.reduceTimes.transferS) << " s  T_red " << fixed(job.reduceTimes.computeS) << " s";
      if (job.reduceLpTimes) {
        out << "   (fractional model: T_shuf " << fixed(job.reduceLpTimes->transferS) << " s  T_red "
            << fixed(job.reduceLpTimes->computeS) << " s  = " << fixed(job.reduceLpTimes->totalS()) << " s)";
      }
      out << "\n";
    }
    out << "\n";
  }
  out << "average completion: " << fixed(result.averageCompletionS) << " s\n";
  if (!result.note.empty()) out << "note: " << result.note;
}

void printPlanJson(const PlanProblem& problem, const PlanResult& result, std::ostream& out) {
  using nlohmann::json;
  auto finite = [](double v) -> json { return std::isfinite(v) ? json(v) : json(nullptr); };
  json doc;
  doc["policy"] = result.policy;
  doc["order"] = result.order;
  json sites = json::array();
  for (const auto& s : problem.sites) sites.push_back(s.name);
  doc["sites"] = sites;
  json jobs = json::array();
  for (const PlanJobResult& job : result.jobs) {
    json j;
    j["id"] = job.id;
    j["completion_s"] = finite(job.completionS);
    j["wan_gb"] = job.wanGB;
    if (!problem.prices.empty() && job.stageTimesModeled) j["money"] = job.money;
    // Stage times only where the policy models them; "lp" is the fractional model.
    auto stage = [&](const std::vector<int>& tasks, const std::vector<double>& fractions, const sched::StageTimes& times,
                     const std::optional<sched::StageTimes>& lpTimes, const std::vector<double>& lpFractions,
                     const char* transferKey, const char* computeKey) {
      json s = {{"tasks", tasks}, {"fractions", fractions}};
      if (job.stageTimesModeled) {
        s[transferKey] = finite(times.transferS);
        s[computeKey] = finite(times.computeS);
      }
      if (lpTimes) {
        s["lp"] = {{"fractions", lpFractions},
                   {transferKey, finite(lpTimes->transferS)},
                   {computeKey, finite(lpTimes->computeS)},
                   {"total_s", finite(lpTimes->totalS())}};
      }
      return s;
    };
    if (!job.mapTasksAtSite.empty()) {
      j["map"] = stage(job.mapTasksAtSite, job.mapFractionAtSite, job.mapTimes, job.mapLpTimes, job.mapLpFractionAtSite,
                       "t_aggr_s", "t_map_s");
    }
    if (!job.reduceTasksAtSite.empty()) {
      j["reduce"] = stage(job.reduceTasksAtSite, job.reduceFractionAtSite, job.reduceTimes, job.reduceLpTimes,
                          job.reduceLpFractionAtSite, "t_shuf_s", "t_red_s");
    }
    jobs.push_back(j);
  }
  doc["jobs"] = jobs;
  doc["average_completion_s"] = finite(result.averageCompletionS);
  if (result.policy == "max-min") {
    doc["max_min"] = {{"proven_optimal", result.maxMinProven},
                      {"proven_by_bound", result.maxMinProvenByBound},
                      {"lower_bound_s", result.maxMinLowerBoundS},
                      {"max_gap_s", result.maxMinGapS}};
  }
  doc["note"] = result.note;
  out << doc.dump(2) << "\n";
}

int runPlanCommand(const std::string& problemPath, const std::string& policy, bool json, std::ostream& out,
                   std::ostream& err) {
  auto problem = loadPlanProblem(problemPath);
  if (!problem) {
    err << "tellus plan: " << problem.message() << "\n";
    return 2;
  }
  auto result = solvePlan(*problem, policy);
  if (!result) {
    err << "tellus plan: " << result.message() << "\n";
    return result.error().code == ErrorCode::kInvalidArgument ? 2 : 1;
  }
  if (json) {
    printPlanJson(*problem, *result, out);
  } else {
    printPlanTable(*problem, *result, out);
  }
  return 0;
}

}  // namespace tellus::plan
