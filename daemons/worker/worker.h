#pragma once
// tellus-worker: one per host ("VM"). Registers with its site's master, offers containers,
// runs each task in an executor process (tellus-executor), records finished tasks' output
// locations in ZooKeeper, serves its partitions and dataset files to other sites (with
// optional WAN emulation), and launches the job managers its master asks for.

#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>

#include "config/config.h"
#include "coord/coordinator.h"
#include "daemon/daemon.h"
#include "daemon/server.h"
#include "data/partition_store.h"
#include "jobstate/job_store.h"
#include "monitor/container_monitor.h"
#include "net/methods.h"
#include "proc/subprocess.h"
#include "tellus.pb.h"
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
  // Once a second: CPU and memory of every running executor tree, per container, sent to the
  // container's JM without waiting for it (Af's utilization input).
  boost::asio::awaitable<void> usageLoop();
  boost::asio::awaitable<void> sendUsage(std::string jmAddress, pb::ContainerUsageReport report);
  boost::asio::awaitable<void> reapLoop();
  boost::asio::awaitable<Result<pb::LaunchJmResponse>> launchJm(pb::LaunchJmRequest req, net::CallContext ctx);
  boost::asio::awaitable<Result<pb::RunTaskResponse>> runTask(pb::RunTaskRequest req, net::CallContext ctx);
  // After the executor exits: read its report and record the output location in ZooKeeper.
  boost::asio::awaitable<Result<pb::RunTaskResponse>> recordOutput(const pb::RunTaskRequest& req, std::string attemptId,
                                                                   proc::ExitStatus exit, std::filesystem::path dir);
  boost::asio::awaitable<Result<pb::FetchResponse>> fetch(pb::FetchRequest req, net::CallContext ctx);
  Result<pb::WriteDatasetResponse> writeDataset(const pb::WriteDatasetRequest& req);
  // Kills the job's JM and every executor of it here, by job id; reports what it killed.
  Result<pb::KillJobTasksResponse> killJobTasks(const pb::KillJobTasksRequest& req);
  // The reason a JM of `jobId` left in its exit file (bounded), for the master.
  std::string jmExitReason(const std::string& jobId) const;
  // Brings one input partition to a local file (or points at it when it is already here).
  boost::asio::awaitable<Result<std::string>> localInput(const pb::InputRef& ref, const std::filesystem::path& dir,
                                                         size_t index);
  // Copies one partition from another worker into `path`, verifying its checksum.
  boost::asio::awaitable<Status> fetchTo(const std::string& site, const std::string& workerId,
                                         const std::string& address, pb::FetchRequest req,
                                         std::filesystem::path path, bool verify);
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
  std::map<std::string, std::set<pid_t>> executors_;  // job -> executor processes running for it
  // Executors running here per (job, stage, task): a task's partial outputs are removed only
  // when none of its attempts is still writing.
  std::map<std::tuple<std::string, uint32_t, uint32_t>, int> taskRuns_;
  // Removes what a failed or killed executor of the task left: its uncommitted buckets in the
  // partition store and the inputs fetched into `dir` (its stderr stays, for the log).
  void removePartialOutputs(const pb::RunTaskRequest& req, const std::filesystem::path& dir);
  std::vector<pb::ContainerUsage> lastUsage_;    // for heartbeats
  std::map<std::string, double> inboundMbps_;    // measured fetch rate by source site (EWMA)
  uint64_t nextRun_ = 0;
  // Bytes of partitions served to and fetched from other workers, by site pair (from, to).
  daemon::Counter* bytesSent_ = nullptr;
  daemon::Counter* bytesReceived_ = nullptr;
};

// Loads the config, runs the worker until SIGTERM. The body of tellus-worker's main.
int run(const std::string& configPath);

}  // namespace tellus::worker
