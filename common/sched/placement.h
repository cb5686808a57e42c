#pragma once
// Per-stage task placement across sites (Tetrium, paper 000 §3-4; HOUTU §4.3; Iridium).
//
// Cost model (Tetrium §2.2/§3). Units: data in GB, bandwidth in GB/s (gigaBYTES), time in s.
//  Map stage: n tasks of t seconds read the stage input; I_x GB of it sits at site x, so
//  n·I_x/I tasks read from x and each moves I_x/(tasks reading from x) GB when run remotely.
//    T_aggr = max_x max(upload_x / up_x, download_x / down_x)    (no overlap with compute)
//    T_map  = max_x t · waves_x,  waves_x = M_x / S_x (LP, fractional) or ceil(M_x / S_x)
//  Reduce stage: n tasks of t seconds; I_x GB of shuffle input at x; a fraction r_x of the
//  tasks at x downloads r_x·(I - I_x) and x uploads I_x·(1 - r_x).
//    T_shuf = max_x max(I_x(1-r_x)/up_x, r_x(I-I_x)/down_x),  T_red = max_x t·waves_x.
// The LPs minimize T_aggr + T_map (resp. T_shuf + T_red) with fractional waves; integer
// placements are evaluated with ceil waves, which is how the paper's examples count.
//
// Money (TetriumOptions::costWeightSPerUnit > 0 with prices): Tetrium's LPs then minimize
// time + w·money, w in seconds per currency unit. money = the stage's task-seconds at each site
// y times y's container-hour price / 3600, plus the GB sent from x to y times x's egress price
// to y (the sender pays, as cost::price charges usage). See mapMoney/reduceMoney below.

#include <cstddef>
#include <string>
#include <vector>

#include "sched/policies.h"
#include "util/result.h"

namespace tellus::sched {

struct SiteResources {
  std::string name;
  int slots = 0;        // compute slots available to this stage/job (S_x)
  double upGBps = 0;    // uplink bandwidth, gigabytes per second
  double downGBps = 0;  // downlink bandwidth, gigabytes per second
};

struct MapStage {
  std::vector<double> inputGB;  // per site (same order as the sites), I_x
  int tasks = 0;                // n_map
  double taskS = 0;             // t_map, seconds per task
  // How many of the tasks read each site when the split is given (the daemons: one task per
  // dataset partition); empty = mapTasksPerSource(inputGB, tasks). When given it must sum to
  // `tasks` and give every site holding input a task (validateMap). The LPs still model tasks
  // in proportion to data (Tetrium's model); the integer placement and its evaluation use
  // these rows, so every task it moves exists.
  std::vector<int> tasksPerSource;
};

struct ReduceStage {
  std::vector<double> shuffleGB;  // per site, intermediate data I_x^shuf
  int tasks = 0;                  // n_red
  double taskS = 0;               // t_red
};

struct StageTimes {
  double transferS = 0;  // T_aggr (map) or T_shuf (reduce)
  double computeS = 0;   // T_map or T_red
  double totalS() const { return transferS + computeS; }
};

struct MapPlacement {
  // fraction[x][y]: fraction of all map tasks that read data at x and run at y (sum = 1,
  // row x sums to I_x / I).
  std::vector<std::vector<double>> fraction;
  // tasks[x][y]: integer counts; row x sums to the tasks reading x (stage.tasksPerSource, or
  // mapTasksPerSource), all
  // cells sum to n exactly, column sums are within 1 of n·sum_x fraction[x][y] — except for
  // tetriumMap, which keeps the in-place placement instead when that is faster with whole
  // waves, or as fast moving less data (the LP's fractional waves undercount stages with fewer
  // tasks than slots, and its max objective is blind to traffic off the bottleneck).
  std::vector<std::vector<int>> tasks;
  std::vector<int> tasksAtSite;  // column sums M_y
  StageTimes lpTimes;            // the fractional model (LP objective for Tetrium)
  StageTimes times;              // evaluation of `tasks` with ceil waves
  double wanGB = 0;              // data moved across sites by `tasks`
  double money = 0;              // what `tasks` costs under the options' prices (mapMoney; 0 without)
};

struct ReducePlacement {
  std::vector<double> fraction;  // r_x, sums to 1
  // R_x, sums to n exactly; rounded from `fraction`, except that tetriumReduce keeps the
  // proportional-to-data placement when that is faster with whole waves, or as fast moving
  // less data (and within budget).
  std::vector<int> tasks;
  StageTimes lpTimes;
  StageTimes times;  // evaluation of `tasks` with ceil waves
  double wanGB = 0;  // shuffle data crossing sites
  double money = 0;  // what `tasks` costs under the options' prices (reduceMoney; 0 without)
};

// What running at a site costs (cost::Prices as the placement needs them, indexed like the sites).
struct SitePrices {
  double containerHour = 0;      // currency units per container-hour (per task-hour here)
  std::vector<double> egressGB;  // per GB this site sends to site y; empty = sending is free
};

// Bounds on TetriumOptions::costWeightSPerUnit (a job spec's `cost_weight`).
inline constexpr double kMaxCostWeightSPerUnit = 1e6;

struct TetriumOptions {
  // WAN budget knob ρ in [0,1] (§4.3): W = W_min + ρ(W_max - W_min); 1 = no limit.
  double wanBudgetRho = 1.0;
  // Whole-wave refinement of the integer placement (two more LPs, see tetriumMap). Off gives
  // the plain rounding of the LP relaxation: about 3x cheaper, used to rank jobs.
  bool refineWholeWaves = true;
  // Seconds of stage time one currency unit is worth: > 0 with `prices` makes Tetrium's LPs
  // and their whole-wave refinement minimize time + weight·money; 0 = time only. In
  // [0, kMaxCostWeightSPerUnit].
  double costWeightSPerUnit = 0;
  // Per site, same order as the sites; empty = every site free. A weight without prices, or
  // prices without a weight, leaves the placement time-only (money is still reported).
  std::vector<SitePrices> prices;
};

// Money of an integer placement under `prices` (see the header comment; empty prices = 0).
// Map: tasks[x][y]·taskS at y, and input_x/(tasks reading x) GB per task sent from x to y.
// Reduce: tasks[y]·taskS at y, and I_x·tasks[y]/n GB sent from x to each y != x.
double mapMoney(const MapStage& stage, const std::vector<std::vector<int>>& tasks,
                const std::vector<SitePrices>& prices);
double reduceMoney(const ReduceStage& stage, const std::vector<int>& tasks, const std::vector<SitePrices>& prices);
// What Tetrium's weighted placement minimizes, for an integer placement: times.totalS() +
// options.costWeightSPerUnit · money (the time alone when the weight or prices are absent).
double placementObjective(const StageTimes& times, double money, const TetriumOptions& options);

// ---- building blocks ---------------------------------------------------------------------

// Largest-remainder apportionment: integer counts proportional to weights[i] (>= 0) summing
// exactly to `total` (>= 0); ties in the remainder go to the smaller index. All-zero weights
// split evenly. This is HOUTU's initial assignment (proportional to data).
std::vector<int> proportionalToData(const std::vector<double>& weights, int total);

// Map tasks reading from each site (the rows of the map model): proportionalToData over the
// input, except that every site holding input gets at least one task (taken from the site
// furthest above its quota), so that no input is left unread. Needs tasks >= the number of
// sites holding input, which validateMap checks.
std::vector<int> mapTasksPerSource(const std::vector<double>& inputGB, int tasks);

// Rounds a non-negative matrix whose row sums are integers (up to 1e-6) to integers with the
// same row sums and each column sum equal to floor or ceil of the fractional column sum
// (controlled rounding); cells are floor or ceil of the fractional cell.
std::vector<std::vector<int>> roundMatrixKeepingSums(const std::vector<std::vector<double>>& cells);

// Checks sites/stage are consistent (sizes match, non-negative, finite, tasks >= 0, some slot
// somewhere when tasks > 0; a map stage needs a task per site holding input). Errors name the
// offending site and field.
Status validateMap(const std::vector<SiteResources>& sites, const MapStage& stage);
Status validateReduce(const std::vector<SiteResources>& sites, const ReduceStage& stage);

// Cost of an integer map placement (tasks[x][y]) with ceil waves (fractional = false) or
// fractional waves. Sites with 0 slots and tasks get infinite compute time.
StageTimes evaluateMap(const std::vector<SiteResources>& sites, const MapStage& stage,
                       const std::vector<std::vector<int>>& tasks, bool fractionalWaves = false);
StageTimes evaluateMapFractions(const std::vector<SiteResources>& sites, const MapStage& stage,
                                const std::vector<std::vector<double>>& fraction);
StageTimes evaluateReduce(const std::vector<SiteResources>& sites, const ReduceStage& stage,
                          const std::vector<int>& tasks, bool fractionalWaves = false);
StageTimes evaluateReduceFractions(const std::vector<SiteResources>& sites, const ReduceStage& stage,
                                   const std::vector<double>& fraction);

// ---- policies ----------------------------------------------------------------------------
// All return a complete placement (fractions, integer tasks, times) or kInvalidArgument.

// Every map task runs where its data is.
Result<MapPlacement> inPlaceMap(const std::vector<SiteResources>& sites, const MapStage& stage);
// Reduce tasks spread over the sites in proportion to their slots: Spark's default (reducers go
// wherever slots free up), Tetrium's In-Place baseline.
Result<ReducePlacement> inPlaceReduce(const std::vector<SiteResources>& sites, const ReduceStage& stage);
// Reduce tasks proportional to shuffle data (HOUTU's default for later stages).
Result<ReducePlacement> proportionalReduce(const std::vector<SiteResources>& sites, const ReduceStage& stage);
// Everything at the strongest site: most slots, then most download bandwidth, then index.
Result<MapPlacement> centralizedMap(const std::vector<SiteResources>& sites, const MapStage& stage);
Result<ReducePlacement> centralizedReduce(const std::vector<SiteResources>& sites, const ReduceStage& stage);
// Iridium: reduce fractions minimizing T_shuf only (network), ignoring slots. Among shuffle-
// optimal fractions it picks the one with the least compute time (a tie-break, not Iridium's
// goal, so that results are deterministic).
Result<ReducePlacement> iridiumReduce(const std::vector<SiteResources>& sites, const ReduceStage& stage);
// Tetrium map LP (§3.1) with the WAN budget (§4.3), solved with Clp.
Result<MapPlacement> tetriumMap(const std::vector<SiteResources>& sites, const MapStage& stage,
                                const TetriumOptions& options = {});
// Tetrium reduce LP (§3.2) with the WAN budget (§4.3), solved with Clp.
Result<ReducePlacement> tetriumReduce(const std::vector<SiteResources>& sites, const ReduceStage& stage,
                                      const TetriumOptions& options = {});

// Max-min fair placement of one stage (paper 002, Algorithm 1 via maxMinFairAssign): the
// stage's tasks compete for the slots, each task is a "job" of the max-min problem, and the
// sorted vector of task completions is minimized lexicographically — the slowest task (the
// stage's completion) first, then the next. A task's completion at site y is its transfer
// (paper 002 eq. 1, maxMinTransferS, over min(uplink of the source, downlink of y); a map task
// reads its source site's share, a reduce task 1/n of every site's shuffle data) plus
// (k+1)·taskS when it runs in wave k of y's slots: slots are reused in waves, each wave of y is
// a datacenter of the problem with y's slots. Sites without slots get no tasks. The search gets
// `timeBudgetS` of wall-clock time so a release never stalls a job manager; past it the
// solver's greedy tie-breaking still returns a valid (slot-respecting) placement. `times` is
// evaluated like every policy's (evaluateMap/Reduce: shared links, ceil waves), so it can
// differ from the per-task model the search minimizes. Past the budget the search still does a
// level per task, each a few max-flows over tasks x datacenters (measured: 100 contended map
// tasks over 50 sites 0.1-0.2 s, 1,000 tasks 5 s), so a stage with tasks² x datacenters above
// kMaxMinStageWork keeps the list schedule that bounds the search (each task, in order, where
// it would finish first behind the tasks before it): within the slots, and the exact optimum
// when all tasks read the same data (reduce stages, maps reading one site).
inline constexpr double kMaxMinStageBudgetS = 0.05;
inline constexpr std::size_t kMaxMinStageWork = 250000;
Result<MapPlacement> maxMinMap(const std::vector<SiteResources>& sites, const MapStage& stage,
                               double timeBudgetS = kMaxMinStageBudgetS);
Result<ReducePlacement> maxMinReduce(const std::vector<SiteResources>& sites, const ReduceStage& stage,
                                     double timeBudgetS = kMaxMinStageBudgetS);

// The LP optimum alone (T_aggr + T_map, resp. T_shuf + T_red, fractional waves), without
// rounding or refinement, for ranking jobs by remaining time (§4.1). Without a WAN budget
// (ρ = 1) it is computed combinatorially (same optimum as the Clp LP up to ~1e-9 relative,
// checked by property tests, ~50x cheaper); with a budget it is one Clp solve. The split
// between the two times may differ from Clp's when the optimum is not unique. Time only: the
// options' cost weight does not enter a ranking by remaining time.
Result<StageTimes> tetriumMapLpTimes(const std::vector<SiteResources>& sites, const MapStage& stage,
                                     const TetriumOptions& options = {});
Result<StageTimes> tetriumReduceLpTimes(const std::vector<SiteResources>& sites, const ReduceStage& stage,
                                        const TetriumOptions& options = {});

// A stage placed by a policy of the registry (sched/policies.h): the one switch from policy to
// function that job managers, `tellus plan` and the simulator share. Maps stay in place under
// in-place, proportional and iridium. Only tetrium weighs money (options.costWeightSPerUnit);
// every policy's placement reports its `money` under options.prices.
Result<MapPlacement> placeMap(Placement policy, const std::vector<SiteResources>& sites, const MapStage& stage,
                              const TetriumOptions& options = {});
Result<ReducePlacement> placeReduce(Placement policy, const std::vector<SiteResources>& sites,
                                    const ReduceStage& stage, const TetriumOptions& options = {});

// ---- task ordering (§3.3) ----------------------------------------------------------------

// Launch order of the map tasks placed at each site y: result[y] lists the source site of
// each of its tasks, remote tasks first — sources with the smallest upload bandwidth first,
// but interleaved round-robin across sources so one slow uplink is not hit all at once —
// then local tasks.
std::vector<std::vector<int>> orderMapTasks(const std::vector<SiteResources>& sites,
                                            const std::vector<std::vector<int>>& tasks);
// Reduce launch order: task indices by input size, largest first (ties: smaller index).
std::vector<std::size_t> orderReduceTasks(const std::vector<double>& taskInputGB);

// ---- resource drops (§4.2) ---------------------------------------------------------------

// Moves tasks of a stage between at most k sites so that the new counts f' are as close as
// possible (Euclidean) to the ideal f* recomputed after a resource drop, keeping the total of
// `current`: the sites not chosen keep their counts. Exact (all site subsets) when
// C(n, k) <= 20000, otherwise the k sites with the largest |f - f*| are chosen. Within the
// chosen sites the split is the integer least-squares optimum (f' >= 0).
struct Reassignment {
  std::vector<int> tasks;           // f'
  std::vector<std::size_t> changed;  // sites whose count changed, ascending
  double distance = 0;              // Q = ||f' - f*||
  bool exhaustive = false;          // the subset search was exhaustive (optimal Q)
};
Result<Reassignment> reassignKSites(const std::vector<int>& current, const std::vector<int>& ideal, int k);

}  // namespace tellus::sched
