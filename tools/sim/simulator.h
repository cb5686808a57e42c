#pragma once
// tellus-sim's engine: a deterministic discrete-event simulation of geo-distributed sites
// running DAG jobs under the policies of common/sched (the same code the daemons run).
//
// Model (docs/sim.md has the details and the reasons):
//  - A site has slots (one task each) and an uplink/downlink shared fairly among its flows
//    (sim/network.h). A task holds its slot while it fetches its remote input, then computes
//    for its duration; its output stays at its site.
//  - When a stage becomes ready (its parents finished), the placement policy splits its tasks
//    over sites (in-place = Spark: maps where their block is, reduces spread over the slots;
//    centralized; Iridium; proportional to data = HOUTU; Tetrium LP with ρ); the job
//    order decides which job a free slot serves (fair share, FCFS, Global-/Independent-SRPT,
//    Reordering, SWAG, Tetrium's order), recomputed at job arrival/departure and stage release.
//  - Resource management is either plain slots (a free slot goes straight to the order) or
//    HOUTU's per-site job managers holding containers: static allocation, or Af desires every
//    period L granted by the site's fair scheduler, with Parades launching and stealing tasks.
//  - Resource drops and spot-VM losses change a site's slots/bandwidth over time; Tetrium's
//    k-site re-assignment (§4.2) can move queued tasks when they happen.

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "sched/af.h"
#include "sched/parades.h"
#include "sim/stats.h"
#include "sim/workload.h"
#include "util/result.h"

namespace tellus::sim {

enum class PlacementPolicy { kInPlace, kCentralized, kIridium, kProportional, kTetrium };
enum class JobOrderPolicy {
  kFair,  // the site fair scheduler: smallest share first (HOUTU §4.4, Spark's default)
  kFcfs,
  kGlobalSrpt,
  kIndependentSrpt,
  kGlobalSrptReordering,
  kIndependentSrptReordering,
  kSwag,
  kTetrium,  // fewest remaining stages, then least remaining (LP-estimated) time (§4.1)
  kFixed,    // a given job order (the brute-force harness)
};
enum class ResourcePolicy { kSlots, kStatic, kAf };

struct PolicyConfig {
  std::string label;
  PlacementPolicy placement = PlacementPolicy::kInPlace;
  JobOrderPolicy order = JobOrderPolicy::kFair;
  ResourcePolicy resources = ResourcePolicy::kSlots;
  double wanBudgetRho = 1.0;     // Tetrium's WAN knob ρ (§4.3)
  double fairnessEpsilon = 1.0;  // Tetrium's fairness knob ε (§4.4); < 1 caps the top job's slots
  int reassignK = 0;             // k-site re-assignment on resource drops (§4.2); 0 = off
  // Tetrium's own scheduling instances (§4.1/§4.4/§5): every round re-places and orders the
  // queued tasks of all jobs over the free slots (needed for ε < 1); otherwise stages are
  // placed once when they become ready and sites serve the job order.
  bool tetriumRounds = false;
  double roundIntervalSeconds = 2.0;  // slot batching interval between rounds
  bool normalizeBySlots = true;  // capacity-normalized SWAG/Reordering/SRPT (paper 001 §5)
  // HOUTU
  double periodSeconds = 5.0;  // L: Af period
  sched::AfParams af;
  sched::ParadesParams parades;
  bool stealing = true;          // Parades' STEAL (Af mode)
  int staticContainers = 0;      // static mode: containers per job manager; 0 = its first stage's tasks there
  std::vector<int64_t> fixedOrder;  // kFixed: job ids, highest priority first
};

// Parses a policy: '+'-separated tokens, e.g. "inplace", "tetrium+rho=0.5", "tetrium+swag+af".
//  placement: inplace | centralized | iridium | proportional | tetrium-place
//  order:     fair | fcfs | gsrpt | isrpt | gsrpt-reorder | isrpt-reorder | swag | tetrium-order
//  resources: slots | static | af ;  nosteal ;  rounds (Tetrium scheduling rounds)
//  presets:   tetrium (= tetrium-place + tetrium-order), houtu (= proportional + fair + af),
//             decent-stat (= proportional + fair + static)
//  knobs:     rho=R eps=E k=K period=S delta=D afrho=R tau=T static=N normalize=0|1 round=S
Result<PolicyConfig> parsePolicy(const std::string& text);

struct ClusterEventSpec {
  double timeSeconds = 0;
  int site = 0;
  double slotLoss = 0;       // fraction of the site's base slots lost, [0,1]
  double bandwidthLoss = 0;  // fraction of its base up/down bandwidth lost, [0,1]
  double durationSeconds = std::numeric_limits<double>::infinity();  // then restored
  bool killsTasks = false;   // spot-VM loss: tasks on the lost slots die and are re-queued
};

struct SimConfig {
  std::vector<SiteSpec> sites;
  std::vector<ClusterEventSpec> clusterEvents;
  PolicyConfig policy;
};

// One finished job, as written to the per-job CSV.
struct JobRecord {
  int64_t id = 0;
  std::string name;
  double arrivalSeconds = 0;
  double finishSeconds = 0;
  double responseSeconds = 0;
  // Lower bound of the job's time alone on the idle cluster with the placement it got:
  // per stage max(compute bound, network bound), summed along the stage DAG's longest path.
  double isolatedSeconds = 0;
  double slowdown = 0;  // response / isolated
  double wanBytes = 0;  // bytes its flows moved between sites
  int64_t tasks = 0;
  int32_t stages = 0;
};

class JobRecordSink {
 public:
  virtual ~JobRecordSink() = default;
  virtual void onJobFinished(const JobRecord& record) = 0;
};

struct RunSummary {
  std::string policy;
  int64_t jobs = 0;
  StreamingStats response;
  StreamingStats slowdown;
  double wanBytes = 0;
  double firstArrivalSeconds = 0;
  double lastFinishSeconds = 0;
  double makespanSeconds = 0;   // last finish - first arrival
  uint64_t events = 0;          // simulated events processed
  double wallSeconds = 0;
  double eventsPerSecond = 0;
  int64_t tasksLaunched = 0;
  int64_t tasksKilled = 0;
  int64_t tasksStolen = 0;
  int64_t tasksReassigned = 0;
  double busySlotSeconds = 0;   // task-seconds computing or fetching
  double utilization = 0;       // busySlotSeconds / (slots x makespan)
  int64_t placementsSolved = 0;
  double placementWallSeconds = 0;
  int64_t ordersComputed = 0;
  double orderWallSeconds = 0;
  int64_t peakActiveJobs = 0;
};

// Runs the workload to completion. Errors: bad configuration, a workload error (e.g. a
// malformed trace line), or a policy failure (its message names the job and stage).
Result<RunSummary> runSimulation(const SimConfig& config, WorkloadSource& workload, JobRecordSink* sink);

}  // namespace tellus::sim
