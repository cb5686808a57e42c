#pragma once
// Job order across sites (paper 001, Hung et al.): every site serves its queue of sub-jobs
// in an order computed from the same snapshot — FCFS, Global-SRPT, Independent-SRPT,
// Reordering (Alg. 1/2, an add-on to any order) and SWAG (Alg. 3/4). Each has the
// capacity-normalized form of §5: queue lengths divided by the site's slots.
// All functions are deterministic: ties go to the earlier arrival, then the smaller index.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "sched/policies.h"

namespace tellus::sched {

struct QueuedJob {
  std::string id;
  double arrivalS = 0;
  std::vector<double> remainingTasks;  // |v_{j,d}| per site: tasks not yet launched
};

struct OrderingInput {
  std::vector<QueuedJob> jobs;
  // c_d per site; empty = homogeneous (the unnormalized algorithms). Normalized forms divide
  // queue lengths by c_d.
  std::vector<double> slots;
  // Work already ahead of these jobs at each site (tasks), e.g. running tasks; empty = none.
  // SWAG starts its queue lengths from it (third principle, Figure 3).
  std::vector<double> existingLoad;
};

// The registry's job orders that computeOrders ranks from queue lengths alone: all but kFair
// (decided per site by the fair scheduler) and kTetrium (tetriumJobOrder, from LP estimates).
bool ranksFromQueues(JobOrder order);

// One job order for all sites, or (Independent-SRPT) one per site; indices into jobs.
struct SiteOrders {
  std::vector<std::vector<std::size_t>> perSite;
};

std::vector<std::size_t> fcfsOrder(const OrderingInput& input);
// Smallest total remaining size first, in tasks (sum_d v_jd; paper 001 normalizes only
// Reordering's and SWAG's queue lengths).
std::vector<std::size_t> globalSrptOrder(const OrderingInput& input);
// Each site orders its own sub-jobs by size (normalization does not change a site's order).
SiteOrders independentSrptOrders(const OrderingInput& input);
// Reordering (Alg. 1/2) applied to per-site orders: repeatedly take the site with the longest
// (normalized) queue, move its last job to the back of the final order, remove that job's
// sub-jobs from every queue. Returns the resulting single order.
std::vector<std::size_t> reorder(const OrderingInput& input, const SiteOrders& base);
// SWAG (Alg. 3/4): repeatedly pick the job with the smallest makespan m_j = max over all
// sites d of (q_d + v_jd) [/ c_d] (v_jd = 0 where j has no tasks) given the queues so far;
// ties go to the smallest total remaining size in tasks (sum_d v_jd, never normalized), then
// the earlier arrival.
std::vector<std::size_t> swagOrder(const OrderingInput& input);

SiteOrders sameOrderEverywhere(const std::vector<std::size_t>& order, std::size_t siteCount);
// The order of `policy`; requires ranksFromQueues(policy) (otherwise: no order, perSite empty).
SiteOrders computeOrders(const OrderingInput& input, JobOrder policy);

// Finish instants (paper 001 §2.2): at each site the queue is served in the site's order; a
// sub-job ends at existingLoad_d + cumulative size [/ c_d]; a job finishes at the max over
// the sites where it has tasks (0 if none). Exact finish times under the paper's
// homogeneous assumptions.
std::vector<double> finishInstants(const OrderingInput& input, const SiteOrders& orders);
double averageFinishInstant(const OrderingInput& input, const SiteOrders& orders);

// ---- one order for a federation of masters, without a controller (paper 001 §5) -------------
// Every site's master publishes its queue; each master ranks the jobs of its own queue from
// every site's queue with the functions above, so all masters that see the same queues serve
// their sub-jobs in the same global order.

// One site's queue as its master published it.
struct PublishedQueue {
  struct Entry {
    std::string jobId;
    double remainingTasks = 0;  // unfinished tasks the job owns at the site
    int64_t submitUnixMs = 0;   // the job's submission (FCFS rank, tie-breaks); <= 0: unknown
  };
  std::string site;
  int64_t publishedUnixMs = 0;  // the publisher's wall clock
  double slots = 0;             // containers offered by the site's live workers (c_d)
  std::vector<Entry> jobs;
  // Tasks of the jobs left out of `jobs` by the publisher's cap: they still make the site's
  // queue longer (SWAG's existing load), but no job is charged for them.
  double otherTasks = 0;
};

struct FederationOrder {
  // The jobs of the local site's queue in the order its free containers go to them.
  std::vector<std::string> jobs;
  // Sites whose queue was older than the bound (or too far in the future): counted as empty.
  std::vector<std::string> staleSites;
};

// A queue is stale when |nowUnixMs - publishedUnixMs| > maxAgeMs (a timestamp far in the
// future is no fresher than one far in the past: a skewed or forged clock).
bool queueStale(const PublishedQueue& queue, int64_t nowUnixMs, int64_t maxAgeMs);

// The order in which `localSite` serves the jobs of its own queue under `policy`
// (ranksFromQueues(policy) must hold; otherwise the local queue in FCFS order). `queues` holds
// one queue per site (a repeated site: the newest counts); the local site's must be among them
// (absent: nothing to order). Other sites' stale queues count as empty (the local one is
// built fresh by the caller). A job's remaining tasks at each
// site come from that site's queue, its arrival is the earliest submit time any site reports
// (none: after every job that has one);
// queue lengths are normalized by each site's slots (§5; at least 1, as tellus-sim does).
FederationOrder federationOrder(const std::string& localSite, const std::vector<PublishedQueue>& queues,
                                JobOrder policy, int64_t nowUnixMs, int64_t maxAgeMs);

}  // namespace tellus::sched
