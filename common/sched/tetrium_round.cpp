#include "sched/tetrium_round.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace tellus::sched {
namespace {

int stageTasks(const TetriumJob& job) { return job.kind == StageKind::kMap ? job.map.tasks : job.reduce.tasks; }

std::vector<SiteResources> withSlots(const std::vector<SiteResources>& sites, const std::vector<int>& slots) {
  std::vector<SiteResources> out = sites;
  for (std::size_t x = 0; x < out.size(); ++x) out[x].slots = slots[x];
  return out;
}

// Places the job's current stage on `sites` and fills placement, tasks and LP time.
Status place(const std::vector<SiteResources>& sites, const TetriumJob& job, const TetriumOptions& options,
             JobAllocation& allocation, double& lpTimeS) {
  if (job.kind == StageKind::kMap) {
    auto placed = tetriumMap(sites, job.map, options);
    if (!placed) return placed.error();
    allocation.map = std::move(placed.value());
    allocation.tasksAtSite = allocation.map.tasksAtSite;
    lpTimeS = allocation.map.lpTimes.totalS();
  } else {
    auto placed = tetriumReduce(sites, job.reduce, options);
    if (!placed) return placed.error();
    allocation.reduce = std::move(placed.value());
    allocation.tasksAtSite = allocation.reduce.tasks;
    lpTimeS = allocation.reduce.lpTimes.totalS();
  }
  return Status::ok();
}

StageTimes evaluateOn(const std::vector<SiteResources>& sites, const TetriumJob& job, const JobAllocation& a) {
  return job.kind == StageKind::kMap ? evaluateMap(sites, job.map, a.map.tasks)
                                     : evaluateReduce(sites, job.reduce, a.reduce.tasks);
}

}  // namespace

std::vector<std::size_t> tetriumJobOrder(const std::vector<JobOrderKey>& keys) {
  std::vector<std::size_t> order(keys.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (keys[a].remainingStages != keys[b].remainingStages) return keys[a].remainingStages < keys[b].remainingStages;
    return keys[a].remainingS < keys[b].remainingS;
  });
  return order;
}

Result<TetriumRound> tetriumSchedulingRound(const std::vector<SiteResources>& sites,
                                            const std::vector<TetriumJob>& jobs,
                                            const TetriumRoundOptions& options) {
  if (!(options.fairnessEpsilon >= 0 && options.fairnessEpsilon <= 1)) {
    return makeError(ErrorCode::kInvalidArgument, "fairness epsilon must be in [0,1]");
  }
  const std::size_t n = sites.size();
  std::vector<int> freeSlots(n);
  for (std::size_t x = 0; x < n; ++x) freeSlots[x] = sites[x].slots;
  const int totalSlots = std::accumulate(freeSlots.begin(), freeSlots.end(), 0);

  // T^j for ordering: the LP relaxation of each job alone on all of the round's free slots
  // (the integer refinement is only worth its cost for jobs that get slots).
  std::vector<JobAllocation> isolated(jobs.size());
  std::vector<JobOrderKey> keys(jobs.size());
  for (std::size_t j = 0; j < jobs.size(); ++j) {
    isolated[j].job = j;
    auto lpTimes = jobs[j].kind == StageKind::kMap ? tetriumMapLpTimes(sites, jobs[j].map, options.placement)
                                                   : tetriumReduceLpTimes(sites, jobs[j].reduce, options.placement);
    if (!lpTimes) return Status(lpTimes.error().prepend("job '" + jobs[j].id + "'"));
    isolated[j].isolatedS = lpTimes->totalS();
    keys[j] = JobOrderKey{jobs[j].remainingStages, lpTimes->totalS()};
  }

  TetriumRound round;
  round.order = tetriumJobOrder(keys);

  // ε-fairness (§4.4): p_i = S*·f_i / sum f is the share reserved for job i.
  double remainingTasks = 0;
  for (const TetriumJob& job : jobs) remainingTasks += stageTasks(job);
  std::vector<double> reserved(jobs.size(), 0.0);
  for (std::size_t j = 0; j < jobs.size(); ++j) {
    reserved[j] = remainingTasks > 0 ? totalSlots * stageTasks(jobs[j]) / remainingTasks : 0.0;
  }
  double reservedAhead = std::accumulate(reserved.begin(), reserved.end(), 0.0);

  for (std::size_t position = 0; position < round.order.size(); ++position) {
    const std::size_t j = round.order[position];
    const TetriumJob& job = jobs[j];
    reservedAhead -= reserved[j];
    const int free = std::accumulate(freeSlots.begin(), freeSlots.end(), 0);
    if (stageTasks(job) == 0) {
      // Nothing to run: an empty placement that takes no slot and completes at once.
      JobAllocation empty = isolated[j];
      double unused = 0;
      Status placed = place(sites, job, options.placement, empty, unused);
      if (!placed) return Status(placed.error().prepend("job '" + job.id + "'"));
      empty.slots.assign(n, 0);
      round.allocations.push_back(std::move(empty));
      continue;
    }
    if (free == 0) {
      round.waiting.push_back(j);
      continue;
    }
    JobAllocation allocation;
    allocation.job = j;
    allocation.isolatedS = isolated[j].isolatedS;
    double lpTime = 0;
    Status placed = place(withSlots(sites, freeSlots), job, options.placement, allocation, lpTime);
    if (!placed) return Status(placed.error().prepend("job '" + job.id + "'"));
    std::vector<int> take(n);
    for (std::size_t x = 0; x < n; ++x) take[x] = std::min(freeSlots[x], allocation.tasksAtSite[x]);
    const int wanted = std::accumulate(take.begin(), take.end(), 0);
    const double cap = free - (1.0 - options.fairnessEpsilon) * reservedAhead;
    if (wanted > cap + 1e-9) {
      // Keep (1-ε) of the later jobs' shares free: scale this job's slots down and re-place it
      // on exactly those slots. At least one slot, so every round makes progress.
      const int allowed = std::max(1, static_cast<int>(std::floor(cap + 1e-9)));
      std::vector<double> weights(take.begin(), take.end());
      const std::vector<int> capped = proportionalToData(weights, allowed);
      placed = place(withSlots(sites, capped), job, options.placement, allocation, lpTime);
      if (!placed) return Status(placed.error().prepend("job '" + job.id + "' (fairness cap)"));
      for (std::size_t x = 0; x < n; ++x) take[x] = std::min(capped[x], allocation.tasksAtSite[x]);
    }
    allocation.slots = take;
    allocation.times = evaluateOn(withSlots(sites, take), job, allocation);
    allocation.estimatedCompletionS = allocation.times.totalS();
    for (std::size_t x = 0; x < n; ++x) freeSlots[x] -= take[x];
    round.allocations.push_back(std::move(allocation));
  }
  return round;
}

}  // namespace tellus::sched
