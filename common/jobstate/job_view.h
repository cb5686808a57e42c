#pragma once
// A job's state as read from ZooKeeper, and the pure decisions every JM (and the master's
// status page) derives from it: which stages can be released, what a task reads, what is done.
// No I/O here: the daemons fill a JobView from ZooKeeper and ask it questions.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tellus.pb.h"
#include "util/result.h"

namespace tellus::jobstate {

struct StageView {
  pb::StageInputs inputs;               // dataset stages: one raw partition per task
  std::optional<pb::TaskMap> taskmap;   // set once the stage is released
  int32_t taskmapVersion = -1;          // znode version, for compare-and-set
  std::map<uint32_t, pb::PartitionLocation> parts;  // finished tasks' outputs
};

struct JobView {
  std::string jobId;
  pb::JobSpec spec;
  std::vector<StageView> stages;  // same length as spec.stages once loaded
};

// succeeded / failed / killed: the job is over.
bool isTerminal(pb::JobState state);
// "running", "succeeded", ... as users see it.
std::string jobStateName(pb::JobState state);

// A stage that reads a dataset (rather than another stage).
bool isDatasetStage(const pb::JobSpec& spec, uint32_t s);
// Number of tasks of stage s (dataset stages: one per input partition).
uint32_t taskCount(const JobView& job, uint32_t s);
bool stageDone(const JobView& job, uint32_t s);
bool jobDone(const JobView& job);
// Stages not yet released whose every upstream stage is done.
std::vector<uint32_t> releasableStages(const JobView& job);
// The partitions task t of stage s reads. kNotFound if an upstream output is missing. A
// partition input's `bytes` is its bucket's size in the output's record: 0 means empty, and a
// worker reads such an input as empty without fetching it (Spark skips empty blocks alike).
Result<std::vector<pb::InputRef>> taskInputs(const JobView& job, uint32_t s, uint32_t t);
// An output whose every bucket is empty (a task that wrote nothing): no reader fetches it, so
// it needs no copy and no live worker, and is never lost. A record without buckets is not.
bool outputEmpty(const pb::PartitionLocation& loc);
// Bytes of input of stage s held at each site (dataset partitions, or upstream buckets it
// reads). The basis of HOUTU's proportional initial assignment.
std::map<std::string, double> inputBytesBySite(const JobView& job, uint32_t s);
// Tasks of released stage s owned by `site` that have no output yet.
std::vector<uint32_t> unfinishedTasks(const JobView& job, uint32_t s, const std::string& site);

}  // namespace tellus::jobstate
