#pragma once
// The tellus-sim command behind the CLI: builds the cluster and workload from options, runs
// one or several policies on the identical workload, and writes the results.

#include <cstdint>
#include <limits>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "sim/simulator.h"
#include "sim/workload.h"
#include "util/result.h"

namespace tellus::sim {

struct SimOptions {
  std::string workload = "fb2009";  // fb2009 | facebook | google | exponential | dag
  std::string tracePath;  // fb2009: the SWIM FB-2009 trace file (required for that workload)
  ClusterOptions cluster;
  std::vector<std::string> policies = {"in-place"};
  std::string baseline;  // a policy label from `policies`; empty = the first
  uint64_t seed = 1;
  std::string outDir;    // empty = print only
  bool writeJobCsv = true;
  int jobs = 0;                  // synthetic/dag/trace: number of jobs (0 = default / whole trace)
  double utilization = 0;        // > 0: tune arrivals to this slot utilization
  double arrivalScale = 1.0;     // fb2009: multiplies submit times
  TraceToJobOptions trace;       // block size etc. (sites and scale are set from the rest)
  SyntheticOptions synthetic;    // sizes/sites/slots/jobs are set from the rest
  DagOptions dag;
  // Resource drops (Tetrium §6.3.2): every dropEverySeconds, dropSites random sites lose
  // dropPercent of slots and bandwidth for dropDurationSeconds.
  double dropPercent = 0;
  int dropSites = 5;
  double dropEverySeconds = 300;
  double dropDurationSeconds = 150;
  // Spot-VM losses: Poisson per site; each kills tasks on the lost slots.
  double spotLossesPerSiteHour = 0;
  double spotLossFraction = 0.25;
  double spotLossDurationSeconds = 600;
  // Brute force (paper 001 §6.2): also run every job order of a small workload with a fixed
  // priority and report the best as "optimal".
  bool bruteForce = false;
  // Every site's prices (a master's `prices` config): each run's usage is priced with them
  // (cost::price), so policies compare on money as well as time.
  cost::Prices prices;
  // Per-site prices (--prices FILE, config::parseSitePrices) replacing `prices` for the sites
  // they name: container-hour, market and egress per destination site differ between sites.
  std::map<std::string, cost::Prices> sitePrices;
};

// Each simulated site's prices: `prices`, replaced by its `sitePrices` entry if it has one.
// kInvalidArgument when an entry, or an egress price in one, names a site the cluster does not
// have (a typo would otherwise price nothing, silently).
Result<std::map<std::string, cost::Prices>> pricesBySite(const SimOptions& options, const std::vector<SiteSpec>& sites);

// Expected arrival horizon of the configured workload (for scheduling drops/spot losses).
Result<double> workloadHorizonSeconds(const SimOptions& options, const std::vector<SiteSpec>& sites);

// Builds the workload stream for one run (the same options and seed give the same jobs).
Result<std::unique_ptr<WorkloadSource>> makeWorkload(const SimOptions& options, const std::vector<SiteSpec>& sites);

// Resource drops and spot losses for the run, from the options and seed.
std::vector<ClusterEventSpec> makeClusterEvents(const SimOptions& options, int sites, double horizonSeconds);

// Runs every policy; returns the summaries (brute force adds "optimal" last).
Result<std::vector<RunSummary>> runPolicies(const SimOptions& options, std::ostream& log);

// The whole command: run, print the table, write DIR/{jobs-*.csv,summary.csv,summary.json}.
// Returns 0 on success, 2 on bad input (message on err), 1 on an internal failure.
int runSimCommand(const SimOptions& options, std::ostream& out, std::ostream& err);

}  // namespace tellus::sim
