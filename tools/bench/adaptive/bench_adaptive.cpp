// bench-adaptive: HOUTU-style experiments on adaptive execution, run on a local cluster of real
// daemons (4 sites, WAN emulation between them), printed as one JSON document on stdout
// (progress goes to stderr). Not a test: it asserts nothing, it measures.
//
//   bench-adaptive [--only steal|online] [--seed N] [--jobs N] [--interarrival-s X] [--repetitions N]
//
// steal  (HOUTU Figure 9): one multi-stage job; when half of its first stage is done, load is
//        injected into three of the four sites. Job time with work stealing and without
//        (`stealing: false`), and the steal latency logged by the thieves' JMs.
// online (HOUTU Figure 8): a seeded online workload (exponential inter-arrival times) run under
//        Af + Parades (the default) and under static allocation (`containers_per_site: N`,
//        `stealing: false`): mean response time, makespan, and the reduction.
//
// How load is injected: this machine has one CPU for every "site", so a CPU hog would slow all
// sites alike. A site's load is therefore emulated where it shows: in the time its tasks take.
// The slow stages run a shell command that finds its own site from its executor's task file
// (<cluster>/<site>/<worker>/containers/...) and sleeps for the time written in
// <cluster>/<site>/load when that file exists (a loaded VM), else for the base time. Sleeping
// tasks use no CPU, so the numbers do not depend on what else runs on the machine.

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "harness/eventually.h"
#include "harness/mini_cluster.h"
#include "kit/adaptive_kit.h"
#include "util/log.h"

namespace tellus::adaptive {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;
using std::chrono::milliseconds;

constexpr int kSites = 4;
constexpr int kContainersPerWorker = 4;
constexpr double kWanMbps = 100;
constexpr uint32_t kWanLatencyMs = 20;
constexpr milliseconds kJobDeadline = 300s;

// Emulated task time at a site: the content of <site dir>/load, else `baseS`.
std::string siteTimedCommand(double baseS) {
  std::ostringstream cmd;
  cmd << "t=$(tr '\\0' '\\n' < /proc/$PPID/cmdline | sed -n 2p); f=${t%/*/*/*/*/*}/load; "
      << "if [ -r \"$f\" ]; then sleep $(cat \"$f\"); else sleep " << baseS << "; fi; cat";
  return cmd.str();
}

struct Options {
  std::string only;
  uint32_t seed = 7;
  int onlineJobs = 12;
  double interarrivalS = 2.5;
  int repetitions = 2;
};

void progress(const std::string& line) { std::cerr << "[bench-adaptive] " << line << std::endl; }

double mean(const std::vector<double>& v) {
  return v.empty() ? 0.0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  auto rank = static_cast<size_t>(std::ceil(p * static_cast<double>(v.size()))) - 1;
  return v[std::min(rank, v.size() - 1)];
}

Status writeText(const std::filesystem::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::trunc);
  out << text;
  out.close();
  if (!out) return makeError(ErrorCode::kInternal, "cannot write " + p.string());
  return {};
}

class Bench {
 public:
  Bench(harness::MiniCluster& cluster, ZkView& zk, Options options)
      : cluster_(cluster), zk_(zk), options_(std::move(options)) {}

  Result<json> steal() {
    const auto& sites = cluster_.sites();
    // Evenly spread input: every site starts with the same work.
    for (size_t i = 0; i < sites.size(); ++i) {
      TELLUS_RETURN_IF_ERROR(
          putDataset(cluster_, sites[i], "fig9", generateText(900 + static_cast<uint32_t>(i), 1200), kFig9PartitionsPerSite));
    }
    json runs = json::array();
    std::vector<double> withSteal, without, latencies;
    for (int rep = 0; rep < options_.repetitions; ++rep) {
      for (bool stealing : {true, false}) {
        auto run = stealRun(stealing);
        if (!run) return run.error();
        ((stealing ? withSteal : without)).push_back((*run)["job_s"].get<double>());
        for (double ms : (*run)["steal_latencies_ms"]) latencies.push_back(ms);
        run->erase("steal_latencies_ms");
        runs.push_back(*run);
      }
    }
    json out;
    out["setup"] = {{"sites", kSites},
                    {"containers_per_site_of_the_job", kFig9Containers},
                    {"wan", {{"bandwidth_mbps", kWanMbps}, {"latency_ms", kWanLatencyMs}}},
                    {"stages", "slow(exec over dataset, " + std::to_string(kFig9PartitionsPerSite * kSites) +
                                   " tasks) -> slow2(exec, " + std::to_string(kFig9SecondTasks) +
                                   " tasks) -> wordcount.map(8) -> wordcount.reduce(4)"},
                    {"task_s", kBaseTaskS},
                    {"loaded_task_s", kLoadedTaskS},
                    {"load", "3 of 4 sites, injected when half of stage 1 is done (tasks there take " +
                                 std::to_string(kLoadedTaskS / kBaseTaskS).substr(0, 3) + "x longer)"}};
    out["runs"] = runs;
    double with = mean(withSteal), no = mean(without);
    out["job_s_with_stealing"] = with;
    out["job_s_without_stealing"] = no;
    out["job_time_reduction_pct"] = no > 0 ? 100.0 * (no - with) / no : 0.0;
    out["steals"] = latencies.size();
    out["steal_latency_ms_mean"] = mean(latencies);
    out["steal_latency_ms_p95"] = percentile(latencies, 0.95);
    out["houtu_steal_latency_ms"] = 63.5;
    out["note"] =
        "steal latency is the thief's jm.Steal RPC plus the victim's taskMap compare-and-set in ZooKeeper, on "
        "loopback: the WAN emulation shapes partition transfers only, not JM-to-JM calls";
    return out;
  }

  Result<json> online() {
    const auto& sites = cluster_.sites();
    for (size_t i = 0; i < sites.size(); ++i) {
      TELLUS_RETURN_IF_ERROR(
          putDataset(cluster_, sites[i], "fig8", generateText(800 + static_cast<uint32_t>(i), 600), kFig8PartitionsPerSite));
    }
    // One seeded arrival schedule for both policies.
    std::mt19937 rng(options_.seed);
    std::exponential_distribution<double> gap(1.0 / options_.interarrivalS);
    std::vector<double> arrivals;
    double t = 0;
    for (int j = 0; j < options_.onlineJobs; ++j) {
      arrivals.push_back(t);
      t += gap(rng);
    }
    json out;
    out["setup"] = {{"sites", kSites},
                    {"containers_per_site", kContainersPerWorker},
                    {"jobs", options_.onlineJobs},
                    {"mean_interarrival_s", options_.interarrivalS},
                    {"seed", options_.seed},
                    {"job", "slow(exec " + std::to_string(kBaseTaskS) + " s over " +
                                std::to_string(kFig8PartitionsPerSite * kSites) +
                                " partitions) -> cpu(synthetic " + std::to_string(kFig8CpuMs) + " ms x " +
                                std::to_string(kFig8CpuTasks) + ") -> wordcount.map(4) -> wordcount.reduce(2)"},
                    {"static", "containers_per_site: N, stealing: false"}};
    json policies = json::object();
    std::map<std::string, std::pair<double, double>> summary;  // policy -> (mean response, makespan)
    // Af + Parades against static allocations of half a site and of a whole site per job.
    const std::vector<std::pair<std::string, int>> variants{
        {"af_parades", 0}, {"static_2", 2}, {"static_4", kContainersPerWorker}};
    for (const auto& [policy, containers] : variants) {
      auto run = onlineRun(policy, containers, arrivals);
      if (!run) return run.error();
      summary[policy] = {(*run)["mean_response_s"].get<double>(), (*run)["makespan_s"].get<double>()};
      policies[policy] = *run;
    }
    out["policies"] = policies;
    auto [afMean, afSpan] = summary["af_parades"];
    json reductions = json::object();
    for (const auto& [policy, containers] : variants) {
      if (containers == 0) continue;
      auto [stMean, stSpan] = summary[policy];
      reductions["vs_" + policy] = {
          {"mean_response_reduction_pct", stMean > 0 ? 100.0 * (stMean - afMean) / stMean : 0.0},
          {"makespan_reduction_pct", stSpan > 0 ? 100.0 * (stSpan - afSpan) / stSpan : 0.0}};
    }
    out["af_parades_reduction"] = reductions;
    out["houtu"] = {{"mean_response_reduction_pct", 29}, {"makespan_reduction_pct", 31}};
    return out;
  }

 private:
  static constexpr uint32_t kFig9PartitionsPerSite = 32;
  static constexpr int kFig9SecondTasks = 64;
  static constexpr int kFig9Containers = 2;
  static constexpr double kBaseTaskS = 0.4;
  static constexpr double kLoadedTaskS = 1.2;
  static constexpr uint32_t kFig8PartitionsPerSite = 6;
  static constexpr int kFig8CpuTasks = 8;
  static constexpr int kFig8CpuMs = 150;

  Status setLoad(const std::string& site, std::optional<double> taskS) {
    auto file = cluster_.dir() / site / "load";
    if (!taskS) {
      std::error_code ec;
      std::filesystem::remove(file, ec);
      return {};
    }
    return writeText(file, std::to_string(*taskS) + "\n");
  }

  Result<json> stealRun(bool stealing) {
    const auto& sites = cluster_.sites();
    for (const auto& s : sites) TELLUS_RETURN_IF_ERROR(setLoad(s, std::nullopt));
    std::ostringstream spec;
    spec << "name: fig9-" << (stealing ? "steal" : "nosteal") << "\ncontainers_per_site: " << kFig9Containers
         << "\nstealing: " << (stealing ? "true" : "false") << "\nstages:\n"
         << "  - name: slow\n    op: exec\n    input: {dataset: fig9}\n    params:\n      cmd: |-\n        "
         << siteTimedCommand(kBaseTaskS) << "\n"
         << "  - name: slow2\n    op: exec\n    tasks: " << kFig9SecondTasks
         << "\n    input: {stage: slow}\n    params:\n      cmd: |-\n        " << siteTimedCommand(kBaseTaskS) << "\n"
         << "  - name: map\n    op: wordcount.map\n    tasks: 8\n    input: {stage: slow2}\n"
         << "  - name: reduce\n    op: wordcount.reduce\n    tasks: 4\n    input: {stage: map}\n";
    // Submitted to the site that stays unloaded.
    const std::string& calm = sites[0];
    auto jobId = submitJob(cluster_, spec.str(), calm, "fig9.yaml");
    if (!jobId) return jobId.error();
    progress("figure 9: " + *jobId + (stealing ? " with stealing" : " without stealing"));
    const size_t firstStage = kFig9PartitionsPerSite * kSites;
    bool injected = harness::eventually(
        [&] {
          auto done = finishedTasks(zk_, *jobId, 0);
          return done && *done * 2 >= firstStage;
        },
        kJobDeadline, 50ms);
    if (!injected) return makeError(ErrorCode::kDeadlineExceeded, *jobId + ": stage 1 never got half done");
    for (size_t i = 1; i < sites.size(); ++i) TELLUS_RETURN_IF_ERROR(setLoad(sites[i], kLoadedTaskS));
    auto st = waitForJobEnd(zk_, *jobId, kJobDeadline);
    for (const auto& s : sites) TELLUS_RETURN_IF_ERROR(setLoad(s, std::nullopt));
    if (!st) return st.error();
    if (st->state() != pb::JOB_SUCCEEDED) {
      return makeError(ErrorCode::kInternal, *jobId + " ended " + pb::JobState_Name(st->state()) + ": " + st->error());
    }
    auto steals = readSteals(cluster_, *jobId);
    json latencies = json::array();
    uint32_t stolenTasks = 0;
    std::map<std::string, uint32_t> stolenByPair;  // "thief<-victim"
    for (const auto& s : steals) {
      latencies.push_back(s.latencyMs);
      stolenTasks += s.tasks;
      stolenByPair[s.thiefSite + "<-" + s.victimSite] += s.tasks;
    }
    // Tasks that ran away from their data's site, from the execution audit.
    auto runs = readExecutions(zk_, *jobId);
    if (!runs) return runs.error();
    auto where = workerSites(cluster_);
    std::map<std::string, int> ranAt;
    for (const auto& r : *runs) ++ranAt[where[r.workerId]];
    json out;
    out["job_id"] = *jobId;
    out["stealing"] = stealing;
    out["job_s"] = static_cast<double>(jobRuntimeMs(*st)) / 1000.0;
    out["tasks_stolen"] = stolenTasks;
    out["tasks_stolen_by_thief_victim"] = stolenByPair;
    out["executions_by_site"] = ranAt;
    out["steal_latencies_ms"] = latencies;
    progress("  " + out.dump());
    return out;
  }

  // containers == 0: Af + Parades with stealing (the default); else static allocation.
  Result<json> onlineRun(const std::string& policy, int containers, const std::vector<double>& arrivals) {
    for (const auto& s : cluster_.sites()) TELLUS_RETURN_IF_ERROR(setLoad(s, std::nullopt));
    std::ostringstream spec;
    spec << "name: fig8-" << policy << "\n";
    if (containers > 0) spec << "containers_per_site: " << containers << "\nstealing: false\n";
    spec << "stages:\n"
         << "  - name: slow\n    op: exec\n    input: {dataset: fig8}\n    params:\n      cmd: |-\n        "
         << siteTimedCommand(kBaseTaskS) << "\n"
         << "  - name: cpu\n    op: synthetic\n    tasks: " << kFig8CpuTasks << "\n    input: {stage: slow}\n"
         << "    params: {cpu_ms: " << kFig8CpuMs << ", output_ratio: 1}\n"
         << "  - name: map\n    op: wordcount.map\n    tasks: 4\n    input: {stage: cpu}\n"
         << "  - name: reduce\n    op: wordcount.reduce\n    tasks: 2\n    input: {stage: map}\n";
    const auto& sites = cluster_.sites();
    std::vector<std::string> jobs;
    auto start = std::chrono::steady_clock::now();
    for (size_t j = 0; j < arrivals.size(); ++j) {
      // The workload generator: each job is submitted at its arrival time.
      std::this_thread::sleep_until(start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                std::chrono::duration<double>(arrivals[j])));
      auto jobId = submitJob(cluster_, spec.str(), sites[j % sites.size()], "fig8.yaml");
      if (!jobId) return jobId.error();
      jobs.push_back(*jobId);
    }
    progress("figure 8 (" + policy + "): submitted " + std::to_string(jobs.size()) + " jobs");
    std::vector<double> responses;
    int64_t firstSubmit = INT64_MAX, lastFinish = 0;
    uint32_t stolen = 0;
    for (const auto& id : jobs) {
      auto st = waitForJobEnd(zk_, id, kJobDeadline);
      if (!st) return st.error();
      if (st->state() != pb::JOB_SUCCEEDED) {
        return makeError(ErrorCode::kInternal, id + " ended " + pb::JobState_Name(st->state()) + ": " + st->error());
      }
      responses.push_back(static_cast<double>(jobRuntimeMs(*st)) / 1000.0);
      firstSubmit = std::min(firstSubmit, st->submit_unix_ms());
      lastFinish = std::max(lastFinish, st->finish_unix_ms());
      for (const auto& steal : readSteals(cluster_, id)) stolen += steal.tasks;
    }
    json out;
    out["mean_response_s"] = mean(responses);
    out["p95_response_s"] = percentile(responses, 0.95);
    out["makespan_s"] = static_cast<double>(lastFinish - firstSubmit) / 1000.0;
    out["response_s"] = responses;
    out["tasks_stolen"] = stolen;
    progress("  " + policy + ": " + out.dump());
    return out;
  }

  harness::MiniCluster& cluster_;
  ZkView& zk_;
  Options options_;
};

int run(const Options& options) {
  if (Status found = harness::useOwnBuildDir(); !found) {
    std::cerr << "bench-adaptive: " << found.message() << "\n";
    return 2;
  }
  // Logs (the ZooKeeper client's) go to stderr: stdout carries only the JSON.
  initLogging("bench-adaptive", "warn");
  harness::MiniClusterOptions clusterOptions;
  clusterOptions.sites = kSites;
  clusterOptions.workersPerSite = 1;
  clusterOptions.containersPerWorker = kContainersPerWorker;
  clusterOptions.execYaml = harness::kExecEnabledYaml;  // its jobs use exec
  // Every site's worker shapes what it sends to every other site.
  const char* names[] = {"us-east", "eu-west", "ap-south", "us-west"};
  for (const char* from : names) {
    std::string wan = "wan:\n";
    for (const char* to : names) {
      if (std::string(to) == from) continue;
      wan += "  - {to_site: " + std::string(to) + ", bandwidth_mbps: " + std::to_string(static_cast<int>(kWanMbps)) +
             ", latency_ms: " + std::to_string(kWanLatencyMs) + "}\n";
    }
    clusterOptions.workerExtraYaml[from] = wan;
  }
  progress("starting a local cluster: 4 sites x 1 worker x 4 containers, WAN 100 Mbps / 20 ms");
  auto cluster = harness::MiniCluster::start(clusterOptions);
  if (!cluster) {
    std::cerr << "bench-adaptive: " << cluster.message() << "\n";
    return 1;
  }
  if ((*cluster)->sites() != std::vector<std::string>(std::begin(names), std::end(names))) {
    std::cerr << "bench-adaptive: the cluster's sites are not the ones the WAN matrix names\n";
    return 1;
  }
  auto zk = (*cluster)->connectZkReader(30s);
  if (!zk) {
    std::cerr << "bench-adaptive: " << zk.message() << "\n";
    return 1;
  }
  Bench bench(**cluster, **zk, options);
  json out;
  auto started = std::chrono::steady_clock::now();
  if (options.only.empty() || options.only == "steal") {
    auto r = bench.steal();
    if (!r) {
      std::cerr << "bench-adaptive: figure 9: " << r.message() << "\n" << (*cluster)->crashedDaemons() << "\n";
      return 1;
    }
    out["figure9_stealing_under_load"] = *r;
  }
  if (options.only.empty() || options.only == "online") {
    auto r = bench.online();
    if (!r) {
      std::cerr << "bench-adaptive: figure 8: " << r.message() << "\n" << (*cluster)->crashedDaemons() << "\n";
      return 1;
    }
    out["figure8_online_af_vs_static"] = *r;
  }
  out["bench_wall_s"] =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::cout << out.dump(2) << std::endl;
  return 0;
}

}  // namespace
}  // namespace tellus::adaptive

int main(int argc, char** argv) {
  tellus::adaptive::Options options;
  CLI::App app{"bench-adaptive: HOUTU Figure 8/9-style experiments on a local cluster (JSON on stdout)"};
  app.add_option("--only", options.only, "run one experiment: steal (Figure 9) or online (Figure 8)")
      ->check(CLI::IsMember({"steal", "online"}));
  app.add_option("--seed", options.seed, "seed of the online workload's arrivals");
  app.add_option("--jobs", options.onlineJobs, "jobs in the online workload")->check(CLI::Range(1, 100));
  app.add_option("--interarrival-s", options.interarrivalS, "mean inter-arrival time of the online workload")
      ->check(CLI::PositiveNumber);
  app.add_option("--repetitions", options.repetitions, "runs of each Figure 9 variant")->check(CLI::Range(1, 10));
  CLI11_PARSE(app, argc, argv);
  return tellus::adaptive::run(options);
}
