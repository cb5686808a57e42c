// bench-job-state: how much ZooKeeper state a job leaves (issue 16, "compact, batched job
// state"). One site of a mini cluster of real processes over a real ZooKeeper runs a job of
// --tasks no-op tasks (`synthetic`, cpu_ms 0, output_bytes 0) on --workers x --containers
// containers; the job's subtree (/jobs/<id>) is walked while it runs, once it has finished,
// and, with --retention-ms, once its master compacted it. Znodes are counted, and bytes as
// the sum of each znode's name and data (what ZooKeeper keeps per node beyond its fixed
// overhead). Printed as one JSON document on stdout; progress on stderr. Not a test.
//
//   bench-job-state [--tasks 1000] [--workers 2] [--containers 4] [--retention-ms -1]
//                   [--status-samples 0] [--after-finish]
//
// --status-samples N (issue 10: `tellus status` of a 100,000-task job within 1 s): instead of
// running the job to its end, times N `tellus status JOB` calls (the summary) and N
// `tellus status JOB --tasks --task-limit 1000` calls (one page) while it runs, 5 s apart,
// then kills the job; `tellus sites` is timed alongside as the floor of any call. With
// --after-finish the job runs to its end instead and N more of each are timed once it has
// finished. Either way the stage's taskMap node is measured (bytes) once released, or the
// job's state and error are reported when no taskMap appears. Above the default task limits
// the master's limits are raised to --tasks.

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "harness/eventually.h"
#include "harness/mini_cluster.h"
#include "jobstate/job_store.h"
#include "jobstate/job_view.h"
#include "jobstate/paths.h"
#include "util/log.h"

namespace tellus {
namespace {

using Json = nlohmann::json;
using namespace std::chrono_literals;

struct Footprint {
  size_t znodes = 0;
  size_t bytes = 0;
  // The same, per kind of node: the path below the job with per-task and per-site names
  // collapsed ("stages/*/parts/b-*"), so the largest contributors are visible.
  std::map<std::string, std::pair<size_t, size_t>> byKind;
  Json toJson() const {
    Json kinds = Json::object();
    for (const auto& [kind, zb] : byKind) kinds[kind] = Json{{"znodes", zb.first}, {"bytes", zb.second}};
    return Json{{"znodes", znodes}, {"bytes", bytes}, {"by_kind", kinds}};
  }
};

// "stages/0/parts/b-0000000003" -> "stages/*/parts/b-*": children of the directories that
// hold one node per stage, task, execution, site or candidate share one kind.
std::string kindOf(const std::string& relative) {
  std::string kind, parent;
  size_t from = 0;
  while (from <= relative.size()) {
    size_t slash = relative.find('/', from);
    if (slash == std::string::npos) slash = relative.size();
    std::string part = relative.substr(from, slash - from);
    if (parent == "stages" || parent == "running" || parent == "attempts" || parent == "jms" ||
        parent == "election") {
      part = "*";
    } else if (parent == "parts") {
      part = part.starts_with(jobstate::kBatchPrefix) ? std::string(jobstate::kBatchPrefix) + "*" : "*";
    }
    kind += (kind.empty() ? "" : "/") + part;
    parent = relative.substr(from, slash - from);
    from = slash + 1;
  }
  return kind;
}

// The subtree under `path` (the root included). Nodes that vanish during the walk are skipped.
Footprint walk(harness::ZkReader& zk, const std::string& path, const std::string& relative = "") {
  Footprint f;
  auto node = zk.get(path);
  if (!node) return f;
  f.znodes = 1;
  f.bytes = path.size() - path.rfind('/') - 1 + node->data.size();
  auto& own = f.byKind[relative.empty() ? std::string(".") : kindOf(relative)];
  own.first += 1;
  own.second += f.bytes;
  auto children = zk.children(path);
  if (!children) return f;
  for (const auto& c : *children) {
    Footprint sub = walk(zk, path + "/" + c, relative.empty() ? c : relative + "/" + c);
    f.znodes += sub.znodes;
    f.bytes += sub.bytes;
    for (const auto& [kind, zb] : sub.byKind) {
      f.byKind[kind].first += zb.first;
      f.byKind[kind].second += zb.second;
    }
  }
  return f;
}

// Milliseconds of one `tellus ARGS` call and its exit code.
std::pair<double, int> timedCli(harness::MiniCluster& cluster, const std::vector<std::string>& args) {
  const auto start = std::chrono::steady_clock::now();
  auto r = cluster.tellus(args, "", 60s);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (r.exitCode != 0) std::cerr << "tellus " << args.front() << ": " << r.err << "\n";
  return {ms, r.exitCode};
}

struct Phase {
  std::vector<double> summaryMs, pageMs, sitesMs;
  int failures = 0;
};

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5)];
}

Json phaseJson(const Phase& phase, Json rows) {
  const auto stats = [](const std::vector<double>& v) {
    return Json{{"p50_ms", percentile(v, 0.5)}, {"max_ms", v.empty() ? 0 : *std::max_element(v.begin(), v.end())}};
  };
  return Json{{"samples", std::move(rows)},
              {"status", stats(phase.summaryMs)},
              {"status_tasks_page", stats(phase.pageMs)},
              {"sites", stats(phase.sitesMs)},
              {"failed_calls", phase.failures}};
}

// One sample: the summary, one page of tasks, and `tellus sites` (the floor: a call that reads
// no job state: CLI start, TLS handshake, one round trip).
Json sampleOnce(harness::MiniCluster& cluster, const std::string& jobId, Phase& phase,
                std::chrono::steady_clock::time_point start) {
  auto done = cluster.zkReader().run(cluster.zkReader().jobs().outputTasks(jobId, 0));
  auto [summaryMs, summaryExit] = timedCli(cluster, {"status", jobId});
  auto [pageMs, pageExit] = timedCli(cluster, {"status", jobId, "--tasks", "--task-limit", "1000"});
  auto [sitesMs, sitesExit] = timedCli(cluster, {"sites"});
  phase.summaryMs.push_back(summaryMs);
  phase.pageMs.push_back(pageMs);
  phase.sitesMs.push_back(sitesMs);
  phase.failures += (summaryExit != 0) + (pageExit != 0) + (sitesExit != 0);
  Json row{{"elapsed_s", std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()},
           {"done_tasks", done ? done->size() : 0},
           {"status_ms", summaryMs},
           {"status_exit", summaryExit},
           {"status_tasks_page_ms", pageMs},
           {"status_tasks_page_exit", pageExit},
           {"sites_ms", sitesMs},
           {"sites_exit", sitesExit}};
  std::cerr << row.dump() << "\n";
  return row;
}

// The stage's taskMap node once the stage is released: its size in bytes; or, when none
// appears, what became of the job (the release failed).
Json measureTaskMap(harness::MiniCluster& cluster, const std::string& jobId) {
  auto& zk = cluster.zkReader();
  std::optional<size_t> bytes;
  pb::JobStatus status;
  harness::eventually(
      [&] {
        if (auto node = zk.get(jobstate::taskmapPath(jobId, 0))) {
          bytes = node->data.size();
          return true;
        }
        auto st = zk.run(zk.jobs().status(jobId));
        if (st) status = st->value;
        return st && jobstate::isTerminal(st->value.state());
      },
      120s, 100ms);
  if (bytes) return Json{{"taskmap_bytes", *bytes}, {"node_limit_bytes", jobstate::kMaxNodeBytes}};
  return Json{{"taskmap_bytes", nullptr},
              {"node_limit_bytes", jobstate::kMaxNodeBytes},
              {"job_state", jobstate::jobStateName(status.state())},
              {"job_error", status.error()}};
}

// The site's master restarted (a new process: nothing of the job kept in memory), then the
// first `tellus status` once it answers, and as many samples after it as while the job ran.
Json afterMasterRestart(harness::MiniCluster& cluster, const std::string& jobId, int samples,
                        std::chrono::steady_clock::time_point start) {
  const std::string site = cluster.sites().front();
  Json out;
  Status restarted = cluster.killMaster(site);
  if (restarted.isOk()) restarted = cluster.restartMaster(site);
  if (!restarted.isOk()) {
    out["error"] = restarted.message();
    return out;
  }
  // Ready: it answers a call that reads no job (its RPC server is up).
  const bool up = harness::eventually([&] { return cluster.tellus({"sites"}, "", 10s).exitCode == 0; }, 60s, 100ms);
  out["master_up"] = up;
  auto [firstMs, firstExit] = timedCli(cluster, {"status", jobId});
  out["first_status_ms"] = firstMs;
  out["first_status_exit"] = firstExit;
  std::cerr << out.dump() << "\n";
  Phase after;
  Json rows = Json::array();
  for (int i = 0; i < samples; ++i) rows.push_back(sampleOnce(cluster, jobId, after, start));
  out["then"] = phaseJson(after, std::move(rows));
  return out;
}

int sampleStatus(harness::MiniCluster& cluster, const std::string& jobId, uint32_t tasks, int samples, bool afterFinish,
                 bool masterRestart) {
  auto& zk = cluster.zkReader();
  const auto start = std::chrono::steady_clock::now();
  Json out{{"tasks", tasks}, {"taskmap", measureTaskMap(cluster, jobId)}};
  std::cerr << out["taskmap"].dump() << "\n";
  if (out["taskmap"]["taskmap_bytes"].is_null()) {
    std::cout << out.dump(2) << std::endl;
    return 1;
  }
  Phase running;
  Json runningRows = Json::array();
  for (int i = 0; i < samples; ++i) {
    // The pace of the samples, not a race fix: the job advances in between.
    std::this_thread::sleep_for(5s);
    runningRows.push_back(sampleOnce(cluster, jobId, running, start));
  }
  out["running"] = phaseJson(running, std::move(runningRows));
  if (afterFinish) {
    pb::JobState state = pb::JOB_RUNNING;
    const bool ended = harness::eventually(
        [&] {
          auto status = zk.run(zk.jobs().status(jobId));
          if (status) state = status->value.state();
          return status && jobstate::isTerminal(state);
        },
        1800s, 500ms);
    out["job_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    // From the taskMap's release (the sampling's start) to the terminal status, within 0.5 s.
    out["tasks_per_s"] = tasks / out["job_s"].get<double>();
    out["final_state"] = jobstate::jobStateName(state);
    if (!ended || state != pb::JOB_SUCCEEDED) {
      std::cerr << "the job did not succeed (" << jobstate::jobStateName(state) << ")\n";
      std::cout << out.dump(2) << std::endl;
      return 1;
    }
    Phase finished;
    Json finishedRows = Json::array();
    for (int i = 0; i < samples; ++i) finishedRows.push_back(sampleOnce(cluster, jobId, finished, start));
    out["finished"] = phaseJson(finished, std::move(finishedRows));
    if (masterRestart) out["after_master_restart"] = afterMasterRestart(cluster, jobId, samples, start);
  } else {
    out["kill_exit"] = cluster.tellus({"kill", jobId}).exitCode;
  }
  out["goal"] = Json{{"status_ms", 1000}};
  std::cout << out.dump(2) << std::endl;
  return 0;
}

int run(int argc, char** argv) {
  uint32_t tasks = 1000;
  int workers = 2;
  int containers = 4;
  int64_t retentionMs = -1;
  int statusSamples = 0;
  bool afterFinish = false;
  bool masterRestart = false;
  CLI::App app{"ZooKeeper state of a job of no-op tasks while it runs, finished, compacted (JSON)"};
  app.add_option("--tasks", tasks, "tasks of the job")->check(CLI::Range(1u, 1000000u));
  app.add_option("--workers", workers, "workers of the site")->check(CLI::Range(1, 16));
  app.add_option("--containers", containers, "containers per worker")->check(CLI::Range(1, 64));
  app.add_option("--retention-ms", retentionMs,
                 "the masters' job_state_retention_ms; measure the compacted job too (-1: leave the default, do not wait)");
  app.add_option("--status-samples", statusSamples, "time this many `tellus status` calls while the job runs, then kill it")
      ->check(CLI::Range(0, 100));
  app.add_flag("--after-finish", afterFinish, "with --status-samples: run the job to its end and time as many calls then");
  app.add_flag("--master-restart", masterRestart,
               "with --after-finish: then restart the site's master and time its first status calls");
  CLI11_PARSE(app, argc, argv);
  initLogging("bench-job-state", "warn");

  harness::MiniClusterOptions options;
  options.sites = 1;
  options.workersPerSite = workers;
  options.containersPerWorker = containers;
  if (retentionMs >= 0) options.masterExtraYaml = fmt::format("job_state_retention_ms: {}\n", retentionMs);
  if (tasks > 10000) {
    options.masterExtraYaml += fmt::format("limits:\n  max_tasks_per_stage: {}\n  max_tasks_per_job: {}\n", tasks, tasks);
  }
  std::cerr << "starting a cluster of 1 site x " << workers << " workers x " << containers << " containers\n";
  auto started = harness::MiniCluster::start(options);
  if (!started) {
    std::cerr << "cluster: " << started.message() << "\n";
    return 1;
  }
  auto& cluster = **started;
  auto& zk = cluster.zkReader();
  const auto specPath = cluster.dir() / "noop.yaml";
  {
    std::ofstream spec(specPath);
    spec << "name: noop\nplacement: centralized\ncontainers_per_site: " << workers * containers
         << "\nstages:\n  - name: noop\n    op: synthetic\n    tasks: " << tasks
         << "\n    params: {cpu_ms: 0, output_bytes: 0}\n";
  }
  auto submitted = cluster.tellus({"submit", specPath.string()});
  if (submitted.exitCode != 0) {
    std::cerr << "submit: " << submitted.out << submitted.err << "\n";
    return 1;
  }
  std::string jobId = submitted.out.substr(0, submitted.out.find_first_of(" \n"));
  std::cerr << "job " << jobId << "\n";
  const auto start = std::chrono::steady_clock::now();

  if (statusSamples > 0) return sampleStatus(cluster, jobId, tasks, statusSamples, afterFinish, masterRestart);

  // While it runs: the largest footprint seen (the last walks before the end carry ~all tasks).
  Footprint running;
  uint32_t doneAtRunning = 0;
  pb::JobState state = pb::JOB_RUNNING;
  bool ended = harness::eventually(
      [&] {
        auto status = zk.run(zk.jobs().status(jobId));
        if (status) state = status->value.state();
        if (status && jobstate::isTerminal(state)) return true;
        Footprint f = walk(zk, jobstate::jobPath(jobId));
        auto done = zk.run(zk.jobs().outputTasks(jobId, 0));
        if (f.bytes > running.bytes) {
          running = f;
          doneAtRunning = done ? static_cast<uint32_t>(done->size()) : 0;
        }
        return false;
      },
      600s, 50ms);
  const double jobS = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!ended || state != pb::JOB_SUCCEEDED) {
    std::cerr << "the job did not succeed (" << jobstate::jobStateName(state) << ")\n";
    return 1;
  }
  Footprint finished = walk(zk, jobstate::jobPath(jobId));
  std::cerr << "finished in " << jobS << " s\n";

  Json out{{"tasks", tasks},
           {"workers", workers},
           {"containers_per_worker", containers},
           {"job_s", jobS},
           {"running", running.toJson()},
           {"running_done_tasks", doneAtRunning},
           {"finished", finished.toJson()}};
  const double per1000 = 1000.0 / tasks;
  out["running_bytes_per_1000_tasks"] = running.bytes * per1000;
  out["finished_bytes_per_1000_tasks"] = finished.bytes * per1000;
  if (retentionMs >= 0) {
    Footprint compacted = finished;
    bool done = harness::eventually(
        [&] {
          compacted = walk(zk, jobstate::jobPath(jobId));
          return compacted.bytes < finished.bytes && compacted.znodes <= 4;
        },
        std::chrono::milliseconds(retentionMs) + 60s, 100ms);
    out["compacted"] = compacted.toJson();
    out["compacted_in_time"] = done;
    out["compacted_bytes_per_1000_tasks"] = compacted.bytes * per1000;
    auto result = cluster.tellus({"result", jobId, "-o", (cluster.dir() / "result.out").string()});
    auto status = cluster.tellus({"status", jobId});
    out["result_after_compaction_exit"] = result.exitCode;
    out["status_after_compaction_exit"] = status.exitCode;
  }
  out["goal"] = Json{{"running_bytes_per_1000_tasks", 20 * 1000}, {"compacted_bytes_per_1000_tasks", 2 * 1000}};
  std::cout << out.dump(2) << std::endl;
  return 0;
}

}  // namespace
}  // namespace tellus

int main(int argc, char** argv) { return tellus::run(argc, argv); }
