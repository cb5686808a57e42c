#include "sched/job_order.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <set>

namespace tellus::sched {
namespace {

std::size_t siteCount(const OrderingInput& input) {
  std::size_t n = std::max(input.slots.size(), input.existingLoad.size());
  for (const QueuedJob& job : input.jobs) n = std::max(n, job.remainingTasks.size());
  return n;
}

double tasksAt(const QueuedJob& job, std::size_t d) { return d < job.remainingTasks.size() ? job.remainingTasks[d] : 0.0; }
double capacity(const OrderingInput& input, std::size_t d) {
  return input.slots.empty() ? 1.0 : (d < input.slots.size() && input.slots[d] > 0 ? input.slots[d] : 0.0);
}
double existing(const OrderingInput& input, std::size_t d) {
  return d < input.existingLoad.size() ? input.existingLoad[d] : 0.0;
}
// Queue length in time units: tasks / slots (unnormalized: slots = 1). Work at a site without
// slots never finishes.
double normalized(const OrderingInput& input, std::size_t d, double tasks) {
  const double c = capacity(input, d);
  if (c > 0) return tasks / c;
  return tasks > 0 ? std::numeric_limits<double>::infinity() : 0.0;
}

// A job's total remaining size in tasks, sum_d v_jd: Global-SRPT's rank. Never normalized:
// paper 001 §5 divides queue lengths by capacity for Reordering and SWAG only.
double totalSize(const QueuedJob& job) {
  double total = 0;
  for (double tasks : job.remainingTasks) total += tasks;
  return total;
}

// FCFS rank: arrival, then index; every policy breaks its ties with it.
bool earlier(const OrderingInput& input, std::size_t a, std::size_t b) {
  if (input.jobs[a].arrivalS != input.jobs[b].arrivalS) return input.jobs[a].arrivalS < input.jobs[b].arrivalS;
  return a < b;
}

std::vector<std::size_t> indices(std::size_t n) {
  std::vector<std::size_t> v(n);
  std::iota(v.begin(), v.end(), 0);
  return v;
}

}  // namespace

std::vector<std::size_t> fcfsOrder(const OrderingInput& input) {
  auto order = indices(input.jobs.size());
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return earlier(input, a, b); });
  return order;
}

std::vector<std::size_t> globalSrptOrder(const OrderingInput& input) {
  auto order = indices(input.jobs.size());
  std::vector<double> size(input.jobs.size());
  for (std::size_t j = 0; j < size.size(); ++j) size[j] = totalSize(input.jobs[j]);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (size[a] != size[b]) return size[a] < size[b];
    return earlier(input, a, b);
  });
  return order;
}

SiteOrders independentSrptOrders(const OrderingInput& input) {
  const std::size_t n = siteCount(input);
  SiteOrders orders;
  orders.perSite.resize(n);
  for (std::size_t d = 0; d < n; ++d) {
    auto order = indices(input.jobs.size());
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      const double sa = tasksAt(input.jobs[a], d), sb = tasksAt(input.jobs[b], d);
      if (sa != sb) return sa < sb;
      return earlier(input, a, b);
    });
    orders.perSite[d] = std::move(order);
  }
  return orders;
}

std::vector<std::size_t> reorder(const OrderingInput& input, const SiteOrders& base) {
  const std::size_t n = siteCount(input);
  const std::size_t jobs = input.jobs.size();
  std::vector<double> queue(n, 0.0);
  for (std::size_t d = 0; d < n; ++d)
    for (const QueuedJob& job : input.jobs) queue[d] += tasksAt(job, d);
  std::vector<bool> taken(jobs, false);
  std::vector<std::size_t> reversed;  // N in Alg. 1: jobs pushed from the back of the order
  reversed.reserve(jobs);
  for (std::size_t round = 0; round < jobs; ++round) {
    // Longest (normalized) queue; only sites where some remaining job still has tasks.
    std::size_t target = n;
    double longest = 0;
    for (std::size_t d = 0; d < n; ++d) {
      const double length = normalized(input, d, queue[d]);
      if (queue[d] > 0 && (target == n || length > longest)) {
        target = d;
        longest = length;
      }
    }
    if (target == n) break;  // remaining jobs have no tasks: they go first (below)
    // The last job in the target site's order that still has a sub-job there.
    const std::vector<std::size_t>& order = base.perSite.size() == 1 ? base.perSite[0] : base.perSite[target];
    std::size_t chosen = jobs;
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      if (!taken[*it] && tasksAt(input.jobs[*it], target) > 0) {
        chosen = *it;
        break;
      }
    }
    assert(chosen < jobs);
    taken[chosen] = true;
    reversed.push_back(chosen);
    for (std::size_t d = 0; d < n; ++d) queue[d] -= tasksAt(input.jobs[chosen], d);
  }
  std::vector<std::size_t> result;
  for (std::size_t j : fcfsOrder(input))
    if (!taken[j]) result.push_back(j);  // empty jobs finish at once
  result.insert(result.end(), reversed.rbegin(), reversed.rend());
  return result;
}

std::vector<std::size_t> swagOrder(const OrderingInput& input) {
  const std::size_t n = siteCount(input);
  const std::size_t jobs = input.jobs.size();
  std::vector<double> queue(n);
  for (std::size_t d = 0; d < n; ++d) queue[d] = existing(input, d);
  // Tie-break of Alg. 3. Paper 001 §4.2: "If there are more than one job with the minimal
  // makespan, SWAG picks the one with the smallest total remaining size as a tie-breaker",
  // where "a job's remaining size is its remaining number of tasks that are not launched yet"
  // (footnote 5): in tasks, not normalized (§5 normalizes only the queue lengths of Step 5).
  std::vector<double> tasks(jobs, 0.0);
  for (std::size_t j = 0; j < jobs; ++j)
    for (double v : input.jobs[j].remainingTasks) tasks[j] += v;
  // Sites where each job has tasks; elsewhere its makespan term is the queue alone.
  std::vector<std::vector<std::size_t>> sitesOf(jobs);
  for (std::size_t j = 0; j < jobs; ++j)
    for (std::size_t d = 0; d < input.jobs[j].remainingTasks.size(); ++d)
      if (input.jobs[j].remainingTasks[d] > 0) sitesOf[j].push_back(d);

  std::vector<bool> taken(jobs, false);
  std::vector<std::size_t> order;
  order.reserve(jobs);
  std::vector<std::size_t> byQueue(n);
  for (std::size_t round = 0; round < jobs; ++round) {
    // m_j = max over ALL sites d of (q_d + |v_jd|) / c_d (Step 5, v_jd = 0 where j has no
    // tasks). The sites without j's tasks contribute their queue alone: the longest such
    // queue is the first one in descending order that j does not touch.
    std::iota(byQueue.begin(), byQueue.end(), 0);
    std::vector<double> length(n);
    for (std::size_t d = 0; d < n; ++d) length[d] = normalized(input, d, queue[d]);
    std::stable_sort(byQueue.begin(), byQueue.end(), [&](std::size_t a, std::size_t b) { return length[a] > length[b]; });
    std::size_t best = jobs;
    double bestMakespan = 0;
    for (std::size_t j = 0; j < jobs; ++j) {
      if (taken[j]) continue;
      double makespan = 0;
      for (std::size_t d : sitesOf[j]) {
        makespan = std::max(makespan, normalized(input, d, queue[d] + input.jobs[j].remainingTasks[d]));
      }
      for (std::size_t d : byQueue) {
        if (std::find(sitesOf[j].begin(), sitesOf[j].end(), d) == sitesOf[j].end()) {
          makespan = std::max(makespan, length[d]);
          break;
        }
      }
      if (best == jobs || makespan < bestMakespan ||
          (makespan == bestMakespan &&
           (tasks[j] < tasks[best] || (tasks[j] == tasks[best] && earlier(input, j, best))))) {
        best = j;
        bestMakespan = makespan;
      }
    }
    taken[best] = true;
    order.push_back(best);
    for (std::size_t d : sitesOf[best]) queue[d] += input.jobs[best].remainingTasks[d];
  }
  return order;
}

SiteOrders sameOrderEverywhere(const std::vector<std::size_t>& order, std::size_t sites) {
  SiteOrders orders;
  orders.perSite.assign(sites, order);
  return orders;
}

SiteOrders computeOrders(const OrderingInput& input, JobOrder policy) {
  const std::size_t n = siteCount(input);
  switch (policy) {
    case JobOrder::kFcfs:
      return sameOrderEverywhere(fcfsOrder(input), n);
    case JobOrder::kGlobalSrpt:
      return sameOrderEverywhere(globalSrptOrder(input), n);
    case JobOrder::kIndependentSrpt:
      return independentSrptOrders(input);
    case JobOrder::kGlobalSrptReordering:
      return sameOrderEverywhere(reorder(input, sameOrderEverywhere(globalSrptOrder(input), n)), n);
    case JobOrder::kIndependentSrptReordering:
      return sameOrderEverywhere(reorder(input, independentSrptOrders(input)), n);
    case JobOrder::kSwag:
      return sameOrderEverywhere(swagOrder(input), n);
    case JobOrder::kFair:
    case JobOrder::kTetrium:
      break;
  }
  return {};
}

std::vector<double> finishInstants(const OrderingInput& input, const SiteOrders& orders) {
  const std::size_t n = siteCount(input);
  std::vector<double> finish(input.jobs.size(), 0.0);
  for (std::size_t d = 0; d < n; ++d) {
    const std::vector<std::size_t>& order = orders.perSite.size() == 1 ? orders.perSite[0] : orders.perSite[d];
    double queued = existing(input, d);
    for (std::size_t j : order) {
      const double tasks = tasksAt(input.jobs[j], d);
      if (tasks <= 0) continue;
      queued += tasks;
      finish[j] = std::max(finish[j], normalized(input, d, queued));
    }
  }
  return finish;
}

double averageFinishInstant(const OrderingInput& input, const SiteOrders& orders) {
  if (input.jobs.empty()) return 0;
  const std::vector<double> finish = finishInstants(input, orders);
  return std::accumulate(finish.begin(), finish.end(), 0.0) / static_cast<double>(finish.size());
}

bool queueStale(const PublishedQueue& queue, int64_t nowUnixMs, int64_t maxAgeMs) {
  const int64_t age = nowUnixMs - queue.publishedUnixMs;
  return age > maxAgeMs || age < -maxAgeMs;
}

FederationOrder federationOrder(const std::string& localSite, const std::vector<PublishedQueue>& queues,
                                JobOrder policy, int64_t nowUnixMs, int64_t maxAgeMs) {
  FederationOrder result;
  // One queue per site, the newest; sites in name order so that every master builds the same
  // input from the same queues.
  std::map<std::string, const PublishedQueue*> bySite;
  for (const PublishedQueue& q : queues) {
    auto [it, inserted] = bySite.emplace(q.site, &q);
    if (!inserted && q.publishedUnixMs > it->second->publishedUnixMs) it->second = &q;
  }
  const auto local = bySite.find(localSite);
  if (local == bySite.end()) return result;
  std::vector<const PublishedQueue*> fresh;
  for (const auto& [site, q] : bySite) {
    if (site != localSite && queueStale(*q, nowUnixMs, maxAgeMs)) {
      result.staleSites.push_back(site);
      continue;
    }
    fresh.push_back(q);
  }
  std::size_t localIndex = 0;
  for (std::size_t d = 0; d < fresh.size(); ++d) {
    if (fresh[d]->site == localSite) localIndex = d;
  }
  // Jobs in id order (deterministic indices, so index ties agree across masters).
  std::map<std::string, std::size_t> jobIndex;
  for (const PublishedQueue* q : fresh)
    for (const auto& e : q->jobs) jobIndex.emplace(e.jobId, 0);
  OrderingInput input;
  input.jobs.resize(jobIndex.size());
  {
    std::size_t j = 0;
    for (auto& [id, index] : jobIndex) {
      index = j;
      input.jobs[j].id = id;
      input.jobs[j].arrivalS = std::numeric_limits<double>::infinity();
      input.jobs[j].remainingTasks.assign(fresh.size(), 0.0);
      ++j;
    }
  }
  input.slots.resize(fresh.size());
  input.existingLoad.resize(fresh.size());
  for (std::size_t d = 0; d < fresh.size(); ++d) {
    const PublishedQueue& q = *fresh[d];
    input.slots[d] = std::max(1.0, std::isfinite(q.slots) ? q.slots : 1.0);
    input.existingLoad[d] = std::isfinite(q.otherTasks) && q.otherTasks > 0 ? q.otherTasks : 0.0;
    std::set<std::string> seen;  // a job listed twice in one queue counts once (the first)
    for (const auto& e : q.jobs) {
      if (!seen.insert(e.jobId).second) continue;
      QueuedJob& job = input.jobs[jobIndex.at(e.jobId)];
      job.remainingTasks[d] = std::isfinite(e.remainingTasks) && e.remainingTasks > 0 ? e.remainingTasks : 0.0;
      if (e.submitUnixMs > 0) job.arrivalS = std::min(job.arrivalS, static_cast<double>(e.submitUnixMs) / 1000.0);
    }
  }
  std::set<std::string> ours;
  for (const auto& e : local->second->jobs) ours.insert(e.jobId);
  std::vector<std::size_t> order;
  if (ranksFromQueues(policy)) {
    const SiteOrders orders = computeOrders(input, policy);
    if (orders.perSite.size() == 1) order = orders.perSite[0];
    else if (localIndex < orders.perSite.size()) order = orders.perSite[localIndex];
  }
  if (order.empty()) order = fcfsOrder(input);
  for (std::size_t j : order) {
    if (ours.count(input.jobs[j].id)) result.jobs.push_back(input.jobs[j].id);
  }
  return result;
}

bool ranksFromQueues(JobOrder order) { return order != JobOrder::kFair && order != JobOrder::kTetrium; }

}  // namespace tellus::sched
