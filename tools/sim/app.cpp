#include "sim/app.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>

#include <fmt/format.h>

#include "sim/output.h"

namespace tellus::sim {
namespace {

// Independent random streams, so that e.g. adding spot losses does not change the jobs.
constexpr uint64_t kClusterStream = 1, kWorkloadStream = 2, kDynamicsStream = 3;

Error invalid(std::string message) { return makeError(ErrorCode::kInvalidArgument, std::move(message)); }

double totalSlots(const std::vector<SiteSpec>& sites) {
  double total = 0;
  for (const auto& site : sites) total += site.slots;
  return total;
}

// Pre-pass over the trace: arrival span and expected compute, to compress arrivals to a
// target utilization (the trace's own load on 50 Tetrium-sized sites is far below 1%).
Result<double> traceArrivalScale(const SimOptions& options, const std::vector<SiteSpec>& sites) {
  if (options.utilization <= 0) return options.arrivalScale;
  std::ifstream in(options.tracePath);
  if (!in) return makeError(ErrorCode::kNotFound, "cannot open trace '" + options.tracePath + "'");
  TraceReader reader(in, options.tracePath);
  double work = 0, last = 0;
  int64_t count = 0;
  while (true) {
    auto record = reader.next();
    if (!record) return record.error();
    if (!record->has_value()) break;
    if (options.jobs > 0 && count >= options.jobs) break;
    work += TraceWorkload::expectedTaskSeconds(**record, options.trace);
    last = (*record)->submitSeconds;
    ++count;
  }
  if (last <= 0 || work <= 0) return invalid("the trace has no load to scale");
  return work / (options.utilization * totalSlots(sites) * last);
}

class LimitedWorkload : public WorkloadSource {
 public:
  LimitedWorkload(std::unique_ptr<WorkloadSource> inner, int64_t limit) : inner_(std::move(inner)), limit_(limit) {}
  Result<std::optional<JobSpec>> next() override {
    if (produced_ >= limit_) return std::optional<JobSpec>();
    ++produced_;
    return inner_->next();
  }

 private:
  std::unique_ptr<WorkloadSource> inner_;
  int64_t limit_;
  int64_t produced_ = 0;
};

}  // namespace

Result<std::unique_ptr<WorkloadSource>> makeWorkload(const SimOptions& options, const std::vector<SiteSpec>& sites) {
  const Rng rng = Rng(options.seed).fork(kWorkloadStream);
  const int n = static_cast<int>(sites.size());
  if (options.workload == "fb2009") {
    if (options.tracePath.empty()) {
      return makeError(ErrorCode::kInvalidArgument,
                       "--workload fb2009 needs --trace FILE (the SWIM FB-2009 trace, "
                       "e.g. shared/traces/swim/FB-2009_samples_24_times_1hr_0.tsv)");
    }
    TraceToJobOptions trace = options.trace;
    trace.sites = n;
    auto scale = traceArrivalScale(options, sites);
    if (!scale) return scale.error();
    trace.arrivalScale = *scale;
    auto workload = TraceWorkload::open(options.tracePath, trace, rng);
    if (!workload) return workload.error();
    std::unique_ptr<WorkloadSource> source = std::move(workload.value());
    if (options.jobs > 0) source = std::make_unique<LimitedWorkload>(std::move(source), options.jobs);
    return source;
  }
  if (options.workload == "facebook" || options.workload == "google" || options.workload == "exponential") {
    SyntheticOptions synthetic = options.synthetic;
    synthetic.sizes = options.workload == "facebook" ? JobSizeModel::kFacebook
                      : options.workload == "google" ? JobSizeModel::kGoogle
                                                     : JobSizeModel::kExponential;
    synthetic.sites = n;
    synthetic.totalSlots = totalSlots(sites);
    if (options.jobs > 0) synthetic.jobs = options.jobs;
    if (options.utilization > 0) synthetic.targetUtilization = options.utilization;
    if (synthetic.targetUtilization <= 0) return invalid("--utilization must be > 0");
    return std::unique_ptr<WorkloadSource>(std::make_unique<SyntheticWorkload>(synthetic, rng));
  }
  if (options.workload == "dag") {
    DagOptions dag = options.dag;
    dag.sites = n;
    if (options.jobs > 0) dag.jobs = options.jobs;
    if (dag.minStages < 1 || dag.maxStages < dag.minStages) return invalid("DAG stages need 1 <= min <= max");
    return std::unique_ptr<WorkloadSource>(std::make_unique<DagWorkload>(dag, rng));
  }
  return invalid("unknown --workload '" + options.workload + "' (expected fb2009, facebook, google, exponential or dag)");
}

Result<double> workloadHorizonSeconds(const SimOptions& options, const std::vector<SiteSpec>& sites) {
  if (options.workload == "fb2009") {
    auto scale = traceArrivalScale(options, sites);
    if (!scale) return scale.error();
    return 86400.0 * *scale;
  }
  if (options.workload == "dag") {
    const int jobs = options.jobs > 0 ? options.jobs : options.dag.jobs;
    return jobs * options.dag.meanInterArrivalSeconds;
  }
  SyntheticOptions synthetic = options.synthetic;
  synthetic.sizes = options.workload == "facebook" ? JobSizeModel::kFacebook
                    : options.workload == "google" ? JobSizeModel::kGoogle
                                                   : JobSizeModel::kExponential;
  synthetic.totalSlots = totalSlots(sites);
  if (options.utilization > 0) synthetic.targetUtilization = options.utilization;
  const int jobs = options.jobs > 0 ? options.jobs : synthetic.jobs;
  const JobSizeDistribution sizes(synthetic.sizes);
  return jobs * sizes.mean() * synthetic.meanTaskSeconds / (synthetic.targetUtilization * synthetic.totalSlots);
}

std::vector<ClusterEventSpec> makeClusterEvents(const SimOptions& options, int sites, double horizonSeconds) {
  std::vector<ClusterEventSpec> events;
  Rng rng = Rng(options.seed).fork(kDynamicsStream);
  if (options.dropPercent > 0 && options.dropEverySeconds > 0) {
    for (double t = options.dropEverySeconds / 2; t < horizonSeconds; t += options.dropEverySeconds) {
      const std::vector<int> order = randomPermutation(sites, rng);
      for (int i = 0; i < std::min(options.dropSites, sites); ++i) {
        ClusterEventSpec drop;
        drop.timeSeconds = t;
        drop.site = order[static_cast<size_t>(i)];
        drop.slotLoss = options.dropPercent / 100.0;
        drop.bandwidthLoss = std::min(0.99, options.dropPercent / 100.0);
        drop.durationSeconds = options.dropDurationSeconds;
        events.push_back(drop);
      }
    }
  }
  if (options.spotLossesPerSiteHour > 0) {
    for (int site = 0; site < sites; ++site) {
      for (double t = rng.exponential(3600.0 / options.spotLossesPerSiteHour); t < horizonSeconds;
           t += rng.exponential(3600.0 / options.spotLossesPerSiteHour)) {
        ClusterEventSpec loss;
        loss.timeSeconds = t;
        loss.site = site;
        loss.slotLoss = options.spotLossFraction;
        loss.durationSeconds = options.spotLossDurationSeconds;
        loss.killsTasks = true;
        events.push_back(loss);
      }
    }
  }
  std::stable_sort(events.begin(), events.end(),
                   [](const ClusterEventSpec& a, const ClusterEventSpec& b) { return a.timeSeconds < b.timeSeconds; });
  return events;
}

namespace {

class NullSink : public JobRecordSink {
 public:
  void onJobFinished(const JobRecord&) override {}
};

}  // namespace

Result<std::map<std::string, cost::Prices>> pricesBySite(const SimOptions& options, const std::vector<SiteSpec>& sites) {
  std::map<std::string, cost::Prices> out;
  for (const auto& site : sites) out[site.name] = options.prices;
  const std::string names = sites.empty() ? "none" : fmt::format("{}..{}", sites.front().name, sites.back().name);
  const auto unknown = [&](const std::string& site, const std::string& where) {
    return invalid(fmt::format("--prices: {}'{}' is not a simulated site (they are {})", where, site.substr(0, 64), names));
  };
  for (const auto& [site, prices] : options.sitePrices) {
    auto it = out.find(site);
    if (it == out.end()) return unknown(site, "");
    for (const auto& to : prices.egress_gb) {
      if (out.count(to.first) == 0) return unknown(to.first, fmt::format("egress_gb of {}: ", site));
    }
    it->second = prices;
  }
  return out;
}

Result<std::vector<RunSummary>> runPolicies(const SimOptions& options, std::ostream& log) {
  if (options.policies.empty()) return invalid("no policy given (--policy or --compare)");
  auto sites = makeCluster(options.cluster, Rng(options.seed).fork(kClusterStream));
  if (!sites) return sites.error();
  auto horizon = workloadHorizonSeconds(options, *sites);
  if (!horizon) return horizon.error();
  SimConfig base;
  base.sites = *sites;
  base.clusterEvents = makeClusterEvents(options, static_cast<int>(sites->size()), *horizon);
  auto prices = pricesBySite(options, *sites);
  if (!prices) return prices.error();
  base.prices = std::move(prices).value();
  std::vector<PolicyConfig> policies;
  for (const auto& text : options.policies) {
    auto policy = parsePolicy(text);
    if (!policy) return policy.error();
    policies.push_back(std::move(policy.value()));
  }
  if (!options.outDir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(options.outDir, ec);
    if (ec) return makeError(ErrorCode::kInvalidArgument, "cannot create --out directory '" + options.outDir + "': " + ec.message());
  }
  std::vector<RunSummary> summaries;
  for (const auto& policy : policies) {
    SimConfig config = base;
    config.policy = policy;
    auto workload = makeWorkload(options, *sites);
    if (!workload) return workload.error();
    std::ofstream csv;
    std::unique_ptr<JobRecordSink> sink = std::make_unique<NullSink>();
    if (!options.outDir.empty() && options.writeJobCsv) {
      const std::string path = options.outDir + "/jobs-" + fileSafe(policy.label) + ".csv";
      csv.open(path);
      if (!csv) return makeError(ErrorCode::kInvalidArgument, "cannot write '" + path + "'");
      sink = std::make_unique<CsvJobWriter>(csv, policy.label);
    }
    auto summary = runSimulation(config, **workload, sink.get());
    if (!summary) return summary.error().prepend("while running policy '" + policy.label + "'");
    log << "ran " << policy.label << ": " << summary->jobs << " jobs, " << summary->events << " events in "
        << summary->wallSeconds << " s (" << static_cast<int64_t>(summary->eventsPerSecond) << " events/s)\n";
    summaries.push_back(std::move(summary.value()));
  }
  if (options.bruteForce) {
    // Every job order, each as a fixed priority at every site; the best mean response wins.
    std::vector<int64_t> ids;
    {
      auto workload = makeWorkload(options, *sites);
      if (!workload) return workload.error();
      while (true) {
        auto job = (*workload)->next();
        if (!job) return job.error();
        if (!job->has_value()) break;
        ids.push_back((*job)->id);
      }
    }
    if (ids.size() > 8) return invalid("--brute-force enumerates job orders: use at most 8 jobs (--jobs)");
    std::sort(ids.begin(), ids.end());
    std::optional<RunSummary> best;
    int64_t orders = 0;
    do {
      SimConfig config = base;
      config.policy.label = "optimal";
      config.policy.fixedOrder = ids;
      auto workload = makeWorkload(options, *sites);
      if (!workload) return workload.error();
      auto summary = runSimulation(config, **workload, nullptr);
      if (!summary) return summary.error().prepend("brute force");
      ++orders;
      if (!best || summary->response.mean() < best->response.mean() - 1e-12) best = std::move(summary.value());
    } while (std::next_permutation(ids.begin(), ids.end()));
    log << "brute force: best of " << orders << " job orders\n";
    best->policy = "optimal";
    summaries.push_back(std::move(*best));
  }
  return summaries;
}

int runSimCommand(const SimOptions& options, std::ostream& out, std::ostream& err) {
  if (!options.baseline.empty() && options.baseline != "optimal" &&
      std::find(options.policies.begin(), options.policies.end(), options.baseline) == options.policies.end()) {
    err << "tellus-sim: --baseline '" << options.baseline << "' is not one of the compared policies\n";
    return 2;
  }
  auto summaries = runPolicies(options, err);
  if (!summaries) {
    err << "tellus-sim: " << summaries.message() << "\n";
    return summaries.error().code == ErrorCode::kInvalidArgument || summaries.error().code == ErrorCode::kNotFound ? 2 : 1;
  }
  size_t baseline = 0;
  if (!options.baseline.empty()) {
    const auto it = std::find_if(summaries->begin(), summaries->end(),
                                 [&](const RunSummary& s) { return s.policy == options.baseline; });
    if (it == summaries->end()) {
      err << "tellus-sim: --baseline '" << options.baseline << "' is not one of the compared policies\n";
      return 2;
    }
    baseline = static_cast<size_t>(it - summaries->begin());
  }
  printSummaryTable(out, *summaries, baseline);
  if (!options.outDir.empty()) {
    std::ofstream csv(options.outDir + "/summary.csv");
    writeSummaryCsv(csv, *summaries, baseline);
    std::ofstream json(options.outDir + "/summary.json");
    json << summaryJson(*summaries, baseline);
    if (!csv || !json) {
      err << "tellus-sim: cannot write the summary into '" << options.outDir << "'\n";
      return 1;
    }
  }
  return 0;
}

}  // namespace tellus::sim
