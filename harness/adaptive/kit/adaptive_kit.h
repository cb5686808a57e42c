#pragma once
// What the adaptive-execution tests (tests/integration/adaptive) and the benchmark
// (tools/bench/adaptive) share: a blocking view of a cluster's job state in ZooKeeper (taskMap
// owners, the execution audit under /jobs/<id>/attempts, JmInfo desire/grant), job submission
// and completion through the real `tellus` CLI, steal records parsed from the JMs' logs, and a
// deterministic corpus with an independent word counter to check results against.
//
// Everything here is built on the public API of harness::MiniCluster (harness/cluster).

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "harness/mini_cluster.h"
#include "harness/wordcount.h"
#include "harness/zk_reader.h"
#include "tellus.pb.h"
#include "util/result.h"

namespace tellus::adaptive {

// A blocking ZooKeeper session of the test or benchmark itself, used only to read the
// daemons' state (paths relative to the daemons' chroot): the harness's reader.
using ZkView = harness::ZkReader;

// One executor started for a task (a node /jobs/<id>/attempts/<s>-<t>-<seq>, whose data names
// the worker that started it).
struct Execution {
  uint32_t stage = 0;
  uint32_t task = 0;
  std::string workerId;
};

// Every execution of the job's tasks recorded so far. Errors name a malformed node.
Result<std::vector<Execution>> readExecutions(ZkView& zk, const std::string& jobId);
// Executions per (stage, task).
std::map<std::pair<uint32_t, uint32_t>, std::vector<std::string>> executionsByTask(const std::vector<Execution>& runs);

Result<pb::JobStatus> readJobStatus(ZkView& zk, const std::string& jobId);
// kNotFound while the stage is not released.
Result<pb::TaskMap> readTaskMap(ZkView& zk, const std::string& jobId, uint32_t stage);
// The raw partitions a dataset stage reads, one per task.
Result<pb::StageInputs> readStageInputs(ZkView& zk, const std::string& jobId, uint32_t stage);
// Tasks of the stage that have recorded an output.
Result<size_t> finishedTasks(ZkView& zk, const std::string& jobId, uint32_t stage);
// The JmInfo the JM of the job at `site` publishes (kNotFound when none is registered).
Result<pb::JmInfo> readJmInfo(ZkView& zk, const std::string& jobId, const std::string& site);

// Worker id -> site, for every worker of the cluster.
std::map<std::string, std::string> workerSites(const harness::MiniCluster& cluster);

// Loads `content` into `site` as `partitions` partitions of `dataset` with `tellus put`
// (optionally --residency-local). The file is written under the cluster's directory.
Status putDataset(harness::MiniCluster& cluster, const std::string& site, const std::string& dataset,
                  const std::string& content, uint32_t partitions, bool residencyLocal = false);

// Writes `specYaml` to <cluster dir>/<fileName> and submits it with `tellus submit` through
// the master of `site`; returns the job id. Errors carry the CLI's exit code and stderr.
Result<std::string> submitJob(harness::MiniCluster& cluster, const std::string& specYaml, const std::string& site,
                              const std::string& fileName);

// Polls the job's status in ZooKeeper until it is terminal and returns it; kDeadlineExceeded
// (with the last state seen) when `deadline` passes first.
Result<pb::JobStatus> waitForJobEnd(ZkView& zk, const std::string& jobId, std::chrono::milliseconds deadline);

// The output of the job's last stage, through `tellus result` at `site`.
Result<std::string> jobResult(harness::MiniCluster& cluster, const std::string& jobId, const std::string& site);

// One successful steal, as the thief's JM logged it: "stole N tasks from SITE in X ms".
struct StealRecord {
  std::string thiefSite;
  std::string victimSite;
  uint32_t tasks = 0;
  double latencyMs = 0;
};

// Parses `jmLog` (the log of the JM of one site). Lines that are not steal records are ignored.
std::vector<StealRecord> parseSteals(std::string_view jmLog, const std::string& thiefSite);
// Every steal logged by the job's JMs on every worker of the cluster
// (<cluster dir>/<site>/<worker>/jms/<job>/jm.log).
std::vector<StealRecord> readSteals(const harness::MiniCluster& cluster, const std::string& jobId);
// The tail (last `maxBytes`) of every JM log of the job, for failure messages.
std::string jmLogTails(const harness::MiniCluster& cluster, const std::string& jobId, size_t maxBytes = 2000);

// A deterministic text of `lines` lines for `seed`: lowercase words from a fixed vocabulary,
// drawn with a skew, separated by single spaces; every line ends with '\n' and is non-empty.
std::string generateText(uint32_t seed, size_t lines);

// Results are checked with the harness's independent word counter.
using harness::countWords;
using harness::describeDifferences;
using harness::parseWordCounts;

// Milliseconds from the job's submission to its end (its JobStatus timestamps).
int64_t jobRuntimeMs(const pb::JobStatus& status);

}  // namespace tellus::adaptive
