// Awan (paper 004) on a real cluster: container leases estimated by the JMs and published by the
// masters, the two expiry policies (a lease overdue past its grace is extended, or taken back
// with its task killed and run again without counting against it), and the minimum locality
// level (a stage held back until its tasks here are local, while the job's other JMs take the
// rest). Every wait is on a real condition with a generous deadline.

#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "harness/eventually.h"
#include "harness/files.h"
#include "jobstate/paths.h"
#include "jobstate/site_queue.h"
#include "kit/adaptive_kit.h"

namespace tellus::adaptive {
namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;

constexpr milliseconds kJobDeadline = 150s;

template <typename R>
std::string whyNot(const R& r) {
  return r.isOk() ? std::string() : r.message();
}

std::string linesOf(const std::string& dataset, int count) {
  std::string lines;
  for (int i = 0; i < count; ++i) lines += dataset + " line " + std::to_string(i) + "\n";
  return lines;
}

std::vector<std::string> sortedLines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) out.push_back(line);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// One exec stage over `datasets`; a task that fails once fails the job (max_task_attempts: 1).
std::string execSpec(const std::string& name, const std::vector<std::string>& datasets, const std::string& cmd,
                     const std::string& extra = "") {
  std::ostringstream y;
  y << "name: " << name << "\nmax_task_attempts: 1\n" << extra << "stages:\n  - name: run\n    op: exec\n"
    << "    params: {cmd: \"" << cmd << "\"}\n    inputs:\n";
  for (const auto& d : datasets) y << "      - {dataset: " << d << "}\n";
  return y.str();
}

struct Cluster {
  std::unique_ptr<harness::MiniCluster> cluster;
  std::unique_ptr<ZkView> zk;
};

Cluster startCluster(int sites, int containers, const std::string& masterYaml, const std::string& jmYaml) {
  harness::MiniClusterOptions options;
  options.sites = sites;
  options.workersPerSite = 1;
  options.containersPerWorker = containers;
  options.execYaml = harness::kExecEnabledYaml;
  options.masterExtraYaml = masterYaml;
  for (const auto& site : harness::MiniCluster::siteNames(sites)) options.workerExtraYaml[site] = jmYaml;
  auto started = harness::MiniCluster::start(options);
  INFO(whyNot(started));
  REQUIRE(started.isOk());
  auto zk = (*started)->connectZkReader(30s);
  INFO(whyNot(zk));
  REQUIRE(zk.isOk());
  return {std::move(started).value(), std::move(zk).value()};
}

void requirePut(harness::MiniCluster& cluster, const std::string& site, const std::string& dataset,
                const std::string& text, uint32_t partitions) {
  Status put = putDataset(cluster, site, dataset, text, partitions);
  INFO(dataset << ": " << put.message());
  REQUIRE(put.isOk());
}

std::string requireSubmitted(harness::MiniCluster& cluster, const std::string& spec, const std::string& site,
                             const std::string& file) {
  auto job = submitJob(cluster, spec, site, file);
  INFO(whyNot(job));
  REQUIRE(job.isOk());
  return *job;
}

void requireSucceeded(harness::MiniCluster& cluster, ZkView& zk, const std::string& jobId) {
  auto st = waitForJobEnd(zk, jobId, kJobDeadline);
  INFO(whyNot(st) << jmLogTails(cluster, jobId) << cluster.crashedDaemons());
  REQUIRE(st.isOk());
  INFO("status: " << st->ShortDebugString() << jmLogTails(cluster, jobId));
  REQUIRE(st->state() == pb::JOB_SUCCEEDED);
}

void requireOutput(harness::MiniCluster& cluster, const std::string& jobId, const std::string& site,
                   const std::string& expected) {
  auto result = jobResult(cluster, jobId, site);
  INFO(whyNot(result));
  REQUIRE(result.isOk());
  CHECK(sortedLines(*result) == sortedLines(expected));
}

// The JM's lease estimate for a stage with no history is its lease_default_ms (1 s here); the
// master's own default for a container nobody stated a lease on is 10 minutes, so a lease that
// runs out within the test was stated by the JM.
const std::string kJmLeases = "jm:\n  lease_default_ms: 1000\n  lease_slack_ms: 200\n";
const std::string kMasterLeases = "lease_default_ms: 600000\nlease_max_ms: 600000\nlease_grace_ms: 500\n"
                                  "queue_publish_ms: 200\n";

}  // namespace

TEST_CASE("leases: a task past its lease and grace is killed and run again, not counted as a failure (lease_expiry: kill)",
          "[integration][lease]") {
  auto env = startCluster(1, 2, kMasterLeases + "lease_expiry: kill\n", kJmLeases);
  auto& cluster = *env.cluster;
  const std::string site = cluster.sites()[0];
  const std::string lines = linesOf("slow", 3);
  requirePut(cluster, site, "slow", lines, 1);

  // The first execution outlives its lease by far; the one after the take-back is quick.
  const auto mark = cluster.dir() / "first-run";
  const std::string cmd = "if [ -e " + mark.string() + " ]; then cat; else touch " + mark.string() + "; sleep 120; cat; fi";
  const auto job = requireSubmitted(cluster, execSpec("overrun", {"slow"}, cmd), site, "overrun.yaml");
  requireSucceeded(cluster, *env.zk, job);  // with max_task_attempts: 1, a counted kill would fail it
  requireOutput(cluster, job, site, lines);
  CHECK(std::filesystem::exists(mark));

  const std::string masterLog = harness::readFile(cluster.daemonLog("master-" + site));
  INFO(masterLog.substr(masterLog.size() > 4000 ? masterLog.size() - 4000 : 0));
  CHECK(masterLog.find("lease of " + job) != std::string::npos);
  CHECK(masterLog.find("container taken back") != std::string::npos);
  const std::string jmLogs = cluster.jmLogs(job);
  INFO(jmLogs);
  CHECK(jmLogs.find("master took back 1 container(s) whose lease ran out") != std::string::npos);
  CHECK(cluster.crashedDaemons().empty());
}

TEST_CASE("leases: the site's queue publishes who holds which container until when; an overdue lease is extended "
          "by default",
          "[integration][lease]") {
  auto env = startCluster(1, 2, kMasterLeases, kJmLeases);
  auto& cluster = *env.cluster;
  auto& zk = *env.zk;
  const std::string site = cluster.sites()[0];
  const std::string lines = linesOf("steady", 4);
  requirePut(cluster, site, "steady", lines, 1);

  // Runs until the test has seen its lease published: longer than its 1 s lease and 0.5 s grace.
  const auto gate = cluster.dir() / "gate";
  const std::string cmd = "while [ ! -e " + gate.string() + " ]; do sleep 0.05; done; cat";
  const auto job = requireSubmitted(cluster, execSpec("steady", {"steady"}, cmd), site, "steady.yaml");

  // The JM's lease (not the master's 10-minute default) on the container running its task.
  const auto workers = cluster.workers(site);
  std::string seen;
  bool published = harness::eventually(
      [&] {
        auto node = zk.get(jobstate::siteQueuePath(site));
        if (!node) return false;
        auto queue = jobstate::parseSiteQueue(node->data, site);
        if (!queue) {
          seen = queue.message();
          return false;
        }
        seen = queue->ShortDebugString();
        for (const auto& lease : queue->leases()) {
          if (lease.job_id() == job && lease.ends_in_ms() < 60'000 &&
              std::find(workers.begin(), workers.end(), lease.worker_id()) != workers.end()) {
            return true;
          }
        }
        return false;
      },
      60s, 50ms);
  INFO("queue: " << seen << jmLogTails(cluster, job));
  REQUIRE(published);
  // Past its lease and grace the master extends it (and says so once); the task goes on.
  const auto masterLogPath = cluster.daemonLog("master-" + site);
  bool extended = harness::eventually(
      [&] { return harness::readFile(masterLogPath).find("lease of " + job) != std::string::npos; }, 60s, 50ms);
  INFO(harness::readFile(masterLogPath));
  REQUIRE(extended);
  CHECK(harness::readFile(masterLogPath).find("overdue past its grace: extended") != std::string::npos);
  std::ofstream(gate) << "open\n";

  requireSucceeded(cluster, zk, job);
  requireOutput(cluster, job, site, lines);
  const std::string masterLog = harness::readFile(cluster.daemonLog("master-" + site));
  CHECK(masterLog.find("container taken back") == std::string::npos);
  CHECK(cluster.crashedDaemons().empty());
}

TEST_CASE("min_locality: a stage waits while its tasks here are not local; the job's other JM takes those, every "
          "task runs where its partition is",
          "[integration][lease][locality]") {
  // locality_wait far beyond the test: only the other JM's steals can admit the stage.
  auto env = startCluster(2, 4, "queue_publish_ms: 200\n", "jm:\n  locality_wait_ms: 600000\n");
  auto& cluster = *env.cluster;
  auto& zk = *env.zk;
  const auto& sites = cluster.sites();
  // Three partitions at the submit site, one at the other; `centralized` puts every task at one
  // of them, so that site's JM holds tasks whose partitions are elsewhere. A thief takes one
  // task per steal: without the level, the JM holding them starts some before they are stolen.
  const std::string first = linesOf("near", 6), second = linesOf("far", 2);
  requirePut(cluster, sites[0], "near", first, 3);
  requirePut(cluster, sites[1], "far", second, 1);
  const auto job = requireSubmitted(
      cluster, execSpec("local", {"near", "far"}, "cat", "placement: centralized\nmin_locality: 1\n"), sites[0], "local.yaml");
  requireSucceeded(cluster, zk, job);
  requireOutput(cluster, job, sites[0], first + second);

  auto inputs = readStageInputs(zk, job, 0);
  INFO(whyNot(inputs));
  REQUIRE(inputs.isOk());
  REQUIRE(inputs->partitions_size() == 4);
  auto runs = readExecutions(zk, job);
  INFO(whyNot(runs));
  REQUIRE(runs.isOk());
  const auto byTask = executionsByTask(*runs);
  auto where = workerSites(cluster);
  for (uint32_t t = 0; t < 4; ++t) {
    INFO("task " << t << jmLogTails(cluster, job));
    auto it = byTask.find({0, t});
    REQUIRE(it != byTask.end());
    REQUIRE(it->second.size() == 1);
    CHECK(where[it->second.front()] == inputs->partitions(static_cast<int>(t)).site());
  }
  CHECK(cluster.crashedDaemons().empty());
}

}  // namespace tellus::adaptive
