#include "sim/output.h"

#include <cstdio>
#include <nlohmann/json.hpp>

namespace tellus::sim {
namespace {

std::string fixed(double value, int decimals) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, value);
  return buffer;
}

// CSV fields here never contain quotes; names with commas are quoted.
std::string csvField(const std::string& text) {
  return text.find(',') == std::string::npos ? text : "\"" + text + "\"";
}

}  // namespace

CsvJobWriter::CsvJobWriter(std::ostream& out, std::string policy, bool header) : out_(out), policy_(std::move(policy)) {
  if (header) out_ << "policy,job,name,arrival_s,finish_s,response_s,isolated_s,slowdown,wan_bytes,tasks,stages\n";
}

void CsvJobWriter::onJobFinished(const JobRecord& r) {
  out_ << csvField(policy_) << ',' << r.id << ',' << csvField(r.name) << ',' << fixed(r.arrivalSeconds, 3) << ','
       << fixed(r.finishSeconds, 3) << ',' << fixed(r.responseSeconds, 3) << ',' << fixed(r.isolatedSeconds, 3) << ','
       << fixed(r.slowdown, 4) << ',' << fixed(r.wanBytes, 0) << ',' << r.tasks << ',' << r.stages << '\n';
}

double containerSeconds(const cost::JobCost& cost) {
  double seconds = 0;
  for (const auto& site : cost.sites) seconds += site.container_seconds;
  return seconds;
}

double reductionPercent(double baseline, double value) {
  return baseline != 0 ? 100.0 * (baseline - value) / baseline : 0.0;
}

void printSummaryTable(std::ostream& out, const std::vector<RunSummary>& summaries, size_t baseline) {
  char line[512];
  std::snprintf(line, sizeof line, "%-34s %7s %10s %10s %10s %8s %8s %10s %11s %7s %12s %8s %11s\n", "policy", "jobs",
                "mean_rt_s", "median_s", "p95_s", "mean_sd", "p95_sd", "wan_GB", "makespan_s", "util", "cost",
                "wall_s", "events/s");
  out << line;
  for (const auto& s : summaries) {
    std::snprintf(line, sizeof line, "%-34s %7lld %10.2f %10.2f %10.2f %8.2f %8.2f %10.1f %11.1f %7.3f %12.2f %8.2f %11.0f\n",
                  s.policy.c_str(), static_cast<long long>(s.jobs), s.response.mean(), s.response.quantile(0.5),
                  s.response.quantile(0.95), s.slowdown.mean(), s.slowdown.quantile(0.95), s.wanBytes / 1e9,
                  s.makespanSeconds, s.utilization, s.cost.total, s.wallSeconds, s.eventsPerSecond);
    out << line;
  }
  if (summaries.size() < 2 || baseline >= summaries.size()) return;
  const RunSummary& base = summaries[baseline];
  out << "\nreduction vs " << base.policy << " (positive = better)\n";
  std::snprintf(line, sizeof line, "%-34s %10s %10s %10s %10s %10s %11s %10s\n", "policy", "mean_rt", "median_rt", "p95_rt",
                "slowdown", "wan", "makespan", "cost");
  out << line;
  for (size_t i = 0; i < summaries.size(); ++i) {
    if (i == baseline) continue;
    const auto& s = summaries[i];
    std::snprintf(line, sizeof line, "%-34s %9.1f%% %9.1f%% %9.1f%% %9.1f%% %9.1f%% %10.1f%% %9.1f%%\n", s.policy.c_str(),
                  reductionPercent(base.response.mean(), s.response.mean()),
                  reductionPercent(base.response.quantile(0.5), s.response.quantile(0.5)),
                  reductionPercent(base.response.quantile(0.95), s.response.quantile(0.95)),
                  reductionPercent(base.slowdown.mean(), s.slowdown.mean()),
                  reductionPercent(base.wanBytes, s.wanBytes),
                  reductionPercent(base.makespanSeconds, s.makespanSeconds), reductionPercent(base.cost.total, s.cost.total));
    out << line;
  }
}

void writeSummaryCsv(std::ostream& out, const std::vector<RunSummary>& summaries, size_t baseline) {
  out << "policy,jobs,mean_response_s,median_response_s,p95_response_s,mean_slowdown,median_slowdown,p95_slowdown,"
         "wan_bytes,makespan_s,utilization,events,wall_s,events_per_s,tasks_launched,tasks_killed,tasks_stolen,"
         "tasks_reassigned,placements,placement_wall_s,reduction_mean_response_pct,reduction_wan_pct,"
         "container_seconds,container_cost,egress_cost,total_cost,root_launches,root_local_launches,locality\n";
  const RunSummary* base = baseline < summaries.size() ? &summaries[baseline] : nullptr;
  for (const auto& s : summaries) {
    out << csvField(s.policy) << ',' << s.jobs << ',' << fixed(s.response.mean(), 4) << ','
        << fixed(s.response.quantile(0.5), 4) << ',' << fixed(s.response.quantile(0.95), 4) << ','
        << fixed(s.slowdown.mean(), 4) << ',' << fixed(s.slowdown.quantile(0.5), 4) << ','
        << fixed(s.slowdown.quantile(0.95), 4) << ',' << fixed(s.wanBytes, 0) << ',' << fixed(s.makespanSeconds, 3) << ','
        << fixed(s.utilization, 4) << ',' << s.events << ',' << fixed(s.wallSeconds, 3) << ','
        << fixed(s.eventsPerSecond, 0) << ',' << s.tasksLaunched << ',' << s.tasksKilled << ',' << s.tasksStolen << ','
        << s.tasksReassigned << ',' << s.placementsSolved << ',' << fixed(s.placementWallSeconds, 3) << ','
        << fixed(base ? reductionPercent(base->response.mean(), s.response.mean()) : 0, 2) << ','
        << fixed(base ? reductionPercent(base->wanBytes, s.wanBytes) : 0, 2) << ',' << fixed(containerSeconds(s.cost), 3)
        << ',' << fixed(s.cost.container_cost, 6) << ',' << fixed(s.cost.egress_cost, 6) << ',' << fixed(s.cost.total, 6)
        << ',' << s.rootLaunches << ',' << s.rootLocalLaunches << ',' << fixed(s.locality(), 4) << '\n';
  }
}

std::string summaryJson(const std::vector<RunSummary>& summaries, size_t baseline) {
  nlohmann::json runs = nlohmann::json::array();
  const RunSummary* base = baseline < summaries.size() ? &summaries[baseline] : nullptr;
  for (const auto& s : summaries) {
    nlohmann::json run = {
        {"policy", s.policy},
        {"jobs", s.jobs},
        {"response_s", {{"mean", s.response.mean()}, {"median", s.response.quantile(0.5)}, {"p95", s.response.quantile(0.95)}, {"max", s.response.max()}}},
        {"slowdown", {{"mean", s.slowdown.mean()}, {"median", s.slowdown.quantile(0.5)}, {"p95", s.slowdown.quantile(0.95)}}},
        {"wan_bytes", s.wanBytes},
        {"makespan_s", s.makespanSeconds},
        {"utilization", s.utilization},
        {"events", s.events},
        {"wall_s", s.wallSeconds},
        {"events_per_s", s.eventsPerSecond},
        {"tasks", {{"launched", s.tasksLaunched}, {"killed", s.tasksKilled}, {"stolen", s.tasksStolen}, {"reassigned", s.tasksReassigned},
                   {"root_launches", s.rootLaunches}, {"root_local_launches", s.rootLocalLaunches}}},
        {"locality", s.locality()},
        {"placements", {{"count", s.placementsSolved}, {"wall_s", s.placementWallSeconds}}},
        {"orders", {{"count", s.ordersComputed}, {"wall_s", s.orderWallSeconds}}},
        {"peak_active_jobs", s.peakActiveJobs},
        {"cost", {{"container_seconds", containerSeconds(s.cost)}, {"container_cost", s.cost.container_cost},
                  {"egress_cost", s.cost.egress_cost}, {"total", s.cost.total}, {"unpriced_sites", s.cost.unpriced.size()}}},
    };
    if (base != nullptr) {
      run["reduction_vs_baseline_pct"] = {
          {"baseline", base->policy},
          {"mean_response", reductionPercent(base->response.mean(), s.response.mean())},
          {"median_response", reductionPercent(base->response.quantile(0.5), s.response.quantile(0.5))},
          {"p95_response", reductionPercent(base->response.quantile(0.95), s.response.quantile(0.95))},
          {"mean_slowdown", reductionPercent(base->slowdown.mean(), s.slowdown.mean())},
          {"wan", reductionPercent(base->wanBytes, s.wanBytes)},
          {"makespan", reductionPercent(base->makespanSeconds, s.makespanSeconds)},
          {"cost", reductionPercent(base->cost.total, s.cost.total)},
      };
    }
    runs.push_back(std::move(run));
  }
  return nlohmann::json{{"runs", runs}}.dump(2) + "\n";
}

std::string fileSafe(const std::string& label) {
  std::string safe;
  for (char c : label) {
    if (c == '+') safe += '_';
    else if (c == '=') safe += '-';
    else if (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_') safe += c;
    else safe += '_';
  }
  return safe;
}

}  // namespace tellus::sim
