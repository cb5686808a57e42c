#pragma once
// Max-min fair assignment of the tasks of several jobs to datacenter slots (paper 002):
// lexicographically minimize the non-increasingly sorted vector of job completion times,
// where a job completes when its slowest task does and task i at datacenter j takes
// c_ij + e_ij (transfer + execution).
//
// The paper's LP objective sum M^(c+e) overflows doubles for realistic times. We solve the
// same problem with thresholds: the worst completion time is the smallest distinct task cost
// T for which "every task uses a datacenter with cost <= its job's threshold" is feasible — a
// bipartite b-matching (the paper's totally unimodular constraints (5)-(6)), checked by
// max-flow, so the assignment is integral. Jobs that cannot go below the level are fixed
// there (paper Alg. 1 fixes one job per round the same way) and the next level is minimized.
//
// Ties — several jobs compete for one bottleneck and none is individually forced — are the
// hard part (choosing the fewest jobs to keep at a level is a covering problem). They are
// searched exactly (smallest keep sets by size, every smallest set followed down) within a
// wall-clock budget; once it is spent, each remaining tie keeps a greedy inclusion-minimal
// set. Every result carries a proven lower bound on the lexicographic optimum: its k-th
// largest completion is at least the k-th largest of the jobs' individual optima (each job
// alone minimized, the others unconstrained), and its largest is exactly ours; level counts
// raise it further: at least ceil(LP) jobs must complete above a cost level l (the LP
// relaxation of "fewest jobs exceeding l", solved with Clp), so that many ranks are at least
// the next level. When the search finished, or the bound meets the result at every rank,
// the result is the optimum.
#include <cstddef>
#include <limits>
#include <string>
#include <vector>

#include "util/result.h"

namespace tellus::sched {

inline constexpr double kNotAllowed = std::numeric_limits<double>::infinity();

struct MaxMinTask {
  std::size_t job = 0;
  std::vector<double> costS;  // per datacenter c_ij + e_ij in seconds; kNotAllowed forbids
};

struct MaxMinProblem {
  std::vector<int> slots;  // a_j, available slots per datacenter
  std::size_t jobs = 0;    // job ids are 0..jobs-1
  std::vector<MaxMinTask> tasks;
  std::vector<std::string> datacenterNames;  // optional, for error messages
};

struct MaxMinOptions {
  // Wall-clock seconds: searchShare of it for the exact tie search (after it, ties are broken
  // greedily), the rest for LP level bounds that tighten the proven gap — or prove the greedy
  // result optimal. One max-flow or LP may run past it.
  double timeBudgetS = 0.5;
  double searchShare = 0.7;  // in [0, 1]
};

struct MaxMinResult {
  std::vector<int> datacenterOfTask;    // integral assignment, one per task
  std::vector<double> jobCompletionS;   // τ_k (0 for a job without tasks)
  bool provenLexOptimal = true;         // the tie search finished within the budget
  // Non-increasing; lowerBoundS[k] <= the k-th largest completion of the lexicographic optimum
  // (so also of this result). Equals the sorted completions when provenLexOptimal.
  std::vector<double> lowerBoundS;
  double maxGapS = 0;                   // max over k of (k-th largest completion - lowerBoundS[k])
  bool provenByBound = false;           // proven although the search stopped: bound = result
  std::size_t flowChecks = 0;           // max-flow feasibility checks performed
  std::size_t boundLps = 0;             // LPs solved to tighten the lower bound
};

// Errors (kInvalidArgument): cost vector size != datacenters, negative/NaN cost or slots, job
// index out of range, or no feasible assignment at all (the message names the datacenters
// whose slots are too few for the tasks that can only run there).
Result<MaxMinResult> maxMinFairAssign(const MaxMinProblem& problem, const MaxMinOptions& options = {});

// Transfer time of a task (paper 002 eq. 1): 0 if all its input is at `destination`,
// otherwise max over sources s != destination of inputMB[s] / bandwidthMBps[s][destination].
double maxMinTransferS(const std::vector<double>& inputMB, const std::vector<std::vector<double>>& bandwidthMBps,
                       std::size_t destination);

// Sorted (non-increasing) completion vector comparison: true if a is lexicographically
// smaller than b, with values within `tolerance` treated as equal.
bool lexSmaller(std::vector<double> a, std::vector<double> b, double tolerance = 1e-9);

}  // namespace tellus::sched
