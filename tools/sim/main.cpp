// tellus-sim: trace-driven discrete-event simulator of Tellus's scheduling policies at
// many sites. See docs/sim.md. The CLI only fills SimOptions; the work is in sim/app.h.
#include <CLI/CLI.hpp>
#include <iostream>

#include "config/config.h"
#include "sim/app.h"

int main(int argc, char** argv) {
  using tellus::sim::ClusterShape;
  tellus::sim::SimOptions options;
  CLI::App app{"tellus-sim: deterministic discrete-event simulator of geo-distributed scheduling policies"};
  app.option_defaults()->always_capture_default();

  app.add_option("--workload", options.workload, "fb2009 | facebook | google | exponential | dag")
      ->check(CLI::IsMember({"fb2009", "facebook", "google", "exponential", "dag"}));
  app.add_option("--trace", options.tracePath, "FB-2009 SWIM trace (tab-separated)");
  std::string policy;
  std::vector<std::string> compare;
  auto* policyOption = app.add_option("--policy", policy, "one policy, e.g. in-place, tetrium, swag, houtu, tetrium+swag+af");
  app.add_option("--compare", compare, "several policies on the identical workload, comma-separated")
      ->delimiter(',')
      ->excludes(policyOption);
  app.add_option("--baseline", options.baseline, "policy the reductions are relative to (default: the first)");
  app.add_option("--seed", options.seed, "seed of every random choice (cluster, jobs, dynamics)");
  app.add_option("--out", options.outDir, "directory for jobs-<policy>.csv, summary.csv, summary.json");
  app.add_flag("!--no-job-csv", options.writeJobCsv, "do not write the per-job CSVs");

  // Sites.
  app.add_option("--sites", options.cluster.sites, "number of sites")->check(CLI::Range(1, 100000));
  std::string shape = "tetrium";
  app.add_option("--cluster", shape, "site heterogeneity: tetrium (slots 25-5000, 100 Mbps-2 Gbps) | zipf | uniform")
      ->check(CLI::IsMember({"tetrium", "zipf", "uniform"}));
  app.add_option("--min-slots", options.cluster.minSlots, "smallest site (tetrium, zipf)")->check(CLI::PositiveNumber);
  app.add_option("--max-slots", options.cluster.maxSlots, "largest site (tetrium, zipf)")->check(CLI::PositiveNumber);
  app.add_option("--min-bandwidth-mbps", options.cluster.minBandwidthMbps)->check(CLI::PositiveNumber);
  app.add_option("--max-bandwidth-mbps", options.cluster.maxBandwidthMbps)->check(CLI::PositiveNumber);
  app.add_flag("--correlated-bandwidth", options.cluster.correlatedBandwidth,
               "tetrium: a site's bandwidth has the same quantile as its slots (big sites, big pipes)");
  app.add_option("--slot-skew", options.cluster.slotSkew, "zipf exponent of slots")->check(CLI::NonNegativeNumber);
  app.add_option("--bandwidth-skew", options.cluster.bandwidthSkew, "zipf exponent of bandwidth")->check(CLI::NonNegativeNumber);
  app.add_option("--slots", options.cluster.uniformSlots, "slots per site (uniform)")->check(CLI::PositiveNumber);
  app.add_option("--bandwidth-mbps", options.cluster.uniformBandwidthMbps, "bandwidth per site (uniform)")
      ->check(CLI::PositiveNumber);

  // Workload.
  app.add_option("--jobs", options.jobs, "jobs to simulate (0 = workload default / whole trace)")->check(CLI::NonNegativeNumber);
  app.add_option("--utilization", options.utilization, "tune arrivals to this slot utilization (0 = as given)")
      ->check(CLI::Range(0.0, 10.0));
  app.add_option("--arrival-scale", options.arrivalScale, "fb2009: multiply submit times by this")->check(CLI::PositiveNumber);
  double blockMiB = 128, reduceMiB = 1024;
  app.add_option("--block-mb", blockMiB, "fb2009/dag: MiB of input per map task")->check(CLI::PositiveNumber);
  app.add_option("--reduce-mb", reduceMiB, "fb2009: MiB of shuffle per reduce task")->check(CLI::PositiveNumber);
  double processingMiBps = 8;
  app.add_option("--slot-mbps", processingMiBps, "fb2009/dag: MiB a slot processes per second (task compute time)")
      ->check(CLI::PositiveNumber);
  double dataSkew = 2.0;
  app.add_option("--data-skew", dataSkew, "Zipf skew of input (task) placement over sites; -1 = one site per job");
  app.add_option("--task-max-ratio", options.synthetic.maxTaskOverMean, "synthetic: Pareto truncation, max/mean")
      ->check(CLI::Range(1.01, 1e6));
  app.add_option("--task-seconds", options.synthetic.meanTaskSeconds, "synthetic: mean task duration (Pareto)")
      ->check(CLI::PositiveNumber);
  app.add_option("--dag-min-stages", options.dag.minStages)->check(CLI::PositiveNumber);
  app.add_option("--dag-max-stages", options.dag.maxStages)->check(CLI::PositiveNumber);
  double dagMinGB = 1, dagMaxGB = 200;
  app.add_option("--dag-min-input-gb", dagMinGB)->check(CLI::PositiveNumber);
  app.add_option("--dag-max-input-gb", dagMaxGB)->check(CLI::PositiveNumber);
  app.add_option("--dag-interarrival", options.dag.meanInterArrivalSeconds, "dag: mean seconds between jobs")
      ->check(CLI::PositiveNumber);

  // Dynamics.
  app.add_option("--drop-percent", options.dropPercent, "resource drop: % of slots and bandwidth lost")
      ->check(CLI::Range(0.0, 100.0));
  app.add_option("--drop-sites", options.dropSites, "sites hit by each drop")->check(CLI::NonNegativeNumber);
  app.add_option("--drop-every", options.dropEverySeconds, "seconds between drops")->check(CLI::PositiveNumber);
  app.add_option("--drop-duration", options.dropDurationSeconds, "seconds a drop lasts")->check(CLI::PositiveNumber);
  app.add_option("--spot-loss-rate", options.spotLossesPerSiteHour, "spot-VM losses per site per hour")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--spot-loss-fraction", options.spotLossFraction, "fraction of a site's slots each loss takes")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--spot-loss-duration", options.spotLossDurationSeconds, "seconds until the slots come back")
      ->check(CLI::PositiveNumber);
  app.add_flag("--brute-force", options.bruteForce, "also run every job order (<= 8 jobs) and report the best");

  // Prices of every site (a master's `prices` section), for the cost column.
  const auto price = CLI::Range(0.0, tellus::cost::kMaxPrice);
  app.add_option("--container-hour", options.prices.container_hour, "price of a slot-hour at every site")->check(price);
  app.add_option("--egress-gb", options.prices.egress_default_gb, "price of a GB sent from one site to another")->check(price);
  app.add_option("--market", options.prices.market, "on-demand | spot (a label)")->check(CLI::IsMember({"on-demand", "spot"}));
  std::string pricesPath;
  app.add_option("--prices", pricesPath,
                 "YAML file of per-site prices, each site's as in a master's `prices` (replaces the flags above for the sites it names)");

  CLI11_PARSE(app, argc, argv);

  if (!pricesPath.empty()) {
    auto prices = tellus::config::loadSitePrices(pricesPath);
    if (!prices) {
      std::cerr << "tellus-sim: " << prices.message() << "\n";
      return 2;
    }
    options.sitePrices = std::move(prices).value();
  }
  if (!policy.empty()) {
    options.policies = {policy};
  } else if (!compare.empty()) {
    options.policies = compare;
  }
  options.cluster.shape = shape == "zipf" ? ClusterShape::kZipf : shape == "uniform" ? ClusterShape::kUniform : ClusterShape::kTetrium;
  options.trace.blockBytes = blockMiB * tellus::sim::kMiB;
  options.trace.reduceBytesPerTask = reduceMiB * tellus::sim::kMiB;
  options.dag.blockBytes = blockMiB * tellus::sim::kMiB;
  options.trace.processingBytesPerSecond = options.dag.processingBytesPerSecond = processingMiBps * tellus::sim::kMiB;
  options.trace.dataSkew = options.dag.dataSkew = dataSkew < 0 ? 0 : dataSkew;
  options.synthetic.dataSkew = dataSkew;
  if (dagMaxGB < dagMinGB) {
    std::cerr << "tellus-sim: --dag-max-input-gb must be >= --dag-min-input-gb\n";
    return 2;
  }
  options.dag.minInputBytes = dagMinGB * tellus::sim::kGB;
  options.dag.maxInputBytes = dagMaxGB * tellus::sim::kGB;
  return tellus::sim::runSimCommand(options, std::cout, std::cerr);
}
