// bench-failover: how fast Tellus recovers from a failure injected halfway through a job, on
// a mini cluster of real processes over a real ZooKeeper (the failover tests' scenario: a
// word count whose first stage runs `sleep S; cat` per raw partition). Printed as one JSON
// document on stdout. Not a test: it asserts nothing, it measures (and says whether the
// issue's goals were met).
//
//   bench-failover [--session-timeout-ms 2000] [--partitions-per-site 32] [--task-sleep-s 1]
//                  [--containers 2] [--repeats 1] [--timeline] [--block-heartbeats]
//                  [--scenarios none,pjm-vm,pjm-process,sjm-vm,worker] [--output-replicas 0|1]
//
// --block-heartbeats: the JMs send no heartbeats (every worker's `jm:` section says
// heartbeat_interval_ms: 0), as if every one were lost: a takeover then waits for the silent
// primary's ZooKeeper session to expire (issue 12: ≤ 3 s on that path).
//
// Scenarios (the failure lands when half of the first stage is done):
//   none         no failure: the baseline job time
//   pjm-vm       SIGKILL to the process group of the pJM's worker (the VM)
//   pjm-process  SIGKILL to the pJM process alone
//   sjm-vm       SIGKILL to the VM of the sJM of the second site
//   worker       SIGKILL to a worker of the second site that hosts no JM
// Per run: seconds from the kill to (a) a new JM registered (the new primary for pJM kills,
// the replacement at the failed site), (b) the first task completed after the kill (anywhere,
// and the first one launched after the kill at the failed site), and the job's total time;
// plus the executions beyond one per task and whether the output was exact.

#include <signal.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "failover/scenario.h"
#include "harness/eventually.h"
#include "util/log.h"

namespace tellus::failover {
namespace {

using std::chrono::milliseconds;
using Json = nlohmann::json;

constexpr milliseconds kJobDeadline{300000};
constexpr milliseconds kPoll{5};
const std::vector<std::string> kScenarios = {"none", "pjm-vm", "pjm-process", "sjm-vm", "worker"};

struct BenchOptions {
  uint32_t sessionTimeoutMs = 2000;
  uint32_t partitionsPerSite = 32;
  double taskSleepS = 1.0;
  uint32_t containersPerWorker = 2;
  int repeats = 1;
  bool timeline = false;
  bool blockHeartbeats = false;
  int outputReplicas = -1;  // the job spec's; -1: its default
  std::vector<std::string> scenarios = kScenarios;
};

int64_t unixMs() {
  return std::chrono::duration_cast<milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

double secondsSince(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

Json optionalSeconds(const std::optional<double>& s) { return s ? Json(*s) : Json(nullptr); }

// One job, with the failure of `scenario` injected halfway through its first stage.
Result<Json> runOnce(const BenchOptions& bench, const std::string& scenario) {
  ScenarioOptions options;
  options.cluster.sessionTimeoutMs = bench.sessionTimeoutMs;
  options.cluster.containersPerWorker = static_cast<int>(bench.containersPerWorker);
  options.partitionsPerSite = bench.partitionsPerSite;
  options.taskSleepS = bench.taskSleepS;
  options.linesPerPartition = 40;
  if (bench.outputReplicas >= 0) options.outputReplicas = static_cast<uint32_t>(bench.outputReplicas);
  if (bench.blockHeartbeats) {
    for (const auto& site : harness::MiniCluster::siteNames(options.cluster.sites)) {
      options.cluster.workerExtraYaml[site] += "jm:\n  heartbeat_interval_ms: 0\n";
    }
  }
  auto sc = Scenario::start(options);
  if (!sc) return sc.error();
  auto& cluster = (*sc)->cluster();
  auto& zk = cluster.zkReader();
  const std::string submitSite = cluster.sites()[0];
  const std::string otherSite = cluster.sites()[1];
  auto jobId = (*sc)->submit(submitSite);
  if (!jobId) return jobId.error();

  Json run{{"scenario", scenario}};
  std::string failedSite;
  pb::JmInfo failedJm;  // the JM that died, if one did
  uint64_t epochBefore = 0;
  std::optional<Clock::time_point> killedAt;
  int64_t killedUnixMs = 0;
  std::string victimWorker;

  // Halfway through the first stage, with every JM registered and one primary. The
  // failure-free run waits the same way: the polling loads this 2-core machine (each snapshot
  // reads every running marker), and the baseline must carry that load too.
  auto half = (*sc)->waitFor(*jobId, [](const JobSnapshot& s) {
    auto tasks = s.stageTasks.find(0);
    return tasks != s.stageTasks.end() && s.settled() && s.done(0) * 2 >= tasks->second;
  }, kJobDeadline, milliseconds(10));
  if (!half) return half.error().prepend("waiting for half of the first stage");
  if (scenario != "none") {
    epochBefore = half->epoch;
    if (scenario == "pjm-vm" || scenario == "pjm-process") {
      failedJm = *half->currentPrimary();
      failedSite = failedJm.site();
      victimWorker = failedJm.worker_id();
    } else if (scenario == "sjm-vm") {
      failedJm = half->jms.at(otherSite);
      failedSite = otherSite;
      victimWorker = failedJm.worker_id();
    } else {
      failedSite = otherSite;
      for (const auto& id : cluster.workers(otherSite)) {
        bool hostsJm = false;
        for (const auto& [site, jm] : half->jms) hostsJm = hostsJm || jm.worker_id() == id;
        if (!hostsJm) victimWorker = id;
      }
      if (victimWorker.empty()) return makeError(ErrorCode::kInternal, "every worker of " + otherSite + " hosts a JM");
    }
    Status killed = scenario == "pjm-process" ? cluster.signalJm(*jobId, failedSite, SIGKILL).status()
                                              : cluster.killWorker(victimWorker);
    killedAt = Clock::now();
    killedUnixMs = unixMs();
    if (!killed) return killed.error().prepend("injecting " + scenario);
    run["killed"] = scenario == "pjm-process" ? "JM pid " + std::to_string(failedJm.pid()) : victimWorker;
    run["failed_site"] = failedSite;
    run["stage0_done_at_kill"] = half->done(0);
    run["stage0_tasks"] = half->stageTasks.at(0);
  }

  // Follow the JMs closely (a few small reads per poll) until the job ends.
  std::optional<double> newPrimaryS, replacementS;
  std::string lastState;
  bool ended = harness::eventually(
      [&] {
        auto status = zk.run(zk.jobs().status(*jobId));
        if (!status) return false;
        if (killedAt) {
          auto jms = cluster.jms(*jobId);
          if (jms) {
            auto now = Clock::now();
            for (const auto& [site, jm] : *jms) {
              if (!newPrimaryS && jm.role() == pb::JM_PRIMARY && jm.epoch() > epochBefore) {
                newPrimaryS = secondsSince(*killedAt, now);
              }
              if (!replacementS && failedJm.pid() != 0 && site == failedSite && jm.pid() != failedJm.pid()) {
                replacementS = secondsSince(*killedAt, now);
              }
            }
          }
        }
        lastState = pb::JobState_Name(status->value.state());
        return status->value.state() != pb::JOB_RUNNING && status->value.state() != pb::JOB_PENDING;
      },
      kJobDeadline, kPoll);
  if (!ended) return makeError(ErrorCode::kDeadlineExceeded, "job still " + lastState + (*sc)->diagnostics(*jobId));

  auto end = (*sc)->snapshot(*jobId);
  if (!end) return end.error();
  run["state"] = pb::JobState_Name(end->status.state());
  run["job_s"] = static_cast<double>(end->status.finish_unix_ms() - end->status.submit_unix_ms()) / 1000.0;
  Status exact = (*sc)->checkResult(*jobId, end->status.state() == pb::JOB_SUCCEEDED ? cluster.sites()[2] : submitSite);
  run["output_exact"] = exact.isOk();
  if (!exact) run["output_error"] = exact.message();
  // Executions on the killed VM (the audit names each one's worker): running there, or
  // finished there and not recorded yet. Each may cost one more execution; any other re-run is
  // one the goal does not allow.
  std::map<TaskId, uint32_t> onVictim;
  std::map<TaskId, std::string> ranOn;  // each task's executions' workers, for the unexplained
  if (!victimWorker.empty() && scenario != "pjm-process") {
    auto attempts = zk.run(zk.jobs().attempts(*jobId));
    if (!attempts) return attempts.error().prepend("reading the execution audit");
    for (const auto& a : *attempts) {
      if (a.workerId == victimWorker) ++onVictim[a.task];
      ranOn[a.task] += (ranOn[a.task].empty() ? "" : ",") + a.workerId;
    }
  }
  Json unexplainedRuns = Json::array();
  uint32_t extraRuns = 0, unexplained = 0, victimRuns = 0;
  for (const auto& [id, n] : onVictim) victimRuns += n;
  Json rerun = Json::array();
  for (const auto& [id, n] : end->executions) {
    if (n <= 1) continue;
    extraRuns += n - 1;
    // The victim's executions but the one whose output is the record (read from its copy).
    auto v = onVictim.find(id);
    uint32_t lost = v == onVictim.end() ? 0u : v->second;
    if (auto part = end->parts.find(id); lost > 0 && part != end->parts.end() && part->second.worker_id() == victimWorker) {
      --lost;
    }
    unexplained += n - 1 - std::min(n - 1, lost);
    if (n - 1 > lost) unexplainedRuns.push_back(taskName(id) + " on " + ranOn[id]);
    rerun.push_back(taskName(id) + " x" + std::to_string(n));
  }
  run["extra_executions"] = extraRuns;
  run["tasks_run_more_than_once"] = rerun;
  if (scenario != "none" && scenario != "pjm-process") {
    run["executions_on_killed_vm"] = victimRuns;
    run["extra_executions_not_on_killed_vm"] = unexplained;
    run["reruns_not_on_killed_vm"] = unexplainedRuns;
  }
  if (extraRuns > 0 && std::getenv("BENCH_FAILOVER_DUMP_LOGS")) {
    // For investigating why: every JM's log of the job.
    std::cerr << cluster.jmLogs(*jobId, 1 << 22) << "\n";
  }

  if (bench.timeline) {
    // When each task finished, per stage and site where it ran (s since submission).
    Json timeline;
    for (const auto& [id, loc] : end->parts) {
      timeline["stage" + std::to_string(id.first)][loc.site()].push_back(
          static_cast<double>(loc.finish_unix_ms() - end->status.submit_unix_ms()) / 1000.0);
    }
    for (auto& [stage, sites] : timeline.items()) {
      for (auto& [site, times] : sites.items()) std::sort(times.begin(), times.end());
    }
    run["finish_times_s"] = timeline;
    if (killedAt) run["kill_s"] = static_cast<double>(killedUnixMs - end->status.submit_unix_ms()) / 1000.0;
  }
  if (killedAt) {
    // From the outputs' own timestamps: precise, independent of the polling above.
    std::optional<int64_t> firstAnywhere, firstAtSite;
    for (const auto& [id, loc] : end->parts) {
      int64_t finish = loc.finish_unix_ms();
      if (finish <= killedUnixMs) continue;
      if (!firstAnywhere || finish < *firstAnywhere) firstAnywhere = finish;
      auto start = finish - static_cast<int64_t>(loc.elapsed_s() * 1000.0);
      if (loc.site() == failedSite && start > killedUnixMs && (!firstAtSite || finish < *firstAtSite)) {
        firstAtSite = finish;
      }
    }
    auto fromKill = [&](const std::optional<int64_t>& t) {
      return t ? std::optional<double>(static_cast<double>(*t - killedUnixMs) / 1000.0) : std::nullopt;
    };
    run["new_primary_s"] = optionalSeconds(newPrimaryS);
    run["replacement_jm_s"] = optionalSeconds(replacementS);
    // (a): the JM that matters for the failure: the new primary for a pJM loss, the
    // replacement at the failed site for an sJM loss; none for a worker without a JM.
    std::optional<double> newJm = scenario.rfind("pjm", 0) == 0 ? newPrimaryS : replacementS;
    run["new_jm_registered_s"] = optionalSeconds(newJm);
    run["first_task_done_after_kill_s"] = optionalSeconds(fromKill(firstAnywhere));
    run["first_task_launched_after_kill_done_at_failed_site_s"] = optionalSeconds(fromKill(firstAtSite));
  }
  return run;
}

double mean(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return v.empty() ? 0.0 : sum / static_cast<double>(v.size());
}

// Mean of a numeric field over the runs that have it; null when none has.
Json meanOf(const Json& runs, const std::string& field) {
  std::vector<double> values;
  for (const auto& r : runs) {
    if (r.contains(field) && r[field].is_number()) values.push_back(r[field].get<double>());
  }
  return values.empty() ? Json(nullptr) : Json(mean(values));
}

Json maxOf(const Json& runs, const std::string& field) {
  std::optional<double> most;
  for (const auto& r : runs) {
    if (r.contains(field) && r[field].is_number()) most = std::max(most.value_or(r[field].get<double>()), r[field].get<double>());
  }
  return most ? Json(*most) : Json(nullptr);
}

// The q-quantile by nearest rank (p95 of 10 runs: the 10th smallest), over every run: null
// when a run has no value (it never got there, or failed), which no goal can meet.
Json percentileOf(const Json& runs, const std::string& field, double q) {
  std::vector<double> values;
  for (const auto& r : runs) {
    if (!r.contains(field) || !r[field].is_number()) return Json(nullptr);
    values.push_back(r[field].get<double>());
  }
  if (values.empty()) return Json(nullptr);
  std::sort(values.begin(), values.end());
  const auto rank = static_cast<size_t>(std::ceil(q * static_cast<double>(values.size())));
  return Json(values[std::max<size_t>(rank, 1) - 1]);
}

}  // namespace
}  // namespace tellus::failover

int main(int argc, char** argv) {
  using namespace tellus::failover;
  BenchOptions bench;
  std::string scenarios;
  CLI::App app{"bench-failover: recovery times of Tellus failover on a mini cluster (JSON on stdout)"};
  app.add_option("--session-timeout-ms", bench.sessionTimeoutMs, "ZooKeeper session timeout of the daemons")
      ->check(CLI::Range(400u, 60000u));
  app.add_option("--partitions-per-site", bench.partitionsPerSite, "raw partitions (first-stage tasks) per site")
      ->check(CLI::Range(2u, 1000u));
  app.add_option("--task-sleep-s", bench.taskSleepS, "seconds each first-stage task sleeps")->check(CLI::Range(0.0, 60.0));
  app.add_option("--containers", bench.containersPerWorker, "containers per worker")->check(CLI::Range(1u, 16u));
  app.add_option("--repeats", bench.repeats, "runs per scenario")->check(CLI::Range(1, 100));
  app.add_flag("--timeline", bench.timeline, "also print when each task finished, per stage and site");
  app.add_flag("--block-heartbeats", bench.blockHeartbeats,
               "no heartbeat window: takeovers wait for the silent primary's session to expire");
  app.add_option("--output-replicas", bench.outputReplicas,
                 "the job spec's output_replicas (copies of finished outputs; default: the spec's default, 1)")
      ->check(CLI::Range(0, 1));
  app.add_option("--scenarios", scenarios, "comma-separated subset of none,pjm-vm,pjm-process,sjm-vm,worker");
  CLI11_PARSE(app, argc, argv);
  // Logs (the test session's ZooKeeper client) go to stderr: stdout is the JSON document.
  tellus::initLogging("bench-failover", "warn");
  if (!scenarios.empty()) {
    bench.scenarios.clear();
    std::stringstream in(scenarios);
    for (std::string s; std::getline(in, s, ',');) {
      if (std::find(kScenarios.begin(), kScenarios.end(), s) == kScenarios.end()) {
        std::cerr << "bench-failover: --scenarios: unknown scenario '" << s
                  << "' (expected none, pjm-vm, pjm-process, sjm-vm or worker)\n";
        return 2;
      }
      bench.scenarios.push_back(s);
    }
  }
  // The mini cluster finds the daemons through TELLUS_BUILD_DIR; by default, next to us.
  if (tellus::Status found = tellus::harness::useOwnBuildDir(); !found) {
    std::cerr << "bench-failover: " << found.message() << "\n";
    return 2;
  }

  Json out;
  out["zookeeper_session_timeout_ms"] = bench.sessionTimeoutMs;
  out["heartbeats_blocked"] = bench.blockHeartbeats;
  auto cluster = ScenarioOptions::defaultCluster();
  out["cluster"] = {{"sites", cluster.sites},
                    {"workers_per_site", cluster.workersPerSite},
                    {"containers_per_worker", bench.containersPerWorker},
                    {"worker_timeout_ms", cluster.workerTimeoutMs},
                    {"heartbeat_ms", cluster.heartbeatMs}};
  out["job"] = {{"stages", "exec 'sleep S; cat' per raw partition -> wordcount.map (6) -> wordcount.reduce (3)"},
                {"partitions_per_site", bench.partitionsPerSite},
                {"task_sleep_s", bench.taskSleepS},
                {"output_replicas", bench.outputReplicas >= 0 ? Json(bench.outputReplicas) : Json("default")},
                {"failure_injected_when", "half of the first stage is done"}};
  // Round by round, every scenario once per round: the job's time drifts with the machine's
  // load by more than the recovery costs (±20% between identical runs), and a drift then
  // weighs on the failure-free runs as on the others.
  std::map<std::string, Json> runsOf;
  for (int r = 0; r < bench.repeats; ++r) {
    for (const auto& scenario : bench.scenarios) {
      std::cerr << "bench-failover: " << scenario << " run " << (r + 1) << "/" << bench.repeats << "\n";
      auto run = runOnce(bench, scenario);
      runsOf[scenario].push_back(run ? *run : Json{{"scenario", scenario}, {"error", run.message()}});
    }
  }
  for (const auto& scenario : bench.scenarios) {
    const Json& runs = runsOf[scenario];
    Json summary{{"runs", runs}, {"job_s_mean", meanOf(runs, "job_s")}};
    for (const char* field : {"new_jm_registered_s", "new_primary_s", "replacement_jm_s", "first_task_done_after_kill_s",
                              "first_task_launched_after_kill_done_at_failed_site_s"}) {
      if (scenario != "none") summary[std::string(field) + "_mean"] = meanOf(runs, field);
    }
    if (scenario != "none") {
      summary["new_jm_registered_s_max"] = maxOf(runs, "new_jm_registered_s");
      summary["new_primary_s_p95"] = percentileOf(runs, "new_primary_s", 0.95);
    }
    if (scenario != "none" && scenario != "pjm-process") {
      summary["extra_executions_not_on_killed_vm_max"] = maxOf(runs, "extra_executions_not_on_killed_vm");
    }
    out["scenarios"][scenario] = summary;
  }

  // Ratios to the failure-free job, and the goals.
  const Json& scen = out["scenarios"];
  if (scen.contains("none") && scen["none"]["job_s_mean"].is_number()) {
    double baseline = scen["none"]["job_s_mean"].get<double>();
    for (auto& [name, summary] : out["scenarios"].items()) {
      if (summary["job_s_mean"].is_number()) summary["job_time_ratio"] = summary["job_s_mean"].get<double>() / baseline;
    }
  }
  Json goals;
  if (scen.contains("pjm-vm")) {
    const Json& p = scen["pjm-vm"];
    Json acts = p["new_jm_registered_s_max"];
    goals["new_pjm_acts_within_3s_of_vm_kill"] = {{"measured_max_s", acts},
                                                  {"met", acts.is_number() && acts.get<double>() < 3.0}};
    // Issue 12: sub-second takeover through the JMs' heartbeats, p95 over the runs.
    Json p95 = p["new_primary_s_p95"];
    if (bench.blockHeartbeats) {
      // Issue 12: the session-expiry path, with every heartbeat lost.
      goals["new_pjm_acts_within_3s_p95_of_vm_kill_heartbeats_blocked"] = {
          {"measured_p95_s", p95}, {"runs", p["runs"].size()}, {"met", p95.is_number() && p95.get<double>() <= 3.0}};
    } else {
      goals["new_pjm_acts_within_1s_p95_of_vm_kill"] = {{"measured_p95_s", p95}, {"runs", p["runs"].size()},
                                                        {"met", p95.is_number() && p95.get<double>() <= 1.0}};
    }
    if (p.contains("job_time_ratio")) {
      double ratio = p["job_time_ratio"].get<double>();
      goals["pjm_vm_loss_halfway_under_1.1x"] = {{"measured_ratio", ratio}, {"met", ratio < 1.1}};
    }
  }
  if (scen.contains("pjm-process") && scen["pjm-process"].contains("job_time_ratio")) {
    double ratio = scen["pjm-process"]["job_time_ratio"].get<double>();
    goals["pjm_process_loss_halfway_under_1.1x"] = {{"measured_ratio", ratio}, {"met", ratio < 1.1}};
  }
  if (scen.contains("worker") && scen["worker"].contains("job_time_ratio")) {
    double ratio = scen["worker"]["job_time_ratio"].get<double>();
    goals["worker_vm_loss_halfway_under_1.1x"] = {{"measured_ratio", ratio}, {"met", ratio < 1.1}};
  }
  // Issue 12: extra executions only for tasks that were on the lost VM.
  for (const char* name : {"pjm-vm", "sjm-vm", "worker"}) {
    if (!scen.contains(name)) continue;
    const Json most = scen[name]["extra_executions_not_on_killed_vm_max"];
    goals[std::string("no_rerun_but_of_the_killed_vm_") + name] = {
        {"measured_max", most}, {"met", most.is_number() && most.get<double>() == 0}};
  }
  out["goals"] = goals;
  std::cout << out.dump(2) << "\n";
  return 0;
}
