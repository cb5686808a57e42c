#include "sched/max_min.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <map>
#include <numeric>
#include <string>

#include "lp/linear_program.h"
#include "sched/max_flow.h"

namespace tellus::sched {
namespace {

// Threshold meaning "this job may use no datacenter at all" (below every cost).
constexpr double kBelowAll = -1.0;

// Identical tasks of one job (same cost vector) are one flow node with a multiplicity:
// realistic stages have thousands of identical tasks and few distinct classes.
struct TaskClass {
  std::size_t job;
  std::vector<double> cost;
  std::vector<std::size_t> members;  // task indices
};

std::chrono::steady_clock::time_point after(std::chrono::steady_clock::time_point start, double seconds) {
  return start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                     std::chrono::duration<double>(std::max(0.0, seconds)));
}

class Solver {
 public:
  Solver(const MaxMinProblem& problem, const MaxMinOptions& options)
      : problem_(problem),
        deadline_(after(std::chrono::steady_clock::now(),
                        std::clamp(options.searchShare, 0.0, 1.0) * options.timeBudgetS)),
        boundDeadline_(after(std::chrono::steady_clock::now(), options.timeBudgetS)) {
    std::map<std::pair<std::size_t, std::vector<double>>, std::size_t> index;
    for (std::size_t i = 0; i < problem.tasks.size(); ++i) {
      auto key = std::make_pair(problem.tasks[i].job, problem.tasks[i].costS);
      auto [it, inserted] = index.emplace(key, classes_.size());
      if (inserted) classes_.push_back(TaskClass{key.first, key.second, {}});
      classes_[it->second].members.push_back(i);
    }
    jobHasTasks_.assign(problem.jobs, false);
    for (const MaxMinTask& t : problem.tasks) jobHasTasks_[t.job] = true;
  }

  // Is there an assignment where every task of job k uses a datacenter of cost <= theta[k]?
  bool feasible(const std::vector<double>& theta) {
    ++flowChecks_;
    return runFlow(theta, nullptr);
  }

  std::vector<int> assignment(const std::vector<double>& theta) {
    std::vector<int> dc(problem_.tasks.size(), -1);
    runFlow(theta, &dc);
    return dc;
  }

  // Lexicographic solve from a state where `fixed` jobs have their thresholds in theta.
  // Returns the final thresholds (one per job).
  std::vector<double> solve(std::vector<double> theta, std::vector<bool> fixed) {
    while (true) {
      std::vector<std::size_t> open;
      for (std::size_t k = 0; k < problem_.jobs; ++k)
        if (!fixed[k]) open.push_back(k);
      if (open.empty()) return theta;

      // Distinct finite costs of the open jobs' tasks, ascending.
      std::vector<double> levels;
      for (const TaskClass& c : classes_) {
        if (fixed[c.job]) continue;
        for (double v : c.cost)
          if (std::isfinite(v)) levels.push_back(v);
      }
      std::sort(levels.begin(), levels.end());
      levels.erase(std::unique(levels.begin(), levels.end()), levels.end());

      // Smallest common level for the open jobs (monotone: binary search).
      auto at = [&](double level) {
        std::vector<double> t = theta;
        for (std::size_t k : open) t[k] = level;
        return t;
      };
      std::size_t lo = 0, hi = levels.size();  // answer in [lo, hi); hi = none
      while (lo < hi) {
        const std::size_t mid = (lo + hi) / 2;
        if (feasible(at(levels[mid]))) {
          hi = mid;
        } else {
          lo = mid + 1;
        }
        if (hi == mid) continue;
      }
      // The caller checked feasibility with all-open at the top level, so lo is valid.
      const double top = levels[lo];
      const double below = lo > 0 ? levels[lo - 1] : kBelowAll;

      // Only jobs with an edge costing exactly `top` are affected by lowering the level.
      std::vector<std::size_t> premium;
      std::vector<bool> isPremium(problem_.jobs, false);
      for (const TaskClass& c : classes_) {
        if (fixed[c.job] || isPremium[c.job]) continue;
        if (std::find(c.cost.begin(), c.cost.end(), top) != c.cost.end()) {
          isPremium[c.job] = true;
          premium.push_back(c.job);
        }
      }
      std::sort(premium.begin(), premium.end());

      // A job that cannot go below `top` even when everyone else may use `top` is forced.
      std::vector<double> base = at(top);
      std::vector<std::size_t> free;
      for (std::size_t k : premium) {
        std::vector<double> t = base;
        t[k] = below;
        if (feasible(t)) {
          free.push_back(k);
        } else {
          theta[k] = top;
          fixed[k] = true;
        }
      }
      // Can all the others go below now?
      std::vector<double> lowered = theta;
      for (std::size_t k = 0; k < problem_.jobs; ++k)
        if (!fixed[k]) lowered[k] = below;
      // Non-premium open jobs keep the same edges at `below`; they stay open.
      if (feasible(lowered)) continue;

      // Ties: no single job is forced, yet not all can go below. Find the smallest sets of
      // jobs that must stay at `top` and continue lexicographically from each (exact), or,
      // once the budget is spent, from one greedy inclusion-minimal set.
      const std::vector<std::vector<std::size_t>> keepSets = keepSetsAtTie(theta, fixed, free, top, below);
      std::vector<double> best;
      std::vector<double> bestSorted;
      for (const std::vector<std::size_t>& keep : keepSets) {
        std::vector<double> t = theta;
        std::vector<bool> f = fixed;
        for (std::size_t k : keep) {
          t[k] = top;
          f[k] = true;
        }
        std::vector<double> result = solve(t, f);
        std::vector<double> sorted = completionsOf(result);
        if (best.empty() || lexSmaller(sorted, bestSorted)) {
          best = result;
          bestSorted = sorted;
        }
        if (!budgetLeft()) {
          proven_ = false;
          break;
        }
      }
      return best;
    }
  }

  // Job k's completion when it alone is minimized and every other job may use any datacenter:
  // no feasible assignment gives k less, so the sorted vector of these is a lower bound on
  // every feasible sorted completion vector, rank by rank.
  double individualOptimum(std::size_t k) {
    std::vector<double> levels;
    for (const TaskClass& c : classes_) {
      if (c.job != k) continue;
      for (double v : c.cost)
        if (std::isfinite(v)) levels.push_back(v);
    }
    std::sort(levels.begin(), levels.end());
    levels.erase(std::unique(levels.begin(), levels.end()), levels.end());
    std::vector<double> t(problem_.jobs, std::numeric_limits<double>::infinity());
    std::size_t lo = 0, hi = levels.size() - 1;  // the top level is feasible (checked first)
    while (lo < hi) {
      const std::size_t mid = (lo + hi) / 2;
      t[k] = levels[mid];
      if (feasible(t)) {
        hi = mid;
      } else {
        lo = mid + 1;
      }
    }
    return levels[lo];
  }

  // Raises `bound` (a rank-by-rank lower bound on every feasible sorted completion vector,
  // non-increasing) with level counts, until the bound deadline: for a cost level l, any
  // assignment has at least N(l) jobs completing above l, so its N(l) largest completions
  // are at least the next level. N(l) — fewest jobs using a task cost above l — is a covering
  // problem; its LP relaxation (z_k in [0,1] for "job k may exceed l", flows x_cj on the
  // b-matching, the flow of class c over costs above l at most count_c·z_k), rounded up, is
  // a lower bound. Levels are taken from the top, only where the bound is below `sorted`.
  void tightenByLevelCounts(const std::vector<double>& sorted, std::vector<double>& bound) {
    std::vector<double> levels;
    for (const TaskClass& c : classes_)
      for (double v : c.cost)
        if (std::isfinite(v)) levels.push_back(v);
    std::sort(levels.begin(), levels.end());
    levels.erase(std::unique(levels.begin(), levels.end()), levels.end());
    for (std::size_t i = levels.size(); i-- > 1;) {
      if (std::chrono::steady_clock::now() >= boundDeadline_) return;
      const double level = levels[i - 1], next = levels[i];
      bool useful = false;
      for (std::size_t k = 0; k < sorted.size(); ++k) useful |= bound[k] < next - 1e-12 && sorted[k] >= next - 1e-12;
      if (!useful) continue;
      const double jobsAbove = jobsAboveLp(level);
      if (!std::isfinite(jobsAbove)) return;  // out of time (or Clp failed): keep the bound we have
      const auto forced = static_cast<std::size_t>(std::max(0.0, std::ceil(jobsAbove - 1e-6)));
      for (std::size_t k = 0; k < std::min(forced, bound.size()); ++k) bound[k] = std::max(bound[k], next);
    }
  }

  std::size_t flowChecks() const { return flowChecks_; }
  std::size_t boundLps() const { return boundLps_; }
  // Of the last infeasible check: the saturated datacenters on the source side of a minimum
  // cut, and how many tasks could be placed.
  const std::vector<std::size_t>& shortDatacenters() const { return shortDatacenters_; }
  std::int64_t routedTasks() const { return routedTasks_; }
  bool proven() const { return proven_; }
  bool jobHasTasks(std::size_t k) const { return jobHasTasks_[k]; }

  // Completion vector implied by thresholds: jobs without tasks complete at 0.
  std::vector<double> completionsOf(const std::vector<double>& theta) const {
    std::vector<double> c(theta.size());
    for (std::size_t k = 0; k < theta.size(); ++k) c[k] = jobHasTasks_[k] ? theta[k] : 0.0;
    return c;
  }

 private:
  bool budgetLeft() const { return std::chrono::steady_clock::now() < deadline_; }

  // Keeping all of `candidates` at `top` (others below) is feasible; drop them one by one
  // while it stays feasible: an inclusion-minimal keep set in |candidates| checks.
  std::vector<std::size_t> greedyKeepSet(const std::vector<double>& theta, const std::vector<bool>& fixed,
                                         const std::vector<std::size_t>& candidates, double top, double below) {
    std::vector<double> t = theta;
    for (std::size_t k = 0; k < problem_.jobs; ++k)
      if (!fixed[k]) t[k] = below;
    for (std::size_t k : candidates) t[k] = top;
    std::vector<std::size_t> keep;
    for (std::size_t k : candidates) {
      t[k] = below;
      if (!feasible(t)) {
        t[k] = top;
        keep.push_back(k);
      }
    }
    return keep;
  }

  // All smallest keep sets (subsets by size, each checked by max-flow), or — when the budget
  // runs out first — the greedy set alone. Sizes at or above the greedy set's need no search
  // beyond it being smallest, so the search stops there.
  std::vector<std::vector<std::size_t>> keepSetsAtTie(const std::vector<double>& theta, const std::vector<bool>& fixed,
                                                      const std::vector<std::size_t>& candidates, double top,
                                                      double below) {
    const std::vector<std::size_t> greedy = greedyKeepSet(theta, fixed, candidates, top, below);
    if (!budgetLeft()) {
      proven_ = false;
      return {greedy};
    }
    std::vector<std::vector<std::size_t>> found;
    const std::size_t m = candidates.size();
    std::vector<double> t = theta;
    for (std::size_t k = 0; k < problem_.jobs; ++k)
      if (!fixed[k]) t[k] = below;
    for (std::size_t size = 1; size <= greedy.size() && found.empty(); ++size) {
      std::vector<bool> mask(m, false);
      std::fill(mask.begin(), mask.begin() + static_cast<std::ptrdiff_t>(size), true);
      do {
        if (!budgetLeft()) {
          proven_ = false;
          return found.empty() ? std::vector<std::vector<std::size_t>>{greedy} : found;
        }
        std::vector<std::size_t> keep;
        for (std::size_t i = 0; i < m; ++i) {
          if (mask[i]) keep.push_back(candidates[i]);
          t[candidates[i]] = mask[i] ? top : below;
        }
        if (feasible(t)) found.push_back(keep);
      } while (std::prev_permutation(mask.begin(), mask.end()));
    }
    return found;
  }

  // The LP relaxation of N(level) (see tightenByLevelCounts); infinity if Clp fails.
  double jobsAboveLp(double level) {
    ++boundLps_;
    lp::LinearProgram program;
    std::vector<std::size_t> z(problem_.jobs, SIZE_MAX);
    for (std::size_t k = 0; k < problem_.jobs; ++k)
      if (jobHasTasks_[k]) z[k] = program.addVariable(0, 1, 1);
    const std::size_t dcs = problem_.slots.size();
    std::vector<std::vector<std::pair<std::size_t, double>>> atDc(dcs);
    for (const TaskClass& c : classes_) {
      const auto count = static_cast<double>(c.members.size());
      std::vector<std::pair<std::size_t, double>> all, above;
      for (std::size_t j = 0; j < dcs; ++j) {
        if (!std::isfinite(c.cost[j]) || problem_.slots[j] <= 0) continue;
        const std::size_t x = program.addVariable(0, std::min(count, static_cast<double>(problem_.slots[j])), 0);
        all.emplace_back(x, 1.0);
        atDc[j].emplace_back(x, 1.0);
        if (c.cost[j] > level) above.emplace_back(x, 1.0);
      }
      program.addEqual(all, count);
      if (!above.empty()) {
        above.emplace_back(z[c.job], -count);
        program.addLessEqual(above, 0);
      }
    }
    for (std::size_t j = 0; j < dcs; ++j)
      if (!atDc[j].empty()) program.addLessEqual(atDc[j], problem_.slots[j]);
    const std::chrono::duration<double> left = boundDeadline_ - std::chrono::steady_clock::now();
    auto solved = program.solve(std::max(0.0, left.count()));
    return solved ? solved->objective : std::numeric_limits<double>::infinity();
  }

  bool runFlow(const std::vector<double>& theta, std::vector<int>* dcOfTask) {
    const std::size_t dcs = problem_.slots.size();
    const std::size_t source = classes_.size() + dcs, sink = source + 1;
    MaxFlow flow(sink + 1);
    std::vector<std::vector<std::pair<std::size_t, std::size_t>>> classEdges(classes_.size());
    std::int64_t demand = 0;
    for (std::size_t c = 0; c < classes_.size(); ++c) {
      const TaskClass& cls = classes_[c];
      const auto count = static_cast<std::int64_t>(cls.members.size());
      demand += count;
      flow.addEdge(source, c, count);
      for (std::size_t j = 0; j < dcs; ++j) {
        if (std::isfinite(cls.cost[j]) && cls.cost[j] <= theta[cls.job]) {
          classEdges[c].emplace_back(j, flow.addEdge(c, classes_.size() + j, count));
        }
      }
    }
    for (std::size_t j = 0; j < dcs; ++j) flow.addEdge(classes_.size() + j, sink, problem_.slots[j]);
    const std::int64_t routed = flow.run(source, sink);
    const bool ok = routed == demand;
    if (!ok) {
      shortDatacenters_.clear();
      for (std::size_t j = 0; j < dcs; ++j)
        if (flow.onSourceSide(classes_.size() + j)) shortDatacenters_.push_back(j);
      routedTasks_ = routed;
    }
    if (ok && dcOfTask != nullptr) {
      for (std::size_t c = 0; c < classes_.size(); ++c) {
        std::size_t next = 0;
        for (const auto& [j, edge] : classEdges[c]) {
          for (std::int64_t u = 0; u < flow.flowOn(edge); ++u) (*dcOfTask)[classes_[c].members[next++]] = static_cast<int>(j);
        }
      }
    }
    return ok;
  }

  const MaxMinProblem& problem_;
  std::chrono::steady_clock::time_point deadline_;       // exact tie search
  std::chrono::steady_clock::time_point boundDeadline_;  // LP level bounds
  std::vector<TaskClass> classes_;
  std::vector<bool> jobHasTasks_;
  std::size_t flowChecks_ = 0;
  std::size_t boundLps_ = 0;
  bool proven_ = true;
  std::vector<std::size_t> shortDatacenters_;
  std::int64_t routedTasks_ = 0;
};

}  // namespace

bool lexSmaller(std::vector<double> a, std::vector<double> b, double tolerance) {
  std::sort(a.begin(), a.end(), std::greater<>());
  std::sort(b.begin(), b.end(), std::greater<>());
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    if (a[i] < b[i] - tolerance) return true;
    if (a[i] > b[i] + tolerance) return false;
  }
  return a.size() < b.size();
}

double maxMinTransferS(const std::vector<double>& inputMB, const std::vector<std::vector<double>>& bandwidthMBps,
                       std::size_t destination) {
  double worst = 0;
  for (std::size_t s = 0; s < inputMB.size(); ++s) {
    if (s == destination || inputMB[s] <= 0) continue;
    const double bandwidth = bandwidthMBps[s][destination];
    worst = std::max(worst, bandwidth > 0 ? inputMB[s] / bandwidth : std::numeric_limits<double>::infinity());
  }
  return worst;
}

Result<MaxMinResult> maxMinFairAssign(const MaxMinProblem& problem, const MaxMinOptions& options) {
  const std::size_t dcs = problem.slots.size();
  for (std::size_t j = 0; j < dcs; ++j) {
    if (problem.slots[j] < 0) {
      return makeError(ErrorCode::kInvalidArgument, "datacenter " + std::to_string(j) + ": slots must be >= 0");
    }
  }
  for (std::size_t i = 0; i < problem.tasks.size(); ++i) {
    const MaxMinTask& t = problem.tasks[i];
    const std::string where = "task " + std::to_string(i);
    if (t.job >= problem.jobs) return makeError(ErrorCode::kInvalidArgument, where + ": job index out of range");
    if (t.costS.size() != dcs) {
      return makeError(ErrorCode::kInvalidArgument, where + ": " + std::to_string(t.costS.size()) + " costs for " +
                                                        std::to_string(dcs) + " datacenters");
    }
    for (double c : t.costS) {
      if (std::isnan(c) || c < 0) return makeError(ErrorCode::kInvalidArgument, where + ": costs must be >= 0");
    }
  }
  Solver solver(problem, options);
  std::vector<double> theta(problem.jobs, std::numeric_limits<double>::infinity());
  std::vector<bool> fixed(problem.jobs, false);
  for (std::size_t k = 0; k < problem.jobs; ++k) {
    if (!solver.jobHasTasks(k)) {
      fixed[k] = true;
      theta[k] = 0;
    }
  }
  if (!solver.feasible(theta)) {
    std::string names;
    int slots = 0;
    for (std::size_t j : solver.shortDatacenters()) {
      names += (names.empty() ? "" : ", ") +
               (j < problem.datacenterNames.size() ? problem.datacenterNames[j] : "datacenter " + std::to_string(j));
      slots += problem.slots[j];
    }
    return makeError(ErrorCode::kInvalidArgument,
                     "no assignment fits: only " + std::to_string(solver.routedTasks()) + " of " +
                         std::to_string(problem.tasks.size()) + " tasks get a slot (one task per slot); " +
                         (names.empty() ? std::string("no datacenter has a usable slot")
                                        : "the tasks that can run at " + names + " need more than their " +
                                              std::to_string(slots) + " slots"));
  }
  const std::vector<double> finalTheta = solver.solve(theta, fixed);
  MaxMinResult result;
  result.datacenterOfTask = solver.assignment(finalTheta);
  result.jobCompletionS.assign(problem.jobs, 0.0);
  for (std::size_t i = 0; i < problem.tasks.size(); ++i) {
    const auto j = static_cast<std::size_t>(result.datacenterOfTask[i]);
    double& c = result.jobCompletionS[problem.tasks[i].job];
    c = std::max(c, problem.tasks[i].costS[j]);
  }
  result.provenLexOptimal = solver.proven();
  std::vector<double> sorted = result.jobCompletionS;
  std::sort(sorted.begin(), sorted.end(), std::greater<>());
  if (result.provenLexOptimal) {
    result.lowerBoundS = sorted;
  } else {
    // Rank by rank: the jobs' individual optima, and the worst completion (exact: the first
    // level is found by search over all levels, never by a tie).
    for (std::size_t k = 0; k < problem.jobs; ++k) {
      result.lowerBoundS.push_back(solver.jobHasTasks(k) ? solver.individualOptimum(k) : 0.0);
    }
    std::sort(result.lowerBoundS.begin(), result.lowerBoundS.end(), std::greater<>());
    if (!sorted.empty()) result.lowerBoundS[0] = sorted[0];
    solver.tightenByLevelCounts(sorted, result.lowerBoundS);
    for (std::size_t k = 0; k < sorted.size(); ++k) {
      result.maxGapS = std::max(result.maxGapS, sorted[k] - result.lowerBoundS[k]);
    }
    // Every rank at its lower bound: optimal, proven by the bound instead of the search.
    if (result.maxGapS <= 1e-9) {
      result.provenLexOptimal = true;
      result.provenByBound = true;
      result.lowerBoundS = sorted;
      result.maxGapS = 0;
    }
  }
  result.flowChecks = solver.flowChecks();
  result.boundLps = solver.boundLps();
  return result;
}

}  // namespace tellus::sched
