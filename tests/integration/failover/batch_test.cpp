// Batched, compacted job state (issue 16), on a real ZooKeeper and real daemons: a worker
// holds finished tasks' outputs in a batch (a long linger) and its VM dies with the JM on it
// before the batch is written — the held tasks run again, no output is recorded twice, the
// audit counts every execution; then, after the masters' retention, the finished job is
// compacted to its summary and `tellus status` and `tellus result` still answer from it.

#include <fmt/format.h>

#include <catch2/catch.hpp>

#include "failover/scenario.h"
#include "checks.h"
#include "harness/eventually.h"
#include "jobstate/job_store.h"
#include "jobstate/job_view.h"
#include "jobstate/paths.h"

namespace tellus::failover {
namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;

constexpr milliseconds kJobDeadline = 120s;
constexpr uint32_t kRetentionMs = 6000;

int64_t nowUnixMs() {
  return std::chrono::duration_cast<milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Znodes under `path`, the root included (nodes that vanish during the walk are skipped).
size_t znodes(harness::ZkReader& zk, const std::string& path) {
  auto children = zk.children(path);
  if (!children) return 0;
  size_t n = 1;
  for (const auto& c : *children) n += znodes(zk, path + "/" + c);
  return n;
}

}  // namespace

TEST_CASE("a batch held by a worker whose VM dies with its JM: the tasks re-run, no output is recorded twice; "
          "after its retention the job is a summary that status and result still read",
          "[integration][failover][batch]") {
  ScenarioOptions options;
  // Six rounds of short tasks per site: a worker stays busy with the first stage (and holds
  // what it finished) for seconds.
  options.partitionsPerSite = 24;
  options.taskSleepS = 0.5;
  // Batches are written only when a worker has nothing else of the stage running (or holds
  // 1,000): a busy worker holds what it finished.
  for (const auto& site : {"us-east", "eu-west", "ap-south"}) options.cluster.workerExtraYaml[site] = "output_batch_linger_ms: 60000\n";
  options.cluster.masterExtraYaml = fmt::format("job_state_retention_ms: {}\n", kRetentionMs);
  auto started = Scenario::start(options);
  INFO("starting the scenario: " << whyNot(started));
  REQUIRE(started.isOk());
  auto& sc = **started;
  auto& cluster = sc.cluster();
  auto& zk = cluster.zkReader();
  REQUIRE(cluster.sites().size() == 3);
  const std::string pjmSite = cluster.sites()[0];
  const std::string victimSite = cluster.sites()[1];
  auto jobId = sc.submit(pjmSite);
  INFO(whyNot(jobId));
  REQUIRE(jobId.isOk());

  // The sJM's worker holds a batch: a task of the first stage it started well over a task's
  // time ago is still marked running (finished, its output not recorded yet).
  const int64_t heldAfterMs = static_cast<int64_t>(options.taskSleepS * 1000) + 1200;
  std::set<TaskId> held;
  auto before = sc.waitFor(*jobId, [&](const JobSnapshot& s) {
    auto jm = s.jms.find(victimSite);
    if (jm == s.jms.end() || !s.settled()) return false;
    held.clear();
    for (const auto& [id, m] : s.running) {
      if (id.first == 0 && m.container().worker_id() == jm->second.worker_id() &&
          nowUnixMs() - m.start_unix_ms() > heldAfterMs) {
        held.insert(id);
      }
    }
    return !held.empty();
  }, kJobDeadline);
  INFO("waiting for a held batch: " << whyNot(before) << (before ? std::string() : sc.diagnostics(*jobId)));
  REQUIRE(before.isOk());
  const pb::JmInfo sjm = before->jms.at(victimSite);
  const std::string killed = sjm.worker_id();
  for (const auto& id : held) CHECK_FALSE(before->parts.count(id));
  REQUIRE(cluster.killWorker(killed).isOk());
  auto after = sc.snapshot(*jobId);
  REQUIRE(after.isOk());

  auto end = sc.waitForEnd(*jobId, kJobDeadline);
  INFO("waiting for the end: " << whyNot(end) << (end ? std::string() : sc.diagnostics(*jobId)));
  REQUIRE(end.isOk());
  INFO("final state: " << end->describe() << "\nerror: " << end->status.error());
  REQUIRE(end->status.state() == pb::JOB_SUCCEEDED);
  Status result = sc.checkResult(*jobId, pjmSite);
  INFO("result: " << whyNot(result));
  CHECK(result.isOk());
  // The held tasks ran again (their first execution is in the audit, not recorded); nothing
  // else beyond what the lost VM allows.
  for (const auto& id : held) {
    INFO("held task " << taskName(id));
    CHECK(end->executions[id] == 2);
    REQUIRE(end->parts.count(id));
    CHECK(end->parts.at(id).worker_id() != killed);
  }
  auto mayRunTwice = mayRerun(*before, *after, {killed});
  allowUnfinished(sc, *jobId, {{killed}, &*after}, mayRunTwice);
  auto problems = checkExecutions(*end, mayRunTwice);
  INFO("execution audit:" << joined(problems));
  CHECK(problems.empty());
  // No output recorded twice, in any stage; every execution folded or still audited.
  std::map<TaskId, uint32_t> audited;
  cost::Usage usage;  // the job's usage, from the batches
  for (const auto& [s, tasks] : end->stageTasks) {
    auto outputs = zk.run(zk.jobs().outputs(*jobId, s));
    REQUIRE(outputs.isOk());
    CHECK(outputs->recordedTwice.empty());
    CHECK(outputs->outputs.size() == tasks);
    usage.add(outputs->usage);
  }
  // Every recorded execution of the first stage slept taskSleepS at its site.
  uint64_t containerMs = 0;
  for (const auto& [site, ms] : usage.containerMs) containerMs += ms;
  CHECK(containerMs >= end->stageTasks.at(0) * static_cast<uint64_t>(options.taskSleepS * 1000));
  auto costBefore = cluster.tellus({"cost", *jobId}, pjmSite, 20s);
  INFO("tellus cost: " << costBefore.exitCode << " " << costBefore.out << costBefore.err);
  CHECK(costBefore.exitCode == 0);
  auto executions = zk.run(zk.jobs().attemptCounts(*jobId));
  REQUIRE(executions.isOk());
  CHECK(*executions == end->executions);

  // Compaction: after the retention the job's state is its summary (and spec and status).
  const size_t live = znodes(zk, jobstate::jobPath(*jobId));
  // The master removes the stages one after the other once the summary is written: wait for
  // every stage's records to be gone, not only the first's.
  bool compacted = harness::eventually(
      [&] {
        auto summary = zk.run(zk.jobs().summary(*jobId));
        if (!summary || !*summary) return false;
        for (const auto& [s, tasks] : end->stageTasks) {
          if (*zk.exists(jobstate::partsPath(*jobId, s))) return false;
        }
        return true;
      },
      milliseconds(kRetentionMs) + 60s, 100ms);
  REQUIRE(compacted);
  // What remains is the job, spec, status, summary and the dataset stages' inputs.
  const size_t compactedZnodes = znodes(zk, jobstate::jobPath(*jobId));
  INFO("znodes before compaction: " << live << ", after: " << compactedZnodes);
  CHECK(compactedZnodes < live);
  for (const auto& [s, tasks] : end->stageTasks) CHECK_FALSE(*zk.exists(jobstate::partsPath(*jobId, s)));
  CHECK_FALSE(*zk.exists(jobstate::attemptsPath(*jobId)));
  CHECK_FALSE(*zk.exists(jobstate::runningPath(*jobId)));
  CHECK_FALSE(*zk.exists(jobstate::epochPath(*jobId)));
  auto status = zk.run(zk.jobs().status(*jobId));
  REQUIRE(status.isOk());
  CHECK(status->value.state() == pb::JOB_SUCCEEDED);
  // The audit and the outputs survive in the summary.
  auto compactedExecutions = zk.run(zk.jobs().attemptCounts(*jobId));
  REQUIRE(compactedExecutions.isOk());
  CHECK(*compactedExecutions == end->executions);
  for (const auto& [s, tasks] : end->stageTasks) {
    auto outputs = zk.run(zk.jobs().outputs(*jobId, s));
    REQUIRE(outputs.isOk());
    REQUIRE(outputs->outputs.size() == tasks);
    for (const auto& [t, record] : outputs->outputs) {
      CHECK(record.location.worker_id() == end->parts.at({s, t}).worker_id());
      CHECK(record.location.worker_address() == end->parts.at({s, t}).worker_address());
    }
  }
  // The usage too: `tellus cost` answers the same.
  cost::Usage compactedUsage;
  for (const auto& [s, tasks] : end->stageTasks) {
    auto outputs = zk.run(zk.jobs().outputs(*jobId, s));
    REQUIRE(outputs.isOk());
    compactedUsage.add(outputs->usage);
  }
  CHECK(compactedUsage == usage);
  auto costAfter = cluster.tellus({"cost", *jobId}, pjmSite, 20s);
  CHECK(costAfter.exitCode == 0);
  CHECK(costAfter.out == costBefore.out);
  // `tellus status` and `tellus result` (through another site's master too) still answer.
  auto shown = cluster.tellus({"status", *jobId, "--tasks"}, pjmSite, 20s);
  INFO("tellus status: " << shown.exitCode << " " << shown.out << shown.err);
  CHECK(shown.exitCode == 0);
  CHECK(shown.out.find("succeeded") != std::string::npos);
  Status again = sc.checkResult(*jobId, cluster.sites()[2]);
  INFO("result after compaction: " << whyNot(again));
  CHECK(again.isOk());
}

}  // namespace tellus::failover
