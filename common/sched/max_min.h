#pragma once
// Max-min fair assignment of the tasks of several jobs to datacenter slots (paper 002):
// lexicographically minimize the non-increasingly sorted vector of job completion times,
// where a job completes when its slowest task does and task i at datacenter j takes
// c_ij + e_ij (transfer + execution).
//
// The paper's LP objective sum M^(c+e) overflows doubles for realistic times. We solve the
// same problem exactly with thresholds: the worst completion time is the smallest distinct
// task cost T for which "every task uses a datacenter with cost <= its job's threshold" is
// feasible — a bipartite b-matching (the paper's totally unimodular constraints (5)-(6)),
// checked by max-flow, so the assignment is integral. Jobs that cannot go below the level
// are fixed there (paper Alg. 1 fixes one job per round the same way) and the next level is
// minimized. When several jobs compete for the same bottleneck and none is individually
// forced, the smallest set of jobs to keep at the level is searched exactly (subsets by size,
// each checked by max-flow), within a search budget.

#include <cstddef>
#include <limits>
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
};

struct MaxMinOptions {
  // Max-flow checks spent on the tie search before giving up on proving optimality.
  std::size_t tieSearchBudget = 100000;
};

struct MaxMinResult {
  std::vector<int> datacenterOfTask;    // integral assignment, one per task
  std::vector<double> jobCompletionS;   // τ_k (0 for a job without tasks)
  bool provenLexOptimal = true;         // false only if the tie search budget ran out
  std::size_t flowChecks = 0;           // max-flow feasibility checks performed
};

// Errors (kInvalidArgument): cost vector size != datacenters, negative/NaN cost or slots, job
// index out of range, or no feasible assignment at all (more tasks than usable slots).
Result<MaxMinResult> maxMinFairAssign(const MaxMinProblem& problem, const MaxMinOptions& options = {});

// Transfer time of a task (paper 002 eq. 1): 0 if all its input is at `destination`,
// otherwise max over sources s != destination of inputMB[s] / bandwidthMBps[s][destination].
double maxMinTransferS(const std::vector<double>& inputMB, const std::vector<std::vector<double>>& bandwidthMBps,
                       std::size_t destination);

// Sorted (non-increasing) completion vector comparison: true if a is lexicographically
// smaller than b, with values within `tolerance` treated as equal.
bool lexSmaller(std::vector<double> a, std::vector<double> b, double tolerance = 1e-9);

}  // namespace tellus::sched
