#pragma once
// The compact encodings of a job's large nodes (pure, no I/O): an output batch
// (stages/<s>/parts/b-<seq>: the executions of one stage one JM recorded together), a
// compacted job's summary (/jobs/<id>/summary), and a stage's taskMap
// (stages/<s>/taskmap). Batch and summary are a protobuf message (OutputBatch, JobSummary in
// tellus.proto), the taskMap a site table and one byte per task; each is compressed with zlib
// behind a 4-byte magic. Workers are stored
// once per node and referred to by index; attempt ids as their sequence number; times as
// offsets. Decoding is bounded (the node by kMaxNodeBytes, the inflated message by
// kMaxInflatedBytes) and validated (magic, indices, column lengths, tasks), so a node that
// someone else wrote is an error value naming its path, never a crash or an unbounded
// allocation. jobstate::JobStore is the only user; docs/design.md has the layout.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cost/cost.h"
#include "tellus.pb.h"
#include "util/result.h"

namespace tellus::jobstate {

// One execution folded into a batch: its task, the output its worker reported (attempt_id
// names the execution: "<s>-<t>-<seq>"), and whether the batch records that output
// (auditOnly: another execution of the task was recorded first; the execution is kept for
// the audit).
struct BatchItem {
  uint32_t task = 0;
  pb::PartitionLocation location;
  bool auditOnly = false;
};

// What an execution used: its container time at its worker's site and the bytes it fetched
// from each other site (pair (from, its site)). Sites that are not site ids, and more than
// kMaxFetchedSites fetched entries, are ignored: the location may come from a node someone
// else wrote.
inline constexpr size_t kMaxFetchedSites = 256;
inline constexpr size_t kMaxSiteBytes = 64;
bool isUsageSite(std::string_view site);
void addUsage(cost::Usage& usage, const pb::PartitionLocation& execution);

// Copies of one output a node may name besides its own worker's (PartitionLocation::replicas;
// a job spec's output_replicas is at most job::kMaxOutputReplicas, which is not more).
inline constexpr size_t kMaxOutputCopies = 4;

// A batch holds at most this many executions (its transaction also deletes as many audit
// nodes: well under ZooKeeper's 1 MiB request limit), and its node at most kMaxBatchBytes.
inline constexpr size_t kMaxBatchTasks = 1000;
inline constexpr size_t kMaxBatchBytes = size_t{256} << 10;
// What a node may inflate to: far above any batch or summary we write (~20 B per task).
inline constexpr size_t kMaxInflatedBytes = size_t{16} << 20;

// The attempt id of an execution: "<s>-<t>-<seq>" with seq as ZooKeeper writes sequential
// names (10 digits).
std::string attemptIdOf(uint32_t stage, uint32_t task, uint64_t seq);
// Its sequence number, when `attemptId` is an execution of (stage, task); nullopt otherwise.
std::optional<uint64_t> attemptSeqOf(std::string_view attemptId, uint32_t stage, uint32_t task);

// kInvalidArgument when an item's attempt id is not an execution of its task, there are more
// than kMaxBatchTasks items, two items record the same task, or the node would exceed
// kMaxBatchBytes.
Result<std::string> encodeBatch(uint32_t stage, const std::vector<BatchItem>& items);
// kInternal naming `path` for anything that is not a batch encodeBatch wrote for `stage`.
Result<std::vector<BatchItem>> decodeBatch(uint32_t stage, const std::string& bytes, const std::string& path);

// The tasks of a stage that some batch records, as the stage's parts node holds them.
// Bounded: at most kMaxRecordedTasks tasks (a larger stage keeps no summary, and its writers
// read the batches instead).
inline constexpr uint32_t kMaxRecordedTasks = uint32_t{1} << 20;
class RecordedTaskSet {
 public:
  bool contains(uint32_t task) const { return task / 8 < bits_.size() && (bits_[task / 8] >> (task % 8) & 1) != 0; }
  // False (and nothing added) past kMaxRecordedTasks.
  bool insert(uint32_t task);
  const std::string& bitmap() const { return bits_; }

 private:
  friend Result<RecordedTaskSet> decodeRecordedTasks(uint32_t stage, const std::string& bytes, const std::string& path);
  std::string bits_;
};
Result<std::string> encodeRecordedTasks(uint32_t stage, const RecordedTaskSet& tasks);
// kInternal naming `path` for anything that is not encodeRecordedTasks' output for `stage`.
Result<RecordedTaskSet> decodeRecordedTasks(uint32_t stage, const std::string& bytes, const std::string& path);

// A stage's taskMap node (pb::StoredTaskMap): its owner sites once each (at most
// kMaxTaskMapSites site ids), one byte per task naming its owner's index, and the epoch; a 100,000-task map whose owners
// are every site in turn is ~100 kB before zlib, where the plain TaskMap message took ~1.1 MB
// with 9-character site names (over the node limit). config::kMaxTasksPerStage is the most
// tasks a node holds. kInvalidArgument for a map over config::kMaxTasksPerStage tasks or
// kMaxTaskMapSites sites, or naming something that is not a site id.
inline constexpr size_t kMaxTaskMapSites = 256;
Result<std::string> encodeTaskMap(const pb::TaskMap& map);
// kInternal naming `path` ("malformed TaskMap in ...") for anything encodeTaskMap did not
// write: bad magic or zlib stream, a body that does not parse, a table or count out of bounds,
// a site that is not a site id or appears twice, an owner index out of the table.
// The count is checked against the stage's tasks by whoever knows the stage (JobCore).
Result<pb::TaskMap> decodeTaskMap(const std::string& bytes, const std::string& path);

// A finished job, as its summary keeps it.
struct StageFinal {
  std::optional<pb::TaskMap> taskmap;                  // only its owners are kept
  std::map<uint32_t, pb::PartitionLocation> outputs;   // site, worker, buckets, attempt
  std::vector<std::pair<uint32_t, std::string>> executions;  // (task, worker) per execution
  cost::Usage usage;                                          // of every execution of the stage
};
struct JobFinal {
  std::vector<StageFinal> stages;
};
// kInvalidArgument when it would not fit a node (kMaxNodeBytes) or an output names a task
// beyond its stage's taskMap.
Result<std::string> encodeSummary(const JobFinal& job);
// kInternal naming `path` for anything encodeSummary did not write. Executions come back in
// task order.
Result<JobFinal> decodeSummary(const std::string& bytes, const std::string& path);

}  // namespace tellus::jobstate
