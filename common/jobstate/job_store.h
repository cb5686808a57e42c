#pragma once
// jobstate::JobStore: every read and write of a job's ZooKeeper state, typed, over a
// coord::Coordinator. It is the only code that knows the job layout (jobstate/paths.h) or
// parses node names; the daemons, the CLI's master and the tests speak JobSpec, JobStatus,
// TaskMap, PartitionLocation... and (stage, task) ids. Keeping the layout behind one owner
// is what lets it change (e.g. be compacted) without touching its users.
//
// Errors are values, never exceptions: a node that does not decode (or is larger than a
// ZooKeeper node may be) is kInternal naming its path; a child name that is not one of ours
// (put there by someone else) is skipped with a warning. Reads and watches do not retry (the
// callers' loops and watches do); the writes a worker makes without a loop above it
// (recordBatch, startAttempt, removeRunningMarker) ride out a connection loss themselves.
//
// Threading: as the coordinator's (one executor); the store holds no state of its own beyond
// the coordinator reference and its retry policy.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "coord/coordinator.h"
#include "jobstate/batch_codec.h"
#include "tellus.pb.h"
#include "util/result.h"

namespace tellus::jobstate {

// (stage, task).
using TaskId = std::pair<uint32_t, uint32_t>;

// A node's decoded value with its stat (stat.version is the compare-and-set token).
template <class T>
struct Versioned {
  T value;
  coord::NodeStat stat;
};

// What a JM needs before it can watch a job: the spec and the inputs of its dataset stages.
struct LoadedJob {
  pb::JobSpec spec;
  std::vector<pb::StageInputs> inputs;  // one per stage; empty for stages that read a stage
};

// One executor started for a task (the audit node), and the worker that started it.
struct Attempt {
  TaskId task;
  std::string workerId;
  std::string id;  // its audit node's name "<s>-<t>-<seq>" (empty once the job is compacted)
};

// An output record as read, with the key that confirms it (JobStore::finishRecords): the
// name of the batch that holds it. A record in any other node (the per-task nodes of the
// layout before batches, or a forged one) has a key no confirmation names.
struct RecordedOutput {
  pb::PartitionLocation location;
  std::string finishKey;
};

// What one record node (or all of a stage's) holds: the outputs it records, and every
// execution folded into it (the audit: its attempt node was deleted when it was recorded).
struct StageOutputs {
  std::map<uint32_t, RecordedOutput> outputs;
  std::vector<Attempt> executions;
  // What those executions used (container time per site, bytes fetched per site pair): the
  // job's usage, summed over its stages' records (`tellus cost`).
  cost::Usage usage;
  // Tasks with an output in more than one batch node (none: recordBatch's compare-and-set
  // records a task once; counted so that tests can tell).
  std::set<uint32_t> recordedTwice;
};

// What a writer of a stage's batches knows of its record nodes (JobStore::recordBatch): the
// nodes read so far, by name. Owned by the caller and kept between writes, so that each write
// reads only the nodes that are new since the last one.
struct StageRecords {
  std::map<std::string, StageOutputs> nodes;
};

// How the self-retrying writes ride out a connection loss: up to `retries` more tries, each
// after waiting (at most `reconnectWait`) for the session to come back.
struct RetryPolicy {
  int retries = 20;
  std::chrono::milliseconds reconnectWait{10000};
};

// A ZooKeeper node holds at most about 1 MiB (the server's default jute.maxbuffer): anything
// larger did not come from ZooKeeper as we configure it and is refused before decoding.
inline constexpr size_t kMaxNodeBytes = size_t{1} << 20;

// The one transaction that creates a job carries its spec, its status and every dataset
// stage's inputs; ZooKeeper refuses a request over kMaxNodeBytes and drops the connection. The
// request's bytes (node data plus paths, with room for framing), or a one-line
// kInvalidArgument naming the largest part when it would not fit: checked by createJob before
// it writes anything.
inline constexpr size_t kMaxCreateJobBytes = kMaxNodeBytes - (size_t{64} << 10);
Result<size_t> createJobBytes(const pb::JobSpec& spec, const pb::JobStatus& status,
                              const std::map<uint32_t, pb::StageInputs>& inputs);

class JobStore {
 public:
  template <class T>
  using Awaitable = boost::asio::awaitable<T>;
  // A watched node: an error when it does not decode, nullopt while it does not exist.
  template <class T>
  using ValueCallback = std::function<void(const Result<std::optional<Versioned<T>>>&)>;

  explicit JobStore(coord::Coordinator& zk, RetryPolicy retry = {}) : zk_(zk), retry_(retry) {}

  // ---- creating and listing jobs ----
  // The parent of all jobs exists (a master makes sure at start).
  Awaitable<Status> ensureJobsRoot();
  // Allocates a job id (job-NNNNNNNNNN) and writes the job's whole state in one transaction,
  // its status (whose job_id is set here) last: a job is visible to JMs only once complete.
  // A job too large for one transaction (createJobBytes) is refused before anything is written.
  // `inputs` are the dataset stages' inputs, by stage.
  Awaitable<Result<std::string>> createJob(pb::JobSpec spec, pb::JobStatus status,
                                           std::map<uint32_t, pb::StageInputs> inputs);
  // The ids of all jobs (names that are not job ids are skipped).
  Awaitable<Result<std::vector<std::string>>> listJobs();

  // ---- reads (kInvalidArgument for a bad job id, kNotFound for a missing node) ----
  Awaitable<Result<Versioned<pb::JobStatus>>> status(std::string jobId);
  // The status, or why its node does not decode: a corrupt job is still a job (listed with
  // the reason, stopped by id), not a failed read. Errors as status() otherwise.
  struct CheckedStatus {
    std::optional<pb::JobStatus> status;
    std::string corrupt;  // set when status is not
  };
  Awaitable<Result<CheckedStatus>> checkedStatus(std::string jobId);
  Awaitable<Result<pb::JobSpec>> spec(std::string jobId);
  Awaitable<Result<pb::StageInputs>> stageInputs(std::string jobId, uint32_t stage);
  // The spec and the inputs of every dataset stage.
  Awaitable<Result<LoadedJob>> load(std::string jobId);
  Awaitable<Result<Versioned<pb::TaskMap>>> taskMap(std::string jobId, uint32_t stage);
  // Every recorded output of the stage and the executions folded with them: one read per
  // record node (tens per stage), or of the summary once the job is compacted. A node that
  // does not decode is an error naming it. With `known` (kept by the caller between calls),
  // batch nodes already in it are not read again — a batch never changes under its name — and
  // those read are added, those no longer listed dropped: a caller asking again and again (the
  // master's status of a 100,000-task job) reads only the batches that are new.
  Awaitable<Result<StageOutputs>> outputs(std::string jobId, uint32_t stage, StageRecords* known = nullptr);
  // One record node of the stage (a name watchOutputNodes reported). A batch's outputs carry
  // batchKey(name) as their finish key; a node under a per-task name ("<t>": nothing writes
  // those any more; forged) decodes as one PartitionLocation that no confirmation names.
  Awaitable<Result<StageOutputs>> outputNode(std::string jobId, uint32_t stage, std::string name);
  // The names of the stage's record nodes now (what watchOutputNodes reports on a change).
  Awaitable<Result<std::set<std::string>>> outputNodeNames(std::string jobId, uint32_t stage);
  // Tasks of the stage with a recorded output (outputs()).
  Awaitable<Result<std::set<uint32_t>>> outputTasks(std::string jobId, uint32_t stage);
  // kNotFound when the task has no recorded output (outputs()).
  Awaitable<Result<pb::PartitionLocation>> output(std::string jobId, uint32_t stage, uint32_t task);
  // The confirmations of the stage's records: batchKey of each batch node (one listing).
  Awaitable<Result<std::set<std::string>>> finishRecords(std::string jobId, uint32_t stage);
  // The summary of a compacted job; nullopt while it is not compacted.
  Awaitable<Result<std::optional<JobFinal>>> summary(std::string jobId);
  // Tasks with a running marker.
  Awaitable<Result<std::vector<TaskId>>> runningTasks(std::string jobId);
  // kInternal for a persistent node: a worker's marker is ephemeral.
  Awaitable<Result<pb::RunningTask>> runningMarker(std::string jobId, TaskId task);
  // Executors started per task: the audit nodes not folded yet (their names alone) plus the
  // executions folded into every stage's batches (or the summary's).
  Awaitable<Result<std::map<TaskId, uint32_t>>> attemptCounts(std::string jobId);
  // The names of the audit nodes not folded yet ("<s>-<t>-<n>"; none once compacted). With
  // executions read from the batches afterwards, countAttempts gives what attemptCounts does
  // without reading the batches again (a caller that has read them: the master's status).
  Awaitable<Result<std::vector<std::string>>> unfoldedAttemptNames(std::string jobId);
  // Executors started per task: each folded execution, and each unfolded name that is not one
  // of them (folded between the listing and the read of the batches). Others are skipped.
  static std::map<TaskId, uint32_t> countAttempts(const std::vector<std::string>& unfoldedNames,
                                                  const std::vector<Attempt>& folded);
  // Every execution with the worker that started it (one read per unfolded attempt node, one
  // per batch).
  Awaitable<Result<std::vector<Attempt>>> attempts(std::string jobId);
  // The executions of one task in the order they started, each with its attempt id and the
  // worker that started it (one read of the audit, attempts()). kInvalidArgument when one of
  // them names no worker (its id would become a worker's file name); kNotFound once the job is
  // compacted (its executions are counted, no longer named).
  Awaitable<Result<std::vector<Attempt>>> taskAttempts(std::string jobId, TaskId task);
  // Sites with a registered JM.
  Awaitable<Result<std::vector<std::string>>> jmSites(std::string jobId);
  Awaitable<Result<Versioned<pb::JmInfo>>> jm(std::string jobId, std::string site);
  // The primary epoch (0 until a primary acted); its version is the fencing token.
  Awaitable<Result<Versioned<uint64_t>>> epoch(std::string jobId);
  // The election's candidates' data (their sites), leader first.
  Awaitable<Result<std::vector<std::string>>> electionCandidates(std::string jobId);
  // Where coord::LeaderElection runs the job's election.
  static std::string electionPath(const std::string& jobId);

  // ---- status transitions ----
  // Ends a job that is still running: a compare-and-set of its status to `state` (KILLED,
  // FAILED) with `reason` as its error. A malformed status is replaced, so a job whose state
  // is corrupt can still be ended and its JMs see it end. Errors: kInvalidArgument for a bad
  // id or a job that is already over ("job X has already succeeded"), kNotFound without the
  // job, kConflict when concurrent writers won every try, else the coordinator's error.
  Awaitable<Status> endJob(std::string jobId, pb::JobState state, std::string reason);
  // Writes `status` whatever is there (the submitting master, before any JM runs).
  Awaitable<Status> overwriteStatus(std::string jobId, pb::JobStatus status);

  // ---- the primary's fenced writes: each applies only while the epoch node still has
  // `epochVersion` (checked in the same transaction); kConflict means a newer primary. ----
  // Bumps the epoch from `expected` to expected + 1 if the status is still at `statusVersion`
  // and the epoch node still holds `expected` (set at the version read with it): what makes a
  // JM primary and fences the previous one. Of JMs taking over from the same epoch at once
  // exactly one wins; the others get kConflict. Returns the new epoch and its version.
  Awaitable<Result<Versioned<uint64_t>>> bumpEpoch(std::string jobId, int32_t statusVersion, uint64_t expected);
  // Releases a stage: creates its taskMap (kAlreadyExists if released already).
  Awaitable<Status> createTaskMapFenced(std::string jobId, uint32_t stage, pb::TaskMap map, int32_t epochVersion);
  // Removes a lost output so that the task runs again (kNotFound if it is gone already): its
  // batch is replaced by one where the task's execution is kept for the audit only (or a
  // per-task node is deleted), with the stage's record version bumped (see recordBatch).
  Awaitable<Status> removeOutputFenced(std::string jobId, TaskId task, int32_t epochVersion);
  // Removes a record node that does not decode (its tasks, unknown, run again).
  Awaitable<Status> removeOutputNodeFenced(std::string jobId, uint32_t stage, std::string name, int32_t epochVersion);
  Awaitable<Status> writeStatusFenced(std::string jobId, pb::JobStatus status, int32_t epochVersion);

  // ---- compare-and-set (a steal: unfenced; the primary's reassignment: fenced) ----
  // Reads the stage's taskMap, lets `edit` change it and writes it back if nobody wrote it
  // meanwhile; a lost race or a lost reply is tried again on the fresh map (so `edit` must
  // derive its change from the map it is given), up to `tries` times in all, then the last
  // error. `edit` returning an error stops without writing. Returns what was written.
  // With `epochVersion` the write also checks the epoch node in the same multi, like the
  // primary's other writes: kConflict means fenced by a newer primary (final); a map that kept
  // changing through every try is kUnavailable (try again later).
  Awaitable<Result<Versioned<pb::TaskMap>>> casTaskMap(std::string jobId, uint32_t stage,
                                                       std::function<Status(pb::TaskMap&)> edit, int tries,
                                                       std::optional<int32_t> epochVersion = std::nullopt);

  // ---- a worker's writes (retried through connection loss, see RetryPolicy) ----
  // Records finished executions of one stage as one batch node (stages/<s>/parts/b-<seq>), in
  // one transaction that also
  //   - sets the stage's record version (the data version of parts/) from the one read with
  //     the stage's records: a compare-and-set over the stage's outputs, so an execution of a
  //     task recorded meanwhile goes in as audit-only (the first copy wins, none twice);
  //   - deletes each execution's audit node (attempts/<s>-<t>-<seq>): an execution is folded
  //     once, and only one that was started (audited);
  //   - with `markerSession` (the session that wrote every one of the tasks' running markers,
  //     as it was when startAttempt returned; 0: none), deletes the markers in the same
  //     transaction while that session is still ours, so a JM never sees a task neither
  //     running nor recorded. Once it has expired they went with it, and whatever marker is at
  //     a path now is another execution's: none is touched.
  // At most kMaxBatchTasks items. A lost reply is recognised on the retry (the executions are
  // folded already). Returns the tasks whose output it recorded.
  // `known`: the caller's cache of the stage's record nodes (nullptr: read them all).
  Awaitable<Result<std::set<uint32_t>>> recordBatch(std::string jobId, uint32_t stage, std::vector<BatchItem> items,
                                                    int64_t markerSession, StageRecords* known = nullptr);
  // The running marker (ephemeral, ours) and the execution's audit node (naming `workerId`) in
  // one transaction; returns the audit node's name (the attempt id). kAlreadyExists when the
  // task is running under another executor. A persistent node in the marker's place (no
  // worker's) is removed first. A try whose reply was lost is found on the retry by its
  // audit node's token, even when the session that made it is gone: one call, one audit node.
  Awaitable<Result<std::string>> startAttempt(std::string jobId, TaskId task, pb::RunningTask marker,
                                              std::string workerId);
  // Several attempts of one job started as startAttempt starts each, in one transaction: a
  // worker's group commit (one multi for the tasks launched while its previous one was in
  // flight). When the transaction does not land whole (a task already running, a lost reply),
  // each attempt goes on alone from where it stands, so every result is what startAttempt
  // would have returned for it. At most kMaxStartsPerMulti starts (kInvalidArgument beyond).
  struct AttemptStart {
    TaskId task;
    pb::RunningTask marker;
  };
  static constexpr size_t kMaxStartsPerMulti = 100;
  Awaitable<Result<std::vector<Result<std::string>>>> startAttempts(std::string jobId, std::vector<AttemptStart> starts,
                                                                    std::string workerId);
  // Removes the task's marker written by `markerSession` (this client's session when
  // startAttempt returned). A missing marker is fine; once that session has expired nothing is
  // removed (the marker went with it; one there now is another execution's).
  Awaitable<Status> removeRunningMarker(std::string jobId, TaskId task, int64_t markerSession);
  // A JM's: removes the task's marker if it is still an execution on `worker` (as read: a
  // conditional delete of that version), whose process its JM found gone while its session
  // lingers; a marker of another execution, or none, is left (kConflict / kNotFound).
  Awaitable<Status> removeMarkerOf(std::string jobId, TaskId task, std::string worker);

  // ---- a JM's registration (ephemeral JmInfo per site) ----
  // The registration's stat, nullopt when the site has none.
  Awaitable<Result<std::optional<coord::NodeStat>>> jmRegistration(std::string jobId, std::string site);
  Awaitable<Status> createJmRegistration(std::string jobId, pb::JmInfo info);
  // A registration that says primary is written under the primary's fencing token (the epoch
  // node's version, -1: none): kConflict once the epoch has moved, so a primary fenced while it
  // was not running never advertises itself again. `expectedVersion` (-1: any) is the node's
  // version as this JM last wrote it: kConflict when somebody else wrote or replaced it since.
  // Returns the node's new version.
  Awaitable<Result<int32_t>> updateJmRegistration(std::string jobId, pb::JmInfo info, int32_t epochVersion = -1,
                                                  int32_t expectedVersion = -1);
  Awaitable<Status> removeJmRegistration(std::string jobId, std::string site);

  // ---- watches (persistent: current value at once, then every change; see Coordinator) ----
  Result<coord::Subscription> watchStatus(const std::string& jobId, ValueCallback<pb::JobStatus> callback);
  // nullopt until the stage is released.
  Result<coord::Subscription> watchTaskMap(const std::string& jobId, uint32_t stage, ValueCallback<pb::TaskMap> callback);
  // The epoch; a malformed value is reported as 0 (with a warning), like a job no primary acted on.
  Result<coord::Subscription> watchEpoch(const std::string& jobId,
                                         std::function<void(const std::optional<Versioned<uint64_t>>&)> callback);
  // The names of the stage's record nodes (outputNode), on every change (a batch replaced by
  // a lineage removal comes back under a new name), listed at most once per the window
  // `coalesce` gives at each change (coord::Coordinator::watchChildren): the batches of tasks
  // that end together come in one listing.
  Result<coord::Subscription> watchOutputNodes(const std::string& jobId, uint32_t stage,
                                               std::function<void(const std::set<std::string>&)> callback,
                                               coord::Coordinator::CoalesceFn coalesce = {});

  // ---- compaction (the master of the job's submit site) ----
  // A finished job's state folded into its summary (/jobs/<id>/summary, written with a check
  // that the status did not change) and everything but spec, status, summary and the dataset
  // stages' inputs (a result's residency check reads them) removed.
  // kInvalidArgument while the job runs. Idempotent: a compaction cut short is finished.
  Awaitable<Status> compactJob(std::string jobId);
  // Tasks with a running marker, on every change of the markers (listed at most once per
  // `coalesce`: coord::Coordinator::watchChildren).
  Result<coord::Subscription> watchRunningTasks(const std::string& jobId,
                                                std::function<void(const std::vector<TaskId>&)> callback,
                                                std::chrono::milliseconds coalesce = std::chrono::milliseconds(0));
  Result<coord::Subscription> watchJmSites(const std::string& jobId,
                                           std::function<void(const std::vector<std::string>&)> callback);

  // ---- node names (pure; exposed for tests) ----
  // The confirmation of a batch node's outputs (their finish key).
  static std::string batchKey(const std::string& nodeName) { return "batch " + nodeName; }
  // Running markers' "<s>-<t>" or attempts' "<s>-<t>-<n>" -> (stage, task); others skipped.
  static std::vector<TaskId> taskIds(const std::vector<std::string>& names, const std::string& where);

 private:
  // The executions folded into every stage's batches, or the summary's once compacted (their
  // ids empty then).
  Awaitable<Result<std::vector<Attempt>>> foldedAttempts(std::string jobId);
  // The node at `path` decoded as M (bounded in size).
  template <class M>
  Awaitable<Result<Versioned<M>>> read(std::string path);
  // ops after a check of the epoch's version, in one transaction; the results of `ops`.
  Awaitable<Result<std::vector<coord::ZkOpResult>>> fencedMulti(const std::string& jobId, int32_t epochVersion,
                                                                std::vector<coord::ZkOp> ops);
  // After a fenced write's kConflict: whether the epoch moved (the writer is fenced: final)
  // rather than another writer having won the data (worth another try).
  Awaitable<Result<bool>> epochMoved(const std::string& jobId, int32_t epochVersion);
  // Brings `known` up to the stage's record nodes as listed now (one listing, a read per new node).
  Awaitable<Status> refreshRecords(const std::string& jobId, uint32_t stage, StageRecords& known);
  // Waits for the session to come back before another try of a write (RetryPolicy).
  Awaitable<void> awaitReconnect();
  // The name of the task's audit node (names starting with `prefix`) holding `auditData`; ""
  // when there is none.
  Awaitable<Result<std::string>> findAuditNode(std::string jobId, std::string prefix, std::string auditData);
  // An attempt whose audit node landed holds its marker under this session: a marker with our
  // data left by an earlier session is replaced, a missing one created. kAlreadyExists (and
  // the audit node removed) when another executor's marker is there; kUnavailable when the
  // marker changed meanwhile (look again).
  Awaitable<Status> holdLandedMarker(std::string jobId, std::string markerPath, std::string data,
                                     std::string auditName);
  // startAttempt's work for one task once its ids are checked: `auditData` is the call's
  // token; `inDoubt` when a transaction holding its nodes may have landed unheard.
  Awaitable<Result<std::string>> startAttemptFrom(std::string jobId, TaskId task, std::string data,
                                                  std::string auditData, bool inDoubt);

  coord::Coordinator& zk_;
  RetryPolicy retry_;
};

// A node's bytes decoded as M; kInternal naming `path` when too large or malformed.
template <class M>
Result<M> decodeNode(const std::string& bytes, const std::string& path) {
  M message;
  if (bytes.size() > kMaxNodeBytes) {
    return makeError(ErrorCode::kInternal, path + " holds " + std::to_string(bytes.size()) + " bytes, more than any " +
                                               message.GetTypeName() + " may");
  }
  if (!message.ParseFromString(bytes)) {
    return makeError(ErrorCode::kInternal, "malformed " + message.GetTypeName() + " in " + path);
  }
  return message;
}

// The epoch node's text ("0", "1", ...); nullopt when it is not a decimal number.
std::optional<uint64_t> parseEpoch(std::string_view text);

}  // namespace tellus::jobstate
