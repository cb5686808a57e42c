#pragma once
// Tetrium's multi-job scheduling round (paper 000 §4.1, §4.4): jobs are ordered by fewest
// remaining stages, then shortest remaining time of their current stage (estimated with the
// placement LP); in that order each job gets its LP placement over the slots still free and
// takes the slots it needs (d_x = min(free_x, tasks at x)), until slots or jobs run out.
// ε-fairness caps the slots one job may take so that the others keep (1-ε) of their share.

#include <cstddef>
#include <string>
#include <vector>

#include "sched/placement.h"
#include "util/result.h"

namespace tellus::sched {

enum class StageKind { kMap, kReduce };

struct TetriumJob {
  std::string id;
  int remainingStages = 1;  // G^j, counting the current stage
  StageKind kind = StageKind::kMap;
  MapStage map;        // the current stage when kind == kMap
  ReduceStage reduce;  // the current stage when kind == kReduce
};

struct TetriumRoundOptions {
  TetriumOptions placement;
  // ε in [0,1] (§4.4): a job may take at most S_free - sum over the other waiting jobs of
  // (1-ε)·S*·f_i/sum f. 1 = pure performance (no cap), 0 = strict proportional fairness.
  double fairnessEpsilon = 1.0;
};

struct JobAllocation {
  std::size_t job = 0;          // index into the input
  std::vector<int> slots;       // d_x: slots this job takes at each site for this stage
  std::vector<int> tasksAtSite; // integer tasks placed at each site
  MapPlacement map;             // filled when the job's stage is a map stage
  ReducePlacement reduce;       // filled when it is a reduce stage
  StageTimes times;             // evaluation of the integer placement on `slots` (ceil waves)
  double isolatedS = 0;         // T^j used for ordering: LP time with all round-start slots
  double estimatedCompletionS = 0;  // times.totalS(): from the round's start
};

struct TetriumRound {
  std::vector<std::size_t> order;           // all jobs, in scheduling priority order
  std::vector<JobAllocation> allocations;   // the jobs that got slots, in order
  std::vector<std::size_t> waiting;         // jobs left without slots this round
};

// Key of §4.1: fewest remaining stages, then least remaining time, then input index.
struct JobOrderKey {
  int remainingStages = 1;
  double remainingS = 0;
};
std::vector<std::size_t> tetriumJobOrder(const std::vector<JobOrderKey>& keys);

// One scheduling instance over a snapshot of free slots/bandwidth (`sites`). The remaining
// time used for ordering is computed once per job with all of the round's free slots; each
// job's placement is then recomputed over what is left when its turn comes. Errors: invalid
// sites/stages (naming the job).
Result<TetriumRound> tetriumSchedulingRound(const std::vector<SiteResources>& sites,
                                            const std::vector<TetriumJob>& jobs,
                                            const TetriumRoundOptions& options = {});

}  // namespace tellus::sched
