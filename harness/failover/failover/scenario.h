#pragma once
// The failover scenarios' common ground, shared by failover_integration_test and
// bench-failover: a mini cluster with a word corpus loaded at every site, a word count job
// slowed by an `exec` stage (so that a failure can be injected mid-job), snapshots of the
// job's state read straight from ZooKeeper, the invariants a failover must keep (one primary,
// fenced writes, no finished task run twice), and a result check against a count made here.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "harness/mini_cluster.h"
#include "harness/wordcount.h"
#include "tellus.pb.h"
#include "util/result.h"

namespace tellus::failover {

using TaskId = std::pair<uint32_t, uint32_t>;  // (stage, task)
using Clock = std::chrono::steady_clock;

// "3/7"
std::string taskName(const TaskId& id);

// ---- words ---------------------------------------------------------------------------------

// A deterministic text of `lines` lines for `seed`: words from a fixed vocabulary in mixed
// case, with digits and punctuation between them. No tabs (an exec stage passes lines through
// a shuffle keyed by the text before the first tab).
std::string makeCorpus(uint32_t seed, size_t lines);

// Results are checked with the harness's independent word counter.
using harness::countWords;
using harness::describeDifferences;
using harness::parseWordCounts;

// ---- job state -----------------------------------------------------------------------------

struct JobSnapshot {
  std::string jobId;
  Clock::time_point takenAt;
  pb::JobStatus status;
  uint64_t epoch = 0;          // value of /jobs/<id>/epoch
  int64_t epochMzxid = 0;      // zxid of its last change
  // The epoch again once everything else was read: a takeover may fall within the reading,
  // so what was read is bounded by this one, not by `epoch`.
  uint64_t epochAtEnd = 0;
  int64_t epochAtEndMzxid = 0;
  std::map<std::string, pb::JmInfo> jms;         // registered JMs by site
  std::vector<std::string> election;             // sites of the election nodes, lowest first
  std::map<uint32_t, pb::TaskMap> taskmaps;      // released stages
  std::map<uint32_t, int64_t> taskmapCzxid;      // zxid of each taskmap's creation
  std::map<uint32_t, uint32_t> stageTasks;       // task count of released stages
  std::map<TaskId, pb::PartitionLocation> parts; // finished tasks' outputs
  std::map<TaskId, pb::RunningTask> running;     // running markers
  std::map<TaskId, uint32_t> executions;         // executors started (children of attempts/)

  bool terminal() const;
  size_t done(uint32_t stage) const;
  // The JMs registered as primary.
  std::vector<pb::JmInfo> primaries() const;
  // The primary that holds the current epoch, if it has registered as such.
  std::optional<pb::JmInfo> currentPrimary() const;
  // Settled: one JM per job site, exactly one of them primary, holding the current epoch, at
  // the site of the lowest election node.
  bool settled() const;
  // "stage 0: 5/12 done, 3 running; jms: us-east primary e2 pid 123 on us-east-w1, ..."
  std::string describe() const;
};

// Reads the job's state (not atomically: each node as it is when read).
Result<JobSnapshot> snapshotJob(harness::ZkReader& zk, const std::string& jobId);

// Invariants checked on every snapshot a scenario takes, job by job (epochs are per job). A
// violation is recorded, never thrown, so the test can report all of them.
class InvariantWatch {
 public:
  void observe(const JobSnapshot& snapshot);
  const std::vector<std::string>& violations() const { return violations_; }

 private:
  void check(bool ok, const std::string& jobId, const std::string& what);
  // job -> epoch -> epoch node mzxid when first seen
  std::map<std::string, std::map<uint64_t, int64_t>> epochStart_;
  std::vector<std::string> violations_;
};

// Tasks that may legitimately run more than once after a failure: those running at the time
// of it (markers before or right after), and those whose output was on a killed worker.
std::set<TaskId> mayRerun(const JobSnapshot& before, const JobSnapshot& after,
                          const std::set<std::string>& killedWorkers);

// Tasks running on one of `workers` in any of `snapshots` (their markers go with the workers'
// sessions when those expire: they may run again).
std::set<TaskId> runningOn(const std::vector<const JobSnapshot*>& snapshots, const std::set<std::string>& workers);

// Checks the execution audit of a finished job: every task of every stage ran at least once,
// tasks in `allowed` at most twice, every other task exactly once. Returns the violations.
std::vector<std::string> checkExecutions(const JobSnapshot& end, const std::set<TaskId>& allowed);
// The same with a budget per task: task `id` may run 1 + extraRuns[id] times (a run of many
// failures may hit one task more than once); every task ran at least once.
std::vector<std::string> checkExecutions(const JobSnapshot& end, const std::map<TaskId, uint32_t>& extraRuns);

// ---- the scenario --------------------------------------------------------------------------

struct ScenarioOptions {
  harness::MiniClusterOptions cluster = defaultCluster();
  uint32_t partitionsPerSite = 8;
  size_t linesPerPartition = 60;
  // The first stage runs `sleep <taskSleepS>; cat` over each raw partition.
  double taskSleepS = 0.8;
  uint32_t mapTasks = 6;
  uint32_t reduceTasks = 3;
  // Sites whose part of the corpus is put with `residency: local`.
  std::set<std::string> residencyLocalSites;
  // With sideTasks > 0, a second stage (stage 1, "side") of that many tasks running
  // `sleep <sideSleepS>` reads nothing and writes nothing; the map stage reads it too. It is
  // released with the first stage, spread over every site, and never pinned: work any site
  // may run (the word count is unchanged).
  uint32_t sideTasks = 0;
  double sideSleepS = 2.0;
  // The job spec's output_replicas (copies of finished outputs); unset: the spec's default.
  std::optional<uint32_t> outputReplicas;

  static harness::MiniClusterOptions defaultCluster();
};

class Scenario {
 public:
  // Starts the cluster and loads a different corpus at every site as dataset "corpus".
  static Result<std::unique_ptr<Scenario>> start(const ScenarioOptions& options);

  harness::MiniCluster& cluster() { return *cluster_; }
  const ScenarioOptions& options() const { return options_; }
  const std::map<std::string, uint64_t>& expectedCounts() const { return expected_; }

  // Submits the job through `site`'s master; returns its id.
  Result<std::string> submit(const std::string& site);
  // Submits another job over the corpus: `spec` (YAML, its name is `name`) through `site`'s
  // master; returns its id.
  Result<std::string> submitYaml(const std::string& site, const std::string& name, const std::string& spec);
  Result<JobSnapshot> snapshot(const std::string& jobId);
  // The tasks the audit (read now) shows executed on one of `workers` more often than `after`
  // records their output there: executions those workers never finished, once killed. Their
  // markers may be gone before `after` is read (a JM clears a dead worker's markers as soon as
  // its process is found gone); the audit keeps every execution.
  Result<std::set<TaskId>> unfinishedOn(const std::string& jobId, const JobSnapshot& after,
                                        const std::set<std::string>& workers);

  // Snapshots every `poll` until `condition` holds (-> that snapshot), the job ends without
  // it (kInvalidArgument) or `deadline` passes (kDeadlineExceeded). Every snapshot goes to the
  // invariant watch.
  Result<JobSnapshot> waitFor(const std::string& jobId, const std::function<bool(const JobSnapshot&)>& condition,
                              std::chrono::milliseconds deadline,
                              std::chrono::milliseconds poll = std::chrono::milliseconds(20));
  // Waits for the job to end; the snapshot is the final state.
  Result<JobSnapshot> waitForEnd(const std::string& jobId, std::chrono::milliseconds deadline);

  // Reads the result through `site`'s master and compares it with the count made here.
  Status checkResult(const std::string& jobId, const std::string& site);

  InvariantWatch& invariants() { return invariants_; }

  // The cluster's crashed daemons and the job's JM logs, for failure messages.
  std::string diagnostics(const std::string& jobId);

 private:
  Scenario(ScenarioOptions options) : options_(std::move(options)) {}

  ScenarioOptions options_;
  std::unique_ptr<harness::MiniCluster> cluster_;
  std::map<std::string, uint64_t> expected_;
  InvariantWatch invariants_;
  uint32_t submitted_ = 0;
};

}  // namespace tellus::failover
