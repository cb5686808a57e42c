#pragma once
// tellus-worker: one per host ("VM"). Registers with its site's master, offers containers,
// runs tasks in long-lived executor processes (tellus-executor, one per container slot and job),
// records finished tasks' output
// locations in ZooKeeper, serves its partitions and dataset files to other sites (with
// optional WAN emulation), and launches the job managers its master asks for.

#include <array>
#include <chrono>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>

#include "config/config.h"
#include "coord/coordinator.h"
#include "coord/event_flag.h"
#include "daemon/daemon.h"
#include "daemon/pause_detector.h"
#include "daemon/server.h"
#include "data/partition_store.h"
#include "jobstate/job_store.h"
#include "monitor/container_monitor.h"
#include "net/methods.h"
#include "proc/subprocess.h"
#include "tellus.pb.h"
#include "transfer/chunked.h"
#include "worker/attempt_starter.h"
#include "worker/executor_process.h"
#include "worker/output_batcher.h"
#include "worker/wan_shaper.h"

namespace tellus::worker {

class Worker {
 public:
  Worker(daemon::Runtime& runtime, config::WorkerConfig config);
  ~Worker();

  // Binds the RPC server, opens the store, connects to ZooKeeper and starts the loops.
  Status start();
  // Stops serving and kills this worker's children (as a VM shutdown would).
  void stop();

 private:
  boost::asio::awaitable<void> masterLoop();
  boost::asio::awaitable<void> livenessLoop();
  // Ticks the pause detector; after a pause, holds task starts until the session is confirmed.
  boost::asio::awaitable<void> pauseLoop();
  // kUnavailable when a task that arrived at pause count `pausesAtArrival` must not start: this
  // worker may have been stopped since (or is not yet sure its session outlived a pause).
  Status checkNotPaused(uint64_t pausesAtArrival) const;
  // Deletes per-job log directories past log_retention_ms (worker/log_retention.h).
  boost::asio::awaitable<void> logRetentionLoop();
  // Once a second: CPU and memory of every running executor tree, per container, sent to the
  // container's JM without waiting for it (Af's utilization input).
  boost::asio::awaitable<void> usageLoop();
  boost::asio::awaitable<void> sendUsage(std::string jmAddress, pb::ContainerUsageReport report);
  // Reaps the JM of `jobId` (pid) once its pidfd says it ended, and queues its death for the
  // next heartbeat when it failed. Nothing to do when the JM was killed and reaped meanwhile.
  boost::asio::awaitable<void> watchJm(std::string jobId, pid_t pid, int pidFd);
  // Requests that act on this worker name it: one meant for another worker is refused.
  Status checkAddressee(std::string_view method, const std::string& workerId, const std::string& site) const;
  boost::asio::awaitable<Result<pb::LaunchJmResponse>> launchJm(pb::LaunchJmRequest req, net::CallContext ctx);
  boost::asio::awaitable<Result<pb::RunTaskResponse>> runTask(pb::RunTaskRequest req, net::CallContext ctx);
  // A task of (job, stage) runs here now, or an output of it is being copied: more of the
  // stage's outputs are coming to the batcher.
  bool stageRuns(const std::string& jobId, uint32_t stage) const;
  // After the executor's report (or its death): queue the output's record (batcher_).
  // `markerSession`: the session that wrote the task's running marker.
  boost::asio::awaitable<Result<pb::RunTaskResponse>> recordOutput(const pb::RunTaskRequest& req, std::string attemptId,
                                                                   int64_t markerSession,
                                                                   Result<pb::ExecutorReport> report,
                                                                   std::filesystem::path dir,
                                                                   std::chrono::steady_clock::duration executorWall,
                                                                   std::map<std::string, uint64_t> fetchedFrom);
  boost::asio::awaitable<Result<pb::FetchResponse>> fetch(pb::FetchRequest req, net::CallContext ctx);
  // Output copies (worker/replication.h). W side: asks the site's next live worker for a copy
  // of a finished output, then hands the output to the batcher, naming the copy if it is
  // complete. R side: pulls the buckets from the caller into the partition store.
  boost::asio::awaitable<void> replicateThenRecord(std::string jobId, uint32_t stage, jobstate::BatchItem item,
                                                   int64_t markerSession, bool stageTail, uint32_t buckets,
                                                   std::string replicaId, std::string replicaAddress);
  // `stageTail`: the RunTask said the stage's last wave (written without batching delay).
  void recordBatchItem(const std::string& jobId, uint32_t stage, jobstate::BatchItem item, int64_t markerSession,
                       bool stageTail);
  boost::asio::awaitable<Result<pb::ReplicateResponse>> replicate(pb::ReplicateRequest req, net::CallContext ctx);
  // Keeps siteWorkers_ current: the ids from a watch, each new one's address from its node.
  boost::asio::awaitable<void> siteWorkersLoop();
  Result<pb::WriteDatasetResponse> writeDataset(const pb::WriteDatasetRequest& req);
  // A bounded piece of an execution's stderr (logs/<job>/<attempt id>.stderr) or of the job's
  // JM log here (jms/<job>/jm.log); both names are built from validated parts only.
  Result<pb::LogsResponse> readLog(const pb::ReadLogRequest& req) const;
  // Kills the job's JM and every executor of it here, by job id; reports what it killed.
  Result<pb::KillJobTasksResponse> killJobTasks(const pb::KillJobTasksRequest& req);
  // The reason a JM of `jobId` left in its exit file (bounded), for the master.
  std::string jmExitReason(const std::string& jobId) const;
  // Brings one input partition to a local file (or points at it when it is already here);
  // bytes fetched from another site are added to fetchedFrom[that site] (the job's usage).
  // How partitions are fetched from other workers (a task's inputs, an output's copy).
  transfer::TransferOptions fetchOptions() const;
  boost::asio::awaitable<Result<std::string>> localInput(const pb::InputRef& ref, const std::filesystem::path& dir,
                                                         size_t index, std::map<std::string, uint64_t>& fetchedFrom);
  bool servable(const std::filesystem::path& file) const;
  // A raw partition of a residency: local dataset, which no other site may fetch.
  bool residentOnly(const std::filesystem::path& file) const;
  pb::RegisterWorkerRequest registration() const;

  config::WorkerConfig config_;
  std::filesystem::path binDir_;
  std::filesystem::path dataDir_;
  // RPC (its address is the one others reach us at), clients, ZooKeeper; declared before
  // everything that holds on to them.
  daemon::Server server_;
  std::optional<jobstate::JobStore> jobStore_;  // over the coordinator: running markers, attempts, outputs
  std::optional<AttemptStarter> starter_;       // over jobStore_: tasks' running markers and audit nodes
  std::optional<OutputBatcher> batcher_;        // over jobStore_: finished tasks' outputs
  std::unique_ptr<data::PartitionStore> store_;
  WanShaper wan_;
  std::vector<std::filesystem::path> datasetRoots_;  // dataset dirs our master says we hold
  std::set<std::filesystem::path> residentFiles_;   // of residency: local datasets (canonical)
  std::map<std::string, proc::Subprocess> jms_;        // job id -> JM process on this worker
  struct DeadJm {
    std::string jobId;
    std::string reason;  // "exit code 1: <what the JM said>"
  };
  std::vector<DeadJm> deadJms_;                        // reported with the next heartbeat
  // Jobs killed here (the last kMaxKilledJobs): nothing more is started for them.
  static constexpr size_t kMaxKilledJobs = 1024;
  std::set<std::string> killedJobs_;
  std::deque<std::string> killedOrder_;
  // A worker stopped past its session timeout (SIGSTOP, a frozen VM) had its tasks given up
  // by their JMs and run elsewhere; a RunTask that waited in its socket meanwhile must not run
  // on resume (bench-chaos worker-stop). After a detected pause (pauses_ counts them) task
  // starts are refused, kUnavailable, until a round trip on the session finds this worker's
  // liveness node its own: the session outlived the pause, or a new one re-registered it.
  std::optional<daemon::PauseDetector> pause_;
  uint64_t pauses_ = 0;
  bool startsHeld_ = false;
  struct BusySlot {
    std::string jobId;
    int tasks = 0;
  };
  std::map<uint32_t, BusySlot> busySlots_;  // container slot -> job and number of tasks running in it
  std::optional<monitor::ContainerMonitor> monitor_;
  struct TrackedTask {
    uint32_t slot;
    std::string jobId;
    std::string jmAddress;
  };
  std::map<std::string, TrackedTask> tracked_;  // monitor key -> what it runs for
  std::set<std::pair<std::string, std::string>> runningAttempts_;  // (job, attempt id) of running tasks
  // Long-lived executors by (job, container slot): one per task the container runs at once.
  std::map<std::pair<std::string, uint32_t>, std::vector<std::shared_ptr<ExecutorProcess>>> executorPool_;
  // An idle executor of the job in the slot, or a new one; reserved for the caller's task.
  Result<std::shared_ptr<ExecutorProcess>> acquireExecutor(const std::string& jobId, uint32_t slot);
  // Executors running here per (job, stage, task): a task's partial outputs are removed only
  // when none of its attempts is still writing.
  std::map<std::tuple<std::string, uint32_t, uint32_t>, int> taskRuns_;
  // Removes what a failed or killed executor of the task left: its uncommitted buckets in the
  // partition store and the inputs fetched into `dir` (its stderr is under logs/, for `tellus logs`).
  void removePartialOutputs(const pb::RunTaskRequest& req, const std::filesystem::path& dir);
  // Where the time of the tasks run here went, served on /metrics (seconds summed over tasks;
  // tools/bench/dispatch divides by the task count). Phases in TaskPhase order.
  enum TaskPhase : size_t {
    kPrepare,        // request checks, container directory, inputs made local
    kZkStart,        // running marker + attempt node (one multi)
    kExecutorStart,  // starting an executor process
    kExecutor,       // task to the executor and its report back, less the operator's own time
    kOperator,       // the operator, as the executor measured it
    kZkUnmark,       // running marker removed
    kSlotIdle,       // a container between a task's reply and its JM's next task (RPC + JM)
    kPhaseCount
  };
  std::array<double, kPhaseCount> phaseSeconds_{};
  std::array<uint64_t, kPhaseCount> phaseSamples_{};
  uint64_t tasksRun_ = 0;
  uint64_t tasksFailed_ = 0;
  void addPhase(TaskPhase phase, std::chrono::steady_clock::duration d);
  // When each container slot last went idle, and for which job (kSlotIdle).
  std::map<uint32_t, std::pair<std::string, std::chrono::steady_clock::time_point>> slotIdleSince_;
  void registerMetrics();
  std::vector<pb::ContainerUsage> lastUsage_;    // for heartbeats
  std::map<std::string, double> inboundMbps_;    // measured fetch rate by source site (EWMA)
  uint64_t nextRun_ = 0;
  // Bytes of partitions served to and fetched from other workers, by site pair (from, to).
  daemon::Counter* bytesSent_ = nullptr;
  daemon::Counter* bytesReceived_ = nullptr;
  // Live workers of this site (id -> RPC address), ourselves included: where a copy goes, and
  // who may ask us for one.
  std::map<std::string, std::string> siteWorkers_;
  std::optional<std::vector<std::string>> siteWorkerNames_;  // from the watch, not read yet
  std::unique_ptr<coord::EventFlag> siteWorkersChanged_;
  coord::Subscription siteWorkersWatch_;
  // Copies being made for our outputs: bounded, past kMaxReplications an output gets none.
  static constexpr size_t kMaxReplications = 16;
  size_t replicating_ = 0;
  // Outputs being copied by (job, stage): recorded when their copy ends (stageRuns counts them).
  std::map<std::pair<std::string, uint32_t>, int> stageCopies_;
  daemon::Counter* replications_ = nullptr;  // by role (source | replica) and result
};

// Loads the config, runs the worker until SIGTERM. The body of tellus-worker's main.
int run(const std::string& configPath);

}  // namespace tellus::worker
