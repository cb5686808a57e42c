#pragma once
// Running one task: what a container's executor process calls once the task's inputs are on
// local disk (dataset partitions, fetched upstream buckets, or this worker's own partitions
// via PartitionStore::dataPath).

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "data/operator.h"
#include "data/partition_store.h"
#include "util/result.h"

namespace tellus::data {

inline constexpr std::uint32_t kMaxBucketCount = 100000;

struct TaskSpec {
  std::string operatorName;
  OperatorParams params;
  // Local input partition files, read in this order.
  std::vector<std::filesystem::path> inputs;
  // B: the downstream stage's task count for a shuffle, 1 for a forward edge or final stage.
  std::uint32_t bucketCount = 1;
  // Where the output goes: bucket b is stored under {jobId, stage, task, b}; the key's own
  // bucket field is ignored.
  PartitionKey output;
  // The site's policy for operators (exec is refused unless it enables it).
  OperatorEnv env;
};

struct TaskReport {
  // One per bucket, in bucket order, as committed to the store.
  std::vector<PartitionInfo> buckets;
  std::uint64_t inputBytes = 0;
  std::uint64_t outputBytes = 0;
  // Wall time of the whole task: opening inputs, the operator, committing the buckets.
  std::chrono::nanoseconds elapsed{0};

  double elapsedMs() const { return std::chrono::duration<double, std::milli>(elapsed).count(); }
};

// Runs the operator over the inputs and commits its B buckets to the store. On any error no
// bucket of this run is left half-written (uncommitted buckets are discarded; buckets already
// committed before a later one failed stay, and are identical on a re-run). Errors are
// prefixed with "task <jobId>/s<stage>-t<task>".
Result<TaskReport> runTask(const TaskSpec& spec, const PartitionStore& store);

}  // namespace tellus::data
