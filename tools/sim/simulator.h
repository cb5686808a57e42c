#pragma once
// tellus-sim's engine: a deterministic discrete-event simulation of geo-distributed sites
// running DAG jobs under the policies of common/sched (the same code the daemons run).
//
// Model (docs/sim.md has the details and the reasons):
//  - A site has slots (one task each) and an uplink/downlink shared fairly among its flows
//    (sim/network.h). A task holds its slot while it fetches its remote input, then computes
//    for its duration; its output stays at its site.
//  - When a stage becomes ready (its parents finished), the placement policy splits its tasks
//    over sites (sched::placeMap/placeReduce: in-place = Spark: maps where their block is,
//    reduces spread over the slots; centralized; Iridium; proportional to data = HOUTU;
//    Tetrium LP with ρ); the job
//    order decides which job a free slot serves (fair share, FCFS, Global-/Independent-SRPT,
//    Reordering, SWAG, Tetrium's order), recomputed at job arrival/departure and stage release.
//  - Resource management is either plain slots (a free slot goes straight to the order) or
//    HOUTU's per-site job managers holding containers. Those run jobcore::JobCore, the decision
//    logic of tellus-jm itself (stage release and placement, Af desires, Parades launches,
//    steals); the simulator is its driver: it plays ZooKeeper (task maps, output records),
//    the sites' masters (grants by the fair scheduler or the job order) and the workers.
//  - Resource drops and spot-VM losses change a site's slots/bandwidth over time; Tetrium's
//    k-site re-assignment (§4.2) can move queued tasks when they happen.

#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cost/cost.h"
#include "jobcore/decision.h"
#include "sched/af.h"
#include "sched/parades.h"
#include "sched/policies.h"
#include "sim/stats.h"
#include "sim/workload.h"
#include "util/result.h"

namespace tellus::sim {

struct PolicyConfig {
  std::string label;
  // The policies, by the registry's names (sched/policies.h).
  sched::Placement placement = sched::Placement::kInPlace;
  sched::JobOrder order = sched::JobOrder::kFair;
  sched::Resources resources = sched::Resources::kSlots;
  // When set, replaces `order`: these job ids first, in this order (the brute-force harness).
  std::vector<int64_t> fixedOrder;
  double wanBudgetRho = 1.0;     // Tetrium's WAN knob ρ (§4.3)
  // cost=W: seconds per currency unit Tetrium may trade for money at the sites' prices (every
  // job's spec cost_weight); 0 = time only.
  double costWeight = 0;
  double fairnessEpsilon = 1.0;  // Tetrium's fairness knob ε (§4.4); < 1 caps the top job's slots
  int reassignK = 0;             // k-site re-assignment on resource drops (§4.2); 0 = off
  // Tetrium's own scheduling instances (§4.1/§4.4/§5): every round re-places and orders the
  // queued tasks of all jobs over the free slots (needed for ε < 1); otherwise stages are
  // placed once when they become ready and sites serve the job order.
  bool tetriumRounds = false;
  double roundIntervalSeconds = 2.0;  // slot batching interval between rounds
  bool normalizeBySlots = true;  // capacity-normalized SWAG/Reordering (paper 001 §5)
  // Job orders are recomputed at most this often (0: at every arrival and departure, as paper
  // 001 does). The masters order from queues their peers published a while ago; this is how
  // stale those orders are. A job that arrived since the last one ranks after every ranked job.
  double orderRefreshSeconds = 0;
  // HOUTU (static / af): each job has a job manager per site it touches, running
  // jobcore::JobCore — the daemon's decision logic — with these knobs.
  double periodSeconds = 5.0;       // L: Af period
  double stealIntervalSeconds = 0.3;  // at most one steal attempt per interval (the daemon's default)
  sched::AfParams af;
  sched::ParadesParams parades;
  bool stealing = true;          // Parades' STEAL (af mode)
  // static mode steals too ("steal"), as a job spec with containers_per_site and stealing on
  // does in tellus-jm; off by default (Decent-Stat's static allocation does not steal).
  bool staticSteals = false;
  // A thief sends the link rates its site measured (as tellus-jm does), here exact. Off
  // ("unmeasured"): a cluster that has measured none yet, where victims decide by Parades alone.
  bool measuredLinks = true;
  // A victim sees the leases of other jobs' containers at its site (Awan, paper 004) and counts
  // those about to end as its own when weighing a steal. Off ("noleases"): shared state without
  // lease times.
  bool leases = true;
  int staticContainers = 0;      // static mode: containers per job manager; 0 = the most root tasks any site holds
};

// Parses a policy: '+'-separated tokens, e.g. "in-place", "tetrium+rho=0.5", "tetrium+swag+af".
//  placement: in-place | proportional | centralized | iridium   (or place=NAME, e.g. place=tetrium)
//  order:     fair | fcfs | global-srpt | independent-srpt | global-srpt-reordering |
//             independent-srpt-reordering | swag               (or order=NAME, e.g. order=tetrium)
//  resources: slots | static | af ;  nosteal ;  noleases ;  rounds (Tetrium scheduling rounds)
//  presets:   tetrium (= place=tetrium + order=tetrium), houtu (= proportional + fair + af),
//             decent-stat (= proportional + fair + static)
//  knobs:     rho=R cost=W eps=E k=K period=S steal=S delta=D afrho=R tau=T static=N normalize=0|1 round=S
//             refresh=S
// The placement and order names are the registry's, the same as a job spec's `placement:` and
// `tellus plan --policy`; "tetrium" names both a placement and an order, hence the preset.
Result<PolicyConfig> parsePolicy(const std::string& text);

struct ClusterEventSpec {
  double timeSeconds = 0;
  int site = 0;
  double slotLoss = 0;       // fraction of the site's base slots lost, [0,1]
  double bandwidthLoss = 0;  // fraction of its base up/down bandwidth lost, [0,1]
  double durationSeconds = std::numeric_limits<double>::infinity();  // then restored
  bool killsTasks = false;   // spot-VM loss: tasks on the lost slots die and are re-queued
  // HOUTU modes: instead of the above, the site's worker with this index (0-based, < its
  // SiteSpec::workers) is lost for good: its containers (their tasks die, uncounted), its
  // slots and the outputs stored on it, which the primary JM recomputes by lineage when still
  // needed. The JMs learn it as tellus-jm does: the site's live-worker list without it.
  int32_t loseWorker = -1;
  // When set, the event happens when this stage of the first job to finish it is complete
  // (its last output recorded) instead of at timeSeconds: a logical point a test can also
  // observe in a daemon run.
  std::optional<int32_t> whenStageDone;
};

class DecisionSink {
 public:
  virtual ~DecisionSink() = default;
  // A decision of the JM of job `job` at `site` (HOUTU modes), as tellus-jm logs it.
  virtual void onDecision(int64_t job, const std::string& site, const jobcore::Decision& decision) = 0;
};

struct SimConfig {
  std::vector<SiteSpec> sites;
  std::vector<ClusterEventSpec> clusterEvents;
  PolicyConfig policy;
  // Each site's prices, by site name (a site without an entry is unpriced): the run's usage is
  // priced with cost::price, as `tellus cost` prices a job's.
  std::map<std::string, cost::Prices> prices;
  // HOUTU modes: receives every JM's decisions (jobcore/decision.h); nullptr: none recorded.
  DecisionSink* decisions = nullptr;
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
  // Launches of root (map) tasks, and those at the site holding their input block: locality,
  // paper 004's measure.
  int64_t rootLaunches = 0;
  int64_t rootLocalLaunches = 0;
  double locality() const { return rootLaunches ? double(rootLocalLaunches) / double(rootLaunches) : 0.0; }
  double busySlotSeconds = 0;   // task-seconds computing or fetching
  double utilization = 0;       // busySlotSeconds / (slots x makespan)
  int64_t placementsSolved = 0;
  double placementWallSeconds = 0;
  int64_t ordersComputed = 0;
  double orderWallSeconds = 0;
  int64_t peakActiveJobs = 0;
  // What the run used — slot time per site (fetching or computing, killed tasks included, as a
  // container is paid for) and bytes per site pair (delivered, also of cancelled flows) — and
  // its price under SimConfig::prices.
  cost::Usage usage;
  cost::JobCost cost;
};

// Runs the workload to completion. Errors: bad configuration, a workload error (e.g. a
// malformed trace line), or a policy failure (its message names the job and stage).
Result<RunSummary> runSimulation(const SimConfig& config, WorkloadSource& workload, JobRecordSink* sink);

}  // namespace tellus::sim
